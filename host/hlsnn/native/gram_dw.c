/* gram_dw.c: the exact Gram matrices of a depthwise convolution's patches, every channel in one
 * call, for the GPTQ weight fit of hlsnn.deploy.shift_fit (_grams: the float64 products
 * r.T @ r of each group's im2col rows are the specification; tests/deploy/test_shift_fit.py
 * holds them equal).
 *
 * hlsnn_gram_dw_i8(x, H, W, C, kh, kw, sh, sw, dh, dw, top, left, oh, ow, r0, r1, gram, sums):
 * x (B, H, W, C) int8, NHWC; output pixels r = (b, oy, ox) in [r0, r1) of an oh x ow map; tap
 * k = ky * kw + kx of pixel r reads x[b, oy*sh + ky*dh - top, ox*sw + kx*dw - left, c] (0
 * outside the map). For every channel c (one group of a depthwise layer, whose patch is its
 * K = kh * kw taps) gram (C, K, K) int64 gets sum_r p[k] * p[k'] added for k <= k' (the upper
 * triangle; the rest is left alone) and sums (C, K) int64 gets sum_r p[k] added.
 *
 * The sums go over the channels, which are contiguous in x: per pixel and tap pair, one
 * vectorized multiply-add of C lanes into int32 accumulators (acc[pair][c]), flushed into the
 * int64 result every CHUNK pixels (a product is at most 128 * 128 = 2**14 in magnitude, so
 * CHUNK * 2**14 < 2**31), the tap sums likewise (tsum[k][c]). Integer sums: exact in any order.
 * Scratch from the caller, with Cp = C rounded up to 16 (whole vectors): acc K * (K + 1) / 2 * Cp
 * int32, taps and tsum K * Cp int32 each.
 */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif

#define CHUNK 65536 /* pixels per int32 chunk: 2**16 * 2**14 = 2**30 */

/* acc[p][c] += t[k][c] * t[k'][c] over the pairs p = (k <= k') of one pixel's taps t (K, Cp),
 * and tsum[k][c] += t[k][c]; Cp a multiple of 16, so that every loop is whole vectors (the
 * padding lanes hold 0) */
VEC_CLONES static void pairs(const int32_t *restrict t, int64_t K, int64_t Cp, int32_t *restrict acc,
                             int32_t *restrict tsum) {
  Cp = Cp / 16 * 16; /* (a multiple of 16 already: tells the compiler) */
  for (int64_t i = 0; i < K * Cp; ++i)
    tsum[i] += t[i];
  for (int64_t k = 0; k < K; ++k) {
    const int32_t *a = t + k * Cp;
    for (int64_t k2 = k; k2 < K; ++k2, acc += Cp) {
      const int32_t *b = t + k2 * Cp;
      for (int64_t c = 0; c < Cp; ++c)
        acc[c] += a[c] * b[c];
    }
  }
}

void hlsnn_gram_dw_i8(const int8_t *x, int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t sh,
                      int64_t sw, int64_t dh, int64_t dw, int64_t top, int64_t left, int64_t oh, int64_t ow,
                      int64_t r0, int64_t r1, int64_t *gram, int64_t *sums, int32_t *acc, int32_t *taps,
                      int32_t *tsum) {
  const int64_t K = kh * kw, P = K * (K + 1) / 2, Cp = (C + 15) / 16 * 16;
  memset(taps, 0, (size_t)(K * Cp) * sizeof *taps); /* the padding lanes stay 0 */
  for (int64_t c0 = r0; c0 < r1; c0 += CHUNK) {
    const int64_t c1 = c0 + CHUNK < r1 ? c0 + CHUNK : r1;
    memset(acc, 0, (size_t)(P * Cp) * sizeof *acc);
    memset(tsum, 0, (size_t)(K * Cp) * sizeof *tsum);
    for (int64_t r = c0; r < c1; ++r) {
      const int64_t b = r / (oh * ow), rem = r % (oh * ow), oy = rem / ow, ox = rem % ow;
      for (int64_t ky = 0; ky < kh; ++ky) {
        const int64_t y = oy * sh + ky * dh - top;
        for (int64_t kx = 0; kx < kw; ++kx) {
          const int64_t xx = ox * sw + kx * dw - left;
          int32_t *dst = taps + (ky * kw + kx) * Cp;
          if (y < 0 || y >= H || xx < 0 || xx >= W) {
            memset(dst, 0, (size_t)C * sizeof *dst);
            continue;
          }
          const int8_t *src = x + ((b * H + y) * W + xx) * C;
          for (int64_t c = 0; c < C; ++c)
            dst[c] = src[c];
        }
      }
      pairs(taps, K, Cp, acc, tsum);
    }
    for (int64_t k = 0; k < K; ++k) /* sums (C, K): per channel, tap k */
      for (int64_t c = 0; c < C; ++c)
        sums[c * K + k] += tsum[k * Cp + c];
    const int32_t *a = acc;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t k2 = k; k2 < K; ++k2, a += Cp)
        for (int64_t c = 0; c < C; ++c)
          gram[(c * K + k) * K + k2] += a[c];
  }
}
