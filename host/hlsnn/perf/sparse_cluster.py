"""Cycle model of ``sparse_cluster`` (``hls/engines/sparse_cluster/kernel.cpp.j2``).

The top function is one DATAFLOW region of ``units + 2`` processes joined by FIFOs:
``Dispatch`` reads the input stream and feeds every unit, ``Unit<m>`` (m < units) computes,
``Collect`` forwards the units' outputs to the output stream. Each process is a serial loop
nest, costed with the rules of :mod:`hlsnn.perf.model`; the region costs its slowest process
plus the fill. Per call (``n_groups`` passes of up to ``max_z`` output channels, each of
``n_rounds`` rounds of one output tile per unit)::

    Dispatch: DispatchGroups > DispatchRounds > JobUnit<m> (2 + 3*zg lanes per unit)
                                              > DispatchChannels (C) > DataUnit<m> (beats - 1)
                                                                     > Coefficients (beats - 1)
    Unit<m>:  UnitGroups > UnitRounds > ReadParams (zg), LoadFirst (entries of channel 0)
                                      > InputChannels (C) > CountWindows (k^2)
                                                          > MacLoop (max(steps, next entries))
                                      > OutPixels (zg*oh*ow) or PoolPixels (zg*oh/2*ow/2 + 1;
                                        twice zg*oh/2 when ow/2 = 1)
    Collect:  CollectGroups > CollectRounds > JobSizes (units), Merge<m> (output beats)

A unit has ``tile_w`` multipliers, one per output column of its tile. ``MacLoop`` applies one
non-zero coefficient per cycle to all of them (multiplier ``l`` takes the non-zeros of input
column ``l + kx`` in the rows that land in the tile, one per cycle); a coefficient at
``(ky, kx)`` takes ``steps = max(1, max_l n_l(ky, kx))`` cycles, ``n_l`` the non-zeros of the
multiplier's column in the window (``CountWindows`` tabulates it per channel). In the same
iterations the next channel's tile is read into the other buffer set, one entry a cycle, so
the loop runs ``max(sum of steps, entries of the next channel)`` iterations.

With ``weights_per_round: 2`` (source 003's U = 2) a unit holds a window of two coefficients:
a multiplier done with the older one goes on with the newer, and the window moves when every
multiplier is done with the older (at most once a cycle). ``CountWindows`` is not needed
then, and the coefficients' cycles follow the recursion of
:func:`hlsnn.measure.counting.sparse_mac_steps` instead of the sum of the steps.

What each loop body accesses per iteration, and the II that follows:

=================== ===== ====================================================== ====== =====
loop                II    accesses per iteration                                 II got depth
=================== ===== ====================================================== ====== =====
JobUnit<m>          1     ``in``: at most 1 read; ``job_q``: 1 write; ``hdr_q``:  1      2
                          at most 1 write
DataUnit<m>         1     ``in``: 1 read; ``data_q[m]``: 1 write (a beat)         1      2
Coefficients        1     ``in``: 1 read; each ``coef_q[m]``: 1 write (a beat)    1      2
ReadParams          3     ``job_q``: 3 reads                                      3      4
LoadFirst           1     ``data_q``: at most 1 read; per multiplier one          1      3
                          ``ebuf`` write
CountWindows        1     bitmap registers only (U = 1 only)                      1      3
MacLoop             1     per multiplier: its ``acc`` bank 1 read + 1 write       1      7
                          (true dual port), ``ebuf`` of the set computing 1 read
                          and of the set loading 1 write (simple dual port);
                          ``coef_q``, ``data_q``: at most 1 read each
OutPixels           1     ``acc`` bank: 1 read + 1 write (clear); ``res_q``: at   1      6
                          most 1 write
PoolPixels          1     per ``acc`` bank: at most 1 read + 1 write (a window's 1      8
                          top row from two banks, the window before's bottom
                          row from two others); ``res_q``: at most 1 write
Merge<m>            1     ``res_q[m]``: 1 read; ``out``: 1 write (a beat)         1      2
MergeBins/SendStats 1     one FIFO read or write                                 1      2
=================== ===== ====================================================== ====== =====

Depths: a FIFO read and the store it feeds, 2; ``LoadFirst`` adds the rank (a popcount of
the column's bitmap), ``CountWindows`` the popcount and the maximum over the multipliers.
``MacLoop``: the entry's place (popcounts) 1, the ``ebuf`` read 1, the ``acc`` read 2 (BRAM
latency), the 8x8 product and the add 2, the write 1: 7. ``OutPixels``: ``acc`` read 2, bias
add and ReLU 1, rounding shifter and saturation 1, lane packing and the FIFO write 2.
``PoolPixels``: ``acc`` read 2, the window's two banks (a ``tile_w / 2``-way multiplexer) 1, bias
add 1, the maximum with the top row's and ReLU 1, then as ``OutPixels`` 3.

``OutPixels`` and ``PoolPixels`` read each ``acc`` word once and clear it in the same iteration
(``DEPENDENCE variable = acc inter false``; the strict C-simulation fails a read of a word
written in the same loop run fewer than ``acc_distance`` iterations before). A bank has one read
port and a 2x2 window's two rows sit in the same two banks, so ``PoolPixels`` reads a window's
top row in one iteration and its bottom row in the next, together with the next window's top
row from the next two banks: ``n + 1`` iterations for ``n`` windows, or ``2n`` when the output
is one window wide (every window in banks 0 and 1).

Unpipelined loops and their own cycles per iteration: ``DispatchGroups``, ``UnitGroups``,
``CollectGroups``, ``DispatchRounds`` (``Align``), ``CollectRounds``, ``SumSaturation``,
``MergeStats``, ``GroupStart`` 1; ``UnitRounds`` 3 (``oh`` and ``ow``: two reads of one
FIFO, then channel 0's count); ``JobSizes`` 2 (two ``hdr_q`` reads); ``InputChannels`` 3
(the coefficient count, the next channel's count, the first coefficient);
``DispatchChannels`` ``units + 1`` (the first beat of each unit's data segment and of the
coefficient segment, one read each from the one input stream).

``GroupStart`` sits in a helper that every process inlines; its counter is shared, so each
process is charged ``1 / (units + 2)`` of it.

Fill: a unit starts only after ``Dispatch`` has sent every unit its job segment of the first
round, and the region ends only after ``Collect`` has forwarded the last round. The fill is
taken as one round of job dispatch (the ``JobUnit`` cycles divided by the rounds) plus one
round of forwarding (the ``Merge`` cycles divided by the rounds). Taking the slowest
process's *total* assumes the FIFOs (a whole channel's segment per unit) absorb the
per-channel imbalance between units; where one unit is slowest on some channels and another
on others, the real region is slower, so this is a lower bound for unbalanced maps.

Phases and bound: ``Dispatch`` is the *input stream* (a beat per cycle), the units are
*compute*, ``Collect`` is the *output stream*; the bound is the slowest of them. The peak is
``units * tile_w`` MAC/cycle (every multiplier busy with a product of non-zeros); the useful
MACs are the products that land in an output tile (``EffectualMacs``).
"""
from __future__ import annotations

import functools

from .model import CallCycles, Loop, loop_costs

NAME = "sparse_cluster"

STREAM, S2P = "stream", "ram_s2p"


def dispatch_loops(p):
    return _dispatch_loops(p["units"])


@functools.lru_cache(maxsize=None)
def _dispatch_loops(units):
    rows = [Loop("DispatchGroups", None, 1, "input stream"), Loop("DispatchRounds", None, 1, "input stream"),
            Loop("DispatchChannels", None, units + 1, "input stream"),
            Loop("Coefficients", 1, 2, "input stream", {"in": (STREAM, 1), "coef_q[m]": (STREAM, 1)})]
    for m in range(units):
        rows.append(Loop(f"JobUnit{m}", 1, 2, "input stream", {"in": (STREAM, 1), "job_q": (STREAM, 1)}))
        rows.append(Loop(f"DataUnit{m}", 1, 2, "input stream", {"in": (STREAM, 1), "data_q": (STREAM, 1)}))
    return tuple(rows)


_UNIT_LOOPS = (
    Loop("UnitGroups", None, 1, "compute"), Loop("UnitRounds", None, 3, "compute"),
    Loop("ReadParams", 3, 4, "compute", {"job_q": (STREAM, 3)}),
    Loop("LoadFirst", 1, 3, "compute", {"data_q": (STREAM, 1), "ebuf[l]": (S2P, 1)}),
    Loop("InputChannels", None, 3, "compute"),
    Loop("CountWindows", 1, 3, "compute"),
    Loop("MacLoop", 1, 7, "compute", {"acc[l]": (S2P, 2), "ebuf[l]": (S2P, 2), "coef_q": (STREAM, 1),
                                      "data_q": (STREAM, 1)}),
    Loop("OutPixels", 1, 6, "compute", {"acc[l]": (S2P, 2), "res_q": (STREAM, 1)}),
    Loop("PoolPixels", 1, 8, "compute", {"acc[l]": (S2P, 2), "res_q": (STREAM, 1)}),
    Loop("SendStats", 1, 2, "compute", {"stats_q": (STREAM, 1)}),
)


def unit_loops(p):
    return _UNIT_LOOPS


def collect_loops(p):
    return _collect_loops(p["units"])


@functools.lru_cache(maxsize=None)
def _collect_loops(units):
    rows = [Loop("CollectGroups", None, 1, "output stream"), Loop("CollectRounds", None, 1, "output stream"),
            Loop("JobSizes", None, 2, "output stream"), Loop("SumSaturation", None, 1, "output stream"),
            Loop("MergeStats", None, 1, "output stream"),
            Loop("MergeBins", 1, 2, "output stream", {"stats_q[m]": (STREAM, 1)}),
            Loop("StatsBins", None, 1, "output stream"),
            Loop("StatsLanes", 1, 2, "output stream", {"out": (STREAM, 1)})]
    for m in range(units):
        rows.append(Loop(f"Merge{m}", 1, 2, "output stream", {"res_q[m]": (STREAM, 1), "out": (STREAM, 1)}))
    return tuple(rows)


def loops(p):
    """Every loop row (Dispatch's, one unit's, Collect's)."""
    return dispatch_loops(p) + unit_loops(p) + collect_loops(p)


def process_cycles(p, counts):
    """``{process: cycles}`` of one call: ``Dispatch``, ``Unit 0`` ... ``Unit units-1``, ``Collect``."""
    share = counts.get("GroupStart", (0, 0))[0] / (p["units"] + 2)
    out = {"Dispatch": sum(loop_costs(dispatch_loops(p), counts).values()) + share}
    for m in range(p["units"]):
        out[f"Unit {m}"] = sum(loop_costs(unit_loops(p), counts, suffix=f".{m}").values()) + share
    out["Collect"] = sum(loop_costs(collect_loops(p), counts).values()) + share
    return out


def fill_cycles(p, counts):
    rounds = max(1, counts.get("DispatchRounds", (0, 0))[0])
    jobs = sum(loop_costs([lp for lp in dispatch_loops(p) if lp.name.startswith("JobUnit")], counts).values())
    merges = sum(loop_costs([lp for lp in collect_loops(p) if lp.name.startswith("Merge")
                             and lp.name[5:].isdigit()], counts).values())
    return (jobs + merges) / rounds


def call_cycles(p, counts):
    """Modelled cycles of one call: the slowest process plus the fill, plus the call overhead."""
    from .model import CALL_CYCLES
    procs = process_cycles(p, counts)
    slowest = max(procs.items(), key=lambda kv: kv[1])
    fill = fill_cycles(p, counts)
    total = int(round(slowest[1] + fill)) + CALL_CYCLES
    phase = {"Dispatch": "input stream", "Collect": "output stream"}.get(slowest[0], "compute")
    phases = {phase: total - int(round(fill)) - CALL_CYCLES, "serial: dataflow fill": int(round(fill))}
    return CallCycles(total, {k: v for k, v in phases.items() if v}, phase,
                      {k: int(round(v)) for k, v in procs.items()})


def peak_macs_per_cycle(p, mode=None):
    return p["units"] * p["tile_w"]
