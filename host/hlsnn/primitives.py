"""Bit-exact integer primitives shared by every engine's emulator.

Each function here has a twin of the same name in ``hls/include/hlsnn/primitives.h``; the
C++ follows these docstrings, which are the specification. All functions are vectorized
over numpy ``int64`` arrays. Integer conventions (SPECS.md §0): two's complement, bit 0 is
the LSB, ``>>`` on signed values is an arithmetic (floor) shift.
"""
from __future__ import annotations

import numpy as np

#: Rounding modes of :func:`shift_round_sat`, with the integer code the kernels use.
ROUNDING_CODES = {"nearest_even": 0, "nearest_away": 1, "truncate": 2}


def msb_index(u):
    """Index of the highest set bit of a positive integer: floor(log2(u)) (SPECS P0.1).

    Parameters
    ----------
    u : array_like of int64, all > 0 where the result is used

    Returns
    -------
    np.ndarray of int64
        ``floor(log2(u))`` for ``u > 0`` and ``-1`` for ``u == 0``.

    Notes
    -----
    Exact for every ``0 <= u < 2**63``: ``np.frexp`` of the float64 value would round ``u``
    up to a power of two when ``u`` has more than 53 significant bits, so the result is
    corrected by comparing ``u`` with ``1 << result``.

    Examples
    --------
    >>> msb_index([1, 2, 3, 255, 256, 0]).tolist()
    [0, 1, 1, 7, 8, -1]
    """
    u = np.asarray(u, dtype=np.int64)
    if u.size and u.min() >= 0 and u.max() < (1 << 53):
        # every value converts to float64 exactly: its exponent field is its MSB index plus
        # 1023 (a zero's field is 0, which the maximum maps to -1)
        return np.maximum((u.astype(np.float64).view(np.int64) >> 52) - 1023, -1)
    _, e = np.frexp(u.astype(np.float64))
    r = e.astype(np.int64) - 1
    # float64 rounding may have bumped r by one for values just below a power of two
    # (2**63 itself: an int64 below it rounded up, as INT64_MAX does)
    too_big = (r == 63) | ((r >= 0) & (r < 63) & (np.left_shift(np.int64(1), np.clip(r, 0, 62)) > u))
    r = np.where(too_big, r - 1, r)
    return np.where(u > 0, r, -1)


def unsigned_msb(v):
    """Most significant bit that differs from the sign bit (SPECS P0.3, source 002).

    ``u = v`` for ``v >= 0`` and ``u = ~v = -v - 1`` for ``v < 0``; the result is
    ``msb_index(u)``, or ``-1`` (NONE) when ``u == 0``, i.e. for ``v`` in ``{0, -1}``. A value
    with ``unsigned_msb(v) = k`` fits a signed integer of ``k + 2`` bits and no fewer.

    Examples
    --------
    >>> unsigned_msb([1000, -700, 30, 5, 0, -1, -2, 127, -128, -129]).tolist()
    [9, 9, 4, 2, -1, -1, 0, 6, 6, 7]
    """
    v = np.asarray(v, dtype=np.int64)
    return msb_index(v ^ (v >> 63))                # ~v for v < 0 (v >> 63 is all ones), else v


def nz_lsb(v):
    """Index of the lowest set bit of ``v`` (count of trailing zeros; SPECS P0.4), ``-1``
    (NONE) for ``v == 0``. Two's complement: ``-v`` has the same lowest set bit as ``v``.

    Examples
    --------
    >>> nz_lsb([1000, -700, 30, 5, 0, -1, -128]).tolist()
    [3, 2, 1, 0, -1, 0, 7]
    """
    v = np.asarray(v, dtype=np.int64)
    low = v & -v                                   # the lowest set bit alone (2^63 for INT64_MIN)
    return np.where(v == np.iinfo(np.int64).min, 63, msb_index(np.where(low < 0, 0, low)))


def msb_histogram(v, bins):
    """The statistics unit of every engine's output stage (source 002, Alg 2-A step 2):
    ``hist[k]`` = the number of values with ``unsigned_msb(v) == k``, for ``k`` in
    ``[0, bins)``; values with NONE (0 and -1) are not counted. Counters are 32 bits and
    saturate at ``2**32 - 1``, as in the kernels.

    Arrays of :data:`_COMPILED_MIN` values or more are counted by a compiled twin
    (``hlsnn/native/msb_hist.c``, the same counts; ``tests/test_primitives.py``) when the
    compiled helpers are available; the numpy code below is the specification.

    Examples
    --------
    >>> msb_histogram([1000, -700, 30, 5, 0, -1], 12).tolist()
    [0, 0, 1, 0, 1, 0, 0, 0, 0, 2, 0, 0]
    """
    v = np.ascontiguousarray(np.asarray(v, dtype=np.int64).reshape(-1))
    counts = _msb_counts_compiled(v) if v.size >= _COMPILED_MIN else None
    if counts is not None:          # the compiled twin (hlsnn/native/msb_hist.c): the same counts
        top = int(np.flatnonzero(counts)[-1]) if counts.any() else -1
        if top >= bins:
            raise ValueError(f"a value has unsigned_msb {top}, outside the {bins} bins")
        h = np.zeros(bins, np.int64)
        h[:min(bins, 64)] = counts[:bins]
        return np.minimum(h, (1 << 32) - 1)
    k = unsigned_msb(v)
    if k.size and int(k.max()) >= bins:
        raise ValueError(f"a value has unsigned_msb {int(k.max())}, outside the {bins} bins")
    h = np.bincount(k[k >= 0], minlength=bins)[:bins].astype(np.int64)
    return np.minimum(h, (1 << 32) - 1)


#: arrays with fewer values take the numpy path of :func:`msb_histogram` (a compiled call costs
#: some microseconds)
_COMPILED_MIN = 4096


def _msb_counts_compiled(v):
    """The 64 counts of :func:`msb_histogram` (index of the highest set bit of ``v ^ (v >> 63)``,
    0 and -1 not counted) of a C-contiguous int64 ``v`` by the compiled twin
    ``hlsnn/native/msb_hist.c`` (parts of a large array in threads), or None when the compiled
    helpers are unavailable (:func:`hlsnn.native.load`): the numpy path then runs."""
    import ctypes
    from . import native
    from .native import parallel
    lib = native.load("msb_hist")
    if lib is None:
        return None
    fn = lib.hlsnn_msb_counts
    if not getattr(lib, "_hlsnn_typed", False):
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
        lib._hlsnn_typed = True
    ranges = parallel.parts(v.size, 1 << 18)
    parts = np.zeros((len(ranges), 64), np.int64)

    row = {r[0]: j for j, r in enumerate(ranges)}

    def part(i0, i1):
        fn(v[i0:].ctypes, i1 - i0, parts[row[i0]].ctypes)
    parallel.run(part, ranges)
    return parts.sum(axis=0)


def shift_round_sat(v, s, out_bits, rounding="nearest_even"):
    """Shift a wide signed integer right by ``s`` bits, round, and saturate to ``out_bits``.

    ``t = round(v / 2**s)`` then clamp to ``[-2**(out_bits-1), 2**(out_bits-1) - 1]``
    (SPECS P0.5). A negative ``s`` is an exact left shift by ``-s`` (then saturated).

    Parameters
    ----------
    v : array_like of int64
        Values, ``|v| < 2**62``.
    s : array_like of int
        Shift amounts, broadcast against ``v``; any integer.
    out_bits : int
        Width of the signed result, 2 … 32.
    rounding : {"nearest_even", "nearest_away", "truncate"}
        Applies when ``s > 0`` and bits are dropped:

        * ``nearest_even``: round half to even.
        * ``nearest_away``: round half away from zero.
        * ``truncate``: floor (toward −∞), i.e. the arithmetic shift ``v >> s``.

    Returns
    -------
    t : np.ndarray of int64
        The rounded, saturated values.
    sat : np.ndarray of bool
        True where saturation changed the value.

    Notes
    -----
    Shifts larger than 63 behave as the limit: the quotient is 0 (or −1 for ``truncate`` of
    a negative value); nearest modes give 0 because ``|v| < 2**62 <= 2**(s-1)``.
    A left shift saturates whenever ``v * 2**(-s)`` is outside the output range; it is
    evaluated without overflow.

    Examples
    --------
    >>> t, sat = shift_round_sat([5, 6, 7, -5, -6], 1, 8, "nearest_even")
    >>> t.tolist()
    [2, 3, 4, -2, -3]
    >>> shift_round_sat([5, -5], 1, 8, "nearest_away")[0].tolist()
    [3, -3]
    >>> shift_round_sat([5, -5], 1, 8, "truncate")[0].tolist()
    [2, -3]
    >>> shift_round_sat([300, 1], -1, 8)[0].tolist()
    [127, 2]
    """
    if rounding not in ROUNDING_CODES:
        raise ValueError(f"rounding = {rounding!r}: must be one of {', '.join(ROUNDING_CODES)}")
    v = np.asarray(v, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    v, s = np.broadcast_arrays(v, s)
    lo, hi = -(1 << (out_bits - 1)), (1 << (out_bits - 1)) - 1

    # right shift (s > 0), s limited to 63 (same result for any larger s, see Notes)
    sr = np.clip(s, 1, 63)
    q = np.right_shift(v, sr)                           # floor(v / 2^s)
    if rounding != "truncate":
        rem = v - np.left_shift(q, sr)                  # 0 <= rem < 2^s (sr < 63, no overflow)
        half = np.left_shift(np.int64(1), sr - 1)
        up = rem > half
        if rounding == "nearest_even":
            up |= (rem == half) & ((q & 1) == 1)
        else:  # nearest_away: a tie rounds up for v >= 0, down (toward -inf = away) for v < 0
            up |= (rem == half) & (v >= 0)
        q = q + up
    right = q

    # left shift (s <= 0): v * 2^ls fits iff -2^(B-1-ls) <= v < 2^(B-1-ls)
    ls = np.clip(-s, 0, out_bits)
    room = np.clip(out_bits - 1 - ls, 0, 62)
    bound = np.left_shift(np.int64(1), room)
    fits = (ls < out_bits) & (v >= -bound) & (v < bound)
    fits |= v == 0
    left = np.where(fits, np.left_shift(np.where(fits, v, 0), np.where(fits, ls, 0)),
                    np.where(v > 0, hi, lo))
    left_sat = ~fits

    t = np.where(s > 0, right, left)
    sat = np.where(s > 0, (t > hi) | (t < lo), left_sat)
    return np.clip(t, lo, hi), sat


def saturate(v, bits):
    """Clamp ``v`` to the signed ``bits``-bit range ``[-2**(bits-1), 2**(bits-1)-1]``."""
    return np.clip(np.asarray(v, dtype=np.int64), -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def isqrt(d):
    """Integer square root ``floor(sqrt(d))`` of non-negative int64 values ``d < 2**62``.

    Notes
    -----
    The float64 estimate is corrected by at most a few steps on each side, so the result is
    exact; the C++ twin computes it bit by bit (one result bit per iteration).

    Examples
    --------
    >>> isqrt([0, 1, 3, 4, 15, 16, (1 << 58) - 1]).tolist()
    [0, 1, 1, 2, 3, 4, 536870911]
    """
    d = np.asarray(d, dtype=np.int64)
    r = np.floor(np.sqrt(d.astype(np.float64))).astype(np.int64)
    for _ in range(2):
        r = np.where(r * r > d, r - 1, r)
        r = np.where((r + 1) * (r + 1) <= d, r + 1, r)
    return r
