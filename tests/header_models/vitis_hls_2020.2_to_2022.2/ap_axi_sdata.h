// hlsnn test model of <ap_axi_sdata.h> as Vitis HLS 2020.2 .. 2022.2 ship it.
//
// Written for hlsnn's test suite from the documented interface; it is NOT Xilinx's header and
// holds none of its text. It reproduces only what decides whether C++ that uses AXI4-Stream
// beats compiles and how it behaves in C-simulation (the tool-only parts guarded by AESL_SYN
// in the real header, such as the hls::stream specialisation that maps members to ports, are
// not modelled). Every modelled detail names where it comes from:
//
//  [UG1399-2021.1] Vitis HLS User Guide 2021.1, "How AXI4-Stream is Implemented": the
//      signature `template <typename T, size_t WUser, size_t WId, size_t WDest> struct axis`
//      (four parameters, no defaults, no EnableSignals), ap_axis<WData,WUser,WId,WDest> =
//      hls::axis<ap_int<WData>,...> and ap_axiu<...> = hls::axis<ap_uint<WData>,...>.
//  [UG1399-2022.2] same guide 2022.2, "AXI4-Stream Interfaces without Side-Channels":
//      ap_axiu<32,0,0,0> gives TDATA, TKEEP, TSTRB and TLAST, no TUSER/TID/TDEST.
//  [HDR-2022] the released header of this generation as vendored in public repositories
//      (read at fastmachinelearning/hls4ml 99f9429f8, "(c) Copyright 2011-2022 Xilinx"; the
//      same structure appears in copies with an unfilled copyright placeholder): a width of 0
//      for user/id/dest is widened to ap_uint<1> (the member EXISTS, so `beat.user = 0`
//      compiles); a zero width only makes the tool drop the port. keep/strb are
//      ap_uint<bytes of T>. hls::axis has no get_*/set_*/keep_all() accessors: those exist
//      only on qdma_axis<WData,0,0,0>. The header includes ap_int.h (and <climits>) but
//      includes hls_stream.h only for synthesis (AESL_SYN), so C-simulation code must include
//      hls_stream.h itself.
//
// 2020.2 is grouped with 2021.1-2022.2 because the 4-parameter hls::axis is what UG1399
// documents for Vitis HLS; older Vivado HLS headers (copyright 2011-2018) instead specialise
// ap_axiu<D,0,0,0> with data/keep/strb/last only. hlsnn's own fallback in
// hls/include/hlsnn/axis.h reproduces that smallest member set, so code accepted there is
// accepted here too.
#ifndef HLSNN_TEST_MODEL_AP_AXI_SDATA_2022_H_
#define HLSNN_TEST_MODEL_AP_AXI_SDATA_2022_H_

#include <climits>
#include <cstddef>

#include "ap_int.h"  // the real ap_types header (hls4ml wheel or $XILINX_HLS/include)

namespace hls {

// Bit width of a data type: ap_[u]int<W> count W bits, anything else its storage [HDR-2022].
// As released, the ap_[u]int specialisations take a std::size_t parameter while ap_[u]int take
// an int: g++ (the compiler of this C-simulation) does not deduce W across that type
// mismatch, so in C-simulation every type falls back to its storage size (ap_uint<24> -> 32
// bits, so keep/strb get 4 bits). Kept here so the model behaves as the release does under g++;
// for hlsnn's power-of-two stream widths of 32 bits and more both give W.
template <typename T>
constexpr std::size_t hlsnn_model_bits = sizeof(T) * CHAR_BIT;
template <std::size_t W>
constexpr std::size_t hlsnn_model_bits<ap_int<W> > = W;
template <std::size_t W>
constexpr std::size_t hlsnn_model_bits<ap_uint<W> > = W;

template <typename T, std::size_t WUser, std::size_t WId, std::size_t WDest>
struct axis {
  static constexpr std::size_t kBytes = (hlsnn_model_bits<T> + CHAR_BIT - 1) / CHAR_BIT;
  // A zero width is widened to one bit [HDR-2022].
  static constexpr std::size_t kUser = WUser == 0 ? 1 : WUser;
  static constexpr std::size_t kId = WId == 0 ? 1 : WId;
  static constexpr std::size_t kDest = WDest == 0 ? 1 : WDest;

  // Member names and order as UG1399 lists them [UG1399-2021.1].
  T data;
  ap_uint<kBytes> keep;
  ap_uint<kBytes> strb;
  ap_uint<kUser> user;
  ap_uint<1> last;
  ap_uint<kId> id;
  ap_uint<kDest> dest;
};

}  // namespace hls

// Four template parameters, no defaults [UG1399-2021.1]: ap_axiu<W,0,0,0,FLAGS> does not compile.
template <std::size_t WData, std::size_t WUser, std::size_t WId, std::size_t WDest>
using ap_axis = hls::axis<ap_int<WData>, WUser, WId, WDest>;

template <std::size_t WData, std::size_t WUser, std::size_t WId, std::size_t WDest>
using ap_axiu = hls::axis<ap_uint<WData>, WUser, WId, WDest>;

// The accessor API of this generation lives on qdma_axis only [HDR-2022].
template <std::size_t WData, std::size_t WUser, std::size_t WId, std::size_t WDest>
struct qdma_axis;

template <std::size_t WData>
struct qdma_axis<WData, 0, 0, 0> {
  static constexpr std::size_t kBytes = (WData + 7) / 8;
  ap_uint<WData> data;
  ap_uint<kBytes> keep;
  ap_uint<1> strb;
  ap_uint<1> user;
  ap_uint<1> last;
  ap_uint<1> id;
  ap_uint<1> dest;

  ap_uint<WData> get_data() const { return data; }
  ap_uint<kBytes> get_keep() const { return keep; }
  ap_uint<1> get_last() const { return last; }
  void set_data(const ap_uint<WData> &d) { data = d; }
  void set_keep(const ap_uint<kBytes> &k) { keep = k; }
  void set_last(const ap_uint<1> &l) { last = l; }
  void keep_all() { keep = ~ap_uint<kBytes>(0); }
};

#endif  // HLSNN_TEST_MODEL_AP_AXI_SDATA_2022_H_
