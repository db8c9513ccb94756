"""The host layers of a compiled model checked by one table: :data:`HOST_OPS` names
every host op this hlsnn runs and, per op, each attribute the loader, the host ops
(:mod:`hlsnn.deploy.run.hostops` and the modules it calls), the network mode's rules and the
latency model read: its JSON type, its range or choices, and whether ``hlsnn compile`` always
writes it (*required*) or only sometimes (*optional*). An op whose ``attrs`` are the ONNX node's
own (``MaxPool``, ``Reshape``, ``Softmax``, ... as the exporter wrote them: ``open``) may hold
further ONNX attributes no one reads; any other op holds exactly its table's keys.

:func:`check_host` checks one layer against the table; :func:`dry_run` then runs the op, as
the loader will, on a zero input of its input's shape (batch 1), so attributes of the right
types that do not fit the tensor (a ``Reshape`` to another size, a ``Squeeze`` of an axis of
3, an ``Upsample`` that would hold more than :data:`MAX_ELEMS` values) are refused here, naming
the layer, not while the model runs. Every fault is one :class:`Bad` naming the layer, the
op, the field, what it holds and what is allowed; :func:`hlsnn.network.schema.validate` turns
it into the :class:`~hlsnn.errors.InputError` a caller sees. Needs numpy only (and hlsnn's
host ops for the dry run): a board runs it.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import excerpt, printable

MAX_RADIX = 60          # |f_x|, |f_w|, |f_out|: shifts f_x + f_w - f_out stay within C's int64 shifts
MAX_KERNEL = 64
MAX_STRIDE = 64
MAX_PAD = 64
MAX_DILATION = 16
MAX_DIM = 1 << 16
MAX_ELEMS = 1 << 26     # values per tensor (per image) or per weight
MAX_RANK = 8            # a host tensor's axes, the batch's included


class Bad(Exception):
    """One fault of a compiled model's program: ``where: what it holds and what is allowed``."""


def fail(where, what):
    raise Bad(f"{where}: {what}")


def _isint(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _isnum(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


class Spec:
    """One attribute's rule: :meth:`ok` says whether a JSON value passes, :attr:`allowed` says
    what passes (the second half of the message)."""
    allowed = "a value"

    def ok(self, v):
        return True

    def check(self, where, v):
        if not self.ok(v):
            fail(where, f"{excerpt(v, 60)} is not {self.allowed}")


class Int(Spec):
    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi
        self.allowed = f"an integer in {lo}..{hi}" if lo != hi else f"the integer {lo}"

    def ok(self, v):
        return _isint(v) and self.lo <= v <= self.hi


class Num(Spec):
    def __init__(self, lo=-math.inf, hi=math.inf):
        self.lo, self.hi = lo, hi
        self.allowed = "a finite number" + (f" in {lo}..{hi}" if (lo, hi) != (-math.inf, math.inf) else "")

    def ok(self, v):
        return _isnum(v) and self.lo <= v <= self.hi


class Flag(Spec):
    allowed = "true, false, 0 or 1"

    def ok(self, v):
        return isinstance(v, bool) or v in (0, 1) and _isint(v)


class Bool(Spec):
    allowed = "true or false"

    def ok(self, v):
        return isinstance(v, bool)


class OneOf(Spec):
    def __init__(self, *choices):
        self.choices = choices
        self.allowed = "one of " + ", ".join(map(repr, choices))

    def ok(self, v):
        return isinstance(v, str) and v in self.choices


class Text(Spec):
    allowed = "a string of at most 200 characters"

    def ok(self, v):
        return isinstance(v, str) and len(v) <= 200


class Label(Spec):
    """A name (:func:`hlsnn.names.check_label`: printable, 1..MAX_LABEL characters)."""

    def __init__(self):
        from ..names import MAX_LABEL
        self.allowed = f"a printable name of 1..{MAX_LABEL} characters"

    def ok(self, v):
        from ..errors import InputError
        from ..names import check_label
        try:
            return check_label("name", v) == v
        except InputError:
            return False


class Ints(Spec):
    """A list of ``n[0]..n[1]`` integers in ``lo..hi``."""

    def __init__(self, lo, hi, n=(1, MAX_RANK)):
        self.lo, self.hi, self.n = lo, hi, n
        count = f"{n[0]}" if n[0] == n[1] else f"{n[0]}..{n[1]}"
        self.allowed = f"a list of {count} integer{'' if n == (1, 1) else 's'} " + \
            (f"in {lo}..{hi}" if lo != hi else f"equal to {lo}")

    def ok(self, v):
        return isinstance(v, list) and self.n[0] <= len(v) <= self.n[1] and \
            all(_isint(x) and self.lo <= x <= self.hi for x in v)


class Array(Spec):
    """A number, or a rectangular nested list of them (a constant tensor), of kind ``"f"``
    (numbers), ``"i"`` (integers) or ``"b"`` (true/false), at most ``ndim`` axes and
    :data:`MAX_ELEMS` values."""
    KINDS = {"f": ("iuf", "numbers"), "i": ("iu", "integers"), "b": ("b", "true/false values")}

    def __init__(self, kind="f", ndim=MAX_RANK, exact=False):
        self.kinds, what = self.KINDS[kind]
        self.ndim, self.exact = ndim, exact
        self.allowed = f"{'a number or ' if kind == 'f' and not exact else ''}a rectangular list of {what} " + \
            (f"({ndim} axes)" if exact else f"(at most {ndim} {'axis' if ndim == 1 else 'axes'})")

    def ok(self, v):
        if isinstance(v, bool) and "b" not in self.kinds or isinstance(v, (str, dict)) or v is None:
            return False
        try:
            a = np.asarray(v)
        except (ValueError, TypeError):           # ragged
            return False
        return (a.dtype.kind in self.kinds or a.size == 0) and (a.ndim == self.ndim if self.exact else
                                                                a.ndim <= self.ndim) and a.size <= MAX_ELEMS


class Nullable(Spec):
    def __init__(self, spec):
        self.spec = spec
        self.allowed = f"null or {spec.allowed}"

    def ok(self, v):
        return v is None or self.spec.ok(v)


class Either(Spec):
    def __init__(self, *specs):
        self.specs = specs
        self.allowed = " or ".join(s.allowed for s in specs)

    def ok(self, v):
        return any(s.ok(v) for s in self.specs)


class Tuple(Spec):
    """A list of fixed length, item ``i`` passing ``specs[i]``."""

    def __init__(self, *specs):
        self.specs = specs
        self.allowed = "[" + ", ".join(s.allowed for s in specs) + "]"

    def ok(self, v):
        return isinstance(v, list) and len(v) == len(self.specs) and all(s.ok(x) for s, x in zip(self.specs, v))


class ListOf(Spec):
    def __init__(self, spec, lo, hi):
        self.spec, self.lo, self.hi = spec, lo, hi
        self.allowed = f"a list of {lo}..{hi} items, each {spec.allowed}"

    def ok(self, v):
        return isinstance(v, list) and self.lo <= len(v) <= self.hi and all(self.spec.ok(x) for x in v)


class Op:
    """One host op's attributes: ``req`` always written, ``opt`` sometimes; ``open``: the ONNX
    node's attributes, other keys allowed (no one reads them); ``check(where, attrs)``: what ties
    two attributes together."""

    def __init__(self, req=None, opt=None, open=False, check=None):
        self.req, self.opt, self.open, self.check = req or {}, opt or {}, open, check


# ------------------------------------------------------------------ the rules that tie attributes

def _clip(w, a):
    if a["lo"] is not None and a["hi"] is not None and a["lo"] > a["hi"]:
        fail(w, f"lo {a['lo']} > hi {a['hi']}: a clamp's lower bound is at most its upper bound")


def _pad(w, a):
    if len(a["pads"]) % 2:
        fail(f"{w}: attrs.pads", f"{len(a['pads'])} values: a begin and an end per axis (an even count)")


def _reshape(w, a):
    if sum(1 for d in a["shape"] if d == -1) > 1:
        fail(f"{w}: attrs.shape", f"{a['shape']}: at most one -1 (the size the others leave)")


def _scale(w, a):
    if a["divide"] and (np.asarray(a["c"], np.float64) == 0).any():
        fail(f"{w}: attrs.c", "a division by a constant with a zero in it")


def _celu(w, a):
    if a["alpha"] == 0:
        fail(f"{w}: attrs.alpha", "0: Celu divides by alpha")


def _bipolar(w, a):
    if not a["scale"] > 0:
        fail(f"{w}: attrs.scale", f"{a['scale']}: a BipolarQuant's scale is > 0")


def _perm(w, a):
    if "perm" in a and sorted(a["perm"]) != list(range(len(a["perm"]))):
        fail(f"{w}: attrs.perm", f"{excerpt(a['perm'], 60)} is not a permutation of 0..{len(a['perm']) - 1}")


#: the unary and binary ops a UnaryChain node may be (hlsnn.deploy.rewrite.unaryfuse, tables.key)
CHAIN_OPS = ("Mul", "Add", "HardSwish", "Sigmoid", "Tanh", "Erf", "Softplus", "Softsign", "Mish", "Selu", "Celu",
             "HardSigmoid", "LeakyRelu", "Elu", "Gelu", "PRelu", "Scale", "AddConst", "Relu")
MAX_CHAIN = 64


def _chain(w, a):
    nodes = a["nodes"]
    for i, nd in enumerate(nodes):
        at = f"{w}: attrs.nodes[{i}]"
        if not isinstance(nd, dict) or set(nd) != {"op", "attrs", "args"}:
            fail(at, f"{excerpt(nd, 60)} is not an object of the keys op, attrs, args")
        OneOf(*CHAIN_OPS).check(f"{at}.op", nd["op"])
        two = nd["op"] in ("Mul", "Add")
        Ints(0, i, (2, 2) if two else (1, 1)).check(f"{at}.args", nd["args"])
        if not isinstance(nd["attrs"], dict):
            fail(f"{at}.attrs", f"{excerpt(nd['attrs'], 60)} is not an object")
        if two and nd["attrs"]:
            fail(f"{at}.attrs", f"{excerpt(nd['attrs'], 60)}: a Mul or Add of two values has no attributes")
        check_host(f"{at}", nd["op"], nd["attrs"])


#: attention's per-sample ops (hlsnn.deploy.run.samplewise): the functions each op runs, and the
#: attributes each function needs besides fn, in_shapes and out_shape
SW_FNS = {"SwMove": ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Gather", "Slice", "Split"),
          "SwCompute": ("Concat", "Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Erf", "Gelu", "Softmax",
                        "LayerNormalization", "ReduceMean", "ReduceMax", "Where", "AddInf"),
          "MatMulAct": ("MatMul",)}
SW_NEEDS = {"Transpose": ("perm",), "Gather": ("axis", "indices"), "Slice": ("takes",), "Split": ("takes",),
            "Concat": ("axis", "operands"), "Add": ("operands",), "Sub": ("operands",), "Mul": ("operands",),
            "Div": ("operands",), "Softmax": ("axis",), "LayerNormalization": ("axis", "epsilon", "scale", "bias"),
            "ReduceMean": ("axes", "keepdims"), "ReduceMax": ("axes", "keepdims"),
            "Where": ("cond", "operands", "neginf"), "AddInf": ("cond", "operands", "neginf")}


def _sw(op):
    def check(w, a):
        OneOf(*SW_FNS[op]).check(f"{w}: attrs.fn", a["fn"])
        miss = [k for k in SW_NEEDS.get(a["fn"], ()) if k not in a]
        if miss:
            fail(f"{w}: attrs", f"the key {miss[0]!r} is missing (a {op} of {a['fn']} needs "
                                f"{', '.join(SW_NEEDS[a['fn']])})")
        if len(a["in_shapes"]) != (2 if op == "MatMulAct" else len(a["in_shapes"])):
            fail(f"{w}: attrs.in_shapes", f"{len(a['in_shapes'])} shapes: a MatMulAct multiplies two tensors")
        _perm(w, a)
    return check


SHAPE = Ints(1, MAX_DIM, (0, MAX_RANK))
AXIS = Int(-MAX_RANK, MAX_RANK - 1)
AXES = Ints(1, MAX_RANK - 1)                 # axes after the batch (0)
EPS = Num(0.0, 1e6)
OPERAND = Either(Tuple(OneOf("x"), Int(0, 15)), Tuple(OneOf("c"), Array("f")))
SW = {"fn": Text(), "in_shapes": ListOf(SHAPE, 1, 16), "out_shape": SHAPE}
SW_OPT = {"perm": Ints(0, MAX_RANK - 1), "axis": AXIS, "indices": Array("i"),
          "takes": ListOf(Tuple(Int(0, MAX_RANK - 1), Array("i", 1)), 1, MAX_RANK),
          "operands": ListOf(OPERAND, 1, 16), "axes": Ints(0, MAX_RANK - 1), "keepdims": Flag(), "epsilon": EPS,
          "scale": Nullable(Array("f")), "bias": Nullable(Array("f")), "approximate": OneOf("none", "tanh"),
          "cond": Either(Int(0, 15), Array("b")), "neginf": ListOf(Array("b"), 1, 3)}
FLAG = {"keepdims": Flag()}
POOL = {"kernel_shape": Ints(1, MAX_KERNEL, (1, 2))}
POOL_OPT = {"strides": Ints(1, MAX_STRIDE, (1, 2)), "pads": Ints(0, MAX_PAD - 1, (2, 4)),
            "dilations": Ints(1, 1, (1, 2)), "ceil_mode": Flag(), "count_include_pad": Flag(),
            "auto_pad": OneOf("NOTSET", "VALID"), "storage_order": Flag()}
ALPHA = {"alpha": Num()}

#: every host op of a compiled model and the attributes it holds (module docstring)
HOST_OPS = {
    # the ONNX node's own attributes (hlsnn.deploy.importer.onnx_import.HOST_OPS), others allowed
    "MaxPool": Op(POOL, POOL_OPT, open=True),
    "AveragePool": Op(POOL, POOL_OPT, open=True),
    "GlobalAveragePool": Op(opt=FLAG, open=True),
    "Flatten": Op(opt={"axis": Int(1, 1)}, open=True),
    "Reshape": Op({"shape": Ints(-1, MAX_DIM, (1, MAX_RANK))},
                  {"allowzero": Flag(), "batch_leading": Flag(), "to_2d": Flag(), "to_1d": Flag()},
                  open=True, check=_reshape),
    "Add": Op(open=True),
    "Relu": Op(open=True),
    "Identity": Op(open=True),
    "Dropout": Op(open=True),
    "BatchNormalization": Op(opt={"epsilon": EPS}, open=True),
    "Softmax": Op(opt={"axis": AXIS, "coerce_2d": Flag()}, open=True),
    # made by hlsnn's import rules (hlsnn.deploy.importer.import_rules, host*.py, onnx_nodes, unaryfuse,
    # samplewise): exactly these keys
    "GlobalMaxPool": Op(opt=FLAG),
    "Clip": Op({"lo": Nullable(Num()), "hi": Nullable(Num())}, check=_clip),
    **{op: Op() for op in ("Sigmoid", "Tanh", "HardSwish", "Erf", "Mul", "Div", "Sqrt", "Sub", "Softsign", "Mish",
                           "Softplus", "Abs", "LogSoftmax", "RowsToMap")},
    "HardSigmoid": Op({"alpha": Num(), "beta": Num()}),
    "Pad": Op({"pads": Ints(0, MAX_DIM, (2, 2 * MAX_RANK)), "value": Num()},
              {"mode": OneOf("constant", "reflect", "edge", "wrap")}, check=_pad),
    "Concat": Op({"axis": Int(1, 1)}),
    "Upsample": Op({"factors": Ints(1, MAX_KERNEL, (1, 2))}, {"map_1d": Flag()}),
    "Squeeze": Op({"axes": AXES}),
    "Unsqueeze": Op({"axes": AXES}),
    "Gelu": Op(opt={"approximate": OneOf("none", "tanh")}),
    "LayerNormalization": Op({"axis": AXIS, "epsilon": EPS, "scale": Nullable(Array()), "bias": Nullable(Array())}),
    "Scale": Op({"c": Array(), "divide": Flag()}, check=_scale),
    "AddConst": Op({"c": Array()}),
    "ZeroStuff": Op({"strides": Ints(1, MAX_STRIDE, (1, 2))}, {"map_1d": Flag()}),
    "MapToRows": Op({"lead": Ints(-1, MAX_DIM, (0, MAX_RANK))}),
    "UnaryChain": Op({"nodes": ListOf(Spec(), 1, MAX_CHAIN)}, check=_chain),
    "ReduceAxes": Op({"fn": OneOf("ReduceMean", "ReduceMax", "ReduceSum"), "axes": AXES, "keepdims": Flag()}),
    "ResizeLinear": Op({"mats": ListOf(Array("f", 2, exact=True), 1, 3)}, {"mode": OneOf("linear", "cubic")}),
    "LeakyRelu": Op(ALPHA),
    "Elu": Op(ALPHA),
    "PRelu": Op({"slope": Array()}),
    "DepthToSpace": Op({"blocksize": Int(1, MAX_KERNEL), "mode": OneOf("DCR", "CRD")}),
    "InstanceNormalization": Op({"epsilon": EPS, "scale": Array(), "bias": Array()}),
    "Selu": Op({"alpha": Num(), "gamma": Num()}),
    "Celu": Op(ALPHA, check=_celu),
    "ThresholdedRelu": Op(ALPHA),
    "Bipolar": Op({"scale": Num()}, check=_bipolar),
    "Pow": Op({"exponent": Num()}),
    "Reciprocal": Op({"c": Array()}),
    "ReduceL2": Op({"axes": AXES, "keepdims": Flag()}),
    "Compare": Op({"fn": OneOf("Greater", "Less", "GreaterOrEqual", "LessOrEqual", "IsNaN"), "c": Num()}),
    **{op: Op(SW, SW_OPT, check=_sw(op)) for op in SW_FNS},
    # hlsnn compile --host-fallback: the ONNX node itself (hlsnn.network.schema._fallback checks the arrays)
    "fallback": Op({"opset": ListOf(Tuple(Text(), Int(1, 1000)), 1, 16), "const_names": ListOf(Text(), 0, 16)},
                   {"why": Nullable(Text()),
                    # a file whose batch is fixed at 1: the static shapes it runs each sample at
                    "in_shapes": ListOf(SHAPE, 1, 16), "out_shape": SHAPE}),
}


def check_host(w, op, a):
    """Host op ``op`` with attributes ``a`` (a dict) against :data:`HOST_OPS`; ``w`` names the
    layer. :class:`Bad` on the first fault."""
    spec = HOST_OPS.get(op) if isinstance(op, str) else None
    if spec is None:
        fail(f"{w}: op", f"{excerpt(op, 60)} is not a host op of this hlsnn (one of {', '.join(sorted(HOST_OPS))})")
    w = f"{w} ({op})"
    for k, s in spec.req.items():
        if k not in a:
            fail(f"{w}: attrs", f"the key {k!r} is missing ({op} always has it: {s.allowed})")
    for k, v in a.items():
        s = spec.req.get(k) or spec.opt.get(k)
        if s is None:
            if spec.open:
                continue
            keys = ", ".join(list(spec.req) + list(spec.opt)) or "none"
            fail(f"{w}: attrs.{printable(k)[:60]}", f"is not an attribute of {op} (its attributes: {keys})")
        s.check(f"{w}: attrs.{k}", v)
    if spec.check is not None:
        spec.check(w, a)


def _size(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _grown(op, a, shapes):
    """The values host op ``op``'s output holds per image, where it can be more than its inputs'
    (None where it cannot: the dry run then allocates no more than its input)."""
    if op in ("SwMove", "SwCompute", "MatMulAct"):
        return _size(a["out_shape"])
    if op == "Upsample":
        return _size(shapes[0]) * _size(a["factors"])
    if op == "ZeroStuff":
        return _size(shapes[0]) * _size(a["strides"])
    if op == "Pad":
        n = len(a["pads"]) // 2
        full = (1,) + tuple(shapes[0])
        return _size(full[i] + a["pads"][i] + a["pads"][n + i] for i in range(min(n, len(full))))
    if op == "ResizeLinear":
        return _size(shapes[0]) * _size(len(m) for m in a["mats"]) // max(1, _size(shapes[0][1:1 + len(a["mats"])]))
    if op == "Concat":
        return sum(_size(s) for s in shapes)
    if op in ("Add", "Mul", "Sub", "Div"):
        return max(_size(s) for s in shapes) * len(shapes)      # a broadcast at most multiplies them
    return None


def dry_run(w, j, a, in_shapes, arrays):
    """The per-image shape of host layer ``j``'s output (attributes ``a``, checked by
    :func:`check_host`) from its op run on zeros of its inputs' per-image shapes ``in_shapes``
    (batch 1), or None where an input's shape is unknown or the op cannot run here (a
    ``--host-fallback`` node: onnx; ``Erf`` without scipy). :class:`Bad` naming the layer when
    the op fails on it, or its output would hold more than :data:`MAX_ELEMS` values."""
    op = j["op"]
    if op == "fallback" or not in_shapes or any(s is None for s in in_shapes):
        return None
    w = f"{w} ({op})"
    grown = _grown(op, a, in_shapes)
    if grown is not None and grown > MAX_ELEMS:
        fail(w, f"its output would hold {grown:,} values per image (at most {MAX_ELEMS:,})")
    from types import SimpleNamespace
    from ..deploy.run import hostops
    from ..errors import HlsnnError, MissingDependency
    layer = SimpleNamespace(name=j["name"], op=op, attrs=dict(a), inputs=list(j["inputs"]), output=j["output"])
    if op == "BatchNormalization":
        layer.attrs["params"] = [arrays[f"{j['name']}/bn{i}"] for i in range(4)]
    try:
        with np.errstate(all="ignore"):
            y = hostops.run(layer, [np.zeros((1,) + tuple(s)) for s in in_shapes])
    except MissingDependency:
        return None
    except (HlsnnError, TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError,
            OverflowError, MemoryError) as exc:
        why = " ".join(str(exc).split())[:160] or type(exc).__name__
        shapes = ", ".join(str(tuple(s)) for s in in_shapes)
        fail(w, f"its attributes do not fit its input of shape {shapes} per image ({type(exc).__name__}: {why})")
    shape = tuple(int(d) for d in np.shape(y)[1:])
    if _size(shape) > MAX_ELEMS:
        fail(w, f"its output holds {_size(shape):,} values per image (at most {MAX_ELEMS:,})")
    return shape
