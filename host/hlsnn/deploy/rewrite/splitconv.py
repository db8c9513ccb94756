"""A convolution whose channels are split, rewritten as one convolution per part
(``F.glu(conv(x), dim=1)``, ``nn.GLU(dim=1)``, ``conv(x).chunk(2, dim=1)``); a ``Gemm``'s
features split alike (``linear(x).chunk(2, dim=-1)``, a gated head), one ``Gemm`` per part.

A pre-pass of the importer (:func:`rewrite`, called by :func:`hlsnn.deploy.importer.onnx_import.load_onnx`
after :mod:`hlsnn.deploy.rewrite.shapefold` folded the shape arithmetic; a model without the pattern passes
unchanged). A ``Split`` (or ``Slice`` nodes, TorchScript's ``chunk``) of the channel axis (1) of a
``Conv``'s output that only they read, with a constant weight (and bias), becomes one ``Conv`` per
part: the same input and attributes, the weight's (and bias's) rows of that part; a grouped conv's
part is the ungrouped conv of those rows (zero weights off each row's group, ``group`` 1: the same
sums). Each output channel of a convolution is computed from the input alone, so the parts are the
same tensors by ONNX's definitions (exact; tested against onnxruntime on files torch wrote). The
parts are engine layers like any conv; the gate after them (``a * sigmoid(b)``) is the usual host
``Sigmoid`` and ``Mul``, so a GLU block needs no per-sample move between its engine layers.

The part sizes come from ``Split``'s ``split`` input (opset 13+), its ``split`` attribute
(before), or ``num_outputs`` / the number of outputs (equal parts, the last one smaller when
the channels do not divide, as ONNX defines); a ``Slice``'s from its constant bounds (step 1).
Anything else (a split of another axis, a conv output read elsewhere too, an ungrouped weight of
more than 2**20 values) is left as it is. The new weights and nodes are named ``{conv}/{part}/{start}_{stop}``
(``/w``, ``/b``), with ``_`` appended where the file already has the name
(:func:`hlsnn.deploy.importer.graphindex.copy_fresh`).
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr


def _sizes(split, consts, channels):
    outs = len(split.output)
    if len(split.input) > 1 and split.input[1]:
        if split.input[1] not in consts:
            return None
        return [int(v) for v in np.asarray(consts[split.input[1]]).reshape(-1)]
    s = _attr(split, "split")
    if s is not None:
        return [int(v) for v in s]
    n = int(_attr(split, "num_outputs", outs))
    step = -(-channels // n)                        # ceil: the last part smaller (ONNX Split-18)
    return [min(step, channels - i * step) for i in range(n)]


def _ungroup(w, groups):
    """A grouped conv's weight ``(Z, C / g, ...)`` as the ungrouped conv's ``(Z, C, ...)``: output
    channel ``o`` of group ``o // (Z / g)`` keeps its weights on that group's input channels, zeros
    on the others (the same sums by ONNX's definition of ``group``)."""
    if groups == 1:
        return w
    z, cg = w.shape[:2]
    full = np.zeros((z, cg * groups) + w.shape[2:], w.dtype)
    for o in range(z):
        q = o // (z // groups)
        full[o, q * cg:(q + 1) * cg] = w[o]
    return full


def _rows(reader, consts, channels, rank):
    """``[(output, rows)]``: what a ``Split`` or ``Slice`` of the channel axis of a conv's output takes
    (constant sizes, bounds and step 1), or None."""
    if reader.op_type == "Split":
        if int(_attr(reader, "axis", 0)) % rank != 1:
            return None
        sizes = _sizes(reader, consts, channels)
        if sizes is None or len(sizes) != len(reader.output) or sum(sizes) != channels or min(sizes) < 1:
            return None
        ends = np.cumsum(sizes)
        return [(o, slice(int(e - k), int(e))) for o, k, e in zip(reader.output, sizes, ends) if o]
    if reader.op_type != "Slice" or len(reader.input) < 3:
        return None
    vals = []
    for i in range(1, 5):
        name = reader.input[i] if len(reader.input) > i else ""
        if name and name not in consts:
            return None
        vals.append(None if not name else [int(v) for v in np.asarray(consts[name]).reshape(-1)])
    starts, ends, axes, steps = vals
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if len(axes) != 1 or axes[0] % rank != 1 or steps[0] != 1:
        return None
    lo, hi = (min(max(v + channels if v < 0 else v, 0), channels) for v in (starts[0], ends[0]))
    return [(reader.output[0], slice(lo, hi))] if hi > lo else None


def _fold_indices(g, consts):
    """Slice bounds that TorchScript computes from ``Shape`` (``chunk``: ``Gather``, ``Add``, ``Div``,
    ``Mul`` of small integer constants once :mod:`hlsnn.deploy.rewrite.shapefold` made the shape a constant):
    each such node's value, from onnx's reference implementation, into ``consts``."""
    from onnx.reference import ReferenceEvaluator
    for n in g.node:
        ins = [i for i in n.input if i]
        if n.op_type == "Constant" or len(n.output) != 1 or n.output[0] in consts or not ins \
                or any(i not in consts or np.asarray(consts[i]).dtype.kind not in "iu"
                       or np.asarray(consts[i]).size > 64 for i in ins):
            continue
        try:
            value = ReferenceEvaluator(n).run(None, {i: np.asarray(consts[i]) for i in ins})[0]
        except Exception:  # noqa: BLE001 - not foldable here: the importer judges the node as usual
            value = None
        if value is not None:
            consts[n.output[0]] = np.asarray(value)


def rewrite(model):
    """``model`` with each split conv rewritten (a copy), or ``model`` itself without one."""
    if not any(n.op_type in ("Split", "Slice") for n in model.graph.node):
        return model
    from onnx import helper, numpy_helper
    m, fresh = graphindex.copy_fresh(model)
    g = m.graph
    names = (fresh, graphindex.node_names(g))
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and _attr(n, "value") is not None:
            consts[n.output[0]] = numpy_helper.to_array(_attr(n, "value"))
    _fold_indices(g, consts)
    users = {}
    for n in g.node:
        for i in n.input:
            users[i] = users.get(i, 0) + 1
    outputs = {o.name for o in g.output}
    replace, drop = {}, set()
    readers = {}
    for n in g.node:
        for i in n.input[:1]:
            readers.setdefault(i, []).append(n)
    for conv in g.node:
        if conv.op_type not in ("Conv", "Gemm") or len(conv.output) != 1 or conv.output[0] in outputs \
                or len(conv.input) < 2 or conv.input[1] not in consts:
            continue
        src = conv.output[0]
        if conv.op_type == "Gemm":
            gemm = _split_gemm(conv, consts, readers.get(src, []), users.get(src), g, names)
            if gemm is not None:
                replace[id(conv)], dropped = gemm
                drop.update(dropped)
            continue
        w, groups = np.asarray(consts[conv.input[1]]), int(_attr(conv, "group", 1))
        if w.ndim < 3 or w.shape[0] % groups or w.size * groups > 1 << 20:
            continue
        b = consts.get(conv.input[2]) if len(conv.input) > 2 and conv.input[2] else None
        if len(conv.input) > 2 and conv.input[2] and b is None:
            continue
        rs = readers.get(src, [])
        if not rs or len(rs) != users.get(src) or any(r.input[0] != src for r in rs):
            continue
        rows = [_rows(r, consts, w.shape[0], w.ndim) for r in rs]
        if any(x is None for x in rows):
            continue
        w = _ungroup(w, groups)
        attrs = [a for a in conv.attribute if a.name != "group"]
        parts = []
        for r, outs in zip(rs, rows):
            for o, sl in outs:
                base = f"{conv.name or src}/{r.name or o}/{sl.start}_{sl.stop}"
                ins = [conv.input[0], fresh(f"{base}/w")]
                g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w[sl]), ins[1]))
                if b is not None:
                    ins.append(fresh(f"{base}/b"))
                    g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(np.asarray(b)[sl]), ins[2]))
                node = helper.make_node("Conv", ins, [o], name=names[1](base))
                node.attribute.extend(attrs)
                parts.append(node)
            drop.add(id(r))
        replace[id(conv)] = parts
    if not replace:
        return model
    nodes = []
    for n in g.node:
        if id(n) in drop:
            continue
        nodes.extend(replace.get(id(n), [n]))
    graphindex.replace(g.node, nodes)
    return m


def _split_gemm(gemm, consts, rs, n_users, g, names):
    """A ``Gemm`` (``transA`` 0, constant ``B`` and ``C``) whose outputs' features only a ``Split`` /
    ``Slice`` of axis 1 reads (``a, b = linear(x).chunk(2, dim=-1)``, a GLU of a ``Linear``): one
    ``Gemm`` per part, of ``B``'s columns (rows with ``transB``) and ``C``'s values of that part.
    ``(new nodes, ids of the dropped readers)`` or None. ``names``: :func:`rewrite`'s new tensor
    and node names (:func:`hlsnn.deploy.importer.graphindex.copy_fresh`, :func:`~hlsnn.deploy.importer.graphindex.node_names`)."""
    from onnx import helper, numpy_helper
    src = gemm.output[0]
    if _attr(gemm, "transA", 0) or not rs or len(rs) != n_users or any(r.input[0] != src for r in rs):
        return None
    w = np.asarray(consts[gemm.input[1]])
    trans = int(_attr(gemm, "transB", 0))
    if w.ndim != 2:
        return None
    feats = w.shape[0] if trans else w.shape[1]
    c = None
    if len(gemm.input) > 2 and gemm.input[2]:
        if gemm.input[2] not in consts:
            return None
        c = np.asarray(consts[gemm.input[2]])
        if c.size not in (1, feats) or (c.ndim == 2 and c.shape[0] != 1) or c.ndim > 2:
            return None
    rows = [_rows(r, consts, feats, 2) for r in rs]
    if any(x is None for x in rows):
        return None
    parts, dropped = [], set()
    for r, outs in zip(rs, rows):
        for o, sl in outs:
            base = f"{gemm.name or src}/{r.name or o}/{sl.start}_{sl.stop}"
            ins = [gemm.input[0], names[0](f"{base}/w")]
            g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(w[sl] if trans else w[:, sl]), ins[1]))
            if c is not None:
                cp = c.reshape(-1)[sl] if c.size == feats else c.reshape(-1)
                ins.append(names[0](f"{base}/b"))
                g.initializer.append(numpy_helper.from_array(np.ascontiguousarray(cp), ins[2]))
            node = helper.make_node("Gemm", ins, [o], name=names[1](base))
            node.attribute.extend(gemm.attribute)
            parts.append(node)
        dropped.add(id(r))
    return parts, dropped
