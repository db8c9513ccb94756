"""A calibrated engine layer's state, out of a deployment and back into one.

:func:`capture` takes a calibrated ``_Exec`` of :mod:`hlsnn.deploy.run.runner` (static radix
points) and returns its program entry (JSON) and its arrays: the weights in the engine's own
codes (``shift_mac``: the two-hot / power-of-two fields and scale exponents;
``sparse_cluster``: int8 weights, after the stride-1 rewrite of a general convolution;
``bfp_systolic``: each output chunk's weight and bias mantissas and exponents), the float
bias, the input radix ``f_x`` and output radix ``f_out`` chosen when calibrating.
:func:`restore` rebuilds the same ``_Exec`` from them, so a compiled network runs the very
code a deployment runs (the same kernel calls, the same bits) without the ONNX model, the
data set or calibration. Only numpy and the engine packages are needed. :func:`program_of`
is the whole calibrated deployment as its layer program (what ``hlsnn compile`` writes).
"""
from __future__ import annotations

import numpy as np

from ...engines.convgeom import ConvGeom
from ...errors import InputError
from ...formats import bfp as bfpfmt
from ...formats import shift as sfmt
from ...version import __version__
from . import programrev
from ..run.executors import BfpExec, LayerStats, ShiftExec, SparseExec

EXEC_OF = {"bfp": BfpExec, "twohot": ShiftExec, "pot": ShiftExec, "fixed": SparseExec, "sparse": SparseExec}
_SHIFT_FIELDS = ("e1", "e2", "s1", "s2", "zero", "scale_exponent")
_BFP_FIELDS = ("mantissas", "exponents")


class LayerStub:
    """What an ``_Exec`` reads of its layer: name, kind, ReLU, the float bias, the conv
    geometry and the weight's shape (a zero-strided view: no memory)."""

    def __init__(self, name, kind, relu, b, w_shape, geom=None, inputs=(), output=""):
        self.name, self.kind, self.relu, self.b = name, kind, bool(relu), b
        self.w = np.broadcast_to(np.zeros((), np.int8), tuple(w_shape))
        self.geom = geom
        self.group = geom.group if geom is not None else 1
        self.inputs, self.output = list(inputs), output

    def describe(self):
        return f"{self.kind} {tuple(self.w.shape)}" + (" +relu" if self.relu else "")


class DeployStub:
    """The deployment settings an ``_Exec`` reads on the main operation (static radix points)."""

    dynamic = False
    update = "e1"
    collect_stats = False         # no pass over the inputs for the report's densities (latency turns it on)

    def __init__(self, rounding, overflow_ratio):
        self.rounding, self.overflow_ratio = rounding, overflow_ratio


def _geom_json(g):
    return None if g is None else {"kh": g.kh, "kw": g.kw, "strides": [g.sh, g.sw], "pads": list(g.pads),
                                   "dilations": [g.dh, g.dw], "group": g.group}


def _geom(j):
    return None if j is None else ConvGeom(j["kh"], j["kw"], *j["strides"], tuple(j["pads"]), *j["dilations"],
                                           j["group"])


def _int(v):
    return None if v is None else (int(v) if np.ndim(v) == 0 else [int(a) for a in np.asarray(v).reshape(-1)])


def _small(a):
    """An integer array in the narrowest signed type that holds it (the file stores codes, not int64s)."""
    a = np.asarray(a)
    if a.dtype.kind not in "iu" or a.size == 0:
        return a
    lo, hi = int(a.min()), int(a.max())
    for t in (np.int8, np.int16, np.int32):
        if np.iinfo(t).min <= lo and hi <= np.iinfo(t).max:
            return a.astype(t)
    return a.astype(np.int64)


def capture(ex, fmt_type):
    """``(entry, arrays)`` of a calibrated ``_Exec``: the JSON fields and the named arrays."""
    L = ex.layer
    if ex.f_out is None and fmt_type != "bfp":
        raise InputError(f"layer {L.name}: not calibrated (no output radix point)")
    entry = {"name": L.name, "kind": L.kind, "format": fmt_type, "relu": bool(L.relu), "n_out": int(ex.n_out),
             "w_shape": list(L.w.shape), "geom": _geom_json(L.geom) if L.kind == "conv" else None,
             "inputs": list(L.inputs), "output": L.output, "f_x": _int(ex.f_x), "f_out": _int(ex.f_out)}
    b_fit = getattr(ex, "b_fit", None)           # a shift layer's corrected bias (hlsnn.deploy.quantize.shift_fit)
    arrays = {"b": np.asarray(L.b if b_fit is None else b_fit, np.float64)}
    if isinstance(ex, ShiftExec):
        t = ex.wq
        entry.update(mode=ex.mode, exp_bits=int(t.exp_bits), delta=int(t.delta), axis=t.axis, f_w=_int(ex.f_w),
                     bits=int(ex.bits), signed=bool(ex.signed), step=int(ex.step), k_step=ex.k_step,
                     gp=int(ex.gp), groups=int(ex.groups), zg=int(ex.zg))
        if getattr(ex, "terms", 1) != 1:             # weight_terms: 2 (hlsnn.deploy.quantize.twoterm)
            entry["terms"] = int(ex.terms)
        arrays.update({f: _small(getattr(t, f)) for f in _SHIFT_FIELDS})
    elif isinstance(ex, SparseExec):
        entry.update(f_w=_int(ex.f_w), general=bool(ex.general), k_step=ex.k_step,
                     pads1=list(ex.pads1) if ex.general else None,
                     blocks=None if ex.blocks is None else [list(map(int, b)) for b in ex.blocks])
        arrays["wq"] = np.asarray(ex.wq, np.int8)
        if getattr(ex, "in_terms", 1) != 1 and getattr(ex, "two", None) is not False:    # hlsnn.deploy.quantize.twoin
            entry["in_terms"] = int(ex.in_terms)      # (not calibrated yet: the network kernel refuses it)
        if ex.blocks is not None or entry.get("in_terms", 1) != 1:    # these run on the layer's own taps
            arrays["w_taps"] = np.asarray(ex.w_taps, np.int8)
    elif isinstance(ex, BfpExec):
        entry.update(mantissa_bits=ex.m, exponent_bits=ex.e, rounding=ex.rnd, chunks=[],
                     gp=int(ex.gp), groups=int(ex.groups), zg=int(ex.zg))
        for i, (a, b, wq, bq) in enumerate(ex.chunks):
            entry["chunks"].append({"rows": [int(a), int(b)], "w_axis": wq.axis, "w_block": wq.block_size,
                                    "b_axis": bq.axis, "b_block": bq.block_size})
            for f in _BFP_FIELDS:
                arrays[f"w{i}_{f}"] = _small(getattr(wq, f))
                arrays[f"b{i}_{f}"] = _small(getattr(bq, f))
    else:
        raise InputError(f"layer {L.name}: no compiled form for {type(ex).__name__}")
    return entry, arrays


def restore(entry, arrays, acc, deploy):
    """The ``_Exec`` of a program entry on accelerator ``acc`` (its arrays: ``name -> ndarray``)."""
    cls = EXEC_OF[entry["format"]]
    ex = cls.__new__(cls)
    layer = LayerStub(entry["name"], entry["kind"], entry["relu"], arrays["b"], entry["w_shape"],
                      _geom(entry["geom"]), entry["inputs"], entry["output"])
    ex.layer, ex.acc, ex.deploy, ex.fmt = layer, acc, deploy, None
    ex.n_out, ex.p, ex.stats = entry["n_out"], acc.config.params, LayerStats()
    ex.f_x = None if entry["f_x"] is None else (np.asarray(entry["f_x"]) if isinstance(entry["f_x"], list)
                                                else entry["f_x"])
    ex.f_out, ex.in_shape = entry["f_out"], None
    ex.update_times = ex.update_choice = ex.update_ran = None
    if cls is ShiftExec:
        ex.mode, ex.k_step, ex.step = entry["mode"], entry["k_step"], entry["step"]
        ex.bits, ex.signed = entry["bits"], entry["signed"]
        ex.terms = entry.get("terms", 1)
        ex.wq = sfmt.ShiftTensor.from_codes(entry["mode"], entry["exp_bits"],
                                            *(arrays[f] for f in _SHIFT_FIELDS), delta=entry["delta"],
                                            axis=entry["axis"])
        ex.f_w = entry["f_w"] if not isinstance(entry["f_w"], list) else np.asarray(entry["f_w"], np.int64)
        n = ex.wq.e1.shape[0]
        ex.gp, ex.groups, ex.zg = entry.get("gp", 1), entry.get("groups", 1), entry.get("zg", n)
        ex.n_chunks = ex._parts(np.arange(n))
    elif cls is SparseExec:
        ex.wq = arrays["wq"].astype(np.int64)
        ex.f_w = entry["f_w"] if not isinstance(entry["f_w"], list) else np.asarray(entry["f_w"], np.int64)
        ex.general, ex.k_step = entry["general"], entry["k_step"]
        if ex.general:
            ex.pads1 = tuple(entry["pads1"])
        bl = entry.get("blocks")
        ex.blocks = None if bl is None else [tuple(b) for b in bl]
        ex.in_terms = int(entry.get("in_terms", 1))
        ex.two = ex.in_terms == 2
        ex.w_taps = arrays["w_taps"].astype(np.int64) if bl is not None or ex.in_terms != 1 else ex.wq
    else:
        ex.m, ex.e, ex.rnd = entry["mantissa_bits"], entry["exponent_bits"], entry["rounding"]
        ex.chunks = []
        ex.gp, ex.groups = entry.get("gp", 1), entry.get("groups", 1)
        ex.zg = entry.get("zg", entry["n_out"] // ex.groups)
        for i, c in enumerate(entry["chunks"]):
            wq = bfpfmt.BFPTensor.from_parts(arrays[f"w{i}_mantissas"], arrays[f"w{i}_exponents"], ex.m,
                                             exponent_bits=ex.e, axis=c["w_axis"], block_size=c["w_block"])
            bq = bfpfmt.BFPTensor.from_parts(arrays[f"b{i}_mantissas"], arrays[f"b{i}_exponents"], ex.m,
                                             exponent_bits=ex.e, axis=c["b_axis"], block_size=c["b_block"])
            ex.chunks.append((c["rows"][0], c["rows"][1], wq, bq))
    return ex


def _jsonable(v):
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, bytes):                   # an ONNX string attribute (auto_pad: b"NOTSET")
        return v.decode("utf-8", "replace")
    return v


def program_of(dep, net, cfg, assignment, accs, *, x_cal, x_check=None, host_fallback=False):
    """The layer program and arrays of a calibrated deployment ``dep`` (one assignment of the
    deployment config ``cfg``, its accelerators ``accs``): what :func:`compile_model` writes,
    and what ``hlsnn deploy`` models end to end. ``x_cal``: the calibration images' count;
    ``x_check``: the self-check inputs (their outputs are stored), or None; ``host_fallback``:
    store the ``--host-fallback`` layers (their ONNX nodes) instead of refusing them."""
    from ...names import check_slug
    check_slug(f"{getattr(cfg, 'model', 'the model')}: the model's name (its file name without .onnx)", net.name)
    asg = cfg.assignments[assignment]
    cal = cfg.calibration
    used = {cfg.formats[asg.format_of(la.name)].accel for la in net.engine_layers()}
    keys = {a: accs[a].config.stem or accs[a].config.name for a in sorted(used)}
    program = {"name": net.name, "model": cfg.name, "assignment": assignment, "hlsnn": __version__,
               "revision": programrev.REVISION,                 # the optional fields it knows (deploy.lower.programrev)
               "rounding": cfg.rounding, "overflow_ratio": cal["overflow_ratio"],
               "calibration": {"images": int(x_cal), "mode": "static", "update": cal["update"],
                               **({"shift_choice": dep.shift_choice} if getattr(dep, "shift_choice", None) else {})},
               "accels": {keys[a]: {"config": _jsonable(accs[a].config.as_dict()), "sha": accs[a].config.sha,
                                    "stem": accs[a].config.stem, "engine": accs[a].config.engine}
                          for a in sorted(used)},
               "layers": []}
    arrays = {}
    for la in net.layers:
        if la.kind == "host":
            if la.op == "fallback":
                if not host_fallback:
                    raise InputError(f"layer {la.name}: runs through --host-fallback (onnx's reference "
                                     f"implementation); compile with --host-fallback to run it on the host "
                                     f"(the board then needs the onnx package)")
                # the ONNX node itself (its serialized bytes) and its constant inputs; the loader runs it
                # with onnx's reference implementation, as the deployment did
                consts = la.attrs["consts"]
                arrays[f"{la.name}/onnx_node"] = np.frombuffer(la.node.SerializeToString(), np.uint8).copy()
                for i, (cname, v) in enumerate(consts.items()):
                    arrays[f"{la.name}/const{i}"] = np.asarray(v)
                program["layers"].append({"name": la.name, "kind": "host", "op": "fallback",
                                          "inputs": list(la.inputs), "output": la.output,
                                          "attrs": _jsonable({"why": la.attrs["why"], "const_names": list(consts),
                                                              "opset": [list(o) for o in la.attrs["opset"]],
                                                              # a batch-1 file: the node runs per sample
                                                              **(la.attrs["sw"] if "sw" in la.attrs else {})})})
                continue
            attrs = {k: v for k, v in la.attrs.items() if k != "params"}
            program["layers"].append({"name": la.name, "kind": "host", "op": la.op, "inputs": list(la.inputs),
                                      "output": la.output, "attrs": _jsonable(attrs)})
            if la.name in getattr(dep, "bfp_radix", {}):     # a table of BFP values: its code radix (netbfp bfp_table)
                program["layers"][-1]["bfp_table"] = {"f_in": int(dep.bfp_radix[la.name]),
                                                      "bits": int(dep.bfp_luts()[la.name])}
            if la.name in getattr(dep, "code_radix", {}):    # attention's codes: their output radix (rules add_const, act_matmul, layer_norm_codes)
                program["layers"][-1]["codes"] = {"f_out": int(dep.code_radix[la.name])}
            if la.name in getattr(dep, "pair_in", {}):       # BFP pairs as codes: their radix (netbfp rule bfp_pair_codes)
                program["layers"][-1]["pair_in"] = {"f_in": int(dep.pair_in[la.name])}
            if la.name in getattr(dep, "table_radix", {}):   # a table of fixed-point codes: its output radix (rule unary_table)
                program["layers"][-1]["table"] = {"f_out": int(dep.table_radix[la.name])}
            if la.name in getattr(dep, "lnorm_radix", {}):   # a LayerNorm of a residual sum: its codes' radix (layer_norm_sum)
                program["layers"][-1]["lnorm_in"] = {"f_in": int(dep.lnorm_radix[la.name])}
            if la.name in getattr(dep, "table_in", {}):      # a table of a computed tensor: its code radix (rule table_in)
                program["layers"][-1]["table_in"] = {"f_in": int(dep.table_in[la.name])}
            if la.name in getattr(dep, "gate_in", {}):       # a gate of a gate's product: its codes' radix (rule gate_in)
                program["layers"][-1]["gate_in"] = {"f_in": [None if f is None else int(f)
                                                             for f in dep.gate_in[la.name]]}
            if la.op == "BatchNormalization":
                for i, p in enumerate(la.attrs["params"]):
                    arrays[f"{la.name}/bn{i}"] = np.asarray(p, np.float64)
            continue
        fmt = cfg.formats[asg.format_of(la.name)]
        entry, arr = capture(dep.execs[la.name], fmt.type)
        entry["accel"] = keys[fmt.accel]
        entry["engine"], entry["op"] = fmt.engine, la.kind
        entry["format_name"] = fmt.name
        entry["epilogue"] = _epilogue(entry)
        program["layers"].append(entry)
        arrays.update({f"{la.name}/{k}": v for k, v in arr.items()})
    engine = net.engine_layers()
    first, last = engine[0], engine[-1]
    program["input"] = {"name": net.input, "shape": [int(d) for d in net.input_shape[1:]],
                        "quantized_by": first.name, "quantization": _in_quant(program, first.name)}
    program["output"] = {"name": net.output, "engine_layer": last.name, "engine_tensor": last.output,
                         "dequantization": _out_quant(program, last.name),
                         "host_after": [la.name for la in net.layers[net.layers.index(last) + 1:]]}
    if x_check is not None:
        y, env = dep.run(x_check, keep=True)
        arrays.update({"check/x": x_check, "check/y": np.asarray(y, np.float64),
                       "check/logits": np.asarray(env[last.output], np.float64)})
    return program, arrays


def _entry(program, name):
    return next(j for j in program["layers"] if j["name"] == name)


def _in_quant(program, name):
    j = _entry(program, name)
    if j["format"] == "bfp":
        return {"type": "bfp", "mantissa_bits": j["mantissa_bits"], "exponent": "one per sample (im2col patch)"}
    if j["format"] in ("fixed", "sparse"):
        return {"type": "fixed", "frac_bits": j["f_x"], "bits": 8, "signed": True}
    return {"type": "fixed", "frac_bits": j["f_x"], "bits": j["bits"], "signed": j["signed"]}


def _out_quant(program, name):
    j = _entry(program, name)
    if j["format"] == "bfp":
        return {"type": "bfp", "mantissa_bits": j["mantissa_bits"], "value": "mantissa * 2**exponent"}
    return {"type": "fixed", "frac_bits": j["f_out"], "value": "q * 2**-frac_bits"}


def _epilogue(j):
    """The output stage the engine applies (fused in its kernel today): bias, ReLU, requantization."""
    e = {"bias": True, "relu": j["relu"]}
    if j["format"] == "bfp":
        e["requant"] = {"to": "bfp", "mantissa_bits": j["mantissa_bits"]}
    else:
        e["requant"] = {"to": "fixed", "frac_bits": j["f_out"], "shift": "f_x + f_w - f_out"}
    return e


def _fallback_node(onnx, j, arrays):
    """The ONNX node of a ``--host-fallback`` layer ``j`` (its bytes checked by
    hlsnn.network.schema): parsed, and reading only the layer's inputs and constants and writing its
    output, else an InputError naming the layer."""
    from google.protobuf.message import DecodeError
    where = f"compiled model: host fallback layer {j['name']!r}"
    try:
        node = onnx.NodeProto.FromString(arrays[f"{j['name']}/onnx_node"].tobytes())
    except (DecodeError, RuntimeWarning, ValueError) as exc:
        raise InputError(f"{where}: its node is not a serialized ONNX node ({' '.join(str(exc).split())[:120]})") \
            from None
    from ...names import check_label
    check_label(f"{where}: op type", node.op_type)
    if node.domain:
        check_label(f"{where}: op domain", node.domain)
    known = set(j["inputs"]) | set(j["attrs"]["const_names"])
    if [o for o in node.output if o] != [j["output"]] or not set(i for i in node.input if i) <= known:
        raise InputError(f"{where}: its node reads {[i for i in node.input if i][:8]} and writes "
                         f"{[o for o in node.output if o][:4]}; the layer reads {sorted(known)[:8]} and writes "
                         f"{[j['output']]}")
    return node


def _host_layer(j, arrays):
    attrs = dict(j["attrs"])
    if j["op"] == "BatchNormalization":
        attrs["params"] = [arrays[f"{j['name']}/bn{i}"] for i in range(4)]
    stub = LayerStub(j["name"], "host", False, None, (0,), None, j["inputs"], j["output"])
    if j["op"] == "fallback":              # hlsnn compile --host-fallback: the ONNX node, run by onnx's reference
        try:
            import onnx
        except ImportError:
            raise InputError(f"layer {j['name']} runs on the host with onnx's reference implementation "
                             f"(compiled with --host-fallback): pip install onnx") from None
        stub.node = _fallback_node(onnx, j, arrays)
        attrs = {"why": attrs.get("why"), "opset": [tuple(o) for o in attrs["opset"]],
                 "consts": {n: arrays[f"{j['name']}/const{i}"] for i, n in enumerate(attrs["const_names"])},
                 **({"sw": {"in_shapes": attrs["in_shapes"], "out_shape": attrs["out_shape"]}}
                    if attrs.get("in_shapes") is not None else {})}
    stub.op, stub.attrs = j["op"], attrs
    return stub
