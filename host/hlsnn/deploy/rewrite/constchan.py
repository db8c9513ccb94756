"""Channels that are constants, folded into the layers that read them (a pruned model's dead channels).

A pruned model can lose every weight of a channel: a ``Conv`` output channel (or a ``Gemm`` output
feature) whose weights are all zero outputs its bias at every position of every sample, a
constant. A layer that reads such a channel multiplies a constant; where a channel of that layer
reads *only* constants, its ``BatchNormalization`` saw no variance in training, and folding it
(``s = gamma / sqrt(var + eps)``, :mod:`hlsnn.deploy.importer.onnx_import`) gives weights of hundreds
whose products with the constants cancel in float and not on an engine's grid; one such weight
also sets the quantization step of a whole layer or block. A pre-pass of the importer
(:func:`rewrite`) removes those products before anything is quantized:

* A tensor's **constant channels** (axis 1, a value per channel, the same at every position and
  every sample) start at a ``Conv`` output channel or a ``Gemm`` output column with all-zero
  weights (the value: its bias, 0 without one; a ``Gemm``'s ``beta * C``). They are carried,
  each value computed in float64, through an inference ``BatchNormalization`` with constant
  parameters (``(c - mean) / sqrt(var + eps) * scale + B``), the per-element activations
  :data:`UNARY` (``Relu``, ``Clip`` with constant bounds, ``LeakyRelu``, ``HardSigmoid``,
  ``HardSwish``, ``Sigmoid``, ``Tanh``, ``Identity``, ``Dropout``), a ``PRelu`` with a constant
  slope, one for all or one a channel (shape (C, 1, ...)), ``MaxPool`` (its padding is minus infinity),
  ``AveragePool`` without padding or with ``count_include_pad`` 0, ``GlobalAveragePool`` and
  ``GlobalMaxPool``, and ``Flatten`` (axis 1) of a map whose per-sample size onnx's shape
  inference knows (each channel's value on each of its features), and ``Concat`` along the channels
  (axis 1, or its negative equivalent) of inputs whose channel counts onnx's shape inference knows
  (each input's constant channels at its offset; the input need not be the first). Any other op's
  outputs have no constant channels.
* A **reader** folds them: a ``Conv`` with no padding (pads all 0; ``auto_pad`` NOTSET with zero
  pads, or VALID; any kernel, stride, dilation and groups, 1-D or 2-D), its weight and bias
  constant: for each output channel ``o`` and each constant input channel ``i`` of its group,
  ``bias[o] += sum(W[o, i]) * c[i]`` and ``W[o, i] = 0``; a ``Gemm`` (``transA`` 0, constant ``B``
  and ``C`` or none): for each constant input feature ``k``, ``C += alpha * c[k] * B'[k, :]`` and
  row ``k`` of ``B'`` zeroed (``C`` made full-length, ``beta`` 1). The bias sums are float64, then
  the weight's own dtype: the function is the same in real arithmetic, and a reader's output channel
  left with no weight is a constant channel in turn. A padded ``Conv`` is never folded into: its
  border taps read zeros, not the constant.
* A model :func:`hlsnn.train.export` wrote (its ``<file>.hlsnn-train.json`` beside it) is left
  as it is: its codes are what was trained (``hlsnn.train.fold_constant_channels`` does this
  before training's int8 step), and what was trained is what deploys.

Where no reader has a constant input channel the model is returned as it is.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr

#: the per-element activations a constant channel passes through (:func:`_unary` computes each)
UNARY = ("Relu", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "Sigmoid", "Tanh", "Identity", "Dropout")


def _unary(node, c, consts):
    """``node`` (one of :data:`UNARY`) on the channel values ``c`` (float64, NaN: not constant),
    or None where a bound is not a constant."""
    op = node.op_type
    if op in ("Identity", "Dropout"):
        return c
    if op == "Relu":
        return np.maximum(c, 0.0)
    if op == "Clip":
        lo, hi = _attr(node, "min"), _attr(node, "max")          # opset < 11: attributes
        for k, name in ((1, "lo"), (2, "hi")):
            if len(node.input) > k and node.input[k]:
                if node.input[k] not in consts:
                    return None
                v = float(np.asarray(consts[node.input[k]]).reshape(()))
                lo, hi = (v, hi) if name == "lo" else (lo, v)
        out = c if lo is None else np.maximum(c, lo)
        return out if hi is None else np.minimum(out, hi)
    if op == "LeakyRelu":
        a = float(_attr(node, "alpha", 0.01))
        return np.where(c >= 0, c, a * c)
    if op == "HardSigmoid":
        a, b = float(_attr(node, "alpha", 0.2)), float(_attr(node, "beta", 0.5))
        return np.clip(a * c + b, 0.0, 1.0)
    if op == "HardSwish":
        return c * np.clip(c / 6.0 + 0.5, 0.0, 1.0)
    if op == "Sigmoid":
        return 1.0 / (1.0 + np.exp(-c))
    if op == "Tanh":
        return np.tanh(c)
    return None


def _pads_zero(node):
    auto = _attr(node, "auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto == "VALID":
        return True
    return auto == "NOTSET" and not any(int(p) for p in (_attr(node, "pads") or ()))


def _carry(node, ins, consts, shapes):
    """The constant channels of ``node``'s first output, given ``ins`` (its first input's), or None."""
    op = node.op_type
    if op in UNARY:
        return _unary(node, ins, consts)
    if op == "BatchNormalization":
        if len([o for o in node.output if o]) != 1 or _attr(node, "training_mode", 0) \
                or any(i not in consts for i in node.input[1:5]):
            return None
        scale, bias, mean, var = (np.asarray(consts[i], np.float64).reshape(-1) for i in node.input[1:5])
        if not scale.size == bias.size == mean.size == var.size == ins.size:
            return None
        return (ins - mean) / np.sqrt(var + float(_attr(node, "epsilon", 1e-5))) * scale + bias
    if op == "PRelu":
        if node.input[1] not in consts:
            return None
        s = np.asarray(consts[node.input[1]], np.float64)
        if s.size == 1:                     # one slope for every element
            s = np.full(ins.size, float(s.reshape(())))
        elif s.ndim >= 2 and s.shape[0] == ins.size and s.size == ins.size:
            s = s.reshape(-1)               # (C, 1, 1): one slope a channel of a map
        else:
            return None                     # (C,) broadcasts along the last axis, not the channels
        return np.where(ins >= 0, ins, s * ins)
    if op in ("MaxPool", "GlobalAveragePool", "GlobalMaxPool"):
        return ins if len([o for o in node.output if o]) == 1 else None     # MaxPool's indices: not followed
    if op == "AveragePool":
        return ins if _pads_zero(node) or not int(_attr(node, "count_include_pad", 0)) else None
    if op == "Flatten":
        shape = shapes.get(node.input[0])
        if int(_attr(node, "axis", 1)) != 1 or shape is None or len(shape) < 2 or shape[1] != ins.size \
                or any(not isinstance(d, int) or d <= 0 for d in shape[2:]):
            return None
        return np.repeat(ins, int(np.prod(shape[2:], dtype=np.int64)))
    return None


def _concat(node, chans, shapes):
    """The constant channels of a ``Concat`` along axis 1: each input's in order (NaN for an input
    without any), or None for another axis or an input whose channel count is not known."""
    known = [shapes.get(x) for x in node.input]
    rank = next((len(s) for s in known if s is not None), None)
    axis = int(_attr(node, "axis", 1))
    if rank is None or not -rank <= axis < rank or axis % rank != 1:
        return None
    parts = []
    for x, s in zip(node.input, known):
        if s is None or len(s) != rank or not isinstance(s[1], int) or s[1] <= 0:
            return None
        c = chans.get(x)
        if c is not None and c.size != s[1]:
            return None
        parts.append(c if c is not None else np.full(s[1], np.nan))
    return np.concatenate(parts)


def _conv_plan(node, ins, consts):
    """``(w, b, out)`` for a ``Conv``: its weight and bias with the constant input channels ``ins``
    folded (None where nothing folds), and its output's constant channels."""
    if node.input[1] not in consts or (len(node.input) > 2 and node.input[2] and node.input[2] not in consts):
        return None, None, None
    w = np.asarray(consts[node.input[1]], np.float64)
    if w.ndim < 3:
        return None, None, None
    cout, cg = w.shape[0], w.shape[1]
    b = np.asarray(consts[node.input[2]], np.float64).reshape(-1) if len(node.input) > 2 and node.input[2] \
        else np.zeros(cout)
    groups = int(_attr(node, "group", 1))
    folded = False
    if ins is not None and ins.size == cg * groups and cout % groups == 0 and b.size == cout and _pads_zero(node):
        per = cout // groups
        w, b = w.copy(), b.copy()
        for o in range(cout):
            lo = (o // per) * cg
            for k in range(cg):
                c = ins[lo + k]
                if np.isfinite(c) and np.any(w[o, k]):
                    b[o] += float(np.sum(w[o, k])) * c
                    w[o, k] = 0.0
                    folded = True
    dead = ~np.any(w.reshape(cout, -1), axis=1)
    out = np.where(dead, b if b.size == cout else np.nan, np.nan)
    return (w, b, out) if folded else (None, None, out)


def _gemm_plan(node, ins, consts):
    """``(w, c, out)`` for a ``Gemm`` as :func:`_conv_plan` (``w`` as ``B'``, (K, N))."""
    if _attr(node, "transA", 0) or node.input[1] not in consts \
            or (len(node.input) > 2 and node.input[2] and node.input[2] not in consts):
        return None, None, None
    w = np.asarray(consts[node.input[1]], np.float64)
    if w.ndim != 2:
        return None, None, None
    w = w.T if _attr(node, "transB", 0) else w
    k_in, n_out = w.shape
    alpha, beta = float(_attr(node, "alpha", 1.0)), float(_attr(node, "beta", 1.0))
    c = np.asarray(consts[node.input[2]], np.float64) if len(node.input) > 2 and node.input[2] else np.zeros(1)
    if c.size not in (1, n_out):
        return None, None, None
    c = np.broadcast_to(beta * c.reshape(-1), (n_out,)).copy()
    folded = False
    if ins is not None and ins.size == k_in:
        w = w.copy()
        for k in np.flatnonzero(np.isfinite(ins)):
            if np.any(w[k]):
                c += alpha * ins[k] * w[k]
                w[k] = 0.0
                folded = True
    out = np.where(~np.any(w, axis=0), c, np.nan)
    return (w, c, out) if folded else (None, None, out)


def rewrite(model, *, trained=False):
    """``model`` with every constant input channel of an unpadded ``Conv`` or a ``Gemm`` folded
    into its bias (a copy; see the module docstring), or ``model`` itself where none is, or where
    ``trained`` (an :func:`hlsnn.train.export` file)."""
    g = model.graph
    if trained or not any(n.op_type in ("Conv", "Gemm") for n in g.node):
        return model
    consts = graphindex.constants(g)
    chans, plans, shapes = {}, [], None
    for n in g.node:
        if not n.input or not n.output:
            continue
        ins = chans.get(n.input[0])
        if n.op_type in ("Conv", "Gemm"):
            w, b, out = (_conv_plan if n.op_type == "Conv" else _gemm_plan)(n, ins, consts)
            if w is not None:
                plans.append((n, w, b))
        elif n.op_type == "Concat":
            if not any(x in chans for x in n.input):
                continue
            if shapes is None:
                shapes = graphindex.shapes(model)
            out = _concat(n, chans, shapes)
        elif ins is None:
            continue
        else:
            if n.op_type == "Flatten" and shapes is None:
                shapes = graphindex.shapes(model)
            out = _carry(n, ins, consts, shapes or {})
        if out is not None and np.isfinite(out).any():
            chans[n.output[0]] = out
    if not plans:
        return model
    from onnx import helper, numpy_helper
    m, fresh = graphindex.copy_fresh(model)
    by_out = {x.output[0]: x for x in m.graph.node if x.output}
    for n0, w, b in plans:
        n = by_out[n0.output[0]]
        dt = np.asarray(consts[n.input[1]]).dtype
        dt = dt if dt.kind == "f" else np.dtype(np.float32)
        if n.op_type == "Gemm":
            w = w.T if _attr(n, "transB", 0) else w
        wname, bname = fresh(f"{n.input[1]}__const_folded"), fresh(f"{n.output[0]}__const_bias")
        m.graph.initializer.extend([numpy_helper.from_array(w.astype(dt), wname),
                                    numpy_helper.from_array(b.astype(dt), bname)])
        x = n.input[0]
        graphindex.replace(n.input, [x, wname, bname])
        if n.op_type == "Gemm":
            kept = [a for a in n.attribute if a.name != "beta"]
            graphindex.replace(n.attribute, kept + [helper.make_attribute("beta", 1.0)])
    return m

