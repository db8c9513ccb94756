// Strict C-simulation wrappers (issue 30): the kernels declare their internal FIFOs, their
// DATAFLOW processes, the arrays whose read-after-write distance a pipeline relies on, and the
// operators of each pipelined loop through this header.
//
// Under __SYNTHESIS__, and in the fast C-simulation (the library built without
// HLSNN_STRICT_CSIM), every wrapper is exactly what it stands for: hlsnn::Fifo<T> is
// hls::stream<T>, hlsnn::Mem<T, N> is the plain array T[N], HLSNN_LOAD / HLSNN_STORE are plain
// indexing, the process macros are plain calls and the declaration macros vanish. With
// HLSNN_STRICT_CSIM (the default C-simulation, hlsnn/csim_strict.h) the FIFOs are bounded at
// their STREAM depth, every process runs as a thread, and the dependence and port rules are
// checked; a violation stops the run with an error naming the FIFO, array or loop.
//
// API
//   hlsnn::Fifo<T> q[N];                    an internal FIFO (or an array of them)
//   HLSNN_FIFO(q, depth);                   after its STREAM pragma: the same depth, and its name
//   hlsnn::Mem<T, N> a[K];                  one memory bank of N words (an array of K banks)
//   HLSNN_MEM(a, kind, distance);           its port kind (hlsnn::kRam1p, kRamS2p, kRamT2p,
//                                           kRegs) and the read-after-write distance in loop
//                                           iterations a pipeline needs (0: not checked)
//   HLSNN_LOAD(a, i) / HLSNN_STORE(a, i, v) a checked read / write of word i of bank a
//   HLSNN_LOAD_AT(a, i, site) / HLSNN_STORE_AT(a, i, v, site)
//                                           the same, naming the access site (the unroll index
//                                           of the site in an unrolled loop): a site's banks
//                                           are those it reached in the run; without a site,
//                                           the k-th access of a source line in an iteration
//                                           is site k (right only for unconditional accesses)
//   a[i]                                    unchecked access (strict: no distance, no port count)
//   HLSNN_SITES(Loop, a, reads, writes);    in loop Loop, each bank of a has up to that many
//                                           static read / write sites (run-time bank indices
//                                           count against every bank they reach)
//   HLSNN_OPS(Loop, mul, div, dsp);         the multipliers, dividers and DSPs of Loop's body
//   HLSNN_OPS_AT(Loop, idx, mul, div, dsp); the same for instance idx (HLSNN_ITER_AT's "Loop.idx")
//                                           (declared before the loop: reported, not checked)
//   HLSNN_DATAFLOW_BEGIN(); HLSNN_PROCESS(f(...)); ... HLSNN_DATAFLOW_END();
//                                           the processes of a DATAFLOW region
// The iterations of a loop are counted by its HLSNN_ITER / HLSNN_ITER_AT (hlsnn/counters.h).
#ifndef HLSNN_STRICT_H_
#define HLSNN_STRICT_H_

#include <hls_stream.h>

#include "hlsnn/counters.h"

namespace hlsnn {
// port kinds of a memory bank (HLSNN_MEM)
enum MemKind { kRam1p = 0, kRamS2p = 1, kRamT2p = 2, kRegs = 3 };
}  // namespace hlsnn

#ifndef __SYNTHESIS__
#include "hlsnn/csim_strict.h"  // with HLSNN_STRICT_CSIM: bounded FIFOs, threads, dependence and port checks
#endif

#ifndef HLSNN_FIFO
// synthesis and the fast C-simulation: every wrapper is what it stands for
namespace hlsnn {
template <typename T>
using Fifo = hls::stream<T>;
template <typename T, int N>
using Mem = T[N];
}  // namespace hlsnn
#define HLSNN_FIFO(var, depth)
#define HLSNN_MEM(var, kind, distance)
#define HLSNN_LOAD(arr, i) (arr)[i]
#define HLSNN_STORE(arr, i, v) ((arr)[i] = (v))
#define HLSNN_LOAD_AT(arr, i, site) (arr)[i]
#define HLSNN_STORE_AT(arr, i, v, site) ((arr)[i] = (v))
#define HLSNN_SITES(loop, arr, reads, writes)
#define HLSNN_OPS(loop, mul, div, dsp)
#define HLSNN_OPS_AT(loop, idx, mul, div, dsp)
#define HLSNN_DATAFLOW_BEGIN()
#define HLSNN_PROCESS(...) __VA_ARGS__
#define HLSNN_DATAFLOW_END()
#endif

#endif  // HLSNN_STRICT_H_
