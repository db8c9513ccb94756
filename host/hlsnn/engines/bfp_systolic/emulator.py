"""Bit-exact emulator of the ``bfp_systolic`` kernel — the specification of its arithmetic.

The C++ kernel (``hls/engines/bfp_systolic/kernel.cpp.j2``) follows these rules; C-simulation
and the board must agree with :func:`emulate` on every output bit.

Notation: ``M`` = ``mantissa_bits``, ``A`` = ``acc_bits``, ``E`` = ``exponent_bits``,
``[emin, emax] = [-2**(E-1), 2**(E-1)-1]``; rounding is the config's ``rounding``.

1. **Products** (DSP tiles). ``acc[b, n] = sum_k xm[b, k] * wm[n, k]``, exact. The config
   guarantees ``A >= 2M - 1 + ceil(log2(max_k))``, so no partial sum overflows ``A`` bits;
   the order of summation does not matter.
2. **Exponent adder.** ``e3[b, n] = xe[b] + we[n]`` (``we`` is one value per weight row, or
   one for the tensor).
3. **Bias** (optional, one exponent ``be`` for the bias vector). The bias mantissa is moved
   to the product exponent: ``b' = shift_round_sat(bm[n], e3 - be, A)`` (a right shift with
   rounding when ``e3 > be``, an exact left shift saturated to ``A`` bits otherwise); then
   ``acc = saturate_A(acc + b')``.
4. **ReLU** (optional): ``acc = max(acc, 0)``.
5. **Output exponent**, one per sample (row ``b``), chosen over its ``N`` results:

   * *max* (Alg 1-B, SPECS.md eq. 2–4): ``L = max over acc != 0 of msb_index(|acc|) + e3``
     — this equals ``floor(log2(max |value|))`` exactly; ``e4 = clamp(L - (M - 2), emin, emax)``.
   * *stats* (Alg 1-D, mean + k·sigma of ``|value|``; needs a tensor-wide weight exponent, so
     ``e3`` is the same for the row, otherwise *max* is used): with ``P = msb_index(max |acc|)``
     and ``sh = max(0, P - 15)``, ``t = |acc| >> sh`` (16 magnitude bits);
     ``S1 = sum t``, ``S2 = sum t*t``, ``D = N*S2 - S1**2`` (= N² var), ``sd = isqrt(D)``,
     ``H = S1 + k*sd``, ``q = max(1, H // N)`` (the floor of mean + k·sigma),
     ``L = msb_index(q) + sh + e3`` and ``e4 = clamp(L - (M - 2), emin, emax)``.
   * A row whose results are all zero gets ``e4 = emin``.
6. **Output mantissa shifter**: ``ym = shift_round_sat(acc, e4 - e3, M)``; ``sat_count``
   counts the outputs this saturated (modulo 2**32, as the 32-bit register does).

Rounding of steps 3 and 6 is :func:`hlsnn.primitives.shift_round_sat`.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...primitives import isqrt, msb_index, shift_round_sat
from .spec import STAT_BITS


def _check_range(what, bits, *arrays):
    """Operands must fit their fields: the kernel would silently wrap them."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    for a in arrays:
        a = np.asarray(a)
        if a.size and (a.min() < lo or a.max() > hi):
            raise InputError(f"{what} values must fit {bits} signed bits [{lo}, {hi}]; got "
                             f"[{a.min()}, {a.max()}]")


def exact_matmul(xm: np.ndarray, wm: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """``xm @ wm.T`` exactly, as int64.

    Uses float32 BLAS when every partial sum is below 2**24, float64 BLAS below 2**53
    (integers are exact there, so the summation order cannot change the result), and an
    int64 product otherwise.
    """
    k = xm.shape[1]
    bound_bits = 2 * (mantissa_bits - 1) + int(np.ceil(np.log2(max(k, 1)))) + 1
    if bound_bits <= 24:
        return (xm.astype(np.float32) @ wm.astype(np.float32).T).astype(np.int64)
    if bound_bits <= 53:
        return (xm.astype(np.float64) @ wm.astype(np.float64).T).astype(np.int64)
    return xm.astype(np.int64) @ wm.astype(np.int64).T


def select_exponent(acc, e3, mantissa_bits, exponent_bits, use_stats=False, stats_k=3):
    """Output exponent per row of ``acc`` (step 5 of the module rules).

    ``e3`` broadcasts against ``acc``; with ``use_stats`` it must be constant along each row.
    """
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    acc = np.asarray(acc, np.int64)
    e3 = np.broadcast_to(np.asarray(e3, np.int64), acc.shape)
    mag = np.abs(acc)
    nz = acc != 0
    anyn = nz.any(axis=1)
    msb = msb_index(mag)
    if use_stats:
        n = acc.shape[1]
        p = msb.max(axis=1)
        sh = np.maximum(p - (STAT_BITS - 1), 0)
        t = np.right_shift(mag, sh[:, None])
        s1 = t.sum(axis=1)
        s2 = (t * t).sum(axis=1)
        sd = isqrt(n * s2 - s1 * s1)
        h = s1 + int(stats_k) * sd
        q = np.maximum(h // n, 1)
        lop = msb_index(q) + sh + e3[:, 0]
    else:
        lop = np.where(nz, msb + e3, np.iinfo(np.int64).min).max(axis=1)
    e4 = np.clip(lop - (mantissa_bits - 2), emin, emax)
    return np.where(anyn, e4, emin)


def emulate(p, xm, xe, wm, we, bm=None, be=0, *, relu=False, use_stats=False, stats_k=3):
    """Run the kernel's arithmetic on BFP operands.

    Parameters
    ----------
    p : mapping
        The validated ``bfp_systolic`` config section.
    xm : (batch, K) int array, xe : (batch,) int array
        Input mantissas and one exponent per sample.
    wm : (N, K) int array, we : (N,) int array or scalar
        Weight mantissas and exponents (per row, or one for the tensor).
    bm : (N,) int array or None, be : int
        Bias mantissas and their exponent.
    relu, use_stats, stats_k
        The ``flags`` and ``stats_k`` registers.

    Returns
    -------
    ym : (batch, N) int64
        Output mantissas.
    ye : (batch,) int64
        Output exponents.
    sat_count : int
        Number of saturated output mantissas, modulo 2**32.
    """
    M, A, E = p["mantissa_bits"], p["acc_bits"], p["exponent_bits"]
    rounding = p["rounding"]
    xm, wm = np.asarray(xm, np.int64), np.asarray(wm, np.int64)
    we = np.broadcast_to(np.asarray(we, np.int64).reshape(-1), (wm.shape[0],))
    _check_range("mantissa", M, xm, wm, *(() if bm is None else (bm,)))
    _check_range("exponent", E, xe, we, be)
    acc = exact_matmul(xm, wm, M)
    e3 = np.asarray(xe, np.int64).reshape(-1, 1) + we.reshape(1, -1)
    lo, hi = -(1 << (A - 1)), (1 << (A - 1)) - 1
    if bm is not None:
        b_al, _ = shift_round_sat(np.asarray(bm, np.int64).reshape(1, -1), e3 - int(be), A, rounding)
        acc = np.clip(acc + b_al, lo, hi)
    if relu:
        acc = np.maximum(acc, 0)
    stats = bool(use_stats) and p["weight_exponent"] == "tensor"
    ye = select_exponent(acc, e3, M, E, stats, stats_k)
    ym, sat = shift_round_sat(acc, ye[:, None] - e3, M, rounding)
    return ym, ye, int(sat.sum()) % (1 << 32)
