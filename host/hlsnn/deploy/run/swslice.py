"""Per-sample ``Slice``, ``Split`` and ``Concat`` (with constant inputs): the rest of the tensor
plumbing that attention exports write, on the static shapes of :mod:`hlsnn.deploy.rewrite.shapefold`.

A fused ``Linear(E, 3E)`` split into q, k and v (``qkv.reshape(N, T, 3, H, d).permute(2, 0, 3,
1, 4)`` then ``unbind``: ``Split`` or ``Slice`` of axis 0 and ``Squeeze`` of it), a class token
``torch.cat([cls, x], 1)`` (a ``Concat`` with a constant), the first token ``x[:, 0]``: in the
file at batch 1 each is a constant-shaped move, which :mod:`hlsnn.deploy.run.samplewise` runs on each
sample as the file computes it (a tensor whose static shape starts with 1 is held without that
axis, any other with the samples in front).

* ``Slice`` with constant ``starts``/``ends``/``axes``/``steps`` (inputs since opset 10,
  attributes before) and each output of ``Split`` (sizes from the static shapes): ``SwMove``
  layers whose ``takes`` are the indices ONNX selects on each axis (exact: they select values).
* ``Concat`` on any axis where an input is a constant (a class token) or an axis other than the
  channels of a normal tensor: ``SwCompute`` (a constant's values are not those of the other
  inputs' fixed-point format, so the next engine layer requantizes the result).
"""
from __future__ import annotations

import numpy as np


def _slice_indices(dim, start, end, step):
    """The indices ONNX's ``Slice`` selects on an axis of length ``dim``."""
    start, end = int(start), int(end)
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
    else:
        start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    return np.arange(start, end, step, dtype=np.int64)


def _const(node, i, consts):
    if len(node.input) <= i or not node.input[i]:
        return None
    if node.input[i] not in consts:
        return False
    return np.asarray(consts[node.input[i]]).reshape(-1).astype(np.int64).tolist()


def slice_rule(node, a, consts, s_in, s_out):
    """``Slice`` as ``("SwMove", attrs)`` with ``takes`` [(axis, indices)], or why not (a string)."""
    r = len(s_in)
    if "starts" in a:                                   # opset < 10: attributes
        starts, ends, axes, steps = list(a["starts"]), list(a["ends"]), a.get("axes"), None
    else:
        starts, ends, axes, steps = (_const(node, i, consts) for i in (1, 2, 3, 4))
        if False in (starts, ends, axes, steps) or starts is None or ends is None:
            return "Slice by computed starts, ends, axes or steps: only constant ones"
    axes = list(range(len(starts))) if axes is None else [int(x) % r for x in axes]
    steps = [1] * len(starts) if steps is None else steps
    if any(s == 0 for s in steps):
        return "Slice with a step of 0"
    takes = [(ax, _slice_indices(s_in[ax], st, en, sp)) for ax, st, en, sp in zip(axes, starts, ends, steps)]
    return {"fn": "Slice", "takes": takes}


def split_rules(node, a, fs):
    """Each output of a ``Split`` as ``(output name, attrs)`` of a ``SwMove`` that takes its
    part (the sizes are the static shapes' of the outputs)."""
    s_in = tuple(fs[node.input[0]])
    axis = int(a.get("axis", 0)) % len(s_in)
    out, off = [], 0
    for o in node.output:
        size = int(fs[o][axis])
        if o:
            out.append((o, {"fn": "Slice", "takes": [(axis, np.arange(off, off + size, dtype=np.int64))]}))
        off += size
    return out


def concat_operands(node, consts, acts):
    return [("x", acts.index(i)) if i not in consts else ("c", np.asarray(consts[i], np.float64))
            for i in node.input if i]


def run_take(x, takes):
    """``x`` lifted (the samples in front): the indices of each axis taken in turn."""
    for ax, idx in takes:
        x = np.take(x, np.asarray(idx, np.int64), axis=int(ax) + 1)
    return x


def run_concat(xs, operands, axis, n):
    """The lifted operands (constants broadcast over the ``n`` samples) joined on ``axis``."""
    parts = [xs[v] if k == "x" else np.broadcast_to(np.asarray(v, np.float64), (n,) + np.shape(v))
             for k, v in operands]          # (a compiled model's attributes hold lists)
    return np.concatenate(parts, axis=axis + 1)
