"""The compiled twins of :mod:`.floatgemm`'s per-element passes (``hlsnn/native/shift_quant.c``:
portable C, and AVX2 versions of the loops chosen at run time), run on row ranges in parallel
threads (:mod:`hlsnn.native.parallel`) when an array is large (:data:`MIN_ELEMS`).

Each function here gives the bits of a numpy original, which stays the specification:

* :func:`extremes`: ``x.max()``, ``x.min()`` (and whether every value is finite);
* :func:`activations`: floatgemm's ``rint(ldexp(x, fx))`` into the GEMM operand, with its
  column of ones;
* :func:`weights`: :func:`hlsnn.formats.shift._quantize_values_into` (scale exponents and
  code values: the nearest magnitude through the same buckets, or by arithmetic for PoT and
  for two-hot at delta 0, :func:`_table`);
* :func:`col_extremes`: ``v.max(axis=0)``, ``v.min(axis=0)``;
* :func:`requantize`: floatgemm's ReLU, then :func:`.emulator.requantize` with
  ``dequantize=fy`` and ``stats=False``.

:func:`lib` is None when :func:`hlsnn.native.load` is (``HLSNN_NATIVE=0``, no C compiler, a
failed compile); floatgemm then runs its numpy code. ``tests/engines/shift_mac/test_compiled.py``
holds each twin equal to its original.
"""
from __future__ import annotations

import ctypes
import functools
from typing import NamedTuple, Optional

import numpy as np

from ... import native
from ...formats import shift_codes
from ...native import parallel
from ...primitives import ROUNDING_CODES
from .emulator import wide_bound

#: Elements per thread at least (smaller calls run in one thread): the weights' codes and the
#: requantization ...
MIN_ELEMS = 1 << 19
#: ... and the memory-bound passes, for which a hand-off to a pool thread (tens to hundreds of
#: microseconds right after a BLAS call) costs more than it saves below this size.
MIN_ELEMS_CHEAP = 1 << 20
#: Elements per chunk of rows that the threads of :func:`inputs` and :func:`requantize` take
#: in turn (``shift_quant.c``, ``claim``).
CHUNK_ELEMS = 1 << 13

_P, _I64, _F64, _INT = ctypes.c_void_p, ctypes.c_int64, ctypes.c_double, ctypes.c_int
_SIGNATURES = {
    "hlsnn_shift_isa": (_INT, [_INT]),
    "hlsnn_shift_extremes": (_INT, [_P, _I64, _I64, _I64, _P]),
    "hlsnn_shift_act": (None, [_P, _I64, _I64, _I64, _F64, _P, _I64]),
    "hlsnn_shift_weights": (_I64, [_P, _I64, _I64, _I64, _P, _I64, _P, _P, _P, _P, _I64, _I64, _I64,
                                   _F64, _I64, _I64, _P, _I64, _F64, _F64, _P, _I64,
                                   _I64, _P, _I64, _I64, _I64, _F64, _P, _I64, _P]),
    "hlsnn_shift_col_extremes": (None, [_P, _I64, _I64, _I64, _P, _P]),
    "hlsnn_shift_requant": (_I64, [_P, _I64, _I64, _I64, _P, _I64, _P, _P, _P, _INT, _INT, _INT, _F64,
                                   _F64, _F64, _P, _I64]),
}


def lib():
    """The loaded ``shift_quant`` library with its signatures set, or None (the numpy path)."""
    so = native.load("shift_quant")
    if so is not None and not getattr(so, "_hlsnn_typed", False):
        for name, (res, args) in _SIGNATURES.items():
            fn = getattr(so, name)
            fn.restype, fn.argtypes = res, args
        so._hlsnn_typed = True
    return so


def rows_view(a):
    """``a`` itself when the helpers can read it in place (2-D float64, aligned, unit column
    stride, a row stride of whole elements), else a C-contiguous copy."""
    if a.dtype == np.float64 and a.ndim == 2 and a.flags.aligned and (a.strides[1] == 8 or a.shape[1] <= 1) \
            and a.strides[0] % 8 == 0:
        return a
    return np.ascontiguousarray(a, dtype=np.float64)


def _ld(a):
    return a.strides[0] // 8


def _at(a, row):
    """The C pointer to row ``row`` of ``a`` as an argument that owns ``a`` (numpy's
    ``.ctypes`` of a view): the array lives as long as the call that holds it. Never pass a bare
    ``.ctypes.data`` address: nothing keeps its array alive (``tests/test_ctypes_buffers.py``)."""
    return a[row:].ctypes


def _ranges(a, min_elems=None):
    min_elems = MIN_ELEMS if min_elems is None else min_elems
    if a.shape[0] * a.shape[1] < 2 * min_elems:          # one thread (without asking how many there are)
        return [(0, a.shape[0])]
    return parallel.parts(a.shape[0], max(1, min_elems // max(1, a.shape[1])))


def extremes(so, x):
    """``(x.max(), x.min())`` of a non-empty :func:`rows_view` ``x``; NaN for both when a value
    is NaN or infinite (numpy's max/min would show NaN or an infinity)."""
    ld, k = _ld(x), x.shape[1]

    def part(r0, r1):
        ext = np.empty(2)
        bad = so.hlsnn_shift_extremes(_at(x, r0), r1 - r0, k, ld, ext.ctypes)
        return ext, bad
    res = parallel.run(part, _ranges(x, MIN_ELEMS_CHEAP))
    if any(bad for _, bad in res):
        return float("nan"), float("nan")
    return max(float(e[0]) for e, _ in res), min(float(e[1]) for e, _ in res)


def activations(so, x, fx, out):
    """``out[:, :k] = rint(ldexp(x, fx))``, ``out[:, k] = 1`` for ``|fx| <= 1022``."""
    assert -1022 <= fx <= 1022 and out.shape == (x.shape[0], x.shape[1] + 1)
    scale = float(np.ldexp(1.0, fx))
    xl, ol, k = _ld(x), _ld(out), x.shape[1]
    parallel.run(lambda r0, r1: so.hlsnn_shift_act(_at(x, r0), r1 - r0, k, xl, scale, _at(out, r0), ol),
                 _ranges(x, MIN_ELEMS_CHEAP))


#: ``hlsnn_shift_weights``' rules: the buckets, or arithmetic for PoT and two-hot at delta 0.
_RULE_BUCKETS, _RULE_POT, _RULE_TWOHOT0 = 0, 1, 2
#: Bits of a packed bucket's threshold field (:func:`_table`).
_CUT_BITS = 15
#: Bits of a packed bucket's magnitude fields: magnitudes below ``2**24``.
_MAG_BITS = 24


class _Lookup(NamedTuple):
    """The format's nearest-magnitude lookup as ``hlsnn_shift_weights`` reads it."""
    mags: np.ndarray      # float64 magnitudes, ascending, 0 first
    thr: np.ndarray       # float64 thresholds (midpoints), ascending
    tb: np.ndarray        # int64 (nb + 1, 2): per bucket its one threshold's pattern (int64 max:
                          # none, -1: two or more) and the count of thresholds below its first
                          # pattern; a closing bucket
    nb: int
    shift: int
    first: int
    max_mag: float
    L: int                # bit length of max_mag
    rule: int             # 1: PoT, 2: two-hot at delta 0 (by arithmetic, shift_quant.c), 0: the buckets
    packed: Optional[np.ndarray]   # uint64 per bucket (shift_quant.c, weights_row_avx2), or None
    g: int
    vlo: float            # the value of bucket 0's first pattern
    vhi: float            # the value of the last bucket's last pattern
    args: tuple           # hlsnn_shift_weights' arguments from mags to vhi (the arrays' addresses)


@functools.lru_cache(maxsize=None)
def _table(mode, exp_bits, delta):
    """The format's magnitudes, thresholds and buckets (those of
    :class:`hlsnn.formats.shift_codes.Buckets`) as the C helper reads them (:class:`_Lookup`), and the same buckets packed in one word each where
    the format allows it: magnitudes that are integers below ``2**24`` and every threshold's
    pattern a multiple of ``2**g`` past its bucket's first pattern, ``g = shift - 15``; the
    word is ``C << 48 | hi << 24 | lo`` (``shift_quant.c``, ``weights_row_avx2``)."""
    tab = shift_codes.table(mode, exp_bits, delta)
    bk = tab.buckets
    thr = np.ascontiguousarray(bk.thresholds, np.float64)
    mags = np.ascontiguousarray(tab.mags, np.float64)
    nb = bk.base.size
    starts = (np.arange(nb + 1, dtype=np.int64) + bk.first) << bk.shift
    edges = np.searchsorted(thr.view(np.int64), starts, side="left")
    count = np.diff(edges)
    tb = np.empty((nb + 1, 2), np.int64)
    tb[:, 1] = edges
    tb[:-1, 0] = np.where(count == 0, np.iinfo(np.int64).max, -1)
    tb[:-1, 0][count == 1] = thr.view(np.int64)[edges[:-1][count == 1]]
    tb[-1, 0] = -1
    g = bk.shift - _CUT_BITS
    one = count == 1
    low = tb[:-1, 0][one] - starts[:-1][one]          # a threshold's pattern past its bucket's first
    packed = None
    if g >= 0 and np.array_equal(mags, np.rint(mags)) and mags[-1] < 1 << _MAG_BITS \
            and not (low & ((1 << g) - 1)).any():
        base = edges[:-1]
        lo = mags[base].astype(np.uint64)
        hi = lo.copy()
        hi[one] = mags[base[one] + 1].astype(np.uint64)
        cut = np.full(nb, 1 << _CUT_BITS, np.uint64)  # none: above every ceil(l / 2**g)
        cut[one] = (low >> g).astype(np.uint64)
        cut[count >= 2] = 0xFFFF                      # two or more: searched by the scalar code
        packed = (cut << np.uint64(48)) | (hi << np.uint64(_MAG_BITS)) | lo
    vlo, vhi = starts[:1].view(np.float64)[0], (starts[-1:] - 1).view(np.float64)[0]
    emax = (1 << exp_bits) - 1
    if mode == "pot":                                 # 0, 1, 2, 4, ..., 2**emax
        rule = _RULE_POT
        assert np.array_equal(mags, np.concatenate([[0.0], np.ldexp(1.0, np.arange(emax + 1))]))
    elif delta == 0:                                  # |2**a +- 2**b|, a, b in [0, emax]
        rule = _RULE_TWOHOT0
        e = np.ldexp(1.0, np.arange(emax + 1))
        both = np.concatenate([(e[:, None] + e).ravel(), (e[:, None] - e).ravel()])
        assert np.array_equal(mags, np.unique(np.abs(both)))
    else:
        rule = _RULE_BUCKETS
    max_mag, L = float(tab.max_mag), int(tab.max_mag).bit_length()
    args = (mags.ctypes, thr.ctypes, tb.ctypes, nb, bk.shift, bk.first, max_mag, L, rule,
            None if packed is None else packed.ctypes, g, float(vlo), float(vhi))
    return _Lookup(mags, thr, tb, nb, bk.shift, bk.first, max_mag, L, rule, packed, g, float(vlo), float(vhi), args)


def weights(so, mode, w, exp_bits, delta, out):
    """``shift._quantize_values_into(mode, w, exp_bits, delta, out)`` for a :func:`rows_view`
    ``w`` and an ``out`` with unit column stride: the scale exponents (int32 ``(N, 1)``), or
    None when a value is NaN or infinite (the numpy quantizer then raises its error)."""
    return inputs(so, None, mode, w, exp_bits, delta, out)[1]


def _shared(a):
    """The threads of one call of a row-claiming helper (:data:`MIN_ELEMS` elements each at
    least), its row counter and chunk: ``(threads, counter, chunk)``."""
    threads = len(_ranges(a))
    return threads, np.zeros(1, np.int64), max(1, CHUNK_ELEMS // max(1, a.shape[1]))


#: ``hlsnn_shift_weights``' side jobs.
_JOB_NONE, _JOB_EXTREMES, _JOB_ACT = 0, 1, 2
_NO_JOB = (_JOB_NONE, None, 0, 0, 0, 0.0, None, 0, None)


def inputs(so, x, mode, w, exp_bits, delta, out, act=None):
    """``(extremes(so, x), weights(so, mode, w, exp_bits, delta, out), fx)`` (``x`` None: no
    extremes). ``act = (frac, xf)``: then also :func:`activations` ``(so, x, fx, xf)`` with
    ``fx = frac(xmax, xmin)`` unless that is None; ``fx`` is returned (None: not run).

    In one thread, the passes over ``x`` run in step with the weights' rows (the C helper's
    side job): the extremes beside the first half of them, the activations beside the
    second. In several, the calling thread reads ``x`` first, then takes rows of ``w`` with
    the other threads until none is left."""
    t = _table(mode, exp_bits, delta)
    n, k = w.shape
    F = np.empty((n, 1), np.int32)
    threads, counter, chunk = _shared(w)
    ext = np.empty(3)
    if threads == 1 and x is not None and x.size > 0:
        return _inputs_in_step(so, x, w, out, F, t, ext, act)
    args = (w.ctypes, n, k, _ld(w), out.ctypes, _ld(out), F.ctypes) + t.args \
        + (counter.ctypes, chunk) + _NO_JOB
    done = [None]

    def part(i):
        bad_x = 0
        if i == 0 and x is not None:
            bad_x = so.hlsnn_shift_extremes(x.ctypes, x.shape[0], x.shape[1], _ld(x), ext.ctypes)
            fx = act[0](float(ext[0]), float(ext[1])) if act is not None and not bad_x else None
            if fx is not None:
                activations(so, x, fx, act[1])
                done[0] = fx
        return bad_x, so.hlsnn_shift_weights(*args)
    res = parallel.run(part, [(i,) for i in range(threads)])
    xext = None
    if x is not None:
        xext = (float("nan"), float("nan")) if res[0][0] else (float(ext[0]), float(ext[1]))
    return xext, (None if any(b for _, b in res) else F), done[0]


def _inputs_in_step(so, x, w, out, F, t, ext, act):
    """:func:`inputs` in the calling thread: two calls of the weights' helper, on the first and
    the second half of the rows of ``w``, with the extremes and then the activations of ``x``."""
    n, k = w.shape
    half = n // 2
    xrows, xcols, xl = x.shape[0], x.shape[1], _ld(x)
    wl, ol = _ld(w), _ld(out)
    # the row counters: an array this frame holds for the length of the calls (never a temporary's address)
    counters = np.zeros(2, np.int64)
    bad = so.hlsnn_shift_weights(w.ctypes, half, k, wl, out.ctypes, ol, F.ctypes, *t.args, _at(counters, 0), 1 << 30,
                                 _JOB_EXTREMES, x.ctypes, xrows, xcols, xl, 0.0, None, 0, ext.ctypes)
    bad_x = ext[2] != 0
    fx = act[0](float(ext[0]), float(ext[1])) if act is not None and not bad_x else None
    job = _NO_JOB if fx is None else (_JOB_ACT, x.ctypes, xrows, xcols, xl, float(np.ldexp(1.0, fx)),
                                      act[1].ctypes, _ld(act[1]), None)
    assert fx is None or (-1022 <= fx <= 1022 and act[1].shape == (xrows, xcols + 1))
    bad += so.hlsnn_shift_weights(_at(w, half), n - half, k, wl, _at(out, half), ol, _at(F, half),
                                  *t.args, _at(counters, 1), 1 << 30, *job)
    xext = (float("nan"), float("nan")) if bad_x else (float(ext[0]), float(ext[1]))
    return xext, (None if bad else F), fx


def col_extremes(so, v):
    """``(v.max(axis=0), v.min(axis=0))`` of a non-empty :func:`rows_view` ``v``."""
    ld, n = _ld(v), v.shape[1]

    def part(r0, r1):
        ext = np.empty((2, n))
        so.hlsnn_shift_col_extremes(_at(v, r0), r1 - r0, n, ld, ext[0].ctypes, ext[1].ctypes)
        return ext
    res = parallel.run(part, _ranges(v, MIN_ELEMS_CHEAP))
    ext = res[0]
    for e in res[1:]:
        np.maximum(ext[0], e[0], out=ext[0])
        np.minimum(ext[1], e[1], out=ext[1])
    return ext[0], ext[1]


def requantizes(p):
    """Whether :func:`requantize` applies to these parameters (the output range within
    ``+-2**50``: the C helper's rounding shortcut, ``shift_quant.c``)."""
    return p["act_bits"] <= 48 and p["rounding"] in ROUNDING_CODES


def requantize(so, p, v, shifts, *, k, delta, max_bias, relu, fy):
    """floatgemm's ``np.maximum(v, 0)`` (``relu``), ``v *= 2**-shifts`` and
    ``emulator.requantize(p, v, shifts, 2**-shifts, k=k, delta=delta, max_bias=max_bias,
    dequantize=fy)``, without changing ``v``: ``(y, sat_count)``, ``y`` a new float64 array."""
    A, B = p["acc_bits"], p["act_bits"]
    lo_a, hi_a = -(1 << (A - 1)), (1 << (A - 1)) - 1
    lo, hi = (-(1 << (B - 1)), (1 << (B - 1)) - 1) if p["act_signed"] else (0, (1 << B) - 1)
    clamp_acc = (1 << wide_bound(p, k, delta)) + max_bias > hi_a
    scale = np.ascontiguousarray(np.ldexp(1.0, -np.asarray(shifts)), np.float64)
    sp = scale.ctypes
    if clamp_acc:
        acc_lo, acc_hi = lo_a * scale, hi_a * scale
        bounds = (acc_lo.ctypes, acc_hi.ctypes)
    else:                                         # not read (any n values)
        bounds = (sp, sp)
    unit = float(np.ldexp(1.0, -int(fy)))
    batch, n = v.shape
    y = np.empty((batch, n))
    threads, counter, chunk = _shared(v)
    args = (v.ctypes, batch, n, _ld(v), y.ctypes, n, sp) + bounds + (
            int(clamp_acc), int(bool(relu)), ROUNDING_CODES[p["rounding"]], float(lo),
            float(hi), unit, counter.ctypes, chunk)
    sat = parallel.run(lambda i: so.hlsnn_shift_requant(*args), [(i,) for i in range(threads)])
    if min(sat) < 0:
        raise ValueError("hlsnn_shift_requant refused its parameters")   # requantizes(p) is False
    return y, sum(sat) % (1 << 32)
