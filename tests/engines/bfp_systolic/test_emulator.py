"""The bfp_systolic emulator against independent references and the worked examples of
SPECS.md §2.5, on the emulator target (the same checks run on csim in test_csim.py)."""
import math
from fractions import Fraction

import numpy as np
import pytest

import hlsnn
from hlsnn.engines.bfp_systolic import emulate, protocol, select_exponent
from hlsnn.formats import bfp

from conftest import accel_config, test_config


def ref_emulate(p, xm, xe, wm, we, bm, be, relu):
    """A slow, independent reading of the emulator's rules with Python integers/fractions:
    exact dot products, bias as an exact rational rounded to the accumulator grid, the
    output exponent from floor(log2(max |value|)) of exact values."""
    M, A, E = p["mantissa_bits"], p["acc_bits"], p["exponent_bits"]
    emin, emax = -(1 << (E - 1)), (1 << (E - 1)) - 1
    lo_a, hi_a = -(1 << (A - 1)), (1 << (A - 1)) - 1
    batch, n = len(xm), len(wm)

    def rnd(q):  # rounding of the config, on an exact rational
        fl = math.floor(q)
        fr = q - fl
        if p["rounding"] == "truncate" or fr == 0:
            return fl
        if fr != Fraction(1, 2):
            return fl + (fr > Fraction(1, 2))
        return fl + (fl & 1) if p["rounding"] == "nearest_even" else (fl + 1 if q > 0 else fl)

    ym = np.zeros((batch, n), np.int64)
    ye = np.zeros(batch, np.int64)
    for b in range(batch):
        vals = []
        for j in range(n):
            acc = sum(int(a) * int(c) for a, c in zip(xm[b], wm[j]))
            e3 = int(xe[b]) + int(we[j])
            if bm is not None:
                bias = min(max(rnd(Fraction(int(bm[j])) * Fraction(2) ** (int(be) - e3)), lo_a), hi_a)
                acc = min(max(acc + bias, lo_a), hi_a)
            if relu:
                acc = max(acc, 0)
            vals.append((acc, e3))
        mags = [abs(Fraction(a) * Fraction(2) ** e) for a, e in vals if a != 0]
        if mags:
            top = max(mags)
            lop = math.floor(math.log2(top.numerator)) - math.floor(math.log2(top.denominator))
            lop -= 1 if Fraction(2) ** lop > top else 0  # exact floor(log2) of a rational
            lop += 1 if Fraction(2) ** (lop + 1) <= top else 0
            e4 = min(max(lop - (M - 2), emin), emax)
        else:
            e4 = emin
        ye[b] = e4
        for j, (a, e3) in enumerate(vals):
            ym[b, j] = min(max(rnd(Fraction(a) * Fraction(2) ** (e3 - e4)), -(1 << (M - 1))), (1 << (M - 1)) - 1)
    return ym, ye


@pytest.mark.parametrize("name", ["t16_row", "t4_truncate", "t9_wide", "t2_tiny"])
def test_emulator_matches_independent_reference(name):
    cfg = hlsnn.load_config(test_config(name))
    p = cfg.params
    from hlsnn.engines.bfp_systolic.cases import make_cases
    for case in make_cases(cfg, seed=3, n_random=4):
        if case.method == "stats" or case.xm.shape[1] > 100:
            continue
        ym, ye, _ = emulate(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be, relu=case.relu)
        rm, re = ref_emulate(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be, case.relu)
        np.testing.assert_array_equal(ye, re, err_msg=case.name)
        np.testing.assert_array_equal(ym, rm, err_msg=case.name)


def _row_values(acc, target="emu", name="t16_row", method="max", stats_k=3, we=0):
    """Put chosen integers straight into the output stage: K = 1, x = 1, w = the values."""
    cfg = hlsnn.load_config(test_config(name))
    vals = np.asarray(acc).reshape(-1, 1)
    x = bfp.BFPTensor.from_parts(np.ones((1, 1), np.int64), np.zeros((1, 1), np.int32), 16, axis=1)
    if cfg.params["weight_exponent"] == "row":
        w = bfp.BFPTensor.from_parts(vals, np.asarray(we, np.int32).reshape(-1, 1) * np.ones((len(vals), 1), np.int32),
                                     16, axis=1)
    else:
        w = bfp.BFPTensor.from_parts(vals, np.full((1, 1), we, np.int32), 16, axis=None)
    with hlsnn.Accelerator(cfg, target) as acc_:
        y = acc_.gemm_bfp(x, w, method=method, stats_k=stats_k)
        return y, acc_.kernel.last_sat_count


def test_T1_1_255_gives_exponent_minus7_mantissa_0x7f80():
    y, sat = _row_values([255])
    assert int(y.exponents[0, 0]) == -7 and int(y.mantissas[0, 0]) == 0x7F80 and sat == 0


def test_T1_2_table2_max_rule_picks_plus3_and_small_values_underflow():
    # values 131072, 256, 1, 0.5, 0.125 as mantissa * 2^we with per-row exponents
    cfg = hlsnn.load_config(test_config("t16_row"))
    w = bfp.quantize(np.array([[131072.0], [256.0], [1.0], [0.5], [0.125]]), 16, axis=-1)
    x = bfp.quantize(np.ones((1, 1)), 16, axis=-1)
    with hlsnn.Accelerator(cfg, "emu") as acc:
        y = acc.gemm_bfp(x, w)
    assert int(y.exponents[0, 0]) == 3
    assert [int(v) for v in y.mantissas[0]] == [0x4000, 0x0020, 0, 0, 0]


def test_T1_3_three_sigma_statistics_exponent():
    # mean 10, sigma 0.5 (values 9.5 and 10.5 = {19, 21} * 2^-1), K = 3 -> hi = 11.5, LOP 3, e = -11
    y, _ = _row_values([19, 21], name="t16_stats", method="stats", stats_k=3, we=-1)
    assert int(y.exponents[0, 0]) == -11
    assert y.dequantize()[0].tolist() == [9.5, 10.5]
    # T1.3's 11.5 encodes to 0x5C00 at that exponent
    y, _ = _row_values([19, 23], name="t16_stats", method="stats", stats_k=3, we=-1)
    assert int(y.mantissas[0, 1]) == 0x5C00 and int(y.exponents[0, 0]) == -11


def test_T1_4_table4_more_sigmas_widen_the_range():
    # values {19, 21} * 2^-1 (mean 10, sigma 0.5): k=1 -> 10.5 (LOP 3), k=4 -> 12 (LOP 3),
    # and for mean 14, sigma 1 ({13, 15}): k=1 -> 15 (LOP 3), k=2 -> 16 (LOP 4)
    for vals, k, lop in (([19, 21], 1, 3), ([19, 21], 4, 3), ([26, 30], 1, 3), ([26, 30], 2, 4)):
        y, _ = _row_values(vals, name="t16_stats", method="stats", stats_k=k, we=-1)
        assert int(y.exponents[0, 0]) == lop - 14, (vals, k)


def test_T1_6_rounding_overflow_saturates_to_0x7fff():
    # 65535 = 255 * 257: LOP 15 -> e = 1; 65535 / 2 = 32767.5 rounds (to even) to 32768 -> 32767
    cfg = hlsnn.load_config(test_config("t16_row"))
    x = bfp.BFPTensor.from_parts(np.array([[255]]), np.zeros((1, 1), np.int32), 16, axis=1)
    w = bfp.BFPTensor.from_parts(np.array([[257]]), np.zeros((1, 1), np.int32), 16, axis=1)
    with hlsnn.Accelerator(cfg, "emu") as acc:
        y = acc.gemm_bfp(x, w)
        assert int(y.exponents[0, 0]) == 1 and int(y.mantissas[0, 0]) == 0x7FFF
        assert acc.kernel.last_sat_count == 1


def test_T1_7_exponent_adder_and_bias_alignment():
    # e3 = e1 + e2; bias exponent e5 aligned by e6 = e5 - e3 (left shift here: exact)
    p = hlsnn.load_config(test_config("t16_row")).params
    ym, ye, _ = emulate(p, np.array([[3]]), np.array([-2]), np.array([[5]]), np.array([-1]),
                        bm=np.array([7]), be=1)
    # 15 * 2^-3 + 7 * 2^1 = 1.875 + 14 = 15.875 exactly representable
    assert float(np.ldexp(float(ym[0, 0]), int(ye[0]))) == 15.875


def test_all_zero_row_gets_the_smallest_exponent_and_relu_clears_negatives():
    p = hlsnn.load_config(test_config("t16_row")).params
    ym, ye, _ = emulate(p, np.zeros((2, 3), int), np.array([0, 5]), np.ones((4, 3), int), np.zeros(4, int))
    assert (ym == 0).all() and (ye == -128).all()
    ym, ye, _ = emulate(p, -np.ones((1, 3), int), np.zeros(1, int), np.ones((4, 3), int), np.zeros(4, int), relu=True)
    assert (ym == 0).all() and ye[0] == -128


def test_select_exponent_stats_equals_float_mean_plus_k_sigma_away_from_boundaries():
    rng = np.random.default_rng(5)
    acc = rng.integers(-(1 << 20), 1 << 20, size=(200, 64))
    for k in (0, 1, 3):
        e4 = select_exponent(acc, 0, 16, 8, use_stats=True, stats_k=k)
        a = np.abs(acc).astype(float)
        hi = a.mean(axis=1) + k * a.std(axis=1)
        ref = np.floor(np.log2(hi)) - 14
        # the integer unit keeps 16 magnitude bits: it may differ only right at a power of two
        near = np.abs(np.log2(hi) - np.round(np.log2(hi))) < 1e-3
        np.testing.assert_array_equal(e4[~near], ref[~near])


def test_float_gemm_is_accurate_and_equals_dequantized_bfp_gemm():
    rng = np.random.default_rng(11)
    x, w, b = rng.normal(size=(7, 50)), rng.normal(size=(21, 50)), rng.normal(size=21)
    with hlsnn.Accelerator(accel_config("bfp16_pynq-z2"), "emu") as acc:
        y = acc.gemm(x, w, bias=b, relu=True)
        xq, wq, bq = acc.kernel.quantize_operands(x, w, b)
        yq = acc.gemm_bfp(xq, wq, bq, relu=True)
    ref = np.maximum(x @ w.T + b, 0)
    np.testing.assert_array_equal(y, yq.dequantize())
    # 16-bit BFP: error of a few units in the 14th bit below each row's maximum
    scale = np.abs(ref).max(axis=1, keepdims=True)
    assert (np.abs(y - ref) <= scale * 2.0 ** -11).all()


def test_protocol_round_trip_and_beat_counts():
    cfg = hlsnn.load_config(test_config("t4_truncate"))
    p = cfg.params
    rng = np.random.default_rng(2)
    for batch, n, k, bias in ((1, 1, 1, False), (7, 10, 13, True), (5, 3, 64, True)):
        xm, wm = rng.integers(-8, 8, (batch, k)), rng.integers(-8, 8, (n, k))
        xe, we = rng.integers(-8, 8, batch), np.full(n, 3)
        bm = rng.integers(-8, 8, n) if bias else None
        beats = protocol.pack_input(p, xm, xe, wm, we, bm, -2)
        assert beats.shape == (protocol.n_input_beats(p, batch, n, k, bias), 4)
        got = protocol.unpack_input(p, beats, batch, n, k, bias)
        for a, e in zip(got, (xm, xe, wm, we, bm, -2 if bias else 0)):
            np.testing.assert_array_equal(a if a is not None else -1, e if e is not None else -1)
        # packed into a caller's byte buffer (a DMA buffer): the same bytes, a view of the buffer
        buf = np.full(beats.nbytes + 13, 0xAB, np.uint8)
        into = protocol.pack_input(p, xm, xe, wm, we, bm, -2, out=buf)
        np.testing.assert_array_equal(into, beats)
        assert np.shares_memory(into, buf) and (buf[beats.nbytes:] == 0xAB).all()
    with pytest.raises(hlsnn.InputError, match="at least"):
        protocol.pack_input(p, xm, xe, wm, we, bm, -2, out=np.zeros(beats.nbytes - 1, np.uint8))


def test_result_fields_outside_the_config_are_refused():
    """The result tensor is built without from_parts' copies; a kernel that returned an
    exponent (or, in a wider lane, a mantissa) outside the config's fields is still refused."""
    with hlsnn.Accelerator(test_config("t4_truncate"), "emu") as acc:   # 4-bit mantissas in 8-bit lanes
        k, p = acc.kernel, acc.config.params
        lo, hi = bfp.exponent_range(p["exponent_bits"])
        t = k._tensor(np.array([[1, -2]]), np.array([hi]))
        assert t.exponents.dtype == np.int32 and t.exponents.shape == (1, 1) and not t.mantissas.flags.writeable
        with pytest.raises(hlsnn.InputError, match="exponent of"):
            k._tensor(np.array([[1, -2]]), np.array([hi + 1]))
        with pytest.raises(hlsnn.InputError, match="mantissa of 8"):
            k._tensor(np.array([[8, -2]]), np.array([0]))


@pytest.mark.parametrize("bad, match", [
    (dict(x=np.ones((2, 3)), w=np.ones((4, 5))), "K must agree"),
    (dict(x=np.ones((2, 140000)), w=np.ones((4, 140000))), r"k_limit = 131071\].*max_k = 1024 runs in passes"),
    (dict(x=np.ones(3), w=np.ones((4, 3))), "2-D"),
    (dict(x=np.ones((2, 3)), w=np.ones((4, 3)), bias=np.ones(5)), "shape"),
    (dict(x=np.full((2, 3), np.nan), w=np.ones((4, 3))), "non-finite|NaN|finite"),
])
def test_bad_gemm_inputs_are_clear_errors(bad, match):
    with hlsnn.Accelerator(accel_config("bfp16_pynq-z2"), "emu") as acc:
        with pytest.raises(hlsnn.InputError, match=match):
            acc.gemm(bad["x"], bad["w"], bias=bad.get("bias"))


def test_unknown_target_and_stats_on_row_config_are_clear_errors():
    with pytest.raises(hlsnn.InputError, match="fpga.*emu, csim, sim, pynq"):
        hlsnn.Accelerator(accel_config("bfp16_pynq-z2"), "fpga")
    with hlsnn.Accelerator(accel_config("bfp16_pynq-z2"), "emu") as acc:
        with pytest.raises(hlsnn.InputError, match="weight_exponent: tensor"):
            acc.gemm(np.ones((1, 2)), np.ones((1, 2)), method="stats")


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
@pytest.mark.parametrize("name", ["t16_row", "t16_stats", "t4_truncate", "t9_wide", "t2_tiny", "bfp8_zcu104"])
def test_fast_emulator_equals_the_literal_integer_transcription(name, rounding):
    from hlsnn.engines.bfp_systolic import emulate_reference
    from hlsnn.engines.bfp_systolic.cases import make_cases
    path = test_config(name) if name.startswith("t") else accel_config(name)
    cfg = hlsnn.load_config(path)
    p = {**cfg.params, "rounding": rounding}
    for case in make_cases(cfg, seed=9, n_random=10):
        kw = dict(relu=case.relu, use_stats=case.method == "stats", stats_k=case.stats_k)
        got = emulate(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be, **kw)
        ref = emulate_reference(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be, **kw)
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(g, r, err_msg=f"{name} {case.name}")
    # and on blocks of rows smaller than the matrix (the row-block loop)
    rng = np.random.default_rng(1)
    M = p["mantissa_bits"]
    xm = rng.integers(-(1 << (M - 1)), 1 << (M - 1), (37, 9))
    wm = rng.integers(-(1 << (M - 1)), 1 << (M - 1), (5, 9))
    xe, we = rng.integers(-3, 3, 37), np.full(5, 1)
    for stats in (True, False):
        for g, r in zip(emulate(p, xm, xe, wm, we, block_elems=7, use_stats=stats),
                        emulate_reference(p, xm, xe, wm, we, use_stats=stats)):
            np.testing.assert_array_equal(g, r)
    # blocks that saturate (exponent clamped at the ceiling: huge left shifts) next to blocks
    # that do not, in one call
    E = p["exponent_bits"]
    xe2 = np.where(np.arange(37) % 3 == 0, (1 << (E - 1)) - 1, 0)
    we2 = np.full(5, (1 << (E - 1)) - 1)
    for g, r in zip(emulate(p, xm, xe2, wm, we2, block_elems=9), emulate_reference(p, xm, xe2, wm, we2)):
        np.testing.assert_array_equal(g, r)


def test_kernel_with_another_config_hash_is_refused():
    """The host reads the ID register (magic + config hash) and refuses a kernel built from
    a different config, naming both."""
    from hlsnn.runtime.targets import EmuTarget
    ours = hlsnn.load_config(accel_config("bfp16_pynq-z2"))
    other = hlsnn.load_config({**ours.as_dict(), "board": "pynq-z2",
                               "bfp_systolic": {**ours.params, "max_k": 512}}, source="other")
    assert other.hash32 != ours.hash32
    with hlsnn.Accelerator(ours, "emu") as acc:
        acc.kernel.target = EmuTarget(other, acc.engine, arrays=False)   # a kernel answering with another hash
        with pytest.raises(hlsnn.InputError, match=f"0x{other.hash32:08x}.*0x{ours.hash32:08x}"):
            acc.gemm(np.ones((2, 3)), np.ones((4, 3)))
