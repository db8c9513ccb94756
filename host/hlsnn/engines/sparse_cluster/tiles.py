"""Tiling of ``sparse_cluster`` convolutions larger than one kernel call (rules: ``Kernel``
docstring, *Tiling*, and :mod:`hlsnn.engines.tiling`).

:func:`conv` and :func:`conv_batch` run on a :class:`~hlsnn.engines.sparse_cluster.kernel.Kernel`
(``kern``): one call is its ``_plan_padded`` (the partition of one map) and ``_run_plan`` or
``_batch_call``. The call sizes come from :class:`Traffic`, which counts the bytes of a call's
transfers exactly as ``protocol.pack_input`` and ``protocol.n_output_beats`` lay them out.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from .. import tiling
from . import protocol


# ---------------------------------------------------------------------- one map
def conv(kern, xp, w, bias, shift, flags, stats, threshold, in_hw):
    """The convolution of the host-padded ``xp`` in as few calls as the limits allow
    (``Kernel`` docstring); one call when it fits, without copies. ``in_hw``: the map is
    within ``max_hw``."""
    p, k, z = kern.p, w.shape[2], w.shape[0]
    pool = bool(flags & protocol.FLAG_POOL)
    step = 2 if pool else 1
    limit = tiling.transfer_limit(kern.target)
    oh, ow = xp.shape[1] - k + 1, xp.shape[2] - k + 1
    traffic = Traffic(p, w, flags, stats) if limit is not None else None
    if in_hw:       # the whole map, trimmed to whole pooling windows if it must be cut
        todo = [((0, oh // step * step, 0, ow // step * step), kern._plan_padded(xp, k, pool, threshold, weights=w))]
    else:
        todo = [(t, None) for t in hw_tiles(p, oh, ow, k, step)]
    out, tally = None, tiling.Tally()
    todo.reverse()
    while todo:
        rect, plan = todo.pop()
        r0, r1, q0, q1 = rect
        if plan is None:
            plan = kern._plan_padded(tiling.halo_window(xp, rect, k), k, pool, threshold, weights=w)
        minimal = r1 - r0 <= step and q1 - q0 <= step
        zcalls, need = z_calls(p, traffic, limit, z, *plan_traffic(p, plan, limit), whole_passes=not minimal)
        if out is None:
            if in_hw and zcalls is not None and len(zcalls) == 1:
                return kern._run_plan(plan, w, bias, shift, flags, stats)           # one call, as it is
            out = np.zeros((z, oh // step, ow // step), np.int64)
        if zcalls is None:
            todo.extend(reversed([(t, None) for t in split(rect, step, need, limit, w)]))
            continue
        for za, zb in zcalls:
            tiling.stitch(out[za:zb], rect, kern._run_plan(plan, w[za:zb], bias[za:zb], shift[za:zb], flags, stats),
                          step)
            tally.add(kern, kern.last_calls)
    tally.store(kern)
    kern.last_calls = tally.calls
    return out


def hw_tiles(p, oh, ow, k, step):
    """Output rectangles whose padded inputs are at most ``max_hw`` high and wide."""
    size = (p["max_hw"] - k + 1) // step * step
    if size < step:
        raise InputError(f"max_hw = {p['max_hw']} is smaller than a {k}x{k} kernel's input"
                         + (" for 2x2 pooling" if step == 2 else ""))
    axes = []
    for o in (oh, ow):
        o = o // step * step
        axes.append([(0, o)] if o + k - 1 <= p["max_hw"] else pieces(0, o, -(-o // size), step))
    return tiling.grid(*axes)


def split(rect, step, need, limit, w):
    """A rectangle cut into a grid of about as many near-square pieces as its bytes
    ``need`` exceed ``limit`` (at least two; square pieces keep the halo small)."""
    r0, r1, q0, q1 = rect
    if r1 - r0 <= step and q1 - q0 <= step:      # even one output channel did not fit
        z, c, k, _ = w.shape
        raise InputError(f"conv2d: even one {r1 - r0}x{q1 - q0} output tile of one output channel needs a "
                         f"{need[0]}-byte input and a {need[1]}-byte output transfer, more than the DMA's "
                         f"{limit}-byte limit (its length register): the tile's inputs and the {k}x{k} "
                         f"coefficients of C = {c} input channels must fit one transfer; use an overlay whose "
                         f"DMA has a wider length register (c_sg_length_width)")
    n = max(2, -(-max(need) // limit))
    side = max(step, ((r1 - r0) * (q1 - q0) / n) ** 0.5)
    nr, nc = (max(1, min(round(d / side), d // step)) for d in (r1 - r0, q1 - q0))
    if nr * nc < 2:                                    # a strip: cut its longer side in two
        nr, nc = (2, 1) if r1 - r0 >= q1 - q0 else (1, 2)
    return tiling.grid(pieces(r0, r1, nr, step), pieces(q0, q1, nc, step))


def pieces(a, b, n, step):
    """``[a, b)`` in at most ``n`` consecutive pieces whose sizes are multiples of ``step``
    (but the last)."""
    size = -(-(b - a) // max(1, n))
    return tiling.chunks(b, -(-size // step) * step, start=a)


# ---------------------------------------------------------------------- output channels
def z_calls(p, traffic, limit, z, n_rounds, data, areas, copies=1, whole_passes=True):
    """Output-channel ranges ``[(za, zb), ...]`` of consecutive calls (``Kernel`` docstring),
    or None with the bytes of the smallest call allowed when it does not fit: one pass
    (``whole_passes``: a call below a pass would send the data segments once more for
    fewer channels), or one channel."""
    zmax = p["max_out_channels"] if z <= p["max_out_channels"] else p["max_out_channels"] // p["max_z"] * p["max_z"]
    if limit is None:
        return [(a, min(a + zmax, z)) for a in range(0, z, zmax)], None

    def fits(za, zb):
        return max(traffic.bytes(za, zb, n_rounds, data, areas, copies)) <= limit

    calls, za = [], 0
    while za < z:
        least = min(z, za + (p["max_z"] if whole_passes else 1))
        if not fits(za, least):
            return None, traffic.bytes(za, least, n_rounds, data, areas, copies)
        lo, hi = least, min(z, za + zmax)           # fits(lo); the largest zb that fits
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if fits(za, mid) else (lo, mid - 1)
        if lo < z and lo - za >= p["max_z"]:
            lo = za + (lo - za) // p["max_z"] * p["max_z"]      # whole passes
        calls.append((za, lo))
        za = lo
    return calls, None


# ---------------------------------------------------------------------- batches
def batch_rects(p, oh, ow):
    """One image's job rectangles (output coordinates local to its cell)."""
    return tiling.grid(tiling.chunks(oh, p["tile_h"]), tiling.chunks(ow, p["tile_w"]))


def batch_calls(p, limit, x, w, pad, flags, stats, cap):
    """``[(za, zb, i0, i1), ...]``: channels and consecutive images of each call of
    ``Kernel.conv2d_batch_int`` (at most ``cap`` images), or None when one image with one
    output channel exceeds the transfer ``limit``."""
    b, c, h, wd = x.shape
    z, _, k, _ = w.shape
    units = p["units"]
    rects = batch_rects(p, h + 2 * pad - k + 1, wd + 2 * pad - k + 1)
    rounds1 = -(-len(rects) // units)
    if limit is None:
        zcalls, _ = z_calls(p, None, None, z, None, None, None)
        return [(za, zb, i0, i1) for za, zb in zcalls for i0, i1 in pieces(0, b, -(-b // cap), 1)]
    box = np.array([tiling.halo(r, k) for r in rects])
    data = data_lanes(p, tiling.pad_map(x, pad), box).reshape(b, -1).sum(axis=1)     # per image
    csum = np.concatenate([[0], np.cumsum(data)])
    areas = np.array([(r1 - r0) * (q1 - q0) for r0, r1, q0, q1 in rects], np.int64)
    idle = c * pad_lanes(p, 1)
    traffic = Traffic(p, w, flags, stats)
    zcalls, _ = z_calls(p, traffic, limit, z, rounds1, int(data.max()) + (rounds1 * units - len(rects)) * idle, areas)
    if zcalls is None:
        return None
    calls = []
    for za, zb in zcalls:
        i0 = 0
        while i0 < b:
            i1 = i0 + 1            # fits: the channels were chosen for the largest image
            while i1 < b and i1 - i0 < cap:
                n_rounds = -(-(i1 + 1 - i0) * len(rects) // units)
                lanes = int(csum[i1 + 1] - csum[i0]) + (n_rounds * units - (i1 + 1 - i0) * len(rects)) * idle
                if max(traffic.bytes(za, zb, n_rounds, lanes, areas, i1 + 1 - i0)) > limit:
                    break
                i1 += 1
            calls.append((za, zb, i0, i1))
            i0 = i1
    return calls


def conv_batch(kern, x, w, bias, shift, pad, flags, stats, calls):
    """``Kernel.conv2d_batch_int`` in the ``calls`` of :func:`batch_calls`; None: every image's
    map tiled by :func:`conv`."""
    b, _, h, wd = x.shape
    z, _, k, _ = w.shape
    out = np.zeros((b, z, h + 2 * pad - k + 1, wd + 2 * pad - k + 1), np.int64)
    tally = tiling.Tally()
    if calls is None:          # an image alone exceeds one call: tile its map
        in_hw = max(h, wd) <= kern.p["max_hw"]
        for i in range(b):
            out[i] = conv(kern, tiling.pad_map(x[i], pad), w, bias, shift, flags, stats, 0.03, in_hw)
            tally.add(kern, kern.last_calls)
    else:
        for za, zb, i0, i1 in calls:
            out[i0:i1, za:zb] = kern._batch_call(x[i0:i1], w[za:zb], bias[za:zb], shift[za:zb], pad, flags, stats)
            tally.add(kern, kern.last_calls)
    tally.store(kern)
    kern.last_calls = tally.calls
    return out


# ---------------------------------------------------------------------- transfer sizes
def plan_traffic(p, plan, limit):
    """``(n_rounds, data lanes, output areas)`` of a plan's call (None when no limit)."""
    if limit is None:
        return None, None, None
    jobs = [j for r in plan.rounds for j in r if j.oh]
    idle = sum(len(r) for r in plan.rounds) - len(jobs)
    box = np.array([tiling.halo((j.row0, j.row1, j.col0, j.col1), plan.k) for j in jobs], np.int64).reshape(-1, 4)
    data = data_lanes(p, plan.xp[None], box).sum() + idle * plan.xp.shape[0] * pad_lanes(p, 1)
    areas = np.array([np.prod(protocol.out_dims(j, plan.pool)) for j in jobs], np.int64)
    return len(plan.rounds), int(data), areas


def pad_lanes(p, n):
    """Lanes of a segment of ``n`` lanes (padded to whole beats, as ``protocol._seg``)."""
    lanes = protocol.lanes_per_beat(p)
    return -(-np.maximum(n, 1) // lanes) * lanes


def data_lanes(p, xp, box):
    """Lanes of the data segments of jobs whose input windows are ``box`` (J, 4) rows
    ``row0, row1, col0, col1`` of the padded maps ``xp`` (B, C, H, W): (B, J), summed over C."""
    nz = np.zeros((xp.shape[0], xp.shape[1], xp.shape[2] + 1, xp.shape[3] + 1), np.int32)
    np.cumsum(np.cumsum(xp != 0, axis=2, dtype=np.int32), axis=3, out=nz[:, :, 1:, 1:])
    r0, r1, q0, q1 = (np.minimum(box[:, i], xp.shape[2 + i // 2]) for i in range(4))
    n = nz[:, :, r1, q1] - nz[:, :, r0, q1] - nz[:, :, r1, q0] + nz[:, :, r0, q0]     # (B, C, J)
    return pad_lanes(p, 1 + 2 * n.astype(np.int64)).sum(axis=1)


class Traffic:
    """Bytes of one call's input and output transfers for output channels ``[za, zb)`` of
    ``w``, as :func:`protocol.pack_input` and :func:`protocol.n_output_beats` lay them out:
    per pass (group of at most ``max_z`` channels, counted from ``za``) and round, a job
    segment and per input channel the units' data segments and a coefficient segment; the
    output per pass and job, then the statistics segment."""

    def __init__(self, p, w, flags, stats):
        self.p = p
        nnz = np.count_nonzero(w, axis=(2, 3))                                 # (Z, C)
        self.cum = np.concatenate([np.zeros((1, nnz.shape[1]), np.int64), np.cumsum(nnz, axis=0)])
        self.per = 2 if flags & protocol.FLAG_RAW else 1
        self.extra = protocol.n_stats_beats(p) if stats or flags & protocol.FLAG_STATS_OUT else 0

    def bytes(self, za, zb, n_rounds, data, areas, copies=1):
        """``(input bytes, output bytes)`` of a call of ``n_rounds`` rounds whose data segments
        take ``data`` lanes per pass and whose jobs have ``areas`` outputs each (``copies``
        times)."""
        p, lanes = self.p, protocol.lanes_per_beat(self.p)
        n_in, n_out = 0, self.extra
        for g0 in range(za, zb, p["max_z"]):
            g1 = min(zb, g0 + p["max_z"])
            coef = int(pad_lanes(p, 1 + 2 * (self.cum[g1] - self.cum[g0])).sum())
            n_in += n_rounds * (int(pad_lanes(p, p["units"] * (2 + 3 * (g1 - g0)))) + coef) + data
            n_out += copies * int((-(-np.maximum((g1 - g0) * areas * self.per, 1) // lanes)).sum())
        return 2 * n_in, n_out * p["stream_bits"] // 8
