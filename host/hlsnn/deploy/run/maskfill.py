"""``Where``: a masked fill, such as a causal attention mask, or a selection.

nanoGPT's attention writes ``att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))``
before the softmax: both of torch's exporters turn it into ``Where(mask, -inf, scores)`` with
the mask a constant (dynamo folds it; TorchScript's ``Slice``/``Equal``/``Cast`` of the ``tril``
buffer fold at import, :mod:`hlsnn.deploy.rewrite.shapefold`). A leaky ReLU by hand,
``torch.where(x > 0, x, 0.1 * x)``, has a computed condition: a comparison's 1.0 / 0.0
(:mod:`hlsnn.deploy.run.hostarith`'s ``Compare``), true where it is not 0. :func:`rule` takes a
``Where`` as a ``SwCompute`` host op (:mod:`hlsnn.deploy.run.samplewise`): each output element is
the one operand's element or the other's, chosen by the condition with ONNX broadcasting within
a sample, in float64 like the other computing host ops (a selection: no rounding). A constant
operand that is not finite (the ``-inf`` of a mask) is taken only where every reader of the
result is a ``Softmax``, for which ``exp(-inf) = 0`` exactly: anything else would quantize an
infinity, and is refused by name. The attributes hold finite numbers only (a compiled model's
are, :mod:`hlsnn.network.schema`): such a constant's ``-inf`` entries are a boolean ``neginf``
mask beside its finite values; ``cond`` is the constant mask, or the index of the computed
condition among the layer's inputs. :func:`add_rule` takes TorchScript's additive mask of
``F.scaled_dot_product_attention(..., is_causal=True)`` (``Add`` of a constant with ``-inf``
entries, read by a ``Softmax`` only) the same way (``AddInf``).
"""
from __future__ import annotations

import numpy as np


def rule(node, consts, fs, users):
    """``(host op, inputs, attrs)`` for a ``Where``, why it is refused (a string), or None (an
    all-constant ``Where``: the importer folds it)."""
    ins = list(node.input)
    if len(ins) != 3 or not all(ins):
        return "a Where needs its three inputs (condition, X, Y)"
    acts = [i for i in ins if i not in consts]
    if not acts:
        return None
    out = node.output[0]
    if any(i not in fs for i in acts) or out not in fs:
        return "Where: no static shapes for its tensors"
    operands, neginf = [], []
    for i in ins[1:]:
        if i in consts:
            v = np.asarray(consts[i], np.float64)
            if np.isnan(v).any() or np.isposinf(v).any():
                return f"Where: the constant {i!r} has NaN or +Inf values"
            if np.isneginf(v).any() and (not users or any(u.op_type != "Softmax" for u in users)):
                return (f"Where: the constant {i!r} has -Inf values, which only a Softmax may read "
                        f"(read here by {', '.join(sorted({u.op_type for u in users})) or 'the graph output'})")
            neginf.append(np.isneginf(v))
            operands.append(("c", np.where(neginf[-1], 0.0, v)))
        else:
            neginf.append(np.zeros((), bool))
            operands.append(("x", acts.index(i)))
    in_shapes, s_out = [tuple(fs[i]) for i in acts], tuple(fs[out])
    cond = np.asarray(consts[ins[0]]).astype(bool) if ins[0] in consts else acts.index(ins[0])
    return "SwCompute", acts, {"fn": "Where", "in_shapes": in_shapes, "out_shape": s_out, "cond": cond,
                               "operands": operands, "neginf": neginf}


def add_rule(node, consts, fs, users):
    """``Add`` of a computed tensor and a constant with ``-inf`` entries (TorchScript's additive
    causal mask of ``F.scaled_dot_product_attention(..., is_causal=True)`` or of a boolean
    ``attn_mask``): a ``SwCompute`` ``AddInf`` whose every reader must be a ``Softmax`` (module
    docstring); None where the constant is finite (the other rules take it), or why it is refused."""
    ins = list(node.input)
    if len(ins) != 2 or sum(i in consts for i in ins) != 1:
        return None
    c = np.asarray(consts[ins[0] if ins[0] in consts else ins[1]], np.float64)
    if np.all(np.isfinite(c)):
        return None
    if np.isnan(c).any() or np.isposinf(c).any():
        return "Add of a constant with NaN or +Inf values"
    if not users or any(u.op_type != "Softmax" for u in users):
        return (f"Add of a constant with -Inf values (an additive mask), which only a Softmax may read (read here by "
                f"{', '.join(sorted({u.op_type for u in users})) or 'the graph output'})")
    x = ins[1] if ins[0] in consts else ins[0]
    out = node.output[0]
    if x not in fs or out not in fs:
        return "Add of an additive mask: no static shapes for its tensors"
    neginf = np.isneginf(c)
    return "SwCompute", [x], {"fn": "AddInf", "in_shapes": [tuple(fs[x])], "out_shape": tuple(fs[out]),
                              "operands": [("x", 0), ("c", np.where(neginf, 0.0, c))],
                              "neginf": [np.zeros((), bool), neginf], "cond": np.ones((), bool)}


def run(xs, a, align):
    """The selection on lifted operands ``xs`` (``align(x, rank)`` puts a lifted tensor of a
    lower rank in ONNX broadcast position): ``(N, *out_shape)``."""
    r = len(a["out_shape"])
    ops = [align(xs[v], r) if k == "x" else np.where(np.asarray(m, bool), -np.inf, np.asarray(v, np.float64))
           for (k, v), m in zip(a["operands"], a["neginf"])]
    if a["fn"] == "AddInf":
        return ops[0] + ops[1]
    cond = a["cond"]
    cond = align(xs[cond], r) != 0 if isinstance(cond, (int, np.integer)) else np.asarray(cond, bool)
    return np.where(cond, ops[0], ops[1])
