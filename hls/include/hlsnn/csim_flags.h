// C-simulation only state that the C ABI harness reads after a run. Kernels include this
// header only inside `#ifndef __SYNTHESIS__`, so the synthesized design never sees it; the
// harness includes it directly (tests/test_header_models.py strips the sim-only blocks and
// checks that the stripped kernel behaves the same).
#ifndef HLSNN_CSIM_FLAGS_H_
#define HLSNN_CSIM_FLAGS_H_

namespace hlsnn {

// Set when a kernel reads an empty input stream (the host sent too few beats); the harness
// reports it instead of letting hls_stream return zeros silently.
inline bool &CsimUnderflow() {
  static bool csim_underflow_flag = false;
  return csim_underflow_flag;
}

}  // namespace hlsnn

#endif  // HLSNN_CSIM_FLAGS_H_
