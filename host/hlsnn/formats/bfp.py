"""Block floating point (BFP): integer mantissas sharing one exponent per block.

This module is the reference for the BFP format; the rules below are the specification
that the emulator, the generated C++ and the tests all follow.

Blocks
    Elements are grouped into blocks of ``block_size`` consecutive elements along ``axis``.
    ``block_size=None`` makes the whole axis one block; ``axis=None`` makes the whole tensor
    one block (``block_size`` must then be None). When ``block_size`` does not divide the
    axis length, the last block along the axis is shorter (it is padded with zeros, which
    cannot change its maximum).

Shared exponent
    For a block with ``amax = max |x|`` over the block and ``m = mantissa_bits``::

        e = floor(log2(amax)) - (m - 2)

    clamped to the signed ``exponent_bits`` range
    ``[-2**(exponent_bits-1), 2**(exponent_bits-1) - 1]``. An all-zero block gets the
    smallest exponent ``-2**(exponent_bits-1)``. ``floor(log2(amax))`` is computed exactly
    with :func:`numpy.frexp` (``amax = f * 2**E`` with ``f`` in ``[0.5, 1)`` gives
    ``floor(log2(amax)) = E - 1``), never with ``np.log2``, which can be off by one next to
    powers of two. With an unclamped exponent the block maximum scales into
    ``[2**(m-2), 2**(m-1))``: its leading one sits at bit ``m - 2``, one bit below the sign.

Mantissas
    ``mantissa = saturate(round(x * 2**-e))`` where ``x * 2**-e`` is computed exactly with
    :func:`numpy.ldexp` and ``saturate`` clips to the two's-complement range
    ``[-2**(m-1), 2**(m-1) - 1]``. Out-of-range values saturate, they never wrap.

Rounding modes (:data:`ROUNDING_MODES`)
    ``"nearest_even"``
        to nearest, ties to even (:func:`numpy.rint`).
    ``"nearest_away"``
        to nearest, ties away from zero. Computed as ``frac = |v| - floor(|v|)`` (exact)
        and rounding the magnitude up when ``frac >= 0.5``; the tempting
        ``floor(|v| + 0.5)`` is wrong for ``v = 0.49999999999999994``.
    ``"truncate"``
        toward minus infinity (:func:`numpy.floor`), so ``0 <= x - dequantized < 2**e``
        for every element whose mantissa did not saturate.
    ``"stochastic"``
        ``floor(v + u)`` with ``u ~ U[0, 1)`` drawn independently per element from
        ``np.random.default_rng(seed)``: rounds up with probability ``frac(v)``, so it is
        unbiased, and the same ``seed`` gives the same result.

Dequantization
    ``x_hat = mantissa * 2**e`` computed with :func:`numpy.ldexp` (exact in float64).

Inputs
    ``x`` is converted with ``np.asarray(x, dtype=np.float64)`` and must have ``ndim >= 1``
    and only finite values. ``mantissa_bits`` is an int in ``[2, 32]``, ``exponent_bits`` an
    int in ``[2, 16]``, ``block_size`` None or an int ``>= 1``, ``axis`` None or an int in
    ``[-ndim, ndim)``. Anything else raises :class:`hlsnn.errors.InputError` (a
    :class:`ValueError`) with a one-line message naming the parameter, the value and what
    is allowed.

The implementation is vectorized: the blocked axis is moved last, zero-padded and reshaped
to ``(..., nblocks, block_size)``, reduced, and the exponents are broadcast back.

Examples
--------
>>> from hlsnn.formats import bfp
>>> q = bfp.quantize([255.0], 16)
>>> q.mantissas, q.exponents
(array([32640]), array([-7], dtype=int32))
>>> hex(int(q.mantissas[0]))
'0x7f80'
>>> q.dequantize()
array([255.])

Two blocks of four along the last axis:

>>> q = bfp.quantize([[1.0, 0.3, -0.2, 0.0, 100.0, 3.0, 0.01, -7.5]], 8, block_size=4)
>>> q.exponents
array([[-6,  0]], dtype=int32)
>>> q.mantissas
array([[ 64,  19, -13,   0, 100,   3,   0,  -8]])
>>> q.dequantize()
array([[  1.      ,   0.296875,  -0.203125,   0.      , 100.      ,
          3.      ,   0.      ,  -8.      ]])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from hlsnn.errors import InputError

__all__ = ["ROUNDING_MODES", "MANTISSA_BITS_RANGE", "EXPONENT_BITS_RANGE", "BFPTensor",
           "quantize", "shared_exponent", "mantissa_range", "exponent_range"]

#: The accepted values of the ``rounding`` argument of :func:`quantize`.
ROUNDING_MODES = ("nearest_even", "nearest_away", "truncate", "stochastic")

#: Inclusive range of ``mantissa_bits`` (sign bit included).
MANTISSA_BITS_RANGE = (2, 32)

#: Inclusive range of ``exponent_bits``.
EXPONENT_BITS_RANGE = (2, 16)


# --------------------------------------------------------------------------- validation

from ._validate import as_float_input  # noqa: E402

from ._validate import as_int_array as _as_int_array  # noqa: E402
from ._validate import check_axis as _check_axis  # noqa: E402
from ._validate import check_int_range as _check_int_range  # noqa: E402


def _as_float_input(x) -> np.ndarray:
    return as_float_input(x, "x")


def _check_mantissa_bits(value) -> int:
    return _check_int_range("mantissa_bits", value, *MANTISSA_BITS_RANGE)


def _check_exponent_bits(value) -> int:
    return _check_int_range("exponent_bits", value, *EXPONENT_BITS_RANGE)


def _check_block_size(value) -> Optional[int]:
    if value is None:
        return None
    return _check_int_range("block_size", value, 1, None)


def _check_layout(axis, block_size, ndim: int) -> Tuple[Optional[int], Optional[int]]:
    axis = _check_axis(axis, ndim)
    block_size = _check_block_size(block_size)
    if axis is None and block_size is not None:
        raise InputError(f"block_size = {block_size!r} with axis = None: axis=None makes the "
                         f"whole tensor one block, so block_size must be None")
    return axis, block_size


def mantissa_range(mantissa_bits: int) -> Tuple[int, int]:
    """Inclusive two's-complement range ``(-2**(m-1), 2**(m-1) - 1)`` of an m-bit mantissa."""
    m = _check_mantissa_bits(mantissa_bits)
    return -(1 << (m - 1)), (1 << (m - 1)) - 1


def exponent_range(exponent_bits: int) -> Tuple[int, int]:
    """Inclusive signed range ``(-2**(b-1), 2**(b-1) - 1)`` of a b-bit shared exponent."""
    b = _check_exponent_bits(exponent_bits)
    return -(1 << (b - 1)), (1 << (b - 1)) - 1


# --------------------------------------------------------------------------- block layout

def _nblocks(n: int, block_size: Optional[int]) -> int:
    return 1 if block_size is None else -(-n // block_size)


def _exponents_shape(shape: Tuple[int, ...], axis: Optional[int],
                     block_size: Optional[int]) -> Tuple[int, ...]:
    if axis is None:
        return (1,) * len(shape)
    out = list(shape)
    out[axis] = _nblocks(shape[axis], block_size)
    return tuple(out)


def _block_amax(a: np.ndarray, axis: Optional[int], block_size: Optional[int]) -> np.ndarray:
    """max |a| per block, in the exponents shape (zero for empty or all-zero blocks)."""
    mag = np.abs(a)
    if axis is None:
        return np.max(mag, initial=0.0).reshape((1,) * a.ndim)
    mag = np.moveaxis(mag, axis, -1)
    n = mag.shape[-1]
    bs = max(n, 1) if block_size is None else block_size
    nb = _nblocks(n, block_size)
    pad = nb * bs - n
    if pad:
        mag = np.pad(mag, [(0, 0)] * (mag.ndim - 1) + [(0, pad)])
    amax = mag.reshape(mag.shape[:-1] + (nb, bs)).max(axis=-1, initial=0.0)
    return np.moveaxis(amax, -1, axis)


def _expand(exponents: np.ndarray, shape: Tuple[int, ...], axis: Optional[int],
            block_size: Optional[int]) -> np.ndarray:
    """Per-block exponents -> per-element exponents of ``shape`` (a new int32 array)."""
    if axis is None or block_size is None:
        return np.array(np.broadcast_to(exponents, shape), dtype=np.int32)
    rep = np.repeat(exponents, block_size, axis=axis)
    crop = (slice(None),) * axis + (slice(0, shape[axis]),)
    return np.ascontiguousarray(rep[crop], dtype=np.int32)


# --------------------------------------------------------------------------- rounding

def _round(v: np.ndarray, x: np.ndarray, rounding: str, seed) -> np.ndarray:
    """Round the scaled values ``v = x * 2**-e`` to integers (float64) per ``rounding``."""
    if rounding == "nearest_even":
        return np.rint(v)
    if rounding == "nearest_away":
        mag = np.abs(v)
        fl = np.floor(mag)
        up = (mag - fl) >= 0.5              # exact: no floor(|v| + 0.5) double rounding
        return np.copysign(fl + up, v)
    if rounding == "truncate":
        r = np.floor(v)
        # A negative x so small that x * 2**-e underflowed to -0.0 is still in (-1, 0).
        return np.where((v == 0) & (x < 0), -1.0, r)
    # stochastic
    try:
        rng = np.random.default_rng(seed)
    except (TypeError, ValueError) as exc:
        raise InputError(f"seed = {seed!r}: must be None, an int >= 0 or a numpy "
                         f"Generator/SeedSequence ({exc})") from None
    u = rng.random(size=v.shape)
    r = np.floor(v + u)
    return np.where((v == 0) & (x < 0) & (u == 0), -1.0, r)


def _encode(x: np.ndarray, elem_exp: np.ndarray, mantissa_bits: int, rounding: str,
            seed) -> np.ndarray:
    """Mantissas of ``x`` for the exponents ``elem_exp`` (per element, or any shape that
    broadcasts to ``x``: the keepdims block exponents of a whole-axis block)."""
    lo, hi = mantissa_range(mantissa_bits)
    with np.errstate(over="ignore", under="ignore"):
        v = np.ldexp(x, np.negative(elem_exp, dtype=np.int32))
    # Clipping to one step outside the range first keeps every mode monotone and finite;
    # the final clip saturates. In place: v is a new array. rint needs no first clip: it
    # maps a value beyond the range (or an overflow's inf) to one the final clip saturates.
    if rounding == "nearest_even":
        r = np.rint(v, out=v)
    else:
        np.clip(v, lo - 1, hi + 1, out=v)
        r = _round(v, x, rounding, seed)
    np.clip(r, lo, hi, out=r)
    return r.astype(np.int64)


# --------------------------------------------------------------------------- public API

def shared_exponent(amax, mantissa_bits: int, exponent_bits: int = 8) -> np.ndarray:
    """Shared exponents of blocks with the given maxima.

    Parameters
    ----------
    amax : array_like of float
        Non-negative finite block maxima ``max |x|``, any shape (0-d allowed).
    mantissa_bits : int
        Mantissa width ``m`` including the sign bit, in ``[2, 32]``.
    exponent_bits : int, default 8
        Exponent width, in ``[2, 16]``.

    Returns
    -------
    numpy.ndarray of int32
        Same shape as ``amax``: ``floor(log2(amax)) - (m - 2)`` clamped to
        ``[-2**(exponent_bits-1), 2**(exponent_bits-1) - 1]``, and the smallest exponent
        ``-2**(exponent_bits-1)`` where ``amax == 0``.

    Raises
    ------
    InputError
        Bad widths, or negative / non-finite ``amax``.

    Examples
    --------
    >>> shared_exponent([255.0, 256.0, 1.0, 0.3, 0.0], 16)
    array([  -7,   -6,  -14,  -16, -128], dtype=int32)
    """
    m = _check_mantissa_bits(mantissa_bits)
    emin, emax = exponent_range(exponent_bits)
    try:
        a = np.asarray(amax, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"amax: cannot convert to a float64 array ({exc})") from None
    bad = ~np.isfinite(a) | (a < 0)
    if np.any(bad):
        raise InputError(f"amax: has {int(np.count_nonzero(bad))} negative or non-finite "
                         f"value(s), e.g. {a[bad].flat[0]!r}: must be finite and >= 0")
    _, e2 = np.frexp(a)                      # a = f * 2**e2, f in [0.5, 1)
    e = e2.astype(np.int64) - 1 - (m - 2)    # floor(log2(a)) - (m - 2), exactly
    e = np.where(a == 0, emin, np.clip(e, emin, emax))
    return np.asarray(e, dtype=np.int32)


@dataclass(frozen=True, eq=False)
class BFPTensor:
    """A tensor in block floating point: ``x_hat = mantissas * 2**element_exponents()``.

    Build one with :func:`quantize` or :meth:`from_parts`; both validate every field.
    The arrays are stored read-only.

    Attributes
    ----------
    mantissas : numpy.ndarray of int64
        Same shape as the quantized tensor, each in ``[-2**(m-1), 2**(m-1) - 1]``.
    exponents : numpy.ndarray of int32
        One shared exponent per block, with the SAME ``ndim`` as ``mantissas`` (keepdims
        style, so it broadcasts): along ``axis`` its length is
        ``ceil(n / block_size)`` (1 when ``block_size`` is None), every other axis is as in
        ``mantissas``; with ``axis=None`` every axis has length 1. Each in
        ``[-2**(exponent_bits-1), 2**(exponent_bits-1) - 1]``.
    mantissa_bits : int
        Mantissa width ``m`` including the sign bit, in ``[2, 32]``.
    exponent_bits : int
        Exponent width, in ``[2, 16]``.
    axis : int or None
        The blocked axis, normalized to be non-negative; None: the whole tensor is one block.
    block_size : int or None
        Elements per block along ``axis`` (the last block may be shorter); None: the whole
        axis is one block.
    """

    mantissas: np.ndarray
    exponents: np.ndarray
    mantissa_bits: int
    exponent_bits: int = 8
    axis: Optional[int] = -1
    block_size: Optional[int] = None

    def __post_init__(self):
        m = _check_mantissa_bits(self.mantissa_bits)
        b = _check_exponent_bits(self.exponent_bits)
        lo, hi = mantissa_range(m)
        emin, emax = exponent_range(b)
        mant = _as_int_array("mantissas", self.mantissas, lo, hi, np.int64)
        if mant.ndim == 0:
            raise InputError("mantissas: is 0-d: must have ndim >= 1")
        axis, block_size = _check_layout(self.axis, self.block_size, mant.ndim)
        exps = _as_int_array("exponents", self.exponents, emin, emax, np.int32)
        want = _exponents_shape(mant.shape, axis, block_size)
        if exps.shape != want:
            raise InputError(
                f"exponents: has shape {exps.shape}: must be {want} for mantissas of shape "
                f"{mant.shape} with axis={axis}, block_size={block_size}")
        mant.setflags(write=False)
        exps.setflags(write=False)
        for name, value in (("mantissas", mant), ("exponents", exps), ("mantissa_bits", m),
                            ("exponent_bits", b), ("axis", axis), ("block_size", block_size)):
            object.__setattr__(self, name, value)

    @classmethod
    def from_parts(cls, mantissas, exponents, mantissa_bits: int, *, exponent_bits: int = 8,
                   axis: Optional[int] = -1, block_size: Optional[int] = None) -> "BFPTensor":
        """Build a tensor from integer mantissas and per-block exponents, validating both.

        Parameters
        ----------
        mantissas : array_like of int
            ``ndim >= 1``, each in ``[-2**(m-1), 2**(m-1) - 1]``.
        exponents : array_like of int
            Exactly the exponents shape described in :class:`BFPTensor`, each in the signed
            ``exponent_bits`` range.
        mantissa_bits, exponent_bits, axis, block_size
            As in :func:`quantize`.

        Raises
        ------
        InputError
            A value out of range, non-integer values, or an inconsistent exponents shape.

        Examples
        --------
        >>> t = BFPTensor.from_parts([0x4000, 0x20, 0], [3], 16)
        >>> t.dequantize()
        array([131072.,    256.,      0.])
        """
        return cls(mantissas, exponents, mantissa_bits, exponent_bits, axis, block_size)

    @classmethod
    def _trusted(cls, mantissas: np.ndarray, exponents: np.ndarray, mantissa_bits: int, exponent_bits: int,
                 axis: Optional[int], block_size: Optional[int]) -> "BFPTensor":
        """Internal: wrap arrays hlsnn has just produced, without :meth:`from_parts`' checks and copies.

        The caller guarantees every invariant :meth:`from_parts` would check: ``mantissas``
        an int64 array in range, ``exponents`` an int32 array of the right shape and range,
        ``axis`` non-negative, and that nothing else holds a writable reference to either
        array. Both arrays are taken over (made read-only), not copied. Public callers use
        :meth:`from_parts`.
        """
        t = object.__new__(cls)
        mantissas.setflags(write=False)
        exponents.setflags(write=False)
        for name, value in (("mantissas", mantissas), ("exponents", exponents), ("mantissa_bits", mantissa_bits),
                            ("exponent_bits", exponent_bits), ("axis", axis), ("block_size", block_size)):
            object.__setattr__(t, name, value)
        return t

    @property
    def shape(self) -> Tuple[int, ...]:
        """Shape of the tensor (of ``mantissas``)."""
        return self.mantissas.shape

    def element_exponents(self) -> np.ndarray:
        """The exponent of every element: an int32 array of the tensor's shape."""
        return _expand(self.exponents, self.shape, self.axis, self.block_size)

    def dequantize(self) -> np.ndarray:
        """``mantissas * 2**element_exponents()`` as float64 (exact, via ``np.ldexp``).

        Exact whenever the value is a float64. A value beyond float64's range (possible
        only with ``exponent_bits >= 11``, e.g. ``-max_float`` rounding to ``-2**1024``)
        becomes ``+-inf`` with numpy's overflow ``RuntimeWarning``; one below the
        subnormal range rounds as ``np.ldexp`` does.
        """
        if self.block_size is None:
            e = self.exponents                    # one per whole-axis block: broadcasts
            if e.size and -990 <= e.min() and e.max() <= 990:
                # |mantissa| < 2**32, so the product is a normal float64 and multiplying by the
                # exact power of two is exact: ldexp's result, at a multiply's speed
                out = self.mantissas.astype(np.float64)
                out *= np.ldexp(1.0, e)
                return out
            return np.ldexp(self.mantissas.astype(np.float64), e)
        return np.ldexp(self.mantissas.astype(np.float64), self.element_exponents())


#: 1.5 * 2**52 (:func:`_encode_rows_into`).
_ROUND_MAGIC = 1.5 * 2.0 ** 52


class _RowPlan(NamedTuple):
    """What :func:`_row_plan` found: the exponents, the rows with a non-zero mantissa, the
    rows with a saturating one, and whether every value is finite (else nothing else holds)."""
    exponents: np.ndarray   # int32 per row
    nonzero: np.ndarray     # bool per row
    saturates: np.ndarray   # bool per row
    finite: bool


def _row_plan(a: np.ndarray, mantissa_bits: int, exponent_bits: int, rounding: str,
              whole: bool = False) -> _RowPlan:
    """Internal, with :func:`_encode_rows_into`: ``quantize(a, mantissa_bits, axis=-1 (None if
    whole), exponent_bits=..., rounding=...)`` of a 2-D float64 array in two steps, without
    the int64 mantissas. ``a`` must be what :func:`quantize` would check it to be (finite
    float64, 2-D: the caller ran :func:`~hlsnn.formats._validate.as_float_input`), and
    ``rounding`` a deterministic mode (not ``"stochastic"``).

    The exponent of every row (with ``whole``, the tensor's one, repeated) as ``quantize``
    gives it. Every mode rounds monotonically, so a row's largest and smallest mantissa are
    those of its largest and smallest value: they tell whether any mantissa of the row
    saturates and whether all are zero. ``a`` may hold NaN or Inf (the caller used
    :func:`~hlsnn.formats._validate.as_float_array`): the plan then has ``finite`` False and
    nothing else in it holds."""
    m = _check_mantissa_bits(mantissa_bits)
    lo, hi = mantissa_range(m)
    rows, n = a.shape
    if n:
        ext_x = np.stack([a.max(axis=1), a.min(axis=1)])   # (2, rows): each row's extremes
    else:
        ext_x = np.zeros((2, rows))
    if not np.isfinite(ext_x).all():                       # a NaN or an Inf shows in its row's extremes
        none = np.zeros(rows, bool)
        return _RowPlan(np.zeros(rows, np.int32), none, none, False)
    amax = np.maximum(ext_x[0], -ext_x[1])
    if whole:
        amax = np.full(rows, amax.max(initial=0.0))
    e = shared_exponent(amax, m, exponent_bits)        # int32 per row
    with np.errstate(over="ignore", under="ignore"):
        ext = np.ldexp(ext_x, np.negative(e, dtype=np.int32))
    ext = _round(np.clip(ext, lo - 1, hi + 1), ext_x, rounding, None)
    return _RowPlan(e, (ext != 0).any(axis=0), ((ext > hi) | (ext < lo)).any(axis=0), True)


def _encode_rows_into(a: np.ndarray, plan: _RowPlan, mantissa_bits: int, rounding: str, out: np.ndarray, *,
                      values: bool = False, block_elems: int = 1 << 14) -> np.ndarray:
    """Internal: the mantissas of :func:`_row_plan`'s quantization written as floats into
    ``out`` (float32 or float64 of ``a``'s shape; float32 only for ``mantissa_bits <= 25``,
    where they are exact), or with ``values`` the dequantized values ``mantissa * 2**e``
    (the caller makes sure ``out``'s type holds them exactly). Equal to ``quantize``'s
    ``mantissas`` (resp. ``dequantize()``) as floats; returns ``out``.

    The rows go in blocks of about ``block_elems`` elements through one small scratch array
    (fresh multi-MB temporaries cost more in page faults than the arithmetic); a block is
    clipped only when one of its rows saturates. The values of a block that does not
    saturate, under ``nearest_even``, take two passes: ``(x + C 2**e) - C 2**e`` with
    ``C = 1.5 * 2**52`` is ``rint(x * 2**-e) * 2**e`` exactly (the sum's ulp is ``2**e``;
    ``|x * 2**-e| < 2**51``; ties to even, +0.0 for a zero), for exponents within +-960."""
    lo, hi = mantissa_range(mantissa_bits)
    rows, n = a.shape
    ne = np.negative(plan.exponents, dtype=np.int32)
    unit = np.ldexp(1.0, plan.exponents) if values else None
    magic = values and rounding == "nearest_even" and rows > 0 and -960 <= int(plan.exponents.min()) \
        and int(plan.exponents.max()) <= 960
    step = max(1, block_elems // max(n, 1))
    tmp = np.empty((min(step, rows), n))
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        v, xb = tmp[:r1 - r0], a[r0:r1]
        if magic and not plan.saturates[r0:r1].any():
            c = (_ROUND_MAGIC * unit[r0:r1])[:, None]
            dst = out[r0:r1] if out.dtype == np.float64 else v
            np.add(xb, c, out=dst)
            dst -= c
            if dst is v:
                out[r0:r1] = v
            continue
        with np.errstate(over="ignore", under="ignore"):
            np.ldexp(xb, ne[r0:r1, None], out=v)
        if rounding == "nearest_even":
            np.rint(v, out=v)
        else:
            np.clip(v, lo - 1, hi + 1, out=v)
            v[...] = _round(v, xb, rounding, None)
        if plan.saturates[r0:r1].any():
            np.clip(v, lo, hi, out=v)
        if values:
            v *= unit[r0:r1, None]
            v += 0.0                                   # a zero mantissa of a negative value: +0.0
        out[r0:r1] = v
    return out


def _quantize_rows_into(a: np.ndarray, mantissa_bits: int, exponent_bits: int, rounding: str,
                        out: np.ndarray, *, whole: bool = False,
                        block_elems: int = 1 << 14) -> Tuple[np.ndarray, np.ndarray]:
    """Internal: :func:`_row_plan` and :func:`_encode_rows_into` (the mantissas) in one call;
    returns ``(exponents, nonzero)`` per row."""
    plan = _row_plan(a, mantissa_bits, exponent_bits, rounding, whole)
    _encode_rows_into(a, plan, mantissa_bits, rounding, out, block_elems=block_elems)
    return plan.exponents, plan.nonzero


def quantize(x, mantissa_bits: int, *, axis: Optional[int] = -1,
             block_size: Optional[int] = None, exponent_bits: int = 8,
             rounding: str = "nearest_even", seed: Any = None,
             exponent: Any = None) -> BFPTensor:
    """Quantize ``x`` to block floating point (see the module docstring for the rules).

    Parameters
    ----------
    x : array_like of float
        Finite values, any shape with ``ndim >= 1``; converted to float64.
    mantissa_bits : int
        Mantissa width ``m`` including the sign bit, in ``[2, 32]``.
    axis : int or None, default -1
        The axis the blocks run along (negative counts from the end); None: the whole
        tensor is one block.
    block_size : int or None, default None
        Elements per block along ``axis``, ``>= 1``; the last block may be shorter. None:
        the whole axis is one block. Must be None when ``axis`` is None.
    exponent_bits : int, default 8
        Width of the signed shared exponent, in ``[2, 16]``.
    rounding : str, default "nearest_even"
        One of :data:`ROUNDING_MODES`.
    seed : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Passed to ``np.random.default_rng``; used only by ``"stochastic"``.
    exponent : array_like of int, optional
        Encode with these shared exponents instead of the max rule: integers in the
        exponent range, broadcastable to the exponents shape (a scalar forces one exponent
        everywhere). Mantissas that do not fit saturate.

    Returns
    -------
    BFPTensor
        ``mantissas`` of ``x``'s shape and ``exponents`` of the keepdims block shape
        described in :class:`BFPTensor`.

    Raises
    ------
    InputError
        (a ``ValueError``) a bad parameter, a 0-d ``x``, or NaN/Inf in ``x``.

    Examples
    --------
    >>> q = quantize([131072.0, 256.0, 1.0, 0.5, 0.125], 16)
    >>> int(q.exponents[0]), [hex(int(v)) for v in q.mantissas]
    (3, ['0x4000', '0x20', '0x0', '0x0', '0x0'])
    >>> q = quantize([131072.0, 256.0, 1.0, 0.5, 0.125], 16, exponent=-3)
    >>> [hex(int(v)) for v in q.mantissas]
    ['0x7fff', '0x800', '0x8', '0x4', '0x1']
    >>> quantize([0.3], 16, rounding="truncate").mantissas
    array([19660])
    """
    if not (isinstance(rounding, str) and rounding in ROUNDING_MODES):
        raise InputError(f"rounding = {rounding!r}: must be one of "
                         f"{', '.join(map(repr, ROUNDING_MODES))}")
    m = _check_mantissa_bits(mantissa_bits)
    b = _check_exponent_bits(exponent_bits)
    _check_block_size(block_size)
    a = _as_float_input(x)
    axis, block_size = _check_layout(axis, block_size, a.ndim)
    eshape = _exponents_shape(a.shape, axis, block_size)
    if exponent is None:
        exps = shared_exponent(_block_amax(a, axis, block_size), m, b)
    else:
        emin, emax = exponent_range(b)
        given = _as_int_array("exponent", exponent, emin, emax, np.int32)
        try:
            exps = np.array(np.broadcast_to(given, eshape), dtype=np.int32)
        except ValueError:
            raise InputError(f"exponent: has shape {given.shape}: must broadcast to the "
                             f"exponents shape {eshape}") from None
    # a whole-axis block's exponents broadcast over it; blocks along an axis expand
    elem = exps if block_size is None else _expand(exps, a.shape, axis, block_size)
    mant = _encode(a, elem, m, rounding, seed)
    # in range by construction (clipped), of the checked layout, and new arrays
    return BFPTensor._trusted(mant, np.ascontiguousarray(exps, dtype=np.int32), m, b, axis, block_size)
