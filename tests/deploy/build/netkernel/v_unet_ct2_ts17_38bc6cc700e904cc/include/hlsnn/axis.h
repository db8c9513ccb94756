// AXI4-Stream beat type with TLAST for every hlsnn kernel: AxisWord<W> = ap_axiu<W,0,0,0>.
//
// Under Vitis HLS ap_axiu comes from <ap_axi_sdata.h> (only it, or hls::axis, makes the tool
// emit TLAST). Its shape depends on the release (UG1399, "AXI4-Stream Interfaces with
// Side-Channels"):
//   * 2020.2-2022.2: hls::axis<ap_uint<W>,U,I,D> with members data, keep, strb, user, last,
//     id, dest; a zero width is widened to ap_uint<1>; no accessor methods.
//   * 2023.1 and later: hls::axis<ap_uint<W>,U,I,D,KEEP|LAST|STRB,false>; a zero-width
//     side channel is a member of the empty type hls::axis_disabled_signal (assigning to it
//     does not compile); get_*/set_*/keep_all() accessors.
// The only members every release has for ap_axiu<W,0,0,0> are data, keep, strb and last, and
// no accessor exists in all of them: kernel and harness code touch those four members only
// (tests/test_header_models.py compiles every shipped config against a model of each release).
//
// The open-source ap_types headers used for C-simulation with g++ ship no ap_axi_sdata.h.
// There the fallback below is exactly that common member set (the shape of the Vivado HLS
// ap_axiu<D,0,0,0> specialisation), so plain C-simulation already rejects user/id/dest and
// the accessors instead of accepting code one of the releases refuses.
#ifndef HLSNN_AXIS_H_
#define HLSNN_AXIS_H_

#include <ap_int.h>
#include <hls_stream.h>

#if defined(__has_include)
#if __has_include(<ap_axi_sdata.h>)
#include <ap_axi_sdata.h>
#define HLSNN_HAVE_AP_AXI_SDATA 1
#endif
#endif

#ifndef HLSNN_HAVE_AP_AXI_SDATA
template <int D, int U, int TI, int TD>
struct ap_axiu;  // only the side-channel-free form exists without <ap_axi_sdata.h>

template <int D>
struct ap_axiu<D, 0, 0, 0> {
  ap_uint<D> data;
  ap_uint<(D + 7) / 8> keep;
  ap_uint<(D + 7) / 8> strb;
  ap_uint<1> last;
};
#endif

namespace hlsnn {
template <int W>
using AxisWord = ap_axiu<W, 0, 0, 0>;

// Fill the members every release has: all keep/strb bits set (every byte is a data byte).
template <int W>
inline AxisWord<W> MakeBeat(const ap_uint<W> &data, bool last) {
#pragma HLS INLINE
  AxisWord<W> beat;
  beat.data = data;
  beat.keep = -1;
  beat.strb = -1;
  beat.last = last;
  return beat;
}
}  // namespace hlsnn

#endif  // HLSNN_AXIS_H_
