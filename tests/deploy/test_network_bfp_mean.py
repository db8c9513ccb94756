"""A mean over a count that is not a power of two on BFP pairs (issue 52, rule bfp_mean of
hlsnn.engines.bfp_systolic.network.anymean): the integer leading one and mantissa of ``s * 2**e /
d`` equal the layer path's float64 mean quantized by rule bfp_conv (numpy float64 written out here:
one division, ``np.frexp``, ``np.ldexp``, the three roundings), the kernel's reciprocal is
``u // d`` over its whole range, and a tc_dw-like net (Conv1d ... MaxPool1d(3, 2, ceil_mode),
AvgPool1d(3, 1, 1), AdaptiveMaxPool1d(1), Linear) and a 2-D net with a padded 3x3 AveragePool
and a global pool over 3x3 run in one start of the network kernel with the layer path's bits."""
import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.engines.bfp_systolic.network import anymean as bm  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from netfixtures import avgpool_net  # noqa: E402

ROUNDINGS = ["nearest_even", "nearest_away", "truncate"]


def _round(x, rounding):
    """The float reference's roundings of float64 ``x`` (exact: ``x`` is a scaled float)."""
    if rounding == "nearest_even":
        return np.rint(x)
    if rounding == "nearest_away":
        return np.sign(x) * np.floor(np.abs(x) + 0.5)
    return np.floor(x)


@pytest.mark.parametrize("n", [3, 6, 9, 12, 25, 36, 49, 105])
@pytest.mark.parametrize("mant_bits", [4, 8, 16])
def test_the_rule_is_the_float64_mean_quantized_by_rule_3(n, mant_bits):
    """On 60,000 random sums per case (|s| below 2**52, every width; many small ones, where
    ties and exact quotients live), exponents in +-40, patch exponents from the element's own
    leading one up to 30 above it and a few below it (saturation): the leading one equals
    ``frexp`` of the float64 mean and the mantissa ``R(ldexp(mean, -xe))`` saturated."""
    rng = np.random.default_rng(n * 31 + mant_bits)
    a, d = bm.odd(n)
    k = 60000
    width = rng.integers(0, 53, k)
    s = (rng.integers(0, 1 << 62, k) >> (62 - width)) * rng.choice([-1, 1], k)
    s[:3000] = rng.integers(-4 * n, 4 * n + 1, 3000)
    s[3000:3010] = [0, 1, -1, n, -n, d, (1 << 52) - 1, -(1 << 52) + 1, 3 * n, -5 * n]
    e = rng.integers(-40, 41, k)
    v = np.ldexp(s.astype(np.float64), e + a) / n              # the layer path: S / n in float64
    lead = np.frexp(np.abs(v))[1] - 1
    np.testing.assert_array_equal(bm.lop(s, e, d), np.where(s != 0, lead, np.iinfo(np.int64).min))
    xe = np.where(s != 0, lead, 0) - (mant_bits - 2) + np.where(rng.random(k) < 0.5, rng.integers(-3, 31, k), 0)
    for rounding in ROUNDINGS:
        want = np.clip(_round(np.ldexp(v, -xe), rounding), -(1 << (mant_bits - 1)), (1 << (mant_bits - 1)) - 1)
        np.testing.assert_array_equal(bm.mantissa(s, e, xe, d, mant_bits, rounding), want.astype(np.int64))


@pytest.mark.parametrize("d", [3, 5, 7, 9, 25, 49, 105])
@pytest.mark.parametrize("mant_bits", [4, 8, 12, 16, 18])
def test_the_kernels_reciprocal_divides_every_u_up_to_the_cap(d, mant_bits):
    """floor(u / d) = (u * M + off) >> L for every 0 <= u <= d 2**(M+1) (exhaustive up to 12-bit
    mantissas; beyond, the lowest and highest 2**16 values, every multiple of d +-1 near the top
    and 2**18 random ones), within the product width and 32-bit constants the template declares."""
    recip, off, shift = bm.magic(d, mant_bits)
    cap = d << (mant_bits + 1)
    if mant_bits <= 12:
        u = np.arange(cap + 1, dtype=np.int64)
    else:
        rng = np.random.default_rng(d)
        top = np.arange(cap - (d << 12), cap + 1, d)
        u = np.unique(np.concatenate([np.arange(1 << 16), np.arange(cap - (1 << 16), cap + 1), top, top - 1,
                                      top - d + 1, rng.integers(0, cap + 1, 1 << 18)]))
    np.testing.assert_array_equal((u * recip + off) >> shift, u // d)
    assert cap.bit_length() == bm.cap_bits(d, mant_bits) and recip < 1 << 32 and off < 1 << 32


def _op(kind, name, ins, out, **f):
    from hlsnn.engines.network.program import Op
    return Op(kind, name, list(ins), out, f)


def test_what_reads_a_mean_other_than_a_conv_maxpool_relu_is_refused_by_name():
    mean_op = _op("avgpool", "avg", ["x"], "m", mdiv=3)
    ops = [mean_op, _op("maxpool", "mx", ["m"], "p"), _op("conv", "fc", ["p"], "y")]
    assert bm.mark(ops, {}, "y") == {"m": 3, "p": 3} and ops[2].f["mdiv"] == 3
    with pytest.raises(InputError, match=r"sum: a add of a mean over a count that is not a power of two.*rule bfp_mean"):
        bm.mark([mean_op, _op("add", "sum", ["m", "x"], "s")], {}, "s")
    with pytest.raises(InputError, match=r"the output m is a mean over a count that is not a power of two"):
        bm.mark([mean_op], {}, "m")
    with pytest.raises(InputError, match=r"odd parts \[3, 5\]"):
        bm.mark([mean_op, _op("avgpool", "avg5", ["x"], "m5", mdiv=5), _op("conv", "c3", ["m"], "y3"),
                 _op("conv", "c5", ["m5"], "y5")], {}, "y5")          # (a Concat of both: rule bfp_mean_concat, one divisor)
    with pytest.raises(InputError, match=r"g: a mean of means"):
        bm.mark([mean_op, _op("add", "g", ["m"], "gm", gap=True, mdiv=9)], {}, "x")


FORMATS = "  bfp8: {type: bfp, accel: bfp8_zcu104}\n"


def _tc_dw(path, seed=5):
    """tc_dw of torch_families/variant_family.py (untrained, without its BatchNorms): (8, 8) sequences."""
    rng = np.random.default_rng(seed)
    init, nodes = [], []

    def conv(x, y, cin, cout, k, group=1, **at):
        init.append(numpy_helper.from_array(rng.normal(0, 0.5, (cout, cin // group, k)).astype(np.float32), y + "_w"))
        init.append(numpy_helper.from_array(rng.normal(0, 0.1, cout).astype(np.float32), y + "_b"))
        nodes.extend([helper.make_node("Conv", [x, y + "_w", y + "_b"], [y], kernel_shape=[k], group=group, **at),
                      helper.make_node("Relu", [y], [y + "r"])])
        return y + "r"
    t = conv("x", "c1", 8, 16, 9, strides=[2], pads=[4, 4])              # 8 -> 4
    t = conv(t, "c2", 16, 16, 3, group=16, pads=[1, 1])
    t = conv(t, "c3", 16, 24, 1)
    nodes += [helper.make_node("MaxPool", [t], ["mp"], kernel_shape=[3], strides=[2], ceil_mode=1),   # 4 -> 2
              helper.make_node("AveragePool", ["mp"], ["ap"], kernel_shape=[3], strides=[1], pads=[1, 1],
                               count_include_pad=1),                                                  # over 3
              helper.make_node("GlobalMaxPool", ["ap"], ["gm"]), helper.make_node("Flatten", ["gm"], ["f"])]
    init += [numpy_helper.from_array(rng.normal(0, 0.5, (10, 24)).astype(np.float32), "fc_w"),
             numpy_helper.from_array(rng.normal(0, 0.1, 10).astype(np.float32), "fc_b")]
    nodes.append(helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["y"], transB=1))
    g = helper.make_graph(nodes, "tc_dw", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 8, 8])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 10])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path, "ncl"


def _avg_gap(path, seed=7):
    """A 2-D net: conv 3x3 (8x8), AveragePool 3x3 stride 1 padded (counted: over 9), conv 3x3
    stride 2 (3x3), GlobalAveragePool over 3x3 (9), a dense layer."""
    return avgpool_net(path, 1, seed, "avg_gap"), "nchw"


MODELS = {"tc_dw": _tc_dw, "avg_gap": _avg_gap}


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    from hlsnn.network.build import compile_model
    tmp = tmp_path_factory.mktemp("bfpmean")
    out = {}
    for name, make in MODELS.items():
        m, layout = make(tmp / f"{name}.onnx")
        cfg = tmp / f"{name}.yaml"
        cfg.write_text(f"name: {name}\nmodel: {m}\ndata: digits\nlayout: {layout}\nformats:\n{FORMATS}"
                       f"assignments:\n  bfp8: {{default: bfp8}}\n")
        out[name] = (tmp / f"{name}.hlsnn", layout)
        compile_model(cfg, "bfp8", out[name][0], check_samples=2)
    return out


def _x(layout, n):
    from hlsnn.deploy import datasets
    x = datasets.load("digits", layout="ncl" if layout == "ncl" else "nchw").x_test[:n]
    return x.reshape(-1, 8, 8) if layout == "ncl" else x


@pytest.mark.parametrize("name", list(MODELS))
def test_emulators_network_mode_has_the_layer_paths_bits(nets, name):
    """The network mode (one program, its means over 3 or 9 as sums read by the conv) on 300
    digits at once: the layer path's bits, no engine call."""
    from hlsnn.commands.network import _kernel_calls
    path, layout = nets[name]
    x = _x(layout, 300)
    want = hlsnn.load(path, "emu", network=False)(x)
    net = hlsnn.load(path, "emu", network=True)
    assert {op.f["mdiv"] for op in net.network.ops if op.kind == "conv" and "mdiv" in op.f} == \
        ({3} if name == "tc_dw" else {9})
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before


def test_the_division_is_declared_and_the_loops_keep_their_ii(nets, tmp_path):
    """The kernel declares a reciprocal product per bank in ConvMac (its derived widths) and the
    derived II (perf/schedule.py, from the rendered C++) of every loop is the one of the same
    kernel without the rule (the mean's divisor taken away): rule bfp_mean adds no memory access.
    Without the rule the kernel holds the pool's sums rounded to odd (issue 83: its AddPoolOdd
    loop, at II 1 too); with it the convs read the exact sums and that loop is not rendered."""
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf, kernel as bk
    prog, arrays = artifact.read(nets["avg_gap"][0])
    net = netmode.lower(prog, arrays)
    cfg = config_of(prog["accels"][net.accel], "test")
    t = bk.render(net, tmp_path / "with")[2]
    rows = [r for r in bfpperf.buffers(net, t)[1] if r.name == "mean"]
    assert [(r.function, r.count, r.a_bits) for r in rows] == [("ConvMac", t["pc"], (9 << 9).bit_length())]
    assert "MeanMant" in (tmp_path / "with" / "network.cpp").read_text()
    with_ii = {r["loop"]: r["ii"] for r in schedule.network_schedule(net, cfg)}
    for op in net.ops:
        op.f.pop("mdiv", None)
    without = {r["loop"]: r["ii"] for r in schedule.network_schedule(net, cfg)}
    assert "AddPoolOdd" not in with_ii and without.pop("AddPoolOdd") == 1
    assert with_ii == without and with_ii["ConvMac"] == 1 and with_ii["ConvExp"] == 1, (with_ii, without)


@pytest.mark.csim
@pytest.mark.parametrize("name", [pytest.param("tc_dw"), pytest.param("avg_gap", marks=pytest.mark.slow)])
def test_network_kernel_csim_has_the_layer_paths_bits_in_one_start(nets, name):
    """The C-simulation of the network kernel (rule bfp_mean in ConvExp and ConvMac): the layer path's
    bits on 24 digits, one start per batch. (avg_gap in the slow suite: the same two helpers
    on the same loops, a divisor of 9 and the pool buffer's source.)"""
    path, layout = nets[name]
    x = _x(layout, 24)
    board = hlsnn.load(path, "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(path, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
