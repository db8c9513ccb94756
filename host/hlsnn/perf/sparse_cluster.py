"""Cycle model of ``sparse_cluster`` (``hls/engines/sparse_cluster/kernel.cpp.j2``).

The top function is one DATAFLOW region of ``units + 2`` processes joined by FIFOs:
``Dispatch`` reads the input stream and feeds every unit, ``Unit<m>`` (m < units) computes,
``Collect`` merges the units' outputs into the output stream. Each process is a serial loop
nest, costed with the rules of :mod:`hlsnn.perf.model`; the region costs its slowest process
plus the fill. Per call (``n_groups`` passes of up to ``max_z`` output channels, each of
``n_rounds`` rounds of one output tile per unit)::

    Dispatch: DispatchGroups > DispatchRounds > JobUnit<m> (2 + 3*zg lanes per unit)
                                              > DispatchChannels (C) > DataUnit<m> (2*nnz lanes)
                                                                     > Coefficients (2*nnz_w lanes)
    Unit<m>:  UnitGroups > UnitRounds > ReadParams (zg), ClearAcc (zg*tile_h*tile_w)
                                      > InputChannels (C) > LoadTile (nnz of the tile's channel)
                                                          > NonZeroCoefficients (nnz_w)
                                                            > NonZeroInputs (nnz of the tile's channel)
                                      > OutChannels > OutRows > OutCols (output pixels)
    Collect:  CollectGroups > CollectRounds > JobSizes (units), Merge<m> (output lanes)

What each loop body accesses per iteration, and the II that follows (``acc`` is a
true-dual-port BRAM, ``BIND_STORAGE ram_t2p``: two accesses per cycle):

=================== ===== ====================================================== ====== =====
loop                II    accesses per iteration                                 II got depth
=================== ===== ====================================================== ====== =====
JobUnit<m>          1     ``in``: at most 1 read; ``job_q``: 1 write; ``hdr_q``:  1      2
                          at most 1 write
DataUnit<m>         1     ``in``: at most 1 read; ``data_q``: 1 write             1      2
Coefficients        1     ``in``: at most 1 read; each ``coef_q[m]``: 1 write      1      2
ReadParams          3     ``job_q``: 3 reads                                      3      4
ClearAcc            1     ``acc``: 1 write (2 ports)                              1      3
LoadTile            2     ``data_q``: 2 reads; value/row/col buffers: 1 write     2      3
NonZeroInputs       1     ``acc``: 1 read + 1 write (2 ports); value/row/col      1      7
                          buffers: 1 read each
OutCols             2     ``acc``: 4 reads with pooling, else 1 (2 ports: 2);     2      7
                          ``res_q``: 2 writes raw, else 1
Merge<m>            1     ``res_q[m]``: 1 read; ``out``: at most 1 write          1      3
MergeBins/SendStats 1     one FIFO read or write                                 1      2
=================== ===== ====================================================== ====== =====

No loop is pushed above its pragma's II: ``ReadParams``, ``LoadTile`` and ``OutCols`` carry
the II their accesses need.

Depths: a FIFO or stream read and the store it feeds, 2 (3 with the index arithmetic of
``ClearAcc`` and ``LoadTile``, or the ``Put`` of ``Merge``). ``NonZeroInputs``: buffer reads
(1), index subtract and bounds test (1), ``acc`` read (2, BRAM latency), the 8x8 product and
the add (2), the write (1): 7. ``OutCols``: ``acc`` read (2), pooling max (2), bias add/ReLU
(1), rounding shifter and saturation (1), the FIFO write (1): 7.

Unpipelined loops and their own cycles per iteration: ``DispatchGroups``, ``UnitGroups``,
``CollectGroups``, ``DispatchRounds`` (``Align``), ``CollectRounds``, ``OutChannels``,
``OutRows``, ``SumSaturation``, ``MergeStats``, ``GroupStart`` 1; ``UnitRounds`` 2 (``oh`` and
``ow``: two reads of one FIFO); ``JobSizes`` 2 (two ``hdr_q`` reads); ``InputChannels`` 2 (the
``nd`` read, the ``nw`` read); ``NonZeroCoefficients`` 3 (two ``coef_q`` reads, the start of
the inner pipeline); ``DispatchChannels`` ``units + 2`` (one count read per unit from the one
input stream, the coefficient count and its broadcast).

``GroupStart`` sits in a helper that every process inlines; its counter is shared, so each
process is charged ``1 / (units + 2)`` of it.

Fill: a unit starts only after ``Dispatch`` has sent every unit its job segment of the first
round, and the region ends only after ``Collect`` has merged the last round. The fill is
taken as one round of job dispatch (the ``JobUnit`` cycles divided by the rounds) plus one
round of merging (the ``Merge`` cycles divided by the rounds). Taking the slowest process's
*total* assumes the FIFOs (one channel of data per unit) absorb the per-channel imbalance
between units; where one unit is slowest on some channels and another on others, the real
region is slower, so this is a lower bound for unbalanced maps.

Phases and bound: ``Dispatch`` is the *input stream* (it moves one 16-bit lane per cycle),
the units are *compute*, ``Collect`` is the *output stream*; the bound is the slowest of
them. The peak is ``units`` MAC/cycle (one product of non-zeros per unit per cycle); the
useful MACs are the products that land in an output tile (``EffectualMacs``).
"""
from __future__ import annotations

import functools

from .model import CallCycles, Loop, loop_costs

NAME = "sparse_cluster"
STREAM, RAM, RAM2 = "stream", "ram_1p", "ram_t2p"


def dispatch_loops(p):
    return _dispatch_loops(p["units"])


@functools.lru_cache(maxsize=None)
def _dispatch_loops(units):
    rows = [Loop("DispatchGroups", None, 1, "input stream"), Loop("DispatchRounds", None, 1, "input stream"),
            Loop("DispatchChannels", None, units + 2, "input stream"),
            Loop("Coefficients", 1, 2, "input stream", {"in": (STREAM, 1), "coef_q[m]": (STREAM, 1)})]
    for m in range(units):
        rows.append(Loop(f"JobUnit{m}", 1, 2, "input stream", {"in": (STREAM, 1), "job_q": (STREAM, 1)}))
        rows.append(Loop(f"DataUnit{m}", 1, 2, "input stream", {"in": (STREAM, 1), "data_q": (STREAM, 1)}))
    return tuple(rows)


def unit_loops(p):
    return _unit_loops(p["units"])


@functools.lru_cache(maxsize=None)
def _unit_loops(units):
    return (
        Loop("UnitGroups", None, 1, "compute"), Loop("UnitRounds", None, 2, "compute"),
        Loop("ReadParams", 3, 4, "compute", {"job_q": (STREAM, 3)}),
        Loop("ClearAcc", 1, 3, "compute", {"acc": (RAM2, 1)}),
        Loop("InputChannels", None, 2, "compute"),
        Loop("LoadTile", 2, 3, "compute", {"data_q": (STREAM, 2), "val_buf": (RAM, 1)}),
        Loop("NonZeroCoefficients", None, 3, "compute"),
        Loop("NonZeroInputs", 1, 7, "compute", {"acc": (RAM2, 2), "val_buf": (RAM, 1)}),
        Loop("OutChannels", None, 1, "compute"), Loop("OutRows", None, 1, "compute"),
        Loop("OutCols", 2, 7, "compute", {"acc": (RAM2, 4), "res_q": (STREAM, 2)}),
        Loop("SendStats", 1, 2, "compute", {"stats_q": (STREAM, 1)}),
    )


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
        rows.append(Loop(f"Merge{m}", 1, 3, "output stream", {"res_q[m]": (STREAM, 1), "out": (STREAM, 1)}))
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
    return p["units"]
