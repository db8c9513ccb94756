"""Shift codes: weights as powers of two (PoT) or sums of two powers of two (two-hot).

This module is the reference for the shift-code weight formats of the multiplier-free
datapath (SPECS section 1, seed 000); the rules below are the specification that the
emulator, the generated C++ and the tests all follow.

Codes
    Every weight is stored as a code ``(zero, e1, e2, s1, s2)``: a zero flag, two exponents
    ``e1, e2`` in ``0 ... 2**exp_bits - 1`` and two sign bits. An exponent is always a LEFT
    shift amount, so every code value is an integer. ``exp_bits`` is an int in ``[1, 5]``.

    ``"pot"`` (power of two)
        ``value = (-1)**s1 * 2**e1``; ``e2`` and ``s2`` are always 0.
        :attr:`ShiftTensor.bits_per_weight` is ``exp_bits + 2`` (exponent, sign, zero flag).
    ``"twohot"``
        ``value = (-1)**s2 * (2**(e1 + delta) + (-1)**s1 * 2**e2)``, with ``delta`` an int in
        ``[0, 7]`` (the resolution offset ``r`` of the extra shifter on the ``e1`` path).
        ``s2`` is the outer sign (the accumulator adds or subtracts the product), ``s1`` makes
        the adder subtract the second term (the convention for SPECS A0.2). The inner value
        ``2**(e1 + delta) - 2**e2`` is negative when ``e2 > e1 + delta``; that is part of the
        value set. :attr:`ShiftTensor.bits_per_weight` is ``2 * exp_bits + 3``.

    When ``zero`` is set the value is 0 and the other fields must be 0 too. Value 0 is
    always written with the zero flag, never as ``2**a - 2**a``.

Scale exponent
    Shifts are left-only, so a tensor carries an integer scale exponent ``F`` (one for the
    whole tensor with ``axis=None``, one per slice along ``axis`` otherwise) and represents
    ``code_value * 2**-F``. With ``emax = 2**exp_bits - 1`` the largest code magnitude is
    ``M = 2**emax`` (pot) or ``M = 2**(emax + delta) + 2**emax`` (twohot), and ``F`` is the
    LARGEST integer with ``max |w| <= M * 2**-F`` over the slice: the largest weight fits
    without clipping and the finest scale is used. It is computed exactly: with
    ``max |w| = f * 2**E`` (:func:`numpy.frexp`, ``f`` in ``[0.5, 1)``) and ``L`` the bit
    length of ``M``, ``F = L - E`` if ``f * 2**L <= M`` else ``L - E - 1`` (never
    ``np.log2``, which rounds next to powers of two). An all-zero slice gets ``F = 0``.

Quantization (nearest code, deterministic tie-break)
    Each weight gets the code whose ``value * 2**-F`` is nearest to it among ALL codes of
    the format (zero included), i.e. the smallest ``|w - value * 2**-F|``. Ties:

    1. on equal error, the smaller ``|value|`` wins (so an exact midpoint between two
       adjacent levels rounds toward zero);
    2. value 0 is the zero flag with ``e1 = e2 = s1 = s2 = 0``;
    3. any other value is written with its canonical code, the lexicographically smallest
       tuple ``(zero, e1, e2, s1, s2)`` among the codes with that value (two-hot has
       redundant codes, e.g. ``2**0 + 2**2 == 2**2 + 2**0``, so ``5`` at ``delta=0`` is
       ``e1=0, e2=2``, not ``e1=2, e2=0``).

    The sign of a nonzero value is the sign of ``w``: the value set is symmetric, so a code
    of the opposite sign is never nearer. For pot the sign is ``s1``; for twohot it is
    ``s2``, flipped when the canonical inner value ``2**(e1+delta) +- 2**e2`` is negative.

    Vectorized: the sorted distinct magnitudes of a format and their canonical codes are
    built once per ``(mode, exp_bits, delta)`` (cached); ``a = |w| * 2**F`` (exact, via
    :func:`numpy.ldexp`) is located between neighbours ``lo < a <= hi`` and rounds to
    ``hi`` only when ``2 * a > lo + hi`` (exact in float64). Equivalently, the index of its
    magnitude is the number of midpoints ``(lo + hi) / 2`` below ``a``; :func:`.shift_codes.nearest`
    counts them with a table over the top bits of ``a``'s float64 pattern (cached with the
    magnitudes), :func:`.shift_codes.nearest_reference` with :func:`numpy.searchsorted`.

Code limit (``max_code``, two-hot only; an accelerator config's ``shift_mac.max_code``)
    A limit ``Lm`` (a two-hot magnitude of the format, at least ``2**emax``: 128 at
    ``exp_bits`` 3) takes the place of ``M`` above: ``F`` fits the largest weight to ``Lm``,
    and only the codes with ``|value| <= Lm`` are candidates of the nearest rounding (and of
    :mod:`hlsnn.deploy.quantize.shift_fit`'s refit), so no code above it is ever produced. Why: the
    product ``x * value`` of an int8 activation then has ``|x * value| <= 2**14``, and two such
    products pack into one DSP48E1 (the shift_mac network kernel's ``net_dsp`` banks,
    :mod:`hlsnn.engines.shift_mac.network.dsp`). The code values stay exact integers, so the
    bits of a product do not depend on whether shifters or a DSP form it.

Dequantization
    ``code_value * 2**-F`` computed with :func:`numpy.ldexp`: exact whenever the result is a
    float64, i.e. always except next to float64's limits: a slice maximum that rounds up to
    ``2**1024`` dequantizes to ``+-inf`` (silently), and with subnormal weights a result can
    fall between subnormals and is rounded.

Inputs
    ``w`` is converted with ``np.asarray(w, dtype=np.float64)`` and must have ``ndim >= 1``
    and only finite values; ``axis`` is None or an int in ``[-ndim, ndim)``. Anything else
    raises :class:`hlsnn.errors.InputError` (a :class:`ValueError`) with a one-line message
    naming the parameter, the value and what is allowed.

Notes
    Re-quantizing a dequantized two-hot tensor can move ``F`` up by one when the rounded
    maximum is at most ``M / 2``, and the doubled codes are not always two-hot values (at
    ``exp_bits=2, delta=0``: ``[8.5, 7] -> [8, 7]`` at ``F=0``, then ``F=1`` and ``7 -> 6``).
    PoT re-quantization is always idempotent.

    With ``delta`` in ``{0, 1}`` the two-hot levels at its ``F`` include every level PoT of
    the same ``exp_bits`` uses, so two-hot is at least as accurate on every weight. With a
    larger ``delta`` its ``F`` is about ``delta`` larger and some PoT levels are then no
    two-hot values, so single weights can come out worse (``exp_bits=1, delta=3``: ``w = 1``
    is exact in PoT but becomes ``15/16``; for ``delta > emax`` the smallest nonzero two-hot
    magnitude is ``2**delta - 2**emax``).

Examples
--------
>>> import numpy as np
>>> from hlsnn.formats import shift
>>> q = shift.quantize_pot([0.3, -1.0, 0.05], 3)
>>> q.scale_exponent, q.e1, q.s1
(array([7], dtype=int32), array([5, 7, 3], dtype=uint8), array([0, 1, 0], dtype=uint8))
>>> q.code_values()
array([  32, -128,    8])
>>> q.dequantize()
array([ 0.25  , -1.    ,  0.0625])

Two-hot weights 5, -6 and 9 (SPECS T0.7) are exact at ``F = 0``:

>>> q = shift.quantize_twohot([5.0, -6.0, 9.0], 2)
>>> int(q.scale_exponent[0]), q.code_values()
(0, array([ 5, -6,  9]))
>>> np.stack([q.e1, q.e2, q.s1, q.s2])    # rows e1, e2, s1, s2: canonical codes
array([[0, 1, 0],
       [2, 2, 3],
       [0, 0, 0],
       [0, 1, 0]], dtype=uint8)
>>> q.bits_per_weight
7
>>> shift.levels("twohot", 1)
array([-4, -3, -2, -1,  0,  1,  2,  3,  4])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from hlsnn.errors import InputError

from . import shift_codes as codes

__all__ = ["MODES", "EXP_BITS_RANGE", "DELTA_RANGE", "ShiftTensor", "quantize_pot",
           "quantize_twohot", "levels", "encode"]

#: The shift-code formats: ``"pot"`` (one power of two) and ``"twohot"`` (two).
MODES = ("pot", "twohot")

#: Inclusive range of ``exp_bits`` (width of each exponent field).
EXP_BITS_RANGE = (1, 5)

#: Inclusive range of the two-hot resolution offset ``delta``.
DELTA_RANGE = (0, 7)

_INT32 = (-(1 << 31), (1 << 31) - 1)


# --------------------------------------------------------------------------- validation

from ._validate import as_float_array, as_float_input  # noqa: E402

from ._validate import as_int_array as _as_int_array  # noqa: E402
from ._validate import check_axis as _check_axis  # noqa: E402
from ._validate import check_int_range as _check_int_range  # noqa: E402


def _as_float_input(w) -> np.ndarray:
    return as_float_input(w, "w")


def _check_mode(mode) -> str:
    if not (isinstance(mode, str) and mode in MODES):
        raise InputError(f"mode = {mode!r}: must be one of {', '.join(map(repr, MODES))}")
    return mode


def _check_exp_bits(value) -> int:
    return _check_int_range("exp_bits", value, *EXP_BITS_RANGE)


def _check_delta(value, mode: str = "twohot") -> int:
    d = _check_int_range("delta", value, *DELTA_RANGE)
    if mode == "pot" and d != 0:
        raise InputError(f"delta = {value!r}: must be 0 for mode 'pot' (delta offsets the "
                         f"first exponent of a two-hot code only)")
    return d


def _scale_shape(shape: Tuple[int, ...], axis: Optional[int]) -> Tuple[int, ...]:
    out = [1] * len(shape)
    if axis is not None:
        out[axis] = shape[axis]
    return tuple(out)




def levels(mode: str, exp_bits: int, delta: int = 0) -> np.ndarray:
    """Sorted distinct code values of a format, negatives and 0 included.

    Parameters
    ----------
    mode : str
        One of :data:`MODES`.
    exp_bits : int
        Exponent width, in ``[1, 5]``.
    delta : int, default 0
        Two-hot resolution offset, in ``[0, 7]``; must be 0 for ``"pot"``.

    Returns
    -------
    numpy.ndarray of int64
        Ascending integer code values (multiply by ``2**-F`` for the represented values).

    Raises
    ------
    InputError
        A bad ``mode``, ``exp_bits`` or ``delta``.

    Examples
    --------
    >>> levels("pot", 2)
    array([-8, -4, -2, -1,  0,  1,  2,  4,  8])
    >>> levels("twohot", 1, delta=2)
    array([-10,  -9,  -7,  -6,  -5,  -3,  -2,   0,   2,   3,   5,   6,   7,
             9,  10])
    """
    mode = _check_mode(mode)
    eb = _check_exp_bits(exp_bits)
    d = _check_delta(delta, mode)
    mags = codes.table(mode, eb, d).mags.astype(np.int64)
    return np.concatenate([-mags[:0:-1], mags])


# --------------------------------------------------------------------------- tensor

@dataclass(frozen=True, eq=False)
class ShiftTensor:
    """A tensor of shift codes: ``w_hat = code_values() * 2**-scale_exponent``.

    Build one with :func:`quantize_pot`, :func:`quantize_twohot` or :meth:`from_codes`;
    all validate every field. The arrays are stored as read-only private copies.

    Attributes
    ----------
    mode : str
        ``"pot"`` or ``"twohot"`` (see the module docstring for the value formulas).
    exp_bits : int
        Width of each exponent field, in ``[1, 5]``.
    e1, e2 : numpy.ndarray of uint8
        Exponents (left-shift amounts), the tensor's shape, each in ``[0, 2**exp_bits - 1]``.
        ``e2`` is all 0 for ``"pot"``.
    s1, s2 : numpy.ndarray of uint8
        Sign bits (1 = negative / subtract), the tensor's shape. ``s2`` is all 0 for
        ``"pot"``.
    zero : numpy.ndarray of bool
        Zero flags, the tensor's shape; where set, ``e1, e2, s1, s2`` are 0.
    scale_exponent : numpy.ndarray of int32
        ``F``: the SAME ``ndim`` as the tensor (keepdims style, so it broadcasts), length
        ``shape[axis]`` along ``axis`` and 1 elsewhere (all ones for ``axis=None``).
    delta : int
        Two-hot offset of ``e1``, in ``[0, 7]``; 0 for ``"pot"``.
    axis : int or None
        The axis with one ``F`` per slice, normalized to be non-negative; None: one ``F``.
    """

    mode: str
    exp_bits: int
    e1: np.ndarray
    e2: np.ndarray
    s1: np.ndarray
    s2: np.ndarray
    zero: np.ndarray
    scale_exponent: np.ndarray
    delta: int = 0
    axis: Optional[int] = None

    def __post_init__(self):
        mode = _check_mode(self.mode)
        eb = _check_exp_bits(self.exp_bits)
        d = _check_delta(self.delta, mode)
        emax = codes.emax(eb)
        e1 = _as_int_array("e1", self.e1, 0, emax, np.uint8)
        if e1.ndim == 0:
            raise InputError("e1: is 0-d: must have ndim >= 1")
        fields = {"e1": e1}
        for name, hi in (("e2", emax), ("s1", 1), ("s2", 1), ("zero", 1)):
            arr = _as_int_array(name, getattr(self, name), 0, hi, np.uint8)
            if arr.shape != e1.shape:
                raise InputError(f"{name}: has shape {arr.shape}: must be {e1.shape}, the "
                                 f"shape of e1")
            fields[name] = arr
        zero = fields["zero"].astype(bool)
        fields["zero"] = zero
        if mode == "pot":
            for name in ("e2", "s2"):
                if fields[name].any():
                    raise InputError(f"{name}: has {int(np.count_nonzero(fields[name]))} "
                                     f"nonzero value(s): must be all 0 for mode 'pot'")
        for name in ("e1", "e2", "s1", "s2"):
            stray = zero & (fields[name] != 0)
            if stray.any():
                raise InputError(f"{name}: has {int(np.count_nonzero(stray))} nonzero "
                                 f"value(s) where zero is set: must be 0 there")
        axis = _check_axis(self.axis, e1.ndim)
        want = _scale_shape(e1.shape, axis)
        f = _as_int_array("scale_exponent", self.scale_exponent, *_INT32, np.int32)
        if f.ndim == 0:
            f = np.full(want, f, dtype=np.int32)
        if f.shape != want:
            raise InputError(f"scale_exponent: has shape {f.shape}: must be {want} (or a "
                             f"scalar) for a tensor of shape {e1.shape} with axis={axis}")
        fields["scale_exponent"] = f
        for value in fields.values():
            value.setflags(write=False)
        fields.update(mode=mode, exp_bits=eb, delta=d, axis=axis)
        for name, value in fields.items():
            object.__setattr__(self, name, value)

    @classmethod
    def from_codes(cls, mode: str, exp_bits: int, e1, e2, s1, s2, zero, scale_exponent, *,
                   delta: int = 0, axis: Optional[int] = None) -> "ShiftTensor":
        """Build a tensor from code fields and scale exponents, validating all of them.

        Parameters
        ----------
        mode : str
            One of :data:`MODES`.
        exp_bits : int
            Exponent width, in ``[1, 5]``.
        e1, e2 : array_like of int
            Exponents in ``[0, 2**exp_bits - 1]``, all of one shape with ``ndim >= 1``;
            ``e2`` all 0 for ``"pot"``.
        s1, s2 : array_like of int or bool
            Sign bits in ``{0, 1}``; ``s2`` all 0 for ``"pot"``.
        zero : array_like of bool or int
            Zero flags in ``{0, 1}``; where set, the other four fields must be 0.
        scale_exponent : array_like of int
            ``F`` in the int32 range: exactly the shape described in :class:`ShiftTensor`,
            or a scalar (used for every slice).
        delta : int, default 0
            Two-hot offset in ``[0, 7]``; must be 0 for ``"pot"``.
        axis : int or None, default None
            The per-slice axis of ``scale_exponent`` (negative counts from the end).

        Raises
        ------
        InputError
            A value out of range, non-integer values or inconsistent shapes.

        Examples
        --------
        >>> ShiftTensor.from_codes("pot", 3, [6], [0], [0], [0], [False], 0).code_values()
        array([64])
        >>> t = ShiftTensor.from_codes("twohot", 2, [3, 3], [1, 1], [1, 1], [0, 1],
        ...                            [0, 0], 1)
        >>> t.code_values(), t.dequantize()
        (array([ 6, -6]), array([ 3., -3.]))
        """
        return cls(mode, exp_bits, e1, e2, s1, s2, zero, scale_exponent, delta, axis)

    @classmethod
    def _trusted(cls, mode: str, exp_bits: int, e1, e2, s1, s2, zero, scale_exponent, delta: int,
                 axis: Optional[int]) -> "ShiftTensor":
        """Internal: wrap fields hlsnn has just produced, without :meth:`from_codes`' checks
        and copies. The caller guarantees every invariant the constructor checks (uint8
        fields in range, bool ``zero``, int32 ``scale_exponent`` of the keepdims shape,
        ``axis`` normalized) and that nothing else holds a writable reference to them; they
        are taken over and made read-only."""
        t = object.__new__(cls)
        fields = dict(mode=mode, exp_bits=exp_bits, e1=e1, e2=e2, s1=s1, s2=s2, zero=zero,
                      scale_exponent=scale_exponent, delta=delta, axis=axis)
        for name, value in fields.items():
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(t, name, value)
        return t

    @property
    def shape(self) -> Tuple[int, ...]:
        """Shape of the tensor (of ``e1``)."""
        return self.e1.shape

    @property
    def bits_per_weight(self) -> int:
        """Stored bits per weight: ``exp_bits + 2`` (pot) or ``2 * exp_bits + 3`` (twohot)."""
        if self.mode == "pot":
            return self.exp_bits + 2
        return 2 * self.exp_bits + 3

    def code_values(self) -> np.ndarray:
        """The integer value of every code (before ``2**-F``): an int64 array."""
        one = np.int64(1)
        t1 = np.left_shift(one, self.e1.astype(np.int64) + self.delta)
        sign1 = 1 - 2 * self.s1.astype(np.int64)
        if self.mode == "pot":
            v = sign1 * t1
        else:
            inner = t1 + sign1 * np.left_shift(one, self.e2.astype(np.int64))
            v = (1 - 2 * self.s2.astype(np.int64)) * inner
        return np.where(self.zero, np.int64(0), v).astype(np.int64)

    def dequantize(self) -> np.ndarray:
        """``code_values() * 2**-scale_exponent`` as float64 (exact, via ``np.ldexp``).

        Exact whenever the result is a float64; beyond that range ``np.ldexp`` rounds
        (between subnormals) or overflows to ``+-inf`` (see the module docstring).
        """
        neg_f = np.clip(-self.scale_exponent.astype(np.int64), -4096, 4096).astype(np.int32)
        with np.errstate(over="ignore", under="ignore"):
            return np.ldexp(self.code_values().astype(np.float64), neg_f)


# --------------------------------------------------------------------------- quantizer

def _scale_exponent(amax: np.ndarray, max_mag: int) -> np.ndarray:
    """Largest integer F with ``amax <= max_mag * 2**-F`` (0 where ``amax == 0``), exactly."""
    L = int(max_mag).bit_length()
    f, e = np.frexp(amax)                    # amax = f * 2**e, f in [0.5, 1)
    F = L - e.astype(np.int64) - (np.ldexp(f, L) > max_mag)
    return np.where(amax == 0, 0, F).astype(np.int32)


#: Elements per block of :func:`_quantize`: its temporaries stay small and are reused by
#: the allocator (fresh multi-MB temporaries cost more in page faults than their arithmetic).
_BLOCK_ELEMS = 1 << 14


def _check_limit(limit, mode, exp_bits, delta):
    """A code limit (module docstring): None, or a two-hot magnitude of the format of at least
    2 ** (2 ** exp_bits - 1) (the largest power-of-two term)."""
    if limit is None:
        return None
    tab = codes.table(mode, exp_bits, delta)
    top = 1 << codes.emax(exp_bits)
    if isinstance(limit, bool) or not isinstance(limit, (int, np.integer)) or mode != "twohot" \
            or not top <= int(limit) or int(limit) not in set(tab.mags.astype(np.int64).tolist()):
        raise InputError(f"max_code: {limit!r} is not allowed (a two-hot code magnitude of exp_bits={exp_bits}, "
                         f"delta={delta} of at least {top}, e.g. 128 at exp_bits 3; two-hot only)")
    return int(limit)


def _prepare(mode: str, w, exp_bits, delta, axis, limit=None):
    """Checked inputs, the format's table and the scale exponents: ``(a, tab, F, eb, d, ax)``."""
    eb = _check_exp_bits(exp_bits)
    d = _check_delta(delta, mode)
    a = np.ascontiguousarray(as_float_array(w, "w"))
    ax = _check_axis(axis, a.ndim)
    tab = codes.table(mode, eb, d, _check_limit(limit, mode, eb, d))
    if ax is None:
        amax = np.maximum(a.max(initial=0.0), -a.min(initial=0.0)).reshape((1,) * a.ndim)
    else:
        others = tuple(i for i in range(a.ndim) if i != ax)
        amax = np.maximum(a.max(axis=others, keepdims=True, initial=0.0),
                          -a.min(axis=others, keepdims=True, initial=0.0))
    if not np.isfinite(amax).all():          # a NaN or an Inf shows in its slice's extremes
        _as_float_input(w)                   # raises the error naming the first one
    return a, tab, _scale_exponent(amax, tab.max_mag), eb, d, ax


def _blocks(a, tab, F):
    """``(rows, values, k)`` per block of the leading axis of ``a``: ``k`` the index of the
    nearest magnitude to each ``|value| * 2**F`` (ties to the smaller). Blocks of about
    :data:`_BLOCK_ELEMS` elements."""
    n0 = a.shape[0]
    rows = max(1, _BLOCK_ELEMS // max(1, a.size // max(n0, 1)))
    normal_scale = F.size > 0 and -1022 <= int(F.min()) and int(F.max()) <= 1023
    unit = np.ldexp(1.0, F) if normal_scale else None
    for r0 in range(0, n0, rows):
        sl = slice(r0, r0 + rows)
        ab = a[sl]
        v = np.abs(ab)
        Fb = F[sl] if F.shape[0] > 1 else F
        with np.errstate(under="ignore"):
            if normal_scale:                 # |w| * 2**F: the same correctly rounded value as ldexp
                v *= unit[sl] if F.shape[0] > 1 else unit
            else:
                np.ldexp(v, Fb, out=v)       # exact unless far below the smallest level
        yield sl, ab, codes.nearest(tab, v)


def _quantize(mode: str, w, exp_bits, delta, axis, limit=None) -> ShiftTensor:
    """:func:`quantize_pot` / :func:`quantize_twohot`: the module's rules, with the nearest
    magnitude found by :func:`.shift_codes.nearest`, block by block of the leading axis; equal, field for
    field, to :func:`_quantize_reference` (``tests/formats/test_shift.py``)."""
    a, tab, F, eb, d, ax = _prepare(mode, w, exp_bits, delta, axis, limit)
    e1, e2, s1, s2 = (np.zeros(a.shape, np.uint8) for _ in range(4))
    zero = np.empty(a.shape, bool)
    for sl, ab, k in _blocks(a, tab, F):
        z = np.equal(k, 0, out=zero[sl])
        neg = ab < 0
        neg &= ~z
        np.take(tab.e1, k, out=e1[sl])
        if mode == "pot":
            s1[sl] = neg
        else:
            np.take(tab.e2, k, out=e2[sl])
            np.take(tab.s1, k, out=s1[sl])
            neg ^= tab.neg[k]
            neg &= ~z
            s2[sl] = neg
    # every field in range and of the checked shapes by construction, and new arrays
    return ShiftTensor._trusted(mode, eb, e1, e2, s1, s2, zero, F, d, ax)


def _quantize_values_into(mode: str, w: np.ndarray, exp_bits: int, delta: int, out: np.ndarray) -> np.ndarray:
    """Internal: the code values of ``_quantize(mode, w, exp_bits, delta, axis=0)`` of 2-D
    ``w``, written as float64 into ``out`` (w's shape; any strides), without building the
    fields: ``out = code_values()`` exactly (+0.0 for a zero code). Returns the scale
    exponents, int32 ``(N, 1)``. The shift_mac kernel's float GEMM multiplies by these."""
    a, tab, F, _, _, _ = _prepare(mode, w, exp_bits, delta, 0)
    for sl, ab, k in _blocks(a, tab, F):
        ob = out[sl]
        np.take(tab.mags, k, out=ob)
        np.copysign(ob, ab, out=ob)       # the value's sign is the weight's (module docstring)
        ob += 0.0                         # a zero code of a negative weight: +0.0
    return F


def _quantize_reference(mode: str, w, exp_bits, delta, axis) -> ShiftTensor:
    """The quantizer as first written (searchsorted, every field validated by the
    constructor): the reference :func:`_quantize` must equal on every input."""
    eb = _check_exp_bits(exp_bits)
    d = _check_delta(delta, mode)
    a = _as_float_input(w)
    ax = _check_axis(axis, a.ndim)
    tab = codes.table(mode, eb, d)
    mag = np.abs(a)
    if ax is None:
        amax = np.max(mag, initial=0.0).reshape((1,) * a.ndim)
    else:
        others = tuple(i for i in range(a.ndim) if i != ax)
        amax = np.max(mag, axis=others, keepdims=True, initial=0.0)
    F = _scale_exponent(amax, tab.max_mag)
    with np.errstate(under="ignore"):
        v = np.ldexp(mag, F)                 # exact unless far below the smallest level
    k = codes.nearest_reference(tab, v)     # ties -> the smaller magnitude
    zero = k == 0
    neg = (a < 0) & ~zero
    e1 = tab.e1[k]
    if mode == "pot":
        e2 = s2 = np.zeros(a.shape, dtype=np.uint8)
        s1 = neg.astype(np.uint8)
    else:
        e2 = tab.e2[k]
        s1 = tab.s1[k]
        s2 = ((neg ^ tab.neg[k]) & ~zero).astype(np.uint8)
    return ShiftTensor(mode, eb, e1, e2, s1, s2, zero, F, d, ax)


def quantize_pot(w, exp_bits: int, *, axis: Optional[int] = None) -> ShiftTensor:
    """Quantize ``w`` to power-of-two codes (see the module docstring for the rules).

    Parameters
    ----------
    w : array_like of float
        Finite values, any shape with ``ndim >= 1``; converted to float64.
    exp_bits : int
        Exponent width, in ``[1, 5]``: exponents ``0 ... 2**exp_bits - 1``.
    axis : int or None, default None
        None: one scale exponent for the whole tensor; an int: one per slice along that
        axis (e.g. ``axis=0`` of ``(N, K)`` weights: one per row).

    Returns
    -------
    ShiftTensor
        ``mode="pot"``: every weight is the nearest of ``0, +-2**e1 * 2**-F``.

    Raises
    ------
    InputError
        (a ``ValueError``) a bad parameter, a 0-d ``w``, or NaN/Inf in ``w``.

    Examples
    --------
    >>> q = quantize_pot([[1.0, 0.7], [-0.01, 0.0]], 2, axis=0)
    >>> q.scale_exponent.ravel(), q.code_values()
    (array([3, 9], dtype=int32), array([[ 8,  4],
           [-4,  0]]))

    Exact midpoints (here 6, 3 and 1.5 after scaling by ``2**F = 2``) round toward zero:

    >>> quantize_pot([3.0, 1.5, 0.75, 0.8], 2).dequantize()
    array([2. , 1. , 0.5, 1. ])
    """
    return _quantize("pot", w, exp_bits, 0, axis)


def quantize_twohot(w, exp_bits: int, *, delta: int = 0,
                    axis: Optional[int] = None, max_code: Optional[int] = None) -> ShiftTensor:
    """Quantize ``w`` to two-hot codes (see the module docstring for the rules).

    Parameters
    ----------
    w : array_like of float
        Finite values, any shape with ``ndim >= 1``; converted to float64.
    exp_bits : int
        Width of each exponent, in ``[1, 5]``: exponents ``0 ... 2**exp_bits - 1``.
    delta : int, default 0
        Offset added to ``e1`` (the extra shifter), in ``[0, 7]``.
    axis : int or None, default None
        None: one scale exponent for the whole tensor; an int: one per slice along that
        axis (e.g. ``axis=0`` of ``(Z, C, k, k)`` conv weights: one per output channel).

    max_code : int or None, default None
        A code limit (module docstring, "Code limit"): no code magnitude above it, and the
        scale exponents fit the largest weight to it.

    Returns
    -------
    ShiftTensor
        ``mode="twohot"``: every weight is the nearest of
        ``+-(2**(e1+delta) +- 2**e2) * 2**-F`` and 0, with canonical codes.

    Raises
    ------
    InputError
        (a ``ValueError``) a bad parameter, a 0-d ``w``, or NaN/Inf in ``w``.

    Examples
    --------
    >>> q = quantize_twohot([0.3, -1.0, 0.05], 3)
    >>> int(q.scale_exponent[0]), q.code_values()
    (8, array([  80, -256,   12]))
    >>> q = quantize_twohot([9.0], 2, delta=1)
    >>> q.code_values(), q.e1, q.e2, q.dequantize()
    (array([18]), array([3], dtype=uint8), array([1], dtype=uint8), array([9.]))
    """
    return _quantize("twohot", w, exp_bits, delta, axis, max_code)


def encode(values, scale_exponent, mode: str, exp_bits: int, *, delta: int = 0,
           axis: Optional[int] = None) -> ShiftTensor:
    """The canonical codes of integer code values chosen by the caller (a quantizer other than
    nearest rounding, e.g. :mod:`hlsnn.deploy.quantize.shift_fit`): ``values`` must all be levels of
    the format (:func:`levels`), ``scale_exponent`` as in :meth:`ShiftTensor.from_codes`.
    Each value is written as the module docstring says (zero flag for 0, the canonical code
    of its magnitude, the sign in ``s1`` for pot and in ``s2`` for two-hot), so
    ``encode(q.code_values(), q.scale_exponent, ...)`` rebuilds ``q`` field for field.

    Raises
    ------
    InputError
        A value that is no level of the format (naming the first), or a bad parameter.

    Examples
    --------
    >>> encode([5, -6, 0], 0, "twohot", 2).code_values()
    array([ 5, -6,  0])
    >>> encode([3], 0, "pot", 2)
    Traceback (most recent call last):
    ...
    hlsnn.errors.InputError: values: 3 is no code value of pot with exp_bits=2, delta=0
    """
    mode = _check_mode(mode)
    eb = _check_exp_bits(exp_bits)
    d = _check_delta(delta, mode)
    v = np.asarray(values)
    if v.dtype.kind == "f":
        if not np.all(np.isfinite(v)) or np.any(v != np.rint(v)):
            raise InputError("values: must be integers (code values)")
        v = v.astype(np.int64)
    v = np.asarray(v, np.int64)
    tab = codes.table(mode, eb, d)
    mag = np.abs(v).astype(np.float64)
    k = np.clip(np.searchsorted(tab.mags, mag), 0, len(tab.mags) - 1)
    bad = tab.mags[k] != mag
    if bad.any():
        raise InputError(f"values: {int(v[bad].reshape(-1)[0])} is no code value of {mode} with "
                         f"exp_bits={eb}, delta={d}")
    zero = k == 0
    neg = (v < 0) & ~zero
    e1 = tab.e1[k]
    if mode == "pot":
        e2 = s2 = np.zeros(v.shape, np.uint8)
        s1 = neg.astype(np.uint8)
    else:
        e2, s1 = tab.e2[k], tab.s1[k]
        s2 = ((neg ^ tab.neg[k]) & ~zero).astype(np.uint8)
    return ShiftTensor(mode, eb, e1, e2, s1, s2, zero, scale_exponent, d, axis)
