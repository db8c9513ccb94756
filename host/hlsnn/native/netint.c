/* netint.c: the compiled twin of the integer network mode's ops (hlsnn.compiled.netmode,
 * run_ints: rules conv_output, max_pool and residual_add), called by hlsnn.compiled.netfast. Tensors are int32 maps in NHWC
 * order, (B, H, W, C) C-contiguous; a dense layer's output is (B, 1, 1, Z).
 *
 * The numpy code is the specification; tests/compiled/test_netfast.py holds these functions
 * bit-equal to it (random geometry, groups, rounding modes, saturation, the shipped models).
 *
 * hlsnn_net_conv (rule conv_output): the accumulators of a convolution, exact in int32: the caller
 * checks that max|x| * (the largest sum of |w| over one output's taps) < 2**31, which bounds
 * every partial sum (the sums then never wrap, in any order), and takes the numpy path
 * otherwise. The input is a zero-padded copy (hlsnn_net_pad): every window lies inside it.
 * Weights: (G, kh, kw, Cg, Zs) int32, Zs = Zg rounded up to 16 (zero columns), G groups of
 * Cg input and Zg output channels. Then the engine's output rule on acc per output
 * channel z, in int64:
 *   rule 0 (shift_mac):      v = clamp(acc + bias, acc_bits); ReLU; shift_round_sat(v, shift, B)
 *   rule 1 (sparse_cluster): v = acc + bias;                  ReLU; shift_round_sat(v, shift, 8)
 * then the clamp [lo, hi] (a fused ReLU6; the activation range otherwise). The saturations
 * of shift_round_sat are counted (the clamp is not), and the function returns that count.
 *
 * With rule | RAW (4) the function stores the wide results v instead (after ReLU, before the
 * shift), as int32: the caller checks that they fit; with a counts array it also counts their
 * MSB positions per channel (the statistics unit's histogram: hlsnn_net_msb_counts, on chunks
 * of pixels as they are computed). The compiled calibration (hlsnn.compiled.netcal) reads them,
 * and hlsnn_net_requant applies the output stage with the shift then chosen.
 *
 * hlsnn_net_quantize (rule 1): float64 input images (NCHW) to their B-bit integers in an int32
 * NHWC map, the arithmetic of hlsnn.compiled.netmode.quantize_input's fast path.
 *
 * hlsnn_net_dwconv: the same for a depthwise convolution (Cg = Zg = 1), weights (kh, kw, Cs)
 * with Cs = C rounded up to 16, the channels in vector lanes.
 *
 * shift_round_sat(v, s, bits, mode): hlsnn.primitives.shift_round_sat on one value (modes 0
 * nearest_even, 1 nearest_away, 2 truncate); returns the value, *sat set when saturation
 * changed it.
 *
 * The AVX-512 and AVX2 paths are chosen at run time
 * (__builtin_cpu_supports; the last argument caps the choice, for the tests); every variant gives
 * the same integers (integer sums do not depend on their order), so the bits do not depend
 * on the machine.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define HLSNN_X86 1
#include <immintrin.h>
#endif

/* output pixels per block: the accumulators of NP pixels x 16 channels stay in registers */
#define NP 8
#define ZV 16

static inline int64_t shift_round_sat(int64_t v, int64_t s, int bits, int mode, int64_t *sat) {
  const int64_t lo = -((int64_t)1 << (bits - 1)), hi = ((int64_t)1 << (bits - 1)) - 1;
  int64_t t;
  if (s > 0) {
    const int sr = s > 63 ? 63 : (int)s;
    int64_t q = v >> sr; /* arithmetic: floor(v / 2**sr) */
    if (mode != 2) {
      const uint64_t rem = (uint64_t)v - ((uint64_t)q << sr);
      const uint64_t half = (uint64_t)1 << (sr - 1);
      int up = rem > half;
      if (rem == half)
        up = mode == 0 ? (int)(q & 1) : v >= 0;
      q += up;
    }
    t = q;
    if (t > hi || t < lo) {
      *sat += 1;
      t = t > hi ? hi : lo;
    }
    return t;
  }
  const int64_t ls = -s > bits ? bits : -s;
  int64_t room = bits - 1 - ls;
  room = room < 0 ? 0 : (room > 62 ? 62 : room);
  const int64_t bound = (int64_t)1 << room;
  const int fits = (ls < bits && v >= -bound && v < bound) || v == 0;
  if (!fits) {
    *sat += 1;
    return v > 0 ? hi : lo;
  }
  t = (int64_t)((uint64_t)v << ls);
  return t > hi ? hi : (t < lo ? lo : t);
}

/* shift_round_sat for 1 <= s <= 62 and |v| < 2**62 without branches (the loops that call it
 * vectorize); ns counts the saturations. */
static inline int64_t rsat(int64_t v, int64_t s, int mode, int64_t lb, int64_t hb, int64_t *ns) {
  int64_t q = v >> s;
  const int64_t rem = v - (int64_t)((uint64_t)q << s);
  const int64_t half = (int64_t)1 << (s - 1);
  const int64_t tie = mode == 0 ? (q & 1) : (int64_t)(v >= 0);
  q += mode == 2 ? 0 : (int64_t)(rem > half) | ((int64_t)(rem == half) & tie); /* int64 0/1: vectorizes */
  *ns += (q > hb) | (q < lb);
  q = q > hb ? hb : q;
  return q < lb ? lb : q;
}

/* the output rule of one accumulator (module docstring) */
static inline int32_t out_rule(int64_t acc, int64_t bias, int64_t shift, int rule, int acc_bits, int bits,
                               int mode, int relu, int64_t lo, int64_t hi, int64_t *sat) {
  int64_t v = acc + bias;
  if (rule == 0) {
    const int64_t amax = ((int64_t)1 << (acc_bits - 1)) - 1;
    v = v > amax ? amax : (v < -amax - 1 ? -amax - 1 : v);
  }
  if (relu && v < 0)
    v = 0;
  int64_t y = shift_round_sat(v, shift, bits, mode, sat);
  y = y < lo ? lo : (y > hi ? hi : y);
  return (int32_t)y;
}

/* Zero-padded copy of x (B, H, W, C) into xp (B, Hp, Wp, C) at (top, left); the caller
 * zeroes xp's border (once: a buffer used again keeps it). nz (H*W, int64), when not NULL,
 * gets each pixel's count of non-zero values over the images and channels added (the
 * deployment's input densities). */
void hlsnn_net_pad(const int32_t *x, int64_t B, int64_t H, int64_t W, int64_t C, int32_t *xp, int64_t Hp,
                   int64_t Wp, int64_t top, int64_t left, int64_t *nz) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t y = 0; y < H; ++y) {
      const int32_t *src = x + ((b * H + y) * W) * C;
      int32_t *dst = xp + ((b * Hp + y + top) * Wp + left) * C;
      memcpy(dst, src, (size_t)(W * C) * sizeof(int32_t));
      if (nz)
        for (int64_t xx = 0; xx < W; ++xx) {
          const int32_t *px = src + xx * C;
          int32_t n = 0;
          for (int64_t c = 0; c < C; ++c)
            n += px[c] != 0;
          nz[y * W + xx] += n;
        }
    }
}

/* the index of u's highest set bit, u != 0 */
static inline int msb32(uint32_t u) {
#if defined(__GNUC__) || defined(__clang__)
  return 31 - __builtin_clz(u);
#else
  int k = 0;
  while (u >>= 1)
    ++k;
  return k;
#endif
}

typedef struct {
  const int64_t *bias, *shift;
  int rule, acc_bits, bits, mode, relu;
  int64_t lo, hi;
  int fast; /* every shift in [1, 62]: the branch-free rounding (rsat) */
  int raw;  /* store v (the wide result) instead of the output (rule | RAW) */
} rule_t;

/* rule | RAW: the wide results v = clamp(acc + bias, acc_bits) (rule 0) or acc + bias (rule 1),
 * after ReLU, stored as int32 (the caller checks that they fit) */
#define RAW 4

/* the outputs of one block: acc[p][z] for pixels p < np, channels z < zn, to out rows */
static inline int64_t finish_block(const int32_t (*acc)[ZV], int np, int zn, int32_t *const *orow, int64_t z0,
                                   const rule_t *r) {
  int64_t sat = 0;
  if (r->raw) {
    const int64_t amax = r->rule == 0 ? ((int64_t)1 << (r->acc_bits - 1)) - 1 : INT64_MAX;
    const int64_t vmin = r->relu ? 0 : -amax - 1;
    const int64_t *bias = r->bias + z0;
    for (int p = 0; p < np; ++p) {
      const int32_t *a = acc[p];
      int32_t *o = orow[p] + z0;
      for (int z = 0; z < zn; ++z) {
        int64_t v = (int64_t)a[z] + bias[z];
        v = v > amax ? amax : v;
        o[z] = (int32_t)(v < vmin ? vmin : v);
      }
    }
    return 0;
  }
  if (r->fast) {
    const int64_t lb = -((int64_t)1 << (r->bits - 1)), hb = ((int64_t)1 << (r->bits - 1)) - 1;
    const int64_t amax = r->rule == 0 ? ((int64_t)1 << (r->acc_bits - 1)) - 1 : INT64_MAX, amin = -amax - 1;
    const int64_t vmin = r->relu ? 0 : amin, lo = r->lo, hi = r->hi;
    const int64_t *bias = r->bias + z0, *shift = r->shift + z0;
    for (int p = 0; p < np; ++p) {
      const int32_t *a = acc[p];
      int32_t *o = orow[p] + z0;
      int64_t ns = 0;
      for (int z = 0; z < zn; ++z) {
        int64_t v = (int64_t)a[z] + bias[z];
        v = v > amax ? amax : v;
        v = v < vmin ? vmin : v;
        int64_t y = rsat(v, shift[z], r->mode, lb, hb, &ns);
        y = y > hi ? hi : y;
        o[z] = (int32_t)(y < lo ? lo : y);
      }
      sat += ns;
    }
    return sat;
  }
  for (int p = 0; p < np; ++p)
    for (int z = 0; z < zn; ++z)
      orow[p][z0 + z] = out_rule(acc[p][z], r->bias[z0 + z], r->shift[z0 + z], r->rule, r->acc_bits, r->bits,
                                 r->mode, r->relu, r->lo, r->hi, &sat);
  return sat;
}

#ifdef HLSNN_X86
/* rsat on 8 int64 lanes: v >> s (per lane) rounded by mode, saturated to [lb, hb], the
 * saturations of lanes m counted in ns */
__attribute__((target("avx512f"))) static inline __m512i rsat8(__m512i v, __m512i s, int mode, __m512i vlb,
                                                             __m512i vhb, __mmask8 m, int64_t *ns) {
  const __m512i one = _mm512_set1_epi64(1);
  __m512i q = _mm512_srav_epi64(v, s);
  if (mode != 2) {
    const __m512i rem = _mm512_sub_epi64(v, _mm512_sllv_epi64(q, s));
    const __m512i half = _mm512_sllv_epi64(one, _mm512_sub_epi64(s, one));
    const __mmask8 tie = mode == 0 ? _mm512_test_epi64_mask(q, one)
                                   : _mm512_cmpge_epi64_mask(v, _mm512_setzero_si512());
    const __mmask8 up = _mm512_cmpgt_epi64_mask(rem, half) | (_mm512_cmpeq_epi64_mask(rem, half) & tie);
    q = _mm512_mask_add_epi64(q, up, q, one);
  }
  *ns += __builtin_popcount((unsigned)(m & (_mm512_cmpgt_epi64_mask(q, vhb) | _mm512_cmplt_epi64_mask(q, vlb))));
  return _mm512_max_epi64(_mm512_min_epi64(q, vhb), vlb);
}

/* finish_block's fast path on the outputs of lanes m of 8 in int64 lanes (the same operations
 * as rsat; the other lanes read no bias or shift, count no saturation) */
__attribute__((target("avx512f"))) static inline __m512i rule8(__m256i a32, __mmask8 m, const int64_t *bias,
                                                             const int64_t *shift, const rule_t *r, int64_t amax,
                                                             int64_t vmin, int64_t lb, int64_t hb, int64_t *ns) {
  __m512i v = _mm512_add_epi64(_mm512_cvtepi32_epi64(a32), _mm512_maskz_loadu_epi64(m, bias));
  v = _mm512_max_epi64(_mm512_min_epi64(v, _mm512_set1_epi64(amax)), _mm512_set1_epi64(vmin));
  const __m512i q = rsat8(v, _mm512_maskz_loadu_epi64(m, shift), r->mode, _mm512_set1_epi64(lb),
                          _mm512_set1_epi64(hb), m, ns);
  return _mm512_max_epi64(_mm512_min_epi64(q, _mm512_set1_epi64(r->hi)), _mm512_set1_epi64(r->lo));
}

/* the lanes of the first n (< 8: fewer) of 8 */
#define LANES8(n) ((__mmask8)((n) >= 8 ? 0xffu : (1u << (n)) - 1u))

/* finish_block's raw path in int64 lanes, any zn */
__attribute__((target("avx512f"))) static int64_t raw_avx512(const int32_t (*acc)[ZV], int np, int zn,
                                                             int32_t *const *orow, int64_t z0, const rule_t *r) {
  const int64_t amax = r->rule == 0 ? ((int64_t)1 << (r->acc_bits - 1)) - 1 : INT64_MAX;
  const __m512i vamax = _mm512_set1_epi64(amax), vvmin = _mm512_set1_epi64(r->relu ? 0 : -amax - 1);
  for (int p = 0; p < np; ++p)
    for (int h = 0; h < zn; h += 8) {
      const __mmask8 m = LANES8(zn - h);
      __m512i v = _mm512_add_epi64(_mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(acc[p] + h))),
                                   _mm512_maskz_loadu_epi64(m, r->bias + z0 + h));
      v = _mm512_max_epi64(_mm512_min_epi64(v, vamax), vvmin);
      _mm512_mask_cvtepi64_storeu_epi32(orow[p] + z0 + h, m, v);
    }
  return 0;
}

/* finish_block in AVX-512 (any zn: the last vector's lanes masked) */
__attribute__((target("avx512f"))) static int64_t finish_avx512(const int32_t (*acc)[ZV], int np, int zn,
                                                                int32_t *const *orow, int64_t z0, const rule_t *r) {
  if (r->raw)
    return raw_avx512(acc, np, zn, orow, z0, r);
  if (!r->fast)
    return finish_block(acc, np, zn, orow, z0, r);
  const int64_t lb = -((int64_t)1 << (r->bits - 1)), hb = ((int64_t)1 << (r->bits - 1)) - 1;
  const int64_t amax = r->rule == 0 ? ((int64_t)1 << (r->acc_bits - 1)) - 1 : INT64_MAX;
  const int64_t vmin = r->relu ? 0 : -amax - 1;
  int64_t ns = 0;
  for (int p = 0; p < np; ++p)
    for (int h = 0; h < zn; h += 8) {
      const __mmask8 m = LANES8(zn - h);
      const __m256i a32 = _mm256_loadu_si256((const __m256i *)(acc[p] + h));
      const __m512i y = rule8(a32, m, r->bias + z0 + h, r->shift + z0 + h, r, amax, vmin, lb, hb, &ns);
      _mm512_mask_cvtepi64_storeu_epi32(orow[p] + z0 + h, m, y);
    }
  return ns;
}
#endif

/* pixel q of the flattened (b, oy, ox) outputs: the index of its window's first element in xp */
static inline int64_t window(int64_t q, int64_t OH, int64_t OW, int64_t Hp, int64_t Wp, int64_t C, int64_t sh,
                             int64_t sw) {
  const int64_t b = q / (OH * OW), r = q % (OH * OW), oy = r / OW, ox = r % OW;
  return ((b * Hp + oy * sh) * Wp + ox * sw) * C;
}

/* BLOCK: the accumulators acc[p][z] of NP output pixels (their windows' first elements
 * xw[p]) and 16 output channels (weights wg, Zs apart per input unit), over kh x kw taps of NC
 * input units each (a unit: one int32 channel, or an int16 channel pair read as one int32 word
 * by XAT), CX channels per padded pixel. MAC multiplies a broadcast unit by a weight vector and
 * adds: vpmulld + vpaddd on channels, vpdpwssd or vpmaddwd + vpaddd on pairs. */
#define BLOCK_ARGS(T)                                                                             \
  const T *const *xw, const int32_t *wg, int64_t kh, int64_t kw, int64_t NC, int64_t Zs, int64_t Wp, int64_t CX, \
      int32_t(*acc)[ZV]
#define X32(px, off, c) ((px)[(off) + (c)])

/* the int32 word of the int16 pair at p (p even-aligned in its array) */
static inline int32_t pair_at(const int16_t *p) {
  int32_t v;
  memcpy(&v, p, sizeof v);
  return v;
}
#define X16(px, off, c) pair_at((px) + (off) + 2 * (c))

#ifdef HLSNN_X86
#define BLOCK_512(NAME, TARGET, T, XAT, MAC)                                                      \
  __attribute__((target(TARGET))) static void NAME(BLOCK_ARGS(T)) {                               \
    __m512i a[NP];                                                                                \
    for (int p = 0; p < NP; ++p)                                                                  \
      a[p] = _mm512_setzero_si512();                                                              \
    for (int64_t ky = 0; ky < kh; ++ky)                                                           \
      for (int64_t kx = 0; kx < kw; ++kx) {                                                       \
        const int64_t off = (ky * Wp + kx) * CX;                                                  \
        const int32_t *wr = wg + (ky * kw + kx) * NC * Zs;                                        \
        for (int64_t c = 0; c < NC; ++c) {                                                        \
          const __m512i wv = _mm512_loadu_si512((const void *)(wr + c * Zs));                     \
          _Pragma("GCC unroll 8") for (int p = 0; p < NP; ++p) {                                  \
            a[p] = MAC(a[p], _mm512_set1_epi32(XAT(xw[p], off, c)), wv);                          \
          }                                                                                       \
        }                                                                                         \
      }                                                                                           \
    for (int p = 0; p < NP; ++p)                                                                  \
      _mm512_storeu_si512((void *)acc[p], a[p]);                                                  \
  }

/* AVX2: 4 pixels x 16 channels at a time, 8 accumulators in registers */
#define BLOCK_AVX2(NAME, T, XAT, MUL)                                                             \
  __attribute__((target("avx2"))) static void NAME(BLOCK_ARGS(T)) {                               \
    for (int h = 0; h < NP; h += 4) {                                                             \
      __m256i a[4][2];                                                                            \
      for (int p = 0; p < 4; ++p)                                                                 \
        a[p][0] = a[p][1] = _mm256_setzero_si256();                                               \
      for (int64_t ky = 0; ky < kh; ++ky)                                                         \
        for (int64_t kx = 0; kx < kw; ++kx) {                                                     \
          const int64_t off = (ky * Wp + kx) * CX;                                                \
          const int32_t *wr = wg + (ky * kw + kx) * NC * Zs;                                      \
          for (int64_t c = 0; c < NC; ++c) {                                                      \
            const __m256i w0 = _mm256_loadu_si256((const __m256i *)(wr + c * Zs));                \
            const __m256i w1 = _mm256_loadu_si256((const __m256i *)(wr + c * Zs + 8));            \
            for (int p = 0; p < 4; ++p) {                                                         \
              const __m256i xv = _mm256_set1_epi32(XAT(xw[h + p], off, c));                        \
              a[p][0] = _mm256_add_epi32(a[p][0], MUL(xv, w0));                                   \
              a[p][1] = _mm256_add_epi32(a[p][1], MUL(xv, w1));                                   \
            }                                                                                     \
          }                                                                                       \
        }                                                                                         \
      for (int p = 0; p < 4; ++p) {                                                               \
        _mm256_storeu_si256((__m256i *)acc[h + p], a[p][0]);                                      \
        _mm256_storeu_si256((__m256i *)(acc[h + p] + 8), a[p][1]);                                \
      }                                                                                           \
    }                                                                                             \
  }

#define MAC_MULLO(a, x, w) _mm512_add_epi32(a, _mm512_mullo_epi32(x, w))
#define MAC_VNNI(a, x, w) _mm512_dpwssd_epi32(a, x, w)
#define MAC_BW(a, x, w) _mm512_add_epi32(a, _mm512_madd_epi16(x, w))
BLOCK_512(block_avx512, "avx512f", int32_t, X32, MAC_MULLO)
BLOCK_AVX2(block_avx2, int32_t, X32, _mm256_mullo_epi32)
#endif

/* the portable blocks: XGET(px, c) declares a pixel's unit c (x0, x1), PMUL(wz) its products for
 * one output channel's weight word wz */
#define BLOCK_PORTABLE(NAME, T, XGET, PMUL)                                                       \
  static void NAME(BLOCK_ARGS(T)) {                                                               \
    memset(acc, 0, sizeof(int32_t) * NP * ZV);                                                    \
    for (int64_t ky = 0; ky < kh; ++ky)                                                           \
      for (int64_t kx = 0; kx < kw; ++kx) {                                                       \
        const int64_t off = (ky * Wp + kx) * CX;                                                  \
        const int32_t *wr = wg + (ky * kw + kx) * NC * Zs;                                        \
        for (int64_t c = 0; c < NC; ++c) {                                                        \
          const int32_t *wc = wr + c * Zs;                                                        \
          for (int p = 0; p < NP; ++p) {                                                          \
            XGET(xw[p] + off, c);                                                                 \
            for (int z = 0; z < ZV; ++z)                                                          \
              acc[p][z] += PMUL(wc[z]);                                                           \
          }                                                                                       \
        }                                                                                         \
      }                                                                                           \
  }
#define XGET32(px, c) const int32_t x0 = (px)[c]
#define PMUL32(wz) (x0 * (wz))
/* a word's pair: low half times x[2c], high half times x[2c + 1] */
#define XGET16(px, c) const int32_t x0 = (px)[2 * (c)], x1 = (px)[2 * (c) + 1]
#define PMUL16(wz)                                                                                \
  (x0 * (int16_t)(uint16_t)((uint32_t)(wz) & 0xffffu) + x1 * (int16_t)(uint16_t)((uint32_t)(wz) >> 16))
BLOCK_PORTABLE(block_portable, int32_t, XGET32, PMUL32)

/* the widest vector unit to use: 3 AVX-512 with VNNI (and BW), 2 AVX-512, 1 AVX2, 0 none; at
 * most `limit` (the tests' way to run every variant: 0 the portable loops, 1 at most AVX2, 2 at
 * most AVX-512 without VNNI, 3 or more the best). Only the int16-pair convolution uses level 3;
 * level 2 there also needs AVX-512BW, and is 1 without it. */
static int isa(int limit) {
  int have = 0;
#ifdef HLSNN_X86
  __builtin_cpu_init();
  have = __builtin_cpu_supports("avx512f") ? 2 : (__builtin_cpu_supports("avx2") ? 1 : 0);
  if (have == 2 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))
    have = 3;
#endif
  return have < limit ? have : limit;
}

static int has_avx512bw(void) {
#ifdef HLSNN_X86
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512bw") != 0;
#else
  return 0;
#endif
}

static int all_fast(const int64_t *shift, int64_t n) {
  int ok = 1;
  for (int64_t i = 0; i < n; ++i)
    ok &= shift[i] >= 1 && shift[i] <= 62;
  return ok;
}

/* ---- The statistics unit's histogram (hlsnn_net_msb_counts) ----
 * counts[z * 32 + k] += the number of rows q in [q0, q1) of the (., Z) int32 map v whose
 * value in channel z has its MSB at k: u = v ^ (v >> 31) (|v| for v >= 0, |v| - 1 below), k =
 * msb(u), no count where u == 0 (hlsnn.primitives.msb_histogram's rule on the wide results). */
static void count_portable(const int32_t *v, int64_t Z, int64_t q0, int64_t q1, int64_t *counts) {
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t z = 0; z < Z; ++z) {
      const uint32_t x = (uint32_t)v[q * Z + z], u = x ^ (0u - (x >> 31));
      if (u)
        counts[z * 32 + msb32(u)] += 1;
    }
}

#ifdef HLSNN_X86
/* 16 channels in the lanes of 8 registers of byte counters: register k holds bins 4k..4k+3,
 * one byte each, in each channel's lane; a row adds 1 << 8 (k & 3) to register k >> 2 of its
 * lane (a compare and a masked add per register: no gather, no scatter, no chain through
 * memory). Bytes hold at most 255 rows: the counters go to `counts` every 255 rows. */
__attribute__((target("avx512f,avx512cd"))) static void count_avx512(const int32_t *v, int64_t Z, int64_t q0,
                                                                     int64_t q1, int64_t *counts) {
  const __m512i one = _mm512_set1_epi32(1), three = _mm512_set1_epi32(3), c31 = _mm512_set1_epi32(31);
  for (int64_t z0 = 0; z0 < Z; z0 += 16) {
    const int zn = (int)(Z - z0 < 16 ? Z - z0 : 16);
    const __mmask16 m = (__mmask16)((1u << zn) - 1u);
    for (int64_t qa = q0; qa < q1; qa += 255) {
      const int64_t qe = q1 - qa < 255 ? q1 : qa + 255;
      __m512i c[8];
      for (int k = 0; k < 8; ++k)
        c[k] = _mm512_setzero_si512();
      for (int64_t q = qa; q < qe; ++q) {
        const __m512i x = _mm512_maskz_loadu_epi32(m, v + q * Z + z0);
        const __m512i u = _mm512_xor_si512(x, _mm512_srai_epi32(x, 31));
        const __m512i e = _mm512_sub_epi32(c31, _mm512_lzcnt_epi32(u)); /* -1 where u == 0: no register */
        const __m512i g = _mm512_srai_epi32(e, 2);
        const __m512i inc = _mm512_sllv_epi32(one, _mm512_slli_epi32(_mm512_and_si512(e, three), 3));
        for (int k = 0; k < 8; ++k)
          c[k] = _mm512_mask_add_epi32(c[k], _mm512_cmpeq_epi32_mask(g, _mm512_set1_epi32(k)), c[k], inc);
      }
      uint32_t w[8][16];
      for (int k = 0; k < 8; ++k)
        _mm512_storeu_si512((void *)w[k], c[k]);
      for (int z = 0; z < zn; ++z)
        for (int k = 0; k < 8; ++k)
          for (int j = 0; j < 4; ++j)
            counts[(z0 + z) * 32 + 4 * k + j] += (w[k][z] >> (8 * j)) & 255u;
    }
  }
}

static int has_avx512cd(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512cd") != 0;
}
#endif

static void count_msb(const int32_t *v, int64_t Z, int64_t q0, int64_t q1, int64_t *counts, int level) {
#ifdef HLSNN_X86
  if (level >= 2 && has_avx512cd()) {
    count_avx512(v, Z, q0, q1, counts);
    return;
  }
#else
  (void)level;
#endif
  count_portable(v, Z, q0, q1, counts);
}

void hlsnn_net_msb_counts(const int32_t *v, int64_t Z, int64_t q0, int64_t q1, int64_t *counts, int limit) {
  count_msb(v, Z, q0, q1, counts, isa(limit));
}

/* A convolution entry point's pixels with `counts`: in chunks of COUNT_ROWS (whole blocks of NP),
 * each chunk's wide results counted while they are in cache. CALL computes [qa, qe). */
#define COUNT_ROWS (31 * NP)
#define CHUNKED(CALL, Z)                                                                          \
  int64_t sat = 0;                                                                                \
  for (int64_t qa = q0; qa < q1;) {                                                               \
    const int64_t qe = counts && q1 - qa > COUNT_ROWS ? qa + COUNT_ROWS : q1;                      \
    sat += CALL;                                                                                  \
    if (counts)                                                                                   \
      count_msb(out, Z, qa, qe, counts, level);                                                   \
    qa = qe;                                                                                      \
  }                                                                                               \
  return sat;

/* the output stage of a convolution entry point's arguments, z output channels */
static rule_t rule_of(const int64_t *bias, const int64_t *shift, int rule, int acc_bits, int bits, int mode, int relu,
                      int64_t lo, int64_t hi, int64_t z) {
  const rule_t r = {bias, shift, rule & 3, acc_bits, bits, mode, relu, lo, hi, !(rule & RAW) && all_fast(shift, z),
                    (rule & RAW) != 0};
  return r;
}

/* The blocks of output pixels [q0, q1) of input elements of type T: BLOCK computes a block's
 * accumulators, finish_block (inlined, so vectorized for the function's target) its outputs.
 * NC: a group's channels in BLOCK's units (channels, or int16 pairs); GSTEP: a group's first
 * input channel is g * GSTEP; CX: the channels of a padded pixel. */
#define CONV_BODY(T, BLOCK, FINISH, NC, GSTEP, CX)                                                \
  const int64_t Z = G * Zg;                                                                       \
  int64_t sat = 0;                                                                                \
  int32_t acc[NP][ZV];                                                                            \
  for (int64_t qb = q0; qb < q1; qb += NP) {                                                      \
    const int np = (int)(q1 - qb < NP ? q1 - qb : NP);                                            \
    const T *xw0[NP];                                                                             \
    int32_t *orow[NP];                                                                            \
    for (int p = 0; p < NP; ++p) { /* a short block repeats its first pixel (not written) */      \
      const int64_t q = qb + (p < np ? p : 0);                                                    \
      xw0[p] = xp + window(q, OH, OW, Hp, Wp, CX, sh, sw);                                        \
      orow[p] = out + q * Z;                                                                      \
    }                                                                                             \
    for (int64_t g = 0; g < G; ++g) {                                                             \
      const T *xw[NP];                                                                            \
      int32_t *orow_g[NP];                                                                        \
      for (int p = 0; p < NP; ++p) {                                                              \
        xw[p] = xw0[p] + g * (GSTEP);                                                             \
        orow_g[p] = orow[p] + g * Zg;                                                             \
      }                                                                                           \
      const int32_t *wg = w + g * kh * kw * (NC) * Zs;                                            \
      rule_t rg = *r;                                                                             \
      rg.bias += g * Zg;                                                                          \
      rg.shift += g * Zg;                                                                         \
      for (int64_t z0 = 0; z0 < Zg; z0 += ZV) {                                                   \
        BLOCK(xw, wg + z0, kh, kw, NC, Zs, Wp, CX, acc);                                          \
        const int zn = (int)(Zg - z0 < ZV ? Zg - z0 : ZV);                                        \
        sat += FINISH((const int32_t(*)[ZV])acc, np, zn, orow_g, z0, &rg);                         \
      }                                                                                           \
    }                                                                                             \
  }                                                                                               \
  return sat;

#define CONV_ARGS                                                                                 \
  const int32_t *xp, int64_t Hp, int64_t Wp, int64_t C, const int32_t *w, int64_t G, int64_t kh, int64_t kw, \
      int64_t Cg, int64_t Zg, int64_t Zs, int64_t sh, int64_t sw, int64_t OH, int64_t OW, int64_t q0, int64_t q1, \
      const rule_t *r, int32_t *out

#ifdef HLSNN_X86
__attribute__((target("avx512f"))) static int64_t conv_avx512(CONV_ARGS) {
  CONV_BODY(int32_t, block_avx512, finish_avx512, Cg, Cg, C)
}
/* AVX2: the blocks in 8-lane vectors, the output stage as the compiler vectorizes it */
__attribute__((target("avx2"))) static int64_t conv_avx2(CONV_ARGS) {
  CONV_BODY(int32_t, block_avx2, finish_block, Cg, Cg, C)
}
#endif
static int64_t conv_portable(CONV_ARGS) { CONV_BODY(int32_t, block_portable, finish_block, Cg, Cg, C) }

/* the variant `fn` of a convolution on the caller's CONV_ARGS or CONV16_ARGS */
#define CONV_FWD(fn, C, Cg) fn(xp, Hp, Wp, C, w, G, kh, kw, Cg, Zg, Zs, sh, sw, OH, OW, q0, q1, r, out)

static int64_t conv_at(int level, CONV_ARGS) {
#ifdef HLSNN_X86
  if (level >= 2)
    return CONV_FWD(conv_avx512, C, Cg);
  if (level == 1)
    return CONV_FWD(conv_avx2, C, Cg);
#else
  (void)level;
#endif
  return CONV_FWD(conv_portable, C, Cg);
}

/* Output pixels [q0, q1) of the flattened (b, oy, ox) order, for images whose padded input
 * is xp (B, Hp, Wp, C) and output out (B, OH, OW, Z); returns the saturation count. With rule |
 * RAW and `counts`, also hlsnn_net_msb_counts of the wide results. */
int64_t hlsnn_net_conv(const int32_t *xp, int64_t Hp, int64_t Wp, int64_t C, const int32_t *w, int64_t G,
                       int64_t kh, int64_t kw, int64_t Cg, int64_t Zg, int64_t Zs, int64_t sh, int64_t sw, int64_t OH,
                       int64_t OW, int64_t q0, int64_t q1, const int64_t *bias, const int64_t *shift, int rule,
                       int acc_bits, int bits, int mode, int relu, int64_t lo, int64_t hi, int32_t *out,
                       int limit, int64_t *counts) {
  const rule_t r = rule_of(bias, shift, rule, acc_bits, bits, mode, relu, lo, hi, G * Zg);
  const int level = isa(limit);
  CHUNKED(conv_at(level, xp, Hp, Wp, C, w, G, kh, kw, Cg, Zg, Zs, sh, sw, OH, OW, qa, qe, &r, out), G * Zg)
}

#ifdef HLSNN_X86
/* one pixel's accumulators of channels [c0, c0 + cn) of a depthwise convolution */
__attribute__((target("avx512f"))) static void dw_avx512(const int32_t *xw, const int32_t *w, int64_t c0, int cn,
                                                         int64_t kh, int64_t kw, int64_t Wp, int64_t C, int64_t Cs,
                                                         int32_t *acc) {
  const __mmask16 m = (__mmask16)((1u << cn) - 1u);
  __m512i a = _mm512_setzero_si512();
  for (int64_t ky = 0; ky < kh; ++ky)
    for (int64_t kx = 0; kx < kw; ++kx) {
      const __m512i xv = _mm512_maskz_loadu_epi32(m, xw + (ky * Wp + kx) * C + c0);
      const __m512i wv = _mm512_loadu_si512((const void *)(w + (ky * kw + kx) * Cs + c0));
      a = _mm512_add_epi32(a, _mm512_mullo_epi32(xv, wv));
    }
  _mm512_storeu_si512((void *)acc, a);
}
#endif

/* ---- The int16-pair convolution (hlsnn_net_pad16, hlsnn_net_conv16) ----
 * The same outputs as hlsnn_net_conv, for inputs that fit int16 (activations of at most 16
 * bits) and weights in [-2**15, 2**15): the padded input is int16 (B, Hp, Wp, Cp) with Cp = C
 * rounded up to even (the extra channel's weights are 0: its values do not matter), the
 * weights (G, kh, kw, Cg2, Zs) int32 words, each the int16 pair (w[2c], w[2c + 1]) of one
 * output channel (low half first), Cg2 = Cg / 2 rounded up (a lone last channel's partner
 * weight is 0). One instruction multiplies a pair of
 * channels and adds both products: vpdpwssd (AVX-512 VNNI), vpmaddwd + vpaddd (AVX-512BW,
 * AVX2), or two products in C. Each pair sum is a partial sum of one output's taps, so the
 * bound the caller checks (max|x| * sum|w| < 2**31) keeps every step exact, in any order: the
 * same integers as hlsnn_net_conv. Groups: G == 1, or Cg even (a pair never straddles two). */

/* Zero-padded int16 copy of x (B, H, W, C) into xp (B, Hp, Wp, Cp), Cp >= C, at (top, left);
 * the caller zeroes xp once (the border is never written; nor are channels [C, Cp)). nz as in
 * hlsnn_net_pad. The values must fit int16 (the caller's bits <= 16). */
void hlsnn_net_pad16(const int32_t *x, int64_t B, int64_t H, int64_t W, int64_t C, int16_t *xp, int64_t Hp,
                     int64_t Wp, int64_t Cp, int64_t top, int64_t left, int64_t *nz) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t y = 0; y < H; ++y) {
      const int32_t *src = x + ((b * H + y) * W) * C;
      int16_t *dst = xp + ((b * Hp + y + top) * Wp + left) * Cp;
      for (int64_t xx = 0; xx < W; ++xx) {
        const int32_t *px = src + xx * C;
        int16_t *o = dst + xx * Cp;
        int32_t n = 0;
        for (int64_t c = 0; c < C; ++c) {
          o[c] = (int16_t)px[c];
          n += px[c] != 0;
        }
        if (nz)
          nz[y * W + xx] += n;
      }
    }
}

#ifdef HLSNN_X86
BLOCK_512(block16_vnni, "avx512f,avx512bw,avx512vnni", int16_t, X16, MAC_VNNI)
BLOCK_512(block16_bw, "avx512f,avx512bw", int16_t, X16, MAC_BW)
BLOCK_AVX2(block16_avx2, int16_t, X16, _mm256_madd_epi16)
#endif

BLOCK_PORTABLE(block16_portable, int16_t, XGET16, PMUL16)

#define CONV16_ARGS                                                                               \
  const int16_t *xp, int64_t Hp, int64_t Wp, int64_t Cp, const int32_t *w, int64_t G, int64_t kh, int64_t kw, \
      int64_t Cg2, int64_t Zg, int64_t Zs, int64_t sh, int64_t sw, int64_t OH, int64_t OW, int64_t q0,     \
      int64_t q1, const rule_t *r, int32_t *out

#ifdef HLSNN_X86
__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int64_t conv16_vnni(CONV16_ARGS) {
  CONV_BODY(int16_t, block16_vnni, finish_avx512, Cg2, 2 * Cg2, Cp)
}
__attribute__((target("avx512f,avx512bw"))) static int64_t conv16_bw(CONV16_ARGS) {
  CONV_BODY(int16_t, block16_bw, finish_avx512, Cg2, 2 * Cg2, Cp)
}
__attribute__((target("avx2"))) static int64_t conv16_avx2(CONV16_ARGS) {
  CONV_BODY(int16_t, block16_avx2, finish_block, Cg2, 2 * Cg2, Cp)
}
#endif
static int64_t conv16_portable(CONV16_ARGS) {
  CONV_BODY(int16_t, block16_portable, finish_block, Cg2, 2 * Cg2, Cp)
}

static int64_t conv16_at(int level, CONV16_ARGS) {
#ifdef HLSNN_X86
  if (level == 3)
    return CONV_FWD(conv16_vnni, Cp, Cg2);
  if (level == 2)
    return CONV_FWD(conv16_bw, Cp, Cg2);
  if (level == 1)
    return CONV_FWD(conv16_avx2, Cp, Cg2);
#else
  (void)level;
#endif
  return CONV_FWD(conv16_portable, Cp, Cg2);
}

/* hlsnn_net_conv on the int16 input of hlsnn_net_pad16 and the pair weights (above) */
int64_t hlsnn_net_conv16(const int16_t *xp, int64_t Hp, int64_t Wp, int64_t Cp, const int32_t *w, int64_t G,
                         int64_t kh, int64_t kw, int64_t Cg2, int64_t Zg, int64_t Zs, int64_t sh, int64_t sw,
                         int64_t OH, int64_t OW, int64_t q0, int64_t q1, const int64_t *bias, const int64_t *shift,
                         int rule, int acc_bits, int bits, int mode, int relu, int64_t lo, int64_t hi, int32_t *out,
                         int limit, int64_t *counts) {
  const rule_t r = rule_of(bias, shift, rule, acc_bits, bits, mode, relu, lo, hi, G * Zg);
  int level = isa(limit);
  if (level == 2 && !has_avx512bw())
    level = 1;
  CHUNKED(conv16_at(level, xp, Hp, Wp, Cp, w, G, kh, kw, Cg2, Zg, Zs, sh, sw, OH, OW, qa, qe, &r, out), G * Zg)
}

/* hlsnn_net_dwconv's pixels [q0, q1) */
static int64_t dw_range(const int32_t *xp, int64_t Hp, int64_t Wp, int64_t C, const int32_t *w, int64_t Cs,
                        int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t OH, int64_t OW, int64_t q0, int64_t q1,
                        const rule_t *r, int32_t *out, int level) {
  const int fast = level >= 2;
#ifndef HLSNN_X86
  (void)fast;
#endif
  int64_t sat = 0;
  int32_t acc[ZV];
  for (int64_t q = q0; q < q1; ++q) {
    const int32_t *xw = xp + window(q, OH, OW, Hp, Wp, C, sh, sw);
    int32_t *orow = out + q * C;
    for (int64_t c0 = 0; c0 < C; c0 += ZV) {
      const int cn = (int)(C - c0 < ZV ? C - c0 : ZV);
#ifdef HLSNN_X86
      if (fast)
        dw_avx512(xw, w, c0, cn, kh, kw, Wp, C, Cs, acc);
      else
#endif
      {
        memset(acc, 0, sizeof acc);
        for (int64_t ky = 0; ky < kh; ++ky)
          for (int64_t kx = 0; kx < kw; ++kx) {
            const int32_t *xr = xw + (ky * Wp + kx) * C + c0;
            const int32_t *wr = w + (ky * kw + kx) * Cs + c0;
            for (int c = 0; c < cn; ++c)
              acc[c] += xr[c] * wr[c];
          }
      }
      int32_t *rows[1] = {orow};
#ifdef HLSNN_X86
      if (fast)
        sat += finish_avx512((const int32_t(*)[ZV])acc, 1, cn, rows, c0, r);
      else
#endif
        sat += finish_block((const int32_t(*)[ZV])acc, 1, cn, rows, c0, r);
    }
  }
  return sat;
}

/* A depthwise convolution (module docstring): output pixels [q0, q1), weights (kh, kw, Cs). */
int64_t hlsnn_net_dwconv(const int32_t *xp, int64_t Hp, int64_t Wp, int64_t C, const int32_t *w, int64_t Cs,
                         int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t OH, int64_t OW, int64_t q0, int64_t q1,
                         const int64_t *bias, const int64_t *shift, int rule, int acc_bits, int bits, int mode, int relu,
                         int64_t lo, int64_t hi, int32_t *out, int limit, int64_t *counts) {
  const rule_t r = rule_of(bias, shift, rule, acc_bits, bits, mode, relu, lo, hi, C);
  const int level = isa(limit);
  CHUNKED(dw_range(xp, Hp, Wp, C, w, Cs, kh, kw, sh, sw, OH, OW, qa, qe, &r, out, level), C)
}

/* Rule max_pool: the largest value of each window (padding never wins), images [b0, b1). */
void hlsnn_net_maxpool(const int32_t *x, int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t sh,
                       int64_t sw, int64_t top, int64_t left, int64_t OH, int64_t OW, int64_t b0, int64_t b1,
                       int32_t *out) {
  for (int64_t b = b0; b < b1; ++b)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        int32_t *o = out + ((b * OH + oy) * OW + ox) * C;
        for (int64_t c = 0; c < C; ++c)
          o[c] = INT32_MIN;
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t y = oy * sh + ky - top;
          if (y < 0 || y >= H)
            continue;
          for (int64_t kx = 0; kx < kw; ++kx) {
            const int64_t xx = ox * sw + kx - left;
            if (xx < 0 || xx >= W)
              continue;
            const int32_t *r = x + ((b * H + y) * W + xx) * C;
            for (int64_t c = 0; c < C; ++c)
              o[c] = r[c] > o[c] ? r[c] : o[c];
          }
        }
      }
}

/* target_clones: the loops of the functions so marked vectorize for AVX-512 or AVX2 where the
 * CPU has them (chosen at load time), each clone the same operations */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(HLSNN_PORTABLE)
#define VEC_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VEC_CLONES
#endif

/* hlsnn_net_add's element-wise sums of one image with the output stage, for a shift in [1, 62]
 * (rsat: the loop vectorizes); returns the saturation count */
VEC_CLONES static int64_t add_requant(const int32_t *restrict a, const int32_t *restrict b, int64_t n, int sa,
                                      int sb, int relu, int64_t shift, int bits, int mode, int32_t *restrict o) {
  const int64_t lb = -((int64_t)1 << (bits - 1)), hb = ((int64_t)1 << (bits - 1)) - 1;
  int64_t ns = 0;
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = (int64_t)((uint64_t)(int64_t)a[k] << sa);
    if (b)
      v += (int64_t)((uint64_t)(int64_t)b[k] << sb);
    v = relu && v < 0 ? 0 : v;
    o[k] = (int32_t)rsat(v, shift, mode, lb, hb, &ns);
  }
  return ns;
}

#ifdef HLSNN_X86
/* add_requant with AVX-512 (in the network's run gcc's clone had run scalar, 30% of a ResNet-8
 * run): the same operations in int64 lanes (rsat8), 8 values a vector, the last n % 8 by
 * add_requant's loop */
__attribute__((target("avx512f"))) static int64_t add_requant_avx512(const int32_t *a, const int32_t *b, int64_t n,
                                                                     int sa, int sb, int relu, int64_t shift, int bits,
                                                                     int mode, int32_t *o) {
  const __m512i s = _mm512_set1_epi64(shift), zero = _mm512_setzero_si512();
  const __m512i vlb = _mm512_set1_epi64(-((int64_t)1 << (bits - 1))), vhb = _mm512_set1_epi64(((int64_t)1 << (bits - 1)) - 1);
  const __m128i csa = _mm_cvtsi32_si128(sa), csb = _mm_cvtsi32_si128(sb);
  int64_t ns = 0, k = 0;
  for (; k + 8 <= n; k += 8) {
    __m512i v = _mm512_sll_epi64(_mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(a + k))), csa);
    if (b)
      v = _mm512_add_epi64(v, _mm512_sll_epi64(_mm512_cvtepi32_epi64(_mm256_loadu_si256((const __m256i *)(b + k))), csb));
    if (relu)
      v = _mm512_max_epi64(v, zero);
    _mm256_storeu_si256((__m256i *)(o + k), _mm512_cvtepi64_epi32(rsat8(v, s, mode, vlb, vhb, 0xff, &ns)));
  }
  return ns + add_requant(a + k, b ? b + k : NULL, n - k, sa, sb, relu, shift, bits, mode, o + k);
}
#endif

/* GlobalAveragePool's sums of one image over its HW pixels, for channels [c0, c0 + cn), cn <= 64:
 * acc[k] = sum_q relu((a[q, c0 + k] << sa) + (b[q, c0 + k] << sb)) (b may be NULL), a pixel's
 * channels in vector lanes (VEC_CLONES) */
VEC_CLONES static void gap_block(const int32_t *restrict a, const int32_t *restrict b, int64_t HW, int64_t C,
                                 int64_t c0, int64_t cn, int sa, int sb, int relu, int64_t *restrict acc) {
  for (int64_t k = 0; k < cn; ++k)
    acc[k] = 0;
  for (int64_t q = 0; q < HW; ++q) {
    const int32_t *ar = a + q * C + c0, *br = b ? b + q * C + c0 : a;
    const int64_t use_b = b != NULL;
    for (int64_t k = 0; k < cn; ++k) {
      int64_t v = (int64_t)((uint64_t)(int64_t)ar[k] << sa) + use_b * (int64_t)((uint64_t)(int64_t)br[k] << sb);
      acc[k] += relu && v < 0 ? 0 : v;
    }
  }
}

/* Rule residual_add on images [b0, b1) of a (B, HW, C) and b (or NULL): s = (a << sa) + (b << sb);
 * ReLU; with gap the sum over the HW pixels of each channel (out (B, 1, C)); then
 * shift_round_sat(s, shift, bits, mode). Returns the saturation count. `limit` caps the
 * vector unit (isa). */
int64_t hlsnn_net_add(const int32_t *a, const int32_t *b, int64_t HW, int64_t C, int sa, int sb, int relu, int gap,
                      int64_t shift, int bits, int mode, int64_t b0, int64_t b1, int32_t *out, int limit) {
  int64_t sat = 0;
  const int level = isa(limit);
#ifndef HLSNN_X86
  (void)level;
#endif
  for (int64_t i = b0; i < b1; ++i) {
    const int32_t *ai = a + i * HW * C, *bi = b ? b + i * HW * C : NULL;
    if (gap) {
      int64_t acc[64];
      for (int64_t c0 = 0; c0 < C; c0 += 64) {
        const int64_t cn = C - c0 < 64 ? C - c0 : 64;
        gap_block(ai, bi, HW, C, c0, cn, sa, sb, relu, acc);
        for (int64_t k = 0; k < cn; ++k)
          out[i * C + c0 + k] = (int32_t)shift_round_sat(acc[k], shift, bits, mode, &sat);
      }
    } else if (shift >= 1 && shift <= 62) {
#ifdef HLSNN_X86
      if (level >= 2)
        sat += add_requant_avx512(ai, bi, HW * C, sa, sb, relu, shift, bits, mode, out + i * HW * C);
      else
#endif
        sat += add_requant(ai, bi, HW * C, sa, sb, relu, shift, bits, mode, out + i * HW * C);
    } else {
      for (int64_t k = 0; k < HW * C; ++k) {
        int64_t v = (int64_t)((uint64_t)(int64_t)ai[k] << sa);
        if (bi)
          v += (int64_t)((uint64_t)(int64_t)bi[k] << sb);
        if (relu && v < 0)
          v = 0;
        out[i * HW * C + k] = (int32_t)shift_round_sat(v, shift, bits, mode, &sat);
      }
    }
  }
  return sat;
}

/* The output stage on wide results: y = clamp(shift_round_sat(v, shift[z], bits, mode), lo, hi)
 * for the pixels [q0, q1) of v (npix, Z) int32 into out (v itself allowed); returns the
 * saturation count (of shift_round_sat, not of the clamp). limit caps the vector unit as the
 * convolutions' last argument does. */
/* hlsnn_net_requant's rows when every shift is in [1, 62] (rsat: the loop vectorizes) */
VEC_CLONES static int64_t requant_fast(const int32_t *v, int64_t Z, const int64_t *shift, int mode, int64_t lb,
                                       int64_t hb, int64_t lo, int64_t hi, int64_t q0, int64_t q1, int32_t *out) {
  int64_t sat = 0;
  for (int64_t q = q0; q < q1; ++q) {
    const int32_t *row = v + q * Z;
    int32_t *o = out + q * Z;
    int64_t ns = 0;
    for (int64_t z = 0; z < Z; ++z) {
      int64_t y = rsat(row[z], shift[z], mode, lb, hb, &ns);
      y = y > hi ? hi : y;
      o[z] = (int32_t)(y < lo ? lo : y);
    }
    sat += ns;
  }
  return sat;
}

#ifdef HLSNN_X86
/* requant_fast in AVX-512 (rule8 with no bias and no accumulator clamp), Z a multiple of 8 */
__attribute__((target("avx512f"))) static int64_t requant_avx512(const int32_t *v, int64_t Z, const int64_t *shift,
                                                                 const rule_t *r, int64_t q0, int64_t q1,
                                                                 int32_t *out) {
  static const int64_t zero8[8] = {0};
  const int64_t lb = -((int64_t)1 << (r->bits - 1)), hb = ((int64_t)1 << (r->bits - 1)) - 1;
  int64_t ns = 0;
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t z = 0; z < Z; z += 8) {
      const __m256i a32 = _mm256_loadu_si256((const __m256i *)(v + q * Z + z));
      const __m512i y = rule8(a32, 0xff, zero8, shift + z, r, INT64_MAX, INT64_MIN, lb, hb, &ns);
      _mm256_storeu_si256((__m256i *)(out + q * Z + z), _mm512_cvtepi64_epi32(y));
    }
  return ns;
}
/* hlsnn_net_requant in int32 lanes, 16 channels a vector, when every shift is in [1, 30]: q =
 * v >> s, the remainder v - (q << s) in [0, 2**s) and half = 2**(s-1) then fit int32, and so
 * does q plus its rounding step (rule8's operations on values that need no more bits) */
__attribute__((target("avx512f"))) static int64_t requant32_avx512(const int32_t *v, int64_t Z, const int64_t *shift,
                                                                   int mode, int64_t lb, int64_t hb, int64_t lo,
                                                                   int64_t hi, int64_t q0, int64_t q1, int32_t *out) {
  const __m512i one = _mm512_set1_epi32(1), zero = _mm512_setzero_si512();
  const __m512i vlb = _mm512_set1_epi32((int32_t)lb), vhb = _mm512_set1_epi32((int32_t)hb);
  const __m512i vlo = _mm512_set1_epi32(lo < INT32_MIN ? INT32_MIN : lo > INT32_MAX ? INT32_MAX : (int32_t)lo);
  const __m512i vhi = _mm512_set1_epi32(hi < INT32_MIN ? INT32_MIN : hi > INT32_MAX ? INT32_MAX : (int32_t)hi);
  int64_t ns = 0;
  for (int64_t z0 = 0; z0 < Z; z0 += 16) {
    const int zn = (int)(Z - z0 < 16 ? Z - z0 : 16);
    const __mmask16 m = (__mmask16)((1u << zn) - 1u);
    const __m256i s_lo = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64((__mmask8)(m & 0xff), shift + z0));
    const __m256i s_hi = _mm512_cvtepi64_epi32(_mm512_maskz_loadu_epi64((__mmask8)(m >> 8), shift + z0 + 8));
    const __m512i s = _mm512_inserti64x4(_mm512_castsi256_si512(s_lo), s_hi, 1);
    const __m512i half = _mm512_sllv_epi32(one, _mm512_sub_epi32(s, one));
    for (int64_t q = q0; q < q1; ++q) {
      const __m512i x = _mm512_maskz_loadu_epi32(m, v + q * Z + z0);
      __m512i y = _mm512_srav_epi32(x, s);
      if (mode != 2) {
        const __m512i rem = _mm512_sub_epi32(x, _mm512_sllv_epi32(y, s));
        const __mmask16 tie = mode == 0 ? _mm512_test_epi32_mask(y, one) : _mm512_cmpge_epi32_mask(x, zero);
        const __mmask16 up = _mm512_cmpgt_epi32_mask(rem, half) | (_mm512_cmpeq_epi32_mask(rem, half) & tie);
        y = _mm512_mask_add_epi32(y, up, y, one);
      }
      ns += __builtin_popcount((unsigned)(m & (_mm512_cmpgt_epi32_mask(y, vhb) | _mm512_cmplt_epi32_mask(y, vlb))));
      y = _mm512_max_epi32(_mm512_min_epi32(y, vhb), vlb);
      y = _mm512_max_epi32(_mm512_min_epi32(y, vhi), vlo);
      _mm512_mask_storeu_epi32(out + q * Z + z0, m, y);
    }
  }
  return ns;
}
#endif

int64_t hlsnn_net_requant(const int32_t *v, int64_t Z, const int64_t *shift, int bits, int mode, int64_t lo,
                          int64_t hi, int64_t q0, int64_t q1, int32_t *out, int limit) {
  int64_t sat = 0;
  const int64_t lb = -((int64_t)1 << (bits - 1)), hb = ((int64_t)1 << (bits - 1)) - 1;
  if (all_fast(shift, Z)) {
#ifdef HLSNN_X86
    int narrow = bits <= 32;
    for (int64_t z = 0; z < Z; ++z)
      narrow &= shift[z] <= 30;
    if (narrow && isa(limit) >= 2)
      return requant32_avx512(v, Z, shift, mode, lb, hb, lo, hi, q0, q1, out);
    if (Z % 8 == 0 && isa(limit) >= 2) {
      const rule_t r = {NULL, shift, 0, 62, bits, mode, 0, lo, hi, 1, 0};
      return requant_avx512(v, Z, shift, &r, q0, q1, out);
    }
#else
    (void)limit;
#endif
    return requant_fast(v, Z, shift, mode, lb, hb, lo, hi, q0, q1, out);
  }
  for (int64_t q = q0; q < q1; ++q) {
    const int32_t *row = v + q * Z;
    int32_t *o = out + q * Z;
    int64_t ns = 0;
    for (int64_t z = 0; z < Z; ++z) {
      int64_t y = shift_round_sat(row[z], shift[z], bits, mode, &ns);
      y = y > hi ? hi : y;
      o[z] = (int32_t)(y < lo ? lo : y);
    }
    sat += ns;
  }
  return sat;
}

/* add_raw's element-wise sums of one image (n values; b may be NULL), their min and max
 * updated (VEC_CLONES: the loop vectorizes, as add_requant's) */
VEC_CLONES static void add_map(const int32_t *restrict a, const int32_t *restrict b, int64_t n, int sa, int sb,
                               int relu, int32_t *restrict o, int64_t *mn_, int64_t *mx_) {
  int64_t mn = *mn_, mx = *mx_;
  for (int64_t k = 0; k < n; ++k) {
    int64_t v = (int64_t)((uint64_t)(int64_t)a[k] << sa);
    if (b)
      v += (int64_t)((uint64_t)(int64_t)b[k] << sb);
    v = relu && v < 0 ? 0 : v;
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
    o[k] = (int32_t)v;
  }
  *mn_ = mn;
  *mx_ = mx;
}

/* Rule residual_add's sum before the requantization (hlsnn_net_add's s) for images [b0, b1) as int32, and
 * what the host's DETERMINE reads of it: st[0] min, st[1] max (updated), and with `counts`
 * st[2] the count of -1 and st[3 + k] the count of MSB position k (u = s ^ (s >> 31), u != 0),
 * added to. Returns 1 when a sum does not fit int32 (out is then incomplete), else 0. */
int64_t hlsnn_net_add_raw(const int32_t *a, const int32_t *b, int64_t HW, int64_t C, int sa, int sb, int relu, int gap,
                          int64_t b0, int64_t b1, int32_t *out, int64_t *st, int counts) {
  int64_t mn = st[0], mx = st[1];
  int64_t acc[64];
  for (int64_t i = b0; i < b1; ++i) {
    const int32_t *ai = a + i * HW * C, *bi = b ? b + i * HW * C : NULL;
    if (gap) {
      for (int64_t c0 = 0; c0 < C; c0 += 64) { /* channel blocks: the pixel loop's sums in acc */
        const int64_t cn = C - c0 < 64 ? C - c0 : 64;
        gap_block(ai, bi, HW, C, c0, cn, sa, sb, relu, acc);
        for (int64_t k = 0; k < cn; ++k) {
          mn = acc[k] < mn ? acc[k] : mn;
          mx = acc[k] > mx ? acc[k] : mx;
          out[i * C + c0 + k] = (int32_t)acc[k];
        }
      }
    } else {
      add_map(ai, bi, HW * C, sa, sb, relu, out + i * HW * C, &mn, &mx);
    }
    if (mn < INT32_MIN || mx > INT32_MAX)
      return 1;
  }
  st[0] = mn;
  st[1] = mx;
  if (counts) { /* four interleaved tables: runs of one position do not wait on one counter */
    int64_t cnt[4][32], m1 = 0;
    memset(cnt, 0, sizeof cnt);
    const int64_t n = (b1 - b0) * (gap ? C : HW * C);
    const int32_t *o = out + b0 * (gap ? C : HW * C);
    for (int64_t k = 0; k < n; ++k) {
      const uint32_t x = (uint32_t)o[k], u = x ^ (0u - (x >> 31));
      m1 += o[k] == -1;
      if (u)
        cnt[k & 3][msb32(u)] += 1;
    }
    st[2] += m1;
    for (int k = 0; k < 32; ++k)
      st[3 + k] += cnt[0][k] + cnt[1][k] + cnt[2][k] + cnt[3][k];
  }
  return 0;
}

/* Rule input_quantize (hlsnn.compiled.netmode.quantize_input's fast path, the same float64 operations on each
 * value): v = rint(x * 2**g); y = v * 2**-s clamped to [lo - 1, hi + 1]; rounded half away from
 * zero (away: trunc(y + copysign(0.5, y))) or half to even (rint); clamped to [lo, hi]. x is B
 * images (C, HW) float64, out their (HW, C) int32 maps. Returns 1, out then incomplete, when a
 * |v| is not below 2**52 (or is NaN): the fast path does not apply and the caller takes
 * to_fixed; else 0. The caller checks bits + 1 + s <= 52 and a nearest rounding. */
VEC_CLONES static int quantize_row(const double *restrict x, int64_t n, double up, double down, double lo, double hi,
                                   int away, int32_t *restrict o) {
  int bad = 0;
  for (int64_t k = 0; k < n; ++k) {
    const double v = rint(x[k] * up);
    bad |= !(fabs(v) < 4503599627370496.0); /* 2**52; NaN fails */
    double y = v * down;
    y = y < lo - 1 ? lo - 1 : (y > hi + 1 ? hi + 1 : y);
    y = away ? trunc(y + copysign(0.5, y)) : rint(y);
    y = y < lo ? lo : (y > hi ? hi : y);
    o[k] = (int32_t)y;
  }
  return bad;
}

int64_t hlsnn_net_quantize(const double *x, int64_t B, int64_t C, int64_t HW, int64_t g, int64_t s, int bits,
                           int away, int32_t *out) {
  const double up = ldexp(1.0, (int)g), down = ldexp(1.0, (int)-s);
  const double lo = -ldexp(1.0, bits - 1), hi = ldexp(1.0, bits - 1) - 1;
  int32_t row[1024];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t q0 = 0; q0 < HW; q0 += 1024) {
        const int64_t n = HW - q0 < 1024 ? HW - q0 : 1024;
        if (quantize_row(x + (b * C + c) * HW + q0, n, up, down, lo, hi, away, row))
          return 1;
        int32_t *o = out + (b * HW + q0) * C + c;
        for (int64_t k = 0; k < n; ++k)
          o[k * C] = row[k];
      }
  return 0;
}
