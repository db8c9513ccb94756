"""Cycle model of ``bfp_systolic`` (``hls/engines/bfp_systolic/kernel.cpp.j2``).

The kernel has no DATAFLOW: its loops run one after another, so a call costs the sum of its
loops (:mod:`hlsnn.perf.model`). Per call the loop nest is::

    ReadBias (n_out)                       -- only with a bias
    BatchTiles (ceil(batch / cols))
      ReadSamples (cb)                       exponent, then
        ReadSampleK (2 * ceil(K / 2))        one mantissa lane per iteration
      NTiles (ceil(n_out / rows))
        ReadWeightExp (rows)                 -- per-row weight exponents only
        WeightSteps (ceil(K / 2) * step_beats)   one weight beat per iteration; the array
                                                 fires on the last beat of each step
        PostRows (rows)
      OutSamples (cb)
        ScanMax (n_out)
        StatSums (n_out)                     -- only with output_exponent: stats
        WriteMantissas (n_out)               one mantissa lane per iteration

What each loop body accesses per iteration, and the II that follows:

============== ===== ====================================================== ====== =====
loop           II    accesses per iteration                                 II got depth
============== ===== ====================================================== ====== =====
ReadBias       1     ``in``: at most 1 read (``rd.Next``); ``bias``: 1 write   1      2
ReadSampleK    1     ``in``: at most 1 read; one ``xbuf[c]`` bank: 1 write    1      2
ReadWeightExp  1     ``in``: at most 1 read; ``wexp``: 1 write                1      2
WeightSteps    1     ``in``: 1 read (``ReadBeat``); each ``xbuf[c][.][j]``    1      5
                     bank (dims 1 and 3 partitioned): 1 read
PostRows       1     ``bias``, ``wexp``: 1 read each; each ``ybuf[c]`` bank:   1      4
                     1 write (``acc`` is registers)
ScanMax        1     one ``ybuf[c]`` bank: 1 read; ``wexp``: 1 read           1      4
StatSums       1     one ``ybuf[c]`` bank: 1 read                             1      47
WriteMantissas 1     ``ybuf[c]``: 1 read; ``wexp``: 1 read; ``out``: at most  1      4
                     1 write (``wr.Put``)
StatsLanes     1     ``out``: at most 1 write                                 1      2
============== ===== ====================================================== ====== =====

No port is over-subscribed, so every pipelined loop gets its pragma's II = 1.

Depths (the latency of one iteration; they only matter once per entry): a stream read and
the store it feeds take 2 cycles. ``WeightSteps``: read the beat (1), read ``xbuf`` (1), the
DSP48 pre-adder/multiplier/post-adder chain with its A/B, M and P registers (3): 5.
``PostRows``: bias alignment shifter and saturating add (2), ReLU and the ``ybuf`` write (1),
histogram (1): 4. ``ScanMax`` and ``WriteMantissas``: read (1), leading-one detector or
rounding shifter (2), compare or write (1): 4. ``StatSums`` is short in II but its entry
carries the statistics tail after the loop (64-bit integer square root and the 40/14-bit
division, ~45 cycles of sequential logic), charged as its depth.

Unpipelined loops and their own cycles per iteration: ``BatchTiles`` 1 (tile bounds),
``ReadSamples`` 2 (the exponent read, then ``Align``), ``NTiles`` 2 (clear the accumulator
registers, loop control), ``OutSamples`` 3 (output exponent, its ``Put``, ``Flush``),
``StatsBins`` 1.

Phases: ``WeightSteps`` is *compute* when a weight step is one beat (the array fires every
cycle), else *input stream: weights* (the array waits ``step_beats - 1`` cycles of every
step for its weights); loading the samples is *input stream: activations*; writing the
mantissas *output stream*; ``PostRows``, ``ScanMax`` and the statistics are serial phases.
The peak is ``2 * rows * cols`` MAC/cycle (two products per DSP tile).
"""
from __future__ import annotations

import functools

from .model import Loop, serial_call

NAME = "bfp_systolic"
STREAM = "stream"
RAM = "ram_1p"


def loops(p):
    """The loop rows of a config ``p`` (its ``bfp_systolic`` parameters)."""
    from ..engines.bfp_systolic.spec import context_step_beats
    return _loops(context_step_beats(p))


@functools.lru_cache(maxsize=None)
def _loops(step_beats):
    steps_phase = "compute" if step_beats == 1 else "input stream: weights"
    return (
        Loop("ReadBias", 1, 2, "input stream: bias", {"in": (STREAM, 1), "bias": (RAM, 1)}),
        Loop("BatchTiles", None, 1, "serial: control"),
        Loop("ReadSamples", None, 2, "input stream: activations"),
        Loop("ReadSampleK", 1, 2, "input stream: activations", {"in": (STREAM, 1), "xbuf[c]": (RAM, 1)}),
        Loop("NTiles", None, 2, "serial: control"),
        Loop("ReadWeightExp", 1, 2, "input stream: weights", {"in": (STREAM, 1), "wexp": (RAM, 1)}),
        Loop("WeightSteps", 1, 5, steps_phase, {"in": (STREAM, 1), "xbuf[c][.][j]": (RAM, 1)}),
        Loop("PostRows", 1, 4, "serial: bias, ReLU", {"bias": (RAM, 1), "wexp": (RAM, 1), "ybuf[c]": (RAM, 1)}),
        Loop("OutSamples", None, 3, "serial: output exponent"),
        Loop("ScanMax", 1, 4, "serial: output exponent", {"ybuf[c]": (RAM, 1), "wexp": (RAM, 1)}),
        Loop("StatSums", 1, 47, "serial: output exponent", {"ybuf[c]": (RAM, 1)}),
        Loop("WriteMantissas", 1, 4, "output stream", {"ybuf[c]": (RAM, 1), "wexp": (RAM, 1), "out": (STREAM, 1)}),
        Loop("StatsBins", None, 1, "output stream"),
        Loop("StatsLanes", 1, 2, "output stream", {"out": (STREAM, 1)}),
    )


def call_cycles(p, counts):
    """Modelled cycles of one call from its loop counters."""
    return serial_call(loops(p), counts)


def peak_macs_per_cycle(p, mode=None):
    return 2 * p["rows"] * p["cols"]
