"""Static shapes for the shape arithmetic of attention exports.

PyTorch's TorchScript exporter at opset 17 writes ``nn.MultiheadAttention``'s head split as
``Shape`` -> ``Slice``/``Gather`` -> ``Concat`` -> ``Reshape`` (the target computed from the
input's shape), and both exporters write ``Reshape`` targets that merge the batch with the
heads (``[T, N*H, d]``). hlsnn runs a file as the file's own computation on each sample, the
batch fixed at 1 (:mod:`hlsnn.deploy.run.samplewise`), so every such shape is a constant:

* :func:`file_shapes` evaluates the model once with onnx's reference evaluator (as
  :func:`hlsnn.deploy.importer.reference.reference_evaluator` corrects it: its pools, ``GlobalMaxPool`` of
  any rank, grouped ``ConvTranspose``, inference ``BatchNormalization``) on a zero input
  of batch 1 and records every tensor's shape (one run of the graph, whatever its shape
  arithmetic, rather than onnx shape inference's value propagation);
* :func:`fold` replaces each ``Shape`` node by a ``Constant`` of that shape (``start``/``end``
  as the op defines them). The importer then folds the ``Gather``/``Slice``/``Concat``/
  ``Cast``/``Sqrt``/``Div``/``Mod`` that read only constants (its constant folding, onnx's
  reference implementation of each node), and every computed ``Reshape`` target becomes a
  constant.

:func:`needed` (or :func:`merges_batch`) says when a graph needs this (a ``Shape`` node, a ``MatMul`` of two computed
tensors or of a constant by a computed one (:mod:`hlsnn.deploy.rewrite.constmm`), a ``Transpose`` of a computed tensor (also one that keeps the batch first: a 1-D
model's ``x.transpose(1, 2)``), a ``Gather``, ``Slice`` or ``Split`` of a computed tensor, a
``Concat`` with a constant (a class token), a ``Where`` of a computed tensor (a causal mask), a
constant ``Reshape`` target ``[-1, ...]`` that folds the batch into the rows): other graphs
import exactly as before. A model whose input has a symbolic dimension other than the batch is
refused by name (its shapes are not static).
"""
from __future__ import annotations

import numpy as np

from ...errors import ModelError, printable


def _const_names(g):
    names = {t.name for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" or (n.input and all(i in names for i in n.input if i) and n.op_type != "Shape"):
            names.update(o for o in n.output if o)
    return names


def needed(g):
    """Whether graph ``g`` has shape arithmetic or token mixing that needs the static shapes."""
    consts = _const_names(g)
    for n in g.node:
        if n.op_type == "Shape":
            return True
        if n.op_type == "MatMul" and len(n.input) == 2 and n.input[1] not in consts:
            return True             # of two computed tensors, or of a constant by one (hlsnn.deploy.rewrite.constmm)
        if n.op_type in ("Gather", "Slice", "Split") and n.input[0] not in consts:
            return True
        if n.op_type == "Concat" and any(i in consts for i in n.input) and not all(i in consts for i in n.input):
            return True
        if n.op_type == "Concat" and any(a.name == "axis" and (a.i >= 2 or a.i == -1) for a in n.attribute) \
                and not all(i in consts for i in n.input):
            return True             # torch.cat(dim=-1) of tokens' features: samplewise's SwCompute
        if n.op_type == "Transpose" and n.input[0] not in consts:
            return True             # any permutation of a computed tensor: samplewise's SwMove
        if n.op_type == "Where" and not all(i in consts for i in n.input if i):
            return True             # a masked fill (hlsnn.deploy.run.maskfill)
    return False


def merges_batch(model):
    """Whether a ``Reshape`` by a constant target folds the batch into another axis: a target
    ``[-1, d1, ...]`` whose ``d1 * ...`` is not the per-sample size of its input (the dynamo
    exporter's ``x.reshape(B * T, F)`` of a dynamic batch is ``Reshape(x, [-1, F])``, with no
    ``Shape`` node: the rows are the batch's tokens, so that :func:`needed` alone would take
    the ``Linear`` after it for a dense layer on the flattened tokens; the importer takes the static
shapes when the output unfolds the rows again, :func:`restores_batch`). The input's per-sample
    size comes from onnx's shape inference; where it cannot tell (or there is no such target)
    the answer is False, the graph imports as before. ``[-1, K]`` of a (N, K) sample-wise
    flatten keeps the batch and is not such a target."""
    from onnx import numpy_helper, shape_inference
    g = model.graph
    vals = {t.name: t for t in g.initializer}
    vals.update({n.output[0]: a.t for n in g.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"})
    consts = _const_names(g)
    cands = []
    for n in g.node:
        if n.op_type == "Reshape" and len(n.input) > 1 and n.input[1] in vals and n.input[0] not in consts:
            t = numpy_helper.to_array(vals[n.input[1]]).reshape(-1)
            if len(t) >= 2 and int(t[0]) == -1 and all(int(v) > 0 for v in t[1:]):
                cands.append((n.input[0], int(np.prod(t[1:]))))
    if not cands:
        return False
    try:
        inferred = shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - onnx raises many types: nothing is known
        return False
    dims = {}
    for v in list(inferred.value_info) + list(inferred.input) + list(inferred.output):
        d = [x.dim_value if x.HasField("dim_value") else None for x in v.type.tensor_type.shape.dim]
        if len(d) >= 2 and all(x is not None for x in d[1:]):
            dims[v.name] = int(np.prod(d[1:]))
    return any(name in dims and dims[name] != rest for name, rest in cands)


def restores_batch(model, shapes):
    """Whether every graph output's static shape (:func:`file_shapes`) starts with the batch of 1:
    a :func:`merges_batch` graph whose output unfolds the rows again (``.view(B, T, -1)``). One
    that returns the merged rows themselves ((N * T, F), as the file computes them) is imported as
    before, its rows on the batch axis."""
    return all(tuple(shapes.get(o.name, ()))[:1] == (1,) for o in model.graph.output)


def file_shapes(model, path):
    """Every tensor's shape (tuples of ints) when the model runs one sample: the graph input's
    batch (its first dimension, fixed or symbolic) set to 1; None when onnx's reference evaluator
    cannot run the model (a custom domain): the importer then judges its nodes as without
    static shapes (those no rule takes are refused by name)."""
    import onnx
    from onnx import helper
    from ..importer.reference import reference_evaluator
    g = model.graph
    init = {t.name for t in g.initializer}
    inp = [i for i in g.input if i.name not in init][0]
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp.type.tensor_type.shape.dim]
    if not dims:
        raise ModelError(f"{printable(path)}: the input {inp.name!r} has no shape: its attention or shape ops need "
                         "static shapes")
    dims[0] = 1
    if None in dims:
        raise ModelError(f"{printable(path)}: the input {inp.name!r} has the symbolic shape {dims} beyond its batch: "
                         "its attention or shape ops need static shapes (export with a fixed example input)")
    m = onnx.ModelProto()
    m.CopyFrom(model)
    known = {o.name for o in m.graph.output}
    for n in m.graph.node:
        for o in n.output:
            if o and o not in known:
                m.graph.output.append(helper.make_empty_tensor_value_info(o))
                known.add(o)
    et = inp.type.tensor_type.elem_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(et) if et else np.float32
    read = {i for n in g.node for i in n.input} | {o.name for o in g.output}
    try:
        sess = reference_evaluator(m)
        names = [o.name for o in m.graph.output]
        try:
            vals = sess.run(names, {inp.name: np.zeros(dims, dtype)})
        except Exception:  # noqa: BLE001 - an output onnx's reference does not write (an LSTM's Y_c):
            names = [n for n in names if n in read]      # the shapes of those something reads
            vals = sess.run(names, {inp.name: np.zeros(dims, dtype)})
    except Exception:  # noqa: BLE001 - onnx raises many types; the nodes are then judged as before
        return None
    shapes = {inp.name: tuple(dims)}
    shapes.update({k: tuple(int(d) for d in np.shape(v)) for k, v in zip(names, vals)})
    for t in g.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
    return shapes


def fold(model, shapes):
    """``model`` with each ``Shape`` node replaced by a ``Constant`` of its input's static shape."""
    import onnx
    from onnx import helper, numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    nodes = []
    for n in m.graph.node:
        if n.op_type != "Shape":
            nodes.append(n)
            continue
        a = {x.name: helper.get_attribute_value(x) for x in n.attribute}
        full = np.asarray(shapes[n.input[0]], np.int64)
        r = len(full)
        start, end = a.get("start", 0), a.get("end", r)
        start, end = (min(max(v + r if v < 0 else v, 0), r) for v in (start, end))
        value = numpy_helper.from_array(full[start:end], n.output[0])
        nodes.append(helper.make_node("Constant", [], [n.output[0]], name=n.name or n.output[0], value=value))
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    return m
