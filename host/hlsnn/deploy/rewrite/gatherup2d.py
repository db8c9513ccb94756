"""The dynamo exporter's 2-D ``mode='nearest-exact'`` upsampling, rewritten as the nearest ``Resize``.

A pre-pass of the importer (:func:`rewrite`, called by :func:`hlsnn.deploy.importer.onnx_import.load_onnx`
after :mod:`hlsnn.deploy.rewrite.torchdecomp`; a model without the pattern passes unchanged). torch's
dynamo exporter writes ``F.interpolate(x, scale_factor=2, mode='nearest-exact')`` of an (N, C, H, W)
tensor (TorchScript at opset 17 cannot export it at all) as no ``Resize`` but an index gather:
``Transpose(x, perm=[2, 3, 0, 1])`` to (H, W, N, C), ``GatherND`` (``batch_dims`` 0) by constant
indices of shape (Ho, Wo, 2), output row ``i`` and column ``j`` reading input pixel ``idx[i, j]``,
then ``Transpose(perm=[2, 3, 0, 1])`` back to (N, C, Ho, Wo). When ``idx[i, j] = (i // fh, j // fw)``
with integer factors ``fh = Ho / H`` and ``fw = Wo / W`` (what ``nearest-exact`` computes at an integer
scale: ``floor((i + 0.5) / f)`` is ``i // f``), that is ONNX's nearest ``Resize`` by scales
(1, 1, fh, fw) with ``coordinate_transformation_mode`` asymmetric and ``nearest_mode`` floor
(``y[.., i, j] = x[.., i // fh, j // fw]``), exactly: the three nodes become that ``Resize`` (an
engine-side ``Upsample``, rule nearest_upsample of the network mode) when the inner tensors are read by no other
node. Any other index map (a non-integer scale) is left as it is: the importer names the
``GatherND``. The 1-D form (a gather along L) is :mod:`hlsnn.deploy.rewrite.torchdecomp`'s.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex

PERM = [2, 3, 0, 1]


def factors(idx, hw):
    """``(fh, fw)`` when the (Ho, Wo, 2) ``idx`` reads pixel ``(i // fh, j // fw)`` of an (H, W) map
    ``hw`` with integer factors, else None."""
    idx = np.asarray(idx)
    if idx.ndim != 3 or idx.shape[2] != 2 or hw is None or len(hw) != 2 or not all(isinstance(d, int) for d in hw):
        return None
    (ho, wo), (h, w) = idx.shape[:2], hw
    if h < 1 or w < 1 or ho % h or wo % w:
        return None
    fh, fw = ho // h, wo // w
    want = np.stack(np.meshgrid(np.arange(ho) // fh, np.arange(wo) // fw, indexing="ij"), axis=-1)
    return (fh, fw) if np.array_equal(idx.astype(np.int64), want) else None


def _hw(model):
    """``{tensor: (H, W)}`` of the 4-D tensors whose H and W onnx's shape inference knows."""
    return {k: v[2:] for k, v in graphindex.shapes(model).items() if len(v) == 4 and None not in v[2:]}


def rewrite(model):
    """``model`` with each such gather rewritten as a nearest ``Resize`` (a copy), or ``model`` itself."""
    g = model.graph
    if not any(n.op_type == "GatherND" for n in g.node):
        return model
    consts, producer, readers, outputs = graphindex.index(g)
    shapes = None
    plan = {}                           # index of the closing Transpose -> (x, fh, fw, [first two nodes])
    for k, n in enumerate(g.node):
        if n.op_type != "Transpose" or graphindex.attr(n, "perm") != PERM:
            continue
        gnd = producer.get(n.input[0])
        if gnd is None or gnd.op_type != "GatherND" or graphindex.attr(gnd, "batch_dims", 0) != 0 \
                or gnd.input[1] not in consts:
            continue
        t = producer.get(gnd.input[0])
        if t is None or t.op_type != "Transpose" or graphindex.attr(t, "perm") != PERM:
            continue
        if any(o in outputs or len(readers.get(o, ())) != 1 for o in (t.output[0], gnd.output[0])):
            continue
        shapes = _hw(model) if shapes is None else shapes
        f = factors(consts[gnd.input[1]], shapes.get(t.input[0]))
        if f is not None:
            plan[k] = (t.input[0], f[0], f[1], (id(t), id(gnd)))
    if not plan:
        return model
    m, fresh = graphindex.copy_fresh(model)
    g = m.graph
    drop_out, idx_names = set(), set()
    for k, (x, fh, fw, _) in plan.items():
        node = g.node[k]
        gnd = next(n for n in g.node if node.input[0] in n.output)
        t = next(n for n in g.node if gnd.input[0] in n.output)
        drop_out.update([gnd.output[0], t.output[0]])
        idx_names.add(gnd.input[1])
        graphindex.to_nearest_resize(g, node, x, [1, 1, fh, fw], fresh(f"{node.output[0]}__nearest_scales"))
    graphindex.replace(g.node, [n for n in g.node if not (set(n.output) & drop_out)])
    read = {i for n in g.node for i in n.input}
    inits = [t for t in g.initializer if t.name in read or t.name not in idx_names]   # the gathers' indices go
    graphindex.replace(g.initializer, inits)
    return m
