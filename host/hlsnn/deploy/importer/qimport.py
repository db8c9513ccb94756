"""Models quantized elsewhere: ONNX QDQ (``QuantizeLinear``/``DequantizeLinear``, as
onnxruntime's ``quantize_static`` and PyTorch's exporters write them) and QONNX (``Quant``/``IntQuant``,
``BipolarQuant``, as Brevitas' ``export_qonnx`` writes them).

A pre-pass of the importer (:func:`float_model`, called once by
:func:`hlsnn.deploy.importer.onnx_import.load_onnx`; a model without Q/DQ nodes passes unchanged):

* A ``DequantizeLinear`` of a constant (a weight or a bias stored as integers) is folded into a
  float initializer of the same name, ``(q - zero_point) * scale`` computed in float32 as
  ``DequantizeLinear`` itself computes it (per tensor, or per ``axis``).
* A ``QuantizeLinear`` whose every consumer is a ``DequantizeLinear`` of the same scale and zero
  point (an activation's fake quantization) is removed with those consumers: their readers read
  the float tensor the ``QuantizeLinear`` read (when the dequantized tensor is a graph output,
  the float tensor takes its name).
* Types: int8 and uint8 (per tensor or per axis), int32 for biases. Blocked quantization
  (``block_size``, opset 21), other integer types and a Q/DQ that is not one of these pairs are a
  :class:`~hlsnn.errors.ModelError` naming the node.
* Every Q/DQ node is first held to the ONNX spec (:func:`_quant_params`), as onnxruntime
  holds it: its input, scale and zero-point types against the op's schema at the file's opset (a
  zero point of another type than the integers it belongs to, an int32 QuantizeLinear, an
  ``output_dtype`` the zero point's type is not), the scale one number or 1-D and the zero point
  of its shape, a per-axis ``axis`` one of the tensor's (never taken modulo its rank; the pair's
  DequantizeLinear along the same one). A node outside it is a ModelError naming it.

* QONNX (domain ``qonnx.custom_op.general``): a ``Quant``/``IntQuant``/``BipolarQuant`` of a
  constant is folded into its quantized float values (:func:`qonnx_quant`, the op's definition);
  a ``Quant`` of an activation is removed (its readers read its input) and kept as an annotation
  with its bit width (2..32), signedness, ``narrow`` and ``rounding_mode``; where its range is a
  proper part of int8's at a power-of-two scale (:func:`clamp_bounds`: 2..8 bits, say uint4
  ``[0, 15]``, or narrow int8) a ``Clip`` to that range takes its place. A
  ``BipolarQuant`` of an activation becomes hlsnn's ``Bipolar`` op (``hlsnn`` domain, attribute
  ``scale``: ``scale`` for ``x >= 0``, else ``-scale``), a host op with a table rule. Scales are finite and
  > 0, zero points finite integers, the bit width one finite integer (else a ModelError). ``Trunc``
  is left to the importer, which names it as unsupported.

What was removed is kept as annotations (:func:`annotations`: bits, signedness, scale, zero point,
axis, per float tensor name), from which :func:`layer_mapping` says per engine layer whether the
file's quantization maps exactly onto a deployment format and :func:`pin` fixes a deployment's
radix points to the file's (instead of calibrating them):

* **exact** (``fixed``/``sparse`` formats on ``sparse_cluster``): weights of at most 8 bits (or
  bipolar) with zero point 0 and one power-of-two scale per tensor ``2**-F_w``, the layer's input
  and output quantized within int8 (``b <= 8`` bits, signed, unsigned or narrow: int8 with the
  ``Clip`` to the file's range, which the kernels fuse as their output clamp, so the requantization
  is the ``Quant``'s: rounding the exact sum then clamping equals clamping then rounding for integer
  bounds; or bipolar, below) with
  zero point 0, power-of-two scales ``2**-F_x``, ``2**-F_out`` and rounding half to even, and the
  bias a multiple of ``2**-(F_x + F_w)`` (an int32 bias at the product of the scales). The weights are then
  the integers of the file at radix ``F_w`` (or a finer one, the same values), the bias its int32
  at ``F_x + F_w``, and the output shift ``F_x + F_w - F_out`` with the kernel's round-half-even
  and int8 saturation is ``QuantizeLinear``'s rounding of the exact sum: the same integers as
  onnxruntime's execution of the file (tested bit for bit). A layer whose output is an activation's
  ``BipolarQuant`` (a sign) keeps its exact sum: ``F_out = F_x + F_w`` (a shift of 0 or a left
  shift), whose int8 saturation keeps the sign, and the ``Bipolar`` table (rule unary_table of
  :mod:`hlsnn.engines.network.gate`) maps each code ``q >= 0`` to ``+scale``, the others to
  ``-scale``, both exact at its radix; the readers take those values as int8 codes.
* **approximated** otherwise (a non-power-of-two scale, a zero point, per-channel weight scales,
  uint8 activations): the dequantized float weights are re-quantized by the format's own rule and
  the activations' radix points are calibrated as for any float model; the mapping gives the
  largest absolute difference between the file's dequantized weights and the deployed ones.
"""
from __future__ import annotations

import numpy as np

from ...errors import ModelError, printable

QDQ = ("QuantizeLinear", "DequantizeLinear")
#: ops that only move values (an annotation before them holds after them)
MOVES = ("Reshape", "Flatten", "MaxPool", "Identity", "Relu", "Transpose", "Squeeze", "Unsqueeze")
from .qparams import TensorQuant, _attrs, _bcast, _elem, _quant_params  # noqa: E402  (TensorQuant: also qimport's API)


def has_qdq(model):
    """The model holds ONNX Q/DQ or QONNX quantization nodes."""
    return any(n.op_type in QDQ or n.domain in QONNX_DOMAINS for n in model.graph.node)


def float_model(model, path=None):
    """``model`` with its Q/DQ pairs folded or removed (module docstring); the model itself when
    it has none."""
    return strip(model, path)[0]


#: onnxruntime's QOperator format and dynamic quantization: integer ops hlsnn does not read
QOPERATOR = ("QGemm", "ConvInteger", "MatMulInteger", "DynamicQuantizeLinear", "DynamicQuantizeMatMul",
             "MatMulIntegerToFloat", "QAttention")


def _qoperator_error(model, path):
    """The ModelError for a file in onnxruntime's QOperator format (``QLinearConv``, ``QGemm``...) or
    dynamically quantized (``ConvInteger``, ``DynamicQuantizeLinear``...), else None."""
    ops = sorted({n.op_type for n in model.graph.node if n.op_type.startswith("QLinear") or n.op_type in QOPERATOR})
    if not ops:
        return None
    return ModelError(f"{path or 'model'}: {', '.join(ops)}: onnxruntime's QOperator format or dynamic quantization "
                      "(integer ops in place of the float ones), which hlsnn does not read; hlsnn reads QDQ files "
                      "(quantize_static's default quant_format=QuantFormat.QDQ) and QONNX, or the float model")


#: ops whose output is never negative, and ops whose output is if their data inputs are
NONNEG = ("Relu", "Sigmoid", "Softmax", "HardSigmoid", "Abs")
NONNEG_IF = ("MaxPool", "GlobalMaxPool", "AveragePool", "GlobalAveragePool", "Reshape", "Flatten", "Identity",
             "Transpose", "Squeeze", "Unsqueeze", "Dropout", "Concat")


def _nonneg_of(g, consts):
    """``nonneg(t)``: whether tensor ``t`` of graph ``g`` is never negative by its producers alone
    (:data:`NONNEG`, a ``Clip`` of a constant minimum >= 0, a ``DequantizeLinear`` of a pair whose
    range starts at 0, or :data:`NONNEG_IF` of such tensors and constants >= 0). A pair whose range
    starts at 0 (uint8 of zero point 0, int8 of zero point -128) on such a tensor saturates nothing
    below: its ``Relu`` would be the identity, and is not written (:func:`strip`), which lets the
    network mode take the model (a lone Relu there has no integer rule)."""
    producer = {o: n for n in g.node for o in n.output}

    def pair_from_zero(dq):
        q = producer.get(dq.input[0])
        if q is None or q.op_type != "QuantizeLinear" or len(q.input) < 3 or q.input[2] not in consts:
            return False
        z = np.asarray(consts[q.input[2]])
        if z.dtype.kind not in "iu":
            return False
        lo = -(1 << (8 * z.dtype.itemsize - 1)) if z.dtype.kind == "i" else 0
        return bool(np.all(lo - z.astype(np.int64) == 0))      # the range starts at 0 (as strip's lowest)

    def nonneg(t, depth=0):
        if t in consts:
            return bool(np.all(np.asarray(consts[t]) >= 0))
        n = producer.get(t)
        if n is None or depth > 64:
            return False
        if n.op_type in NONNEG:
            return True
        if n.op_type == "Clip":
            return len(n.input) > 1 and n.input[1] in consts and bool(np.all(np.asarray(consts[n.input[1]]) >= 0))
        if n.op_type == "DequantizeLinear":
            return pair_from_zero(n)
        if n.op_type in NONNEG_IF:
            ins = n.input if n.op_type == "Concat" else n.input[:1]
            return all(nonneg(i, depth + 1) for i in ins if i)
        return False
    return nonneg


def strip(model, path=None):
    """``(float model, {float tensor name: TensorQuant})`` (module docstring)."""
    err = _qoperator_error(model, path)
    if err is not None:
        raise err
    if not has_qdq(model):
        return model, {}
    import onnx
    from onnx import numpy_helper
    m = onnx.ModelProto()
    m.CopyFrom(model)
    g = m.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.output:
            a = _attrs(n)
            if "value" in a:
                consts[n.output[0]] = numpy_helper.to_array(a["value"])
    users = {}
    for n in g.node:
        for i in n.input:
            users.setdefault(i, []).append(n)
    graph_out = {o.name for o in g.output}
    from onnx import helper
    from .graphindex import node_names
    notes, drop, new_inits, alias, relus, stand_in = {}, set(), [], {}, [], {}
    nonneg = _nonneg_of(g, consts)
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=21)
    inferred = []

    def shape_of(t):
        """An activation's shape by onnx's shape inference (None: unknown), for a per-axis pair."""
        if not inferred:
            from .graphindex import shapes
            inferred.append(shapes(model, declared=True))
        s = inferred[0].get(t)
        return None if s is None else tuple(s)
    node_name = node_names(g)                  # the Relus' names: none a node of the file has
    from .graphindex import namer, tensor_names
    tensor_name = namer(tensor_names(g))       # a Clip's bounds: no tensor of the file
    for n in g.node:
        if n.op_type != "DequantizeLinear" or n.input[0] not in consts:
            continue
        q = np.asarray(consts[n.input[0]])
        bits, signed, scale, zp, axis = _quant_params(n, consts, q, opset)
        ax = None if axis is None else axis % max(q.ndim, 1)
        w = (q.astype(np.float32) - _bcast(zp, ax, q.ndim).astype(np.float32)) * _bcast(scale, ax, q.ndim)
        new_inits.append(numpy_helper.from_array(np.asarray(w, np.float32), n.output[0]))
        notes[n.output[0]] = TensorQuant(n.output[0], "weight", bits, signed, scale, np.asarray(zp), ax)
        drop.add(id(n))
    for n in g.node:
        if n.domain not in QONNX_DOMAINS or n.op_type not in ("Quant", "IntQuant", "BipolarQuant"):
            continue
        tq = _qonnx_params(n, consts)
        if n.input[0] in consts:                   # a weight or bias: folded to its quantized values
            w = np.asarray(consts[n.input[0]], np.float32)
            try:
                shape = np.broadcast_shapes(w.shape, tq.scale.shape, np.shape(tq.zero_point))
            except ValueError:
                shape = None
            if shape != w.shape:
                raise ModelError(f"node {n.name or n.output[0]!r} ({n.op_type}): scale {tuple(tq.scale.shape)} and "
                                 f"zero point {np.shape(tq.zero_point)} do not broadcast to {n.input[0]!r} of shape "
                                 f"{w.shape} (numpy's rules, as QONNX's op definition)")
            w = qonnx_quant(w, tq)
            new_inits.append(numpy_helper.from_array(w, n.output[0]))
            tq.name, tq.kind = n.output[0], "weight"
            notes[n.output[0]] = tq
            drop.add(id(n))
        elif n.op_type != "BipolarQuant":          # an activation: removed, its quantization kept
            tq.name = n.input[0]
            notes[n.input[0]] = tq
            drop.add(id(n))
            bounds = clamp_bounds(tq)
            if bounds is None:
                alias[n.output[0]] = n.input[0]
            else:                                  # a range narrower than int8's: kept as a Clip
                stand_in[id(n)] = _clip_node(helper, numpy_helper, n, tq, bounds, opset, node_name, tensor_name,
                                             new_inits)
        else:                                      # an activation's sign: hlsnn's own op
            if tq.scale.size != 1:
                raise ModelError(f"node {n.name or n.output[0]!r} (BipolarQuant): scale of shape "
                                 f"{tuple(tq.scale.shape)} on an activation; hlsnn takes one scale per tensor")
            stand_in[id(n)] = helper.make_node(BIPOLAR, [n.input[0]], [n.output[0]], domain=HLSNN_DOMAIN,
                                               name=node_name(f"{n.output[0]}_bipolar"),
                                               scale=float(np.asarray(tq.scale).reshape(-1)[0]))
            tq.name = n.output[0]
            notes[n.output[0]] = tq
            drop.add(id(n))
    for n in g.node:
        # a constant (a Constant node's value: onnxruntime quantizes GELU's `+ 1` as an activation) through a
        # Q -> DQ pair: folded to the value the pair gives, QuantizeLinear's (half to even, saturated)
        if n.op_type != "QuantizeLinear" or n.input[0] not in consts:
            continue
        outs = users.get(n.output[0], [])
        if not outs or n.output[0] in graph_out or any(
                u.op_type != "DequantizeLinear" or list(u.input[1:]) != list(n.input[1:]) for u in outs):
            continue
        bits, signed, scale, zp, axis = _quant_params(n, consts, None, opset, np.shape(consts[n.input[0]]),
                                                      _elem(consts[n.input[0]]))
        c = np.asarray(consts[n.input[0]], np.float32)
        ax = None if axis is None else axis % max(c.ndim, 1)
        lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
        z, sc = _bcast(zp, ax, c.ndim).astype(np.float32), _bcast(scale, ax, c.ndim)
        value = ((np.clip(np.rint(c / sc) + z, lo, hi) - z) * sc).astype(np.float32)
        drop.add(id(n))
        for u in outs:
            new_inits.append(numpy_helper.from_array(value, u.output[0]))
            drop.add(id(u))
    for n in g.node:
        if n.op_type != "QuantizeLinear" or n.input[0] in consts:
            continue
        outs = users.get(n.output[0], [])
        if not outs or n.output[0] in graph_out or any(
                u.op_type != "DequantizeLinear" or list(u.input[1:]) != list(n.input[1:]) for u in outs):
            continue            # not a fake-quantization pair: left to the importer, which names it
        bits, signed, scale, zp, axis = _quant_params(n, consts, None, opset, shape_of(n.input[0]))
        for u in outs:                             # each DequantizeLinear of the pair, by the same rules
            u_axis = _quant_params(u, consts, None, opset, shape_of(n.input[0]))[4]
            rank = len(shape_of(n.input[0]) or ()) or 1
            if (u_axis is None) != (axis is None) or (axis is not None and u_axis % rank != axis % rank):
                raise ModelError(f"node {u.name or u.output[0]!r} (DequantizeLinear): axis {u_axis}, its "
                                 f"QuantizeLinear {n.name or n.output[0]!r}'s {axis}: a pair quantizes along one axis")
        notes[n.input[0]] = TensorQuant(n.input[0], "activation", bits, signed, scale, np.asarray(zp), axis)
        drop.add(id(n))
        lowest = (-(1 << (bits - 1)) if signed else 0) - np.asarray(zp, np.int64)
        for u in outs:
            drop.add(id(u))
            if np.all(lowest == 0) and not nonneg(n.input[0]):
                # the range starts at 0: the saturation is a ReLU (onnxruntime drops Relu); of a
                # tensor that is never negative (a max pool of a ReLU's output, a Sigmoid's), none
                relus.append(helper.make_node("Relu", [n.input[0]], [u.output[0]],
                                              name=node_name(f"{u.output[0]}_relu")))
            else:
                alias[u.output[0]] = n.input[0]

    def resolve(t):
        while t in alias:
            t = alias[t]
        return t

    # a dequantized graph output: the float tensor takes its name
    rename = {}
    for o in g.output:
        if o.name in alias:
            rename[resolve(o.name)] = o.name
    keep = []
    for n in g.node:
        if id(n) not in drop:
            keep.append(n)
        elif id(n) in stand_in:                     # a Quant's Clip, a BipolarQuant's sign, where it stood
            keep.append(stand_in[id(n)])
        elif n.op_type == "QuantizeLinear":         # its ReLUs where it stood (topological order)
            keep.extend(r for r in relus if r.input[0] == n.input[0])
    for n in keep:
        for k, i in enumerate(n.input):
            r = resolve(i)
            n.input[k] = rename.get(r, r)
        for k, o in enumerate(n.output):
            n.output[k] = rename.get(o, o)
    for old, new in rename.items():
        if old in notes:
            notes[new] = notes.pop(old)
            notes[new].name = new
    del g.node[:]
    g.node.extend(keep)
    if any(n.domain == HLSNN_DOMAIN for n in keep) and HLSNN_DOMAIN not in {o.domain for o in m.opset_import}:
        m.opset_import.append(helper.make_opsetid(HLSNN_DOMAIN, 1))
    used = {i for n in g.node for i in n.input} | graph_out
    kept = [t for t in g.initializer if t.name in used and t.name not in {x.name for x in new_inits}]
    gone = {t.name for t in g.initializer} - {t.name for t in kept}
    del g.initializer[:]
    g.initializer.extend(kept + [t for t in new_inits if t.name in used])
    gone -= {t.name for t in g.initializer}
    inputs = [i for i in g.input if i.name not in gone]     # initializers an older IR also lists as inputs
    del g.input[:]
    g.input.extend(inputs)
    left = [n for n in g.node if n.op_type in QDQ and n.domain in ("", "ai.onnx")]
    if left:
        n = left[0]
        raise ModelError(f"{printable(path or 'model')}: node {n.name or n.output[0]!r} ({n.op_type}) is not part of a "
                         f"QuantizeLinear -> DequantizeLinear pair of one scale or a DequantizeLinear of a "
                         f"constant; hlsnn folds only those ({len(left)} such node(s))")
    return m, notes


#: hlsnn's own op for an activation's ``BipolarQuant`` in the float model (:func:`strip`): ``scale``
#: for ``x >= 0``, ``-scale`` below (the host op ``Bipolar``, a table of rule unary_table on an integer tensor)
BIPOLAR, HLSNN_DOMAIN = "Bipolar", "hlsnn"


def clamp_bounds(tq):
    """The integer range ``(lo, hi)`` an activation's QONNX ``Quant`` ``tq`` saturates to, when it
    is a proper part of int8's and the quantization otherwise int8's (one power-of-two scale, zero
    point 0, rounding half to even): ``b <= 8`` bits, signed, unsigned or narrow. Such a
    ``Quant`` is an int8 activation at radix ``F`` whose requantization clamps to ``[lo, hi]``; the
    float model keeps it as ``Clip(x, lo 2**-F, hi 2**-F)`` (the engines' fused output clamp,
    rule conv_output of :mod:`hlsnn.deploy.lower.program`). None otherwise (int8 itself: the engines' saturation)."""
    if tq.pow2_frac is None or tq.rounding != "ROUND":
        return None
    lo, hi = tq.int_range
    if lo < -128 or hi > 127 or (lo, hi) == (-128, 127):
        return None
    return lo, hi


def _clip_node(helper, numpy_helper, n, tq, bounds, opset, node_name, tensor_name, new_inits):
    """The ``Clip`` that stands in for activation ``Quant`` ``n`` of ``tq`` (:func:`clamp_bounds`):
    bounds ``lo 2**-F``, ``hi 2**-F`` (exact in float32), inputs from opset 11, attributes before."""
    lo, hi = (float(np.ldexp(v, -tq.pow2_frac)) for v in bounds)
    name = node_name(f"{n.output[0]}_clip")
    if opset < 11:
        return helper.make_node("Clip", [n.input[0]], [n.output[0]], name=name, min=lo, max=hi)
    names = [tensor_name(f"{name}_{k}") for k in ("min", "max")]
    new_inits.extend(numpy_helper.from_array(np.asarray(v, np.float32), t) for v, t in zip((lo, hi), names))
    return helper.make_node("Clip", [n.input[0]] + names, [n.output[0]], name=name)


#: the domains QONNX ops are written in (Brevitas' ``export_qonnx``: the first)
QONNX_DOMAINS = ("qonnx.custom_op.general", "onnx.brevitas", "finn.custom_op.general")
#: why a QONNX op the pre-pass leaves (``Trunc``) is refused
QONNX_UNREAD = ("; a QONNX op hlsnn does not read yet (it reads Quant/IntQuant and BipolarQuant), "
                "and --host-fallback cannot run it either: onnx's reference evaluator has no QONNX ops")


def checker_hint(exc):
    """A hint for onnx's checker error ``exc`` on a QONNX op written in the default domain."""
    op = next((o for o in ("IntQuant", "BipolarQuant", "Quant", "Trunc") if f"for {o} with domain" in str(exc)), None)
    return "" if op is None else (f"; {op} is a QONNX op: its node's domain must be {QONNX_DOMAINS[0]!r}, as "
                                  "Brevitas' export_qonnx writes it (with an opset import of that domain)")


def _qonnx_params(node, consts):
    """The :class:`TensorQuant` of a QONNX ``Quant``/``IntQuant``/``BipolarQuant`` (name and kind
    filled in by the caller); ModelError when its parameters are not constants or not 1..8 bits."""
    name = node.name or node.output[0]
    a = _attrs(node)
    need = node.input[1:2] if node.op_type == "BipolarQuant" else node.input[1:4]
    if any(i not in consts for i in need if i):
        raise ModelError(f"node {name!r} ({node.op_type}): its scale, zero point and bit width must be constants")
    scale = np.asarray(consts[node.input[1]], np.float32)
    if scale.size == 0 or not np.all(np.isfinite(scale)) or not np.all(scale > 0):
        raise ModelError(f"node {name!r} ({node.op_type}): scale {node.input[1]!r} must be finite and > 0"
                         + (" (it has no value)" if scale.size == 0 else ""))
    if node.op_type == "BipolarQuant":
        return TensorQuant("", "", 1, True, scale, np.zeros((), np.float32), None, rounding="BIPOLAR")
    zp, bw = np.asarray(consts[node.input[2]], np.float32), np.asarray(consts[node.input[3]], np.float64)
    if bw.size != 1 or not np.isfinite(bw).all() or float(bw) != int(bw) or not 2 <= int(bw) <= 32:
        raise ModelError(f"node {name!r} ({node.op_type}): bit width {bw.reshape(-1)[:4].tolist()}; hlsnn takes one "
                         "integer 2..32 per tensor (2..8 map onto the engines' int8, wider ones only for biases)")
    if zp.size == 0 or not np.all(np.isfinite(zp)) or not np.array_equal(zp, np.rint(zp)):
        raise ModelError(f"node {name!r} ({node.op_type}): zero point {node.input[2]!r} "
                         f"{np.asarray(zp).reshape(-1)[:4].tolist()}: QONNX zero points are finite integers")
    try:
        np.broadcast_shapes(scale.shape, zp.shape)
    except ValueError:
        raise ModelError(f"node {name!r} ({node.op_type}): scale {tuple(scale.shape)} and zero point "
                         f"{tuple(zp.shape)} do not broadcast (numpy's rules, as QONNX's op definition)") from None
    mode = a.get("rounding_mode", b"ROUND")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode.upper() not in ("HALF_EVEN",) + tuple(ROUNDINGS):
        raise ModelError(f"node {name!r} ({node.op_type}): rounding_mode {mode!r} is not one of "
                         f"{', '.join(ROUNDINGS)}")
    axis = None
    if scale.size > 1:
        axis = next((k for k, d in enumerate(scale.shape) if d > 1), None)
    return TensorQuant("", "", int(bw), bool(a.get("signed", 1)), scale, zp, axis, narrow=bool(a.get("narrow", 0)),
                       rounding="ROUND" if mode.upper() in ("ROUND", "HALF_EVEN") else mode.upper())


#: QONNX's rounding modes (its ``resolve_rounding_mode``; ``HALF_EVEN`` is ``ROUND``)
ROUNDINGS = {"ROUND": np.rint, "CEIL": np.ceil, "FLOOR": np.floor,
             "UP": lambda v: np.sign(v) * np.ceil(np.abs(v)), "DOWN": np.trunc,
             "HALF_UP": lambda v: np.sign(v) * np.floor(np.abs(v) + np.float32(0.5)),
             "HALF_DOWN": lambda v: np.sign(v) * np.ceil(np.abs(v) - np.float32(0.5))}


def qonnx_quant(x, tq):
    """QONNX's ``Quant`` (``IntQuant``) and ``BipolarQuant`` as its op definitions say (the scale,
    zero point broadcast numpy-style): ``y = (round(clip(x / scale + zeropt, lo, hi)) - zeropt) *
    scale``, ``lo, hi`` the ``signed``/``narrow`` range of ``bitwidth`` bits, ``ROUND`` half to
    even; ``BipolarQuant`` ``sign(x) * scale`` with 0 going to +1. float32 as the ops compute."""
    x = np.asarray(x, np.float32)
    s = np.asarray(tq.scale, np.float32)
    if tq.rounding == "BIPOLAR":
        return (np.where(x >= 0, np.float32(1), np.float32(-1)) * s).astype(np.float32)
    zp = np.asarray(tq.zero_point, np.float32)
    lo, hi = tq.int_range
    y = np.clip(x / s + zp, lo, hi)
    rnd = ROUNDINGS[tq.rounding]
    return ((rnd(y) - zp) * s).astype(np.float32)


def annotations(path):
    """The :class:`TensorQuant` of every float tensor of the file at ``path`` (empty without Q/DQ)."""
    import onnx
    return strip(onnx.load(str(path)), path)[1]


def _weights_of(path):
    import onnx
    from onnx import numpy_helper
    m, notes = strip(onnx.load(str(path)), path)
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    return m, notes, inits


def layer_mapping(net, path):
    """Per engine layer of ``net`` (imported from ``path``): how the file's quantization maps,
    a dict ``{layer: {"weights", "input", "output": descriptions, "mapping": "exact" |
    "approximated", "why": ..., "f_w", "f_in", "f_out": the radix points when exact}}``. Empty
    when the file has no Q/DQ."""
    m, notes, inits = _weights_of(path)
    if not notes:
        return {}
    nodes = {n.output[0]: n for n in m.graph.node}
    producer = {o: n for n in m.graph.node for o in n.output}
    readers = {}
    for n in m.graph.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)

    def traced(t):
        """The annotation of tensor ``t`` or, through ops that only move values, of their input."""
        for _ in range(64):
            if t in notes:
                return notes[t]
            n = producer.get(t)
            if n is None or n.op_type not in MOVES + ("Clip",):    # a Quant's Clip (clamp_bounds) keeps it
                return None
            t = n.input[0]
        return None

    def fits(t):
        """An activation the engine's int8 holds exactly: zero point 0, a power-of-two scale,
        rounding half to even, a range within int8's (int8 itself; a narrower one, ``b <= 8``
        bits signed, unsigned or narrow, is int8 clamped by the Clip :func:`strip` put in the
        Quant's place: :func:`clamp_bounds`), or a ``BipolarQuant`` of a power-of-two scale
        (+-1 codes at its radix; the sign is the table :func:`strip`'s ``Bipolar`` runs)."""
        if t.rounding == "BIPOLAR":
            return t.pow2_frac is not None
        lo, hi = t.int_range
        return t.pow2_frac is not None and t.rounding == "ROUND" and -128 <= lo and hi <= 127

    out = {}
    for layer in net.engine_layers():
        node = nodes.get(layer.name) or next((n for n in m.graph.node if (n.name or n.output[0]) == layer.name), None)
        wnote = notes.get(node.input[1]) if node is not None and len(node.input) > 1 else None
        xin = traced(layer.inputs[0])
        # the output: the Q of the layer's own result, and every Q on the fused chain (a Relu's)
        outs = [notes[t] for t in dict.fromkeys(([node.output[0]] if node is not None else []) + [layer.output])
                if t in notes]
        # or the sign of the result (an activation's BipolarQuant: strip's Bipolar, the only reader)
        signs = [n for n in readers.get(layer.output, ()) if n.op_type == BIPOLAR and n.domain == HLSNN_DOMAIN]
        if not outs and len(signs) == 1 and len(readers[layer.output]) == 1 and signs[0].output[0] in notes:
            outs = [notes[signs[0].output[0]]]
        why = []
        if wnote is None:
            why.append("weights not quantized in the file")
        elif not (wnote.pow2_frac is not None and -128 <= wnote.int_range[0] and wnote.int_range[1] <= 127):
            why.append(f"weights {wnote.describe()}: not int8 at one power-of-two scale with zero point 0")
        if xin is None:
            why.append("input not quantized in the file")
        elif not fits(xin):
            why.append(f"input {xin.describe()}: not within int8 at a power-of-two scale with zero point 0")
        if outs and not fits(outs[0]):
            why.append(f"output {outs[0].describe()}: not within int8 at a power-of-two scale with zero point 0")
        if len({(t.pow2_frac, t.int_range) for t in outs}) > 1:
            why.append("the output is quantized twice at different scales (before and after its ReLU)")
        if not outs:
            why.append("output not quantized in the file")
        if not why and outs[0].rounding == "BIPOLAR" and xin.pow2_frac + wnote.pow2_frac + 8 < outs[0].pow2_frac:
            why.append(f"a sign of scale 2^-{outs[0].pow2_frac} below the table's finest output (radix "
                       f"{xin.pow2_frac + wnote.pow2_frac} + 8)")
        if not why:
            acc = np.ldexp(np.asarray(layer.b, np.float64), wnote.pow2_frac + xin.pow2_frac)
            if not np.array_equal(acc, np.rint(acc)):
                why.append(f"bias not a multiple of the accumulator's unit 2^-{wnote.pow2_frac + xin.pow2_frac} "
                           "(a float bias, or one quantized at another scale): it rounds")
        entry = {"weights": wnote.describe() if wnote else "float", "input": xin.describe() if xin else "float",
                 "output": outs[0].describe() if outs else "float",
                 "mapping": "approximated" if why else "exact", "why": "; ".join(why)}
        if not why:
            # a sign's input: the exact sum (radix F_x + F_w, a shift <= 0), int8's saturation keeps its sign
            bipolar = outs[0].rounding == "BIPOLAR"
            entry.update(f_w=wnote.pow2_frac, f_in=xin.pow2_frac,
                         f_out=xin.pow2_frac + wnote.pow2_frac if bipolar else outs[0].pow2_frac)
        w = np.asarray(layer.w, np.float64)
        if wnote is not None:
            from ..quantize.quant import weight_fracs
            f = weight_fracs(w, False, 127)
            wq = np.clip(np.rint(np.ldexp(w, f)), -128, 127) * 2.0 ** -f
            entry["weight_max_abs_error"] = float(np.abs(wq - w).max(initial=0.0))
            entry["weight_scale"] = float(np.abs(w).max(initial=0.0))
        out[layer.name] = entry
    return out


from .qassign import _int8_layer, _shift_codes, for_assignment, pin  # noqa: E402,F401  (qimport's API)


def reference_ops():
    """``QuantizeLinear`` and ``DequantizeLinear`` as ONNX defines them for opsets 10-25 (int8,
    uint8, int32; per tensor or per ``axis``; no ``block_size``), for onnx's ReferenceEvaluator, whose
    own implementations (onnx 1.22) load only at opset 19 and above, so that a QDQ file of opset 13
    or 17 (onnxruntime's ``quantize_static`` on a PyTorch export) has a float reference:
    ``DequantizeLinear`` ``(x - zero_point) * scale`` in float32; ``QuantizeLinear``
    ``saturate(round_half_even(x / scale) + zero_point)``, the division in float32."""
    from onnx.reference.op_run import OpRun

    def shaped(v, x, axis):
        v = np.asarray(v)
        if v.size == 1:
            return v.reshape(())
        shape = [1] * x.ndim
        shape[axis % x.ndim] = v.size
        return v.reshape(shape)

    class DequantizeLinear(OpRun):
        op_domain = ""

        def _run(self, x, scale, zero_point=None, axis=1, block_size=0, **_):
            if block_size:
                raise NotImplementedError("blocked DequantizeLinear")
            zp = np.zeros((), np.float32) if zero_point is None else shaped(zero_point, x, axis).astype(np.float32)
            return ((x.astype(np.float32) - zp) * shaped(scale, x, axis).astype(np.float32),)

    class QuantizeLinear(OpRun):
        op_domain = ""

        def _run(self, x, scale, zero_point=None, axis=1, block_size=0, saturate=1, output_dtype=0, **_):
            if block_size:
                raise NotImplementedError("blocked QuantizeLinear")
            dtype = np.uint8 if zero_point is None else np.asarray(zero_point).dtype
            info = np.iinfo(dtype)
            zp = 0 if zero_point is None else shaped(zero_point, x, axis).astype(np.float64)
            q = np.rint(x.astype(np.float32) / shaped(scale, x, axis).astype(np.float32)).astype(np.float64) + zp
            return (np.clip(q, info.min, info.max).astype(dtype),)

    class Quant(OpRun):
        op_domain = "qonnx.custom_op.general"

        def _run(self, x, scale, zeropt, bitwidth, signed=1, narrow=0, rounding_mode="ROUND", **_):
            mode = rounding_mode.decode() if isinstance(rounding_mode, bytes) else str(rounding_mode)
            tq = TensorQuant("", "", int(bitwidth), bool(signed), scale, zeropt, narrow=bool(narrow),
                             rounding="ROUND" if mode.upper() in ("ROUND", "HALF_EVEN") else mode.upper())
            return (qonnx_quant(x, tq),)

    class IntQuant(Quant):
        pass

    class BipolarQuant(OpRun):
        op_domain = "qonnx.custom_op.general"

        def _run(self, x, scale, **_):
            return (qonnx_quant(x, TensorQuant("", "", 1, True, scale, np.zeros(()), rounding="BIPOLAR")),)

    return [DequantizeLinear, QuantizeLinear, Quant, IntQuant, BipolarQuant]
