// The loop-counter table and the macros that fill it: C-simulation only (hlsnn/counters.h
// includes this header only inside `#ifndef __SYNTHESIS__`; the C ABI bridge includes it
// directly to export the table). The counters write only this table: never a stream, an
// output, or state of the kernel (tests/synthesis_guards.py, tests/test_header_models.py).
#ifndef HLSNN_CSIM_COUNTERS_H_
#define HLSNN_CSIM_COUNTERS_H_

#include <stdint.h>
#include <stdio.h>
#include <string.h>

namespace hlsnn {

const int kMaxCounters = 256;
const int kCounterNameBytes = 48;

struct CounterTable {
  int n;
  char names[kMaxCounters][kCounterNameBytes];
  uint64_t iters[kMaxCounters];
  uint64_t entries[kMaxCounters];
};

inline CounterTable &Counters() {
  static CounterTable t = {0, {{0}}, {0}, {0}};
  return t;
}

// The slot of counter `name` (with "." idx appended when idx >= 0), registered on first use.
inline int CounterId(const char *name, int idx) {
  CounterTable &t = Counters();
  char full[kCounterNameBytes];
  if (idx >= 0) {
    snprintf(full, sizeof full, "%s.%d", name, idx);
  } else {
    snprintf(full, sizeof full, "%s", name);
  }
  for (int i = 0; i < t.n; ++i) {
    if (strcmp(t.names[i], full) == 0) return i;
  }
  if (t.n == kMaxCounters) return kMaxCounters - 1;  // full: the last slot absorbs the rest
  snprintf(t.names[t.n], kCounterNameBytes, "%s", full);
  t.iters[t.n] = 0;
  t.entries[t.n] = 0;
  return t.n++;
}

inline void CounterBump(int id, bool first) {
  CounterTable &t = Counters();
  t.iters[id] += 1;
  if (first) t.entries[id] += 1;
}

// Zero every count; the names stay registered (their slots are cached at the call sites).
inline void CountersReset() {
  CounterTable &t = Counters();
  for (int i = 0; i < t.n; ++i) {
    t.iters[i] = 0;
    t.entries[i] = 0;
  }
}

}  // namespace hlsnn

#define HLSNN_ITER_AT(label, idx, first)                                    \
  do {                                                                      \
    static const int hlsnn_counter_id_ = ::hlsnn::CounterId(#label, (idx)); \
    ::hlsnn::CounterBump(hlsnn_counter_id_, (first));                       \
  } while (0)
#define HLSNN_ITER(label, first) HLSNN_ITER_AT(label, -1, first)
#define HLSNN_MARK(label) HLSNN_ITER_AT(label, -1, true)
#define HLSNN_MARK_AT(label, idx) HLSNN_ITER_AT(label, idx, true)

#endif  // HLSNN_CSIM_COUNTERS_H_
