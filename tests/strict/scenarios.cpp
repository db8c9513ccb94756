// Planted hazards for the strict C-simulation's runtime (hlsnn/csim_strict.h), one per
// scenario name (argv[1]); tests/strict/test_strict_runtime.py builds this file with and without
// -DHLSNN_STRICT_CSIM and reads the line it prints: "ok <report json>" or "error <message>".
// Plain ints, no ap_types: the header is what is under test.
#include <stdio.h>
#include <string.h>

#include <string>

#include "hlsnn/csim_flags.h"
#include "hlsnn/strict.h"

namespace {

void Produce(hlsnn::Fifo<int> &q, int n) {
  for (int i = 0; i < n; ++i) q.write(i);
}
void Consume(hlsnn::Fifo<int> &q, int n, long &sum) {
  for (int i = 0; i < n; ++i) sum += q.read();
}
// writes all of a, then all of b; the consumer reads them in pairs (b, a): a needs depth >= n
void ProduceTwo(hlsnn::Fifo<int> &a, hlsnn::Fifo<int> &b, int n) {
  for (int i = 0; i < n; ++i) a.write(i);
  for (int i = 0; i < n; ++i) b.write(i);
}
void ConsumePairs(hlsnn::Fifo<int> &a, hlsnn::Fifo<int> &b, int n, long &sum) {
  for (int i = 0; i < n; ++i) sum += b.read() + a.read();
}

long Region(const std::string &which, int depth) {
  const int n = 8;
  hlsnn::Fifo<int> a, b;
  HLSNN_FIFO(a, depth);
  HLSNN_FIFO(b, depth);
  long s1 = 0, s2 = 0;
  HLSNN_DATAFLOW_BEGIN();
  if (which == "pipe") {
    HLSNN_PROCESS(Produce(a, 100));
    HLSNN_PROCESS(Consume(a, 100, s1));
  } else if (which == "pairs") {
    HLSNN_PROCESS(ProduceTwo(a, b, n));
    HLSNN_PROCESS(ConsumePairs(a, b, n, s1));
  } else if (which == "second_reader") {
    HLSNN_PROCESS(Produce(a, 2 * n));
    HLSNN_PROCESS(Consume(a, n, s1));
    HLSNN_PROCESS(Consume(a, n, s2));
  } else if (which == "overread") {
    HLSNN_PROCESS(Produce(a, n));
    HLSNN_PROCESS(Consume(a, n + 1, s1));
  } else if (which == "leftover") {
    HLSNN_PROCESS(Produce(a, n));
    HLSNN_PROCESS(Consume(a, n - 1, s1));
  }
  HLSNN_DATAFLOW_END();
  return s1 + s2;
}

// A read-add-write loop: iteration i adds to word i % period of bank i % 2 (bank = the
// constant site's own, or a run-time index when `runtime_bank`).
static hlsnn::Mem<int, 16> acc[2];
long Accumulate(int period, int distance, bool runtime_bank) {
  HLSNN_MEM(acc, hlsnn::kRamS2p, distance);
  for (int i = 0; i < 64; ++i) {
    HLSNN_ITER(AccLoop, i == 0);
    for (int l = 0; l < 2; ++l) {  // two unrolled sites, one per bank
      const int bank = runtime_bank ? (i + l) % 2 : l;
      const int a = i % period;
      const int old = HLSNN_LOAD_AT(acc[bank], a, l);
      HLSNN_STORE_AT(acc[bank], a, old + 1, l);
    }
  }
  return acc[0][0];
}

}  // namespace

int main(int argc, char **argv) {
  const std::string which = argc > 1 ? argv[1] : "pipe";
  const int arg = argc > 2 ? atoi(argv[2]) : 2;
#ifdef HLSNN_STRICT_CSIM
  hlsnn::strict::Reset();
#endif
  hlsnn::Trap().armed = true;
  if (setjmp(hlsnn::Trap().env) != 0) {
    printf("error %s\n", hlsnn::Trap().message);
    return 0;
  }
  long v = 0;
  if (which.compare(0, 3, "acc") == 0) {
    // acc_<period>: the same word every `period` iterations; arg: the distance required
    v = Accumulate(atoi(which.c_str() + 4), arg, false);
  } else if (which == "runtime_bank") {
    v = Accumulate(8, arg, true);
  } else {
    v = Region(which, arg);
  }
  hlsnn::Trap().armed = false;
#ifdef HLSNN_STRICT_CSIM
  hlsnn::strict::PublishAll();
  if (hlsnn::strict::S().error_kind) {
    printf("error %s\n", hlsnn::strict::S().error.c_str());
    return 0;
  }
  printf("ok %ld %s\n", v, hlsnn::strict::ReportJson().c_str());
#else
  printf("ok %ld {}\n", v);
#endif
  return 0;
}
