// AXI4-Stream beat type with TLAST for every hlsnn kernel.
// Under Vitis HLS this is ap_axiu<W,0,0,0> from <ap_axi_sdata.h> (only that type, or
// hls::axis, makes the tool emit TLAST). The open-source ap_types headers that g++ uses for
// C-simulation do not ship ap_axi_sdata.h; there we define a struct with the same members
// (data, keep, strb, user, last, id, dest) so the kernel source is identical in both.
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
struct ap_axiu {
  ap_uint<D> data;
  ap_uint<(D + 7) / 8> keep;
  ap_uint<(D + 7) / 8> strb;
  ap_uint<(U > 0) ? U : 1> user;
  ap_uint<1> last;
  ap_uint<(TI > 0) ? TI : 1> id;
  ap_uint<(TD > 0) ? TD : 1> dest;
};
#endif

namespace hlsnn {
template <int W>
using AxisWord = ap_axiu<W, 0, 0, 0>;
}  // namespace hlsnn

#endif  // HLSNN_AXIS_H_
