"""A ``MatMul`` of a constant by a computed tensor, ``C @ X``, as a dense layer of ``X``'s rows.

Attention pooled by a learned query (``nn.MultiheadAttention(query=self.query.expand(...), key=h,
value=h)``, a Perceiver's latents, a PMA block) makes the query and its projection constants of the
file: the scores are ``Q @ K^T`` with ``Q`` a constant and ``K^T`` computed. The importer's engine
rule takes a ``MatMul`` by a constant *second* operand (the weight); this pre-pass (after
:mod:`hlsnn.deploy.rewrite.shapefold`, on the file's per-sample shapes) rewrites ``Y = C @ X`` exactly as
``Y^T = X^T @ C^T``:

* ``C`` of rank 2, (M, K): ``Transpose`` of ``X``'s last two axes, the ``MatMul`` by the constant
  ``C^T`` (a token-wise GEMM over ``X``'s T rows), ``Transpose`` back;
* ``C`` of rank 3 or more, one (M, K) matrix per leading index (one per head) with leading axes
  that broadcast to ``X``'s, B of them in all: ``X`` as (B, K, T), and one such GEMM per head
  (``Gather`` of the head, ``Transpose``, the ``MatMul`` by ``C[b]^T``), the heads' products joined
  by ``Concat`` and reshaped to ``Y``'s shape. One GEMM per head, not one block-diagonal GEMM over
  all heads: bfp8 shares a block exponent along a row, and a row of every head's keys would let
  one head's large values coarsen another's.

The moves are per-sample ``SwMove`` layers and the ``MatMul`` an engine layer like any other.
The new tensors are named ``{node}/constmm_{what}``, with ``_`` appended where the file already
has the name (:func:`hlsnn.deploy.importer.graphindex.copy_fresh`).
Constants are found by evaluating, in graph order, each node whose inputs are all constants
(``fold``, the importer's own constant folding).
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex


def fold_split(node, consts):
    """``{output: array}`` of a ``Split`` of a constant, from onnx's reference implementation (its
    parts hold no more values than the constant), or None when it cannot be evaluated."""
    try:
        from onnx.reference import ReferenceEvaluator
        outs = ReferenceEvaluator(node).run(None, {i: np.asarray(consts[i]) for i in node.input if i})
    except Exception:  # noqa: BLE001 - left to the normal rules
        return None
    return {o: (np.asarray(v).astype(np.float64) if np.asarray(v).dtype.kind == "f" else np.asarray(v))
            for o, v in zip(node.output, outs) if o}


def rewrite(model, fs, fold):
    """``model`` with each ``C @ X`` rewritten (a copy; ``fs`` gains the new tensors' per-sample
    shapes), or ``model`` itself. ``fold(node, consts)``: the node's output on constant inputs or
    None."""
    g = model.graph
    if fs is None or not any(n.op_type == "MatMul" for n in g.node):
        return model
    init = {t.name for t in g.initializer}
    live = {i.name for i in g.input if i.name not in init}      # what depends on the model's input
    for n in g.node:
        if any(i in live for i in n.input):
            live.update(o for o in n.output if o)
    if not any(n.op_type == "MatMul" and len(n.input) == 2 and n.input[0] not in live and n.input[1] in live
               for n in g.node):
        return model                                # no C @ X: nothing to fold here
    consts = {k: (v.astype(np.float64) if v.dtype.kind == "f" else v)      # as the importer holds them
              for k, v in graphindex.constants(g).items()}
    targets = []
    for n in g.node:
        ins = [i for i in n.input if i]
        if n.op_type == "MatMul" and len(ins) == 2 and ins[0] in consts and ins[1] not in consts:
            targets.append(n)
            continue
        if n.op_type in ("Constant", "Shape") or not ins or not all(i in consts for i in ins) \
                or n.output[0] in consts:
            continue
        if n.op_type == "Split":
            consts.update(fold_split(n, consts) or {})
            continue
        if len(n.output) != 1:
            continue
        v = fold(n, consts)
        if v is not None:
            consts[n.output[0]] = v
    if not targets:
        return model
    m, fresh = graphindex.copy_fresh(model)
    plans = {}
    for n in targets:
        plan = _plan(n, np.asarray(consts[n.input[0]], np.float64), fs, fresh)
        if plan is not None:
            plans[n.output[0]] = plan
    if not plans:
        return model
    new = []
    for n in m.graph.node:
        plan = plans.get(n.output[0]) if n.op_type == "MatMul" else None
        if plan is None:
            new.append(n)
            continue
        nodes, inits, shapes = plan
        new.extend(nodes)
        m.graph.initializer.extend(inits)
        fs.update(shapes)
    graphindex.replace(m.graph.node, new)
    return m


def _plan(node, c, fs, fresh):
    """(nodes, initializers, {tensor: per-sample shape}) replacing ``node`` = ``c @ X``, or None;
    ``fresh``: new tensor names (:func:`hlsnn.deploy.importer.graphindex.copy_fresh`)."""
    from onnx import helper, numpy_helper
    x, y = node.input[1], node.output[0]
    sx, sy = fs.get(x), fs.get(y)
    if sx is None or sy is None or len(sx) < 2 or c.ndim < 2:
        return None
    k, t = sx[-2], sx[-1]
    m_ = c.shape[-2]
    if c.shape[-1] != k:
        return None
    base, made = node.name or y, {}

    def name(s):                                         # one fresh name per role, the same on each use
        if s not in made:
            made[s] = fresh(f"{base}/constmm_{s}")
        return made[s]

    if c.ndim == 2 or int(np.prod(c.shape[:-2])) == 1:
        c2 = c.reshape(c.shape[-2:])
        perm = list(range(len(sx) - 2)) + [len(sx) - 1, len(sx) - 2]
        lead = tuple(sx[:-2])
        nodes = [helper.make_node("Transpose", [x], [name("xt")], perm=perm),
                 helper.make_node("MatMul", [name("xt"), name("w")], [name("z")]),
                 helper.make_node("Transpose", [name("z")], [name("zt")], perm=perm)]
        shapes = {name("xt"): lead + (t, k), name("z"): lead + (t, m_), name("w"): (k, m_)}
        if lead + (m_, t) != tuple(sy):
            return None
        nodes[-1].output[0] = y
        return nodes, [numpy_helper.from_array(c2.T.astype(np.float32), name("w"))], shapes
    lead = tuple(sx[:-2])
    try:
        cb = np.broadcast_to(c, lead + c.shape[-2:]) if c.ndim - 2 <= len(lead) else None
    except ValueError:
        return None
    if cb is None or tuple(sy) != lead + (m_, t):
        return None
    b = int(np.prod(lead))
    return _per_head(x, y, cb.reshape(b, m_, k), sy, k, t, m_, name)


def _per_head(x, y, cb, sy, k, t, m_, name):
    """``X`` as (B, K, T); per head b: ``Gather`` of b, ``Transpose`` to (T, K), the ``MatMul`` by
    ``cb[b]^T``, ``Transpose`` and ``Unsqueeze`` to (1, M, T); the heads' ``Concat`` reshaped to ``Y``."""
    from onnx import helper, numpy_helper
    b = cb.shape[0]
    inits = [numpy_helper.from_array(np.asarray([b, k, t], np.int64), name("s3")),
             numpy_helper.from_array(np.asarray(list(sy), np.int64), name("so"))]
    nodes = [helper.make_node("Reshape", [x, name("s3")], [name("x3")])]
    shapes = {name("x3"): (b, k, t), name("s3"): (3,), name("so"): (len(sy),)}
    outs = []
    for i in range(b):
        inits += [numpy_helper.from_array(np.asarray(i, np.int64), name(f"i{i}")),
                  numpy_helper.from_array(cb[i].T.astype(np.float32), name(f"w{i}"))]
        shapes[name(f"i{i}")], shapes[name(f"w{i}")] = (), (k, m_)
        nodes += [helper.make_node("Gather", [name("x3"), name(f"i{i}")], [name(f"g{i}")], axis=0),
                  helper.make_node("Transpose", [name(f"g{i}")], [name(f"gt{i}")], perm=[1, 0]),
                  helper.make_node("MatMul", [name(f"gt{i}"), name(f"w{i}")], [name(f"z{i}")]),
                  helper.make_node("Transpose", [name(f"z{i}")], [name(f"zt{i}")], perm=[1, 0]),
                  helper.make_node("Unsqueeze", [name(f"zt{i}"), name("ax0")], [name(f"u{i}")])]
        shapes.update({name(f"g{i}"): (k, t), name(f"gt{i}"): (t, k), name(f"z{i}"): (t, m_),
                       name(f"zt{i}"): (m_, t), name(f"u{i}"): (1, m_, t)})
        outs.append(name(f"u{i}"))
    inits.append(numpy_helper.from_array(np.asarray([0], np.int64), name("ax0")))
    shapes[name("ax0")] = (1,)
    nodes += [helper.make_node("Concat", outs, [name("cat")], axis=0),
              helper.make_node("Reshape", [name("cat"), name("so")], [y])]
    shapes[name("cat")] = (b, m_, t)
    return nodes, inits, shapes
