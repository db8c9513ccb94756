// Lane readers and writers over an AXI4-Stream of W-bit beats carrying L-bit lanes.
// Lane i of a beat occupies bits [i*L, i*L+L) (little end first); a segment that does not
// fill its last beat is padded with zero lanes (the host protocol modules do the same).
#ifndef HLSNN_STREAM_IO_H_
#define HLSNN_STREAM_IO_H_

#include "hlsnn/axis.h"
#include "hlsnn/strict.h"  // hlsnn::Fifo: an internal FIFO (hls::stream except in strict C-simulation)
#ifndef __SYNTHESIS__
#include "hlsnn/csim_flags.h"  // CsimUnderflow(): C-simulation only
#endif

namespace hlsnn {

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

// A beat to an AXI-Stream port (TLAST as given) or to an internal FIFO of plain words.
template <int W>
inline void WriteBeat(hls::stream<AxisWord<W> > &s, ap_uint<W> word, bool last) {
#pragma HLS INLINE
  s.write(MakeBeat<W>(word, last));  // data, keep, strb, last only: see axis.h
}
template <int W>
inline void WriteBeat(Fifo<ap_uint<W> > &s, const ap_uint<W> &data, bool) {  // hls::stream but in strict csim
#pragma HLS INLINE
  s.write(data);
}

template <int W, int L>
struct LaneWriter {
  static constexpr int kLanes = W / L;
  ap_uint<W> word;
  int lane;  // lanes of `word` filled so far

  void Start() {
    word = 0;
    lane = 0;
  }
  template <typename S>
  void Put(S &s, ap_int<L> v) {
#pragma HLS INLINE
    if (lane == kLanes) Emit(s, false);
    word.range(lane * L + L - 1, lane * L) = (ap_uint<L>)v;
    ++lane;
  }
  // Two lanes at once (low first), with at most one beat sent: the lanes of a beat are even in
  // number and pairs are put from an even lane, so a pair never straddles two beats.
  template <typename S>
  void Put2(S &s, ap_int<L> lo, ap_int<L> hi) {
#pragma HLS INLINE
    static_assert(kLanes % 2 == 0, "Put2 needs an even number of lanes per beat");
    if (lane >= kLanes - 1) Emit(s, false);
    word.range(lane * L + L - 1, lane * L) = (ap_uint<L>)lo;
    word.range(lane * L + 2 * L - 1, lane * L + L) = (ap_uint<L>)hi;
    lane += 2;
  }
  // Send the pending beat (zero-padded); `last` sets TLAST on it.
  template <typename S>
  void Flush(S &s, bool last) {
#pragma HLS INLINE
    if (lane > 0) Emit(s, last);
  }
  template <typename S>
  void Emit(S &s, bool last) {
#pragma HLS INLINE
    WriteBeat<W>(s, word, last);
    word = 0;
    lane = 0;
  }
};

}  // namespace hlsnn

#endif  // HLSNN_STREAM_IO_H_
