"""AveragePool and bilinear x2 upsampling in the network mode (issue 52,
hlsnn.engines.network.pools.linpool rules 11, 12): v_unet_mix (``F.avg_pool2d(x, 2)``) and
v_unet_bilinear (three ``nn.Upsample(scale_factor=2, mode='bilinear')``) run in one network
start on every engine.

References: onnx's reference implementation (``onnx.reference.ReferenceEvaluator``) of
``AveragePool`` and ``Resize`` (linear, ``half_pixel`` / ``pytorch_half_pixel``) on tiny graphs,
rounded by hand (half away from zero) to the consumer's radix point, and the layer-by-layer
compiled network on the emulator (the deployment's float64 host ops) for the bits."""
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
from hlsnn.engines.bfp_systolic.network.lower import NotExact, avgpool_pairs  # noqa: E402
from hlsnn.engines.network.pools import linpool
from hlsnn.engines.network import move as netmove  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_torch_beyond import _data, compile_beyond  # noqa: E402

UNETS = ["v_unet_mix_ts17", "v_unet_bilinear_dynamo"]


def _onnx(op, x, **attrs):
    """onnx's reference output of one node on the float array ``x``."""
    init, ins = [], ["x"]
    if op == "Resize":
        init.append(numpy_helper.from_array(np.array([1, 1] + [2] * (x.ndim - 2), np.float32), "s"))
        ins += ["", "s"]
    g = helper.make_graph([helper.make_node(op, ins, ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], init)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return ReferenceEvaluator(model).run(None, {"x": x.astype(np.float32)})[0].astype(np.float64)


def _round_away(v, bits=8):
    """Round half away from zero and saturate to signed ``bits``: written out, not shift_round_sat."""
    r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    return np.clip(r, -(1 << (bits - 1)), (1 << (bits - 1)) - 1).astype(np.int64)


def _lower(j, q, f_in, f_x, bits=8):
    """Rules 11 and 12 for host layer ``j`` on integers ``q`` (B, C, H, W) at radix ``f_in``,
    read by an engine layer of input radix ``f_x`` (``bits`` None: BFP pairs ``q``)."""
    shape = q[0].shape[1:] if bits is None else q.shape[1:]
    state, shapes, ops = {"x": ("q", None if bits is None else f_in)}, {"x": shape}, []
    assert linpool.lower_host(j, state, shapes, ops, bits, netmode._why, netmode.Op)
    if bits is not None:
        assert state["y"][0] == "avgp"
        linpool.materialize({"name": "next", "f_x": f_x}, "y", state["y"], state, shapes, ops, {}, "nearest_away",
                            netmode._why, netmode.Op)
    env = {"x": q}
    for op in ops:
        if op.kind == "upsample":
            env[op.out] = (netmove.run_pairs(op, env.get, len(q[0])) if bits is None
                           else netmove.run(op, env.get, len(q)))
        else:
            env[op.out] = (avgpool_pairs(op, env.get, len(q[0])) if bits is None
                           else linpool.run(op, env.get, len(q), bits))
    return env[ops[-1].out], ops


def _resize_layer(x, mode):
    kind, attrs = resize_linear(None, {"coordinate_transformation_mode": mode}, [1, 1] + [2] * (x.ndim - 2), None,
                                (None,) + x.shape[1:])
    assert kind == "ResizeLinear"
    return dict(kind="host", op="ResizeLinear", name="r", inputs=["x"], output="y", attrs=attrs)


@pytest.mark.parametrize("kernel, strides, pads", [((2, 2), (2, 2), (0, 0, 0, 0)), ((4, 4), (2, 2), (1, 1, 1, 1)),
                                                   ((2, 1), (1, 1), (0, 0, 0, 0))])
def test_avgpool_rule_equals_onnx_reference_rounded_to_the_consumer(kernel, strides, pads):
    """Rule 11: the window sum requantized to F_x is ONNX's mean (count_include_pad = 1 where
    padded) rounded half away from zero at F_x, saturated; radixes that shift right and left."""
    rng = np.random.default_rng(11)
    q = rng.integers(-128, 128, (3, 4, 8, 6))
    j = dict(kind="host", op="AveragePool", name="p", inputs=["x"], output="y",
             attrs=dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads), count_include_pad=1))
    for f_in, f_x in ((4, 3), (4, 6), (2, 5), (5, 5)):
        ref = _onnx("AveragePool", np.ldexp(q.astype(np.float64), -f_in), kernel_shape=list(kernel),
                    strides=list(strides), pads=list(pads), count_include_pad=1)
        got, _ = _lower(j, q, f_in, f_x)
        np.testing.assert_array_equal(got, _round_away(np.ldexp(ref, f_x)))


@pytest.mark.parametrize("mode", ["half_pixel", "pytorch_half_pixel"])
@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 2, 1, 1), (2, 3, 6)])
def test_bilinear_rule_equals_onnx_resize_rounded_to_the_consumer(mode, shape):
    """Rule 12 (edge upsample, then the [1, 2, 1] x [1, 2, 1] / 16 window) is ONNX's linear
    Resize by 2 rounded at F_x, borders included; a 1 x 1 map and a 1-D (N, C, L) map too."""
    rng = np.random.default_rng(12)
    q = rng.integers(-128, 128, shape)
    for f_in, f_x in ((4, 4), (3, 6), (6, 3)):
        x = np.ldexp(q.astype(np.float64), -f_in)
        ref = _onnx("Resize", x, mode="linear", coordinate_transformation_mode=mode)
        qm = q if q.ndim == 4 else q[..., None]
        got, ops = _lower(_resize_layer(x, mode), qm, f_in, f_x)
        assert [op.kind for op in ops] == ["upsample", "avgpool"]
        np.testing.assert_array_equal(got.reshape(ref.shape), _round_away(np.ldexp(ref, f_x)))


def test_pairs_rules_equal_onnx_reference_exactly():
    """The BFP network mode's rules 11 and 12 on (m, e) pairs of mixed exponents: the exact
    value ONNX computes (float32 here is exact: a few significant bits)."""
    rng = np.random.default_rng(13)
    m = rng.integers(-127, 128, (2, 3, 4, 4))
    m[0, 0, 0, 0] = 0
    e = rng.integers(-9, -5, (2, 3, 4, 4))
    x = np.ldexp(m.astype(np.float64), e)
    pool = dict(kind="host", op="AveragePool", name="p", inputs=["x"], output="y", attrs=dict(kernel_shape=[2, 2], strides=[2, 2]))
    for j, ref in ((pool, _onnx("AveragePool", x, kernel_shape=[2, 2], strides=[2, 2])),
                   (_resize_layer(x, "half_pixel"), _onnx("Resize", x, mode="linear",
                                                          coordinate_transformation_mode="half_pixel"))):
        (ym, ye), _ = _lower(j, (m, e), None, None, bits=None)
        np.testing.assert_array_equal(np.ldexp(ym.astype(np.float64), ye), ref)


def test_a_pairs_sum_beyond_the_kernels_element_is_not_exact():
    """Rule 11 on pairs: a window whose exponents lie 20 bits apart needs a 27-bit sum at the
    smallest, beyond the kernel's 26-bit element: NotExact (the layer path then runs it)."""
    m = np.full((1, 1, 2, 2), 100)
    e = np.array([[[[0, -20], [0, 0]]]])
    pool = dict(kind="host", op="AveragePool", name="p", inputs=["x"], output="y",
                attrs=dict(kernel_shape=[2, 2], strides=[2, 2]))
    with pytest.raises(NotExact, match=r"p: a pool's sum spans more than 25 bits"):
        _lower(pool, (m, e), None, None, bits=None)
    (ym, ye), _ = _lower(pool, (m, e + np.array([[[[0, 10], [0, 0]]]])), None, None, bits=None)
    assert np.ldexp(float(ym[0, 0, 0, 0]), int(ye[0, 0, 0, 0])) == (300 + 100 * 2.0 ** -10) / 4


def test_what_has_no_exact_rule_is_refused_by_name():
    state, shapes = {"x": ("q", 4)}, {"x": (2, 4, 4)}

    def refuse(j, match):
        with pytest.raises(InputError, match=match):
            linpool.lower_host(j, dict(state), dict(shapes), [], 8, netmode._why, netmode.Op)
    kind, attrs = resize_linear(None, {}, [1, 1, 3, 3], None, (None, 2, 4, 4))
    refuse(dict(kind="host", op="ResizeLinear", name="r", inputs=["x"], output="y", attrs=attrs), r"from 4 to 12")
    pool = dict(kind="host", op="AveragePool", name="p", inputs=["x"], output="y", attrs=dict(kernel_shape=[3, 3]))
    pool["attrs"] = dict(kernel_shape=[2, 2], ceil_mode=1)
    refuse(pool, r"ceil_mode")


@pytest.fixture(scope="module")
def unets(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netlinpool", UNETS)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["bfp8", "twohot", "fixed8"])
@pytest.mark.parametrize("name", UNETS)
def test_unet_runs_as_one_network_program_with_the_layer_paths_bits(unets, name, fmt):
    """Before: v_unet_mix (7 engine layers) and v_unet_bilinear (11) ran layer by layer, their
    AveragePool / ResizeLinear on the host; now one network program, no engine call on emu,
    the layer path's bits."""
    from hlsnn.commands.network import _kernel_calls
    x = _data(name).x_test[:24]
    layers = hlsnn.load(unets[name, fmt], "emu", network=False)
    want = layers(x)
    net = hlsnn.load(unets[name, fmt], "emu", network=True)
    assert "avgpool" in [op.kind for op in net.network.ops]
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["bfp8", "twohot", "fixed8"])
@pytest.mark.parametrize("name", UNETS)
def test_unet_runs_in_one_start_of_the_network_kernel(unets, name, fmt):
    """The pool loop's window sum and the Move loop's edge upsample on the C-simulation of
    bfp_systolic, shift_mac and sparse_cluster and on the simulated board: one start per batch,
    the layer path's bits, the loops' iterations the perf model's (the pool's ceil(C/Q) * OH *
    OW * kh * kw, the edge map's (2H + 2) x (2W + 2) pixels)."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    from hlsnn.engines.shift_mac.network import perf as netperf
    x = _data(name).x_test[:8]
    board = hlsnn.load(unets[name, fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(unets[name, fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    assert {n: it for n, (it, _) in k.counters.items()} == {
        n: 8 * v for n, v in (bfpperf if fmt == "bfp8" else netperf).iterations(board.network, k.tables).items()}
    pools = [op for op in board.network.ops if op.kind == "avgpool"]
    assert len(pools) == (1 if "mix" in name else 3)
    if "bilinear" in name:
        edges = [op.f for op in board.network.ops if op.kind == "upsample"]
        assert [(f["oh"], f["ow"]) for f in edges] == [(4, 4), (6, 6), (10, 10)]
    with hlsnn.load(unets[name, fmt], "sim", network=True) as sim:       # the simulated board
        np.testing.assert_array_equal(sim(x), board(x))
        assert sim.last_kernel_starts == 1


@pytest.mark.csim
@pytest.mark.slow
def test_unet_bilinear_in_one_start_of_the_board_sized_sparse_kernel(tmp_path):
    """v_unet_bilinear on the board-sized sparse_cluster kernel (net_shape: board, sub-banked
    activations): the edge moves and window sums write every bank copy; one start, the layer
    path's bits."""
    from hlsnn.network.build import compile_model
    from test_torch_beyond import _config
    name = "v_unet_bilinear_ts17"
    cfg = tmp_path / "u.yaml"
    cfg.write_text(_config(tmp_path, name).read_text().split("formats:")[0]
                   + "formats:\n  sized: {type: fixed, accel: sparse8net_pynq-z2}\nassignments:\n"
                   "  sized: {default: sized}\n")
    out = tmp_path / "u.hlsnn"
    compile_model(cfg, "sized", out)
    x = _data(name).x_test[:8]
    board = hlsnn.load(out, "csim", network=True)
    assert board._kernel.tables.get("sized") is not None
    assert [op.kind for op in board.network.ops].count("avgpool") == 3
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1


def cat_model(path, seed=4):
    """A bilinear U-Net step as milesial's U-Net writes it: conv (ReLU) -> a 4 x 8 x 8 skip;
    max pool, conv (ReLU) -> 4 x 4 x 4; ``Resize`` linear x2 (half_pixel) straight into the
    ``Concat`` with the skip; a conv, on 1 x 8 x 8 images."""
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(rng.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "b1"),
            numpy_helper.from_array(rng.normal(0, 0.3, (4, 4, 3, 3)).astype(np.float32), "w2"),
            numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "b2"),
            numpy_helper.from_array(rng.normal(0, 0.3, (2, 8, 3, 3)).astype(np.float32), "w3"),
            numpy_helper.from_array(rng.normal(0, 0.1, 2).astype(np.float32), "b3"),
            numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Resize", ["r2", "", "scales"], ["u"], mode="linear",
                              coordinate_transformation_mode="half_pixel"),
             helper.make_node("Concat", ["u", "r1"], ["k"], axis=1),
             helper.make_node("Conv", ["k", "w3", "b3"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 2, 8, 8])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def cat_nets(tmp_path_factory):
    """format -> :func:`cat_model` compiled (bfp8, two-hot, fixed8)."""
    from netfixtures import compile_each
    from test_network_move import SMALL_FORMATS
    tmp = tmp_path_factory.mktemp("netlinpool-cat")
    fmts = {k: SMALL_FORMATS[k] for k in ("bfp8", "twohot", "fixed8")}
    return compile_each(tmp, "cat", cat_model(tmp / "cat.onnx"), formats=fmts)


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["bfp8", "twohot", "fixed8"])
def test_bilinear_straight_into_a_skip_concat_runs_in_one_start(cat_nets, fmt):
    """A bilinear upsample read by a Concat (no conv between): in fixed point its window sum is
    requantized to the concat's consumer's radix point first (the layer path rounds each
    float value alone), then moved; in bfp the pairs move as they are. emu's network mode and
    the kernel's C-simulation give the layer path's bits in one start."""
    from hlsnn.deploy import datasets
    x = datasets.load("digits", layout="nchw").x_test[:8]
    want = hlsnn.load(cat_nets[fmt], "emu", network=False)(x)
    net = hlsnn.load(cat_nets[fmt], "emu", network=True)
    kinds = [op.kind for op in net.network.ops]
    assert kinds == ["conv", "maxpool", "conv", "upsample", "avgpool", "concat", "conv"], kinds
    np.testing.assert_array_equal(net(x), want)
    board = hlsnn.load(cat_nets[fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), want)
    assert board.last_kernel_starts == 1
