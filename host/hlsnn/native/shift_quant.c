/* shift_quant.c: the compiled twins of the per-element passes of shift_mac's float GEMM
 * (hlsnn/engines/shift_mac/floatgemm.py, called through compiled.py).
 *
 * The numpy code is the specification; each function here gives the same bits (the tests in
 * tests/engines/shift_mac/test_compiled.py hold them equal). Every function works on a
 * range of rows, so that Python threads can run the halves of one array at once (ctypes
 * releases the GIL during the call). Arrays are float64 rows with unit column stride; `ld*`
 * is the row stride in elements.
 *
 * Rounding without a libm call per element: for 0 <= m < 2**52, (m + 2**52) - 2**52 is m
 * rounded to an integer, ties to even (the sum's ulp is 1), i.e. rint(m); an m >= 2**52 is
 * already an integer. The sign is put back with copysign, so rint(-0.3) is -0.0 as numpy's.
 * Multiplying by an exact power of two 2**f (a normal float64) is correctly rounded, as
 * ldexp(., f) is: the two give the same bits.
 *
 * GCC: no-trapping-math lets the loops' selects be vectorized (the result bits do not depend on
 * it; nothing here reads the floating-point exception flags).
 *
 * x86-64 (GCC or Clang): the hot loops also have AVX2 versions (target attributes, so the build
 * flags stay portable), chosen at run time when the CPU has AVX2 (has_avx2; hlsnn_shift_isa(0)
 * turns them off, for the tests). They do the same float64 operations, never fused (no FMA:
 * no "fma" target, and -std=c99 keeps contraction off), or exact equivalents (ROUNDPD for rint
 * and floor, MINPD/MAXPD for selects on non-NaN values). Elsewhere (-DHLSNN_PORTABLE too)
 * only the portable code is built.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__GNUC__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define HLSNN_X86 1 /* AVX2 versions of some loops, chosen at run time (target attributes) */
#include <immintrin.h>
static int isa_avx2 = -1; /* unknown yet; see hlsnn_shift_isa */
static int has_avx2(void) {
  int k = __atomic_load_n(&isa_avx2, __ATOMIC_RELAXED);
  if (k < 0) {
    __builtin_cpu_init();
    k = __builtin_cpu_supports("avx2") ? 1 : 0;
    __atomic_store_n(&isa_avx2, k, __ATOMIC_RELAXED);
  }
  return k;
}
#else
#define HLSNN_X86 0
#endif

/* Whether the AVX2 versions run: 1 where the CPU has AVX2 (checked once), unless
 * hlsnn_shift_isa(0) turned them off (tests: the portable code on the same inputs). Returns
 * the setting after the call; hlsnn_shift_isa(-1) only reads it. */
int hlsnn_shift_isa(int avx2) {
#if HLSNN_X86
  if (avx2 >= 0) {
    __builtin_cpu_init();
    avx2 = avx2 && __builtin_cpu_supports("avx2");
    __atomic_store_n(&isa_avx2, avx2, __ATOMIC_RELAXED);
  }
  return has_avx2();
#else
  (void)avx2;
  return 0;
#endif
}

#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "float64 arithmetic must be evaluated in float64 (no excess precision)"
#endif

#define TWO52 4503599627370496.0 /* 2**52 */
#define LANES 8                  /* independent accumulators of a reduction (vectorized) */

/* Rows are handed out in chunks through a shared counter: every thread calling a function with
 * the same `next` takes the next `chunk` rows until none is left, so a thread that starts late
 * or runs slowly (a busy core) simply does fewer. Each row's result depends on that row alone. */
static inline int64_t claim(int64_t *next, int64_t chunk, int64_t rows, int64_t *end) {
  int64_t r0 = __atomic_fetch_add(next, chunk, __ATOMIC_RELAXED);
  *end = r0 + chunk < rows ? r0 + chunk : rows;
  return r0;
}

enum { ROUND_NEAREST_EVEN = 0, ROUND_NEAREST_AWAY = 1, ROUND_TRUNCATE = 2 }; /* primitives.ROUNDING_CODES */

static inline double rint_nonneg(double m) { /* rint(m) for m >= 0 */
  return m < TWO52 ? (m + TWO52) - TWO52 : m;
}

static inline double rint_even(double a) { /* np.rint */
  return copysign(rint_nonneg(fabs(a)), a);
}

/* Lane-wise extremes of r[0..n) into mx[LANES], mn[LANES] (combined by the caller), and chk[l]
 * += v - v, which stays 0 unless a value is NaN or infinite (then it is NaN). A lane's max and
 * min skip a NaN (chk shows it); with SSE2, MAXPD(v, a) is exactly v > a ? v : a. */
static inline void lane_extremes(const double *r, int64_t n, double *mx, double *mn, double *chk) {
  int64_t j = 0;
#if defined(__SSE2__) && LANES == 8
  __m128d a[4], b[4], c[4];
  for (int l = 0; l < 4; ++l) {
    a[l] = _mm_loadu_pd(mx + 2 * l);
    b[l] = _mm_loadu_pd(mn + 2 * l);
    c[l] = _mm_loadu_pd(chk + 2 * l);
  }
  for (; j + LANES <= n; j += LANES)
    for (int l = 0; l < 4; ++l) {
      __m128d v = _mm_loadu_pd(r + j + 2 * l);
      a[l] = _mm_max_pd(v, a[l]);
      b[l] = _mm_min_pd(v, b[l]);
      c[l] = _mm_add_pd(c[l], _mm_sub_pd(v, v));
    }
  for (int l = 0; l < 4; ++l) {
    _mm_storeu_pd(mx + 2 * l, a[l]);
    _mm_storeu_pd(mn + 2 * l, b[l]);
    _mm_storeu_pd(chk + 2 * l, c[l]);
  }
#else
  for (; j + LANES <= n; j += LANES)
    for (int l = 0; l < LANES; ++l) {
      double v = r[j + l];
      mx[l] = v > mx[l] ? v : mx[l];
      mn[l] = v < mn[l] ? v : mn[l];
      chk[l] += v - v;
    }
#endif
  for (; j < n; ++j) {
    double v = r[j];
    mx[0] = v > mx[0] ? v : mx[0];
    mn[0] = v < mn[0] ? v : mn[0];
    chk[0] += v - v;
  }
}

/* Combines the lanes: returns 1 when a value was NaN or infinite (chk not 0, or an infinite
 * extreme: the lanes of lane_extremes_avx2 show a NaN only in chk). */
static inline int lanes_combine(const double *mx, const double *mn, const double *chk, double *ext) {
  double a = mx[0], b = mn[0], c = chk[0];
  for (int l = 1; l < LANES; ++l) {
    a = mx[l] > a ? mx[l] : a;
    b = mn[l] < b ? mn[l] : b;
    c += chk[l];
  }
  ext[0] = a;
  ext[1] = b;
  return c != 0.0 || !(a <= DBL_MAX && b >= -DBL_MAX);
}

#if HLSNN_X86
/* lane_extremes with AVX2: the same lanes (lane l of the 8 takes the values j = l mod 8 of
 * the vector loop), 16 values an iteration in two sets of accumulators; chk[l] becomes a NaN
 * (all ones) where a value is NaN, left unchanged otherwise (an infinity shows in the
 * extremes). */
__attribute__((target("avx2"))) static void lane_extremes_avx2(const double *r, int64_t n, double *mx,
                                                                double *mn, double *chk) {
  __m256d a0 = _mm256_loadu_pd(mx), a1 = _mm256_loadu_pd(mx + 4), b0 = _mm256_loadu_pd(mn),
          b1 = _mm256_loadu_pd(mn + 4), c0 = _mm256_loadu_pd(chk), c1 = _mm256_loadu_pd(chk + 4);
  __m256d a2 = a0, a3 = a1, b2 = b0, b3 = b1, c2 = c0, c3 = c1;
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) {
    __m256d v0 = _mm256_loadu_pd(r + j), v1 = _mm256_loadu_pd(r + j + 4), v2 = _mm256_loadu_pd(r + j + 8),
            v3 = _mm256_loadu_pd(r + j + 12);
    a0 = _mm256_max_pd(v0, a0);
    a1 = _mm256_max_pd(v1, a1);
    a2 = _mm256_max_pd(v2, a2);
    a3 = _mm256_max_pd(v3, a3);
    b0 = _mm256_min_pd(v0, b0);
    b1 = _mm256_min_pd(v1, b1);
    b2 = _mm256_min_pd(v2, b2);
    b3 = _mm256_min_pd(v3, b3);
    c0 = _mm256_or_pd(c0, _mm256_cmp_pd(v0, v0, _CMP_UNORD_Q));
    c1 = _mm256_or_pd(c1, _mm256_cmp_pd(v1, v1, _CMP_UNORD_Q));
    c2 = _mm256_or_pd(c2, _mm256_cmp_pd(v2, v2, _CMP_UNORD_Q));
    c3 = _mm256_or_pd(c3, _mm256_cmp_pd(v3, v3, _CMP_UNORD_Q));
  }
  _mm256_storeu_pd(mx, _mm256_max_pd(a2, a0));
  _mm256_storeu_pd(mx + 4, _mm256_max_pd(a3, a1));
  _mm256_storeu_pd(mn, _mm256_min_pd(b2, b0));
  _mm256_storeu_pd(mn + 4, _mm256_min_pd(b3, b1));
  _mm256_storeu_pd(chk, _mm256_or_pd(c2, c0));
  _mm256_storeu_pd(chk + 4, _mm256_or_pd(c3, c1));
  lane_extremes(r + j, n - j, mx, mn, chk);
}
#endif

/* lane_extremes, in its AVX2 version where the CPU has it. */
static void (*lane_extremes_fn(void))(const double *, int64_t, double *, double *, double *) {
#if HLSNN_X86
  if (has_avx2()) return lane_extremes_avx2;
#endif
  return lane_extremes;
}

/* The extremes of rows [0, rows) into ext[0] (max) and ext[1] (min) (the sign of a zero
 * extreme is unspecified); returns 1 when a value is NaN or infinite (then the extremes are
 * unspecified). rows * cols > 0. */
int hlsnn_shift_extremes(const double *x, int64_t rows, int64_t cols, int64_t ldx, double *ext) {
  double mx[LANES], mn[LANES], chk[LANES];
  for (int l = 0; l < LANES; ++l) {
    mx[l] = mn[l] = x[0];
    chk[l] = 0.0;
  }
  void (*ext_row)(const double *, int64_t, double *, double *, double *) = lane_extremes_fn();
  for (int64_t i = 0; i < rows; ++i) ext_row(x + i * ldx, cols, mx, mn, chk);
  return lanes_combine(mx, mn, chk, ext);
}

/* The activations into the GEMM operand: out[i, j] = rint(x[i, j] * scale) for j < cols and
 * out[i, cols] = 1 (floatgemm: np.ldexp(x, fx) then np.rint; scale = 2**fx, a normal float64). */
#if HLSNN_X86
/* hlsnn_shift_act's rows with AVX: ROUNDPD to nearest is rint (ties to even, -0.0 kept). */
__attribute__((target("avx2"))) static void act_avx2(const double *x, int64_t rows, int64_t cols, int64_t ldx,
                                                      double scale, double *out, int64_t ldo) {
  const __m256d s = _mm256_set1_pd(scale);
  for (int64_t i = 0; i < rows; ++i) {
    const double *r = x + i * ldx;
    double *o = out + i * ldo;
    int64_t j = 0;
    for (; j + 4 <= cols; j += 4)
      _mm256_storeu_pd(o + j, _mm256_round_pd(_mm256_mul_pd(_mm256_loadu_pd(r + j), s),
                                              _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    for (; j < cols; ++j) o[j] = rint_even(r[j] * scale);
    o[cols] = 1.0;
  }
}
#endif

static void act_rows(const double *x, int64_t rows, int64_t cols, int64_t ldx, double scale, double *out,
                     int64_t ldo) {
  for (int64_t i = 0; i < rows; ++i) {
    const double *r = x + i * ldx;
    double *o = out + i * ldo;
    for (int64_t j = 0; j < cols; ++j) o[j] = rint_even(r[j] * scale);
    o[cols] = 1.0;
  }
}

typedef void (*act_fn)(const double *, int64_t, int64_t, int64_t, double, double *, int64_t);

static act_fn act_rows_fn(void) { /* act_rows, in its AVX2 version where the CPU has it */
#if HLSNN_X86
  if (has_avx2()) return act_avx2;
#endif
  return act_rows;
}

void hlsnn_shift_act(const double *x, int64_t rows, int64_t cols, int64_t ldx, double scale,
                     double *out, int64_t ldo) {
  act_rows_fn()(x, rows, cols, ldx, scale, out, ldo);
}

/* hlsnn_shift_weights' `rule`: the buckets, or arithmetic for these formats (compiled._table),
 * and its side `job`. */
enum { RULE_BUCKETS = 0, RULE_POT = 1, RULE_TWOHOT0 = 2 };
enum { JOB_NONE = 0, JOB_EXTREMES = 1, JOB_ACT = 2 };

/* The nearest-magnitude lookup of hlsnn_shift_weights (its table arguments). */
typedef struct {
  const double *mags, *thr;
  const int64_t *tb;
  int64_t nbuckets, shift, first;
  const uint64_t *packed; /* NULL, or the buckets in one word each (weights_row_avx2) */
  int64_t g;
  double vlo, vhi;
  double max_mag;
} lookup;

/* The index of the nearest magnitude to the value of pattern p >= +0.0 (ties to the smaller):
 * the number of thresholds below it, through the buckets (hlsnn_shift_weights). */
static inline int64_t nearest(const lookup *t, int64_t p) {
  int64_t key = (p >> t->shift) - t->first;
  key = key < 0 ? 0 : key;
  key = key > t->nbuckets - 1 ? t->nbuckets - 1 : key;
  int64_t cut = t->tb[2 * key], k = t->tb[2 * key + 1];
  if (cut >= 0) return k + (p > cut);
  int64_t hi = t->tb[2 * key + 3]; /* np.searchsorted(thresholds, v, side="left") in the bucket */
  double v;
  memcpy(&v, &p, sizeof v);
  while (k < hi) {
    int64_t mid = k + (hi - k) / 2;
    if (t->thr[mid] < v)
      k = mid + 1;
    else
      hi = mid;
  }
  return k;
}

/* One code value: copysign(mags[k], w) + 0.0 for v = |w| * 2**F (+0.0 for a zero code). */
static inline double code_value(const lookup *t, double w, double v) {
  int64_t p;
  memcpy(&p, &v, sizeof p);
  return copysign(t->mags[nearest(t, p)], w) + 0.0;
}

/* The code values of one row of n weights at the normal scale unit = 2**F: v = |w| * unit, the
 * same bits as ldexp(|w|, F) (a product by a normal power of two is correctly rounded). */
static void weights_row(const double *r, double *o, int64_t n, double unit, const lookup *t) {
  for (int64_t j = 0; j < n; ++j) o[j] = code_value(t, r[j], fabs(r[j]) * unit);
}

/* The PoT formats (magnitudes 0, 1, 2, 4, ..., max_mag; thresholds 1/2 and 3 * 2**(e - 1)):
 * the nearest magnitude by arithmetic. v <= 1/2: 0. Else, with v = m * 2**e (1 <= m < 2), the
 * pattern of v plus 2**51 - 1 carries into the exponent field iff m > 3/2, so that masking it
 * to its exponent field gives 2**e, or 2**(e + 1) beyond the threshold (a tie stays below);
 * for 1/2 < v < 1 that is 1/2 or 1, the magnitude 1; beyond max_mag, max_mag (the clipped
 * buckets count every threshold). */
static inline double pot_code_value(double w, double v, double max_mag) {
  int64_t p;
  double q;
  memcpy(&p, &v, sizeof p);
  p = (p + (((int64_t)1 << 51) - 1)) & ((int64_t)0x7ff << 52);
  memcpy(&q, &p, sizeof q);
  q = q > 1.0 ? q : 1.0;
  q = q < max_mag ? q : max_mag;
  return copysign(v > 0.5 ? q : 0.0, w) + 0.0;
}

static void weights_row_pot(const double *r, double *o, int64_t n, double unit, const lookup *t) {
  for (int64_t j = 0; j < n; ++j) o[j] = pot_code_value(r[j], fabs(r[j]) * unit, t->max_mag);
}

#if HLSNN_X86
/* weights_row_pot with AVX2 (the same operations, four values at a time). */
__attribute__((target("avx2"))) static void weights_row_pot_avx2(const double *r, double *o, int64_t n,
                                                                  double unit, const lookup *t) {
  const __m256d vunit = _mm256_set1_pd(unit), sign = _mm256_set1_pd(-0.0),
                one = _mm256_set1_pd(1.0), half = _mm256_set1_pd(0.5), top = _mm256_set1_pd(t->max_mag);
  const __m256i carry = _mm256_set1_epi64x((((int64_t)1 << 51) - 1)),
                expo = _mm256_set1_epi64x((int64_t)0x7ff << 52);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256d w = _mm256_loadu_pd(r + j);
    __m256d v = _mm256_mul_pd(_mm256_andnot_pd(sign, w), vunit);
    __m256d q = _mm256_castsi256_pd(_mm256_and_si256(_mm256_add_epi64(_mm256_castpd_si256(v), carry), expo));
    q = _mm256_min_pd(_mm256_max_pd(q, one), top);
    _mm256_storeu_pd(o + j, _mm256_and_pd(_mm256_or_pd(q, _mm256_and_pd(sign, w)), _mm256_cmp_pd(v, half, _CMP_GT_OQ)));
  }
  weights_row_pot(r + j, o + j, n - j, unit, t);
}

/* The two-hot formats at delta 0 (magnitudes |2**a +- 2**b|, a, b in [0, emax]; max_mag =
 * 2**(emax + 1)) with AVX2: the nearest magnitude by arithmetic, four values at a time. In a
 * binade [2**E, 2**(E + 1)), 0 <= E < emax, the magnitudes are 2**E, 2**E + 2**j and
 * 2**(E + 1) - 2**j (0 <= j < E), 2**(E + 1); in the top binade E = emax, 2**E + 2**j
 * (0 <= j < E) and 2**(E + 1). So for v <= 1.5 * 2**E, or E = emax: 2**E + the nearest of 0,
 * 1, 2, ..., 2**(E - 1) (2**E at the top) to r = v - 2**E, ties to the smaller (0 for
 * r <= 1/2, else the PoT rule of pot_code_value); for 1.5 * 2**E < v < 2**emax: 2**(E + 1)
 * minus the nearest of 0, 1, ..., 2**(E - 1) to s = 2**(E + 1) - v, ties to the larger (0 for
 * s < 1/2; else 2**51 carries iff the mantissa >= 3/2). r and s are exact; so are the sums.
 * v <= 1/2: 0; 1/2 < v < 1: 1; beyond max_mag: max_mag. */
__attribute__((target("avx2"))) static void weights_row_twohot0_avx2(const double *r, double *o, int64_t n,
                                                                      double unit, const lookup *t) {
  const __m256d vunit = _mm256_set1_pd(unit), sign = _mm256_set1_pd(-0.0),
                one = _mm256_set1_pd(1.0), half = _mm256_set1_pd(0.5), top = _mm256_set1_pd(t->max_mag),
                hinge = _mm256_set1_pd(t->max_mag * 0.5),
                below_half = _mm256_set1_pd(0.5 - DBL_EPSILON / 4); /* the float64 below 1/2 */
  const __m256i expo = _mm256_set1_epi64x((int64_t)0x7ff << 52),
                mant = _mm256_set1_epi64x(((int64_t)1 << 52) - 1), m15 = _mm256_set1_epi64x((int64_t)1 << 51),
                carry = _mm256_set1_epi64x(((int64_t)1 << 51) - 1);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256d w = _mm256_loadu_pd(r + j);
    __m256d v = _mm256_mul_pd(_mm256_andnot_pd(sign, w), vunit);
    __m256d keep = _mm256_cmp_pd(v, half, _CMP_GT_OQ); /* else 0 */
    v = _mm256_max_pd(v, one);                          /* 1/2 < v < 1: as 1 */
    __m256i p = _mm256_castpd_si256(v);
    __m256d p0 = _mm256_castsi256_pd(_mm256_and_si256(p, expo)); /* 2**E */
    __m256d up = _mm256_and_pd(_mm256_castsi256_pd(_mm256_cmpgt_epi64(_mm256_and_si256(p, mant), m15)),
                               _mm256_cmp_pd(v, hinge, _CMP_LT_OQ)); /* the s side */
    __m256d x = _mm256_blendv_pd(_mm256_sub_pd(v, p0), _mm256_sub_pd(_mm256_add_pd(p0, p0), v), up);
    __m256i c = _mm256_add_epi64(carry, _mm256_srli_epi64(_mm256_castpd_si256(up), 63)); /* s: 2**51 */
    __m256d q = _mm256_castsi256_pd(_mm256_and_si256(_mm256_add_epi64(_mm256_castpd_si256(x), c), expo));
    q = _mm256_max_pd(q, one);
    q = _mm256_and_pd(q, _mm256_cmp_pd(x, _mm256_blendv_pd(half, below_half, up), _CMP_GT_OQ));
    __m256d y = _mm256_add_pd(p0, _mm256_blendv_pd(q, _mm256_sub_pd(p0, q), up));
    y = _mm256_min_pd(y, top);
    _mm256_storeu_pd(o + j, _mm256_and_pd(_mm256_or_pd(y, _mm256_and_pd(sign, w)), keep)); /* +0.0 or +-y */
  }
  weights_row(r + j, o + j, n - j, unit, t);
}

/* weights_row with AVX2, four values at a time and one gather from the packed buckets (a
 * format whose magnitudes are integers below 2**24 and whose thresholds have their low g
 * pattern bits zero, compiled._table): bucket b's word is C << 48 | hi << 24 | lo, lo the
 * magnitude of the values below its threshold (of every value when it has none), hi that of
 * those above it, and its threshold's pattern (first + b) << shift + C << g; C = 2**15 when it
 * has none, C = 0xffff when it has two or more (those values are redone by code_value).
 * v is first clamped to the patterns of the buckets, [vlo, vhi]: a value below bucket 0
 * counts no threshold as one at its start, one beyond the last bucket every threshold of it
 * as its last pattern. In a bucket, with l = p - its first pattern (the low shift bits),
 * v > threshold iff l > C * 2**g iff ceil(l / 2**g) > C. The magnitude is converted exactly:
 * for an integer m < 2**52, pattern(2**52) | m is the float64 2**52 + m. */
__attribute__((target("avx2"))) static void weights_row_avx2(const double *r, double *o, int64_t n,
                                                              double unit, const lookup *t) {
  const __m256d vunit = _mm256_set1_pd(unit), sign = _mm256_set1_pd(-0.0), zero = _mm256_setzero_pd(),
                vlo = _mm256_set1_pd(t->vlo), vhi = _mm256_set1_pd(t->vhi), two52 = _mm256_set1_pd(TWO52);
  const __m256i first = _mm256_set1_epi64x(t->first),
                low = _mm256_set1_epi64x(((int64_t)1 << t->shift) - 1),
                round = _mm256_set1_epi64x(((int64_t)1 << t->g) - 1), mag = _mm256_set1_epi64x(0xffffff),
                dense = _mm256_set1_epi64x(0xffff), exp52 = _mm256_castpd_si256(two52);
  const __m128i sh = _mm_cvtsi64_si128(t->shift), g = _mm_cvtsi64_si128(t->g);
  const long long *packed = (const long long *)t->packed;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256d w = _mm256_loadu_pd(r + j);
    __m256d v = _mm256_min_pd(_mm256_max_pd(_mm256_mul_pd(_mm256_andnot_pd(sign, w), vunit), vlo), vhi);
    __m256i p = _mm256_castpd_si256(v);
    long long kb[4]; /* four loads: faster than a gather here (AMD Zen 4) */
    _mm256_storeu_si256((__m256i *)kb, _mm256_sub_epi64(_mm256_srl_epi64(p, sh), first));
    __m256i e = _mm256_set_epi64x(packed[kb[3]], packed[kb[2]], packed[kb[1]], packed[kb[0]]);
    __m256i q = _mm256_srl_epi64(_mm256_add_epi64(_mm256_and_si256(p, low), round), g);
    __m256i c = _mm256_srli_epi64(e, 48);
    __m256i m = _mm256_blendv_epi8(_mm256_and_si256(e, mag), _mm256_and_si256(_mm256_srli_epi64(e, 24), mag),
                                   _mm256_cmpgt_epi64(q, c));
    __m256d a = _mm256_sub_pd(_mm256_castsi256_pd(_mm256_or_si256(m, exp52)), two52);
    _mm256_storeu_pd(o + j, _mm256_add_pd(_mm256_or_pd(a, _mm256_and_pd(sign, w)), zero));
    int d = _mm256_movemask_pd(_mm256_castsi256_pd(_mm256_cmpeq_epi64(c, dense)));
    if (d)
      for (int l = 0; l < 4; ++l)
        if (d >> l & 1) o[j + l] = code_value(t, r[j + l], fabs(r[j + l]) * unit);
  }
  weights_row(r + j, o + j, n - j, unit, t);
}
#endif

/* shift._quantize_values_into on rows [0, rows) of w (those this call takes, claim): per row
 * the scale exponent F (the largest F with amax <= max_mag * 2**-F, 0 for an all-zero row;
 * shift._scale_exponent, L the bit length of max_mag) and each value's code value
 * copysign(mags[k], w) + 0.0 (+0.0 for k == 0), k the index of the nearest magnitude to
 * v = |w| * 2**F, ties to the smaller (shift_codes.nearest): the number of thresholds below v.
 *
 * v >= +0.0 is found as its bit pattern p (ordered as the values). Bucket b holds the patterns
 * with (p >> shift) - first == b (clipped to [0, nbuckets)); tb[2 b + 1] counts the thresholds
 * below its first pattern and tb[2 b] is the pattern of its one threshold, INT64_MAX when it
 * has none, -1 when it has two or more (then they are searched: thr[tb[2 b + 1]] ...
 * thr[tb[2 b + 3] - 1]; tb has a closing bucket). `packed` (or NULL), g, vlo, vhi: the same
 * buckets for weights_row_avx2. `rule`: RULE_POT, RULE_TWOHOT0 for the formats that the
 * arithmetic of pot_code_value, weights_row_twohot0_avx2 applies to (the latter with AVX2
 * only; the portable code reads the buckets), else RULE_BUCKETS.
 *
 * `job`: a pass over x (xrows > 0 rows of xcols) that the call does in step with its rows of w
 * (a memory-bound pass beside a compute-bound one), for a call that takes every row alone
 * (one thread): JOB_EXTREMES, hlsnn_shift_extremes(x, xrows, xcols, ldx, xext) with its
 * return value in xext[2] (1.0 or 0.0); JOB_ACT, hlsnn_shift_act(x, xrows, xcols, ldx, scale,
 * xout, ldxo); JOB_NONE (x unused).
 * Returns the number of rows holding a NaN or an infinity (their outputs are unspecified). */
int64_t hlsnn_shift_weights(const double *w, int64_t rows, int64_t cols, int64_t ldw, double *out,
                            int64_t ldo, int32_t *F, const double *mags, const double *thr,
                            const int64_t *tb, int64_t nbuckets, int64_t shift, int64_t first,
                            double max_mag, int64_t L, int64_t rule, const uint64_t *packed, int64_t g,
                            double vlo, double vhi, int64_t *next, int64_t chunk, int64_t job,
                            const double *x, int64_t xrows, int64_t xcols, int64_t ldx, double scale,
                            double *xout, int64_t ldxo, double *xext) {
  const lookup t = {mags, thr, tb, nbuckets, shift, first, packed, g, vlo, vhi, max_mag};
  const act_fn act = act_rows_fn();
  double xmx[LANES], xmn[LANES], xchk[LANES];
  int64_t xdone = 0; /* the side job's rows done */
  for (int l = 0; l < LANES; ++l) {
    xmx[l] = xmn[l] = job == JOB_EXTREMES ? x[0] : 0.0;
    xchk[l] = 0.0;
  }
  const int pot = rule == RULE_POT;
  void (*row)(const double *, double *, int64_t, double, const lookup *) =
      pot ? weights_row_pot : weights_row;
  void (*ext_row)(const double *, int64_t, double *, double *, double *) = lane_extremes_fn();
#if HLSNN_X86
  if (has_avx2())
    row = pot                     ? weights_row_pot_avx2
          : rule == RULE_TWOHOT0  ? weights_row_twohot0_avx2
          : packed != NULL        ? weights_row_avx2
                                  : weights_row;
#endif
  int64_t bad = 0;
  for (int64_t r0, r1; (r0 = claim(next, chunk, rows, &r1)) < rows;)
    for (int64_t i = r0; i < r1; ++i) {
      const double *r = w + i * ldw;
      double *o = out + i * ldo;
      double mx[LANES], mn[LANES], chk[LANES], ext[2];
      if (job != JOB_NONE) { /* the side job's share so far, first */
        int64_t upto = (i + 1) * xrows / rows;
        for (; xdone < upto; ++xdone)
          if (job == JOB_EXTREMES)
            ext_row(x + xdone * ldx, xcols, xmx, xmn, xchk);
          else
            act(x + xdone * ldx, 1, xcols, ldx, scale, xout + xdone * ldxo, ldxo);
      }
      for (int l = 0; l < LANES; ++l) mx[l] = mn[l] = chk[l] = 0.0; /* max/min, initial=0.0 */
      ext_row(r, cols, mx, mn, chk);
      if (lanes_combine(mx, mn, chk, ext)) {
        ++bad;
        F[i] = 0;
        continue;
      }
      double amax = ext[0] > -ext[1] ? ext[0] : -ext[1];
      int32_t f = 0;
      if (amax != 0.0) {
        int e;
        double fr = frexp(amax, &e);
        f = (int32_t)(L - e - (ldexp(fr, (int)L) > max_mag ? 1 : 0));
      }
      F[i] = f;
      if (f >= -1022 && f <= 1023) /* a normal 2**F */
        row(r, o, cols, ldexp(1.0, f), &t);
      else /* ldexp, as numpy then does */
        for (int64_t j = 0; j < cols; ++j) {
          double v = ldexp(fabs(r[j]), f);
          o[j] = pot ? pot_code_value(r[j], v, max_mag) : code_value(&t, r[j], v);
        }
    }
  if (job == JOB_EXTREMES) {
    for (; xdone < xrows; ++xdone) ext_row(x + xdone * ldx, xcols, xmx, xmn, xchk);
    xext[2] = lanes_combine(xmx, xmn, xchk, xext);
  } else if (job == JOB_ACT && xdone < xrows) {
    act(x + xdone * ldx, xrows - xdone, xcols, ldx, scale, xout + xdone * ldxo, ldxo);
  }
  return bad;
}

/* The extremes of each column of rows [0, rows) (rows > 0): cmax[j], cmin[j] (no NaN here; the
 * sign of a zero extreme is unspecified). Four rows at a time, so that cmax and cmin are read
 * and written once per four rows. */
static inline __attribute__((always_inline)) void col_extremes(const double *v, int64_t rows, int64_t n,
                                                               int64_t ldv, double *cmax, double *cmin) {
  memcpy(cmax, v, (size_t)n * sizeof *v);
  memcpy(cmin, v, (size_t)n * sizeof *v);
  int64_t i = 1;
  for (; i + 4 <= rows; i += 4) {
    const double *r0 = v + i * ldv, *r1 = r0 + ldv, *r2 = r1 + ldv, *r3 = r2 + ldv;
    for (int64_t j = 0; j < n; ++j) {
      double a0 = r0[j], a1 = r1[j], a2 = r2[j], a3 = r3[j];
      double hi01 = a0 > a1 ? a0 : a1, hi23 = a2 > a3 ? a2 : a3, lo01 = a0 < a1 ? a0 : a1,
             lo23 = a2 < a3 ? a2 : a3;
      double hi = hi01 > hi23 ? hi01 : hi23, lo = lo01 < lo23 ? lo01 : lo23;
      cmax[j] = hi > cmax[j] ? hi : cmax[j];
      cmin[j] = lo < cmin[j] ? lo : cmin[j];
    }
  }
  for (; i < rows; ++i) {
    const double *r = v + i * ldv;
    for (int64_t j = 0; j < n; ++j) {
      double a = r[j];
      cmax[j] = a > cmax[j] ? a : cmax[j];
      cmin[j] = a < cmin[j] ? a : cmin[j];
    }
  }
}

#if HLSNN_X86
__attribute__((target("avx2"))) static void col_extremes_avx2(const double *v, int64_t rows, int64_t n,
                                                               int64_t ldv, double *cmax, double *cmin) {
  col_extremes(v, rows, n, ldv, cmax, cmin); /* vectorized by the compiler, for AVX2 */
}
#endif

void hlsnn_shift_col_extremes(const double *v, int64_t rows, int64_t n, int64_t ldv, double *cmax,
                              double *cmin) {
#if HLSNN_X86
  if (has_avx2()) {
    col_extremes_avx2(v, rows, n, ldv, cmax, cmin);
    return;
  }
#endif
  col_extremes(v, rows, n, ldv, cmax, cmin);
}

/* One element of hlsnn_shift_requant, specialized by the constant flags; *sat counts a
 * saturation (a float64 count, exact, so that the loops vectorize).
 *
 * The rounding uses M = 1.5 * 2**52: for |a| < 2**51, (a + M) - M is rint(a) (the sum's ulp
 * is 1), up to the sign of a zero, which the final + 0.0 makes +0.0 anyway. Beyond 2**51 it is
 * a within a few units, of a's sign and magnitude >= 2**50, so it saturates exactly as rint(a)
 * does while hi < 2**50 (the caller's condition): the same output and the same count. */
static inline __attribute__((always_inline)) double
requant_one(double a, double scale, double acc_lo, double acc_hi, const int clamp_acc,
            const int relu, const int rounding, double lo, double hi, double unit, double *sat) {
  const double M = 1.5 * TWO52;
  if (relu) a = a >= 0.0 ? a : 0.0; /* np.maximum(v, 0) (no NaN here) */
  a *= scale;
  if (clamp_acc) { /* np.clip */
    a = a >= acc_lo ? a : acc_lo;
    a = a <= acc_hi ? a : acc_hi;
  }
  if (rounding == ROUND_NEAREST_EVEN) {
    a = (a + M) - M;
  } else if (rounding == ROUND_TRUNCATE) { /* floor: rint, less one where it rounded up */
    double r = (a + M) - M;
    a = r > a ? r - 1.0 : r;
  } else { /* sign(a) * (floor|a| + (frac >= 1/2)) */
    double m = fabs(a);
    double fl = (m + M) - M;
    fl = fl > m ? fl - 1.0 : fl;
    fl = m - fl >= 0.5 ? fl + 1.0 : fl;
    a = copysign(fl, a);
  }
  *sat += (a > hi ? 1.0 : 0.0) + (a < lo ? 1.0 : 0.0);
  a = a > hi ? hi : a;
  a = a < lo ? lo : a;
  return a * unit + 0.0;
}

#if defined(__SSE2__)
/* Two elements of requant_one with SSE2 (the same operations; a select is and/andnot/or; the
 * lane count is a float64 0 or 1 per lane). */
static inline __attribute__((always_inline)) __m128d
requant_two(__m128d a, __m128d scale, __m128d acc_lo, __m128d acc_hi, const int clamp_acc,
            const int relu, const int rounding, __m128d lo, __m128d hi, __m128d unit,
            __m128d *sat) {
  const __m128d M = _mm_set1_pd(1.5 * TWO52), one = _mm_set1_pd(1.0), zero = _mm_setzero_pd();
  if (relu) a = _mm_and_pd(a, _mm_cmpge_pd(a, zero));
  a = _mm_mul_pd(a, scale);
  if (clamp_acc) {
    __m128d m = _mm_cmpge_pd(a, acc_lo);
    a = _mm_or_pd(_mm_and_pd(m, a), _mm_andnot_pd(m, acc_lo));
    m = _mm_cmple_pd(a, acc_hi);
    a = _mm_or_pd(_mm_and_pd(m, a), _mm_andnot_pd(m, acc_hi));
  }
  if (rounding == ROUND_NEAREST_EVEN) {
    a = _mm_sub_pd(_mm_add_pd(a, M), M);
  } else if (rounding == ROUND_TRUNCATE) {
    __m128d r = _mm_sub_pd(_mm_add_pd(a, M), M);
    a = _mm_sub_pd(r, _mm_and_pd(_mm_cmpgt_pd(r, a), one));
  } else {
    const __m128d sign = _mm_set1_pd(-0.0), half = _mm_set1_pd(0.5);
    __m128d m = _mm_andnot_pd(sign, a);
    __m128d fl = _mm_sub_pd(_mm_add_pd(m, M), M);
    fl = _mm_sub_pd(fl, _mm_and_pd(_mm_cmpgt_pd(fl, m), one));
    fl = _mm_add_pd(fl, _mm_and_pd(_mm_cmpge_pd(_mm_sub_pd(m, fl), half), one));
    a = _mm_or_pd(fl, _mm_and_pd(sign, a));
  }
  __m128d above = _mm_cmpgt_pd(a, hi), below = _mm_cmplt_pd(a, lo);
  *sat = _mm_add_pd(*sat, _mm_add_pd(_mm_and_pd(above, one), _mm_and_pd(below, one)));
  a = _mm_or_pd(_mm_and_pd(above, hi), _mm_andnot_pd(above, a));
  a = _mm_or_pd(_mm_and_pd(below, lo), _mm_andnot_pd(below, a));
  return _mm_add_pd(_mm_mul_pd(a, unit), zero);
}
#endif

#if HLSNN_X86
/* requant_two with AVX2: four elements; the rounding with ROUNDPD (rint and floor, exact for
 * every value, so beyond 2**51 too: the same outputs and counts as requant_one's), the clamps
 * with MINPD/MAXPD, the count in int64 lanes. */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) __m256d
requant_four(__m256d a, __m256d scale, __m256d acc_lo, __m256d acc_hi, const int clamp_acc,
             const int relu, const int rounding, __m256d lo, __m256d hi, __m256d unit, __m256i *sat) {
  const __m256d one = _mm256_set1_pd(1.0), zero = _mm256_setzero_pd();
  if (relu) a = _mm256_and_pd(a, _mm256_cmp_pd(a, zero, _CMP_GE_OQ));
  a = _mm256_mul_pd(a, scale);
  if (clamp_acc) /* MAXPD(a, b) is a > b ? a : b, MINPD(a, b) a < b ? a : b (no NaN here) */
    a = _mm256_min_pd(_mm256_max_pd(a, acc_lo), acc_hi);
  if (rounding == ROUND_NEAREST_EVEN) { /* ROUNDPD: rint and floor exactly (also beyond 2**51) */
    a = _mm256_round_pd(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  } else if (rounding == ROUND_TRUNCATE) {
    a = _mm256_round_pd(a, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  } else {
    const __m256d sign = _mm256_set1_pd(-0.0), half = _mm256_set1_pd(0.5);
    __m256d m = _mm256_andnot_pd(sign, a);
    __m256d fl = _mm256_round_pd(m, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    fl = _mm256_add_pd(fl, _mm256_and_pd(_mm256_cmp_pd(_mm256_sub_pd(m, fl), half, _CMP_GE_OQ), one));
    a = _mm256_or_pd(fl, _mm256_and_pd(sign, a));
  }
  __m256d above = _mm256_cmp_pd(a, hi, _CMP_GT_OQ), below = _mm256_cmp_pd(a, lo, _CMP_LT_OQ);
  *sat = _mm256_sub_epi64(_mm256_sub_epi64(*sat, _mm256_castpd_si256(above)), _mm256_castpd_si256(below));
  a = _mm256_max_pd(_mm256_min_pd(a, hi), lo); /* lo <= hi */
  return _mm256_add_pd(_mm256_mul_pd(a, unit), zero);
}

/* requant_row with AVX2 (the tail by requant_one). */
__attribute__((target("avx2"))) static inline __attribute__((always_inline)) int64_t
requant_row_avx2(const double *r, double *o, int64_t n, const double *scale, const double *acc_lo,
                 const double *acc_hi, const int clamp_acc, const int relu, const int rounding, double lo,
                 double hi, double unit) {
  __m256i sat = _mm256_setzero_si256(); /* per lane, the count of saturations (a mask is -1) */
  __m256d vlo = _mm256_set1_pd(lo), vhi = _mm256_set1_pd(hi), vunit = _mm256_set1_pd(unit);
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256d a = requant_four(_mm256_loadu_pd(r + j), _mm256_loadu_pd(scale + j),
                             clamp_acc ? _mm256_loadu_pd(acc_lo + j) : vlo,
                             clamp_acc ? _mm256_loadu_pd(acc_hi + j) : vhi, clamp_acc, relu, rounding,
                             vlo, vhi, vunit, &sat);
    _mm256_storeu_pd(o + j, a);
  }
  int64_t lanes[4];
  _mm256_storeu_si256((__m256i *)lanes, sat);
  double total = (double)(lanes[0] + lanes[1] + lanes[2] + lanes[3]);
  for (; j < n; ++j)
    o[j] = requant_one(r[j], scale[j], acc_lo[j], acc_hi[j], clamp_acc, relu, rounding, lo, hi,
                       unit, &total);
  return (int64_t)total;
}
#endif

/* One row of hlsnn_shift_requant (always inlined, so specialized by the constant flags). */
static inline __attribute__((always_inline)) int64_t
requant_row(const double *r, double *o, int64_t n, const double *scale, const double *acc_lo,
            const double *acc_hi, const int clamp_acc, const int relu, const int rounding, double lo,
            double hi, double unit) {
  double total = 0.0;
  int64_t j = 0;
#if defined(__SSE2__)
  __m128d sat = _mm_setzero_pd(), vlo = _mm_set1_pd(lo), vhi = _mm_set1_pd(hi),
          vunit = _mm_set1_pd(unit);
  for (; j + 2 <= n; j += 2) {
    __m128d a = requant_two(_mm_loadu_pd(r + j), _mm_loadu_pd(scale + j),
                            clamp_acc ? _mm_loadu_pd(acc_lo + j) : vlo,
                            clamp_acc ? _mm_loadu_pd(acc_hi + j) : vhi, clamp_acc, relu, rounding,
                            vlo, vhi, vunit, &sat);
    _mm_storeu_pd(o + j, a);
  }
  double lanes[2];
  _mm_storeu_pd(lanes, sat);
  total = lanes[0] + lanes[1];
#endif
  for (; j < n; ++j)
    o[j] = requant_one(r[j], scale[j], acc_lo[j], acc_hi[j], clamp_acc, relu, rounding, lo, hi,
                       unit, &total);
  return (int64_t)total;
}

/* One function per flag combination (each vectorized on its own). */
typedef int64_t (*requant_fn)(const double *, int64_t, int64_t, int64_t, double *, int64_t,
                              const double *, const double *, const double *, double, double,
                              double, int64_t *, int64_t);
#define REQUANT_FN(C, R, M)                                                                       \
  static int64_t requant_##C##R##M(const double *v, int64_t rows, int64_t n, int64_t ldv,         \
                                   double *y, int64_t ldy, const double *scale,                   \
                                   const double *acc_lo, const double *acc_hi, double lo,         \
                                   double hi, double unit, int64_t *next, int64_t chunk) {        \
    int64_t sat = 0;                                                                              \
    for (int64_t r0, r1; (r0 = claim(next, chunk, rows, &r1)) < rows;)                            \
      for (int64_t i = r0; i < r1; ++i)                                                           \
        sat += requant_row(v + i * ldv, y + i * ldy, n, scale, acc_lo, acc_hi, C, R, M, lo, hi,    \
                         unit);                                                                   \
    return sat;                                                                                   \
  }
#if HLSNN_X86
#define REQUANT_FN_AVX2(C, R, M)                                                                  \
  __attribute__((target("avx2"))) static int64_t requant_avx2_##C##R##M(                          \
      const double *v, int64_t rows, int64_t n, int64_t ldv, double *y, int64_t ldy,              \
      const double *scale, const double *acc_lo, const double *acc_hi, double lo, double hi,      \
      double unit, int64_t *next, int64_t chunk) {                                                \
    int64_t sat = 0;                                                                              \
    for (int64_t r0, r1; (r0 = claim(next, chunk, rows, &r1)) < rows;)                            \
      for (int64_t i = r0; i < r1; ++i)                                                           \
        sat += requant_row_avx2(v + i * ldv, y + i * ldy, n, scale, acc_lo, acc_hi, C, R, M, lo,  \
                                hi, unit);                                                        \
    return sat;                                                                                   \
  }
#else
#define REQUANT_FN_AVX2(C, R, M)
#endif
#define REQUANT_FNS(C, R, M) REQUANT_FN(C, R, M) REQUANT_FN_AVX2(C, R, M)
REQUANT_FNS(0, 0, 0)
REQUANT_FNS(0, 0, 1)
REQUANT_FNS(0, 0, 2)
REQUANT_FNS(0, 1, 0)
REQUANT_FNS(0, 1, 1)
REQUANT_FNS(0, 1, 2)
REQUANT_FNS(1, 0, 0)
REQUANT_FNS(1, 0, 1)
REQUANT_FNS(1, 0, 2)
REQUANT_FNS(1, 1, 0)
REQUANT_FNS(1, 1, 1)
REQUANT_FNS(1, 1, 2)
static const requant_fn requant_fns[12] = {requant_000, requant_001, requant_002, requant_010,
                                           requant_011, requant_012, requant_100, requant_101,
                                           requant_102, requant_110, requant_111, requant_112};
#if HLSNN_X86
static const requant_fn requant_avx2_fns[12] = {
    requant_avx2_000, requant_avx2_001, requant_avx2_002, requant_avx2_010, requant_avx2_011, requant_avx2_012,
    requant_avx2_100, requant_avx2_101, requant_avx2_102, requant_avx2_110, requant_avx2_111, requant_avx2_112};
#endif

/* Rule 5 on the wide values, dequantized (emulator.requantize(..., dequantize=fy) after
 * floatgemm's ReLU and scaling): per element a = v (relu: np.maximum(v, 0)), a *= scale[j],
 * (clamp_acc: np.clip(a, acc_lo[j], acc_hi[j])), rounded per `rounding`, saturated to
 * [lo, hi] (counted), y = a * unit + 0.0, on the rows this call takes (claim); acc_lo and
 * acc_hi (n values each) matter only with clamp_acc. Returns their
 * saturation count, or -1 for an unknown rounding code or hi >= 2**50 (requant_one). */
int64_t hlsnn_shift_requant(const double *v, int64_t rows, int64_t n, int64_t ldv, double *y,
                            int64_t ldy, const double *scale, const double *acc_lo,
                            const double *acc_hi, int clamp_acc, int relu, int rounding, double lo,
                            double hi, double unit, int64_t *next, int64_t chunk) {
  if (rounding < 0 || rounding > 2 || !(hi < TWO52 / 4) || !(lo > -TWO52 / 4)) return -1;
  const requant_fn *fns = requant_fns;
#if HLSNN_X86
  if (has_avx2()) fns = requant_avx2_fns;
#endif
  return fns[(clamp_acc != 0) * 6 + (relu != 0) * 3 + rounding](
      v, rows, n, ldv, y, ldy, scale, acc_lo, acc_hi, lo, hi, unit, next, chunk);
}
