/* int_conv.c: a compiled direct convolution for hlsnn.engines.sparse_cluster.emulator
 * (conv_accumulate's "direct" method): rule 1's exact accumulators of a stride-1
 * cross-correlation, summed in int32; and the same blocks as a GEMM for
 * hlsnn.engines.shift_mac.emulator (hlsnn_int_gemm, at the end).
 *
 * The numpy code is the specification (conv_accumulate's dense and pair paths);
 * tests/engines/sparse_cluster/test_direct_conv.py holds this function equal to them.
 *
 * acc[z, oy, ox] = sum_{c, ky, kx} w[z, c, ky, kx] * xp[c, oy + ky, ox + kx], for the output
 * pixels q = oy * OW + ox in [q0, q1) (so that threads can each take a range), written as
 * int64 into acc (Z, OH, OW), OH = Hp - k + 1, OW = Wp - k + 1. The input xp (C, Hp, Wp) is
 * int64, each value read as int32; the weights are int32 in blocks of 16 output channels,
 * (Zs / 16, C, k, k, 16), Zs = Z rounded up to 16 (zero columns).
 *
 * Exact in int32: the caller checks that every |xp| < 2**31 and max|xp| * (the largest sum
 * of |w[z]| over one output channel's taps) < 2**31, which bounds every partial sum, so the
 * int32 sums never wrap in any order; else it takes another path.
 *
 * The AVX-512 and AVX2 blocks are chosen at run time (__builtin_cpu_supports; `limit` caps
 * the choice, for the tests: 0 the portable loops, 1 at most AVX2, 2 or more the best). Every
 * variant gives the same integers (integer sums do not depend on their order), so the bits
 * do not depend on the machine.
 */
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define HLSNN_X86 1
#include <immintrin.h>
#endif

/* output pixels per block: the accumulators of NP pixels x 16 channels stay in registers */
#define NP 8
#define ZV 16

/* Arguments of a block: the NP pixels' windows (their first input of channel 0), the
 * channel block's weights (C, k, k, 16), the plane size of xp, its row length, C and k. */
#define BLOCK_ARGS                                                                                \
  const int64_t *const *xw, const int32_t *wb, int64_t plane, int64_t Wp, int64_t C, int64_t k,     \
      int32_t (*acc)[ZV]

#ifdef HLSNN_X86
__attribute__((target("avx512f"))) static void block_avx512(BLOCK_ARGS) {
  __m512i a[NP];
  for (int p = 0; p < NP; ++p)
    a[p] = _mm512_setzero_si512();
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ky = 0; ky < k; ++ky)
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t off = c * plane + ky * Wp + kx;
        const __m512i wv = _mm512_loadu_si512((const void *)(wb + ((c * k + ky) * k + kx) * ZV));
#pragma GCC unroll 8
        for (int p = 0; p < NP; ++p)
          a[p] = _mm512_add_epi32(a[p], _mm512_mullo_epi32(_mm512_set1_epi32((int32_t)xw[p][off]), wv));
      }
  for (int p = 0; p < NP; ++p)
    _mm512_storeu_si512((void *)acc[p], a[p]);
}

__attribute__((target("avx2"))) static void block_avx2(BLOCK_ARGS) {
  for (int h = 0; h < NP; h += 4) { /* 4 pixels x 16 channels: 8 accumulators in registers */
    __m256i a[4][2];
    for (int p = 0; p < 4; ++p)
      a[p][0] = a[p][1] = _mm256_setzero_si256();
    for (int64_t c = 0; c < C; ++c)
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx) {
          const int64_t off = c * plane + ky * Wp + kx;
          const int32_t *wr = wb + ((c * k + ky) * k + kx) * ZV;
          const __m256i w0 = _mm256_loadu_si256((const __m256i *)wr);
          const __m256i w1 = _mm256_loadu_si256((const __m256i *)(wr + 8));
          for (int p = 0; p < 4; ++p) {
            const __m256i xv = _mm256_set1_epi32((int32_t)xw[h + p][off]);
            a[p][0] = _mm256_add_epi32(a[p][0], _mm256_mullo_epi32(xv, w0));
            a[p][1] = _mm256_add_epi32(a[p][1], _mm256_mullo_epi32(xv, w1));
          }
        }
    for (int p = 0; p < 4; ++p) {
      _mm256_storeu_si256((__m256i *)acc[h + p], a[p][0]);
      _mm256_storeu_si256((__m256i *)(acc[h + p] + 8), a[p][1]);
    }
  }
}
#endif

static void block_portable(BLOCK_ARGS) {
  memset(acc, 0, sizeof(int32_t) * NP * ZV);
  for (int64_t c = 0; c < C; ++c)
    for (int64_t ky = 0; ky < k; ++ky)
      for (int64_t kx = 0; kx < k; ++kx) {
        const int64_t off = c * plane + ky * Wp + kx;
        const int32_t *wc = wb + ((c * k + ky) * k + kx) * ZV;
        for (int p = 0; p < NP; ++p) {
          const int32_t xv = (int32_t)xw[p][off];
          for (int z = 0; z < ZV; ++z)
            acc[p][z] += xv * wc[z];
        }
      }
}

/* the widest vector unit to use: 2 AVX-512, 1 AVX2, 0 none; at most `limit` */
static int isa(int limit) {
  int have = 0;
#ifdef HLSNN_X86
  __builtin_cpu_init();
  have = __builtin_cpu_supports("avx512f") ? 2 : (__builtin_cpu_supports("avx2") ? 1 : 0);
#endif
  return have < limit ? have : limit;
}

typedef void (*block_fn)(BLOCK_ARGS);

/* the block kernel of the widest vector unit up to `limit` (isa) */
static block_fn pick(int limit) {
  const int level = isa(limit);
#ifdef HLSNN_X86
  if (level == 2)
    return block_avx512;
  if (level == 1)
    return block_avx2;
#else
  (void)level;
#endif
  return block_portable;
}

void hlsnn_int_conv(const int64_t *xp, int64_t C, int64_t Hp, int64_t Wp, const int32_t *w, int64_t Z,
                    int64_t k, int64_t q0, int64_t q1, int64_t *acc, int limit) {
  const int64_t OW = Wp - k + 1, OHW = (Hp - k + 1) * OW, plane = Hp * Wp;
  const block_fn block = pick(limit);
  int32_t a[NP][ZV];
  for (int64_t qb = q0; qb < q1; qb += NP) {
    const int np = (int)(q1 - qb < NP ? q1 - qb : NP);
    const int64_t *xw[NP];
    for (int p = 0; p < NP; ++p) { /* a short block repeats its first pixel (not written) */
      const int64_t q = qb + (p < np ? p : 0);
      xw[p] = xp + (q / OW) * Wp + q % OW;
    }
    for (int64_t z0 = 0; z0 < Z; z0 += ZV) {
      block(xw, w + z0 * C * k * k, plane, Wp, C, k, a);
      const int zn = (int)(Z - z0 < ZV ? Z - z0 : ZV);
      for (int z = 0; z < zn; ++z) {
        int64_t *o = acc + (z0 + z) * OHW + qb;
        for (int p = 0; p < np; ++p)
          o[p] = a[p][z];
      }
    }
  }
}

/* hlsnn_int_gemm: hlsnn.engines.shift_mac.emulator.emulate's GEMM in int32 (its "int32"
 * path; tests/engines/shift_mac/test_int_gemm.py holds it equal to the float64 GEMM): for
 * rows r in [r0, r1) of x (M, K) int64 (each value read as int32) and every output n < N,
 * out[r, n] = (double)(sum_k x[r, k] * w[n, k] + bias[n]) * scale[n], float64 (M, N); the
 * weights are int32 in blocks of 16 outputs, (Ns / 16, K, 16), Ns = N rounded up to 16. The
 * same bound as hlsnn_int_conv: the caller checks max|x| * (the largest sum of |w[n]|) <
 * 2**31; the bias is added in int64. A block of rows is the convolution's block of pixels
 * with a 1x1 kernel over K channels one apart. */
void hlsnn_int_gemm(const int64_t *x, int64_t K, const int32_t *w, int64_t N, const int64_t *bias,
                    const double *scale, int64_t r0, int64_t r1, double *out, int limit) {
  const block_fn block = pick(limit);
  int32_t a[NP][ZV];
  for (int64_t rb = r0; rb < r1; rb += NP) {
    const int np = (int)(r1 - rb < NP ? r1 - rb : NP);
    const int64_t *xw[NP];
    for (int p = 0; p < NP; ++p) /* a short block repeats its first row (not written) */
      xw[p] = x + (rb + (p < np ? p : 0)) * K;
    for (int64_t n0 = 0; n0 < N; n0 += ZV) {
      block(xw, w + n0 * K, 1, 0, K, 1, a);
      const int nn = (int)(N - n0 < ZV ? N - n0 : ZV);
      for (int p = 0; p < np; ++p) {
        double *o = out + (rb + p) * N + n0;
        for (int z = 0; z < nn; ++z)
          o[z] = (double)((int64_t)a[p][z] + bias[n0 + z]) * scale[n0 + z];
      }
    }
  }
}
