/* netin.c: the host side of a network kernel's start, in portable C (no intrinsics: it builds
 * for the boards' ARM cores as for x86), called by hlsnn.compiled.nethost.
 *
 * hlsnn_in_quantize (rule input_quantize of hlsnn.compiled.netmode, the input): n values of an image as the
 * data set stores it (dtype 0 float32, 1 float64, 2 uint8) to their signed `bits`-bit integers
 * (bits <= 8; hlsnn_in_quantize16: bits <= 16) at radix f, written as int8 (int16: the network
 * kernel's 16-bit lanes above 8 bits) straight into the kernel's input buffer. The rule is
 * hlsnn.deploy.quant.to_fixed: w = rint(x * 2**g) at g = max(f + 24, 0) (half to even), then
 * shift_round_sat(w, g - f, bits, rounding) (mode 0 nearest_even, 1 nearest_away, 2
 * truncate, i.e. floor). Returns the count of non-finite values (nothing written then
 * is meaningful; the caller raises).
 *
 * float32 with f >= -24 (s = g - f = 24), no 64-bit arithmetic: t = x * 2**f is exact in
 * float32 (a power-of-two scale; a result that underflows lies in |t| < 2**-126, where every
 * mode gives the same integer as below). For |t| >= 1/2, t's last bit is at least 2**-24, so
 * w = t * 2**24 is already an integer and the rule is one rounding of t: q = trunc(t) plus the
 * rounding of the exact remainder r = t - trunc(t). For |t| < 1/2 the rint at radix g can
 * move t onto a tie: nearest modes give 0 except |t| = 1/2 - 2**-25 (w = 2**23, a tie:
 * nearest_away +-1, nearest_even 0); truncate gives -1 for t < -2**-25, else 0 (w = 0 for
 * t >= -2**-25: rint(-1/2) = 0). t is first clipped to [lo - 1, hi + 1].
 * float64 (and float32 with f < -24): the same rule with w = rint(x * 2**g) in double, an
 * integer held exactly as int64 while |w| < 2**62 (beyond, it saturates by its sign), then the
 * integer shift_round_sat.
 * uint8: a table of the 256 values through the float32 rule, then one lookup per value (in
 * hlsnn_in_run, the caller's table, made once: the codes' own values, or what each code stands
 * for, e.g. u / 255, through the Python rule).
 *
 * hlsnn_in_run(ctx, x): the whole host step of one kernel start (a batch of images) in one
 * call, its parameters in a context the caller sets once per batch size and dtype: quantize
 * each image into its row of the input buffer (in_stride bytes apart), the caller's flush (a
 * callback, or none for an uncached buffer), ap_start (one write of CTRL), the poll of ap_done
 * / ap_idle (bounded by timeout_s seconds), the caller's invalidate, and the outputs read
 * once: out_n int8 values per image (int16 with lane16; rows out_stride bytes apart) copied to q and dequantized
 * to y as float64 (q * 2**-f_out, exact). Register access through `regs` (a volatile pointer
 * to the IP's register file, on a board: pynq's mapping of it) or, when regs is NULL, through
 * the callbacks wr / rd (the simulated board's register models), so the same C path runs on
 * both. Returns 0, -1 on a timeout, or the count of non-finite input values. With words set
 * (a bfp_systolic kernel) the input values are written as float32 words (counted bad when not
 * finite or not exact in float32), the out_n output bytes of each image copied to q, and its
 * elems output words unpacked into pm, pe (bfpkernel.unpack_output) and y (m * 2**e + 0.0, as
 * netbfp.dequantize), the status words OR-ed into status. With softmax set y is then each
 * image's Softmax (the network's one host layer after the logits, the bits of
 * hlsnn.deploy.hostops' numpy Softmax): hlsnn_in_softmax on the integers, or with words
 * hlsnn_in_softmax_bfp on the pairs when every image's non-zero elements share one exponent that the
 * caller's table covers (else sm_left is set and y left as the values, for the caller's Softmax).
 */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

typedef void (*reg_write_fn)(uint32_t offset, uint32_t value);
typedef uint32_t (*reg_read_fn)(uint32_t offset);
typedef void (*sync_fn)(int which);

#define CTRL_START 0x1u
#define CTRL_DONE 0x2u
#define CTRL_IDLE 0x4u

static inline int32_t clampi(int32_t q, int32_t lo, int32_t hi) { return q < lo ? lo : (q > hi ? hi : q); }

/* rule input_quantize on one float32 value, f >= -24 (module comment), without data-dependent branches (t is
 * clipped to [lo - 1, hi + 1], so |t| <= 2**15 + 1 and every sum below is exact or rounds as said).
 * nearest_even: t rounded to the nearest integer, ties to even, (t + 1.5 * 2**23) - 1.5 * 2**23 in
 * float32 (|t| < 1/2 gives 0, as the rule). nearest_away: t + 1/2 (t - 1/2 below 0) truncated: exact
 * for |t| >= 1/2 up to the integer it may reach; below, the one float32 sum that rounds to 1 is
 * (1/2 - 2**-25) + 1/2, the value the rule takes to +-1. truncate: floor (the truncation less 1
 * where it is above t), but 0 for -2**-25 <= t < 0. */
static inline int32_t q_f32(float x, float scale, float lo, float hi, int mode) {
  float t = x * scale;
  t = t < lo - 1.0f ? lo - 1.0f : t;
  t = t > hi + 1.0f ? hi + 1.0f : t;
  if (mode == 0)
    return (int32_t)((t + 0x1.8p23f) - 0x1.8p23f);
  if (mode == 1)
    return (int32_t)(t + (t < 0.0f ? -0.5f : 0.5f));
  const int32_t i = (int32_t)t; /* toward zero */
  return i - ((float)i > t) + ((t < 0.0f) & (t >= -0x1p-25f));
}

/* rule input_quantize on one double (any f): w = rint(x * 2**g), then shift_round_sat by s = g - f > 0 */
static inline int32_t q_f64(double x, int g, int s, int32_t lo, int32_t hi, int mode) {
  double v = rint(ldexp(x, g));
  if (!(v < 0x1p62)) /* |w| >= 2**62 (or NaN): taken as saturated (the reference's int64 overflows) */
    return hi;
  if (!(v > -0x1p62))
    return lo;
  const int64_t w = (int64_t)v;
  const int sr = s > 62 ? 62 : s;
  int64_t q = w >> sr; /* arithmetic shift: floor */
  if (mode != 2) {
    const uint64_t rem = (uint64_t)w - ((uint64_t)q << sr), half = (uint64_t)1 << (sr - 1);
    int up = rem > half;
    if (rem == half)
      up = mode == 0 ? (int)(q & 1) : w >= 0;
    q += up;
  }
  return q < lo ? lo : (q > hi ? hi : (int32_t)q);
}

/* a value into lane k of an int8 (d8) or int16 (d16, inputs of 9 to 16 bits: the network kernel's
 * 16-bit lanes, hlsnn.engines.network.words) input row */
#define PUT(k, v)              \
  do {                         \
    if (d16)                   \
      d16[k] = (int16_t)(v);   \
    else                       \
      d8[k] = (int8_t)(v);     \
  } while (0)

static int64_t quantize_lanes(const void *x, int dtype, int64_t n, int f, int bits, int mode, int8_t *d8,
                              int16_t *d16) {
  const int32_t lo = -(1 << (bits - 1)), hi = (1 << (bits - 1)) - 1;
  const int g = f + 24 > 0 ? f + 24 : 0, s = g - f;
  int64_t bad = 0;
  if (dtype == 2 && f <= 100) {
    int16_t table[256];
    const float scale = ldexpf(1.0f, f);
    for (int u = 0; u < 256; ++u)
      table[u] = (int16_t)(f >= -24 ? clampi(q_f32((float)u, scale, (float)lo, (float)hi, mode), lo, hi)
                                    : q_f64((double)u, g, s, lo, hi, mode));
    const uint8_t *p = (const uint8_t *)x;
    for (int64_t k = 0; k < n; ++k)
      PUT(k, table[p[k]]);
    return 0;
  }
  if (dtype == 0 && f >= -24 && f <= 100) {
    const float *p = (const float *)x;
    const float scale = ldexpf(1.0f, f), flo = (float)lo, fhi = (float)hi;
    /* a NaN or infinite value counts as bad and is written as 0; no branch on the data (one loop
     * per lane width, the mode's branch the same on every value) */
#define F32_LOOP(dst, type)                                                    \
  for (int64_t k = 0; k < n; ++k) {                                            \
    const float v = p[k];                                                      \
    const int ok = v - v == 0.0f;                                              \
    bad += !ok;                                                                \
    dst[k] = (type)clampi(q_f32(ok ? v : 0.0f, scale, flo, fhi, mode), lo, hi); \
  }
    if (d16)
      F32_LOOP(d16, int16_t)
    else
      F32_LOOP(d8, int8_t)
#undef F32_LOOP
    return bad;
  }
  for (int64_t k = 0; k < n; ++k) {
    const double v = dtype == 0 ? (double)((const float *)x)[k]
                                : (dtype == 1 ? ((const double *)x)[k] : (double)((const uint8_t *)x)[k]);
    bad += !(v - v == 0.0);
    PUT(k, q_f64(v, g, s, lo, hi, mode));
  }
  return bad;
}

int64_t hlsnn_in_quantize(const void *x, int dtype, int64_t n, int f, int bits, int mode, int8_t *dst) {
  return quantize_lanes(x, dtype, n, f, bits, mode, dst, NULL);
}

/* the same into 16-bit lanes (bits <= 16) */
int64_t hlsnn_in_quantize16(const void *x, int dtype, int64_t n, int f, int bits, int mode, int16_t *dst) {
  return quantize_lanes(x, dtype, n, f, bits, mode, NULL, dst);
}

static inline void reg_wr(volatile uint32_t *regs, reg_write_fn wr, uint32_t off, uint32_t v) {
  if (regs)
    regs[off >> 2] = v;
  else
    wr(off, v);
}

static inline uint32_t reg_rd(volatile uint32_t *regs, reg_read_fn rd, uint32_t off) {
  return regs ? regs[off >> 2] : rd(off);
}

/* The per-start parameters, set once per batch size and dtype by the caller (nethost.CHost):
 * a start is then hlsnn_in_run(ctx, x), two pointer arguments. */
typedef struct {
  int64_t dtype, batch, n, f, bits, mode; /* the input: rule input_quantize */
  int8_t *inbuf;                          /* the input buffer, rows in_stride bytes apart */
  int64_t in_stride;
  volatile uint32_t *regs; /* the mapped register file, or NULL: the callbacks */
  reg_write_fn wr;
  reg_read_fn rd;
  sync_fn sync; /* flush (0) / invalidate (1), or NULL for uncached buffers */
  double timeout_s;
  const int8_t *outbuf; /* the output buffer, rows out_stride bytes apart */
  int64_t out_stride, out_n, f_out;
  double *y; /* out_n values per image, dequantized */
  int8_t *q; /* the same as integers */
  int64_t polls;
  const int8_t *table; /* uint8 input (dtype 2): the integer of each code, or NULL */
  double kernel_s;     /* hlsnn_in_run: the wall time from ap_start to the poll that saw it done */
  int64_t words;       /* 1: a bfp_systolic kernel's words: float32 values in, 64-bit words out */
  int64_t elems;       /* words: the output elements per image (then the status word) */
  int64_t *pm, *pe;    /* words: each element's pair (m, e), 54-bit m and 10-bit e, signed */
  int64_t status;      /* words: the OR of the images' status words */
  int64_t lane16;      /* 1: 16-bit lanes (inputs of 9 to 16 bits): inbuf, outbuf, q and table hold int16 */
  int64_t softmax;     /* 1: y is the Softmax of each image's out_n values (hlsnn_in_softmax), not the values */
  const double *exp_table; /* softmax: exp(-d * 2**-f_out) for each lane difference d, made by numpy's exp;
                            * words: exp(-d * 2**e) for e = sm_emin ... sm_emin + sm_ne - 1 (rows), d < sm_w */
  int64_t sm_emin, sm_ne, sm_w; /* words with softmax: the table's exponents and differences */
  int64_t sm_left;     /* words with softmax: 1 when y was left as the values (an image the table does not cover) */
} hlsnn_in_ctx;

/* numpy's pairwise sum of n doubles (DOUBLE_pairwise_sum of numpy's loops: below 8 values in
 * order; up to 128, eight partial sums of every eighth value, added as ((0+1)+(2+3))+((4+5)+(6+7)),
 * then the rest in order; beyond, the two halves at a multiple of 8), which np.add.reduce adds
 * to its initial 0.0 along a contiguous axis: the same additions in the same order, so the same
 * bits (tests/deploy/test_nethost_softmax.py compares them on every length up to 300). */
static double pairwise_sum(const double *a, int64_t n) {
  if (n < 8) {
    double r = 0.0;
    for (int64_t i = 0; i < n; ++i)
      r += a[i];
    return r;
  }
  if (n <= 128) {
    double r[8];
    int64_t i;
    for (int k = 0; k < 8; ++k)
      r[k] = a[k];
    for (i = 8; i < n - (n % 8); i += 8)
      for (int k = 0; k < 8; ++k)
        r[k] += a[i + k];
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i)
      res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

/* The Softmax of one image's n output integers q (int8, or int16 with lane16) at radix f_out, as
 * hlsnn.deploy.hostops computes it on their float64 values v = q * 2**-f_out (exp(v - max v),
 * divided by its sum over the image): v - max v = -(qmax - q) * 2**-f_out exactly, so its exp is
 * table[qmax - q] (the caller's table, made by numpy's exp on those values), the sum is numpy's
 * (pairwise_sum, plus its initial 0.0), and each value is divided by it (IEEE, as numpy). */
int64_t hlsnn_in_softmax(const void *q, int64_t n, int64_t lane16, const double *table, double *y) {
  int32_t mx = lane16 ? ((const int16_t *)q)[0] : ((const int8_t *)q)[0];
  for (int64_t j = 1; j < n; ++j) {
    const int32_t v = lane16 ? ((const int16_t *)q)[j] : ((const int8_t *)q)[j];
    mx = v > mx ? v : mx;
  }
  for (int64_t j = 0; j < n; ++j)
    y[j] = table[mx - (lane16 ? ((const int16_t *)q)[j] : ((const int8_t *)q)[j])];
  const double s = 0.0 + pairwise_sum(y, n);
  for (int64_t j = 0; j < n; ++j)
    y[j] = y[j] / s;
  return 0;
}

/* Whether a bfp_systolic image's n output elements (m, e) (pm, pe) are covered by the Softmax
 * table of rows emin ... emin + ne - 1 and width w (nethost.bfp_exp_table): every non-zero
 * element has one exponent e0 (a conv's output pixel: one exponent for all its channels; a zero
 * may carry any), emin <= e0 < emin + ne, and the mantissas differ by less than w. Then (e0 in
 * *e0, the largest mantissa in *mmax) each value is m 2**e0 and v - max v = -(mmax - m) 2**e0,
 * exactly. */
static int bfp_covered(const int64_t *pm, const int64_t *pe, int64_t n, int64_t emin, int64_t ne, int64_t w,
                       int64_t *e0, int64_t *mmax) {
  int64_t e = emin, lo = pm[0], hi = pm[0], any = 0;
  for (int64_t j = 0; j < n; ++j) {
    if (pm[j] != 0) {
      if (any && pe[j] != e)
        return 0;
      e = pe[j];
      any = 1;
    }
    lo = pm[j] < lo ? pm[j] : lo; /* the zeros too: the value 0 = 0 2**e0 */
    hi = pm[j] > hi ? pm[j] : hi;
  }
  if (e < emin || e >= emin + ne || hi - lo >= w)
    return 0;
  *e0 = e;
  *mmax = hi;
  return 1;
}

/* The Softmax of one bfp_systolic image's n output elements (pm, pe) into y, as
 * hlsnn.deploy.hostops computes it on their float64 values m 2**e, when the table covers them
 * (bfp_covered; else 1 is returned and y is not written): exp(v - max v) is the table's entry
 * (made by numpy's exp on those values), the sum numpy's (pairwise_sum, plus its initial 0.0),
 * each value divided by it (IEEE, as numpy). */
int64_t hlsnn_in_softmax_bfp(const int64_t *pm, const int64_t *pe, int64_t n, int64_t emin, int64_t ne, int64_t w,
                             const double *table, double *y) {
  int64_t e0, mmax;
  if (n < 1 || !bfp_covered(pm, pe, n, emin, ne, w, &e0, &mmax))
    return 1;
  const double *row = table + (e0 - emin) * w;
  for (int64_t j = 0; j < n; ++j)
    y[j] = row[mmax - pm[j]];
  const double s = 0.0 + pairwise_sum(y, n);
  for (int64_t j = 0; j < n; ++j)
    y[j] = y[j] / s;
  return 0;
}

/* image b's row of the input buffer quantized (or looked up, uint8 with a table) from p */
static int64_t fill_row(hlsnn_in_ctx *c, const void *p, int8_t *row) {
  if (c->dtype == 2 && c->table) { /* uint8 images: one lookup per value */
    const uint8_t *u = (const uint8_t *)p;
    if (c->lane16) {
      const int16_t *t = (const int16_t *)c->table;
      int16_t *d = (int16_t *)row;
      for (int64_t k = 0; k < c->n; ++k)
        d[k] = t[u[k]];
    } else
      for (int64_t k = 0; k < c->n; ++k)
        row[k] = c->table[u[k]];
    return 0;
  }
  return quantize_lanes(p, (int)c->dtype, c->n, (int)c->f, (int)c->bits, (int)c->mode, c->lane16 ? NULL : row,
                        c->lane16 ? (int16_t *)row : NULL);
}

/* output j of image row o (int8 or int16 lanes) */
static inline int32_t out_at(const hlsnn_in_ctx *c, const int8_t *o, int64_t j) {
  return c->lane16 ? (int32_t)((const int16_t *)o)[j] : (int32_t)o[j];
}

/* The bfp_systolic kernel's input (its rule bfp_input): each value as a float32 word, two to a 64-bit
 * word, low first; a value that is not finite or not exact in float32 counts as bad. */
static int64_t f32_words(const void *x, int dtype, int64_t n, float *dst) {
  int64_t bad = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double v = dtype == 0 ? (double)((const float *)x)[k]
                                : (dtype == 1 ? ((const double *)x)[k] : (double)((const uint8_t *)x)[k]);
    const float w = (float)v;
    const int ok = v - v == 0.0 && (double)w == v;
    bad += !ok;
    dst[k] = ok ? w : 0.0f;
  }
  return bad;
}

/* Poll CTRL until ap_done or ap_idle: the polls made (>= 1), or -1 after timeout_s seconds
 * (the clock read every 256 polls). */
static int64_t poll_done(hlsnn_in_ctx *c) {
  int64_t k = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (!(reg_rd(c->regs, c->rd, 0x00) & (CTRL_DONE | CTRL_IDLE)))
    if ((++k & 255) == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t1);
      if ((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) > c->timeout_s)
        return -1;
    }
  return k + 1;
}

int64_t hlsnn_in_run(hlsnn_in_ctx *c, const void *x) {
  const int64_t item = c->dtype == 0 ? 4 : (c->dtype == 1 ? 8 : 1);
  int64_t bad = 0;
  if (c->words) {
    for (int64_t b = 0; b < c->batch; ++b)
      bad += f32_words((const char *)x + b * c->n * item, (int)c->dtype, c->n, (float *)(c->inbuf + b * c->in_stride));
  } else
    for (int64_t b = 0; b < c->batch; ++b)
      bad += fill_row(c, (const char *)x + b * c->n * item, c->inbuf + b * c->in_stride);
  if (bad)
    return bad;
  if (c->sync)
    c->sync(0); /* flush the input bytes */
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  reg_wr(c->regs, c->wr, 0x00, CTRL_START);
  const int64_t k = poll_done(c);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  c->kernel_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  c->polls = k;
  if (k < 0)
    return -1;
  if (c->sync)
    c->sync(1); /* invalidate the output bytes */
  if (c->words) { /* the output words, read once, then unpacked: (m, e) and y = m * 2**e (exact) */
    c->status = 0;
    for (int64_t b = 0; b < c->batch; ++b) {
      memcpy(c->q + b * c->out_n, c->outbuf + b * c->out_stride, (size_t)c->out_n);
      uint64_t w[1];
      for (int64_t j = 0; j < c->elems; ++j) {
        memcpy(w, c->q + b * c->out_n + 8 * j, 8);
        int64_t m = (int64_t)(w[0] & (((uint64_t)1 << 54) - 1)), e = (int64_t)((w[0] >> 54) & 0x3FF);
        if (m >= (int64_t)1 << 53)
          m -= (int64_t)1 << 54;
        if (e >= 512)
          e -= 1024;
        c->pm[b * c->elems + j] = m;
        c->pe[b * c->elems + j] = e;
        c->y[b * c->elems + j] = ldexp((double)m, (int)e) + 0.0;
      }
      memcpy(w, c->q + b * c->out_n + 8 * c->elems, 8);
      c->status |= (int64_t)w[0];
    }
    if (c->softmax) { /* every image covered by the table, or none changed (the caller's numpy Softmax) */
      c->sm_left = 0;
      for (int64_t b = 0; b < c->batch && !c->sm_left; ++b) {
        int64_t e0, mmax;
        c->sm_left = c->elems < 1 || !bfp_covered(c->pm + b * c->elems, c->pe + b * c->elems, c->elems, c->sm_emin,
                                                  c->sm_ne, c->sm_w, &e0, &mmax);
      }
      for (int64_t b = 0; b < c->batch && !c->sm_left; ++b)
        hlsnn_in_softmax_bfp(c->pm + b * c->elems, c->pe + b * c->elems, c->elems, c->sm_emin, c->sm_ne, c->sm_w,
                             c->exp_table, c->y + b * c->elems);
    }
    return 0;
  }
  for (int64_t b = 0; b < c->batch; ++b)
    for (int64_t j = 0; j < c->out_n; ++j) {
      const int32_t v = out_at(c, c->outbuf + b * c->out_stride, j); /* each output lane read once */
      if (c->lane16)
        ((int16_t *)c->q)[b * c->out_n + j] = (int16_t)v;
      else
        c->q[b * c->out_n + j] = (int8_t)v;
      c->y[b * c->out_n + j] = ldexp((double)v, (int)-c->f_out);
    }
  if (c->softmax)
    for (int64_t b = 0; b < c->batch; ++b)
      hlsnn_in_softmax(c->q + (c->lane16 ? 2 : 1) * b * c->out_n, c->out_n, c->lane16, c->exp_table,
                       c->y + b * c->out_n);
  return 0;
}

/* Double-buffered starts of one image each over `images` images (c->batch is 1): the input
 * and output buffers hold two rows (slots) each, at the device addresses in_addr and out_addr
 * plus slot * stride. Image i runs in slot i % 2: while the kernel runs image i the host
 * quantizes image i + 1 into the other slot; then it polls image i's ap_done, reads its
 * outputs once, points the kernel at the other slot (the low words of the two address
 * registers, and the high words when they differ) and starts it. At the end the registers
 * point at slot 0 again (the single-start path's addresses). Uncached buffers only (no sync).
 * The registers: as hlsnn_in_run. Returns as hlsnn_in_run; c->polls is the total. */
static void point_at(hlsnn_in_ctx *c, uint64_t in, uint64_t out, uint64_t *cur_in, uint64_t *cur_out) {
  if ((uint32_t)in != (uint32_t)*cur_in)
    reg_wr(c->regs, c->wr, 0x10, (uint32_t)in);
  if ((in >> 32) != (*cur_in >> 32))
    reg_wr(c->regs, c->wr, 0x14, (uint32_t)(in >> 32));
  if ((uint32_t)out != (uint32_t)*cur_out)
    reg_wr(c->regs, c->wr, 0x1C, (uint32_t)out);
  if ((out >> 32) != (*cur_out >> 32))
    reg_wr(c->regs, c->wr, 0x20, (uint32_t)(out >> 32));
  *cur_in = in;
  *cur_out = out;
}

int64_t hlsnn_in_pipeline(hlsnn_in_ctx *c, const void *x, int64_t images, uint64_t in_addr, uint64_t out_addr,
                          double *y, int8_t *q) {
  const int64_t item = c->dtype == 0 ? 4 : (c->dtype == 1 ? 8 : 1);
  uint64_t cur_in = in_addr, cur_out = out_addr; /* the registers hold slot 0's addresses */
  int64_t bad = 0, polls = 0;
  const char *xs = (const char *)x;
#define QUANT(i) (bad += fill_row(c, xs + (i) * c->n * item, c->inbuf + ((i) & 1) * c->in_stride))
  QUANT(0);
  if (bad)
    return bad;
  reg_wr(c->regs, c->wr, 0x00, CTRL_START);
  for (int64_t i = 0; i < images; ++i) {
    if (i + 1 < images) {
      QUANT(i + 1); /* overlaps the kernel's run of image i */
      if (bad) { /* let image i finish, then stop */
        if (poll_done(c) < 0)
          return -1;
        point_at(c, in_addr, out_addr, &cur_in, &cur_out);
        return bad;
      }
    }
    const int64_t k = poll_done(c);
    if (k < 0) {
      c->polls = polls;
      return -1;
    }
    polls += k;
    const int8_t *o = c->outbuf + (i & 1) * c->out_stride;
    for (int64_t j = 0; j < c->out_n; ++j) {
      const int32_t v = out_at(c, o, j);
      if (c->lane16)
        ((int16_t *)q)[i * c->out_n + j] = (int16_t)v;
      else
        q[i * c->out_n + j] = (int8_t)v;
      y[i * c->out_n + j] = ldexp((double)v, (int)-c->f_out);
    }
    if (i + 1 < images) {
      const uint64_t s = (uint64_t)((i + 1) & 1);
      point_at(c, in_addr + s * (uint64_t)c->in_stride, out_addr + s * (uint64_t)c->out_stride, &cur_in, &cur_out);
      reg_wr(c->regs, c->wr, 0x00, CTRL_START);
    }
  }
#undef QUANT
  point_at(c, in_addr, out_addr, &cur_in, &cur_out);
  c->polls = polls;
  return 0;
}

/* A null register file for measuring the host path without a kernel (benchmarks): writes
 * are dropped and CTRL reads as done and idle, so hlsnn_in_run polls once. */
void hlsnn_in_null_write(uint32_t offset, uint32_t value) {
  (void)offset;
  (void)value;
}

uint32_t hlsnn_in_null_read(uint32_t offset) { return offset == 0 ? (CTRL_DONE | CTRL_IDLE) : 0; }
