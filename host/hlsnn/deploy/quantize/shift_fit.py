"""Data-aware shift codes: which two-hot / power-of-two code each weight of a ``shift_mac``
layer gets, and the bias that goes with them, chosen on the calibration images (the
deployment format's ``weight_fit: output``, the default; ``weight_fit: nearest`` keeps the
nearest code of every weight, :mod:`hlsnn.formats.shift`).

Why: two-hot codes have about three significant bits (between ``2**a`` and ``2**(a+1)`` the
levels are ``2**a + 2**b`` and ``2**(a+1) - 2**b``), so nearest rounding leaves a relative
weight error near 4% in every layer, and the layers' errors add up along the network. What the
network needs is not the nearest weight but the output nearest the float layer's, and both
steps below act on that, without changing what the kernel computes: they only choose the
codes (every one a code of the format, at the scale exponents nearest rounding picks) and
the float bias that is then rounded into accumulator units as before.

1. **Error feedback** (the GPTQ / Optimal Brain Quantization update: E. Frantar,
   S. Ashkboos, T. Hoefler, D. Alistarh, "GPTQ: Accurate Post-Training Quantization for
   Generative Pre-trained Transformers", ICLR 2023, algorithm 1): with ``X`` the layer's
   input rows on the calibration images (im2col patches, the integers the kernel is fed) and
   ``H = X^T X + lambda I`` (``lambda`` = :data:`DAMP` times the mean diagonal), the weights
   of a row are rounded one input at a time, the inputs of largest ``H_ii`` first, each to the
   nearest code, and the rounding error is spread over the not yet rounded weights of the row
   through the upper Cholesky factor ``U`` of ``H^-1``: ``w[j>i] -= (w_i - q_i) / U_ii *
   U_i,j``. This minimises ``|| (W - Q) X ||`` greedily instead of ``|| W - Q ||``. A grouped
   (depthwise) layer does it per group, over its own input channels. Inputs that are zero on
   every calibration image get ``H_ii = 1`` (their weights are rounded, not zeroed). A K beyond
   :data:`MAX_FEEDBACK_K` gets nearest codes (the cost is ``N * K**2``).
2. **Bias correction** (M. Nagel, M. van Baalen, T. Blankevoort, M. Welling, "Data-Free
   Quantization Through Weight Equalization and Bias Correction", ICCV 2019, section 4.2, the
   empirical form): the mean output error on the calibration inputs, ``(W - Q) E[x]``, is
   added to the bias, so the quantized layer's outputs have the float layer's mean.
"""
from __future__ import annotations

import contextlib
import threading

import numpy as np

from ...engines import convgeom as conv
from ...formats import shift as sfmt
from ...formats import shift_codes as codes
from ..run import groups

#: GPTQ's dampening: ``lambda = DAMP * mean(diag(H))`` (the paper's 1%).
DAMP = 0.01

#: Reductions longer than this get nearest codes (and the bias correction) instead of the error
#: feedback, whose cost grows as ``N * K**2``.
MAX_FEEDBACK_K = 4096


def nearest_values(a, tab):
    """The nearest code value of a table (:func:`hlsnn.formats.shift_codes.table`) to each
    float ``a`` (already in code units, ``w * 2**F``), ties to the smaller magnitude, with
    ``a``'s sign: float64 integers."""
    k = codes.nearest(tab, np.ascontiguousarray(np.abs(np.asarray(a, np.float64))))
    return np.copysign(tab.mags[k], a) + 0.0


def gptq_values(w, h, tab, f):
    """Code values (float64 integers, ``w``'s shape (N, K)) for weights ``w`` at scale
    exponents ``f`` ((N, 1) or a scalar), rounded in the order and with the error feedback of
    step 1 of the module docstring, ``h`` the (K, K) input Gram matrix ``X^T X``. The loop over
    the columns runs compiled where it can (``native/gptq.c``, the same float64 operations).

    Stacks of independent problems (the groups of a grouped or depthwise convolution) go in
    one call: ``w`` (G, N, K), ``h`` (G, K, K) and ``f`` broadcastable to (G, N, 1); each
    group is rounded as it would be alone, except that :func:`inverse_factor` factors the stack
    with numpy's batched routines (the same matrices up to rounding)."""
    w = np.ldexp(np.asarray(w, np.float64), np.asarray(f, np.int64))      # in code units
    stacked = w.ndim == 3
    h = np.asarray(h, np.float64)
    w, h = (w, h) if stacked else (w[None], h[None])
    g, k = w.shape[0], w.shape[2]
    diag = np.einsum("gii->gi", h).copy()
    diag[diag <= 0] = 1.0                                     # inputs never seen
    diag += DAMP * np.mean(diag, axis=1, keepdims=True)
    perm = np.argsort(-diag, axis=1, kind="stable")
    w = np.ascontiguousarray(np.take_along_axis(w, perm[:, None, :], axis=2))
    if stacked:                                               # H permuted (a new array), then its diagonal
        h = np.take_along_axis(np.take_along_axis(h, perm[:, :, None], axis=1), perm[:, None, :], axis=2)
    else:
        h = h[0][np.ix_(perm[0], perm[0])][None]
    np.einsum("gii->gi", h)[...] = np.take_along_axis(diag, perm, axis=1)
    u = inverse_factor(h if stacked else h[0])
    if u is None:                                             # not positive definite numerically
        u = np.eye(k)                                         # no feedback: nearest rounding
    u = np.ascontiguousarray(np.broadcast_to(u, (g, k, k)), np.float64)
    q = _round_compiled(w, u, tab)
    if q is None:
        q = np.stack([_round(w[j], u[j], tab) for j in range(g)])
    out = np.empty_like(q)
    np.put_along_axis(out, perm[:, None, :], q, axis=2)
    return out if stacked else out[0]


def inverse_factor(h):
    """The upper triangular ``U`` with positive diagonal and ``H^-1 = U^T U`` of a symmetric
    positive definite ``h`` (float64), or None where ``h`` is not positive definite
    numerically. With ``J`` the reversal permutation, the lower Cholesky factor ``L`` of ``J H
    J`` gives ``H = R R^T`` with ``R = J L J`` upper triangular, so ``U = R^-1``: a Cholesky
    factorisation and a triangular inverse (LAPACK ``dpotrf``, ``dtrtri``), a third of the
    work of inverting ``H`` and factoring the inverse, which is what it falls back to without
    scipy (the same matrix up to rounding; ``U`` is unique). A stack (G, K, K) is factored
    with numpy's batched Cholesky and inverse (one call for the small groups of a depthwise
    layer); a matrix of it that is not positive definite gets the identity (no feedback)."""
    if h.ndim == 3:
        try:
            with _one_blas_thread():                          # LAPACK per matrix: 9 x 9 ones, many
                low = np.linalg.cholesky(h[:, ::-1, ::-1])
                return np.linalg.inv(low[:, ::-1, ::-1])
        except np.linalg.LinAlgError:                         # one by one: the identity for those not
            eye = np.eye(h.shape[1])
            return np.stack([eye if u is None else u for u in map(inverse_factor, h)])
    try:
        from scipy.linalg import lapack
    except ImportError:                                       # scipy comes with scikit-learn
        try:
            with _one_blas_thread():
                return np.linalg.cholesky(np.linalg.inv(h)).T
        except np.linalg.LinAlgError:
            return None
    with _one_blas_thread():
        low, info = lapack.dpotrf(np.asfortranarray(h[::-1, ::-1]), lower=1, clean=1)
        if info:
            return None
        u, info = lapack.dtrtri(np.asfortranarray(low[::-1, ::-1]), lower=0, overwrite_c=1)
    return None if info else u


_blas = []
_blas_lock = threading.RLock()


@contextlib.contextmanager
def _one_blas_thread():
    """A context in which the BLAS libraries run on one thread (threadpoolctl, which comes with
    scikit-learn; without it, as they are). The factorizations here are small, and a threaded
    OpenBLAS leaves its workers spinning after each call, taking a core from the calibration's own
    threads. One thread also makes the factor's rounding independent of the machine's core count
    (OpenBLAS splits its work by the threads, and its sums round differently). The limit is
    process-wide, so one thread at a time holds it (a lock), and calibrations in threads set and
    restore it in turn."""
    with _blas_lock:
        if not _blas:
            try:
                import scipy.linalg  # noqa: F401  (its own OpenBLAS, limited too)
            except ImportError:
                pass
            try:
                from threadpoolctl import ThreadpoolController
                _blas.append(ThreadpoolController())     # the libraries loaded by now
            except ImportError:
                _blas.append(None)
        if _blas[0] is None:
            yield
        else:
            with _blas[0].limit(limits=1, user_api="blas"):
                yield


def _round(w, u, tab):
    """:func:`gptq_values`' loop (the specification of ``native/gptq.c``): the codes of ``w``
    (N, K) column by column, each column's rounding error fed forward to the later columns of
    ``w`` (changed in place) through ``u``."""
    q = np.empty_like(w)
    for i in range(w.shape[1]):
        q[:, i] = nearest_values(w[:, i], tab)
        err = (w[:, i] - q[:, i]) / u[i, i]
        w[:, i + 1:] -= np.outer(err, u[i, i + 1:])
    return q


def _round_compiled(w, u, tab):
    """:func:`_round` by ``native/gptq.c`` on each of the G problems of ``w`` (G, N, K),
    C-contiguous float64, changed in place as :func:`_round` changes it, with ``u`` (G, K, K),
    or None where the compiled helpers are off."""
    from ... import native
    import ctypes
    so = native.load("gptq")
    if so is None:
        return None
    if not getattr(so, "_hlsnn_typed", False):
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        so.hlsnn_gptq_round.restype = None
        so.hlsnn_gptq_round.argtypes = [p, p, i64, i64, i64, p, i64, p, p, p]
        so._hlsnn_typed = True
    g, n, k = w.shape
    if not (w.flags.c_contiguous and w.dtype == np.float64):
        return None
    u = np.ascontiguousarray(u, np.float64)
    thr = np.ascontiguousarray(tab.buckets.thresholds, np.float64)
    mags = np.ascontiguousarray(tab.mags, np.float64)
    from ...native import parallel
    q = np.empty_like(w)

    def part(a0, a1):                   # rows [a0, a1) of one problem, or problems [a0, a1)
        ws, us, qs = (w[0, a0:a1], u, q[0, a0:a1]) if g == 1 else (w[a0:a1], u[a0:a1], q[a0:a1])
        err = np.empty(n, np.float64)
        so.hlsnn_gptq_round(ws.ctypes, us.ctypes, 1 if g == 1 else a1 - a0, a1 - a0 if g == 1 else n, k,
                            thr.ctypes, len(thr), mags.ctypes, qs.ctypes, err.ctypes)
    # the rows (or the problems) are independent: split over the threads where there is work
    per = (1 << 17) // max(k * k * (1 if g == 1 else n), 1)
    parallel.run(part, parallel.parts(n if g == 1 else g, max(per, 1)))
    return q


#: the float32 Gram blocks hold exact integer sums below 2**24 (:func:`_grams`)
_F32_EXACT = 1 << 24


def _grams(layer, x):
    """Per group of the layer, the Gram matrix ``X^T X`` of its input rows (conv: the im2col
    patches of the group's channels) and their mean, for integer inputs ``x``: exactly the
    float64 ``r.T @ r`` and ``r.mean(axis=0)`` (integer sums below ``2**53``, so exact in any
    order). With ``max|x|**2 * R <= 2**24`` the rows go in blocks of ``R`` through a float32
    ``syrk`` (scipy's BLAS; each block's sums are integers a float32 holds exactly, then added
    in float64), a quarter of the float64 GEMM's work, built from the integers without a
    float64 im2col."""
    x = np.asarray(x)
    conv_layer = layer.kind == "conv"
    g = layer.group if conv_layer else 1
    if x.dtype.kind in "iu" and x.size and -128 <= int(x.min()) and int(x.max()) <= 127:
        done = _grams_dw(layer, x) if conv_layer and g > 1 and g == x.shape[1] else None
        if done is None:
            done = _grams_i8(layer, x, g)
        if done is not None:
            return done
    amax = int(np.abs(x).max(initial=0)) if x.dtype.kind in "iu" else None
    block = _F32_EXACT // max(amax * amax, 1) if amax is not None else 0
    if block < 64:                                            # the float64 rows, as they were
        x = np.asarray(x, np.float64)
        rows = conv.im2col(x, layer.geom)[0] if conv_layer else x.reshape(x.shape[0], -1)
        kg = rows.shape[1] // g
        return [(r.T @ r, r.mean(axis=0)) for r in (rows[:, j * kg:(j + 1) * kg] for j in range(g))]
    try:
        from scipy.linalg.blas import ssyrk             # the upper triangle: half a GEMM's work
    except ImportError:                                 # scipy comes with scikit-learn; else a GEMM
        def ssyrk(alpha, a, trans=0):
            return a @ a.T
    xi = np.ascontiguousarray(x, np.int64)
    b = xi.shape[0]
    per = int(np.prod(layer.geom.out_hw(xi.shape[2], xi.shape[3]))) if conv_layer else 1
    step = max(1, block // max(per, 1))                       # images per im2col
    grams, sums, n = None, None, 0
    for i0 in range(0, b, step):
        xs = xi[i0:i0 + step]
        rows = conv.im2col(xs, layer.geom, dtype=np.float32)[0] if conv_layer else \
            xs.reshape(xs.shape[0], -1).astype(np.float32)
        kg = rows.shape[1] // g
        if grams is None:
            grams, sums = np.zeros((g, kg, kg)), np.zeros((g, kg))
        for a in range(0, rows.shape[0], block):
            for j in range(g):
                r = rows[a:a + block, j * kg:(j + 1) * kg]
                grams[j] += ssyrk(1.0, r.T if g == 1 else np.asfortranarray(r.T), trans=0)
                sums[j] += np.add.reduce(r, axis=0, dtype=np.float64)
        n += rows.shape[0]
    return [(gj, sj / n) for gj, sj in zip(_symmetric(grams), sums)]


def _symmetric(gram):
    """The symmetric float64 matrices (..., K, K) of the upper triangles of ``gram`` (what the
    Gram helpers compute; the entries below the diagonal are ignored)."""
    up = np.triu(gram).astype(np.float64)
    return up + np.swapaxes(np.triu(up, 1), -1, -2)


#: ``native/gram.c``'s rows per chunk (``QUADS`` quads of four)
_GRAM_ROWS = 256 * 4
#: the vector unit ``native/gram.c`` may use (0: its portable loops; the tests run both)
GRAM_ISA = 1


#: the most scratch bytes per thread for which :func:`_grams_conv_s1` beats the rows of
#: ``hlsnn_gram_conv_i8`` (its cells' sums, ``Cp**2`` each, go through memory once per image:
#: many channels on a small map, e.g. 256 on 4 x 4, are faster as rows)
_GRAM_S1_MAX_SCRATCH = 8 << 20


def _grams_conv_s1(so, geo, xh, g, oh, ow):
    """:func:`_grams_i8` of a stride-1 convolution of ``xh`` (B, H, W, C) int8 by
    ``hlsnn_gram_conv_s1_i8`` (``native/gram.c``: per shift between taps, the channels'
    cross-correlation over cells of the map, no im2col), images split over the threads; None
    where it does not apply, and those take the im2col rows: strides other than 1 (the taps'
    positions are sublattices), a 1x1 kernel (the same work as the rows), kernels beyond
    12 x 12, maps too large for its int32 cell sums and more than
    :data:`_GRAM_S1_MAX_SCRATCH` bytes of scratch. Any channel count (depthwise too) is faster
    this way on the maps measured (1 to 128 channels, 2 x 2 to 32 x 32)."""
    from ...native import parallel
    b, h, w, c = xh.shape
    cg = c // g
    if (geo.sh, geo.sw) != (1, 1) or geo.kh * geo.kw == 1:
        return None
    top, left = geo.pads[0], geo.pads[1]
    nbytes = so.hlsnn_gram_conv_s1_scratch(h, w, c, geo.kh, geo.kw, geo.dh, geo.dw, top, left, oh, ow, cg)
    if nbytes < 0 or nbytes > _GRAM_S1_MAX_SCRATCH:
        return None
    import ctypes
    kg, n = cg * geo.kh * geo.kw, b * oh * ow
    ranges = parallel.parts(b, 1)
    scratch = {r0: np.empty(nbytes, np.uint8) for r0, _ in ranges}         # one per thread, by its first image
    # the threads' scratch addresses for the merge (``scratch`` holds the arrays until it ends)
    ptrs = (ctypes.c_void_p * len(ranges))(*[a.ctypes.data_as(ctypes.c_void_p) for a in scratch.values()])
    out = []
    for j in range(g):
        def part(b0, b1, j=j):
            return so.hlsnn_gram_conv_s1_i8(xh.ctypes, h, w, c, geo.kh, geo.kw, geo.dh, geo.dw, top, left, oh, ow,
                                            j * cg, cg, b0, b1, scratch[b0].ctypes, GRAM_ISA)
        if any(r < 0 for r in parallel.run(part, ranges)):
            return None
        gram, sums = np.empty((kg, kg)), np.empty(kg, np.int64)
        if so.hlsnn_gram_conv_s1_out(h, w, c, geo.kh, geo.kw, geo.dh, geo.dw, top, left, oh, ow, cg, ptrs,
                                     len(ranges), gram.ctypes, sums.ctypes) < 0:
            return None
        out.append((gram, sums.astype(np.float64) / n))
    return out


def _grams_i8(layer, x, g):
    """:func:`_grams` of int8-range integers by ``native/gram.c`` (integer sums: exact), a
    convolution's patches read from an NHWC copy of ``x`` (no im2col), or None where the
    compiled helpers are off."""
    import ctypes
    from ... import native
    from ...native import parallel
    so = native.load("gram")
    if so is None:
        return None
    if not getattr(so, "_hlsnn_typed", False):
        p, i64, ci = ctypes.c_void_p, ctypes.c_int64, ctypes.c_int
        so.hlsnn_gram_i8.restype = i64
        so.hlsnn_gram_i8.argtypes = [p, i64, i64, i64, p, p, p, p, ci]
        so.hlsnn_gram_conv_i8.restype = i64
        so.hlsnn_gram_conv_i8.argtypes = [p] + [i64] * 17 + [p, p, p, p, ci]
        so.hlsnn_gram_conv_s1_scratch.restype = i64
        so.hlsnn_gram_conv_s1_scratch.argtypes = [i64] * 12
        so.hlsnn_gram_conv_s1_i8.restype = i64
        so.hlsnn_gram_conv_s1_i8.argtypes = [p] + [i64] * 15 + [p, ci]
        so.hlsnn_gram_conv_s1_out.restype = i64
        so.hlsnn_gram_conv_s1_out.argtypes = [i64] * 12 + [p, i64, p, p]
        so._hlsnn_typed = True
    b = x.shape[0]
    if layer.kind == "conv":
        geo = layer.geom
        xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1), np.int8)            # (B, H, W, C)
        _, h, w, c = xh.shape
        oh, ow = geo.out_hw(h, w)
        done = _grams_conv_s1(so, geo, xh, g, oh, ow)
        if done is not None:
            return done
        n, kg = b * oh * ow, (c // g) * geo.kh * geo.kw

        def call(j, r0, r1, *bufs):
            return so.hlsnn_gram_conv_i8(xh.ctypes, h, w, c, geo.kh, geo.kw, geo.sh, geo.sw, geo.dh, geo.dw,
                                         geo.pads[0], geo.pads[1], oh, ow, j * (c // g), c // g, r0, r1, *bufs)
    else:
        rows = np.ascontiguousarray(x.reshape(b, -1), np.int8)
        n, kg = rows.shape

        def call(j, r0, r1, *bufs):
            return so.hlsnn_gram_i8(rows.ctypes, kg, r0, r1, *bufs)
    kp = -(-kg // 16) * 16
    out = []
    for j in range(g):
        def part(r0, r1, j=j):
            gram, sums = np.zeros((kg, kg), np.int64), np.zeros(kg, np.int64)
            u, s = np.empty(_GRAM_ROWS * kp, np.uint8), np.empty(_GRAM_ROWS * kp, np.int8)
            return gram, sums, call(j, r0, r1, gram.ctypes, sums.ctypes, u.ctypes, s.ctypes, GRAM_ISA)
        res = parallel.run(part, parallel.parts(n, max(_GRAM_ROWS, (1 << 22) // max(kg * kg, 1))))
        if any(t[2] < 0 for t in res):
            return None                              # K beyond gram.c's row buffer
        gram, sums = sum(t[0] for t in res), sum(t[1] for t in res)
        if any(t[2] for t in res):                  # vpdpbusd's unsigned operand was x + 128
            gram -= 128 * sums[None, :]
        out.append((_symmetric(gram), sums.astype(np.float64) / n))
    return out


def _grams_dw(layer, x):
    """:func:`_grams` of a depthwise convolution (one input channel per group) of int8-range
    integers, every group in one pass of ``native/gram_dw.c`` (over the channels, contiguous in
    an NHWC copy of ``x``), or None where the compiled helpers are off."""
    import ctypes
    from ... import native
    from ...native import parallel
    so = native.load("gram_dw")
    if so is None:
        return None
    if not getattr(so, "_hlsnn_typed", False):
        so.hlsnn_gram_dw_i8.restype = None
        so.hlsnn_gram_dw_i8.argtypes = [ctypes.c_void_p] + [ctypes.c_int64] * 15 + [ctypes.c_void_p] * 5
        so._hlsnn_typed = True
    geo = layer.geom
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1), np.int8)                # (B, H, W, C)
    b, h, w, c = xh.shape
    oh, ow = geo.out_hw(h, w)
    k = geo.kh * geo.kw

    def part(r0, r1):
        gram, sums = np.zeros((c, k, k), np.int64), np.zeros((c, k), np.int64)
        cp = -(-c // 16) * 16                                      # the lanes, whole vectors
        acc, taps, tsum = (np.empty(n * cp, np.int32) for n in (k * (k + 1) // 2, k, k))
        so.hlsnn_gram_dw_i8(xh.ctypes, h, w, c, geo.kh, geo.kw, geo.sh, geo.sw, geo.dh, geo.dw, geo.pads[0],
                            geo.pads[1], oh, ow, r0, r1, gram.ctypes, sums.ctypes, acc.ctypes, taps.ctypes,
                            tsum.ctypes)
        return gram, sums
    n = b * oh * ow
    res = parallel.run(part, parallel.parts(n, max(256, (1 << 20) // max(k * k * c, 1))))
    gram, sums = sum(t[0] for t in res), sum(t[1] for t in res)
    full = _symmetric(gram)                                    # (C, K, K)
    mean = sums.astype(np.float64) / n
    return [(full[j], mean[j]) for j in range(c)]


#: The most bytes of Gram matrices one layer's fit builds (a dense layer of K = 40,960 inputs
#: would need a 12.5 GiB K x K Gram; beyond :data:`MAX_FEEDBACK_K` none is built).
MAX_GRAM_BYTES = 2 << 30


def _means(layer, x, g):
    """The mean input row (conv: im2col patch) of each of the ``g`` groups, (g, K/g), without
    the Gram: the rows in blocks of images (exact integer sums for integer ``x``)."""
    x = np.asarray(x)
    if layer.kind != "conv":
        rows = x.reshape(x.shape[0], -1)
        tot = rows.sum(axis=0, dtype=np.int64 if x.dtype.kind in "iub" else np.float64)
        return (tot.astype(np.float64) / max(rows.shape[0], 1)).reshape(g, -1)
    tot, n = None, 0
    step = max(1, (64 << 20) // max(1, x[:1].size * layer.geom.kh * layer.geom.kw * 8))
    for i in range(0, x.shape[0], step):
        xi = x[i:i + step]
        rows = conv.im2col(np.asarray(xi, np.int64 if xi.dtype.kind in "iub" else np.float64), layer.geom)[0]
        t = rows.sum(axis=0)
        tot = t if tot is None else tot + t
        n += rows.shape[0]
    return (np.asarray(tot, np.float64) / max(n, 1)).reshape(g, -1)


def fit_layer(layer, x, fx, f, tab):
    """``(values, bias)`` of an engine layer (dense, or conv of any groups) for its input
    integers ``x`` at radix ``fx`` (the calibration batch, as the kernel is fed): the code
    values (float64 integers) of the layer's own weights flattened to (Z, C/g*kh*kw) at scale
    exponents ``f`` (one per output, (Z, 1)), and the corrected float bias (Z,)."""
    w = groups.gemm_weight(layer, 1)                        # (Z, K of one group)
    g = layer.group if layer.kind == "conv" else 1
    kg, zg = w.shape[1], w.shape[0] // g
    wg, fg = w.reshape(g, zg, kg), np.reshape(f, (g, zg, 1))
    if kg > MAX_FEEDBACK_K:                  # nearest codes: no Gram, only the inputs' means
        means = _means(layer, x, g)
        values = nearest_values(np.ldexp(wg, fg), tab)
        bias = np.array(layer.b, np.float64)
        bias += np.einsum("gzk,gk->gz", wg - np.ldexp(values, -fg), np.ldexp(means, -fx)).reshape(-1)
        return values.reshape(w.shape), bias
    need = g * kg * kg * 8
    if need > MAX_GRAM_BYTES:
        from ...errors import InputError
        raise InputError(f"layer {layer.name}: the weight fit's input Gram matrices ({g} x {kg} x {kg} float64, "
                         f"{need / 2**30:.1f} GiB) exceed {MAX_GRAM_BYTES / 2**30:.0f} GiB; use weight_fit: nearest "
                         f"for this format")
    grams = _grams(layer, x)
    hs, means = np.stack([t[0] for t in grams]), np.stack([t[1] for t in grams])    # (g, kg, kg), (g, kg)
    if kg > MAX_FEEDBACK_K:
        values = nearest_values(np.ldexp(wg, fg), tab)
    elif g == 1:
        values = gptq_values(wg[0], hs[0], tab, fg[0])[None]
    else:                                                   # the groups in one stacked call
        values = gptq_values(wg, hs, tab, fg)
    bias = np.array(layer.b, np.float64)
    # (W - Q) E[x] per group: row by row, the float64 dot products of a matrix-vector product
    bias += np.einsum("gzk,gk->gz", wg - np.ldexp(values, -fg), np.ldexp(means, -fx)).reshape(-1)
    return values.reshape(w.shape), bias


def refit(ex, x, fx, target=None):
    """Re-choose a calibrating ``ShiftExec``'s codes and bias (the module docstring) from its
    input integers ``x`` at radix ``fx``: sets ``ex.wq`` (same scale exponents, axis and GEMM
    layout as before; ``ex.n_chunks`` made again when next used) and ``ex.b_fit`` (the float bias
    ``_bias`` rounds). ``target``: the layer with other float weights and bias to fit (``weight_fit:
    network``, :func:`hlsnn.deploy.quantize.shift_netfit.target`), else ``ex.layer``."""
    t, layer = ex.wq, (ex.layer if target is None else target)
    tab = codes.table(t.mode, t.exp_bits, t.delta, getattr(ex, "max_code", None))   # the code limit (formats.shift)
    f = np.broadcast_to(np.asarray(t.scale_exponent, np.int64).reshape(-1, 1), (t.shape[0], 1))
    own, ex.b_fit = fit_layer(layer, x, fx, f, tab)
    values = own
    if layer.kind == "conv" and layer.group > 1:             # into the packs' block-diagonal rows
        values = groups.gemm_weight(_Weights(layer, own.reshape(layer.w.shape)), ex.gp)
    ex.wq = sfmt.encode(values, t.scale_exponent, t.mode, t.exp_bits, delta=t.delta, axis=t.axis)
    ex.n_chunks = None                                       # made again when the layer path asks
    ex.stats.weight_sparsity = float(np.mean(ex.wq.zero))
    return own


class _Weights:
    """A layer's shape facts with other weights (for :func:`groups.gemm_weight`)."""

    def __init__(self, layer, w):
        self.kind, self.group, self.w = layer.kind, layer.group, w
