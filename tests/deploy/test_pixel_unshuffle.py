"""``nn.PixelUnshuffle`` (and ONNX's ``SpaceToDepth``) read only by convolutions: folded into them as
strided convs of its input (:mod:`hlsnn.deploy.rewrite.unshuffle`), so a U-Net that downsamples by pixel
unshuffle runs in one network start (before, its ``Reshape``/6-D ``Transpose``/``Reshape`` was a
per-sample move the network mode has no rule for: layer by layer).

References: onnxruntime on the files torch (or onnx.helper) wrote; the layer path's bits."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402

EXPORTS = {"ts17": {"dynamo": False, "opset_version": 17}, "dynamo": {}}
nn = torch.nn


class _Down(nn.Module):
    """conv, ReLU, PixelUnshuffle(r), ``conv`` (the one under test), ReLU, nearest x r, 1x1 conv."""

    def __init__(self, conv, r=2):
        super().__init__()
        torch.manual_seed(6)
        self.a, self.down, self.conv = nn.Conv2d(1, 3, 3, padding=1), nn.PixelUnshuffle(r), conv
        self.up, self.out = nn.Upsample(scale_factor=r * conv.stride[0]), nn.Conv2d(conv.out_channels, 1, 1)

    def forward(self, x):
        return self.out(self.up(torch.relu(self.conv(self.down(torch.relu(self.a(x)))))))


def _export(module, path, how, shape=(1, 8, 8)):
    import warnings
    module.eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.rand(1, *shape),), str(path), **EXPORTS[how])
    return path


def _onnxruntime(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[i:i + 1]})[0] for i in range(len(x))])


def _x(n, shape=(1, 8, 8), seed=0):
    return np.random.default_rng(seed).normal(size=(n,) + shape).astype(np.float32)


CONVS = {"k3": lambda: nn.Conv2d(12, 5, 3, padding=1), "k1": lambda: nn.Conv2d(12, 5, 1),
         "k3s2": lambda: nn.Conv2d(12, 5, 3, stride=2, padding=1)}


@pytest.mark.parametrize("how", ["ts17", "dynamo"])
@pytest.mark.parametrize("conv", sorted(CONVS))
def test_an_unshuffle_read_by_a_conv_is_a_strided_conv_of_its_input(tmp_path, how, conv):
    path = _export(_Down(CONVS[conv]()), tmp_path / f"d_{conv}_{how}.onnx", how)
    net = load_onnx(path)
    assert [la.op for la in net.layers if la.kind == "host"] == ["Upsample"]      # the ReLUs fused: no move
    folded = [la for la in net.layers if la.kind == "conv"][1]
    s, k = CONVS[conv]().stride[0], CONVS[conv]().kernel_size[0]
    assert folded.strides == (2 * s, 2 * s) and np.asarray(folded.w).shape[-2:] == (2 * k, 2 * k)
    x = _x(5)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-5)


def _space_to_depth(path, reader_too=False):
    """x (N, 2, 8, 8) -> SpaceToDepth(2) (DCR: channel (i r + j) C + c) -> Conv 8 -> 3, 3x3 pad 1; with
    ``reader_too`` the unshuffled tensor is added to itself too (a second reader)."""
    rng = np.random.default_rng(3)
    init = [numpy_helper.from_array(rng.normal(0, 0.4, (3, 8, 3, 3)).astype(np.float32), "w"),
            numpy_helper.from_array(rng.normal(0, 0.1, 3).astype(np.float32), "b")]
    nodes = [helper.make_node("SpaceToDepth", ["x"], ["u"], blocksize=2),
             helper.make_node("Conv", ["u", "w", "b"], ["y"], pads=[1, 1, 1, 1])]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3, 4, 4])]
    if reader_too:
        init.append(numpy_helper.from_array(rng.normal(0, 0.4, (3, 8, 1, 1)).astype(np.float32), "w2"))
        nodes[1].output[0] = "c"
        nodes += [helper.make_node("Relu", ["u"], ["ru"]), helper.make_node("Conv", ["ru", "w2"], ["c2"]),
                  helper.make_node("Add", ["c", "c2"], ["y"])]
    g = helper.make_graph(nodes, "s2d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, 8, 8])],
                          outs, init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.save(m, str(path))
    return path


def test_space_to_depth_in_its_own_channel_order(tmp_path):
    path = _space_to_depth(tmp_path / "s2d.onnx")
    net = load_onnx(path)
    assert [la.kind for la in net.layers] == ["conv"]
    x = _x(4, (2, 8, 8), seed=1)
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(path, x), rtol=1e-5, atol=1e-5)


def test_a_space_to_depth_with_another_reader_is_refused_by_name(tmp_path):
    from hlsnn.errors import UnsupportedModelError
    with pytest.raises(UnsupportedModelError, match=r"\(SpaceToDepth\): no engine or host rule for SpaceToDepth"):
        load_onnx(_space_to_depth(tmp_path / "s2d.onnx", reader_too=True))


def test_a_unet_that_downsamples_by_unshuffle_runs_in_one_start(tmp_path):
    import hlsnn
    from hlsnn.deploy import datasets
    from netfixtures import compile_onnx
    path = _export(_Down(CONVS["k3"]()), tmp_path / "down.onnx", "ts17")
    art = compile_onnx(tmp_path, "down", path, "fixed8", check_samples=2, calibration_samples=16)
    x = datasets.load("digits", layout="nchw").x_test[:8]
    net = hlsnn.load(art, "emu", network=True)
    assert net.network is not None
    np.testing.assert_array_equal(net(x), hlsnn.load(art, "emu", network=False)(x))
