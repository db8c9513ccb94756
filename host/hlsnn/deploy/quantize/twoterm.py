"""Two shift codes per weight summed in one accumulator: a shift format's ``weight_terms: 2``.

Why: two-hot codes carry about three significant bits (:mod:`hlsnn.deploy.quantize.shift_fit`), and
layers with few weights per output (a depthwise 3x3, a first conv of one input channel: nine)
cannot average that error away. A second code for the rounding error, ``W ~ Q1 + Q2``, gives
the weights about twice the bits; summing both terms in the layer's own accumulator (the
reduction doubled) adds no rounding of its own, unlike a second layer and an ``Add``.

The rule (exact, the specification of what the kernel computes):

1. **Codes.** ``Q1`` and ``Q2`` are codes of the layer's format at the SAME scale exponents
   ``F`` (one per tensor or per output row, as ``weight_scale`` says): ``Q2`` is the code of
   the residual ``W - Q1 * 2**-F``, whose magnitude is at most about half a step of ``Q1``'s
   levels, so it lies well inside the code range (two-hot, ``exp_bits`` 4: integers 1 ...
   ``2**16``; residuals below half of the smallest level become zero codes). With
   ``weight_fit: nearest`` both are nearest codes; with ``weight_fit: output`` (the default)
   ``Q1`` is shift_fit's GPTQ fit of ``W`` and ``Q2`` the GPTQ fit of ``W - Q1`` with the same
   input Gram matrix (both minimise ``|| (W - Q1 - Q2) X ||`` greedily), and the bias
   correction uses ``W - Q1 - Q2``.
2. **GEMM.** Each GEMM of the layer (one per pack of groups, :mod:`hlsnn.deploy.run.groups`)
   gets the weight rows ``[Q1 | Q2]`` (K doubled: ``Q1``'s K columns, then ``Q2``'s) and
   the input rows ``[p | p]`` (each im2col / dense row twice). The accumulator is then
   ``sum_k (q1_k + q2_k) x_k`` exactly; bias, ReLU, the output shift and saturation are the
   kernel's rules as for one term (``shift_mac.emulator.output_rule``). A doubled K beyond
   the accelerator's ``max_k`` runs through the kernel's K tiling (exact int64 sums).
3. **Network mode** (one start of the network kernel) addresses its input itself: its program's
   weights are the values ``Q1 + Q2`` (the same exact accumulator) and the shift_mac kernel
   sums the two codes in each unit (a second shift-add, its ROM ``kWeights2``:
   :mod:`hlsnn.engines.shift_mac.network.lower`); an engine whose rules do not list two terms
   (``terms``) is refused by name by :func:`hlsnn.deploy.lower.program.lower`.
4. **Cost.** The kernel calls are those of the layer with K doubled: the cycle model costs
   :func:`cost_layer` (the layer with its weights twice along the input axis).
"""
from __future__ import annotations

import copy
import dataclasses

import numpy as np

from ...formats import shift as sfmt
from ...formats import shift_codes as codes
from ..run import groups
from . import shift_fit

#: The choices of a shift format's ``weight_terms``.
TERMS = (1, 2)


def split(t, k):
    """``(Q1, Q2)`` code values (int64, (N, k) each) of a two-term ShiftTensor ``t`` (N, 2k)."""
    v = t.code_values()
    return v[:, :k], v[:, k:]


def join(values1, values2, t):
    """The two-term ShiftTensor ``[values1 | values2]`` at ``t``'s scale exponents, mode and axis."""
    return sfmt.encode(np.hstack([values1, values2]), t.scale_exponent, t.mode, t.exp_bits, delta=t.delta,
                       axis=t.axis)


def nearest(t, w):
    """Rule 1 with nearest codes: ``t`` the nearest-code ShiftTensor of the float GEMM weight ``w``
    (N, K); returns the two-term tensor (N, 2K)."""
    tab = codes.table(t.mode, t.exp_bits, t.delta)
    f = np.asarray(t.scale_exponent, np.int64).reshape(-1, 1)
    v1 = t.code_values().astype(np.float64)
    v2 = shift_fit.nearest_values(np.ldexp(np.asarray(w, np.float64), f) - v1, tab)
    return join(v1, v2, t)


def rows(r, groups_):
    """Rule 2's input rows: ``r`` (M, groups * kg) -> (M, groups * 2 kg), each group's kg
    columns twice in a row (the layout of :func:`join`'s weight rows, per GEMM)."""
    m = r.shape[0]
    g = r.reshape(m, groups_, -1)
    return np.concatenate([g, g], axis=2).reshape(m, -1)


def fit_layer(layer, x, fx, f, tab):
    """:func:`hlsnn.deploy.quantize.shift_fit.fit_layer` for two terms: ``(values1, values2, bias)``,
    each values (Z, K of one group) in code units at scale exponents ``f`` (Z, 1)."""
    w = groups.gemm_weight(layer, 1)
    g = layer.group if layer.kind == "conv" else 1
    kg, zg = w.shape[1], w.shape[0] // g
    wg, fg = w.reshape(g, zg, kg), np.reshape(f, (g, zg, 1))
    if kg > shift_fit.MAX_FEEDBACK_K:
        means = shift_fit._means(layer, x, g)
        v1 = shift_fit.nearest_values(np.ldexp(wg, fg), tab)
        v2 = shift_fit.nearest_values(np.ldexp(wg, fg) - v1, tab)
    else:
        grams = shift_fit._grams(layer, x)
        hs, means = np.stack([t[0] for t in grams]), np.stack([t[1] for t in grams])
        def gptq(a):                                        # as shift_fit.fit_layer calls it
            return shift_fit.gptq_values(a[0], hs[0], tab, fg[0])[None] if g == 1 else \
                shift_fit.gptq_values(a, hs, tab, fg)
        v1 = gptq(wg)
        v2 = gptq(wg - np.ldexp(v1, -fg))
    bias = np.array(layer.b, np.float64)
    bias += np.einsum("gzk,gk->gz", wg - np.ldexp(v1 + v2, -fg), np.ldexp(means, -fx)).reshape(-1)
    return v1.reshape(w.shape), v2.reshape(w.shape), bias


def refit(ex, x, fx, target=None):
    """:func:`hlsnn.deploy.quantize.shift_fit.refit` for a two-term ``ShiftExec``: sets ``ex.wq`` (the
    packs' rows ``[Q1 | Q2]``) and ``ex.b_fit``; returns the layer's own ``Q1 + Q2`` values
    (``target``: as for :func:`hlsnn.deploy.quantize.shift_fit.refit`)."""
    t, layer = ex.wq, (ex.layer if target is None else target)
    tab = codes.table(t.mode, t.exp_bits, t.delta, getattr(ex, "max_code", None))   # the code limit (formats.shift)
    f = np.broadcast_to(np.asarray(t.scale_exponent, np.int64).reshape(-1, 1), (t.shape[0], 1))
    v1, v2, ex.b_fit = fit_layer(layer, x, fx, f, tab)
    own = (v1, v2)
    if layer.kind == "conv" and layer.group > 1:             # into the packs' block-diagonal rows
        own = tuple(groups.gemm_weight(shift_fit._Weights(layer, v.reshape(layer.w.shape)), ex.gp) for v in own)
    ex.wq = join(*own, t)
    ex.n_chunks = None
    ex.stats.weight_sparsity = float(np.mean(ex.wq.zero))
    return v1 + v2


def cost_layer(layer, terms):
    """The layer whose kernel calls a ``terms``-term layer makes (rule 4): itself for one term,
    else the same layer with its weights ``terms`` times along the input axis (K doubled)."""
    if terms == 1:
        return layer
    w = np.concatenate([np.asarray(layer.w)] * terms, axis=1)
    if dataclasses.is_dataclass(layer):
        return dataclasses.replace(layer, w=w)
    wide = copy.copy(layer)                  # a compiled model's LayerStub (hlsnn.deploy.lower.layers)
    wide.w = w
    return wide
