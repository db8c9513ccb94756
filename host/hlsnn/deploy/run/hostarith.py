"""``Sub``, ``Max`` and ``Min`` as PyTorch writes them in classifiers.

* ``torch.clamp(x, min=0)`` / ``x.clamp(max=6)``: the dynamo exporter writes ``Max(x, 0)`` /
  ``Min(x, 6)`` (TorchScript a ``Clip``): with one constant number, the host ``Clip`` of that
  bound (exact on fixed-point values whose format holds it, :func:`hlsnn.deploy.run.hostops.out_format`);
  ``Max``/``Min`` of two computed tensors, or by a constant of more than one number, is refused by
  name.
* statistics pooling ``torch.cat([x.mean(-1), x.std(-1)], 1)`` (x-vector / keyword-spotting heads)
  and hand-written normalizations ``x - x.mean(-1, keepdim=True)``: ``Sub`` of two computed
  tensors, host op ``Sub``, elementwise with numpy's broadcasting within a sample (the batch axis
  never broadcasts, :func:`hlsnn.deploy.run.hostmath.broadcast_error`), in float64 like the other
  computing host ops (the next engine layer requantizes the result); ``x - c`` is the host
  ``AddConst`` of ``-c``. ``c - x`` is refused by name.
* ``Greater``/``Less``/``GreaterOrEqual``/``LessOrEqual`` of a tensor and one number (the condition
  of ``torch.where(x > 0, x, 0.1 * x)``): host op ``Compare``, 1.0 where true and 0.0 elsewhere,
  which a ``Where`` reads (:mod:`hlsnn.deploy.run.maskfill`); of two computed tensors refused by name.
  ``IsNaN`` (the dynamo export of ``F.scaled_dot_product_attention`` with a boolean ``attn_mask``
  guards a fully masked row by ``Where(IsNaN(p), 0, p)``) is a ``Compare`` too.
"""
from __future__ import annotations

import numpy as np

from .hostmath import _within_sample, broadcast_error

#: op types of the ONNX nodes :func:`rule` takes
CMP = {"Greater": np.greater, "Less": np.less, "GreaterOrEqual": np.greater_equal, "LessOrEqual": np.less_equal,
       "IsNaN": lambda x, c: np.isnan(x)}
OPS = ("Sub", "Max", "Min") + tuple(CMP)
#: host ops :func:`run` computes
HOST_OPS = ("Sub", "Compare")
_FLIP = {"Greater": "Less", "Less": "Greater", "GreaterOrEqual": "LessOrEqual", "LessOrEqual": "GreaterOrEqual"}


def rule(node, consts, shapes):
    """``(host op, attrs, inputs)`` for ``node`` (op type in :data:`OPS`), or why not."""
    op, ins = node.op_type, [i for i in node.input if i]
    if op == "IsNaN":                   # the dynamo SDPA's guard of a fully masked row: Where(IsNaN(p), 0, p)
        return "Compare", {"fn": op, "c": 0.0}, ins
    if len(ins) != 2:
        return f"{op} of {len(ins)} inputs: only of two"
    acts = [i for i in ins if i not in consts]
    if not acts:
        return f"{op} of two constants"
    if op in CMP:
        if len(acts) == 2:
            return f"{op} of two computed tensors: only with one constant number"
        c = np.asarray(consts[ins[0] if ins[0] in consts else ins[1]], np.float64)
        if c.size != 1:
            return f"{op} with a constant of shape {c.shape}: only with one number"
        fn = op if ins[1] in consts else _FLIP[op]          # c > x is x < c
        return "Compare", {"fn": fn, "c": float(c.reshape(-1)[0])}, acts
    if op in ("Max", "Min"):
        if len(acts) == 2:
            return f"{op} of two computed tensors: only with one constant number (a clamp)"
        c = np.asarray(consts[ins[0] if ins[0] in consts else ins[1]], np.float64)
        if c.size != 1:
            return f"{op} with a constant of shape {c.shape}: only with one number (a clamp)"
        v = float(c.reshape(-1)[0])
        return "Clip", {"lo": v, "hi": None} if op == "Max" else {"lo": None, "hi": v}, acts
    a, b = ins
    if len(acts) == 2:
        why = broadcast_error("Sub", shapes.get(a), shapes.get(b), "it broadcasts within it")
        return why or ("Sub", {}, [a, b])
    if a in consts:
        return "Sub of a computed tensor from a constant (c - x): only x - c or x - y"
    c = np.asarray(consts[b], np.float64)
    why = _within_sample(c, len(shapes[a]) if a in shapes else None)
    return why or ("AddConst", {"c": -c}, [a])


def run(layer, inputs):
    """Evaluate host ``layer`` (op in :data:`HOST_OPS`) on its inputs (float64)."""
    if layer.op == "Sub":
        return np.asarray(inputs[0], np.float64) - np.asarray(inputs[1], np.float64)
    if layer.op == "Compare":
        return CMP[layer.attrs["fn"]](np.asarray(inputs[0], np.float64), layer.attrs["c"]).astype(np.float64)
    raise ValueError(layer.op)
