// C ABI helpers that let Python (ctypes) drive a kernel's top function in C-simulation.
// Beats travel as little-endian byte arrays of W/8 bytes each. Used by each engine's
// rendered bridge.cpp; never part of a synthesized design.
#ifndef HLSNN_HARNESS_H_
#define HLSNN_HARNESS_H_

#include <stdint.h>

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
};

template <int W>
void PushBeats(hls::stream<AxisWord<W> > &s, const uint8_t *bytes, uint64_t n_beats) {
  const int kBytes = W / 8;
  for (uint64_t i = 0; i < n_beats; ++i) {
    AxisWord<W> beat;
    for (int b = 0; b < kBytes; ++b) beat.data.range(8 * b + 7, 8 * b) = bytes[i * kBytes + b];
    beat.keep = -1;
    beat.strb = -1;
    beat.user = 0;
    beat.id = 0;
    beat.dest = 0;
    beat.last = (i + 1 == n_beats);
    s.write(beat);
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

template <int W>
int DrainInput(hls::stream<AxisWord<W> > &s) {
  int status = kOk;
  if (!s.empty()) status |= kInputLeftover;
  while (!s.empty()) s.read();
  return status;
}

}  // namespace hlsnn

#endif  // HLSNN_HARNESS_H_
