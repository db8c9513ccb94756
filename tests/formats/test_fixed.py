"""Tests of hlsnn.formats.fixed (dynamic fixed point, source 002).

Expected values never come from the code under test. They are the SPECS worked examples
(T2.1-T2.4, checked by hand in the comments) or come from the independent references
below: MSB/LSB positions from Python's ``int.bit_length``, conversion in exact rational
arithmetic (``fractions.Fraction``), the best point position by brute force over every
candidate F, the best sampling fraction by enumerating every a/b with b <= 64, and the
sample mask by a Python loop.
"""
import math
import re
from fractions import Fraction
from functools import reduce

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hlsnn.errors import InputError
from hlsnn.formats import fixed
from hlsnn.formats.fixed import Stats, acquire, convert, determine
from hlsnn.formats.radix_update import (Choice, cost_model, run_e1, run_e2, run_e3, run_e4, run_e5, sample_mask,
                                        sample_run, select_e5)
from hlsnn.primitives import msb_histogram

ROUNDINGS = ("nearest_even", "nearest_away", "truncate")
T22 = [1000, -700, 30, 5]


# ------------------------------------------------------------------ independent references

def ref_msb(v: int) -> int:
    u = v if v >= 0 else ~v
    return u.bit_length() - 1                    # -1 (NONE) for 0 and -1


def ref_lsb(v: int) -> int:
    return (v & -v).bit_length() - 1 if v else -1


def ref_round(x: Fraction, rounding: str) -> int:
    if rounding == "nearest_even":
        return round(x)
    if rounding == "nearest_away":
        mag = math.floor(abs(x) + Fraction(1, 2))
        return mag if x >= 0 else -mag
    return math.floor(x)


def ref_convert(values, f_in, f_out, bits, rounding="nearest_away", signed=True):
    """Exact: round(v * 2**(f_out - f_in)) clamped to the output range -> (out, sat, exact)."""
    lo, hi = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if signed else (0, 2 ** bits - 1)
    outs, sats, exact = [], [], []
    for v in values:
        x = Fraction(int(v)) * Fraction(2) ** (f_out - f_in)
        t = ref_round(x, rounding)
        c = min(max(t, lo), hi)
        outs.append(c)
        sats.append(c != t)
        exact.append(x)
    return outs, sats, exact


def ref_best_f(values, f_in, bits, allowed, signed=True, span=range(-50, 40)):
    """Largest F (f_in + span) at which at most ``allowed`` values saturate (truncate)."""
    good = [f_in + d for d in span
            if sum(ref_convert(values, f_in, f_in + d, bits, "truncate", signed)[1]) <= allowed]
    return max(good) if good else None


def ref_mask(shape, axis, a, b):
    mask = np.zeros(shape, dtype=bool)
    for idx in np.ndindex(*shape):
        mask[idx] = idx[axis] % b < a
    return mask


def ref_best_fraction_error(p: Fraction) -> Fraction:
    return min(abs(Fraction(a, b) - p) for b in range(1, 65) for a in range(0, b + 1))


@st.composite
def wide_values(draw, min_size=1, max_size=40, lo_bit=0, hi_bit=40):
    """Wide integers of mixed magnitudes, plus edge values (powers of two, 0, -1)."""
    n = draw(st.integers(min_size, max_size))
    out = []
    for _ in range(n):
        e = draw(st.integers(lo_bit, hi_bit))
        kind = draw(st.sampled_from(["any", "any", "pow", "pow-1", "neg-pow", "small"]))
        if kind == "any":
            out.append(draw(st.integers(-(2 ** e), 2 ** e)))
        elif kind == "pow":
            out.append(2 ** e)
        elif kind == "pow-1":
            out.append(2 ** e - 1)
        elif kind == "neg-pow":
            out.append(-(2 ** e) - draw(st.integers(0, 1)))
        else:
            out.append(draw(st.integers(-1, 1)))
    return out


# ------------------------------------------------------------------ SPECS worked examples

def test_t2_2_acquire():
    # unsigned MSB {9, 9, 4, 2}; non-zero LSB {3, 2, 1, 0} (1000 = 0b1111101000, ...)
    s = acquire(np.array(T22, dtype=np.int64))
    h = np.zeros(64, dtype=np.int64)
    h[[9, 4, 2]] = [2, 1, 1]
    np.testing.assert_array_equal(s.h_msb, h)
    np.testing.assert_array_equal(s.h_lsb, np.r_[[1, 1, 1, 1], np.zeros(60, dtype=np.int64)])
    assert (s.max_msb, s.min_lsb, s.n, s.n_nz) == (9, 0, 4, 4)


def test_t2_3_determine_and_round():
    s = acquire(T22)
    # top = 9, s = 9 - (8 - 2) = 3, F_out = 8 - 3 = 5
    assert determine(s, 8, 8) == 5
    out, sat = convert(T22, 8, 5, 8)                      # default RHAZ
    assert out.tolist() == [125, -88, 4, 1]               # -87.5 -> -88, 3.75 -> 4, 0.625 -> 1
    assert not sat.any()
    out, sat = convert(T22, 8, 5, 8, rounding="truncate")
    assert out.tolist() == [125, -88, 3, 0]
    assert out.dtype == np.int64 and not sat.any()


def test_t2_4_forced_saturation():
    out, sat = convert(T22, 8, 10, 8)                      # s = -2: 4000, -2800, 120, 20
    assert out.tolist() == [127, -128, 120, 20]
    assert sat.tolist() == [True, True, False, False]


def test_t2_1_cost_model():
    c = cost_model(2.1, 2.0, 15.7, 12.5)
    assert c.prev == pytest.approx(2.1, abs=0.005)
    assert c.e1 == pytest.approx(4.1, abs=0.005)
    assert c.e2 == pytest.approx(2.35, abs=0.005)
    assert c.e3 == pytest.approx(15.7, abs=0.005)
    assert c.e4 == pytest.approx(3.8, abs=0.005)
    assert [round(t, 2) for t in c] == [2.1, 4.1, 2.35, 15.7, 3.8]    # #0 ... #4 in order


def test_t2_5_sample_ratios():
    assert sample_run(12.5) == (1, 8)
    assert sample_run(20) == (1, 5)
    assert sample_run(100) == (1, 1)
    assert sample_mask((3, 5), 100).all()


# ------------------------------------------------------------------ statistics

@settings(max_examples=80, deadline=None)
@given(wide_values(min_size=0, hi_bit=61))
def test_acquire_matches_reference(values):
    s = acquire(np.array(values, dtype=np.int64).reshape(-1, 1) if values else [])
    msbs = [ref_msb(v) for v in values]
    lsbs = [ref_lsb(v) for v in values]
    h_msb, h_lsb = np.zeros(64, dtype=np.int64), np.zeros(64, dtype=np.int64)
    for k in msbs:
        if k >= 0:
            h_msb[k] += 1
    for k in lsbs:
        if k >= 0:
            h_lsb[k] += 1
    np.testing.assert_array_equal(s.h_msb, h_msb)
    np.testing.assert_array_equal(s.h_lsb, h_lsb)
    assert s.max_msb == max(msbs, default=-1)
    assert s.min_lsb == min([k for k in lsbs if k >= 0], default=-1)
    assert (s.n, s.n_nz) == (len(values), sum(v != 0 for v in values))


@settings(max_examples=60, deadline=None)
@given(wide_values(min_size=0), st.lists(st.integers(0, 40), max_size=5))
def test_merge_of_chunks_equals_acquire_of_concatenation(values, cuts):
    cuts = sorted(c for c in cuts if c <= len(values))
    chunks = np.split(np.array(values, dtype=np.int64), cuts)
    merged = reduce(Stats.merge, (acquire(c, bins=48) for c in chunks), Stats.empty(48))
    assert merged == acquire(values, bins=48)


def test_merge_ignores_none_lsb():
    a, b = acquire([0, 0]), acquire([12])                 # min_lsb NONE and 2
    assert a.min_lsb == -1 and a.merge(b).min_lsb == 2 and b.merge(a).min_lsb == 2
    assert a.merge(b).max_msb == 3 and a.merge(b).n == 3


def test_from_histogram():
    s = Stats.from_histogram(np.array([0, 0, 1, 0, 1, 0, 0, 0, 0, 2, 0, 0]), 7)
    assert (s.max_msb, s.min_lsb, s.n, s.n_nz, s.bins) == (9, -1, 7, 4, 12)
    assert not s.h_lsb.any()
    assert Stats.from_histogram([0, 0, 0], 5).max_msb == -1


@settings(max_examples=60, deadline=None)
@given(wide_values(min_size=0), st.sampled_from([0.0, 0.05, 0.3]), st.booleans())
def test_from_histogram_determines_like_acquire(values, r, signed):
    h = msb_histogram(values, 64)
    for f_prev in (None, 3):
        assert (determine(Stats.from_histogram(h, len(values)), 4, 8, overflow_ratio=r,
                          signed=signed, f_prev=f_prev)
                == determine(acquire(values), 4, 8, overflow_ratio=r, signed=signed, f_prev=f_prev))


# ------------------------------------------------------------------ DETERMINE properties

@settings(max_examples=60, deadline=None)
@given(wide_values(), st.integers(-10, 20), st.sampled_from([2, 3, 8, 16]), st.booleans())
def test_max_based_is_largest_f_without_saturation(values, f_in, bits, signed):
    if not signed:
        values = [abs(v) for v in values]
    f = determine(acquire(values), f_in, bits, signed=signed, f_min=-200, f_max=200)
    if all(v in (0, -1) for v in values):
        assert f == f_in                                   # nothing to learn, f_prev None
        return
    assert f == ref_best_f(values, f_in, bits, 0, signed)
    assert not convert(values, f_in, f, bits, rounding="truncate", signed=signed)[1].any()
    assert convert(values, f_in, f + 1, bits, rounding="truncate", signed=signed)[1].any()
    # nearest rounding may only saturate a carry into the sign bit: error below one LSB
    for rounding in ("nearest_even", "nearest_away"):
        out, sat, exact = ref_convert(values, f_in, f, bits, rounding, signed)
        assert all(abs(o - x) < 1 for o, s, x in zip(out, sat, exact) if s)


@settings(max_examples=60, deadline=None)
@given(wide_values(), st.floats(0.0, 0.99), st.sampled_from([4, 8]))
def test_overflow_ratio_bounds_saturation(values, r, bits):
    s = acquire(values)
    f0 = determine(s, 6, bits, f_min=-200, f_max=200)
    f = determine(s, 6, bits, overflow_ratio=r, f_min=-200, f_max=200)
    assert f >= f0                                         # never fewer fractional bits
    allowed = math.floor(Fraction(r) * len(values))
    n_sat = sum(ref_convert(values, 6, f, bits, "truncate")[1])
    assert n_sat <= allowed and n_sat / len(values) <= r
    counted = sum(ref_msb(v) >= 0 for v in values)
    if counted > allowed:                                  # then f is the largest such F
        assert f == ref_best_f(values, 6, bits, allowed)


def test_nothing_to_learn_keeps_position():
    for s in (acquire([]), acquire([0, -1, 0]), Stats.empty(32)):
        assert determine(s, 7, 8) == 7
        assert determine(s, 7, 8, f_prev=-3) == -3
        assert determine(s, 7, 8, f_prev=100, f_max=20) == 20     # clamped too


def test_clamp_and_unsigned_shift():
    s = acquire(T22)
    assert determine(s, 8, 8, f_min=6) == 6 and determine(s, 8, 8, f_max=2) == 2
    assert determine(s, 8, 8, signed=False) == 6           # s = 9 - (8 - 1) = 2
    assert determine(s, 8, 16) == 13                       # s = 9 - 14 = -5


# ------------------------------------------------------------------ conversion

@settings(max_examples=80, deadline=None)
@given(wide_values(min_size=0), st.integers(-5, 30), st.integers(-40, 40),
       st.sampled_from([2, 5, 8, 16, 32]), st.sampled_from(ROUNDINGS), st.booleans())
def test_convert_matches_exact_reference(values, f_in, f_out, bits, rounding, signed):
    out, sat = convert(np.array(values, dtype=np.int64), f_in, f_out, bits, rounding=rounding,
                       signed=signed)
    ref_out, ref_sat, _ = ref_convert(values, f_in, f_out, bits, rounding, signed)
    assert out.tolist() == ref_out
    assert sat.tolist() == ref_sat


def test_unsigned_conversion():
    # F 8 -> 6 (s = 2): 1000/4 = 250; 1200/4 = 300 > 255; -700 -> 0 (flagged); -1/4 rounds to 0
    out, sat = convert([1000, 1200, -700, -1, 30], 8, 6, 8, signed=False)
    assert out.tolist() == [250, 255, 0, 0, 8]
    assert sat.tolist() == [False, True, True, False, False]
    out, sat = convert([-1], 8, 6, 8, signed=False, rounding="truncate")    # floor(-0.25) = -1
    assert (out.tolist(), sat.tolist()) == ([0], [True])
    out, _ = convert([255, 256], 0, 0, 8, signed=False)
    assert out.tolist() == [255, 255]


def test_convert_keeps_shape():
    v = np.arange(-12, 12).reshape(2, 3, 4) * 37
    out, sat = convert(v, 3, 1, 8)
    assert out.shape == sat.shape == (2, 3, 4)


# ------------------------------------------------------------------ N% sampling

@settings(max_examples=100, deadline=None)
@given(st.floats(0.01, 100.0), st.lists(st.integers(0, 70), min_size=1, max_size=3),
       st.integers(-3, 2))
def test_sample_mask_fraction_and_pattern(percent, shape, axis):
    shape = tuple(shape)
    axis = axis % len(shape)
    a, b = sample_run(percent)
    p = Fraction(percent / 100)
    assert 1 <= a <= b <= 64
    if p >= Fraction(1, 128):
        assert abs(Fraction(a, b) - p) == ref_best_fraction_error(p) <= Fraction(1, 128)
    else:
        assert (a, b) == (1, 64) or abs(Fraction(a, b) - p) == ref_best_fraction_error(p)
    m = sample_mask(shape, percent, axis=axis)
    assert m.dtype == bool and m.shape == shape
    if all(shape) and len(shape) <= 2:
        np.testing.assert_array_equal(m, ref_mask(shape, axis, a, b))
    L = shape[axis]
    if m.size:
        line = np.moveaxis(m, axis, -1).reshape(-1, L)
        assert (line == line[:1]).all()                    # same along the other axes
        c = int(line[0].sum())
        assert Fraction(L * a, b) <= c < Fraction(L * a, b) + a
        if p >= Fraction(1, 128):                          # the fraction taken vs percent
            assert abs(Fraction(c, L) - p) <= Fraction(1, 128) + Fraction(a, L)
        if L >= b:                                         # equal interval: period b, runs of a
            assert np.array_equal(line[0][:L - b], line[0][b:])
            assert line[0][:b].tolist() == [True] * a + [False] * (b - a)


def test_sample_run_explicit_run_length():
    assert sample_run(12.5, run=3) == (3, 24)
    assert sample_run(30, run=2) == (2, 7)                 # round(200 / 30) = 7
    assert sample_run(100, run=5) == (5, 5)
    m = sample_mask((2, 16), 25, axis=-1, run=2)
    assert m[0].tolist() == [1, 1, 0, 0, 0, 0, 0, 0] * 2


# ------------------------------------------------------------------ embodiments

class Recorder:
    """op(mask) over precomputed wide results; unmasked entries hold garbage (never read)."""

    def __init__(self, full):
        self.full = full
        self.masks = []

    def __call__(self, mask):
        self.masks.append(None if mask is None else mask.copy())
        if mask is None:
            return self.full.copy()
        return np.where(mask, self.full, np.iinfo(np.int64).max)


def matmul_op(rng, m, k, n, relu):
    x = rng.integers(-128, 128, size=(m, k), dtype=np.int64)
    w = rng.integers(-128, 128, size=(k, n), dtype=np.int64)
    full = x @ w
    return np.maximum(full, 0) if relu else full


def conv_op(rng, b, c, h, w, z, relu):
    x = rng.integers(-128, 128, size=(b, c, h + 2, w + 2), dtype=np.int64)
    k = rng.integers(-128, 128, size=(z, c, 3, 3), dtype=np.int64)
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))   # b c h w 3 3
    full = np.einsum("bchwij,zcij->bzhw", win, k)
    return np.maximum(full, 0) if relu else full


def check_equivalences(full, f_in, bits, percent, axis, kw):
    e1, e3 = Recorder(full), Recorder(full)
    r1 = run_e1(e1, f_in, bits, **kw)
    r3 = run_e3(e3, f_in, bits, **kw)
    np.testing.assert_array_equal(r1.out, r3.out)
    np.testing.assert_array_equal(r1.sat, r3.sat)
    assert r1.f_out == r3.f_out and r1.stats == r3.stats
    assert (r1.items_computed, r1.op_calls) == (2 * full.size, 2)
    assert (r3.items_computed, r3.op_calls) == (full.size, 1)
    assert e1.masks == [None, None] and e3.masks == [None]
    # E3 against the exact reference at its point
    ref_out, ref_sat, _ = ref_convert(full.reshape(-1).tolist(), f_in, r3.f_out, bits,
                                      kw.get("rounding", "nearest_away"), kw.get("signed", True))
    assert r3.out.reshape(-1).tolist() == ref_out and r3.sat.reshape(-1).tolist() == ref_sat

    e2, e4 = Recorder(full), Recorder(full)
    r2 = run_e2(e2, f_in, bits, percent, shape=full.shape, axis=axis, **kw)
    r4 = run_e4(e4, f_in, bits, percent, shape=full.shape, axis=axis, **kw)
    np.testing.assert_array_equal(r2.out, r4.out)
    np.testing.assert_array_equal(r2.sat, r4.sat)
    assert r2.f_out == r4.f_out and r2.stats == r4.stats
    a, b = sample_run(percent)
    sample = ref_mask(full.shape, axis % full.ndim, a, b)
    n_s = int(sample.sum())
    assert r2.stats == acquire(full[sample])               # stats from the sample only
    np.testing.assert_array_equal(e2.masks[0], sample)
    assert e2.masks[1] is None
    np.testing.assert_array_equal(e4.masks[0], sample)
    if n_s < full.size:
        np.testing.assert_array_equal(e4.masks[1], ~sample)
    assert (r2.items_computed, r4.items_computed) == (n_s + full.size, full.size)
    return r1, r2


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 9), st.integers(1, 12), st.integers(1, 9),
       st.sampled_from([12.5, 20.0, 50.0, 7.0, 100.0]), st.sampled_from([4, 8, 16]),
       st.integers(-4, 16), st.sampled_from(ROUNDINGS), st.sampled_from([0.0, 0.01, 0.2]),
       st.booleans(), st.sampled_from([0, 1, -1]))
def test_embodiments_matmul(seed, m, k, n, percent, bits, f_in, rounding, r, signed, axis):
    full = matmul_op(np.random.default_rng(seed), m, k, n, relu=not signed)
    kw = dict(signed=signed, rounding=rounding, overflow_ratio=r)
    check_equivalences(full, f_in, bits, percent, axis, kw)


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 2), st.integers(1, 3), st.integers(1, 9),
       st.integers(1, 6), st.integers(1, 3), st.sampled_from([12.5, 20.0, 100.0]), st.booleans())
def test_embodiments_conv(seed, b, c, h, w, z, percent, relu):
    full = conv_op(np.random.default_rng(seed), b, c, h, w, z, relu)
    check_equivalences(full, 14, 8, percent, 2, dict(signed=not relu))      # sample along H


@pytest.mark.parametrize("shape", [(3, 17), (2, 3, 11, 5)])
def test_e2_at_100_percent_equals_e1(shape):
    full = np.random.default_rng(7).integers(-(2 ** 30), 2 ** 30, size=shape)
    r1 = run_e1(Recorder(full), 12, 8)
    r2 = run_e2(Recorder(full), 12, 8, 100, shape=shape)
    r4 = run_e4(Recorder(full), 12, 8, 100, shape=shape)
    for r in (r2, r4):
        np.testing.assert_array_equal(r.out, r1.out)
        assert r.f_out == r1.f_out and r.stats == r1.stats
    assert r4.op_calls == 1 and r4.items_computed == full.size     # nothing left to compute


def test_sampled_point_can_differ_from_full():
    # the one large value is not in the 12.5% sample (rows 0 and 8 of 16), so E2 picks a
    # finer point than E1 and that value saturates
    full = np.full((16, 2), 100, dtype=np.int64)
    full[3, 0] = 100000
    r1 = run_e1(Recorder(full), 0, 8)
    r2 = run_e2(Recorder(full), 0, 8, 12.5, shape=full.shape, axis=0)
    assert r1.f_out == -10 and r2.f_out == 0               # tops 16 and 6: s = 10 and 0
    assert not r1.sat.any() and r2.sat.sum() == 1 and r2.out[3, 0] == 127


def test_f_prev_passes_through_runners():
    zeros = np.zeros((4, 4), dtype=np.int64)
    assert run_e3(Recorder(zeros), 5, 8, f_prev=2).f_out == 2
    assert run_e1(Recorder(zeros), 5, 8).f_out == 5


# ------------------------------------------------------------------ E5 (Alg 2-E)

def test_e5_fig15_example_chooses_two_operations():
    """SPECS T2.1: in the transfer-bound case of fig. 15, E2 (2.35 ms) beats E4 (3.8 ms)."""
    full = matmul_op(np.random.default_rng(3), 16, 5, 4, relu=False)
    choice, r = run_e5(Recorder(full), 10, 8, 12.5, shape=full.shape, axis=0, t_prev=2.1, t_pre=2.0, t_store=15.7)
    assert choice.method == "e2" and round(choice.e2, 2) == 2.35 and round(choice.e4, 2) == 3.8
    r2 = run_e2(Recorder(full), 10, 8, 12.5, shape=full.shape, axis=0)
    np.testing.assert_array_equal(r.out, r2.out)
    assert r.items_computed == r2.items_computed and r.op_calls == 2


def test_e5_compute_bound_chooses_result_saving():
    """When recomputing costs more than moving the wide results (the source: "in the reverse
    case #3 and #4 can be shorter"), E4 wins, and the runner is E4's (one pass over each item)."""
    full = matmul_op(np.random.default_rng(4), 16, 5, 4, relu=True)
    choice, r = run_e5(Recorder(full), 10, 8, 20, shape=full.shape, axis=0, t_prev=2.1, t_pre=20.0, t_store=3.0,
                       signed=False)
    assert choice == Choice("e4", 0.2 * 20 + 2.1, 0.2 * 3.0 + 0.8 * 2.1)
    assert r.items_computed == full.size
    np.testing.assert_array_equal(r.out, run_e4(Recorder(full), 10, 8, 20, shape=full.shape, axis=0,
                                                signed=False).out)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2 ** 32 - 1), st.floats(0, 50), st.floats(0, 50), st.floats(0, 200),
       st.sampled_from([12.5, 20.0, 50.0, 100.0]), st.sampled_from([0, 1]))
def test_e5_picks_the_faster_and_returns_its_result(seed, t_prev, t_pre, t_store, percent, axis):
    full = matmul_op(np.random.default_rng(seed), 9, 6, 7, relu=False)
    c = cost_model(t_prev, t_pre, t_store, percent)
    choice, r = run_e5(Recorder(full), 12, 8, percent, shape=full.shape, axis=axis, t_prev=t_prev, t_pre=t_pre,
                       t_store=t_store)
    assert choice == Choice("e4" if c.e4 < c.e2 else "e2", c.e2, c.e4)
    assert min(choice.e2, choice.e4) == (choice.e4 if choice.method == "e4" else choice.e2)
    runner = run_e4 if choice.method == "e4" else run_e2
    ref = runner(Recorder(full), 12, 8, percent, shape=full.shape, axis=axis)
    np.testing.assert_array_equal(r.out, ref.out)
    np.testing.assert_array_equal(r.sat, ref.sat)
    assert (r.f_out, r.stats, r.items_computed, r.op_calls) == (ref.f_out, ref.stats, ref.items_computed,
                                                                ref.op_calls)


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from("abcdef"), st.tuples(st.lists(st.floats(0, 10), min_size=1, max_size=4),
                                                             st.lists(st.floats(0, 10), min_size=1, max_size=4),
                                                             st.sampled_from(["conv", "dense"])), min_size=1))
def test_select_e5_per_layer_and_per_type(layers):
    t2 = {k: v[0] for k, v in layers.items()}
    t4 = {k: v[1] for k, v in layers.items()}
    per_layer = select_e5(t2, t4)
    for k in layers:
        m2, m4 = math.fsum(t2[k]) / len(t2[k]), math.fsum(t4[k]) / len(t4[k])
        assert per_layer[k] == Choice("e4" if m4 < m2 else "e2", m2, m4)
    groups = {k: v[2] for k, v in layers.items()}
    per_type = select_e5(t2, t4, groups=groups)
    for g in set(groups.values()):
        members = [k for k in layers if groups[k] == g]
        m2 = math.fsum(per_layer[k].e2 for k in members) / len(members)
        m4 = math.fsum(per_layer[k].e4 for k in members) / len(members)
        for k in members:
            assert per_type[k] == Choice("e4" if m4 < m2 else "e2", m2, m4)


def test_select_e5_tie_goes_to_two_operations():
    assert select_e5({"l": 1.5}, {"l": [1.0, 2.0]})["l"] == Choice("e2", 1.5, 1.5)


def test_select_e5_type_can_overrule_a_layer():
    """Per type, one layer's large gain decides for the type's other layers."""
    t2 = {"conv1": 1.0, "conv2": 9.0, "bn1": 1.0}
    t4 = {"conv1": 1.2, "conv2": 3.0, "bn1": 4.0}
    assert [c.method for c in select_e5(t2, t4).values()] == ["e2", "e4", "e2"]
    by_type = select_e5(t2, t4, groups={"conv1": "conv", "conv2": "conv", "bn1": "bn"})
    assert [c.method for c in by_type.values()] == ["e4", "e4", "e2"]
    assert by_type["conv1"] == Choice("e4", 5.0, 2.1)


# ------------------------------------------------------------------ bad input

@pytest.mark.parametrize("call, message", [
    (lambda: determine(acquire(T22), 8, 8, overflow_ratio=1.0),
     "overflow_ratio = 1.0: must be a number in [0, 1)"),
    (lambda: determine(acquire(T22), 8, 8, overflow_ratio=-0.1),
     "overflow_ratio = -0.1: must be a number in [0, 1)"),
    (lambda: determine(acquire(T22), 8, 1), "bits = 1: must be an int in [2, 32]"),
    (lambda: determine(acquire(T22), 8, 33), "bits = 33: must be an int in [2, 32]"),
    (lambda: determine(acquire(T22), 8.0, 8), "f_in = 8.0: must be an int"),
    (lambda: determine(acquire(T22), 8, 8, f_min=5, f_max=4),
     "f_min = 5, f_max = 4: f_min must not exceed f_max"),
    (lambda: determine([1, 2], 8, 8), "stats: is a list: must be a Stats"),
    (lambda: convert(T22, 8, 5, 8, rounding="stochastic"),
     "rounding = 'stochastic': must be one of 'nearest_even', 'nearest_away', 'truncate'"),
    (lambda: convert([0.5], 8, 5, 8), "values: has dtype float64: must be integers"),
    (lambda: acquire([2 ** 62]), "values: value 4611686018427387904 is out of range"),
    (lambda: acquire(T22, bins=8), "bins = 8: a value has an MSB or LSB at bit 9"),
    (lambda: acquire(T22, bins=0), "bins = 0: must be an int in [1, 64]"),
    (lambda: acquire(T22).merge(acquire(T22, bins=12)), "other: has 12 bins: must have 64"),
    (lambda: Stats.from_histogram([3, 1], 2), "n = 2: must be an int >= sum(h_msb) = 4"),
    (lambda: sample_mask((4, -1), 50), "shape = (4, -1): must be a tuple of one or more ints"),
    (lambda: sample_mask((4, 4), 0), "percent = 0: must be a number in (0, 100]"),
    (lambda: sample_mask((4, 4), 150), "percent = 150: must be a number in (0, 100]"),
    (lambda: sample_mask((4, 4), 50, axis=2), "axis = 2: must be None or an int in [-2, 2)"),
    (lambda: sample_run(50, run=0), "run = 0: must be an int >= 1"),
    (lambda: cost_model(-1, 2, 3, 12.5), "t_prev = -1: must be a number in [0, inf)"),
    (lambda: run_e1(Recorder(np.zeros(3, dtype=np.int64)), 0, 8, overflow=0.1),
     "overflow: unknown keyword(s)"),
    (lambda: run_e1(Recorder(np.zeros(3)), 0, 8), "op result: has dtype float64"),
    (lambda: run_e2(lambda m: np.zeros((2, 2), dtype=np.int64), 0, 8, 50, shape=(2, 3)),
     "op result: has shape (2, 2): must be the output shape (2, 3)"),
    (lambda: run_e3("not callable", 0, 8), "op = 'not callable': must be callable"),
    (lambda: select_e5({"a": 1}, {"b": 1}), "t_e2, t_e4: layers ['a'] and ['b']: must be two non-empty"),
    (lambda: select_e5({"a": []}, {"a": 1}), "t_e2['a']: has no times"),
    (lambda: select_e5({"a": 1}, {"a": -2}), "t_e4['a'] = -2: must be a number in [0, inf)"),
    (lambda: select_e5({"a": 1}, {"a": 2}, groups={}), "groups: has no operation type for layer(s) a"),
    (lambda: run_e5(Recorder(np.zeros(3, dtype=np.int64)), 0, 8, 20, shape=(3,), t_prev=1, t_pre=1,
                    t_store=float("nan")), "t_store = nan: must be a number in [0, inf)"),
])
def test_bad_input(call, message):
    with pytest.raises(InputError, match=re.escape(message)) as info:
        call()
    assert "\n" not in str(info.value)


def test_module_api():
    from hlsnn.formats import radix_update
    assert set(fixed.__all__) >= {"Stats", "acquire", "determine", "convert"}
    assert set(radix_update.__all__) >= {"Result", "sample_mask", "run_e1", "run_e2", "run_e3", "run_e4",
                                         "cost_model", "Choice", "select_e5", "run_e5"}


def test_fixed_does_not_forward_the_update_names():
    """Sampling and E1-E5 live in hlsnn.formats.radix_update only (no forwarding layer)."""
    with pytest.raises(AttributeError):
        fixed.run_e1  # noqa: B018
