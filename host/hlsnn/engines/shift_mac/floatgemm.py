"""The float GEMM of ``shift_mac`` on the ``emu`` target's arrays, in one pass of work.

``Kernel.gemm`` on floats quantizes the activations and the weights, calibrates the output
scale on a float64 product of the quantized operands, and runs the kernel (``gemm_int``),
which on the emu target builds the weight registers and hands them to the emulator, whose
lookup tables turn them back into the code values. :func:`gemm_arrays` computes the same
result, bit for bit and with the same kernel state afterwards, with one GEMM instead of two:

* the activations are quantized straight into the emulator's float GEMM operand (with its
  column of ones for the bias), the weights straight into their code values
  (``shift._quantize_values_into``: a register's multipliers are its code's value, rule 1 of
  the emulator; no mode change inside a row, so rule 2 never acts);
* one float64 GEMM gives the wide values ``V = x @ codes.T + bias`` exactly (the emulator's
  bound, below 2**53);
* the calibration reads ``V``: the general path's reference product is
  ``V * 2**-(fx + fw)`` exactly whenever every scale exponent is within ``+-900`` (every
  product and partial sum is then an exact normal float64), which is checked;
* the same requantization (:func:`~.emulator.requantize`, rule 5) then runs on
  ``V * 2**-shift`` and returns the dequantized floats.

A batch that the activation store would split, or N above ``max_n``, runs here as one call:
every output depends only on its own row and neuron, the saturation counts and histograms of
the split are the saturating sums of the parts, equal to one call's below 2**32 outputs
(checked). Whatever is not this simple (loaded weights, a transfer limit, shapes or options
the general path rejects, extreme scales) returns None, and the general path runs and raises
its errors. ``tests/engines/shift_mac/test_float_gemm.py`` holds the two paths equal.

The per-element passes (x's extremes and its operand, the weights' codes, the output's column
extremes and requantization) run through their compiled twins, the same bits
(:mod:`hlsnn.engines.shift_mac.compiled`), when :func:`hlsnn.native.load` gives the library; the
numpy code here is their specification and runs otherwise.
"""
from __future__ import annotations

import math

import numpy as np

from ...formats import shift as sfmt
from ...formats._validate import as_float_array, as_float_input, is_int
from .. import tiling
from ..common import largest_frac, workspace
from . import compiled
from .emulator import requantize, wide_bound

#: Scale exponents (activation, weight, output and their sums) within which every value of
#: the calibration product is an exact normal float64.
SCALE_LIMIT = 900
#: Elements per block of the activation quantizer.
BLOCK_ELEMS = 1 << 14


def applies(kern):
    """Whether :func:`gemm_arrays` may run for this kernel: the emu target's arrays, no
    transfer limit, no weights loaded on chip."""
    return bool(getattr(kern.target, "arrays", False)) and kern._loaded is None \
        and tiling.transfer_limit(kern.target) is None


def gemm_arrays(kern, x, w, bias, relu, mode, delta, stats):
    """``Kernel.gemm(x, w, bias, relu, mode, delta=delta, stats=stats)`` (``mode`` already
    defaulted), or None when the general path must run (module docstring)."""
    p = kern.p
    A, B, E = p["acc_bits"], p["act_bits"], p["exp_bits"]
    w = as_float_array(w, "w")           # finiteness: checked by the quantizer (its slice extremes)
    x = as_float_array(x, "x")           # finiteness: from the extremes below
    if w.ndim != 2 or x.ndim != 2 or x.size == 0 or x.shape[1] != w.shape[1] \
            or mode not in ("twohot", "pot", "pot_sum"):
        return None
    if mode == "twohot" and not (is_int(delta) and 0 <= delta <= min(p["max_delta"], sfmt.DELTA_RANGE[1])):
        return None
    (batch, k), n = x.shape, w.shape[0]
    bound = B + 1 + (1 << E) + p["max_delta"] + 1 + math.ceil(math.log2(max(k, 1)))   # emulate's guard
    if k > p["max_k"] or batch * n >= 1 << 32 or bound > 53 or A > 53:
        return None
    limit = (1 << (B - 1)) - 1 if p["act_signed"] else (1 << B) - 1

    def act_frac(xmax, xmin):
        """The activations' scale exponent from x's extremes, or None: the general path runs."""
        if not (np.isfinite(xmax) and np.isfinite(xmin)) or (xmin < 0 and not p["act_signed"]):
            return None                  # the general path raises (w's error first, as it checks w first)
        return largest_frac(max(xmax, -xmin), limit)

    def act_frac_compiled(xmax, xmin):   # where the compiled activations pass runs (|fx| <= SCALE_LIMIT)
        f = act_frac(xmax, xmin)
        return f if f is not None and abs(f) <= SCALE_LIMIT else None

    so = compiled.lib()                  # the compiled passes (same bits), or None: numpy
    qmode, qdelta = ("pot", 0) if mode == "pot" else ("twohot", int(delta) if mode == "twohot" else 0)
    wm = workspace("shift_gemm_w", (n, k + 1))
    xf = workspace("shift_gemm_x", (batch, k + 1))
    fx_done = None
    if so is not None:                   # x's extremes and operand, w's codes at once (fw None: w's error below)
        x = compiled.rows_view(x)
        (xmax, xmin), fw, fx_done = compiled.inputs(
            so, x, qmode, compiled.rows_view(w), E, qdelta, wm[:, :k], act=(act_frac_compiled, xf))
    else:
        xmax, xmin = float(x.max()), float(x.min())
    fx = act_frac(xmax, xmin)
    if fx is None:
        return None
    # activations: clip(rint(x * 2**fx), lo, limit), as Kernel._act, into the GEMM operand with a
    # column of ones. The clip never acts: |x| * 2**fx <= max|x| * 2**fx <= limit (largest_frac;
    # ldexp rounds monotonically) and rint keeps an integer bound, and -limit >= lo.
    if fx_done is None:                  # (the compiled path ran it above where |fx| <= SCALE_LIMIT)
        rows = max(1, BLOCK_ELEMS // k)
        for r0 in range(0, batch, rows):
            xb = xf[r0:r0 + rows, :k]
            np.ldexp(x[r0:r0 + rows], fx, out=xb)
            np.rint(xb, out=xb)
        xf[:, k] = 1.0
    # weights: their code values, with the bias in accumulator units as the last column
    if so is None or fw is None:         # the numpy quantizer (it raises on a NaN or an Inf)
        fw = sfmt._quantize_values_into(qmode, w, E, qdelta, wm[:, :k])
    fw = fw[:, 0].astype(np.int64)
    b = np.zeros(n) if bias is None else as_float_input(bias, "bias").reshape(-1)
    if b.shape != (n,):
        return None
    f_in = fx + fw
    if abs(fx) > SCALE_LIMIT or np.abs(fw).max() > SCALE_LIMIT or np.abs(f_in).max() > SCALE_LIMIT:
        return None
    b_scaled = np.ldexp(b, f_in)
    if np.abs(b_scaled).max() >= 1 << min(30, A - 2):        # well inside the bias field: else the general path
        return None
    b_int = np.rint(b_scaled).astype(np.int64)
    wm[:, k] = b_int
    v = np.matmul(xf, wm.T, out=workspace("shift_gemm_acc", (batch, n)))     # acc + bias, exact
    native_out = so is not None and not stats and compiled.requantizes(p)
    if native_out:                           # the compiled requantization applies the ReLU
        colmax, colmin = compiled.col_extremes(so, v)
        if relu:
            np.maximum(colmax, 0, out=colmax)
            np.maximum(colmin, 0, out=colmin)
    else:
        if relu:                             # rule 5's ReLU, here already (the calibration sees it too)
            np.maximum(v, 0, out=v)
        colmax, colmin = v.max(axis=0), v.min(axis=0)
    # the output scale, as Kernel._out_frac on V * 2**-(fx + fw) (exact: module docstring)
    colscale = np.ldexp(1.0, -f_in)
    top = float((colmax * colscale).max())
    if relu or not p["act_signed"]:
        amax_y = max(top, 0.0)
    else:
        amax_y = max(top, float((-colmin * colscale).max()))
    fy = largest_frac(amax_y, (1 << (B - 1)) - 1 if p["act_signed"] else (1 << B) - 1)
    shifts = f_in - fy
    if abs(fy) > SCALE_LIMIT or np.abs(shifts).max() > 127:      # the shift field: the general path raises
        return None
    delta_reg = qdelta if mode == "twohot" else 0
    max_bias = int(np.abs(b_int).max())
    kern._on_chip = None
    if native_out:
        y, kern.last_sat_count = compiled.requantize(so, p, v, shifts, k=k, delta=delta_reg, max_bias=max_bias,
                                                     relu=relu, fy=fy)
        kern.last_stats = None
        return y
    y = _round_unsaturated(p, v, colmax, colmin, shifts, f_in, k, delta_reg, max_bias) if not stats else None
    if y is not None:
        kern.last_sat_count, kern.last_stats = 0, None
        return y
    scale = np.ldexp(1.0, -shifts)
    v *= scale
    y, sat, *hist = requantize(p, v, shifts, scale, k=k, delta=delta_reg, max_bias=max_bias, relu=False,
                               stats=bool(stats), dequantize=fy)
    kern.last_sat_count, kern.last_stats = sat, (hist[0] if stats else None)
    return y


#: 1.5 * 2**52: ``(v + C q) - C q`` is ``rint(v / q) * q`` for a power of two ``q`` and
#: ``|v| < 2**51 q`` (the sum's ulp is ``q``; ties to even, +0.0 for a zero).
_ROUND_MAGIC = 1.5 * 2.0 ** 52


def _round_unsaturated(p, v, colmax, colmin, shifts, f_in, k, delta, max_bias):
    """Rule 5 for ``nearest_even`` when nothing can saturate, or None: ``v`` (batch, N) holds
    the wide values (after ReLU), ``colmax``/``colmin`` their extremes per output. With
    ``q = 2**shift``, ``y = rint(v / q)`` and the result is ``y * 2**-fy = rint(v / q) * q *
    2**-f_in`` (``f_in = shift + fy``), computed as ``((v + C q) - C q) * 2**-f_in`` in three
    passes. Nothing saturates when no accumulator clamp can act (:func:`~.emulator.wide_bound`)
    and the rounded column extremes fit the output range (rounding is monotone)."""
    A, B = p["acc_bits"], p["act_bits"]
    if p["rounding"] != "nearest_even" or (1 << wide_bound(p, k, delta)) + max_bias > (1 << (A - 1)) - 1:
        return None
    lo, hi = (-(1 << (B - 1)), (1 << (B - 1)) - 1) if p["act_signed"] else (0, (1 << B) - 1)
    q = np.ldexp(1.0, shifts)
    if np.rint(colmax / q).max() > hi or np.rint(colmin / q).min() < lo:
        return None
    c = _ROUND_MAGIC * q
    y = np.add(v, c)
    y -= c
    y *= np.ldexp(1.0, -f_in)
    return y
