// C-simulation only state that the C ABI harness reads after a run. Kernels include this
// header only inside `#ifndef __SYNTHESIS__`, so the synthesized design never sees it; the
// harness includes it directly (tests/test_header_models.py strips the sim-only blocks and
// checks that the stripped kernel behaves the same).
#ifndef HLSNN_CSIM_FLAGS_H_
#define HLSNN_CSIM_FLAGS_H_

#include <setjmp.h>

namespace hlsnn {

// A failing kernel `assert` must not abort the Python process that drives C-simulation. The
// library is linked with --wrap=__assert_fail, so the kernel's asserts call the bridge's
// __wrap___assert_fail, not libc's: while a run is armed it records the message and jumps back
// to the run, which returns kAssertFailed; outside a run it prints and aborts as usual. The
// strict C-simulation (hlsnn/csim_strict.h) jumps back the same way with value 2.
struct AssertTrap {
  jmp_buf env;
  bool armed;
  char message[512];
};

inline AssertTrap &Trap() {
  static AssertTrap trap;
  return trap;
}

// Set when a kernel reads an empty input stream (the host sent too few beats); the harness
// reports it instead of letting hls_stream return zeros silently.
inline bool &CsimUnderflow() {
  static bool csim_underflow_flag = false;
  return csim_underflow_flag;
}

}  // namespace hlsnn

#endif  // HLSNN_CSIM_FLAGS_H_
