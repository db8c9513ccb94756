"""CBAM's spatial attention (Woo et al. 2018) as PyTorch writes it:
``x * sigmoid(conv7x7(cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)))``, ONNX
``ReduceMean`` / ``ReduceMax`` over axis 1 (an attribute at opset 17, an input at 18), a
``Concat``, a ``Conv(2 -> 1, 7x7, pads 3)``, a ``Sigmoid`` and a ``Mul`` whose 1 x H x W gate
broadcasts over the channels. The layer path imports and deploys it (the reductions are
:mod:`hlsnn.deploy.hostextra`'s ``ReduceAxes``, float64 of exact values that the 7x7 conv
requantizes); the network path refuses it by name (no integer rule for a channel reduction yet)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.errors import HlsnnError  # noqa: E402
from netfixtures import FORMATS, compile_onnx  # noqa: E402


def spatial_net(path, c=8, opset=17, seed=23):
    """conv 3x3 (1 -> c, 8x8) + Relu = h; ``h * Sigmoid(conv7x7(cat(mean_c(h), max_c(h))))``;
    conv 3x3 stride 2 + Relu, GlobalAveragePool, Gemm to 10; weights drawn from ``seed``."""
    import onnx
    from onnx import helper, numpy_helper
    r = np.random.default_rng(seed)
    init = []

    def w(name, shape, scale):
        init.append(numpy_helper.from_array(r.normal(0, scale, shape).astype(np.float32), name))
        return name
    n = helper.make_node
    if opset >= 18:
        init.append(numpy_helper.from_array(np.array([1], np.int64), "ax"))
        red = [n(op, ["h", "ax"], [o], keepdims=1) for op, o in (("ReduceMean", "m"), ("ReduceMax", "x1"))]
    else:
        red = [n(op, ["h"], [o], axes=[1], keepdims=1) for op, o in (("ReduceMean", "m"), ("ReduceMax", "x1"))]
    nodes = [n("Conv", ["x", w("c1_w", (c, 1, 3, 3), 0.6), w("c1_b", (c,), 0.1)], ["c1"], pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["h"]), *red, n("Concat", ["m", "x1"], ["mx"], axis=1),
             n("Conv", ["mx", w("s_w", (1, 2, 7, 7), 0.15), w("s_b", (1,), 0.1)], ["sc"], pads=[3, 3, 3, 3]),
             n("Sigmoid", ["sc"], ["s"]), n("Mul", ["h", "s"], ["y"]),
             n("Conv", ["y", w("c2_w", (8, c, 3, 3), 0.3), w("c2_b", (8,), 0.1)], ["c2"], strides=[2, 2],
               pads=[1, 1, 1, 1]),
             n("Relu", ["c2"], ["r2"]), n("GlobalAveragePool", ["r2"], ["gp"]), n("Flatten", ["gp"], ["f"]),
             n("Gemm", ["f", w("d_w", (10, 8), 0.5), w("d_b", (10,), 0.1)], ["out"], transB=1)]
    g = helper.make_graph(nodes, "cbam_spatial",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 1, 8, 8])],
                          [helper.make_tensor_value_info("out", onnx.TensorProto.FLOAT, ["N", 10])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


def _ort(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0]


@pytest.mark.parametrize("c,opset", [(8, 17), (6, 18)])
def test_spatial_attention_imports_as_onnxruntime_computes_it(tmp_path, c, opset):
    """The imported float graph (channel mean and max over axis 1, the 1 x H x W gate broadcast
    over C) is onnxruntime's, with the axes as an attribute (opset 17) and as an input (18)."""
    from hlsnn.deploy.onnx_import import load_onnx
    from hlsnn.deploy.runner import float_forward
    path = spatial_net(tmp_path / "sp.onnx", c=c, opset=opset)
    net = load_onnx(path)
    red = [la for la in net.layers if la.op == "ReduceAxes"]
    assert sorted(la.attrs["fn"] for la in red) == ["ReduceMax", "ReduceMean"]
    assert all([int(v) for v in la.attrs["axes"]] == [1] for la in red)
    x = _x(16)
    ref = _ort(path, x)
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_spatial_attention_deploys_layer_by_layer_and_the_network_path_refuses_it(tmp_path, fmt):
    """Each format deploys it on emu near onnxruntime's outputs (the same arg max on most
    digits); ``network=True`` refuses it naming the layer and the channel reduction."""
    path = spatial_net(tmp_path / "sp.onnx")
    art = compile_onnx(tmp_path, "sp", path, fmt, formats={fmt: FORMATS[fmt]}, check_samples=2,
                       calibration_samples=32)
    x = _x(64)
    ref = _ort(path, x)
    got = hlsnn.load(art, "emu", network=False)(x)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 0.1 * np.abs(ref).max()
    assert (got.argmax(1) == ref.argmax(1)).mean() >= 0.9
    with pytest.raises(HlsnnError, match=r"layer \S+ \(ReduceAxes\): a Reduce(Mean|Max) over the channels .*"
                                         r"no integer rule on the network path yet.*network=False"):
        hlsnn.load(art, "emu", network=True)


def test_perf_counts_a_same_padded_7x7_conv_beyond_max_ksize_as_the_runners_blocks():
    """CBAM's ``Conv2d(2, 1, 7, padding=3)`` on sparse8_pynq-z2 (max_ksize 5): the runner's executor
    takes it as blocks of taps (:mod:`hlsnn.deploy.blocks`, one raw call each: 2 input channels and
    1 output fit one call), so the layer-by-layer cycle model counts one call per block (it used
    to refuse the layer: "kernel size k = 7 exceeds max_ksize = 5")."""
    from conftest import ROOT
    from hlsnn.config import load_config
    from hlsnn.deploy.config import Assignment, FormatSpec
    from hlsnn.deploy.graph import Layer, Network
    from hlsnn.deploy.runner import Deployment
    from hlsnn.measure.layers import layer_kernel_cycles
    from hlsnn.runtime import Accelerator
    cfg_path = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"
    rng = np.random.default_rng(3)
    layer = Layer("sp", "conv", ["x"], "y", w=rng.normal(0, 0.2, (1, 2, 7, 7)), b=rng.normal(0, 0.1, 1),
                  relu=False, pads=(3, 3, 3, 3), strides=(1, 1))
    net = Network(name="n", path="", input="x", input_shape=(None, 2, 4, 4), output="y", layers=[layer])
    acc = Accelerator(cfg_path, "emu")
    try:
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", "fixed", "a")}, {"a": acc})
        blocks = dep.execs["sp"].blocks
    finally:
        acc.close()
    assert blocks is not None and len(blocks) == 4             # 7 = 5 + 2 rows, and columns: 2 x 2 blocks
    kc = layer_kernel_cycles(layer, load_config(cfg_path), 1, in_hw=(4, 4))
    assert len(kc.per_call) == len(blocks)
