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

// ------------------------------------------------------------------ memory banks
inline std::string LoopName(int id) {
  return id >= 0 && id < Counters().n ? std::string(Counters().names[id]) : std::string("?");
}

// One declared array (HLSNN_MEM): its banks share this record.
struct MemGroup {
  std::string array;
  int kind = kRegs, distance = 0;
  std::vector<std::string> banks;  // "[1][3]" per bank
  long long min_seen = -1;         // the smallest read-after-write distance seen (iterations)
  struct Use {                     // per loop and bank: the most accesses in one iteration
    int loop, bank, reads, writes;
  };
  std::vector<Use> uses;
  struct Site {  // an access site of a loop (source line, site index) and the banks it reached
    int loop, line, site;
    bool write;
    std::vector<char> reach;
  };
  std::vector<Site> sites;
  struct Declared {
    int loop, reads, writes;
  };
  std::vector<Declared> declared;

  int ReadPorts() const { return kind == kRam1p ? 1 : kind == kRamS2p ? 1 : kind == kRamT2p ? 2 : 1 << 20; }
  int WritePorts() const { return kind == kRamS2p ? 1 : kind == kRegs ? 1 << 20 : -1; }  // -1: shared
  std::string Ports() const {
    const int rp = ReadPorts(), wp = WritePorts();
    return wp < 0 ? std::to_string(rp) + " shared" : std::to_string(rp) + " read, " + std::to_string(wp) + " write";
  }
  bool Over(int r, int w) const {
    const int rp = ReadPorts(), wp = WritePorts();
    return wp < 0 ? r + w > rp : (r > rp || w > wp);
  }
  Use &UseOf(int loop, int bank) {
    for (Use &u : uses)
      if (u.loop == loop && u.bank == bank) return u;
    uses.push_back(Use{loop, bank, 0, 0});
    return uses.back();
  }
  __attribute__((noinline)) void Reach(int loop, int line, int site, bool write, int bank) {
    for (Site &x : sites) {
      if (x.loop == loop && x.line == line && x.site == site && x.write == write) {
        x.reach[bank] = 1;
        return;
      }
    }
    sites.push_back(Site{loop, line, site, write, std::vector<char>(banks.size(), 0)});
    sites.back().reach[bank] = 1;
  }
  // per loop and bank: the static sites (every site that reached the bank, or the declared
  // count when larger) and the most accesses of one iteration; into the report, and an error
  // when they exceed the bank's ports
  void Publish() {
    State &s = S();
    std::lock_guard<std::mutex> hold(s.mu);
    if (distance > 0) {
      bool found = false;
      for (RawRecord &r : s.raws) {
        if (r.array == array) {
          found = true;
          if (min_seen >= 0 && (r.min_distance < 0 || min_seen < r.min_distance)) r.min_distance = min_seen;
        }
      }
      if (!found) s.raws.push_back(RawRecord{array, min_seen, distance});
    }
    std::vector<int> loops;
    for (const Use &u : uses)
      if (std::find(loops.begin(), loops.end(), u.loop) == loops.end()) loops.push_back(u.loop);
    for (const Declared &d : declared)
      if (std::find(loops.begin(), loops.end(), d.loop) == loops.end()) loops.push_back(d.loop);
    for (int loop : loops) {
      for (size_t b = 0; b < banks.size(); ++b) {
        int r = 0, w = 0;
        for (const Site &x : sites)
          if (x.loop == loop && x.reach[b]) ++(x.write ? w : r);
        for (const Use &u : uses) {
          if (u.loop == loop && u.bank == (int)b) {
            r = std::max(r, u.reads);
            w = std::max(w, u.writes);
          }
        }
        for (const Declared &d : declared) {
          if (d.loop == loop) {
            r = std::max(r, d.reads);
            w = std::max(w, d.writes);
          }
        }
        if (!r && !w) continue;
        if (Over(r, w) && !s.error_kind) {
          s.error_kind = 2;
          s.error = "loop " + LoopName(loop) + ": bank '" + array + banks[b] + "' has " + std::to_string(r) +
                    " read site(s) and " + std::to_string(w) + " write site(s), more than its ports (" + Ports() +
                    "): the loop cannot run at II = 1 (a run-time bank index counts against every bank it reaches)";
        }
        bool found = false;
        for (BankRecord &x : s.banks) {
          if (x.loop == LoopName(loop) && x.array == array && x.bank == banks[b]) {
            found = true;
            x.reads = std::max(x.reads, r);
            x.writes = std::max(x.writes, w);
          }
        }
        if (!found) s.banks.push_back(BankRecord{LoopName(loop), array, banks[b], r, w, ReadPorts(), WritePorts()});
      }
    }
    min_seen = -1;
    uses.clear();
    sites.clear();
  }
};

// the errors of a bank (out of line: every checked access carries the test, not the message)
[[noreturn]] HLSNN_STRICT_COLD_ inline void RawError(const MemGroup &g, int bank, int word, long long d, int loop) {
  Fail("array '" + g.array + g.banks[bank] + "': word " + std::to_string(word) + " read " + std::to_string(d) +
       " iteration(s) after its write in loop " + LoopName(loop) + "; the pipeline needs " +
       std::to_string(g.distance) + " (DEPENDENCE inter false: the read would see the old value)");
}
[[noreturn]] HLSNN_STRICT_COLD_ inline void BoundsError(const MemGroup *g, int bank, const char *what, int word, int n) {
  Fail(std::string(what) + " of word " + std::to_string(word) + " of array '" +
       (g ? g->array + g->banks[bank] : std::string("?")) + "' of " + std::to_string(n) + " words");
}
[[noreturn]] HLSNN_STRICT_COLD_ inline void PortError(const MemGroup &g, int bank, int reads, int writes, int loop) {
  Fail("loop " + LoopName(loop) + ": bank '" + g.array + g.banks[bank] + "' has " + std::to_string(reads) +
       " read(s) and " + std::to_string(writes) + " write(s) in one iteration, more than its ports (" + g.Ports() +
       "): the loop cannot run at II = 1");
}

template <typename T, int N>
class Mem {
 public:
  Mem() {
    for (int i = 0; i < N; ++i) {
      v_[i] = (T)0;
      wrun_[i] = 0;
      witer_[i] = 0;
    }
  }
  Mem(const Mem &) = delete;
  T &operator[](int i) { return v_[i]; }  // unchecked (outside the checked loops)
  const T &operator[](int i) const { return v_[i]; }

  void Attach(MemGroup *g, int index) {
    group_ = g;
    index_ = index;
  }

  // `line`, `site`: the access site (site < 0: the how-many-th access of this line in the
  // iteration, which is the unroll index of an unconditional access in an unrolled loop)
  T Load(int i, int line, int site) {
    Bounds(i, "read");
    const LoopClock &c = CurrentLoop();
    if (group_ && group_->distance > 0 && wrun_[i] == c.run && c.loop >= 0) {
      const long long d = c.iter - witer_[i];
      if (d >= 1 && (group_->min_seen < 0 || d < group_->min_seen)) group_->min_seen = d;
      if (d >= 1 && d < group_->distance) {
        RawError(*group_, index_, i, d, c.loop);
      }
    }
    Count(c, false, i, line, site);
    return v_[i];
  }
  void Store(int i, const T &x, int line, int site) {
    Bounds(i, "write");
    const LoopClock &c = CurrentLoop();
    v_[i] = x;
    wrun_[i] = c.run;
    witer_[i] = c.iter;
    Count(c, true, i, line, site);
  }

 private:
  std::string Name() const { return group_ ? group_->array + group_->banks[index_] : std::string("?"); }
  void Bounds(int i, const char *what) {
    if (i < 0 || i >= N)
      BoundsError(group_, index_, what, i, N);
  }
  // this iteration's accesses: distinct read addresses, every write
  void Count(const LoopClock &c, bool write, int addr, int line, int site) {
    if (!group_ || group_->kind == kRegs || c.loop < 0) return;
    if (c.run != run_ || c.iter != iter_) {
      run_ = c.run;
      iter_ = c.iter;
      reads_ = writes_ = 0;
    }
    if (site < 0) site = Ordinal(c, line);
    group_->Reach(c.loop, line, site, write, index_);
    if (!write) {
      for (int k = 0; k < reads_ && k < kMaxAddrs; ++k)
        if (raddr_[k] == addr) return;
      if (reads_ < kMaxAddrs) raddr_[reads_] = addr;
      ++reads_;
    } else {
      ++writes_;
    }
    MemGroup::Use &u = group_->UseOf(c.loop, index_);
    u.reads = std::max(u.reads, reads_);
    u.writes = std::max(u.writes, writes_);
    if (group_->Over(reads_, writes_))
      PortError(*group_, index_, reads_, writes_, c.loop);
  }
  // the how-many-th access of `line` in this iteration, over the group's banks
  int Ordinal(const LoopClock &c, int line) {
    MemGroup &g = *group_;
    if (c.run != g_run_ || c.iter != g_iter_ || &g != g_group_) {
      g_run_ = c.run;
      g_iter_ = c.iter;
      g_group_ = &g;
      g_lines_.clear();
    }
    for (auto &x : g_lines_)
      if (x.first == line) return x.second++;
    g_lines_.push_back(std::make_pair(line, 1));
    return 0;
  }
  static const int kMaxAddrs = 8;
  T v_[N];
  long long wrun_[N], witer_[N];
  MemGroup *group_ = nullptr;
  int index_ = 0;
  long long run_ = -1, iter_ = -1;
  int reads_ = 0, writes_ = 0, raddr_[kMaxAddrs];
  // per thread: the lines of the group's accesses in this iteration (Ordinal)
  static thread_local long long g_run_, g_iter_;
  static thread_local MemGroup *g_group_;
  static thread_local std::vector<std::pair<int, int> > g_lines_;
};
template <typename T, int N>
thread_local long long Mem<T, N>::g_run_ = -1;
template <typename T, int N>
thread_local long long Mem<T, N>::g_iter_ = -1;
template <typename T, int N>
thread_local MemGroup *Mem<T, N>::g_group_ = nullptr;
template <typename T, int N>
thread_local std::vector<std::pair<int, int> > Mem<T, N>::g_lines_;

// the groups of the arrays declared so far, by variable (static arrays live on between runs)
inline std::vector<std::pair<const void *, MemGroup *> > &Groups() {
  static auto *v = new std::vector<std::pair<const void *, MemGroup *> >();
  return *v;
}

template <typename T, int N>
void AttachMem(Mem<T, N> &m, MemGroup *g, const std::string &bank) {
  m.Attach(g, (int)g->banks.size());
  g->banks.push_back(bank);
}
template <typename A, size_t K>
void AttachMem(A (&arr)[K], MemGroup *g, const std::string &bank) {
  for (size_t k = 0; k < K; ++k) AttachMem(arr[k], g, bank + "[" + std::to_string(k) + "]");
}

// HLSNN_MEM: the variable's group (made at its first declaration; a local array declared again
// at the same address in a later call gets a fresh group)
template <typename V>
void DeclareMem(V &var, const char *name, int kind, int distance) {
  std::lock_guard<std::mutex> hold(S().mu);
  for (auto &x : Groups()) {
    if (x.first == (const void *)&var && x.second->array == name) {
      x.second->kind = kind;
      x.second->distance = distance;
      x.second->banks.clear();
      AttachMem(var, x.second, "");
      return;
    }
  }
  MemGroup *g = new MemGroup();
  g->array = name;
  g->kind = kind;
  g->distance = distance;
  AttachMem(var, g, "");
  Groups().push_back(std::make_pair((const void *)&var, g));
}

template <typename V>
void DeclareSites(V &var, int loop, int reads, int writes) {
  MemGroup *g = nullptr;
  {
    std::lock_guard<std::mutex> hold(S().mu);
    for (auto &x : Groups())
      if (x.first == (const void *)&var) g = x.second;
  }
  if (!g) Fail("HLSNN_SITES before HLSNN_MEM");
  for (MemGroup::Declared &d : g->declared) {
    if (d.loop == loop) {
      d.reads = reads;
      d.writes = writes;
      return;
    }
  }
  g->declared.push_back(MemGroup::Declared{loop, reads, writes});
}

inline void PublishAll() {
  std::vector<MemGroup *> groups;
  {
    std::lock_guard<std::mutex> hold(S().mu);
    for (auto &x : Groups()) groups.push_back(x.second);
  }
  for (MemGroup *g : groups) g->Publish();
}

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
