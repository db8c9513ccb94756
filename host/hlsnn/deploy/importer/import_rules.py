"""Import rules for the ops that run on the host or fold into an engine layer, beyond the core
of :mod:`hlsnn.deploy.importer.onnx_import` (dense, conv, BatchNormalization, Relu, pooling).

Each rule accepts an op by what it computes, not by the node pattern one exporter writes, so
that ``torch.onnx.export``'s default (dynamo, opset 18+: axes, pads and bounds as constant
inputs) and its ``dynamo=False`` exports (opset 11-17: some of them as attributes) import alike:

* ``ReduceMean`` / ``ReduceMax`` over exactly the spatial axes of a 4-D tensor (2 and 3, or
  -2 and -1), or the length axis (2) of a 3-D one, with or without ``keepdims``: global average / max pooling (``nn.AdaptiveAvgPool2d(1)``
  exports as ``ReduceMean`` at opset 18+). Over other axes after the batch (the mean over the
  tokens of an (N, T, F) tensor): :mod:`hlsnn.deploy.run.hostextra`'s ``ReduceAxes``; over the batch: unsupported.
* ``GlobalMaxPool``: global max pooling.
* ``Clip`` with constant bounds (missing bound: none): a clamp. After a dense or conv layer
  whose output only it reads, a lower bound of at least 0 fuses the layer's ReLU (every
  engine has one in its output stage, and ``clip(relu(x), lo, hi) = clip(x, lo, hi)`` for
  ``lo >= 0``); no engine has an upper clamp in its output stage, so the rest of the clamp
  (ReLU6's ``min(x, 6)``) stays on the host, where it keeps the fixed-point format of its
  input when the bounds are values of that format.
* ``Sigmoid``, ``HardSigmoid``, ``HardSwish`` (and ``Tanh``): elementwise on the host
  (quantized like any computing host op under ``--host-precision quantized``).
* ``Pad``: constant mode with constant pads (none negative) and value; zero padding keeps the
  fixed-point format. Modes ``reflect`` and ``edge`` (``Conv``'s ``padding_mode='reflect'`` /
  ``'replicate'``; not of the batch axis) move values only: the format is kept too, and such a
  pad is never folded into the next conv's zero padding.
* ``Concat`` on the channel axis (1, or -3 of a 4-D tensor).
* ``Resize`` / ``Upsample``, nearest, by integer scale factors on H and W (1 on N and C; or on L
  of an (N, C, L) tensor, run on the (N, C, L, 1) map between two exact ``Reshape`` layers), with
  a coordinate transformation that makes it a repetition of each pixel (``asymmetric`` with
  ``floor``, or ``half_pixel`` / ``pytorch_half_pixel`` with rounding to the nearest); given
  by ``scales`` or by ``sizes`` that are integer multiples of the input's.
* ``Squeeze`` / ``Unsqueeze`` by constant axes other than the batch's: moves no value.
* ``Resize`` with mode linear, ``LeakyRelu``, ``Elu``, ``PRelu``, ``DepthToSpace``, ``LogSoftmax``,
  ``InstanceNormalization``, ``ReduceSum`` over axes after the batch:
  on the host in float64 (:mod:`hlsnn.deploy.run.hostextra`).
* ``Softplus``, ``Selu``, ``Celu``, ``Softsign``, ``Mish``, ``ThresholdedRelu``: elementwise on
  the host in float64 (:mod:`hlsnn.deploy.run.hostunary`), tables where rule 9 applies.
* ``LayerNormalization`` (constant scale and bias, over axes after the batch), ``Gelu``
  (exact or tanh) and ``Erf``: on the host, in float64 (``Add`` of a constant, as
  ``torch.onnx``'s opset-17 GELU and a positional table write it, is a host ``AddConst`` of
  :mod:`hlsnn.deploy.importer.onnx_import`).
* ``Mul`` of two computed tensors of one rank (a gate: ``x * sigmoid(...)``): a host op.
* ``Pow`` by a constant, ``Sqrt``, ``Reciprocal``, ``Div`` of a constant or a tensor by a computed
  tensor, ``ReduceL2`` over axes after the batch (a hand-written RMSNorm, ``F.normalize``): on the
  host in float64 (:mod:`hlsnn.deploy.run.hostmath`).
* ``Mul`` / ``Div`` by a constant that is one number or one per channel: folded into the
  preceding dense or conv layer (``w' = w * c``, ``b' = b * c`` per output channel) when the
  layer's output only goes there and the layer has no ReLU or every ``c`` is positive;
  elsewhere a host op.

:func:`host_rule` returns a :class:`HostSpec` (the host op to create) or the reason the node is
unsupported (a string).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..run import hostarith, hostextra, hostmath, hostunary

OPS = ("ReduceMean", "ReduceMax", "GlobalMaxPool", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Pad",
       "Concat", "Resize", "Upsample", "Mul", "Div", "Squeeze", "Unsqueeze", "LayerNormalization", "Gelu", "Erf",
       "ReduceSum") + hostextra.OPS + hostunary.OPS + hostmath.OPS + hostarith.OPS

#: nearest-neighbour Resize modes that repeat each pixel ``s`` times for an integer scale ``s``
_REPEATING = {("asymmetric", "floor"), ("half_pixel", "round_prefer_floor"), ("half_pixel", "round_prefer_ceil"),
              ("pytorch_half_pixel", "round_prefer_floor"), ("pytorch_half_pixel", "round_prefer_ceil")}


@dataclass
class HostSpec:
    """A host layer to create: its ``op`` (a :mod:`hlsnn.deploy.run.hostops` op), ``attrs`` and
    tensor ``inputs``."""
    op: str
    attrs: dict = field(default_factory=dict)
    inputs: list = field(default_factory=list)


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _const_input(node, i, consts):
    """Input ``i`` of ``node`` as a constant array; ``None`` when absent (empty name);
    ``False`` when it is a tensor computed at run time."""
    if len(node.input) <= i or not node.input[i]:
        return None
    name = node.input[i]
    return np.asarray(consts[name]) if name in consts else False


def zero_pads(node, a, consts):
    """Whether a ``Pad`` pads nothing (pads all zero, the attribute or a constant input): the
    identity (milesial's ``F.pad`` of an upsample to its skip's own size)."""
    pads = a.get("pads")
    if pads is None:
        c = _const_input(node, 1, consts)
        if c is None or c is False:
            return False
        pads = c.reshape(-1)
    return len(pads) > 0 and not np.any(np.asarray(pads))


def _axes(node, a, consts):
    """The ``axes`` of a reduction or a (Un)squeeze: the attribute (before opset 13 / 18) or the
    constant second input (since); ``(axes or None, None)``, or ``(None, reason)`` when the input
    is computed at run time."""
    axes = a.get("axes")
    if axes is None:
        c = _const_input(node, 1, consts)
        if c is False:
            return None, "the axes input must be a constant"
        axes = None if c is None else c.reshape(-1).tolist()
    return axes, None


def _spatial_axes(axes, rank):
    if rank == 3:                                   # (N, C, L): the length axis
        return sorted(int(a) % 3 for a in axes) == [2]
    if rank is not None and rank != 4:
        return False
    return sorted(int(a) % 4 for a in axes) == [2, 3]


def host_rule(node, a, consts, shapes):
    """The host op for ``node`` (op type in :data:`OPS`), or why it is unsupported.
    ``a``: its attributes; ``consts``: constant tensors by name; ``shapes``: inferred shapes
    (tuples, ``None`` for an unknown dimension) by tensor name, where known."""
    op = node.op_type
    x = node.input[0] if node.input else ""
    rank = len(shapes[x]) if x in shapes else None
    if op in hostunary.OPS:                         # Softplus, Selu, Celu, Softsign, Mish, ThresholdedRelu
        spec = hostunary.rule(node, a)
        return spec if isinstance(spec, str) else HostSpec(*spec)
    if op in hostmath.OPS:                          # Pow by a constant, Sqrt, Reciprocal
        spec = hostmath.rule(node, a, consts, shapes)
        return spec if isinstance(spec, str) else HostSpec(*spec)
    if op in hostarith.OPS:                         # Sub, Max / Min by one number (a clamp)
        spec = hostarith.rule(node, consts, shapes)
        return spec if isinstance(spec, str) else HostSpec(*spec)
    if op in hostextra.OPS:                         # LeakyRelu, Elu, LogSoftmax, PRelu, DepthToSpace
        spec = hostextra.rule(node, a, shapes, consts)
        return spec if isinstance(spec, str) else HostSpec(*spec)
    if op == "ReduceSum":                           # x.sum(1) over the tokens: hostextra's ReduceAxes
        axes, why = _axes(node, a, consts)
        if why or not axes:
            return why or "ReduceSum over every axis: only over axes after the batch"
        spec = hostextra.reduce_axes(op, axes, int(a.get("keepdims", 1)), rank)
        return spec if isinstance(spec, str) else HostSpec(*spec, [x])
    if op in ("ReduceMean", "ReduceMax"):
        axes, why = _axes(node, a, consts)
        if why:
            return why
        if not axes:
            return (f"{op} over every axis: only over the spatial axes (2, 3) of an NCHW tensor or the length axis "
                    "(2) of an NCL one (global pooling)")
        if not _spatial_axes(axes, rank):           # the mean over the tokens of (N, T, F), ...: hostextra
            spec = hostextra.reduce_axes(op, axes, int(a.get("keepdims", 1)), rank)
            return spec if isinstance(spec, str) else HostSpec(*spec, [x])
        pool = "GlobalAveragePool" if op == "ReduceMean" else "GlobalMaxPool"
        return HostSpec(pool, {"keepdims": int(a.get("keepdims", 1))}, [x])
    if op == "GlobalMaxPool":
        return HostSpec(op, {"keepdims": 1}, [x])
    if op == "Clip":
        lo, hi = a.get("min"), a.get("max")                        # opset < 11: attributes
        for i, what in ((1, "min"), (2, "max")):
            c = _const_input(node, i, consts)
            if c is False:
                return f"the {what} bound must be a constant"
            if c is not None:
                if c.size != 1:
                    return f"the {what} bound must be one number (has shape {c.shape})"
                lo, hi = (float(c.reshape(-1)[0]), hi) if what == "min" else (lo, float(c.reshape(-1)[0]))
        lo = None if lo is None or not np.isfinite(lo) else float(lo)
        hi = None if hi is None or not np.isfinite(hi) else float(hi)
        if lo is not None and hi is not None and lo > hi:
            return f"min {lo} > max {hi}"
        return HostSpec("Clip", {"lo": lo, "hi": hi}, [x])
    if op in ("Sigmoid", "Tanh"):
        return HostSpec(op, {}, [x])
    if op == "HardSigmoid":
        return HostSpec(op, {"alpha": float(a.get("alpha", 0.2)), "beta": float(a.get("beta", 0.5))}, [x])
    if op == "HardSwish":
        return HostSpec(op, {}, [x])
    if op == "Pad":
        return _pad(node, a, consts, rank)
    if op == "Concat":
        axis = int(a.get("axis", 1))
        ins = [i for i in node.input if i]
        if any(i in consts for i in ins):
            return "Concat with a constant input: only of computed tensors"
        ranks = {len(shapes[i]) for i in ins if i in shapes}
        r = ranks.pop() if len(ranks) == 1 else None
        if not (axis == 1 or (r is not None and axis % r == 1)):
            return f"axis = {axis}: only on the channel axis (1)"
        return HostSpec("Concat", {"axis": 1}, ins)
    if op in ("Resize", "Upsample"):
        return _resize(node, a, consts, shapes)
    if op in ("Squeeze", "Unsqueeze"):
        return _squeeze(node, a, consts, rank)
    if op == "Erf":
        return HostSpec(op, {}, [x])
    if op == "Gelu":
        how = _s(a.get("approximate", "none"))
        if how not in ("none", "tanh"):
            return f"approximate = {how!r}: none or tanh"
        return HostSpec(op, {"approximate": how}, [x])
    if op == "LayerNormalization":
        axis = int(a.get("axis", -1))
        if rank is not None and axis % rank == 0:
            return "LayerNormalization over the batch axis: only over the axes after it"
        params = []
        for i, what in ((1, "scale"), (2, "bias")):
            c = _const_input(node, i, consts)
            if c is False:
                return f"the {what} input must be a constant"
            params.append(None if c is None else np.asarray(c, np.float64))
        if int(a.get("stash_type", 1)) != 1 or len([o for o in node.output if o]) > 1:
            return "only the normalized output (no Mean / InvStdDev outputs)"
        return HostSpec(op, {"axis": axis, "epsilon": float(a.get("epsilon", 1e-5)), "scale": params[0],
                             "bias": params[1]}, [x])
    if op in ("Mul", "Div"):
        ins = list(node.input)
        if ins[0] in consts and ins[1] not in consts and op == "Mul":
            ins = [ins[1], ins[0]]
        if op == "Mul" and ins[0] not in consts and ins[1] not in consts:
            return _gate(ins, shapes)
        if op == "Div" and ins[1] not in consts:       # by a computed tensor: hostmath's Div / Reciprocal
            spec = hostmath.div_rule(ins, consts, shapes)
            return spec if isinstance(spec, str) else HostSpec(*spec)
        if ins[1] not in consts or ins[0] in consts:
            return f"{op} of two computed tensors: only by a constant"
        c = np.asarray(consts[ins[1]], np.float64)
        if op == "Div" and (c == 0).any():
            return "division by a constant with a zero in it"
        return HostSpec("Scale", {"c": c, "divide": op == "Div"}, [ins[0]])
    return f"no rule for {op}"


def _gate(ins, shapes):
    """``Mul`` of two computed tensors (a squeeze-excite block's ``x * sigmoid(...)``, a gate):
    elementwise, with numpy's broadcasting, of one sample's tensors by the same sample's (the
    batch axis never broadcasts). The product of two fixed-point values is exact in float64,
    and the next engine layer requantizes it like an ``Add``'s sum; under ``--host-precision
    quantized`` both operands and the product are fixed point."""
    why = hostmath.broadcast_error("Mul", shapes.get(ins[0]), shapes.get(ins[1]), "a gate broadcasts within it")
    if why:
        return why
    return HostSpec("Mul", {}, list(ins))


def _squeeze(node, a, consts, rank):
    """``Squeeze`` / ``Unsqueeze`` by constant axes (an attribute before opset 13, an input
    since), never of the batch axis: a host op that moves no value (the dynamo exporter's
    ``AdaptiveAvgPool1d`` is ``Unsqueeze`` to 4-D, ``ReduceMean``, ``Squeeze``)."""
    op = node.op_type
    axes, why = _axes(node, a, consts)
    if why:
        return why
    if not axes:
        return f"{op} without axes: give the axes (which ones depend on the batch size otherwise)"
    out_rank = None if rank is None else rank + (len(axes) if op == "Unsqueeze" else -len(axes))
    if out_rank is None and any(int(v) < 0 for v in axes):
        return f"{op} by negative axes {list(axes)} of a tensor of unknown rank"
    r = rank if op == "Squeeze" else out_rank
    axes = sorted(int(v) % r if r else int(v) for v in axes)
    if 0 in axes:
        return f"{op} of axis 0, the batch: only of the axes after it"
    return HostSpec(op, {"axes": axes}, [node.input[0]])


def _pad(node, a, consts, rank):
    mode = _s(a.get("mode", "constant"))
    if mode not in ("constant", "reflect", "edge", "wrap"):  # Conv's padding_mode reflect/replicate/circular
        return f"mode {mode!r}: only constant, reflect, edge and wrap padding"
    pads = a.get("pads")
    if pads is None:
        c = _const_input(node, 1, consts)
        if c is None or c is False:
            return "the pads input must be a constant"
        pads = c.reshape(-1).tolist()
    value = a.get("value", 0.0)
    c = _const_input(node, 2, consts)
    if c is False:
        return "the constant_value input must be a constant"
    if c is not None and c.size:
        value = float(c.reshape(-1)[0])
    pads = [int(p) for p in pads]
    if any(p < 0 for p in pads):
        return f"pads {pads}: negative pads (cropping) are not supported"
    axes = _const_input(node, 3, consts)
    if axes is False:
        return "the axes input must be a constant"
    if axes is not None:                       # opset 18: pads for these axes only
        if rank is None:
            return "Pad with axes on a tensor of unknown rank"
        n = len(axes.reshape(-1))
        full = [0] * (2 * rank)
        for j, ax in enumerate(int(v) % rank for v in axes.reshape(-1)):
            full[ax], full[rank + ax] = pads[j], pads[n + j]
        pads = full
    if mode != "constant" and rank is not None and len(pads) == 2 * rank and pads[0] | pads[rank]:
        return f"pads {pads}: {mode} padding of the batch axis"
    spec = HostSpec("Pad", {"pads": pads, "value": 0.0 if mode != "constant" else float(value)}, [node.input[0]])
    if mode != "constant":
        spec.attrs["mode"] = mode
    return spec


def _resize(node, a, consts, shapes):
    op = node.op_type
    mode = _s(a.get("mode", "nearest"))
    if mode in ("linear", "cubic") and op == "Resize":   # bilinear, bicubic: hlsnn.deploy.run.hostextra's ResizeLinear
        scales, sizes = _const_input(node, 2, consts), _const_input(node, 3, consts)
        if scales is False or sizes is False:
            return "scales and sizes must be constants"
        spec = hostextra.resize_linear(node, a, scales, sizes, shapes.get(node.input[0]), mode)
        return spec if isinstance(spec, str) else HostSpec(spec[0], spec[1], [node.input[0]])
    if mode != "nearest":
        return f"mode {mode!r}: only nearest-neighbour {op}" + (" and linear / cubic Resize" if op == "Resize" else "")
    if op == "Resize":
        how = (_s(a.get("coordinate_transformation_mode", "half_pixel")), _s(a.get("nearest_mode", "round_prefer_floor")))
        if how not in _REPEATING:
            return (f"coordinate_transformation_mode {how[0]!r} with nearest_mode {how[1]!r}: only modes that repeat "
                    "pixels (asymmetric with floor; half_pixel or pytorch_half_pixel with round_prefer_floor/ceil)")
        if a.get("axes") is not None:
            return "Resize with axes is not supported"
        scales, sizes = _const_input(node, 2, consts), _const_input(node, 3, consts)
    else:
        scales = np.asarray(a["scales"]) if "scales" in a else _const_input(node, 1, consts)
        sizes = None
    if scales is False or sizes is False:
        return "scales and sizes must be constants"
    if scales is not None and scales.size:
        f = scales.reshape(-1).astype(np.float64)
    elif sizes is not None and sizes.size:
        shape = shapes.get(node.input[0])
        sz = sizes.reshape(-1).astype(np.float64)
        if shape is None or None in shape[1:] or len(shape) != len(sz):
            return "Resize by sizes of an input of unknown shape"
        if shape[0] is None and sz[0] != 1:
            return f"sizes {sz.astype(int).tolist()}: the batch's size must be the file's batch, 1"
        # the batch (symbolic here, 1 in the file: a size computed from Shape at batch 1) keeps its size
        f = np.concatenate([[1.0], sz[1:] / np.asarray(shape[1:], np.float64)])
    else:
        return "neither scales nor sizes given"
    if len(f) not in (3, 4) or f[0] != 1 or f[1] != 1 or any(v < 1 or v != int(v) for v in f[2:]):
        return (f"scales {f.tolist()}: only integer factors on H and W of an NCHW tensor or on L of an NCL one "
                "(1 on N and C)")
    return HostSpec("Upsample", {"factors": tuple(int(v) for v in f[2:])}, [node.input[0]])


def channel_scale(c, kind, n_out):
    """A constant ``c`` as one factor per output channel of a dense or conv layer's output
    (``n_out`` channels), or None when it does not broadcast that way."""
    c = np.asarray(c, np.float64)
    if c.size == 1:
        return np.full(n_out, float(c.reshape(-1)[0]))
    if kind == "conv" and c.shape in ((n_out, 1, 1), (1, n_out, 1, 1)):
        return c.reshape(-1)
    if kind == "dense" and c.shape in ((n_out,), (1, n_out)):
        return c.reshape(-1)
    return None
