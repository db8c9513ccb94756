/* gptq.c: the compiled twin of the rounding loop of hlsnn.deploy.shift_fit.gptq_values (GPTQ's
 * error feedback, in the order the caller has permuted the columns to).
 *
 * The numpy loop is the specification; tests/deploy/test_shift_fit.py holds the two equal bit
 * for bit. For each of G problems, for each column i of its w (N, K), row-major, in code units:
 *   q[n, i] = copysign(mags[k], w[n, i]) + 0.0, k = the number of thresholds thr[t] < |w[n, i]|
 *             (nearest_values: the nearest magnitude, ties to the smaller);
 *   err[n]  = (w[n, i] - q[n, i]) / u[i, i];
 *   w[n, j] = w[n, j] - err[n] * u[i, j] for j > i (np.outer's product, then the subtraction).
 * Each operation is one IEEE float64 operation, rounded, never fused: -std=c99 keeps GCC's
 * contraction off, the pragma keeps Clang's off, and the build flags enable no FMA.
 */
#include <math.h>
#include <stdint.h>

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* the number of thresholds below v (thr ascending): searchsorted(thr, v, side="left") */
static int64_t below(const double *thr, int64_t T, double v) {
  int64_t lo = 0, hi = T;
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (thr[mid] < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/* the AVX-512 or AVX2 clone where the CPU has it (target_clones, chosen at load time): the
 * update's loop in vector lanes, each lane the same unfused multiply and subtraction */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif

/* G problems one after the other: w (G, N, K), u (G, K, K), q like w; err: N doubles of scratch */
VEC_CLONES void hlsnn_gptq_round(double *w, const double *u, int64_t G, int64_t N, int64_t K, const double *thr,
                                 int64_t T, const double *mags, double *q, double *err) {
  for (int64_t g = 0; g < G; ++g, w += N * K, q += N * K, u += K * K)
    for (int64_t i = 0; i < K; ++i) {
      const double uii = u[i * K + i];
      for (int64_t n = 0; n < N; ++n) {
        const double a = w[n * K + i];
        const double qq = copysign(mags[below(thr, T, fabs(a))], a) + 0.0;
        q[n * K + i] = qq;
        err[n] = (a - qq) / uii;
      }
      const double *ur = u + i * K;
      for (int64_t n = 0; n < N; ++n) {
        double *wr = w + n * K;
        const double e = err[n];
        for (int64_t j = i + 1; j < K; ++j) {
          const double p = e * ur[j];
          wr[j] = wr[j] - p;
        }
      }
    }
}
