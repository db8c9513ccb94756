"""Convolutions as PyTorch exports them (issue 16): any stride, asymmetric pads, dilation,
rectangular kernels, grouped and depthwise, on every engine (hlsnn/engines/convgeom.py).

The reference is onnx's ReferenceEvaluator on the same single-Conv model, never our own
float code alone; the engines' deployments are held to it within their formats' error, and
the sparse engine's stride-1 rewrite is held to it exactly on integers."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from conftest import ROOT  # noqa: E402
from hlsnn.engines import convgeom as conv  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402

# (name, C, Z, kernel (kh, kw), attributes, input H x W)
GEOMETRIES = [
    ("stride2", 3, 4, (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), (9, 9)),
    ("asym_pads", 2, 3, (3, 3), dict(pads=[0, 1, 2, 0]), (7, 6)),
    ("stride2_asym", 2, 4, (3, 3), dict(strides=[2, 2], pads=[0, 0, 1, 1]), (8, 8)),   # torch's 'same' for stride 2
    ("dilated", 2, 3, (3, 3), dict(dilations=[2, 2], pads=[2, 2, 2, 2]), (8, 8)),
    ("rect_1x3", 2, 3, (1, 3), dict(pads=[0, 1, 0, 1]), (5, 7)),
    ("rect_stride", 3, 2, (3, 1), dict(strides=[2, 1]), (9, 5)),
    ("grouped", 4, 6, (3, 3), dict(group=2, pads=[1, 1, 1, 1]), (6, 6)),
    ("depthwise", 4, 4, (3, 3), dict(group=4, strides=[2, 2], pads=[1, 1, 1, 1]), (8, 8)),
    ("depthwise_x2", 3, 6, (3, 3), dict(group=3, pads=[1, 1, 1, 1]), (6, 6)),
    ("stride3_5x5", 2, 2, (5, 5), dict(strides=[3, 3], pads=[2, 1, 0, 2]), (10, 11)),
]


def _model(tmp_path, name, c, z, k, attrs, hw, seed=0, relu=False):
    rng = np.random.default_rng(seed)
    g = attrs.get("group", 1)
    w = (rng.normal(size=(z, c // g) + k) * 0.4).astype(np.float32)
    b = (rng.normal(size=z) * 0.1).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c" if relu else "y"], name=name, kernel_shape=list(k),
                              **attrs)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"], name="relu"))
    gr = helper.make_graph(nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, *hw])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", z, "OH", "OW"])],
                           initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    p = tmp_path / f"{name}.onnx"
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 15)]), str(p))
    return p


@pytest.mark.parametrize("name, c, z, k, attrs, hw", GEOMETRIES, ids=[g[0] for g in GEOMETRIES])
def test_imported_conv_equals_the_reference(tmp_path, name, c, z, k, attrs, hw):
    path = _model(tmp_path, name, c, z, k, attrs, hw)
    net = load_onnx(path)                                  # no UnsupportedModelError
    layer = net.layer(name)
    assert layer.kind == "conv"
    x = np.random.default_rng(1).normal(size=(2, c, *hw)).astype(np.float32)
    want = ReferenceEvaluator(str(path)).run(None, {"x": x})[0]
    assert want.shape[2:] == layer.geom.out_hw(*hw)
    np.testing.assert_allclose(float_forward(net, x), want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name, c, z, k, attrs, hw", GEOMETRIES, ids=[g[0] for g in GEOMETRIES])
def test_stride1_rewrite_is_exact(tmp_path, name, c, z, k, attrs, hw):
    """The sparse engine's form (conv.as_stride1): a stride-1 square kernel with zero taps,
    host padding, then every sh-th row and sw-th column, on small integers (exact in float32
    and float64), against the reference evaluator."""
    path = _model(tmp_path, name, c, z, k, attrs, hw)
    layer = load_onnx(path).layer(name)
    rng = np.random.default_rng(2)
    xi = rng.integers(-8, 9, size=(2, c, *hw)).astype(np.float64)
    wi = rng.integers(-8, 9, size=layer.w.shape).astype(np.float64)
    model = onnx.load(str(path))
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(wi.astype(np.float32), "w"))
    model.graph.initializer[1].CopyFrom(numpy_helper.from_array(np.zeros(z, np.float32), "b"))
    want = ReferenceEvaluator(model).run(None, {"x": xi.astype(np.float32)})[0]
    w1, (t, l, bo, r), k1 = conv.as_stride1(wi, layer.geom)
    assert w1.shape == (z, c, k1, k1)
    xp = np.pad(xi, ((0, 0), (0, 0), (t, bo), (l, r)))
    y1 = conv.conv_float(xp, w1, np.zeros(z), conv.ConvGeom(k1, k1))   # stride 1, valid, dense weight
    np.testing.assert_array_equal(conv.stride1_output(y1, layer.geom, *hw), want)


FORMATS = [("bfp", "bfp16_pynq-z2", 0.02), ("twohot", "shift8_zcu104", 0.15), ("fixed", "sparse20_zcu104", 0.08)]


def _deploy(net, fmt_type, accel, x, target="emu"):
    from hlsnn.deploy.config import Assignment, FormatSpec
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.runtime import Accelerator
    acc = Accelerator(ROOT / "configs" / "accel" / f"{accel}.yaml", target)
    try:
        fmt = FormatSpec(name="f", type=fmt_type, accel="a")
        dep = Deployment(net, Assignment("a", "f", {}), {"f": fmt}, {"a": acc})
        dep.calibrate(x)
        return dep.run(x), dep
    finally:
        acc.close()


@pytest.mark.parametrize("fmt_type, accel, tol", FORMATS, ids=[f[1] for f in FORMATS])
@pytest.mark.parametrize("name", ["stride2_asym", "depthwise", "dilated", "rect_stride"])
def test_every_engine_deploys_the_conv(tmp_path, fmt_type, accel, tol, name):
    """Each engine runs the layer (GEMM engines on host im2col, one GEMM per pack of groups,
    the sparse engine as its stride-1 rewrite) within its format's error of the reference:
    the largest error at most ``tol`` of the outputs' range."""
    _, c, z, k, attrs, hw = next(g for g in GEOMETRIES if g[0] == name)
    path = _model(tmp_path, name, c, z, k, attrs, hw, relu=True)
    net = load_onnx(path)
    x = np.random.default_rng(3).uniform(0, 1, size=(4, c, *hw))
    want = ReferenceEvaluator(str(path)).run(None, {"x": x.astype(np.float32)})[0]
    got, _ = _deploy(net, fmt_type, accel, x)
    assert got.shape == want.shape
    assert np.abs(got - want).max() <= tol * np.ptp(want), (np.abs(got - want).max(), np.ptp(want))


@pytest.mark.csim
@pytest.mark.parametrize("fmt_type, accel", [("fixed", "sparse8_pynq-z2"), ("twohot", "shift8_pynq-z2")])
def test_strided_depthwise_conv_is_bit_exact_on_csim(tmp_path, fmt_type, accel):
    _, c, z, k, attrs, hw = next(g for g in GEOMETRIES if g[0] == "depthwise")
    net = load_onnx(_model(tmp_path, "depthwise", c, z, k, attrs, hw, relu=True))
    x = np.random.default_rng(4).uniform(0, 1, size=(2, c, *hw))
    emu, _ = _deploy(net, fmt_type, accel, x, "emu")
    sim, _ = _deploy(net, fmt_type, accel, x, "csim")
    np.testing.assert_array_equal(emu, sim)


def test_report_counts_the_stride1_rewrite_on_sparse(tmp_path):
    """The modelled cycles of a stride-2 layer on the sparse engine are those of the stride-1
    convolution it runs: about sh * sw = 4 times the outputs it keeps."""
    from hlsnn import load_config
    from hlsnn.measure.layers import layer_cycles
    _, c, z, k, attrs, hw = next(g for g in GEOMETRIES if g[0] == "stride2")
    layer = load_onnx(_model(tmp_path, "stride2", c, z, k, attrs, hw)).layer("stride2")
    cfg = load_config(ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml")
    r = layer_cycles(layer, cfg, 1, in_hw=hw)
    assert r["m"] == 5 * 5                                 # the layer's outputs per image
    # the same weights as a stride-1 "same" layer: 9 x 9 outputs, the work the kernel does
    from hlsnn.deploy.importer.graph import Layer
    same = Layer("s", "conv", ["x"], "y", w=layer.w, b=layer.b, pad=1)
    r1 = layer_cycles(same, cfg, 1, in_hw=hw)
    assert 0.8 < r["cycles"] / r1["cycles"] < 1.3


# (op, kernel, attributes, input H x W)
POOLS = [
    ("MaxPool", (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), (8, 8)),          # ResNet's stem pool
    ("MaxPool", (2, 2), dict(strides=[2, 2], ceil_mode=1), (7, 7)),
    ("MaxPool", (3, 3), dict(strides=[2, 2], pads=[0, 1, 1, 0], ceil_mode=1), (8, 9)),
    ("AveragePool", (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1]), (8, 8)),
    ("AveragePool", (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1), (8, 8)),
    ("AveragePool", (2, 2), dict(strides=[2, 2], ceil_mode=1), (7, 5)),
    ("AveragePool", (3, 3), dict(strides=[2, 2], pads=[1, 1, 1, 1], ceil_mode=1, count_include_pad=1), (8, 8)),
    ("AveragePool", (3, 2), dict(strides=[3, 2], pads=[0, 1, 2, 0], ceil_mode=1), (10, 7)),
]


@pytest.mark.parametrize("op, k, attrs, hw", POOLS, ids=[f"{p[0]}-{i}" for i, p in enumerate(POOLS)])
def test_padded_and_ceil_mode_pooling_equals_the_reference(tmp_path, op, k, attrs, hw):
    node = helper.make_node(op, ["x"], ["y"], name="pool", kernel_shape=list(k), **attrs)
    gr = helper.make_graph([node], "pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, *hw])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, "OH", "OW"])])
    path = tmp_path / "pool.onnx"
    onnx.save(helper.make_model(gr, opset_imports=[helper.make_opsetid("", 19)]), str(path))
    net = load_onnx(path)
    assert net.layer("pool").kind == "host"
    x = np.random.default_rng(6).normal(size=(3, 2, *hw)).astype(np.float32)
    want = ReferenceEvaluator(str(path)).run(None, {"x": x})[0]
    got = float_forward(net, x)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_patch_nonzeros_equals_counting_the_im2col_rows():
    """convgeom.patch_nonzeros (the deploy runner's input density of a shift_mac convolution,
    counted on the map) equals np.count_nonzero of the rows im2col builds: strides, pads on
    any side, dilation, rectangular kernels, groups, a kernel as large as the padded map."""
    from hlsnn.engines import convgeom as cg
    rng = np.random.default_rng(31)
    geoms = [cg.ConvGeom(3, 3, 1, 1, (1, 1, 1, 1)), cg.ConvGeom(3, 3, 2, 2, (1, 1, 1, 1)), cg.ConvGeom(1, 1, 2, 2),
             cg.ConvGeom(2, 3, 1, 2, (0, 1, 2, 0), 2, 1), cg.ConvGeom(3, 2, 3, 1, (2, 0, 0, 3), 1, 2),
             cg.ConvGeom(5, 5, 1, 1), cg.ConvGeom(3, 3, 1, 1, (1, 1, 1, 1), group=2), cg.ConvGeom(9, 8, 1, 1)]
    for g in geoms:
        for density in (0.0, 0.3, 1.0):
            x = rng.integers(-5, 6, (3, 4, 9, 8)) * (rng.random((3, 4, 9, 8)) < density)
            assert cg.patch_nonzeros(x, g) == np.count_nonzero(cg.im2col(x, g)[0]), (g, density)
