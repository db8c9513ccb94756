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
    step 1 of the module docstring, ``h`` the (K, K) input Gram matrix ``X^T X``."""
    w = np.ldexp(np.asarray(w, np.float64), np.asarray(f, np.int64))      # in code units
    k = w.shape[1]
    h = np.array(h, np.float64)
    dead = np.diag(h) <= 0
    h[dead, dead] = 1.0
    h[np.diag_indices(k)] += DAMP * float(np.mean(np.diag(h)))
    perm = np.argsort(-np.diag(h), kind="stable")
    w, h = w[:, perm], h[np.ix_(perm, perm)]
    try:
        u = np.linalg.cholesky(np.linalg.inv(h)).T          # upper: H^-1 = U^T U
    except np.linalg.LinAlgError:                             # not positive definite numerically
        u = np.eye(k)                                         # no feedback: nearest rounding
    q = np.empty_like(w)
    for i in range(k):
        q[:, i] = nearest_values(w[:, i], tab)
        err = (w[:, i] - q[:, i]) / u[i, i]
        w[:, i + 1:] -= np.outer(err, u[i, i + 1:])
    out = np.empty_like(q)
    out[:, perm] = q
    return out


def fit_layer(layer, x, fx, f, tab):
    """``(values, bias)`` of an engine layer (dense, or conv of any groups) for its input
    integers ``x`` at radix ``fx`` (the calibration batch, as the kernel is fed): the code
    values (float64 integers) of the layer's own weights flattened to (Z, C/g*kh*kw) at scale
    exponents ``f`` (one per output, (Z, 1)), and the corrected float bias (Z,)."""
    x = np.asarray(x, np.float64)
    rows = conv.im2col(x, layer.geom)[0] if layer.kind == "conv" else x.reshape(x.shape[0], -1)
    w = groups.gemm_weight(layer, 1)                        # (Z, K of one group)
    g = layer.group if layer.kind == "conv" else 1
    kg, zg = w.shape[1], w.shape[0] // g
    values = np.empty_like(w)
    bias = np.array(layer.b, np.float64)
    for j in range(g):
        r = rows[:, j * kg:(j + 1) * kg]
        out = slice(j * zg, (j + 1) * zg)
        if kg <= MAX_FEEDBACK_K:
            values[out] = gptq_values(w[out], r.T @ r, tab, f[out])
        else:
            values[out] = nearest_values(np.ldexp(w[out], f[out]), tab)
        mean_x = np.ldexp(r.mean(axis=0), -fx)
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
