"""Nearest upsampling written by hand, ``x.repeat_interleave(2, dim=2).repeat_interleave(2, dim=3)``
(``Unsqueeze``, ``Tile`` (TorchScript) or ``Expand`` (dynamo), ``Reshape``): rewritten as the
nearest ``Resize`` (:mod:`hlsnn.deploy.rewrite.repeatup`), so the U-Net runs in one network start (before,
``Tile`` / ``Expand`` had no rule: the model did not import).

References: onnxruntime on the files torch wrote; the layer path's bits."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import UnsupportedModelError  # noqa: E402

EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}


class _Repeat(torch.nn.Module):
    """conv, ReLU, MaxPool 2, conv, ReLU, ``repeat_interleave`` by ``fh`` on H and ``fw`` on W
    (``dims``: the dims repeated), conv."""

    def __init__(self, fh=2, fw=2, dims=(2, 3)):
        super().__init__()
        torch.manual_seed(8)
        self.f, self.dims = (fh, fw), dims
        self.a, self.b = torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.Conv2d(4, 6, 3, padding=1)
        self.c = torch.nn.Conv2d(6, 1, 3, padding=1)

    def forward(self, x):
        h = torch.relu(self.b(torch.nn.functional.max_pool2d(torch.relu(self.a(x)), 2)))
        for f, d in zip(self.f, self.dims):
            h = h.repeat_interleave(f, dim=d)
        return self.c(h) if self.dims == (2, 3) else h


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


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("fh, fw", [(2, 2), (3, 2)])
def test_repeat_interleave_is_the_nearest_upsample(tmp_path, how, fh, fw):
    module = _Repeat(fh, fw)
    path = _export(module, tmp_path / f"rep_{how}.onnx", how)
    net = load_onnx(path)
    ups = [la.attrs["factors"] for la in net.layers if la.op == "Upsample"]
    assert ups == [(fh, 1), (1, fw)]
    assert {la.op for la in net.layers if la.kind == "host"} <= {"Upsample", "MaxPool"}
    x = np.random.default_rng(4).normal(size=(5, 1, 8, 8)).astype(np.float32)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
def test_a_repeat_of_the_channels_is_refused_by_name(tmp_path, how):
    path = _export(_Repeat(2, 2, dims=(1, 3)), tmp_path / f"repc_{how}.onnx", how)
    with pytest.raises(UnsupportedModelError, match=r"only integer factors on H and W .*\(1 on N and C\)"):
        load_onnx(path)


def test_the_unet_runs_in_one_start(tmp_path):
    import hlsnn
    from hlsnn.deploy import datasets
    from netfixtures import compile_onnx
    path = _export(_Repeat(), tmp_path / "rep.onnx", "ts17")
    art = compile_onnx(tmp_path, "rep", path, "fixed8", check_samples=2, calibration_samples=16)
    x = datasets.load("digits", layout="nchw").x_test[:8]
    net = hlsnn.load(art, "emu", network=True)
    assert net.network is not None
    np.testing.assert_array_equal(net(x), hlsnn.load(art, "emu", network=False)(x))
