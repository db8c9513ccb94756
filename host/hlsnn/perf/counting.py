"""Loop counts without C-simulation: a replica of each kernel's loop nest driven by the very
beats and registers the kernel would receive.

:class:`CountingTarget` is the emulator target (bit-exact outputs) that, for every call,
also derives the loop counters the C-simulation would report and logs them, so an operation
leaves ``kernel.last_cycles`` exactly as on ``csim`` (the tests compare the two). The deploy
report uses it: the transparent tiling, padding and job plans are the real ones, and no
compiler is needed.

``bfp_systolic`` and ``shift_mac`` counts follow from the registers alone
(:mod:`.closed_form`); ``sparse_cluster`` counts are read from the input stream the way
``Dispatch`` reads it (job headers, per-channel data and coefficient counts). The one
counter a replica does not derive is ``EffectualMacs`` (it needs the tiles' geometry): the
cycle model does not use it.
"""
from __future__ import annotations

import numpy as np

from ..runtime.targets import EmuTarget
from . import log_call
from .closed_form import bfp_call_counts, shift_call_counts


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
                                 stats=bool(flags & pr.FLAG_STATS_OUT))
    return sparse_call_counts(p, beats, regs)


def _add(c, key, iters, entries):
    if iters:
        i0, e0 = c.get(key, (0, 0))
        c[key] = (i0 + int(iters), e0 + int(entries))


def sparse_call_counts(p, beats, regs):
    """The ``sparse_cluster`` counters of one call, read off its input stream."""
    from ..engines.sparse_cluster import protocol as pr
    from ..engines.stream import beats_to_lanes, pad_to
    cin, zout, _, flags, n_rounds, n_groups = regs
    pool, raw, stats = bool(flags & pr.FLAG_POOL), bool(flags & pr.FLAG_RAW), bool(flags & pr.FLAG_STATS_OUT)
    lanes, units, th, tw = pr.lanes_per_beat(p), p["units"], p["tile_h"], p["tile_w"]
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
    for g, (z0, z1) in enumerate(pr.groups(p, zout)):
        zg = z1 - z0
        for _r in range(n_rounds):
            hdr = v[pos:pos + units * (2 + 3 * zg)].reshape(units, 2 + 3 * zg)
            pos += pad_to(units * (2 + 3 * zg), lanes)
            for m in range(units):
                oh, ow = int(hdr[m, 0]), int(hdr[m, 1])
                ph, pw = (oh // 2, ow // 2) if pool else (oh, ow)
                _add(c, f"JobUnit{m}", 2 + 3 * zg, 1)
                _add(c, f"ReadParams.{m}", zg, 1)
                _add(c, f"ClearAcc.{m}", zg * th * tw, 1)
                _add(c, f"OutChannels.{m}", zg, 1)
                if ph:
                    _add(c, f"OutRows.{m}", zg * ph, zg)
                    if pw:
                        _add(c, f"OutCols.{m}", zg * ph * pw, zg * ph)
                if oh:
                    n_out = zg * ph * pw * (2 if raw else 1)
                    _add(c, f"Merge{m}", n_out, 1)
            for _kz in range(cin):
                nds = []
                for m in range(units):
                    nd = int(v[pos])
                    pos += pad_to(1 + 2 * nd, lanes)
                    nds.append(nd)
                    _add(c, f"DataUnit{m}", 2 * nd, 1)
                    _add(c, f"LoadTile.{m}", nd, 1)
                nw = int(v[pos])
                pos += pad_to(1 + 2 * nw, lanes)
                _add(c, "Coefficients", 2 * nw, 1)
                for m in range(units):
                    _add(c, f"NonZeroCoefficients.{m}", nw, 1)
                    if nds[m]:
                        _add(c, f"NonZeroInputs.{m}", nw * nds[m], nw)
    if stats:
        bins = pr.stats_bins(p)
        for m in range(units):
            _add(c, f"SendStats.{m}", bins, 1)
        _add(c, "MergeStats", units, 1)
        _add(c, "MergeBins", units * bins, units)
        _add(c, "StatsBins", bins, 1)
        _add(c, "StatsLanes", bins * 2, bins)
    return c


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
