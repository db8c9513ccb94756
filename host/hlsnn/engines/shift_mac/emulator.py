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

Convolution first builds the rows of ``x`` on chip (im2col): output pixel ``(oy, ox)`` in
raster order is sample ``oy*W' + ox``; feature ``(ci*k + ky)*k + kx`` is
``fmap[ci, oy + ky - pad, ox + kx - pad]``, or 0 outside the map; ``H' = H + 2 pad - k + 1``.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from ...primitives import saturate, shift_round_sat
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


def emulate(p, x, regs, bias, shift, *, n, mode, delta=0, relu=False):
    """Run the kernel's arithmetic.

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

    Returns
    -------
    y : (batch, N) int64
        Requantized outputs.
    sat_count : int
        Saturated outputs, modulo 2**32.
    """
    A, B = p["acc_bits"], p["act_bits"]
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
    acc = np.asarray(acc).astype(np.int64)
    v = saturate(acc + np.asarray(bias, np.int64)[None, :n], A)
    if relu:
        v = np.maximum(v, 0)
    s = np.asarray(shift, np.int64)[None, :n]
    if p["act_signed"]:
        y, sat = shift_round_sat(v, s, B, p["rounding"])
    else:
        y1, sat = shift_round_sat(v, s, B + 1, p["rounding"])
        y = np.clip(y1, 0, (1 << B) - 1)
        sat = sat | (y != y1)
    return y, int(sat.sum()) % (1 << 32)
