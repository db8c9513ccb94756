// hlsnn test model of <ap_axi_sdata.h> as Vitis HLS 2023.1 and later ship it.
//
// Written for hlsnn's test suite from the documented interface; it is NOT AMD's header and
// holds none of its text. It reproduces only what decides whether C++ that uses AXI4-Stream
// beats compiles and how it behaves in C-simulation (the tool-only parts guarded by AESL_SYN
// in the real header, such as the hls::stream specialisation that maps members to ports, are
// not modelled). Every modelled detail names where it comes from:
//
//  [UG1399-2023.2] Vitis HLS User Guide 2023.2, "Customizing AXI4-Stream Interfaces": the
//      signature `template <typename T, size_t WUser = 0, size_t WId = 0, size_t WDest = 0,
//      uint8_t EnableSignals = (AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST | AXIS_ENABLE_STRB),
//      bool StrictEnablement = false> struct axis`, the AXIS_ENABLE_* flags, and that
//      ap_axiu<32,0,0,0> carries TDATA, TLAST, TKEEP and TSTRB.
//  [UG1399-2025.2] same guide, "AXI4-Stream Interfaces with Side-Channels": the getter/setter
//      table get_data()/set_data() ... get_dest()/set_dest() recommended over direct members.
//  [HDR-2023] the released header as vendored in public repositories (read at
//      fastmachinelearning/hls4ml d23e59155, "Copyright 2022-2023 Advanced Micro Devices"):
//      a disabled signal (width 0, or flag cleared) is a member of the empty struct type
//      hls::axis_disabled_signal, so `beat.user = 0` does not compile; enabled widths are
//      WUser/WId/WDest, keep/strb are ap_uint<bytes of T>, last ap_uint<1>; the flag values
//      are DATA 1, DEST 2, ID 4, KEEP 8, LAST 16, STRB 32, USER 64; in C-simulation a get_*
//      or set_* of a disabled signal throws std::runtime_error; keep_all() sets every keep
//      bit and (as released) checks has_data rather than has_keep; ap_axis/ap_axiu are
//      aliases of hls::axis<ap_[u]int<WData>, ...> that forward EnableSignals and
//      StrictEnablement; the header includes ap_int.h and hls_stream.h itself.
#ifndef HLSNN_TEST_MODEL_AP_AXI_SDATA_2023_H_
#define HLSNN_TEST_MODEL_AP_AXI_SDATA_2023_H_

#include <climits>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "ap_int.h"      // the real ap_types headers (hls4ml wheel or $XILINX_HLS/include)
#include "hls_stream.h"  // [HDR-2023] includes it itself

// [HDR-2023] flag values; [UG1399-2023.2] names.
#define AXIS_ENABLE_DATA 0x01
#define AXIS_ENABLE_DEST 0x02
#define AXIS_ENABLE_ID 0x04
#define AXIS_ENABLE_KEEP 0x08
#define AXIS_ENABLE_LAST 0x10
#define AXIS_ENABLE_STRB 0x20
#define AXIS_ENABLE_USER 0x40
#define AXIS_ENABLE_ALL 0x7F
#define AXIS_DISABLE_ALL 0x00

namespace hls {

// Bit width of a data type: ap_[u]int<W> count W bits, anything else its storage [HDR-2023].
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

// The type of every disabled signal: no members, no conversions [HDR-2023].
struct axis_disabled_signal {};

template <typename T, std::size_t WUser = 0, std::size_t WId = 0, std::size_t WDest = 0,
          uint8_t EnableSignals = (AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST | AXIS_ENABLE_STRB),
          bool StrictEnablement = false>
struct axis {
  static_assert((EnableSignals & 0x80) == 0, "EnableSignals: only the low 7 bits may be set");

  static constexpr bool has_data = !std::is_void<T>::value;
  static constexpr bool has_user = WUser > 0;
  static constexpr bool has_id = WId > 0;
  static constexpr bool has_dest = WDest > 0;
  static constexpr bool has_keep = (EnableSignals & AXIS_ENABLE_KEEP) != 0;
  static constexpr bool has_strb = (EnableSignals & AXIS_ENABLE_STRB) != 0;
  static constexpr bool has_last = (EnableSignals & AXIS_ENABLE_LAST) != 0;

  static constexpr std::size_t width_user = has_user ? WUser : 1;
  static constexpr std::size_t width_id = has_id ? WId : 1;
  static constexpr std::size_t width_dest = has_dest ? WDest : 1;
  static constexpr std::size_t width_keep = (hlsnn_model_bits<T> + CHAR_BIT - 1) / CHAR_BIT;
  static constexpr std::size_t width_strb = width_keep;
  static constexpr std::size_t width_last = 1;

  static_assert(!StrictEnablement || has_user == ((EnableSignals & AXIS_ENABLE_USER) != 0),
                "USER enablement does not match WUser");
  static_assert(!StrictEnablement || has_id == ((EnableSignals & AXIS_ENABLE_ID) != 0),
                "ID enablement does not match WId");
  static_assert(!StrictEnablement || has_dest == ((EnableSignals & AXIS_ENABLE_DEST) != 0),
                "DEST enablement does not match WDest");

  template <bool On, std::size_t W>
  using Signal = typename std::conditional<On, ap_uint<W>, axis_disabled_signal>::type;

  typedef typename std::conditional<has_data, T, axis_disabled_signal>::type Type_data;
  typedef Signal<has_keep, width_keep> Type_keep;
  typedef Signal<has_strb, width_strb> Type_strb;
  typedef Signal<has_user, width_user> Type_user;
  typedef Signal<has_last, width_last> Type_last;
  typedef Signal<has_id, width_id> Type_id;
  typedef Signal<has_dest, width_dest> Type_dest;

  // Member order as in [HDR-2023]: data, keep, strb, user, last, id, dest.
  Type_data data;
  Type_keep keep;
  Type_strb strb;
  Type_user user;
  Type_last last;
  Type_id id;
  Type_dest dest;

  // C-simulation accessors [UG1399-2025.2]; a disabled signal throws [HDR-2023].
  static void hlsnn_model_require(bool on, const char *name) {
    if (!on) throw std::runtime_error(std::string(name) + " is not enabled");
  }
  Type_data get_data() const { hlsnn_model_require(has_data, "data"); return data; }
  void set_data(Type_data v) { hlsnn_model_require(has_data, "data"); data = v; }
  Type_keep get_keep() const { hlsnn_model_require(has_keep, "keep"); return keep; }
  void set_keep(Type_keep v) { hlsnn_model_require(has_keep, "keep"); keep = v; }
  Type_strb get_strb() const { hlsnn_model_require(has_strb, "strb"); return strb; }
  void set_strb(Type_strb v) { hlsnn_model_require(has_strb, "strb"); strb = v; }
  Type_user get_user() const { hlsnn_model_require(has_user, "user"); return user; }
  void set_user(Type_user v) { hlsnn_model_require(has_user, "user"); user = v; }
  Type_last get_last() const { hlsnn_model_require(has_last, "last"); return last; }
  void set_last(Type_last v) { hlsnn_model_require(has_last, "last"); last = v; }
  Type_id get_id() const { hlsnn_model_require(has_id, "id"); return id; }
  void set_id(Type_id v) { hlsnn_model_require(has_id, "id"); id = v; }
  Type_dest get_dest() const { hlsnn_model_require(has_dest, "dest"); return dest; }
  void set_dest(Type_dest v) { hlsnn_model_require(has_dest, "dest"); dest = v; }

  // Every keep bit set; the released C-simulation check tests has_data [HDR-2023].
  void keep_all() {
    hlsnn_model_require(has_data, "data");
    keep = ~ap_uint<width_keep>(0);
  }
};

}  // namespace hls

template <std::size_t WData, std::size_t WUser, std::size_t WId, std::size_t WDest,
          uint8_t EnableSignals = (AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST | AXIS_ENABLE_STRB),
          bool StrictEnablement = false>
using ap_axis = hls::axis<ap_int<WData>, WUser, WId, WDest, EnableSignals, StrictEnablement>;

template <std::size_t WData, std::size_t WUser, std::size_t WId, std::size_t WDest,
          uint8_t EnableSignals = (AXIS_ENABLE_KEEP | AXIS_ENABLE_LAST | AXIS_ENABLE_STRB),
          bool StrictEnablement = false>
using ap_axiu = hls::axis<ap_uint<WData>, WUser, WId, WDest, EnableSignals, StrictEnablement>;

// qdma_axis became an alias too (TSTRB omitted) [HDR-2023].
template <std::size_t WData, std::size_t WUser, std::size_t WId, std::size_t WDest>
using qdma_axis = hls::axis<ap_uint<WData>, WUser, WId, WDest, AXIS_ENABLE_ALL ^ AXIS_ENABLE_STRB, false>;

#endif  // HLSNN_TEST_MODEL_AP_AXI_SDATA_2023_H_
