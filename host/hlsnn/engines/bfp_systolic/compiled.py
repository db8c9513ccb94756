"""The compiled twin of the activations' quantization on the float GEMM path
(``native/bfp_rows.c``): :func:`quantize_rows` gives what ``bfp._row_plan`` and
``bfp._encode_rows_into`` give (the exponents, the rows with a non-zero mantissa, the mantissas
as floats) and the count of non-zero mantissas, in one pass over the rows, the rows split
between threads (:mod:`hlsnn.native.parallel`). :func:`conv_gemm` fuses a convolution's
gather and quantization with the GEMM's exact sums, formed in int32 where :func:`int32_exact`
holds, else in float64 below 2**53 (:func:`sums_kind`; AVX-512, AVX2 or portable C, chosen at run
time: the integers do not depend on it); :func:`rows_gemm` does the same for rows of a matrix.

Each returns None where the numpy code must run instead: the compiled helpers are off
(:func:`hlsnn.native.load`), the rounding is ``stochastic``, ``exponent_bits > 10`` (the scale
``2**-e`` must be a normal float64), or a value is NaN or infinite (the numpy path then says
what it says about them). ``tests/engines/bfp_systolic/test_bfp_native.py`` holds the two equal.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import native
from ...native import parallel

MODES = {"nearest_even": 0, "nearest_away": 1, "truncate": 2}
#: rows per thread at least, in elements (a thread costs some microseconds to start)
MIN_ELEMS = 1 << 16


def lib():
    """The loaded ``bfp_rows`` library with its signatures set (on the library object: one
    loaded afresh after :func:`hlsnn.native.forget` is typed again), or None."""
    so = native.load("bfp_rows")
    if so is not None and not getattr(so, "_hlsnn_typed", False):
        i64, p = ctypes.c_int64, ctypes.c_void_p
        so.hlsnn_bfp_rows.restype = i64
        ci = ctypes.c_int
        so.hlsnn_bfp_rows.argtypes = [p, i64, i64, i64, ci, ci, ci, ci, p, ci, i64, p, p]
        so.hlsnn_bfp_conv_rows.restype = i64
        so.hlsnn_bfp_conv_rows.argtypes = [p] + [i64] * 19 + [ci, ci, ci, ci, p, ci, p, p, p]
        so.hlsnn_bfp_rows_gemm.restype = i64
        so.hlsnn_bfp_rows_gemm.argtypes = [p, i64, i64, i64, ci, ci, ci, ci, p, i64, i64, ci, p, p, p, ci] + [p] * 7
        so.hlsnn_bfp_conv_gemm.restype = i64
        so.hlsnn_bfp_conv_gemm.argtypes = [p] + [i64] * 19 + [ci, ci, ci, ci, p, i64, i64, ci, p, p, p, ci] + [p] * 8
        f64 = ctypes.c_double
        so.hlsnn_bfp_epilogue.restype = i64
        so.hlsnn_bfp_epilogue.argtypes = [p, ci, i64, i64, i64, p, p, p, f64, f64, ci, ci, ci, ci, ci, p, p]
        so._hlsnn_typed = True
    return so


def quantize_rows(x, mantissa_bits, exponent_bits, rounding, out):
    """``x`` (rows, K) finite float64 -> ``(exponents int64, nonzero bool, nnz)`` with the
    mantissas written into ``out`` (float32 or float64, ``x``'s shape); None for the numpy path
    (module docstring)."""
    if rounding not in MODES or exponent_bits > 10 or x.dtype != np.float64 or x.ndim != 2 \
            or out.dtype not in (np.float32, np.float64) or out.shape != x.shape:
        return None
    so = lib()
    if so is None:
        return None
    if x.strides[1] != 8 or x.strides[0] % 8:
        x = np.ascontiguousarray(x)
    if out.strides[1] != out.itemsize and x.shape[1] > 1:
        return None
    rows, k = x.shape
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    exps, nonzero = np.empty(rows, np.int64), np.empty(rows, np.uint8)
    ld, ldo = x.strides[0] // 8, out.strides[0] // out.itemsize
    f32 = int(out.dtype == np.float32)

    def part(r0, r1):
        return so.hlsnn_bfp_rows(x[r0:].ctypes, r1 - r0, k, ld, mantissa_bits, emin, emax, MODES[rounding],
                                 out[r0:].ctypes, f32, ldo, exps[r0:].ctypes, nonzero[r0:].ctypes)
    return _quantized(part, rows, rows * k, k, exps, nonzero)


def _ranges(n, elems, each):
    """The parts of ``n`` rows (or images) of ``each`` elements that threads take: one part below
    ``2 * MIN_ELEMS`` elements in all."""
    return [(0, n)] if elems < 2 * MIN_ELEMS else parallel.parts(n, max(1, MIN_ELEMS // max(1, each)))


def _quantized(part, n, elems, each, exps, nonzero):
    """``part`` run over :func:`_ranges`: ``(exps, nonzero, non-zero count)``, None where a part declined."""
    counts = parallel.run(part, _ranges(n, elems, each))
    if any(c < 0 for c in counts):
        return None
    return exps, nonzero.astype(bool), int(sum(counts))


def _conv_lib(x, g, oh, ow, exponent_bits, rounding, out):
    """The library (:func:`lib`) when a convolution's C pass can take these operands (``x``
    (B, C, H, W) float64 with 8-byte strides, one group, ``out`` a C-contiguous float32 or
    float64 array, a rounding without randomness, ``exponent_bits <= 10``); else None."""
    if rounding not in MODES or exponent_bits > 10 or x.dtype != np.float64 or x.ndim != 4 or g.group != 1 \
            or out.dtype not in (np.float32, np.float64) or not out.flags.c_contiguous or oh < 1 or ow < 1 \
            or any(s % 8 for s in x.strides):
        return None
    return lib()


def quantize_conv_rows(x, g, oh, ow, mantissa_bits, exponent_bits, rounding, out):
    """:func:`quantize_rows` of ``im2col(x, g)`` (``x`` (B, C, H, W) float64, any strides;
    ``g`` a :class:`~hlsnn.engines.convgeom.ConvGeom` of one group), without writing the
    float64 rows: each is gathered into a buffer and quantized there. None for the numpy path."""
    so = _conv_lib(x, g, oh, ow, exponent_bits, rounding, out)
    if so is None:
        return None
    b, c, h, w = x.shape
    k = c * g.kh * g.kw
    if out.shape != (b * oh * ow, k):
        return None
    rows = out.shape[0]
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    exps, nonzero = np.empty(rows, np.int64), np.empty(rows, np.uint8)
    sb, sc, sh, sw = (s // 8 for s in x.strides)
    f32 = int(out.dtype == np.float32)

    def part(b0, b1):
        buf = np.empty(max(k, 1))
        return so.hlsnn_bfp_conv_rows(x.ctypes, sb, sc, sh, sw, c, h, w, g.kh, g.kw, g.sh, g.sw, g.pads[0], g.pads[1],
                                      g.dh, g.dw, oh, ow, b0, b1, mantissa_bits, emin, emax, MODES[rounding],
                                      out.ctypes, f32, exps.ctypes, nonzero.ctypes, buf.ctypes)
    return _quantized(part, b, rows * k, oh * ow * k, exps, nonzero)


#: rows of the C tile of :func:`conv_gemm` (``TILE_ROWS`` in bfp_rows.c)
TILE_ROWS = 8
#: :func:`conv_gemm`'s kernel variants (``isa``): the best the CPU has, portable C, AVX2, AVX-512F,
#: AVX-512BW (16-bit mantissas, two products per instruction; AVX-512F for wider ones), AVX-512
#: VNNI (AVX-512BW's products and sum in one instruction)
ISAS = {"auto": 0, "portable": 1, "avx2": 2, "avx512": 3, "avx512bw": 4, "avx512vnni": 5}


def sum_bound(wm, mantissa_bits) -> int:
    """``2**(m-1) * max_n sum_k |wm[n, k]|``: no partial sum of ``xm @ wm.T`` exceeds it in
    magnitude for activations' mantissas ``xm`` of ``mantissa_bits`` bits, in whatever order the
    products are added (-1 for no weights)."""
    wm = np.asarray(wm)
    if wm.ndim != 2 or wm.size == 0:
        return -1
    return (1 << (mantissa_bits - 1)) * int(np.abs(wm.astype(np.int64)).sum(axis=1).max())


def int32_exact(wm, mantissa_bits) -> bool:
    """Whether every partial sum of ``xm @ wm.T`` fits int32: ``0 <= sum_bound < 2**31``."""
    return 0 <= sum_bound(wm, mantissa_bits) < (1 << 31)


def sums_kind(wm, mantissa_bits, acc_dtype):
    """How :func:`conv_gemm` forms the sums: ``"int32"`` where :func:`int32_exact` holds,
    ``"float64"`` for a float64 ``acc`` where ``sum_bound < 2**53`` (every partial sum an
    exact float64), else None (it declines)."""
    bound = sum_bound(wm, mantissa_bits)
    if 0 <= bound < (1 << 31):
        return "int32"
    if 0 <= bound < (1 << 53) and np.dtype(acc_dtype) == np.float64:
        return "float64"
    return None


def _weights(wk, kind, mantissa_bits):
    """The weights' mantissas ``wk`` (K, N) integers, their rows in the order of the gathered
    columns, as the C tiles read them: ``(wt, wt2, wtd, npad)``, N padded to ``npad`` (a multiple
    of 16) with zeros; for int32 sums ``wt`` (K, npad) int32 and, when the activations' and the
    weights' mantissas fit int16, ``wt2`` (ceil(K/2), npad, 2) int16 pairs of rows for the
    AVX-512BW kernel (else None); for float64 sums ``wtd`` (K, npad) float64 (the others None)."""
    k, n = wk.shape
    npad = -(-n // 16) * 16
    full = np.zeros((k, npad), np.int64)
    full[:, :n] = wk
    if kind == "float64":
        return None, None, full.astype(np.float64), npad
    wt2 = None
    if mantissa_bits <= 16 and -(1 << 15) <= full.min() and full.max() < (1 << 15):
        wt2 = np.zeros((k + 1) // 2 * 2 * npad, np.int16)
        wt2[:k * npad] = full.reshape(-1)
        wt2 = np.ascontiguousarray(wt2.reshape(-1, 2, npad).transpose(0, 2, 1))
    return full.astype(np.int32), wt2, None, npad


def _scratch(k, npad):
    """One thread's scratch of the C tiles: buf, xm, tacc, taccd, x16 (bfp_rows.c)."""
    return (np.empty(TILE_ROWS * k), np.empty(TILE_ROWS * k, np.int32), np.empty(TILE_ROWS * npad, np.int32),
            np.empty(TILE_ROWS * npad), np.empty(TILE_ROWS * ((k + 1) // 2 * 2), np.int16))


def _ptr(a):
    return None if a is None else a.ctypes


def conv_gemm(x, g, oh, ow, mantissa_bits, exponent_bits, rounding, wm, acc, isa="auto"):
    """:func:`quantize_conv_rows` of ``x`` and step 1 of the GEMM with the weights' mantissas
    ``wm`` (N, K) integers, in one pass (``hlsnn_bfp_conv_gemm``): the exact sums
    ``xm @ wm.T`` are written into ``acc`` ((rows, N) float32 or float64, C-contiguous, the
    GEMM's type) and ``(exponents, nonzero, nnz)`` returned as :func:`quantize_conv_rows` returns
    them; the mantissas themselves are never written. The sums are formed in int32 or float64
    (:func:`sums_kind`; exact integers either way); None (nothing promised about ``acc``) where
    neither is exact, and where :func:`quantize_conv_rows` returns None. ``isa`` picks the C kernel
    variant (:data:`ISAS`; tests): all give the same integers."""
    so = _conv_lib(x, g, oh, ow, exponent_bits, rounding, acc)
    if so is None:
        return None
    b, c, h, w = x.shape
    k = c * g.kh * g.kw
    wm = np.asarray(wm)
    n = wm.shape[0] if wm.ndim == 2 else 0
    kind = sums_kind(wm, mantissa_bits, acc.dtype) if wm.shape == (n, k) else None
    if kind is None or acc.shape != (b * oh * ow, n):
        return None
    wt, wt2, wtd, npad = _weights(wm.reshape(n, c, g.kh, g.kw).transpose(2, 3, 1, 0).reshape(k, n), kind,
                                  mantissa_bits)
    rows = acc.shape[0]
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    exps, nonzero = np.empty(rows, np.int64), np.empty(rows, np.uint8)
    sb, sc, sh, sw = (s // 8 for s in x.strides)
    f32 = int(acc.dtype == np.float32)

    def part(b0, b1):
        buf, xm, tacc, taccd, x16 = _scratch(k, npad)
        pmax = np.empty(max(1, (b1 - b0) * h * w), np.int64)
        return so.hlsnn_bfp_conv_gemm(x.ctypes, sb, sc, sh, sw, c, h, w, g.kh, g.kw, g.sh, g.sw, g.pads[0], g.pads[1],
                                      g.dh, g.dw, oh, ow, b0, b1, mantissa_bits, emin, emax, MODES[rounding],
                                      _ptr(wt), n, npad, ISAS[isa], _ptr(wt2), _ptr(wtd), acc.ctypes, f32, exps.ctypes,
                                      nonzero.ctypes, buf.ctypes, xm.ctypes, tacc.ctypes, taccd.ctypes, pmax.ctypes,
                                      x16.ctypes)
    return _quantized(part, b, rows * k, oh * ow * k, exps, nonzero)


def rows_gemm(x, mantissa_bits, exponent_bits, rounding, wm, acc, isa="auto"):
    """:func:`quantize_rows` of ``x`` (rows, K) float64 and the GEMM's exact sums ``xm @ wm.T``
    in one pass (``hlsnn_bfp_rows_gemm``), as :func:`conv_gemm` forms them: the sums written
    into ``acc`` ((rows, N) float32 or float64, C-contiguous), ``(exponents, nonzero, nnz)``
    returned; None where :func:`sums_kind` or :func:`quantize_rows` declines."""
    if rounding not in MODES or exponent_bits > 10 or x.dtype != np.float64 or x.ndim != 2 \
            or acc.dtype not in (np.float32, np.float64) or not acc.flags.c_contiguous or x.shape[0] < 1:
        return None
    so = lib()
    if so is None:
        return None
    if x.strides[1] != 8 or x.strides[0] % 8:
        x = np.ascontiguousarray(x)
    rows, k = x.shape
    wm = np.asarray(wm)
    n = wm.shape[0] if wm.ndim == 2 else 0
    kind = sums_kind(wm, mantissa_bits, acc.dtype) if wm.shape == (n, k) and k >= 1 else None
    if kind is None or acc.shape != (rows, n):
        return None
    wt, wt2, wtd, npad = _weights(wm.T, kind, mantissa_bits)
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    exps, nonzero = np.empty(rows, np.int64), np.empty(rows, np.uint8)
    ld, f32 = x.strides[0] // 8, int(acc.dtype == np.float32)

    def part(r0, r1):
        buf, xm, tacc, taccd, x16 = _scratch(k, npad)
        return so.hlsnn_bfp_rows_gemm(x[r0:].ctypes, r1 - r0, k, ld, mantissa_bits, emin, emax, MODES[rounding],
                                      _ptr(wt), n, npad, ISAS[isa], _ptr(wt2), _ptr(wtd), acc[r0:].ctypes, f32,
                                      exps[r0:].ctypes, nonzero[r0:].ctypes, buf.ctypes, xm.ctypes, tacc.ctypes,
                                      taccd.ctypes, x16.ctypes)
    return _quantized(part, rows, rows * k, k, exps, nonzero)


def epilogue(p, acc, xe, we, bcol, relu):
    """The max rule's epilogue of :func:`~.emulator.emulate_floats` with ``dequantize=True``
    (``bfp_rows.c``, ``hlsnn_bfp_epilogue``: rules 3 to 6 on each row of the exact sums
    ``acc``): ``(y float64 values, ye int64, saturations)``, or None for the numpy path."""
    rounding = p["rounding"]
    if rounding not in MODES or acc.dtype not in (np.float32, np.float64) or acc.ndim != 2 \
            or acc.strides[1] != acc.itemsize:
        return None
    so = lib()
    if so is None:
        return None
    rows, n = acc.shape
    M, A, E = p["mantissa_bits"], p["acc_bits"], p["exponent_bits"]
    emin, emax = -(1 << (E - 1)), (1 << (E - 1)) - 1
    lo_a, hi_a = float(-(1 << (A - 1))), float((1 << (A - 1)) - 1)
    colscale = np.ldexp(1.0, np.asarray(we, np.int64))
    xe = np.ascontiguousarray(xe, np.int64)
    bc = None if bcol is None else np.ascontiguousarray(bcol, np.float64)
    y, ye = np.empty((rows, n)), np.empty(rows, np.int64)
    ld = acc.strides[0] // acc.itemsize

    def part(r0, r1):
        return so.hlsnn_bfp_epilogue(acc[r0:].ctypes, int(acc.dtype == np.float32), ld, r1 - r0, n, xe[r0:].ctypes,
                                     colscale.ctypes, None if bc is None else bc.ctypes, lo_a, hi_a, int(bool(relu)),
                                     M, emin, emax, MODES[rounding], y[r0:].ctypes, ye[r0:].ctypes)
    return y, ye, int(sum(parallel.run(part, _ranges(rows, rows * n, n))))
