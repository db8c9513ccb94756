"""Tables and the channel gate on BFP activations (issue 52, rules bfp_table and bfp_gate of
hlsnn.engines.bfp_systolic.network.gate): se_cnn of tests/data/torch/beyond in bfp8 runs in one
network start, with the layer path's bits (both paths run the rules).

References: the codes and the products computed on the exact values with Python's Fraction
(independent of the module's shift_round_sat), the table of rule unary_table (itself tested against the
definitions in test_network_gate.py), and the layer-by-layer compiled network on the emulator."""
import sys
from fractions import Fraction
import math

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.commands.network import _kernel_calls  # noqa: E402
from hlsnn.engines.bfp_systolic.network import gate as bfpgate  # noqa: E402
from hlsnn.engines.network import gate as netgate  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_torch_beyond import _data, compile_beyond  # noqa: E402
from netfixtures import round_fraction  # noqa: E402

SE = ["se_cnn_ts17", "se_cnn_dynamo"]


_round = round_fraction                 # a Fraction rounded to an integer (netfixtures)


def _code(m, e, f, bits, rounding):
    q = _round(Fraction(int(m)) * Fraction(2) ** (int(e) + f), rounding)
    return max(-(1 << (bits - 1)), min((1 << (bits - 1)) - 1, q))


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
def test_codes_are_the_exact_values_rounded_and_saturated(rounding):
    rng = np.random.default_rng(5)
    m = rng.integers(-(1 << 25), 1 << 25, 3000) >> rng.integers(0, 25, 3000)
    e = rng.integers(-60, 20, 3000)
    m[:8] = [0, 1, -1, 3, -3, 5, -5, 127]          # ties at a shift of 1, 2
    e[:8] = [0, -1, -1, -1, -1, -2, -2, -70]
    for f in (-2, 0, 3, 7):
        for bits in (4, 8):
            got = bfpgate.codes(m, e, f, bits, rounding)
            want = [_code(a, b, f, bits, rounding) for a, b in zip(m, e)]
            np.testing.assert_array_equal(got, want)
    # the layer path's pairs of its float64 values give the same codes
    v = np.ldexp(m.astype(np.float64), e)
    pm, pe = bfpgate.pairs_of(v)
    np.testing.assert_array_equal(np.ldexp(pm.astype(np.float64), pe), v)
    np.testing.assert_array_equal(bfpgate.codes(pm, pe, 3, 8, rounding), bfpgate.codes(m, e, 3, 8, rounding))


def _hardswish_ref(m, e, w, rounding):
    """Rule bfp_hardswish from its definition: the exact HardSwish rounded at ``w`` bits below the input's
    leading one (as a pair), or the value itself (``|x| >= 3``, 0)."""
    x = Fraction(int(m)) * Fraction(2) ** int(e)
    hs = x * min(max(x + 3, 0), 6) / 6
    if x == 0 or abs(x) >= 3:
        return hs, None
    d = w - 1 - (abs(int(m)).bit_length() - 1 + int(e))
    return Fraction(_round(hs * 2 ** d, rounding)) / 2 ** d, -d


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
def test_hardswish_on_pairs_is_the_definition_rounded_at_w_bits(rounding):
    rng = np.random.default_rng(2)
    m = rng.integers(-127, 128, 6000)
    e = rng.integers(-40, 3, 6000)
    m[:6], e[:6] = [3, -3, 96, -96, 1, -1], [0, 0, -5, -5, -40, -40]      # +-3, +-3 again, tiny
    for w in (8, 9, 12):
        ym, ye = bfpgate.hardswish_pairs(m, e, w, rounding)
        for a, b, y1, y2 in zip(m, e, ym, ye):
            v, exp = _hardswish_ref(a, b, w, rounding)
            assert Fraction(int(y1)) * Fraction(2) ** int(y2) == v, (a, b, w)
            if exp is not None:
                assert y2 == exp and abs(y1) < 1 << w


def test_a_table_and_a_gate_on_a_tiny_graph_against_fractions():
    """Rules bfp_hardswish (a HardSwish map), bfp_table (a Sigmoid vector at code radix 4) then bfp_gate on a 2 x 2 x 2
    map and a 2-vector: the values of the references."""
    rng = np.random.default_rng(1)
    m, e = rng.integers(-127, 128, (1, 2, 4)), rng.integers(-9, -3, (1, 2, 4))
    hm, he = bfpgate.hardswish_pairs(m, e, 9, "nearest_even")
    sm, se_ = np.array([[[37], [-90]]]), np.array([[[-5], [-5]]])
    f_o, t = netgate.table("Sigmoid", {}, (4, 8, True), "nearest_even", bfpgate.OUT_BITS)
    f = dict(f_in=4, bits=8, rounding="nearest_even", table=t, lo=-128, f_out=f_o)
    gm, ge = bfpgate.lut_pairs((sm, se_), f)
    for c in range(2):                          # the Sigmoid of the codes, 16-bit entries
        q = _code(sm[0, c, 0], -5, 4, 8, "nearest_even")         # 37/32 -> 18/16 (a tie to even), -90/32
        s = 1 / (1 + math.exp(-q / 16))
        assert abs(gm[0, c, 0] * 2.0 ** -f_o - s) <= 2.0 ** -(f_o + 1) + 1e-12 and ge[0, c, 0] == -f_o
        assert abs(gm[0, c, 0]) < 1 << 15
    ym, ye, ok = bfpgate.gate_pairs((hm, he), (gm, ge), 25)
    assert ok
    for c in range(2):
        for i in range(4):
            want_h, _ = _hardswish_ref(m[0, c, i], e[0, c, i], 9, "nearest_even")
            got = Fraction(int(ym[0, c, i])) * Fraction(2) ** int(ye[0, c, i])
            assert got == want_h * Fraction(int(gm[0, c, 0]), 2 ** f_o)
    z = np.zeros((1, 1, 1), int)
    assert not bfpgate.gate_pairs((np.array([[[1 << 20]]]), z), (np.array([[[1 << 5]]]), z), 25)[2]
    assert bfpgate.gate_pairs((np.array([[[1 << 20]]]), z), (np.array([[[1 << 4]]]), z), 25)[2]


@pytest.fixture(scope="module")
def se(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netbfpgate", SE, formats=("bfp8",))


@pytest.mark.parametrize("name", SE)
def test_se_cnn_bfp8_runs_as_one_network_program_with_the_layer_paths_bits(se, name):
    """Before: refused by name on the network path (12 layer kernel calls a batch); now one program
    (two HardSwish on pairs, a Sigmoid table, the gate, two global pools), bit for bit with the
    layer path, which runs rules bfp_hardswish and bfp_table on its float64 values."""
    x = _data(name).x_test[:40]
    layers = hlsnn.load(se[name, "bfp8"], "emu", network=False)
    before = _kernel_calls(layers)
    want, env = layers.run(x, keep=True)
    assert _kernel_calls(layers) - before == 12       # 6 engine layers, the depthwise one in packs of groups
    net = hlsnn.load(se[name, "bfp8"], "emu", network=True)
    kinds = [op.kind for op in net.network.ops]
    assert kinds == ["conv", "lut", "conv", "lut", "add", "conv", "conv", "lut", "gate", "conv", "add", "conv"], kinds
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before
    # the layer path's HardSwish and Sigmoid: rules bfp_hardswish and bfp_table on its float64 values, by Fractions
    lays = layers.program["layers"]
    src, got = env[lays[0]["output"]].reshape(-1)[:400], env[lays[1]["output"]].reshape(-1)[:400]
    for v, g in zip(src, got):
        fr = Fraction(float(v))                           # numerator * 2**ex (a dyadic value)
        m, ex = fr.numerator, 1 - fr.denominator.bit_length()
        assert Fraction(float(g)) == _hardswish_ref(m, ex, 9, layers.program["rounding"])[0]
    sig = next(op for op in net.network.ops if op.kind == "lut" and op.f["fn"] == "Sigmoid")
    j = next(j for j in lays if j["name"] == sig.name)
    assert j["bfp_table"] == {"f_in": sig.f["f_in"], "bits": 8}
    for v, g in zip(env[j["inputs"][0]].reshape(-1), env[j["output"]].reshape(-1)):
        q = max(-128, min(127, _round(Fraction(float(v)) * 2 ** sig.f["f_in"], layers.program["rounding"])))
        assert Fraction(float(g)) == Fraction(int(sig.f["table"][q + 128]), 2 ** sig.f["f_out"])


@pytest.mark.csim
@pytest.mark.slow      # ~20 s (a kernel build); the quick test above covers the rules on emu
def test_se_cnn_bfp8_runs_in_one_start_of_the_network_kernel(se):
    """The bfp_systolic network kernel's C-simulation and the simulated board: one start per
    batch, the layer path's bits; the Lut and Gate loops' iterations are the perf model's
    (ceil(C/Q) * H * W each) and the Gate loop declares its Q products."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    name = "se_cnn_ts17"
    x = _data(name).x_test[:8]
    board = hlsnn.load(se[name, "bfp8"], "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(se[name, "bfp8"], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    want = {n: 8 * v for n, v in bfpperf.iterations(board.network, k.tables).items()}
    assert {n: k.counters[n][0] for n in want} == want
    pc = k.tables["pc"]
    assert k.counters["NetLut"][0] == 8 * (2 * -(-8 // pc) * 64 + -(-8 // pc))
    assert k.counters["NetGate"][0] == 8 * -(-8 // pc) * 64
    assert [m.count for m in bfpperf.buffers(board.network, k.tables)[1] if m.name == "gate"] == [pc]
    with hlsnn.load(se[name, "bfp8"], "sim", network=True) as sim:       # the simulated board
        np.testing.assert_array_equal(sim(x), board(x))
        assert sim.last_kernel_starts == 1
