// C ABI helpers that let Python (ctypes) drive a kernel's top function in C-simulation.
// Beats travel as little-endian byte arrays of W/8 bytes each. Used by each engine's
// rendered bridge.cpp; never part of a synthesized design.
#ifndef HLSNN_HARNESS_H_
#define HLSNN_HARNESS_H_

#include <stdint.h>

#include "hlsnn/csim_flags.h"
#include "hlsnn/stream_io.h"

namespace hlsnn {

// Status bits returned by every bridge's hlsnn_run().
enum HarnessStatus {
  kOk = 0,
  kOutputShort = 1,      // fewer output beats than the protocol expects
  kNoTlast = 2,          // the last expected beat did not carry TLAST
  kEarlyTlast = 4,       // TLAST on a beat before the last one
  kOutputLong = 8,       // more output beats than expected
  kInputLeftover = 16,   // the kernel did not consume every input beat
  kInputUnderflow = 32,  // the kernel read more input beats than were sent
  kAssertFailed = 64,    // a C-simulation assert of the kernel failed (message: hlsnn_last_assert)
  kStrictFailed = 128,   // the strict C-simulation stopped on a rule (message: hlsnn_last_assert)
};

template <int W>
void PushBeats(hls::stream<AxisWord<W> > &s, const uint8_t *bytes, uint64_t n_beats) {
  const int kBytes = W / 8;
  for (uint64_t i = 0; i < n_beats; ++i) {
    ap_uint<W> data = 0;
    for (int b = 0; b < kBytes; ++b) data.range(8 * b + 7, 8 * b) = bytes[i * kBytes + b];
    s.write(MakeBeat<W>(data, i + 1 == n_beats));  // data, keep, strb, last only: see axis.h
  }
}

template <int W>
int PopBeats(hls::stream<AxisWord<W> > &s, uint8_t *bytes, uint64_t n_beats) {
  const int kBytes = W / 8;
  int status = kOk;
  uint64_t i = 0;
  for (; i < n_beats && !s.empty(); ++i) {
    AxisWord<W> beat = s.read();
    for (int b = 0; b < kBytes; ++b) bytes[i * kBytes + b] = (uint8_t)beat.data.range(8 * b + 7, 8 * b);
    if (i + 1 == n_beats && !beat.last) status |= kNoTlast;
    if (i + 1 < n_beats && beat.last) status |= kEarlyTlast;
  }
  if (i < n_beats) status |= kOutputShort;
  if (!s.empty()) status |= kOutputLong;
  while (!s.empty()) s.read();
  return status;
}

// Pop every output beat the kernel produced (at most `cap`): returns how many, and in
// *last_index the index of the first beat with TLAST (-1 when none had it). For the
// simulated device, which forwards the beats to its DMA model.
template <int W>
uint64_t PopAllBeats(hls::stream<AxisWord<W> > &s, uint8_t *bytes, uint64_t cap, int64_t *last_index) {
  const int kBytes = W / 8;
  uint64_t i = 0;
  *last_index = -1;
  for (; i < cap && !s.empty(); ++i) {
    AxisWord<W> beat = s.read();
    for (int b = 0; b < kBytes; ++b) bytes[i * kBytes + b] = (uint8_t)beat.data.range(8 * b + 7, 8 * b);
    if (beat.last && *last_index < 0) *last_index = (int64_t)i;
  }
  while (!s.empty()) s.read();
  return i;
}

template <int W>
int DrainInput(hls::stream<AxisWord<W> > &s) {
  int status = kOk;
  if (!s.empty()) status |= kInputLeftover;
  while (!s.empty()) s.read();
  return status;
}

}  // namespace hlsnn

#endif  // HLSNN_HARNESS_H_
