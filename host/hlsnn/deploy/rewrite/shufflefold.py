"""ShuffleNet's channel shuffle before convolutions, folded into their weights.

``x.view(b, g, c // g, l).transpose(1, 2).contiguous().view(b, c, l)`` (or the 2-D
``view(b, g, c // g, h, w)``) is a ``Reshape``, ``Transpose``, ``Reshape`` chain that only
permutes the channels: output channel ``i`` is input channel ``perm[i]``. When every reader of the
chain's output is a ``Conv`` with a constant weight, :func:`rewrite` drops the chain and gives
each conv the weight that reads ``x`` itself: ``W'[:, perm[i]] = W[:, i]`` on the conv's ungrouped
weight (a grouped conv's weight with zeros off each output channel's group, ``group`` 1: the same
sums by ONNX's definition). The permutation is found by running the chain on the per-sample
shapes of :mod:`hlsnn.deploy.rewrite.shapefold` (``fs``) over an array of indices, so any chain of
``Reshape``/``Transpose`` that permutes whole channels qualifies and nothing else does. The convs
then read ``x`` directly: no per-sample move between engine layers.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex


def _chain(start, readers, outputs):
    """The ``Reshape``/``Transpose`` nodes reading ``start`` on, each the sole reader of the last."""
    nodes, t = [], start
    while len(readers.get(t, [])) == 1 and t not in outputs and readers[t][0].op_type in ("Reshape", "Transpose") \
            and readers[t][0].input[0] == t:
        nodes.append(readers[t][0])
        t = nodes[-1].output[0]
    return nodes


def _perm(x_shape, nodes, fs):
    """The channel permutation the chain makes of a (1, C, ...) tensor, or None."""
    if len(x_shape) < 3 or x_shape[0] != 1:
        return None
    y = graphindex.run_moves(nodes, x_shape, fs)
    if y is None:
        return None
    if tuple(y.shape) != tuple(x_shape):
        return None
    c, rest = x_shape[1], int(np.prod(x_shape[2:]))
    flat = y.reshape(c, rest)
    src = flat[:, 0] // rest
    if not np.array_equal(flat, src[:, None] * rest + np.arange(rest)[None, :]):
        return None
    return src


def rewrite(model, fs):
    """``model`` with each shuffle before convs folded (a copy), or ``model`` itself."""
    g = model.graph
    if fs is None or not any(n.op_type == "Transpose" for n in g.node):
        return model
    from onnx import numpy_helper
    from .splitconv import _ungroup
    consts, producer, readers, outputs = graphindex.index(g)
    plans, drop = {}, set()
    for n in g.node:
        if n.op_type != "Reshape" or id(n) in drop or n.input[0] in consts:
            continue
        x = n.input[0]                      # x may have other readers (a residual Add): the chain starts at n
        nodes = [n] + _chain(n.output[0], readers, outputs)
        if not any(k.op_type == "Transpose" for k in nodes):
            continue
        while nodes and nodes[-1].op_type != "Reshape":
            nodes.pop()
        if not nodes or fs.get(x) is None:
            continue
        perm = _perm(tuple(fs[x]), nodes, fs)
        out = nodes[-1].output[0]
        convs = readers.get(out, [])
        if perm is None or not convs or out in outputs or any(
                c.op_type != "Conv" or c.input[0] != out or len(c.input) < 2 or c.input[1] not in consts
                for c in convs):
            continue
        for c in convs:
            w = np.asarray(consts[c.input[1]])
            group = int(graphindex.attr(c, "group", 1))
            full = _ungroup(w, group)
            if full.shape[1] != len(perm):
                break
            new = np.zeros_like(full)
            new[:, perm] = full
            plans[id(c)] = (new, x)
        else:
            drop.update(id(k) for k in nodes)
            continue
        for c in convs:
            plans.pop(id(c), None)
    if not plans:
        return model
    m, fresh = graphindex.copy_fresh(model)
    kept = []
    for n, orig in zip(m.graph.node, g.node):
        if id(orig) in drop:
            continue
        if id(orig) in plans:
            w, x = plans[id(orig)]
            name = fresh(f"{n.name or n.output[0]}/unshuffled_w")
            m.graph.initializer.append(numpy_helper.from_array(w.astype(np.float32), name))
            n.input[0], n.input[1] = x, name
            attrs = [a for a in n.attribute if a.name != "group"]
            graphindex.replace(n.attribute, attrs)
            fs[name] = tuple(w.shape)
        kept.append(n)
    graphindex.replace(m.graph.node, kept)
    return m
