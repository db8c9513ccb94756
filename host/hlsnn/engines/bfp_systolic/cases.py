"""Seeded GEMM cases that ``hlsnn compare`` and ``hlsnn csim`` run on a target and on the
emulator: random operands plus the edges (zeros, largest magnitudes, all-negative results,
exponents at the floor and ceiling, sizes that are not multiples of the array, K = 1,
rounding ties in the bias shifter, saturation under the statistics method), cases with the
statistics segment (``FLAG_STATS_OUT``), whose histogram is compared bin by bin, and resident
cases (a call that keeps the weights, then the compared call, which streams none: on a config
with ``weight_banks > 1`` the one-sample ones run in GEMV mode)."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..common import compare_stats
from . import protocol
from .spec import k_limit, pass_k


@dataclass
class Case:
    name: str
    xm: np.ndarray
    xe: np.ndarray
    wm: np.ndarray
    we: np.ndarray
    bm: np.ndarray | None = None
    be: int = 0
    relu: bool = False
    method: str = "max"
    stats_k: int = 3
    stats_out: bool = False
    resident: bool = False      # run a keep call first; the compared call reads the weights on chip
    notes: dict = field(default_factory=dict)

    @property
    def shape(self):
        return self.xm.shape[0], self.wm.shape[0], self.xm.shape[1]

    def regs(self):
        flags = protocol.flags(self.relu, self.bm is not None, self.method, self.stats_out) \
            | (protocol.FLAG_ROLL_CLEAR if self.method == "rolling" else 0)
        b, n, k = self.shape
        return [b, n, k, flags, self.stats_k]


def make_cases(cfg, seed=0, n_random=8):
    """The edge cases, then ``n_random`` seeded random cases, for config ``cfg``."""
    p = cfg.params
    rng = np.random.default_rng(seed)
    M, E = p["mantissa_bits"], p["exponent_bits"]
    mmin, mmax = -(1 << (M - 1)), (1 << (M - 1)) - 1
    emin, emax = -(1 << (E - 1)), (1 << (E - 1)) - 1
    R, C = p["rows"], p["cols"]
    kmax, nmax = p["max_k"], p["max_n"]
    per_row = p["weight_exponent"] == "row"
    can_stats = not per_row

    def wexp(n, lo=-6, hi=3):
        if per_row:
            return rng.integers(max(lo, emin), min(hi, emax) + 1, size=n)
        return np.full(n, int(rng.integers(max(lo, emin), min(hi, emax) + 1)))

    def mant(shape, lo=mmin, hi=mmax):
        return rng.integers(lo, hi + 1, size=shape)

    def clampn(n):
        return max(1, min(n, nmax))

    def clampk(k):
        return max(1, min(k, kmax))

    cases = []
    b, n, k = C + 1, clampn(R + 1), clampk(2 * 3 + 1)
    cases.append(Case("zeros", np.zeros((b, k), int), np.full(b, emin), mant((n, k)), wexp(n)))
    # Largest products: every mantissa -2^(M-1), the full K (the accumulator bound).
    b, n, k = C, clampn(R), kmax
    cases.append(Case("max_magnitude", np.full((b, k), mmin), np.zeros(b, int), np.full((n, k), mmin),
                      np.zeros(n, int)))
    cases.append(Case("max_magnitude_mixed", np.full((b, k), mmin), np.zeros(b, int), np.full((n, k), mmax),
                      np.zeros(n, int), bm=np.full(n, mmin), be=emax))
    if k_limit(p) > kmax:
        # K in passes: the longest K at the accumulator's edge (K * 2^(2M-2) fits A bits
        # exactly) where the stores allow, and a ragged random K of three passes with bias
        kl = min(k_limit(p), 8 * kmax)
        b, n = C, clampn(R)
        cases.append(Case("max_magnitude_k_passes", np.full((b, kl), mmin), np.zeros(b, int), np.full((n, kl), mmin),
                          np.zeros(n, int)))
        b, n, k = C + 1, clampn(R + 1), min(k_limit(p), 2 * pass_k(p) + 3)
        cases.append(Case("k_passes", mant((b, k)), rng.integers(-3, 3, size=b), mant((n, k)), wexp(n),
                          bm=mant(n), be=int(rng.integers(-4, 4)), relu=True))
    b, n, k = C + 2, clampn(2 * R + 3), clampk(33)
    cases.append(Case("all_negative", mant((b, k), 1, mmax), rng.integers(-4, 4, size=b),
                      mant((n, k), mmin, -1), wexp(n)))
    cases.append(Case("all_negative_relu", mant((b, k), 1, mmax), rng.integers(-4, 4, size=b),
                      mant((n, k), mmin, -1), wexp(n), relu=True))
    cases.append(Case("exponent_floor", mant((b, k)), np.full(b, emin), mant((n, k)),
                      np.full(n, emin), bm=mant(n), be=emax))
    cases.append(Case("exponent_ceiling", mant((b, k)), np.full(b, emax), mant((n, k)),
                      np.full(n, emax), bm=mant(n), be=emin))
    b, n, k = 1, 1, 1
    cases.append(Case("k1_single", mant((b, k)), np.zeros(b, int), mant((n, k)), wexp(n)))
    b, n, k = 2 * C + 1, clampn(R + 3), 1
    cases.append(Case("k1", mant((b, k)), rng.integers(-3, 3, size=b), mant((n, k)), wexp(n),
                      bm=mant(n), be=int(rng.integers(-8, 0))))
    # Bias shifter ties: odd bias mantissas one bit finer than the product exponent.
    b, n, k = C, clampn(R), clampk(4)
    we_t = wexp(n, 0, 0)
    cases.append(Case("bias_round_ties", np.zeros((b, k), int), np.zeros(b, int), mant((n, k)), we_t,
                      bm=2 * rng.integers(-50, 50, size=n) + 1, be=-1))
    # Output rounding ties: products that are exact halves after the output shift.
    cases.append(Case("output_round_ties", np.ones((b, k), int) * (1 << (M - 2)), np.zeros(b, int),
                      mant((n, k), -3, 3) * 2 + 1, np.zeros(n, int), relu=False))
    # Results of -1, 0, +1 around ReLU and the output shifter (K small, unit mantissas).
    b, n, k = C + 1, clampn(R + 2), clampk(3)
    cases.append(Case("unit_values_relu", mant((b, k), -1, 1), np.zeros(b, int), mant((n, k), -1, 1),
                      np.zeros(n, int), relu=True))
    cases.append(Case("unit_values", mant((b, k), -1, 1), np.zeros(b, int), mant((n, k), -1, 1),
                      np.zeros(n, int)))
    if can_stats and nmax >= 2:
        # K = 1 and x = 1 put chosen values straight into the statistics unit: a row
        # {2^j - 3, 2^j + 1} has mean 2^j - 1 and sigma 2, so mean + k*sigma sits exactly on
        # either side of a power of two (k = 0: 2^j - 1; k = 1: 2^j + 1); a single value 2^j - 1
        # has sigma 0. Any off-by-one in S1, S2, isqrt or the division moves the exponent.
        j = M - 2
        vals = np.array([[(1 << j) - 3], [(1 << j) + 1]])
        for ks in (0, 1, 2):
            cases.append(Case(f"stats_exact_k{ks}", np.ones((2, 1), int), np.array([0, -3]), vals,
                              np.zeros(2, int), method="stats", stats_k=ks))
        cases.append(Case("stats_exact_single", np.array([[1], [-1], [3]]), np.zeros(3, int),
                          np.array([[(1 << j) - 1]]), np.zeros(1, int), method="stats", stats_k=3))
    if can_stats:
        b, n, k = C + 1, clampn(3 * R + 1), clampk(64)
        for ks in (0, 1, 3):
            cases.append(Case(f"stats_k{ks}", mant((b, k)), rng.integers(-4, 4, size=b), mant((n, k)), wexp(n),
                              bm=mant(n), be=-2, relu=bool(ks == 1), method="stats", stats_k=ks))
    # the statistics unit: negative and positive accumulators (ReLU off and on), bias, ragged
    # tiles (padding columns must not count), per-sample exponents, both exponent methods
    b, n, k = 2 * C + 1, clampn(2 * R + 1), clampk(29)
    for relu in (False, True):
        cases.append(Case(f"stats_out{'_relu' if relu else ''}", mant((b, k)), rng.integers(-6, 4, size=b),
                          mant((n, k)), wexp(n), bm=mant(n), be=-3, relu=relu, stats_out=True))
    cases.append(Case("stats_out_max_magnitude", np.full((C, kmax), mmin), np.zeros(C, int),
                      np.full((clampn(R), kmax), mmin), np.zeros(clampn(R), int), stats_out=True))
    cases.append(Case("stats_out_zeros", np.zeros((C + 1, 3), int), np.zeros(C + 1, int), mant((n, 3)), wexp(n),
                      stats_out=True))
    if can_stats:
        cases.append(Case("stats_out_method_stats", mant((b, k)), rng.integers(-4, 4, size=b), mant((n, k)),
                          wexp(n), bm=mant(n), be=-2, relu=True, method="stats", stats_k=2, stats_out=True))
    # The rolling method (each case empties the buffer first): sample exponents that drift by a
    # step (predictions kept), jump up (overflow, corrected) and down by more than
    # underflow_bits (underflow, corrected), an all-zero sample, and more samples than the
    # buffer holds (it wraps)
    Rl = p["rolling_len"]
    b, n, k = min(max(3 * Rl + 2, 12), 64), clampn(R + 1), clampk(9)
    drift = np.cumsum(rng.integers(-1, 2, size=b))
    drift[b // 3] += 6
    drift[2 * b // 3:] -= p["underflow_bits"] + 3
    xm_r = mant((b, k))
    xm_r[b // 2] = 0
    cases.append(Case("rolling_sequence", xm_r, np.clip(drift, emin + 2, emax - 8), mant((n, k)), wexp(n, 0, 1),
                      method="rolling", stats_k=1))
    b = min(2 * Rl + 3, 64)
    cases.append(Case("rolling_bias_relu", mant((b, k)), rng.integers(-3, 3, size=b), mant((n, k)), wexp(n),
                      bm=mant(n), be=-1, relu=True, method="rolling", stats_k=int(rng.integers(0, 4))))
    for i in range(n_random):
        b = int(rng.integers(1, 3 * C + 2))
        n = clampn(int(rng.integers(1, 3 * R + 4)))
        k = clampk(int(rng.integers(1, 96)))
        has_bias = bool(rng.integers(0, 2))
        method = "stats" if can_stats and rng.integers(0, 2) else "max"
        cases.append(Case(f"random{i}", mant((b, k)), rng.integers(-10, 6, size=b), mant((n, k)), wexp(n, -10, 6),
                          bm=mant(n) if has_bias else None, be=int(rng.integers(-12, 4)),
                          relu=bool(rng.integers(0, 2)), method=method, stats_k=int(rng.integers(0, 5))))
    # Resident weights (drawn after the random cases, which stay as they were): one sample
    # (GEMV mode where the store has banks) at the largest K and at odd small ones, with bias,
    # ReLU and the statistics segment; and a batch that fills more than the columns (the array
    # loop). Only where the layer fits the weight store.
    def fits(n, k):
        return k <= kmax and -(-n // R) * ((k + 1) // 2) <= p["w_depth"]
    for name, b, n, k, extra in (("resident_gemv_max_k", 1, clampn(3 * R + 1), kmax, {}),
                                 ("resident_gemv_small_k", 1, clampn(2 * R + 1), clampk(3),
                                  {"relu": True, "stats_out": True}),
                                 ("resident_gemv_ragged", 1, clampn(R + 1), clampk(2 * C + 5), {"stats_out": True}),
                                 ("resident_gemv_two", 2, clampn(R + 3), kmax, {"relu": True}),
                                 ("resident_batch", C + 2, clampn(R + 2), clampk(40), {"relu": True})):
        while not fits(n, k) and k > 1:
            k = max(1, k // 2)
        if fits(n, k):
            cases.append(Case(name, mant((b, k)), rng.integers(-4, 4, size=b), mant((n, k)), wexp(n),
                              bm=mant(n), be=-2, resident=True, **extra))
    for c in cases:
        # every case within the config's own limits (a fixed K of 3 asserted in the kernel of a
        # max_k = 1 config): K up to k_limit (max_k for resident weights), N up to max_n
        kcap = kmax if c.resident else k_limit(p)
        c.xm, c.wm = c.xm[:, :kcap], c.wm[:, :kcap]
        c.wm, c.we = c.wm[:nmax], np.asarray(c.we)[:nmax]
        c.bm = None if c.bm is None else np.asarray(c.bm)[:nmax]
        # one case is one kernel call: at most the samples its stores hold (protocol.samples_per_call)
        cap = protocol.samples_per_call(p, c.xm.shape[1], c.wm.shape[0])
        c.xm, c.xe = c.xm[:cap], np.asarray(c.xe)[:cap]
        c.xe, c.we, c.be = np.clip(c.xe, emin, emax), np.clip(c.we, emin, emax), int(np.clip(c.be, emin, emax))
        c.xm, c.wm = np.clip(c.xm, mmin, mmax), np.clip(c.wm, mmin, mmax)
        c.bm = None if c.bm is None else np.clip(c.bm, mmin, mmax)
    return cases


def run_case(cfg, target, case: Case):
    """Run ``case`` through ``target`` (over the stream protocol) and through the emulator.

    Returns a dict with the mismatch count over all outputs (an output mismatches when its
    mantissa or its row's exponent differs), the first mismatch, and the register check.
    """
    from .emulator import RollingState, emulate
    from .spec import MAGIC

    p = cfg.params
    b, n, k = case.shape
    beats = protocol.pack_input(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be)
    regs = case.regs()
    if case.resident:
        # the keep call stores the tiles side by side; the compared call streams no weights
        keep = [*regs[:3], regs[3] | protocol.FLAG_KEEP, regs[4]]
        target.run(beats, keep, protocol.n_output_beats(p, b, n, stats=case.stats_out))
        beats = protocol.pack_input(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be, resident=True)
        regs = [*regs[:3], regs[3] | protocol.FLAG_RESIDENT, regs[4]]
    out, regs_out = target.run(beats, regs, protocol.n_output_beats(p, b, n, stats=case.stats_out))
    gm, ge = protocol.unpack_output(p, out[:protocol.n_output_beats(p, b, n)], b, n)
    em, ee, esat, *ehist = emulate(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be, relu=case.relu,
                                   use_stats=case.method == "stats", stats_k=case.stats_k, stats_out=case.stats_out,
                                   rolling=RollingState(p["rolling_len"]) if case.method == "rolling" else None)
    bad = (gm != em) | (ge != ee)[:, None]
    M, E = p["mantissa_bits"], p["exponent_bits"]
    first = None
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        hexm = lambda v: f"0x{int(v) & ((1 << M) - 1):0{(M + 3) // 4}x}"  # noqa: E731
        hexe = lambda v: f"0x{int(v) & ((1 << E) - 1):0{(E + 3) // 4}x}"  # noqa: E731
        first = {"index": [i, j],
                 "expected": {"mantissa": int(em[i, j]), "exponent": int(ee[i]),
                              "value": float(np.ldexp(float(em[i, j]), int(ee[i]))),
                              "raw": f"{hexm(em[i, j])} e{hexe(ee[i])}"},
                 "got": {"mantissa": int(gm[i, j]), "exponent": int(ge[i]),
                         "value": float(np.ldexp(float(gm[i, j]), int(ge[i]))),
                         "raw": f"{hexm(gm[i, j])} e{hexe(ge[i])}"}}
    outputs, mismatches = int(bad.size), int(bad.sum())
    if case.stats_out:      # the histogram's bins count as outputs of the case
        bins, bad_bins, first_bin = compare_stats(ehist[0], protocol.unpack_stats(p, out))
        outputs, mismatches, first = outputs + bins, mismatches + bad_bins, first or first_bin
    regs_ok = [int(r) for r in regs_out] == [MAGIC, cfg.hash32, esat]
    return {"case": case.name, "shape": [b, n, k], "outputs": outputs, "mismatches": mismatches,
            "first": first, "registers_ok": regs_ok,
            "registers": {"expected": [MAGIC, cfg.hash32, esat], "got": [int(r) for r in regs_out]}}


def testbench_vectors(cfg, seed=0):
    """One seeded case as stream beats for the stand-alone testbench (tb.cpp):
    ``(beats_in, regs_in, beats_out, regs_out)``, produced by the emulator."""
    from .emulator import emulate
    from .spec import MAGIC

    p = cfg.params
    rng = np.random.default_rng(seed)
    case = [c for c in make_cases(cfg, seed, n_random=1) if c.name == "random0"][0]
    case.bm = rng.integers(-(1 << (p["mantissa_bits"] - 1)), 1 << (p["mantissa_bits"] - 1), size=case.shape[1])
    beats = protocol.pack_input(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be)
    ym, ye, sat = emulate(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be, relu=case.relu,
                          use_stats=case.method == "stats", stats_k=case.stats_k)
    return beats, case.regs(), protocol.pack_output(p, ym, ye), [MAGIC, cfg.hash32, sat]
