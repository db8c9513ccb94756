"""The compiled model's layer program checked as untrusted input, before anything
runs: :func:`validate` is called by :func:`hlsnn.network.artifact.read`, so the loader, the
network mode's C helpers (``native/netint.c``), the network kernels' C-simulation and
``hlsnn build`` only ever see a program whose

* keys are there with the right JSON types (numbers, not strings or nested lists);
* names are sound: the model's ``name`` and every accelerator ``stem`` a folder name
  (:func:`hlsnn.names.check_slug`), every layer and tensor name printable
  (:func:`hlsnn.names.check_label`), layer names unique;
* numbers are in range: radix points within +-:data:`MAX_RADIX` (so every shift derived from
  them is defined in C), strides and dilations >= 1, pads >= 0 and below :data:`MAX_PAD`,
  kernels and shapes positive and bounded (:data:`MAX_ELEMS` values per tensor);
* descriptor tables agree with the tensors they index: a layer's bias ``<layer>/b`` has
  ``n_out`` finite values, ``n_out`` is ``w_shape[0]``, a conv's ``geom`` kernel is its
  weight's, its groups divide its channels, its weight's input channels times its groups are
  the channels of the tensor it reads (where that tensor's shape is known), a dense layer's
  ``K`` is the size of its input, and every output map is at least 1 x 1; what an engine derives
  from its weight shape and geometry is what they make (sparse_cluster's ``general``, ``pads1``,
  ``wq``, ``w_taps``, ``k_step``, ``blocks``: :func:`_sparse_conv`; bfp_systolic's packs and
  chunk arrays: :func:`_bfp_chunks`; shift_mac's packs and code fields: :func:`_shift_fields`),
  and a host op's axes are axes of its input (:func:`hlsnn.network.hostschema.dry_run` runs it,
  and the host ops never wrap an axis);
* arrays are numbers: integers, or finite floats.

Each failure is one :class:`~hlsnn.errors.InputError` naming the file, the place and what is
allowed. This module needs numpy and the standard library only (a board runs it).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import InputError, excerpt, printable
from ..names import check_label, check_slug
from .hostschema import (MAX_DILATION, MAX_DIM, MAX_ELEMS, MAX_KERNEL, MAX_PAD, MAX_RADIX,  # noqa: F401 (re-exported)
                         MAX_RANK, MAX_STRIDE, SW_FNS, Bad as _Bad, Bool, Either, Int, Ints, Label, ListOf, Nullable,
                         OneOf, Spec, _isint, check_host, dry_run)

MAX_LAYERS = 4096
ENGINES = ("shift_mac", "sparse_cluster", "bfp_systolic")
ROUNDINGS = ("nearest_even", "nearest_away", "truncate")


def _fail(where, what):
    raise _Bad(f"{where}: {what}")


def _int(where, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        _fail(where, f"{excerpt(v, 40)} is not an integer in {lo}..{hi}")
    return v


def _ints(where, v, n, lo, hi):
    if not isinstance(v, list) or (n is not None and len(v) != n):
        _fail(where, f"{excerpt(v, 60)} is not a list of {n if n is not None else 'some'} integers")
    return [_int(f"{where}[{i}]", x, lo, hi) for i, x in enumerate(v)]


def _num(where, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
        _fail(where, f"{excerpt(v, 40)} is not a finite number in {lo}..{hi}")
    return v


def _dict(where, v):
    if not isinstance(v, dict):
        _fail(where, f"{excerpt(v, 60)} is not an object")
    return v


def _str(where, v, choices=None):
    if not isinstance(v, str) or (choices is not None and v not in choices):
        _fail(where, f"{excerpt(v, 60)} is not " + (f"one of {', '.join(choices)}" if choices else "a string"))
    return v


def _label(where, v, check=check_label):
    try:
        return check(where, v)
    except InputError as e:
        raise _Bad(str(e)) from None


def _key(d, k, where):
    if k not in d:
        _fail(where, f"the key {k!r} is missing")
    return d[k]


def _radix(where, v, n=None):
    if isinstance(v, list):
        if n is not None and len(v) not in (1, n):
            _fail(where, f"{len(v)} radix points for {n} outputs")
        return [_int(f"{where}[{i}]", x, -MAX_RADIX, MAX_RADIX) for i, x in enumerate(v)]
    return _int(where, v, -MAX_RADIX, MAX_RADIX)


def _size(shape):
    return math.prod(shape)


def validate(program, arrays, source="compiled model"):
    """Check ``program`` (the parsed ``__program__`` JSON) and ``arrays`` (name -> ndarray) as
    the module docstring says; :class:`InputError` naming ``source`` on the first fault. Returns
    the per-image shape of every tensor it could work out (``{name: shape}``)."""
    try:
        return _validate(program, arrays)
    except _Bad as e:
        raise InputError(f"{source}: damaged or hostile compiled model: {e}; compile it again with `hlsnn compile`"
                         ) from None


MAX_DEPTH = 32          # nesting of the program's JSON (a shipped model's is 6)
MAX_NODES = 1 << 20     # values in the program's JSON


def _walk(p):
    """Every value of the program, iteratively: nesting at most :data:`MAX_DEPTH` (code that
    recurses over it cannot hit Python's recursion limit), at most :data:`MAX_NODES` values,
    every float finite (JSON's ``NaN`` and ``1e999`` parse to floats no rule can use)."""
    stack, n = [(p, 0, "the program")], 0
    while stack:
        v, d, where = stack.pop()
        n += 1
        if d > MAX_DEPTH or n > MAX_NODES:
            _fail(where, f"nested deeper than {MAX_DEPTH} or more than {MAX_NODES:,} values")
        if isinstance(v, float) and not math.isfinite(v):
            _fail(where, f"{v} (every number in a compiled model is finite)")
        if isinstance(v, dict):
            stack.extend((x, d + 1, f"{where}.{k}"[:120]) for k, x in v.items())
        elif isinstance(v, list):
            stack.extend((x, d + 1, f"{where}[{i}]"[:120]) for i, x in enumerate(v))


def _validate(p, arrays):
    """The checks of :func:`validate` (:class:`Bad` on the first fault); the shapes it works out."""
    _dict("the program", p)
    _walk(p)
    _label("name", _key(p, "name", "the program"), check_slug)
    for k in ("model", "assignment"):
        _label(k, _key(p, k, "the program"))
    _str("rounding", _key(p, "rounding", "the program"), ROUNDINGS)
    _num("overflow_ratio", _key(p, "overflow_ratio", "the program"), 0.0, 1.0)
    cal = _dict("calibration", _key(p, "calibration", "the program"))
    _int("calibration.images", _key(cal, "images", "calibration"), 0, 1 << 31)
    _label("calibration.mode", _key(cal, "mode", "calibration"))
    if "hlsnn" in p:
        _label("hlsnn (the version that wrote it)", p["hlsnn"])
    if "revision" in p:                 # the optional fields its writer knew (hlsnn.deploy.lower.programrev)
        from ..deploy.lower.programrev import REVISION
        _int("revision", p["revision"], 1, REVISION)
    accels = _dict("accels", _key(p, "accels", "the program"))
    if not 1 <= len(accels) <= 16:
        _fail("accels", f"{len(accels)} accelerators (1..16)")
    for name, a in accels.items():
        w = f"accels[{name!r}]"
        _label("accelerator key", name, check_slug)
        _dict(w, a)
        cfg = _dict(f"{w}.config", _key(a, "config", w))
        _dict(f"{w}.config.board", _key(cfg, "board", f"{w}.config"))
        sha = _str(f"{w}.sha", _key(a, "sha", w))
        if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            _fail(f"{w}.sha", "not a SHA-256 in hex")
        eng = _str(f"{w}.engine", _key(a, "engine", w), ENGINES)
        if cfg.get("engine") != eng or not isinstance(cfg.get(eng), dict):
            _fail(f"{w}.config", f"not a {eng} config")
        if a.get("stem") is not None:
            _label(f"{w}.stem", a["stem"], check_slug)
    for k, v in arrays.items():
        _label("array", k)
        if v.dtype.kind not in "biuf":
            _fail(f"array {k}", f"dtype {v.dtype}: only integers and floats are stored")
        if v.size > MAX_ELEMS:
            _fail(f"array {k}", f"{v.size:,} values (at most {MAX_ELEMS:,})")
        if v.dtype.kind == "f" and not np.isfinite(v).all():
            _fail(f"array {k}", "holds NaN or infinity")
    inp = _dict("input", _key(p, "input", "the program"))
    shape = _ints("input.shape", _key(inp, "shape", "input"), None, 1, MAX_DIM)
    if not 1 <= len(shape) <= 3 or _size(shape) > MAX_ELEMS:
        _fail("input.shape", f"{shape}: 1 to 3 dimensions, at most {MAX_ELEMS:,} values")
    shapes = {_label("input.name", _key(inp, "name", "input")): tuple(shape)}
    if "quantized_by" in inp:
        _label("input.quantized_by", inp["quantized_by"])
    q = _dict("input.quantization", _key(inp, "quantization", "input"))
    if "frac_bits" in q:
        _int("input.quantization.frac_bits", q["frac_bits"], -MAX_RADIX, MAX_RADIX)
    if "bits" in q:
        _int("input.quantization.bits", q["bits"], 2, 32)
    out = _dict("output", _key(p, "output", "the program"))
    for k in ("name", "engine_layer", "engine_tensor"):
        _label(f"output.{k}", _key(out, k, "output"))
    deq = out.get("dequantization")
    if isinstance(deq, dict) and "frac_bits" in deq:
        _int("output.dequantization.frac_bits", deq["frac_bits"], -MAX_RADIX, MAX_RADIX)
    host_after = out.get("host_after", [])
    if not isinstance(host_after, list):
        _fail("output.host_after", "not a list of layer names")
    for i, n in enumerate(host_after):
        _label(f"output.host_after[{i}]", n)
    layers = _key(p, "layers", "the program")
    if not isinstance(layers, list) or not 1 <= len(layers) <= MAX_LAYERS:
        _fail("layers", f"not a list of 1..{MAX_LAYERS} layers")
    seen, engine_names = set(), set()
    for i, j in enumerate(layers):
        _dict(f"layers[{i}]", j)
        name = _label(f"layers[{i}].name", _key(j, "name", f"layers[{i}]"))
        w = f"layer {name}"
        if name in seen:
            _fail(w, "a second layer of this name")
        seen.add(name)
        kind = _str(f"{w}: kind", _key(j, "kind", w), ("host", "dense", "conv"))
        ins = _key(j, "inputs", w)
        if not isinstance(ins, list) or not 1 <= len(ins) <= 16:
            _fail(f"{w}: inputs", "not a list of 1..16 tensor names")
        for t in ins:
            _label(f"{w}: input", t)
            if t not in shapes:         # the network's input and the outputs of the layers before it
                _fail(f"{w}: inputs", f"{excerpt(t, 60)} is neither the network's input nor an earlier layer's output")
        o = _label(f"{w}: output", _key(j, "output", w))
        if o in shapes:
            _fail(f"{w}: output", f"{excerpt(o, 60)} is written already (by an earlier layer, or the network's input)")
        if kind == "host":
            shapes[o] = _host(w, j, [shapes.get(t) for t in ins], arrays)
        else:
            engine_names.add(name)
            shapes[o] = _engine(w, j, shapes.get(ins[0]), accels, arrays)
            if inp["name"] in ins and j["format"] != "bfp" and not _isint(j["f_x"]):
                _fail(f"{w}: f_x", f"{excerpt(j['f_x'], 40)}: the layer reads the network's float input, so it "
                                   f"holds the input's radix point (an integer within +-{MAX_RADIX})")
    for k in arrays:
        head = k.split("/", 1)[0]
        if head != "check" and not any(k.startswith(n + "/") for n in seen):
            _fail(f"array {k}", "belongs to no layer")
    if out["engine_layer"] not in engine_names:
        _fail("output.engine_layer", f"{out['engine_layer']!r} is not an engine layer")
    last = next(j for j in layers if j["name"] == out["engine_layer"])
    if out["engine_tensor"] != last["output"]:
        _fail("output.engine_tensor", f"{excerpt(out['engine_tensor'], 60)} is not {last['name']}'s output "
                                      f"{last['output']!r}")
    if out["name"] not in shapes:
        _fail("output.name", f"{excerpt(out['name'], 60)} is no layer's output")
    for n in host_after:
        if n not in seen:
            _fail("output.host_after", f"{excerpt(n, 60)} is no layer")
    if "check/x" in arrays and tuple(arrays["check/x"].shape[1:]) != tuple(shape):
        _fail("array check/x", f"shape {arrays['check/x'].shape} is not a batch of the input shape {tuple(shape)}")
    return {k: v for k, v in shapes.items() if v is not None}


def _window(w, a, shape):
    """A pool's kernel, strides and pads (ONNX attributes) checked on the input ``shape``: a 2-D
    window on a (C, H, W) map, or a 1-D window (one kernel size) on a (C, L) tensor."""
    ks0 = _key(a, "kernel_shape", w)
    nd = 1 if isinstance(ks0, list) and len(ks0) == 1 else 2
    ks = _ints(f"{w}: kernel_shape", ks0, nd, 1, MAX_KERNEL)
    st = _ints(f"{w}: strides", a.get("strides", [1] * nd), nd, 1, MAX_STRIDE)
    pads = _ints(f"{w}: pads", a.get("pads", [0] * (2 * nd)), 2 * nd, 0, MAX_PAD)
    _ints(f"{w}: dilations", a.get("dilations", [1] * nd), nd, 1, MAX_DILATION)
    if "ceil_mode" in a:
        _int(f"{w}: ceil_mode", a["ceil_mode"], 0, 1)
    if any(pads[d] >= ks[d % nd] for d in range(2 * nd)):
        _fail(f"{w}: pads", f"{pads}: each pad must be smaller than the kernel {ks}")
    if shape is None or len(shape) != nd + 1:
        return None

    def size(n, k, s, lo, hi):          # hlsnn.deploy.run.pooling._pool's output size (ceil_mode too)
        if not a.get("ceil_mode", 0):
            return (n + lo + hi - k) // s + 1
        o = -(-(n + lo + hi - k) // s) + 1
        return o - 1 if (o - 1) * s >= n + lo else o
    if nd == 1:
        c, n = shape
        on = size(n, ks[0], st[0], pads[0], pads[1])
        if on < 1:
            _fail(w, f"a {ks} window does not fit the length {n}")
        return (c, on)
    c, h, wd = shape
    oh, ow = size(h, ks[0], st[0], pads[0], pads[2]), size(wd, ks[1], st[1], pads[1], pads[3])
    if oh < 1 or ow < 1:
        _fail(w, f"a {ks} window does not fit the {h}x{wd} map")
    return (c, oh, ow)


def _sub_radix(w, j, key, field):
    """``j[key][field]``: a radix point within +-:data:`MAX_RADIX`."""
    sub = _dict(f"{w}: {key}", j[key])
    return _int(f"{w}: {key}.{field}", _key(sub, field, f"{w}: {key}"), -MAX_RADIX, MAX_RADIX)


def _host(w, j, in_shapes, arrays):
    op = _label(f"{w}: op", _key(j, "op", w))
    a = _dict(f"{w}: attrs", _key(j, "attrs", w))
    if "bfp_table" in j:                # rule bfp_table's code radix (hlsnn.engines.bfp_systolic.network.gate)
        _sub_radix(w, j, "bfp_table", "f_in")
        if "bits" in j["bfp_table"]:    # its code width (rule bfp_wide_codes): the table's 2**bits entries
            _int(f"{w}: bfp_table.bits", j["bfp_table"]["bits"], 2, 12)
    if "table" in j:                    # rule unary_table's calibrated output radix (hlsnn.engines.network.gate)
        _sub_radix(w, j, "table", "f_out")
    if "table_in" in j:                 # rule table_in's code radix (hlsnn.engines.network.tablein)
        _sub_radix(w, j, "table_in", "f_in")
    if "codes" in j:                    # attention's calibrated output radix (hlsnn.engines.network.tokens.attention)
        if op not in ("AddConst", "MatMulAct", "LayerNormalization", "Add"):
            _fail(w, f"codes on a {op} layer: an AddConst's, a MatMulAct's, a LayerNormalization's or an Add's "
                     f"output radix (hlsnn.engines.network.tokens.attention rules add_const, act_matmul, layer_norm_codes, residual_codes)")
        _sub_radix(w, j, "codes", "f_out")
    if "pair_in" in j:                  # BFP pairs as codes (hlsnn.engines.bfp_systolic.network.attnpairs rule bfp_pair_codes)
        if op not in ("AddConst", "SwCompute", "LayerNormalization"):
            _fail(w, f"pair_in on a {op} layer: an AddConst's, a Softmax's or a LayerNormalization's input radix "
                     f"(hlsnn.engines.bfp_systolic.network.attnpairs rules bfp_add_const, bfp_softmax, bfp_layer_norm)")
        _sub_radix(w, j, "pair_in", "f_in")
    if "lnorm_in" in j:                 # rule layer_norm_sum's code radix (hlsnn.engines.network.tokens.layernorm)
        _sub_radix(w, j, "lnorm_in", "f_in")
    if "gate_in" in j:                  # rule gate_in's code radix per operand (hlsnn.engines.network.gatein)
        fs = _key(_dict(f"{w}: gate_in", j["gate_in"]), "f_in", f"{w}: gate_in")
        pools = ("ReduceAxes", "GlobalAveragePool", "AveragePool")
        if op not in ("Mul", "Add") + pools or not isinstance(fs, list) or \
                len(fs) != 2 or all(f is None for f in fs) or (op in pools and fs[1] is not None):
            _fail(w, f"gate_in.f_in = {fs!r}: a Mul's or Add's [F or null, F or null], one radix at least; a "
                     f"channel ReduceAxes' or GlobalAveragePool's [F, null], an AveragePool's too "
                     f"(hlsnn.engines.network rules channel_reduce, gate_in_sum)")
        for k, f in enumerate(fs):
            if f is not None:
                _int(f"{w}: gate_in.f_in[{k}]", f, -MAX_RADIX, MAX_RADIX)
    check_host(w, op, a)                # the table of host ops (hlsnn.network.hostschema.HOST_OPS)
    lo, hi = ARITY.get(op, (1, 1))
    if not lo <= len(in_shapes) <= hi:
        _fail(f"{w} ({op}): inputs", f"{len(in_shapes)} tensors; {op} reads {lo if lo == hi else f'{lo}..{hi}'}")
    if op in SW_FNS and len(a["in_shapes"]) != len(in_shapes):
        _fail(f"{w} ({op}): attrs.in_shapes", f"{len(a['in_shapes'])} shapes for {len(in_shapes)} inputs")
    shape = in_shapes[0]
    if op == "fallback":
        _fallback(w, j, a, arrays)
        return None
    if op in ("MaxPool", "AveragePool"):
        _window(w, a, shape)
    if op == "BatchNormalization":
        for i in range(4):
            v = arrays.get(f"{j['name']}/bn{i}")
            if v is None or v.dtype.kind != "f" or v.ndim != 1 or (shape is not None and v.shape[0] != shape[0]):
                _fail(w, f"its parameter array {j['name']}/bn{i} is missing or not one float per channel")
            if i == 3 and (v < 0).any():
                _fail(w, "a negative variance")
    if op == "Add" and None not in in_shapes and in_shapes[0] != in_shapes[1]:
        _fail(w, f"adds shapes {in_shapes[0]} and {in_shapes[1]}")
    return dry_run(w, j, a, in_shapes, arrays)     # its op on zeros of its input's shape: the output's


#: how many tensors a host op reads (every op not named here: one)
ARITY = {"Add": (2, 2), "Mul": (2, 2), "Sub": (2, 2), "Div": (2, 2), "Concat": (1, 16), "fallback": (1, 16),
         **{op: (1, 16) for op in SW_FNS}}


MAX_NODE_BYTES = 1 << 20     # a --host-fallback layer's serialized ONNX node (its attributes; weights are consts)
MAX_CONSTS = 16


def _fallback(w, j, a, arrays):
    """A ``--host-fallback`` layer (hlsnn.deploy.lower.layers): its ONNX node as serialized bytes
    ``<name>/onnx_node`` (uint8, 1..MAX_NODE_BYTES), its opset imports ``[[domain, version]]``
    and the names of its constant inputs, each stored as ``<name>/const<i>``. The node itself is
    parsed and matched against the layer when it loads (hlsnn.deploy.lower.layers._host_layer), where
    onnx is imported."""
    node = arrays.get(f"{j['name']}/onnx_node")
    if node is None or node.dtype != np.uint8 or node.ndim != 1 or not 1 <= node.size <= MAX_NODE_BYTES:
        _fail(w, f"its node {j['name']}/onnx_node is missing or not 1..{MAX_NODE_BYTES} bytes (uint8)")
    opset = _key(a, "opset", f"{w}: attrs")
    if not isinstance(opset, list) or not 1 <= len(opset) <= 16:
        _fail(f"{w}: opset", "not a list of 1..16 [domain, version] pairs")
    for o in opset:
        if not isinstance(o, list) or len(o) != 2:
            _fail(f"{w}: opset", f"{excerpt(o, 40)} is not a [domain, version] pair")
        if o[0] != "":
            _label(f"{w}: opset domain", o[0])
        _int(f"{w}: opset version", o[1], 1, 1000)
    names = _key(a, "const_names", f"{w}: attrs")
    if not isinstance(names, list) or len(names) > MAX_CONSTS:
        _fail(f"{w}: const_names", f"not a list of at most {MAX_CONSTS} names")
    for i, n in enumerate(names):
        _label(f"{w}: const name", n)
        v = arrays.get(f"{j['name']}/const{i}")
        if v is None or v.size > MAX_ELEMS:
            _fail(w, f"its constant {j['name']}/const{i} is missing or has more than {MAX_ELEMS} values")


def _fields(w, j, table):
    """The keys of ``j`` against ``table`` (``{key: (spec, required)}``): each required key there,
    each key known, each value passing its :class:`~hlsnn.network.hostschema.Spec`."""
    for k, (spec, need) in table.items():
        if need and k not in j:
            _fail(w, f"the key {k!r} is missing ({spec.allowed})")
    for k, v in j.items():
        if k not in table:
            _fail(f"{w}: {printable(k)[:60]}", f"is not a field of this layer (its fields: {', '.join(table)})")
        table[k][0].check(f"{w}: {k}", v)


RADIX = Either(Int(-MAX_RADIX, MAX_RADIX), ListOf(Int(-MAX_RADIX, MAX_RADIX), 1, MAX_DIM))
STEP, GROUPS = Nullable(Int(1, MAX_ELEMS)), Int(1, MAX_DIM)
#: an engine layer's fields (``hlsnn.deploy.lower.layers.capture`` and ``program_of``): the engine's own
#: and those every engine layer has; the arrays and what ties fields to them are checked in code below
_COMMON = {"name": (Label(), True), "kind": (OneOf("dense", "conv"), True), "op": (OneOf("dense", "conv"), False),
           "accel": (Label(), True), "engine": (OneOf(*ENGINES), True), "format_name": (Label(), False),
           "inputs": (Spec(), True), "output": (Label(), True), "relu": (Bool(), True), "n_out": (Spec(), True),
           "w_shape": (Spec(), True), "geom": (Spec(), True), "f_x": (Nullable(RADIX), True),
           "f_out": (Nullable(Int(-MAX_RADIX, MAX_RADIX)), True), "epilogue": (Spec(), False)}
ENGINE_FIELDS = {
    "shift_mac": dict(_COMMON, format=(OneOf("twohot", "pot"), True), mode=(OneOf("twohot", "pot"), True),
                      exp_bits=(Int(1, 6), True), delta=(Int(-64, 64), True), axis=(Nullable(Int(0, 3)), True),
                      f_w=(RADIX, True), bits=(Int(2, 16), True), signed=(Bool(), True), step=(Int(1, MAX_ELEMS), True),
                      k_step=(STEP, True), gp=(GROUPS, False), groups=(GROUPS, False), zg=(GROUPS, False),
                      terms=(Int(1, 2), False)),
    "sparse_cluster": dict(_COMMON, format=(OneOf("fixed", "sparse"), True), f_w=(RADIX, True),
                           general=(Bool(), True), k_step=(STEP, True),
                           pads1=(Nullable(Ints(0, MAX_PAD, (4, 4))), True),
                           blocks=(Nullable(ListOf(Ints(0, MAX_ELEMS, (0, MAX_RANK)), 0, MAX_DIM)), True),
                           in_terms=(Int(1, 2), False)),
    "bfp_systolic": dict(_COMMON, format=(OneOf("bfp"), True), f_w=(Nullable(RADIX), False),
                         mantissa_bits=(Int(2, 24), True), exponent_bits=(Int(2, 16), True),
                         rounding=(OneOf("nearest_even", "nearest_away", "truncate", "stochastic"), True),
                         chunks=(ListOf(Spec(), 1, 4096), True), gp=(GROUPS, False), groups=(GROUPS, False),
                         zg=(GROUPS, False)),
}
#: a bfp_systolic layer's output chunk (its rows' weights and bias, each a BFP tensor)
CHUNK_FIELDS = {"rows": (Spec(), True), "w_axis": (Nullable(Int(-4, 3)), True), "b_axis": (Nullable(Int(-4, 3)), True),
                "w_block": (Nullable(Int(1, MAX_ELEMS)), True), "b_block": (Nullable(Int(1, MAX_ELEMS)), True)}


def _engine(w, j, shape, accels, arrays):
    kind = j["kind"]
    acc = _str(f"{w}: accel", _key(j, "accel", w), list(accels))
    eng = _str(f"{w}: engine", _key(j, "engine", w), ENGINES)
    if accels[acc]["engine"] != eng:
        _fail(w, f"engine {eng}, but its accelerator {acc} is {accels[acc]['engine']}")
    _fields(w, j, ENGINE_FIELDS[eng])
    ws = _ints(f"{w}: w_shape", _key(j, "w_shape", w), 2 if kind == "dense" else 4, 1, MAX_ELEMS)
    if _size(ws) > MAX_ELEMS:
        _fail(f"{w}: w_shape", f"{ws}: more than {MAX_ELEMS:,} weights")
    n = _int(f"{w}: n_out", _key(j, "n_out", w), 1, MAX_DIM)
    if n != ws[0]:
        _fail(f"{w}: n_out", f"{n}, but the weight {ws} has {ws[0]} outputs")
    if j.get("f_x") is not None:
        _radix(f"{w}: f_x", j["f_x"])
    for k in ("f_out", "f_w"):               # radix points: none on bfp_systolic (its exponents are data)
        v = j.get(k) if eng == "bfp_systolic" else _key(j, k, w)
        if v is not None or eng != "bfp_systolic":
            if k == "f_w":                   # one per output, or one (f_out: one, the output's radix point)
                _radix(f"{w}: {k}", v, n)
            else:
                _int(f"{w}: {k}", v, -MAX_RADIX, MAX_RADIX)
    b = arrays.get(f"{j['name']}/b")
    if b is None or b.dtype.kind != "f" or b.shape != (n,):
        _fail(w, f"its bias {j['name']}/b is {'missing' if b is None else f'{b.dtype} of shape {b.shape}'}; it must "
                 f"be {n} floats (n_out)")
    if eng == "shift_mac":
        rows = None
        for f in ("e1", "e2", "s1", "s2", "zero"):
            v = arrays.get(f"{j['name']}/{f}")
            if v is None or v.ndim != 2 or v.dtype.kind not in "biu":
                _fail(w, f"its weight field {j['name']}/{f} is missing or not a 2-D integer array")
            if rows is not None and v.shape != rows:
                _fail(w, f"its weight field {j['name']}/{f} has shape {v.shape}, the others {rows}")
            rows = v.shape
            lim = 63 if f in ("e1", "e2") else 1
            if v.size and (v.min() < (-lim if f in ("e1", "e2") else 0) or v.max() > lim):
                _fail(w, f"its weight field {j['name']}/{f} holds values beyond {-lim if lim > 1 else 0}..{lim}")
        se = arrays.get(f"{j['name']}/scale_exponent")
        if se is not None and (se.dtype.kind not in "iu" or (se.size and np.abs(se.astype(np.int64)).max() > 63)):
            _fail(w, "its scale_exponent is not integers within +-63")
    elif eng == "sparse_cluster":
        if j["general"] and j.get("pads1") is None:
            _fail(f"{w}: pads1", "null: a general convolution (general: true) has its stride-1 pads")
        v = arrays.get(f"{j['name']}/wq")
        if v is None or v.dtype != np.int8 or v.ndim != 4 or v.shape[0] != n:
            _fail(w, f"its weights {j['name']}/wq are missing or not int8 of shape ({n}, C, kh, kw)")
        t = arrays.get(f"{j['name']}/w_taps")
        if t is not None and (t.ndim != 4 or list(t.shape) != (ws + [1, 1] if kind == "dense" else ws)):
            _fail(w, f"its taps {j['name']}/w_taps have shape {t.shape}; the weight {ws} has "
                     f"{tuple(ws + [1, 1] if kind == 'dense' else ws)}")
        # input_terms: 2 (hlsnn.deploy.quantize.twoin) and kernel blocks need the taps
        if (j.get("in_terms") not in (None, 1) or j.get("blocks") is not None) and \
                (t is None or t.dtype.kind not in "iu"):
            _fail(w, f"its taps {j['name']}/w_taps are missing")
    else:
        chunks = j["chunks"]
        top = 0
        for i, c in enumerate(chunks):
            _dict(f"{w}: chunks[{i}]", c)
            lo, hi = _ints(f"{w}: chunks[{i}].rows", _key(c, "rows", w), 2, 0, n)
            if lo != top or hi <= lo:
                _fail(f"{w}: chunks[{i}].rows", f"[{lo}, {hi}] does not continue the chunks before it at {top}")
            top = hi
            _fields(f"{w}: chunks[{i}]", c, CHUNK_FIELDS)
            for k in (f"w{i}_mantissas", f"w{i}_exponents", f"b{i}_mantissas", f"b{i}_exponents"):
                v = arrays.get(f"{j['name']}/{k}")
                if v is None or v.dtype.kind not in "iu":
                    _fail(w, f"its array {j['name']}/{k} is missing or not integers")
        if top != n:
            _fail(f"{w}: chunks", f"cover {top} of {n} outputs")
    # the geometry and the tensor it reads
    if kind == "dense":
        if j["geom"] is not None:
            _fail(f"{w}: geom", f"{excerpt(j['geom'], 60)}: a dense layer has none (null)")
        if eng == "sparse_cluster":
            _sparse_conv(w, j, n, ws + [1, 1], None, arrays, accels[acc]["config"].get(eng))
        if eng == "bfp_systolic":
            _bfp_chunks(w, j, n, ws, 1, arrays)
        if eng == "shift_mac":
            _shift_fields(w, j, n, ws, 1, arrays)
        if shape is not None and _size(shape) != ws[1]:
            _fail(w, f"a dense layer of {ws[1]} inputs reads a tensor of shape {shape} ({_size(shape)} values)")
        return (n,)
    g = _dict(f"{w}: geom", _key(j, "geom", w))
    kh = _int(f"{w}: geom.kh", _key(g, "kh", w), 1, MAX_KERNEL)
    kw = _int(f"{w}: geom.kw", _key(g, "kw", w), 1, MAX_KERNEL)
    if (kh, kw) != (ws[2], ws[3]):
        _fail(f"{w}: geom", f"a {kh}x{kw} kernel, but the weight {ws} is {ws[2]}x{ws[3]}")
    sh, sw = _ints(f"{w}: geom.strides", _key(g, "strides", w), 2, 1, MAX_STRIDE)
    pads = _ints(f"{w}: geom.pads", _key(g, "pads", w), 4, 0, MAX_PAD)
    dl = _ints(f"{w}: geom.dilations", _key(g, "dilations", w), 2, 1, MAX_DILATION)
    grp = _int(f"{w}: geom.group", _key(g, "group", w), 1, MAX_DIM)
    if n % grp:
        _fail(f"{w}: geom.group", f"{grp} groups do not divide its {n} outputs")
    if eng == "sparse_cluster":
        _sparse_conv(w, j, n, ws, (kh, kw, sh, sw, pads, dl, grp), arrays, accels[acc]["config"].get(eng))
    if eng == "bfp_systolic":
        _bfp_chunks(w, j, n, ws, grp, arrays)
    if eng == "shift_mac":
        _shift_fields(w, j, n, ws, grp, arrays)
    if shape is None:
        return None
    if len(shape) != 3:
        _fail(w, f"a conv reads a tensor of shape {shape}, not (C, H, W)")
    c, h, wd = shape
    if ws[1] * grp != c:
        _fail(w, f"weights {ws} in {grp} group(s) for an input of {c} channels")
    ekh, ekw = (kh - 1) * dl[0] + 1, (kw - 1) * dl[1] + 1
    oh, ow = (h + pads[0] + pads[2] - ekh) // sh + 1, (wd + pads[1] + pads[3] - ekw) // sw + 1
    if oh < 1 or ow < 1:
        _fail(w, f"a {kh}x{kw} kernel with pads {pads} does not fit its {h}x{wd} input")
    if n * oh * ow > MAX_ELEMS:
        _fail(w, f"an output of {n}x{oh}x{ow} values")
    return (n, oh, ow)


def _sparse_conv(w, j, n, ws, geom, arrays, cfg):
    """A ``sparse_cluster`` layer's fields that follow from its weight shape ``ws`` (a dense
    layer's as (n, K, 1, 1)) and geometry ``geom`` ``(kh, kw, sh, sw, pads, dilations, group)``
    (None: dense), as :class:`hlsnn.deploy.run.executors.SparseExec` derives them: ``general`` (any
    convolution but a stride-1, undilated, ungrouped square one of "same" or "valid" pads), the
    ``wq`` array's shape (the weights, or a general convolution's stride-1 square kernel of its
    dilated extent with the groups as zero taps) and ``pads1``, and, from the accelerator's
    ``max_in_channels`` and ``max_ksize``, ``k_step`` and ``blocks``. Anything else reaches an
    index or a shape the kernels never meet."""
    name = j["name"]
    if geom is None:
        general, want, pads1 = False, tuple(ws), None
    else:
        kh, kw, sh, sw, pads, dl, grp = geom
        p = pads[0]
        general = not (kh == kw and (sh, sw, dl[0], dl[1], grp) == (1, 1, 1, 1, 1) and len(set(pads)) == 1
                       and p in (0, (kh - 1) // 2) and not (p and kh % 2 == 0))
        eh, ew = dl[0] * (kh - 1) + 1, dl[1] * (kw - 1) + 1
        k1 = max(eh, ew)
        want = (n, ws[1] * grp, k1, k1) if general else tuple(ws)
        t, le, bo, r = pads
        pads1 = [t, le, bo + k1 - eh, r + k1 - ew] if general else None
    if j["general"] != general:
        _fail(f"{w}: general", f"{j['general']}, but its geometry makes it {general}")
    v = arrays[f"{name}/wq"]
    if tuple(v.shape) != want:
        _fail(w, f"its weights {name}/wq have shape {v.shape}; its weight {ws[:2]} and geometry make it {want}")
    if general and list(j["pads1"]) != pads1:
        _fail(f"{w}: pads1", f"{j['pads1']}, but its geometry makes the stride-1 pads {pads1}")
    if not general and j.get("pads1") is not None:
        _fail(f"{w}: pads1", f"{excerpt(j['pads1'], 40)}: only a general convolution has them (null)")
    cfg = cfg if isinstance(cfg, dict) else {}
    cmax, kmax = cfg.get("max_in_channels"), cfg.get("max_ksize")
    if _isint(cmax) and cmax > 0:
        step = cmax if want[1] > cmax else None
        if j["k_step"] != step:
            _fail(f"{w}: k_step", f"{j['k_step']}, but {want[1]} input channels on max_in_channels {cmax} make it "
                                  f"{step}")
    if _isint(kmax) and kmax > 0:
        if geom is None or want[2] <= kmax:
            blocks = None
        else:
            th, tw = (kmax - 1) // dl[0] + 1, (kmax - 1) // dl[1] + 1
            blocks = [[i0, min(th, kh - i0), j0, min(tw, kw - j0)]
                      for i0 in range(0, kh, th) for j0 in range(0, kw, tw)]
        got = j.get("blocks")
        if (None if got is None else [list(b) for b in got]) != blocks:
            _fail(f"{w}: blocks", f"{excerpt(got, 60)}, but its kernel on max_ksize {kmax} makes them "
                                  f"{excerpt(blocks, 60)}")


def _packs(w, j, n, group):
    """``(gp, groups, zg)`` of an engine layer that runs a grouped convolution as one GEMM per pack
    of ``gp`` groups (:mod:`hlsnn.deploy.run.groups`): ``gp`` dividing the ``group`` groups, ``groups``
    the packs, ``zg`` the outputs per pack (the loader's defaults where a field is absent)."""
    gp, groups = j.get("gp", 1), j.get("groups", 1)
    zg = j.get("zg", n // max(1, groups))
    if group % gp or groups != group // gp or zg * groups != n:
        _fail(w, f"gp {gp}, groups {groups}, zg {zg}: {group} group(s) packed {gp} per GEMM make groups "
                 f"{group // gp if not group % gp else '(gp must divide them)'} of {n // max(1, group // gp)} outputs")
    return gp, groups, zg


def _shift_fields(w, j, n, ws, group, arrays):
    """A ``shift_mac`` layer's packs (:func:`_packs`) and code fields against its weight shape
    ``ws``: one row per output, ``terms`` x ``gp`` x the weight's values per output columns (as
    :class:`hlsnn.deploy.run.executors.ShiftExec` quantizes the GEMM weight), the scale exponents of
    the shape its ``axis`` makes, every field by the format's own check
    (:meth:`hlsnn.formats.shift.ShiftTensor.from_codes`)."""
    from ..errors import HlsnnError
    from ..formats import shift as sfmt
    gp, _, _ = _packs(w, j, n, group)
    want = (n, j.get("terms", 1) * gp * _size(ws[1:]))
    rows = arrays[f"{j['name']}/e1"].shape
    if tuple(rows) != want:
        _fail(w, f"its weight fields {j['name']}/e1, ... have shape {rows}; the weight {ws} in {gp} group(s) per "
                 f"GEMM with {j.get('terms', 1)} term(s) makes them {want}")
    fields = [arrays.get(f"{j['name']}/{f}") for f in ("e1", "e2", "s1", "s2", "zero", "scale_exponent")]
    if fields[-1] is None:
        _fail(w, f"its scale exponents {j['name']}/scale_exponent are missing")
    try:
        sfmt.ShiftTensor.from_codes(j["mode"], j["exp_bits"], *fields, delta=j["delta"], axis=j["axis"])
    except (HlsnnError, ValueError, TypeError) as exc:
        _fail(w, f"its weight fields ({j['name']}/e1, ...): {' '.join(str(exc).split())[:160]}")


def _bfp_chunks(w, j, n, ws, group, arrays):
    """A ``bfp_systolic`` layer's packs and chunks against its weight shape ``ws`` and ``group``
    (as :class:`hlsnn.deploy.run.executors.BfpExec` makes them): ``gp`` groups per GEMM dividing the
    groups, ``groups`` the packs, ``zg`` the outputs per pack; each chunk within one pack, its
    weight mantissas one row per output of K = ``gp`` x the weight's values per output, its bias
    mantissas one per output, its exponents of the shape its axis and block make (the format's own
    check, :meth:`hlsnn.formats.bfp.BFPTensor.from_parts`)."""
    from ..errors import HlsnnError
    from ..formats import bfp as bfpfmt
    gp, groups, zg = _packs(w, j, n, group)
    k = gp * _size(ws[1:])
    for i, c in enumerate(j["chunks"]):
        lo, hi = c["rows"]
        if lo // zg != (hi - 1) // zg:
            _fail(f"{w}: chunks[{i}].rows", f"[{lo}, {hi}] crosses a pack of {zg} outputs")
        for part, want in (("w", (hi - lo, k)), ("b", (hi - lo,))):
            m, e = arrays[f"{j['name']}/{part}{i}_mantissas"], arrays[f"{j['name']}/{part}{i}_exponents"]
            if tuple(m.shape) != want:
                _fail(w, f"its array {j['name']}/{part}{i}_mantissas has shape {m.shape}; chunk [{lo}, {hi}] of "
                         f"the weight {ws} makes it {want}")
            try:
                bfpfmt.BFPTensor.from_parts(m, e, j["mantissa_bits"], exponent_bits=j["exponent_bits"],
                                            axis=c[f"{part}_axis"], block_size=c[f"{part}_block"])
            except (HlsnnError, ValueError, TypeError) as exc:
                _fail(w, f"its chunk {i}'s {part} ({j['name']}/{part}{i}_*): {' '.join(str(exc).split())[:160]}")


#: :func:`validate` without its message: :class:`Bad` on the first fault (hlsnn compile checks what it writes)
check_program, Bad = _validate, _Bad
