"""hlsnn.primitives against independent references (Python integers, math.isqrt, exact
fractions) and against their C++ twins in hls/include/hlsnn/primitives.h, bit for bit."""
import collections
import ctypes
import math
import subprocess
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from hlsnn import csim
from hlsnn.paths import HLS_INCLUDE
from hlsnn.primitives import (ROUNDING_CODES, isqrt, msb_histogram, msb_index, saturate, shift_round_sat,
                              unsigned_msb)


def ref_shift_round_sat(v, s, bits, rounding):
    """Exact rational reference of SPECS P0.5."""
    q = Fraction(v, 1) / Fraction(2) ** s if s >= 0 else Fraction(v * 2 ** (-s))
    fl = math.floor(q)
    frac = q - fl
    if rounding == "truncate" or frac == 0:
        t = fl
    elif frac > Fraction(1, 2):
        t = fl + 1
    elif frac < Fraction(1, 2):
        t = fl
    elif rounding == "nearest_even":
        t = fl + (fl & 1)
    else:  # nearest_away
        t = fl + 1 if v > 0 else fl
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return min(max(t, lo), hi), not lo <= t <= hi


@pytest.mark.parametrize("rounding", list(ROUNDING_CODES))
@settings(max_examples=300, deadline=None)
@given(v=st.integers(-(1 << 47), (1 << 47) - 1), s=st.integers(-70, 70), bits=st.integers(2, 32))
def test_shift_round_sat_matches_exact_reference(rounding, v, s, bits):
    t, sat = shift_round_sat(np.array([v]), np.array([s]), bits, rounding)
    assert (int(t[0]), bool(sat[0])) == ref_shift_round_sat(v, s, bits, rounding)


def test_shift_round_sat_ties_spelled_out():
    # 2.5 -> 2 (even) / 3 (away) / 2 (floor); -2.5 -> -2 / -3 / -3; 3.5 -> 4 / 4 / 3
    v = np.array([5, -5, 7, -7])
    assert shift_round_sat(v, 1, 8, "nearest_even")[0].tolist() == [2, -2, 4, -4]
    assert shift_round_sat(v, 1, 8, "nearest_away")[0].tolist() == [3, -3, 4, -4]
    assert shift_round_sat(v, 1, 8, "truncate")[0].tolist() == [2, -3, 3, -4]


def test_msb_index_and_isqrt_against_python_ints():
    rng = np.random.default_rng(1)
    u = np.concatenate([np.arange(0, 4100), rng.integers(1, 1 << 62, 5000),
                        (1 << np.arange(0, 62)) - 1, 1 << np.arange(0, 62), (1 << np.arange(1, 62)) + 1])
    assert msb_index(u).tolist() == [int(x).bit_length() - 1 for x in u]
    assert isqrt(u).tolist() == [math.isqrt(int(x)) for x in u]
    # values below 2**53 alone (the exponent-field path) and next to 2**63 (the frexp path, whose
    # float64 rounds INT64_MAX up to 2**63)
    small = np.concatenate([np.arange(0, 4100), rng.integers(1, 1 << 53, 5000), (1 << np.arange(0, 54)) - 1])
    assert msb_index(small).tolist() == [int(x).bit_length() - 1 for x in small]
    top = np.array([2 ** 63 - 1, 2 ** 63 - 512, 2 ** 63 - 513, 2 ** 62, 2 ** 53, 2 ** 53 + 1], np.int64)
    assert msb_index(top).tolist() == [int(x).bit_length() - 1 for x in top]
    v = np.concatenate([-top - 1, top, rng.integers(-(1 << 40), 1 << 40, 1000)])
    assert unsigned_msb(v).tolist() == [int(x if x >= 0 else ~x).bit_length() - 1 for x in v]
    assert saturate([300, -300, 5], 8).tolist() == [127, -128, 5]


SHIM = r"""
#include <stdint.h>
#include "hlsnn/primitives.h"
#include "hlsnn/stats.h"
extern "C" {
void srs48_16(const int64_t* v, const int32_t* s, int rounding, int64_t* out, int32_t* sat, int n) {
  for (int i = 0; i < n; ++i) { bool f; ap_int<48> x = v[i];
    out[i] = (int64_t)hlsnn::ShiftRoundSat<48, 16>(x, (hlsnn::exp_wide_t)s[i], rounding, f); sat[i] = f; } }
void srs16_40(const int64_t* v, const int32_t* s, int rounding, int64_t* out, int32_t* sat, int n) {
  for (int i = 0; i < n; ++i) { bool f; ap_int<16> x = v[i];
    out[i] = (int64_t)hlsnn::ShiftRoundSat<16, 40>(x, (hlsnn::exp_wide_t)s[i], rounding, f); sat[i] = f; } }
void msb48(const int64_t* v, int64_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = (int64_t)hlsnn::MsbIndex<48>((ap_uint<48>)v[i]); }
void umsb40(const int64_t* v, int64_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = (int64_t)hlsnn::UnsignedMsb<40>((ap_int<40>)v[i]); }
// the histogram unit: values fed four lanes at a time (the last group partly invalid), then
// a saturation check from a preset counter
void hist40(const int64_t* v, int n, uint32_t preset, int64_t* out) {
  hlsnn::stat_count_t h[40];
  hlsnn::MsbHistogramClear<40>(h);
  h[0] = preset;
  for (int i = 0; i < n; i += 4) { ap_int<40> q[4]; bool ok[4];
    for (int j = 0; j < 4; ++j) { ok[j] = i + j < n; q[j] = ok[j] ? (ap_int<40>)v[i + j] : ap_int<40>(0); }
    hlsnn::MsbHistogramAdd<40, 4, 40>(h, q, ok); }
  for (int k = 0; k < 40; ++k) out[k] = (int64_t)h[k]; }
void isqrt64(const int64_t* v, int64_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = (int64_t)hlsnn::Isqrt((ap_uint<64>)(uint64_t)v[i]); }
void addsat24(const int64_t* a, const int64_t* b, int64_t* out, int n) {
  for (int i = 0; i < n; ++i) out[i] = (int64_t)hlsnn::AddSat<24>((ap_int<24>)a[i], (ap_int<24>)b[i]); }
}
"""


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    d = tmp_path_factory.mktemp("twin")
    (d / "shim.cpp").write_text(SHIM)
    lib = d / "libshim.so"
    subprocess.run([csim.compiler(), "-std=c++14", "-O1", "-fPIC", "-shared", f"-I{HLS_INCLUDE}",
                    f"-isystem{csim.ap_types_dir()}", str(d / "shim.cpp"), "-o", str(lib)], check=True)
    return ctypes.CDLL(str(lib))


def _p(a):
    return a.ctypes.data_as(ctypes.c_void_p)


@pytest.mark.csim
@pytest.mark.parametrize("rounding", list(ROUNDING_CODES))
def test_cpp_shift_round_sat_is_bit_exact(twin, rounding):
    rng = np.random.default_rng(ROUNDING_CODES[rounding])
    for fn, wi, wo in ((twin.srs48_16, 48, 16), (twin.srs16_40, 16, 40)):
        lo, hi = -(1 << (wi - 1)), (1 << (wi - 1))
        v = np.concatenate([rng.integers(lo, hi, 20000), [lo, hi - 1, 0, -1, 1],
                            rng.integers(-64, 64, 2000)]).astype(np.int64)
        s = np.concatenate([rng.integers(-60, 61, 20000), [wi, wi, 0, wi + 1, -wo],
                            rng.integers(-3, 8, 2000)]).astype(np.int32)
        out = np.zeros_like(v)
        sat = np.zeros(v.size, np.int32)
        fn(_p(v), _p(s), ROUNDING_CODES[rounding], _p(out), _p(sat), v.size)
        t, f = shift_round_sat(v, s, wo, rounding)
        np.testing.assert_array_equal(out, t)
        np.testing.assert_array_equal(sat.astype(bool), f)


@pytest.mark.csim
def test_cpp_msb_isqrt_addsat_are_bit_exact(twin):
    rng = np.random.default_rng(7)
    v = np.concatenate([rng.integers(0, 1 << 48, 5000), np.arange(0, 300), 1 << np.arange(48)]).astype(np.int64)
    out = np.zeros_like(v)
    twin.msb48(_p(v), _p(out), v.size)
    np.testing.assert_array_equal(out, msb_index(v))
    d = np.concatenate([rng.integers(0, 1 << 58, 5000), np.arange(0, 300), (1 << np.arange(58)) - 1]).astype(np.int64)
    out = np.zeros_like(d)
    twin.isqrt64(_p(d), _p(out), d.size)
    np.testing.assert_array_equal(out, isqrt(d))
    a = rng.integers(-(1 << 23), 1 << 23, 5000).astype(np.int64)
    b = rng.integers(-(1 << 23), 1 << 23, 5000).astype(np.int64)
    out = np.zeros_like(a)
    twin.addsat24(_p(a), _p(b), _p(out), a.size)
    np.testing.assert_array_equal(out, saturate(a + b, 24))


def test_unsigned_msb_and_histogram_against_python_ints():
    rng = np.random.default_rng(2)
    v = np.concatenate([np.arange(-3000, 3000), rng.integers(-(1 << 62), 1 << 62, 5000),
                        1 << np.arange(62), -(1 << np.arange(62)), -(1 << np.arange(62)) - 1])
    # the bits of a signed value beyond its sign: bit_length of v, or of ~v = -v - 1 when negative
    ref = [(int(x) if x >= 0 else -int(x) - 1).bit_length() - 1 for x in v]
    assert unsigned_msb(v).tolist() == ref
    h = msb_histogram(v, 63)
    assert h.tolist() == [sum(1 for r in ref if r == k) for k in range(63)]


@pytest.mark.csim
def test_cpp_unsigned_msb_and_histogram_are_bit_exact(twin):
    rng = np.random.default_rng(8)
    v = np.concatenate([rng.integers(-(1 << 39), 1 << 39, 5000), np.arange(-300, 300), 1 << np.arange(39),
                        -(1 << np.arange(40)), (1 << np.arange(39)) - 1, [(1 << 39) - 1, -(1 << 39)]]).astype(np.int64)
    out = np.zeros_like(v)
    twin.umsb40(_p(v), _p(out), v.size)
    np.testing.assert_array_equal(out, unsigned_msb(v))
    for n in (v.size, 4998, 1, 0):
        h = np.zeros(40, np.int64)
        twin.hist40(_p(v), n, ctypes.c_uint32(0), _p(h))
        np.testing.assert_array_equal(h, msb_histogram(v[:n], 40))
    # saturation: bin 0 (values 1 and -2) preset just below 2**32 - 1
    ones = np.array([1, -2, 1, 1, 3], np.int64)
    h = np.zeros(40, np.int64)
    twin.hist40(_p(ones), ones.size, ctypes.c_uint32((1 << 32) - 3), _p(h))
    assert h[0] == (1 << 32) - 1 and h[1] == 1


@pytest.mark.parametrize("compiled_min", [0, 10 ** 12])
def test_msb_histogram_equals_counting_unsigned_msb_one_by_one(compiled_min, monkeypatch):
    """msb_histogram, by its compiled twin (native/msb_hist.c, in threads) and by numpy, against
    Python's bit_length on every value: around 2**53, the extremes of int64, 0 and -1, bins
    just wide enough, wider than 64, too narrow (the error), and empty input."""
    import hlsnn.primitives as prim
    from hlsnn import native
    monkeypatch.setattr(prim, "_COMPILED_MIN", compiled_min)
    monkeypatch.setenv("HLSNN_NATIVE_THREADS", "2")
    if compiled_min == 0 and native.enabled() and native.c_compiler():
        assert prim._msb_counts_compiled(np.array([5, -7], np.int64)).tolist()[2] == 2
    rng = np.random.default_rng(19)
    edges = [0, -1, 1, -2, (1 << 53) - 1, 1 << 53, -(1 << 53), -(1 << 53) - 1, (1 << 62), -(1 << 63), (1 << 63) - 1]
    for extra in ([], edges[:4], edges[:5], edges):
        for hi in (1 << 10, 1 << 40, 1 << 62):
            v = np.concatenate([rng.integers(-hi, hi, 3000), np.array(extra, np.int64)]).astype(np.int64)
            v = np.concatenate([v, rng.integers(-hi, hi, 300000)]) if hi == 1 << 40 else v      # parts in threads
            ref = [(int(x) if x >= 0 else -int(x) - 1).bit_length() - 1 for x in v]
            need = max(ref) + 1
            count = collections.Counter(ref)
            for bins in (need, need + 3, 64, 70):
                h = msb_histogram(v, bins)
                assert h.dtype == np.int64
                assert h.tolist() == [count.get(k, 0) for k in range(bins)]
            if need > 1:
                with pytest.raises(ValueError, match="outside"):
                    msb_histogram(v, need - 1)
    assert msb_histogram(np.array([], np.int64), 5).tolist() == [0] * 5
    assert msb_histogram(np.array([0, -1, 0]), 3).tolist() == [0, 0, 0]
