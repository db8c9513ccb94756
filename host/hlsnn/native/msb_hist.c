/* msb_hist.c: the compiled twin of hlsnn.primitives.msb_histogram (the statistics unit of
 * every engine's output stage), for int64 arrays.
 *
 * The numpy code is the specification; tests/test_primitives.py holds the two equal. Per
 * value v: u = v ^ (v >> 63) (~v for v < 0, else v); values with u == 0 (v in {0, -1}) are
 * not counted; else counts[k] += 1, k the index of u's highest set bit (0..62). The
 * counts are int64 (no saturation here: the caller saturates at 2**32 - 1 and checks the
 * bins). A function counts values [0, n), so that Python threads can count parts at once
 * (ctypes releases the GIL during the call).
 */
#include <stdint.h>

/* The index of u's highest set bit, u != 0. */
static inline int msb64(uint64_t u) {
#if defined(__GNUC__) || defined(__clang__)
  return 63 - __builtin_clzll(u);
#else
  int k = 0;
  while (u >>= 1)
    ++k;
  return k;
#endif
}

void hlsnn_msb_counts(const int64_t *v, int64_t n, int64_t *counts /* 64 */) {
  int64_t c[64] = {0};
  for (int64_t i = 0; i < n; ++i) {
    /* arithmetic shift of a negative value: implementation-defined in C99, arithmetic in GCC
     * and Clang; spelled as a mask so that it does not depend on it */
    const uint64_t x = (uint64_t)v[i];
    const uint64_t u = x ^ (0 - (x >> 63));
    if (u)
      c[msb64(u)] += 1;
  }
  for (int k = 0; k < 64; ++k)
    counts[k] = c[k];
}
