"""A ``BatchNormalization`` after an activation, folded forward into the ``Gemm`` that reads it.

Jet-tagging MLPs are often written ``Linear -> ReLU -> BatchNorm1d -> Dropout -> Linear`` (the
normalization after the activation): nothing before the ``BatchNormalization`` can take it (the
ReLU is between it and the ``Linear`` before), so it ran on the host between two engine layers
and the network ran layer by layer. On an (N, K) tensor it is an affine map of each feature,
``x * s + t`` with ``s = scale / sqrt(var + epsilon)`` and ``t = B - mean * s``, and a ``Gemm``
reading it computes ``alpha * (x * s + t) @ W + beta * C`` (``W`` = ``B`` or its transpose), which
is ``alpha * x @ (diag(s) W) + (beta * C + alpha * t @ W)``: the same ``Gemm`` of ``x`` with its
weights' rows scaled by ``s`` and a bias moved by ``t @ W``, exactly in real arithmetic (the float
import equals onnxruntime to float rounding). A pre-pass of the importer (:func:`rewrite`) does
this where the ``BatchNormalization`` has one output (inference), an input of rank 2 (onnx's
shape inference says so) that an activation (:data:`ACTIVATIONS`) computes, constant parameters,
and its output is read by that one ``Gemm``
(``transA`` 0, constant ``B`` and ``C``) and is no graph output. Anything else is left as it is
(a ``BatchNormalization`` before a padded ``Conv`` is not this: the zero padding would become
``t``; one of the network's input, a jet MLP's ``BatchNorm1d`` of raw features, stays the host
prefix that normalizes them before the first layer quantizes them,
:mod:`hlsnn.deploy.lower.netprefix`).
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr


#: the ops whose output a forward-folded BatchNormalization may read (an activation after a layer)
ACTIVATIONS = ("Relu", "Clip", "LeakyRelu", "Elu", "Selu", "PRelu", "HardSwish", "HardSigmoid", "Sigmoid", "Tanh")


def rewrite(model):
    """``model`` with each such ``BatchNormalization`` folded into the ``Gemm`` after it (a copy),
    or ``model`` itself."""
    g = model.graph
    if not any(n.op_type == "BatchNormalization" for n in g.node) or not any(n.op_type == "Gemm" for n in g.node):
        return model
    consts, producer, readers, outputs = graphindex.index(g)
    plan = []
    rank2 = None
    for n in g.node:
        if n.op_type != "BatchNormalization" or len([o for o in n.output if o]) != 1 or _attr(n, "training_mode", 0):
            continue
        if n.input[0] in consts or any(i not in consts for i in n.input[1:5]) or n.output[0] in outputs:
            continue
        src = producer.get(n.input[0])
        if src is None or src.op_type not in ACTIVATIONS:
            continue                    # the input's own BatchNorm (raw features) stays the host prefix
        users = readers.get(n.output[0], [])
        if len(users) != 1:
            continue
        gm = users[0]
        if gm.op_type != "Gemm" or gm.input[0] != n.output[0] or _attr(gm, "transA", 0) \
                or gm.input[1] not in consts or (len(gm.input) > 2 and gm.input[2] and gm.input[2] not in consts):
            continue
        rank2 = {k for k, v in graphindex.shapes(model).items() if len(v) == 2} if rank2 is None else rank2
        if n.input[0] not in rank2:
            continue
        plan.append((n, gm))
    if not plan:
        return model
    from onnx import helper, numpy_helper
    m, fresh = graphindex.copy_fresh(model)
    g = m.graph
    drop = set()
    by_out = {x.output[0]: x for x in g.node if x.output}
    for bn0, gm0 in plan:
        bn, gm = by_out[bn0.output[0]], by_out[gm0.output[0]]
        scale, bias, mean, var = (np.asarray(consts[i], np.float64) for i in bn.input[1:5])
        eps = float(_attr(bn, "epsilon", 1e-5))
        s = scale / np.sqrt(var + eps)
        t = bias - mean * s
        b = np.asarray(consts[gm.input[1]], np.float64)
        trans_b = int(_attr(gm, "transB", 0))
        w = b.T if trans_b else b                             # (K, N)
        if w.ndim != 2 or w.shape[0] != s.size:
            continue
        alpha, beta = float(_attr(gm, "alpha", 1.0)), float(_attr(gm, "beta", 1.0))
        c = np.asarray(consts[gm.input[2]], np.float64) if len(gm.input) > 2 and gm.input[2] else np.zeros(w.shape[1])
        c_new = np.broadcast_to(beta * c, (w.shape[1],)) if c.size in (1, w.shape[1]) else None
        if c_new is None:
            continue
        c_new = c_new + alpha * (t @ w)
        w_new = s[:, None] * w
        dt = numpy_helper.to_array(next(x for x in g.initializer if x.name == gm.input[1])).dtype \
            if any(x.name == gm.input[1] for x in g.initializer) else np.float32
        bname, cname = fresh(f"{gm.input[1]}__bn_folded"), fresh(f"{gm.output[0]}__bn_bias")
        g.initializer.extend([numpy_helper.from_array((w_new.T if trans_b else w_new).astype(dt), bname),
                              numpy_helper.from_array(c_new.astype(dt), cname)])
        graphindex.replace(gm.input, [bn.input[0], bname, cname])
        kept = [a for a in gm.attribute if a.name not in ("beta",)]
        graphindex.replace(gm.attribute, kept + [helper.make_attribute("beta", 1.0)])
        drop.add(id(bn))
    if not drop:
        return model
    graphindex.replace(g.node, [x for x in g.node if id(x) not in drop])
    return m
