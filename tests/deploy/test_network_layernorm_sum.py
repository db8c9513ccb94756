"""Rule 15s, a LayerNormalization of a residual sum (a post-norm block, x + f(x) -> LayerNorm;
hlsnn.engines.network.tokens.layernorm): the sum converted to codes at its calibrated radix (the
residual Add's rule 4 requantization, as an engine layer reading it converts it), then rule 15.
Two graphs built here: an MLP block (Gemm -> Relu = h; Gemm; Add h; LayerNorm; Gemm) and a map's
(conv -> Relu = h; 1x1 conv; Add h; Relu; Transpose; LayerNorm over 24 channels; Transpose back;
conv; Gemm). Network mode against the layer path (bits), onnxruntime's outputs, the program's
revision; slow: the kernels' C-simulation and the simulated board.

References: onnxruntime for the models (and main's float64 LayerNorm for the error it had); the
layer-by-layer emulator for the bits."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from netfixtures import f32_init as _init, save_net  # noqa: E402

FORMATS = {"fixed8": "{type: fixed, accel: sparse8_pynq-z2}", "twohot": "{type: twohot, accel: shift8_pynq-z2}"}


def mlp_post(path):
    """x (N, 64) -> Gemm 64x32 -> Relu = h; Gemm 32x32 = f; Add(h, f) -> LayerNormalization -> Gemm 32x10."""
    r = np.random.default_rng(21)
    inits = [_init("w1", r.normal(0, 0.2, (32, 64))), _init("b1", r.normal(0, .1, 32)),
             _init("w2", r.normal(0, 0.2, (32, 32))), _init("b2", r.normal(0, .1, 32)),
             _init("g", r.uniform(0.5, 1.5, 32)), _init("be", r.normal(0, 0.2, 32)),
             _init("w3", r.normal(0, 0.3, (10, 32))), _init("b3", r.normal(0, .1, 10))]
    n = helper.make_node
    nodes = [n("Gemm", ["x", "w1", "b1"], ["h0"], transB=1), n("Relu", ["h0"], ["h"]),
             n("Gemm", ["h", "w2", "b2"], ["f"], transB=1), n("Add", ["h", "f"], ["s"]),
             n("LayerNormalization", ["s", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             n("Gemm", ["n", "w3", "b3"], ["y"], transB=1)]
    return save_net(path, nodes, inits, "g", ["N", 64], ("N", 10))


def conv_post(path):
    """x (N, 1, 8, 8) -> Conv 3x3 (24) -> Relu = h; 1x1 conv = f; Relu(Add(h, f)) -> Transpose to
    NHWC -> LayerNormalization over the 24 channels -> Transpose back -> Conv 3x3 stride 2 (8) ->
    Relu -> Gemm."""
    r = np.random.default_rng(22)
    inits = [_init("w1", r.normal(0, 0.5, (24, 1, 3, 3))), _init("b1", r.normal(0, .1, 24)),
             _init("w2", r.normal(0, 0.3, (24, 24, 1, 1))), _init("b2", r.normal(0, .1, 24)),
             _init("g", r.uniform(0.5, 1.5, 24)), _init("be", r.normal(0, 0.2, 24)),
             _init("w3", r.normal(0, 0.2, (8, 24, 3, 3))), _init("b3", r.normal(0, .1, 8)),
             _init("w4", r.normal(0, 0.2, (10, 8 * 4 * 4))), _init("b4", r.normal(0, .1, 10))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w1", "b1"], ["c0"], pads=[1, 1, 1, 1]), n("Relu", ["c0"], ["h"]),
             n("Conv", ["h", "w2", "b2"], ["f"]), n("Add", ["h", "f"], ["s"]), n("Relu", ["s"], ["sr"]),
             n("Transpose", ["sr"], ["t"], perm=[0, 2, 3, 1]),
             n("LayerNormalization", ["t", "g", "be"], ["ln"], axis=-1, epsilon=1e-6),
             n("Transpose", ["ln"], ["u"], perm=[0, 3, 1, 2]),
             n("Conv", ["u", "w3", "b3"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             n("Relu", ["c2"], ["r2"]), n("Flatten", ["r2"], ["fl"]), n("Gemm", ["fl", "w4", "b4"], ["y"], transB=1)]
    return save_net(path, nodes, inits, "g", ["N", 1, 8, 8], ("N", 10))


GRAPHS = {"mlp_post": (mlp_post, "flat"), "conv_post": (conv_post, "nchw")}
OPS = {"mlp_post": ["conv", "conv", "add", "lnorm", "conv"], "conv_post": ["conv", "conv", "add", "lnorm", "conv", "conv"]}
#: onnxruntime against main's layer path (float64 LayerNorm of the exact sum; not one start), 360
#: test digits: the logits' relative error and the share of onnxruntime's class
BEFORE = {("mlp_post", "fixed8"): (0.0250, 0.9722), ("mlp_post", "twohot"): (0.0299, 0.9528),
          ("conv_post", "fixed8"): (0.0715, 0.9500), ("conv_post", "twohot"): (0.0675, 0.9361)}


def _x(layout, n=64):
    return np.asarray(datasets.load("digits", layout=layout).x_test[:n], np.float64)


def _compile(tmp_path, name, fmt):
    from netfixtures import compile_each
    make, layout = GRAPHS[name]
    return compile_each(tmp_path, name, make(tmp_path / f"{name}.onnx"), [fmt], formats=FORMATS, layout=layout)[fmt]


@pytest.fixture(scope="module")
def mlp_fixed8(tmp_path_factory):
    return _compile(tmp_path_factory.mktemp("lnsum"), "mlp_post", "fixed8")


def _check(path, name, fmt, n=64):
    """The network mode's ops and the layer path's bits on ``n`` test digits; the net."""
    x = _x(GRAPHS[name][1], n)
    net = hlsnn.load(path, "emu", network=True)
    assert [op.kind for op in net.network.ops] == OPS[name]
    a, b = net.logits(x), hlsnn.load(path, "emu", network=False).logits(x)
    assert np.asarray(a).view(np.uint64).tolist() == np.asarray(b).view(np.uint64).tolist()
    return net


def _accuracy(path, name, fmt):
    """Against onnxruntime on 360 test digits: at most 1.5 points more relative error than main's
    float64 LayerNorm of the exact sum had, and at most 2 points fewer images of its class."""
    ort = pytest.importorskip("onnxruntime")
    x = _x(GRAPHS[name][1], 360)
    ref = ort.InferenceSession(str(path).replace(f"-{fmt}.hlsnn", ".onnx")).run(None, {"x": x.astype(np.float32)})[0]
    y = hlsnn.load(path, "emu", network=True).logits(x)
    err, same = np.linalg.norm(y - ref) / np.linalg.norm(ref), (y.argmax(1) == ref.argmax(1)).mean()
    rel, cls = BEFORE[name, fmt]
    assert err < rel + 0.015 and same >= cls - 0.02
    return err, same


def test_post_norm_mlp_is_one_start_with_the_layer_paths_bits(mlp_fixed8):
    """Before: 'a LayerNormalization of an integer tensor computed on the fabric (not of a pending
    Add ...)' (layer by layer); now the Add's add op (its sum converted to codes at the compiled
    radix lnorm_in) then the lnorm op, the layer path's bits, onnxruntime's outputs as closely as
    main's float64 norm."""
    from hlsnn.network import artifact
    net = _check(mlp_fixed8, "mlp_post", "fixed8")
    prog = artifact.read(mlp_fixed8)[0]
    (j,) = [j for j in prog["layers"] if j["op"] == "LayerNormalization"]
    (add,) = [o for o in net.network.ops if o.kind == "add"]
    (lnorm,) = [o for o in net.network.ops if o.kind == "lnorm"]
    assert lnorm.ins == [add.out] and not add.f["gap"] and not add.f.get("out_bits")   # the sum's codes, b bits
    assert isinstance(j["lnorm_in"]["f_in"], int) and prog["revision"] >= 6
    _accuracy(mlp_fixed8, "mlp_post", "fixed8")


def test_an_older_program_keeps_float64_for_the_sum(mlp_fixed8):
    """A program of revision 5 ran a LayerNormalization of a residual sum in float64 (its
    self-check pairs): its network mode refuses it by name; its layer path still loads."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    prog, arrays = artifact.read(mlp_fixed8)[:2]
    with pytest.raises(InputError, match="revision 5 ran this LayerNormalization of a residual sum in float64"):
        netmode.lower(dict(prog, revision=5), arrays)
    stripped = dict(prog, layers=[{k: v for k, v in j.items() if k != "lnorm_in"} for j in prog["layers"]])
    with pytest.raises(InputError, match="of a residual sum its layer path ran in float64"):
        netmode.lower(stripped, arrays)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_post_norm_map_kernel_csim_and_board(tmp_path, fmt):
    """The map's block (a Relu after the Add, Transposes around the norm, 24 channels: two
    blocks of 16 banks a position) in both formats: one start on emu with the layer path's bits,
    onnxruntime's outputs as closely as main's float64 norm; the sparse_cluster (fixed8) and
    shift_mac (two-hot) kernels' C-simulation (strict) and the simulated board give the layer
    path's bits, each loop's iterations the perf model's."""
    from netfixtures import check_kernel_run
    p = _compile(tmp_path, "conv_post", fmt)
    _check(p, "conv_post", fmt)
    _accuracy(p, "conv_post", fmt)
    k = check_kernel_run(p, fmt, _x("nchw", 12), board=True)
    assert k._kernel.counters["NetLnSum"][0] == 12 * 2 * 64
