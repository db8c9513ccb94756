"""``hlsnn deploy``: calibrate and evaluate every layer-format assignment of a deployment
config on one target, against onnx's own float evaluation of the model, layer by layer or, where
the compiled model has one, on its network kernel (:func:`network_net`), with the modelled time
of each: its engine layers' (:func:`hlsnn.deploy.reports.evaluate.modelled_latency`) and end to end, host
included (:func:`end_to_end_latency`, the compiled model's :func:`hlsnn.network.latency.model`).

It stands above the stages it runs: the deployment (:mod:`hlsnn.deploy`: import, quantize,
calibrate, the layer path and the integer program) and the compiled model (:mod:`hlsnn.network`:
the ``.hlsnn`` artifact, its loader and latency model)."""
from __future__ import annotations

import time

import numpy as np

from ..deploy import datasets
from ..deploy.importer import qimport, trained
from ..deploy.quantize import task_formats, update
from ..deploy.quantize.shift_auto import cal_labels
from ..deploy.config import deployment_kwargs, load_deploy_config
from ..deploy.reports.evaluate import (_check_data, _check_labels, _classification, _layout, _regression, as_map, file_tensor,
                               _regression_scorer, _targets, float_reference, host_bits_of, host_layers,
                               infer_task, modelled_latency, open_accelerators, pot_note)
from ..deploy.importer.onnx_import import load_onnx
from ..deploy.run.runner import Deployment
from ..errors import HlsnnError, InputError, filesystem_message, printable
from ..measure.layers import input_terms


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
    (:mod:`hlsnn.deploy.quantize.update`); with E5 the result's ``radix_update`` says how, and each
    assignment's ``radix_update`` gives every fixed-point layer's choice and modelled times.
    A model quantized elsewhere (ONNX QDQ, :mod:`hlsnn.deploy.importer.qimport`) keeps the file's radix points
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
    dep_kwargs = deployment_kwargs(cfg, update=upd[0], update_by=upd[1], host_bits=bits)
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
    cfg.formats = task_formats.resolve(cfg.formats, task, net)     # regression: fixed/sparse auto -> search, ...
    cfg.formats = trained.follow(cfg)     # a model hlsnn.train exported: its training's settings, warned of
    _check_data(cfg.data, net, ds, y_test, task)
    names = sorted({file_tensor(la)[0] for la in net.engine_layers()}) if per_layer else None
    ref = float_reference(cfg.model, x_test, names=names, output=net.output)
    y_ref, ref_tensors = ref if per_layer else (ref, {})
    result = {"model": net.name, "config": cfg.name, "target": target, "task": task,
              "test_images": int(len(x_test)),
              "calibration_images": int(len(x_cal)), "calibration_mode": cfg.calibration["mode"]}
    if task == "classification":
        if y_ref.ndim != 2:    # an ArgMax at the end gives (N,): a class index, not the scores
            raise InputError(f"{cfg.model}: output {net.output!r} has the shape {tuple(y_ref.shape[1:])} per sample; "
                             "a classifier's accuracy needs one score per class, (N, classes), whose argmax is the "
                             "class: deploy the scores (export the model without its ArgMax, or name the scores "
                             "with `output:`), or set `task: regression`")
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
            raise InputError(f"assignment {a!r} is not in {printable(cfg.path)}; it has {', '.join(cfg.assignments)}")
    accs = open_accelerators(cfg, target, wanted, **(target_options or {}))
    from ..progress import bar
    steps = bar(wanted, desc=f"deploy {cfg.name} on {target}", unit="assignment", show=progress)
    try:
        for name in steps:
            if progress:
                steps.set_postfix_str(name)
            asg = cfg.assignments[name]
            try:
                dep = Deployment(net, asg, cfg.formats, accs, **dep_kwargs, qmap=qmap, recalibrate=recalibrate)
                dep.task = task                      # how a shift format's auto fields are scored (deploy.quantize.shift_auto)
                dep.cal_labels = cal_labels(ds, len(x_cal), task)
                t_cal = dep.calibrate(x_cal)
                imported = dep.imported                 # the file's own radix points where they map exactly
                cnet = None
                if network is not False and target in ("csim", "sim") and not per_layer:
                    cnet = network_net(dep, net, cfg, name, accs, x_test[:2], target, target_options,
                                       required=bool(network))
                if cnet is None and not per_layer:
                    dep.run(x_test[:1])      # builds the compiled path (once per calibration) outside the timing
                for q in getattr(dep, "actmm", {}).values():
                    if getattr(q, "engine", None):            # count the timed run's engine calls
                        q.engine.reset()
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
                if getattr(dep, "shift_choice", None):     # a shift format's auto radix/fit (deploy.quantize.shift_auto)
                    entry["shift_choice"] = dep.shift_choice
                calib = task_formats.choices(cfg.formats, asg.formats())
                if calib:                                   # the fixed-point formats' options as resolved
                    entry["fixed_point_calibration"] = calib
                if imported is not None:
                    entry["imported_quantization"] = imported
                from ..deploy.reports import fitreport              # the output layer's refit and two terms (issue 52)
                entry.update(fitreport.entry(dep))
                if getattr(dep, "actmm", None):             # attention's MatMuls: where they ran, how many calls
                    from ..deploy.run.actmm_engine import report as actmm_report
                    entry["act_matmul"] = actmm_report(dep.actmm)
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
                        if r.shape != q.shape and q.ndim == 4 and q.shape[3] == 1 and r.size == q.size \
                                and r.shape[0] == q.shape[0] * q.shape[2]:
                            # a token-wise layer on a lifted tensor (attention in a batch-1 file): the reference
                            # holds each sample's T rows one after the other, the layer (N, C, T, 1)
                            r = np.moveaxis(r.reshape(q.shape[0], q.shape[2], q.shape[1]), 2, 1)[..., None]
                        if ex.layer.relu:        # a Clip's ReLU fused in: the file's tensor there is before it
                            r = np.maximum(r, 0)
                        k = getattr(dep, "balanced", {}).get(ln)
                        if isinstance(k, int):   # scaled by 2**k to balance a skip Concat (deploy.quantize.equalize)
                            q = np.ldexp(q, -k)
                        kc = getattr(dep, "chain_scales", {}).get(ln)
                        if kc is not None:       # channel c scaled by 2**k[c] (deploy.quantize.chain_equalize)
                            q = np.ldexp(q, -np.asarray(kc).reshape(-1, 1, 1))
                        rms = float(np.sqrt(np.mean((q - r) ** 2)) / max(np.sqrt(np.mean(r ** 2)), 1e-30))
                        st = ex.stats
                        entry["per_layer"][ln] = {
                            "format": cfg.formats[asg.format_of(ln)].name, "kind": ex.layer.describe(),
                            "relative_rms_error": rms, "f_in": st.f_in, "f_w": st.f_w, "f_out": st.f_out,
                            "weight_sparsity": st.weight_sparsity, "input_density": st.input_density,
                            "saturated_outputs": int(st.sat_count), "msb_histogram": st.histogram,
                            "kernel_calls": st.calls, **input_terms(ex)}    # the cycle model's two terms
                        if isinstance(k, int):
                            entry["per_layer"][ln]["balance_shift"] = k
                entry.update(end_to_end_latency(dep, net, cfg, name, accs, x_test[:1]))
                result["assignments"][name] = entry
            except Exception as exc:           # this assignment fails; the others' results are kept
                # an HlsnnError is a reason the user can act on; anything else is hlsnn's own bug,
                # reported with its type rather than ending the run (issue 52)
                why = str(exc).splitlines()[0] if str(exc) else ""
                # a full disk or a read-only folder is the machine's, not a bug: the CLI's one line for it
                disk = filesystem_message(exc) if isinstance(exc, OSError) else None
                result["assignments"][name] = {
                    "error": why if isinstance(exc, HlsnnError) else disk if disk is not None else
                    f"internal error, {type(exc).__name__}: {why}",
                    "layers": {la.name: asg.format_of(la.name) for la in net.engine_layers()}}
                continue
    finally:
        for acc in accs.values():
            acc.close()
    return result


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
    from ..deploy.lower.layers import program_of
    from ..network.loader import CompiledNet, kernel_network
    if cfg.calibration["mode"] != "static":
        if required:
            raise InputError(f"network=True: {printable(cfg.path)}: calibration.mode = {cfg.calibration['mode']!r}; "
                             f"the network kernel needs static radix points (mode: static)")
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
    ``path``, ``kernel_starts``, ``kernel_us``, ``host_us``, ``end_to_end_us``, ``host_layers`` (the
    layers outside the engines that the compiled model runs on the host, as ``hlsnn compile`` lists
    them) and ``fabric_layers`` (those its network kernel runs on the fabric), or is None
    with ``end_to_end_note`` saying why (a dynamic calibration: no compiled model). A ``--host-fallback``
    layer is compiled as ``hlsnn compile --host-fallback`` stores it (its cost: a GRU's or LSTM's
    fitted estimate, :func:`hlsnn.network.hostmodel.fallback_us`; another node's a generic host op's,
    a lower bound). ``x1``: one input, for the layers' shapes and densities."""
    import tempfile
    from pathlib import Path
    from ..network import artifact, latency
    from ..deploy.lower.layers import program_of
    if cfg.calibration["mode"] != "static":
        return {"end_to_end": None, "end_to_end_note": "dynamic calibration: no compiled model to model end to end"}
    try:
        fallback = any(la.kind == "host" and la.op == "fallback" for la in net.layers)
        program, arrays = program_of(dep, net, cfg, name, accs, x_cal=0, host_fallback=fallback)
        arrays["check/x"] = np.asarray(x1, np.float64)
        with tempfile.TemporaryDirectory(prefix="hlsnn-e2e-") as d:
            path = Path(d) / f"{name}.hlsnn"
            artifact.write(path, program, arrays)
            res = latency.model(path)
    except HlsnnError as exc:
        return {"end_to_end": None, "end_to_end_note": str(exc).splitlines()[0]}
    keys = ("board", "path", "kernel_starts", "kernel_us", "host_us", "end_to_end_us")
    e2e = {k: (round(res[k], 3) if isinstance(res[k], float) else res[k]) for k in keys}
    # where the board runs the layers outside the engines (as `hlsnn compile` says): the network
    # kernel takes those it lowers (residual Adds, ReLUs, pools, flattens) onto the fabric
    e2e["host_layers"] = list(res.get("host_before_layers", [])) + list(res["host_only_layers"])
    e2e["fabric_layers"] = ([la.name for la in net.layers if la.kind == "host" and la.name not in e2e["host_layers"]]
                            if res["path"] == "network" else [])
    return {"end_to_end": e2e}
