// hlsnn bit-exact primitives, shared by every engine's kernel.
// Each function is the twin of the function with the same snake_case name in
// host/hlsnn/primitives.py, whose docstring is the specification.
#ifndef HLSNN_PRIMITIVES_H_
#define HLSNN_PRIMITIVES_H_

#include <ap_int.h>

namespace hlsnn {

// Rounding codes (primitives.ROUNDING_CODES).
constexpr int kNearestEven = 0;
constexpr int kNearestAway = 1;
constexpr int kTruncate = 2;

// Width of exponent arithmetic: exponents (<= 8 bits) plus sums, MSB indices and shifts.
typedef ap_int<12> exp_wide_t;

// msb_index(): floor(log2(u)) for u > 0, -1 for u == 0.
template <int W>
inline exp_wide_t MsbIndex(ap_uint<W> u) {
#pragma HLS INLINE
  exp_wide_t r = -1;
MsbScan:
  for (int i = 0; i < W; ++i) {
#pragma HLS UNROLL
    if (u[i]) r = i;
  }
  return r;
}

// unsigned_msb(): the most significant bit that differs from the sign bit (SPECS P0.3):
// msb_index(v) for v >= 0, msb_index(~v) for v < 0, -1 for v in {0, -1}.
template <int W>
inline exp_wide_t UnsignedMsb(ap_int<W> v) {
#pragma HLS INLINE
  const ap_uint<W> u = (ap_uint<W>)(v < 0 ? ap_int<W>(~v) : v);
  return MsbIndex<W>(u);
}

// |v| of a signed WI-bit value as an unsigned WI-bit value (exact, also for -2^(WI-1)).
template <int WI>
inline ap_uint<WI> AbsValue(ap_int<WI> v) {
#pragma HLS INLINE
  ap_int<WI + 1> w = v;
  return (ap_uint<WI>)(w < 0 ? ap_int<WI + 1>(-w) : w);
}

// shift_round_sat(): round(v / 2^s) saturated to WO signed bits; s < 0 is a left shift.
template <int WI, int WO>
inline ap_int<WO> ShiftRoundSat(ap_int<WI> v, exp_wide_t s, int rounding, bool &sat) {
#pragma HLS INLINE
  const ap_int<WI + WO + 2> kMax = (ap_int<WI + WO + 2>(1) << (WO - 1)) - 1;
  const ap_int<WI + WO + 2> kMin = -(ap_int<WI + WO + 2>(1) << (WO - 1));
  ap_int<WI + WO + 2> t;
  if (s > 0) {
    // Shifts beyond WI+1 give the same result as WI+1 (see the Python Notes).
    const int sr = (s > WI + 1) ? WI + 1 : (int)s;
    const ap_int<WI + 3> vw = v;
    ap_int<WI + 3> q = vw >> sr;                            // floor
    if (rounding != kTruncate) {
      const ap_uint<WI + 3> mask = (ap_uint<WI + 3>(1) << sr) - 1;
      const ap_uint<WI + 3> rem = ((ap_uint<WI + 3>)vw) & mask;
      const ap_uint<WI + 3> half = ap_uint<WI + 3>(1) << (sr - 1);
      bool up = rem > half;
      if (rem == half) up = (rounding == kNearestEven) ? (bool)q[0] : (v >= 0);
      if (up) q = q + 1;
    }
    t = q;
  } else {
    const int ls = (-s > WO) ? WO : (int)(-s);
    t = ap_int<WI + WO + 2>(v) << ls;                        // exact in WI+WO+2 bits
  }
  sat = (t > kMax) || (t < kMin);
  if (t > kMax) t = kMax;
  if (t < kMin) t = kMin;
  return (ap_int<WO>)t;
}

// Saturating add of two W-bit signed values into W bits.
template <int W>
inline ap_int<W> AddSat(ap_int<W> a, ap_int<W> b) {
#pragma HLS INLINE
  const ap_int<W + 1> kMax = (ap_int<W + 1>(1) << (W - 1)) - 1;
  const ap_int<W + 1> kMin = -(ap_int<W + 1>(1) << (W - 1));
  ap_int<W + 1> t = ap_int<W + 1>(a) + ap_int<W + 1>(b);
  if (t > kMax) t = kMax;
  if (t < kMin) t = kMin;
  return (ap_int<W>)t;
}

// isqrt(): floor(sqrt(d)), digit by digit, one result bit per iteration.
inline ap_uint<32> Isqrt(ap_uint<64> d) {
  ap_uint<64> rem = d;
  ap_uint<64> root = 0;
  ap_uint<64> bit = ap_uint<64>(1) << 62;
IsqrtBits:
  for (int i = 0; i < 32; ++i) {
#pragma HLS PIPELINE II = 1
    if (rem >= root + bit) {
      rem -= root + bit;
      root = (root >> 1) + bit;
    } else {
      root = root >> 1;
    }
    bit = bit >> 2;
  }
  return (ap_uint<32>)root;
}

}  // namespace hlsnn

#endif  // HLSNN_PRIMITIVES_H_
