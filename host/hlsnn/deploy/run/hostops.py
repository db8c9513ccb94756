"""The layers that run on the host, in numpy, on float64 values (NCHW).

MaxPool, GlobalMaxPool, Flatten, Reshape, Squeeze, Unsqueeze, Relu, Identity, Upsample (a
repetition), zero Pad, ZeroStuff (zeros between the pixels: a transposed convolution's input)
and RowsToMap / MapToRows (the rows of a token-wise ``MatMul`` as the pixels of a map and back:
:mod:`hlsnn.deploy.importer.onnx_import`) are exact on fixed-point values (they keep the producer's radix
point), and so are Clip when its bounds are values of the input's format and Concat when its
inputs share one format (:func:`out_format`); AveragePool, GlobalAveragePool, Add, AddConst (an
``Add`` of a constant), Mul (a gate of two tensors), BatchNormalization, Scale (``Mul`` or
``Div`` by a constant), Sigmoid, HardSigmoid, HardSwish, Tanh, Erf, Gelu and
LayerNormalization (and :mod:`hlsnn.deploy.run.hostextra`'s ResizeLinear, LeakyRelu, Elu and
LogSoftmax, :mod:`hlsnn.deploy.run.hostunary`'s Softplus, Selu, Celu, Softsign, Mish and
ThresholdedRelu; :mod:`hlsnn.deploy.run.hostmath`'s Pow, Sqrt, Reciprocal and Div; :mod:`hlsnn.deploy.run.hostarith`'s Sub;
:mod:`hlsnn.deploy.rewrite.unaryfuse`'s UnaryChain) compute new values, which the next accelerator layer requantizes at its
calibrated radix point; Softmax produces the network's float output. SwMove (exact), SwCompute
and MatMulAct are attention's ops on per-sample tensors (:mod:`hlsnn.deploy.run.samplewise`).
"""
from __future__ import annotations

import numpy as np

from ...engines.convgeom import spread
from ...errors import InputError
from . import hostarith, hostextra, hostmath, hostunary
from .pooling import _pool
from .samplewise import axis_of

#: ops whose output keeps the input's fixed-point format (they only select, move or clamp values;
#: Clip, Concat and Pad under the conditions of :func:`out_format`)
EXACT = ("MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Relu", "Identity", "Dropout", "Upsample", "Clip",
         "Concat", "Pad", "RowsToMap", "MapToRows", "Squeeze", "Unsqueeze", "ZeroStuff", "SwMove")


def _on_grid(v, fmt, side=0):
    """``v`` is a value of the fixed-point format ``(F, bits, signed)``; ``side`` -1 (a lower
    bound) or 1 (an upper bound) also accepts a bound beyond the format's range on that side
    (the clamp then changes no value)."""
    f, bits, signed = fmt
    q = np.ldexp(v, f)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    return (q == np.rint(q) and lo <= q <= hi) or (side < 0 and q <= lo) or (side > 0 and q >= hi)


def out_format(layer, fmts):
    """The fixed-point format ``(F, bits, signed)`` of host ``layer``'s output given its
    inputs' formats ``fmts`` (None where an input has none), or None: an :data:`EXACT` op
    keeps its input's format, a Clip only when its bounds are values of it, a Pad only when
    its value is, a Concat only when all its inputs share it."""
    op, a = layer.op, layer.attrs
    if op not in EXACT or not fmts or fmts[0] is None:
        return None
    if op == "Clip" and not all(_on_grid(v, fmts[0], side) for v, side in ((a["lo"], -1), (a["hi"], 1))
                                if v is not None):
        return None
    if op == "Pad" and not _on_grid(a["value"], fmts[0]):
        return None
    if op == "Concat" and any(f != fmts[0] for f in fmts):
        return None
    return fmts[0]


class _Spec:
    def __init__(self, op, attrs):
        self.op, self.attrs = op, attrs


def bn_terms(layer, ndim):
    """A ``BatchNormalization`` host layer's ``(mean, s, beta)``, each shaped ``(1, C, 1, ...)``
    for an input of rank ``ndim``, with ``s = gamma / sqrt(var + epsilon)``: its output is
    ``(x - mean) * s + beta``, evaluated in that order (float64). Fixed for a loaded layer, so
    worked out on its first run and kept on the layer (``layer.bn_fixed``, by rank; made again
    only if ``attrs["params"]`` or ``epsilon`` is replaced), not once per call; the values are
    those of the same expressions per call, so the output bits are unchanged."""
    a = layer.attrs
    key = (a["params"], a.get("epsilon", 1e-5))
    made = getattr(layer, "bn_fixed", None)
    if made is None or made[0][0] is not key[0] or made[0][1] != key[1]:
        made = (key, {})
        try:
            layer.bn_fixed = made
        except AttributeError:                   # a layer that takes no attribute: worked out per call
            pass
    t = made[1].get(ndim)
    if t is None:
        gamma, beta, mean, var = key[0]
        s = gamma / np.sqrt(var + key[1])
        shape = (1, -1) + (1,) * (ndim - 2)
        t = made[1][ndim] = (mean.reshape(shape), s.reshape(shape), beta.reshape(shape))
    return t


def run(layer, inputs):
    """Evaluate host ``layer`` on its input arrays (float64)."""
    op, a, x = layer.op, layer.attrs, inputs[0]
    if op in ("MaxPool", "AveragePool"):
        return _pool(x, a, op)
    if op == "GlobalAveragePool":
        return x.mean(axis=tuple(range(2, x.ndim)), keepdims=bool(a.get("keepdims", 1)))
    if op == "GlobalMaxPool":
        return x.max(axis=tuple(range(2, x.ndim)), keepdims=bool(a.get("keepdims", 1)))
    if op == "Clip":
        return np.clip(x, -np.inf if a["lo"] is None else a["lo"], np.inf if a["hi"] is None else a["hi"])
    if op == "Sigmoid":
        return 0.5 * (1.0 + np.tanh(0.5 * x))          # 1 / (1 + exp(-x)), without overflow
    if op == "Tanh":
        return np.tanh(x)
    if op == "HardSigmoid":
        return np.clip(a["alpha"] * x + a["beta"], 0.0, 1.0)
    if op == "HardSwish":
        return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)
    if op == "Pad":
        p = list(a["pads"])
        n = len(p) // 2
        if n != x.ndim:
            raise InputError(f"Pad: {n} axes of pads for a tensor of rank {x.ndim}")
        if a.get("mode", "constant") != "constant":      # ONNX reflect / edge / wrap are numpy's
            return np.pad(x, list(zip(p[:n], p[n:])), mode=a["mode"])
        return np.pad(x, list(zip(p[:n], p[n:])), constant_values=a["value"])
    if op == "Concat":
        return np.concatenate(inputs, axis=a["axis"])
    if op == "Upsample":
        fh, fw = a["factors"]
        return np.repeat(np.repeat(x, fh, axis=2), fw, axis=3)
    if op == "Scale":
        return x / a["c"] if a["divide"] else x * a["c"]
    if op == "Flatten":
        axis = a.get("axis", 1)
        return x.reshape(int(np.prod(x.shape[:axis])), -1)
    if op == "Reshape":
        shape = list(a["shape"])
        if a.get("batch_leading"):            # a fixed-batch-1 export: the leading 1 is the batch
            shape[0] = x.shape[0]
        for i, s in enumerate(shape):
            if s == 0 and not a.get("allowzero", 0):
                shape[i] = x.shape[i]
        return x.reshape(shape)
    if op == "RowsToMap":               # (N, *lead, F) -> (N, F, L, 1): the rows as the pixels of a map
        return np.ascontiguousarray(np.moveaxis(x.reshape(x.shape[0], -1, x.shape[-1]), 2, 1)[..., None])
    if op == "MapToRows":               # (N, O, L, 1) -> (N, *lead, O): back to one row per token
        return np.ascontiguousarray(np.moveaxis(x[..., 0], 1, 2)).reshape((x.shape[0],) + tuple(a["lead"])
                                                                         + (x.shape[1],))
    if op == "ZeroStuff":               # s - 1 zeros between the pixels (a transposed convolution's input)
        return spread(x, *a["strides"])
    if op == "Squeeze":
        return np.squeeze(x, axis=tuple(a["axes"]))
    if op == "Unsqueeze":
        return np.expand_dims(x, axis=tuple(a["axes"]))
    if op == "Relu":
        return np.maximum(x, 0)
    if op in ("Identity", "Dropout"):
        return x
    if op == "Add":
        return inputs[0] + inputs[1]
    if op == "Mul":                        # a gate: two computed tensors, broadcast within a sample
        return inputs[0] * inputs[1]
    if op == "AddConst":
        return x + a["c"]
    if op == "Erf":
        try:
            from scipy.special import erf
        except ImportError:
            from ...errors import MissingDependency
            raise MissingDependency('Erf on the host needs scipy: pip install "hlsnn[deploy]"') from None
        return erf(x)
    if op == "Gelu":
        if a.get("approximate", "none") == "tanh":
            return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
        return 0.5 * x * (1.0 + run(_Spec("Erf", {}), [x / np.sqrt(2.0)]))
    if op == "LayerNormalization":
        axes = tuple(range(axis_of(op, a["axis"], x.ndim, batch=False), x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + a["epsilon"])
        if a.get("scale") is not None:
            y = y * a["scale"]
        return y if a.get("bias") is None else y + a["bias"]
    if op == "BatchNormalization":
        mean, s, beta = bn_terms(layer, x.ndim)
        y = np.subtract(x, mean)
        if y.dtype != np.result_type(y, s, beta):      # params wider than x - mean: as written
            return y * s + beta
        y *= s                                          # in place: the same roundings, no temporaries
        y += beta
        return y
    if op == "Softmax":                 # over its axis (opset < 13: over that axis and all after it)
        ax = axis_of(op, a.get("axis", -1), x.ndim)
        axes = tuple(range(ax, x.ndim)) if a.get("coerce_2d") else (ax,)
        e = np.exp(x - x.max(axis=axes, keepdims=True))
        return e / e.sum(axis=axes, keepdims=True)
    if op == "fallback":
        return _fallback(layer, inputs)
    if op == "UnaryChain":                               # elementwise ops from one x (hlsnn.deploy.rewrite.unaryfuse)
        from ..rewrite.unaryfuse import run as chain_run
        return chain_run(layer, inputs, run)
    if op in hostunary.OPS:                              # Softplus, Selu, Celu, Softsign, Mish, ThresholdedRelu
        return hostunary.run(layer, inputs)
    if op in hostmath.HOST_OPS:                          # Pow, Sqrt, Reciprocal, Div (hand-written norms)
        return hostmath.run(layer, inputs)
    if op in hostarith.HOST_OPS:                         # Sub of two tensors
        return hostarith.run(layer, inputs)
    if op in hostextra.HOST_OPS:                         # ResizeLinear, LeakyRelu, Elu, ..., LogSoftmax
        return hostextra.run(layer, inputs)
    if op in ("SwMove", "SwCompute", "MatMulAct"):      # attention's ops (hlsnn.deploy.run.samplewise)
        from . import samplewise
        return samplewise.run(layer, inputs, host_run=run)
    raise InputError(f"no host implementation of {op}")


_FALLBACK_SESSIONS = {}   # id(layer) -> (weakref to the layer, what the session was built from, session)


def _fallback_key(layer):
    """What a fallback layer's session is built from, as the objects themselves (compared with ``is``):
    the node, each constant, the inputs, the output and the opsets."""
    consts = layer.attrs["consts"]
    return (layer.node, tuple(consts), tuple(consts.values()), tuple(layer.inputs), layer.output,
            tuple(tuple(o) for o in layer.attrs["opset"]))


def _same(a, b):
    return (a[0] is b[0] and a[1] == b[1] and len(a[2]) == len(b[2]) and all(x is y for x, y in zip(a[2], b[2]))
            and a[3:] == b[3:])


def _drop_session(key, ref):
    if _FALLBACK_SESSIONS.get(key, (None,))[0] is ref:
        del _FALLBACK_SESSIONS[key]


def fallback_session(layer):
    """The ReferenceEvaluator of the one-node model of a ``--host-fallback`` layer, built on the
    layer's first run and reused while the layer lives (cached by the layer's identity; an entry
    goes when its layer is collected, and is rebuilt when the layer's node, constants, inputs,
    output or opsets are other objects than those it was built from, e.g. a copy of the layer).
    Building it is most of a short node's cost (``benchmarks/bench_loader_host.py --fallback``);
    a reference session keeps no state between runs, so reusing it gives the same outputs bit for bit."""
    import weakref
    key, built = id(layer), _fallback_key(layer)
    hit = _FALLBACK_SESSIONS.get(key)
    if hit is not None and hit[0]() is layer and _same(hit[1], built):
        return hit[2]
    sess = _fallback_build(layer)
    try:
        ref = weakref.ref(layer, lambda r, key=key: _drop_session(key, r))
    except TypeError:            # a layer without weak references: not cached
        return sess
    _FALLBACK_SESSIONS[key] = (ref, built, sess)
    return sess


def _fallback_build(layer):
    import onnx
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    node = layer.node
    consts = layer.attrs["consts"]
    ins = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in layer.inputs]
    init = [numpy_helper.from_array(np.asarray(v, np.float32 if np.asarray(v).dtype.kind == "f" else None), n)
            for n, v in consts.items()]
    # the layer's output: the one output of the node that the network reads (a GRU's Y without its Y_h)
    out = helper.make_tensor_value_info(layer.output, onnx.TensorProto.FLOAT, None)
    graph = helper.make_graph([node], "fallback", ins, [out], initializer=init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in layer.attrs["opset"]])
    from ..importer.reference import guard, reference_ops
    where = f"host fallback of {layer.name!r}"
    try:
        return guard(ReferenceEvaluator(model, new_ops=reference_ops()), where)
    except Exception as exc:  # noqa: BLE001 - onnx's reference cannot load the node
        from ...errors import ModelError
        from ..importer.reference import _why
        raise ModelError(f"{where}: onnx's reference evaluator cannot load the node: {_why(exc)}") from None


def _fallback(layer, inputs):
    """Run one ONNX node with onnx's reference implementation (``--host-fallback``), in the
    layer's session (:func:`fallback_session`)."""
    from ..importer.reference import run
    where = f"host fallback of {layer.name!r}"
    sess = fallback_session(layer)
    sw = layer.attrs.get("sw")
    if sw is None:
        feeds = {n: np.asarray(v, np.float32) for n, v in zip(layer.inputs, inputs)}
        return np.asarray(run(sess, None, feeds, where)[0], np.float64)
    # a file whose batch is fixed at 1 (static shapes S at batch 1): the node on each sample, as the file
    # computes it; a lifted tensor (S not starting with 1) is held as (N, *S), a normal one as (N, *S[1:])
    from .samplewise import is_lifted
    n = len(inputs[0]) if inputs else 1
    outs = []
    for k in range(n):
        feeds = {name: np.asarray(v[k] if is_lifted(s) else v[k:k + 1], np.float32)
                 for name, v, s in zip(layer.inputs, inputs, sw["in_shapes"])}
        outs.append(np.asarray(run(sess, None, feeds, where)[0], np.float64))
    return np.stack(outs) if is_lifted(sw["out_shape"]) else np.concatenate(outs)


def float_tensors(net, x):
    """Every tensor of the imported network ``net`` on ``x`` in float64 (dense and conv layers
    in numpy, host ops by :func:`run`): ``{name: array}``."""
    env = {net.input: np.asarray(x, np.float64)}
    for layer in net.layers:
        env[layer.output] = float_layer(layer, [env[i] for i in layer.inputs])
    return env


def float_layer(layer, ins):
    """One layer of an imported network in float64 on its inputs ``ins``: a dense or conv layer
    in numpy (its ReLU applied), a host op by :func:`run`."""
    from ...engines import convgeom as conv
    if layer.kind == "host":
        y = run(layer, ins)
    elif layer.kind == "dense":
        y = ins[0].reshape(ins[0].shape[0], -1) @ layer.w.T + layer.b
    else:
        y = conv.conv_float(ins[0], layer.w, layer.b, layer.geom)
    return np.maximum(y, 0) if layer.relu else y


def alias_shape(j, shape):
    """The per-image shape of an alias host op ``j`` (:data:`ALIAS_OPS`) on a tensor of
    per-image ``shape``: a ``Reshape`` by its target (``0`` copies a dimension, ``-1`` takes
    the rest), a ``Squeeze`` / ``Unsqueeze`` by its axes (:func:`run`),
    a ``Flatten`` the vector, the others the shape itself."""
    if j["op"] in ("Identity", "Dropout"):
        return tuple(shape)
    if j["op"] in ("Squeeze", "Unsqueeze") or j["op"] == "Reshape" and j.get("attrs", {}).get("shape") is not None:
        from types import SimpleNamespace
        try:
            y = run(SimpleNamespace(op=j["op"], attrs=j["attrs"]), [np.zeros((1,) + tuple(shape))])
            return tuple(int(d) for d in y.shape[1:])
        except ValueError:
            pass
    return (int(np.prod(shape)),)
