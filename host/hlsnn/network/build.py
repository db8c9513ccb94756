"""``hlsnn compile MODEL.yaml --assignment A -o NAME.hlsnn``: import, calibrate once (on the
emulator, static radix points), and write everything an inference needs into one file
(:mod:`hlsnn.network.artifact`). This side needs onnx and the data set; the board does not."""
from __future__ import annotations

import numpy as np

from .. import __version__
from ..errors import InputError
from . import artifact
from .layers import capture


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


def compile_model(config_path, assignment, output, *, check_samples=4, calibration_samples=None,
                  host_fallback=False):
    """Compile one assignment of a deployment config to ``output``; returns the program.
    ``host_fallback``: nodes no rule covers run on the host with onnx's reference
    implementation (``hlsnn deploy --host-fallback``); the loader then needs onnx."""
    from ..deploy import datasets
    from ..deploy.config import load_deploy_config
    from ..deploy.evaluate import _layout, open_accelerators
    from ..deploy.onnx_import import load_onnx
    from ..deploy.runner import Deployment
    cfg = load_deploy_config(config_path)
    if assignment not in cfg.assignments:
        raise InputError(f"--assignment {assignment!r}: not in {cfg.path}; it has {', '.join(cfg.assignments)}")
    cal = cfg.calibration
    if cal["mode"] != "static":
        raise InputError(f"{cfg.path}: calibration.mode = {cal['mode']!r}: a compiled model needs static radix "
                         f"points (mode: static)")
    if not 0 <= check_samples <= 64:
        raise InputError(f"check samples = {check_samples}: 0..64")
    net = load_onnx(cfg.model, output=cfg.output, host_fallback=host_fallback)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    x_cal = ds.x_train[:calibration_samples or cal["samples"]]
    asg = cfg.assignments[assignment]
    accs = open_accelerators(cfg, "emu", [assignment])
    try:
        dep = Deployment(net, asg, cfg.formats, accs, overflow_ratio=cal["overflow_ratio"], rounding=cfg.rounding,
                         update=cal["update"], update_by=cal["update_by"], update_percent=cal["percent"])
        dep.calibrate(x_cal)
        from ..deploy import qimport                    # issue 50: a file's own radix points where they map exactly
        qmap = qimport.layer_mapping(net, cfg.model)
        if qmap:
            qimport.for_assignment(qmap, dep)
        xc = np.asarray(ds.x_test[:check_samples], np.float64) if check_samples else None
        program, arrays = program_of(dep, net, cfg, assignment, accs, x_cal=len(x_cal), x_check=xc,
                                     host_fallback=host_fallback)
        artifact.write(output, program, arrays)
        return program
    finally:
        for a in accs.values():
            a.close()


def program_of(dep, net, cfg, assignment, accs, *, x_cal, x_check=None, host_fallback=False):
    """The layer program and arrays of a calibrated deployment ``dep`` (one assignment of the
    deployment config ``cfg``, its accelerators ``accs``): what :func:`compile_model` writes,
    and what ``hlsnn deploy`` models end to end. ``x_cal``: the calibration images' count;
    ``x_check``: the self-check inputs (their outputs are stored), or None; ``host_fallback``:
    store the ``--host-fallback`` layers (their ONNX nodes) instead of refusing them."""
    from ..names import check_slug
    check_slug(f"{getattr(cfg, 'model', 'the model')}: the model's name (its file name without .onnx)", net.name)
    asg = cfg.assignments[assignment]
    cal = cfg.calibration
    used = {cfg.formats[asg.format_of(la.name)].accel for la in net.engine_layers()}
    keys = {a: accs[a].config.stem or accs[a].config.name for a in sorted(used)}
    program = {"name": net.name, "model": cfg.name, "assignment": assignment, "hlsnn": __version__,
               "rounding": cfg.rounding, "overflow_ratio": cal["overflow_ratio"],
               "calibration": {"images": int(x_cal), "mode": "static", "update": cal["update"]},
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
                                                              "opset": [list(o) for o in la.attrs["opset"]]})})
                continue
            attrs = {k: v for k, v in la.attrs.items() if k != "params"}
            program["layers"].append({"name": la.name, "kind": "host", "op": la.op, "inputs": list(la.inputs),
                                      "output": la.output, "attrs": _jsonable(attrs)})
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
