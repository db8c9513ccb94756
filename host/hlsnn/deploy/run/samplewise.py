"""Ops whose tensors mix the batch with other axes: attention as PyTorch exports it.

A fixed-batch-1 export of ``nn.MultiheadAttention`` transposes (N, T, E) to (T, N, E), reshapes
it to (T, N*H, d) and multiplies (N*H, T, d) by (N*H, d, T): constant shapes in which the
batch is merged with the heads. hlsnn runs such a file as the file's own computation on each
sample. :mod:`hlsnn.deploy.rewrite.shapefold` gives every tensor its static shape ``S`` at batch 1; a
tensor whose ``S`` starts with 1 is held as usual, ``(N, *S[1:])`` (*normal*); any other is held as
``(N, *S)``, sample i's value of the file's tensor at ``[i]`` (*lifted*). An op sees each input
lifted (a normal one gains its axis of 1) and computes what the file computes, on the axes
after the first, for all samples at once; its output is normal again where ``S`` starts with
1. Ops on normal tensors that hlsnn's other rules take keep those rules.

Host ops here (:func:`rule` at import, :func:`run` in the float path):

* ``SwMove``: ``Reshape``/``Flatten``/``Squeeze``/``Unsqueeze`` (to the static output shape;
  also of the file's axis 0 where it is not the batch), ``Transpose``, ``Gather`` by constant
  indices, ``Slice`` and each output of ``Split`` (:mod:`hlsnn.deploy.run.swslice`). They move values only: exact on fixed-point
  values (:data:`hlsnn.deploy.run.hostops.EXACT`).
* ``SwCompute``: ``Concat`` with a constant input or off the channel axis (a class token), ``Add``/``Sub``/``Mul``/``Div`` (of tensors or constants, ONNX broadcasting
  within a sample), ``Relu``, ``Sigmoid``, ``Tanh``, ``Erf``, ``Gelu``, ``Softmax``,
  ``LayerNormalization``, ``ReduceMean``/``ReduceMax`` (the token mean of a classifier's head),
  in float64 like the other computing host ops; the next engine layer requantizes the result.
  ``Where`` with a constant condition (a causal mask) is a ``SwCompute`` too
  (:mod:`hlsnn.deploy.run.maskfill`).
* ``MatMulAct``: a ``MatMul`` of two computed tensors (q by k transposed, the scores by v). In
  a deployment both operands are quantized at run time in the format of the nearest engine
  layer before it. bfp: on that layer's ``bfp_systolic`` engine, the left operand as the
  GEMM's activations (one exponent per row), the right one as its weights (one exponent per
  column, or per matrix with ``weight_exponent: tensor``), the result the engine's BFP output
  (:mod:`hlsnn.deploy.run.actmm_engine`). The fixed-point formats (:class:`ActMatMul`): ``act_bits`` signed integers at a radix point chosen per sample and
  operand from the values (``host_radix``), the integer sums exact and their scale a power of
  two, so the product is exact for the quantized operands; in fixed8 the sums are computed on
  the ``sparse_cluster`` engine (:mod:`hlsnn.deploy.run.actmm_sparse`), in two-hot on the host
  (``shift_mac`` multiplies an activation by a weight's shift code only: it cannot multiply two
  activations). ``Softmax`` runs in float64; the scores-by-values ``MatMulAct`` that reads it
  quantizes it like any operand.

An engine layer (a ``MatMul``/``Gemm`` by a constant) on a lifted tensor multiplies every row
of its last axis (the token-wise GEMM of :func:`hlsnn.deploy.importer.onnx_nodes._rows_as_maps`):
:func:`rows` gives the rows.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from . import maskfill, swslice

MOVES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Gather", "Slice", "Split")
COMPUTE = ("Concat", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf", "Gelu", "Softmax", "LayerNormalization",
           "ReduceMean", "ReduceMax")
OPS = MOVES + COMPUTE + ("MatMul",)


def axis_of(op, axis, ndim, batch=True):
    """``axis`` of a tensor of rank ``ndim`` as an index ``0..ndim-1``: an :class:`InputError`
    when it is none of its axes (``-ndim..ndim-1``, ONNX's range; never wrapped modulo the rank)
    or, with ``batch=False``, when it is the batch axis 0 (an op of one sample's values)."""
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool) or not -ndim <= axis < ndim:
        raise InputError(f"{op}: axis {axis!r} of a tensor of rank {ndim}: one of {-ndim}..{ndim - 1}")
    axis = int(axis) % ndim
    if axis == 0 and not batch:
        raise InputError(f"{op}: axis 0 is the batch: only an axis after it (1..{ndim - 1} or -{ndim - 1}..-1)")
    return axis


def is_lifted(shape):
    return len(shape) == 0 or shape[0] != 1


def rows(shape):
    """The rows a ``MatMul``/``Gemm`` by a constant multiplies on a tensor of static shape
    ``shape``: None for a normal (1, K) tensor (a dense layer), else the leading dimensions
    (those after the batch of a normal tensor, all of a lifted one's but the last)."""
    if not is_lifted(shape):
        return tuple(shape[1:-1]) or None
    return tuple(shape[:-1])


def _attrs(node):
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _axes(node, a, consts, rank):
    axes = a.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        axes = np.asarray(consts[node.input[1]]).reshape(-1).tolist() if node.input[1] in consts else "?"
    if axes == "?":
        return None
    return None if axes is None else [int(x) % rank for x in axes]


def rule(node, op, a, consts, fs, users=()):
    """How the importer takes ``node`` (static shapes ``fs``; ``users``: the nodes that read its
    output): ``(host op, inputs, attrs)``, why it is unsupported (a string), or None (a normal op:
    the other rules take it)."""
    if op == "Where":                            # a masked fill (hlsnn.deploy.run.maskfill)
        return maskfill.rule(node, consts, fs, users)
    if op == "Add":                              # an additive -inf mask into a Softmax (maskfill)
        spec = maskfill.add_rule(node, consts, fs, users)
        if spec is not None:
            return spec
    ins = [i for i in node.input if i]
    acts = [i for i in ins if i not in consts]
    out = node.output[0]
    if any(i not in fs for i in acts) or out not in fs:
        return None
    in_shapes, s_out = [tuple(fs[i]) for i in acts], tuple(fs[out])
    lifted = any(is_lifted(s) for s in in_shapes) or is_lifted(s_out)
    base = {"fn": op, "in_shapes": in_shapes, "out_shape": s_out}
    if op == "MatMul":
        if len(acts) != 2:
            return None                          # by a constant: an engine layer (rows())
        if min(len(s) for s in in_shapes) < 2:
            return f"a MatMul of tensors of shapes {in_shapes}: both need rank 2 or more"
        return "MatMulAct", acts, base
    if op == "Slice" and len(acts) == 1 and node.input[0] == acts[0]:
        spec = swslice.slice_rule(node, a, consts, in_shapes[0], s_out)
        return spec if isinstance(spec, str) else ("SwMove", acts, dict(base, **spec))
    if op == "Concat" and acts:
        axis = int(a.get("axis", 1)) % len(s_out)
        if len(acts) == len(ins) and not lifted and axis == 1:
            return None                          # channels of computed maps: import_rules' exact Concat
        return "SwCompute", acts, dict(base, axis=axis, operands=swslice.concat_operands(node, consts, acts))
    if op in ("Squeeze", "Unsqueeze") and not lifted and len(acts) == 1:
        axes = _axes(node, a, consts, len(in_shapes[0]) if op == "Squeeze" else len(s_out))
        if axes is not None and 0 in axes:       # the file's axis 0 (of size 1) is not the batch here
            return "SwMove", acts, base
    if op == "Gather" and len(ins) > 1 and node.input[1] not in consts:
        return "Gather by computed indices: only constant indices"
    if op in MOVES:
        if len(acts) != 1:
            return None
        if op == "Gather":
            r = len(in_shapes[0])
            return "SwMove", acts, dict(base, axis=int(a.get("axis", 0)) % r,
                                        indices=np.asarray(consts[node.input[1]]).astype(np.int64))
        if op == "Transpose":
            perm = list(a.get("perm", range(len(in_shapes[0]))[::-1]))
            return "SwMove", acts, dict(base, perm=[int(p) for p in perm])
        if not lifted:
            if op == "Reshape":                  # the static target, the batch first
                return "Reshape", acts, {"shape": (-1,) + s_out[1:]}
            return None
        return "SwMove", acts, base
    if op in COMPUTE:
        if not lifted and op not in ("ReduceMean", "ReduceMax", "Softmax"):
            return None
        r = len(s_out)
        at = dict(base)
        if op in ("ReduceMean", "ReduceMax"):
            r_in = len(in_shapes[0])
            axes = _axes(node, a, consts, r_in)
            if axes is None and a.get("noop_with_empty_axes", 0):
                return None
            axes = list(range(r_in)) if axes is None else axes
            if 0 in axes and not is_lifted(in_shapes[0]):
                return "a reduction over the batch axis"
            if not lifted and sorted(axes) in ([2, 3], [2]):
                return None                      # global pooling: import_rules (dynamo's mean over [3, 2] too)
            at.update(axes=axes, keepdims=int(a.get("keepdims", 1)))
        elif op == "Softmax":
            if not lifted and int(a.get("axis", -1)) % r == r - 1 and r == 2:
                return None                      # the classifier's softmax: the host rule
            at["axis"] = int(a.get("axis", -1)) % r - r
        elif op == "LayerNormalization":
            if not all(i in consts for i in node.input[1:] if i):
                return "scale and bias must be constants"
            at.update(axis=int(a.get("axis", -1)) % r - r, epsilon=float(a.get("epsilon", 1e-5)),
                      scale=np.asarray(consts[node.input[1]], np.float64),
                      bias=(np.asarray(consts[node.input[2]], np.float64)
                            if len(node.input) > 2 and node.input[2] else None))
        elif op == "Gelu":
            ap = a.get("approximate", "none")
            at["approximate"] = ap.decode() if isinstance(ap, bytes) else ap
        if op in ("Add", "Sub", "Mul", "Div"):
            if len(ins) != 2 or not acts:
                return None
            at["operands"] = [("x", acts.index(i)) if i not in consts else ("c", np.asarray(consts[i], np.float64))
                              for i in node.input[:2]]
            for kind, v in at["operands"]:
                if kind == "c" and not np.all(np.isfinite(v)):
                    return "a constant with NaN or Inf values"
        elif len(acts) != 1 or (len(ins) > 1 and op not in ("LayerNormalization", "ReduceMean", "ReduceMax")):
            return None
        return "SwCompute", acts, at
    return None


def split(node, a, fs):
    """A ``Split`` of a tensor with static shapes: one ``(host op, inputs, output, attrs)`` per
    output, a ``SwMove`` that takes its part (:mod:`hlsnn.deploy.run.swslice`), or None."""
    x = node.input[0]
    if x not in fs or any(o not in fs for o in node.output if o):
        return None
    return [("SwMove", [x], o, dict(at, fn="Split", in_shapes=[tuple(fs[x])], out_shape=tuple(fs[o])))
            for o, at in swslice.split_rules(node, a, fs)]


def lift(x, s):
    """A tensor of static shape ``s`` as ``(N, *s)``."""
    return x[:, None] if not is_lifted(s) else x


def drop(y, s):
    """``(N, *s)`` as the tensor is held: ``(N, *s[1:])`` where ``s`` starts with 1."""
    return y[:, 0] if not is_lifted(s) else y


def _align(xs, rank):
    """Lifted operands of ONNX-broadcast ranks as ``(N, 1, ..., *s)``: the batch axis first."""
    return [x.reshape((x.shape[0],) + (1,) * (rank + 1 - x.ndim) + x.shape[1:]) for x in xs]


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def run(layer, inputs, matmul=None, host_run=None):
    """Host ``layer`` (``SwMove``, ``SwCompute`` or ``MatMulAct``) on its inputs as they are
    held; ``matmul`` computes a ``MatMulAct``'s product of the two lifted operands (default:
    float64); ``host_run(spec, inputs)`` evaluates a per-sample function such as
    ``LayerNormalization`` (:func:`hlsnn.deploy.run.hostops.run`, which calls this one)."""
    from types import SimpleNamespace
    a = layer.attrs
    xs = [lift(np.asarray(x), s) for x, s in zip(inputs, a["in_shapes"])]
    n = xs[0].shape[0]
    s_out, fn = tuple(a["out_shape"]), a["fn"]
    if layer.op == "MatMulAct":
        r = max(len(s) for s in a["in_shapes"])
        xa, xb = _align(xs, r)
        y = (matmul or np.matmul)(xa, xb)
    elif layer.op == "SwMove":
        x = xs[0]
        if fn == "Transpose":
            y = x.transpose([0] + [p + 1 for p in a["perm"]])
        elif fn == "Gather":
            y = np.take(x, a["indices"], axis=axis_of(fn, a["axis"], x.ndim - 1) + 1)   # of one sample's axes
        elif fn in ("Slice", "Split"):
            y = swslice.run_take(x, a["takes"])
        else:
            y = x.reshape((n,) + s_out)
    else:
        r = len(s_out)
        if fn == "Concat":
            y = swslice.run_concat(xs, a["operands"], a["axis"], n)
        elif fn in ("Add", "Sub", "Mul", "Div"):
            ops = [_align([xs[v]], r)[0] if k == "x" else v for k, v in a["operands"]]
            y = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[fn](*ops)
        elif fn in ("Where", "AddInf"):
            y = maskfill.run(xs, a, lambda x, rank: _align([x], rank)[0])
        elif fn in ("ReduceMean", "ReduceMax"):
            red = np.mean if fn == "ReduceMean" else np.max
            y = red(xs[0], axis=tuple(ax + 1 for ax in a["axes"]), keepdims=bool(a["keepdims"]))
        elif fn == "Softmax":
            y = _softmax(xs[0], axis_of(fn, a["axis"], xs[0].ndim - 1) + 1)
        elif fn == "LayerNormalization":
            y = host_run(SimpleNamespace(op=fn, attrs=a), [xs[0]])
        else:
            y = host_run(SimpleNamespace(op=fn, attrs=a), [xs[0]])
    y = np.asarray(y, np.float64)
    if y.shape != (n,) + s_out:
        raise InputError(f"layer {layer.name} ({fn}): computed shape {y.shape[1:]} per sample, the file's {s_out}")
    return drop(y, s_out)


class ActMatMul:
    """A ``MatMulAct`` layer in a deployment: both operands quantized at run time in the format
    ``fmt`` of accelerator parameters ``p`` (module docstring), the product in integers on the
    host, or on ``engine`` (bfp: :class:`hlsnn.deploy.run.actmm_engine.EngineActMatMul`)."""

    def __init__(self, layer, fmt, p, rounding, engine=None):
        self.layer, self.type, self.p, self.rounding = layer, fmt.type, p, rounding
        self.engine = engine          # computes the product on an engine (bfp: actmm_engine), or None

    def _fixed(self, xa, xb):
        from ..quantize.quant import host_radix, to_fixed
        bits = int(self.p.get("act_bits", 8))
        out = []
        for a, b in zip(xa, xb):                  # the radix points of each sample's operands
            fa, fb = host_radix(a, bits, True), host_radix(b, bits, True)
            ia = to_fixed(a, fa, bits, True, self.rounding).astype(np.int64)
            ib = to_fixed(b, fb, bits, True, self.rounding).astype(np.int64)
            out.append(np.ldexp(np.matmul(ia, ib).astype(np.float64), -(fa + fb)))
        return np.stack(out)

    def matmul(self, xa, xb):
        return self._fixed(xa, xb) if self.engine is None else self.engine.matmul(xa, xb)

    def run(self, inputs):
        return run(self.layer, inputs, matmul=self.matmul)


def quantizers(net, assignment, formats, execs):
    """The :class:`ActMatMul` of each ``MatMulAct`` layer of ``net``, in the format of the nearest
    engine layer before it (else after it): on that layer's engine in bfp
    (:class:`~hlsnn.deploy.run.actmm_engine.EngineActMatMul`) and fixed8
    (:class:`~hlsnn.deploy.run.actmm_sparse.SparseActMatMul`), on the host in two-hot (``shift_mac``
    cannot multiply two activations)."""
    return quantizers_of(net.layers, execs, lambda name: formats[assignment.format_of(name)].type)


def quantizers_of(layers, execs, type_of):
    """:func:`quantizers` of a layer list, ``type_of(engine layer name)`` its format type (a
    compiled model's program records it per layer)."""
    from types import SimpleNamespace
    out = {}
    engine = [i for i, la in enumerate(layers) if la.name in execs]
    for i, la in enumerate(layers):
        if getattr(la, "op", "") != "MatMulAct" or not engine:
            continue
        before = [j for j in engine if j < i]
        ex = execs[layers[before[-1] if before else engine[0]].name]
        kind = type_of(ex.layer.name)
        on, engine_name = None, ex.acc.config.engine
        if kind == "bfp" and engine_name == "bfp_systolic":
            from .actmm_engine import EngineActMatMul
            on = EngineActMatMul(ex)
        elif kind in ("fixed", "sparse") and engine_name == "sparse_cluster":
            from .actmm_sparse import SparseActMatMul
            on = SparseActMatMul(ex, ex.deploy.rounding)
        out[la.name] = ActMatMul(la, SimpleNamespace(type=kind), ex.p, ex.deploy.rounding, on)
    return out
