"""``hlsnn deploy``: calibrate and evaluate every layer-format assignment of a deployment
config on one target, against onnx's own float evaluation of the model."""
from __future__ import annotations

import time
from contextlib import contextmanager

import numpy as np

from ..errors import HlsnnError, InputError, MissingDependency
from . import datasets, update
from .config import load_deploy_config
from .onnx_import import load_onnx
from . import qimport
from .runner import Deployment
from .hostquant import check_host_bits

TARGETS = ("emu", "csim", "sim", "pynq")


def reference_evaluator(path):
    """onnx's ReferenceEvaluator for ``path``: the float reference. Its one correction is
    inference-mode BatchNormalization for opsets 9-13, which the stock reference normalizes
    with batch statistics (:func:`hlsnn.deploy.reference.reference_evaluator`)."""
    try:
        import onnx.reference  # noqa: F401
    except ImportError:
        raise MissingDependency('the float reference needs the onnx package: pip install "hlsnn[deploy]"') from None
    from .reference import reference_evaluator as fixed_bn_evaluator
    return fixed_bn_evaluator(str(path))


def float_reference(path, x, *, names=None, batch=512, output=None):
    """Float outputs of the ONNX model on ``x`` (and the tensors ``names``, if given), from
    onnx's ReferenceEvaluator, as float64; evaluated in batches."""
    from .reference import run
    ev = reference_evaluator(path)
    inp = ev.input_names[0]
    vi = next((v for v in getattr(getattr(ev, "proto_", None), "graph", None).input if v.name == inp), None) \
        if hasattr(getattr(ev, "proto_", None), "graph") else None
    dims = [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim] if vi else []
    if dims[:1] == [1]:
        batch = 1        # an export with the batch fixed at 1: onnx evaluates it one sample a time
    outs, inter = [], {n: [] for n in names or ()}
    for a in range(0, len(x), batch):
        feeds = {inp: np.asarray(x[a:a + batch], np.float32)}
        if names:
            res = run(ev, None, feeds, ev.hlsnn_where, intermediate=True)
            for n in names:
                inter[n].append(np.asarray(res[n], np.float64))
            outs.append(np.asarray(res[output or ev.output_names[0]], np.float64))
        else:
            outs.append(np.asarray(run(ev, [output] if output else None, feeds, ev.hlsnn_where)[0], np.float64))
    y = np.concatenate(outs)
    return (y, {n: np.concatenate(v) for n, v in inter.items()}) if names else y


TASKS = ("classification", "regression")


def infer_task(task, y_test):
    """The deployment's task: ``task`` when given (``"classification"``/``"regression"``),
    else (``"auto"``) classification when the data have integer labels ``y_test`` of one per
    sample, regression otherwise (float targets of any shape, or none)."""
    if task in TASKS:
        return task
    if y_test is not None and y_test.ndim == 1 and y_test.dtype.kind in "iu":
        return "classification"
    return "regression"


def _check_data(data, net, ds, y_test, task):
    """The data fit the model: the feature shape the model's input declares, and (classification)
    labels that are class indices of its output (labels beyond it gave 0% accuracy without a
    word)."""
    want = tuple(net.input_shape[1:])
    for what, x in (("x_train", ds.x_train), ("x_test", ds.x_test)):
        got = tuple(np.shape(x)[1:])
        if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
            raise InputError(f"{data}: {what} has samples of shape {got}; the model {net.name} takes {want}")
    if task == "regression":
        return
    if y_test is None:
        raise InputError(f"{data}: classification needs labels y_test (or set task: regression, which compares "
                         f"with the float model's outputs)")
    if y_test.size and (y_test.ndim != 1 or y_test.dtype.kind not in "iu" or y_test.min() < 0):
        raise InputError(f"{data}: y_test must be non-negative integer class labels, one per sample, got dtype "
                         f"{y_test.dtype} and shape {y_test.shape} (float targets: set task: regression)")


def _check_labels(data, y_test, n_classes):
    if y_test.size and y_test.max() >= n_classes:
        raise InputError(f"{data}: label {int(y_test.max())} is not a class of the model's {n_classes} outputs "
                         f"(labels must be 0..{n_classes - 1})")


HOST_PRECISIONS = ("float", "quantized")


def host_bits_of(host_precision="float", host_bits=8):
    """The quantized host mode's width, or None for float host layers. ``host_precision``:
    ``"float"`` (host ops in float64, ``--host-fallback`` nodes in float32) or ``"quantized"``
    (every host op that computes, fallback nodes included, runs between ``host_bits``-bit
    fixed-point inputs and outputs: :class:`hlsnn.deploy.hostquant.HostQuant`)."""
    if host_precision == "float":
        return None
    if host_precision != "quantized":
        raise InputError(f"host precision = {host_precision!r}: expected one of {', '.join(HOST_PRECISIONS)}")
    return check_host_bits(host_bits)


def host_layers(net, host_bits=None) -> list:
    """Every layer that runs on the host, and in what precision: what the reports must say, so
    that accuracy and latency are never read as the FPGA's alone. ``host_bits``: the quantized
    host mode's width (None: float host layers)."""
    from .hostops import EXACT
    out = []
    for layer in net.layers:
        if layer.kind != "host":
            continue
        op = getattr(layer.node, "op_type", "?") if layer.op == "fallback" else layer.op
        if layer.op in ("Clip", "Concat", "Pad"):
            how = ("exact on fixed-point values: keeps the input's format when its "
                   + {"Clip": "bounds are values of it (a clamp)", "Concat": "inputs share one format",
                      "Pad": "pad value is a value of it"}[layer.op])
        elif layer.op in EXACT:
            how = "exact on fixed-point values (moves or selects them)"
        elif layer.op == "MatMulAct":
            how = ("integers: both operands quantized at run time in the nearest engine layer's format "
                   "(BFP rows and columns, or per-sample fixed point), the product exact")
        elif host_bits is not None:
            how = (f"{host_bits}-bit fixed point in and out (radix points by DETERMINE when calibrating), "
                   + ("onnx's reference implementation (--host-fallback)" if layer.op == "fallback"
                      else "float64 in numpy") + " between them")
        elif layer.op == "fallback":
            how = "float32, onnx's reference implementation (--host-fallback): not what the board computes"
        else:
            how = "float64 in numpy; the next accelerator layer requantizes the result"
        out.append({"layer": layer.name, "op": op, "precision": how})
    return out


def file_tensor(layer):
    """The model file's tensor an engine layer's output is, and how it is held there: (name,
    None), or for a 1-D or token-wise layer, whose output is a map of the importer's own,
    (the file's (N, Z, L) or (N, *lead, O) tensor, "1d" or "rows")."""
    return tuple(layer.attrs.get("file_output", (layer.output, None)))


def as_map(layer, r):
    """The file's tensor ``r`` of ``layer``'s output (:func:`file_tensor`) as the layer holds it."""
    how = file_tensor(layer)[1]
    if how == "1d":
        return r[..., None]
    if how == "rows":
        return np.ascontiguousarray(np.moveaxis(r.reshape(r.shape[0], -1, r.shape[-1]), 2, 1)[..., None])
    return r


def _layout(net, ds_layout):
    shape = net.input_shape
    if ds_layout != "auto":
        return ds_layout
    return {4: "nchw", 3: "ncl"}.get(len(shape), "flat")


def open_accelerators(cfg, target, assignments=None, **target_options):
    """One :class:`~hlsnn.Accelerator` per accel config the formats use, on ``target``; with
    ``assignments`` (names), only those the formats of these assignments use (a C-simulation
    or a simulated board is built for each one opened)."""
    from .. import Accelerator
    if target not in TARGETS:
        raise InputError(f"target = {target!r}: must be one of {', '.join(TARGETS)}")
    used = None if assignments is None else set().union(*(cfg.assignments[a].formats() for a in assignments))
    accs = {}
    try:
        for name, f in cfg.formats.items():
            if (used is None or name in used) and f.accel not in accs:
                accs[f.accel] = Accelerator(f.accel, target, **target_options)
    except BaseException:
        for a in accs.values():
            a.close()
        raise
    return accs


@contextmanager
def open_deployment(config_path, assignment=None, target="emu", *, host_fallback=False, **target_options):
    """A :class:`~hlsnn.deploy.runner.Deployment` of one assignment of a deployment config, its
    accelerators open on ``target`` for the ``with`` block (closed after it), for running the
    model on your own inputs::

        with open_deployment("configs/models/digits_mlp.yaml", "bfp8") as dep:
            dep.calibrate(x_cal)          # radix points (fixed-point formats) from these inputs
            y = dep.run(x)                # the model's outputs, float64, batch first

    ``assignment``: its name (default: the config's first); the deployment takes the config's
    calibration settings and rounding."""
    cfg = load_deploy_config(config_path)
    name = assignment or next(iter(cfg.assignments))
    if name not in cfg.assignments:
        raise InputError(f"assignment {name!r} is not in {cfg.path}; it has {', '.join(cfg.assignments)}")
    net = load_onnx(cfg.model, host_fallback=host_fallback, output=cfg.output)
    cal = cfg.calibration
    accs = open_accelerators(cfg, target, [name], **target_options)
    try:
        yield Deployment(net, cfg.assignments[name], cfg.formats, accs, overflow_ratio=cal["overflow_ratio"],
                         rounding=cfg.rounding, dynamic=cal["mode"] == "dynamic", update=cal["update"],
                         update_by=cal["update_by"], update_percent=cal["percent"])
    finally:
        for acc in accs.values():
            acc.close()


def deploy(config_path, target="emu", *, assignments=None, host_fallback=False, host_precision="float", host_bits=8,
           per_layer=False, test_samples=None, target_options=None, progress=False, radix_update=None,
           radix_update_by=None, network=None, recalibrate=False):
    """Run a deployment config: import the model, load the data, evaluate the float model
    with onnx's ReferenceEvaluator, then for each assignment calibrate on the calibration
    images and run the test images on ``target``.

    Returns a dict: ``model``, ``target``, ``float_accuracy``, and per assignment its
    ``accuracy``, ``images_per_s`` (test inference, calibration excluded), ``calibration_s``,
    the layer formats and, with ``per_layer``, each engine layer's radix points, weight
    sparsity, saturation count and relative RMS error against the float reference.
    ``progress``: a bar over the assignments on stderr (:mod:`hlsnn.progress`).
    ``host_fallback``: run unsupported nodes on the host; ``host_precision`` (``"float"`` or
    ``"quantized"``, with ``host_bits``): how every computing host layer runs, see
    :func:`host_bits_of`. The result's ``host_precision`` says which ran.
    ``radix_update`` (``"e1"``/``"e5"``) and ``radix_update_by`` (``"layer"``/``"op_type"``)
    override the config's ``calibration.update`` and ``calibration.update_by``
    (:mod:`hlsnn.deploy.update`); with E5 the result's ``radix_update`` says how, and each
    assignment's ``radix_update`` gives every fixed-point layer's choice and modelled times.
    A model quantized elsewhere (ONNX QDQ, :mod:`hlsnn.deploy.qimport`) keeps the file's radix points
    in every layer that maps onto its format exactly (``recalibrate`` calibrates them instead); each
    assignment's ``imported_quantization`` says per layer ``exact`` or ``approximated`` and why.
    ``network`` (csim and sim only; :func:`network_net`): None runs the test images through the
    assignment's network kernel where the compiled model has one (one kernel start for the
    whole test set, after a bit-for-bit self-check against the layer-by-layer path), False runs
    them layer by layer, True requires the network kernel. Each assignment's ``run`` says which.
    """
    bits = host_bits_of(host_precision, host_bits)
    cfg = load_deploy_config(config_path)
    cal = cfg.calibration
    upd = update.check(radix_update or cal["update"], radix_update_by or cal["update_by"], cal["percent"])
    net = load_onnx(cfg.model, host_fallback=host_fallback, output=cfg.output)
    qmap = qimport.layer_mapping(net, cfg.model)         # {} unless the file holds Q/DQ nodes
    layout = _layout(net, cfg.layout)
    ds = datasets.load(cfg.data, layout=layout)
    if ds.x_train is None:
        raise InputError(f"{cfg.data}: calibration needs x_train")
    x_cal = ds.x_train[:cfg.calibration["samples"]]
    n_test = test_samples if test_samples is not None else (cfg.test_samples or len(ds.x_test))
    x_test = ds.x_test[:n_test]
    y_test = None if ds.y_test is None else np.asarray(ds.y_test[:n_test])
    if cfg.targets == "inputs":             # an autoencoder: the targets are the inputs themselves
        y_test = np.asarray(x_test, np.float64)
    task = infer_task(cfg.task, y_test)
    _check_data(cfg.data, net, ds, y_test, task)
    names = sorted({file_tensor(la)[0] for la in net.engine_layers()}) if per_layer else None
    ref = float_reference(cfg.model, x_test, names=names, output=net.output)
    y_ref, ref_tensors = ref if per_layer else (ref, {})
    result = {"model": net.name, "config": cfg.name, "target": target, "task": task,
              "test_images": int(len(x_test)),
              "calibration_images": int(len(x_cal)), "calibration_mode": cfg.calibration["mode"]}
    if task == "classification":
        _check_labels(cfg.data, y_test, y_ref.shape[1])
        result["float_accuracy"] = float(np.mean(np.argmax(y_ref, axis=1) == y_test))
        score = _classification(y_test, y_ref)
    else:
        targets = _targets(cfg.data, y_test, y_ref)
        result["reference"] = ("the float model's outputs" if targets is None else "the inputs"
                               if cfg.targets == "inputs" else "y_test of the data")
        result.update({f"float_{k}": v for k, v in _regression(targets, y_ref, y_ref).items()
                       if k in ("mse", "mae")})
        score = _regression_scorer(targets, y_ref)
    result.update({"assignments": {}, "host_layers": host_layers(net, bits),
              "host_precision": "float" if bits is None else f"quantized {bits}-bit",
              "radix_update": {"update": upd[0], "by": upd[1], "percent": upd[2]}})
    wanted = assignments or list(cfg.assignments)
    for a in wanted:
        if a not in cfg.assignments:
            raise InputError(f"assignment {a!r} is not in {cfg.path}; it has {', '.join(cfg.assignments)}")
    accs = open_accelerators(cfg, target, wanted, **(target_options or {}))
    from ..progress import bar
    steps = bar(wanted, desc=f"deploy {cfg.name} on {target}", unit="assignment", show=progress)
    try:
        for name in steps:
            if progress:
                steps.set_postfix_str(name)
            asg = cfg.assignments[name]
            try:
                dep = Deployment(net, asg, cfg.formats, accs, overflow_ratio=cfg.calibration["overflow_ratio"],
                                 rounding=cfg.rounding, dynamic=cfg.calibration["mode"] == "dynamic",
                                 host_bits=bits, update=upd[0], update_by=upd[1], update_percent=upd[2])
                t_cal = dep.calibrate(x_cal)
                imported = qimport.for_assignment(qmap, dep, recalibrate) if qmap else None
                cnet = None
                if network is not False and target in ("csim", "sim") and not per_layer:
                    cnet = network_net(dep, net, cfg, name, accs, x_test[:2], target, target_options,
                                       required=bool(network))
                if cnet is None and not per_layer:
                    dep.run(x_test[:1])      # builds the compiled path (once per calibration) outside the timing
                t0 = time.perf_counter()
                if cnet is not None:
                    with cnet:
                        y, env = cnet.run(x_test), {}
                else:
                    # the tensors only when the report needs them: keep=True turns the compiled paths off
                    y, env = dep.run(x_test, keep=True) if per_layer else (dep.run(x_test), {})
                dt = time.perf_counter() - t0
                entry = dict(score(y))
                entry.update({
                    "images_per_s": round(len(x_test) / dt, 1) if dt > 0 else None,
                    "calibration_s": round(t_cal, 3),
                    "layers": {ln: cfg.formats[asg.format_of(ln)].name for ln in dep.execs},
                })
                if imported is not None:
                    entry["imported_quantization"] = imported
                entry["run"] = ({"path": "network kernel", "kernel_starts": 1, "batch": int(len(x_test))}
                                if cnet is not None else {"path": "layer by layer"})
                entry.update(modelled_latency(dep, cfg, asg))
                note = pot_note(entry, result, {cfg.formats[asg.format_of(ln)].type for ln in dep.execs})
                if note:
                    entry["note"] = note
                if upd[0] == "e5":
                    entry["radix_update"] = {ln: dict(ex.stats.update) for ln, ex in dep.execs.items()
                                             if ex.stats.update}
                if dep.host:
                    entry["host_fixed_point"] = {
                        ln: {"f_in": [h.f_in.get(i) for i in range(len(h.layer.inputs))], "f_out": h.f_out,
                             "bits": h.bits, "signed": h.signed, "saturated_outputs": h.sat_count}
                        for ln, h in dep.host.items()}
                if per_layer:
                    entry["per_layer"] = {}
                    for ln, ex in dep.execs.items():
                        out = ex.layer.output
                        r, q = as_map(ex.layer, ref_tensors[file_tensor(ex.layer)[0]]), env[out]
                        if ex.layer.relu:        # a Clip's ReLU fused in: the file's tensor there is before it
                            r = np.maximum(r, 0)
                        rms = float(np.sqrt(np.mean((q - r) ** 2)) / max(np.sqrt(np.mean(r ** 2)), 1e-30))
                        st = ex.stats
                        entry["per_layer"][ln] = {
                            "format": cfg.formats[asg.format_of(ln)].name, "kind": ex.layer.describe(),
                            "relative_rms_error": rms, "f_in": st.f_in, "f_w": st.f_w, "f_out": st.f_out,
                            "weight_sparsity": st.weight_sparsity, "input_density": st.input_density,
                            "saturated_outputs": int(st.sat_count), "msb_histogram": st.histogram,
                            "kernel_calls": st.calls}
                entry.update(end_to_end_latency(dep, net, cfg, name, accs, x_test[:1]))
                result["assignments"][name] = entry
            except Exception as exc:           # this assignment fails; the others' results are kept
                # an HlsnnError is a reason the user can act on; anything else is hlsnn's own bug,
                # reported with its type rather than ending the run (issue 52)
                why = str(exc).splitlines()[0] if str(exc) else ""
                result["assignments"][name] = {
                    "error": why if isinstance(exc, HlsnnError) else f"internal error, {type(exc).__name__}: {why}",
                    "layers": {la.name: asg.format_of(la.name) for la in net.engine_layers()}}
                continue
    finally:
        for acc in accs.values():
            acc.close()
    return result


def _classification(y_test, y_ref):
    def score(y):
        return {"accuracy": float(np.mean(np.argmax(y, axis=1) == y_test)),
                "agreement_with_float": float(np.mean(np.argmax(y, axis=1) == np.argmax(y_ref, axis=1)))}
    return score


def _targets(data, y_test, y_ref):
    """The regression targets: float ``y_test`` with one target of the model's output size per
    sample, or None (then the float model's outputs are the reference)."""
    if y_test is None:
        return None
    if y_test.dtype.kind in "iub":       # integer targets are targets too (issue 47: they were dropped)
        y_test = y_test.astype(np.float64)
    if y_test.dtype.kind != "f":
        raise InputError(f"{data}: y_test of dtype {y_test.dtype}: regression targets are numbers")
    if not np.isfinite(y_test).all():
        raise InputError(f"{data}: y_test has {int((~np.isfinite(y_test)).sum())} non-finite target(s) (NaN or "
                         f"Inf); an error against them has no value")
    if y_test.shape[0] != y_ref.shape[0] or y_test[0].size != y_ref[0].size:
        raise InputError(f"{data}: y_test has targets of shape {y_test.shape[1:]}; the model's output has "
                         f"{y_ref.shape[1:]} per sample ({y_ref[0].size} values)")
    return y_test.reshape(y_ref.shape).astype(np.float64)


def _regression(targets, y, y_ref):
    """MSE and MAE of ``y`` against ``targets`` (None: against the float outputs ``y_ref``) and
    the relative error against the float outputs, ``||y - y_ref|| / ||y_ref||`` (Frobenius)."""
    t = y_ref if targets is None else targets
    d = np.asarray(y, np.float64).reshape(t.shape) - t
    norm = float(np.linalg.norm(y_ref))
    return {"mse": float(np.mean(d ** 2)), "mae": float(np.mean(np.abs(d))),
            "relative_error": float(np.linalg.norm(np.asarray(y).reshape(y_ref.shape) - y_ref) / norm)
            if norm > 0 else 0.0}


def _regression_scorer(targets, y_ref):
    return lambda y: _regression(targets, y, y_ref)


#: An assignment with power-of-two layers gets :func:`pot_note` when it loses more than this many
#: accuracy points against float (issue 32's bar), or (regression) raises the MSE by more than
#: this fraction of the float model's.
POT_NOTE_POINTS = 1.0
POT_NOTE_MSE = 0.10


def pot_note(entry, result, types):
    """The note beside an assignment whose layers include power-of-two weights (format types
    ``types``) and that loses accuracy: its measured loss against float and why, e.g. ``"pot:
    -22.5 pts vs float: power-of-two weights without retraining; use two-hot or retrain"``,
    or None (no pot layer, or a loss within :data:`POT_NOTE_POINTS` points / an MSE within
    :data:`POT_NOTE_MSE` of float's)."""
    if "pot" not in types:
        return None
    why = "power-of-two weights without retraining; use two-hot or retrain"
    if "accuracy" in entry and result.get("float_accuracy") is not None:
        delta = 100 * (entry["accuracy"] - result["float_accuracy"])
        return f"pot: {delta:+.1f} pts vs float: {why}" if delta < -POT_NOTE_POINTS else None
    fl = result.get("float_mse")
    if "mse" in entry and fl:
        ratio = entry["mse"] / fl
        return f"pot: MSE {ratio:.2f}x float's: {why}" if ratio > 1 + POT_NOTE_MSE else None
    return None


def modelled_latency(dep, cfg, asg) -> dict:
    """The modelled engine time per image (batch 1) of a run deployment: every engine layer's
    kernel calls costed by the cycle model, as the report's latency section
    (:func:`hlsnn.measure.layers.layer_cycles`, at the measured weight sparsity and input
    density), in microseconds: ``modelled_us_per_image`` (the sum) and ``modelled_us_by_layer``.
    Host work (im2col, requantization, host ops) and DMA set-up are not included."""
    from ..measure.layers import layer_cycles
    by_layer = {}
    for ln, ex in dep.execs.items():
        f = cfg.formats[asg.format_of(ln)]
        hw = tuple(ex.in_shape[-2:]) if ex.layer.kind == "conv" else None
        try:
            r = layer_cycles(ex.layer, ex.acc.config, 1, fmt_type=f.type, in_hw=hw,
                             weight_sparsity=ex.stats.weight_sparsity, input_density=ex.stats.input_density)
        except HlsnnError:
            return {"modelled_us_per_image": None, "modelled_us_by_layer": {}}
        by_layer[ln] = round(float(r["us"]), 3)
    return {"modelled_us_per_image": round(sum(by_layer.values()), 3), "modelled_us_by_layer": by_layer}


def network_net(dep, net, cfg, name, accs, x_check, target, target_options, *, required=False):
    """The calibrated assignment ``name`` compiled (as ``hlsnn compile`` writes it, into a
    temporary file) and loaded on ``target`` (csim or sim) with its network kernel, or None
    where it has none (a dynamic calibration, a ``--host-fallback`` layer, an engine or a layer
    the network kernels do not run yet; ``required`` turns that into an error naming why).
    The self-check pairs are ``x_check`` run layer by layer on the same target, so loading it
    checks the network kernel against the layer kernels bit for bit before any test image runs."""
    import tempfile
    from pathlib import Path
    from ..network import artifact
    from ..network.layers import program_of
    from ..network.loader import CompiledNet, kernel_network
    if cfg.calibration["mode"] != "static":
        if required:
            raise InputError(f"network=True: {cfg.path}: calibration.mode = {cfg.calibration['mode']!r}; the "
                             f"network kernel needs static radix points (mode: static)")
        return None
    x_check = np.asarray(x_check, np.float64)
    try:
        program, arrays = program_of(dep, net, cfg, name, accs, x_cal=0, x_check=x_check)
    except InputError:
        if required:
            raise
        return None
    try:                        # what the network kernels refuse, before anything is built
        kernel_network(program, arrays)
    except InputError:
        if required:
            raise
        return None
    with tempfile.TemporaryDirectory(prefix="hlsnn-deploy-") as d:
        path = Path(d) / f"{name}.hlsnn"
        artifact.write(path, program, arrays)
        return CompiledNet(path, target, network=True, **dict(target_options or {}))


def end_to_end_latency(dep, net, cfg, name, accs, x1) -> dict:
    """The modelled end-to-end time per image (batch 1, host included) of assignment ``name``
    on its board, as ``hlsnn perf NAME.hlsnn`` gives it for the compiled model
    (:func:`hlsnn.network.latency.model`): the network kernel's path where the model has one
    (one kernel start), else today's layer-by-layer calls. ``end_to_end`` holds ``board``,
    ``path``, ``kernel_starts``, ``kernel_us``, ``host_us`` and ``end_to_end_us``, or is None
    with ``end_to_end_note`` saying why (a dynamic calibration or a ``--host-fallback`` layer:
    no compiled model). ``x1``: one input, for the layers' shapes and densities."""
    import tempfile
    from pathlib import Path
    from ..network import artifact, latency
    from ..network.layers import program_of
    if cfg.calibration["mode"] != "static":
        return {"end_to_end": None, "end_to_end_note": "dynamic calibration: no compiled model to model end to end"}
    try:
        program, arrays = program_of(dep, net, cfg, name, accs, x_cal=0)
        arrays["check/x"] = np.asarray(x1, np.float64)
        with tempfile.TemporaryDirectory(prefix="hlsnn-e2e-") as d:
            path = Path(d) / f"{name}.hlsnn"
            artifact.write(path, program, arrays)
            res = latency.model(path)
    except HlsnnError as exc:
        return {"end_to_end": None, "end_to_end_note": str(exc).splitlines()[0]}
    keys = ("board", "path", "kernel_starts", "kernel_us", "host_us", "end_to_end_us")
    return {"end_to_end": {k: (round(res[k], 3) if isinstance(res[k], float) else res[k]) for k in keys}}


def format_result(res) -> str:
    head = (f"{res['model']} on {res['target']}: {res['test_images']} test images, calibrated on "
            f"{res['calibration_images']} ({res['calibration_mode']}); ")
    regression = res.get("task") == "regression"
    if regression:
        lines = [head + f"regression against {res['reference']}: float MSE {res['float_mse']:.4g}, MAE "
                 f"{res['float_mae']:.4g} (onnx ReferenceEvaluator)",
                 f"  {'assignment':<14} {'MSE':>10} {'MAE':>10} {'rel. err':>9} {'images/s':>10} {'model us':>9}"
                 f" {'e2e us':>9}  layers"]
    else:
        lines = [head + f"float accuracy {100 * res['float_accuracy']:.2f}% (onnx ReferenceEvaluator)",
                 f"  {'assignment':<14} {'accuracy':>9} {'vs float':>9} {'images/s':>10} {'model us':>9} "
                 f"{'e2e us':>9}  layers"]
    for name, e in res["assignments"].items():
        layers = ", ".join(f"{k}={v}" for k, v in e["layers"].items())
        if "error" in e:
            lines.append(f"  {name:<14} FAILED: {e['error']}")
            continue
        us = e.get("modelled_us_per_image")
        us = f"{us:>9.1f}" if us is not None else f"{'n/a':>9}"
        e2e = (e.get("end_to_end") or {}).get("end_to_end_us")
        us += f" {e2e:>9.1f}" if e2e is not None else f" {'n/a':>9}"
        if regression:
            lines.append(f"  {name:<14} {e['mse']:>10.4g} {e['mae']:>10.4g} {100 * e['relative_error']:>8.2f}% "
                         f"{e['images_per_s'] or 0:>10.1f} {us}  {layers}")
            if e.get("note"):
                lines.append(f"  {'':<14} note: {e['note']}")
            continue
        delta = 100 * (e["accuracy"] - res["float_accuracy"])
        lines.append(f"  {name:<14} {100 * e['accuracy']:>8.2f}% {delta:>+8.2f}  {e['images_per_s'] or 0:>10.1f} "
                     f"{us}  {layers}")
        if (e.get("run") or {}).get("path") == "network kernel":
            lines.append(f"  {'':<14} ran on the network kernel: {e['run']['batch']} images in one kernel start")
        if e.get("note"):
            lines.append(f"  {'':<14} note: {e['note']}")
        lines += format_imported(e)
    boards = sorted({(e["end_to_end"]["board"]) for e in res["assignments"].values() if e.get("end_to_end")})
    lines.append(f"  e2e us: modelled end to end per image, host included (batch 1, `hlsnn perf NAME.hlsnn` of the "
                 f"compiled model on {', '.join(boards) or 'its board'}; the network kernel where it runs the "
                 f"model, else one call per layer): a model, not a measurement")
    lines.append("  model us: modelled engine time per image (batch 1, the cycle model of `hlsnn perf`; host work "
                 "not included): a model, not a measurement")
    lines += format_update(res)
    hosts = res.get("host_layers") or []
    if hosts:
        lines.append(f"  on the host ({len(hosts)} layer(s), in every assignment):")
        lines += [f"    {h['layer']} ({h['op']}): {h['precision']}" for h in hosts]
    fallback = [h for h in hosts if h["precision"].startswith("float32") and "--host-fallback" in h["precision"]]
    if fallback:
        lines.append(f"  NOTE: {len(fallback)} layer(s) ran in float on the host through --host-fallback "
                     f"({', '.join(h['layer'] for h in fallback)}); accuracy and speed are not the board's")
    return "\n".join(lines)


def format_imported(e) -> list:
    """The lines of a model quantized elsewhere: per engine layer, exact or approximated (and why,
    with the weight error)."""
    imp = e.get("imported_quantization")
    if not imp:
        return []
    n = sum(v["mapping"] == "exact" for v in imp.values())
    lines = [f"  {'':<14} the file's quantization: {n} of {len(imp)} layer(s) exact"]
    for ln, v in imp.items():
        err = v.get("weight_max_abs_error")
        err = f", weight error <= {err:.3g}" if err else ""
        lines.append(f"  {'':<16}{ln}: {v['mapping']} (weights {v['weights']}, in {v['input']}, out {v['output']})"
                     + (f": {v['why']}" if v["why"] else "") + err)
    return lines


def format_update(res) -> list:
    """The E5 lines of the deploy table: per assignment and fixed-point layer, the modelled
    times of E2 and E4 and the method chosen (none unless E5 ran)."""
    ru = res.get("radix_update") or {}
    rows = [(n, ln, u) for n, e in res["assignments"].items() for ln, u in (e.get("radix_update") or {}).items()]
    if ru.get("update") != "e5" or not rows:
        return []
    u0 = rows[0][2]
    by = "per operation type" if ru["by"] == "op_type" else "per layer"
    lines = [f"  radix-point update: E5 {by} (E2 or E4, the faster by the cycle model; sample "
             f"{u0['sampled_images']} of {u0['batch']} calibration images), modelled us per batch:",
             f"    {'assignment':<14} {'layer':<12} {'E2 us':>10} {'E4 us':>10}  chosen"]
    for n, ln, u in rows:
        how = u["method"].upper() + (f" (type {u['op_type']}: E2 {u['compared_e2_us']:.2f}, E4 "
                                     f"{u['compared_e4_us']:.2f})" if u["by"] == "op_type" else "")
        how += f"; {u['note']}" if u["note"] else ""
        lines.append(f"    {n:<14} {ln:<12} {u['e2_us']:>10.2f} {u['e4_us']:>10.2f}  {how}")
    return lines
