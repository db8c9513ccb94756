"""The quantization one ONNX Q/DQ or QONNX node gives a tensor, read and held to the ONNX spec
(:mod:`hlsnn.deploy.importer.qimport`'s first step): :class:`TensorQuant`, and :func:`_quant_params`,
which checks a ``QuantizeLinear``/``DequantizeLinear`` node's input, scale and zero-point types against
the op's schema at the file's opset (:func:`spec_types`), the scale one number or 1-D and the zero point
of its shape, and a per-axis ``axis`` one of the tensor's (never taken modulo its rank)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...errors import ModelError


#: onnx TensorProto element types taken: INT8, UINT8, INT32 (biases)
_TYPES = {3: (8, True), 2: (8, False), 6: (32, True)}


@dataclass
class TensorQuant:
    """The quantization the file gave one float tensor."""
    name: str
    kind: str                  # "weight" (a constant), "activation"
    bits: int
    signed: bool
    scale: np.ndarray          # float32, one value or one per index of ``axis``
    zero_point: np.ndarray
    axis: int = None           # None: per tensor
    narrow: bool = False       # QONNX Quant: the range without its most negative (signed) or largest value
    rounding: str = "ROUND"    # QONNX rounding_mode (QuantizeLinear: ROUND, half to even); "BIPOLAR": BipolarQuant

    @property
    def int_range(self):
        lo = (-(1 << (self.bits - 1)) + int(self.narrow)) if self.signed else 0
        hi = ((1 << (self.bits - 1)) - 1) if self.signed else (1 << self.bits) - 1 - int(self.narrow)
        return lo, hi

    @property
    def pow2_frac(self):
        """``F`` when the scale is one power of two ``2**-F`` and the zero point 0, else None."""
        s = np.asarray(self.scale, np.float64).reshape(-1)
        if s.size != 1 or np.any(np.asarray(self.zero_point) != 0) or not s[0] > 0:
            return None
        m, e = np.frexp(s[0])
        return int(1 - e) if m == 0.5 else None

    def describe(self):
        t = "bipolar (+-1)" if self.rounding == "BIPOLAR" else f"{'int' if self.signed else 'uint'}{self.bits}" + (
            " narrow" if self.narrow else "") + ("" if self.rounding == "ROUND" else f" {self.rounding}")
        s = np.asarray(self.scale).reshape(-1)
        sc = f"2^{-self.pow2_frac}" if self.pow2_frac is not None else (
            f"{float(s[0]):.6g}" if s.size == 1 else f"per channel (axis {self.axis}, {s.size} scales)")
        zp = np.asarray(self.zero_point).reshape(-1)
        zps = "" if not zp.any() else f" zero point {int(zp[0])}" if zp.size == 1 else " zero points per channel"
        return f"{t} " + ("" if s.size > 1 else "scale ") + sc + zps


def _attrs(node):
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _type_name(elem):
    from onnx import TensorProto
    try:
        return TensorProto.DataType.Name(int(elem)).lower()
    except ValueError:
        return f"element type {elem}"


def _elem(arr):
    """The onnx element type of a numpy array (None for one onnx has no type for)."""
    from onnx import helper
    try:
        return helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype)
    except (KeyError, TypeError, ValueError):
        return None


def spec_types(node, opset, types):
    """The reason ``node``'s input types ``types`` (``{input index: onnx element type}``) break
    the type constraints of its op's schema at ``opset`` (onnx's own: a type its type parameter
    does not allow, two inputs of one parameter of two types), else None."""
    from onnx import defs
    try:
        schema = defs.get_schema(node.op_type, opset, "")
    except Exception:                           # noqa: BLE001 - no schema: nothing to check against
        return None
    allowed = {c.type_param_str: set(c.allowed_type_strs) for c in schema.type_constraints}
    bound = {}
    for i, formal in enumerate(schema.inputs):
        if types.get(i) is None or i >= len(node.input) or not node.input[i]:
            continue
        ts = f"tensor({_type_name(types[i])})"
        want = allowed.get(formal.type_str, {formal.type_str})
        if ts not in want:
            return (f"{formal.name} {node.input[i]!r} of type {_type_name(types[i])}: {node.op_type} at opset {opset} "
                    f"takes {', '.join(sorted(t[7:-1] for t in want))}")
        if formal.type_str in bound and bound[formal.type_str][1] != ts:
            other = bound[formal.type_str]
            return (f"{formal.name} {node.input[i]!r} of type {_type_name(types[i])} with {other[0]} of type "
                    f"{other[1][7:-1]}: {node.op_type} at opset {opset} binds both to one type ({formal.type_str})")
        bound[formal.type_str] = (f"{formal.name} {node.input[i]!r}", ts)
    return None


def _quant_params(node, consts, what, opset=21, shape=None, x_type=None):
    """(bits, signed, scale, zero point, axis) of a Q/DQ node, checked against the ONNX spec (a
    file outside it, which onnxruntime refuses to load or run, is a :class:`ModelError` naming the
    node): the input types against the op's schema at ``opset`` (:func:`spec_types`: the scale's
    type, the zero point's a type the op takes, DequantizeLinear's input the constant ``what``,
    QuantizeLinear's of type ``x_type``, float32 when not given), QuantizeLinear's ``output_dtype``
    the zero point's type when both are given; the scale one number or 1-D (per axis), the zero
    point of its shape; a per-axis ``axis`` within ``-rank..rank-1`` of the tensor (``what``, or
    one of ``shape``: a tuple, None where unknown). Then hlsnn's own limits: int8, uint8 (int32 for
    a DequantizeLinear: biases), no ``block_size``, the scales finite, > 0 and one per index of a
    per-axis axis of known size."""
    name = node.name or node.output[0]
    a = _attrs(node)
    where = f"node {name!r} ({node.op_type})"

    def invalid(msg):
        return ModelError(f"{where}: {msg} (outside the ONNX spec)")

    if a.get("block_size", 0):
        raise ModelError(f"{where}: blocked quantization (block_size {a['block_size']}) is "
                         "not supported; hlsnn takes per-tensor and per-axis int8/uint8 QDQ")
    if node.input[1] not in consts or (len(node.input) > 2 and node.input[2] and node.input[2] not in consts):
        raise ModelError(f"{where}: its scale and zero point must be constants")
    raw_scale = np.asarray(consts[node.input[1]])
    scale = np.asarray(raw_scale, np.float32)
    has_zp = len(node.input) > 2 and bool(node.input[2])
    zp = np.asarray(consts[node.input[2]]) if has_zp else np.zeros((), np.uint8)
    if scale.ndim > 1:
        raise invalid(f"scale {node.input[1]!r} of shape {scale.shape}: one number (per tensor) or a 1-D array "
                      "(one per index of axis)")
    if has_zp and (zp.shape != scale.shape if scale.size > 1 else zp.size != 1):
        raise invalid(f"zero point of shape {zp.shape} for a scale of shape {scale.shape}: give one zero point per "
                      "scale, of its shape")
    zp_elem = _elem(zp) if has_zp else None
    out = int(a.get("output_dtype", 0) or 0) if node.op_type == "QuantizeLinear" else 0
    q_elem = out or zp_elem or 2             # QuantizeLinear's output (no zero point, no output_dtype: uint8)
    x_elem = (x_type or 1) if node.op_type == "QuantizeLinear" else (_elem(what) if what is not None else q_elem)
    why = spec_types(node, opset, {0: x_elem, 1: _elem(raw_scale), 2: zp_elem})
    if why is None and out and has_zp and out != zp_elem:
        why = f"output_dtype {_type_name(out)} with a zero point of type {zp.dtype}: they must agree"
    if why is None and out:
        why = spec_types(node, opset, {2: out})
    if why is not None:
        raise invalid(why)
    elem = q_elem if node.op_type == "QuantizeLinear" else x_elem
    if elem not in _TYPES or (node.op_type == "QuantizeLinear" and elem == 6):
        raise ModelError(f"{where}: quantized type {_type_name(elem)} is not supported; hlsnn takes int8, uint8 (and "
                         "int32 biases)")
    if scale.size == 0 or not np.all(np.isfinite(scale)) or not np.all(scale > 0):
        raise ModelError(f"{where}: scale {node.input[1]!r} must be finite and > 0"
                         + (" (it has no value)" if scale.size == 0 else ""))
    bits, signed = _TYPES[elem]
    axis = int(a.get("axis", 1)) if scale.size > 1 else None
    shape = tuple(what.shape) if what is not None else shape
    rank = None if shape is None else len(shape)
    if axis is not None:
        if rank is None:
            raise ModelError(f"{where}: {scale.size} scales along axis {axis} of {node.input[0]!r}, a tensor of "
                             "unknown rank: hlsnn takes per-axis quantization of tensors of known shape")
        what_is = (f"{scale.size} scales along axis {axis} of {node.input[0]!r}, of shape "
                   f"{tuple('?' if d is None else d for d in shape)}: the axis must be one of its {rank} "
                   f"(-{rank}..{rank - 1}) and the scales one per index of it")
        if not -rank <= axis < rank:
            raise invalid(what_is)
        if shape[axis % rank] is None:          # the batch's (of any size), or another of unknown size
            raise ModelError(f"{where}: {scale.size} scales along axis {axis} of {node.input[0]!r}, of shape "
                             f"{tuple('?' if d is None else d for d in shape)}: an axis of unknown size (the "
                             "batch's?); hlsnn takes per-axis quantization along an axis of fixed size (the channels)")
        if scale.size != shape[axis % rank]:
            raise ModelError(f"{where}: {what_is}")
    return bits, signed, scale, zp, axis


def _bcast(v, axis, ndim):
    v = np.asarray(v)
    if v.size == 1 or axis is None:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis % ndim] = v.size
    return v.reshape(shape)
