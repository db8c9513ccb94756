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

/* Combines the lanes: returns 1 when a value was NaN or infinite. */
static inline int lanes_combine(const double *mx, const double *mn, const double *chk, double *ext) {
  double a = mx[0], b = mn[0], c = chk[0];
  for (int l = 1; l < LANES; ++l) {
    a = mx[l] > a ? mx[l] : a;
    b = mn[l] < b ? mn[l] : b;
    c += chk[l];
  }
  ext[0] = a;
  ext[1] = b;
  return c != 0.0;
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
  for (int64_t i = 0; i < rows; ++i) lane_extremes(x + i * ldx, cols, mx, mn, chk);
  return lanes_combine(mx, mn, chk, ext);
}

/* The activations into the GEMM operand: out[i, j] = rint(x[i, j] * scale) for j < cols and
 * out[i, cols] = 1 (floatgemm: np.ldexp(x, fx) then np.rint; scale = 2**fx, a normal float64). */
void hlsnn_shift_act(const double *x, int64_t rows, int64_t cols, int64_t ldx, double scale,
                     double *out, int64_t ldo) {
  for (int64_t i = 0; i < rows; ++i) {
    const double *r = x + i * ldx;
    double *o = out + i * ldo;
    for (int64_t j = 0; j < cols; ++j) o[j] = rint_even(r[j] * scale);
    o[cols] = 1.0;
  }
}

/* shift._quantize_values_into on rows [0, rows) of w (those this call takes, claim): per row
 * the scale exponent F (the largest F with amax <= max_mag * 2**-F, 0 for an all-zero row;
 * shift._scale_exponent, L the bit length of max_mag) and each value's code value
 * copysign(mags[k], w) + 0.0 (+0.0 for k == 0), k the index of the nearest magnitude to
 * v = |w| * 2**F, ties to the smaller (shift._nearest): the number of thresholds below v.
 *
 * v is found as its bit pattern p (ordered as the values, v >= +0.0): for a normal |w| and a
 * normal 2**F, p = pattern(|w|) + F * 2**52 whenever v is normal; where v would be subnormal
 * that sum is below pattern(2**-1022) (or negative), as is v's own pattern, and both count no
 * threshold (all >= 1/2). A subnormal or zero |w| and the other rows compute v itself.
 * Bucket b holds the patterns with (p >> shift) - first == b (clipped to [0, nbuckets));
 * tb[2 b + 1] counts the thresholds below its first pattern and tb[2 b] is the pattern of its
 * one threshold, INT64_MAX when it has none, -1 when it has two or more (then they are
 * searched: thr[tb[2 b + 1]] ... thr[tb[2 b + 3] - 1]; tb has a closing bucket).
 * Returns the number of rows holding a NaN or an infinity (their outputs are unspecified). */
int64_t hlsnn_shift_weights(const double *w, int64_t rows, int64_t cols, int64_t ldw, double *out,
                            int64_t ldo, int32_t *F, const double *mags, const double *thr,
                            const int64_t *tb, int64_t nbuckets, int64_t shift, int64_t first,
                            double max_mag, int64_t L, int64_t *next, int64_t chunk) {
  const int64_t min_normal = (int64_t)1 << 52; /* pattern of 2**-1022 */
  int64_t bad = 0;
  for (int64_t r0, r1; (r0 = claim(next, chunk, rows, &r1)) < rows;)
    for (int64_t i = r0; i < r1; ++i) {
      const double *r = w + i * ldw;
      double *o = out + i * ldo;
      double mx[LANES], mn[LANES], chk[LANES], ext[2];
      for (int l = 0; l < LANES; ++l) mx[l] = mn[l] = chk[l] = 0.0; /* max/min, initial=0.0 */
      lane_extremes(r, cols, mx, mn, chk);
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
      const int normal = f >= -1022 && f <= 1023; /* else ldexp, as numpy then does */
      const double unit = normal ? ldexp(1.0, f) : 0.0;
      const int64_t off = (int64_t)f * min_normal;
      for (int64_t j = 0; j < cols; ++j) {
        int64_t p, a;
        memcpy(&p, r + j, sizeof p);
        a = p & INT64_MAX; /* |w| */
        if (normal && a >= min_normal) {
          p = a + off;
        } else {
          double v = normal ? fabs(r[j]) * unit : ldexp(fabs(r[j]), f);
          memcpy(&p, &v, sizeof p);
        }
        int64_t key = (p >> shift) - first;
        if ((uint64_t)key >= (uint64_t)nbuckets) key = key < 0 ? 0 : nbuckets - 1;
        int64_t cut = tb[2 * key], k = tb[2 * key + 1];
        if (cut >= 0) {
          k += p > cut;
        } else { /* np.searchsorted(thresholds, v, side="left") within the bucket */
          int64_t hi = tb[2 * key + 3];
          double v;
          memcpy(&v, &p, sizeof v);
          while (k < hi) {
            int64_t mid = k + (hi - k) / 2;
            if (thr[mid] < v)
              k = mid + 1;
            else
              hi = mid;
          }
        }
        o[j] = copysign(mags[k], r[j]) + 0.0; /* mags[0] == 0: +0.0 for a zero code */
      }
    }
  return bad;
}

/* The extremes of each column of rows [0, rows) (rows > 0): cmax[j], cmin[j]. */
void hlsnn_shift_col_extremes(const double *v, int64_t rows, int64_t n, int64_t ldv, double *cmax,
                              double *cmin) {
  memcpy(cmax, v, (size_t)n * sizeof *v);
  memcpy(cmin, v, (size_t)n * sizeof *v);
  for (int64_t i = 1; i < rows; ++i) {
    const double *r = v + i * ldv;
    for (int64_t j = 0; j < n; ++j) {
      double a = r[j];
      cmax[j] = a > cmax[j] ? a : cmax[j];
      cmin[j] = a < cmin[j] ? a : cmin[j];
    }
  }
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
REQUANT_FN(0, 0, 0)
REQUANT_FN(0, 0, 1)
REQUANT_FN(0, 0, 2)
REQUANT_FN(0, 1, 0)
REQUANT_FN(0, 1, 1)
REQUANT_FN(0, 1, 2)
REQUANT_FN(1, 0, 0)
REQUANT_FN(1, 0, 1)
REQUANT_FN(1, 0, 2)
REQUANT_FN(1, 1, 0)
REQUANT_FN(1, 1, 1)
REQUANT_FN(1, 1, 2)
static const requant_fn requant_fns[12] = {requant_000, requant_001, requant_002, requant_010,
                                           requant_011, requant_012, requant_100, requant_101,
                                           requant_102, requant_110, requant_111, requant_112};

/* Rule 5 on the wide values, dequantized (emulator.requantize(..., dequantize=fy) after
 * floatgemm's ReLU and scaling): per element a = v (relu: np.maximum(v, 0)), a *= scale[j],
 * (clamp_acc: np.clip(a, acc_lo[j], acc_hi[j])), rounded per `rounding`, saturated to
 * [lo, hi] (counted), y = a * unit + 0.0, on the rows this call takes (claim). Returns their
 * saturation count, or -1 for an unknown rounding code or hi >= 2**50 (requant_one). */
int64_t hlsnn_shift_requant(const double *v, int64_t rows, int64_t n, int64_t ldv, double *y,
                            int64_t ldy, const double *scale, const double *acc_lo,
                            const double *acc_hi, int clamp_acc, int relu, int rounding, double lo,
                            double hi, double unit, int64_t *next, int64_t chunk) {
  if (rounding < 0 || rounding > 2 || !(hi < TWO52 / 4) || !(lo > -TWO52 / 4)) return -1;
  return requant_fns[(clamp_acc != 0) * 6 + (relu != 0) * 3 + rounding](
      v, rows, n, ldv, y, ldy, scale, acc_lo, acc_hi, lo, hi, unit, next, chunk);
}
