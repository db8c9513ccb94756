// The statistics unit of every engine's output stage (source 002, Alg 2-A step 2): an MSB
// histogram of the wide results, read by the host to choose the radix point. Bin k counts the
// values whose unsigned_msb() is k (0 and -1 have none and are not counted); counters are
// 32 bits and saturate at 2^32 - 1. The twin is msb_histogram() in host/hlsnn/primitives.py.
//
// A kernel declares the counters itself, directly followed by its partition pragma, e.g.
//   ap_uint<32> hist[kBins];
//   #pragma HLS ARRAY_PARTITION variable = hist complete
// and calls these helpers, which hold no state of their own.
#ifndef HLSNN_STATS_H_
#define HLSNN_STATS_H_

#include "hlsnn/counters.h"
#include "hlsnn/primitives.h"
#include "hlsnn/stream_io.h"

namespace hlsnn {

typedef ap_uint<32> stat_count_t;
const stat_count_t kStatCountMax = 0xFFFFFFFFu;

template <int kBins>
inline void MsbHistogramClear(stat_count_t hist[kBins]) {
#pragma HLS INLINE
HistClear:
  for (int k = 0; k < kBins; ++k) {
#pragma HLS UNROLL
    hist[k] = 0;
  }
}

// Count the valid ones of N W-bit values at once: each value's unsigned MSB is a one-hot word
// over the bins; per bin the matches are summed over the N lanes and added, saturating.
template <int kBins, int N, int W>
inline void MsbHistogramAdd(stat_count_t hist[kBins], const ap_int<W> v[N], const bool valid[N]) {
#pragma HLS INLINE
  exp_wide_t msb[N];
#pragma HLS ARRAY_PARTITION variable = msb complete
HistMsb:
  for (int i = 0; i < N; ++i) {
#pragma HLS UNROLL
    msb[i] = valid[i] ? UnsignedMsb<W>(v[i]) : exp_wide_t(-1);
  }
HistBins:
  for (int k = 0; k < kBins; ++k) {
#pragma HLS UNROLL
    ap_uint<16> hits = 0;
  HistLanes:
    for (int i = 0; i < N; ++i) {
#pragma HLS UNROLL
      hits += (msb[i] == k) ? 1 : 0;
    }
    const ap_uint<33> t = (ap_uint<33>)hist[k] + hits;
    hist[k] = t > (ap_uint<33>)kStatCountMax ? kStatCountMax : (stat_count_t)t;
  }
}

// One value (N = 1).
template <int kBins, int W>
inline void MsbHistogramAdd1(stat_count_t hist[kBins], ap_int<W> v) {
#pragma HLS INLINE
  const ap_int<W> vs[1] = {v};
  const bool ok[1] = {true};
  MsbHistogramAdd<kBins, 1, W>(hist, vs, ok);
}

// hist[k] += count, saturating (merging the counters of parallel units, one bin at a time).
template <int kBins>
inline void MsbHistogramAddCount(stat_count_t hist[kBins], int k, stat_count_t count) {
#pragma HLS INLINE
  const ap_uint<33> t = (ap_uint<33>)hist[k] + count;
  hist[k] = t > (ap_uint<33>)kStatCountMax ? kStatCountMax : (stat_count_t)t;
}

// The statistics segment: the kBins counters in bin order, each split into 32/L lanes low part
// first, padded to a whole beat; TLAST on its last beat.
template <int kBins, int SW, int L>
inline void WriteMsbHistogram(hls::stream<AxisWord<SW> > &s, LaneWriter<SW, L> &wr, const stat_count_t hist[kBins]) {
  static_assert(32 % L == 0, "a 32-bit counter must split into whole lanes");
StatsBins:
  for (int k = 0; k < kBins; ++k) {
    HLSNN_ITER(StatsBins, k == 0);
  StatsLanes:
    for (int j = 0; j < 32 / L; ++j) {
#pragma HLS PIPELINE II = 1
      HLSNN_ITER(StatsLanes, j == 0);
      wr.Put(s, (ap_int<L>)(ap_uint<L>)hist[k].range(j * L + L - 1, j * L));
    }
  }
  wr.Flush(s, true);
}

}  // namespace hlsnn

#endif  // HLSNN_STATS_H_
