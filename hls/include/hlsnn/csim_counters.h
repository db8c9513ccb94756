// The loop-counter table and the macros that fill it: C-simulation only (hlsnn/counters.h
// includes this header only inside `#ifndef __SYNTHESIS__`; the C ABI bridge includes it
// directly to export the table). The counters write only this table: never a stream, an
// output, or state of the kernel (tests/synthesis_guards.py, tests/test_header_models.py).
#ifndef HLSNN_CSIM_COUNTERS_H_
#define HLSNN_CSIM_COUNTERS_H_

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef HLSNN_STRICT_CSIM
#include <mutex>  // strict C-simulation: the processes of a DATAFLOW region are threads
#endif

namespace hlsnn {

// Room for every loop counter of the largest kernel (sparse20_zcu104 at weights_per_round 1
// registers about 270: per unit and per loop). A kernel with more does not lose counts silently:
// the ones that find the table full share the spill slot (never reported) and `full` is set,
// which the bridge exports (hlsnn_counter_full) and the host turns into an error. (Before, the
// last slot absorbed the rest: which counters landed there depended on the order the strict
// C-simulation's threads first reached them, so one call's modelled cycles changed from load
// to load.)
const int kMaxCounters = 1024;
const int kCounterNameBytes = 48;

struct CounterTable {
  int n;
  bool full;  // a counter found no free slot (its counts went to the spill slot, kMaxCounters)
  char names[kMaxCounters + 1][kCounterNameBytes];
  uint64_t iters[kMaxCounters + 1];
  uint64_t entries[kMaxCounters + 1];
};

inline CounterTable &Counters() {
  static CounterTable t = {0, false, {{0}}, {0}, {0}};
  return t;
}

// The slot of counter `name` (with "." idx appended when idx >= 0), registered on first use.
inline int CounterId(const char *name, int idx) {
#ifdef HLSNN_STRICT_CSIM
  static std::mutex registering;
  std::lock_guard<std::mutex> hold(registering);
#endif
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
  if (t.n == kMaxCounters) {  // full: the spill slot, and the host is told (hlsnn_counter_full)
    t.full = true;
    snprintf(t.names[kMaxCounters], kCounterNameBytes, "%s", "(counter table full)");
    return kMaxCounters;
  }
  snprintf(t.names[t.n], kCounterNameBytes, "%s", full);
  t.iters[t.n] = 0;
  t.entries[t.n] = 0;
  return t.n++;
}

inline void CounterBump(int id, bool first) {
  CounterTable &t = Counters();
#ifdef HLSNN_STRICT_CSIM
  __atomic_fetch_add(&t.iters[id], 1, __ATOMIC_RELAXED);
  if (first) __atomic_fetch_add(&t.entries[id], 1, __ATOMIC_RELAXED);
#else
  t.iters[id] += 1;
  if (first) t.entries[id] += 1;
#endif
}

#ifdef HLSNN_STRICT_CSIM
// The loop clock of strict C-simulation (hlsnn/csim_strict.h): per thread, the loop whose
// HLSNN_ITER ran last, its run (a new one at each entry) and the iteration within the run.
struct LoopClock {
  int loop;
  long long run, iter;
};
inline LoopClock &CurrentLoop() {
  static thread_local LoopClock c = {-1, 0, 0};
  return c;
}
inline void LoopTick(int id, bool first) {
  static long long runs = 0;
  LoopClock &c = CurrentLoop();
  if (first || c.loop != id) {
    c.loop = id;
    c.run = __atomic_add_fetch(&runs, 1, __ATOMIC_RELAXED);
    c.iter = 0;
  } else {
    ++c.iter;
  }
}
#define HLSNN_LOOP_TICK_(id, first) ::hlsnn::LoopTick((id), (first))
#else
#define HLSNN_LOOP_TICK_(id, first)
#endif

// Zero every count; the names stay registered (their slots are cached at the call sites).
inline void CountersReset() {
  CounterTable &t = Counters();
  for (int i = 0; i < t.n; ++i) {
    t.iters[i] = 0;
    t.entries[i] = 0;
  }
}

}  // namespace hlsnn

#define HLSNN_COUNT_AT_(label, idx, first)                                  \
  static const int hlsnn_counter_id_ = ::hlsnn::CounterId(#label, (idx)); \
  const bool hlsnn_first_ = (first);                                        \
  ::hlsnn::CounterBump(hlsnn_counter_id_, hlsnn_first_)
// a loop's iteration also advances the strict C-simulation's loop clock; a mark does not
#define HLSNN_ITER_AT(label, idx, first)                  \
  do {                                                    \
    HLSNN_COUNT_AT_(label, idx, first);                   \
    HLSNN_LOOP_TICK_(hlsnn_counter_id_, hlsnn_first_);    \
  } while (0)
#define HLSNN_ITER(label, first) HLSNN_ITER_AT(label, -1, first)
#define HLSNN_MARK_AT(label, idx)         \
  do {                                    \
    HLSNN_COUNT_AT_(label, idx, true);    \
  } while (0)
#define HLSNN_MARK(label) HLSNN_MARK_AT(label, -1)

#endif  // HLSNN_CSIM_COUNTERS_H_
