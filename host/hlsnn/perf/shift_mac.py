"""Cycle model of ``shift_mac`` (``hls/engines/shift_mac/kernel.cpp.j2``).

The top function is one DATAFLOW region of three processes joined by FIFOs: ``Load`` reads
the input stream a beat per cycle and forwards parameters (``pq``), activations (``xq``) and
weight steps (``wq``, one tile deep); ``Compute`` holds the weights and activations on chip
and runs the units; ``Drain`` requantizes and writes the outputs a beat per cycle. Each
process is a serial loop nest, costed with the rules of :mod:`hlsnn.perf.model`. Per call::

    Load:    ReadParams (4N/lanes beats)
             GEMM: ReadSamples (B) > ReadSampleBeats (K/lanes); ReadTiles (T) > ReadSteps (K*step_beats)
             conv: ReadTiles > ReadSteps; RowBeatsSum (C); ReadRows (H) > ReadRowBeats (C*W/lanes)
    Compute: GEMM: LoadSamples (B) > LoadSampleBeats (K/lanes)
             conv: WidthWords, SlotWords (C), SlotSpan (k), PadShift (pad),
                   LoadTiles (T) > LoadSteps (K), LinePrologue (k-pad rows) > PrologueBeats
             Chunks (GEMM 1, conv H' output rows) > Tiles (T) > Groups (B/cols, conv W'/cols)
                                                              > Steps (max(K, rows))
                                                 > LineTail (what the steps left of a row)
             PushTail (rows)
    Drain:   DrainParams; DrainChunks > DrainTiles > DrainGroups > DrainRows
             (rows x ceil(cols/lanes), twice in dual PoT, raw_bits/16 times in the raw
             output mode: a beat of wide values per cycle); StatsBins > StatsLanes

``T`` = ceil(N / tile_n) weight tiles (``tile_n`` = ``2*rows`` in dual PoT, else ``rows``).
A GEMM's weights stream once per call (the first group of a tile takes its steps from ``wq``
and stores them; the other groups read the store); a convolution's go to the store first,
then its input rows stream through the line buffer, one row during the output row before
the one that needs it. A group's accumulators are copied to shadow registers at its last
step and handed to ``Drain`` one unit row per step during the next group's first ``rows``
steps (so a group takes at least ``rows`` steps); ``PushTail`` hands over the last group's.

What each loop body accesses per iteration, and the II that follows (``wstore`` and
``lbuf`` are simple-dual-port RAMs, ``BIND_STORAGE ram_s2p``: one read and one write per
cycle):

=============== ===== =================================================== ====== =====
loop            II    accesses per iteration                              II got depth
=============== ===== =================================================== ====== =====
ReadParams      1     ``in``: 1 read; ``pq``: 1 write                      1      2
ReadSteps       1     ``in``: 1 read; ``wq``: at most 1 write              1      2
ReadSampleBeats 1     ``in``: 1 read; ``xq``: 1 write                      1      2
ReadRowBeats    1     ``in``: 1 read; ``xq``: 1 write                      1      2
LoadSampleBeats 1     ``xq``: 1 read; one ``xbuf[c]`` bank: 1 write        1      3
LoadSteps       1     ``wq``: 1 read; ``wstore``: 1 write                  1      3
PrologueBeats   1     ``xq``: 1 read; each ``lbuf`` bank: at most 1 write  1      3
Steps           1     ``wq``: at most 1 read; ``wstore``: 1 read and 1     1      6
                      write (2 ports); each ``xbuf[c]`` bank: 1 read;
                      each ``lbuf`` bank: 1 read and at most 1 write (2
                      ports); ``xq``: at most 1 read; each ``accq[c]``:
                      at most 1 write
PushTail        1     each ``accq[c]``: 1 write                            1      2
LineTail        1     ``xq``: 1 read; each ``lbuf`` bank: at most 1 write  1      3
DrainParams     1     ``pq``: 1 read; each ``params`` bank: at most 1      1      2
                      write
DrainRows       1     each ``accq[c]``: at most 1 read; one ``params``     1      8
                      bank: 1 read; ``out``: at most 1 write
StatsLanes      1     ``out``: at most 1 write                             1      2
=============== ===== =================================================== ====== =====

Every loop reaches its pragma's II: the parameters come a beat per cycle (four lanes per
neuron), a line-buffer beat's ``lanes`` pixels fall in distinct banks (there are
``max(cols, lanes)``), and the step reads every bank once.

Depths: a stream read and its store, 2 (3 with the lane packing or the bank select of the
stores). ``Steps``: the weight store's read (2), the decode, the delta adder and the
activation select (1), the two shifters (1), adder 34 (1), the accumulator (1): 6 (the
hand-over of a shadow row to the FIFOs runs beside it).
``DrainRows``: the FIFO read (1), the parameter read (2), the pot_sum adder (1), the bias add
and ReLU (1), the rounding shifter and its saturation (2), the write (1): 8.

Unpipelined loops and their own cycles per iteration: ``ReadTiles``, ``ReadSamples``,
``ReadRows``, ``RowBeatsSum``, ``WidthWords``, ``SlotWords``, ``SlotSpan``, ``PadShift``,
``LoadSamples``, ``LoadTiles``, ``LinePrologue``, ``Tiles``, ``DrainChunks``, ``DrainTiles``,
``StatsBins`` 1; ``Chunks`` and ``Groups`` (the pass state), ``DrainGroups`` 2.

**The region.** Each process's cycles are the sum of its loops. The call takes the longest
of three paths through the region, plus ``CALL_CYCLES``:

* *compute*: the parameter beats ``Load`` forwards before any activation (``ReadParams``),
  the cycles ``Compute`` waits for weight steps (they arrive one per ``step_beats`` cycles:
  the first pass of a GEMM's first tile waits ``K * (step_beats - 1)``, a convolution's
  ``LoadSteps`` ``T*K * (step_beats - 1)``; a GEMM's later tiles wait in ``wq`` while the
  tile before computes), all of ``Compute``, and the drain of the last group;
* *load*: all of ``Load``, the compute after its last beat (a streamed GEMM: the last tile
  but its first pass; resident: every pass; a convolution: the output rows from the one
  that loads the last input row on), and the drain of the last group;
* *drain*: ``Drain`` from the first group's accumulators on (the compute path up to the end
  of the first group, plus ``rows`` steps of the second), or from its parameters if they come
  later.

The bound is the phase with the most cycles on the longest path: *compute* (the units'
passes), *input stream: parameters / weights / activations* (waiting for or loading beats),
*output stream* (the drain), or *serial: dataflow fill* (the drain path's wait). The peak
is ``rows * cols`` MAC/cycle in two-hot mode and with ``pot_sum`` (one weight per unit per
cycle), and ``2 * rows * cols`` in dual PoT (two weights per unit per cycle).
"""
from __future__ import annotations

from .model import CALL_CYCLES, CallCycles, Loop, bound_of, loop_costs

NAME = "shift_mac"

STREAM = "stream"
RAM = "ram_1p"
RAM_S2P = "ram_s2p"

ACTS, WEIGHTS, PARAMS = "input stream: activations", "input stream: weights", "input stream: parameters"

_LOAD_LOOPS = (
    Loop("ReadParams", 1, 2, PARAMS, {"in": (STREAM, 1), "pq": (STREAM, 1)}),
    Loop("ReadTiles", None, 1, WEIGHTS),
    Loop("ReadSteps", 1, 2, WEIGHTS, {"in": (STREAM, 1), "wq": (STREAM, 1)}),
    Loop("ReadSamples", None, 1, ACTS),
    Loop("ReadSampleBeats", 1, 2, ACTS, {"in": (STREAM, 1), "xq": (STREAM, 1)}),
    Loop("RowBeatsSum", None, 1, ACTS),
    Loop("ReadRows", None, 1, ACTS),
    Loop("ReadRowBeats", 1, 2, ACTS, {"in": (STREAM, 1), "xq": (STREAM, 1)}),
)
_COMPUTE_LOOPS = (
    Loop("WidthWords", None, 1, "compute"),
    Loop("SlotWords", None, 1, "compute"),
    Loop("SlotSpan", None, 1, "compute"),
    Loop("PadShift", None, 1, "compute"),
    Loop("LoadSamples", None, 1, ACTS),
    Loop("LoadSampleBeats", 1, 3, ACTS, {"xq": (STREAM, 1), "xbuf[c]": (RAM, 1)}),
    Loop("LoadTiles", None, 1, WEIGHTS),
    Loop("LoadSteps", 1, 3, WEIGHTS, {"wq": (STREAM, 1), "wstore": (RAM_S2P, 1)}),
    Loop("LinePrologue", None, 1, ACTS),
    Loop("PrologueBeats", 1, 3, ACTS, {"xq": (STREAM, 1), "lbuf[b]": (RAM_S2P, 1)}),
    Loop("Chunks", None, 2, "compute"),
    Loop("Tiles", None, 1, "compute"),
    Loop("Groups", None, 2, "compute"),
    Loop("Steps", 1, 6, "compute", {"wq": (STREAM, 1), "wstore": (RAM_S2P, 2), "xbuf[c]": (RAM, 1),
                                    "lbuf[b]": (RAM_S2P, 2), "xq": (STREAM, 1), "accq[c]": (STREAM, 1)}),
    Loop("PushTail", 1, 2, "compute", {"accq[c]": (STREAM, 1)}),
    Loop("LineTail", 1, 3, ACTS, {"xq": (STREAM, 1), "lbuf[b]": (RAM_S2P, 1)}),
)
_OUT = "output stream"
_DRAIN_LOOPS = (
    Loop("DrainParams", 1, 2, _OUT, {"pq": (STREAM, 1), "params[q]": (RAM, 1)}),
    Loop("DrainChunks", None, 1, _OUT),
    Loop("DrainTiles", None, 1, _OUT),
    Loop("DrainGroups", None, 2, _OUT),
    Loop("DrainRows", 1, 8, _OUT, {"accq[c]": (STREAM, 1), "params[q]": (RAM, 1), "out": (STREAM, 1)}),
    Loop("StatsBins", None, 1, _OUT),
    Loop("StatsLanes", 1, 2, _OUT, {"out": (STREAM, 1)}),
)


def load_loops(p):
    return _LOAD_LOOPS


def compute_loops(p):
    return _COMPUTE_LOOPS


def drain_loops(p):
    return _DRAIN_LOOPS


def loops(p):
    """Every loop row (Load's, Compute's, Drain's)."""
    return load_loops(p) + compute_loops(p) + drain_loops(p)


def process_cycles(p, counts):
    """``{process: cycles}`` of one call: ``Load``, ``Compute``, ``Drain``."""
    return {"Load": sum(loop_costs(load_loops(p), counts).values()),
            "Compute": sum(loop_costs(compute_loops(p), counts).values()),
            "Drain": sum(loop_costs(drain_loops(p), counts).values())}


def _it(counts, name):
    return counts.get(name, (0, 0))[0]


def _en(counts, name):
    return max(1, counts.get(name, (0, 0))[1])


def call_cycles(p, counts):
    """Modelled cycles of one call: the longest of the three paths (page docstring) plus
    ``CALL_CYCLES``; ``phases`` break that path down, ``processes`` are the busy cycles."""
    from ..engines.shift_mac.spec import step_beats
    costs = loop_costs(loops(p), counts)
    procs = process_cycles(p, counts)
    sb = step_beats(p)                  # beats per weight step
    conv = _it(counts, "ReadRows") > 0 or _it(counts, "Chunks") > 1 or _it(counts, "WidthWords") > 0
    k_pass = _it(counts, "Steps") / _en(counts, "Steps")            # K: steps per pass
    passes = _it(counts, "Groups")
    tiles = max(1, _it(counts, "Tiles"))
    chunks = max(1, _it(counts, "Chunks"))
    streamed_gemm = not conv and _it(counts, "ReadSteps") > 0
    # one group's drain (the last, after the last push) and the statistics segment
    d_tail = (costs["DrainRows"] + costs["DrainGroups"]) / max(1, _it(counts, "DrainGroups")) \
        + costs["StatsBins"] + costs["StatsLanes"]
    params_in = costs["ReadParams"]
    if conv:
        w_wait = _it(counts, "LoadSteps") * (sb - 1)
    else:
        w_wait = k_pass * (sb - 1) if streamed_gemm else 0
    passes_cost = sum(costs[n] for n in ("Chunks", "Tiles", "Groups", "Steps", "PushTail", "LineTail"))
    if conv:
        h, ks, pad = _it(counts, "ReadRows"), _it(counts, "SlotSpan"), _it(counts, "PadShift")
        last = h - 1 + pad - ks           # the output row that loads the last input row
        after = passes_cost * (chunks - max(0, last)) / chunks if last >= 0 else passes_cost
    elif streamed_gemm:
        after = passes_cost / tiles - k_pass
    else:
        after = passes_cost
    prologue = procs["Compute"] - passes_cost
    # the first group's accumulators reach Drain during the second group's first rows steps
    first_group = (costs["Steps"] + costs["Groups"]) / max(1, passes) + p["rows"]
    paths = {
        "compute": {PARAMS: params_in, WEIGHTS: w_wait, ACTS: _phase(compute_loops(p), costs, ACTS),
                    "compute": procs["Compute"] - _phase(compute_loops(p), costs, ACTS), "output stream": d_tail},
        "load": {PARAMS: params_in, WEIGHTS: _phase(load_loops(p), costs, WEIGHTS),
                 ACTS: _phase(load_loops(p), costs, ACTS), "compute": after, "output stream": d_tail},
        "drain": {"serial: dataflow fill": max(params_in + w_wait + prologue + first_group, costs["DrainParams"]),
                  "output stream": procs["Drain"] - costs["DrainParams"]},
    }
    # the compute path's LoadSteps belong to the weights, not the compute
    paths["compute"][WEIGHTS] += costs["LoadTiles"] + costs["LoadSteps"]
    paths["compute"]["compute"] -= costs["LoadTiles"] + costs["LoadSteps"]
    totals = {k: sum(v.values()) for k, v in paths.items()}
    name = max(totals, key=lambda key: totals[key])
    phases = {k: int(round(v)) for k, v in paths[name].items() if round(v) > 0}
    total = sum(phases.values()) + CALL_CYCLES
    return CallCycles(total, phases, bound_of(phases), {k: int(round(v)) for k, v in procs.items()})


def _phase(loop_rows, costs, phase):
    return sum(costs.get(lp.name, 0) for lp in loop_rows if lp.phase == phase)


def peak_macs_per_cycle(p, mode=None):
    mode = mode or p.get("default_mode", "twohot")
    units = p["rows"] * p["cols"]
    return 2 * units if mode == "pot" else units
