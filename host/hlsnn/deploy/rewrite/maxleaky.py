"""``torch.maximum(x, c * x)`` as ``LeakyRelu(alpha=c)``, at import.

A leaky ReLU written by hand, ``torch.maximum(x, 0.2 * x)`` (also ``torch.max(x, x * 0.2)``),
is exported by both of torch's exporters as ``Max(x, Mul(x, c))`` with ``c`` one constant number
(TorchScript: a ``Constant`` node; dynamo: a scalar initializer), the ``Max``'s operands and the
``Mul``'s in either order. ``Max`` of two computed tensors has no rule
(:mod:`hlsnn.deploy.run.hostarith`), so the model did not import. For ``0 <= c <= 1``,
``max(x, c x) = x`` where ``x >= 0`` and ``c x`` where ``x < 0``: ONNX's ``LeakyRelu`` with
``alpha = c`` exactly (in float32 too: the same product ``c * x`` of the same float32 ``c``,
then a selection). A pre-pass of the importer (:func:`rewrite`) replaces each such ``Max`` by
that ``LeakyRelu`` of ``x`` (the ``Mul`` dropped when the ``Max`` was its only reader and it is
no graph output). Outside ``[0, 1]`` it is not a leaky ReLU (``c > 1``: ``c x`` for ``x > 0``;
``c < 0``: ``|x|``-like), and a ``c`` of more than one number is a per-element slope: both stay
``Max`` of two computed tensors, refused by name (:func:`why`).
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex


def _match(node, producer, consts):
    """``(x, mul node, c)`` when ``node`` is ``Max(x, Mul(x, c))`` in any operand order with ``c``
    a constant, else None."""
    if node.op_type != "Max" or len(node.input) != 2 or any(i in consts for i in node.input):
        return None
    for k in (0, 1):
        x, m = node.input[k], producer.get(node.input[1 - k])
        if m is None or m.op_type != "Mul" or len(m.input) != 2:
            continue
        for j in (0, 1):
            if m.input[j] == x and m.input[1 - j] in consts:
                return x, m, np.asarray(consts[m.input[1 - j]])
    return None


def _scalar(c):
    """``c`` as one float when it is one number of rank 0 or 1 (a scalar broadcast never changes
    the shape), else None."""
    if c.size != 1 or c.ndim > 1 or not np.issubdtype(c.dtype, np.floating):
        return None
    return float(c.reshape(-1)[0])


def why(node, g):
    """Why a ``Max`` ``node`` of graph ``g`` of the form ``Max(x, Mul(x, c))`` is no leaky ReLU
    (a string), or None when it is not of that form."""
    consts, producer, _, _ = graphindex.index(g)
    hit = _match(node, producer, consts)
    if hit is None:
        return None
    c = hit[2]
    v = _scalar(c)
    if v is None:
        return (f"Max(x, Mul(x, c)) with a constant c of shape {tuple(c.shape)} ({c.dtype}): a leaky ReLU "
                f"(LeakyRelu(alpha=c)) only with c one float number, 0 <= c <= 1")
    if 0.0 <= v <= 1.0:
        return f"Max(x, Mul(x, c)) with c = {v!r}, not a float32 number: LeakyRelu's alpha is a float32"
    return (f"Max(x, Mul(x, c)) with c = {v!r}: a leaky ReLU (LeakyRelu(alpha=c)) only for 0 <= c <= 1 "
            f"(other c is not max(x, c x) = LeakyRelu)")


def rewrite(model):
    """``model`` with each ``Max(x, Mul(x, c))`` (``c`` one number in ``[0, 1]``) as
    ``LeakyRelu(x, alpha=c)`` (a copy), or ``model`` itself when there is none."""
    g = model.graph
    if not any(n.op_type == "Max" for n in g.node):
        return model
    consts, producer, readers, outputs = graphindex.index(g)
    hits = {}
    for n in g.node:
        hit = _match(n, producer, consts)
        v = None if hit is None else _scalar(hit[2])
        if v is not None and 0.0 <= v <= 1.0 and float(np.float32(v)) == v:   # alpha is a float32 attribute
            hits[n.output[0]] = hit
    if not hits:
        return model
    from onnx import helper
    drop = {m.output[0] for _, m, _ in hits.values()
            if m.output[0] not in outputs and all(r.output[0] in hits for r in readers.get(m.output[0], []))}
    nodes = []
    for n in g.node:
        if n.op_type == "Mul" and n.output[0] in drop:
            continue
        if n.op_type == "Max" and n.output[0] in hits:
            x, _, c = hits[n.output[0]]
            n = helper.make_node("LeakyRelu", [x], [n.output[0]], name=n.name or n.output[0],
                                 alpha=float(np.float32(_scalar(c))))
        nodes.append(n)
    m = graphindex.copied(model)
    graphindex.replace(m.graph.node, nodes)
    return m
