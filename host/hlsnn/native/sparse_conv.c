/* sparse_conv.c: the compiled twin of the sparse_cluster emulator's non-zero-pair path
 * (host/hlsnn/engines/sparse_cluster/emulator.py, _scatter; rule 1 of that module).
 *
 *   acc[z, oy, ox] = sum_{c, ky, kx} w[z, c, ky, kx] * xp[c, oy + ky, ox + kx]
 *
 * for 0 <= oy < Hp - k + 1, 0 <= ox < Wp - k + 1 (stride 1, cross-correlation, xp already
 * padded), formed from the non-zero inputs and the non-zero coefficients only: each pair adds
 * coef * value at (z, y - ky, x - kx), as in the numpy code. Integer sums do not depend on their
 * order, so the result is the numpy path's bit for bit (tested in
 * tests/engines/sparse_cluster/test_sparse_native.py).
 *
 * Order, for the cache: the non-zero inputs of every channel are gathered once, row by row
 * (offset + value, with the start of each row), then for each output channel z one plane of
 * accumulators (oh rows of Wp + k - 1 int64, a border of k - 1 columns on the left so that
 * x - kx never goes below 0; 26 KB for 56x56) stays in L1 while every non-zero coefficient
 * (z, c, ky, kx) runs over the non-zero inputs of channel c in rows ky .. ky + oh - 1, the only
 * rows it can hit. The inner loop is a load of (offset, value), a multiply and an add.
 *
 * Arithmetic: int64 accumulators, as the numpy path. Products and sums are formed in uint64
 * (two's complement wrap-around instead of C's undefined signed overflow), so they are exact
 * whenever the result fits in int64; for the emulator's int8 operands (|sum| <= C k^2 2^14)
 * it is far from 2^63.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* xp: (c, hp, wp) int64, C order; w: (z, c, k, k) int64, C order;
 * acc: (z, hp - k + 1, wp - k + 1) int64, written whole.
 * Returns 0, or -1 when the shapes are empty/invalid or memory is short (acc untouched). */
int hlsnn_sparse_conv(const int64_t *xp, int64_t c, int64_t hp, int64_t wp,
                      const int64_t *w, int64_t z, int64_t k, int64_t *acc) {
  if (c < 0 || z < 0 || k < 1 || hp < k || wp < k) return -1;
  const int64_t oh = hp - k + 1, ow = wp - k + 1, wb = wp + k - 1;
  const int64_t kk = k * k;
  /* Room for every input, so that the non-zeros are gathered in one pass (only the pages
   * written, those of the non-zeros, are ever touched); on a large map, a counting pass first. */
  int64_t room = c * hp * wp + 1;
  if (room > ((int64_t)1 << 22)) {
    room = 1;
    for (int64_t i = 0; i < c * hp * wp; ++i) room += xp[i] != 0;
  }

  /* row_start[ch * (hp + 1) + y]: index of channel ch's first non-zero in row y */
  int64_t *row_start = malloc(sizeof(int64_t) * (size_t)(c * (hp + 1) + 1));
  int64_t *off = malloc(sizeof(int64_t) * (size_t)room);           /* y * wb + x */
  uint64_t *val = malloc(sizeof(uint64_t) * (size_t)room);
  uint64_t *plane = malloc(sizeof(uint64_t) * (size_t)(oh * wb));
  if (!row_start || !off || !val || !plane) {
    free(row_start); free(off); free(val); free(plane);
    return -1;
  }

  int64_t n = 0;
  for (int64_t ch = 0; ch < c; ++ch) {
    const int64_t *xc = xp + ch * hp * wp;
    for (int64_t y = 0; y < hp; ++y) {
      row_start[ch * (hp + 1) + y] = n;
      const int64_t *row = xc + y * wp;
      for (int64_t x = 0; x < wp; ++x) {
        off[n] = y * wb + x;               /* written always, kept if non-zero: no branch */
        val[n] = (uint64_t)row[x];
        n += row[x] != 0;
      }
    }
    row_start[ch * (hp + 1) + hp] = n;
  }

  for (int64_t zz = 0; zz < z; ++zz) {
    memset(plane, 0, sizeof(uint64_t) * (size_t)(oh * wb));
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t *rs = row_start + ch * (hp + 1);
      if (rs[0] == rs[hp]) continue;                      /* an empty input channel */
      const int64_t *wc = w + (zz * c + ch) * kk;
      for (int64_t ky = 0; ky < k; ++ky) {
        const int64_t lo = rs[ky], hi = rs[ky + oh];      /* rows ky .. ky + oh - 1 */
        if (lo == hi) continue;
        for (int64_t kx = 0; kx < k; ++kx) {
          const uint64_t coef = (uint64_t)wc[ky * k + kx];
          if (coef == 0) continue;
          /* input (y, x) lands at plane row y - ky, column x - kx + k - 1 */
          const int64_t base = -ky * wb + (k - 1 - kx);
          for (int64_t i = lo; i < hi; ++i) plane[off[i] + base] += coef * val[i];
        }
      }
    }
    int64_t *out = acc + zz * oh * ow;
    for (int64_t y = 0; y < oh; ++y)
      memcpy(out + y * ow, plane + y * wb + (k - 1), sizeof(int64_t) * (size_t)ow);
  }
  free(row_start); free(off); free(val); free(plane);
  return 0;
}

/* The number of non-zero pairs the pair path forms: sum over input channels ch of (non-zeros
 * of xp[ch]) * (non-zeros of w[:, ch]); xp (c, n) and w (z, c, kk) int64, C order. What
 * method="auto" weighs against the dense MACs, in one pass over each operand; -1 when memory
 * is short. */
int64_t hlsnn_pair_count(const int64_t *xp, int64_t c, int64_t n, const int64_t *w, int64_t z, int64_t kk) {
  int64_t *nw = calloc((size_t)c + 1, sizeof(int64_t));
  if (!nw) return -1;
  for (int64_t zz = 0; zz < z; ++zz)
    for (int64_t ch = 0; ch < c; ++ch) {
      const int64_t *wc = w + (zz * c + ch) * kk;
      int64_t m = 0;
      for (int64_t i = 0; i < kk; ++i) m += wc[i] != 0;
      nw[ch] += m;
    }
  int64_t pairs = 0;
  for (int64_t ch = 0; ch < c; ++ch) {
    if (nw[ch] == 0) continue;                          /* no need to count this channel */
    const int64_t *xc = xp + ch * n;
    int64_t nx = 0;
    for (int64_t i = 0; i < n; ++i) nx += xc[i] != 0;
    pairs += nx * nw[ch];
  }
  free(nw);
  return pairs;
}
