"""A mean over any count in the network mode (issue 52, hlsnn.engines.network.pools.mean rule 13): a
``GlobalAveragePool`` over 3x3, 5x5, 7x7 pixels (alone and after a residual Add, ResNet's
global pool over 7x7) and an ``AveragePool`` of 3x3 taps run on the fabric with the layer
path's bits.

References: :class:`fractions.Fraction` rounding of the exact quotient (the division, written
out here, not the module's), the layer path's own float64 host op and ``to_fixed`` (the bits
the rule must give), onnx's reference ``AveragePool``, and the layer-by-layer compiled network
on the emulator."""
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy.run import hostops
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.deploy.quantize.quant import to_fixed  # noqa: E402
from hlsnn.engines.network.pools import mean  # noqa: E402
from netfixtures import check_pool_is_onnx_reference, compile_onnx  # noqa: E402

ROUNDINGS = ["nearest_even", "nearest_away", "truncate"]


def _round(t, rounding):
    """``t`` (a Fraction) rounded to an integer: written out from the definitions."""
    lo = t.numerator // t.denominator
    frac = t - lo
    if rounding == "truncate":
        return lo
    if frac != Fraction(1, 2):
        return lo + (frac > Fraction(1, 2))
    return lo + (lo % 2 if rounding == "nearest_even" else int(t > 0))


@pytest.mark.parametrize("m", [3, 5, 7, 9, 25, 49, 3 * 5 * 7, 1023])
def test_the_reciprocal_divides_exactly_every_sum_in_range(m):
    """(x * M + off) >> L == floor(x / m) (Python's floor division) for every |x| <= X:
    exhaustive, both signs; M is the rounded-up reciprocal."""
    for xmax in (1, m - 1, 1 << 12, (1 << 18) + 7):
        dm, doff, dl = mean.magic(m, xmax)
        x = np.arange(-xmax, xmax + 1, dtype=np.int64)
        np.testing.assert_array_equal((x * dm + doff) >> dl, x // m)
        assert dm == -(-(1 << dl) // m)


@pytest.mark.parametrize("n, fm, f_x", [(3, 4, 4), (9, 6, 3), (25, 4, 7), (49, 5, 5), (49, 8, 2), (6, 3, 5),
                                        (12, 7, 3), (3136, 4, 4), (75, 2, 9)])
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_the_rule_is_the_exact_quotient_rounded_once(n, fm, f_x, rounding):
    """Rule 13 (divide, then shift_round_sat by K) on every sum |s| <= n * 128 (8-bit values)
    equals round(s * 2**(F_x - Fm) / n) by Fraction, saturated to 8 bits; and it equals the
    layer path's float64 mean quantized by to_fixed."""
    from hlsnn.primitives import shift_round_sat
    smax = n << 7
    r = mean.plan(n, fm, f_x, smax)
    assert not isinstance(r, str), r
    div, k = r
    step = max(1, smax // 20000)
    s = np.arange(-smax, smax + 1, step, dtype=np.int64)
    s = np.unique(np.concatenate([s, np.arange(-3 * n, 3 * n + 1)]))
    got = shift_round_sat(mean.divide(s, div), k, 8, rounding)[0]
    want = [min(max(_round(Fraction(int(v)) * Fraction(2) ** (f_x - fm) / n, rounding), -128), 127) for v in s]
    np.testing.assert_array_equal(got, want)
    layer = to_fixed(np.ldexp(s.astype(np.float64), -fm) / n, f_x, 8, True, rounding)
    np.testing.assert_array_equal(got, layer)


@pytest.mark.parametrize("length", [(3, 3), (5, 5), (7, 7), (25,), (3,), (6, 2)])
@pytest.mark.parametrize("f_in, f_x", [(4, 4), (6, 3), (3, 6)])
def test_global_pool_rule_equals_the_layer_paths_host_op(length, f_in, f_x):
    """The lowered global pool of one tensor (rule 4 with rule 13) on random 8-bit maps equals
    the layer path's GlobalAveragePool (hostops, float64) quantized by the consumer's to_fixed,
    nearest_away (the shipped models' rounding), and the extremes saturate alike."""
    rng = np.random.default_rng(sum(length) + f_in)
    q = rng.integers(-128, 128, (64, 5) + length)
    q[0], q[1] = 127, -128
    shape = (5,) + length
    state, shapes = {"x": ("q", f_in)}, {"x": shape}
    w = type("W", (), {})()
    w.state, w.shapes, w.ops = state, shapes, []
    steps = netmode.IntegerSteps.__new__(netmode.IntegerSteps)
    steps.bits, steps.rounding = 8, "nearest_away"
    n = int(np.prod(length))
    a = dict(ins=["x"], fa=f_in, fb=f_in, relu=False, name="gap", p=0 if n & (n - 1) else n.bit_length() - 1, n=n)
    base = steps.materialize_add({"name": "next", "f_x": f_x}, a, w)
    op, = w.ops
    assert ("div" in op.f) == bool(n & (n - 1))
    got = netmode.add_ints(q.reshape(64, 5, -1), None, op.f, 8).reshape(64, 5)
    x = np.ldexp(q.astype(np.float64), -f_in)
    if len(length) == 1:
        x = x[..., None]
    mean_f = hostops.run(hostops._Spec("GlobalAveragePool", {}), [x]).reshape(64, 5)
    np.testing.assert_array_equal(got, to_fixed(mean_f, f_x, 8, True, "nearest_away"))
    assert base == "gap_q"


@pytest.mark.parametrize("strides", [(1, 1), (2, 2)])
@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 1, 1, 1)])
@pytest.mark.parametrize("cip", [0, 1])
def test_avgpool_3x3_equals_onnx_reference_quantized_by_the_layer_path(strides, pads, cip):
    """A 3x3 AveragePool (9 taps) with strides 1 and 2, padded (counted) or not: onnx's
    reference mean quantized by to_fixed at F_x is rule 11 with rule 13's division; with
    uncounted padding the border windows divide by 6 and 4: rule 11u over L = 36
    (hlsnn.engines.network.pools.uncounted; tests/deploy/test_network_uncounted.py)."""
    q = np.random.default_rng(9).integers(-128, 128, (4, 3, 7, 8))
    attrs = dict(kernel_shape=[3, 3], strides=list(strides), pads=list(pads), count_include_pad=cip)

    def over_n(op):
        assert op.f["div"]["n"] == (36 if any(pads) and not cip else 9)
    check_pool_is_onnx_reference(q, attrs, over_n)


def test_a_mean_the_float_path_may_round_otherwise_is_refused():
    """A sum whose radix lies 30 bits above the consumer's: the decision points crowd below
    the layer path's 2**-25 resolution; plan says so instead of giving other bits."""
    r = mean.plan(49, 34, 4, 49 << 7)
    assert isinstance(r, str) and "not provably rounded" in r


# ---- whole networks: network path == layer path on emu, and a csim run ----

FORMATS = {"twohot": "{type: twohot, accel: shift8_pynq-z2}", "fixed8": "{type: fixed, accel: sparse8_pynq-z2}",
           "bfp8": "{type: bfp, accel: bfp8_zcu104}"}


def _model(path, kind, seed=3):
    """A small net on 1 x 8 x 8 digits: a conv (geometry by ``kind``), its global or 3x3 average
    pool, then a dense layer to 10 logits. ``res7``: ResNet's tail, conv, conv + skip, Relu, the
    global pool over 7x7."""
    rng = np.random.default_rng(seed)
    init, nodes = [], []

    def conv(x, y, cin, cout, k, strides=(1, 1), pads=(0, 0, 0, 0)):
        init.append(numpy_helper.from_array(rng.normal(0, 0.6, (cout, cin) + k).astype(np.float32), y + "_w"))
        init.append(numpy_helper.from_array(rng.normal(0, 0.1, cout).astype(np.float32), y + "_b"))
        nodes.append(helper.make_node("Conv", [x, y + "_w", y + "_b"], [y], strides=list(strides), pads=list(pads)))
        nodes.append(helper.make_node("Relu", [y], [y + "r"]))
        return y + "r"
    c = 6
    if kind == "gap3":
        t = conv("x", "c1", 1, c, (3, 3), (2, 2))                      # 3x3
    elif kind == "gap5":
        t = conv("x", "c1", 1, c, (4, 4))                              # 5x5
    elif kind == "gap7":
        t = conv("x", "c1", 1, c, (2, 2))                              # 7x7
    elif kind == "rmean6":                                            # a ReduceMean over 6x6 pixels
        t = conv("x", "c1", 1, c, (3, 3))
    elif kind == "res7":
        t = conv("x", "c1", 1, c, (2, 2))
        init.append(numpy_helper.from_array(rng.normal(0, 0.3, (c, c, 3, 3)).astype(np.float32), "c2_w"))
        init.append(numpy_helper.from_array(rng.normal(0, 0.1, c).astype(np.float32), "c2_b"))
        nodes += [helper.make_node("Conv", [t, "c2_w", "c2_b"], ["c2"], pads=[1, 1, 1, 1]),
                  helper.make_node("Add", ["c2", t], ["s"]), helper.make_node("Relu", ["s"], ["sr"])]
        t = "sr"
    if kind.startswith("avg"):                                        # avg3s1, avg3s2, avg3s1p, avg3max, avg3gmax
        t = conv("x", "c1", 1, c, (3, 3), pads=(1, 1, 1, 1))           # 8x8
        padded = kind.endswith("p") or "max" in kind
        nodes.append(helper.make_node("AveragePool", [t], ["p"], kernel_shape=[3, 3],
                                      strides=[1 if "max" in kind else int(kind[5])] * 2,
                                      pads=[1, 1, 1, 1] if padded else [0, 0, 0, 0], count_include_pad=1))
        if kind == "avg3max":                                         # a MaxPool of the mean: 4x4
            nodes.append(helper.make_node("MaxPool", ["p"], ["g"], kernel_shape=[2, 2], strides=[2, 2]))
        elif kind == "avg3gmax":                                      # a GlobalMaxPool of the mean
            nodes.append(helper.make_node("GlobalMaxPool", ["p"], ["g"]))
        else:
            t = conv("p", "c3", c, c, (3, 3))
            nodes.append(helper.make_node("GlobalAveragePool", [t], ["g"]))
    elif kind == "rmean6":                                            # hlsnn.engines.network.pools.reduce
        nodes.append(helper.make_node("ReduceMean", [t], ["g"], axes=[2, 3], keepdims=1))
    else:
        nodes.append(helper.make_node("GlobalAveragePool", [t], ["g"]))
    nodes.append(helper.make_node("Flatten", ["g"], ["f"]))
    k = c * 16 if kind == "avg3max" else c
    init.append(numpy_helper.from_array(rng.normal(0, 0.5, (k, 10)).astype(np.float32), "d_w"))
    nodes.append(helper.make_node("MatMul", ["f", "d_w"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 10])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _compile(tmp_path, kind, fmt):
    m = _model(tmp_path / f"{kind}.onnx", kind)
    return compile_onnx(tmp_path, f"mean_{kind}", m, fmt, formats=FORMATS, check_samples=2)


KINDS = ["gap3", "gap5", "gap7", "rmean6", "res7", "avg3s1", "avg3s2", "avg3s1p", "avg3max", "avg3gmax"]


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
@pytest.mark.parametrize("kind", KINDS)
def test_network_path_has_the_layer_paths_bits(tmp_path, kind, fmt):
    """Each net runs as one network program (no engine call on emu), rule 13's division in its
    pool, with the layer path's bits on 200 digits."""
    from hlsnn.commands.network import _kernel_calls
    from hlsnn.deploy import datasets
    out = _compile(tmp_path, kind, fmt)
    x = datasets.load("digits", layout="nchw").x_test[:200]
    want = hlsnn.load(out, "emu", network=False)(x)
    net = hlsnn.load(out, "emu", network=True)
    assert net.network is not None
    assert any("div" in op.f for op in net.network.ops)
    if "max" in kind:                                # the max of the means runs on their integers at F_x
        kinds = [op.kind for op in net.network.ops]
        assert kinds[kinds.index("avgpool") + 1] == "maxpool"
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before


@pytest.mark.parametrize("kind", [k if k in ("gap3", "rmean6", "res7", "avg3s1p", "avg3gmax") else
                                  pytest.param(k, marks=pytest.mark.slow) for k in KINDS])
def test_bfp_network_path_has_the_layer_paths_bits(tmp_path, kind):
    """On BFP pairs (bfp8) each net runs as one network program with the layer path's bits on
    200 digits: its means over 9, 25, 36, 49 values as exact sums that the next conv rounds
    (hlsnn.engines.bfp_systolic.network.anymean rule 6b); a MaxPool of the means picks the largest sum."""
    from hlsnn.deploy import datasets
    out = _compile(tmp_path, kind, "bfp8")
    x = datasets.load("digits", layout="nchw").x_test[:200]
    want = hlsnn.load(out, "emu", network=False)(x)
    net = hlsnn.load(out, "emu", network=True)
    assert net.network is not None
    assert any(op.kind == "conv" and op.f.get("mdiv", 1) > 1 for op in net.network.ops)
    np.testing.assert_array_equal(net(x), want)


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_the_division_is_declared_and_its_loops_stay_at_ii_1(tmp_path, fmt):
    """The kernels' MeanDiv products are resource rows of their derived widths (a signed
    ``v << pre`` by an unsigned ``M``, one per bank in the Add loop and one in the pool loop),
    and the derived II (perf/schedule.py, from the rendered C++) of the pool and Add loops is 1."""
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    out = _compile(tmp_path, "avg3s1p", fmt)               # a 3x3 AveragePool and a global pool over 6x6
    prog, arrays = artifact.read(out)
    net = netmode.lower(prog, arrays)
    divs = [op.f["div"] for op in net.ops if "div" in op.f]
    assert sorted(d["n"] for d in divs) == [9, 36]
    kern = {"twohot": "shift_mac", "fixed8": "sparse_cluster"}[fmt]
    from importlib import import_module
    km = import_module(f"hlsnn.engines.{kern}.network.kernel")
    with_tables = km.render(net, tmp_path / "r")[2]
    rows = mean.multipliers(net, with_tables)
    assert [(r.function, r.count) for r in rows] == [("AddPixels", with_tables["pc"] * (2 if with_tables.get(
        "fast_add") else 1)), ("MaxPoolTaps", with_tables["pc"])]
    assert rows[0].a_bits == max([d["xbits"] for d in divs] + [with_tables["add_bits"]])
    assert rows[0].b_bits == max(d["dm"].bit_length() for d in divs)
    sched = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    loops = {r["loop"]: r["ii"] for r in sched}
    assert loops["MaxPoolTaps"] == 1 and loops["AddPixels"] == 1, loops


@pytest.mark.csim
@pytest.mark.parametrize("kind, fmt", [("res7", "twohot"), ("avg3s1p", "fixed8")])
def test_network_kernel_csim_has_the_layer_paths_bits_in_one_start(tmp_path, kind, fmt):
    """The C-simulation of the network kernel (shift_mac: ResNet's Add, Relu and global pool
    over 7x7; sparse_cluster: a padded 3x3 AveragePool and a global pool over 6x6): the layer
    path's bits on emu, one start per batch, the loops' iterations the perf model's."""
    from hlsnn.deploy import datasets
    from hlsnn.engines.shift_mac.network import perf as netperf
    out = _compile(tmp_path, kind, fmt)
    x = datasets.load("digits", layout="nchw").x_test[:16]
    board = hlsnn.load(out, "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    if fmt == "twohot":
        assert {n: it for n, (it, _) in k.counters.items()} == {
            n: 16 * v for n, v in netperf.iterations(board.network, k.tables).items()}
