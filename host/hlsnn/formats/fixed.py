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

N% sampling (SELECT, Alg 2-D) -> :func:`sample_run`, :func:`sample_mask`
    An "operation data item" is one output element (SPECS A2.6). Along one axis, runs of
    ``a`` consecutive items start every ``b`` items (item ``i`` is kept iff
    ``i % b < a``); the mask is the same for every index of the other axes. ``a/b`` is
    ``Fraction(percent / 100).limit_denominator(64)``, the nearest fraction with ``b <= 64``
    (within ``1/128`` of ``percent/100``); if that is 0 (``percent`` below about 0.78) the
    sample is ``1/64`` instead, so it is never empty. With an explicit run length
    ``run = a``, ``b = max(a, round(100 * a / percent))``. Along an axis of length ``L`` the
    kept count ``c`` satisfies ``L*a/b <= c < L*a/b + a`` (never fewer than N%).

Embodiments (SPECS 3.3) -> :func:`run_e1` ... :func:`run_e4`, :class:`Result`
    ``op(mask)`` returns the wide results of ALL output items as an integer array of the
    output shape; ``mask`` is None (compute everything) or a bool array of that shape, and
    then only the True items are "computed": the other entries are never read and may hold
    anything. The runners count the computed items in :attr:`Result.items_computed`. For a
    deterministic ``op``, E1 and E3 give bit-identical results, and so do E2 and E4 for the
    same sample (and E2 at 100% equals E1). :func:`cost_model` is the fig. 15 timing model.
    E5 (Alg 2-E) -> :func:`select_e5`, :func:`run_e5`: per layer (or per operation type), the
    faster of E2 and E4 by their times, E2 on a tie.

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
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np

from hlsnn.errors import InputError
from hlsnn.primitives import ROUNDING_CODES, msb_histogram, nz_lsb, shift_round_sat, unsigned_msb

from ._validate import check_axis as _check_axis
from ._validate import check_int_range as _check_int_range
from ._validate import is_int as _is_int

__all__ = ["WIDE_LIMIT", "BITS_RANGE", "MAX_BINS", "MAX_PERIOD", "Stats", "Result", "Costs",
           "acquire", "determine", "convert", "sample_run", "sample_mask", "run_e1", "run_e2",
           "run_e3", "run_e4", "cost_model", "Choice", "select_e5", "run_e5"]

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
    h_msb, h_lsb : np.ndarray of int64, shape (bins,)
        Histograms of ``unsigned_msb`` and ``nz_lsb`` (read-only).
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
    rounding = _check_rounding(rounding)
    if _check_bool("signed", signed):
        return shift_round_sat(v, s, bits, rounding)
    t, sat = shift_round_sat(v, s, bits + 1, rounding)
    neg = t < 0
    return np.where(neg, 0, t), sat | neg


# --------------------------------------------------------------------------- N% sampling

def sample_run(percent, run: Optional[int] = None) -> Tuple[int, int]:
    """Run length ``a`` and period ``b`` of the N% sample (Alg 2-D; rule in the module docstring).

    Examples
    --------
    >>> sample_run(12.5), sample_run(20), sample_run(100), sample_run(0.5), sample_run(12.5, run=3)
    ((1, 8), (1, 5), (1, 1), (1, 64), (3, 24))
    """
    p = _check_real("percent", percent, 0.0, 100.0, lo_open=True, hi_open=False)
    if run is None:
        q = Fraction(p / 100).limit_denominator(MAX_PERIOD)
        if q == 0:
            q = Fraction(1, MAX_PERIOD)
        return q.numerator, q.denominator
    a = _check_int_range("run", run, 1, None)
    return a, max(a, round(100 * a / p))


def sample_mask(shape, percent, *, axis: int = -1, run: Optional[int] = None) -> np.ndarray:
    """Equal-interval N% selection of output items (Alg 2-D): True for the sampled items.

    Item ``i`` along ``axis`` is kept iff ``i % b < a`` with ``(a, b) = sample_run(percent,
    run)``; other axes are not subsampled.

    Examples
    --------
    >>> sample_mask((2, 10), 25, axis=1).astype(int)
    array([[1, 0, 0, 0, 1, 0, 0, 0, 1, 0],
           [1, 0, 0, 0, 1, 0, 0, 0, 1, 0]])
    """
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not dims or not all(_is_int(d) and d >= 0 for d in dims):
        raise InputError(f"shape = {shape!r}: must be a tuple of one or more ints >= 0")
    shape = tuple(int(d) for d in dims)
    ax = _check_axis(axis, len(shape))
    a, b = sample_run(percent, run)
    line = (np.arange(shape[ax]) % b) < a
    view = [1] * len(shape)
    view[ax] = shape[ax]
    return np.broadcast_to(line.reshape(view), shape).copy()


# --------------------------------------------------------------------------- embodiments

@dataclass(frozen=True, eq=False)
class Result:
    """What an embodiment runner returns: a dataclass, not a tuple (read ``r.out``,
    ``r.f_out``, ``r.stats``, ...).

    Attributes
    ----------
    out : np.ndarray of int64
        The converted outputs (output shape).
    f_out : int
        Their fractional bits.
    stats : Stats
        The statistics the point was chosen from (all items, or the sample).
    items_computed : int
        Output items the op computed in total (True mask items; the full size for ``None``).
    op_calls : int
        Number of times ``op`` was called.
    sat : np.ndarray of bool
        Saturation flags of ``out``.
    """
    out: np.ndarray
    f_out: int
    stats: Stats
    items_computed: int
    op_calls: int
    sat: np.ndarray = field(repr=False)


class _Runner:
    """Calls ``op``, checks its results and counts the computed items."""

    def __init__(self, op: Callable, shape=None):
        if not callable(op):
            raise InputError(f"op = {op!r}: must be callable as op(mask) -> wide int results")
        self.op, self.shape, self.items, self.calls = op, shape, 0, 0

    def __call__(self, mask) -> np.ndarray:
        r = self.op(mask)
        shape = np.shape(r)
        if self.shape is not None and shape != self.shape:
            raise InputError(f"op result: has shape {shape}: must be the output shape {self.shape}")
        r = _wide("op result", r, mask)
        self.shape = r.shape
        self.items += r.size if mask is None else int(np.count_nonzero(mask))
        self.calls += 1
        return r


def _prepare(f_in, bits, signed, rounding, bins, kw):
    unknown = set(kw) - {"overflow_ratio", "f_prev", "f_min", "f_max"}
    if unknown:
        raise InputError(f"{', '.join(sorted(unknown))}: unknown keyword(s): the runners take "
                         f"signed, rounding, bins, overflow_ratio, f_prev, f_min, f_max")
    _check_int("f_in", f_in)
    _determine_args(bits, kw.get("overflow_ratio", 0.0), signed, kw.get("f_prev"),
                    kw.get("f_min", -64), kw.get("f_max", 64))
    _check_rounding(rounding)
    _check_bins(bins)


def _result(runner, wide, stats, f_in, bits, signed, rounding, kw) -> Result:
    f_out = determine(stats, f_in, bits, signed=signed, **kw)
    out, sat = convert(wide, f_in, f_out, bits, rounding=rounding, signed=signed)
    return Result(out, f_out, stats, runner.items, runner.calls, sat)


def run_e1(op: Callable, f_in: int, bits: int, *, signed: bool = True,
           rounding: str = "nearest_away", bins: int = MAX_BINS, **kw) -> Result:
    """E1, two operations on all data: preceding op -> stats -> point; the main op computes
    everything again and is converted. ``kw``: :func:`determine`'s ``overflow_ratio``,
    ``f_prev``, ``f_min``, ``f_max``; ``signed`` goes to both DETERMINE and CONVERT."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    runner = _Runner(op)
    stats = acquire(runner(None), bins)
    return _result(runner, runner(None), stats, f_in, bits, signed, rounding, kw)


def run_e2(op: Callable, f_in: int, bits: int, percent, *, shape, axis: int = -1,
           run: Optional[int] = None, signed: bool = True, rounding: str = "nearest_away",
           bins: int = MAX_BINS, **kw) -> Result:
    """E2, two operations with N% statistics: the preceding op computes only the
    ``sample_mask(shape, percent, axis=axis, run=run)`` items, the point comes from their
    statistics, the main op computes everything. ``shape`` is the op's output shape."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    sample = sample_mask(shape, percent, axis=axis, run=run)
    runner = _Runner(op, sample.shape)
    stats = acquire(runner(sample)[sample], bins)
    return _result(runner, runner(None), stats, f_in, bits, signed, rounding, kw)


def run_e3(op: Callable, f_in: int, bits: int, *, signed: bool = True,
           rounding: str = "nearest_away", bins: int = MAX_BINS, **kw) -> Result:
    """E3, result saving: one operation on all data; the stored wide results give the
    statistics and are then converted (no recomputation)."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    runner = _Runner(op)
    wide = runner(None)
    return _result(runner, wide, acquire(wide, bins), f_in, bits, signed, rounding, kw)


def run_e4(op: Callable, f_in: int, bits: int, percent, *, shape, axis: int = -1,
           run: Optional[int] = None, signed: bool = True, rounding: str = "nearest_away",
           bins: int = MAX_BINS, **kw) -> Result:
    """E4, hybrid: the op computes the sample (as in :func:`run_e2`) and its wide results are
    stored; their statistics give the point; the op then computes the remaining items
    (``mask = ~sample``, skipped when nothing remains) and both parts are converted."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    sample = sample_mask(shape, percent, axis=axis, run=run)
    runner = _Runner(op, sample.shape)
    stored = runner(sample)
    stats = acquire(stored[sample], bins)
    wide = stored if sample.all() else np.where(sample, stored, runner(~sample))
    return _result(runner, wide, stats, f_in, bits, signed, rounding, kw)


# --------------------------------------------------------------------------- cost model

class Costs(NamedTuple):
    """Per-layer times of fig. 15 (#0 ... #4, indexable in that order)."""
    prev: float     #: #0: point from the previous iteration's statistics
    e1: float       #: #1: full preceding op + main op
    e2: float       #: #2: N% preceding op + main op
    e3: float       #: #3: result saving (wide results stored and re-read)
    e4: float       #: #4: N% saved + (100-N)% computed at the new point


def cost_model(t_prev: float, t_pre: float, t_store: float, percent: float) -> Costs:
    """The fig. 15 timing model (SPECS T2.1), times in any one unit.

    ``t_prev`` is a layer's time with the previous iteration's statistics (= the main op),
    ``t_pre`` the preceding op on all data, ``t_store`` the time of E3 (which transfers the
    wide results), ``N = percent / 100``::

        #0 = t_prev, #1 = t_pre + t_prev, #2 = N*t_pre + t_prev,
        #3 = t_store, #4 = N*t_store + (1 - N)*t_prev

    Examples
    --------
    >>> [round(t, 2) for t in cost_model(2.1, 2.0, 15.7, 12.5)]
    [2.1, 4.1, 2.35, 15.7, 3.8]
    """
    t0, tp, ts = (_check_real(name, t, 0.0, math.inf, lo_open=False, hi_open=True)
                  for name, t in (("t_prev", t_prev), ("t_pre", t_pre), ("t_store", t_store)))
    n = _check_real("percent", percent, 0.0, 100.0, lo_open=True, hi_open=False) / 100
    return Costs(t0, tp + t0, n * tp + t0, ts, n * ts + (1 - n) * t0)


# --------------------------------------------------------------------------- E5

class Choice(NamedTuple):
    """E5's decision for one layer: ``method`` (``"e2"`` or ``"e4"``) and the two mean times
    it compared (the layer's own, or its operation type's)."""
    method: str
    e2: float
    e4: float


def _mean_time(name, key, t) -> float:
    v = np.asarray(t, dtype=object).reshape(-1)
    if v.size == 0:
        raise InputError(f"{name}[{key!r}]: has no times: give one time or one per iteration 1..A")
    vals = [_check_real(f"{name}[{key!r}]", x, 0.0, math.inf, lo_open=False, hi_open=True) for x in v]
    return math.fsum(vals) / len(vals)


def select_e5(t_e2, t_e4, groups=None) -> dict:
    """E5's selection (Alg 2-E): the faster way of updating the radix point, per layer or
    per operation type. Returns ``{layer: Choice}``.

    Rules
        * ``t_e2[L]`` / ``t_e4[L]``: the times of E2 (update by two operations, N%
          statistics) and E4 (update by saving results) at layer ``L``: one number, or one per
          iteration ``1..A`` (numbers >= 0, finite). Both mappings have the same layers.
        * A layer's time of a method is the mean over its iterations (the source records the
          elapsed times until iteration A and averages them per layer).
        * Per layer (``groups`` None): ``method = "e4"`` iff ``mean(t_e4) < mean(t_e2)``,
          else ``"e2"``: a tie goes to E2, which stores no wide results (the source leaves
          ties open).
        * Per operation type (the modification; ``groups`` maps every layer to its type,
          e.g. ``"conv"``): a type's time of a method is the mean of its layers' means, the
          same rule decides, and every layer of the type gets the type's :class:`Choice`.
        * From iteration A+1 on, a layer runs the chosen method (:func:`run_e5`).

    Notes
    -----
    Fig. 17 of the source shows every layer choosing E2 per layer while the convolutions
    choose E4 per type. Under this rule that cannot come from one set of times (a mean of
    layers that each have ``e2 < e4`` keeps ``e2 < e4``), and the figure's times are not in
    the text, so that example is not reproduced.

    Examples
    --------
    >>> c = select_e5({"conv1": [2.4, 2.3], "bn1": 1.0}, {"conv1": [1.9, 2.1], "bn1": 1.0})
    >>> c["conv1"].method, c["conv1"].e4, c["bn1"].method
    ('e4', 2.0, 'e2')
    >>> select_e5({"a": 3, "b": 1}, {"a": 1, "b": 2}, groups={"a": "conv", "b": "conv"})["b"]
    Choice(method='e4', e2=2.0, e4=1.5)
    """
    if not isinstance(t_e2, dict) or not isinstance(t_e4, dict) or set(t_e2) != set(t_e4) or not t_e2:
        raise InputError(f"t_e2, t_e4: layers {sorted(map(str, t_e2 or {}))} and {sorted(map(str, t_e4 or {}))}: "
                         f"must be two non-empty mappings of the same layers to times")
    m2 = {k: _mean_time("t_e2", k, v) for k, v in t_e2.items()}
    m4 = {k: _mean_time("t_e4", k, v) for k, v in t_e4.items()}
    if groups is None:
        keys = {k: k for k in m2}
    else:
        missing = [k for k in m2 if k not in groups] if isinstance(groups, dict) else list(m2)
        if missing:
            raise InputError(f"groups: has no operation type for layer(s) {', '.join(map(str, missing))}: "
                             f"must map every layer to its type")
        keys = {k: groups[k] for k in m2}
    choices = {}
    for g in dict.fromkeys(keys.values()):
        members = [k for k in m2 if keys[k] == g]
        e2 = math.fsum(m2[k] for k in members) / len(members)
        e4 = math.fsum(m4[k] for k in members) / len(members)
        choices[g] = Choice("e4" if e4 < e2 else "e2", e2, e4)
    return {k: choices[keys[k]] for k in m2}


def run_e5(op: Callable, f_in: int, bits: int, percent, *, shape, t_prev: float, t_pre: float,
           t_store: float, axis: int = -1, run: Optional[int] = None, signed: bool = True,
           rounding: str = "nearest_away", bins: int = MAX_BINS, **kw) -> Tuple[Choice, Result]:
    """E5 at one layer after iteration A: :func:`cost_model` gives the times of E2 (#2) and
    E4 (#4) from ``t_prev``, ``t_pre``, ``t_store`` and ``N = percent / 100``;
    :func:`select_e5` picks the faster (E2 on a tie), and that runner (:func:`run_e2` or
    :func:`run_e4`, same arguments) runs. Returns ``(Choice, Result)``; the result is the
    chosen runner's bit for bit, and for one sample E2's equals E4's: the choice changes the
    time, never the bits.

    Examples
    --------
    Fig. 15 (SPECS T2.1): transfer-bound, so E2 (2.35) beats E4 (3.8).

    >>> import numpy as np
    >>> wide = np.array([[1000, -700, 30, 5]] * 8)
    >>> choice, r = run_e5(lambda mask: wide, 8, 8, 12.5, shape=wide.shape, axis=0,
    ...                    t_prev=2.1, t_pre=2.0, t_store=15.7)
    >>> choice.method, round(choice.e2, 2), round(choice.e4, 2), r.f_out, r.out[0].tolist()
    ('e2', 2.35, 3.8, 5, [125, -88, 4, 1])
    """
    costs = cost_model(t_prev, t_pre, t_store, percent)
    choice = select_e5({0: costs.e2}, {0: costs.e4})[0]
    runner = run_e2 if choice.method == "e2" else run_e4
    return choice, runner(op, f_in, bits, percent, shape=shape, axis=axis, run=run, signed=signed,
                          rounding=rounding, bins=bins, **kw)
