"""Loop counts without C-simulation: a replica of each kernel's loop nest driven by the very
beats and registers the kernel would receive.

:class:`CountingTarget` is the emulator target (bit-exact outputs) that, for every call,
also derives the loop counters the C-simulation would report and logs them, so an operation
leaves ``kernel.last_cycles`` exactly as on ``csim`` (the tests compare the two). The deploy
report uses it: the transparent tiling, padding and job plans are the real ones, and no
compiler is needed.

``bfp_systolic`` and ``shift_mac`` counts follow from the registers alone
(:mod:`hlsnn.perf.closed_form`); ``sparse_cluster`` counts are read from the input stream the way
``Dispatch`` and the units read it (job headers, the tiles' non-zeros and the coefficients'
positions), ``EffectualMacs`` included.
"""
from __future__ import annotations

import numpy as np

from ..runtime.targets import EmuTarget
from ..perf.calls import log_call
from ..perf.closed_form import bfp_call_counts, shift_call_counts


def call_counts(cfg, beats, regs_in):
    """``{label: (iterations, entries)}`` of one kernel call with these input beats and registers."""
    p, regs = cfg.params, [int(r) for r in regs_in]
    if cfg.engine == "bfp_systolic":
        from ..engines.bfp_systolic import protocol as pr
        batch, n, k, flags, _ = regs
        return bfp_call_counts(p, batch, k, n, bias=bool(flags & pr.FLAG_BIAS),
                               stats_method=bool(flags & pr.FLAG_STATS) and p["weight_exponent"] == "tensor",
                               stats_out=bool(flags & pr.FLAG_STATS_OUT), keep=bool(flags & pr.FLAG_KEEP),
                               resident=bool(flags & pr.FLAG_RESIDENT), rolling=bool(flags & pr.FLAG_ROLLING))
    if cfg.engine == "shift_mac":
        from ..engines.shift_mac import protocol as pr
        batch, n, k, flags, mode, _, cin, fh, fw, ks, pad = regs
        name = "pot" if (mode & 1) and not (mode & 2) else "twohot"
        conv = (cin, fh, fw, ks, pad) if (flags & pr.FLAG_CONV) and p["conv"] else None
        return shift_call_counts(p, batch, k, n, mode=name, conv=conv, resident=bool(flags & pr.FLAG_RESIDENT),
                                 stats=bool(flags & pr.FLAG_STATS_OUT), raw=bool(flags & pr.FLAG_RAW))
    return sparse_call_counts(p, beats, regs)


def _add(c, key, iters, entries):
    if iters:
        i0, e0 = c.get(key, (0, 0))
        c[key] = (i0 + int(iters), e0 + int(entries))


def sparse_call_counts(p, beats, regs):
    """The ``sparse_cluster`` counters of one call, read off its input stream the way
    ``Dispatch`` and the units read it (:mod:`hlsnn.perf.sparse_cluster` describes the loops;
    ``MacLoop``'s iterations follow from the tiles' non-zeros by :func:`sparse_mac_steps`)."""
    from ..engines.sparse_cluster import protocol as pr
    from ..engines.stream import beats_to_lanes, pad_to
    cin, zout, ksize, flags, n_rounds, n_groups = regs
    pool, raw, stats = bool(flags & pr.FLAG_POOL), bool(flags & pr.FLAG_RAW), bool(flags & pr.FLAG_STATS_OUT)
    lanes, units, u = pr.lanes_per_beat(p), p["units"], p["weights_per_round"]
    th, tw = p["tile_h"] + p["max_ksize"] - 1, p["tile_w"] + p["max_ksize"] - 1
    v = beats_to_lanes(beats, pr.LANE).astype(np.int64)
    c, pos = {}, 0
    gr = n_groups * n_rounds
    _add(c, "DispatchGroups", n_groups, 1)
    _add(c, "DispatchRounds", gr, n_groups)
    _add(c, "DispatchChannels", gr * cin, gr)
    _add(c, "CollectGroups", n_groups, 1)
    _add(c, "CollectRounds", gr, n_groups)
    _add(c, "JobSizes", gr * units, gr)
    _add(c, "SumSaturation", units, 1)
    _add(c, "GroupStart", (units + 2) * sum(range(n_groups)), (units + 2) * max(0, n_groups - 1))
    for m in range(units):
        _add(c, f"UnitGroups.{m}", n_groups, 1)
        _add(c, f"UnitRounds.{m}", gr, n_groups)
        _add(c, f"InputChannels.{m}", gr * cin, gr)
    beats_of = lambda n: pad_to(1 + 2 * n, lanes) // lanes      # noqa: E731  (a segment's beats)
    for g, (z0, z1) in enumerate(pr.groups(p, zout)):
        zg = z1 - z0
        for _r in range(n_rounds):
            hdr = v[pos:pos + units * (2 + 3 * zg)].reshape(units, 2 + 3 * zg)
            pos += pad_to(units * (2 + 3 * zg), lanes)
            windows = []
            for m in range(units):
                oh, ow = int(hdr[m, 0]), int(hdr[m, 1])
                ph, pw = (oh // 2, ow // 2) if pool else (oh, ow)
                windows.append((oh // 2 * 2, ow // 2 * 2) if pool else (oh, ow))
                _add(c, f"JobUnit{m}", 2 + 3 * zg, 1)
                _add(c, f"ReadParams.{m}", zg, 1)
                if pool:    # a window's rows in two iterations, overlapped with the next window's
                    n_win = zg * ph * pw    # (not with one window a row: pw = 1 takes two a window)
                    _add(c, f"PoolPixels.{m}", 0 if n_win == 0 else 2 * n_win if pw == 1 else n_win + 1, 1)
                else:
                    _add(c, f"OutPixels.{m}", zg * ph * pw, 1)
                if oh:
                    n_out = zg * ph * pw * (2 if raw else 1)
                    _add(c, f"Merge{m}", max(1, -(-n_out // lanes)), 1)
            tiles = [[None] * units for _ in range(cin)]
            coefs = []
            for kz in range(cin):
                for m in range(units):
                    nd = int(v[pos])
                    e = v[pos + 1:pos + 1 + 2 * nd].reshape(nd, 2)
                    pos += pad_to(1 + 2 * nd, lanes)
                    tiles[kz][m] = (e[:, 1] >> 8) & 0xFF, e[:, 1] & 0xFF
                    _add(c, f"DataUnit{m}", beats_of(nd) - 1, 1)
                nw = int(v[pos])
                e = v[pos + 1:pos + 1 + 2 * nw].reshape(nw, 2)
                pos += pad_to(1 + 2 * nw, lanes)
                coefs.append(((e[:, 1] >> 4) & 0xF, e[:, 1] & 0xF))
                _add(c, "Coefficients", beats_of(nw) - 1, 1)
            for m in range(units):
                _add(c, f"LoadFirst.{m}", len(tiles[0][m][0]), 1)
                for kz in range(cin):
                    if u == 1:
                        _add(c, f"CountWindows.{m}", ksize * ksize, 1)
                    steps, macs = sparse_mac_steps(tiles[kz][m], coefs[kz], windows[m], ksize, (th, tw), u)
                    nxt = len(tiles[kz + 1][m][0]) if kz + 1 < cin else 0
                    _add(c, f"MacLoop.{m}", max(steps, nxt), 1)
                    _add(c, f"EffectualMacs.{m}", macs, macs)
    if stats:
        bins = pr.stats_bins(p)
        for m in range(units):
            _add(c, f"SendStats.{m}", bins, 1)
        _add(c, "MergeStats", units, 1)
        _add(c, "MergeBins", units * bins, units)
        _add(c, "StatsBins", bins, 1)
        _add(c, "StatsLanes", bins * 2, bins)
    return c


def sparse_mac_steps(tile, coefs, window, ksize, tile_in, u=1):
    """``(cycles, products)`` of one unit's ``MacLoop`` for one channel's coefficients: the
    tile's non-zeros ``(rows, cols)`` (tile-local), the coefficients' ``(ky, kx)`` in stream
    order, the job's computed window ``(eh, ew)`` and ``u`` (``weights_per_round``).
    Multiplier ``l < ew`` has ``n_l(j)`` entries for coefficient ``j``: the non-zeros of input
    column ``l + kx_j`` in rows ``ky_j .. ky_j + eh - 1``; the products are their sum.

    ``u = 1``: a coefficient takes ``max(1, max_l n_l(j))`` cycles. ``u = 2``: coefficient
    ``j`` may be applied once ``j - 2`` has left the window (``E_j = T_{j-2} + 1``); multiplier
    ``l`` applies it in the cycles from ``S = max(D_l(j-1) + 1, E_j)`` to ``D_l(j) = S + n_l(j)
    - 1``, and it leaves the window at the end of cycle ``T_j = max(T_{j-1} + 1, max_l
    D_l(j))`` (at most one coefficient a cycle); the loop takes ``T_last + 1`` cycles (the
    kernel's ``MacLoop`` for U = 2 does exactly this, cycle by cycle)."""
    ky, kx = coefs
    if len(ky) == 0:
        return 0, 0
    eh, ew = window
    k = ksize
    if ew == 0 or len(tile[0]) == 0:
        return len(ky), 0
    from ..engines.sparse_cluster.kernel import window_counts
    grid = np.zeros((tile_in[0] + 1, tile_in[1] + k), np.int64)
    np.add.at(grid, (tile[0] + 1, tile[1]), 1)
    slide = window_counts(np.cumsum(grid, axis=0), 0, eh, 0, ew, k)   # (ky, kx, l)
    products = int(slide.sum(axis=2)[ky, kx].sum())
    if u == 1:
        return int(np.maximum(slide.max(axis=2), 1)[ky, kx].sum()), products
    n = slide[ky, kx]                                               # (J, lanes)
    done = np.full(n.shape[1], -1, np.int64)                        # D_l(j - 1)
    t_prev = [-1] * u                                               # T_{j-1}, T_{j-2}, ...
    for j in range(n.shape[0]):
        done = np.maximum(done + 1, t_prev[u - 1] + 1) + n[j] - 1
        t_j = max(t_prev[0] + 1, int(done.max()))
        t_prev = [t_j] + t_prev[:-1]
    return t_prev[0] + 1, products


class CountingTarget(EmuTarget):
    """The emulator, plus the loop counters a C-simulation of the same call would report."""

    name = "emu+counts"

    def __init__(self, cfg, engine, **options):
        options.setdefault("arrays", False)  # it counts what the kernel does with the beats: the stream path
        super().__init__(cfg, engine, **options)

    def run(self, beats, regs_in, n_out_beats):
        out = super().run(beats, regs_in, n_out_beats)
        nbytes = self.cfg.params["stream_bits"] // 8
        counts = call_counts(self.cfg, beats, regs_in)
        log_call(self, counts, np.size(beats) // nbytes, n_out_beats)
        return out
