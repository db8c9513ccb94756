"""Dynamic fixed point: the decimal point of each output chosen from statistics of the
*current* operation (SPECS section 3, seed 002).

This module is the reference for source 002; the rules below are the specification that
the host controller, the kernels' statistics units and the tests all follow.

Wide results
    An operation (``op``) produces wide signed integers ``v`` with ``F_in`` fractional bits
    (for a product-sum ``F_in = F_x + F_w``), i.e. the real value ``v * 2**-F_in``. Every
    ``|v|`` must be below ``2**62`` (:data:`WIDE_LIMIT`, the limit of
    :func:`hlsnn.primitives.shift_round_sat`).

Output
    A ``bits``-bit integer with ``F_out`` fractional bits: signed, range
    ``[-2**(bits-1), 2**(bits-1) - 1]``, or with ``signed=False`` unsigned, range
    ``[0, 2**bits - 1]`` (e.g. after a ReLU). ``bits`` is an int in ``[2, 32]``.

Statistics (ACQUIRE, Alg 2-A) -> :class:`Stats`, :func:`acquire`
    ``h_msb[k]`` counts the values with ``unsigned_msb(v) == k``; ``h_lsb[l]`` the values
    with ``nz_lsb(v) == l``; ``max_msb`` / ``min_lsb`` are the largest MSB / smallest LSB
    (``-1`` = NONE when no value has one); ``n`` counts all values, ``n_nz`` the non-zero
    ones. ``unsigned_msb`` is NONE for 0 and -1, ``nz_lsb`` for 0 only, so -1 is counted in
    ``n_nz`` and ``h_lsb[0]`` but not in ``h_msb``. Per-lane statistics combine with
    :meth:`Stats.merge` (step 3). A kernel's statistics unit only reports ``h_msb`` and
    ``n``: see :meth:`Stats.from_histogram`.

Point position (DETERMINE, Alg 2-B; the rule is a product decision, SPECS A2.1) -> :func:`determine`
    With ``allowed = floor(overflow_ratio * n)`` (exact: the most values allowed to
    saturate), ``top`` is the largest bin ``k`` with ``sum(h_msb[k:]) > allowed``, or 0 if
    there is none (every counted value may saturate; SPECS initializes ``top = 0``). Then
    ``s = top - (bits - 2)`` (signed: the output keeps magnitude bits ``[s .. top]`` plus the
    sign) or ``s = top - (bits - 1)`` (unsigned: magnitude bits ``[s .. top]``), and
    ``F_out = clamp(F_in - s, f_min, f_max)``. ``overflow_ratio = 0`` is the max-based rule,
    ``top = max_msb``. When no value has an MSB (``sum(h_msb) == 0``: no values, or only 0
    and -1) there is nothing to learn and the result is ``clamp(f_prev)``, or
    ``clamp(F_in)`` (``s = 0``) when ``f_prev`` is None. SPECS step 1 tests ``n_nz == 0``
    instead; testing the histogram makes -1-only tensors keep the position too, and gives
    the same answer from a kernel's histogram as from :func:`acquire`. The LSB statistics
    (SPECS step 5) never change the result: they only tell whether the conversion is
    lossless (``min_lsb >= s``).

    Guarantees, with truncating conversion and an unclamped ``F_out``: at most ``allowed``
    values saturate, and at ``F_out + 1`` more than ``allowed`` would (so the max-based
    ``F_out`` is the largest position at which nothing saturates). Nearest rounding can in
    addition carry a value of bin ``top`` just past the largest code (e.g. 1023 at s=3 ->
    127.875 -> 128); it then saturates to the largest code, an error below one LSB.

Conversion (CONVERT, Alg 2-C) -> :func:`convert`
    Signed: ``shift_round_sat(v, F_in - F_out, bits, rounding)``. Unsigned: the same in
    ``bits + 1`` signed bits (range ``[-2**bits, 2**bits - 1]``), then negatives become 0.
    In both cases ``out = clamp(round(v * 2**(F_out - F_in)), lo, hi)`` and ``sat`` is True
    exactly where the clamp changed the rounded value. Default rounding ``"nearest_away"``
    (RHAZ, SPECS A2.2).

Sampling and the embodiments E1-E5 (Alg 2-D, 2-E; SPECS 3.3) -> :mod:`hlsnn.formats.radix_update`

Inputs
    Anything out of range raises :class:`hlsnn.errors.InputError` (a :class:`ValueError`)
    with a one-line message naming the parameter, the value and what is allowed.

Examples
--------
SPECS T2.2-T2.4: wide results at ``F_in = 8`` to 8-bit outputs.

>>> from hlsnn.formats import fixed
>>> st = fixed.acquire([1000, -700, 30, 5])
>>> st.max_msb, st.min_lsb, st.h_msb[[2, 4, 9]].tolist()
(9, 0, [1, 1, 2])
>>> f_out = fixed.determine(st, f_in=8, bits=8)
>>> f_out
5
>>> out, sat = fixed.convert([1000, -700, 30, 5], 8, f_out, 8)
>>> out.tolist(), sat.any()
([125, -88, 4, 1], False)
>>> fixed.convert([1000, -700, 30, 5], 8, 10, 8)[0].tolist()
[127, -128, 120, 20]
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional, Tuple

import numpy as np

from hlsnn.errors import InputError
from hlsnn.primitives import ROUNDING_CODES, msb_histogram, nz_lsb, shift_round_sat, unsigned_msb

from ._validate import check_int_range as _check_int_range
from ._validate import is_int as _is_int

__all__ = ["WIDE_LIMIT", "BITS_RANGE", "MAX_BINS", "MAX_PERIOD", "Stats", "acquire", "determine", "convert",
           "convert_shifted"]

#: Wide results must satisfy ``|v| < WIDE_LIMIT``.
WIDE_LIMIT = 1 << 62

#: Inclusive range of the output width ``bits``.
BITS_RANGE = (2, 32)

#: Largest histogram size: 64 bins hold every MSB and LSB of a wide result.
MAX_BINS = 64

#: Largest sampling period ``b`` chosen by :func:`sample_run` from a percentage.
MAX_PERIOD = 64

_NONE = -1


# --------------------------------------------------------------------------- validation

def _check_int(name: str, value) -> int:
    if not _is_int(value):
        raise InputError(f"{name} = {value!r}: must be an int")
    return int(value)


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise InputError(f"{name} = {value!r}: must be True or False")
    return bool(value)


def _check_real(name: str, value, lo: float, hi: float, *, lo_open: bool, hi_open: bool) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))
    x = float(value) if ok else math.nan
    if not (math.isfinite(x) and (lo < x if lo_open else lo <= x) and (x < hi if hi_open else x <= hi)):
        lb, rb = "(" if lo_open else "[", ")" if hi_open else "]"
        raise InputError(f"{name} = {value!r}: must be a number in {lb}{lo:g}, {hi:g}{rb}")
    return x


def _check_bits(value) -> int:
    return _check_int_range("bits", value, *BITS_RANGE)


def _check_rounding(value) -> str:
    if not (isinstance(value, str) and value in ROUNDING_CODES):
        raise InputError(f"rounding = {value!r}: must be one of {', '.join(map(repr, ROUNDING_CODES))}")
    return value


def _wide(name: str, values, mask=None) -> np.ndarray:
    """Integer array-like -> int64 array; the items selected by ``mask`` must be ``< 2**62``."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: cannot convert to an integer array ({exc})") from None
    if arr.dtype.kind not in "iu" and not (arr.size == 0 and arr.dtype.kind == "f"):
        raise InputError(f"{name}: has dtype {arr.dtype}: must be integers (wide results)")
    sel = arr if mask is None else arr[mask]
    if sel.size and (sel.min() <= -WIDE_LIMIT or sel.max() >= WIDE_LIMIT):
        bad = sel.min() if sel.min() <= -WIDE_LIMIT else sel.max()
        raise InputError(f"{name}: value {int(bad)} is out of range: wide results must be "
                         f"integers with |v| < 2**62")
    return arr.astype(np.int64)


def _check_bins(value) -> int:
    return _check_int_range("bins", value, 1, MAX_BINS)


def _counts(name: str, value) -> np.ndarray:
    arr = np.asarray(value)
    if arr.ndim != 1 or arr.size < 1 or arr.size > MAX_BINS or arr.dtype.kind not in "iu" or \
            (arr.size and arr.min() < 0):
        raise InputError(f"{name}: has shape {arr.shape} and dtype {arr.dtype}: must be a 1-D "
                         f"array of 1 to {MAX_BINS} non-negative integer counts")
    out = arr.astype(np.int64)
    out.flags.writeable = False
    return out


# --------------------------------------------------------------------------- statistics

@dataclass(frozen=True, eq=False)
class Stats:
    """Statistics of a set of wide results (Alg 2-A); see the module docstring.

    Attributes
    ----------
    h_msb, h_lsb : np.ndarray of int64
        Histograms of ``unsigned_msb`` and ``nz_lsb``, ``bins`` long each (read-only).
    max_msb, min_lsb : int
        Largest MSB and smallest non-zero LSB, ``-1`` (NONE) when no value has one.
    n, n_nz : int
        Number of values and of non-zero values.
    """
    h_msb: np.ndarray
    h_lsb: np.ndarray
    max_msb: int
    min_lsb: int
    n: int
    n_nz: int

    def __post_init__(self):
        h_msb, h_lsb = _counts("h_msb", self.h_msb), _counts("h_lsb", self.h_lsb)
        if h_msb.shape != h_lsb.shape:
            raise InputError(f"h_lsb: has {h_lsb.size} bins: must have as many as h_msb ({h_msb.size})")
        object.__setattr__(self, "h_msb", h_msb)
        object.__setattr__(self, "h_lsb", h_lsb)
        bins = h_msb.size
        object.__setattr__(self, "max_msb", _check_int_range("max_msb", self.max_msb, _NONE, bins - 1))
        object.__setattr__(self, "min_lsb", _check_int_range("min_lsb", self.min_lsb, _NONE, bins - 1))
        if not _is_int(self.n) or self.n < int(h_msb.sum()):
            raise InputError(f"n = {self.n!r}: must be an int >= sum(h_msb) = {int(h_msb.sum())} "
                             f"(n counts every value, h_msb only those with an MSB)")
        object.__setattr__(self, "n", int(self.n))
        object.__setattr__(self, "n_nz", _check_int_range("n_nz", self.n_nz, 0, self.n))

    @property
    def bins(self) -> int:
        """Number of histogram bins."""
        return int(self.h_msb.size)

    @classmethod
    def empty(cls, bins: int = MAX_BINS) -> "Stats":
        """The statistics of no values (the identity of :meth:`merge`)."""
        z = np.zeros(_check_bins(bins), dtype=np.int64)
        return cls(z, z, _NONE, _NONE, 0, 0)

    @classmethod
    def from_histogram(cls, h_msb, n) -> "Stats":
        """Statistics as a kernel's statistics unit reports them: ``h_msb`` and the count ``n``.

        ``max_msb`` is the highest non-empty bin; ``h_lsb`` is all zeros and ``min_lsb`` NONE
        (not measured). ``n_nz`` is unknown and set to ``sum(h_msb)``, which leaves out the
        values 0 and -1 (no MSB). :func:`determine` only reads ``h_msb`` and ``n``, so it
        gives the same point as for the :func:`acquire` statistics of the same values.

        Examples
        --------
        >>> st = Stats.from_histogram([0, 0, 1, 0, 1, 0, 0, 0, 0, 2], 6)
        >>> st.max_msb, st.min_lsb, st.n, st.n_nz
        (9, -1, 6, 4)
        """
        h = _counts("h_msb", h_msb)
        nz = np.flatnonzero(h)
        top = int(nz[-1]) if nz.size else _NONE
        return cls(h, np.zeros_like(h), top, _NONE, _check_int("n", n), int(h.sum()))

    def merge(self, other: "Stats") -> "Stats":
        """Aggregate two sets of statistics (Alg 2-A step 3, aggregator 13): histograms and
        counts add, ``max_msb`` is the max, ``min_lsb`` the min of those that are not NONE.

        Examples
        --------
        >>> acquire([1000, 0]).merge(acquire([-700, 30, 5])) == acquire([1000, 0, -700, 30, 5])
        True
        """
        if not isinstance(other, Stats):
            raise InputError(f"other: is a {type(other).__name__}: must be a Stats")
        if other.bins != self.bins:
            raise InputError(f"other: has {other.bins} bins: must have {self.bins}, like self")
        lsbs = [x for x in (self.min_lsb, other.min_lsb) if x != _NONE]
        return Stats(self.h_msb + other.h_msb, self.h_lsb + other.h_lsb,
                     max(self.max_msb, other.max_msb), min(lsbs) if lsbs else _NONE,
                     self.n + other.n, self.n_nz + other.n_nz)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Stats):
            return NotImplemented
        return (np.array_equal(self.h_msb, other.h_msb) and np.array_equal(self.h_lsb, other.h_lsb)
                and (self.max_msb, self.min_lsb, self.n, self.n_nz)
                == (other.max_msb, other.min_lsb, other.n, other.n_nz))

    __hash__ = None


def acquire(values, bins: int = MAX_BINS) -> Stats:
    """Statistics of wide results (ACQUIRE, Alg 2-A), over all values of any shape.

    Parameters
    ----------
    values : array_like of int
        Wide results, ``|v| < 2**62``.
    bins : int
        Histogram size in ``[1, 64]``; every MSB and LSB must be below it.

    Examples
    --------
    >>> st = acquire([[1000, -700], [30, 5]], bins=12)
    >>> st.h_msb.tolist(), st.h_lsb.tolist()
    ([0, 0, 1, 0, 1, 0, 0, 0, 0, 2, 0, 0], [1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0])
    """
    v = _wide("values", values).reshape(-1)
    bins = _check_bins(bins)
    k, low = unsigned_msb(v), nz_lsb(v)
    worst = max(int(k.max(initial=_NONE)), int(low.max(initial=_NONE)))
    if worst >= bins:
        raise InputError(f"bins = {bins}: a value has an MSB or LSB at bit {worst}: must be "
                         f"more than {worst} (at most {MAX_BINS})")
    low = low[low >= 0]
    return Stats(msb_histogram(v, bins), np.bincount(low, minlength=bins).astype(np.int64),
                 int(k.max(initial=_NONE)), int(low.min(initial=bins)) if low.size else _NONE,
                 int(v.size), int(low.size))


# --------------------------------------------------------------------------- point and conversion

def _determine_args(bits, overflow_ratio, signed, f_prev, f_min, f_max):
    bits = _check_bits(bits)
    r = _check_real("overflow_ratio", overflow_ratio, 0.0, 1.0, lo_open=False, hi_open=True)
    signed = _check_bool("signed", signed)
    f_prev = None if f_prev is None else _check_int("f_prev", f_prev)
    f_min, f_max = _check_int("f_min", f_min), _check_int("f_max", f_max)
    if f_min > f_max:
        raise InputError(f"f_min = {f_min}, f_max = {f_max}: f_min must not exceed f_max")
    return bits, r, signed, f_prev, f_min, f_max


def determine(stats: Stats, f_in: int, bits: int, *, overflow_ratio: float = 0.0,
              signed: bool = True, f_prev: Optional[int] = None, f_min: int = -64,
              f_max: int = 64) -> int:
    """Fractional bits ``F_out`` of the output (DETERMINE, Alg 2-B; rule in the module docstring).

    Parameters
    ----------
    stats : Stats
        Statistics of the wide results (only ``h_msb`` and ``n`` are read).
    f_in : int
        Fractional bits of the wide results.
    bits : int
        Output width in ``[2, 32]``.
    overflow_ratio : float
        Fraction of the ``n`` values allowed to saturate, in ``[0, 1)``; 0 = max-based.
    signed : bool
        False for an unsigned output (one more magnitude bit).
    f_prev : int or None
        Position kept when there is nothing to learn (None: ``f_in``, i.e. no shift).
    f_min, f_max : int
        The result is clamped to ``[f_min, f_max]``.

    Examples
    --------
    >>> st = acquire([1000, -700, 30, 5])
    >>> determine(st, 8, 8), determine(st, 8, 8, signed=False), determine(st, 8, 8, f_max=4)
    (5, 6, 4)

    With ``overflow_ratio = 0.5`` two of the four values may saturate (1000 and -700), so
    ``top = 4`` (30) and ``s = -2``; 0.25 allows only one, which is not a whole bin:

    >>> determine(st, 8, 8, overflow_ratio=0.5), determine(st, 8, 8, overflow_ratio=0.25)
    (10, 5)
    >>> determine(acquire([0, -1]), 8, 8), determine(acquire([0, -1]), 8, 8, f_prev=3)
    (8, 3)
    """
    if not isinstance(stats, Stats):
        raise InputError(f"stats: is a {type(stats).__name__}: must be a Stats (see acquire)")
    f_in = _check_int("f_in", f_in)
    bits, r, signed, f_prev, f_min, f_max = _determine_args(bits, overflow_ratio, signed, f_prev,
                                                            f_min, f_max)
    h = stats.h_msb
    if int(h.sum()) == 0:
        f = f_in if f_prev is None else f_prev
    else:
        allowed = math.floor(Fraction(r) * stats.n)      # exact: most values allowed to saturate
        above = np.cumsum(h[::-1])[::-1]                 # above[k] = sum(h[k:])
        hit = np.flatnonzero(above > allowed)
        top = int(hit[-1]) if hit.size else 0
        s = top - (bits - 2) if signed else top - (bits - 1)
        f = f_in - s
    return int(min(max(f, f_min), f_max))


def convert(values, f_in: int, f_out: int, bits: int, *, rounding: str = "nearest_away",
            signed: bool = True) -> Tuple[np.ndarray, np.ndarray]:
    """Wide results at ``f_in`` -> ``bits``-bit integers at ``f_out`` (CONVERT, Alg 2-C).

    Returns ``(out, sat)``: int64 values of the shape of ``values`` and a bool array, True
    where saturation changed the value (rule in the module docstring).

    Examples
    --------
    >>> convert([1000, -700, 30, 5], 8, 5, 8, rounding="truncate")[0].tolist()
    [125, -88, 3, 0]
    >>> out, sat = convert([1000, -700, 30, -1], 8, 6, 8, signed=False)
    >>> out.tolist(), sat.tolist()
    ([250, 0, 8, 0], [False, True, False, False])
    """
    v = _wide("values", values)
    s = _check_int("f_in", f_in) - _check_int("f_out", f_out)
    bits = _check_bits(bits)
    return convert_shifted(v, s, bits, _check_rounding(rounding), _check_bool("signed", signed))


def convert_shifted(v, s, bits: int, rounding: str, signed: bool) -> Tuple[np.ndarray, np.ndarray]:
    """CONVERT's rule (module docstring) on wide integers ``v`` by a right shift ``s`` (an int
    or an array broadcast against ``v``, e.g. one per channel), arguments already checked:
    signed, ``shift_round_sat`` to ``bits``; unsigned, to ``bits + 1`` signed bits and then
    negatives become 0 and count as saturated. Returns ``(out, sat)``."""
    if signed:
        return shift_round_sat(v, s, bits, rounding)
    t, sat = shift_round_sat(v, s, bits + 1, rounding)
    neg = t < 0
    return np.where(neg, 0, t), sat | neg

