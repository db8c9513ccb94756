// The strict C-simulation's runtime (issue 30): C-simulation only, built into the library
// when it is compiled with -DHLSNN_STRICT_CSIM (hlsnn/strict.h includes this header then; the
// bridge includes it to reset and export the report). Nothing here is ever synthesized.
//
// * Fifo<T>: bounded at its STREAM depth (HLSNN_FIFO). A full write or an empty read waits,
//   as the hardware's handshake does. One process may read it and one may write it.
// * DATAFLOW processes are threads (HLSNN_PROCESS). The region's caller watches them: when no
//   FIFO has moved for a while and every live process is waiting on a FIFO whose state still
//   blocks it, that is a deadlock, reported with the FIFOs the processes wait on. A read of an
//   empty FIFO whose writer has finished is reported at once.
// * Mem<T, N>: one memory bank. A checked write (HLSNN_STORE) becomes visible to checked reads
//   (HLSNN_LOAD) of the same pipelined loop run only `distance` iterations later; an earlier
//   read is an error naming the array, the distance seen and the distance required. Per loop,
//   the accesses to each bank in one iteration are counted against the bank's ports.
// * Errors stop the run: a worker thread unwinds to its start with longjmp (no mutex held),
//   the others are woken and stop as well, and the region's caller jumps back to the bridge
//   (hlsnn::Trap, hlsnn/csim_flags.h), which returns kStrictFailed with the message.
#ifndef HLSNN_CSIM_STRICT_H_
#define HLSNN_CSIM_STRICT_H_
#ifdef HLSNN_STRICT_CSIM  // the fast C-simulation: nothing here (hlsnn/strict.h's plain wrappers)

#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <algorithm>
#include <deque>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <hls_stream.h>

#ifndef __SYNTHESIS__  // (always true here: the form tests/synthesis_guards.py reads as sim-only)
#include "hlsnn/csim_counters.h"
#include "hlsnn/csim_flags.h"
#endif

namespace hlsnn {
namespace strict {

// ------------------------------------------------------------------ shared state and report
struct Process {
  std::string name;
  bool finished = false;
  const void *blocked_on = nullptr;  // the FIFO it waits on (nullptr: running)
  bool blocked_read = false;
};

struct FifoRecord {
  std::string name;
  int depth;
  size_t peak;
};
struct RawRecord {
  std::string array;
  long long min_distance;  // -1: no read followed a write within a loop run
  int required;
};
struct BankRecord {
  std::string loop, array, bank;
  int reads, writes;            // the access sites (static reach, declared, or per iteration)
  int read_ports, write_ports;  // -1: shared ports (the total is in read_ports)
};
struct OpRecord {
  std::string loop;
  int mul, div, dsp;
};

struct State {
  std::mutex mu;  // guards everything here and every Fifo's queue
  std::condition_variable monitor;
  bool abort = false;
  int error_kind = 0;  // 0 none, 1 a kernel assert, 2 a strict rule
  std::string error;
  unsigned long long moves = 0;  // FIFO reads and writes so far
  std::vector<Process *> procs;  // the live region's processes
  std::vector<FifoRecord> fifos;
  std::vector<RawRecord> raws;
  std::vector<BankRecord> banks;
  std::vector<OpRecord> ops;
};

// (never destroyed: static banks publish into it while the library unloads)
inline State &S() {
  static State *s = new State();
  return *s;
}

// the process this thread runs (nullptr: the caller's thread) and where it unwinds to
inline Process *&CurrentProcess() {
  static thread_local Process *p = nullptr;
  return p;
}
inline jmp_buf *&WorkerEnv() {
  static thread_local jmp_buf *env = nullptr;
  return env;
}

inline std::string ProcName() {
  Process *p = CurrentProcess();
  return p ? p->name : std::string("the top function");
}

class FifoBase;
inline std::vector<FifoBase *> &LiveFifos() {
  static std::vector<FifoBase *> *v = new std::vector<FifoBase *>();
  return *v;
}

// Record the first error (caller holds S().mu) and wake every waiting thread.
inline void RecordLocked(int kind, const std::string &msg);

// Stop this thread's part of the run after an error was recorded (no mutex held): a worker
// unwinds to its start, the caller's thread jumps back to the bridge.
#define HLSNN_STRICT_COLD_ __attribute__((noinline, cold))

[[noreturn]] HLSNN_STRICT_COLD_ inline void Bail() {
  if (WorkerEnv()) longjmp(*WorkerEnv(), 1);
  AssertTrap &trap = Trap();
  if (trap.armed) {
    trap.armed = false;
    snprintf(trap.message, sizeof trap.message, "%s", S().error.c_str());
    longjmp(trap.env, S().error_kind == 1 ? 1 : 2);
  }
  fprintf(stderr, "hlsnn strict C-simulation: %s\n", S().error.c_str());
  abort();
}

[[noreturn]] HLSNN_STRICT_COLD_ inline void Fail(const std::string &msg) {
  {
    std::lock_guard<std::mutex> hold(S().mu);
    RecordLocked(2, msg);
  }
  Bail();
}

// A kernel assert in a worker thread (the bridge's __wrap___assert_fail asks first): record it
// and unwind this worker. Returns false on the caller's thread (the bridge's trap handles it).
inline bool OnAssert(const char *msg) {
  if (!WorkerEnv()) return false;
  {
    std::lock_guard<std::mutex> hold(S().mu);
    RecordLocked(1, msg);
  }
  Bail();
}

inline void PublishAll();

// The bridge, before each run: no error, no records (what a stopped run left in the static
// banks is flushed first and dropped).
inline void Reset() {
  PublishAll();
  State &s = S();
  std::lock_guard<std::mutex> hold(s.mu);
  s.abort = false;
  s.error_kind = 0;
  s.error.clear();
  s.moves = 0;
  s.procs.clear();
  s.fifos.clear();
  s.raws.clear();
  s.banks.clear();
  s.ops.clear();
  LiveFifos().clear();  // FIFOs of a run that was stopped by an error (never destroyed)
}

inline std::string JsonString(const std::string &v) {
  std::string out = "\"";
  for (char c : v) {
    if (c == '"' || c == '\\') out += '\\';
    if ((unsigned char)c < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

// The run's records as JSON: {"fifos": [...], "raw": [...], "banks": [...], "operators": [...]}.
inline std::string ReportJson() {
  State &s = S();
  std::lock_guard<std::mutex> hold(s.mu);
  std::ostringstream o;
  o << "{\"fifos\": [";
  for (size_t i = 0; i < s.fifos.size(); ++i)
    o << (i ? ", " : "") << "{\"name\": " << JsonString(s.fifos[i].name) << ", \"depth\": " << s.fifos[i].depth
      << ", \"peak\": " << s.fifos[i].peak << "}";
  o << "], \"raw\": [";
  for (size_t i = 0; i < s.raws.size(); ++i) {
    o << (i ? ", " : "") << "{\"array\": " << JsonString(s.raws[i].array) << ", \"min_distance\": ";
    if (s.raws[i].min_distance < 0) {
      o << "null";
    } else {
      o << s.raws[i].min_distance;
    }
    o << ", \"required\": " << s.raws[i].required << "}";
  }
  o << "], \"banks\": [";
  for (size_t i = 0; i < s.banks.size(); ++i) {
    const BankRecord &b = s.banks[i];
    const bool shared = b.write_ports < 0;
    o << (i ? ", " : "") << "{\"loop\": " << JsonString(b.loop) << ", \"array\": " << JsonString(b.array)
      << ", \"bank\": " << JsonString(b.bank) << ", \"sites\": " << b.reads + b.writes
      << ", \"ports\": " << (shared ? b.read_ports : b.read_ports + b.write_ports) << ", \"reads\": " << b.reads
      << ", \"writes\": " << b.writes << "}";
  }
  o << "], \"operators\": [";
  for (size_t i = 0; i < s.ops.size(); ++i)
    o << (i ? ", " : "") << "{\"loop\": " << JsonString(s.ops[i].loop) << ", \"mul\": " << s.ops[i].mul
      << ", \"div\": " << s.ops[i].div << ", \"dsp\": " << s.ops[i].dsp << "}";
  o << "]}";
  return o.str();
}

// ------------------------------------------------------------------ FIFOs
class FifoBase {
 public:
  std::string name = "fifo";
  int depth = 2;  // Vitis HLS's default depth until HLSNN_FIFO says otherwise
  size_t peak = 0;
  Process *reader = nullptr, *writer = nullptr;
  bool read_seen = false, write_seen = false;
  bool writer_finished = false;
  std::condition_variable cv;
  int waiters = 0;
  virtual size_t Count() const = 0;
  virtual ~FifoBase() {}
  bool Blocks(bool reading) const { return reading ? Count() == 0 : Count() >= (size_t)depth; }
};

inline void RecordLocked(int kind, const std::string &msg) {
  State &s = S();
  if (!s.error_kind) {
    s.error_kind = kind;
    s.error = msg;
  }
  s.abort = true;
  for (FifoBase *f : LiveFifos()) f->cv.notify_all();
  s.monitor.notify_all();
}

// One process per side of a FIFO (Vitis HLS: a stream has one producer and one consumer).
__attribute__((noinline)) inline void CheckSide(FifoBase &f, bool reading, std::unique_lock<std::mutex> &lk) {
  Process *me = CurrentProcess();
  Process *&side = reading ? f.reader : f.writer;
  bool &seen = reading ? f.read_seen : f.write_seen;
  if (!seen) {
    seen = true;
    side = me;
    return;
  }
  if (side != me) {
    const std::string who = side ? side->name : std::string("the top function");
    RecordLocked(2, "FIFO '" + f.name + "' is " + (reading ? "read" : "written") + " by two processes, " + who +
                        " and " + ProcName() + " (a stream has one producer and one consumer)");
    lk.unlock();
    Bail();
  }
}

// Wait until `f` does not block this side; errors when it never can.
__attribute__((noinline)) inline void WaitFor(FifoBase &f, bool reading, std::unique_lock<std::mutex> &lk) {
  State &s = S();
  while (f.Blocks(reading)) {
    if (s.abort) {
      lk.unlock();
      Bail();
    }
    Process *me = CurrentProcess();
    if (!me) {  // the caller's thread (no DATAFLOW region): nobody else can move this FIFO
      RecordLocked(2, reading ? "read of empty FIFO '" + f.name + "' with no process left to write it"
                              : "write to full FIFO '" + f.name + "' (depth " + std::to_string(f.depth) +
                                    ") with no process left to read it: it needs a larger depth");
      lk.unlock();
      Bail();
    }
    if (reading && f.writer_finished) {
      RecordLocked(2, "read of empty FIFO '" + f.name + "' by " + me->name + " after its producer " +
                          (f.writer ? f.writer->name : std::string("?")) + " finished");
      lk.unlock();
      Bail();
    }
    me->blocked_on = &f;
    me->blocked_read = reading;
    ++f.waiters;
    f.cv.wait(lk);
    --f.waiters;
    me->blocked_on = nullptr;
  }
  if (s.abort) {
    lk.unlock();
    Bail();
  }
}

template <typename T>
class Fifo : public FifoBase {
 public:
  Fifo() {
    std::lock_guard<std::mutex> hold(S().mu);
    LiveFifos().push_back(this);
  }
  explicit Fifo(const char *n) : Fifo() { name = n; }
  Fifo(const Fifo &) = delete;
  Fifo &operator=(const Fifo &) = delete;
  ~Fifo() {
    State &s = S();
    std::lock_guard<std::mutex> hold(s.mu);
    std::vector<FifoBase *> &live = LiveFifos();
    for (size_t i = 0; i < live.size(); ++i) {
      if (live[i] == this) {
        live.erase(live.begin() + i);
        break;
      }
    }
    bool merged = false;
    for (FifoRecord &r : s.fifos) {
      if (r.name == name) {
        if (peak > r.peak) r.peak = peak;
        merged = true;
      }
    }
    if (!merged) s.fifos.push_back(FifoRecord{name, depth, peak});
    if (!q.empty() && !s.error_kind) {  // the bridge sees the error after the call returns
      s.error_kind = 2;
      s.error = "FIFO '" + name + "' holds " + std::to_string(q.size()) +
                " entries when the call ends (on hardware they would carry into the next call)";
    }
  }
  size_t Count() const override { return q.size(); }

  void write(const T &v) {
    std::unique_lock<std::mutex> lk(S().mu);
    CheckSide(*this, false, lk);
    WaitFor(*this, false, lk);
    q.push_back(v);
    if (q.size() > peak) peak = q.size();
    ++S().moves;
    if (waiters) cv.notify_all();
  }
  T read() {
    std::unique_lock<std::mutex> lk(S().mu);
    CheckSide(*this, true, lk);
    WaitFor(*this, true, lk);
    T v = q.front();
    q.pop_front();
    ++S().moves;
    if (waiters) cv.notify_all();
    return v;
  }
  void read(T &v) { v = read(); }
  void operator>>(T &v) { v = read(); }
  void operator<<(const T &v) { write(v); }
  bool read_nb(T &v) {
    std::unique_lock<std::mutex> lk(S().mu);
    CheckSide(*this, true, lk);
    if (q.empty()) return false;
    v = q.front();
    q.pop_front();
    ++S().moves;
    if (waiters) cv.notify_all();
    return true;
  }
  bool write_nb(const T &v) {
    std::unique_lock<std::mutex> lk(S().mu);
    CheckSide(*this, false, lk);
    if (q.size() >= (size_t)depth) return false;
    q.push_back(v);
    if (q.size() > peak) peak = q.size();
    ++S().moves;
    if (waiters) cv.notify_all();
    return true;
  }
  bool empty() {
    std::lock_guard<std::mutex> hold(S().mu);
    return q.empty();
  }
  bool full() {
    std::lock_guard<std::mutex> hold(S().mu);
    return q.size() >= (size_t)depth;
  }
  size_t size() {
    std::lock_guard<std::mutex> hold(S().mu);
    return q.size();
  }

 private:
  std::deque<T> q;
};

// HLSNN_FIFO(var, depth): name and depth of a FIFO or of every FIFO of an array ("q[2]").
template <typename T>
void DeclareFifo(Fifo<T> &f, const std::string &name, int depth) {
  std::lock_guard<std::mutex> hold(S().mu);
  f.name = name;
  f.depth = depth;
}
template <typename A, size_t K>
void DeclareFifo(A (&arr)[K], const std::string &name, int depth) {
  for (size_t k = 0; k < K; ++k) DeclareFifo(arr[k], name + "[" + std::to_string(k) + "]", depth);
}

// ------------------------------------------------------------------ DATAFLOW region
class Region {
 public:
  Region() {}
  Region(const Region &) = delete;
  ~Region() { Join(); }

  template <typename F>
  void Spawn(const char *call, F body) {
    std::string name(call);
    const size_t paren = name.find('(');
    if (paren != std::string::npos) name.resize(paren);
    int same = 0;  // a function run as several processes: Consume, Consume#2, ...
    for (Process *q : procs_) same += q->name == name || q->name.compare(0, name.size() + 1, name + "#") == 0;
    if (same) name += "#" + std::to_string(same + 1);
    Process *p = new Process();
    p->name = name;
    {
      std::lock_guard<std::mutex> hold(S().mu);
      S().procs.push_back(p);
    }
    procs_.push_back(p);
    threads_.push_back(std::thread([p, body]() {
      jmp_buf env;
      CurrentProcess() = p;
      WorkerEnv() = &env;
      if (setjmp(env) == 0) body();
      WorkerEnv() = nullptr;
      std::lock_guard<std::mutex> hold(S().mu);
      p->finished = true;
      for (FifoBase *f : LiveFifos()) {
        if (f->writer == p) {
          f->writer_finished = true;
          f->cv.notify_all();
        }
      }
      S().monitor.notify_all();
    }));
  }

  // Wait for every process, watching for a deadlock; then raise the first error, if any.
  void Join() {
    if (joined_) return;
    joined_ = true;
    State &s = S();
    {
      std::unique_lock<std::mutex> lk(s.mu);
      unsigned long long last_moves = s.moves;
      int still = 0;
      while (true) {
        bool all_done = true;
        for (Process *p : procs_) all_done = all_done && p->finished;
        if (all_done) break;
        s.monitor.wait_for(lk, std::chrono::milliseconds(25));
        if (s.abort) continue;  // the workers are unwinding
        std::string stuck;
        if (s.moves == last_moves && AllBlocked(&stuck)) {
          if (++still >= 2) RecordLocked(2, "deadlock: no FIFO moved and every process waits: " + stuck);
        } else {
          still = 0;
        }
        last_moves = s.moves;
      }
    }
    for (std::thread &t : threads_) t.join();
    {
      std::lock_guard<std::mutex> hold(s.mu);
      for (Process *p : procs_) {
        for (size_t i = 0; i < s.procs.size(); ++i) {
          if (s.procs[i] == p) {
            s.procs.erase(s.procs.begin() + i);
            break;
          }
        }
        for (FifoBase *f : LiveFifos()) {  // the FIFOs outlive the processes
          if (f->reader == p) f->reader = nullptr;
          if (f->writer == p) f->writer = nullptr;
        }
        delete p;
      }
    }
    procs_.clear();
    if (s.error_kind) Bail();
  }

 private:
  // every unfinished process waits on a FIFO that still blocks it (caller holds S().mu)
  bool AllBlocked(std::string *why) const {
    std::string out;
    for (Process *p : procs_) {
      if (p->finished) continue;
      const FifoBase *f = static_cast<const FifoBase *>(p->blocked_on);
      if (!f || !f->Blocks(p->blocked_read)) return false;
      if (!out.empty()) out += "; ";
      out += p->name + (p->blocked_read ? " waits to read empty '" : " waits to write full '") + f->name +
             "' (depth " + std::to_string(f->depth) + ")";
    }
    *why = out;
    return true;
  }
  std::vector<Process *> procs_;
  std::vector<std::thread> threads_;
  bool joined_ = false;
};

}  // namespace strict
}  // namespace hlsnn

#ifndef __SYNTHESIS__  // (always true here: the form tests/synthesis_guards.py reads as sim-only)
#include "hlsnn/csim_strict_mem.h"  // hlsnn::strict::Mem and its checks
#endif

namespace hlsnn {
namespace strict {

inline void DeclareOps(int loop, int mul, int div, int dsp) {
  State &s = S();
  std::lock_guard<std::mutex> hold(s.mu);
  const std::string name = Counters().names[loop];
  for (OpRecord &r : s.ops)
    if (r.loop == name) return;
  s.ops.push_back(OpRecord{name, mul, div, dsp});
}

}  // namespace strict
}  // namespace hlsnn

// The checked wrappers, unless hlsnn/strict.h already gave the plain ones (a kernel stripped of
// its sim-only blocks, tests/test_header_models.py, built with the strict bridge).
#ifndef HLSNN_FIFO
namespace hlsnn {
template <typename T>
using Fifo = strict::Fifo<T>;
template <typename T, int N>
using Mem = strict::Mem<T, N>;

}  // namespace hlsnn

#define HLSNN_FIFO(var, depth) ::hlsnn::strict::DeclareFifo((var), #var, (depth))
#define HLSNN_MEM(var, kind, distance) ::hlsnn::strict::DeclareMem((var), #var, (kind), (distance))
#define HLSNN_LOAD(arr, i) ((arr).Load((i), __LINE__, -1))
#define HLSNN_STORE(arr, i, v) ((arr).Store((i), (v), __LINE__, -1))
#define HLSNN_LOAD_AT(arr, i, site) ((arr).Load((i), __LINE__, (site)))
#define HLSNN_STORE_AT(arr, i, v, site) ((arr).Store((i), (v), __LINE__, (site)))
#define HLSNN_SITES(loop, arr, reads, writes)                                           \
  do {                                                                                  \
    static const int hlsnn_sites_loop_ = ::hlsnn::CounterId(#loop, -1);                 \
    ::hlsnn::strict::DeclareSites((arr), hlsnn_sites_loop_, (reads), (writes));         \
  } while (0)
#define HLSNN_OPS_AT(loop, idx, mul, div, dsp)                                          \
  do {                                                                                  \
    static const int hlsnn_ops_loop_ = ::hlsnn::CounterId(#loop, (idx));                \
    ::hlsnn::strict::DeclareOps(hlsnn_ops_loop_, (mul), (div), (dsp));                  \
  } while (0)
#define HLSNN_OPS(loop, mul, div, dsp) HLSNN_OPS_AT(loop, -1, mul, div, dsp)
#define HLSNN_DATAFLOW_BEGIN() ::hlsnn::strict::Region hlsnn_region_
#define HLSNN_PROCESS(...) hlsnn_region_.Spawn(#__VA_ARGS__, [&]() { __VA_ARGS__; })
#define HLSNN_DATAFLOW_END() hlsnn_region_.Join()
#endif  // HLSNN_FIFO

#undef HLSNN_STRICT_COLD_
#endif  // HLSNN_STRICT_CSIM
#endif  // HLSNN_CSIM_STRICT_H_
