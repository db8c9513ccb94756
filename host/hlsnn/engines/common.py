"""Helpers shared by the engines' emulators (the resource model is :mod:`hlsnn.resources`)."""
import threading

import numpy as np

_WORKSPACE = threading.local()


def workspace(name, shape, dtype=np.float64):
    """A reusable per-thread scratch array (the last shape asked for under each name), so the
    emulators do not page-fault fresh multi-MB temporaries; freed with the thread."""
    bufs = getattr(_WORKSPACE, "bufs", None)
    if bufs is None:
        bufs = _WORKSPACE.bufs = {}
    b = bufs.get(name)
    if b is None or b.shape != tuple(shape) or b.dtype != dtype:
        b = bufs[name] = np.empty(shape, dtype)
    return b


#: Rows of ``a`` per BLAS call of :func:`exact_matmul`.
GEMM_ROWS = 4096


def exact_matmul(a, bt, out):
    """``np.matmul(a, bt, out=out)`` in blocks of :data:`GEMM_ROWS` rows of ``a``, for products
    whose every partial sum is exact (integers, or dyadic values, below the float type's
    significand bound: the emulators' GEMMs). Each element of the result is then the exact sum
    whatever order BLAS adds in, so the blocks (whose rows stay in the caches) give the bits
    of one call. Returns ``out``."""
    rows = a.shape[0]
    if rows <= GEMM_ROWS:
        return np.matmul(a, bt, out=out)
    for r0 in range(0, rows, GEMM_ROWS):
        np.matmul(a[r0:r0 + GEMM_ROWS], bt, out=out[r0:r0 + GEMM_ROWS])
    return out


def times_pow2(v, e, out=None):
    """``np.ldexp(v, e)`` for one integer ``e``, with the same bits: a multiplication by
    ``2.0**e`` where that is a normal float64 (a product with a power of two is correctly
    rounded, as ldexp is, subnormal and overflowing results included), else ``np.ldexp``
    itself. numpy's ldexp calls the C library per element; the product is a vector loop."""
    e = int(e)
    if -1022 <= e <= 1023:
        return np.multiply(v, 2.0 ** e, out=out, dtype=np.float64)
    return np.ldexp(v, e, out=out) if out is not None else np.ldexp(v, e)


def round_into(v, rounding, out):
    """Round float64 ``v`` (exact dyadic values) to integers per ``rounding``, into ``out``:
    ``nearest_even`` (rint), ``truncate`` (floor), ``nearest_away`` (sign * (floor|v| +
    (frac >= 1/2)), where ``|v| - floor|v|`` is exact)."""
    if rounding == "nearest_even":
        return np.rint(v, out=out)
    if rounding == "truncate":
        return np.floor(v, out=out)
    a = np.abs(v)
    fl = np.floor(a)
    a -= fl
    fl += a >= 0.5
    return np.copysign(fl, v, out=out)


def largest_frac(amax: float, limit: float) -> int:
    """The largest integer F with ``amax * 2**F <= limit`` (0 when ``amax`` is 0): the finest
    power-of-two scale at which the largest magnitude still fits ``limit``."""
    if amax == 0:
        return 0
    f = int(np.floor(np.log2(limit / amax)))
    while amax * 2.0 ** (f + 1) <= limit:
        f += 1
    while amax * 2.0 ** f > limit:
        f -= 1
    return f


def compare_stats(expected, got):
    """Compare two statistics-unit histograms bin by bin for the cases' reports: ``(bins,
    mismatching bins, first mismatch)``, the first as ``{"index": ["stats", k], "expected":
    {"value", "raw"}, "got": {"value", "raw"}}`` (``raw``: the 32-bit counter in hex)."""
    e, g = np.asarray(expected, np.int64), np.asarray(got, np.int64)
    bad = e != g
    first = None
    if bad.any():
        k = int(np.argmax(bad))
        hx = lambda v: f"0x{int(v) & 0xFFFFFFFF:08x}"  # noqa: E731
        first = {"index": ["stats", k], "expected": {"value": int(e[k]), "raw": hx(e[k])},
                 "got": {"value": int(g[k]), "raw": hx(g[k])}}
    return int(bad.size), int(bad.sum()), first
