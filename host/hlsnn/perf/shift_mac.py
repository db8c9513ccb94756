"""Cycle model of ``shift_mac`` (``hls/engines/shift_mac/kernel.cpp.j2``).

The kernel has no DATAFLOW: its loops run one after another, so a call costs the sum of its
loops (:mod:`hlsnn.perf.model`). Per call the loop nest is::

    AreaRows (H), AreaChannels (C), ReadFmap (C*H*W), PadRow (pad)   -- convolution only
    BatchTiles (ceil(batch / cols))
      LoadSamples (cb)
        ReadSample (K)        GEMM: one activation lane per iteration
        Gather (K)            conv: im2col from the on-chip feature map
      NTiles (ceil(n_out / tile_n))    tile_n = 2*rows in dual PoT, else rows
        ReadParams (tile_n)   bias lo, bias hi, shift: three lanes
        WeightSteps (K * step_beats)   one beat per iteration; the units fire on a step's last
        PostRows (rows)
      OutSamples (cb)
        WriteOutputs (n_out)  one output lane per iteration

What each loop body accesses per iteration, and the II that follows:

============ ===== ========================================================= ====== =====
loop         II    accesses per iteration                                    II got depth
============ ===== ========================================================= ====== =====
ReadFmap     1     ``in``: at most 1 read; ``fmap``: 1 write                  1      2
ReadSample   1     ``in``: at most 1 read; one ``xbuf[c]`` bank: 1 write      1      2
Gather       1     ``fmap``: 1 read; one ``xbuf[c]`` bank: 1 write            1      4
ReadParams   1     ``in``: **3** reads (three ``rd.Next``, each may pop a    **3**   4
                   beat; the scheduler needs a port cycle for each)
WeightSteps  1     ``in``: 1 read; each ``xbuf[c]`` bank: 1 read              1      5
PostRows     2     each ``ybuf[c]`` bank: 2 writes in dual PoT, else 1        2      5
WriteOutputs 1     one ``ybuf[c]`` bank: 1 read; ``out``: at most 1 write     1      3
StatsLanes   1     ``out``: at most 1 write                                   1      2
============ ===== ========================================================= ====== =====

``ReadParams`` is the one loop whose II is not the pragma's: three reads of the one input
stream per iteration give II = 3.

Depths: a stream read and its store, 2. ``Gather``: the address add (1), the BRAM read (2),
the ``xbuf`` write (1): 4. ``ReadParams``: three reads and the stores, 4. ``WeightSteps``:
the beat (1), ``xbuf`` (1), the decode and the two shifters (1), adder 34 (1), the
accumulator (1): 5. ``PostRows``: saturating add, ReLU, rounding shifter, saturation and the
write: 5. ``WriteOutputs``: read, ``Put``, write: 3.

Unpipelined loops and their own cycles per iteration: ``AreaRows``, ``AreaChannels``,
``PadRow``, ``BatchTiles`` 1 (one add and the exit test); ``LoadSamples`` 2 (``Align`` or the
output-pixel update); ``NTiles`` 2 (clear the accumulators, ``Align``); ``OutSamples`` 1
(``Flush``); ``StatsBins`` 1.

Phases: ``WeightSteps`` is *compute* when a step is one beat, else *input stream: weights*;
``ReadSample``/``ReadFmap`` *input stream: activations*; ``ReadParams`` *input stream:
parameters*; ``Gather`` the *serial: im2col* phase; ``WriteOutputs`` *output stream*. The peak
is ``rows * cols`` MAC/cycle in two-hot mode and with ``pot_sum`` (one weight per unit per
cycle), and ``2 * rows * cols`` in dual PoT (two weights per unit per cycle).
"""
from __future__ import annotations

import functools

from .model import Loop, serial_call

NAME = "shift_mac"
STREAM = "stream"
RAM = "ram_1p"
RAM2 = "ram_t2p"


def loops(p):
    """The loop rows of a config ``p`` (its ``shift_mac`` parameters)."""
    return _loops(_step_beats(p))


@functools.lru_cache(maxsize=None)
def _loops(step_beats):
    steps_phase = "compute" if step_beats == 1 else "input stream: weights"
    return (
        Loop("AreaRows", None, 1, "serial: control"),
        Loop("AreaChannels", None, 1, "serial: control"),
        Loop("ReadFmap", 1, 2, "input stream: activations", {"in": (STREAM, 1), "fmap": (RAM, 1)}),
        Loop("PadRow", None, 1, "serial: control"),
        Loop("BatchTiles", None, 1, "serial: control"),
        Loop("LoadSamples", None, 2, "serial: control"),
        Loop("ReadSample", 1, 2, "input stream: activations", {"in": (STREAM, 1), "xbuf[c]": (RAM, 1)}),
        Loop("Gather", 1, 4, "serial: im2col", {"fmap": (RAM, 1), "xbuf[c]": (RAM, 1)}),
        Loop("NTiles", None, 2, "serial: control"),
        Loop("ReadParams", 1, 4, "input stream: parameters", {"in": (STREAM, 3)}),
        Loop("WeightSteps", 1, 5, steps_phase, {"in": (STREAM, 1), "xbuf[c]": (RAM, 1)}),
        Loop("PostRows", 2, 5, "serial: requantize", {"ybuf[c]": (RAM2, 2)}),
        Loop("OutSamples", None, 1, "output stream"),
        Loop("WriteOutputs", 1, 3, "output stream", {"ybuf[c]": (RAM, 1), "out": (STREAM, 1)}),
        Loop("StatsBins", None, 1, "output stream"),
        Loop("StatsLanes", 1, 2, "output stream", {"out": (STREAM, 1)}),
    )


def _step_beats(p):
    """Beats per weight step: ``rows`` 16-bit register lanes, padded to whole beats (as the template)."""
    import math
    from ..engines.shift_mac.spec import LANE_BITS
    return math.ceil(p["rows"] * LANE_BITS / p["stream_bits"])


def call_cycles(p, counts):
    """Modelled cycles of one call from its loop counters."""
    return serial_call(loops(p), counts)


def peak_macs_per_cycle(p, mode=None):
    mode = mode or p.get("default_mode", "twohot")
    units = p["rows"] * p["cols"]
    return 2 * units if mode == "pot" else units
