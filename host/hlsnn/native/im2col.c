/* im2col.c: the compiled twin of hlsnn.engines.convgeom.im2col, for arrays of 8-byte elements
 * (float64 or int64: the rows are copies of input elements and zeros, so one function on the
 * bit patterns serves both; a zero is all-zero bits, +0.0 or 0, as numpy's zero padding).
 *
 * The numpy code is the specification (tests/engines/bfp_systolic/test_bfp_native.py holds the two
 * equal, bit for bit, over strides, pads, dilations, rectangular kernels and image ranges).
 *
 * Input x: (B, C, H, W), C-contiguous. Output: (B*oh*ow, C*kh*kw) rows, C-contiguous, row
 * (b, y, x) at (b*oh + y)*ow + x, column (c, i, j) at (c*kh + i)*kw + j; element =
 * x[b, c, y*sh + i*dh - top, x*sw + j*dw - left], zero outside the map. The function fills
 * the rows of images [b0, b1), so that Python threads can fill the halves of one batch at once
 * (ctypes releases the GIL during the call).
 */
#include <stdint.h>

void hlsnn_im2col_u64(const uint64_t *x, int64_t C, int64_t H, int64_t W, int64_t kh, int64_t kw,
                      int64_t sh, int64_t sw, int64_t top, int64_t left, int64_t dh, int64_t dw,
                      int64_t oh, int64_t ow, int64_t b0, int64_t b1, uint64_t *out) {
  const int64_t K = C * kh * kw;
  for (int64_t b = b0; b < b1; ++b) {
    const uint64_t *xb = x + b * C * H * W;
    for (int64_t y = 0; y < oh; ++y) {
      for (int64_t xo = 0; xo < ow; ++xo) {
        uint64_t *row = out + ((b * oh + y) * ow + xo) * K;
        for (int64_t c = 0; c < C; ++c) {
          const uint64_t *xc = xb + c * H * W;
          for (int64_t i = 0; i < kh; ++i) {
            const int64_t yy = y * sh + i * dh - top;
            uint64_t *dst = row + (c * kh + i) * kw;
            if (yy < 0 || yy >= H) {
              for (int64_t j = 0; j < kw; ++j)
                dst[j] = 0;
              continue;
            }
            const uint64_t *xr = xc + yy * W;
            const int64_t x0 = xo * sw - left;
            if (dw == 1 && x0 >= 0 && x0 + kw <= W) { /* the whole kernel row inside the map */
              const uint64_t *src = xr + x0;
              for (int64_t j = 0; j < kw; ++j)
                dst[j] = src[j];
              continue;
            }
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t xx = x0 + j * dw;
              dst[j] = (xx < 0 || xx >= W) ? 0 : xr[xx];
            }
          }
        }
      }
    }
  }
}
