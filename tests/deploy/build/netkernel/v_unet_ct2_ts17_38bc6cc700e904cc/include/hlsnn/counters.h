// Loop counters for the cycle model (host/hlsnn/perf/): C-simulation only.
//
// HLSNN_ITER(Label, first) goes in the body of the loop labelled Label: it adds one to the
// loop's iteration count and, when `first` (an expression that only reads the loop index,
// e.g. `i == 0`) holds, one to its entry count. HLSNN_ITER_AT(Label, idx, first) does the same
// for one instance of a replicated process (a template unit): the counter is "Label.idx".
// HLSNN_MARK(Label) counts one event of a region (a branch, a process call).
//
// Under __SYNTHESIS__ the macros expand to nothing, so the synthesized design is unchanged;
// in C-simulation they only write this header's own table: never a stream, an output, or
// state of the kernel. The C ABI bridge resets the table before each run and exports it.
#ifndef HLSNN_COUNTERS_H_
#define HLSNN_COUNTERS_H_

#ifndef __SYNTHESIS__
#include "hlsnn/csim_counters.h"  // the table and the counting macros: C-simulation only
#endif

#ifndef HLSNN_ITER_AT
// No counters (the tool's compile, where the block above is skipped): the macros vanish.
#define HLSNN_ITER_AT(label, idx, first)
#define HLSNN_ITER(label, first)
#define HLSNN_MARK(label)
#define HLSNN_MARK_AT(label, idx)
#endif

#endif  // HLSNN_COUNTERS_H_
