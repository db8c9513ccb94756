"""Bilinear upsampling by 4 (and 8) in the network mode (issue 52: ``nn.Upsample(scale_factor=4,
mode='bilinear')`` between engine layers ran layer by layer, "weights neither rule 12's nor rule
14's"; hlsnn.engines.network.pools.linpool rule 12b: a nearest upsample, an edge pad by ``f/2`` and the
``[1, 2, ..., 2, 1] / 2f`` window).

References: torch's ``F.interpolate(mode='bilinear', align_corners=False)`` for the weights,
onnx's reference ``Resize`` (linear, ``half_pixel``) rounded by hand (half away from zero) to
the consumer's radix point, and the layer-by-layer compiled network on the emulator for the bits
of the network mode, the C-simulated kernel and the simulated board."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.deploy.run.hostextra import resize_linear  # noqa: E402
from hlsnn.engines.bfp_systolic.network.lower import avgpool_pairs  # noqa: E402
from hlsnn.engines.network.pools import linpool
from hlsnn.engines.network import move as netmove  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, compile_each  # noqa: E402


def _round_away(v, bits=8):
    r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return np.clip(r, -(1 << (bits - 1)), (1 << (bits - 1)) - 1).astype(np.int64)


def _onnx_resize(x, scales):
    s = numpy_helper.from_array(np.array([1, 1] + list(scales), np.float32), "s")
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                                            coordinate_transformation_mode="half_pixel")], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [s])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(m).run(None, {"x": x.astype(np.float32)})[0].astype(np.float64)


def _layer(shape, scales):
    kind, attrs = resize_linear(None, {"coordinate_transformation_mode": "half_pixel"}, [1, 1] + list(scales), None,
                                (None,) + tuple(shape[1:]))
    assert kind == "ResizeLinear"
    return dict(kind="host", op="ResizeLinear", name="r", inputs=["x"], output="y", attrs=attrs)


def _lower(j, q, f_in, f_x, bits=8):
    shape = q[0].shape[1:] if bits is None else q.shape[1:]
    state, shapes, ops = {"x": ("q", None if bits is None else f_in)}, {"x": shape}, []
    assert linpool.lower_host(j, state, shapes, ops, bits, netmode._why, netmode.Op)
    if bits is not None:
        linpool.materialize({"name": "next", "f_x": f_x}, "y", state["y"], state, shapes, ops, {}, "nearest_away",
                            netmode._why, netmode.Op)
    env = {"x": q}
    for op in ops:
        if op.kind in ("upsample", "pad"):
            env[op.out] = (netmove.run_pairs(op, env.get, len(q[0])) if bits is None
                           else netmove.run(op, env.get, len(q)))
        else:
            env[op.out] = (avgpool_pairs(op, env.get, len(q[0])) if bits is None
                           else linpool.run(op, env.get, len(q), bits))
    from types import SimpleNamespace
    netmode.check_ops(SimpleNamespace(ops=ops))             # the fields the kernels and netint.c take
    return env[ops[-1].out], ops


@pytest.mark.parametrize("n, f", [(1, 4), (3, 4), (5, 4), (2, 8), (4, 2)])
def test_half_pixel_weights_are_torchs(n, f):
    """:func:`linpool.half_pixel` is torch's ``align_corners=False`` interpolation (one-hot
    inputs) and the importer's; by 4 the weights are eighths."""
    torch = pytest.importorskip("torch")
    eye = torch.eye(n, dtype=torch.float64).reshape(n, 1, 1, n)
    ref = torch.nn.functional.interpolate(eye, scale_factor=(1, f), mode="bilinear", align_corners=False)
    m = linpool.half_pixel(n, f)
    np.testing.assert_array_equal(m, ref.reshape(n, n * f).numpy().T)
    np.testing.assert_array_equal(np.asarray(_layer((1, 1, 1, n), (1, f))["attrs"]["mats"][1]), m)
    if f == 4:
        assert set(np.unique(m * 8)) <= set(range(9))


@pytest.mark.parametrize("shape, scales", [((2, 3, 4, 5), (4, 4)), ((2, 2, 1, 1), (4, 4)), ((2, 2, 3, 2), (4, 2)),
                                           ((1, 2, 2, 3), (8, 1)), ((2, 2, 3, 3), (1, 4))])
def test_rule_12b_equals_onnx_resize_rounded_to_the_consumer(shape, scales):
    """Rule 12b (upsample, edge pad, the [1, 2, 2, 2, 1] / 8 window per x4 axis) is ONNX's
    linear Resize rounded at ``F_x``, borders included, and the layer path's host op too."""
    from hlsnn.deploy.importer.graph import Layer
    from hlsnn.deploy.run import hostextra
    from hlsnn.deploy.quantize.quant import to_fixed
    rng = np.random.default_rng(124)
    q = rng.integers(-128, 128, shape)
    j = _layer(shape, scales)
    for f_in, f_x in ((4, 4), (3, 6), (6, 3), (7, 1)):
        x = np.ldexp(q.astype(np.float64), -f_in)
        want = _round_away(np.ldexp(_onnx_resize(x, scales), f_x))
        got, ops = _lower(j, q, f_in, f_x)
        assert [op.kind for op in ops] == ["upsample", "pad", "avgpool"]
        np.testing.assert_array_equal(got, want)
        host = hostextra.run(Layer("r", "host", ["x"], "y", op="ResizeLinear", attrs=j["attrs"]), [x])
        np.testing.assert_array_equal(to_fixed(host, f_x, 8, True, "nearest_away"), want)


def test_rule_12b_on_pairs_is_onnxs_exact_value():
    """BFP pairs: the window's exact sum at the smallest exponent, less ``p``: ONNX's value."""
    rng = np.random.default_rng(125)
    m = rng.integers(-127, 128, (2, 2, 3, 3))
    e = rng.integers(-9, -6, (2, 2, 3, 3))
    x = np.ldexp(m.astype(np.float64), e)
    (ym, ye), _ = _lower(_layer(x.shape, (4, 4)), (m, e), None, None, bits=None)
    np.testing.assert_array_equal(np.ldexp(ym.astype(np.float64), ye), _onnx_resize(x, (4, 4)))


def test_other_factors_are_refused_by_name():
    kind, attrs = resize_linear(None, {}, [1, 1, 3, 3], None, (None, 2, 4, 4))
    j = dict(kind="host", op="ResizeLinear", name="r", inputs=["x"], output="y", attrs=attrs)
    with pytest.raises(InputError, match=r"from 4 to 12"):
        linpool.lower_host(j, {"x": ("q", 4)}, {"x": (2, 4, 4)}, [], 8, netmode._why, netmode.Op)


def up4_model(path, seed=41):
    """conv (ReLU) 1 -> 3 on 8 x 8, a 4 x 4 max pool (2 x 2), ``Resize`` linear half_pixel x4 (8 x 8),
    conv 3 -> 1."""
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(rng.normal(0, 0.6, (3, 1, 3, 3)).astype(np.float32), "w0"),
            numpy_helper.from_array(rng.normal(0, 0.1, 3).astype(np.float32), "b0"),
            numpy_helper.from_array(rng.normal(0, 0.4, (1, 3, 3, 3)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, 1).astype(np.float32), "b1"),
            numpy_helper.from_array(np.array([1, 1, 4, 4], np.float32), "s")]
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[4, 4], strides=[4, 4]),
             helper.make_node("Resize", ["p0", "", "s"], ["u"], mode="linear",
                              coordinate_transformation_mode="half_pixel"),
             helper.make_node("Conv", ["u", "w1", "b1"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 1, 8, 8])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


@pytest.fixture(scope="module")
def up4(tmp_path_factory):
    """``get(fmt)``: :func:`up4_model` compiled in ``fmt`` on first use."""
    from test_network_move import SMALL_FORMATS
    tmp = tmp_path_factory.mktemp("netup4")
    model, cache = up4_model(tmp / "up4.onnx"), {}
    formats = {k: SMALL_FORMATS[k] for k in ("bfp8", "twohot", "fixed8")}

    def get(fmt):
        if fmt not in cache:
            cache[fmt] = compile_each(tmp, "up4", model, [fmt], formats=formats, check_samples=2,
                                      calibration_samples=16)[fmt]
        return cache[fmt]
    return get


def _x():
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:6]


@pytest.mark.parametrize("fmt", ["twohot", "fixed8", pytest.param("bfp8", marks=pytest.mark.slow)])
def test_bilinear_x4_runs_as_one_network_program_with_the_layer_paths_bits(up4, fmt):
    net = hlsnn.load(up4(fmt), "emu", network=True)
    assert net.network is not None
    kinds = [op.kind for op in net.network.ops]
    assert kinds == ["conv", "maxpool", "upsample", "pad", "avgpool", "conv"], kinds
    np.testing.assert_array_equal(net(_x()), hlsnn.load(up4(fmt), "emu", network=False)(_x()))


@pytest.mark.csim
@pytest.mark.parametrize("fmt", ["twohot", pytest.param("fixed8", marks=pytest.mark.slow),
                                 pytest.param("bfp8", marks=pytest.mark.slow)])
def test_bilinear_x4_runs_in_one_kernel_start_on_csim_and_the_board(up4, fmt):
    """The pool loop's 5 x 5 window with tap masks 0b01110 (the kernels' C++ unchanged)."""
    check_kernel_run(up4(fmt), fmt, _x(), board=True)
