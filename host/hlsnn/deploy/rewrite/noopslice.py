"""A ``Slice`` that keeps every element, dropped at import.

GhostNet's ghost module ends with ``torch.cat([x1, x2], dim=1)[:, :self.oup, :, :]``: with an even
``oup`` (and the default ratio 2) the concatenation has ``oup`` channels already, and TorchScript at
opset 17 still writes the ``Slice`` (starts 0, ends ``oup``, axis 1, step 1), where the dynamo
exporter drops it. Kept, it is a per-sample move (:mod:`hlsnn.deploy.run.samplewise`'s ``SwMove``) that
no network kernel takes, so the model ran layer by layer. A pre-pass of the importer
(:func:`rewrite`, after :mod:`hlsnn.deploy.rewrite.shapefold`) removes each ``Slice`` whose steps are all 1
(or absent) and whose output has its input's shape (static shapes at batch 1, or onnx's shape
inference): it then selects every element in order, the identity, so its readers read its input.
A ``Slice`` that is a graph output, or whose shapes are unknown, is left as it is.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex


def _identity(node, consts, shapes):
    if len(node.input) > 4 and node.input[4]:
        if node.input[4] not in consts or not (np.asarray(consts[node.input[4]]) == 1).all():
            return False
    a, b = shapes.get(node.input[0]), shapes.get(node.output[0])
    return a is not None and a == b and None not in a


def rewrite(model, file_shapes=None):
    """``model`` without its identity ``Slice`` nodes (a copy), or ``model`` itself."""
    g = model.graph
    if not any(n.op_type == "Slice" for n in g.node):
        return model
    consts, _, _, outputs = graphindex.index(g)
    shapes = file_shapes or graphindex.shapes(model, symbols=True)
    drop = {n.output[0]: n.input[0] for n in g.node
            if n.op_type == "Slice" and n.output[0] not in outputs and _identity(n, consts, shapes)}
    if not drop:
        return model
    m = graphindex.copied(model)
    kept = [n for n in m.graph.node if not (n.op_type == "Slice" and n.output[0] in drop)]
    for n in kept:
        for k, i in enumerate(n.input):
            while i in drop:
                i = drop[i]
            n.input[k] = i
    graphindex.replace(m.graph.node, kept)
    return m
