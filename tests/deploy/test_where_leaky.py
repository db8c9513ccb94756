"""``torch.where(h > 0, h, a * h)`` (a leaky ReLU by hand) as one ``LeakyRelu`` (:mod:`hlsnn.deploy.rewrite.wheregate`):
before, its ``Compare`` had no rule in the network mode and the model ran layer by layer (2 kernel
starts for a two-layer MLP).

References: onnxruntime on the file torch wrote (the float import), the layer path (the network mode
must give its bits), numpy's leaky ReLU on the float32 constant."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class _Where(torch.nn.Module):
    """Flatten, Linear 64 -> 16, the hand-written leaky ReLU (``gt``: ``where(h > 0, h, 0.1 h)``;
    ``lt``: ``where(h < 0, 0.2 h, h)``), Linear 10."""

    def __init__(self, how):
        super().__init__()
        torch.manual_seed(13)
        self.how = how
        self.fc, self.out = torch.nn.Linear(64, 16), torch.nn.Linear(16, 10)

    def forward(self, x):
        h = self.fc(x.flatten(1))
        h = torch.where(h > 0, h, 0.1 * h) if self.how == "gt" else torch.where(h < 0, 0.2 * h, h)
        return self.out(h)


def _x(n):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("how, alpha", [("gt", 0.1), ("lt", 0.2)])
def test_a_hand_written_leaky_relu_imports_as_one_and_runs_in_one_start(tmp_path, how, alpha):
    import hlsnn
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    from netfixtures import FORMATS, compile_onnx, torch_export
    path = torch_export(_Where(how), (1, 8, 8), tmp_path / f"{how}.onnx", "ts17")
    net = load_onnx(path)
    host = [(la.op, la.attrs) for la in net.layers if la.kind == "host" and la.op != "Flatten"]
    assert host == [("LeakyRelu", {"alpha": float(np.float32(alpha))})]
    x = _x(24)
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x.astype(np.float32)})[0]
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-5, atol=1e-5)
    art = compile_onnx(tmp_path, how, path, "fixed8", formats={"fixed8": FORMATS["fixed8"]},
                       check_samples=2, calibration_samples=16)
    run = hlsnn.load(art, "emu")
    assert run.network is not None                            # before: "no integer rule" on the Compare
    np.testing.assert_array_equal(run(x), hlsnn.load(art, "emu", network=False)(x))


def test_a_where_of_another_tensor_is_left_alone():
    from hlsnn.deploy.importer.graph import Layer
    from hlsnn.deploy.rewrite.wheregate import fold
    sel = dict(fn="Where", in_shapes=[(1, 4)] * 3, out_shape=(1, 4), cond=0, operands=[("x", 1), ("x", 2)],
               neginf=[np.zeros((), bool)] * 2)
    cmp_ = Layer("c", "host", ["h"], "m", op="Compare", attrs={"fn": "Greater", "c": 0.0})
    other = Layer("s", "host", ["g"], "s", op="Scale", attrs={"c": np.array(0.1), "divide": False})
    same = Layer("s", "host", ["h"], "s", op="Scale", attrs={"c": np.array(0.1), "divide": False})
    w = Layer("w", "host", ["m", "h", "s"], "y", op="SwCompute", attrs=sel)
    assert [la.op for la in fold([cmp_, other, w], "y")] == ["Compare", "Scale", "SwCompute"]
    assert [la.op for la in fold([cmp_, same, w], "y")] == ["LeakyRelu"]
    shifted = Layer("c", "host", ["h"], "m", op="Compare", attrs={"fn": "Greater", "c": 0.5})
    assert [la.op for la in fold([shifted, same, w], "y")] == ["Compare", "Scale", "SwCompute"]
