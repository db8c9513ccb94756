"""Tests of hlsnn.formats.shift.

Expected values come from the worked examples of the spec (SPECS section 1.5, T0.x, computed
by hand in the comments) or from brute force: ``all_codes`` below enumerates EVERY code
``(zero, e1, e2, s1, s2)`` of a format with Python ints, ``ref_scale_exponent`` searches the
scale exponent F with exact rationals, and ``ref_nearest`` takes the minimum error over all
distinct code values with exact integer arithmetic.
"""
import functools
import math
import re
import time
from bisect import bisect_left
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hlsnn.errors import InputError
from hlsnn.formats import shift, shift_codes
from hlsnn.formats.shift import ShiftTensor, levels, quantize_pot, quantize_twohot

TWOHOT_CONFIGS = [(eb, d) for eb in range(1, 5) for d in (0, 1, 3, 7)]
POT_CONFIGS = [(eb, 0) for eb in range(1, 6)]
ALL_CONFIGS = [("pot", eb, d) for eb, d in POT_CONFIGS] + \
              [("twohot", eb, d) for eb, d in TWOHOT_CONFIGS]


# ------------------------------------------------------------------ brute-force reference

def code_value(mode, code, delta):
    """Integer value of one code, straight from the formulas of the spec."""
    zero, e1, e2, s1, s2 = code
    if zero:
        return 0
    if mode == "pot":
        return (-1) ** s1 * 2 ** e1
    return (-1) ** s2 * (2 ** (e1 + delta) + (-1) ** s1 * 2 ** e2)


@functools.lru_cache(maxsize=None)
def all_codes(mode, eb, delta):
    """Every field combination (pot: only e2 = s2 = 0 is a valid code) with its value."""
    emax = 2 ** eb - 1
    e2s = range(emax + 1) if mode == "twohot" else [0]
    s2s = (0, 1) if mode == "twohot" else (0,)
    return [((z, e1, e2, s1, s2), code_value(mode, (z, e1, e2, s1, s2), delta))
            for z in (0, 1) for e1 in range(emax + 1) for e2 in e2s
            for s1 in (0, 1) for s2 in s2s]


@functools.lru_cache(maxsize=None)
def codebook(mode, eb, delta):
    """(sorted distinct values, value -> documented canonical code, max magnitude)."""
    canon = {}
    for code, v in all_codes(mode, eb, delta):
        if v not in canon or code < canon[v]:
            canon[v] = code
    canon[0] = (1, 0, 0, 0, 0)                   # value 0 is always the zero flag
    values = sorted(canon)
    return values, canon, max(abs(v) for v in values)


def ref_scale_exponent(amax, maxmag):
    """Largest integer F with amax <= maxmag * 2**-F, by stepping with exact rationals."""
    if amax == 0:
        return 0
    a = Fraction(float(amax))
    F = 0
    while a * Fraction(2) ** F > maxmag:
        F -= 1
    while a * Fraction(2) ** (F + 1) <= maxmag:
        F += 1
    return F


def ref_nearest(w, F, values):
    """Brute force: the value minimizing |w - v * 2**-F|, ties -> smaller |v|; its error."""
    a = Fraction(float(w)) * Fraction(2) ** F
    p, q = a.numerator, a.denominator
    best = min(values, key=lambda v: (abs(p - v * q), abs(v)))
    return best, abs(Fraction(float(w)) - Fraction(best) * Fraction(2) ** -F)


def slice_index(idx, axis):
    return () if axis is None else (idx[axis],)


def ref_slice_exponents(w, axis, maxmag):
    w = np.asarray(w, dtype=np.float64)
    amax = {}
    for idx in np.ndindex(w.shape):
        k = slice_index(idx, axis)
        amax[k] = max(amax.get(k, 0.0), abs(float(w[idx])))
    return {k: ref_scale_exponent(a, maxmag) for k, a in amax.items()}, amax


def quantize(mode, w, eb, delta, axis):
    if mode == "pot":
        return quantize_pot(w, eb, axis=axis)
    return quantize_twohot(w, eb, delta=delta, axis=axis)


def check_brute_force(mode, eb, delta, w, axis, q=None):
    """Check F, every chosen code and every error of ``quantize`` against brute force."""
    w = np.asarray(w, dtype=np.float64)
    q = quantize(mode, w, eb, delta, axis) if q is None else q
    values, canon, maxmag = codebook(mode, eb, delta)
    ax = None if axis is None else axis % w.ndim
    refF, amax = ref_slice_exponents(w, ax, maxmag)
    F = np.broadcast_to(q.scale_exponent, w.shape)
    cv = q.code_values()
    memo = {}
    for idx in np.ndindex(w.shape):
        f = int(F[idx])
        k = slice_index(idx, ax)
        assert f == refF[k], (idx, amax[k], f, refF[k])
        x = float(w[idx])
        if (x, f) not in memo:
            memo[x, f] = ref_nearest(x, f, values)
        best, err = memo[x, f]
        got = (int(q.zero[idx]), int(q.e1[idx]), int(q.e2[idx]), int(q.s1[idx]),
               int(q.s2[idx]))
        assert int(cv[idx]) == best, (mode, eb, delta, x, f, int(cv[idx]), best)
        assert got == canon[best], (mode, eb, delta, x, best, got, canon[best])
        assert abs(Fraction(x) - Fraction(int(cv[idx])) * Fraction(2) ** -f) == err
    return q


# ------------------------------------------------------------------ test data

def weight_sets(mode, eb, delta, seed):
    """2-D weight tensors: several distributions, exact ties, exact levels, zeros, tiny."""
    rng = np.random.default_rng(seed)
    values, _, maxmag = codebook(mode, eb, delta)
    mags = [v for v in values if v >= 0]
    out = [
        rng.normal(size=(5, 8)),
        rng.choice([-1.0, 1.0], size=(4, 9)) * (1 + 0.1 * rng.normal(size=(4, 9))),
        rng.uniform(-3, 3, size=(6, 5)),
        rng.normal(size=(4, 6)) * 10.0 ** rng.uniform(-8, 8, size=(4, 6)),
    ]
    w = rng.normal(size=(4, 7))
    w[1] = 0.0                                   # an all-zero row
    w[2, :3] = [1e-30, -1e-30, -0.0]             # tiny values quantize to zero
    w[:, 4] = 0.0                                # an all-zero column
    w[3, 5] = 0.0
    out.append(w)
    # Exact levels and exact midpoints between neighbouring levels at F = k: row 0 and
    # column 0 hold +-maxmag * 2**-k, so every slice (axis None, 0 or -1) has F = k.
    for k in (0, 3, -2):
        mids = [Fraction(a + b, 2) for a, b in zip(mags, mags[1:])]
        pool = [Fraction(m) for m in mags] + mids + [Fraction(1, 4), Fraction(3, 4)]
        picks = rng.integers(0, len(pool), size=(5, 9))
        t = np.array([[float(pool[i]) for i in row] for row in picks.tolist()])
        t = t * rng.choice([-1.0, 1.0], size=t.shape)
        t[0, :] = maxmag
        t[:, 0] = -maxmag
        out.append(np.ldexp(t, -k))
    return out


# ------------------------------------------------------------------ 1. brute-force optimality

@pytest.mark.parametrize("mode,eb,delta", ALL_CONFIGS)
def test_nearest_code_and_tie_break_match_brute_force(mode, eb, delta):
    for i, w in enumerate(weight_sets(mode, eb, delta, seed=eb * 100 + delta)):
        for axis in (None, 0, -1):
            check_brute_force(mode, eb, delta, w, axis)


def test_exact_midpoints_round_toward_zero():
    # pot, exp_bits=2: M = 8 and max 8 -> F = 0. Midpoints 3 (of 2, 4), 6 (of 4, 8) and
    # 0.5 (of 0, 1) take the smaller magnitude; 0.75 is nearer to 1.
    q = quantize_pot([8.0, 3.0, -3.0, 6.0, 0.5, 0.75], 2)
    assert q.scale_exponent.tolist() == [0]
    assert q.code_values().tolist() == [8, 2, -2, 4, 0, 1]
    assert q.zero.tolist() == [False, False, False, False, True, False]


def test_twohot_sign_with_negative_canonical_inner_value():
    # exp_bits=2, delta=0: magnitude 1 first appears (lexicographically) at e1=0, e2=1,
    # s1=1, i.e. inner 2**0 - 2**1 = -1, so +1 needs s2=1 and -1 needs s2=0.
    values, canon, _ = codebook("twohot", 2, 0)
    assert canon[1] == (0, 0, 1, 1, 1) and canon[-1] == (0, 0, 1, 1, 0)
    q = quantize_twohot([1.0, -1.0, 16.0, -0.0], 2)
    assert q.scale_exponent.tolist() == [0]
    assert q.code_values().tolist() == [1, -1, 16, 0]
    assert q.e1.tolist()[:2] == [0, 0] and q.e2.tolist()[:2] == [1, 1]
    assert q.s1.tolist()[:2] == [1, 1] and q.s2.tolist()[:2] == [1, 0]
    assert q.zero.tolist() == [False, False, False, True]
    assert (q.e1[3], q.e2[3], q.s1[3], q.s2[3]) == (0, 0, 0, 0)


# ------------------------------------------------------------------ 2. the F rule

def _near_boundaries(maxmag, rng, shape):
    w = rng.normal(size=shape)
    flat = w.reshape(-1)
    specials = [maxmag, np.nextafter(maxmag, np.inf), np.nextafter(maxmag, 0),
                maxmag * 2.0 ** -5, np.nextafter(maxmag * 2.0 ** 7, np.inf),
                np.nextafter(2.0 ** 20, 0), 2.0 ** -40, 1e-300, 3e5]
    pos = rng.choice(flat.size, size=len(specials), replace=False)
    flat[pos] = specials
    return w


@pytest.mark.parametrize("shape", [(7, 11), (4, 3, 3, 3)])
@pytest.mark.parametrize("axis", [None, 0, -1])
@pytest.mark.parametrize("mode,eb,delta", [("pot", 1, 0), ("pot", 4, 0), ("twohot", 2, 0),
                                           ("twohot", 3, 3), ("twohot", 5, 7)])
def test_scale_exponent_rule(mode, eb, delta, shape, axis):
    _, _, maxmag = codebook(mode, eb, delta)
    rng = np.random.default_rng(len(shape) * 10 + eb)
    w = _near_boundaries(maxmag, rng, shape)
    w[0] = 0.0                                   # an all-zero slice for axis=0
    q = quantize(mode, w, eb, delta, axis)
    ax = None if axis is None else axis % w.ndim
    want_shape = tuple(1 if ax is None or i != ax else n for i, n in enumerate(shape))
    assert q.scale_exponent.shape == want_shape and q.scale_exponent.dtype == np.int32
    assert q.axis == ax
    refF, amax = ref_slice_exponents(w, ax, maxmag)
    F = np.broadcast_to(q.scale_exponent, shape)
    for idx in np.ndindex(shape):
        k = slice_index(idx, ax)
        f = int(F[idx])
        assert f == refF[k]
        a = Fraction(amax[k])
        if a == 0:
            assert f == 0
        else:
            assert a <= maxmag * Fraction(2) ** -f           # fits without clipping
            assert a > maxmag * Fraction(2) ** -(f + 1)      # F + 1 would clip
    if ax == 0:
        assert int(q.scale_exponent.reshape(-1)[0]) == 0 and q.zero[0].all()


def test_scale_exponent_is_exact_next_to_powers_of_two():
    # pot, exp_bits=3: M = 2**7 = 128. 64 -> F = 1 exactly; one ulp above 64 -> F = 0.
    assert quantize_pot([64.0], 3).scale_exponent.tolist() == [1]
    assert quantize_pot([np.nextafter(64.0, np.inf)], 3).scale_exponent.tolist() == [0]
    assert quantize_pot([np.nextafter(64.0, 0)], 3).scale_exponent.tolist() == [1]
    # twohot, exp_bits=2, delta=1: M = 2**4 + 2**3 = 24; 24 -> 0, 12 -> 1, 12+ulp -> 0
    assert quantize_twohot([24.0], 2, delta=1).scale_exponent.tolist() == [0]
    assert quantize_twohot([12.0], 2, delta=1).scale_exponent.tolist() == [1]
    assert quantize_twohot([np.nextafter(12.0, 99)], 2, delta=1).scale_exponent.tolist() == [0]
    assert quantize_twohot([0.0, -0.0], 2).scale_exponent.tolist() == [0]


# ------------------------------------------------------------------ 3. worked examples (T0.x)

def tw(e1, e2, s1, s2, *, delta=0, eb=2):
    return int(ShiftTensor.from_codes("twohot", eb, [e1], [e2], [s1], [s2], [0], [0],
                                      delta=delta).code_values()[0])


def test_t0_1_value_64_is_exponent_6():
    t = ShiftTensor.from_codes("pot", 3, [6], [0], [0], [0], [False], [0])
    assert t.code_values().tolist() == [64] and t.dequantize().tolist() == [64.0]
    # 128 in the tensor forces F = 0 (M = 2**7), and then 64 is exactly exponent 6.
    q = quantize_pot([64.0, 128.0], 3)
    assert q.scale_exponent.tolist() == [0] and q.e1.tolist() == [6, 7]
    # alone, 64 fits at F = 1 (64 * 2 = 128 = M): exponent 7, same value
    q = quantize_pot([64.0], 3)
    assert q.scale_exponent.tolist() == [1] and q.e1.tolist() == [7]
    assert q.dequantize().tolist() == [64.0]


def test_t0_2_to_t0_4_twohot_values():
    assert tw(2, 0, 0, 0) == 5                   # T0.2: 4 + 1; x=3 -> 12 + 3 = 15
    assert 3 * tw(2, 0, 0, 0) == (3 << 2) + (3 << 0) == 15
    assert tw(2, 0, 0, 0, delta=1) == 9          # T0.3: 2**3 + 2**0; x=3 -> 27
    assert ((3 << 2) << 1) + 3 == 27 == 3 * tw(2, 0, 0, 0, delta=1)
    assert tw(3, 1, 1, 0) == 6                   # T0.4: 8 - 2; x=5 -> 40 - 10 = 30
    assert tw(3, 1, 1, 1) == -6                  # with s2=1 the accumulator subtracts
    assert -3 * tw(2, 0, 0, 0) == -15            # T0.6


def test_t0_5_pot_pair():
    t = ShiftTensor.from_codes("pot", 2, [3, 1], [0, 0], [0, 1], [0, 0], [0, 0], [0])
    assert t.code_values().tolist() == [8, -2]
    products = 5 * t.code_values()              # x = 5: C = 40, A = -10, SUMMED = 30
    assert products.tolist() == [40, -10] and int(products.sum()) == 30


def test_t0_7_dot_product_weights():
    # SPECS codes: 5 = (e1=2, e2=0, +, +), -6 = (s2=1, e1=2, e2=1, s1=0), 9 = (3, 0, +, +)
    spec = ShiftTensor.from_codes("twohot", 2, [2, 2, 3], [0, 1, 0], [0, 0, 0], [0, 1, 0],
                                  [0, 0, 0], [0])
    assert spec.code_values().tolist() == [5, -6, 9]
    x = np.array([1, 2, 3])
    assert int(x @ spec.code_values()) == 20
    # Quantizing the weights reproduces the values exactly at F = 0 (M = 16, 9 * 2 > 16),
    # with the canonical (lexicographically smallest) codes: 5 = 2**0 + 2**2,
    # 6 = 2**1 + 2**2, 9 = 2**0 + 2**3.
    q = quantize_twohot([5.0, -6.0, 9.0], 2)
    assert q.scale_exponent.tolist() == [0]
    assert q.code_values().tolist() == [5, -6, 9] and q.dequantize().tolist() == [5, -6, 9]
    assert q.e1.tolist() == [0, 1, 0] and q.e2.tolist() == [2, 2, 3]
    assert q.s1.tolist() == [0, 0, 0] and q.s2.tolist() == [0, 1, 0]
    assert int(x @ q.code_values()) == 20


# ------------------------------------------------------------------ 4. code values

@pytest.mark.parametrize("eb", [1, 2, 3, 4, 5])
def test_twohot_delta0_is_a_sum_of_two_pot_values(eb):
    emax = 2 ** eb - 1
    fields = [(e1, e2, s1, s2) for e1 in range(emax + 1) for e2 in range(emax + 1)
              for s1 in (0, 1) for s2 in (0, 1)]
    e1, e2, s1, s2 = (np.array(c) for c in zip(*fields))
    t = ShiftTensor.from_codes("twohot", eb, e1, e2, s1, s2, np.zeros(len(fields), bool), 0)
    want = [(-1) ** b * 2 ** a + (-1) ** (b ^ s) * 2 ** c for a, c, s, b in fields]
    assert t.code_values().tolist() == want
    assert t.code_values().dtype == np.int64


@pytest.mark.parametrize("mode,eb,delta", ALL_CONFIGS + [("twohot", 5, 7)])
def test_code_values_of_every_code(mode, eb, delta):
    codes = [c for c, _ in all_codes(mode, eb, delta) if c[0] == 0] + [(1, 0, 0, 0, 0)]
    z, e1, e2, s1, s2 = (np.array(c) for c in zip(*codes))
    t = ShiftTensor.from_codes(mode, eb, e1, e2, s1, s2, z, 0, delta=delta)
    assert t.code_values().tolist() == [code_value(mode, c, delta) for c in codes]


@pytest.mark.parametrize("mode,eb,delta", ALL_CONFIGS + [("twohot", 5, 7), ("twohot", 5, 0)])
def test_levels_are_the_distinct_code_values(mode, eb, delta):
    lv = levels(mode, eb, delta)
    assert lv.dtype == np.int64
    assert lv.tolist() == sorted({v for _, v in all_codes(mode, eb, delta)} | {0})


def test_bits_per_weight_and_attributes():
    q = quantize_pot(np.ones((2, 3)), 4, axis=-1)
    assert q.bits_per_weight == 6 and q.delta == 0 and q.mode == "pot" and q.exp_bits == 4
    assert q.shape == (2, 3) and q.axis == 1
    for name in ("e1", "e2", "s1", "s2"):
        assert getattr(q, name).dtype == np.uint8 and getattr(q, name).shape == (2, 3)
    assert q.zero.dtype == bool and not q.e2.any() and not q.s2.any()
    q = quantize_twohot(np.ones((2, 3)), 4, delta=2)
    assert q.bits_per_weight == 11 and q.delta == 2 and q.axis is None
    assert q.scale_exponent.shape == (1, 1)


def test_tensor_is_frozen_and_read_only():
    q = quantize_twohot([1.0, -2.0], 3)
    with pytest.raises(Exception):
        q.exp_bits = 4
    for name in ("e1", "e2", "s1", "s2", "zero", "scale_exponent"):
        with pytest.raises(ValueError):
            getattr(q, name)[0] = 1
    src = np.array([3, 1], dtype=np.uint8)
    t = ShiftTensor.from_codes("pot", 2, src, [0, 0], [0, 0], [0, 0], [0, 0], 0)
    src[0] = 0                                   # the tensor holds its own copy
    assert t.e1.tolist() == [3, 1] and t.scale_exponent.shape == (1,)


def test_dequantize_exact_extremes():
    # large and small scales stay exact: code * 2**-F with F far from 0
    q = quantize_twohot([3e300, -1e300, 1.0], 3)
    cv, F = q.code_values(), int(q.scale_exponent[0])
    assert [Fraction(v) for v in q.dequantize()] == [Fraction(int(c)) * Fraction(2) ** -F
                                                     for c in cv]
    q = quantize_pot([1e-300, 3e-301], 5)
    assert q.dequantize()[0] == 2.0 ** round(math.log2(1e-300))
    check_brute_force("pot", 5, 0, [1e-300, 3e-301], None, q)


# ------------------------------------------------------------------ 5. properties

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False,
                   allow_subnormal=False)


@st.composite
def cases(draw):
    mode = draw(st.sampled_from(shift.MODES))
    eb = draw(st.integers(1, 5))
    delta = 0 if mode == "pot" else draw(st.integers(0, 7))
    w = draw(hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1,
                                                     max_side=5), elements=finite))
    axis = draw(st.one_of(st.none(), st.integers(-w.ndim, w.ndim - 1)))
    return mode, eb, delta, w, axis


PROPS = settings(max_examples=150, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(c=cases())
def test_prop_dequantize_sign_bound_error(c):
    mode, eb, delta, w, axis = c
    q = quantize(mode, w, eb, delta, axis)
    values, _, maxmag = codebook(mode, eb, delta)
    mags = [v for v in values if v >= 0]
    F = np.broadcast_to(q.scale_exponent, w.shape)
    cv, deq = q.code_values(), q.dequantize()
    for idx in np.ndindex(w.shape):
        f, c_, x = int(F[idx]), int(cv[idx]), float(w[idx])
        exact = Fraction(c_) * Fraction(2) ** -f
        assert Fraction(float(deq[idx])) == exact                  # exactly code * 2**-F
        assert c_ == 0 or (c_ > 0) == (x > 0)                      # sign kept or zero
        assert abs(c_) <= maxmag                                   # |q| <= M * 2**-F
        a = abs(Fraction(x)) * Fraction(2) ** f                    # |w| at scale F
        assert a <= maxmag
        i = bisect_left(mags, a)
        lo, hi = (mags[i], mags[i]) if mags[i] == a else (mags[i - 1], mags[i])
        assert abs(a - abs(c_)) <= Fraction(hi - lo, 2)            # half the local gap
    if eb <= 3:
        check_brute_force(mode, eb, delta, w, axis, q)


@PROPS
@given(c=cases())
def test_prop_requantize(c):
    mode, eb, delta, w, axis = c
    q = quantize(mode, w, eb, delta, axis)
    deq = q.dequantize()
    q2 = quantize(mode, deq, eb, delta, axis)
    assert (q2.scale_exponent >= q.scale_exponent).all()
    same_f = np.broadcast_to(q2.scale_exponent == q.scale_exponent, w.shape)
    deq2 = q2.dequantize()
    if mode == "pot":
        # powers of two stay powers of two at a finer scale: always idempotent
        np.testing.assert_array_equal(deq2, deq)
    else:
        # two-hot: idempotent wherever F did not move (see the module Notes)
        np.testing.assert_array_equal(deq2[same_f], deq[same_f])
    # with F unchanged the codes themselves are identical
    for name in ("zero", "e1", "e2", "s1", "s2"):
        np.testing.assert_array_equal(getattr(q2, name)[same_f], getattr(q, name)[same_f])


def test_twohot_requantize_can_move_f():
    # exp_bits=2, delta=0, M=16: [8.5, 7] has F=0 (17 > 16); 8.5 is the midpoint of the
    # levels 8 and 9 -> 8, and 7 = 8 - 1 stays. Then max 8 gives F=1, and 14 is not a
    # two-hot value (neighbours 12 and 16, a tie) -> 12, i.e. 6.
    q = quantize_twohot([8.5, 7.0], 2)
    assert q.scale_exponent.tolist() == [0] and q.dequantize().tolist() == [8.0, 7.0]
    q2 = quantize_twohot(q.dequantize(), 2)
    assert q2.scale_exponent.tolist() == [1] and q2.dequantize().tolist() == [8.0, 6.0]


@PROPS
@given(c=cases())
def test_prop_sign_symmetry(c):
    mode, eb, delta, w, axis = c
    q = quantize(mode, w, eb, delta, axis)
    qn = quantize(mode, -w, eb, delta, axis)
    np.testing.assert_array_equal(qn.scale_exponent, q.scale_exponent)
    np.testing.assert_array_equal(qn.code_values(), -q.code_values())


# ------------------------------------------------------------------ 6. errors

BAD_PARAMETERS = [
    (dict(exp_bits=0), r"exp_bits = 0.*\[1, 5\]"),
    (dict(exp_bits=6), r"exp_bits = 6.*\[1, 5\]"),
    (dict(exp_bits=2.0), "exp_bits = 2.0"),
    (dict(exp_bits=True), "exp_bits = True"),
    (dict(delta=-1), r"delta = -1.*\[0, 7\]"),
    (dict(delta=8), r"delta = 8.*\[0, 7\]"),
    (dict(delta=1.0), "delta"),
    (dict(axis=2), r"axis = 2.*\[-2, 2\)"),
    (dict(axis=-3), "axis = -3"),
    (dict(axis=1.0), "axis = 1.0"),
]


@pytest.mark.parametrize("fn,kwargs,match",
                         [(quantize_twohot, k, m) for k, m in BAD_PARAMETERS] +
                         [(quantize_pot, k, m) for k, m in BAD_PARAMETERS if "delta" not in k])
def test_bad_parameters(fn, kwargs, match):
    args = dict(exp_bits=3)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match) as info:
        fn(np.ones((3, 4)), args.pop("exp_bits"), **args)
    assert isinstance(info.value, InputError)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("fn", [quantize_pot, quantize_twohot])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite(fn, bad):
    w = np.ones((3, 4))
    w[1, 2] = bad
    with pytest.raises(InputError, match=r"w: has 1 non-finite.*\(1, 2\)"):
        fn(w, 3)


@pytest.mark.parametrize("fn", [quantize_pot, quantize_twohot])
def test_bad_inputs(fn):
    with pytest.raises(InputError, match="0-d"):
        fn(3.0, 3)
    with pytest.raises(InputError, match="complex"):
        fn([1 + 2j], 3)
    with pytest.raises(InputError, match="float64"):
        fn(["a"], 3)


def _codes(**kw):
    args = dict(mode="twohot", exp_bits=2, e1=[1, 2], e2=[0, 3], s1=[0, 1], s2=[1, 0],
                zero=[0, 0], scale_exponent=[0])
    extra = {k: kw.pop(k) for k in ("delta", "axis") if k in kw}
    args.update(kw)
    return ShiftTensor.from_codes(**args, **extra)


@pytest.mark.parametrize("kwargs,match", [
    (dict(mode="log"), "mode = 'log'.*'pot', 'twohot'"),
    (dict(exp_bits=6), r"exp_bits = 6.*\[1, 5\]"),
    (dict(e1=[4, 0]), r"e1: value 4 is out of range.*\[0, 3\]"),
    (dict(e1=[-1, 0]), r"e1: value -1 is out of range"),
    (dict(e2=[0, 9]), r"e2: value 9 is out of range"),
    (dict(s1=[2, 0]), r"s1: value 2 is out of range.*\[0, 1\]"),
    (dict(s2=[0, -1]), r"s2: value -1"),
    (dict(zero=[0, 2]), r"zero: value 2"),
    (dict(e1=[1.5, 0]), "e1.*non-integer"),
    (dict(e1=["a", "b"]), "e1.*dtype"),
    (dict(e2=[0, 1, 2]), r"e2: has shape \(3,\).*\(2,\)"),
    (dict(e1=3, e2=0, s1=0, s2=0, zero=0), "e1: is 0-d"),
    (dict(zero=[1, 0]), "e1: has 1 nonzero value.*zero is set"),
    (dict(scale_exponent=[0, 0]), r"scale_exponent: has shape \(2,\).*\(1,\)"),
    (dict(scale_exponent=[2 ** 31]), "scale_exponent: value 2147483648 is out of range"),
    (dict(axis=1), r"axis = 1.*\[-1, 1\)"),
    (dict(delta=8), r"delta = 8"),
    (dict(mode="pot"), "e2: has 1 nonzero value.*'pot'"),
    (dict(mode="pot", e2=[0, 0], s2=[0, 0], delta=1), "delta = 1: must be 0 for mode 'pot'"),
    (dict(mode="pot", e2=[0, 0]), "s2: has 1 nonzero value.*'pot'"),
])
def test_from_codes_validation(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        _codes(**kwargs)
    assert isinstance(info.value, InputError)
    assert "\n" not in str(info.value)


def test_from_codes_accepts_valid_fields():
    t = _codes()
    # (e1=1, e2=0, s1=0, s2=1): -(2 + 1); (e1=2, e2=3, s1=1, s2=0): 4 - 8
    assert t.code_values().tolist() == [-3, -4]
    t = _codes(axis=-1, scale_exponent=[[3, -2]], e1=[[1, 2]], e2=[[0, 3]], s1=[[0, 1]],
               s2=[[True, False]], zero=[[False, False]])
    assert t.axis == 1 and t.dequantize().tolist() == [[-3 / 8, -16.0]]
    t = _codes(scale_exponent=np.int64(5))
    assert t.scale_exponent.tolist() == [5] and t.scale_exponent.dtype == np.int32


@pytest.mark.parametrize("args,match", [
    (("pot", 3, 1), "delta = 1: must be 0 for mode 'pot'"),
    (("twohot", 0), "exp_bits = 0"),
    (("twohot", 2, 8), "delta = 8"),
    (("both", 2), "mode = 'both'"),
])
def test_levels_validation(args, match):
    with pytest.raises(InputError, match=re.escape(match) if "'" in match else match):
        levels(*args)


# ------------------------------------------------------------------ 7. two-hot vs PoT

@pytest.mark.parametrize("eb", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("delta", [0, 1])
@pytest.mark.parametrize("axis", [None, 0])
def test_twohot_at_least_as_accurate_as_pot(eb, delta, axis):
    rng = np.random.default_rng(eb * 10 + delta)
    w = rng.choice([-1.0, 1.0], size=(16, 200)) * (0.5 + 0.15 * rng.normal(size=(16, 200)))
    w[:, :20] *= 1e-3                            # small weights too
    ep = np.abs(w - quantize_pot(w, eb, axis=axis).dequantize())
    et = np.abs(w - quantize_twohot(w, eb, delta=delta, axis=axis).dequantize())
    assert (et <= ep).all()
    assert np.mean(et ** 2) <= np.mean(ep ** 2)
    if eb >= 2:
        assert np.mean(et ** 2) < np.mean(ep ** 2)


def test_twohot_with_large_delta_can_lose_to_pot():
    # exp_bits=1, delta=3: two-hot magnitudes {0, 6, 7, 9, 10, 14, 15, 17, 18}, M = 18.
    # w = 1: F = 4 (16 <= 18), 16 is the midpoint of 15 and 17 -> 15, i.e. 15/16. PoT
    # (M = 2, F = 1) represents 1 exactly.
    assert levels("twohot", 1, 3).tolist()[9:] == [6, 7, 9, 10, 14, 15, 17, 18]
    assert quantize_pot([1.0], 1).dequantize().tolist() == [1.0]
    q = quantize_twohot([1.0], 1, delta=3)
    assert q.scale_exponent.tolist() == [4] and q.dequantize().tolist() == [15 / 16]


# ------------------------------------------------------------------ vectorization smoke

def test_one_million_weights():
    w = np.random.default_rng(0).standard_normal((1000, 1000))
    timings = {}
    for name, fn in [("pot", lambda: quantize_pot(w, 4, axis=0)),
                     ("twohot", lambda: quantize_twohot(w, 4, delta=1, axis=0))]:
        t0 = time.perf_counter()
        q = fn()
        timings[name] = time.perf_counter() - t0
        assert q.shape == (1000, 1000) and q.scale_exponent.shape == (1000, 1)
        deq = q.dequantize()
        assert np.isfinite(deq).all()
        assert np.abs(deq - w).max() <= np.abs(w).max() / 3      # PoT: relative error <= 1/3
    print(f"quantize 1M weights: {timings}")    # measured, not asserted


# ------------------------------------------------------------------ fast quantizer == reference

FIELDS = ("e1", "e2", "s1", "s2", "zero", "scale_exponent")


def assert_same_tensor(got, ref):
    """Field for field, dtype and bits (the reference validated every field)."""
    for name in FIELDS:
        g, r = getattr(got, name), getattr(ref, name)
        assert g.dtype == r.dtype and g.shape == r.shape, name
        np.testing.assert_array_equal(g, r, err_msg=name)
        assert not g.flags.writeable
    assert (got.mode, got.exp_bits, got.delta, got.axis) == (ref.mode, ref.exp_bits, ref.delta, ref.axis)


def edge_values(mode, eb, delta):
    """Every level, every midpoint between neighbours and the floats next to both (ties and
    the values just beside them), at F = 0 (the largest level is in the tensor, so F = 0),
    with zeros, signs, subnormals and values below the smallest level."""
    mags = shift_codes.table(mode, eb, delta).mags
    mids = (mags[:-1] + mags[1:]) / 2
    pts = np.concatenate([mags, mids])
    pts = np.concatenate([pts, np.nextafter(pts, np.inf), np.nextafter(pts, -np.inf)])
    pts = np.concatenate([pts, [0.0, -0.0, 5e-324, 2.2e-308, 1e-300, 0.25, 0.5, 0.75]])
    pts = pts[(pts >= 0) & (pts <= mags[-1])]
    return np.concatenate([pts, -pts, [mags[-1]]])


@pytest.mark.parametrize("mode,eb,delta", ALL_CONFIGS + [("twohot", 5, 0), ("twohot", 5, 7)])
def test_fast_quantizer_equals_reference_on_every_level_and_midpoint(mode, eb, delta):
    w = edge_values(mode, eb, delta)
    for axis in (None, 0):
        ref = shift._quantize_reference(mode, w, eb, delta, axis)
        got = shift._quantize(mode, w, eb, delta, axis)
        assert_same_tensor(got, ref)
        assert int(np.asarray(got.scale_exponent).ravel()[0]) == 0
    # the same values scaled to other F, and in many rows (one F per row)
    rows = np.stack([np.ldexp(w, s) for s in (-1080, -1030, -40, -3, 1, 17, 900)])
    for axis in (None, 0, 1):
        assert_same_tensor(shift._quantize(mode, rows, eb, delta, axis),
                           shift._quantize_reference(mode, rows, eb, delta, axis))


@pytest.mark.parametrize("mode,eb,delta", [("pot", 4, 0), ("twohot", 4, 0), ("twohot", 4, 3),
                                           ("twohot", 5, 7), ("pot", 1, 0), ("twohot", 1, 2)])
def test_fast_quantizer_equals_reference_on_random_tensors(mode, eb, delta):
    rng = np.random.default_rng([eb, delta, len(mode)])
    shapes = [(300, 257), (3, 70000), (70000,), (5, 4, 3, 3)]
    for shape in shapes:
        w = rng.standard_normal(shape) * np.exp(rng.uniform(-30, 30, size=shape))
        w[..., ::7] = 0.0
        w[..., 1::11] = -w[..., 1::11]
        w.reshape(-1)[::13] = np.round(w.reshape(-1)[::13])          # small integers: ties
        for axis in (None, 0, -1):
            assert_same_tensor(shift._quantize(mode, w, eb, delta, axis),
                               shift._quantize_reference(mode, w, eb, delta, axis))
    # saturating-size and subnormal slices, a non-contiguous view, and an all-zero tensor
    w = rng.standard_normal((64, 64))
    w[0] *= 1e300
    w[1] *= 1e-310
    w[2] = 0.0
    for src in (w, w.T, w[::2, ::3], np.zeros((3, 4))):
        for axis in (None, 0, 1):
            assert_same_tensor(shift._quantize(mode, src, eb, delta, axis),
                               shift._quantize_reference(mode, src, eb, delta, axis))


any_float = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=True)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mode=st.sampled_from(shift.MODES), eb=st.integers(1, 5), delta=st.integers(0, 7),
       w=hnp.arrays(np.float64, hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=9),
                    elements=any_float), axis=st.integers(-1, 0) | st.none())
def test_prop_fast_quantizer_equals_reference(mode, eb, delta, w, axis):
    delta = 0 if mode == "pot" else delta
    assert_same_tensor(shift._quantize(mode, w, eb, delta, axis),
                       shift._quantize_reference(mode, w, eb, delta, axis))


@pytest.mark.parametrize("mode, delta", [("pot", 0), ("twohot", 0), ("twohot", 3)])
def test_encode_rebuilds_the_quantizer_codes(mode, delta):
    """encode(code_values, F) writes the canonical codes: field for field those the quantizer wrote."""
    w = np.random.default_rng(7).normal(0, 1, (9, 13)) * np.logspace(-3, 0, 13)
    q = shift.quantize_pot(w, 3, axis=0) if mode == "pot" else shift.quantize_twohot(w, 3, delta=delta, axis=0)
    t = shift.encode(q.code_values(), q.scale_exponent, mode, 3, delta=delta, axis=0)
    for f in ("e1", "e2", "s1", "s2", "zero", "scale_exponent"):
        np.testing.assert_array_equal(getattr(t, f), getattr(q, f), err_msg=f)


def test_encode_refuses_a_value_off_the_levels():
    with pytest.raises(InputError, match="values: 7 is no code value of pot"):
        shift.encode([4, 7], 0, "pot", 3)
    with pytest.raises(InputError, match="values: must be integers"):
        shift.encode([0.5], 0, "twohot", 3)
