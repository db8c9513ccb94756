"""Seeded cases that ``hlsnn compare`` and ``hlsnn csim`` run on a target and on the emulator,
in all three modes: random registers and activations, plus the edges (largest activations and
shifts at K = max_k, zero weights, mode changes inside a dot product, saturating left shifts,
extreme biases, K = 1, ragged sizes, convolutions with 'same' and 'valid' padding), cases
with the statistics segment (``FLAG_STATS_OUT``), whose histogram is compared bin by bin, and
cases in the raw output mode (``FLAG_RAW``: the wide values, compared in full)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..common import compare_stats
from . import protocol
from .emulator import emulate, im2col
from .spec import MAGIC, MODES


@dataclass
class Case:
    name: str
    regs: np.ndarray
    n: int
    mode: str
    bias: np.ndarray
    shift: np.ndarray
    x: np.ndarray | None = None
    fmap: np.ndarray | None = None
    ksize: int = 0
    pad: int = 0
    delta: int = 0
    relu: bool = False
    stats: bool = False
    raw: bool = False
    notes: dict = field(default_factory=dict)

    def rows_x(self):
        return im2col(self.fmap, self.ksize, self.pad)[0] if self.fmap is not None else self.x

    def out_width(self):
        """A convolution's output width (its output groups are per output row), else None."""
        return None if self.fmap is None else self.fmap.shape[2] + 2 * self.pad - self.ksize + 1

    def regs_in(self):
        x = self.rows_x()
        batch, k = x.shape
        flags = (protocol.FLAG_RELU if self.relu else 0) | (protocol.FLAG_STATS_OUT if self.stats else 0)
        flags |= protocol.FLAG_RAW if self.raw else 0
        if self.fmap is not None:
            cin, h, w = self.fmap.shape
            return [batch, self.n, k, flags | protocol.FLAG_CONV, MODES[self.mode], self.delta, cin, h, w,
                    self.ksize, self.pad]
        return [batch, self.n, k, flags, MODES[self.mode], self.delta, 0, 0, 0, 0, 0]


def make_cases(cfg, seed=0, n_random=8):
    p = cfg.params
    rng = np.random.default_rng(seed)
    E, B, A = p["exp_bits"], p["act_bits"], p["acc_bits"]
    emax = (1 << E) - 1
    xlo, xhi = (-(1 << (B - 1)), (1 << (B - 1)) - 1) if p["act_signed"] else (0, (1 << B) - 1)
    kmax, nmax = p["max_k"], p["max_n"]

    def regs_for(n, k, mode, zero_p=0.1, cfg_bit=None, e_hi=emax):
        rows = protocol.register_rows(p, n, mode)
        f = [rng.integers(0, e_hi + 1, (rows, k)), rng.integers(0, 2, (rows, k)), rng.random((rows, k)) < zero_p,
             rng.integers(0, e_hi + 1, (rows, k)), rng.integers(0, 2, (rows, k)), rng.random((rows, k)) < zero_p]
        c = np.full((rows, k), 0 if mode == "twohot" else 1) if cfg_bit is None else cfg_bit
        return protocol.pack_registers(p, *f, c)

    def shift_for(k, e_hi, delta, n):
        # about the accumulator's magnitude for these sizes, so outputs spread over the range
        typical = (B - 1) + e_hi + delta + math.ceil(0.5 * math.log2(max(k, 1)))
        return typical - (B - 1) + rng.integers(-2, 2, n)

    def bias_for(n, scale_bits):
        lim = 1 << min(scale_bits, 30, A - 2)
        return rng.integers(-lim, lim, n)

    def regs_max(n, k, mode):      # every exponent maximal, no sign, no zero
        rows = protocol.register_rows(p, n, mode)
        return protocol.pack_registers(p, np.full((rows, k), emax), 0, 0, np.full((rows, k), emax), 0, 0,
                                       0 if mode == "twohot" else 1)

    def cn(v):
        return max(1, min(v, nmax))

    def ck(v):
        return max(1, min(v, kmax))

    cases = []
    modes = ("twohot", "pot", "pot_sum")
    R, C = p["rows"], p["cols"]
    for mode in modes:
        dmax = p["max_delta"] if mode == "twohot" else 0
        b, n, k = C + 1, cn(2 * R + 3), ck(37)
        d = int(rng.integers(0, dmax + 1))
        cases.append(Case(f"{mode}_ragged", regs_for(n, k, mode), n, mode, bias_for(n, B + emax),
                          shift_for(k, emax, d, n), x=rng.integers(xlo, xhi + 1, (b, k)), delta=d,
                          relu=bool(rng.integers(0, 2))))
        # largest magnitudes at K = max_k: every activation at the extreme, every exponent maximal
        b, n, k = C, cn(R), kmax
        xext = xlo if p["act_signed"] else xhi
        cases.append(Case(f"{mode}_max_magnitude", regs_max(n, k, mode), n, mode, np.zeros(n, int),
                          np.full(n, A - B), x=np.full((b, k), xext), delta=dmax))
        # saturation: left shifts and extreme biases
        b, n, k = C, cn(R + 1), ck(9)
        cases.append(Case(f"{mode}_saturate", regs_for(n, k, mode), n, mode,
                          rng.integers(-(1 << min(30, A - 2)), 1 << min(30, A - 2), n),
                          rng.integers(-6, 1, n), x=rng.integers(xlo, xhi + 1, (b, k)), delta=dmax))
        # zero weights and K = 1
        b, n, k = 2 * C + 1, cn(R + 2), 1
        cases.append(Case(f"{mode}_k1", regs_for(n, k, mode, zero_p=0.5), n, mode, bias_for(n, 4),
                          shift_for(k, emax, 0, n), x=rng.integers(xlo, xhi + 1, (b, k))))
        # results of -1, 0, +1 around ReLU and the output shifter: tiny exponents and activations
        b, n, k = C + 1, cn(R + 1), ck(3)
        rows = protocol.register_rows(p, n, mode)
        small = protocol.pack_registers(p, rng.integers(0, 2, (rows, k)), rng.integers(0, 2, (rows, k)), 0,
                                        rng.integers(0, 2, (rows, k)), rng.integers(0, 2, (rows, k)), 0,
                                        0 if mode == "twohot" else 1)
        cases.append(Case(f"{mode}_unit_values_relu", small, n, mode, rng.integers(-1, 2, n), np.zeros(n, int),
                          x=rng.integers(max(xlo, -1), min(xhi, 1) + 1, (b, k)), relu=True))
        # the config bit changes inside the dot product: accumulators reset (source 000)
        b, n, k = C, cn(R), ck(24)
        rows = protocol.register_rows(p, n, mode)
        cfg_bits = np.full((rows, k), 0 if mode == "twohot" else 1)
        for r in range(rows):
            for pos in rng.choice(np.arange(1, k), size=min(3, k - 1), replace=False):
                cfg_bits[r, pos:] ^= 1
        cases.append(Case(f"{mode}_mode_change_reset", regs_for(n, k, mode, cfg_bit=cfg_bits), n, mode,
                          bias_for(n, 8), shift_for(k, emax, 0, n), x=rng.integers(xlo, xhi + 1, (b, k))))
        if p["conv"]:
            for ks, padding in ((3, "same"), (3, "valid"), (1, "valid")):
                if ks > p["max_ksize"]:
                    continue
                pad = (ks - 1) // 2 if padding == "same" else 0
                cin = max(1, min(3, kmax // (ks * ks)))
                h = w = max(ks, min(7, p["max_hw"]))
                n = cn(R + 1)
                k = cin * ks * ks
                cases.append(Case(f"{mode}_conv{ks}_{padding}", regs_for(n, k, mode), n, mode, bias_for(n, 6),
                                  shift_for(k, emax, 0, n), fmap=rng.integers(xlo, xhi + 1, (cin, h, w)),
                                  ksize=ks, pad=pad, relu=mode == "pot"))
    # the statistics unit: negative and positive wide values (ReLU off and on), ragged tiles
    # (padding neurons and samples must not count), every mode, a convolution, and a bias that
    # puts wide values at the top of the accumulator
    for i, mode in enumerate(modes):
        for relu in (False, True):
            b, n, k = C + 2, cn(2 * R + 1), ck(19 + 7 * i)
            d = int(rng.integers(0, (p["max_delta"] if mode == "twohot" else 0) + 1))
            cases.append(Case(f"stats_{mode}{'_relu' if relu else ''}", regs_for(n, k, mode), n, mode,
                              bias_for(n, B + emax), shift_for(k, emax, d, n), x=rng.integers(xlo, xhi + 1, (b, k)),
                              delta=d, relu=relu, stats=True))
    b, n, k = C, cn(R + 1), ck(5)
    cases.append(Case("stats_extreme_bias", regs_for(n, k, "twohot"), n, "twohot",
                      rng.choice([-(1 << min(30, A - 2)), (1 << min(30, A - 2)) - 1, -1, 0], n), np.zeros(n, int),
                      x=rng.integers(xlo, xhi + 1, (b, k)), stats=True))
    if p["conv"] and p["max_ksize"] >= 3:
        cin = max(1, min(2, kmax // 9))
        h = w = max(3, min(6, p["max_hw"]))
        n = cn(R + 1)
        cases.append(Case("stats_conv3_same", regs_for(n, cin * 9, "twohot"), n, "twohot", bias_for(n, 6),
                          shift_for(cin * 9, emax, 0, n), fmap=rng.integers(xlo, xhi + 1, (cin, h, w)), ksize=3,
                          pad=1, stats=True))
        # a map wider than the unit columns and taller than the line buffer's rows, with more
        # channels than lanes: several groups per output row, input rows loaded during the
        # steps of the output row before (and the rest after them when K is short), a ragged
        # last group; 5x5 where the config allows it
        ks = 5 if p["max_ksize"] >= 5 and 4 * 25 <= kmax else 3
        cin = max(1, min(4, kmax // (ks * ks)))
        w = min(p["max_hw"], 2 * C + 3)
        h = min(p["max_hw"], ks + 4)
        for mode in modes:
            n = cn(R + 2)
            k = cin * ks * ks
            cases.append(Case(f"{mode}_conv{ks}_lines", regs_for(n, k, mode), n, mode, bias_for(n, 6),
                              shift_for(k, emax, 0, n), fmap=rng.integers(xlo, xhi + 1, (cin, h, w)), ksize=ks,
                              pad=(ks - 1) // 2, relu=mode == "twohot",
                              delta=int(rng.integers(0, p["max_delta"] + 1)) if mode == "twohot" else 0))
    # the raw output mode: every mode, with and without bias and ReLU, the largest magnitudes
    # at K = max_k (the accumulator's top bits), a ragged batch, statistics, a convolution
    for i, mode in enumerate(modes):
        b, n, k = C + 2, cn(2 * R + 1), ck(17 + 5 * i)
        d = int(rng.integers(0, (p["max_delta"] if mode == "twohot" else 0) + 1))
        cases.append(Case(f"raw_{mode}", regs_for(n, k, mode), n, mode, np.zeros(n, int), np.zeros(n, int),
                          x=rng.integers(xlo, xhi + 1, (b, k)), delta=d, raw=True))
        cases.append(Case(f"raw_{mode}_bias_relu_stats", regs_for(n, k, mode), n, mode, bias_for(n, B + emax),
                          rng.integers(-3, 4, n), x=rng.integers(xlo, xhi + 1, (b, k)), delta=d, relu=True,
                          raw=True, stats=True))
        b, n, k = C, cn(R), kmax
        cases.append(Case(f"raw_{mode}_max_magnitude", regs_max(n, k, mode), n, mode, np.zeros(n, int), np.zeros(n, int),
                          x=np.full((b, k), xlo if p["act_signed"] else xhi), delta=p["max_delta"] if mode == "twohot"
                          else 0, raw=True))
    if p["conv"] and p["max_ksize"] >= 3:
        cin = max(1, min(2, kmax // 9))
        h = w = max(3, min(6, p["max_hw"]))
        n = cn(R + 1)
        cases.append(Case("raw_conv3_same", regs_for(n, cin * 9, "pot"), n, "pot", bias_for(n, 6), np.zeros(n, int),
                          fmap=rng.integers(xlo, xhi + 1, (cin, h, w)), ksize=3, pad=1, raw=True, stats=True))
    for i in range(n_random):
        mode = modes[i % 3]
        b = int(rng.integers(1, 3 * C + 2))
        n = cn(int(rng.integers(1, 3 * R + 4)))
        k = ck(int(rng.integers(1, 80)))
        d = int(rng.integers(0, (p["max_delta"] if mode == "twohot" else 0) + 1))
        e_hi = int(rng.integers(0, emax + 1))
        cases.append(Case(f"random{i}_{mode}", regs_for(n, k, mode, e_hi=e_hi), n, mode, bias_for(n, B + e_hi),
                          shift_for(k, e_hi, d, n), x=rng.integers(xlo, xhi + 1, (b, k)), delta=d,
                          relu=bool(rng.integers(0, 2))))
    return cases


def _pack(p, case):
    x = case.rows_x()
    return protocol.pack_input(p, regs=case.regs, bias=case.bias, shift=case.shift, n=case.n, mode=case.mode,
                               x=None if case.fmap is not None else case.x, fmap=case.fmap, batch=x.shape[0])


def run_case(cfg, target, case: Case):
    """Run ``case`` through ``target`` and the emulator; the same report as bfp_systolic's."""
    p = cfg.params
    x = case.rows_x()
    b, n = x.shape[0], case.n
    row = case.out_width()
    nb = protocol.n_output_beats(p, b, n, row=row, raw=case.raw)
    out, regs_out = target.run(_pack(p, case), case.regs_in(),
                               protocol.n_output_beats(p, b, n, stats=case.stats, row=row, raw=case.raw))
    got = protocol.unpack_output(p, out[:nb], b, n, case.mode, row, raw=case.raw)
    exp, esat, *ehist = emulate(p, x, case.regs, case.bias, case.shift, n=n, mode=case.mode, delta=case.delta,
                                relu=case.relu, stats=case.stats, raw=case.raw)
    bad = got != exp
    first = None
    B = protocol.raw_bits(p) if case.raw else p["act_bits"]
    if bad.any():
        i, j = (int(v) for v in np.argwhere(bad)[0])
        hx = lambda v: f"0x{int(v) & ((1 << B) - 1):0{(B + 3) // 4}x}"  # noqa: E731
        first = {"index": [i, j], "expected": {"value": int(exp[i, j]), "raw": hx(exp[i, j])},
                 "got": {"value": int(got[i, j]), "raw": hx(got[i, j])}}
    outputs, mismatches = int(bad.size), int(bad.sum())
    if case.stats:      # the histogram's bins count as outputs of the case
        bins, bad_bins, first_bin = compare_stats(ehist[0], protocol.unpack_stats(p, out))
        outputs, mismatches, first = outputs + bins, mismatches + bad_bins, first or first_bin
    regs_ok = [int(r) for r in regs_out] == [MAGIC, cfg.hash32, esat]
    return {"case": case.name, "shape": [b, n, x.shape[1]], "outputs": outputs, "mismatches": mismatches,
            "first": first, "registers_ok": regs_ok,
            "registers": {"expected": [MAGIC, cfg.hash32, esat], "got": [int(r) for r in regs_out]}}


def testbench_vectors(cfg, seed=0):
    """One seeded case as stream beats for the stand-alone testbench (tb.cpp)."""
    p = cfg.params
    case = [c for c in make_cases(cfg, seed, n_random=1) if c.name.startswith("twohot_ragged")][0]
    x = case.rows_x()
    y, sat = emulate(p, x, case.regs, case.bias, case.shift, n=case.n, mode=case.mode, delta=case.delta,
                     relu=case.relu)
    return _pack(p, case), case.regs_in(), protocol.pack_output(p, y, case.mode), [MAGIC, cfg.hash32, sat]
