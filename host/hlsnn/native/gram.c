/* gram.c: the exact Gram matrix X^T X and column sums of int8 rows, for the GPTQ weight fit
 * of hlsnn.deploy.shift_fit (_grams: its float32 syrk blocks and float64 products are the
 * specification; tests/deploy/test_shift_fit.py and test_gram_conv.py hold them equal).
 *
 * hlsnn_gram_i8(x, K, r0, r1, gram, sums, u, s, limit): rows [r0, r1) of x (n, K) int8, row-major;
 * gram (K, K) int64 gets sum_r x[r, i] * x[r, j] added for every j >= i (the upper triangle;
 * some entries below it too, which the caller ignores), sums (K) int64 gets sum_r x[r, j]
 * added. Integer sums: the order does not matter, every variant gives the same values.
 * hlsnn_gram_conv_i8: the same for the im2col rows of a convolution (any geometry), each row
 * gathered from the NHWC map by patch() (patch_quad: straight into the VNNI layout).
 *
 * AVX-512 VNNI (chosen at run time where the CPU has it; `limit` 0 forces the portable loops,
 * for the tests): vpdpbusd multiplies unsigned by signed bytes, four per 32-bit lane, so the
 * rows go in quads, and the unsigned operand is x + 128: sum (x_i + 128) x_j = (X^T X)_ij +
 * 128 * sums_j, corrected after. A quad adds at most 4 * 255 * 128 < 2**17 to a lane, so a
 * chunk of QUADS quads sums exactly in int32 before it is added to the int64 result. The signed
 * operand is broadcast from memory (vpdpbusd's m32bcst form, in inline assembly: gcc's intrinsic
 * neither folds the broadcast nor keeps the accumulator in place).
 *
 * hlsnn_gram_conv_s1_i8 (per thread, on its images) then hlsnn_gram_conv_s1_out (once): the same
 * Gram (as float64, both triangles) and sums for a stride-1 convolution (any kernel up to KMAX x
 * KMAX, dilation, pads; one group of cg channels), without im2col. With xp the zero-padded map and
 * a_t = (ky dh, kx dw) the offset of tap t = (ky, kx), the block of taps (t, t') is
 *   G[(c, t), (c', t')] = sum_{b, p in R_t} xp[b, p, c] * xp[b, p + a_t' - a_t, c'],
 * R_t = [ky dh, ky dh + oh) x [kx dw, kx dw + ow): a cross-correlation of the map with itself at
 * the shift d = a_t' - a_t, over a rectangle that depends on t. For each shift with t <= t' (the
 * other blocks are transposes: 13 shifts of a 3x3 kernel), the positions p where both factors
 * lie in the map are cut into cells (a row segment x a column segment) by the edges of every
 * pair's R_t, so each pair's rectangle, less positions that add 0, is a union of whole cells.
 * One pass per image accumulates every cell's cg x cg product (VNNI: four neighbouring positions
 * of a row per byte quad, the first factor's 16 channels in the lanes, the second's channel
 * broadcast, both read from a copy of the image laid out as sliding quads Q[y][x][c][k] =
 * xp[y, x + k, c]; a segment's last quad has its surplus positions masked to 0); the x + 128
 * correction of a cell is 128 * (the sum of its second factor over the cell), from the
 * batch-summed map M; then each pair adds its cells. Positions outside the map are never
 * visited, and there is no per-pixel gather of K bytes: about 13 oh ow cg^2 products per image
 * instead of 40.5 oh ow cg^2 for 3x3. The column sums are box sums of M. The int32 cell sums go
 * to int64 every few images (at most QUADS_MAX quads each).
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
#define VNNI_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* acc += dpbusd(u, broadcast of the 4 bytes at p): in assembly, for gcc's intrinsic copies the
 * accumulator each time and does not fold the broadcast into the instruction */
VNNI_TARGET static inline __m512i dpbusd_bcst(__m512i acc, __m512i u, const int8_t *p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*(const int32_t *)(const void *)p));
  return acc;
}
/* sixteen accumulators by name (gcc keeps an array of them in memory) */
#define EACH16(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define ACC_DECL(i) __m512i a##i = _mm512_setzero_si512();
#define ACC_LOAD(i)                                                                                                \
  if (i < rows_)                                                                                                   \
    a##i = _mm512_loadu_si512((const void *)(acc + (sb + i) * Cp + ub));
#define ACC_STEP(i)                                                                                                \
  if (i < rows_)                                                                                                   \
    a##i = dpbusd_bcst(a##i, uv, s + i * 4);
#define ACC_STORE(i)                                                                                               \
  if (i < rows_)                                                                                                   \
    _mm512_storeu_si512((void *)(acc + (sb + i) * Cp + ub), a##i);
#define CHUNK_STORE(i)                                                                                             \
  {                                                                                                                \
    int32_t lanes[KB];                                                                                             \
    _mm512_storeu_si512((void *)lanes, a##i);                                                                      \
    if (jb + i < K)                                                                                                \
      for (int l = 0; l < KB && ib + l < K; ++l)                                                                   \
        gram[(ib + l) * K + jb + i] += lanes[l];                                                                   \
  }
/* one chunk of at most QUADS quads, packed: u[q][k][4] = x + 128 (uint8), s[q][k][4] = x (int8),
 * Kp columns (a multiple of KB; zero columns and rows contribute 0 to s, and their u (128)
 * multiplies s = 0). The column sums of s go to sums (vpdpbusd by ones); for the Gram, 16 rows
 * i of u are the vector and column j of s the broadcast operand: a_j[i] += u_i s_j. */
VNNI_TARGET static void chunk_vnni(const uint8_t *us, const int8_t *ss, int64_t nq, int64_t Kp, int64_t K,
                                   int64_t *gram, int64_t *sums) {
  const __m512i ones = _mm512_set1_epi8(1);
  for (int64_t jb = 0; jb < Kp; jb += KB) {
    __m512i acc = _mm512_setzero_si512(); /* at most QUADS * 4 * 128 in a lane */
    for (int64_t q = 0; q < nq; ++q)
      acc = _mm512_dpbusd_epi32(acc, ones, _mm512_loadu_si512((const void *)(ss + (q * Kp + jb) * 4)));
    int32_t lanes[KB];
    _mm512_storeu_si512((void *)lanes, acc);
    for (int j = 0; j < KB && jb + j < K; ++j)
      sums[jb + j] += lanes[j];
  }
  enum { rows_ = KB };
  for (int64_t ib = 0; ib < Kp; ib += KB)
    for (int64_t jb = ib; jb < Kp; jb += KB) {
      EACH16(ACC_DECL)
      for (int64_t q = 0; q < nq; ++q) {
        const __m512i uv = _mm512_loadu_si512((const void *)(us + (q * Kp + ib) * 4));
        const int8_t *s = ss + (q * Kp + jb) * 4;
        EACH16(ACC_STEP)
      }
      EACH16(CHUNK_STORE)
    }
}

static int has_vnni(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
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

#ifdef HLSNN_X86
/* patch() into the quad layout of chunk_vnni: value k of the row to sq[4 k], sq already cleared
 * (the taps outside the map stay 0) */
static void patch_quad(const geom_t *g, int64_t r, int8_t *sq) {
  const int64_t b = r / (g->oh * g->ow), rem = r % (g->oh * g->ow), oy = rem / g->ow, ox = rem % g->ow;
  const int64_t step = g->kh * g->kw * 4;
  for (int64_t ky = 0; ky < g->kh; ++ky) {
    const int64_t y = oy * g->sh + ky * g->dh - g->top;
    if (y < 0 || y >= g->H)
      continue;
    for (int64_t kx = 0; kx < g->kw; ++kx) {
      const int64_t xx = ox * g->sw + kx * g->dw - g->left;
      if (xx < 0 || xx >= g->W)
        continue;
      const int8_t *src = g->x + ((b * g->H + y) * g->W + xx) * g->C + g->c0;
      int8_t *dst = sq + (ky * g->kw + kx) * 4;
      for (int64_t c = 0; c < g->cg; ++c)
        dst[c * step] = src[c];
    }
  }
}
#endif

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
        const int64_t q = (r - c0) / 4, e = (r - c0) % 4;
        int8_t *sq = s + q * Kp * 4 + e;
        if (geom) {
          patch_quad(geom, r, sq);
          continue;
        }
        const int8_t *src = x + r * K;
        for (int64_t k = 0; k < K; ++k)
          sq[k * 4] = src[k];
      }
      for (int64_t i = 0; i < nb; ++i) /* x + 128 as a byte: x ^ 0x80 */
        u[i] = (uint8_t)s[i] ^ 0x80u;
      chunk_vnni(u, s, nq, Kp, K, gram, sums);
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

/* ---- stride 1: the shifted autocorrelation (module docstring, hlsnn_gram_conv_s1_i8) ---- */

#define KMAX 12            /* kernel rows and columns at most (beyond: -1, the caller uses the rows) */
#define QUADS_MAX 16384    /* quads per int32 sum: 16384 * 4 * 255 * 128 < 2**31 */

typedef struct {
  int64_t H, W, C, kh, kw, dh, dw, top, left, oh, ow, c0, cg;
  int64_t Hp, Wp, Cp; /* the padded frame the taps read, channels rounded up to 16 */
} s1geom_t;

/* One axis of one shift (dk taps; d = dk * dil positions): the range [lo, hi) of first-factor
 * positions of tap t (of its o outputs) where both factors lie in the map (n positions from pad on) */
static void tap_range(int64_t t, int64_t dk, int64_t dil, int64_t pad, int64_t n, int64_t o, int64_t *lo,
                      int64_t *hi) {
  const int64_t d = dk * dil;
  const int64_t nzlo = d < 0 ? pad - d : pad, nzhi = d > 0 ? pad + n - d : pad + n;
  *lo = t * dil > nzlo ? t * dil : nzlo;
  *hi = t * dil + o < nzhi ? t * dil + o : nzhi;
}

/* the segments [slo[i], shi[i]) that every tap's range of the shift is a union of (between
 * consecutive ends of the ranges; those in no range left out); returns their count */
static int64_t segments(int64_t k, int64_t dk, int64_t dil, int64_t pad, int64_t n, int64_t o, int64_t *slo,
                        int64_t *shi) {
  int64_t b[2 * KMAX], nb = 0, ns = 0;
  const int64_t t0 = dk < 0 ? -dk : 0, t1 = dk > 0 ? k - dk : k;
  for (int64_t t = t0; t < t1; ++t) {
    int64_t lo, hi;
    tap_range(t, dk, dil, pad, n, o, &lo, &hi);
    if (lo < hi) {
      b[nb++] = lo;
      b[nb++] = hi;
    }
  }
  for (int64_t i = 1; i < nb; ++i) /* insertion sort */
    for (int64_t j = i; j > 0 && b[j - 1] > b[j]; --j) {
      const int64_t v = b[j];
      b[j] = b[j - 1];
      b[j - 1] = v;
    }
  for (int64_t i = 0; i + 1 < nb; ++i) {
    if (b[i] == b[i + 1])
      continue;
    int covered = 0;
    for (int64_t t = t0; t < t1 && !covered; ++t) {
      int64_t lo, hi;
      tap_range(t, dk, dil, pad, n, o, &lo, &hi);
      covered = lo <= b[i] && b[i + 1] <= hi;
    }
    if (covered) {
      slo[ns] = b[i];
      shi[ns++] = b[i + 1];
    }
  }
  return ns;
}

/* the shifts t' - t with t <= t' in (ky, kx) order: dky in [0, kh), dkx in (-kw, kw), not dky = 0 > dkx */
#define FOR_SHIFTS(g, dky, dkx)                                                                                    \
  for (int64_t dky = 0; dky < (g)->kh; ++dky)                                                                      \
    for (int64_t dkx = dky ? 1 - (g)->kw : 0; dkx < (g)->kw; ++dkx)

typedef struct {
  int64_t ny, nx, ylo[2 * KMAX], yhi[2 * KMAX], xlo[2 * KMAX], xhi[2 * KMAX];
} cells_t;

static void shift_cells(const s1geom_t *g, int64_t dky, int64_t dkx, cells_t *c) {
  c->ny = segments(g->kh, dky, g->dh, g->top, g->H, g->oh, c->ylo, c->yhi);
  c->nx = segments(g->kw, dkx, g->dw, g->left, g->W, g->ow, c->xlo, c->xhi);
}

static int s1_setup(s1geom_t *g, int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                    int64_t top, int64_t left, int64_t oh, int64_t ow, int64_t c0, int64_t cg) {
  const s1geom_t v = {H, W, C, kh, kw, dh, dw, top, left, oh, ow, c0, cg, oh + (kh - 1) * dh, ow + (kw - 1) * dw,
                      (cg + 15) / 16 * 16};
  *g = v;
  if (kh < 1 || kw < 1 || kh > KMAX || kw > KMAX || oh < 1 || ow < 1 || cg < 1 || top < 0 || left < 0)
    return 0;
  if (g->Hp * ((g->Wp + 3) / 4) > QUADS_MAX) /* one image's quads of a cell must sum in int32 */
    return 0;
  return 1;
}

static int64_t s1_cells(const s1geom_t *g) {
  int64_t n = 0;
  FOR_SHIFTS(g, dky, dkx) {
    cells_t c;
    shift_cells(g, dky, dkx, &c);
    n += c.ny * c.nx;
  }
  return n;
}

static int64_t align64(int64_t n) { return (n + 63) / 64 * 64; }

/* scratch layout: Q, U (Hp Wp Cp 4 bytes each), M (Hp Wp Cp int32), cells' int32 and int64 sums
 * (Cp^2 each: [second factor's channel][first factor's channel]), one pair's block (Cp^2 int64) */
typedef struct {
  int8_t *q;
  uint8_t *u;
  int32_t *m, *acc32;
  int64_t *acc64, *pair;
} s1scratch_t;

static int64_t s1_layout(const s1geom_t *g, uint8_t *base, s1scratch_t *sc) {
  const int64_t nq = g->Hp * g->Wp * g->Cp * 4, ncell = s1_cells(g) * g->Cp * g->Cp;
  const int64_t oq = 0, ou = oq + align64(nq), om = ou + align64(nq), oa = om + align64(g->Hp * g->Wp * g->Cp * 4),
                o6 = oa + align64(ncell * 4), op = o6 + align64(ncell * 8), end = op + g->Cp * g->Cp * 8;
  if (base) {
    sc->q = (int8_t *)(base + oq);
    sc->u = base + ou;
    sc->m = (int32_t *)(base + om);
    sc->acc32 = (int32_t *)(base + oa);
    sc->acc64 = (int64_t *)(base + o6);
    sc->pair = (int64_t *)(base + op);
  }
  return end + 64; /* + 64: the caller's buffer need not be aligned */
}

/* The scratch bytes hlsnn_gram_conv_s1_i8 needs, or -1 where it does not apply (the caller then
 * takes hlsnn_gram_conv_i8). */
int64_t hlsnn_gram_conv_s1_scratch(int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                                   int64_t top, int64_t left, int64_t oh, int64_t ow, int64_t cg) {
  s1geom_t g;
  if (!s1_setup(&g, H, W, C, kh, kw, dh, dw, top, left, oh, ow, 0, cg))
    return -1;
  return s1_layout(&g, NULL, NULL);
}

/* image b into Q, U (rows of the map only; the rest stays as first cleared) and added to M */
static void pack_portable(const s1geom_t *g, const int8_t *img, const s1scratch_t *sc) {
  for (int64_t y = 0; y < g->H && y + g->top < g->Hp; ++y) {
    const int64_t Y = y + g->top;
    for (int64_t X = 0; X < g->Wp; ++X)
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t xx = X + k - g->left;
        if (xx < 0 || xx >= g->W)
          continue;
        const int8_t *src = img + (y * g->W + xx) * g->C + g->c0;
        int8_t *q = sc->q + (Y * g->Wp + X) * g->Cp * 4 + k;
        uint8_t *u = sc->u + (Y * g->Wp + X) * g->Cp * 4 + k;
        for (int64_t c = 0; c < g->cg; ++c) {
          q[c * 4] = src[c];
          u[c * 4] = (uint8_t)src[c] ^ 0x80u;
          if (!k)
            sc->m[(Y * g->Wp + X) * g->Cp + c] += src[c];
        }
      }
  }
}

/* the int32 sums of a cell (rows [y0, y1), columns [x0, x1) of the first factor, shifted by (dy, dx)
 * for the second): acc[c'][c] += (x + 128)[p, c] x[p + d, c'] for the second factor's channels
 * c' in sb.. (ni of them), the first's c in ub.. (16) */
static void cell_portable(const s1geom_t *g, const s1scratch_t *sc, int64_t y0, int64_t y1, int64_t x0, int64_t x1,
                          int64_t dy, int64_t dx, int64_t sb, int64_t ni, int64_t ub, int32_t *acc) {
  for (int64_t y = y0; y < y1; ++y)
    for (int64_t x = x0; x < x1; ++x) {
      const uint8_t *u = sc->u + (y * g->Wp + x) * g->Cp * 4;
      const int8_t *s = sc->q + ((y + dy) * g->Wp + x + dx) * g->Cp * 4;
      for (int64_t i = sb; i < sb + ni; ++i) {
        const int32_t si = s[i * 4];
        int32_t *a = acc + i * g->Cp;
        for (int64_t j = ub; j < ub + KB; ++j)
          a[j] += si * u[j * 4];
      }
    }
}

#ifdef HLSNN_X86
VNNI_TARGET static void pack_vnni(const s1geom_t *g, const int8_t *img, const s1scratch_t *sc) {
  const int64_t xa = g->left > 3 ? g->left - 3 : 0, xb = g->left + g->W < g->Wp ? g->left + g->W : g->Wp;
  const __m512i flip = _mm512_set1_epi32((int32_t)0x80808080u);
  for (int64_t y = 0; y < g->H && y + g->top < g->Hp; ++y) {
    const int64_t Y = y + g->top;
    const int8_t *row = img + y * g->W * g->C + g->c0;
    for (int64_t jb = 0; jb < g->cg; jb += KB) {
      const __mmask16 cm = g->cg - jb >= KB ? (__mmask16)0xffff : (__mmask16)((1u << (g->cg - jb)) - 1);
      for (int64_t X = xa; X < xb; ++X) {
        __m512i v[4];
        for (int k = 0; k < 4; ++k) {
          const int64_t xx = X + k - g->left;
          v[k] = xx >= 0 && xx < g->W ? _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(cm, row + xx * g->C + jb))
                                      : _mm512_setzero_si512();
        }
        const __m512i q = _mm512_or_si512(_mm512_or_si512(v[0], _mm512_slli_epi32(v[1], 8)),
                                          _mm512_or_si512(_mm512_slli_epi32(v[2], 16), _mm512_slli_epi32(v[3], 24)));
        const int64_t o = ((Y * g->Wp + X) * g->Cp + jb) * 4;
        _mm512_storeu_si512((void *)(sc->q + o), q);
        _mm512_storeu_si512((void *)(sc->u + o), _mm512_xor_si512(q, flip));
        const int64_t x0 = X - g->left;
        if (x0 >= 0) {
          int32_t *m = sc->m + (Y * g->Wp + X) * g->Cp + jb;
          const __m512i add = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(cm, row + x0 * g->C + jb));
          _mm512_storeu_si512((void *)m, _mm512_add_epi32(_mm512_loadu_si512((const void *)m), add));
        }
      }
    }
  }
}

/* cell_portable in VNNI: the first factor's quad of 16 channels is the vector (its surplus
 * positions masked to 0), the second's channel the broadcast operand (from memory) */
/* cell_portable in VNNI: the first factor's quad of 16 channels is the vector (its surplus
 * positions masked to 0), the second's channel the broadcast operand (from memory) */
#define DEF_CELL_VNNI(NI)                                                                                          \
  VNNI_TARGET static void cell_vnni_##NI(const s1geom_t *g, const s1scratch_t *sc, int64_t y0, int64_t y1,          \
                                         int64_t x0, int64_t x1, int64_t dy, int64_t dx, int64_t sb, int64_t ub,     \
                                         int32_t *acc) {                                                             \
    const int64_t Cp = g->Cp, len = x1 - x0, nq = len / 4, rem = len % 4, step = 16 * Cp;                            \
    const __mmask64 m = (__mmask64)0x1111111111111111ULL * (__mmask64)((1u << rem) - 1), full = ~(__mmask64)0;       \
    const int64_t nt = nq + (rem > 0);                                                                               \
    enum { rows_ = NI };                                                                                             \
    EACH16(ACC_DECL)                                                                                                 \
    EACH16(ACC_LOAD)                                                                                                 \
    for (int64_t y = y0; y < y1; ++y) {                                                                              \
      const uint8_t *u = sc->u + ((y * g->Wp + x0) * Cp + ub) * 4;                                                   \
      const int8_t *s = sc->q + (((y + dy) * g->Wp + x0 + dx) * Cp + sb) * 4;                                        \
      for (int64_t q = 0; q < nt; ++q, u += step, s += step) {                                                       \
        const __m512i uv = _mm512_maskz_loadu_epi8(q < nq ? full : m, (const void *)u);                              \
        EACH16(ACC_STEP)                                                                                             \
      }                                                                                                              \
    }                                                                                                                \
    EACH16(ACC_STORE)                                                                                                \
  }
DEF_CELL_VNNI(4)
DEF_CELL_VNNI(8)
DEF_CELL_VNNI(16)
#endif

/* Stride 1 (module docstring), the first step: images [b0, b1) of x (B, H, W, C) int8 (NHWC), kernel
 * kh x kw, dilations (dh, dw), pads top and left, an oh x ow output, channels [c0, c0 + cg): their
 * cells' sums and batch-summed map into scratch (the bytes hlsnn_gram_conv_s1_scratch gives; one
 * per thread, each thread its own images). Returns 1 (VNNI) or 0 (portable loops), -1 where it
 * does not apply. */
int64_t hlsnn_gram_conv_s1_i8(const int8_t *x, int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t dh,
                              int64_t dw, int64_t top, int64_t left, int64_t oh, int64_t ow, int64_t c0, int64_t cg,
                              int64_t b0, int64_t b1, uint8_t *scratch, int limit) {
  s1geom_t g;
  if (!s1_setup(&g, H, W, C, kh, kw, dh, dw, top, left, oh, ow, c0, cg))
    return -1;
  s1scratch_t sc = {0};
  const int64_t bytes = s1_layout(&g, NULL, NULL) - 64;
  uint8_t *base = scratch + (64 - (int64_t)((uintptr_t)scratch % 64)) % 64;
  s1_layout(&g, base, &sc);
  memset(base, 0, (size_t)bytes);
  const int64_t cc = g.Cp * g.Cp, ncell = s1_cells(&g);
  int vnni = 0;
#ifdef HLSNN_X86
  vnni = limit > 0 && has_vnni();
#else
  (void)limit;
#endif
  const int64_t per = QUADS_MAX / (g.Hp * ((g.Wp + 3) / 4)); /* images per int32 sum */
  int64_t since = 0;
  for (int64_t b = b0; b < b1; ++b) {
    const int8_t *img = x + b * H * W * C;
#ifdef HLSNN_X86
    if (vnni)
      pack_vnni(&g, img, &sc);
    else
#endif
      pack_portable(&g, img, &sc);
    int64_t cell = 0;
    FOR_SHIFTS(&g, dky, dkx) {
      cells_t cs;
      shift_cells(&g, dky, dkx, &cs);
      const int64_t dy = dky * dh, dx = dkx * dw;
      for (int64_t iy = 0; iy < cs.ny; ++iy)
        for (int64_t ix = 0; ix < cs.nx; ++ix, ++cell) {
          int32_t *acc = sc.acc32 + cell * cc;
          for (int64_t sb = 0; sb < cg; sb += KB) {
            const int64_t ni = cg - sb < KB ? cg - sb : KB;
            /* shift 0: the blocks of c <= c' only (the pair's block is symmetric) */
            for (int64_t ub = 0; ub < cg && (dky || dkx || ub <= sb); ub += KB) {
#ifdef HLSNN_X86
              if (vnni) {
                if (ni <= 4)
                  cell_vnni_4(&g, &sc, cs.ylo[iy], cs.yhi[iy], cs.xlo[ix], cs.xhi[ix], dy, dx, sb, ub, acc);
                else if (ni <= 8)
                  cell_vnni_8(&g, &sc, cs.ylo[iy], cs.yhi[iy], cs.xlo[ix], cs.xhi[ix], dy, dx, sb, ub, acc);
                else
                  cell_vnni_16(&g, &sc, cs.ylo[iy], cs.yhi[iy], cs.xlo[ix], cs.xhi[ix], dy, dx, sb, ub, acc);
                continue;
              }
#endif
              cell_portable(&g, &sc, cs.ylo[iy], cs.yhi[iy], cs.xlo[ix], cs.xhi[ix], dy, dx, sb, ni, ub, acc);
            }
          }
        }
    }
    if (++since == per || b + 1 == b1) { /* the int32 sums into int64 */
      for (int64_t i = 0; i < ncell * cc; ++i)
        sc.acc64[i] += sc.acc32[i];
      memset(sc.acc32, 0, (size_t)(ncell * cc * 4));
      since = 0;
    }
  }
  return vnni;
}

static s1scratch_t s1_scratch(const s1geom_t *g, uint8_t *scratch) {
  s1scratch_t sc = {0};
  s1_layout(g, scratch + (64 - (int64_t)((uintptr_t)scratch % 64)) % 64, &sc);
  return sc;
}

/* The second step: the nscratch scratches of hlsnn_gram_conv_s1_i8 (same geometry) summed, gram
 * (K, K) float64, K = cg kh kw, set to the exact Gram (both triangles; integers below 2**53),
 * sums (K) int64 to the column sums. -1 where it does not apply. */
int64_t hlsnn_gram_conv_s1_out(int64_t H, int64_t W, int64_t C, int64_t kh, int64_t kw, int64_t dh, int64_t dw,
                               int64_t top, int64_t left, int64_t oh, int64_t ow, int64_t cg, uint8_t **scratch,
                               int64_t nscratch, double *gram, int64_t *sums) {
  s1geom_t g;
  if (nscratch < 1 || !s1_setup(&g, H, W, C, kh, kw, dh, dw, top, left, oh, ow, 0, cg))
    return -1;
  const int64_t Cp = g.Cp, kk = kh * kw, K = cg * kk, cc = Cp * Cp, ncell = s1_cells(&g);
  const s1scratch_t sc = s1_scratch(&g, scratch[0]);
  for (int64_t t = 1; t < nscratch; ++t) {
    const s1scratch_t o = s1_scratch(&g, scratch[t]);
    for (int64_t i = 0; i < ncell * cc; ++i)
      sc.acc64[i] += o.acc64[i];
    for (int64_t i = 0; i < g.Hp * g.Wp * Cp; ++i)
      sc.m[i] += o.m[i];
  }
  /* box sums of M: rows [y0, y1), columns [x0, x1), channel c */
#define BOX(y0, y1, x0, x1, c, out)                                                                                 \
  do {                                                                                                             \
    int64_t s_ = 0;                                                                                                \
    for (int64_t yy = (y0); yy < (y1); ++yy)                                                                       \
      for (int64_t xx = (x0); xx < (x1); ++xx)                                                                     \
        s_ += sc.m[(yy * g.Wp + xx) * Cp + (c)];                                                                   \
    (out) = s_;                                                                                                    \
  } while (0)
  for (int64_t c = 0; c < cg; ++c)
    for (int64_t ky = 0; ky < kh; ++ky)
      for (int64_t kx = 0; kx < kw; ++kx) {
        int64_t s;
        BOX(ky * dh, ky * dh + oh, kx * dw, kx * dw + ow, c, s);
        sums[c * kk + ky * kw + kx] = s;
      }
  int64_t cell0 = 0;
  FOR_SHIFTS(&g, dky, dkx) {
    cells_t cs;
    shift_cells(&g, dky, dkx, &cs);
    const int64_t dy = dky * dh, dx = dkx * dw;
    for (int64_t iy = 0; iy < cs.ny; ++iy)
      for (int64_t ix = 0; ix < cs.nx; ++ix) {
        int64_t *e = sc.acc64 + (cell0 + iy * cs.nx + ix) * cc;
        for (int64_t c2 = 0; c2 < cg; ++c2) { /* the x + 128 correction: 128 * the cell's second factors */
          int64_t s;
          BOX(cs.ylo[iy] + dy, cs.yhi[iy] + dy, cs.xlo[ix] + dx, cs.xhi[ix] + dx, c2, s);
          for (int64_t c1 = 0; c1 < Cp; ++c1)
            e[c2 * Cp + c1] -= 128 * s;
        }
      }
    /* every pair of this shift: the sum of the cells its rectangle holds, into the upper triangle */
    for (int64_t ky = 0; ky + dky < kh; ++ky) {
      int64_t ylo, yhi;
      tap_range(ky, dky, dh, top, H, oh, &ylo, &yhi);
      for (int64_t kx = dkx < 0 ? -dkx : 0; kx < kw && kx + dkx < kw; ++kx) {
        int64_t xlo, xhi;
        tap_range(kx, dkx, dw, left, W, ow, &xlo, &xhi);
        int64_t *pb = sc.pair;
        memset(pb, 0, (size_t)(cc * 8)); /* no cell: both factors never in the map, 0 */
        for (int64_t iy = 0; iy < cs.ny; ++iy)
          for (int64_t ix = 0; ix < cs.nx; ++ix) {
            if (!(ylo <= cs.ylo[iy] && cs.yhi[iy] <= yhi && xlo <= cs.xlo[ix] && cs.xhi[ix] <= xhi))
              continue;
            const int64_t *e = sc.acc64 + (cell0 + iy * cs.nx + ix) * cc;
            for (int64_t i = 0; i < cc; ++i)
              pb[i] += e[i];
          }
        /* G[(c1, t), (c2, t2)] = pb[c2][c1]; for t = t2 only c1 <= c2 was computed (symmetric) */
        const int64_t t = ky * kw + kx, t2 = t + dky * kw + dkx;
        for (int64_t c2 = 0; c2 < cg; ++c2) {
          const int64_t *row = pb + c2 * Cp, j = c2 * kk + t2;
          for (int64_t c1 = 0; c1 < (t == t2 ? c2 + 1 : cg); ++c1) {
            const int64_t i = c1 * kk + t;
            gram[i * K + j] = gram[j * K + i] = (double)row[c1];
          }
        }
      }
    }
    cell0 += cs.ny * cs.nx;
  }
#undef BOX
  return 0;
}
