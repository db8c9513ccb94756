"""The code tables of the shift formats (:mod:`hlsnn.formats.shift`): every format's distinct
magnitudes with their canonical codes (:func:`table`), and the nearest-magnitude search the
quantizer uses (:func:`nearest`, held equal to :func:`nearest_reference`, the rule of the
shift module's docstring). The compiled quantizer (``hlsnn/native/shift_quant.c``) reads the
same tables.
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

__all__ = ["Table", "Buckets", "table", "nearest", "nearest_reference", "emax", "max_magnitude"]


def emax(exp_bits: int) -> int:
    return (1 << exp_bits) - 1


def max_magnitude(mode: str, exp_bits: int, delta: int) -> int:
    top = emax(exp_bits)
    if mode == "pot":
        return 1 << top
    return (1 << (top + delta)) + (1 << top)


class Table(NamedTuple):
    """Sorted distinct magnitudes of a format (0 first) and their canonical codes."""
    mags: np.ndarray        # float64, ascending, mags[0] == 0
    e1: np.ndarray          # uint8 per magnitude
    e2: np.ndarray
    s1: np.ndarray          # uint8; twohot: the canonical code's s1
    neg: np.ndarray         # bool; twohot: canonical inner value is negative
    max_mag: int
    buckets: "Buckets"     # the nearest-magnitude lookup (:func:`nearest`)


#: Mantissa bits of a float64 that select a bucket of :class:`Buckets` (with its exponent).
BUCKET_MANTISSA_BITS = 8


#: The base of a bucket with two thresholds or more (far above any index into the magnitudes).
DENSE = 1 << 40


class Buckets(NamedTuple):
    """A lookup for "how many rounding thresholds lie below ``v``" over the float64 bit
    pattern of ``v >= 0`` (monotone in ``v``): bucket ``b`` holds the patterns whose top bits
    (exponent and :data:`BUCKET_MANTISSA_BITS` mantissa bits) are ``first + b``."""
    thresholds: np.ndarray  # float64 midpoints (mags[i-1] + mags[i]) / 2, ascending (exact)
    shift: int              # pattern >> shift = bucket key
    first: int              # key of bucket 0 (that of the smallest threshold)
    base: np.ndarray        # intp per bucket: thresholds below the bucket's first pattern
                            # (DENSE for a dense bucket)
    cut: np.ndarray         # int64 per bucket: the pattern of its one threshold (int64 max: none)


def buckets(mags: np.ndarray) -> Buckets:
    thr = (mags[:-1] + mags[1:]) / 2             # integers' halves: exact
    bits = thr.view(np.int64)
    shift = 52 - BUCKET_MANTISSA_BITS
    first = int(bits[0] >> shift)
    last = int(np.array(mags[-1]).view(np.int64) >> shift)
    starts = np.arange(first, last + 2, dtype=np.int64) << shift
    edges = np.searchsorted(bits, starts, side="left")
    base, count = edges[:-1], np.diff(edges)
    cut = np.full(base.shape, np.iinfo(np.int64).max, np.int64)
    one = count == 1
    cut[one] = bits[base[one]]
    dense = count >= 2
    base = base.astype(np.intp)
    base[dense] = DENSE                          # marks the values to search exactly
    arrays = (thr, base, cut)
    for a in arrays:
        a.setflags(write=False)
    return Buckets(arrays[0], shift, first, *arrays[1:])


def nearest(tab: "Table", v: np.ndarray) -> np.ndarray:
    """Index into ``tab.mags`` of the nearest magnitude to each ``v >= 0`` (a C-contiguous
    float64 array), ties to the smaller one: the number of midpoints ``t`` with ``v > t``.

    The reference is :func:`nearest_reference` (:func:`numpy.searchsorted` between
    neighbours); this counts the same thresholds through :class:`Buckets`: one table
    lookup and one comparison of bit patterns per value, and an exact search only for the
    values in buckets that hold two thresholds or more."""
    bk = tab.buckets
    vb = v.reshape(-1).view(np.int64)            # v >= +0.0: patterns ordered as the values
    key = vb >> bk.shift
    key -= bk.first
    # a key below bucket 0 is below every threshold, one above the last beyond every one: clipped
    k = np.take(bk.base, key, mode="clip")
    k += vb > np.take(bk.cut, key, mode="clip")
    dense = np.flatnonzero(k >= DENSE)          # a dense bucket's base is the mark
    if dense.size:
        k[dense] = np.searchsorted(bk.thresholds, v.reshape(-1)[dense], side="left")
    return k.reshape(v.shape)


def nearest_reference(tab: "Table", v: np.ndarray) -> np.ndarray:
    """:func:`nearest` as the module docstring states it: :func:`numpy.searchsorted`
    between neighbours ``lo < v <= hi``, rounding to ``hi`` only when ``2 v > lo + hi``."""
    mags = tab.mags
    idx = np.clip(np.searchsorted(mags, v, side="left"), 1, len(mags) - 1)
    lo, hi = mags[idx - 1], mags[idx]
    return np.where(2.0 * v > lo + hi, idx, idx - 1)


@functools.lru_cache(maxsize=None)
def table(mode: str, exp_bits: int, delta: int, limit=None) -> Table:
    """The format's magnitudes and canonical codes; ``limit`` (a code limit, :mod:`hlsnn.formats.shift`'s
    "Code limit"): only the magnitudes up to it, and it is the table's ``max_mag``."""
    top = emax(exp_bits)
    best = {0: (0, 0, 0, False)}
    if mode == "pot":
        for e1 in range(top + 1):
            best[1 << e1] = (e1, 0, 0, False)
    else:
        # Lexicographic (e1, e2, s1) order: the first prefix reaching a magnitude is the
        # canonical one (s2 is then fixed by the sign, see the module docstring).
        for e1 in range(top + 1):
            for e2 in range(top + 1):
                for s1 in (0, 1):
                    inner = (1 << (e1 + delta)) + (-1) ** s1 * (1 << e2)
                    if inner != 0:
                        best.setdefault(abs(inner), (e1, e2, s1, inner < 0))
    keys = sorted(best)
    if limit is not None:
        keys = [k for k in keys if k <= limit]
    rows = [best[k] for k in keys]
    arrays = [np.array(keys, dtype=np.float64)]
    arrays += [np.array([r[i] for r in rows], dtype=np.uint8) for i in range(3)]
    arrays.append(np.array([r[3] for r in rows], dtype=bool))
    for a in arrays:
        a.setflags(write=False)
    top_mag = max_magnitude(mode, exp_bits, delta) if limit is None else keys[-1]
    return Table(*arrays, max_mag=top_mag, buckets=buckets(arrays[0]))
