"""The ONNX spec's bounds on the attributes of the nodes hlsnn imports: an axis within
its tensor's rank, a mode one of the op's strings. A node outside them is one the spec forbids and
onnxruntime refuses to load or run (``Softmax`` of ``axis=5`` on a rank-2 tensor, ``Gelu`` of
``approximate='bad'``); the importer's rules would wrap such an axis modulo the rank or take
the default mode, and ``--host-fallback`` would run it, so :func:`check` refuses it first, as a
:class:`~hlsnn.errors.ModelError` naming the node, the attribute, its value and what the spec
allows, whatever ``--host-fallback`` says.

:data:`AXIS` lists the ops with one ``axis`` (of input 0, ``-r..r-1``; ``Flatten`` ``-r..r``),
:data:`AXES` those with a list of axes (an attribute, or before opset 13 / 18 the constant
input 1: ``Reduce*`` and ``Squeeze`` of the input's rank, ``Unsqueeze`` of the output's), and
:data:`CHOICES` the string attributes and their values (per opset where the op gained one).
An axis of a tensor of unknown rank is left to the import rules. :func:`check_model` checks
every node of the file as it is written, before any rewrite of the importer; the Q/DQ nodes are
checked by :mod:`hlsnn.deploy.importer.qimport` (their axis, scale and zero-point types), which folds them.
"""
from __future__ import annotations

import numpy as np

from ...errors import ModelError, excerpt

#: op -> (attribute, its default: None when the op has no axis unless given, "opset13" for
#: Softmax-like ops: 1 before opset 13, -1 since, inclusive upper bound: Flatten's -r..r)
AXIS = {"Softmax": ("axis", "opset13", False), "LogSoftmax": ("axis", "opset13", False),
        "Hardmax": ("axis", "opset13", False), "Concat": ("axis", None, False), "Gather": ("axis", 0, False),
        "GatherElements": ("axis", 0, False), "Split": ("axis", 0, False), "ArgMax": ("axis", 0, False),
        "ArgMin": ("axis", 0, False), "LayerNormalization": ("axis", -1, False), "TopK": ("axis", -1, False),
        "LpNormalization": ("axis", -1, False), "Compress": ("axis", None, False), "Flatten": ("axis", 1, True)}
#: ops with a list of axes: of the input's rank ("in") or of the output's (Unsqueeze: "out")
AXES = {**{op: "in" for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1",
                               "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Squeeze")},
        "Unsqueeze": "out"}
_PAD = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")
#: op -> {attribute: {first opset: the values allowed from it}}
CHOICES = {
    "Gelu": {"approximate": {1: ("none", "tanh")}},
    "Pad": {"mode": {1: ("constant", "reflect", "edge", "wrap")}},          # onnxruntime: wrap before 19 too
    "Resize": {"mode": {1: ("nearest", "linear", "cubic")},
               "coordinate_transformation_mode": {      # onnxruntime: tf_half_pixel_for_nn after 11 too
                   1: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn",
                       "tf_crop_and_resize"),
                   19: ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
                        "tf_half_pixel_for_nn", "tf_crop_and_resize")},
               "nearest_mode": {1: ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")},
               "keep_aspect_ratio_policy": {1: ("stretch", "not_larger", "not_smaller")}},
    "DepthToSpace": {"mode": {1: ("DCR", "CRD")}},
    **{op: {"auto_pad": {1: _PAD}} for op in ("Conv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool",
                                              "ConvInteger", "QLinearConv")},
}


def _s(v):
    return v.decode(errors="replace") if isinstance(v, bytes) else v


def _bad(node, what):
    name = node.name or (node.output[0] if node.output else "")
    return ModelError(f"node {name!r} ({node.op_type}): {what} (outside the ONNX spec: onnxruntime refuses the file "
                      "too)")


def _in_range(node, attr, v, rank, inclusive=False):
    hi = rank if inclusive else rank - 1
    if not -rank <= v <= hi:
        raise _bad(node, f"{attr} = {excerpt(v, 40)} of a tensor of rank {rank}: the ONNX spec allows {-rank}..{hi}")


def check(node, a, shapes, consts, opset):
    """Refuse ``node`` (attributes ``a``) when an attribute is outside what the ONNX spec allows
    at ``opset`` for its input's rank (``shapes``: inferred shapes by tensor name; ``consts``:
    constants by name, for ``axes`` given as an input); module docstring."""
    op = node.op_type
    if node.domain not in ("", "ai.onnx"):
        return
    for attr, by_opset in CHOICES.get(op, {}).items():
        if attr in a:
            allowed = by_opset[max(v for v in by_opset if v <= opset)] if min(by_opset) <= opset else ()
            v = _s(a[attr])
            if v not in allowed:
                raise _bad(node, f"{attr} = {excerpt(v, 40)}: {op} at opset {opset} takes {', '.join(allowed)}")
    ranks = [len(shapes[i]) for i in node.input if i and i in shapes]
    rank = ranks[0] if ranks and node.input and node.input[0] in shapes else None
    if op in AXIS:
        attr, default, inclusive = AXIS[op]
        if op == "Concat":
            rank = ranks[0] if ranks else None
        if attr in a:
            v = a[attr]
        elif default == "opset13":
            v = 1 if opset < 13 else -1
        else:
            v = default
        if v is not None and rank is not None:
            _in_range(node, attr, int(v), rank, inclusive)
    if op in AXES:
        axes = a.get("axes")
        if axes is None and len(node.input) > 1 and node.input[1] in consts:
            axes = np.asarray(consts[node.input[1]]).reshape(-1).tolist()
        if axes is None or rank is None:
            return
        r = rank + len(axes) if AXES[op] == "out" else rank
        for v in axes:
            _in_range(node, "axes", int(v), r)
        if AXES[op] == "out" and len({int(v) % r for v in axes}) != len(axes):
            raise _bad(node, f"axes = {excerpt(list(axes), 40)}: an axis named twice")


def check_model(model):
    """:func:`check` of every node of ``model``'s graph as the file writes it (its shapes by
    onnx's shape inference, else as declared; the constant ``axes`` inputs its initializers and
    ``Constant`` nodes hold)."""
    from onnx import helper, numpy_helper
    from .graphindex import shapes as inferred
    g = model.graph
    opset = max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=13)
    wanted = {n.input[1] for n in g.node if n.op_type in AXES and len(n.input) > 1 and n.input[1]}
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer if t.name in wanted}
    for n in g.node:
        if n.op_type == "Constant" and n.output and n.output[0] in wanted:
            v = next((a.t for a in n.attribute if a.name == "value"), None)
            if v is not None:
                consts[n.output[0]] = numpy_helper.to_array(v)
    shapes = None
    for n in g.node:
        if n.op_type in AXIS or n.op_type in AXES or n.op_type in CHOICES:
            if shapes is None:
                shapes = inferred(model, declared=True)
            check(n, {a.name: helper.get_attribute_value(a) for a in n.attribute}, shapes, consts, opset)
