/* bfp_rows.c: the compiled twin of the activations' quantization on bfp_systolic's float GEMM
 * path (hlsnn.formats.bfp._row_plan + _encode_rows_into: one shared exponent per row), called
 * by hlsnn.engines.bfp_systolic.compiled.quantize_rows.
 *
 * The numpy code is the specification; these functions give the same bits (the tests in
 * tests/engines/bfp_systolic/test_bfp_native.py hold them equal, -0.0 included). Per row of K float64:
 *
 *   amax = max(max(row), -min(row))
 *   e    = emin when amax == 0, else clamp(floor(log2(amax)) - (m - 2), emin, emax)
 *   v    = x * 2**-e                      (a multiplication by a power of two: correctly
 *                                           rounded, the same bits as numpy's ldexp)
 *   mantissa = round(v) per the mode, clipped to [-2**(m-1), 2**(m-1) - 1]:
 *     0 nearest_even: rint(v);
 *     1 nearest_away: v clipped to one step outside the range, copysign(floor(|v|) +
 *       (|v| - floor(|v|) >= 0.5), v);
 *     2 truncate: v clipped likewise, floor(v), and -1 for a negative x whose v is 0.
 *
 * Rounding without a libm call: for 0 <= a < 2**52, (a + 2**52) - 2**52 is a rounded to an
 * integer, ties to even (the sum's ulp is 1); the modes derive floor from it. The scale
 * 2**-e must be a normal float64, so the caller keeps |e| <= 1000 (exponent_bits <= 10).
 *
 * The mantissas go to `out` as float32 (out_f32, exact for m <= 25) or float64, row stride ldo;
 * `exps` gets each row's exponent, `nonzero` whether any of its mantissas is non-zero. Both
 * functions return the number of non-zero mantissas, or -1 when a value is NaN or infinite
 * (nothing else then holds; the caller takes the numpy path), and work on a range of rows, so
 * that Python threads run parts of one array at once (ctypes releases the GIL during a call):
 *
 *   hlsnn_bfp_rows:      rows [0, rows) of x with row stride ld;
 *   hlsnn_bfp_conv_rows: the im2col rows of images [b0, b1) of a (B, C, H, W) batch with any
 *                        element strides, as hlsnn.engines.convgeom.im2col orders them (row
 *                        (b, y, x), column (c, i, j); zero outside the map), gathered into a
 *                        row buffer and quantized there: the float64 im2col is never written;
 *   hlsnn_bfp_conv_gemm: hlsnn_bfp_conv_rows with the GEMM's exact sums formed in int32 or float64
 *                        from the quantized rows (its comment below); the mantissas are never written;
 *   hlsnn_bfp_rows_gemm: hlsnn_bfp_rows likewise fused with the GEMM's sums;
 *   hlsnn_bfp_layer:     one GEMM call of a deployment's BFP layer (hlsnn.compiled.netbfpfast): the
 *                        fused pass of either, the all-zero rows' exponent and the epilogue, a tile
 *                        of rows at a time (its comment below).
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static const double MAGIC = 4503599627370496.0; /* 2**52 */

static inline double floor_pos(double a) { /* floor(a) for finite a >= 0 */
  double t = (a + MAGIC) - MAGIC;
  t = t > a ? t - 1.0 : t;
  return a < MAGIC ? t : a; /* from 2**52 on, every float64 is an integer */
}

/* 2**e for -1022 <= e <= 1023 (a normal float64: built from its bits, as ldexp gives it). */
static inline double pow2(int e) {
  union {
    uint64_t u;
    double d;
  } b;
  b.u = (uint64_t)(e + 1023) << 52;
  return b.d;
}

/* floor(log2(a)) of a finite a > 0 (frexp's exponent minus one). */
static inline int ilog2(double a) {
  union {
    double d;
    uint64_t u;
  } b;
  b.d = a;
  const int field = (int)((b.u >> 52) & 0x7ff);
  if (field == 0) { /* subnormal */
    int e2;
    frexp(a, &e2);
    return e2 - 1;
  }
  return field - 1023;
}

static inline double round_even(double v) {
  const double a = fabs(v);
  return copysign(a < MAGIC ? (a + MAGIC) - MAGIC : a, v);
}

static inline double round_away(double v, double lo, double hi) {
  v = v < lo - 1.0 ? lo - 1.0 : (v > hi + 1.0 ? hi + 1.0 : v);
  const double a = fabs(v);
  const double fl = floor_pos(a);
  return copysign(fl + ((a - fl) >= 0.5 ? 1.0 : 0.0), v);
}

static inline double round_trunc(double v, double xv, double lo, double hi) {
  v = v < lo - 1.0 ? lo - 1.0 : (v > hi + 1.0 ? hi + 1.0 : v);
  const double a = fabs(v);
  const double fl = floor_pos(a);
  const double neg = -(fl == a ? fl : fl + 1.0);
  return v == 0.0 ? (xv < 0.0 ? -1.0 : v) : (v > 0.0 ? fl : neg);
}

/* One loop per mode and output type, so that each vectorizes: on x86-64 with GCC, an AVX-512F
 * or AVX2 clone is chosen at load time when the CPU has it (target_clones); each does the same
 * float64 operations (no FMA contraction: -std=c99 keeps -ffp-contract=off, and the code calls
 * no fma), so the bits do not depend on the clone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif
#define QUANT_LOOP(NAME, OUT_T, EXPR)                                                                \
  VEC_CLONES static int NAME(const double *restrict xr, int64_t K, double scale, double lo, double hi, \
                         OUT_T *restrict o) {                                                        \
    int nnz = 0;                                                                                     \
    for (int64_t k = 0; k < K; ++k) {                                                                \
      const double xv = xr[k];                                                                       \
      const double v = xv * scale;                                                                   \
      double q = (EXPR);                                                                             \
      q = q < lo ? lo : (q > hi ? hi : q);                                                           \
      nnz += q != 0.0;                                                                               \
      o[k] = (OUT_T)q;                                                                               \
    }                                                                                                \
    return nnz;                                                                                      \
  }
QUANT_LOOP(even_f32, float, round_even(v))
QUANT_LOOP(even_f64, double, round_even(v))
QUANT_LOOP(away_f32, float, round_away(v, lo, hi))
QUANT_LOOP(away_f64, double, round_away(v, lo, hi))
QUANT_LOOP(trunc_f32, float, round_trunc(v, xv, lo, hi))
QUANT_LOOP(trunc_f64, double, round_trunc(v, xv, lo, hi))
QUANT_LOOP(even_i32, int32_t, round_even(v))
QUANT_LOOP(away_i32, int32_t, round_away(v, lo, hi))
QUANT_LOOP(trunc_i32, int32_t, round_trunc(v, xv, lo, hi))

/* The largest magnitude of xr's values (the largest of their magnitudes' bit patterns, which
 * order as the magnitudes do: an integer maximum, so that it vectorizes), and whether one of
 * them is NaN or infinite (an all-ones exponent field). */
VEC_CLONES static double row_amax(const double *restrict xr, int64_t K, int *bad) {
  const int64_t *bits = (const int64_t *)xr;
  int64_t m = 0, nf = 0;
  for (int64_t k = 0; k < K; ++k) {
    const int64_t v = bits[k] & INT64_MAX;
    m = v > m ? v : m;
    nf |= v >= (int64_t)0x7ff0000000000000LL;
  }
  *bad = nf != 0;
  union {
    int64_t i;
    double d;
  } b;
  b.i = m;
  return b.d;
}

/* The shared exponent of a row whose largest magnitude is amax: emin for an all-zero row, else
 * floor(log2(amax)) - (m - 2) clamped to [emin, emax]. */
static inline int exponent_of(double amax, int m, int emin, int emax) {
  int e = emin;
  if (amax > 0.0) {
    e = ilog2(amax) - (m - 2);
    e = e < emin ? emin : (e > emax ? emax : e);
  }
  return e;
}

/* Row xr (K values) -> its exponent; mantissas to out; *row_nnz its non-zero count (-1: a value
 * is NaN or infinite, nothing written). */
static inline int quant_row(const double *xr, int64_t K, int m, int emin, int emax, int mode, void *out,
                            int out_f32, int64_t *row_nnz) {
  const double lo = -pow2(m - 1), hi = pow2(m - 1) - 1.0;
  int bad;
  const int e = exponent_of(row_amax(xr, K, &bad), m, emin, emax);
  if (bad) {
    *row_nnz = -1;
    return 0;
  }
  const double scale = pow2(-e);
  int nnz;
  if (mode == 0)
    nnz = out_f32 ? even_f32(xr, K, scale, lo, hi, out) : even_f64(xr, K, scale, lo, hi, out);
  else if (mode == 1)
    nnz = out_f32 ? away_f32(xr, K, scale, lo, hi, out) : away_f64(xr, K, scale, lo, hi, out);
  else
    nnz = out_f32 ? trunc_f32(xr, K, scale, lo, hi, out) : trunc_f64(xr, K, scale, lo, hi, out);
  *row_nnz = nnz;
  return e;
}

/* Row r: quant_row of xr into row r of out (row stride ldo), its exponent and non-zero flag
 * recorded; returns the row's non-zero count, or -1 for a NaN or an infinity. */
static inline int64_t put_row(const double *xr, int64_t K, int m, int emin, int emax, int mode, void *out,
                              int out_f32, int64_t ldo, int64_t r, int64_t *exps, uint8_t *nonzero) {
  const size_t osz = out_f32 ? sizeof(float) : sizeof(double);
  int64_t row_nnz;
  exps[r] = quant_row(xr, K, m, emin, emax, mode, (char *)out + (size_t)(r * ldo) * osz, out_f32, &row_nnz);
  nonzero[r] = row_nnz > 0;
  return row_nnz;
}

int64_t hlsnn_bfp_rows(const double *x, int64_t rows, int64_t K, int64_t ld, int m, int emin, int emax, int mode,
                       void *out, int out_f32, int64_t ldo, int64_t *exps, uint8_t *nonzero) {
  int64_t nnz = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row_nnz = put_row(x + r * ld, K, m, emin, emax, mode, out, out_f32, ldo, r, exps, nonzero);
    if (row_nnz < 0)
      return -1;
    nnz += row_nnz;
  }
  return nnz;
}

int64_t hlsnn_bfp_conv_rows(const double *x, int64_t s_b, int64_t s_c, int64_t s_h, int64_t s_w, int64_t C,
                            int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t top,
                            int64_t left, int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t b0, int64_t b1,
                            int m, int emin, int emax, int mode, void *out, int out_f32, int64_t *exps,
                            uint8_t *nonzero, double *buf) {
  const int64_t K = C * kh * kw;
  int64_t nnz = 0;
  for (int64_t b = b0; b < b1; ++b) {
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t xo = 0; xo < ow; ++xo) {
        const int64_t x0 = xo * sw - left;
        const int inside = x0 >= 0 && x0 + (kw - 1) * dw < W; /* every column of the window */
        for (int64_t i = 0; i < kh; ++i) {                    /* gather: buf[(c*kh + i)*kw + j] */
          const int64_t yy = y * sh + i * dh - top;
          for (int64_t j = 0; j < kw; ++j) {
            const int64_t xx = x0 + j * dw;
            double *dst = buf + i * kw + j;
            if (yy >= 0 && yy < H && (inside || (xx >= 0 && xx < W))) {
              const double *src = x + b * s_b + yy * s_h + xx * s_w;
              for (int64_t c = 0; c < C; ++c)
                dst[c * kh * kw] = src[c * s_c];
            } else {
              for (int64_t c = 0; c < C; ++c)
                dst[c * kh * kw] = 0.0;
            }
          }
        }
        const int64_t row_nnz = put_row(buf, K, m, emin, emax, mode, out, out_f32, K, (b * oh + y) * ow + xo,
                                        exps, nonzero);
        if (row_nnz < 0)
          return -1;
        nnz += row_nnz;
      }
    }
  }
  return nnz;
}

/* hlsnn_bfp_conv_gemm: hlsnn_bfp_conv_rows fused with step 1 of the GEMM, the exact sums of the
 * mantissas, in int32 (or float64: wtd below). The im2col rows of images [b0, b1) are gathered with their columns in the
 * order (i, j, c) (contiguous runs of C values in an NHWC map) and quantized, TILE_ROWS rows at a
 * time, into int32 mantissas xm; acc = xm @ wt, wt the weights' mantissas (K, Np) int32 with their
 * rows in the same (i, j, c) order (the caller permutes them), Np >= N a multiple of 16 (columns
 * N.. are not read back). The column order does not change a sum: every product and partial sum is
 * an integer below 2**31 in magnitude, which the caller guarantees (2**(m-1) * max over outputs of
 * sum_k |wt[k][n]| < 2**31), so int32 arithmetic is exact in any order and every kernel variant
 * (isa 0 picks the best the CPU has, 1 portable, 2 AVX2, 3 AVX-512F, 4 AVX-512BW with wt2, the
 * weights as int16 pairs (tile_avx512bw; NULL for m > 16: then AVX-512F), 5 the same with AVX-512
 * VNNI (tile_avx512vnni); an unsupported one falls back to the best supported below it) gives the
 * same integers. With wtd (the weights as float64, (K, Np); wt, wt2 are then not read) the sums
 * are formed in float64 instead (tilef_*), exact where the caller guarantees every partial sum
 * below 2**53 (2**(m-1) * max_n sum_k |wt[k][n]|), and written to acc as float64 (acc_f32 must be 0).
 *
 * acc: rows [b0 * oh * ow, b1 * oh * ow) of a (B * oh * ow, N) float32 (acc_f32) or float64 array
 * (the caller's GEMM type; the sums are within its exact range); exps, nonzero as for
 * hlsnn_bfp_conv_rows. A row's exponent comes from its window's largest magnitude, the largest of
 * its pixels' (each pixel's C values, one pass over the map: padding adds zeros, which change no
 * maximum). Scratch: buf (TILE_ROWS * K doubles), xm (TILE_ROWS * K int32), tacc (TILE_ROWS * Np
 * int32), taccd (TILE_ROWS * Np doubles; with wtd), pmax ((b1 - b0) * H * W int64), x16 (TILE_ROWS *
 * 2 * ceil(K/2) int16). Returns the count of non-zero mantissas, or -1 for a NaN or an infinity. */
#define TILE_ROWS 8
#if defined(__GNUC__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#include <immintrin.h>
#define HLSNN_X86 1
#endif

static void tile_portable(const int32_t *restrict xm, int64_t K, const int32_t *restrict wt, int64_t Np,
                          int32_t *restrict acc) {
  for (int64_t i = 0; i < TILE_ROWS * Np; ++i)
    acc[i] = 0;
  for (int r = 0; r < TILE_ROWS; ++r) {
    int32_t *o = acc + r * Np;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t a = xm[r * K + k];
      if (a == 0)
        continue;
      const int32_t *w = wt + k * Np;
      for (int64_t n = 0; n < Np; ++n)
        o[n] += a * w[n];
    }
  }
}

#ifdef HLSNN_X86
/* TILE_ROWS x 8 accumulators in registers: broadcast one mantissa of each row, multiply it with
 * 8 weights, add. */
__attribute__((target("avx2"))) static void tile_avx2(const int32_t *restrict xm, int64_t K,
                                                      const int32_t *restrict wt, int64_t Np, int32_t *restrict acc) {
  for (int64_t nb = 0; nb < Np; nb += 8) {
    __m256i a[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; ++r)
      a[r] = _mm256_setzero_si256();
    for (int64_t k = 0; k < K; ++k) {
      const __m256i w = _mm256_loadu_si256((const __m256i *)(wt + k * Np + nb));
      for (int r = 0; r < TILE_ROWS; ++r)
        a[r] = _mm256_add_epi32(a[r], _mm256_mullo_epi32(_mm256_set1_epi32(xm[r * K + k]), w));
    }
    for (int r = 0; r < TILE_ROWS; ++r)
      _mm256_storeu_si256((__m256i *)(acc + r * Np + nb), a[r]);
  }
}

/* As tile_avx2, 16 outputs at a time. */
__attribute__((target("avx512f"))) static void tile_avx512(const int32_t *restrict xm, int64_t K,
                                                           const int32_t *restrict wt, int64_t Np,
                                                           int32_t *restrict acc) {
  for (int64_t nb = 0; nb < Np; nb += 16) {
    __m512i a[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; ++r)
      a[r] = _mm512_setzero_si512();
    for (int64_t k = 0; k < K; ++k) {
      const __m512i w = _mm512_loadu_si512((const void *)(wt + k * Np + nb));
      for (int r = 0; r < TILE_ROWS; ++r)
        a[r] = _mm512_add_epi32(a[r], _mm512_mullo_epi32(_mm512_set1_epi32(xm[r * K + k]), w));
    }
    for (int r = 0; r < TILE_ROWS; ++r)
      _mm512_storeu_si512((void *)(acc + r * Np + nb), a[r]);
  }
}
#endif

#ifdef HLSNN_X86
/* As tile_avx512 with 16-bit mantissas (m <= 16), two products a step: the tile's rows narrowed
 * to int16 in x16 (TILE_ROWS rows of P = ceil(K/2) pairs, a zero after an odd K), each pair
 * broadcast as one 32-bit word and multiplied with wt2's pair of weights of 16 outputs (wt2: (P,
 * Np, 2) int16, pair p of output n = wt[2p][n], wt[2p+1][n]) by vpmaddwd, which adds the two
 * products in int32: exact, as each pair's sum is a partial sum in magnitude at most
 * 2**(m-1) * (|w0| + |w1|) < 2**31 (vpmaddwd's one overflow, two products of -2**15 * -2**15,
 * is beyond it). */
#define TILE16(NAME, TARGET, STEP)                                                                 \
  __attribute__((target(TARGET))) static void NAME(const int32_t *restrict xm, int64_t K,              \
                                                   const int16_t *restrict wt2, int64_t Np,            \
                                                   int32_t *restrict acc, int16_t *restrict x16) {     \
    const int64_t P = (K + 1) / 2;                                                                     \
    for (int r = 0; r < TILE_ROWS; ++r) {                                                              \
      for (int64_t k = 0; k < K; ++k)                                                                  \
        x16[r * 2 * P + k] = (int16_t)xm[r * K + k];                                                   \
      if (K & 1)                                                                                       \
        x16[r * 2 * P + K] = 0;                                                                        \
    }                                                                                                  \
    for (int64_t nb = 0; nb < Np; nb += 16) {                                                          \
      __m512i a[TILE_ROWS];                                                                            \
      for (int r = 0; r < TILE_ROWS; ++r)                                                              \
        a[r] = _mm512_setzero_si512();                                                                 \
      for (int64_t p = 0; p < P; ++p) {                                                                \
        const __m512i w = _mm512_loadu_si512((const void *)(wt2 + (p * Np + nb) * 2));                 \
        for (int r = 0; r < TILE_ROWS; ++r) {                                                          \
          int32_t pair;                                                                                \
          memcpy(&pair, x16 + r * 2 * P + 2 * p, sizeof pair);                                         \
          a[r] = STEP(a[r], _mm512_set1_epi32(pair), w);                                               \
        }                                                                                              \
      }                                                                                                \
      for (int r = 0; r < TILE_ROWS; ++r)                                                              \
        _mm512_storeu_si512((void *)(acc + r * Np + nb), a[r]);                                        \
    }                                                                                                  \
  }
#define MADD_ADD(acc, x, w) _mm512_add_epi32((acc), _mm512_madd_epi16((x), (w)))
TILE16(tile_avx512bw, "avx512f,avx512bw", MADD_ADD)

/* tile_avx512bw with AVX-512 VNNI: vpdpwssd does vpmaddwd's pair products and the add in one
 * instruction (without saturation: the same int32 arithmetic, so the same sums). */
TILE16(tile_avx512vnni, "avx512f,avx512bw,avx512vnni", _mm512_dpwssd_epi32)

/* Sums of mantissas of up to 16 bits whose products and sums exceed int32 (bfp16), in int32
 * nonetheless: each mantissa v = 256 * (v >> 8) + (v & 255) (the arithmetic shift: the high part in
 * [-128, 127], the low one in [0, 255]), and acc_h = sum (v >> 8) * w, acc_l = sum (v & 255) * w
 * are formed as tile_avx512vnni forms its sums, in int32: exact when 255 * max_n sum_k |w[k][n]| <
 * 2**31 (the caller's bound; it bounds every partial sum of both), and the sum is 256 * acc_h +
 * acc_l (layer_sums). x16 holds both halves' pairs (2 * TILE_ROWS * 2 * ceil(K/2)), acc the two
 * sums (2 * TILE_ROWS * Np). */
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static void tile_split_vnni(const int32_t *restrict xm,
                                                                                  int64_t K,
                                                                                  const int16_t *restrict wt2,
                                                                                  int64_t Np, int32_t *restrict acc,
                                                                                  int16_t *restrict x16) {
  const int64_t P = (K + 1) / 2;
  int16_t *xh = x16, *xl = x16 + TILE_ROWS * 2 * P;
  int32_t *acc_h = acc, *acc_l = acc + TILE_ROWS * Np;
  for (int r = 0; r < TILE_ROWS; ++r) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t v = xm[r * K + k];
      xh[r * 2 * P + k] = (int16_t)(v >> 8);
      xl[r * 2 * P + k] = (int16_t)(v & 255);
    }
    if (K & 1)
      xh[r * 2 * P + K] = xl[r * 2 * P + K] = 0;
  }
  for (int64_t nb = 0; nb < Np; nb += 16) {
    __m512i ah[TILE_ROWS], al[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; ++r)
      ah[r] = al[r] = _mm512_setzero_si512();
    for (int64_t p = 0; p < P; ++p) {
      const __m512i w = _mm512_loadu_si512((const void *)(wt2 + (p * Np + nb) * 2));
      for (int r = 0; r < TILE_ROWS; ++r) {
        int32_t ph, pl;
        memcpy(&ph, xh + r * 2 * P + 2 * p, sizeof ph);
        memcpy(&pl, xl + r * 2 * P + 2 * p, sizeof pl);
        ah[r] = _mm512_dpwssd_epi32(ah[r], _mm512_set1_epi32(ph), w);
        al[r] = _mm512_dpwssd_epi32(al[r], _mm512_set1_epi32(pl), w);
      }
    }
    for (int r = 0; r < TILE_ROWS; ++r) {
      _mm512_storeu_si512((void *)(acc_h + r * Np + nb), ah[r]);
      _mm512_storeu_si512((void *)(acc_l + r * Np + nb), al[r]);
    }
  }
}

/* quant_i32 on AVX-512F, 8 values a step: v = x * scale; q = rint(v) (mode 0), sign(v) *
 * (floor|v| + (|v| - floor|v| >= 0.5)) (mode 1; the difference is exact), floor(v) and -1 for a
 * negative x whose v is 0 (mode 2); clamped to [lo, hi]. These are the round_* functions' values:
 * their clip of v to one step outside [lo, hi] before rounding changes nothing once the result is
 * clamped (each rounding is monotone and lo, hi are integers), and roundscale rounds any
 * magnitude exactly. The last K % 8 values go through the scalar functions. */
__attribute__((target("avx512f"))) static int quant_avx512(const double *restrict xr, int64_t K, double scale,
                                                           double lo, double hi, int mode, int32_t *restrict o) {
  const __m512d vs = _mm512_set1_pd(scale), vlo = _mm512_set1_pd(lo), vhi = _mm512_set1_pd(hi);
  const __m512d zero = _mm512_setzero_pd(), half = _mm512_set1_pd(0.5), one = _mm512_set1_pd(1.0);
  const __m512i sign = _mm512_set1_epi64(INT64_MIN);
  int nnz = 0;
  int64_t k = 0;
  for (; k + 8 <= K; k += 8) {
    const __m512d xv = _mm512_loadu_pd(xr + k);
    const __m512d v = _mm512_mul_pd(xv, vs);
    __m512d q;
    if (mode == 0) {
      q = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else if (mode == 1) {
      const __m512i vb = _mm512_castpd_si512(v);
      const __m512d a = _mm512_castsi512_pd(_mm512_andnot_si512(sign, vb));
      const __m512d fl = _mm512_roundscale_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      const __mmask8 up = _mm512_cmp_pd_mask(_mm512_sub_pd(a, fl), half, _CMP_GE_OQ);
      const __m512d r = _mm512_mask_add_pd(fl, up, fl, one);
      q = _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(r), _mm512_and_si512(sign, vb)));
    } else {
      q = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      const __mmask8 m1 = _mm512_cmp_pd_mask(v, zero, _CMP_EQ_OQ) & _mm512_cmp_pd_mask(xv, zero, _CMP_LT_OQ);
      q = _mm512_mask_mov_pd(q, m1, _mm512_set1_pd(-1.0));
    }
    q = _mm512_min_pd(_mm512_max_pd(q, vlo), vhi);
    nnz += __builtin_popcount((unsigned)_mm512_cmp_pd_mask(q, zero, _CMP_NEQ_OQ));
    _mm256_storeu_si256((__m256i *)(o + k), _mm512_cvttpd_epi32(q));
  }
  for (; k < K; ++k) {
    const double v = xr[k] * scale;
    double q = mode == 0 ? round_even(v) : (mode == 1 ? round_away(v, lo, hi) : round_trunc(v, xr[k], lo, hi));
    q = q < lo ? lo : (q > hi ? hi : q);
    nnz += q != 0.0;
    o[k] = (int32_t)q;
  }
  return nnz;
}
#endif

/* A row's values xr (K) quantized with scale 2**-e into int32 mantissas o; their non-zero count.
 * levels 3 and 4 run quant_avx512, else the vectorized loops: the same values. */
static inline int quant_i32(int level, const double *xr, int64_t K, double scale, double lo, double hi, int mode,
                            int32_t *o) {
#ifdef HLSNN_X86
  if (level >= 3)
    return quant_avx512(xr, K, scale, lo, hi, mode, o);
#endif
  (void)level;
  return mode == 0 ? even_i32(xr, K, scale, lo, hi, o)
                   : (mode == 1 ? away_i32(xr, K, scale, lo, hi, o) : trunc_i32(xr, K, scale, lo, hi, o));
}

/* The tile's sums in float64 (wtd: the weights' mantissas as float64, (K, Np)), for weights beyond
 * the int32 bound: xd (TILE_ROWS x K) holds the tile's mantissas as float64. Every product and
 * partial sum is an integer below 2**53 in magnitude (the caller's bound), so each operation, a
 * fused multiply-add included, is exact, and the order and the variant change no sum. */
static void tilef_portable(const double *restrict xd, int64_t K, const double *restrict wtd, int64_t Np,
                           double *restrict acc) {
  for (int64_t i = 0; i < TILE_ROWS * Np; ++i)
    acc[i] = 0.0;
  for (int r = 0; r < TILE_ROWS; ++r) {
    double *o = acc + r * Np;
    for (int64_t k = 0; k < K; ++k) {
      const double a = xd[r * K + k];
      if (a == 0.0)
        continue;
      const double *w = wtd + k * Np;
      for (int64_t n = 0; n < Np; ++n)
        o[n] += a * w[n];
    }
  }
}

#ifdef HLSNN_X86
__attribute__((target("avx2"))) static void tilef_avx2(const double *restrict xd, int64_t K,
                                                       const double *restrict wtd, int64_t Np, double *restrict acc) {
  for (int64_t nb = 0; nb < Np; nb += 4) {
    __m256d a[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; ++r)
      a[r] = _mm256_setzero_pd();
    for (int64_t k = 0; k < K; ++k) {
      const __m256d w = _mm256_loadu_pd(wtd + k * Np + nb);
      for (int r = 0; r < TILE_ROWS; ++r)
        a[r] = _mm256_add_pd(a[r], _mm256_mul_pd(_mm256_set1_pd(xd[r * K + k]), w));
    }
    for (int r = 0; r < TILE_ROWS; ++r)
      _mm256_storeu_pd(acc + r * Np + nb, a[r]);
  }
}

__attribute__((target("avx512f"))) static void tilef_avx512(const double *restrict xd, int64_t K,
                                                            const double *restrict wtd, int64_t Np,
                                                            double *restrict acc) {
  for (int64_t nb = 0; nb < Np; nb += 8) {
    __m512d a[TILE_ROWS];
    for (int r = 0; r < TILE_ROWS; ++r)
      a[r] = _mm512_setzero_pd();
    for (int64_t k = 0; k < K; ++k) {
      const __m512d w = _mm512_loadu_pd(wtd + k * Np + nb);
      for (int r = 0; r < TILE_ROWS; ++r)
        a[r] = _mm512_fmadd_pd(_mm512_set1_pd(xd[r * K + k]), w, a[r]);
    }
    for (int r = 0; r < TILE_ROWS; ++r)
      _mm512_storeu_pd(acc + r * Np + nb, a[r]);
  }
}
#endif

/* tilef_* on the variant pick_isa chose. */
static void run_tile_f64(int level, const double *xd, int64_t K, const double *wtd, int64_t Np, double *acc) {
#ifdef HLSNN_X86
  if (level >= 3) {
    tilef_avx512(xd, K, wtd, Np, acc);
    return;
  }
  if (level == 2) {
    tilef_avx2(xd, K, wtd, Np, acc);
    return;
  }
#endif
  (void)level;
  tilef_portable(xd, K, wtd, Np, acc);
}

/* The kernel variant to run for the requested isa (0: the best the CPU has). */
static int pick_isa(int isa) {
  int best = 1;
#ifdef HLSNN_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    best = 5;
  else if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
    best = 4;
  else if (__builtin_cpu_supports("avx512f"))
    best = 3;
  else if (__builtin_cpu_supports("avx2"))
    best = 2;
#endif
  return isa <= 0 || isa > best ? best : isa;
}

/* tacc = the tile's sums, on the variant pick_isa chose (level 4 needs wt2; x16 its scratch). */
static void run_tile(int level, const int32_t *xm, int64_t K, const int32_t *wt, const int16_t *wt2, int64_t Np,
                     int32_t *tacc, int16_t *x16) {
#ifdef HLSNN_X86
  if (level == 5) {
    tile_avx512vnni(xm, K, wt2, Np, tacc, x16);
    return;
  }
  if (level == 4) {
    tile_avx512bw(xm, K, wt2, Np, tacc, x16);
    return;
  }
  if (level == 3) {
    tile_avx512(xm, K, wt, Np, tacc);
    return;
  }
  if (level == 2) {
    tile_avx2(xm, K, wt, Np, tacc);
    return;
  }
#endif
  (void)level, (void)wt2, (void)x16;
  tile_portable(xm, K, wt, Np, tacc);
}

/* The largest of the magnitudes' bit patterns of n values at stride s (they order as the
 * magnitudes do; one at or above 0x7ff0... is a NaN or an infinity). */
static inline int64_t max_bits(const double *p, int64_t n, int64_t s) {
  const int64_t *bits = (const int64_t *)p;
  int64_t m = 0;
  if (s == 1) {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t v = bits[k] & INT64_MAX;
      m = v > m ? v : m;
    }
  } else {
    for (int64_t k = 0; k < n; ++k) {
      const int64_t v = bits[k * s] & INT64_MAX;
      m = v > m ? v : m;
    }
  }
  return m;
}

#ifdef HLSNN_X86
/* max_bits of n contiguous values on AVX-512F (an integer maximum: the same value). */
__attribute__((target("avx512f"))) static int64_t max_bits_avx512(const double *p, int64_t n) {
  const __m512i mag = _mm512_set1_epi64(INT64_MAX);
  __m512i m = _mm512_setzero_si512();
  int64_t k = 0;
  for (; k + 8 <= n; k += 8)
    m = _mm512_max_epi64(m, _mm512_and_si512(_mm512_loadu_si512((const void *)(p + k)), mag));
  const int64_t r = _mm512_reduce_max_epi64(m), tail = max_bits(p + k, n - k, 1);
  return tail > r ? tail : r;
}
#else
#define max_bits_avx512(p, n) max_bits((p), (n), 1)
#endif

/* The im2col row of image b whose window's top left corner is (y0, x0) (pads subtracted), its
 * columns in the order (i, j, c), into buf (zero outside the map). */
static inline void gather_ijc(const double *x, int64_t s_b, int64_t s_c, int64_t s_h, int64_t s_w, int64_t C,
                              int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t dh, int64_t dw, int64_t b,
                              int64_t y0, int64_t x0, double *restrict buf) {
  double *dst = buf;
  for (int64_t i = 0; i < kh; ++i) {
    const int64_t yy = y0 + i * dh;
    for (int64_t j = 0; j < kw; ++j, dst += C) {
      const int64_t xx = x0 + j * dw;
      if (yy < 0 || yy >= H || xx < 0 || xx >= W) {
        for (int64_t c = 0; c < C; ++c)
          dst[c] = 0.0;
        continue;
      }
      const double *src = x + b * s_b + yy * s_h + xx * s_w;
      if (s_c == 1) {
        for (int64_t c = 0; c < C; ++c)
          dst[c] = src[c];
      } else {
        for (int64_t c = 0; c < C; ++c)
          dst[c] = src[c * s_c];
      }
    }
  }
}

/* A convolution's input as the fused passes read it: x with element strides (s_b, s_c, s_h,
 * s_w), C x H x W images, the window geometry, the first image b0 of the call, and pmax, each
 * pixel's largest magnitude (as a bit pattern) over its C values for images [b0, ...). */
typedef struct {
  const double *x;
  int64_t s_b, s_c, s_h, s_w, C, H, W, kh, kw, sh, sw, top, left, dh, dw, oh, ow, b0;
  int64_t *pmax;
} conv_src_t;

/* pmax for images [b0, b1) */
static inline void pixel_maxima(const conv_src_t *g, int64_t b1, int level) {
  for (int64_t b = g->b0; b < b1; ++b)
    for (int64_t yy = 0; yy < g->H; ++yy)
      for (int64_t xx = 0; xx < g->W; ++xx) {
        const double *px = g->x + b * g->s_b + yy * g->s_h + xx * g->s_w;
        g->pmax[((b - g->b0) * g->H + yy) * g->W + xx] =
            level >= 3 && g->s_c == 1 ? max_bits_avx512(px, g->C) : max_bits(px, g->C, g->s_c);
      }
}

/* Row r (image r / (oh * ow)) of the convolution's patches quantized into xrow (K int32
 * mantissas), its exponent to exps[r] and whether a mantissa is non-zero to nonzero[r]; returns the
 * count of non-zero mantissas, or -1 for a NaN or an infinity in its window. The row is kh runs of
 * kw * C contiguous values of a channels-last map when the window lies inside it, else gathered
 * into buf (one run of K); its exponent comes from the window's largest magnitude (pmax). */
static inline int64_t quant_conv_row(const conv_src_t *g, int64_t r, int m, int emin, int emax, int mode, int level,
                                     double lo, double hi, double *buf, int32_t *xrow, int64_t *exps,
                                     uint8_t *nonzero) {
  const int64_t K = g->C * g->kh * g->kw, per = g->oh * g->ow, b = r / per, yx = r % per;
  const int64_t y0 = (yx / g->ow) * g->sh - g->top, x0 = (yx % g->ow) * g->sw - g->left;
  const double *run0 = buf;
  int64_t runs = 1, len = K, step = 0;
  if (g->s_c == 1 && g->s_w == g->C && g->dw == 1 && y0 >= 0 && y0 + (g->kh - 1) * g->dh < g->H && x0 >= 0 &&
      x0 + g->kw - 1 < g->W) {
    run0 = g->x + b * g->s_b + y0 * g->s_h + x0 * g->s_w;
    runs = g->kh, len = g->kw * g->C, step = g->dh * g->s_h;
  } else {
    gather_ijc(g->x, g->s_b, g->s_c, g->s_h, g->s_w, g->C, g->H, g->W, g->kh, g->kw, g->dh, g->dw, b, y0, x0, buf);
  }
  int64_t mbits = 0; /* the window's largest magnitude (pixel maxima) */
  for (int64_t i = 0; i < g->kh; ++i) {
    const int64_t yy = y0 + i * g->dh;
    if (yy < 0 || yy >= g->H)
      continue;
    const int64_t *prow = g->pmax + ((b - g->b0) * g->H + yy) * g->W;
    for (int64_t j = 0; j < g->kw; ++j) {
      const int64_t xx = x0 + j * g->dw;
      if (xx >= 0 && xx < g->W && prow[xx] > mbits)
        mbits = prow[xx];
    }
  }
  if (mbits >= (int64_t)0x7ff0000000000000LL) /* a NaN or an infinity in the window */
    return -1;
  union {
    int64_t i;
    double d;
  } ab;
  ab.i = mbits;
  const int e = exponent_of(ab.d, m, emin, emax);
  const double scale = pow2(-e);
  int64_t row_nnz = 0;
  for (int64_t i = 0; i < runs; ++i)
    row_nnz += quant_i32(level, run0 + i * step, len, scale, lo, hi, mode, xrow + i * len);
  exps[r] = e;
  nonzero[r] = row_nnz > 0;
  return row_nnz;
}

/* Rows [r0, r0 + t) quantized as quant_conv_row does, row r0 + q into xm + q * K: the count of
 * non-zero mantissas, or -1 for a NaN or an infinity. */
static inline int64_t quant_conv_tile(const conv_src_t *g, int64_t r0, int64_t t, int m, int emin, int emax, int mode,
                                      int level, double lo, double hi, double *buf, int32_t *xm, int64_t *exps,
                                      uint8_t *nonzero) {
  const int64_t K = g->C * g->kh * g->kw;
  int64_t nnz = 0;
  for (int64_t q = 0; q < t; ++q) {
    const int64_t row_nnz = quant_conv_row(g, r0 + q, m, emin, emax, mode, level, lo, hi, buf, xm + q * K, exps,
                                           nonzero);
    if (row_nnz < 0)
      return -1;
    nnz += row_nnz;
  }
  return nnz;
}

/* A row of K values quantized into xrow, its exponent to *e_out and its non-zero flag to *nz_out;
 * the count of non-zero mantissas, or -1 for a NaN or an infinity. */
static inline int64_t quant_dense_row(const double *xr, int64_t K, int m, int emin, int emax, int mode, int level,
                                      double lo, double hi, int32_t *xrow, int64_t *e_out, uint8_t *nz_out) {
  int bad;
  const int e = exponent_of(row_amax(xr, K, &bad), m, emin, emax);
  if (bad)
    return -1;
  const int row_nnz = quant_i32(level, xr, K, pow2(-e), lo, hi, mode, xrow);
  *e_out = e;
  *nz_out = row_nnz > 0;
  return row_nnz;
}

/* The sums of a tile's first t rows of mantissas (xm, TILE_ROWS x K; its other rows are zeroed
 * here) into rows [r0, r0 + t) of acc (row stride N): in float64 with wtd (xd: the tile as float64,
 * TILE_ROWS * K), else in int32; the other arguments as hlsnn_bfp_conv_gemm's. */
static void tile_sums(int level, int32_t *xm, int64_t t, int64_t K, const int32_t *wt, const int16_t *wt2,
                      const double *wtd, int64_t Np, int64_t N, void *acc, int acc_f32, int64_t r0, double *xd,
                      int32_t *tacc, double *taccd, int16_t *x16) {
  for (int64_t i = t * K; i < TILE_ROWS * K; ++i) /* the last tile's missing rows */
    xm[i] = 0;
  if (wtd) {
    for (int64_t i = 0; i < TILE_ROWS * K; ++i)
      xd[i] = (double)xm[i];
    run_tile_f64(level, xd, K, wtd, Np, taccd);
    for (int64_t q = 0; q < t; ++q) {
      const double *s = taccd + q * Np;
      double *d = (double *)acc + (r0 + q) * N;
      for (int64_t n = 0; n < N; ++n)
        d[n] = s[n];
    }
    return;
  }
  run_tile(level, xm, K, wt, wt2, Np, tacc, x16);
  for (int64_t q = 0; q < t; ++q) {
    const int32_t *s = tacc + q * Np;
    if (acc_f32) {
      float *d = (float *)acc + (r0 + q) * N;
      for (int64_t n = 0; n < N; ++n)
        d[n] = (float)s[n];
    } else {
      double *d = (double *)acc + (r0 + q) * N;
      for (int64_t n = 0; n < N; ++n)
        d[n] = (double)s[n];
    }
  }
}

int64_t hlsnn_bfp_conv_gemm(const double *x, int64_t s_b, int64_t s_c, int64_t s_h, int64_t s_w, int64_t C,
                            int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t top,
                            int64_t left, int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t b0, int64_t b1,
                            int m, int emin, int emax, int mode, const int32_t *wt, int64_t N, int64_t Np, int isa,
                            const int16_t *wt2, const double *wtd, void *acc, int acc_f32, int64_t *exps,
                            uint8_t *nonzero, double *buf, int32_t *xm, int32_t *tacc, double *taccd, int64_t *pmax,
                            int16_t *x16) {
  const int64_t K = C * kh * kw, per = oh * ow, r_end = b1 * per;
  const double lo = -pow2(m - 1), hi = pow2(m - 1) - 1.0;
  const int level = pick_isa(isa) >= 4 && !wt2 ? 3 : pick_isa(isa);
  const conv_src_t src = {x, s_b, s_c, s_h, s_w, C, H, W, kh, kw, sh, sw, top, left, dh, dw, oh, ow, b0, pmax};
  pixel_maxima(&src, b1, level);
  int64_t nnz = 0;
  for (int64_t r0 = b0 * per; r0 < r_end; r0 += TILE_ROWS) {
    const int64_t t = r_end - r0 < TILE_ROWS ? r_end - r0 : TILE_ROWS;
    const int64_t tile_nnz = quant_conv_tile(&src, r0, t, m, emin, emax, mode, level, lo, hi, buf, xm, exps, nonzero);
    if (tile_nnz < 0)
      return -1;
    nnz += tile_nnz;
    tile_sums(level, xm, t, K, wt, wt2, wtd, Np, N, acc, acc_f32, r0, buf, tacc, taccd, x16);
  }
  return nnz;
}

/* hlsnn_bfp_rows_gemm: hlsnn_bfp_rows fused with the GEMM's exact sums as hlsnn_bfp_conv_gemm forms
 * them: rows [0, rows) of x (K values, row stride ld) quantized TILE_ROWS at a time into int32
 * mantissas (columns in x's order: wt's rows are the weights' columns), their sums written to rows
 * [0, rows) of acc (row stride N); the parameters and scratch as hlsnn_bfp_conv_gemm's (no pmax).
 * Returns the count of non-zero mantissas, or -1 for a NaN or an infinity. */
int64_t hlsnn_bfp_rows_gemm(const double *x, int64_t rows, int64_t K, int64_t ld, int m, int emin, int emax, int mode,
                            const int32_t *wt, int64_t N, int64_t Np, int isa, const int16_t *wt2, const double *wtd,
                            void *acc, int acc_f32, int64_t *exps, uint8_t *nonzero, double *buf, int32_t *xm,
                            int32_t *tacc, double *taccd, int16_t *x16) {
  const double lo = -pow2(m - 1), hi = pow2(m - 1) - 1.0;
  const int level = pick_isa(isa) >= 4 && !wt2 ? 3 : pick_isa(isa);
  int64_t nnz = 0;
  for (int64_t r0 = 0; r0 < rows; r0 += TILE_ROWS) {
    const int64_t t = rows - r0 < TILE_ROWS ? rows - r0 : TILE_ROWS;
    for (int64_t q = 0; q < t; ++q) {
      const int64_t row_nnz = quant_dense_row(x + (r0 + q) * ld, K, m, emin, emax, mode, level, lo, hi, xm + q * K,
                                              exps + r0 + q, nonzero + r0 + q);
      if (row_nnz < 0)
        return -1;
      nnz += row_nnz;
    }
    tile_sums(level, xm, t, K, wt, wt2, wtd, Np, N, acc, acc_f32, r0, buf, tacc, taccd, x16);
  }
  return nnz;
}

/* The epilogue's loops, one per variant so that each vectorizes (VEC_CLONES). */
#define RND(MODE, V) ((MODE) == 0 ? round_even(V) : ((MODE) == 1 ? round_away((V), -INFINITY, INFINITY) : floor(V)))
#define EPI_BIAS(NAME, ACC_T, MODE)                                                                  \
  static inline void NAME(const ACC_T *restrict acc, int64_t N, const double *restrict bcol, double bscale, \
                              double lo_a, double hi_a, const double *restrict colscale, double *restrict a) { \
    for (int64_t n = 0; n < N; ++n) {                                                                \
      double t = bcol[n] * bscale;                                                                   \
      t = RND(MODE, t);                                                                              \
      t = t < lo_a ? lo_a : (t > hi_a ? hi_a : t);                                                   \
      double v = (double)acc[n] + t;                                                                 \
      v = v < lo_a ? lo_a : (v > hi_a ? hi_a : v);                                                   \
      a[n] = v * colscale[n];                                                                        \
    }                                                                                                \
  }
EPI_BIAS(bias_f32_0, float, 0)
EPI_BIAS(bias_f32_1, float, 1)
EPI_BIAS(bias_f32_2, float, 2)
EPI_BIAS(bias_f64_0, double, 0)
EPI_BIAS(bias_f64_1, double, 1)
EPI_BIAS(bias_f64_2, double, 2)
#define EPI_NOBIAS(NAME, ACC_T)                                                                      \
  static inline void NAME(const ACC_T *restrict acc, int64_t N, const double *restrict colscale,  \
                              double *restrict a) {                                                  \
    for (int64_t n = 0; n < N; ++n)                                                                  \
      a[n] = (double)acc[n] * colscale[n];                                                           \
  }
EPI_NOBIAS(nobias_f32, float)
EPI_NOBIAS(nobias_f64, double)

static inline void relu_row(double *restrict a, int64_t N) {
  for (int64_t n = 0; n < N; ++n)
    a[n] = a[n] >= 0.0 ? a[n] : 0.0;
}

/* max |a[n]| of finite values: the largest of their magnitudes' bit patterns, which order as
 * the magnitudes do (an integer maximum, so that it vectorizes). */
static inline double max_abs(const double *restrict a, int64_t N) {
  const int64_t *bits = (const int64_t *)a;
  int64_t m = 0;
  for (int64_t n = 0; n < N; ++n) {
    const int64_t v = bits[n] & INT64_MAX;
    m = v > m ? v : m;
  }
  union {
    int64_t i;
    double d;
  } b;
  b.i = m;
  return b.d;
}

#define EPI_OUT(NAME, MODE)                                                                          \
  static inline int NAME(double *restrict a, int64_t N, double scale, double unit, double lo, double hi) { \
    int sat = 0;                                                                                     \
    for (int64_t n = 0; n < N; ++n) {                                                                \
      const double v = a[n] * scale;                                                                 \
      double q = RND(MODE, v);                                                                       \
      sat += (q > hi) | (q < lo);                                                                    \
      q = q < lo ? lo : (q > hi ? hi : q);                                                           \
      a[n] = q * unit + 0.0;                                                                         \
    }                                                                                                \
    return sat;                                                                                      \
  }
EPI_OUT(out_0, 0)
EPI_OUT(out_1, 1)
EPI_OUT(out_2, 2)

VEC_CLONES int64_t hlsnn_bfp_epilogue(const void *acc, int acc_f32, int64_t ld, int64_t rows, int64_t N, const int64_t *xe,
                           const double *colscale, const double *bcol, double lo_a, double hi_a, int relu, int M,
                           int emin, int emax, int mode, double *out, int64_t *ye) {
  const double lo = -ldexp(1.0, M - 1), hi = ldexp(1.0, M - 1) - 1.0;
  int64_t sat = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double *a = out + r * N;
    const float *af = (const float *)acc + r * ld;
    const double *ad = (const double *)acc + r * ld;
    if (bcol) {
      const double bscale = pow2((int)-xe[r]);
      if (acc_f32) {
        if (mode == 0)
          bias_f32_0(af, N, bcol, bscale, lo_a, hi_a, colscale, a);
        else if (mode == 1)
          bias_f32_1(af, N, bcol, bscale, lo_a, hi_a, colscale, a);
        else
          bias_f32_2(af, N, bcol, bscale, lo_a, hi_a, colscale, a);
      } else {
        if (mode == 0)
          bias_f64_0(ad, N, bcol, bscale, lo_a, hi_a, colscale, a);
        else if (mode == 1)
          bias_f64_1(ad, N, bcol, bscale, lo_a, hi_a, colscale, a);
        else
          bias_f64_2(ad, N, bcol, bscale, lo_a, hi_a, colscale, a);
      }
    } else if (acc_f32) {
      nobias_f32(af, N, colscale, a);
    } else {
      nobias_f64(ad, N, colscale, a);
    }
    if (relu)
      relu_row(a, N);
    const double amax = max_abs(a, N);
    int64_t e4 = emin;
    if (amax > 0.0) {
      e4 = (int64_t)ilog2(amax) + xe[r] - (M - 2);
      e4 = e4 < emin ? emin : (e4 > emax ? emax : e4);
    }
    ye[r] = e4;
    const double scale = pow2((int)(xe[r] - e4)), unit = pow2((int)e4);
    sat += mode == 0 ? out_0(a, N, scale, unit, lo, hi)
                     : (mode == 1 ? out_1(a, N, scale, unit, lo, hi) : out_2(a, N, scale, unit, lo, hi));
  }
  return sat;
}

/* The epilogue of hlsnn_bfp_layer: hlsnn_bfp_epilogue's rules on float64 sums, one row at a time
 * (epi_row), each row's aligned bias clamp_A(round(bcol * 2**-xe)) formed once per run of rows of
 * one exponent (into tb, N doubles; tb_e its exponent, tb_ok whether it holds one) instead of once
 * per row: the same operations on the same values, so hlsnn_bfp_epilogue's bits. */
#define EPI_BIAS_ROW(NAME, MODE)                                                                     \
  static inline void NAME(const double *restrict bcol, int64_t N, double bscale, double lo_a, double hi_a, \
                          double *restrict t) {                                                      \
    for (int64_t n = 0; n < N; ++n) {                                                                \
      double v = bcol[n] * bscale;                                                                   \
      v = RND(MODE, v);                                                                              \
      t[n] = v < lo_a ? lo_a : (v > hi_a ? hi_a : v);                                                \
    }                                                                                                \
  }
EPI_BIAS_ROW(bias_row_0, 0)
EPI_BIAS_ROW(bias_row_1, 1)
EPI_BIAS_ROW(bias_row_2, 2)

static inline void add_bias_row(const double *restrict acc, const double *restrict t, int64_t N, double lo_a,
                                double hi_a, const double *restrict colscale, double *restrict a) {
  for (int64_t n = 0; n < N; ++n) {
    double v = acc[n] + t[n];
    v = v < lo_a ? lo_a : (v > hi_a ? hi_a : v);
    a[n] = v * colscale[n];
  }
}

typedef struct {
  const double *colscale, *bcol;
  double lo_a, hi_a;
  int relu, M, emin, emax, mode;
  int64_t N;
  double *out; /* (rows, N) */
  int64_t *ye;
  double *tb; /* N doubles */
  double *tmp; /* N + 8 doubles: epi_row_avx512's row between its passes */
  int64_t tb_e;
  int tb_ok;
  int level; /* pick_isa's choice: 3 and up run epi_row_avx512 */
  int clip;  /* then clamp each output to [clo, chi] (a Clip host op fused: hlsnn.deploy.hostops) */
  double clo, chi;
} epi_t;

/* The row's aligned bias in p->tb for exponent xe (formed when xe differs from the last). */
static inline void epi_bias(epi_t *p, int64_t xe) {
  if (p->tb_ok && xe == p->tb_e)
    return;
  const double bscale = pow2((int)-xe);
  if (p->mode == 0)
    bias_row_0(p->bcol, p->N, bscale, p->lo_a, p->hi_a, p->tb);
  else if (p->mode == 1)
    bias_row_1(p->bcol, p->N, bscale, p->lo_a, p->hi_a, p->tb);
  else
    bias_row_2(p->bcol, p->N, bscale, p->lo_a, p->hi_a, p->tb);
  p->tb_ok = 1, p->tb_e = xe;
}

#ifdef HLSNN_X86
/* epi_row on AVX-512F, 8 outputs a step (a masked last step): the same operations on the same
 * values (the clamps as comparisons, ReLU keeping a -0.0 as relu_row does, the roundings as
 * quant_avx512's, which are round_even's, round_away's and floor's values), so the same bits;
 * max_abs as an integer maximum of the magnitudes' bit patterns. */
__attribute__((target("avx512f"))) static int64_t epi_row_avx512(epi_t *p, const double *ad, int64_t r, int64_t xe) {
  const int64_t N = p->N;
  double *a = p->out + r * N;
  const __m512d lo_a = _mm512_set1_pd(p->lo_a), hi_a = _mm512_set1_pd(p->hi_a), zero = _mm512_setzero_pd();
  const __m512i mag = _mm512_set1_epi64(INT64_MAX);
  if (p->bcol)
    epi_bias(p, xe);
  __m512i mx = _mm512_setzero_si512();
  for (int64_t n = 0; n < N; n += 8) {
    const __mmask8 k = N - n >= 8 ? 0xff : (__mmask8)((1u << (N - n)) - 1);
    __m512d v = _mm512_maskz_loadu_pd(k, ad + n);
    if (p->bcol) {
      v = _mm512_add_pd(v, _mm512_maskz_loadu_pd(k, p->tb + n));
      v = _mm512_mask_mov_pd(v, _mm512_cmp_pd_mask(v, lo_a, _CMP_LT_OQ), lo_a);
      v = _mm512_mask_mov_pd(v, _mm512_cmp_pd_mask(v, hi_a, _CMP_GT_OQ), hi_a);
    }
    v = _mm512_mul_pd(v, _mm512_maskz_loadu_pd(k, p->colscale + n));
    if (p->relu)
      v = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(v, zero, _CMP_GE_OQ), v);
    mx = _mm512_mask_max_epi64(mx, k, mx, _mm512_and_si512(_mm512_castpd_si512(v), mag));
    _mm512_storeu_pd(p->tmp + n, v); /* whole vectors: the load below is forwarded from the store */
  }
  union {
    int64_t i;
    double d;
  } ab;
  ab.i = _mm512_reduce_max_epi64(mx);
  int64_t e4 = p->emin;
  if (ab.d > 0.0) {
    e4 = (int64_t)ilog2(ab.d) + xe - (p->M - 2);
    e4 = e4 < p->emin ? p->emin : (e4 > p->emax ? p->emax : e4);
  }
  p->ye[r] = e4;
  const __m512d vs = _mm512_set1_pd(pow2((int)(xe - e4))), vu = _mm512_set1_pd(pow2((int)e4));
  const __m512d vlo = _mm512_set1_pd(-pow2(p->M - 1)), vhi = _mm512_set1_pd(pow2(p->M - 1) - 1.0);
  const __m512d half = _mm512_set1_pd(0.5), one = _mm512_set1_pd(1.0);
  const __m512i sign = _mm512_set1_epi64(INT64_MIN);
  int64_t sat = 0;
  for (int64_t n = 0; n < N; n += 8) {
    const __mmask8 k = N - n >= 8 ? 0xff : (__mmask8)((1u << (N - n)) - 1);
    const __m512d v = _mm512_mul_pd(_mm512_loadu_pd(p->tmp + n), vs);
    __m512d q;
    if (p->mode == 0) {
      q = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    } else if (p->mode == 1) {
      const __m512i vb = _mm512_castpd_si512(v);
      const __m512d av = _mm512_castsi512_pd(_mm512_andnot_si512(sign, vb));
      const __m512d fl = _mm512_roundscale_pd(av, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
      const __mmask8 up = _mm512_cmp_pd_mask(_mm512_sub_pd(av, fl), half, _CMP_GE_OQ);
      const __m512d rr = _mm512_mask_add_pd(fl, up, fl, one);
      q = _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(rr), _mm512_and_si512(sign, vb)));
    } else {
      q = _mm512_roundscale_pd(v, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    }
    const __mmask8 hi_m = _mm512_cmp_pd_mask(q, vhi, _CMP_GT_OQ) & k, lo_m = _mm512_cmp_pd_mask(q, vlo, _CMP_LT_OQ) & k;
    sat += __builtin_popcount((unsigned)(hi_m | lo_m));
    q = _mm512_mask_mov_pd(q, hi_m, vhi);
    q = _mm512_mask_mov_pd(q, lo_m, vlo);
    __m512d y = _mm512_add_pd(_mm512_mul_pd(q, vu), zero);
    if (p->clip) {
      const __m512d clo = _mm512_set1_pd(p->clo), chi = _mm512_set1_pd(p->chi);
      y = _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(y, clo, _CMP_LT_OQ), clo);
      y = _mm512_mask_mov_pd(y, _mm512_cmp_pd_mask(y, chi, _CMP_GT_OQ), chi);
    }
    _mm512_mask_storeu_pd(a + n, k, y);
  }
  return sat;
}
#endif

/* Row r of the outputs from its sums ad (N float64) and exponent xe; returns its saturations. */
VEC_CLONES static int64_t epi_row_c(epi_t *p, const double *ad, int64_t r, int64_t xe) {
  const int64_t N = p->N;
  const double lo = -pow2(p->M - 1), hi = pow2(p->M - 1) - 1.0;
  double *a = p->out + r * N;
  if (p->bcol) {
    epi_bias(p, xe);
    add_bias_row(ad, p->tb, N, p->lo_a, p->hi_a, p->colscale, a);
  } else {
    nobias_f64(ad, N, p->colscale, a);
  }
  if (p->relu)
    relu_row(a, N);
  const double amax = max_abs(a, N);
  int64_t e4 = p->emin;
  if (amax > 0.0) {
    e4 = (int64_t)ilog2(amax) + xe - (p->M - 2);
    e4 = e4 < p->emin ? p->emin : (e4 > p->emax ? p->emax : e4);
  }
  p->ye[r] = e4;
  const double scale = pow2((int)(xe - e4)), unit = pow2((int)e4);
  const int64_t sat = p->mode == 0 ? out_0(a, N, scale, unit, lo, hi)
                                   : (p->mode == 1 ? out_1(a, N, scale, unit, lo, hi) : out_2(a, N, scale, unit, lo, hi));
  if (p->clip)
    for (int64_t n = 0; n < N; ++n)
      a[n] = a[n] < p->clo ? p->clo : (a[n] > p->chi ? p->chi : a[n]);
  return sat;
}

static inline int64_t epi_row(epi_t *p, const double *ad, int64_t r, int64_t xe) {
#ifdef HLSNN_X86
  if (p->level >= 3)
    return epi_row_avx512(p, ad, r, xe);
#endif
  return epi_row_c(p, ad, r, xe);
}

/* After a tile's sums (rows r0 .. r0 + t - 1 in tile, row stride N): the epilogue of its rows with
 * a non-zero mantissa (their exponents are final); the all-zero rows wait for rule 2. */
static int64_t tile_epilogue(epi_t *p, const double *tile, int64_t r0, int64_t t, const int64_t *exps,
                             const uint8_t *nonzero) {
  int64_t sat = 0;
  for (int64_t q = 0; q < t; ++q)
    if (nonzero[r0 + q])
      sat += epi_row(p, tile + q * p->N, r0 + q, exps[r0 + q]);
  return sat;
}

/* A tile's sums for hlsnn_bfp_layer: tile_sums, or with ws2 (the weights as int16 pairs, the
 * caller's bound of tile_split_vnni holding, a CPU with AVX-512 VNNI) tile_split_vnni's two int32
 * sums put together, 256 * acc_h + acc_l, in float64: exact (each term is, and the sum is a partial
 * sum of the float64 path, below 2**53). */
static void layer_sums(int level, int32_t *xm, int64_t t, int64_t K, const int32_t *wt, const int16_t *wt2,
                       const double *wtd, const int16_t *ws2, int64_t Np, int64_t N, double *tile, double *buf,
                       int32_t *tacc, double *taccd, int16_t *x16) {
#ifdef HLSNN_X86
  if (ws2) {
    for (int64_t i = t * K; i < TILE_ROWS * K; ++i) /* the last tile's missing rows */
      xm[i] = 0;
    tile_split_vnni(xm, K, ws2, Np, tacc, x16);
    for (int64_t q = 0; q < t; ++q)
      for (int64_t n = 0; n < N; ++n)
        tile[q * N + n] = (double)tacc[q * Np + n] * 256.0 + (double)tacc[TILE_ROWS * Np + q * Np + n];
    return;
  }
#endif
  (void)ws2;
  tile_sums(level, xm, t, K, wt, wt2, wtd, Np, N, tile, 0, 0, buf, tacc, taccd, x16);
}

/* A depthwise convolution's sums (one group per channel, Z = C): output z reads only channel z of
 * its window, so its sum over the whole row (the block-diagonal weights are zero elsewhere) is
 * the sum over its kh * kw taps, here formed from those alone: the same integers, exact in int32
 * (the caller's bound). xm: t rows of K = taps * C mantissas in (i, j, c) order; wdw (taps, Np)
 * int32, tap-major; the sums as float64 to tile (t rows of N = C). */
VEC_CLONES static void dw_sums(const int32_t *restrict xm, int64_t t, int64_t taps, int64_t C,
                               const int32_t *restrict wdw, int64_t Np, double *restrict tile, int32_t *restrict s) {
  for (int64_t q = 0; q < t; ++q) {
    const int32_t *xr = xm + q * taps * C;
    for (int64_t z = 0; z < C; ++z)
      s[z] = 0;
    for (int64_t k = 0; k < taps; ++k) {
      const int32_t *xk = xr + k * C, *wk = wdw + k * Np;
      for (int64_t z = 0; z < C; ++z)
        s[z] += xk[z] * wk[z];
    }
    for (int64_t z = 0; z < C; ++z)
      tile[q * C + z] = (double)s[z];
  }
}

/* hlsnn_bfp_conv_gemm's loop with each tile's sums (into tile, TILE_ROWS x N) going through
 * tile_epilogue at once instead of to a (rows, N) array; *sat gets its saturations. */
static int64_t conv_fused(const double *x, int64_t s_b, int64_t s_c, int64_t s_h, int64_t s_w, int64_t C, int64_t H,
                          int64_t W, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t top, int64_t left,
                          int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t b0, int64_t b1, int m, int emin,
                          int emax, int mode, const int32_t *wt, int64_t N, int64_t Np, int isa, const int16_t *wt2,
                          const double *wtd, double *tile, int64_t *exps, uint8_t *nonzero, double *buf, int32_t *xm,
                          int32_t *tacc, double *taccd, int64_t *pmax, int16_t *x16, epi_t *epi, int64_t *sat,
                          const int32_t *wdw, const int16_t *ws2) {
  const int64_t K = C * kh * kw, per = oh * ow, r_end = b1 * per;
  const double lo = -pow2(m - 1), hi = pow2(m - 1) - 1.0;
  const int level = pick_isa(isa) >= 4 && !wt2 ? 3 : pick_isa(isa);
  const conv_src_t src = {x, s_b, s_c, s_h, s_w, C, H, W, kh, kw, sh, sw, top, left, dh, dw, oh, ow, b0, pmax};
  pixel_maxima(&src, b1, level);
  int64_t nnz = 0;
  for (int64_t r0 = b0 * per; r0 < r_end; r0 += TILE_ROWS) {
    const int64_t t = r_end - r0 < TILE_ROWS ? r_end - r0 : TILE_ROWS;
    const int64_t tile_nnz = quant_conv_tile(&src, r0, t, m, emin, emax, mode, level, lo, hi, buf, xm, exps, nonzero);
    if (tile_nnz < 0)
      return -1;
    nnz += tile_nnz;
    if (wdw)
      dw_sums(xm, t, kh * kw, C, wdw, Np, tile, tacc);
    else
      layer_sums(level, xm, t, K, wt, wt2, wtd, ws2, Np, N, tile, buf, tacc, taccd, x16);
    *sat += tile_epilogue(epi, tile, r0, t, exps, nonzero);
  }
  return nnz;
}

/* hlsnn_bfp_rows_gemm's loop likewise (rows [r0, r1) of x). */
static int64_t rows_fused(const double *x, int64_t r_begin, int64_t r_end, int64_t K, int64_t ld, int m, int emin,
                          int emax, int mode, const int32_t *wt, int64_t N, int64_t Np, int isa, const int16_t *wt2,
                          const double *wtd, double *tile, int64_t *exps, uint8_t *nonzero, double *buf, int32_t *xm,
                          int32_t *tacc, double *taccd, int16_t *x16, epi_t *epi, int64_t *sat,
                          const int16_t *ws2) {
  const double lo = -pow2(m - 1), hi = pow2(m - 1) - 1.0;
  const int level = pick_isa(isa) >= 4 && !wt2 ? 3 : pick_isa(isa);
  int64_t nnz = 0;
  for (int64_t r0 = r_begin; r0 < r_end; r0 += TILE_ROWS) {
    const int64_t t = r_end - r0 < TILE_ROWS ? r_end - r0 : TILE_ROWS;
    for (int64_t q = 0; q < t; ++q) {
      const int64_t row_nnz = quant_dense_row(x + (r0 + q) * ld, K, m, emin, emax, mode, level, lo, hi, xm + q * K,
                                              exps + r0 + q, nonzero + r0 + q);
      if (row_nnz < 0)
        return -1;
      nnz += row_nnz;
    }
    layer_sums(level, xm, t, K, wt, wt2, wtd, ws2, Np, N, tile, buf, tacc, taccd, x16);
    *sat += tile_epilogue(epi, tile, r0, t, exps, nonzero);
  }
  return nnz;
}

/* hlsnn_bfp_layer: one GEMM call of a bfp_systolic layer as the layer path makes it
 * (hlsnn.deploy.runner.BfpExec -> Kernel.gemm_rows on the B images of one slice; one pack of groups,
 * one chunk of outputs), in one C call (hlsnn.compiled.netbfpfast):
 *   1. the activations quantized and their exact sums formed, TILE_ROWS rows at a time, as
 *      hlsnn_bfp_rows_gemm does on rows of x (dense: K = C values a row, row stride s_b) and
 *      hlsnn_bfp_conv_gemm on images of the map (the other arguments as there); the rows'
 *      exponents and non-zero flags to exps, nonzero;
 *   2. Kernel.gemm_rows' rule for all-zero rows (every mantissa 0): each takes zexp, the layer's
 *      exponent (the emulator's rule 0, clamp(be - max we, emin, emax): batch-free);
 *   3. the epilogue (the max rule; epi_row, hlsnn_bfp_epilogue's bits) on each row's sums: the
 *      dequantized outputs to out ((rows, N) float64), the output exponents to ye.
 * Rule 2 changes only all-zero rows, whose sums are all 0: a row with a non-zero mantissa goes
 * through step 3 as soon as its tile's sums are formed (they are never stored), the all-zero
 * rows after rule 2, on sums of zeros.
 * phase 0 runs all of it on images [0, B); phase 1 steps 1 and 3 for the non-zero rows of images
 * [b0, b1) (dense: rows), at their places in the whole (B images), and phase 2 step 3 for the
 * all-zero rows among rows [b0, b1), whose exponents the caller has set by rule 2: so that threads
 * share a large slice (pmax then holds (b1 - b0) * H * W). Scratch: tile ((TILE_ROWS + 3) * N + 8
 * doubles) and the others as hlsnn_bfp_conv_gemm's. wdw (not NULL: a depthwise convolution with
 * int32 sums, N = C) the taps' weights for dw_sums, which then forms the sums. clip: each output
 * then clamped to [clo, chi] (v < clo ? clo : v > chi ? chi : v: numpy's clip on these values).
 * wsplit (not NULL: the weights as int16 pairs, 255 * max_n sum_k |w| < 2**31) lets the sums that
 * would be formed in float64 (wtd) be formed by tile_split_vnni where the variant chosen is 5
 * (tacc and x16 then twice the size). res[0] gets the count of non-zero mantissas
 * (phases 0, 1), res[1] the saturations; phase 0 also res[2] the count of all-zero rows and res[3]
 * the largest exponent of the other rows (INT64_MIN for none). Returns 0, or -1 for a NaN or an infinity in the
 * activations (nothing else then holds). */
int64_t hlsnn_bfp_layer(int dense, const double *x, int64_t s_b, int64_t s_c, int64_t s_h, int64_t s_w, int64_t C,
                        int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t top,
                        int64_t left, int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t B, int m, int emin,
                        int emax, int mode, const int32_t *wt, int64_t N, int64_t Np, int isa, const int16_t *wt2,
                        const double *wtd, double *tile, int64_t *exps, uint8_t *nonzero, double *buf, int32_t *xm,
                        int32_t *tacc, double *taccd, int64_t *pmax, int16_t *x16, const double *colscale,
                        const double *bcol, double lo_a, double hi_a, int relu, double *out, int64_t *ye,
                        int64_t *res, int phase, int64_t b0, int64_t b1, const int32_t *wdw, int clip, double clo,
                        double chi, const int16_t *wsplit, int64_t zexp) {
  const int16_t *ws2 = wsplit && pick_isa(isa) >= 5 ? wsplit : NULL;
  const int64_t per = dense ? 1 : oh * ow, rows = B * per;
  double *zero = tile + TILE_ROWS * N;
  epi_t epi = {colscale, bcol, lo_a, hi_a, relu, m, emin, emax, mode, N, out, ye, zero + N, zero + 2 * N, 0, 0,
               pick_isa(isa), clip, clo, chi};
  int64_t sat = 0;
  if (phase == 0)
    b0 = 0, b1 = B;
  if (phase != 2) {
    const int64_t nnz =
        dense ? rows_fused(x, b0, b1, C, s_b, m, emin, emax, mode, wt, N, Np, isa, wt2, wtd, tile, exps, nonzero, buf,
                           xm, tacc, taccd, x16, &epi, &sat, ws2)
              : conv_fused(x, s_b, s_c, s_h, s_w, C, H, W, kh, kw, sh, sw, top, left, dh, dw, oh, ow, b0, b1, m,
                           emin, emax, mode, wt, N, Np, isa, wt2, wtd, tile, exps, nonzero, buf, xm, tacc, taccd,
                           pmax, x16, &epi, &sat, wdw, ws2);
    if (nnz < 0)
      return -1;
    res[0] = nnz;
    if (phase == 1) {
      res[1] = sat;
      return 0;
    }
  }
  if (phase == 0) {
    int all = 1;
    int64_t emx = INT64_MIN;
    for (int64_t r = 0; r < rows; ++r) {
      if (nonzero[r])
        emx = exps[r] > emx ? exps[r] : emx;
      else
        all = 0;
    }
    if (!all)
      for (int64_t r = 0; r < rows; ++r)
        if (!nonzero[r])
          exps[r] = zexp;
    int64_t zeros = 0;
    for (int64_t r = 0; r < rows; ++r)
      zeros += !nonzero[r];
    res[2] = zeros, res[3] = emx;
    b1 = rows;
  }
  for (int64_t n = 0; n < N; ++n)
    zero[n] = 0.0;
  for (int64_t r = b0; r < b1; ++r)
    if (!nonzero[r])
      sat += epi_row(&epi, zero, r, exps[r]);
  res[1] = sat;
  return 0;
}
