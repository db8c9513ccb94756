"""Two means over the two spatial axes, one after the other, as one mean.

A squeeze-excite block written ``x.mean(-1).mean(-1)`` (or ``x.mean(3).mean(2)``, or with
``keepdim=True`` twice) on an (N, C, H, W) map exports as two ``ReduceMean`` nodes: W first, then
H. The mean of H means of W values each is the mean of the H*W values, so :func:`rewrite` writes
the pair as one ``ReduceMean`` over axes (2, 3) with the pair's ``keepdims``, which the importer
takes as a global average pool (an integer rule of the network kernel on every engine) where the
first mean alone, over W only, has none. Only a first mean whose sole reader is the second is
rewritten; anything else is left as it is.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex


def _axes(node, consts):
    """The node's axes (a list), or None when they are not known constants."""
    for a in node.attribute:
        if a.name == "axes":
            return list(a.ints)
    if len(node.input) > 1 and node.input[1]:
        return [int(v) for v in np.asarray(consts[node.input[1]]).reshape(-1)] if node.input[1] in consts else None
    return None


def rewrite(model):
    """``model`` with each spatial ``ReduceMean`` pair as one mean over axes (2, 3) (module
    docstring), a copy (``model`` itself is not changed); the same model when it has none. From
    opset 18 on the axes are an initializer, ``{output}__meanfold_axes`` (``_`` appended where the
    file has that name: :func:`hlsnn.deploy.importer.graphindex.copy_fresh`)."""
    from onnx import helper, numpy_helper
    g = model.graph
    means = [n for n in g.node if n.op_type == "ReduceMean"]
    if len(means) < 2:
        return model
    consts, _, readers, outputs = graphindex.index(g)
    ranks = {k: len(v) for k, v in graphindex.shapes(model).items()}     # none known: no rewrite
    pairs = {}
    for first in means:
        users = readers.get(first.output[0], [])
        if len(users) != 1 or first.output[0] in outputs or users[0].op_type != "ReduceMean":
            continue
        second, k = users[0], graphindex.attr(first, "keepdims", 1)
        a1, a2 = _axes(first, consts), _axes(second, consts)
        if ranks.get(first.input[0]) != 4 or graphindex.attr(second, "keepdims", 1) != k or a1 is None \
                or a2 is None or len(a1) != 1 or len(a2) != 1:
            continue
        ax1 = a1[0] % 4
        ax2 = a2[0] % (4 if k else 3)
        if k:
            done = {ax1, ax2} == {2, 3}
        else:                           # the second's axes count without the first's reduced one
            done = ax1 in (2, 3) and ax2 == 2
        if done:
            pairs[id(second)] = first
    if not pairs:
        return model
    drop = {id(f) for f in pairs.values()}
    m, fresh = graphindex.copy_fresh(model)
    nodes = []
    for n, orig in zip(m.graph.node, g.node):
        if id(orig) in drop:
            continue
        if id(orig) in pairs:
            first = pairs[id(orig)]
            n = helper.make_node("ReduceMean", [first.input[0]], list(n.output), name=n.name or first.name,
                                 axes=[2, 3], keepdims=graphindex.attr(n, "keepdims", 1))
        nodes.append(n)
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=13)
    if opset >= 18:                     # axes are an input from opset 18 on
        extra = []
        for n in nodes:
            if n.op_type == "ReduceMean" and any(a.name == "axes" for a in n.attribute):
                name = fresh(f"{n.output[0]}__meanfold_axes")
                extra.append(numpy_helper.from_array(np.array([2, 3], np.int64), name))
                keep = [a for a in n.attribute if a.name != "axes"]
                graphindex.replace(n.attribute, keep)
                n.input.append(name)
        m.graph.initializer.extend(extra)
    graphindex.replace(m.graph.node, nodes)
    return m
