// Lane readers and writers over an AXI4-Stream of W-bit beats carrying L-bit lanes.
// Lane i of a beat occupies bits [i*L, i*L+L) (little end first); a segment that does not
// fill its last beat is padded with zero lanes (the host protocol modules do the same).
#ifndef HLSNN_STREAM_IO_H_
#define HLSNN_STREAM_IO_H_

#include "hlsnn/axis.h"

namespace hlsnn {

#ifndef __SYNTHESIS__
// C-simulation only: set when a kernel reads an empty input stream (the host sent too few
// beats); the C ABI harness reports it instead of letting hls_stream return zeros silently.
inline bool &CsimUnderflow() {
  static bool flag = false;
  return flag;
}
#endif

template <int W>
inline ap_uint<W> ReadBeat(hls::stream<AxisWord<W> > &s) {
#pragma HLS INLINE
#ifndef __SYNTHESIS__
  if (s.empty()) CsimUnderflow() = true;
#endif
  return s.read().data;
}

template <int W, int L>
struct LaneReader {
  static constexpr int kLanes = W / L;
  ap_uint<W> word;
  int lane;  // lanes of `word` already consumed; kLanes means: fetch a new beat first

  void Start() { lane = kLanes; }
  ap_int<L> Next(hls::stream<AxisWord<W> > &s) {
#pragma HLS INLINE
    if (lane == kLanes) {
      word = ReadBeat<W>(s);
      lane = 0;
    }
    const ap_int<L> v = (ap_int<L>)word.range(L - 1, 0);
    word = word >> L;
    ++lane;
    return v;
  }
  // Drop the padding lanes of the current beat: the next lane starts a new beat.
  void Align() { lane = kLanes; }
};

template <int W, int L>
struct LaneWriter {
  static constexpr int kLanes = W / L;
  ap_uint<W> word;
  int lane;  // lanes of `word` filled so far

  void Start() {
    word = 0;
    lane = 0;
  }
  void Put(hls::stream<AxisWord<W> > &s, ap_int<L> v) {
#pragma HLS INLINE
    if (lane == kLanes) Emit(s, false);
    word.range(lane * L + L - 1, lane * L) = (ap_uint<L>)v;
    ++lane;
  }
  // Send the pending beat (zero-padded); `last` sets TLAST on it.
  void Flush(hls::stream<AxisWord<W> > &s, bool last) {
#pragma HLS INLINE
    if (lane > 0) Emit(s, last);
  }
  void Emit(hls::stream<AxisWord<W> > &s, bool last) {
#pragma HLS INLINE
    AxisWord<W> beat;
    beat.data = word;
    beat.keep = -1;
    beat.strb = -1;
    beat.user = 0;
    beat.id = 0;
    beat.dest = 0;
    beat.last = last;
    s.write(beat);
    word = 0;
    lane = 0;
  }
};

}  // namespace hlsnn

#endif  // HLSNN_STREAM_IO_H_
