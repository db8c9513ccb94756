"""An ``If`` whose condition is fixed by the model's shapes, replaced by the branch it takes.

torch's TorchScript exporter writes ``x.squeeze(d)`` of a dimension it cannot prove to be 1 (a
tensor whose shape came from a computed ``Reshape``, as ``nn.MultiheadAttention``'s output under a
dynamic batch axis: ``out.squeeze(0)`` of an attention pooled by one learned query) as
``If(Equal(Gather(Shape(x), d), 1))`` with a ``Squeeze`` in one branch and an ``Identity`` in the
other. hlsnn runs straight-line graphs; such a condition is a constant of the file once its shapes
are known.

:func:`rewrite` evaluates every top-level ``If``'s condition with onnx's reference evaluator on a
zero input, at batch 1 and at batch 2 (the input's other dimensions must be fixed). When the
condition is one boolean at both, the ``If`` is replaced by the nodes of the branch it takes (the
branch's outputs renamed to the ``If``'s outputs): the same computation for every input of those
shapes, since a condition computed from shapes alone does not depend on the input's values. A
condition that differs between the two batches, that reads the input's values, or that the
evaluator cannot compute is left, and the importer names the ``If`` as control flow it does not
run.
"""
from __future__ import annotations

import numpy as np


def _from_shapes_only(g, cond):
    """Whether tensor ``cond`` depends on the graph's input only through ``Shape`` nodes."""
    producer = {o: n for n in g.node for o in n.output}
    todo, seen = [cond], set()
    inputs = {i.name for i in g.input} - {t.name for t in g.initializer}
    while todo:
        t = todo.pop()
        if t in seen:
            continue
        seen.add(t)
        if t in inputs:
            return False
        n = producer.get(t)
        if n is None or n.op_type == "Shape":
            continue
        if any(a.type in (a.GRAPH, a.GRAPHS) for a in n.attribute):
            return False
        todo.extend(i for i in n.input if i)
    return True


def _conditions(model, names, batch):
    """The values of tensors ``names`` at a zero input of batch ``batch`` (None if not computable)."""
    import onnx
    from onnx import helper
    from onnx.reference import ReferenceEvaluator
    g = model.graph
    init = {t.name for t in g.initializer}
    inp = [i for i in g.input if i.name not in init]
    if len(inp) != 1:
        return None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in inp[0].type.tensor_type.shape.dim]
    if not dims or None in dims[1:]:
        return None
    if dims[0] is not None and dims[0] != batch:
        return None
    dims[0] = batch
    m = onnx.ModelProto()
    m.CopyFrom(model)
    del m.graph.output[:]
    m.graph.output.extend(helper.make_empty_tensor_value_info(n) for n in names)
    et = inp[0].type.tensor_type.elem_type
    dtype = helper.tensor_dtype_to_np_dtype(et) if et else np.float32
    try:
        vals = ReferenceEvaluator(m).run(None, {inp[0].name: np.zeros(dims, dtype)})
    except Exception:  # noqa: BLE001 - onnx raises many types: the If is left as it is
        return None
    return vals


def rewrite(model):
    """``model`` with each shape-fixed ``If`` replaced by its branch (a copy), or ``model`` itself."""
    import onnx
    from onnx import helper
    g = model.graph
    ifs = [n for n in g.node if n.op_type == "If" and _from_shapes_only(g, n.input[0])]
    if not ifs:
        return model
    conds = [n.input[0] for n in ifs]
    fixed = None
    for batch in (1, 2):
        vals = _conditions(model, conds, batch)
        if vals is None:
            continue
        vals = [bool(np.asarray(v).reshape(-1)[0]) if np.size(v) == 1 else None for v in vals]
        fixed = vals if fixed is None else [a if a == b else None for a, b in zip(fixed, vals)]
    if fixed is None or all(v is None for v in fixed):
        return model
    taken = {id(n): v for n, v in zip(ifs, fixed) if v is not None}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    new = []
    from ..importer.graphindex import node_names
    node_name = node_names(m.graph)            # an Identity's name: none a node of the file has
    for n, orig in zip(m.graph.node, g.node):
        if id(orig) not in taken:
            new.append(n)
            continue
        branch = next(a.g for a in n.attribute if a.name == ("then_branch" if taken[id(orig)] else "else_branch"))
        rename = {o.name: out for o, out in zip(branch.output, n.output)}
        made = set()
        for b in branch.node:
            c = onnx.NodeProto()
            c.CopyFrom(b)
            for k, i in enumerate(c.input):
                c.input[k] = rename.get(i, i)
            for k, o in enumerate(c.output):
                c.output[k] = rename.get(o, o)
                made.add(c.output[k])
            new.append(c)
        for o, out in rename.items():
            if out not in made:                       # the branch returns an outer tensor itself
                new.append(helper.make_node("Identity", [o], [out], name=node_name(f"{n.name or out}/taken")))
    del m.graph.node[:]
    m.graph.node.extend(new)
    return m
