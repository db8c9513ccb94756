"""Tables and the channel gate on BFP activations (issue 52, rules 9b and 10b of
hlsnn.engines.bfp_systolic.network.gate): se_cnn of tests/data/torch/beyond in bfp8 runs in one
network start, with the layer path's bits (both paths run the rules).

References: the codes and the products computed on the exact values with Python's Fraction
(independent of the module's shift_round_sat), the table of rule 9 (itself tested against the
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

SE = ["se_cnn_ts17", "se_cnn_dynamo"]


def _round(v, rounding):
    """A Fraction rounded to an integer: half to even, half away from zero, or floor."""
    fl = math.floor(v)
    r = v - fl
    if rounding == "truncate" or r == 0:
        return fl
    if r != Fraction(1, 2):
        return fl + (r > Fraction(1, 2))
    if rounding == "nearest_even":
        return fl + (fl % 2)
    return fl + 1 if v > 0 else fl


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


def test_a_lut_and_a_gate_on_a_tiny_graph_against_fractions():
    """Rule 9b then 10b on a 2 x 2 x 2 map and a 2-vector: values of the reference."""
    rng = np.random.default_rng(1)
    m, e = rng.integers(-127, 128, (1, 2, 4)), rng.integers(-9, -3, (1, 2, 4))
    f_o, t = netgate.table("HardSwish", {}, (4, 8, True), "nearest_even")
    f = dict(f_in=4, bits=8, rounding="nearest_even", table=t, lo=-128, f_out=f_o)
    hm, he = bfpgate.lut_pairs((m, e), f)
    gm, ge = np.array([[[37], [-90]]]), np.array([[[-7], [-7]]])
    ym, ye, ok = bfpgate.gate_pairs((hm, he), (gm, ge), 25)
    assert ok
    for c in range(2):
        for i in range(4):
            q = _code(m[0, c, i], e[0, c, i], 4, 8, "nearest_even")
            x = Fraction(q, 16)
            hs = x * min(max(x + 3, 0), 6) / 6                     # the definition, exact
            want_h = _round(hs * 2 ** f_o, "nearest_even")
            assert hm[0, c, i] == want_h and he[0, c, i] == -f_o
            got = Fraction(int(ym[0, c, i])) * Fraction(2) ** int(ye[0, c, i])
            assert got == Fraction(want_h, 2 ** f_o) * Fraction(int(gm[0, c, 0]), 128)
    z = np.zeros((1, 1, 1), int)
    assert not bfpgate.gate_pairs((np.array([[[1 << 20]]]), z), (np.array([[[1 << 5]]]), z), 25)[2]
    assert bfpgate.gate_pairs((np.array([[[1 << 20]]]), z), (np.array([[[1 << 4]]]), z), 25)[2]


@pytest.fixture(scope="module")
def se(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netbfpgate", SE, formats=("bfp8",))


@pytest.mark.parametrize("name", SE)
def test_se_cnn_bfp8_runs_as_one_network_program_with_the_layer_paths_bits(se, name):
    """Before: refused by name on the network path (12 layer kernel calls a batch); now one program
    (three tables on pairs, the gate, two global pools), bit for bit with the layer path, whose
    tables are rule 9b's codes of its float64 values."""
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
    # the layer path's first HardSwish: rule 9b on the conv's float64 outputs, by Fractions
    lut = net.network.ops[1]
    src = env[layers.program["layers"][0]["output"]].reshape(-1)[:500]
    got = env[layers.program["layers"][1]["output"]].reshape(-1)[:500]
    for v, g in zip(src, got):
        q = _round(Fraction(float(v)) * 2 ** lut.f["f_in"], layers.program["rounding"])
        q = max(-128, min(127, q))
        assert g == float(Fraction(int(lut.f["table"][q + 128]), 2 ** lut.f["f_out"]))


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
