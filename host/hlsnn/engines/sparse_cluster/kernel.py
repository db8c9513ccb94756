"""Accelerator-facing operations of ``sparse_cluster``: zero-skipping convolution on M units
with the output map partitioned by the non-zeros of the input (source 003)."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...formats import sparse as sfmt
from . import protocol
from .emulator import conv_accumulate, emulate, postprocess
from ..common import largest_frac
from ..stream import merge_stats
from .protocol import Job
from .spec import MAGIC


def _int8(name, a):
    a = np.asarray(a)
    if a.dtype.kind not in "iu":
        raise InputError(f"{name} must be an integer array for the integer path, got dtype {a.dtype}")
    if a.size and (a.min() < -128 or a.max() > 127):
        raise InputError(f"{name} values must be int8, in [-128, 127]; got [{a.min()}, {a.max()}]")
    return a.astype(np.int64)


def check_operands(p, x, w):
    """int8 ``x`` (C, H, W) and ``w`` (Z, C, k, k) within the config's limits, as int64."""
    x = _int8("x", x)
    w = _int8("w", w)
    if x.ndim != 3 or w.ndim != 4 or w.shape[1] != x.shape[0] or w.shape[2] != w.shape[3]:
        raise InputError(f"x must be (C, H, W) and w (Z, C, k, k) with matching C; got {x.shape} and {w.shape}")
    z, c, k, _ = w.shape
    if c > p["max_in_channels"] or z > p["max_out_channels"] or k > p["max_ksize"]:
        raise InputError(f"C = {c}, Z = {z}, k = {k} exceed the config's max_in_channels = {p['max_in_channels']}, "
                         f"max_out_channels = {p['max_out_channels']}, max_ksize = {p['max_ksize']}")
    return x, w


class Plan:
    """How a layer is cut into jobs: the padded input, the partition and the rounds."""

    def __init__(self, xp, k, out_shape, partition, rounds, pool):
        self.xp, self.k, self.out_shape, self.partition, self.rounds, self.pool = xp, k, out_shape, partition, rounds, pool


class Kernel:
    """Zero-skipping convolution (stride 1, 'same' or 'valid'), int8 in, int8 or int32 out.

    ``stats=True`` sets the ``FLAG_STATS_OUT`` bit: the statistics unit returns the MSB
    histogram of the int32 values after bias, ReLU and pooling (``protocol`` docstring), left in
    :attr:`last_stats` (int64, ``protocol.stats_bins(p)`` = 32 counters); after a call without
    it, :attr:`last_stats` is None.
    """

    OPERATIONS = ("conv2d", "conv2d_int", "conv2d_batch_int")

    def __init__(self, cfg, target):
        self.cfg, self.p, self.target = cfg, cfg.params, target
        self.last_sat_count = 0
        self.last_plan = None
        self.last_stats = None

    # ------------------------------------------------------------------ planning
    def plan(self, x, k, padding="same", pool=False, threshold=0.03, balance="auto"):
        """Pad the input, partition the output grid over the units by the input's non-zeros,
        fold each unit's rectangle to the unit's tile size, and group the folds into rounds
        (one job per unit per round).

        ``balance``: ``"fraction"`` (source 003: non-zero fractions within ``threshold``),
        ``"work"`` (equal non-zero counts), ``"equal"`` (the equal split), or ``"auto"``
        (default): of ``fraction`` and ``work``, the one with the lower work imbalance (a
        unit's time follows its non-zero count)."""
        if balance not in ("auto", "fraction", "work", "equal"):
            raise InputError(f"balance = {balance!r}: must be auto, fraction, work or equal")
        p = self.p
        c, h, w = x.shape
        pad = self._pad(padding, k)
        xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
        oh, ow = xp.shape[1] - k + 1, xp.shape[2] - k + 1
        if oh < 1 or ow < 1:
            raise InputError(f"a {k}x{k} kernel does not fit a {h}x{w} map with padding {padding!r}")
        if max(h, w) > p["max_hw"]:
            raise InputError(f"feature map {h}x{w} exceeds max_hw = {p['max_hw']}")
        # balance by the input non-zeros at each output pixel's centre, counted over channels
        # (partition() weighs a pixel of a 3-D map by its number of non-zero channels)
        c0 = (k - 1) // 2
        weight = xp[:, c0:c0 + oh, c0:c0 + ow] != 0
        step = 2 if pool else 1
        gh, gw = oh // step, ow // step
        if pool:
            if gh < 1 or gw < 1:
                raise InputError(f"2x2 pooling needs an output of at least 2x2, got {oh}x{ow}")
            # a pooled pixel covers 2x2 outputs: its four positions become extra channels
            weight = weight[:, :gh * 2, :gw * 2].reshape(c, gh, 2, gw, 2).transpose(0, 2, 4, 1, 3).reshape(4 * c, gh, gw)
        tile = (max(1, p["tile_h"] // step), max(1, p["tile_w"] // step))
        units = p["units"]
        def best(**kw):
            # Source 003 balances the non-zero fractions; a unit's time follows its non-zero
            # count, so "auto" keeps whichever of the two has the lower work imbalance.
            if balance == "equal":
                return sfmt.partition(weight, threshold=1.0, max_tile=tile, **kw)
            frac = None if balance == "work" else sfmt.partition(weight, threshold=threshold, max_tile=tile, **kw)
            if balance == "fraction":
                return frac
            work = sfmt.partition(weight, threshold=threshold, max_tile=tile, balance="work", **kw)
            return work if frac is None or work.imbalance < frac.imbalance else frac
        try:
            part = best(units=units)
        except InputError:       # a map smaller than the unit grid: one band of columns
            units_used = min(units, gw)
            part = best(units=units_used, grid=(1, units_used))
        folds = list(part.folds) + [[] for _ in range(units - len(part.folds))]
        n_rounds = max(len(f) for f in folds)
        rounds = []
        for r in range(n_rounds):
            jobs = []
            for m in range(units):
                if r < len(folds[m]):
                    r0, r1, q0, q1 = (int(v) * step for v in folds[m][r])
                    jobs.append(Job(m, r0, r1, q0, q1))
                else:
                    jobs.append(Job(m, 0, 0, 0, 0))
            rounds.append(jobs)
        out_shape = (gh, gw) if pool else (oh, ow)
        return Plan(xp, k, out_shape, part, rounds, pool)

    # ------------------------------------------------------------------ integer path
    def conv2d_int(self, x, w, *, bias=None, shift=None, padding="same", relu=False, pool=False,
                   requantize=True, threshold=0.03, stats=False):
        """int8 ``x`` (C, H, W) and ``w`` (Z, C, k, k) -> int8 (``requantize``) or the exact
        int32 accumulators (+ bias, ReLU, pooling) as int64 (Z, H', W').

        ``shift`` (int or (Z,)): the output right shift; None chooses, per output channel, the
        smallest shift that fits the largest value into int8 (calibrated on the emulator's
        exact accumulators).

        ``stats``: the MSB histogram of the int32 values before requantization into
        :attr:`last_stats`.
        """
        p = self.p
        x, w = check_operands(p, x, w)
        z, c, k, _ = w.shape
        bias = np.zeros(z, np.int64) if bias is None else np.broadcast_to(np.asarray(bias, np.int64), (z,)).copy()
        if np.any(np.abs(bias) >= 1 << 30):
            raise InputError("bias must be in (-2^30, 2^30) accumulator units")
        plan = self.plan(x, k, padding, pool, threshold)
        flags = (protocol.FLAG_RELU if relu else 0) | (protocol.FLAG_POOL if pool else 0) | \
            (0 if requantize else protocol.FLAG_RAW) | (protocol.FLAG_STATS_OUT if stats else 0)
        if shift is None:
            if requantize:
                t, _ = postprocess(conv_accumulate(plan.xp, w), bias, np.zeros(z), relu=relu, pool=pool, raw=True)
                big = np.abs(t).reshape(z, -1).max(axis=1) if t.size else np.zeros(z, np.int64)
                shift = np.array([max(0, int(v).bit_length() - 7) for v in big])
            else:
                shift = np.zeros(z, np.int64)
        shift = np.broadcast_to(np.asarray(shift, np.int64), (z,)).copy()
        if np.any(np.abs(shift) > 63):
            raise InputError("shift must be in [-63, 63]")
        self.last_shift = shift
        return self._run_plan(plan, w, bias, shift, flags, stats)

    def _run_plan(self, plan, w, bias, shift, flags, stats):
        p = self.p
        z, c, k, _ = w.shape
        coefs = sfmt.compress_kernel(w)
        beats = protocol.pack_input(p, fmap_padded=plan.xp, coefs=coefs, rounds=plan.rounds, bias=bias,
                                    shift=shift, ksize=k)
        regs = [c, z, k, flags, len(plan.rounds), len(protocol.groups(p, z))]
        out, regs_out = self.target.run(beats, regs, protocol.n_output_beats(p, plan.rounds, z, flags, stats=stats))
        magic, hash32, sat = (int(r) for r in regs_out)
        if magic != MAGIC or hash32 != self.cfg.hash32:
            raise InputError(f"kernel ID register reads magic 0x{magic:08x} hash 0x{hash32:08x}; config "
                             f"{self.cfg.name} expects 0x{MAGIC:08x} 0x{self.cfg.hash32:08x}")
        self.last_sat_count, self.last_plan = sat, plan
        self.last_stats = protocol.unpack_stats(p, out) if stats else None
        return protocol.unpack_output(p, out, plan.rounds, z, plan.out_shape, flags)

    def batch_capacity(self, h, w, k, padding="same"):
        """Images of ``h x w`` that :meth:`conv2d_batch_int` packs into one call."""
        pad = (k - 1) // 2 if padding == "same" else 0
        return (self.p["max_hw"] // (h + 2 * pad)) * (self.p["max_hw"] // (w + 2 * pad))

    def conv2d_batch_int(self, x, w, *, bias=None, shift=0, padding="same", relu=False, stats=False):
        """A batch of int8 images ``x`` (B, C, H, W) in one call: the zero-padded images are
        laid out as cells of one grid map (at most ``max_hw`` square) and every cell's output
        rectangle is its own job (split into tiles of at most ``tile_h x tile_w``), so units
        work on whole images, no output straddles two images, and the statistics unit counts
        exactly the B images' outputs. Jobs go to the units round-robin in image order.
        Returns int8 (B, Z, H', W'); requantized with ``shift`` (int or (Z,))."""
        p = self.p
        x = np.asarray(x)
        if x.ndim != 4:
            raise InputError(f"x must be (B, C, H, W), got shape {x.shape}")
        b, c, h, wd = x.shape
        _, w = check_operands(p, x[0] if b else np.zeros((c, h, wd), np.int64), w)
        x = _int8("x", x)
        z, _, k, _ = w.shape
        pad = self._pad(padding, k)
        ch, cw = h + 2 * pad, wd + 2 * pad
        oh, ow = ch - k + 1, cw - k + 1
        if oh < 1 or ow < 1:
            raise InputError(f"a {k}x{k} kernel does not fit a {h}x{wd} map with padding {padding!r}")
        gr, gc = p["max_hw"] // ch, p["max_hw"] // cw
        if gr * gc < b:
            raise InputError(f"{b} images of {h}x{wd} exceed one call's grid ({gr * gc} images of max_hw = "
                             f"{p['max_hw']}); split the batch (batch_capacity)")
        gc = min(gc, b)
        gr = -(-b // gc)
        xp = np.zeros((c, gr * ch, gc * cw), np.int64)
        for i in range(b):
            r, q = divmod(i, gc)
            xp[:, r * ch + pad:r * ch + pad + h, q * cw + pad:q * cw + pad + wd] = x[i]
        bias = np.zeros(z, np.int64) if bias is None else np.broadcast_to(np.asarray(bias, np.int64), (z,)).copy()
        if np.any(np.abs(bias) >= 1 << 30):
            raise InputError("bias must be in (-2^30, 2^30) accumulator units")
        shift = np.broadcast_to(np.asarray(shift, np.int64), (z,)).copy()
        if np.any(np.abs(shift) > 63):
            raise InputError("shift must be in [-63, 63]")
        rects = []
        for i in range(b):
            r, q = divmod(i, gc)
            for t0 in range(0, oh, p["tile_h"]):
                for u0 in range(0, ow, p["tile_w"]):
                    rects.append((r * ch + t0, r * ch + min(t0 + p["tile_h"], oh),
                                  q * cw + u0, q * cw + min(u0 + p["tile_w"], ow)))
        units = p["units"]
        rounds = []
        for j0 in range(0, len(rects), units):
            chunk = rects[j0:j0 + units]
            rounds.append([Job(m, *chunk[m]) if m < len(chunk) else Job(m, 0, 0, 0, 0) for m in range(units)])
        plan = Plan(xp, k, (gr * ch - k + 1, gc * cw - k + 1), None, rounds, False)
        flags = (protocol.FLAG_RELU if relu else 0) | (protocol.FLAG_STATS_OUT if stats else 0)
        self.last_shift = shift
        full = self._run_plan(plan, w, bias, shift, flags, stats)
        out = np.empty((b, z, oh, ow), np.int64)
        for i in range(b):
            r, q = divmod(i, gc)
            out[i] = full[:, r * ch:r * ch + oh, q * cw:q * cw + ow]
        return out

    @staticmethod
    def _pad(padding, k):
        if padding == "same":
            if k % 2 == 0:
                raise InputError(f"padding 'same' needs an odd kernel size, got {k}")
            return (k - 1) // 2
        if padding == "valid":
            return 0
        raise InputError(f"padding = {padding!r}: must be 'same' or 'valid'")

    # ------------------------------------------------------------------ float / dispatch
    def conv2d(self, x, w, bias=None, padding="same", relu=False, requantize=True, *, pool=False, shift=None,
               threshold=0.03, stats=False):
        """``x`` (C, H, W), ``w`` (Z, C, k, k). ``stats``: as in :meth:`conv2d_int` (the
        histogram is of the integers, in accumulator units, also on the float path). Integer arrays (int8 values) run as they are
        (see :meth:`conv2d_int`; ``bias`` in accumulator units). Float arrays are quantized to
        int8 with power-of-two scales (the largest that fits), run, and returned as floats."""
        xa, wa = np.asarray(x), np.asarray(w)
        if xa.dtype.kind in "iu" and wa.dtype.kind in "iu":
            return self.conv2d_int(xa, wa, bias=bias, shift=shift, padding=padding, relu=relu, pool=pool,
                                   requantize=requantize, threshold=threshold, stats=stats)
        xq, fx = _q8(xa, "x")
        wq, fw = _q8(wa, "w")
        b = None if bias is None else np.rint(np.ldexp(np.asarray(bias, np.float64), fx + fw)).astype(np.int64)
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
    a = np.asarray(a, np.float64)
    if not np.isfinite(a).all():
        raise InputError(f"{name} contains NaN or Inf")
    f = largest_frac(float(np.abs(a).max()) if a.size else 0.0, 127.0)
    return np.clip(np.rint(np.ldexp(a, f)), -128, 127).astype(np.int64), f
