"""Nearest upsampling written by hand with ``repeat_interleave``, rewritten as the nearest ``Resize``.

A pre-pass of the importer (:func:`rewrite`, called by :func:`hlsnn.deploy.importer.onnx_import.load_onnx`
after :mod:`hlsnn.deploy.rewrite.shapefold` folded the shape arithmetic; a model without the pattern passes
unchanged). ``x.repeat_interleave(f, dim=a)`` (a U-Net's upsampling written without
``nn.Upsample``) is exported as ``Unsqueeze`` of axis ``a + 1``, then ``Tile`` (TorchScript) or
``Expand`` (dynamo) by ``f`` along that new axis, then a ``Reshape`` that merges it into axis
``a``: each element of axis ``a`` repeated ``f`` times in place, which is ONNX's nearest ``Resize``
by scale ``f`` on that axis with ``coordinate_transformation_mode`` asymmetric and ``nearest_mode``
floor (``y[i] = x[floor(i / f)]``), exactly. The three nodes become that ``Resize`` (an engine-side
``Upsample``: rule nearest_upsample of the network mode), when the inner tensors are read only by the next node
and the shapes (from onnx's shape inference) are static and say so. Anything else is left as it is
(the importer names the ``Tile`` / ``Expand``).
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr


def _match(reshape, producer, readers, consts, shapes):
    """``(x, factors)`` when ``reshape`` ends a repeat_interleave of ``x``, else None."""
    rep = producer.get(reshape.input[0])
    if rep is None or rep.op_type not in ("Tile", "Expand") or len(rep.input) < 2 or rep.input[1] not in consts:
        return None
    uns = producer.get(rep.input[0])
    if uns is None or uns.op_type != "Unsqueeze":
        return None
    axes = _attr(uns, "axes")
    if axes is None:
        if len(uns.input) < 2 or uns.input[1] not in consts:
            return None
        axes = np.asarray(consts[uns.input[1]]).reshape(-1).tolist()
    x = uns.input[0]
    xs = shapes.get(x)
    if xs is None or None in xs or len(axes) != 1 or len(readers.get(uns.output[0], ())) != 1 \
            or len(readers.get(rep.output[0], ())) != 1:
        return None
    a = int(axes[0]) % (len(xs) + 1)
    if a == 0:
        return None
    us = xs[:a] + (1,) + xs[a:]
    r = [int(v) for v in np.asarray(consts[rep.input[1]]).reshape(-1)]
    if len(r) != len(us) or r[a] < 2 or any(v != 1 and not (rep.op_type == "Expand" and v == us[i])
                                           for i, v in enumerate(r) if i != a):
        return None
    want = xs[:a - 1] + (xs[a - 1] * r[a],) + xs[a:]
    if shapes.get(reshape.output[0]) != want:
        return None
    factors = [1.0] * len(xs)
    factors[a - 1] = float(r[a])
    return x, factors


def rewrite(model, file_shapes=None):
    """``model`` with each such repeat rewritten as a nearest ``Resize`` (a copy), or ``model`` itself.
    ``file_shapes``: every tensor's shape at batch 1 (:func:`hlsnn.deploy.rewrite.shapefold.file_shapes`),
    when the importer has them; else onnx's shape inference."""
    g = model.graph
    ops = {n.op_type for n in g.node}
    if "Unsqueeze" not in ops or not ops & {"Tile", "Expand"}:
        return model
    consts, producer, readers, _ = graphindex.index(g)
    shapes = None
    plan = {}
    for k, n in enumerate(g.node):
        if n.op_type != "Reshape" or len(n.input) < 2:
            continue
        shapes = (file_shapes or graphindex.shapes(model, data_prop=True)) if shapes is None else shapes
        found = _match(n, producer, readers, consts, shapes)
        if found is not None:
            plan[k] = found
    if not plan:
        return model
    m, fresh = graphindex.copy_fresh(model)
    g = m.graph
    for k, (x, factors) in plan.items():
        node = g.node[k]
        graphindex.to_nearest_resize(g, node, x, factors, fresh(f"{node.output[0]}__repeat_scales"))
    return m
