// The strict C-simulation's memory banks (issue 30): hlsnn::Mem<T, N>, its read-after-write
// distance and per-loop port checks. Part of hlsnn/csim_strict.h (which includes it inside its
// namespace setup); C-simulation only, never synthesized.
#ifndef HLSNN_CSIM_STRICT_MEM_H_
#define HLSNN_CSIM_STRICT_MEM_H_

namespace hlsnn {
namespace strict {

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
        if (r && w && distance <= 0 && kind != kRegs && !s.error_kind) {
          // a memory a pipelined loop both reads and writes: the pragma DEPENDENCE inter false
          // needs a checked distance, and without the pragma the loop pays the dependence
          s.error_kind = 2;
          s.error = "loop " + LoopName(loop) + ": bank '" + array + banks[b] + "' is read and written in the loop " +
                    "with no checked read-after-write distance (HLSNN_MEM(" + array + ", kind, 0)): declare " +
                    "#pragma HLS DEPENDENCE variable = " + array + " inter false and its distance";
        }
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

}  // namespace strict
}  // namespace hlsnn

#endif  // HLSNN_CSIM_STRICT_MEM_H_
