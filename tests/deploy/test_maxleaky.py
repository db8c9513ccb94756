"""``torch.maximum(x, c * x)`` imported as ``LeakyRelu(alpha=c)`` (issue 52, :mod:`hlsnn.deploy.rewrite.maxleaky`).

``max(x, c x)`` equals the leaky ReLU of slope ``c`` for one number ``0 <= c <= 1``; other ``c``
(outside ``[0, 1]``, or more than one number) stays a ``Max`` of two computed tensors, refused by
name. References: onnxruntime on the same file (hand-built, and as torch's two exporters wrote it).
"""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import UnsupportedModelError  # noqa: E402
from netfixtures import onnxruntime_rows  # noqa: E402


def _model(path, c, max_order=0, mul_order=0, extra_reader=False):
    """A 3x3 conv (2 -> 3 channels), then ``Max(y, Mul(y, c))`` in the given operand orders
    (``extra_reader``: the ``Mul``'s output also added to the ``Max``'s, so the ``Mul`` stays)."""
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(rng.normal(size=(3, 2, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(size=3).astype(np.float32), "b"),
             numpy_helper.from_array(np.asarray(c, np.float32), "c")]
    mul_in = ["y", "c"] if mul_order == 0 else ["c", "y"]
    max_in = ["y", "m"] if max_order == 0 else ["m", "y"]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1]),
             helper.make_node("Mul", mul_in, ["m"]),
             helper.make_node("Max", max_in, ["z" if extra_reader else "out"])]
    if extra_reader:
        nodes.append(helper.make_node("Add", ["z", "m"], ["out"]))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 2, 5, 5])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 3, 5, 5])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


def _check(path, n_leaky=1):
    net = load_onnx(path)
    ops = [la.op for la in net.layers]
    assert "Max" not in ops and (n_leaky is None or ops.count("LeakyRelu") == n_leaky)
    x = np.random.default_rng(2).normal(size=(4, 2, 5, 5)).astype(np.float32)
    y, ref = float_forward(net, x), onnxruntime_rows(path, x)
    assert (ref > 0).any() and (ref <= 0).any()       # both branches of the max
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    return net


@pytest.mark.parametrize("c", [0.2, 0.0, 1.0])
@pytest.mark.parametrize("max_order,mul_order", [(0, 0), (0, 1), (1, 0), (1, 1)])
def test_max_of_x_and_c_times_x_is_a_leaky_relu(tmp_path, c, max_order, mul_order):
    net = _check(_model(tmp_path / "m.onnx", c, max_order, mul_order))
    leaky = next(la for la in net.layers if la.op == "LeakyRelu")
    assert leaky.attrs["alpha"] == np.float32(c)


def test_a_scalar_of_rank_one_and_a_mul_read_elsewhere(tmp_path):
    """``c`` of shape (1,) is one number too; a ``Mul`` with another reader stays for it (the host
    fuses the elementwise ops into one ``UnaryChain``)."""
    _check(_model(tmp_path / "m.onnx", [0.3], extra_reader=True), n_leaky=None)


@pytest.mark.parametrize("c,words", [(1.5, r"c = 1\.5: a leaky ReLU \(LeakyRelu\(alpha=c\)\) only for 0 <= c <= 1"),
                                     (-0.25, r"c = -0\.25: a leaky ReLU"),
                                     (np.full((3, 1, 1), 0.2), r"a constant c of shape \(3, 1, 1\)"),
                                     (np.full((1, 1, 1, 1), 0.2), r"a constant c of shape \(1, 1, 1, 1\)")])
def test_other_constants_are_refused_by_name(tmp_path, c, words):
    with pytest.raises(UnsupportedModelError, match=words):
        load_onnx(_model(tmp_path / "m.onnx", c))


@pytest.mark.slow
@pytest.mark.parametrize("order", [0, 1, 2])
def test_torch_s_maximum_as_both_exporters_write_it(tmp_path, order):
    """``torch.maximum(y, 0.2 * y)``, ``torch.maximum(y * 0.2, y)``, ``torch.max(y, y * 0.3)``
    after a conv, exported by TorchScript (opset 17) and dynamo."""
    torch = pytest.importorskip("torch")
    import warnings

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(4)
            self.c = torch.nn.Conv2d(2, 3, 3, padding=1)

        def forward(self, x):
            y = self.c(x)
            return (torch.maximum(y, 0.2 * y), torch.maximum(y * 0.2, y), torch.max(y, y * 0.3))[order]

    for kw in (dict(dynamo=False, opset_version=17, dynamic_axes={"x": {0: "n"}}), dict(dynamo=True)):
        path = tmp_path / f"m{order}_{kw['dynamo']}.onnx"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(M().eval(), (torch.randn(1, 2, 5, 5),), str(path), input_names=["x"], **kw)
        assert "Max" in {n.op_type for n in onnx.load(str(path)).graph.node}
        _check(path)
