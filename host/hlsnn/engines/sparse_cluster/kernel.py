"""Accelerator-facing operations of ``sparse_cluster``: zero-skipping convolution on M units
with the output map partitioned by the non-zeros of the input (source 003). Operations larger
than one call are tiled transparently (rules in the :class:`Kernel` docstring)."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...formats._validate import as_float_input, as_int_array
from ..instrument import instrument
from ...formats import sparse as sfmt
from . import protocol, tiles
from .emulator import conv_accumulate, emulate, postprocess
from ..common import largest_frac
from ..stream import merge_stats
from ..tiling import conv_pad, pad_map, transfer_limit
from .protocol import Job
from .tiles import Traffic as _Traffic  # noqa: F401  (tests/engines/sparse_cluster/test_tiling.py imports it from here)
from .spec import MAGIC


def _int8(name, a):
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise InputError(f"{name} must be an integer array for the integer path, got dtype {a.dtype}")
    if a.size and (a.min() < -128 or a.max() > 127):
        raise InputError(f"{name} values must be int8, in [-128, 127]; got [{a.min()}, {a.max()}]")
    return a.astype(np.int64)


def _check_tileable(p, x, w):
    """int8 ``x`` (C, H, W) and ``w`` (Z, C, k, k) with C and k within the config's limits, as
    int64 (Z and the map size are tiled; C and k are not)."""
    x = _int8("x", x)
    w = _int8("w", w)
    if x.ndim != 3 or w.ndim != 4 or w.shape[1] != x.shape[0] or w.shape[2] != w.shape[3]:
        raise InputError(f"x must be (C, H, W) and w (Z, C, k, k) with matching C; got {x.shape} and {w.shape}")
    if 0 in x.shape or 0 in w.shape:
        raise InputError(f"x {x.shape} and w {w.shape}: every dimension must be at least 1 (an empty map or kernel)")
    z, c, k, _ = w.shape
    if c > p["max_in_channels"]:
        raise InputError(f"C = {c} input channels exceed max_in_channels = {p['max_in_channels']}: the sum over "
                         f"input channels is not split into several calls (each call requantizes its own sums, so "
                         f"partial sums would change the result); use a config with max_in_channels >= {c}")
    if k > p["max_ksize"]:
        raise InputError(f"kernel size k = {k} exceeds max_ksize = {p['max_ksize']}")
    return x, w


def check_operands(p, x, w):
    """int8 ``x`` (C, H, W) and ``w`` (Z, C, k, k) within one call's limits, as int64."""
    x, w = _check_tileable(p, x, w)
    if w.shape[0] > p["max_out_channels"]:
        raise InputError(f"Z = {w.shape[0]} output channels exceed max_out_channels = {p['max_out_channels']} "
                         f"of one call")
    return x, w


def window_counts(col, row0, eh, col0, ew, k):
    """The vector unit's work per coefficient position: ``out[..., ky, kx, l]`` is the number of
    non-zeros multiplier ``l < ew`` applies coefficient ``(ky, kx)`` to, those of input column
    ``col0 + l + kx`` in rows ``row0 + ky .. row0 + ky + eh - 1``. ``col[..., r, c]``: the
    non-zeros of column ``c`` in rows above ``r`` (a cumulative sum over rows with a leading
    zero row)."""
    rows = np.stack([col[..., row0 + ky + eh, col0:col0 + ew + k - 1] - col[..., row0 + ky, col0:col0 + ew + k - 1]
                     for ky in range(k)], axis=-2)                                  # (..., ky, columns)
    return np.lib.stride_tricks.sliding_window_view(rows, ew, axis=-1)[..., :k, :]


class JobTimes:
    """Time estimates of jobs on the vector units, for planning (the cycle model is
    :mod:`hlsnn.perf.sparse_cluster`), per pass of output channels: ``nw`` (C, k, k) holds a
    pass's non-zero coefficients per input channel and position (the layer's count divided by
    its passes; without weights, every coefficient of ``zg`` channels). A job's unit time is
    its ``MacLoop`` (per channel, the sum over ``(ky, kx)`` of ``nw`` times ``max(1, the most
    non-zeros a multiplier's column has in the window)``, or the next channel's entries when
    more), its first tile's entries, ``k^2 + 3`` cycles a channel and its output pixels; a
    unit without a job in a round still takes a cycle per coefficient (:attr:`idle`).
    :meth:`stream` is a job's share of ``Dispatch`` (its data segments, ``lanes`` to a beat) and
    :attr:`round_stream` a round's coefficient segments. Rectangles are in output coordinates
    of the padded map ``xp``."""

    def __init__(self, xp, k, zg, nw=None, lanes=4):
        c, hp, wp = xp.shape
        self.k, self.c, self.zg, self.lanes = k, c, zg, lanes
        self.nw = np.full((c, k, k), float(zg)) if nw is None else np.asarray(nw, float)
        self.col = np.zeros((c, hp + 1, wp), np.int32)
        np.cumsum(xp != 0, axis=1, out=self.col[:, 1:])
        per = self.nw.sum(axis=(1, 2))
        self.idle = float(per.sum()) + c * (k * k + 3)
        self.round_stream = float(((1 + 2 * per) / lanes + 0.5).sum()) + c
        self.cache, self.scache = {}, {}

    def _entries(self, rect):
        r0, r1, q0, q1 = rect
        col, k = self.col, self.k
        return col[:, r1 + k - 1, q0:q1 + k - 1].sum(axis=1) - col[:, r0, q0:q1 + k - 1].sum(axis=1)

    def __call__(self, rect):
        t = self.cache.get(rect)
        if t is None:
            r0, r1, q0, q1 = rect
            k, eh, ew = self.k, r1 - r0, q1 - q0
            most = window_counts(self.col, r0, eh, q0, ew, k).max(axis=-1)         # (C, ky, kx)
            steps = (self.nw * np.maximum(most, 1)).sum(axis=(1, 2))               # (C,)
            entries = self._entries(rect)
            t = float(np.maximum(steps, np.append(entries[1:], 0)).sum()) + float(entries[0]) \
                + (k * k + 3) * self.c + self.zg * eh * ew
            self.cache[rect] = t
        return t

    def stream(self, rect):
        if rect is None:
            return float(self.c)
        t = self.scache.get(rect)
        if t is None:
            t = self.scache[rect] = float(((1 + 2 * self._entries(rect)) / self.lanes + 0.5).sum())
        return t


def deal(times, rects, units):
    """Rounds of jobs: the rectangles sorted by time, ``units`` a round (the slowest together);
    within a round the slowest job goes to the unit with the least time so far, so that the
    units' totals even out. Returns ``(rounds, cost)``: per round, per unit, a rectangle or
    None; and ``(the slower of the slowest unit's total and Dispatch's, the sum of the rounds'
    slowest jobs)``, a unit without a job in a round counting ``times.idle``."""
    order = sorted(rects, key=lambda r: (-times(r), r))
    rounds, total, load, stream = [], 0.0, [0.0] * units, 0.0
    for i in range(0, len(order), units):
        chunk = order[i:i + units]
        total += times(chunk[0])
        rnd = [None] * units
        for rect in chunk:                    # the round's slowest job to the least loaded unit
            m = min((m for m in range(units) if rnd[m] is None), key=lambda m: (load[m], m))
            rnd[m] = rect
            load[m] += times(rect)
        for m in range(units):
            if rnd[m] is None:
                load[m] += times.idle
            stream += times.stream(rnd[m])
        stream += times.round_stream
        rounds.append(rnd)
    return rounds, (max(max(load), stream), total)


def refine(times, rects, units, step, min_rows=2):
    """Split a slow job in two row bands (at a multiple of ``step``) while that lowers the
    dealt time (:func:`deal`): the slowest job first, else the next slowest (up to
    ``units`` of them), at most ``4 * units`` splits. A dense patch then spreads over several
    units instead of holding one round back."""
    rects = list(rects)
    _, best = deal(times, rects, units)
    for _ in range(4 * units):
        for worst in sorted(rects, key=lambda r: (-times(r), r))[:units]:
            r0, r1, q0, q1 = worst
            mid = r0 + (r1 - r0) // 2 // step * step
            if mid - r0 < max(step, min_rows) or r1 - mid < max(step, min_rows):
                continue
            trial = [r for r in rects if r != worst] + [(r0, mid, q0, q1), (mid, r1, q0, q1)]
            _, t = deal(times, trial, units)
            if t < best:
                rects, best = trial, t
                break
        else:
            break
    return rects


class Plan:
    """How a layer is cut into jobs: the padded input, the partition and the rounds."""

    def __init__(self, xp, k, out_shape, partition, rounds, pool):
        self.xp, self.k, self.out_shape, self.partition, self.rounds, self.pool = xp, k, out_shape, partition, rounds, pool


@instrument
class Kernel:
    """Zero-skipping convolution (stride 1, 'same' or 'valid'), int8 in, int8 or int32 out.

    ``stats=True`` sets the ``FLAG_STATS_OUT`` bit: the statistics unit returns the MSB
    histogram of the int32 values after bias, ReLU and pooling (``protocol`` docstring), left in
    :attr:`last_stats` (int64, ``protocol.stats_bins(p)`` = 32 counters); after a call without
    it, :attr:`last_stats` is None.

    **Tiling** (:mod:`hlsnn.engines.tiling`). An operation larger than one call is split into
    calls whose outputs are disjoint, so every output value, the histogram and the saturation
    count equal those of one (hypothetical) call on a kernel with larger maxima, on every target:

    * *Output channels*: a call takes at most ``max_out_channels`` channels, in whole passes
      of ``max_z`` (every pass resends the map's data segments, so a call below a pass would
      send them once more for fewer channels); as many passes as the transfer limit allows.
    * *Map*: the input is zero-padded on the host once (the padding of ``padding``) and cut
      into rectangles of outputs, each sent with its ``k - 1`` halo and run with 'valid'
      padding. With the map larger than ``max_hw`` (height or width) the rectangles are at most
      ``max_hw`` padded inputs high and wide; a rectangle on which one pass exceeds the
      transfer limit is cut again into a grid of near-square pieces (about as many as the
      excess; square pieces keep the halo small), down to one output (2x2 with pooling), where
      calls of fewer channels than a pass, down to one, are the last resort. With ``pool``
      every rectangle starts on an even output row and column and has an even size, so pooling
      windows never straddle two calls (an odd last row/column is dropped, as in one call).
    * *Batch* (:meth:`conv2d_batch_int`): consecutive images, at most :meth:`batch_capacity`
      per call and as many as the transfer limit allows; an image that alone exceeds one call
      goes through the map tiling above.
    * *Input channels* C > ``max_in_channels`` and ``k > max_ksize`` are errors: splitting the
      sum over C would requantize partial sums. (The deploy runner splits C into raw calls,
      whose int32 sums it adds on the host before the output rules: ``deploy.run.runner.SparseExec``.)
    * The transfer limit is :func:`~hlsnn.engines.tiling.transfer_limit` of the target (None:
      unlimited); the bytes of a call's input and output are computed exactly as
      :func:`protocol.pack_input` and :func:`protocol.n_output_beats` lay them out.
    * ``last_stats`` of a tiled operation merges the calls' histograms
      (:func:`~hlsnn.engines.stream.merge_stats`), ``last_sat_count`` sums their counts
      (saturating at ``2**32 - 1``), ``last_calls`` counts the calls and ``last_plan`` is the
      last call's plan. An operation that fits one call runs exactly as before (no copies).
      The tiled paths are in ``sparse_cluster.tiles``.

    After every operation on the ``csim`` or ``sim`` target, :attr:`last_cycles` holds the
    modelled cycles of its kernel calls (:class:`hlsnn.perf.model.KernelCycles`; None elsewhere).
    """

    OPERATIONS = ("conv2d", "conv2d_int", "conv2d_batch_int", "channel_sums")

    def __init__(self, cfg, target):
        self.cfg, self.p, self.target = cfg, cfg.params, target
        self.last_sat_count = 0
        self.last_plan = None
        self.last_stats = None
        self.last_calls = 0

    # ------------------------------------------------------------------ planning
    def plan(self, x, k, padding="same", pool=False, threshold=0.03, balance="auto", weights=None):
        """Pad the input, partition the output grid over the units by the input's non-zeros,
        fold each unit's rectangle to the unit's tile size, and group the folds into rounds
        (one job per unit per round). One call: the map must be within ``max_hw``.

        ``balance``: ``"fraction"`` (source 003: non-zero fractions within ``threshold``),
        ``"work"`` (equal non-zero counts), ``"equal"`` (the equal split, folds in unit
        order), or ``"auto"`` (default): the partition, of those and of the equal and
        count-balanced ones on every other grid of the units, whose jobs deal best by their
        modelled time (:class:`JobTimes`, with the ``weights`` (Z, C, k, k) when given), its
        slowest jobs cut into row bands while that helps (:func:`refine`), dealt to the
        units by time (:func:`deal`)."""
        if balance not in ("auto", "fraction", "work", "equal"):
            raise InputError(f"balance = {balance!r}: must be auto, fraction, work or equal")
        c, h, w = x.shape
        xp = pad_map(x, conv_pad(padding, k))
        self._check_fit(xp, k, pool, h, w, padding)
        self._check_pool(pool)
        if max(h, w) > self.p["max_hw"]:
            raise InputError(f"feature map {h}x{w} exceeds max_hw = {self.p['max_hw']}")
        return self._plan_padded(xp, k, pool, threshold, balance, weights)

    def _check_pool(self, pool):
        """A pooled job covers whole 2x2 windows, so a unit's output tile must hold one."""
        if pool and min(self.p["tile_h"], self.p["tile_w"]) < 2:
            raise InputError(f"2x2 pooling needs output tiles of at least 2x2; config {self.cfg.name} has tile_h = "
                             f"{self.p['tile_h']}, tile_w = {self.p['tile_w']} (pool on the host instead)")

    @staticmethod
    def _check_fit(xp, k, pool, h, w, padding):
        oh, ow = xp.shape[1] - k + 1, xp.shape[2] - k + 1
        if oh < 1 or ow < 1:
            raise InputError(f"a {k}x{k} kernel does not fit a {h}x{w} map with padding {padding!r}")
        if pool and (oh < 2 or ow < 2):
            raise InputError(f"2x2 pooling needs an output of at least 2x2, got {oh}x{ow}")

    def _plan_padded(self, xp, k, pool, threshold, balance="auto", weights=None):
        """:meth:`plan` of an already padded input ``xp`` (run with 'valid' padding)."""
        p = self.p
        c = xp.shape[0]
        oh, ow = xp.shape[1] - k + 1, xp.shape[2] - k + 1
        # balance by the input non-zeros at each output pixel's centre, counted over channels
        # (partition() weighs a pixel of a 3-D map by its number of non-zero channels)
        c0 = (k - 1) // 2
        weight = xp[:, c0:c0 + oh, c0:c0 + ow] != 0
        step = 2 if pool else 1
        gh, gw = oh // step, ow // step
        if pool:
            # a pooled pixel covers 2x2 outputs: its four positions become extra channels
            weight = weight[:, :gh * 2, :gw * 2].reshape(c, gh, 2, gw, 2).transpose(0, 2, 4, 1, 3).reshape(4 * c, gh, gw)
        tile = (max(1, p["tile_h"] // step), max(1, p["tile_w"] // step))
        units = p["units"]
        zg = min(p["max_z"], weights.shape[0] if weights is not None else p["max_z"])
        nw = None if weights is None else np.count_nonzero(weights, axis=0) / -(-weights.shape[0] // p["max_z"])

        def best(**kw):
            # Source 003 balances the non-zero fractions; "auto" returns the candidates for
            # the caller to deal: that partition, the equal split and the count-balanced one
            # on the default grid, and the equal and count-balanced ones on every other grid.
            if balance == "equal":
                return sfmt.partition(weight, threshold=1.0, max_tile=tile, **kw)
            frac = None if balance == "work" else sfmt.partition(weight, threshold=threshold, max_tile=tile, **kw)
            if balance == "fraction":
                return frac
            work = sfmt.partition(weight, threshold=threshold, max_tile=tile, balance="work", **kw)
            if balance == "work":
                return work
            cands = [frac, work, sfmt.partition(weight, threshold=1.0, max_tile=tile, **kw)]
            if "grid" not in kw:
                n = kw["units"]
                for gr in range(1, n + 1):
                    if n % gr or (gr, n // gr) == sfmt.default_grid(n) or gr > gh or n // gr > gw:
                        continue
                    for how in ("work", "equal"):
                        cands.append(sfmt.partition(weight, threshold=1.0 if how == "equal" else threshold,
                                                    max_tile=tile, grid=(gr, n // gr),
                                                    balance="work" if how == "work" else "fraction", **kw))
            return cands
        try:
            part = best(units=units)
        except InputError:       # a map smaller than the unit grid: one band of columns
            units_used = min(units, gw)
            part = best(units=units_used, grid=(1, units_used))
        if isinstance(part, list):
            # "auto": the jobs (time-folded cells) of the candidate partition that deals best,
            # with the slowest jobs cut into row bands while that helps, dealt by time
            times = JobTimes(xp, k, zg, nw, protocol.lanes_per_beat(p))
            flat = [[tuple(int(v) * step for v in f) for fl in pt.folds for f in fl] for pt in part]
            i = min(range(len(part)), key=lambda i: deal(times, flat[i], units)[1])
            part = part[i]
            slots, _ = deal(times, refine(times, flat[i], units, step), units)
        else:
            folds = list(part.folds) + [[] for _ in range(units - len(part.folds))]
            slots = [[tuple(int(v) * step for v in folds[m][r]) if r < len(folds[m]) else None
                      for m in range(units)] for r in range(max(len(f) for f in folds))]
        rounds = [[Job(m, *rect) if rect else Job(m, 0, 0, 0, 0) for m, rect in enumerate(rnd)] for rnd in slots]
        out_shape = (gh, gw) if pool else (oh, ow)
        return Plan(xp, k, out_shape, part, rounds, pool)

    # ------------------------------------------------------------------ integer path
    def conv2d_int(self, x, w, *, bias=None, shift=None, padding="same", relu=False, pool=False,
                   requantize=True, threshold=0.03, stats=False):
        """int8 ``x`` (C, H, W) and ``w`` (Z, C, k, k) -> int8 (``requantize``) or the exact
        int32 accumulators (+ bias, ReLU, pooling) as int64 (Z, H', W'). Any Z and map size
        (tiled, see the class docstring); C <= ``max_in_channels``, k <= ``max_ksize``.

        ``shift`` (int or (Z,)): the output right shift; None chooses, per output channel, the
        smallest shift that fits the largest value into int8 (calibrated on the emulator's
        exact accumulators over the whole map, once, before any tiling: tiled == untiled).

        ``stats``: the MSB histogram of the int32 values before requantization into
        :attr:`last_stats`.
        """
        p = self.p
        x, w = _check_tileable(p, x, w)
        z, c, k, _ = w.shape
        bias = self._bias(bias, z)
        h, wd = x.shape[1:]
        xp = pad_map(x, conv_pad(padding, k))
        self._check_fit(xp, k, pool, h, wd, padding)
        self._check_pool(pool)
        flags = (protocol.FLAG_RELU if relu else 0) | (protocol.FLAG_POOL if pool else 0) | \
            (0 if requantize else protocol.FLAG_RAW) | (protocol.FLAG_STATS_OUT if stats else 0)
        if shift is None:
            if requantize:
                t, _ = postprocess(conv_accumulate(xp, w), bias, np.zeros(z), relu=relu, pool=pool, raw=True)
                big = np.abs(t).reshape(z, -1).max(axis=1) if t.size else np.zeros(z, np.int64)
                shift = np.array([max(0, int(v).bit_length() - 7) for v in big])
            else:
                shift = np.zeros(z, np.int64)
        shift = self._shift(shift, z)
        self.last_shift = shift
        return tiles.conv(self, xp, w, bias, shift, flags, stats, threshold, max(h, wd) <= p["max_hw"])

    def _plan_traffic(self, plan, limit):
        """:func:`tiles.plan_traffic` with this kernel's config (tests/engines/sparse_cluster/
        test_tiling.py calls it)."""
        return tiles.plan_traffic(self.p, plan, limit)

    # ------------------------------------------------------------------ one call
    def _run_plan(self, plan, w, bias, shift, flags, stats):
        p = self.p
        z, c, k, _ = w.shape
        if getattr(self.target, "arrays", False):
            return self._plan_arrays(plan, w, bias, shift, flags, stats)
        coefs = sfmt.compress_kernel(w)
        beats = protocol.pack_input(p, fmap_padded=plan.xp, coefs=coefs, rounds=plan.rounds, bias=bias,
                                    shift=shift, ksize=k)
        regs = [c, z, k, flags, len(plan.rounds), len(protocol.groups(p, z))]
        out, regs_out = self.target.run(beats, regs, protocol.n_output_beats(p, plan.rounds, z, flags, stats=stats))
        magic, hash32, sat = (int(r) for r in regs_out)
        if magic != MAGIC or hash32 != self.cfg.hash32:
            raise InputError(f"kernel ID register reads magic 0x{magic:08x} hash 0x{hash32:08x}; config "
                             f"{self.cfg.name} expects 0x{MAGIC:08x} 0x{self.cfg.hash32:08x}")
        self.last_sat_count, self.last_plan, self.last_calls = sat, plan, 1
        self.last_stats = protocol.unpack_stats(p, out) if stats else None
        return protocol.unpack_output(p, out, plan.rounds, z, plan.out_shape, flags)

    def _plan_arrays(self, plan, w, bias, shift, flags, stats):
        """The ``emu`` target's call of a plan: the emulator's rules on the whole padded map at
        once, no beats packed or unpacked, equal to :meth:`emulate_stream` on the packed call
        (``EmuTarget(arrays=False)``; ``tests/engines/test_emu_arrays.py`` holds the two equal).

        A job reads only its rectangle's halo of the map, so its outputs are those of the
        whole map's convolution (rules 1-4) inside its rectangle; outputs no job covers (the
        gaps between a batch's cells) stay 0, are not counted by the statistics unit (0 has no
        MSB) and do not saturate. The saturation count is the sum over the jobs modulo
        ``2**32`` (as the stream's per-job sums), the histogram the count over every job's
        outputs saturated at ``2**32 - 1`` (as the counters' merges)."""
        relu, pool = bool(flags & protocol.FLAG_RELU), bool(flags & protocol.FLAG_POOL)
        raw = bool(flags & protocol.FLAG_RAW)
        t = postprocess(conv_accumulate(plan.xp, w), bias, shift, relu=relu, pool=pool, raw=True, own_acc=True)[0]
        mask = np.zeros(t.shape[1:], bool)
        for jobs in plan.rounds:
            for j in jobs:
                if j.oh:
                    h, wd = protocol.out_dims(j, pool)
                    r0, c0 = (j.row0 // 2, j.col0 // 2) if pool else (j.row0, j.col0)
                    mask[r0:r0 + h, c0:c0 + wd] = True
        if not mask.all():
            np.multiply(t, mask, out=t)        # t is this call's own array (acc + bias)
        res = postprocess(t, 0, shift, raw=raw, rounding=self.p["rounding"], stats=stats)
        self.last_sat_count, self.last_plan, self.last_calls = res[1], plan, 1
        self.last_stats = res[2] if stats else None
        # C order, as the stream path's result: host float ops downstream (a Softmax's sums)
        # round by the memory layout of what they read
        return np.ascontiguousarray(res[0])

    # ------------------------------------------------------------------ batches
    def batch_capacity(self, h, w, k, padding="same"):
        """Images of ``h x w`` that :meth:`conv2d_batch_int` packs into one call (by ``max_hw``;
        the transfer limit may allow fewer)."""
        pad = (k - 1) // 2 if padding == "same" else 0
        return (self.p["max_hw"] // (h + 2 * pad)) * (self.p["max_hw"] // (w + 2 * pad))

    def conv2d_batch_int(self, x, w, *, bias=None, shift=0, padding="same", relu=False, stats=False, raw=False):
        """A batch of int8 images ``x`` (B, C, H, W): the zero-padded images are laid out as
        cells of one grid map (at most ``max_hw`` square) and every cell's output rectangle
        is its own job (split into tiles of at most ``tile_h x tile_w``), so units work on
        whole images, no output straddles two images, and the statistics unit counts exactly
        the B images' outputs. Jobs go to the units round-robin in image order. A batch larger
        than one call is split (class docstring: Z, then consecutive images; an image too large
        for one call is tiled as in :meth:`conv2d_int`).
        Returns int8 (B, Z, H', W'); requantized with ``shift`` (int or (Z,)); with ``raw``,
        the int32 accumulators (plus bias, ReLU) as int64 (``FLAG_RAW``; ``shift`` unused)."""
        p = self.p
        x = np.asarray(x)
        if x.ndim != 4:
            raise InputError(f"x must be (B, C, H, W), got shape {x.shape}")
        b, c, h, wd = x.shape
        _, w = _check_tileable(p, x[0] if b else np.zeros((c, h, wd), np.int64), w)
        x = _int8("x", x)
        z, _, k, _ = w.shape
        pad = conv_pad(padding, k)
        oh, ow = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
        if oh < 1 or ow < 1:
            raise InputError(f"a {k}x{k} kernel does not fit a {h}x{wd} map with padding {padding!r}")
        bias, shift = self._bias(bias, z), self._shift(shift, z)
        flags = (protocol.FLAG_RELU if relu else 0) | (protocol.FLAG_STATS_OUT if stats else 0) | \
            (protocol.FLAG_RAW if raw else 0)
        self.last_shift = shift
        cap = self.batch_capacity(h, wd, k, padding)
        calls = tiles.batch_calls(p, transfer_limit(self.target), x, w, pad, flags, stats, cap) if cap and b else None
        if calls is not None and len(calls) == 1:
            return self._batch_call(x, w, bias, shift, pad, flags, stats)          # one call
        return tiles.conv_batch(self, x, w, bias, shift, pad, flags, stats, calls)

    def _batch_call(self, x, w, bias, shift, pad, flags, stats):
        """One call of a batch that fits it (:meth:`conv2d_batch_int`)."""
        p = self.p
        b, c, h, wd = x.shape
        z, _, k, _ = w.shape
        ch, cw = h + 2 * pad, wd + 2 * pad
        oh, ow = ch - k + 1, cw - k + 1
        gc = min(p["max_hw"] // cw, b)
        gr = -(-b // gc)
        xp = np.zeros((c, gr * ch, gc * cw), np.int64)
        cells = xp.reshape(c, gr, ch, gc, cw)[:, :, pad:pad + h, :, pad:pad + wd]     # (C, gr, H, gc, W) view
        full = b // gc                                                                # rows of gc images
        cells[:, :full] = x[:full * gc].reshape(full, gc, c, h, wd).transpose(2, 0, 3, 1, 4)
        if b > full * gc:
            cells[:, full, :, :b - full * gc] = x[full * gc:].transpose(1, 2, 0, 3)
        rects, cell = [], tiles.batch_rects(p, oh, ow)
        for i in range(b):
            r, q = divmod(i, gc)
            rects += [(r * ch + r0, r * ch + r1, q * cw + q0, q * cw + q1) for r0, r1, q0, q1 in cell]
        units = p["units"]
        rounds = []
        for j0 in range(0, len(rects), units):
            chunk = rects[j0:j0 + units]
            rounds.append([Job(m, *chunk[m]) if m < len(chunk) else Job(m, 0, 0, 0, 0) for m in range(units)])
        plan = Plan(xp, k, (gr * ch - k + 1, gc * cw - k + 1), None, rounds, False)
        res = self._run_plan(plan, w, bias, shift, flags, stats)
        # image i's outputs: the (oh, ow) corner of its cell (row i // gc, column i % gc)
        s0, s1, s2 = res.strides
        grid = np.lib.stride_tricks.as_strided(res, (z, gr, oh, gc, ow), (s0, ch * s1, s1, cw * s2, s2),
                                               writeable=False)
        out = np.empty((gr, gc, z, oh, ow), np.int64)       # a new array, as the caller may write it
        np.copyto(out, grid.transpose(1, 3, 0, 2, 4), casting="unsafe")
        return out.reshape(gr * gc, z, oh, ow)[:b]

    def channel_sums(self, x, w, *, padding="same", batch=True, step=None):
        """The exact sums over any number of input channels: one raw call (``FLAG_RAW``: int32
        sums, no bias, no ReLU) per chunk of at most ``max_in_channels`` channels, added here
        (int64). ``x`` is a batch (B, C, H, W) for :meth:`conv2d_batch_int` or, with
        ``batch=False``, one map (C, H, W) for :meth:`conv2d_int`; ``w`` (Z, C, k, k); ``step``
        the channels per call (default and most ``max_in_channels``). Returns
        (B, Z, H', W') or (Z, H', W'); :attr:`last_calls` counts the calls. The deploy runner
        applies the output rules (``emulator.postprocess``) to the total."""
        c = np.shape(w)[1]
        step = step or self.p["max_in_channels"]
        zero = np.zeros(np.shape(w)[0], np.int64)
        total, calls = None, 0
        for c0 in range(0, c, step):
            c1 = min(c, c0 + step)
            if batch:
                y = self.conv2d_batch_int(x[:, c0:c1], w[:, c0:c1], bias=zero, padding=padding, raw=True)
            else:
                y = self.conv2d_int(x[c0:c1], w[:, c0:c1], bias=zero, shift=0, padding=padding, requantize=False)
            calls += self.last_calls
            total = y if total is None else total + y
        self.last_calls = calls
        return total

    # ------------------------------------------------------------------ operands
    @staticmethod
    def _bias(bias, z):
        if bias is not None and np.size(bias) not in (1, z):
            raise InputError(f"bias has {np.size(bias)} values: must have one per output channel (Z = {z}) or one")
        bias = np.zeros(z, np.int64) if bias is None else np.broadcast_to(
            as_int_array("bias", bias, -(1 << 62), 1 << 62, np.int64), (z,)).copy()
        if np.any(np.abs(bias) >= 1 << 30):
            raise InputError("bias must be in (-2^30, 2^30) accumulator units")
        return bias

    @staticmethod
    def _shift(shift, z):
        shift = np.broadcast_to(np.asarray(shift, np.int64), (z,)).copy()
        if np.any(np.abs(shift) > 63):
            raise InputError("shift must be in [-63, 63]")
        return shift

    # ------------------------------------------------------------------ float / dispatch
    def conv2d(self, x, w, bias=None, padding="same", relu=False, requantize=True, *, pool=False, shift=None,
               threshold=0.03, stats=False):
        """``x`` (C, H, W), ``w`` (Z, C, k, k). ``stats``: as in :meth:`conv2d_int` (the
        histogram is of the integers, in accumulator units, also on the float path). Integer arrays (int8 values) run as they are
        (see :meth:`conv2d_int`; ``bias`` in accumulator units). Float arrays are quantized to
        int8 with power-of-two scales (the largest that fits), run, and returned as floats.
        The scales of ``x`` and ``w`` and the output shift (``shift=None``) are chosen once over
        the whole tensors, before any tiling, so a tiled call returns what one call would."""
        xa, wa = np.asarray(x), np.asarray(w)
        if xa.dtype.kind in "iu" and wa.dtype.kind in "iu":
            return self.conv2d_int(xa, wa, bias=bias, shift=shift, padding=padding, relu=relu, pool=pool,
                                   requantize=requantize, threshold=threshold, stats=stats)
        xq, fx = _q8(xa, "x")
        wq, fw = _q8(wa, "w")
        b = None if bias is None else np.rint(np.ldexp(as_float_input(bias, "bias"), fx + fw)).astype(np.int64)
        if not requantize:
            y = self.conv2d_int(xq, wq, bias=b, padding=padding, relu=relu, pool=pool, requantize=False,
                                threshold=threshold, stats=stats)
            return np.ldexp(y.astype(np.float64), -(fx + fw))
        y = self.conv2d_int(xq, wq, bias=b, shift=shift, padding=padding, relu=relu, pool=pool, threshold=threshold,
                            stats=stats)
        return np.ldexp(y.astype(np.float64), (self.last_shift - (fx + fw)).reshape(-1, 1, 1))

    # ------------------------------------------------------------------ emulator target
    @staticmethod
    def emulate_stream(cfg, beats, regs_in):
        """Per job, as a unit sees it: its tile from the compressed entries, the group's
        coefficients, the same post-processing; outputs in stream order."""
        p = cfg.params
        cin, zout, k, flags, n_rounds, n_groups = (int(r) for r in regs_in)
        d = protocol.unpack_input(p, beats, regs_in)
        w, bias, shift = d["weights"], d["bias"], d["shift"]
        lanes = protocol.lanes_per_beat(p)
        stats = bool(flags & protocol.FLAG_STATS_OUT)
        parts, sat, hist = [], 0, np.zeros(protocol.stats_bins(p), np.int64)
        for z0, z1 in protocol.groups(p, zout):
            for r, hw in enumerate(d["rounds_hw"]):
                for m in range(p["units"]):
                    oh, ow = int(hw[m, 0]), int(hw[m, 1])
                    if not oh:
                        continue
                    tile = np.zeros((cin, oh + k - 1, ow + k - 1), np.int64)
                    for kz in range(cin):
                        v, rr, cc = d["entries"][(r, m, kz)]
                        tile[kz, rr, cc] = v
                    out, s, *h = emulate(p, tile, w[z0:z1], bias[z0:z1], shift[z0:z1], relu=bool(flags & 1),
                                         pool=bool(flags & 2), raw=bool(flags & 4), stats=stats)
                    sat += s
                    if stats:
                        hist = merge_stats(hist, h[0])
                    parts.append(protocol.job_segment(out, bool(flags & protocol.FLAG_RAW), lanes))
        from ..stream import lanes_to_beats
        lanes_all = np.concatenate(parts) if parts else np.zeros(0, np.int64)
        out = lanes_to_beats(lanes_all, protocol.LANE, p["stream_bits"])
        if stats:
            out = np.concatenate([out, protocol.pack_stats(p, hist)])
        return (out,
                np.array([MAGIC, cfg.hash32, sat % (1 << 32)], dtype=np.uint32))


def _q8(a, name):
    """Float array -> (int8 values, F) with the largest power-of-two scale 2**F that fits."""
    a = as_float_input(a, name)        # real and finite (complex, string, object refused)
    f = largest_frac(float(np.abs(a).max()) if a.size else 0.0, 127.0)
    return np.clip(np.rint(np.ldexp(a, f)), -128, 127).astype(np.int64), f
