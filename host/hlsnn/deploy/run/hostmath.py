"""Elementwise arithmetic on the host that hand-written normalizations export to (LLaMA's
RMSNorm ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w``, an L2 normalization
``x / x.norm(dim=-1, keepdim=True)``), each as ONNX defines it, on the host in float64
like the other computing host ops (the next engine layer requantizes the result):

* ``Pow`` by a constant exponent (one number): ``x ** e``; a computed exponent is refused by name;
* ``Sqrt``: ``sqrt(x)``;
* ``Reciprocal`` (``1 / x``) and ``Div`` of a constant by a computed tensor (TorchScript's
  ``torch.rsqrt`` is ``Div(1, Sqrt(...))``): host op ``Reciprocal``, ``c / x``;
* ``Div`` of two computed tensors of one rank: host op ``Div``, elementwise with numpy's
  broadcasting within a sample (the batch axis never broadcasts), as the ``Mul`` gate of
  :func:`hlsnn.deploy.importer.import_rules._gate`;
* ``ReduceL2`` over constant axes after the batch (``F.normalize``, ``x.norm(dim=-1)``):
  ``sqrt(sum(x ** 2))`` over them.

A zero divisor or a negative base with a fractional exponent gives what IEEE float gives (inf, nan),
as onnxruntime does.
"""
from __future__ import annotations

import numpy as np

#: op types of the ONNX nodes :func:`rule` takes
OPS = ("Pow", "Sqrt", "Reciprocal", "ReduceL2")
#: host ops :func:`run` computes
HOST_OPS = ("Pow", "Sqrt", "Reciprocal", "Div", "ReduceL2")


def _within_sample(c, rank):
    """Why constant ``c`` would broadcast over the batch axis of a tensor of rank ``rank``, or None."""
    if rank is not None and c.ndim >= rank and c.shape[c.ndim - rank] != 1:
        return f"a constant of shape {c.shape} for a tensor of rank {rank}: it would broadcast over the batch"
    return None


def rule(node, a, consts, shapes):
    """``(host op, attrs, inputs)`` for ``node`` (op type in :data:`OPS`), or why not."""
    op, x = node.op_type, node.input[0]
    if x in consts:
        return f"{op} of a constant by a computed tensor is not supported"
    if op == "Pow":
        if len(node.input) < 2 or node.input[1] not in consts:
            return "Pow with a computed exponent: only by a constant exponent"
        e = np.asarray(consts[node.input[1]], np.float64)
        if e.size != 1:
            return f"Pow by an exponent of shape {e.shape}: only by one number"
        return op, {"exponent": float(e.reshape(-1)[0])}, [x]
    if op == "Reciprocal":
        return op, {"c": 1.0}, [x]
    if op == "ReduceL2":
        return _reduce_l2(node, a, consts, len(shapes[x]) if x in shapes else None)
    return op, {}, [x]


def _reduce_l2(node, a, consts, rank):
    axes = a.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        if node.input[1] not in consts:
            return "the axes input must be a constant"
        axes = np.asarray(consts[node.input[1]]).reshape(-1).tolist()
    if not axes:
        return "ReduceL2 over every axis: only over axes after the batch"
    if rank is None:
        return f"ReduceL2 over axes {list(axes)} of a tensor of unknown rank"
    axes = sorted({int(v) % rank for v in axes})
    if 0 in axes:
        return f"ReduceL2 over axes {axes}: over the batch axis (0); only over the axes after it"
    return "ReduceL2", {"axes": axes, "keepdims": int(a.get("keepdims", 1))}, [node.input[0]]


def div_rule(ins, consts, shapes):
    """``Div(a, b)`` with a computed divisor ``b``: ``(host op, attrs, inputs)`` or why not."""
    a, b = ins[0], ins[1]
    if a in consts:                                    # c / x: a reciprocal scaled by c
        c = np.asarray(consts[a], np.float64)
        why = _within_sample(c, len(shapes[b]) if b in shapes else None)
        if why:
            return why
        return "Reciprocal", {"c": float(c.reshape(-1)[0]) if c.size == 1 else c}, [b]
    why = broadcast_error("Div", shapes.get(a), shapes.get(b), "it broadcasts within it")
    if why:
        return why
    return "Div", {}, [a, b]


def broadcast_error(op, sa, sb, within):
    """Why ``op``'s two operands of shapes ``sa`` and ``sb`` (None: not known) are not one host op's
    (other ranks, or axes after the batch axis that do not broadcast); None where they are."""
    if sa is None or sb is None:
        return None
    if len(sa) != len(sb):
        return f"{op} of tensors of ranks {len(sa)} and {len(sb)}: only of one rank ({within})"
    for da, db in zip(sa[1:], sb[1:]):
        if da is not None and db is not None and da != db and 1 not in (da, db):
            return f"{op} of shapes {tuple(sa)} and {tuple(sb)}: they do not broadcast"
    return None


def run(layer, inputs):
    """Evaluate host ``layer`` (op in :data:`HOST_OPS`) on its inputs (float64)."""
    op, a = layer.op, layer.attrs
    x = np.asarray(inputs[0], np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        if op == "Pow":
            return np.power(x, a["exponent"])
        if op == "Sqrt":
            return np.sqrt(x)
        if op == "Reciprocal":
            return a["c"] / x
        if op == "Div":
            return x / np.asarray(inputs[1], np.float64)
        if op == "ReduceL2":
            return np.sqrt(np.sum(x * x, axis=tuple(a["axes"]), keepdims=bool(a["keepdims"])))
    raise ValueError(op)
