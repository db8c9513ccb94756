"""Bit-exact emulator of the ``shift_mac`` kernel — the specification of its arithmetic.

The C++ kernel (``hls/engines/shift_mac/kernel.cpp.j2``) follows these rules; C-simulation
and the board must agree with :func:`emulate` on every output bit.

Notation: ``B`` = ``act_bits``, ``A`` = ``acc_bits``, ``E`` = ``exp_bits``, ``d`` = the
``delta`` register. Activations are B-bit integers, signed or unsigned per the config.

1. **Unit, per register** (source 000, Alg 0-A/0-B). A register is ``(e1, s1, z1, e2, s2,
   z2, cfg)``; with ``C = x << e1`` and ``A = x << e2`` (exact: left shifts of a
   two's-complement value):

   * ``cfg = 0`` (two-hot): ``B = (C << d) - A`` if ``s1`` else ``(C << d) + A``; ``B = 0`` if
     ``z1``; ``acc1 -= B`` if ``s2`` else ``acc1 += B``; ``acc2`` unchanged.
   * ``cfg = 1`` (PoT): ``acc1 ±= A`` (sign ``s2``; 0 if ``z2``) and ``acc2 ±= C`` (sign
     ``s1``; 0 if ``z1``).

   So a register contributes ``x * c1`` to ``acc1`` and ``x * c2`` to ``acc2`` with
   ``c1 = (-1)^s2 (2^(e1+d) + (-1)^s1 2^e2)``, ``c2 = 0`` (two-hot) or ``c1 = (-1)^s2 2^e2``,
   ``c2 = (-1)^s1 2^e1`` (PoT), zero flags clearing their terms.
2. **Reset on a mode change.** Both accumulators start at 0 for every weight tile and are
   reset to 0 whenever a register's ``cfg`` differs from the previous register's of the same
   unit row; so only registers from the last change on count.
3. **Accumulation.** The config guarantees ``A`` bits hold any sum (``acc_bits`` ≥
   shifter width + ``max_delta`` + 2 + ceil(log2 max_k)), so sums are exact.
4. **Routing** by the ``mode`` register: two-hot — neuron ``u`` gets ``acc1`` of register
   row ``u``; dual PoT — neuron ``2u`` gets ``acc2`` (shifter 1), neuron ``2u+1`` gets
   ``acc1`` (shifter 2); summed PoT — neuron ``u`` gets ``saturate_A(acc1 + acc2)``.
5. **Requantization** per neuron ``n``: ``v = saturate_A(acc + bias[n])``; ReLU:
   ``v = max(v, 0)``; ``y = shift_round_sat(v, shift[n], B)`` for signed activations, or
   ``shift_round_sat(v, shift[n], B + 1)`` clamped to ``[0, 2^B - 1]`` for unsigned ones
   (the clamp counts as saturation). ``sat_count`` counts saturated outputs modulo 2**32.
6. **Statistics unit** (source 002; only with ``stats=True``, the ``FLAG_STATS_OUT`` bit):
   ``hist = msb_histogram(v, acc_bits)`` over the wide values ``v`` of rule 5 (after bias and
   ReLU, before the output shift) of every real output (``batch x N``; never padding neurons).
7. **Raw mode** (``raw=True``, the ``FLAG_RAW`` bit): the output is ``v`` of rule 5 itself
   (``acc_bits`` wide, sent as ``protocol.raw_bits`` = 32 or 64 bits), with no output shift,
   rounding or saturation; ``sat_count`` is 0; the statistics unit counts as in rule 6. With
   ``bias = 0`` and no ReLU, ``v`` is rule 4's accumulator, exact (rule 3), so the sums of raw
   calls over chunks of K add up exactly on the host, which then applies rules 5-6 to the
   total (:func:`output_rule`, the one function of those rules; ``shift_mac.tiles``).

Convolution is this GEMM on the rows of ``x`` that :func:`im2col` builds: output pixel
``(oy, ox)`` in raster order is sample ``oy*W' + ox``; feature ``(ci*k + ky)*k + kx`` is
``fmap[ci, oy + ky - pad, ox + kx - pad]``, or 0 outside the map; ``H' = H + 2 pad - k + 1``.
(The kernel never builds these rows: its units read the same values from a line buffer of
``k + 1`` input rows.)

Nothing here depends on the order in which the kernel passes samples, weight tiles or
output rows, nor on whether the weights were streamed by the call or were already on chip
(resident): only on the registers, the activations and the call registers.
"""
from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from ... import native
from ...native import parallel
from ...errors import InputError
from .. import common as _common
from ..common import round_into as _round_into
from ..common import workspace as _workspace
from ...primitives import msb_histogram, saturate, shift_round_sat
from .protocol import unpack_registers


def register_contributions(p, regs, delta):
    """The integer multipliers ``c1, c2`` (float64, exact) of every register, with the
    mode-change reset applied (rules 1-2). ``regs`` is (rows, K) of register lanes."""
    e1, s1, z1, e2, s2, z2, cfg = unpack_registers(p, regs)
    t1 = np.ldexp(1.0, e1)
    t2 = np.ldexp(1.0, e2)
    sg1 = 1.0 - 2.0 * s1
    sg2 = 1.0 - 2.0 * s2
    twohot_c1 = sg2 * (t1 * 2.0 ** delta + sg1 * t2) * (1 - z1)
    pot_c1 = sg2 * t2 * (1 - z2)
    pot_c2 = sg1 * t1 * (1 - z1)
    c1 = np.where(cfg == 1, pot_c1, twohot_c1)
    c2 = np.where(cfg == 1, pot_c2, 0.0)
    k = regs.shape[1]
    if k > 1:
        change = cfg[:, 1:] != cfg[:, :-1]
        idx = np.where(change, np.arange(1, k)[None, :], 0)
        kstart = idx.max(axis=1)
        keep = np.arange(k)[None, :] >= kstart[:, None]
        c1 = np.where(keep, c1, 0.0)
        c2 = np.where(keep, c2, 0.0)
    return c1, c2


def im2col(fmap, ksize, pad):
    """Rows of x for a stride-1 convolution, in the kernel's order (see the module rules)."""
    fmap = np.asarray(fmap, np.int64)
    cin, h, w = fmap.shape
    padded = np.zeros((cin, h + 2 * pad, w + 2 * pad), np.int64)
    padded[:, pad:pad + h, pad:pad + w] = fmap
    win = np.lib.stride_tricks.sliding_window_view(padded, (ksize, ksize), axis=(1, 2))
    oh, ow = win.shape[1], win.shape[2]
    # win: (cin, oh, ow, ky, kx) -> (oh*ow, cin*ky*kx)
    return win.transpose(1, 2, 0, 3, 4).reshape(oh * ow, cin * ksize * ksize), (oh, ow)


def _exact_matmul(x, c, bound_bits):
    if bound_bits <= 53:
        return x.astype(np.float64) @ c.T
    return x.astype(np.int64) @ c.astype(np.int64).T


def output_rule(p, acc, bias, shift, *, relu=False, stats=False, raw=False):
    """Rules 5-7: the output of every neuron from its accumulator, in int64.

    Parameters
    ----------
    p : mapping
        The validated ``shift_mac`` config section.
    acc : (batch, N) int array
        Rule 4's accumulators (summed PoT: already ``saturate_A(acc1 + acc2)``). Any int64
        value is accepted: values beyond ``+-2**62`` are first clamped to ``+-2**62``, which
        changes no result (``|bias| < 2**31`` and ``acc_bits <= 62``, so such a sum saturates
        to the same end of the ``acc_bits`` range either way).
    bias, shift : (N,) int arrays
    relu, stats, raw : bool
        ReLU; also return the histogram of rule 6; return ``v`` (rule 7) instead of ``y``.

    Returns
    -------
    y : (batch, N) int64
        Requantized outputs, or (``raw``) the wide values ``v``.
    sat_count : int
        Saturated outputs modulo 2**32 (0 in raw mode).
    hist : (acc_bits,) int64
        Only with ``stats``: ``msb_histogram(v, acc_bits)``.

    Notes
    -----
    Rules 5-7 as the module docstring states them. This function is the rule for
    :func:`emulate_reference` (and so, through the tests that equate them, for :func:`emulate`)
    and for the host's post-step of a K-tiled GEMM (``shift_mac.tiles``).
    """
    A, B = p["acc_bits"], p["act_bits"]
    n = np.shape(acc)[1]
    lim = 1 << 62
    acc = np.clip(np.asarray(acc, np.int64), -lim, lim)
    v = saturate(acc + np.asarray(bias, np.int64).reshape(-1)[None, :n], A)
    if relu:
        v = np.maximum(v, 0)
    hist = (msb_histogram(v, A),) if stats else ()
    if raw:
        return (v, 0) + hist
    s = np.broadcast_to(np.asarray(shift, np.int64).reshape(-1), (n,))[None, :]
    if p["act_signed"]:
        y, sat = shift_round_sat(v, s, B, p["rounding"])
    else:
        y1, sat = shift_round_sat(v, s, B + 1, p["rounding"])
        y = np.clip(y1, 0, (1 << B) - 1)
        sat = sat | (y != y1)
    return (y, int(sat.sum()) % (1 << 32)) + hist


def emulate_reference(p, x, regs, bias, shift, *, n, mode, delta=0, relu=False, stats=False, raw=False):
    """The module's rules transcribed directly (int64 post-processing, :func:`output_rule`);
    :func:`emulate` must equal it bit for bit (the tests check this). The same parameters and
    returns as :func:`emulate`.
    """
    A = p["acc_bits"]
    if not 0 <= delta <= p["max_delta"]:
        raise InputError(f"delta = {delta}: must be in [0, max_delta = {p['max_delta']}]")
    x = np.asarray(x, np.int64)
    c1, c2 = register_contributions(p, np.asarray(regs), delta)
    bound = (p["act_bits"] + 1 + (1 << p["exp_bits"]) + p["max_delta"] + 1
             + math.ceil(math.log2(max(x.shape[1], 1))))
    acc1 = _exact_matmul(x, c1, bound)
    if mode == "twohot" and not c2.any():
        acc2 = None
    else:
        acc2 = _exact_matmul(x, c2, bound)
    batch = x.shape[0]
    if mode == "twohot":
        acc = acc1[:, :n]
    elif mode == "pot":
        acc = np.empty((batch, 2 * acc1.shape[1]))
        acc[:, 0::2] = acc2
        acc[:, 1::2] = acc1
        acc = acc[:, :n]
    elif mode == "pot_sum":
        acc = saturate((acc1 + acc2).astype(np.int64), A)[:, :n]
    else:
        raise InputError(f"mode = {mode!r}: must be twohot, pot or pot_sum")
    return output_rule(p, np.asarray(acc).astype(np.int64), np.asarray(bias, np.int64)[:n],
                       np.asarray(shift, np.int64)[:n], relu=relu, stats=stats, raw=raw)


@functools.lru_cache(maxsize=64)
def _tables(exp_bits, delta):
    """Per 16-bit register lane: the multipliers of accumulator 1 and 2 (rule 1), as float64
    lookup tables (bits above the register's 2E+5 are ignored, as the kernel ignores them)."""
    p = {"exp_bits": exp_bits}
    lanes = np.arange(1 << 16, dtype=np.int64)       # indexed by the whole 16-bit lane
    e1, s1, z1, e2, s2, z2, cfg = unpack_registers(p, lanes)
    sg1, sg2 = 1.0 - 2.0 * s1, 1.0 - 2.0 * s2
    t1, t2 = np.ldexp(1.0, e1), np.ldexp(1.0, e2)
    c1 = np.where(cfg == 1, sg2 * t2 * (1 - z2), sg2 * (t1 * 2.0 ** delta + sg1 * t2) * (1 - z1))
    c2 = np.where(cfg == 1, sg1 * t1 * (1 - z1), 0.0)
    for t in (c1, c2):
        t.flags.writeable = False
    return c1, c2


def _int_gemm_lib():
    """The compiled int32 GEMM (``hlsnn/native/int_conv.c``), or None."""
    lib = native.load("int_conv")
    if lib is not None and not getattr(lib, "_hlsnn_gemm_typed", False):
        f = lib.hlsnn_int_gemm
        f.restype = None
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        f.argtypes = [ptr, i64, ptr, i64, ptr, ptr, i64, i64, ptr, ctypes.c_int]
        lib._hlsnn_gemm_typed = True
    return lib


#: Multiply-adds per thread of :func:`_int_gemm` at least (smaller GEMMs run in one thread).
INT_GEMM_MIN_MACS = 1 << 22


def _int_gemm(x, m, bias, scale, out, limit=2):
    """``out = (x @ m.T + bias) * scale`` (float64, the float GEMM's exact values; ``bias`` and
    ``scale`` one value per output or one for all) by the compiled int32 GEMM, when it is
    available and its int32 sums are exact: ``max|x| < 2**31`` and ``max|x| * max_n sum_k
    |m[n, k]| < 2**31`` (``m`` integers, float64), and ``|bias| < 2**52``, so that ``acc +
    bias`` is exact in float64 (the float GEMM rounds a larger sum, by its order of
    additions). Returns False, leaving ``out`` alone, otherwise. The rows are split between
    threads; ``limit`` caps the vector unit (0 the portable loops, 1 at most AVX2, 2 the best)."""
    lib = _int_gemm_lib()
    if lib is None or x.size == 0 or m.size == 0:
        return False
    n, k = m.shape
    xmax = max(-int(x.min()), int(x.max()))
    wsum = float(np.abs(m).sum(axis=1).max())
    bmax = max(-int(np.min(bias)), int(np.max(bias))) if np.size(bias) else 0
    if xmax >= 1 << 31 or xmax * wsum >= 1 << 31 or bmax >= 1 << 52:
        return False
    ns = -(-n // 16) * 16
    wz = np.zeros((ns, k), np.int32)
    wz[:n] = m
    wb = np.ascontiguousarray(wz.reshape(ns // 16, 16, k).transpose(0, 2, 1))
    x = np.ascontiguousarray(x, np.int64)
    b = np.ascontiguousarray(np.broadcast_to(bias, (n,)), np.int64)          # one value: every output's
    s = np.ascontiguousarray(np.broadcast_to(scale, (n,)), np.float64)
    parallel.run(lambda r0, r1: lib.hlsnn_int_gemm(x.ctypes, k, wb.ctypes, n, b.ctypes, s.ctypes, r0, r1,
                                                   out.ctypes, limit),
                 parallel.parts(x.shape[0], max(8, INT_GEMM_MIN_MACS // (k * ns))))
    return True


def _float_gemm(x, m, n, k, bias, scale, acc):
    """``acc = (x @ m[:n, :k].T + bias) * scale`` by a float64 GEMM (exact: every sum below
    2**53): the bias rides as an extra input of value 1, the output scale 2**-shift[n] in the
    weight rows (powers of two: exact). ``m`` (rows, k + 1) is the multipliers' workspace,
    changed in place."""
    m[:n, :k] *= scale[:, None]
    m[:n, k] = bias * scale
    # a block of rows at a time: each block of x is converted into a float operand that stays
    # in the caches for its GEMM (the sums are exact, so the blocks give one GEMM's bits)
    batch = x.shape[0]
    rows_blk = max(1, min(batch, _common.GEMM_ROWS))
    xf = _workspace("x", (rows_blk, k + 1))
    xf[:, k] = 1.0
    wt = m[:n].T
    for r0 in range(0, batch, rows_blk):
        r1 = min(batch, r0 + rows_blk)
        xb = xf[:r1 - r0]
        np.copyto(xb[:, :k], x[r0:r1], casting="unsafe")
        np.matmul(xb, wt, out=acc[r0:r1])


def rows_blk_for(block_elems, n):
    return max(1, block_elems // max(n, 1))


def emulate(p, x, regs, bias, shift, *, n, mode, delta=0, relu=False, stats=False, raw=False,
            block_elems=1 << 15):
    """Run the kernel's arithmetic (the module's rules, bit for bit).

    Parameters
    ----------
    p : mapping
        The validated ``shift_mac`` config section.
    x : (batch, K) int array
        Activations (for convolution, the :func:`im2col` rows).
    regs : (rows, K) uint16 array
        Register lanes, one row per unit row of every weight tile (protocol.py).
    bias, shift : (N,) int arrays
        Per-neuron bias (accumulator units) and output shift.
    n : int
        Number of outputs N.
    mode : {"twohot", "pot", "pot_sum"}
        The ``mode`` register.
    delta : int
        The ``delta`` register (two-hot first-term extra shift).
    relu : bool
    stats : bool
        Also return the statistics unit's histogram (rule 6).
    raw : bool
        The raw mode (rule 7, ``FLAG_RAW``): return the wide values instead of requantizing.

    Returns
    -------
    y : (batch, N) int64
        Requantized outputs (raw mode: the wide values ``v`` of rule 5).
    sat_count : int
        Saturated outputs, modulo 2**32 (0 in raw mode).
    hist : (acc_bits,) int64
        Only with ``stats``: ``msb_histogram`` of the wide values of rule 5.

    Notes
    -----
    Each register lane maps through a lookup table to its two multipliers (rule 1); the
    neurons' multiplier matrix is built so that one GEMM gives every output in order (dual
    PoT interleaves accumulator 2 and 1; summed PoT adds the two tables, exact because the
    config's ``acc_bits`` leaves room for that adder). The GEMM gives ``(acc + bias) *
    2**-shift`` in float64, exact while the accumulator bound is below 2**53 (otherwise, and
    for accumulator widths above 53 bits, :func:`emulate_reference` is used): summed in int32
    by the compiled GEMM where its sums are exact (:func:`_int_gemm`), else by a float64 GEMM
    (:func:`_float_gemm`), the same values. The requantization runs in float64. The raw mode runs
    :func:`emulate_reference` (its exact GEMM, then :func:`output_rule`).
    """
    A = p["acc_bits"]
    if not 0 <= delta <= p["max_delta"]:
        raise InputError(f"delta = {delta}: must be in [0, max_delta = {p['max_delta']}]")
    if mode not in ("twohot", "pot", "pot_sum"):
        raise InputError(f"mode = {mode!r}: must be twohot, pot or pot_sum")
    x = np.asarray(x)
    regs = np.asarray(regs)
    batch, k = x.shape
    bound = (p["act_bits"] + 1 + (1 << p["exp_bits"]) + p["max_delta"] + 1 + math.ceil(math.log2(max(k, 1))))
    if bound > 53 or A > 53 or raw:
        return emulate_reference(p, x, regs, bias, shift, n=n, mode=mode, delta=delta, relu=relu, stats=stats,
                                 raw=raw)
    E = p["exp_bits"]
    t1, t2 = _tables(E, int(delta))
    lanes = np.asarray(regs, np.uint16)     # bits above the register are ignored (16-bit tables)
    rows = lanes.shape[0]
    # rule 2: registers before the last config-bit change of their row do not count
    cfg_lanes = (lanes >> np.uint16(2 * E + 4)) & np.uint16(1)
    uniform = k <= 1 or cfg_lanes.size == 0 or cfg_lanes.min() == cfg_lanes.max()
    changed = None if uniform else (cfg_lanes[:, 1:] != cfg_lanes[:, :-1])
    bias_i = np.asarray(bias, np.int64).reshape(-1)[:n]
    shifts = np.asarray(shift, np.int64).reshape(-1)[:n]
    nw = 2 * rows if mode == "pot" else rows
    idx = lanes.astype(np.intp)                 # converted once for the gathers
    scale = np.ldexp(1.0, -shifts)
    m = _workspace("w", (nw, k + 1))             # the multipliers (rule 1), then the bias column
    if mode == "pot":
        np.take(t2, idx, out=m[0::2, :k])       # neuron 2u: shifter 1 -> accumulator 2
        np.take(t1, idx, out=m[1::2, :k])       # neuron 2u+1: shifter 2 -> accumulator 1
    else:
        np.take(t1 + t2 if mode == "pot_sum" else t1, idx, out=m[:, :k])
    if changed is not None and changed.any():
        kstart = np.where(changed, np.arange(1, k)[None, :], 0).max(axis=1)
        keep = np.arange(k)[None, :] >= kstart[:, None]
        m[:, :k] *= np.repeat(keep, 2, axis=0) if mode == "pot" else keep
    acc = _workspace("acc", (batch, n))
    if not _int_gemm(x, m[:n, :k], bias_i, scale, acc):
        _float_gemm(x, m, n, k, bias_i, scale, acc)
    return requantize(p, acc, shifts, scale, k=k, delta=delta, max_bias=int(np.abs(bias_i).max()) if n else 0,
                      relu=relu, stats=stats, block_elems=block_elems)


def wide_bound(p, k, delta):
    """``tight``: every accumulator of a GEMM of reduction length ``k`` (before the bias) is
    below ``2**tight`` in magnitude (rule 3): ``|x| <= 2**xb`` and ``|multiplier| <=
    2**(emax + delta + 1)``."""
    xb = p["act_bits"] - 1 if p["act_signed"] else p["act_bits"]
    return xb + (1 << p["exp_bits"]) - 1 + int(delta) + 1 + math.ceil(math.log2(max(k, 1)))


def requantize(p, acc, shifts, scale, *, k, delta, max_bias, relu=False, stats=False, dequantize=None,
               block_elems=1 << 15):
    """Rule 5 (and 6) on the wide values, in place: ``acc`` (batch, N) float64 holds
    ``(accumulator + bias) * scale`` exactly, ``scale = 2**-shifts`` per output; ``k`` and
    ``delta`` bound the accumulators (:func:`wide_bound`), ``max_bias`` the bias magnitudes.
    Returns :func:`emulate`'s ``(y, sat_count[, hist])``.

    ``dequantize=fy`` (an int) returns, instead of the int64 ``y``, the float64 values
    ``y * 2**-fy`` (exact, +0.0 for a zero output: the float GEMM's result) for ``|fy| <= 900``."""
    A, B = p["acc_bits"], p["act_bits"]
    n = acc.shape[1]
    batch = acc.shape[0]
    lo_a, hi_a = -(1 << (A - 1)), (1 << (A - 1)) - 1
    lo, hi = (-(1 << (B - 1)), (1 << (B - 1)) - 1) if p["act_signed"] else (0, (1 << B) - 1)
    # Static bounds decide which clamps can ever act: |acc| <= 2**tight (rule 3).
    tight = wide_bound(p, k, delta)
    clamp_acc = (1 << tight) + max_bias > hi_a
    # Rounding straight into int64 is safe while |v * 2**-shift| < 2**62. For nearest_away,
    # trunc(v + copysign(1/2, v)) is exact: v = m * 2**-s with |m| < 2**(tight+1) <= 2**51,
    # so adding 1/2 is exact for s <= 52, and for larger s, |v| < 1/4 rounds to 0 either way.
    direct = (tight + 1 + max(0, -int(shifts.min(initial=0)))) < 62 and tight + 1 <= 51
    nonneg = bool(relu)   # after ReLU every value is >= 0
    half = np.empty((min(rows_blk_for(block_elems, n), batch), n)) if p["rounding"] == "nearest_away" else None
    y = np.empty((batch, n), np.int64 if dequantize is None else np.float64)
    unit = None if dequantize is None else np.ldexp(1.0, -int(dequantize))
    sat = 0
    hist = np.zeros(A, np.int64) if stats else None
    unscale = np.ldexp(1.0, shifts) if stats else None
    rows_blk = rows_blk_for(block_elems, n)
    for r0 in range(0, batch, rows_blk):
        r1 = min(batch, r0 + rows_blk)
        a = acc[r0:r1]                                       # rule 5, in place, scaled
        if clamp_acc:
            np.clip(a, lo_a * scale, hi_a * scale, out=a)
        if relu:
            np.maximum(a, 0, out=a)
        if stats:       # rule 6: v = a * 2**shift, exact (a power of two times an exact value)
            hist += msb_histogram((a * unscale).astype(np.int64), A)
        yb = y[r0:r1]
        if direct and dequantize is None:
            if p["rounding"] == "nearest_away":
                if nonneg:
                    a += 0.5
                    np.floor(a, out=yb, casting="unsafe")
                else:
                    h = half[:r1 - r0]
                    np.copysign(0.5, a, out=h)
                    a += h
                    np.trunc(a, out=yb, casting="unsafe")
            else:
                (np.rint if p["rounding"] == "nearest_even" else np.floor)(a, out=yb, casting="unsafe")
            if yb.size and (yb.max() > hi or yb.min() < lo):
                sat += int(np.count_nonzero(yb > hi)) + int(np.count_nonzero(yb < lo))
                np.clip(yb, lo, hi, out=yb)
        else:
            _round_into(a, p["rounding"], a)
            if a.size and (a.max() > hi or a.min() < lo):
                sat += int(np.count_nonzero(a > hi)) + int(np.count_nonzero(a < lo))
                np.clip(a, lo, hi, out=a)
            if dequantize is None:
                yb[...] = a
            else:       # y * 2**-fy: exact (|y| <= 2**B, |fy| <= 900); -0.0 -> +0.0 as from the integers
                np.multiply(a, unit, out=yb)
                yb += 0.0
    if stats:
        return y, sat % (1 << 32), np.minimum(hist, (1 << 32) - 1)
    return y, sat % (1 << 32)
