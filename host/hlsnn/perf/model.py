"""The scheduler-like cycle model shared by the engines' pages (``perf/<engine>.py``).

A kernel's C-simulation counts, per labelled loop, its iterations and its entries (the
times it was started with at least one iteration; ``hls/include/hlsnn/counters.h``). Each
engine's page lists its loops as :class:`Loop` rows: the pragma's II, what the loop body
accesses per iteration (stream and memory ports), the depth, and the phase the loop belongs
to. The rules, as the HLS scheduler applies them:

* **Pipelined loop**: one entry of ``n`` iterations costs ``(n - 1) * II + depth``, so all
  entries together cost ``(iterations - entries) * II + entries * depth``.
* **The II the tool gets** is the larger of the II derived from the rendered C++
  (:mod:`~hlsnn.perf.schedule`: ports, carried dependences, register loop-backs, m_axi bursts) and the
  one below; the one below is the pragma's, unless the body accesses one port more often per
  iteration than the II allows: a stream (AXI-Stream or FIFO) takes one read or one write per
  cycle, a single-port memory one access, a true-dual-port BRAM two. Then the II is
  ``ceil(accesses / ports)`` (Vitis reports this as an II violation and schedules it so).
  Accesses in exclusive branches count once each: the scheduler still needs a port for each.
* **Unpipelined loop**: each iteration costs its body. Nested loops are rows of their own,
  so a row's ``depth`` is the loop's *own* cycles per iteration: its straight-line code plus
  one cycle of loop control (the exit test and index update), not its inner loops.
* **Unrolled loops** are copies in space, not iterations in time: they have no row (their
  work sits in the cycle of the loop around them) and are not counted.
* **Sequential phases add up**: a kernel without DATAFLOW costs the sum of its loops' costs
  plus ``CALL_CYCLES`` per call.
* **DATAFLOW region**: its processes run concurrently, joined by FIFOs; the region costs its
  slowest process plus the fill (the page says what fill it assumes).

A loop that is never entered costs nothing here (its exit test overlaps the state before it);
that is an approximation of at most one cycle per skipped loop.
"""
from __future__ import annotations

import contextvars
import math
from dataclasses import dataclass, field

#: ``{loop: II}`` derived from the rendered C++ (:mod:`~hlsnn.perf.schedule`) for the config whose cycles
#: are being modelled: a pipelined :class:`Loop` costed while it is set takes the larger of its
#: own II and this one (:func:`hlsnn.perf.calls.call_cycles` sets it around a page's model)
DERIVED_II = contextvars.ContextVar("hlsnn_derived_ii", default={})

#: cycles per kernel call outside every loop: ap_start is latched, the scalar registers are
#: read (one state), and ap_done/ap_idle are raised (one state)
CALL_CYCLES = 2

#: per-cycle accesses of one port kind (``ram_s2p``: a simple-dual-port RAM, one read port and
#: one write port; its accesses are listed as one read plus one write)
PORTS = {"stream": 1, "ram_1p": 1, "ram_t2p": 2, "ram_s2p": 2}


@dataclass(frozen=True)
class Loop:
    """One labelled loop of a kernel, as the scheduler sees it.

    ``ii``: the pragma's II (None: not pipelined). ``depth``: pipelined, the latency of one
    iteration; not pipelined, the loop's own cycles per iteration. ``access``: per iteration,
    ``{port name: (kind, accesses)}`` with kind a key of :data:`PORTS`. ``phase``: what the
    loop's time is spent on ("compute", "input stream", "output stream" or "serial: ...").
    """

    name: str
    ii: int | None
    depth: int
    phase: str
    access: dict = field(default_factory=dict)
    why: str = ""

    @property
    def pipelined(self):
        return self.ii is not None

    @property
    def ii_got(self) -> int | None:
        """The II the tool achieves: the pragma's, or more when a port is over-subscribed."""
        if self.ii is None:
            return None
        need = max([math.ceil(n / PORTS[kind]) for kind, n in self.access.values()] or [1])
        return max(self.ii, need)

    def __post_init__(self):
        object.__setattr__(self, "_ii", self.ii_got)     # fixed per row: computed once

    def cost(self, iters: int, entries: int) -> int:
        if iters <= 0:
            return 0
        if self.ii is None:
            return iters * self.depth
        entries = max(1, min(entries, iters))
        ii = max(self._ii, DERIVED_II.get().get(self.name, 1))     # the II derived from the C++ (.schedule)
        return (iters - entries) * ii + entries * self.depth


def loop_costs(loops, counts, *, suffix=""):
    """``{loop name: cycles}`` for the loops of a page, from ``counts`` (``{label: (iters, entries)}``)."""
    out = {}
    for lp in loops:
        it, en = counts.get(lp.name + suffix, (0, 0))
        out[lp.name] = lp.cost(it, en)
    return out


def by_phase(loops, costs):
    """Cycles summed per phase."""
    phases = {}
    for lp in loops:
        c = costs.get(lp.name, 0)
        if c:
            phases[lp.phase] = phases.get(lp.phase, 0) + c
    return phases


def bound_of(phases):
    """The phase with the most cycles (ties: the first listed)."""
    if not phases:
        return "none"
    return max(phases.items(), key=lambda kv: kv[1])[0]


@dataclass
class CallCycles:
    """The modelled cycles of one kernel call: total, per phase, and the bound (the phase, or
    for a DATAFLOW region the slowest process, that limits the call)."""

    cycles: int
    phases: dict
    bound: str
    processes: dict | None = None   #: DATAFLOW only: cycles of each process


@dataclass
class KernelCycles:
    """The modelled cycles of one operation (the sum over the kernel calls the transparent
    tiling made): ``cycles``, ``calls``, ``phases`` (cycles per phase, summed over calls),
    ``bound`` (the phase with the most cycles over all calls), ``counts`` (the loop counters,
    summed over calls), ``per_call`` (one :class:`CallCycles` per call), ``beats_in`` and
    ``beats_out`` (stream beats of all calls), ``processes`` (DATAFLOW engines: each process's
    cycles, summed over calls; the region took the slowest plus the fill)."""

    cycles: int = 0
    calls: int = 0
    phases: dict = field(default_factory=dict)
    bound: str = "none"
    counts: dict = field(default_factory=dict)
    per_call: list = field(default_factory=list)
    beats_in: int = 0
    beats_out: int = 0
    processes: dict = field(default_factory=dict)

    def add(self, call: CallCycles, counts: dict):
        self.cycles += call.cycles
        self.calls += 1
        for k, v in call.phases.items():
            self.phases[k] = self.phases.get(k, 0) + v
        for k, v in (call.processes or {}).items():
            self.processes[k] = self.processes.get(k, 0) + v
        for k, (i, e) in counts.items():
            i0, e0 = self.counts.get(k, (0, 0))
            self.counts[k] = (i0 + i, e0 + e)
        self.per_call.append(call)
        self.bound = bound_of(self.phases)
        return self

    def __int__(self):
        return int(self.cycles)

    def as_dict(self):
        return {"cycles": int(self.cycles), "calls": self.calls, "bound": self.bound,
                "beats_in": self.beats_in, "beats_out": self.beats_out,
                "phases": {k: int(v) for k, v in self.phases.items()}}


def serial_call(loops, counts) -> CallCycles:
    """One call of a kernel without DATAFLOW: the loops' costs add up, plus :data:`CALL_CYCLES`."""
    costs = loop_costs(loops, counts)
    phases = by_phase(loops, costs)
    return CallCycles(sum(costs.values()) + CALL_CYCLES, phases, bound_of(phases))


def page_table(loops) -> str:
    """The loop table of a page as text (for ``hlsnn perf --loops`` and the docs)."""
    rows = [("loop", "pragma II", "accesses per iteration", "II got", "depth", "phase")]
    for lp in loops:
        acc = ", ".join(f"{p} {n}x ({k})" for p, (k, n) in lp.access.items()) or "-"
        rows.append((lp.name, str(lp.ii) if lp.ii else "not pipelined", acc,
                     str(lp.ii_got) if lp.ii else "-", str(lp.depth), lp.phase))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip() for r in rows)
