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

int64_t hlsnn_sparse_post(const int64_t *t, int64_t HW, const int64_t *shift, int mode, int64_t z0, int64_t z1,
                          int64_t *out) {
  int64_t sat = 0;
  for (int64_t z = z0; z < z1; ++z) {
    const int64_t s = shift[z];
    const int64_t *tz = t + z * HW;
    int64_t *oz = out + z * HW;
    for (int64_t i = 0; i < HW; ++i) {
      const int64_t v = tz[i];
      if (v >= LIMIT53 || v <= -LIMIT53)
        return -1;
      oz[i] = srs8(v, s, mode, &sat);
    }
  }
  return sat;
}
