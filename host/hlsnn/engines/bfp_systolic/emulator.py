"""Bit-exact emulator of the ``bfp_systolic`` kernel — the specification of its arithmetic.

The C++ kernel (``hls/engines/bfp_systolic/kernel.cpp.j2``) follows these rules; C-simulation
and the board must agree with :func:`emulate` on every output bit.

Notation: ``M`` = ``mantissa_bits``, ``A`` = ``acc_bits``, ``E`` = ``exponent_bits``,
``[emin, emax] = [-2**(E-1), 2**(E-1)-1]``; rounding is the config's ``rounding``.

0. **An all-zero input row's exponent** (host: ``Kernel.quantize_activations``,
   ``Kernel.gemm_rows``; the network mode's rule 3). A row (a sample, an im2col patch) whose
   mantissas are all 0 has a free exponent: its sums are 0, so only the bias alignment of step
   3 reads it. It is :func:`zero_row_exponent`, ``xz = clamp(be - max(we), emin, emax)``
   (``be = 0`` without a bias), a value of the layer alone (of the GEMM's weights and bias,
   one pack of groups each): an image's outputs do not depend on the images that share its
   call. Its reason: at ``xe = be - max(we)`` every bias alignment shift ``e3 - be = we -
   max(we)`` is ``<= 0``, a left shift, which drops no bit; the bias mantissa ``|bm| <
   2**(M-1)`` moved left by ``max(we) - we`` stays below ``2**(A-1)`` unless the weight rows'
   exponents span more than ``A - M`` (then it saturates, as any bias alignment does), so the
   row's results are ``bm * 2**be`` exactly, and the max rule of step 5 gives them back with
   ``M``-bit mantissas unchanged: an all-zero input gives exactly ``relu(bias)``, the value of
   the float layer on a zero input. (Only where ``be - max(we)`` leaves ``[emin, emax]`` is the
   shift positive and the bias rounded: still the same bits in every batch.)

0w. **An all-zero weight row's exponent** (host: ``Kernel.quantize_weights``, the deploy
   executor's chunks, :mod:`hlsnn.train`'s ``bfp_gemm``; :func:`zero_weight_row_exponents`). With
   ``weight_exponent: row``, a weight row whose mantissas are all 0 (a pruned model's dead
   channel) has a free exponent: its products are 0, so only the bias alignment of step 3 reads
   it. The format's rule (``emin`` for an all-zero block) put its ``e3 = xe + emin`` far below any
   bias exponent: the bias, moved left by ``be - e3``, saturated to ``A`` bits and the output
   was about 0 instead of the bias. The row gets instead the largest exponent of the weight
   tensor's rows that have a non-zero mantissa (all rows zero: unchanged), so its bias is
   aligned exactly as the coarsest live row's: exact where that row's is, rounded to its product
   grid otherwise. The tensor is what one GEMM call streams (the deploy executor's chunk of at
   most ``max_n`` outputs of one pack of groups; the float API's whole weight matrix).

1. **Products** (DSP tiles). ``acc[b, n] = sum_k xm[b, k] * wm[n, k]``, exact. The config
   guarantees ``A >= 2M - 1 + ceil(log2(max_k))``, so no partial sum of one pass overflows
   ``A`` bits. A K beyond ``max_k`` runs in passes whose sums add up in the result store;
   K is at most ``spec.k_limit`` = ``(2**(A-1) - 1) >> (2M - 2)``, for which even ``K``
   products of ``(-2**(M-1))**2`` fit, so every partial sum over passes is exact too and
   the passes, like the order of summation, do not change a bit.
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
   * *rolling* (Alg 1-E, a prediction from earlier samples, checked and corrected by Alg 1-F;
     flags bit 6, which wins over bit 2). The kernel keeps a rolling buffer of the max-rule
     leading-one positions ``L = max over acc != 0 of msb_index(|acc|) + e3`` of the last
     ``R = rolling_len`` samples that had a non-zero result, in call order and across calls
     (static registers); a call with flags bit 7 empties it first. An entry is stored as
     ``u = L + 512`` (non-negative). Each sample in turn:

     - all results zero: ``e4 = emin``; the buffer is unchanged;
     - the buffer empty: the max rule, ``e4 = clamp(L - (M - 2), emin, emax)``;
     - otherwise, with the ``n`` entries held, ``S1 = sum u``, ``S2 = sum u*u``,
       ``sd = isqrt(n*S2 - S1**2)`` and ``P = max(u_last, (S1 + k*sd) // n)`` (``k`` =
       ``stats_k``; SPECS Alg 1-E's default g, the latest block maximum or mean + k·sigma of
       the buffer, taken over leading-one positions), the predicted exponent is
       ``ep = P - 512 - (M - 2)``. The sample's own ``em = L - (M - 2)`` checks it (Alg 1-F):
       *overflow* when ``ep < em`` (its largest result would not fit), *underflow* when
       ``ep > em + U`` (``U = underflow_bits``: more than U unused top bits in every
       mantissa). Either one corrects the exponent to ``em`` (the results are still wide, so
       the correction loses nothing) and empties the buffer (claim 31); otherwise
       ``e4 = ep``. Then ``e4`` is clamped to ``[emin, emax]``;

     and the sample's ``u`` is pushed (the oldest entry dropped when ``R`` are held). The
     rolling state is :class:`RollingState`, which :func:`emulate` updates in place.
   * A row whose results are all zero gets ``e4 = emin``.
6. **Output mantissa shifter**: ``ym = shift_round_sat(acc, e4 - e3, M)``; ``sat_count``
   counts the outputs this saturated (modulo 2**32, as the 32-bit register does).

7. **Statistics unit** (source 002; only with ``stats_out=True``, the ``FLAG_STATS_OUT`` bit):
   ``hist = msb_histogram(acc, acc_bits)`` over the wide accumulators of step 4 (after bias
   and ReLU, in accumulator units, i.e. relative to each output's ``e3``) of all ``batch x N``
   outputs.

Rounding of steps 3 and 6 is :func:`hlsnn.primitives.shift_round_sat`.

:func:`emulate_reference` transcribes these rules literally with the int64 primitives;
:func:`emulate` computes the same bits faster (see its Notes) and is what every target
is compared with.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from . import compiled
from ..common import exact_matmul as _exact_matmul
from ..common import round_into as _round_into
from ..common import workspace as _workspace
from ...primitives import isqrt, msb_histogram, msb_index, shift_round_sat
from . import protocol
from .spec import MAGIC, ROLL_OFFSET, STAT_BITS, passes


class RollingState:
    """The rolling method's buffer (rule 5, *rolling*): the stored ``u = L + 512`` of the last
    ``rolling_len`` samples with a non-zero result, oldest first."""

    def __init__(self, length):
        self.length = int(length)
        self.u = []

    def clear(self):
        self.u = []

    def exponent(self, lop, mantissa_bits, exponent_bits, stats_k, underflow_bits):
        """``e4`` of one sample whose max-rule leading-one position is ``lop`` (None: all its
        results are zero), and the buffer updated: rule 5, *rolling*."""
        emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
        if lop is None:
            return emin
        em = int(lop) - (mantissa_bits - 2)
        e = em
        if self.u:
            n = len(self.u)
            s1 = sum(self.u)
            s2 = sum(v * v for v in self.u)
            sd = math.isqrt(n * s2 - s1 * s1)
            pred = max(self.u[-1], (s1 + int(stats_k) * sd) // n)
            ep = pred - ROLL_OFFSET - (mantissa_bits - 2)
            if ep < em or ep > em + underflow_bits:        # Alg 1-F: overflow or underflow, corrected
                self.u = []
            else:
                e = ep
        self.u = (self.u + [int(lop) + ROLL_OFFSET])[-self.length:]
        return min(max(e, emin), emax)

    def exponents(self, lops, nonzero, p, stats_k):
        """:meth:`exponent` for each sample in order (``lops`` their max-rule leading-one
        positions, ``nonzero`` whether any result is non-zero) under config section ``p``."""
        return np.array([self.exponent(int(v) if nz else None, p["mantissa_bits"], p["exponent_bits"], stats_k,
                                       p["underflow_bits"]) for v, nz in zip(lops, nonzero)], np.int64)


def _check_range(what, bits, *arrays):
    """Operands must fit their fields: the kernel would silently wrap them."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    for a in arrays:
        a = np.asarray(a)
        if a.size and (a.min() < lo or a.max() > hi):
            raise InputError(f"{what} values must fit {bits} signed bits [{lo}, {hi}]; got "
                             f"[{a.min()}, {a.max()}]")


def _to_float_checked(src, dst, bits, chunk=1 << 15):
    """Copy integer mantissas into float ``dst`` and check they fit ``bits`` signed bits,
    chunk by chunk while each chunk is in cache (one pass over the integers)."""
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    s2, d2 = src.reshape(-1), dst.reshape(-1)
    for i in range(0, s2.size, chunk):
        d = d2[i:i + chunk]
        np.copyto(d, s2[i:i + chunk], casting="unsafe")
        if d.size and (d.min() < lo or d.max() > hi):
            _check_range("mantissa", bits, src)   # raises with the full range
    return dst


def exact_matmul(xm: np.ndarray, wm: np.ndarray, mantissa_bits: int) -> np.ndarray:
    """``xm @ wm.T`` exactly, as int64.

    Uses float32 BLAS when every partial sum is at most 2**24, float64 BLAS up to 2**53
    (integers are exact there, so the summation order cannot change the result), and an
    int64 product otherwise.
    """
    k = xm.shape[1]
    bound_bits = 2 * (mantissa_bits - 1) + math.ceil(math.log2(max(k, 1)))   # |partial sum| <= 2**bound_bits
    if bound_bits <= 24:
        return (xm.astype(np.float32) @ wm.astype(np.float32).T).astype(np.int64)
    if bound_bits <= 53:
        return (xm.astype(np.float64) @ wm.astype(np.float64).T).astype(np.int64)
    return xm.astype(np.int64) @ wm.astype(np.int64).T


def zero_row_exponent(we, be, exponent_bits):
    """Rule 0: the exponent of an all-zero input row, ``clamp(be - max(we), emin, emax)``
    (``be`` None: no bias, 0; ``we`` the GEMM's weight exponents, one per row or one)."""
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    b = 0 if be is None else int(np.max(np.asarray(be, np.int64)))
    return min(max(b - int(np.max(np.asarray(we, np.int64))), emin), emax)


def zero_weight_row_exponents(mantissas, exponents):
    """Rule 0w: the weight exponents (one per row, shape (N, 1)) with every all-zero row's set to
    the largest exponent of the rows with a non-zero mantissa (a copy; as given where every row,
    or none, is all zero). ``mantissas``: the rows' mantissas (N, K), or whether each row has a
    non-zero one (N,)."""
    e = np.array(exponents, copy=True)
    if np.size(mantissas) == 0:                     # no row, or rows of no element: nothing is dead
        return e
    m = np.asarray(mantissas).reshape(np.shape(mantissas)[0], -1)
    live = m.any(axis=1)
    if live.all() or not live.any():
        return e
    flat = e.reshape(-1)
    flat[~live] = flat[live].max()
    return flat.reshape(e.shape)


def weight_rows(wq):
    """``wq`` (quantized weights) with :func:`zero_weight_row_exponents` applied where it has one
    exponent per row, or ``wq`` itself where no row changes (one exponent for the tensor: no row
    exponent is free)."""
    from ...formats import bfp
    if wq.axis is None or wq.block_size is not None:
        return wq
    e = zero_weight_row_exponents(wq.mantissas, wq.exponents)
    if np.array_equal(e, np.asarray(wq.exponents)):
        return wq
    return bfp.BFPTensor.from_parts(wq.mantissas, e, wq.mantissa_bits, exponent_bits=wq.exponent_bits,
                                    axis=wq.axis, block_size=wq.block_size)


def max_rule_lop(acc, e3):
    """Rule 5's ``L`` per row: the largest ``msb_index(|acc|) + e3`` over the non-zero
    results (the int64 minimum for an all-zero row)."""
    acc = np.asarray(acc, np.int64)
    e3 = np.broadcast_to(np.asarray(e3, np.int64), acc.shape)
    return np.where(acc != 0, msb_index(np.abs(acc)) + e3, np.iinfo(np.int64).min).max(axis=1)


def select_exponent(acc, e3, mantissa_bits, exponent_bits, use_stats=False, stats_k=3):
    """Output exponent per row of ``acc`` (step 5 of the module rules).

    ``e3`` broadcasts against ``acc``; with ``use_stats`` it must be constant along each row.
    """
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    acc = np.asarray(acc, np.int64)
    e3 = np.broadcast_to(np.asarray(e3, np.int64), acc.shape)
    anyn = (acc != 0).any(axis=1)
    if use_stats:
        mag = np.abs(acc)
        n = acc.shape[1]
        p = msb_index(mag).max(axis=1)
        sh = np.maximum(p - (STAT_BITS - 1), 0)
        t = np.right_shift(mag, sh[:, None])
        s1 = t.sum(axis=1)
        s2 = (t * t).sum(axis=1)
        sd = isqrt(n * s2 - s1 * s1)
        h = s1 + int(stats_k) * sd
        q = np.maximum(h // n, 1)
        lop = msb_index(q) + sh + e3[:, 0]
    else:
        lop = max_rule_lop(acc, e3)
    e4 = np.clip(lop - (mantissa_bits - 2), emin, emax)
    return np.where(anyn, e4, emin)


def emulate_reference(p, xm, xe, wm, we, bm=None, be=0, *, relu=False, use_stats=False, stats_k=3,
                      stats_out=False, rolling=None):
    """The module's rules transcribed literally with the integer primitives (int64).

    Slower than :func:`emulate`, which must equal it bit for bit (the tests check this on
    every config and case); the same parameters and returns.
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
    if rolling is not None:       # rule 5, rolling: sample after sample
        ye = rolling.exponents(max_rule_lop(acc, e3), (acc != 0).any(axis=1), p, stats_k)
    else:
        stats = bool(use_stats) and p["weight_exponent"] == "tensor"
        ye = select_exponent(acc, e3, M, E, stats, stats_k)
    ym, sat = shift_round_sat(acc, ye[:, None] - e3, M, rounding)
    if stats_out:
        return ym, ye, int(sat.sum()) % (1 << 32), msb_histogram(acc, A)
    return ym, ye, int(sat.sum()) % (1 << 32)


def emulate(p, xm, xe, wm, we, bm=None, be=0, *, relu=False, use_stats=False, stats_k=3,
            stats_out=False, rolling=None, block_elems=1 << 15):
    """Run the kernel's arithmetic on BFP operands (the module's rules, bit for bit).

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
    rolling : RollingState or None
        The rolling method's buffer (rule 5, *rolling*; it wins over ``use_stats``), updated
        in place sample by sample; None: another method.
    stats_out : bool
        Also return the statistics unit's histogram (rule 7; ``FLAG_STATS_OUT``).

    Returns
    -------
    ym : (batch, N) int64
        Output mantissas.
    ye : (batch,) int64
        Output exponents.
    sat_count : int
        Number of saturated output mantissas, modulo 2**32.
    hist : (acc_bits,) int64
        Only with ``stats_out``: ``msb_histogram`` of the wide accumulators (rule 7).

    Notes
    -----
    Computed in float64, which is exact here: the schema bounds ``acc_bits <= 48`` and
    ``exponent_bits <= 8``, so every intermediate is an integer below 2**49 times a power of
    two within 2**±400, which float64 holds exactly; multiplying by a power of two is exact,
    ``rint``/``floor``/``sign*(floor|v| + (frac >= 1/2))`` are exactly the three roundings of
    :func:`~hlsnn.primitives.shift_round_sat`, and saturation is a comparison of the exact
    rounded value. The max rule uses ``max_n (msb|acc| + e3) = floor(log2(max_n |acc| 2**we)) +
    xe`` (one ``frexp`` per row). The GEMM runs in float32 when every partial sum is below
    2**24 and in float64 otherwise (below 2**53 by the schema), so BLAS's summation order
    cannot change a bit. Rows are processed in blocks of about ``block_elems`` outputs in
    reused buffers. Configs outside these bounds fall back to :func:`emulate_reference`.
    """
    M, E = p["mantissa_bits"], p["exponent_bits"]
    xm, wm = np.asarray(xm), np.asarray(wm)
    N = wm.shape[0]
    xe = np.asarray(xe, np.int64).reshape(-1)
    we = np.broadcast_to(np.asarray(we, np.int64).reshape(-1), (N,))
    ft = gemm_dtype(p, xm.shape[1])
    if ft is None:
        return emulate_reference(p, xm, xe, wm, we, bm, be, relu=relu, use_stats=use_stats, stats_k=stats_k,
                                 stats_out=stats_out, rolling=rolling)
    if bm is not None:
        _check_range("mantissa", M, bm)
    _check_range("exponent", E, xe, we, be)
    xf = _to_float_checked(xm, _workspace("x", xm.shape, ft), M)  # exact: |mantissa| <= 2**15
    wf = _to_float_checked(wm, _workspace("w", wm.shape, ft), M)
    return emulate_floats(p, xf, xe, wf, we, bm, be, relu=relu, use_stats=use_stats, stats_k=stats_k,
                          stats_out=stats_out, rolling=rolling, block_elems=block_elems)


def gemm_dtype(p, k):
    """The float type :func:`emulate` runs a GEMM of reduction length ``k`` in: float32 when
    every partial sum is below 2**24, float64 below 2**53; None when the config or ``k`` is
    beyond the bounds of :func:`emulate`'s Notes (then :func:`emulate_reference` runs)."""
    M = p["mantissa_bits"]
    mag_bits = 2 * (M - 1) + math.ceil(math.log2(max(k, 1)))      # every |partial sum| <= 2**mag_bits
    if p["acc_bits"] > 48 or p["exponent_bits"] > 8 or mag_bits > 53:
        return None
    return np.float32 if mag_bits <= 24 else np.float64


#: 1.5 * 2**52: adding ``C * q`` and subtracting it again rounds to a multiple of ``q`` (a
#: power of two), ties to even, for every ``|v| < 2**51 * q`` (the sum's ulp is ``q``).
_ROUND_MAGIC = 1.5 * 2.0 ** 52


def values_fit_float32(p, xe, we, k):
    """Whether :func:`emulate_values` may take float32 operands of reduction length ``k``:
    every operand value ``mantissa * 2**e`` and every partial sum of the GEMM (a multiple of
    ``2**(xe + we)`` below ``2**(mag_bits + xe + we)``, ``mag_bits <= 24``) is zero or a
    normal float32, hence exact."""
    M = p["mantissa_bits"]
    mag_bits = 2 * (M - 1) + math.ceil(math.log2(max(k, 1)))
    xlo, xhi, wlo, whi = int(xe.min()), int(xe.max()), int(we.min()), int(we.max())
    return (mag_bits <= 24 and min(xlo, wlo, xlo + wlo) >= -126 and max(xhi, whi) + M <= 127
            and xhi + whi + mag_bits <= 127)


def emulate_values(p, xv, wv, *, relu=False, stats_k=3, rolling=None, block_elems=1 << 15):
    """:func:`emulate` without bias, statistics or the stats rule, on the dequantized operands,
    returning the dequantized result: ``xv = xm * 2**xe`` (batch, K) and ``wv = wm * 2**we``
    (N, K), of type ``gemm_dtype(p, K)``, float32 only where :func:`values_fit_float32`
    (the exponents of all-zero rows do not matter: every result of such a row is 0).

    Returns ``(y, ye, sat_count)``: ``y = ym * 2**ye`` float64 (as :func:`emulate_floats`
    with ``dequantize=True``), the int64 exponents and the saturation count.

    Notes
    -----
    The GEMM then yields the values ``acc * 2**e3`` themselves, exactly (powers of two scale
    exact sums). The max rule's ``L`` is ``floor(log2(max |value|))`` of the row (one
    ``frexp``), and a row whose rounded extremes fit the mantissa range (rounding is
    monotone) is rounded to multiples of ``2**e4`` in two passes: ``(v + C 2**e4) - C 2**e4``
    with ``C = 1.5 * 2**52`` is ``rint(v / 2**e4) * 2**e4`` exactly (round to nearest even;
    +0.0 for a zero), which is ``ym * 2**ye``. Other rows, and the other roundings, go the
    way of :func:`emulate_floats`."""
    M, E = p["mantissa_bits"], p["exponent_bits"]
    rounding = p["rounding"]
    B, N = xv.shape[0], wv.shape[0]
    emin, emax = -(1 << (E - 1)), (1 << (E - 1)) - 1
    lo, hi = -(1 << (M - 1)), (1 << (M - 1)) - 1
    acc = np.matmul(xv, wv.T, out=_workspace("acc", (B, N), xv.dtype))   # the values, exact
    y = np.empty((B, N), np.float64)
    ye = np.empty(B, np.int64)
    sat = 0
    rows = max(1, block_elems // max(N, 1))
    for r0 in range(0, B, rows):
        r1 = min(B, r0 + rows)
        a, yb = acc[r0:r1], y[r0:r1]
        if relu:                    # step 4, on the values (a positive scale of acc)
            np.maximum(a, 0, out=a)
        rmax, rmin = a.max(axis=1).astype(np.float64), a.min(axis=1).astype(np.float64)
        amax = np.maximum(rmax, -rmin)
        lop = np.frexp(amax)[1].astype(np.int64) - 1                  # step 5: msb|acc| + e3, max over the row
        if rolling is not None:
            e4 = rolling.exponents(lop, amax > 0, p, stats_k)
        else:
            e4 = np.where(amax > 0, np.clip(lop - (M - 2), emin, emax), emin)
        ye[r0:r1] = e4
        q = np.ldexp(1.0, e4)                                         # 2**e4 per row
        ext = np.concatenate([rmax / q, rmin / q])
        _round_into(ext, rounding, ext)
        if rounding == "nearest_even" and not ((ext > hi).any() or (ext < lo).any()):
            c = (_ROUND_MAGIC * q)[:, None]                          # step 6, no saturation possible
            np.add(a, c, out=yb)
            yb -= c
            continue
        np.multiply(a, (1.0 / q)[:, None], out=yb)                   # acc * 2**(e3 - e4), exact
        _round_into(yb, rounding, yb)
        sat += int(np.count_nonzero(yb > hi)) + int(np.count_nonzero(yb < lo))
        np.clip(yb, lo, hi, out=yb)
        yb *= q[:, None]
        yb += 0.0                                                     # -0.0 -> +0.0, as from the integers
    return y, ye, sat % (1 << 32)


def emulate_floats(p, xf, xe, wf, we, bm=None, be=0, *, relu=False, use_stats=False, stats_k=3,
                   stats_out=False, rolling=None, dequantize=False, block_elems=1 << 15, acc=None):
    """:func:`emulate` on mantissas that are already floats: the caller guarantees that
    ``xf`` (batch, K) and ``wf`` (N, K) hold integers in the ``mantissa_bits`` range, of
    type ``gemm_dtype(p, K)`` (not None), and that ``xe`` (batch,) and ``we`` (N,) are int64
    exponents in range (the kernel's float GEMM quantizes straight into such arrays).

    ``dequantize=True`` returns, instead of the int64 mantissas ``ym``, the float64 values
    ``ym * 2**ye`` (``BFPTensor.dequantize`` of the result: exact, and +0.0 for a zero
    mantissa); the other returns are :func:`emulate`'s.

    ``acc``: step 1's exact sums ``xf @ wf.T`` (batch, N), of ``gemm_dtype(p, K)``, when the
    caller formed them (``Kernel.gemm_rows`` does, block by block as it quantizes); ``xf`` is
    then not read (None is accepted)."""
    M, A, E = p["mantissa_bits"], p["acc_bits"], p["exponent_bits"]
    rounding = p["rounding"]
    B, N = (xf.shape[0] if acc is None else acc.shape[0]), wf.shape[0]
    emin, emax = -(1 << (E - 1)), (1 << (E - 1)) - 1
    lo_a, hi_a = -(1 << (A - 1)), (1 << (A - 1)) - 1
    lo, hi = -(1 << (M - 1)), (1 << (M - 1)) - 1
    if acc is None:
        acc = _exact_matmul(xf, wf.T, _workspace("acc", (B, N), xf.dtype))   # step 1 (exact sums)
    colscale = np.ldexp(1.0, we)                                   # 2**we[n]
    stats = bool(use_stats) and p["weight_exponent"] == "tensor" and rolling is None
    bcol = None
    if bm is not None:
        bcol = np.asarray(bm, np.float64).reshape(-1) * np.ldexp(1.0, int(be) - we)
    if dequantize and not stats and rolling is None and not stats_out:
        done = compiled.epilogue(p, acc, xe, we, bcol, relu)      # its C twin (compiled.py)
        if done is not None:
            return done[0], done[1], done[2] % (1 << 32)
    ym = np.empty((B, N), np.float64 if dequantize else np.int64)
    ye = np.empty(B, np.int64)
    sat = 0
    hist = np.zeros(A, np.int64) if stats_out else None
    unscale = np.ldexp(1.0, -we) if stats_out else None           # a * 2**-we = acc, exact
    rows = max(1, block_elems // max(N, 1))
    buf, tmp = np.empty((min(rows, B), N)), np.empty((min(rows, B), N))
    for r0 in range(0, B, rows):
        r1 = min(B, r0 + rows)
        a, t = buf[:r1 - r0], tmp[:r1 - r0]
        xeb = xe[r0:r1]
        if bm is not None:          # step 3: b' = round(bm * 2**(be - e3)), saturated to A bits
            np.multiply(bcol, np.ldexp(1.0, -xeb)[:, None], out=t)
            _round_into(t, rounding, t)
            np.clip(t, lo_a, hi_a, out=t)
            np.add(acc[r0:r1], t, out=a)
            np.clip(a, lo_a, hi_a, out=a)
            a *= colscale
        else:
            np.multiply(acc[r0:r1], colscale, out=a)
        # a = acc * 2**we = value * 2**-xe; ReLU (step 4) commutes with the positive scale
        if relu:
            np.maximum(a, 0, out=a)
        if stats_out:               # rule 7 on the integer accumulators
            hist += msb_histogram((a * unscale).astype(np.int64), A)
        if stats:                   # step 5, mean + k*sigma (one weight exponent for the tensor)
            w0 = int(we[0]) if N else 0
            np.abs(a, out=t)
            amax = t.max(axis=1)
            p_msb = msb_index(np.ldexp(amax, -w0).astype(np.int64))
            sh = np.maximum(p_msb - (STAT_BITS - 1), 0)
            np.multiply(t, np.ldexp(1.0, -w0 - sh)[:, None], out=t)
            np.floor(t, out=t)                                     # t = |acc| >> sh
            s1 = t.sum(axis=1).astype(np.int64)                    # < 2**29: exact
            np.square(t, out=t)
            s2 = t.sum(axis=1).astype(np.int64)                    # < 2**45: exact
            sd = isqrt(N * s2 - s1 * s1)
            q = np.maximum((s1 + int(stats_k) * sd) // N, 1)
            lop = msb_index(q) + sh + xeb + w0
        else:                       # step 5, max rule
            rmax, rmin = a.max(axis=1), a.min(axis=1)
            amax = np.maximum(rmax, -rmin)
            lop = np.frexp(amax)[1].astype(np.int64) - 1 + xeb
        if rolling is not None:     # step 5, rolling: sample after sample, on the max rule's lop
            e4 = rolling.exponents(lop, amax > 0, p, stats_k)
        else:
            e4 = np.where(amax > 0, np.clip(lop - (M - 2), emin, emax), emin)
        ye[r0:r1] = e4
        scale = np.ldexp(1.0, xeb - e4)
        a *= scale[:, None]                                        # acc * 2**(e3 - e4)
        yb = ym[r0:r1]
        # Rounding is monotone, so a block whose rounded row extremes fit cannot saturate;
        # only then is |a| known to be small enough to round straight into the integers.
        may_saturate = True
        if not stats:
            ext = np.concatenate([rmax * scale, rmin * scale])
            _round_into(ext, rounding, ext)
            may_saturate = bool((ext > hi).any() or (ext < lo).any())
        if may_saturate or rounding == "nearest_away" or dequantize:    # step 6
            _round_into(a, rounding, a)
            if may_saturate:
                sat += int(np.count_nonzero(a > hi)) + int(np.count_nonzero(a < lo))
                np.clip(a, lo, hi, out=a)
            if dequantize:          # ym * 2**e4, exact (|ym| < 2**15, |e4| <= 128); -0.0 -> +0.0
                np.multiply(a, np.ldexp(1.0, e4)[:, None], out=yb)
                yb += 0.0
            else:
                yb[...] = a
        else:
            (np.rint if rounding == "nearest_even" else np.floor)(a, out=yb, casting="unsafe")
    if stats_out:
        return ym, ye, sat % (1 << 32), np.minimum(hist, (1 << 32) - 1)
    return ym, ye, sat % (1 << 32)


def emulate_stream(cfg, beats, regs_in, state=None):
    """The emulator behind the stream interface: decode beats, emulate, encode beats.

    ``state`` (a dict the target keeps between calls) holds the kernel's weight store as
    the kernel writes it: ``wstore`` (``w_depth`` steps of ``2*rows`` mantissas, zero at
    first, as the static array), written pass after pass (``spec.passes``): tile ``t`` of
    a pass of ``Kq`` at step ``base + t*ceil(Kq/2)`` under the keep flag, ``base`` being the
    steps of the passes before, and at ``(t mod slots)*ceil(Kq/2)`` otherwise (the ring of
    ``slots = w_depth // ceil(Kq/2)`` tiles); and ``wexp`` (one per output row, written by
    every per-row call); a resident call reads both. ``bias``: the bias mantissas and exponent
    of the last call that streamed a bias, which a call with ``FLAG_BIAS_KEPT`` uses.
    ``rolling``: the rolling method's :class:`RollingState`, emptied by the rolling-clear flag."""
    p = cfg.params
    state = {} if state is None else state
    R = p["rows"]
    batch, n, k, flags, k_sigma = (int(r) for r in regs_in)
    resident = bool(flags & protocol.FLAG_RESIDENT)
    has_bias = bool(flags & protocol.FLAG_BIAS)
    bias_kept = has_bias and bool(flags & protocol.FLAG_BIAS_KEPT)
    xm, xe, wm, we, bm, be = protocol.unpack_input(p, beats, batch, n, k, has_bias, resident=resident,
                                                   bias_kept=bias_kept)
    if "wstore" not in state:
        state["wstore"] = np.zeros((p["w_depth"], 2 * R), np.int64)
        state["wexp"] = np.zeros(p["max_n"], np.int64)
        state["rolling"] = RollingState(p["rolling_len"])
        state["bias"] = (np.zeros(p["max_n"], np.int64), 0)
    if bias_kept:
        bm, be = state["bias"][0][:n].copy(), state["bias"][1]
    elif has_bias:
        state["bias"][0][:n] = bm
        state["bias"] = (state["bias"][0], int(be))
    if flags & protocol.FLAG_ROLL_CLEAR:
        state["rolling"].clear()
    store, nt = state["wstore"], -(-n // R)
    if resident:
        wm = np.zeros((n, k), np.int64)
    base = 0
    for k0, kq in passes(p, k):
        kp = (kq + 1) // 2
        if resident:
            wm[:, k0:k0 + kq] = protocol.steps_to_rows(store[base:base + nt * kp].reshape(nt, kp, 2 * R), R)[:n, :kq]
        else:
            padded = np.zeros((nt * R, 2 * kp), np.int64)
            padded[:n, :kq] = wm[:, k0:k0 + kq]
            tiles = protocol.rows_to_steps(padded, R)
            slots = p["w_depth"] // kp          # the kernel's ring of tiles
            for t in range(nt):
                at = base + t * kp if flags & protocol.FLAG_KEEP else (t % slots) * kp
                store[at:at + kp] = tiles[t]
        base += nt * kp
    if resident and we is None:
        we = state["wexp"][:n].copy()
    if not resident and p["weight_exponent"] == "row":
        state["wexp"][:n] = we
    stats_out = bool(flags & protocol.FLAG_STATS_OUT)
    ym, ye, sat, *hist = emulate(p, xm, xe, wm, we, bm, be, relu=bool(flags & protocol.FLAG_RELU),
                                 use_stats=bool(flags & protocol.FLAG_STATS), stats_k=k_sigma & 15,
                                 stats_out=stats_out,
                                 rolling=state["rolling"] if flags & protocol.FLAG_ROLLING else None)
    out = protocol.pack_output(p, ym, ye)
    if stats_out:
        out = np.concatenate([out, protocol.pack_stats(p, hist[0])])
    return out, np.array([MAGIC, cfg.hash32, sat], dtype=np.uint32)
