"""Reduction slots over (tap, channel): a board-sized bfp_systolic network kernel's conv
schedule with ``3Q/2`` products per lane a cycle (``net_slots``; issue 83).

The products of a lane are ``S = 3H`` *slots* a cycle (``H = Q/2``, the banks of a *half*:
banks ``0 .. H-1`` and ``H .. Q-1``), in three *units* of ``H`` slots: unit 0 takes half 0's
element at the cycle's tap of half 0, unit 1 half 1's at its tap, unit 2 the element of the
*next* tap across (``kx + 1``) of one half (the cycle's *pair*). The sums are exact integer sums
of the same products (netbfp rule bfp_conv's patch rounding, rule bfp_gemm's sums: the accumulator
wraps like the emulator's), so the order in which the taps meet does not move a bit.

**Two elements a bank a cycle.** ``ConvMac`` writes the output's buffer in the loop that reads the
input's, and the buffer of each is chosen at run time (the descriptor's ``src``, ``dst``): a
bank's ports then serve one read and one write a cycle, not two reads and a write. So a bank is
kept as two memories, its even and its odd words (``act[s][j][0]``: element ``2i`` at word ``i``,
``act[s][j][1]``: element ``2i + 1``; a simple dual-port RAMB18 each, 512 x 36: the BRAM of the
one bank they replace), and a cycle reads *adjacent* elements ``a`` and ``a + 1`` of a half, one
from each: the taps ``kx`` and ``kx + 1`` of one window row (``dw = 1``; a tensor's row is
contiguous in its bank). The element at ``a`` is the even memory's where ``a`` is even, the odd
one's where it is odd (a 2:1 select on each bank); unit 2 selects between the two halves' second
elements.

**Schedule** (:func:`schedule`). A conv's window rows are *reads* per half: per channel block
``cb`` and row ``ky``, the row's taps in pairs ``(kx, kx + 1)`` and a single where ``kw`` is odd
(a dilated window, ``dw > 1``, or the pool buffer's one-tap patch: singles). A cycle takes one
read of each half, at most one of them a pair (unit 2 is one); each half's pairs come first in
one half and last in the other, so a 3 x 3 conv of 16 channels is 6 cycles a block (today's 9),
of 32 channels 12 (18), of 64 24 (36); a half with no channels (a block of at most ``H``) reads
nothing. ``steps`` (a block's cycles) is then raised where something else runs slower than the
products (padding cycles of no reads and zero weights): a conv that reads a leading-one map
(:mod:`.expmap`, one tap a cycle: ``kh * kw`` per pixel) takes at least ``ceil(kh * kw / zb)``
cycles a block, and its writes: a conv with a fused residual Add (:mod:`.fuse`) at least ``P /
FUSE_LANES``, any other ``P / WRITE_LANES`` (its results rounded and written ``WRITE_LANES`` lanes a
cycle, :data:`.resmodel.WRITE_LANES`: half the write path's LUTs; its last pixel's writes as many
cycles a block).

**Tables** (rendered into ``network_data.h``): per cycle of each conv (from its descriptor's
``uoff``) and half ``h``: ``kUOff[h]`` (the read's address from the window's corner, as the tap
table's ``kTapOff``), ``kUKy[h]``, ``kUKx[h]`` (its position), ``kUN[h]`` (its live banks, 0: no
read), and ``kUPair`` (0, or ``h + 1``: half ``h``'s read is a pair); the weight ROMs ``kWPairs[i][s]``
per lane pair ``i`` and slot ``s = u * H + k`` (unit ``u``'s bank ``k`` of its half), one word per
cycle of each block, block-major as before.

Where it runs: a board-sized, packed kernel whose program is convolutions and residual Adds
(and the unfolded load, a global pool through the pool buffer), every conv of one pack reading a
leading-one map (no exponent pass: ``ConvExp`` reads two taps of a bank a cycle) and no third
activation buffer (:func:`eligible`); elsewhere the kernel keeps its bank-per-slot schedule.
"""
from __future__ import annotations

import numpy as np


def requested(p):
    """True where the config asks for the slot schedule (``net_slots: 1``)."""
    return bool(p.get("net_slots"))


def eligible(net, p, pz, pc, has_exp, act3_words, has_mean):
    """True where the kernel of ``net`` runs the slot schedule (module docstring)."""
    if not (requested(p) and p.get("net_pack") and pc % 2 == 0 and not has_exp and not act3_words and not has_mean):
        return False
    kinds = {op.kind for op in net.ops}
    if not kinds <= {"conv", "add"}:
        return False
    return all(op.f.get("packs", 1) == 1 for op in net.ops if op.kind == "conv")


def _reads(g, half, hb):
    """Half ``half``'s reads of the conv of geometry ``g``: ``([pairs], [singles])``, each read
    ``(cb, ky, kx, pair)``."""
    pairs, singles = [], []
    for cb in range(g["ncg"]):
        if min(hb, max(0, g["cend"] - cb * 2 * hb - half * hb)) == 0:
            continue
        for ky in range(g["kh"]):
            kx = 0
            while kx < g["kw"]:
                if g["pairs"] and kx + 1 < g["kw"]:
                    pairs.append((cb, ky, kx, True))
                    kx += 2
                else:
                    singles.append((cb, ky, kx, False))
                    kx += 1
    return pairs, singles


def _bound(p0, s0, p1, s1):
    """The fewest cycles left for ``p`` pairs and ``s`` singles of each half: each half reads once a
    cycle, a cycle takes three taps (splitting pairs lets the pairs' count fall, not the taps')."""
    return max(p0 + s0, p1 + s1, -(-(2 * p0 + s0 + 2 * p1 + s1) // 3))


#: a half's move in a cycle: its next pair, a single, a pair's first tap alone (its second a single
#: left), or nothing: (pairs taken, singles taken, is a pair)
_MOVES = {"P": (1, 0, True), "S": (0, 1, False), "X": (1, -1, False), "-": (0, 0, False)}


def schedule(g, hb):
    """The conv's cycles (module docstring): ``[(read of half 0 or None, read of half 1 or None)]``,
    at most one of them a pair. Greedy: each cycle the moves of the two halves (at most one pair;
    a pair split where two would meet) that leave the fewest cycles by :func:`_bound`, the more taps
    first among as many."""
    reads = [_reads(g, 0, hb), _reads(g, 1, hb)]
    cycles = []
    while any(p or s for p, s in reads):
        n = [(len(p), len(s)) for p, s in reads]
        best = None
        for m0 in _MOVES:
            for m1 in _MOVES:
                (a0, b0, q0), (a1, b1, q1) = _MOVES[m0], _MOVES[m1]
                if (q0 and q1) or (m0 == "-" and m1 == "-"):
                    continue
                rest = [(n[0][0] - a0, n[0][1] - b0), (n[1][0] - a1, n[1][1] - b1)]
                if any(x < 0 for r in rest for x in r) or any(m == "X" and k[0] == 0 for m, k in ((m0, n[0]), (m1, n[1]))):
                    continue
                taps = sum(2 if q else (1 if m != "-" else 0) for m, q in ((m0, q0), (m1, q1)))
                key = (_bound(*rest[0], *rest[1]), -taps, m0 == "X", m1 == "X")
                if best is None or key < best[0]:
                    best = (key, m0, m1)
        cyc = []
        for (pairs, singles), m in zip(reads, best[1:]):
            if m == "P":
                cyc.append(pairs.pop(0))
            elif m == "S":
                cyc.append(singles.pop(0))
            elif m == "X":                              # the pair's first tap now, its second a single
                cb, ky, kx, _ = pairs.pop(0)
                singles.append((cb, ky, kx + 1, False))
                cyc.append((cb, ky, kx, False))
            else:
                cyc.append(None)
        cycles.append(tuple(cyc))
    return cycles or [(None, None)]


def steps_of(g, cycles, d, pz, fuse_lanes, write_lanes):
    """A block's cycles: the schedule's, raised for the map's taps and the block's writes (a fused
    Add's ``P / fuse_lanes``, else ``P / write_lanes``)."""
    n = len(cycles)
    if d.get("mr"):                                       # the exponent side's cycles a pixel
        n = max(n, -(-(d["lead"] - g["exp_lead"]) // g["nb"]))
    return max(n, pz // (fuse_lanes if d.get("fa") else write_lanes))


def map_taps(g):
    """A map-reading conv's exponent side (:mod:`.expmap`) a cycle at a time: per window row ``ky``
    its taps in pairs ``(kx, kx + 1)`` (``dw = 1``: map words ``a`` and ``a + 1``, one from each of the
    map's even and odd memories) and a single where ``kw`` is odd; ``[(off, ky, kx, pair)]``."""
    out = []
    for ky in range(g["kh"]):
        kx = 0
        while kx < g["kw"]:
            pair = g["dw"] == 1 and kx + 1 < g["kw"]
            out.append((ky * g["dh"] * g["w"] + kx * g["dw"], ky * g["dh"], kx * g["dw"], int(pair)))
            kx += 2 if pair else 1
    return out


def relayout(rows, geoms, pz, pc, tz_distance, fuse_lanes, exp_lead, write_lanes):
    """Rewrite the conv rows (``rows``: descriptor dicts ``d`` in program order; ``geoms``: per
    conv row its geometry and padded weights, else None) for the slot schedule: each conv's
    ``steps``, ``n_iter``, ``woff``, ``uoff`` and, reading a map, ``moff`` and ``lead`` (the map's
    taps two a cycle, :func:`map_taps`); returns ``(weights, units, tz_slots)``: per lane and slot
    the ROM words, the unit tables (``off``, ``ky``, ``kx``, ``n``: per half a list; ``pair``;
    ``mtaps``: the exponent side's), the ring's pixels."""
    hb = pc // 2
    ns = 3 * hb
    wl = [[[] for _ in range(ns)] for _ in range(pz)]
    units = dict(off=([], []), ky=([], []), kx=([], []), n=([], []), pair=[], mtaps=[])
    woff, tz_slots = 0, 2
    for d, g in zip(rows, geoms):
        d["moff"] = 0
        if g is None:
            d["uoff"] = 0
            continue
        if d.get("mr"):                                   # the exponent side: a pair of map words a cycle
            mt = map_taps(g) if not d.get("sb") else [(0, 0, 0, 0)]
            d["moff"] = len(units["mtaps"])
            units["mtaps"] += mt
            d["n_iter"] += len(mt) + exp_lead - d["lead"]
            d["lead"] = len(mt) + exp_lead
        cyc = schedule(g, hb)
        steps = steps_of(dict(g, exp_lead=exp_lead), cyc, d, pz, fuse_lanes, write_lanes)
        if not d.get("fa"):                               # the last pixel's writes: P / write_lanes cycles a block
            d["n_iter"] += g["nb"] * (pz // write_lanes - 1)
        cyc = cyc + [(None, None)] * (steps - len(cyc))
        d["uoff"] = len(units["pair"])
        for a0, a1 in cyc:
            pair = 0
            for h, a in enumerate((a0, a1)):
                if a is None:
                    vals = (0, 0, 0, 0)
                else:
                    cb, ky, kx, pr = a
                    vals = (cb * g["h"] * g["w"] + ky * g["dh"] * g["w"] + kx * g["dw"], ky * g["dh"], kx * g["dw"],
                            min(hb, max(0, g["cend"] - cb * pc - h * hb)))
                    pair = h + 1 if pr else pair
                for key, v in zip(("off", "ky", "kx", "n"), vals):
                    units[key][h].append(v)
            units["pair"].append(pair)
        wpad, kw = g["wpad"], g["kw"]                     # (nb * pz, ncg * pc, kh * kw)
        nz = wpad.shape[0]
        slot = np.zeros((ns, nz, steps), np.int64)
        for c, (a0, a1) in enumerate(cyc):
            for u, (a, h, second) in enumerate(((a0, 0, 0), (a1, 1, 0),
                                                (a0 if a0 and a0[3] else a1 if a1 and a1[3] else None,
                                                 0 if a0 and a0[3] else 1, 1))):
                if a is None:
                    continue
                cb, ky, kx, _ = a
                tap = ky * kw + kx + second
                for k in range(hb):
                    ch = cb * pc + h * hb + k
                    if ch < wpad.shape[1]:
                        slot[u * hb + k, :, c] = wpad[:, ch, tap]
        for lane in range(pz):
            for s in range(ns):
                wl[lane][s].append(slot[s, lane::pz].reshape(-1))
        d["n_iter"] += g["ohw"] * g["nb"] * (steps - d["steps"])
        d.update(steps=steps, woff=woff)
        woff += g["nb"] * steps
        if g["ohw"] > 1:
            tz_slots = max(tz_slots, 2 + -(-tz_distance // (g["nb"] * steps)))
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(1, np.int64)      # noqa: E731
    for key in ("off", "ky", "kx", "n"):
        units[key] = [u or [0] for u in units[key]]
    units["pair"] = units["pair"] or [0]
    units["mtaps"] = units["mtaps"] or [(0, 0, 0, 0)]
    return [[cat(b) for b in lane] for lane in wl], units, tz_slots
