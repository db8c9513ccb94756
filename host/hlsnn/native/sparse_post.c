/* sparse_post.c: the compiled twin of rule 5 of hlsnn.engines.sparse_cluster.emulator
 * (postprocess: y = shift_round_sat(t, shift[z], 8), the saturations counted), for int64
 * values t (Z, HW) with one shift per channel z.
 *
 * The numpy code is the specification (postprocess's float64 path, itself equal to
 * postprocess_reference's integer shift_round_sat); tests/engines/sparse_cluster/
 * test_sparse_post.py holds them equal. That float path is exact while |t| < 2**53, so this
 * function handles only such values: it returns -1 at the first value beyond (the caller then
 * takes the float path), else the number of saturated outputs. Rounding modes: 0
 * nearest_even, 1 nearest_away, 2 truncate. A function handles channels [z0, z1), so that
 * Python threads can take parts at once (ctypes releases the GIL during the call).
 */
#include <stdint.h>

#define LIMIT53 ((int64_t)1 << 53)

/* hlsnn.primitives.shift_round_sat(v, s, 8, mode) for |v| < 2**53; *sat counts saturation */
static inline int64_t srs8(int64_t v, int64_t s, int mode, int64_t *sat) {
  if (s > 0) {
    const int sr = s > 63 ? 63 : (int)s;
    int64_t q = v >> sr; /* arithmetic in GCC and Clang: floor(v / 2**sr) */
    if (mode != 2) {
      const uint64_t rem = (uint64_t)v - ((uint64_t)q << sr);
      const uint64_t half = (uint64_t)1 << (sr - 1);
      int up = rem > half;
      if (rem == half)
        up = mode == 0 ? (int)(q & 1) : v >= 0;
      q += up;
    }
    if (q > 127 || q < -128) {
      *sat += 1;
      return q > 127 ? 127 : -128;
    }
    return q;
  }
  /* a left shift by -s: v * 2**-s saturates unless it is within [-128, 127] */
  const int64_t ls = -s;
  if (v == 0)
    return 0;
  if (ls >= 8 || v > (127 >> ls) || v < -(128 >> ls)) {
    *sat += 1;
    return v > 0 ? 127 : -128;
  }
  return (int64_t)((uint64_t)v << ls);
}

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif

/* one channel's row with 1 <= s <= 62 and every |v| < 2**53 (checked by the caller): srs8's
 * right shift without branches, one function per rounding mode (ROUND 0: truncate), so that
 * each loop vectorizes (the tie bit as an int64 variable: written into the expression, GCC did
 * not vectorize nearest_even); returns the saturations */
#define ROW_RIGHT(NAME, ROUND, TIE)                                                               \
  VEC_CLONES static int64_t NAME(const int64_t *tz, int64_t HW, int64_t s, int64_t *oz) {        \
    const int64_t half = (int64_t)1 << (s - 1);                                                 \
    int64_t ns = 0;                                                                             \
    for (int64_t i = 0; i < HW; ++i) {                                                          \
      const int64_t v = tz[i];                                                                  \
      int64_t q = v >> s;                                                                       \
      const int64_t rem = (int64_t)((uint64_t)v - ((uint64_t)q << s));                          \
      const int64_t tie = (TIE);                                                                \
      q += (ROUND) * ((int64_t)(rem > half) | ((int64_t)(rem == half) & tie));                  \
      ns += (q > 127) | (q < -128);                                                             \
      q = q > 127 ? 127 : q;                                                                    \
      oz[i] = q < -128 ? -128 : q;                                                              \
    }                                                                                           \
    return ns;                                                                                  \
  }
ROW_RIGHT(row_even, 1, q & 1)
ROW_RIGHT(row_away, 1, (int64_t)(v >= 0))
ROW_RIGHT(row_trunc, 0, 0)

static int64_t row_right(const int64_t *tz, int64_t HW, int64_t s, int mode, int64_t *oz) {
  return mode == 0 ? row_even(tz, HW, s, oz) : (mode == 1 ? row_away(tz, HW, s, oz) : row_trunc(tz, HW, s, oz));
}

/* whether every value of a row is within (-2**53, 2**53) */
VEC_CLONES static int row_in_range(const int64_t *tz, int64_t HW) {
  int64_t lo = 0, hi = 0;
  for (int64_t i = 0; i < HW; ++i) {
    lo = tz[i] < lo ? tz[i] : lo;
    hi = tz[i] > hi ? tz[i] : hi;
  }
  return hi < LIMIT53 && lo > -LIMIT53;
}

int64_t hlsnn_sparse_post(const int64_t *t, int64_t HW, const int64_t *shift, int mode, int64_t z0, int64_t z1,
                          int64_t *out) {
  int64_t sat = 0;
  for (int64_t z = z0; z < z1; ++z) {
    const int64_t s = shift[z];
    const int64_t *tz = t + z * HW;
    int64_t *oz = out + z * HW;
    if (s >= 1 && s <= 62) {
      if (!row_in_range(tz, HW))
        return -1;
      sat += row_right(tz, HW, s, mode, oz);
      continue;
    }
    for (int64_t i = 0; i < HW; ++i) {
      const int64_t v = tz[i];
      if (v >= LIMIT53 || v <= -LIMIT53)
        return -1;
      oz[i] = srs8(v, s, mode, &sat);
    }
  }
  return sat;
}
