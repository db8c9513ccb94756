"""A residual denoiser ``x - net(x)`` (DnCNN; ``torch_families/variant_dense.py``'s ``d_dncnn``) and ``x +
net(x)``: the ``Sub`` of two computed tensors imports as an ``Add`` of the last conv with its weights
negated (:mod:`hlsnn.deploy.rewrite.subneg`), and the residual op after the last engine layer, which reads
the model's float input, runs on the host after the network mode's one start
(:mod:`hlsnn.deploy.lower.netafter`; before, the integer formats ended in an ``IndexError``).

References: onnxruntime on the file torch wrote (the float import); the layer path (the network
mode must give its bits); numpy."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}


class _Residual(torch.nn.Module):
    """``x - net(x)`` (``sign`` -1), ``x + net(x)`` (+1) or ``net(x) - x`` (``flip``)."""

    def __init__(self, sign=-1, flip=False):
        super().__init__()
        torch.manual_seed(4)
        self.sign, self.flip = sign, flip
        self.net = torch.nn.Sequential(torch.nn.Conv2d(1, 6, 3, padding=1), torch.nn.ReLU(),
                                       torch.nn.Conv2d(6, 6, 3, padding=1, bias=False), torch.nn.BatchNorm2d(6),
                                       torch.nn.ReLU(), torch.nn.Conv2d(6, 1, 3, padding=1))

    def forward(self, x):
        if self.flip:
            return self.net(x) - x
        return x - self.net(x) if self.sign < 0 else x + self.net(x)


def _export(module, path, how):
    import warnings
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.rand(1, 1, 8, 8),), str(path), **EXPORTS[how])
    return path


def _onnxruntime(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


def _x(n, seed=0):
    return np.random.default_rng(seed).uniform(0, 1, (n, 1, 8, 8)).astype(np.float32)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_x_minus_a_conv_is_an_add_of_the_negated_conv(tmp_path, how):
    path = _export(_Residual(-1), tmp_path / f"sub_{how}.onnx", how)
    net = load_onnx(path)
    assert [la.op for la in net.layers if la.kind == "host"] == ["Add"]
    last = net.layers[-2]
    w = dict(_Residual(-1).net.named_parameters())["5.weight"].detach().numpy()
    np.testing.assert_array_equal(np.asarray(last.w).reshape(w.shape), -w)   # negated exactly
    x = _x(6)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_a_sub_of_the_input_from_a_conv_runs_on_the_host(tmp_path, how):
    """``net(x) - x`` is no Add of a negated conv (the input is not a conv's output): the Sub runs on
    the host (:mod:`hlsnn.deploy.run.hostarith`), after the convs, and equals onnxruntime's."""
    path = _export(_Residual(flip=True), tmp_path / f"flip_{how}.onnx", how)
    net = load_onnx(path)
    assert [la.op for la in net.layers if la.kind == "host"] == ["Sub"]
    x = _x(6)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-6)


def _deployment(path, fmt):
    from hlsnn.deploy.config import Assignment, FormatSpec
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.run.runner import Deployment
    from types import SimpleNamespace
    spec = {"fixed8": FormatSpec("fixed8", "fixed", "sparse8_pynq-z2"),
            "twohot": FormatSpec("twohot", "twohot", "shift8_pynq-z2")}[fmt]
    cfg = SimpleNamespace(formats={fmt: spec}, assignments={fmt: Assignment(fmt, fmt, {})})
    accs = open_accelerators(cfg, "emu", [fmt])
    return Deployment(load_onnx(path), cfg.assignments[fmt], cfg.formats, accs), accs


@pytest.mark.parametrize("sign", [-1, 1])
@pytest.mark.parametrize("fmt", ["fixed8", "twohot"])
def test_the_residual_after_the_last_conv_runs_after_the_network_mode(tmp_path, fmt, sign):
    """The network mode takes the model (the residual op on the host after it, reading the float
    input) and gives the layer path's bits; the output is near the float model's."""
    path = _export(_Residual(sign), tmp_path / "res.onnx", "ts17")
    dep, accs = _deployment(path, fmt)
    try:
        dep.calibrate(_x(32, 1))
        x = _x(12, 2)
        y = dep.run(x)
        assert dep.fast_network() is not None
        assert [j["op"] for j in dep.fast_network().net.host_after] == ["Add"]
        dep.fast = False
        np.testing.assert_array_equal(y, dep.run(x))
    finally:
        for a in accs.values():
            a.close()
    ref = _onnxruntime(path, x)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 0.05


def test_a_host_op_after_the_logits_reading_another_tensor_is_declined():
    """An Add after the last engine layer of its output and a tensor that is neither the model's
    input nor the chain's: the network mode declines it by name (before, its second operand was
    dropped)."""
    from hlsnn.deploy.lower.netafter import check
    from hlsnn.engines.network.program import _why
    program = {"output": {"engine_tensor": "c2"}, "input": {"name": "x"}}
    ok = [dict(name="a", kind="host", op="Add", inputs=["x", "c2"], output="y")]
    check(ok, program, _why)
    bad = [dict(name="a", kind="host", op="Add", inputs=["c1", "c2"], output="y")]
    with pytest.raises(InputError, match="reads c1, neither a tensor made after the kernel"):
        check(bad, program, _why)


def test_compiled_it_runs_in_one_start_with_the_layer_paths_values(tmp_path):
    import hlsnn
    from netfixtures import compile_onnx
    path = _export(_Residual(-1), tmp_path / "dn.onnx", "ts17")
    art = compile_onnx(tmp_path, "dn", path, "fixed8", check_samples=2, calibration_samples=16)
    from hlsnn.deploy import datasets
    x = datasets.load("digits", layout="nchw").x_test[:8]
    net = hlsnn.load(art, "emu", network=True)
    assert net.network is not None and [j["op"] for j in net.network.host_after] == ["Add"]
    np.testing.assert_array_equal(net(x), hlsnn.load(art, "emu", network=False)(x))


@pytest.mark.slow
def test_on_csim_the_kernel_starts_once_and_the_host_adds_the_input(tmp_path):
    """C-simulation of the fixed8 network kernel: one start, the emulator's layer-by-layer bits
    (the residual Add on the host after the start, on the float input)."""
    from netfixtures import check_kernel_run, compile_onnx
    from hlsnn.deploy import datasets
    path = _export(_Residual(-1), tmp_path / "dn.onnx", "ts17")
    art = compile_onnx(tmp_path, "dn", path, "fixed8", check_samples=2, calibration_samples=16)
    check_kernel_run(art, "fixed8", datasets.load("digits", layout="nchw").x_test[:3])
