"""Cycle model of ``bfp_systolic`` (``hls/engines/bfp_systolic/kernel.cpp.j2``).

The kernel has no DATAFLOW region: its phases are loops that run one after another, and the
overlap is inside the ``Steps`` loop, which computes one weight step, reads one weight beat
(of a later tile) and writes one output beat (of a sample whose results are complete) in the
same cycle. A call costs the sum of its loops (:mod:`hlsnn.perf.model`). Per call the loops
are::

    ReadBias (ceil((N+1)/lanes) beats)          -- only with a bias
    Passes (one per pass of K: one pass when K <= max_k, else ceil(K / pass_k))
      ReadSampleBeats (batch * ceil((Kq+1)/lanes))  every sample's slice once, a beat per cycle
                                                  (not with ``xin``: a resident call of more than
                                                  one group, one pass, in a config with GEMV
                                                  mode, ``spec.samples_in_loop``, reads them in
                                                  Steps, a beat an iteration, the groups one
                                                  after another; a group's first step waits
                                                  ``X_GAP`` iterations after its last beat:
                                                  ``SampleWait``)
      Steps (one iteration per cycle)             tiles x groups x S compute steps, where
                                                  S = max(ceil(Kq/2), min_steps) and
                                                  min_steps = max(rows + POST_GAP, cols + 1);
                                                  an iteration whose step waits for its
                                                  weights is a WeightWait; each iteration
                                                  also reads one weight beat while any
                                                  remain; then rows + cols - 1 iterations
                                                  drain the array (the last step's wavefront
                                                  and the last group's shadow rows); in the
                                                  last pass, with the max rule and one pass
                                                  of K, an iteration also writes an output
                                                  beat (``OutOverlap``) while a sample whose
                                                  group is complete has beats left
      GemvSamples (GEMV mode, instead of          a resident call with weight_banks > 1
                   ReadSampleBeats and Steps;     (``spec.gemv_applies``): the samples one
                   batch; with weight_banks > 1   after another
                   it also runs once a pass
                   around Steps)
        GemvSteps                                 the ``Steps`` loop itself in GEMV mode (one
                                                  loop, one module: its tiles take GEMV
                                                  mode's operands through a multiplexer);
                                                  reads the sample a beat an iteration
                                                  while the tiles compute (``SampleWait``:
                                                  the first tile's iterations that wait for
                                                  a word), :func:`gemv_iterations`
    OutSamples (the samples not streamed whole during Steps)
      RollPredict (1)                             -- only with the rolling method
      StatSums (ceil(N/lanes))                    -- only with output_exponent: stats
      WriteBeats (ceil((N+1)/lanes), fewer for    a beat per cycle
                  a sample begun in Steps)
    StatsBins > StatsLanes                        -- only with the statistics segment

What each loop body accesses per iteration, and the II that follows (``wstore``, ``wexp``,
``ybuf`` and the running state ``run_*``, ``o_exp``, ``wexp_o`` are simple-dual-port
RAMs, ``BIND_STORAGE ram_s2p``: one read and one write per cycle):

=============== ===== =================================================== ====== =====
loop            II    accesses per iteration                              II got depth
=============== ===== =================================================== ====== =====
ReadBias        1     ``in``: 1 read; each ``bias`` bank: at most 1 write  1      2
ReadSampleBeats 1     ``in``: 1 read; one ``xstore[c]``: 1 write; one      1      3
                      ``xexp[c]``: at most 1 write
Steps           1     ``in``: at most 1 read; ``out``: at most 1 write;   1      7
                      ``wstore``: 1 read and 1 write (2 ports); each
                      ``xstore[c]``: 1 read; one ``wexp`` bank and each
                      ``wexp_o`` bank: 1 read and 1 write (2 ports); each
                      ``ybuf[c][j]`` bank: 1 read (``ResultRead``: the
                      output beat's word or the partial sum of a K pass,
                      one address per bank, never both) and 1 write;
                      each ``o_exp[c]``: 1 read and 1 write;
                      each ``run_*[c]``: 1 read and 1 write (2 ports);
                      ``xexp[c]``, one ``bias`` bank: 1 read
GemvSteps       1     ``in``: at most 1 read; each ``wstore`` bank: at     1      8
                      most 2 reads (``ram_t2p``: the gc steps of an
                      iteration are consecutive addresses, two columns
                      per bank); each sharing ``xstore[c]``: 1 read and
                      1 write; ``xexp[0]``: at most 1 write; per row
                      posted (4, consecutive outputs): its ``wexp``,
                      ``bias`` and ``ybuf[0][j]`` banks, 1 access each
StatSums        1     each ``ybuf[c]`` bank: 1 read (a beat of results)    1      47
WriteBeats      1     each ``ybuf[c]`` bank: 1 read (lane j reads bank     1      5
                      (j-1) mod lanes); each ``wexp_o`` bank: 1 read;
                      ``out``: 1 write
StatsLanes      1     ``out``: at most 1 write                             1      2
=============== ===== =================================================== ====== =====

No port is over-subscribed, so every pipelined loop gets its pragma's II = 1.

Depths: a stream read and the store it feeds take 2 cycles (3 with the lane masking of the
samples). ``Steps``: the weight-store and activation-store reads (2), the pair select and the
injection register (1), the DSP48 multiplier and its adders with their M and P registers (3),
the accumulator (1): 7 (the post of a shadow row runs beside it: the shadow row multiplexer
and the result-store read of the partial sum (2), bias alignment shifter (2, beside the
read), the partial-sum add (1), the saturating add and ReLU (1), the leading-one detector and
the running maximum (1), the result-store write (1): 7). The array's wavefront is not in the
depth: a step reaches tile (d, c) d + c iterations after it entered, and the ``rows + cols - 1``
drain iterations at the end of the loop count that time. ``GemvSteps`` (GEMV mode of the same
loop): the bank read (2), the sample pair's register tree down the column (2), the DSP48
multiplier and accumulator (3), the loop's control (1): 8; with GEMV mode (``weight_banks >
1``) the one loop has the deeper of the two pipelines, so ``Steps`` is charged 8 as well; the adder tree and the posts run beside the next tile and
are counted as iterations (``lag + ceil(rows / post) - 1`` after the last tile). ``WriteBeats``: the result-store read (2), the rounding
shifter and its saturation (2), the write (1): 5. ``StatSums`` is short in II but its entry
carries the statistics tail after the loop (64-bit integer square root and the 40/14-bit
division, ~45 cycles of sequential logic), charged as its depth.

Unpipelined loops and their own cycles per iteration: ``Geometry`` (once a call) and
``Passes`` 1 (once a pass) plus the serial quotients and products of their geometry, a bit a
cycle and 2 a function (``spec.serial_cycles``: the kernel has no run-time multiplier or
divider for index arithmetic),
``OutSamples`` 3 (the output exponent from the running state, the sample counters),
``RollPredict`` 45 (the rolling method's prediction: the buffer's sums, the 64-bit integer
square root and the division by the entries held, as the statistics tail; charged for every
sample, whether or not it predicts), ``StatsBins`` 1.

Phases: ``Steps`` iterations that compute are *compute*, its ``WeightWait`` iterations are
*input stream: weights* (its ``SampleWait`` ones, with ``xin``, *input stream: activations*) (the loop reads a weight beat a cycle and a step needs
``step_beats``); the head and the samples are *input stream*; ``WriteBeats`` and the
statistics segment *output stream*; ``OutSamples`` / ``StatSums`` serial phases (the drain
iterations count as compute). The peak is ``2 * rows * cols`` MAC/cycle (two products per DSP tile).

:func:`steps_iterations` gives the ``Steps`` count in closed form (the tests hold it equal to
the C-simulation's counter) for one pass of ``K`` (a pass of a tiled K counts as a call of
its ``Kq``; the ``Steps`` loop starts afresh in every pass): with ``T`` tiles, ``G`` groups,
``S`` steps per group, ``kp = ceil(K/2)``, ``E`` exponent beats and ``TB = E + kp *
step_beats`` beats per tile. The blocks (tile, group) run tile after tile, except the last
``tail`` tiles (:func:`tail_tiles`), which run group after group. The weight store is a ring
of ``slots = w_depth // kp`` tiles: tile ``u``'s beats are read from iteration
``L_u = max(L_{u-1} + TB, F_u)`` on (``L_0 = 0``), where ``F_u`` is one iteration after the
last step of tile ``u - slots`` (the loader reads the ring's free limit as a register; 0 while
``u < slots``), or ``u * TB`` with the keep flag. Step ``s`` of a block of tile ``t`` is
written in iteration ``L_t + E + (s+1) * step_beats - 1`` and may compute ``W_GAP``
iterations later (the weight store's read-after-write distance, docs/hardware-rules.md), so a
block's last step runs at ``X_b = max(X_{b-1} + kp, L_t + E + kp * step_beats - 1 + W_GAP) +
(S - kp)`` (``X_{-1} = -1``; ``X_b = X_{b-1} + S`` for resident weights). ``Steps`` runs ``X_last
+ 1 + rows + cols - 1`` iterations (the drain). Group ``g``'s samples are complete after its
block of the last tile has posted its rows, so its output beats may stream from iteration
``X + cols + rows + POST_GAP`` on (the post gap keeps the pipeline's reads behind the post's
writes), after the groups before it, a beat per iteration; the beats that fit
before the loop ends are ``OutOverlap``, and the rest stream in ``WriteBeats``.
"""
from __future__ import annotations

from .model import Loop, bound_of, serial_call

NAME = "bfp_systolic"

STREAM = "stream"
RAM = "ram_1p"
S2P = "ram_s2p"


def loops(p):
    """The loop rows of a config ``p`` (its ``bfp_systolic`` parameters): the page's table, with
    the serial geometry's cycles (``spec.serial_cycles``) in ``Geometry`` (once a call) and
    ``Passes`` (once a pass, beside the pass's own cycle)."""
    from ..engines.bfp_systolic.spec import serial_cycles
    import dataclasses
    per_call, per_pass = serial_cycles(p)
    rows = tuple(Loop("Passes", None, 1 + per_pass, lp.phase) if lp.name == "Passes" else lp for lp in _LOOPS)
    if p["weight_banks"] > 1:     # GEMV mode runs in Steps: one pipeline, the deeper of the two
        depth = max(lp.depth for lp in rows if lp.name in ("Steps", "GemvSteps"))
        rows = tuple(dataclasses.replace(lp, depth=depth) if lp.name in ("Steps", "GemvSteps") else lp
                     for lp in rows)
    return (Loop("Geometry", None, per_call, "serial: geometry"), *rows)


_LOOPS = (
    Loop("ReadBias", 1, 2, "input stream: bias", {"in": (STREAM, 1), "bias[j]": (RAM, 1)}),
    Loop("Passes", None, 1, "serial: K passes"),
    Loop("ReadSampleBeats", 1, 3, "input stream: activations",
         {"in": (STREAM, 1), "xstore[c]": (RAM, 1), "xexp[c]": (RAM, 1)}),
    Loop("Steps", 1, 7, "compute", {"in": (STREAM, 1), "wstore": (S2P, 2), "xstore[c]": (RAM, 1),
                                    "wexp[j]": (S2P, 2), "ybuf[c][j]": (S2P, 2), "run_*[c]": (S2P, 2),
                                    "xexp[c]": (RAM, 1), "bias[j]": (RAM, 1)}),
    Loop("GemvSamples", None, 1, "serial: GEMV samples"),
    Loop("GemvSteps", 1, 8, "compute", {"in": (STREAM, 1), "wstore[b]": ("ram_t2p", 2), "xstore[c]": (S2P, 2),
                                         "xexp[c]": (RAM, 1), "wexp[j]": (S2P, 1), "bias[j]": (RAM, 1),
                                         "ybuf[c][j]": (S2P, 1)}),
    Loop("OutSamples", None, 3, "serial: output exponent"),
    Loop("RollPredict", None, 45, "serial: output exponent"),
    Loop("StatSums", 1, 47, "serial: output exponent", {"ybuf[c][j]": (RAM, 1)}),   # every bank j once
    Loop("WriteBeats", 1, 5, "output stream", {"ybuf[c][j]": (RAM, 1), "wexp[j]": (RAM, 1), "out": (STREAM, 1)}),
    Loop("StatsBins", None, 1, "output stream"),
    Loop("StatsLanes", 1, 2, "output stream", {"out": (STREAM, 1)}),
)


def loopbacks(p) -> dict:
    """The longest loop-back chain of each pipelined loop (:mod:`~hlsnn.perf.timing`): what an iteration's
    loop-carried registers pass through before the next iteration needs them.

    ``Steps``: the longest of three paths, each one compare of registers, the condition's
    LUT and the counters' next-value multiplexers (increment, restart, the tail's restore; the
    increments themselves are computed beside the compare): the issue, the loader's progress of
    ``W_GAP`` iterations ago against the compute's step in load order (``gidx_bits``); the
    load, the loader's tile against the ring's free limit (``tile_bits``); the output beat,
    the 32-bit sample counter against the batch and the complete groups. ``GemvSteps``: the
    first tile's sample wait, ``(gj + 1) * gc - 1``,
    its minimum with ``kp - 1`` and the compare with the words read (as of ``X_GAP`` iterations
    ago, a register), then the counters. The other loops: a 32-bit exit compare and a counter
    update."""
    from ..engines.bfp_systolic.spec import _bits
    kp = (p["max_k"] + 1) // 2
    n_tiles = -(-p["max_n"] // p["rows"])
    gidx, tile = _bits(n_tiles * kp + 1), _bits(n_tiles + 1)
    paths = [[("carry", gidx), ("lut", 1), ("lut", 2)], [("carry", tile), ("lut", 1), ("lut", 2)],
             [("carry", 32), ("lut", 1), ("lut", 2)]]
    simple = [("carry", 32), ("lut", 1), ("lut", 1)]
    out = {"ReadBias": simple, "ReadSampleBeats": [("carry", 32), ("lut", 1), ("lut", 2)],
           "Steps": max(paths, key=lambda c: sum(n for k, n in c if k == "carry")),
           "StatSums": simple, "WriteBeats": simple}
    if p["weight_banks"] > 1:
        # one loop in both modes: its loop-back is the longer of the two modes' (the mode is a
        # constant of the run, but the hardware closes both paths)
        gemv = [("carry", 32), ("carry", 32), ("lut", 1), ("carry", 32), ("lut", 1), ("lut", 2)]
        out["Steps"] = out["GemvSteps"] = max(out["Steps"], gemv, key=lambda c: (sum(n for k, n in c if k == "carry"),
                                                                                    len(c)))
    return out


def call_cycles(p, counts, ii=None):
    """Modelled cycles of one call from its loop counters: the loops add up; the ``Steps``
    iterations that waited for weights (``WeightWait``) are moved to the weights phase, the
    ``GemvSteps`` iterations that waited for the sample (``SampleWait``) to the activations'.
    ``ii``: ``{loop: II}`` of loops whose loop-back does not close at II = 1 (:mod:`~hlsnn.perf.timing`)."""
    import dataclasses
    rows = loops(p)
    if ii:
        rows = tuple(dataclasses.replace(lp, ii=max(lp.ii, ii[lp.name])) if lp.ii and lp.name in ii else lp
                     for lp in rows)
    call = serial_call(rows, counts)
    for mark, phase in (("WeightWait", "input stream: weights"), ("SampleWait", "input stream: activations")):
        wait = counts.get(mark, (0, 0))[0]
        if wait:
            call.phases["compute"] = call.phases.get("compute", 0) - wait
            call.phases[phase] = call.phases.get(phase, 0) + wait
            call.bound = bound_of(call.phases)
    return call


def tail_tiles(p, batch, k, n, *, out_on, resident=False, keep=False) -> int:
    """The tiles of a pass that run group after group (the kernel's ``tail``): with output
    overlap, enough that a group's tail steps outlast the output beats of the group before
    it, ``ceil(cols * nbo / S)``, at most the tiles and the weight store's ``slots``; 1
    otherwise, and when the weight stream bounds the pass (``G * S < TB``)."""
    from ..engines.bfp_systolic.spec import context_step_beats, exp_beats, lanes, min_steps
    kp = (k + 1) // 2
    S = max(kp, min_steps(p))
    T, G = -(-n // p["rows"]), -(-batch // p["cols"])
    TB = exp_beats(p) + kp * context_step_beats(p)
    if not out_on or (not resident and G * S < TB):
        return 1
    nbo = -(-(n + 1) // lanes(p))
    slots = T if (keep or resident) else p["w_depth"] // kp
    return min(-(-(p["cols"] * nbo) // S), T, slots)     # each term >= 1


def steps_iterations(p, batch, k, n, *, keep=False, resident=False, out_on=False, xin=False):
    """``(iterations, waits, out_beats)`` of the ``Steps`` loop of one pass of reduction length
    ``k`` (module docstring); ``out_beats`` are the output beats written during the loop
    (``out_on``: the last pass of a call whose output overlaps). ``xin`` (a resident call,
    ``spec.samples_in_loop``): the loop reads the samples, a beat an iteration from the first,
    the groups run one after another (``tail = T``), and a group's first step issues ``X_GAP``
    iterations after the iteration that read its last beat at the least; the waits are then
    the samples'."""
    from ..engines.bfp_systolic.spec import (POST_GAP, W_GAP, X_GAP, context_step_beats, exp_beats, lanes,
                                             min_steps)
    rows, cols, sb, E = p["rows"], p["cols"], context_step_beats(p), exp_beats(p)
    kp = (k + 1) // 2
    S = max(kp, min_steps(p))
    T, G = -(-n // rows), -(-batch // cols)
    work = T * G * S
    drain = rows + cols - 1
    tail = T if xin else tail_tiles(p, batch, k, n, out_on=out_on, resident=resident, keep=keep)
    xb = -(-(k + 1) // lanes(p))              # beats a sample (xin)
    t_a = T - tail
    order = [(t, g) for t in range(t_a) for g in range(G)] + [(t, g) for g in range(G) for t in range(t_a, T)]
    TB = E + kp * sb
    slots = T if (keep or resident) else p["w_depth"] // kp
    # the iteration of the last step of each tile's last block in the head (frees its slot)
    head_end = {}
    starts = []
    x = -1
    last_step = {}
    for t, g in order:
        if xin and t == 0:                   # a group's first block: its samples' beats are in
            x = max(x + 1, min((g + 1) * cols, batch) * xb - 1 + X_GAP) + S - 1
        elif resident:
            x += S
        else:
            while len(starts) <= t:      # tile t's loads start when its slot is free
                u = len(starts)
                if keep or u == 0:
                    lt = u * TB
                else:
                    # the slot is free from the iteration after its tile's last step (the
                    # loader reads the free limit as a register)
                    free = head_end[u - slots] + 1 if u - slots >= 0 else 0
                    lt = max(starts[u - 1] + TB, free)
                starts.append(lt)
            # the last step is written in iteration starts[t] + E + kp * sb - 1 and read
            # W_GAP iterations later at the earliest
            x = max(x + kp, starts[t] + E + kp * sb - 1 + W_GAP) + (S - kp)
        last_step[t, g] = x
        if t < t_a and g == G - 1:
            head_end[t] = x
    its = x + 1 + drain
    out_beats = 0
    if out_on:
        nbo = -(-(n + 1) // lanes(p))
        end = 0
        for g in range(G):
            # its last row is posted cols + rows - 1 iterations after its last step, and its
            # beats may stream POST_GAP + 1 iterations after that
            ready = last_step[T - 1, g] + cols + rows + POST_GAP
            start = max(ready, end)
            end = start + min(cols, batch - g * cols) * nbo
            out_beats += max(0, min(end, its) - start)
    return its, x + 1 - work, out_beats


def gemv_iterations(p, k, n):
    """``(iterations, waits)`` of the ``GemvSteps`` loop (GEMV mode: a resident call of one
    sample with ``weight_banks > 1``). ``T`` tiles of ``gsteps = max(ceil(kp / gc), lag +
    ceil(rows / post))`` iterations each: each of the ``gc`` columns computes one of the tile's
    ``kp`` steps an iteration, and a tile's rows are posted before the next tile's sums replace
    them. The sample streams in during the loop, a beat an iteration from the first (word ``w``
    in iteration ``w``): iteration ``j`` of the first tile needs the word of step ``min((j+1) *
    gc, kp) - 1`` (a word holds ``lanes / 2`` steps), written ``X_GAP`` iterations before at the
    least (the activation store's read-after-write distance, ``spec.X_DEPTH`` = 3, and a stage of
    margin), so it runs at ``I_j = max(I_{j-1} + 1, word + X_GAP)``; the iterations it waits
    are ``waits``. The other tiles follow without a gap,
    and ``lag + ceil(rows / post) - 1`` iterations post the last tile's rows. The loop also
    runs until the sample's ``ceil((k + 1) / lanes)`` beats are read."""
    from ..engines.bfp_systolic.spec import X_GAP, gemv_cols, gemv_lag, gemv_post, gemv_steps, lanes
    kp = (k + 1) // 2
    T = -(-n // p["rows"])
    S, gc, pairs = gemv_steps(p, kp), gemv_cols(p), lanes(p) // 2
    i = -1
    for j in range(S):
        i = max(i + 1, (min((j + 1) * gc, kp) - 1) // pairs + X_GAP)
    last = i + (T - 1) * S
    its = max(last + 1 + gemv_lag(p) + -(-p["rows"] // gemv_post(p)) - 1, -(-(k + 1) // lanes(p)))
    return its, i + 1 - S


def peak_macs_per_cycle(p, mode=None):
    return 2 * p["rows"] * p["cols"]
