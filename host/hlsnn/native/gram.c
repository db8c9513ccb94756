/* gram.c: the exact Gram matrix X^T X and column sums of int8 rows, for the GPTQ weight fit
 * of hlsnn.deploy.shift_fit (_grams: its float32 syrk blocks and float64 products are the
 * specification; tests/deploy/test_shift_fit.py holds the three equal).
 *
 * hlsnn_gram_i8(x, K, r0, r1, gram, sums, u, s, limit): rows [r0, r1) of x (n, K) int8, row-major;
 * gram (K, K) int64 gets sum_r x[r, i] * x[r, j] added for every j >= i (the upper triangle;
 * some entries below it too, which the caller ignores), sums (K) int64 gets sum_r x[r, j]
 * added. Integer sums: the order does not matter, every variant gives the same values.
 *
 * AVX-512 VNNI (chosen at run time where the CPU has it; `limit` 0 forces the portable loops,
 * for the tests): vpdpbusd multiplies unsigned by signed bytes, four per 32-bit lane, so the
 * rows go in quads, and the unsigned operand is x + 128: sum (x_i + 128) x_j = (X^T X)_ij +
 * 128 * sums_j, corrected after. A quad adds at most 4 * 255 * 128 < 2**17 to a lane, so a
 * chunk of QUADS quads sums exactly in int32 before it is added to the int64 result.
 */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define HLSNN_X86 1
#include <immintrin.h>
#endif

#define QUADS 256 /* quads of rows per chunk: 256 * 2**17 < 2**31 */
#define KB 16     /* columns per block (one vector of int32 lanes) */

static void gram_portable(const int8_t *x, int64_t K, int64_t r0, int64_t r1, int64_t *gram, int64_t *sums) {
  for (int64_t r = r0; r < r1; ++r) {
    const int8_t *row = x + r * K;
    for (int64_t i = 0; i < K; ++i) {
      const int64_t xi = row[i];
      sums[i] += xi;
      if (!xi)
        continue;
      int64_t *g = gram + i * K;
      for (int64_t j = i; j < K; ++j)
        g[j] += xi * row[j];
    }
  }
}

#ifdef HLSNN_X86
/* one chunk of at most QUADS quads, packed: u[q][k][4] = x + 128 (uint8), s[q][k][4] = x (int8),
 * Kp columns (a multiple of KB; zero columns and rows contribute 0 to s, and their u (128)
 * multiplies s = 0) */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void chunk_vnni(const uint8_t *u, const int8_t *s,
                                                                          int64_t nq, int64_t Kp, int64_t K,
                                                                          int64_t *gram) {
  for (int64_t ib = 0; ib < Kp; ib += KB)
    for (int64_t jb = ib; jb < Kp; jb += KB) {
      __m512i acc[KB];
      for (int i = 0; i < KB; ++i)
        acc[i] = _mm512_setzero_si512();
      for (int64_t q = 0; q < nq; ++q) {
        const __m512i sv = _mm512_loadu_si512((const void *)(s + (q * Kp + jb) * 4));
        const uint8_t *uq = u + (q * Kp + ib) * 4;
        for (int i = 0; i < KB; ++i) {
          int32_t w;
          memcpy(&w, uq + i * 4, 4);
          acc[i] = _mm512_dpbusd_epi32(acc[i], _mm512_set1_epi32(w), sv);
        }
      }
      for (int i = 0; i < KB && ib + i < K; ++i) {
        int32_t lanes[KB];
        _mm512_storeu_si512((void *)lanes, acc[i]);
        int64_t *g = gram + (ib + i) * K + jb;
        for (int j = 0; j < KB && jb + j < K; ++j)
          g[j] += lanes[j];
      }
    }
}

static int has_vnni(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
}
#endif

/* One row of a convolution's patches (module docstring of hlsnn_gram_conv_i8): the patch of
 * output pixel r of channels [c0, c0 + cg) of x (B, H, W, C) int8, K = cg * kh * kw values in
 * (channel, kernel row, kernel column) order, zero outside the map. */
typedef struct {
  const int8_t *x;
  int64_t H, W, C, kh, kw, sh, sw, dh, dw, top, left, oh, ow, c0, cg;
} geom_t;

static void patch(const geom_t *g, int64_t r, int8_t *row) {
  const int64_t b = r / (g->oh * g->ow), rem = r % (g->oh * g->ow), oy = rem / g->ow, ox = rem % g->ow;
  const int64_t kk = g->kh * g->kw;
  for (int64_t ky = 0; ky < g->kh; ++ky) {
    const int64_t y = oy * g->sh + ky * g->dh - g->top;
    for (int64_t kx = 0; kx < g->kw; ++kx) {
      const int64_t xx = ox * g->sw + kx * g->dw - g->left;
      int8_t *dst = row + ky * g->kw + kx;
      if (y < 0 || y >= g->H || xx < 0 || xx >= g->W) {
        for (int64_t c = 0; c < g->cg; ++c)
          dst[c * kk] = 0;
        continue;
      }
      const int8_t *src = g->x + ((b * g->H + y) * g->W + xx) * g->C + g->c0;
      for (int64_t c = 0; c < g->cg; ++c)
        dst[c * kk] = src[c];
    }
  }
}

/* Returns 1 where the VNNI path ran (the caller then subtracts 128 * sums[j] from every gram[i][j],
 * once the sums are complete), 0 for the portable loops. u and s: the caller's scratch of
 * QUADS * 4 * Kp bytes each, Kp = K rounded up to a multiple of 16. */
/* rows [r0, r1) from x (n, K) row-major, or (geom != NULL) the patches of a convolution */
static int64_t gram_rows(const int8_t *x, const geom_t *geom, int64_t K, int64_t r0, int64_t r1, int64_t *gram,
                         int64_t *sums, uint8_t *u, int8_t *s, int limit) {
  int8_t row[65536];
  if (K > (int64_t)sizeof row)
    return -1;
#ifdef HLSNN_X86
  if (limit > 0 && has_vnni()) {
    const int64_t Kp = (K + KB - 1) / KB * KB;
    for (int64_t c0 = r0; c0 < r1; c0 += QUADS * 4) {
      const int64_t c1 = c0 + QUADS * 4 < r1 ? c0 + QUADS * 4 : r1;
      const int64_t nq = (c1 - c0 + 3) / 4;
      const int64_t nb = nq * Kp * 4;
      memset(s, 0, (size_t)nb);
      for (int64_t r = c0; r < c1; ++r) {
        const int8_t *src = x + r * K;
        if (geom) {
          patch(geom, r, row);
          src = row;
        }
        const int64_t q = (r - c0) / 4, e = (r - c0) % 4;
        int8_t *sq = s + q * Kp * 4 + e;
        for (int64_t k = 0; k < K; ++k)
          sq[k * 4] = src[k];
        for (int64_t k = 0; k < K; ++k)
          sums[k] += src[k];
      }
      for (int64_t i = 0; i < nb; ++i) /* x + 128 as a byte: x ^ 0x80 */
        u[i] = (uint8_t)s[i] ^ 0x80u;
      chunk_vnni(u, s, nq, Kp, K, gram);
    }
    return 1;
  }
#else
  (void)limit;
  (void)u;
  (void)s;
#endif
  for (int64_t r = r0; r < r1; ++r) {
    if (geom)
      patch(geom, r, row);
    gram_portable(geom ? row : x + r * K, K, 0, 1, gram, sums);
  }
  return 0;
}

int64_t hlsnn_gram_i8(const int8_t *x, int64_t K, int64_t r0, int64_t r1, int64_t *gram, int64_t *sums, uint8_t *u,
                      int8_t *s, int limit) {
  return gram_rows(x, NULL, K, r0, r1, gram, sums, u, s, limit);
}

/* The same for the patches of a convolution of x (B, H, W, C) int8 (NHWC): output pixel r = (b,
 * oy, ox) of an oh x ow output, strides (sh, sw), dilations (dh, dw), pads top and left, channels
 * [c0, c0 + cg) (one group); K = cg * kh * kw. -1 when K is beyond the row buffer. */
int64_t hlsnn_gram_conv_i8(const int8_t *x, int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t sh,
                           int64_t sw, int64_t dh, int64_t dw, int64_t top, int64_t left, int64_t oh, int64_t ow,
                           int64_t c0, int64_t cg, int64_t r0, int64_t r1, int64_t *gram, int64_t *sums, uint8_t *u,
                           int8_t *s, int limit) {
  const geom_t g = {x, H, W, C, kh, kw, sh, sw, dh, dw, top, left, oh, ow, c0, cg};
  return gram_rows(NULL, &g, cg * kh * kw, r0, r1, gram, sums, u, s, limit);
}
