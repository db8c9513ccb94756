/* im2col.c: the compiled twin of hlsnn.engines.convgeom.im2col, for arrays of 8-byte elements
 * (float64 or int64: the rows are copies of input elements and zeros, so one function on the
 * bit patterns serves both; a zero is all-zero bits, +0.0 or 0, as numpy's zero padding), and
 * for int64 inputs whose rows are wanted as float32 or float64 (numpy's casts: exact for
 * integers below 2**24, resp. 2**53 in magnitude, which is what the callers hold).
 *
 * The numpy code is the specification (tests/engines/bfp_systolic/test_bfp_native.py holds the two
 * equal, bit for bit, over strides, pads, dilations, rectangular kernels and image ranges).
 *
 * Input x: (B, C, H, W), C-contiguous. Output: (B*oh*ow, C*kh*kw) rows, C-contiguous, row
 * (b, y, x) at (b*oh + y)*ow + x, column (c, i, j) at (c*kh + i)*kw + j; element =
 * x[b, c, y*sh + i*dh - top, x*sw + j*dw - left], zero outside the map. A function fills
 * the rows of the output lines [r0, r1) (line b*oh + y: output row y of image b), so that
 * Python threads can fill parts of one batch, or of one image, at once (ctypes releases the
 * GIL during the call).
 */
#include <stdint.h>

#define IM2COL(NAME, IN_T, OUT_T)                                                                    \
  void NAME(const IN_T *x, int64_t C, int64_t H, int64_t W, int64_t kh, int64_t kw, int64_t sh, int64_t sw, \
            int64_t top, int64_t left, int64_t dh, int64_t dw, int64_t oh, int64_t ow, int64_t r0, int64_t r1, \
            OUT_T *out) {                                                                            \
    const int64_t K = C * kh * kw;                                                                   \
    for (int64_t by = r0; by < r1; ++by) { /* output row y of image b: by = b * oh + y */            \
      const int64_t b = by / oh, y = by % oh;                                                        \
      const IN_T *xb = x + b * C * H * W;                                                            \
      {                                                                                              \
        for (int64_t xo = 0; xo < ow; ++xo) {                                                        \
          OUT_T *row = out + ((b * oh + y) * ow + xo) * K;                                           \
          const int64_t x0 = xo * sw - left;                                                         \
          const int inside = dw == 1 && x0 >= 0 && x0 + kw <= W; /* the whole kernel row */         \
          for (int64_t c = 0; c < C; ++c) {                                                          \
            const IN_T *xc = xb + c * H * W;                                                         \
            for (int64_t i = 0; i < kh; ++i) {                                                       \
              const int64_t yy = y * sh + i * dh - top;                                              \
              OUT_T *dst = row + (c * kh + i) * kw;                                                  \
              if (yy < 0 || yy >= H) {                                                               \
                for (int64_t j = 0; j < kw; ++j)                                                     \
                  dst[j] = 0;                                                                        \
                continue;                                                                            \
              }                                                                                      \
              const IN_T *xr = xc + yy * W;                                                          \
              if (inside) {                                                                          \
                for (int64_t j = 0; j < kw; ++j)                                                     \
                  dst[j] = (OUT_T)xr[x0 + j];                                                        \
                continue;                                                                            \
              }                                                                                      \
              for (int64_t j = 0; j < kw; ++j) {                                                     \
                const int64_t xx = x0 + j * dw;                                                      \
                dst[j] = (xx < 0 || xx >= W) ? (OUT_T)0 : (OUT_T)xr[xx];                             \
              }                                                                                      \
            }                                                                                        \
          }                                                                                          \
        }                                                                                            \
      }                                                                                              \
    }                                                                                                \
  }

IM2COL(hlsnn_im2col_u64, uint64_t, uint64_t)
IM2COL(hlsnn_im2col_i64_f32, int64_t, float)
IM2COL(hlsnn_im2col_i64_f64, int64_t, double)
