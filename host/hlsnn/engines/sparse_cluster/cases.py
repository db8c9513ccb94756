"""Seeded convolutions that ``hlsnn compare`` and ``hlsnn csim`` run on a target and on the
emulator: densities 0 %, 10 %, 50 % and 100 % of inputs and weights, odd map sizes, maps
larger than a unit's tile (folding, seams between jobs), several input and output channels
(output-channel groups), kernel sizes 1, 3 and 5, 'same' and 'valid' padding, ReLU, 2x2
pooling, raw int32 output, saturation and the largest magnitudes; and cases with the statistics
segment (``FLAG_STATS_OUT``), whose histogram is compared bin by bin."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...formats import sparse as sfmt
from ..common import compare_stats
from . import protocol
from .emulator import emulate
from .spec import MAGIC


@dataclass
class Case:
    name: str
    x: np.ndarray
    w: np.ndarray
    bias: np.ndarray
    shift: np.ndarray
    padding: str = "same"
    relu: bool = False
    pool: bool = False
    raw: bool = False
    stats: bool = False
    notes: dict = field(default_factory=dict)

    @property
    def flags(self):
        return ((protocol.FLAG_RELU if self.relu else 0) | (protocol.FLAG_POOL if self.pool else 0)
                | (protocol.FLAG_RAW if self.raw else 0) | (protocol.FLAG_STATS_OUT if self.stats else 0))


def _sparse(rng, shape, density, lo=-128, hi=127):
    v = rng.integers(lo, hi + 1, shape)
    return np.where(rng.random(shape) < density, v, 0)


def make_cases(cfg, seed=0, n_random=6):
    p = cfg.params
    rng = np.random.default_rng(seed)
    kmax = p["max_ksize"]
    th, tw = p["tile_h"], p["tile_w"]
    big_h, big_w = min(p["max_hw"], 2 * th + 5), min(p["max_hw"], 2 * tw + 3)   # several folds per unit
    cmax, zmax = p["max_in_channels"], p["max_out_channels"]
    zg = min(zmax, p["max_z"] + 3)                                              # two output-channel groups
    cases = []

    def add(name, c, z, k, h, w, dx, dw, **kw):
        c, z, k = min(c, cmax), min(z, zmax), min(k, kmax)
        if kw.get("padding", "same") == "same" and k % 2 == 0:
            k -= 1
        x = _sparse(rng, (c, h, w), dx)
        wt = _sparse(rng, (z, c, k, k), dw)
        shift = kw.pop("shift", None)
        if shift is None:
            shift = np.full(z, 8 + int(np.log2(max(c * k * k, 1))) // 2)
        cases.append(Case(name, x, wt, rng.integers(-2000, 2000, z), np.broadcast_to(shift, (z,)).copy(), **kw))

    for d in (0.0, 0.1, 0.5, 1.0):
        add(f"density{int(d * 100)}", 3, 5, 3, 13, 11, d, d)
    add("weights_zero", 2, 3, 3, 9, 9, 0.5, 0.0)
    add("seams_folds", 2, 4, 3, big_h, big_w, 0.3, 0.6, relu=True)
    add("groups", 2, zg, 3, 12, 10, 0.4, 0.5)
    add("k1_valid", 4, 6, 1, 10, 7, 0.5, 0.8, padding="valid")
    add("k5_same", 2, 3, 5, 12, 12, 0.5, 0.5)
    add("k3_valid", 3, 4, 3, 11, 14, 0.3, 0.7, padding="valid")
    add("pool_relu", 2, 4, 3, 14, 12, 0.4, 0.5, relu=True, pool=True)
    add("pool_valid", 2, 3, 3, 13, 13, 0.6, 0.5, pool=True, padding="valid")
    add("raw", 3, 5, 3, 10, 9, 0.5, 0.5, raw=True)
    add("raw_pool_relu", 2, 3, 3, 10, 10, 0.5, 0.5, raw=True, pool=True, relu=True)
    add("saturate", 3, 4, 3, 9, 8, 0.8, 0.8, shift=0)
    add("unit_values_relu", 2, 3, 3, 7, 6, 0.7, 0.7, relu=True, shift=0)
    cases[-1].x, cases[-1].w = np.sign(cases[-1].x), np.sign(cases[-1].w)       # sums around -1, 0, 1
    cases[-1].bias = rng.integers(-1, 2, cases[-1].w.shape[0])
    c, z, k = min(4, cmax), min(3, zmax), min(3, kmax)
    cases.append(Case("max_magnitude", np.full((c, 8, 8), -128), np.full((z, c, k, k), -128), np.zeros(z, int),
                      np.full(z, 20), padding="valid"))
    # the statistics unit: requantized and raw, with and without ReLU and pooling, several
    # folds and output-channel groups (per-unit histograms merged), negative values, all-zero
    add("stats", 3, 5, 3, 13, 11, 0.5, 0.5, stats=True)
    add("stats_relu", 2, 4, 3, big_h, big_w, 0.4, 0.6, relu=True, stats=True)
    add("stats_pool", 2, zg, 3, 14, 12, 0.5, 0.5, pool=True, stats=True)
    add("stats_pool_relu", 2, 4, 3, 14, 13, 0.4, 0.5, pool=True, relu=True, stats=True)
    add("stats_raw", 3, 5, 3, 10, 9, 0.5, 0.5, raw=True, stats=True)
    add("stats_raw_pool", 2, 3, 3, 10, 10, 0.5, 0.5, raw=True, pool=True, stats=True)
    add("stats_zero", 2, 3, 3, 9, 9, 0.0, 0.5, stats=True)
    cases[-1].bias[:] = 0
    c, z, k = min(4, cmax), min(3, zmax), min(3, kmax)
    cases.append(Case("stats_max_magnitude", np.full((c, 8, 8), -128), np.full((z, c, k, k), 127),
                      np.full(z, -(1 << 29)), np.full(z, 20), padding="valid", raw=True, stats=True))
    for i in range(n_random):
        k = int(rng.choice([kk for kk in (1, 3, 5) if kk <= kmax]))
        pad = "same" if rng.integers(0, 2) else "valid"
        cap_h, cap_w = min(p["max_hw"], 3 * th), min(p["max_hw"], 3 * tw)
        h = int(rng.integers(min(k + 1, cap_h), cap_h + 1))     # (tiny maps or tiles: _fit below)
        w = int(rng.integers(min(k + 1, cap_w), cap_w + 1))
        pool = bool(rng.integers(0, 2)) and h >= k + 2 and w >= k + 2
        add(f"random{i}", int(rng.integers(1, 5)), int(rng.integers(1, 12)), k, h, w, float(rng.random()),
            float(rng.random()), padding=pad, relu=bool(rng.integers(0, 2)), pool=pool, raw=bool(rng.integers(0, 4) == 0))
    return [_fit(p, c) for c in cases]


def _fit(p, case):
    """``case`` within the config's own limits (a 13x11 map failed a config of max_hw = 7): the
    map cut to ``max_hw``, a 'valid' kernel cut to the map, pooling dropped where the output is
    smaller than 2x2 or a tile cannot hold a 2x2 window. Configs whose limits the cases already meet get them unchanged."""
    hw = p["max_hw"]
    case.x = case.x[:, :hw, :hw]
    _, h, w = case.x.shape
    k = case.w.shape[2]
    if case.padding == "valid" and k > min(h, w):
        k = min(h, w)
        case.w = np.ascontiguousarray(case.w[:, :, :k, :k])
    oh, ow = (h, w) if case.padding == "same" else (h - k + 1, w - k + 1)
    if case.pool and (oh < 2 or ow < 2 or min(p["tile_h"], p["tile_w"]) < 2):
        case.pool = False
    return case


def _prepare(cfg, case, threshold=0.03):
    from .kernel import Kernel
    plan = Kernel(cfg, None).plan(case.x, case.w.shape[2], case.padding, case.pool, threshold)
    beats = protocol.pack_input(cfg.params, fmap_padded=plan.xp, coefs=sfmt.compress_kernel(case.w), rounds=plan.rounds,
                                bias=case.bias, shift=case.shift, ksize=case.w.shape[2])
    z, c, k, _ = case.w.shape
    regs = [c, z, k, case.flags, len(plan.rounds), len(protocol.groups(cfg.params, z))]
    return plan, beats, regs


def run_case(cfg, target, case: Case):
    """Run ``case`` through ``target`` and the emulator (the whole layer, independently of the
    job structure); the same report as the other engines."""
    p = cfg.params
    plan, beats, regs = _prepare(cfg, case)
    z = case.w.shape[0]
    out, regs_out = target.run(beats, regs, protocol.n_output_beats(p, plan.rounds, z, case.flags, stats=case.stats))
    got = protocol.unpack_output(p, out, plan.rounds, z, plan.out_shape, case.flags)
    exp, esat, *ehist = emulate(p, plan.xp, case.w, case.bias, case.shift, relu=case.relu, pool=case.pool,
                                raw=case.raw, stats=case.stats)
    bad = got != exp
    first = None
    if bad.any():
        i = tuple(int(v) for v in np.argwhere(bad)[0])
        width = 32 if case.raw else 8
        hx = lambda v: f"0x{int(v) & ((1 << width) - 1):0{width // 4}x}"  # noqa: E731
        first = {"index": list(i), "expected": {"value": int(exp[i]), "raw": hx(exp[i])},
                 "got": {"value": int(got[i]), "raw": hx(got[i])}}
    outputs, mismatches = int(bad.size), int(bad.sum())
    if case.stats:      # the histogram's bins count as outputs of the case
        bins, bad_bins, first_bin = compare_stats(ehist[0], protocol.unpack_stats(p, out))
        outputs, mismatches, first = outputs + bins, mismatches + bad_bins, first or first_bin
    regs_ok = [int(r) for r in regs_out] == [MAGIC, cfg.hash32, esat]
    return {"case": case.name, "shape": [case.x.shape[0], z, case.w.shape[2], *case.x.shape[1:]],
            "outputs": outputs, "mismatches": mismatches, "first": first, "registers_ok": regs_ok,
            "registers": {"expected": [MAGIC, cfg.hash32, esat], "got": [int(r) for r in regs_out]},
            "rounds": len(plan.rounds)}


def testbench_vectors(cfg, seed=0):
    """One seeded case as stream beats for the stand-alone testbench (tb.cpp)."""
    p = cfg.params
    case = [c for c in make_cases(cfg, seed, n_random=0) if c.name == "seams_folds"][0]
    plan, beats, regs = _prepare(cfg, case)
    exp, sat = emulate(p, plan.xp, case.w, case.bias, case.shift, relu=case.relu, pool=case.pool, raw=case.raw)
    return beats, regs, protocol.pack_output(p, exp, plan.rounds, case.w.shape[0], case.flags), [MAGIC, cfg.hash32, sat]
