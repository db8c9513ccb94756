"""Data-aware shift codes: which two-hot / power-of-two code each weight of a ``shift_mac``
layer gets, and the bias that goes with them, chosen on the calibration images (the
deployment format's ``weight_fit: output``, the default; ``weight_fit: nearest`` keeps the
nearest code of every weight, :mod:`hlsnn.formats.shift`).

Why: two-hot codes have about three significant bits (between ``2**a`` and ``2**(a+1)`` the
levels are ``2**a + 2**b`` and ``2**(a+1) - 2**b``), so nearest rounding leaves a relative
weight error near 4% in every layer. On the tiny DS-CNN of issue 32 the errors of its eight
layers add up to a logit error of 10.5% (relative RMS) and 4 points of accuracy. What the
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

Measured (``python scripts/tiny_accuracy.py``, all 360 test images, 64 calibration images;
see ``docs/deploy-models.md``): two-hot on the tiny DS-CNN goes from 88.6% to 91.9%
(float 92.8%), and every tiny model's logit error shrinks.
"""
from __future__ import annotations

import numpy as np

from ..engines import convgeom as conv
from ..formats import shift as sfmt
from ..formats import shift_codes as codes
from . import groups

#: GPTQ's dampening: ``lambda = DAMP * mean(diag(H))`` (the paper's 1%).
DAMP = 0.01

#: Reductions longer than this get nearest codes (and the bias correction) instead of the error
#: feedback, whose cost grows as ``N * K**2``.
MAX_FEEDBACK_K = 4096

#: The choices of a shift format's ``weight_fit``.
FITS = ("output", "nearest")


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
    the columns runs compiled where it can (``native/gptq.c``, the same float64 operations)."""
    w = np.ldexp(np.asarray(w, np.float64), np.asarray(f, np.int64))      # in code units
    k = w.shape[1]
    h = np.array(h, np.float64)
    dead = np.diag(h) <= 0
    h[dead, dead] = 1.0
    h[np.diag_indices(k)] += DAMP * float(np.mean(np.diag(h)))
    perm = np.argsort(-np.diag(h), kind="stable")
    w, h = np.ascontiguousarray(w[:, perm]), h[np.ix_(perm, perm)]
    try:
        u = np.linalg.cholesky(np.linalg.inv(h)).T          # upper: H^-1 = U^T U
    except np.linalg.LinAlgError:                             # not positive definite numerically
        u = np.eye(k)                                         # no feedback: nearest rounding
    q = _round_compiled(w, u, tab)
    if q is None:
        q = _round(w, u, tab)
    out = np.empty_like(q)
    out[:, perm] = q
    return out


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
    """:func:`_round` by ``native/gptq.c`` (``w``, C-contiguous float64, changed in place as
    :func:`_round` changes it), or None where the compiled helpers are off."""
    from .. import native
    import ctypes
    so = native.load("gptq")
    if so is None:
        return None
    if not getattr(so, "_hlsnn_typed", False):
        p, i64 = ctypes.c_void_p, ctypes.c_int64
        so.hlsnn_gptq_round.restype = None
        so.hlsnn_gptq_round.argtypes = [p, p, i64, i64, p, i64, p, p, p]
        so._hlsnn_typed = True
    n, k = w.shape
    if not (w.flags.c_contiguous and w.dtype == np.float64):
        return None
    u = np.ascontiguousarray(u, np.float64)
    thr = np.ascontiguousarray(tab.buckets.thresholds, np.float64)
    mags = np.ascontiguousarray(tab.mags, np.float64)
    q, err = np.empty_like(w), np.empty(n, np.float64)
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)          # noqa: E731
    so.hlsnn_gptq_round(ptr(w), ptr(u), n, k, ptr(thr), len(thr), ptr(mags), ptr(q), ptr(err))
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
    out = []
    for j in range(g):
        up = np.triu(grams[j])
        out.append((up + np.triu(up, 1).T, sums[j] / n))
    return out


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
    from ..native import parallel
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
    ptrs = (ctypes.c_void_p * len(ranges))(*[a.ctypes.data for a in scratch.values()])
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
    from .. import native
    from ..native import parallel
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
        up = np.triu(gram).astype(np.float64)
        out.append((up + np.triu(up, 1).T, sums.astype(np.float64) / n))
    return out


def fit_layer(layer, x, fx, f, tab):
    """``(values, bias)`` of an engine layer (dense, or conv of any groups) for its input
    integers ``x`` at radix ``fx`` (the calibration batch, as the kernel is fed): the code
    values (float64 integers) of the layer's own weights flattened to (Z, C/g*kh*kw) at scale
    exponents ``f`` (one per output, (Z, 1)), and the corrected float bias (Z,)."""
    w = groups.gemm_weight(layer, 1)                        # (Z, K of one group)
    g = layer.group if layer.kind == "conv" else 1
    kg, zg = w.shape[1], w.shape[0] // g
    values = np.empty_like(w)
    bias = np.array(layer.b, np.float64)
    for j, (gram, mean) in enumerate(_grams(layer, x)):
        out = slice(j * zg, (j + 1) * zg)
        if kg <= MAX_FEEDBACK_K:
            values[out] = gptq_values(w[out], gram, tab, f[out])
        else:
            values[out] = nearest_values(np.ldexp(w[out], f[out]), tab)
        mean_x = np.ldexp(mean, -fx)
        bias[out] += (w[out] - np.ldexp(values[out], -f[out])) @ mean_x
    return values, bias


def refit(ex, x, fx):
    """Re-choose a calibrating ``ShiftExec``'s codes and bias (the module docstring) from its
    input integers ``x`` at radix ``fx``: sets ``ex.wq`` (same scale exponents, axis and GEMM
    layout as before), ``ex.n_chunks`` and ``ex.b_fit`` (the float bias ``_bias`` rounds)."""
    t, layer = ex.wq, ex.layer
    tab = codes.table(t.mode, t.exp_bits, t.delta)
    f = np.broadcast_to(np.asarray(t.scale_exponent, np.int64).reshape(-1, 1), (t.shape[0], 1))
    values, ex.b_fit = fit_layer(layer, x, fx, f, tab)
    if layer.kind == "conv" and layer.group > 1:             # into the packs' block-diagonal rows
        values = groups.gemm_weight(_Weights(layer, values.reshape(layer.w.shape)), ex.gp)
    ex.wq = sfmt.encode(values, t.scale_exponent, t.mode, t.exp_bits, delta=t.delta, axis=t.axis)
    ex.n_chunks = ex._parts(np.arange(ex.n_out))
    ex.stats.weight_sparsity = float(np.mean(ex.wq.zero))


class _Weights:
    """A layer's shape facts with other weights (for :func:`groups.gemm_weight`)."""

    def __init__(self, layer, w):
        self.kind, self.group, self.w = layer.kind, layer.group, w
