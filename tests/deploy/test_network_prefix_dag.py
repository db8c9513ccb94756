"""Host ops on the float input before the network kernel as a small DAG (:mod:`hlsnn.deploy.lower.netprefix`):
a per-sample standardization ``(x - x.mean()) / (x.std() + eps)`` reads ``x`` three times; the
prefix took a chain only (each float tensor's state was dropped after the next op), so such a model
ran layer by layer. A network op reading a float tensor of the prefix other than the kernel's input
is still refused by name (the kernel has one input).

References: the layer path (the network mode must give its bits), onnxruntime on the file torch
wrote."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")


class _Std(torch.nn.Module):
    """``std``: standardize each image, Flatten, Linear 64 -> 16, ReLU, Linear 10; ``two``: one
    Linear of the centred image plus one of ``x`` itself (two float tensors into engine layers)."""

    def __init__(self, how):
        super().__init__()
        torch.manual_seed(17)
        self.how = how
        self.fc, self.fc_x, self.out = torch.nn.Linear(64, 16), torch.nn.Linear(64, 16), torch.nn.Linear(16, 10)

    def forward(self, x):
        m = x.mean(dim=(1, 2, 3), keepdim=True)
        if self.how == "two":
            return self.out(torch.relu(self.fc((x - m).flatten(1)) + self.fc_x(x.flatten(1))))
        z = (x - m) / (x.std(dim=(1, 2, 3), keepdim=True) + 1e-3)
        return self.out(torch.relu(self.fc(z.flatten(1))))


def _compiled(tmp_path, how):
    from netfixtures import FORMATS, compile_onnx, torch_export
    path = torch_export(_Std(how), (1, 8, 8), tmp_path / f"{how}.onnx", "ts17")
    return path, compile_onnx(tmp_path, how, path, "fixed8", formats={"fixed8": FORMATS["fixed8"]},
                              check_samples=2, calibration_samples=16)


def _x(n):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:n]


def test_a_standardization_on_the_input_runs_before_one_start(tmp_path):
    import hlsnn
    path, art = _compiled(tmp_path, "std")
    x = _x(24)
    net = hlsnn.load(art, "emu")
    assert net.network is not None                     # before: "input x is not computed on the fabric"
    assert sum(e["op"] == "Sub" for e in net.network.host_before) == 2
    y = net(x)
    np.testing.assert_array_equal(y, hlsnn.load(art, "emu", network=False)(x))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x.astype(np.float32)})[0]
    assert np.abs(y - ref).max() < 0.1 * np.abs(ref).max()


def test_an_engine_layer_reading_another_float_tensor_is_refused(tmp_path):
    import hlsnn
    from hlsnn.deploy.lower.program import lower
    from hlsnn.errors import InputError
    from hlsnn.network import artifact
    _, art = _compiled(tmp_path, "two")
    with pytest.raises(InputError, match="runs layer by layer"):
        lower(*artifact.read(art)[:2])
    x = _x(8)
    net = hlsnn.load(art, "emu")
    assert net.network is None
    np.testing.assert_array_equal(net(x), hlsnn.load(art, "emu", network=False)(x))


def test_attach_refuses_a_network_op_reading_a_prefix_tensor_other_than_the_kernel_input():
    """The case above stops earlier where the two readers' radix points differ (rule 1); at one
    radix, :func:`netprefix.attach` is what refuses it."""
    from types import SimpleNamespace
    from hlsnn.deploy.lower.netprefix import attach
    from hlsnn.engines.network.program import Op
    from hlsnn.errors import InputError
    pre = [dict(name="sub", op="Sub", ins=[("x", (64,)), ("m", (1,))], out="z", stub=None)]
    w = SimpleNamespace(prefix=pre, aliases={"xf": "x"}, kernel_in="z", kernel_in_shape=(64,))
    program = {"input": {"name": "x", "shape": [64]}}

    def net(ins):
        return SimpleNamespace(ops=[Op("conv", "fc", ["z"], "a"), Op("conv", "fc_x", ins, "b")], engine="sparse_cluster",
                               input=dict(name="x", shape=(64,)))
    with pytest.raises(InputError, match="fc_x .* reads xf, a float tensor of the host ops before the kernel"):
        attach(net(["xf"]), w, program)
    assert attach(net(["a"]), w, program).input["name"] == "z"


class _CentredResidual(torch.nn.Module):
    """``x + net(x - mean(x))``: a prefix before the kernel and, after it, an Add of the model's
    input (:mod:`hlsnn.deploy.lower.netafter`), which must read the model's input, not the kernel's."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        self.net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                                       torch.nn.Conv2d(4, 1, 3, padding=1))

    def forward(self, x):
        return x + self.net(x - x.mean(dim=(1, 2, 3), keepdim=True))


def test_a_prefix_and_an_add_of_the_input_after_the_kernel(tmp_path):
    """Before: the host Add after the kernel looked the model's input up under the kernel's input
    name (the prefix's output) and failed with an IndexError (an InternalError of the loader)."""
    import hlsnn
    from netfixtures import FORMATS, compile_onnx, torch_export
    path = torch_export(_CentredResidual(), (1, 8, 8), tmp_path / "cr.onnx", "ts17")
    art = compile_onnx(tmp_path, "cr", path, "fixed8", formats={"fixed8": FORMATS["fixed8"]},
                       check_samples=2, calibration_samples=16)
    x = _x(6)
    net = hlsnn.load(art, "emu")
    assert net.network is not None and net.network.host_before
    assert [j["op"] for j in net.network.host_after] == ["Add"]
    y = net(x)
    np.testing.assert_array_equal(y, hlsnn.load(art, "emu", network=False)(x))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"input": x.astype(np.float32)})[0]
    assert np.abs(y - ref).max() < 0.1 * np.abs(ref).max()
