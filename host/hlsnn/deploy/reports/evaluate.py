"""What ``hlsnn deploy`` evaluates a deployment config with (:func:`hlsnn.evaluation.run.deploy`
runs it): onnx's own float evaluation of the model, the checks of its data, the accelerators and
the :class:`~hlsnn.deploy.run.runner.Deployment` of an assignment (:func:`open_deployment`), the
scores, the modelled engine time per layer and the result table."""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from ...errors import HlsnnError, InputError, MissingDependency, printable
from ..config import deployment_kwargs, load_deploy_config
from ..importer.onnx_import import load_onnx
from ..run.runner import Deployment
from ..run.hostquant import check_host_bits
from ..quantize.task_formats import TASKS, infer_task  # noqa: F401  (defined there: a regression's fixed-point auto fields)

TARGETS = ("emu", "csim", "sim", "pynq")


def reference_evaluator(path):
    """onnx's ReferenceEvaluator for ``path``: the float reference. Its one correction is
    inference-mode BatchNormalization for opsets 9-13, which the stock reference normalizes
    with batch statistics (:func:`hlsnn.deploy.importer.reference.reference_evaluator`)."""
    try:
        import onnx.reference  # noqa: F401
    except ImportError:
        raise MissingDependency('the float reference needs the onnx package: pip install "hlsnn[deploy]"') from None
    from ..importer.reference import reference_evaluator as fixed_bn_evaluator
    return fixed_bn_evaluator(str(path))


def float_reference(path, x, *, names=None, batch=512, output=None):
    """Float outputs of the ONNX model on ``x`` (and the tensors ``names``, if given), from
    onnx's ReferenceEvaluator, as float64; evaluated in batches."""
    from ..importer.reference import run
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


def _check_data(data, net, ds, y_test, task):
    """The data fit the model: the feature shape the model's input declares, and (classification)
    labels that are class indices of its output (labels beyond it gave 0% accuracy without a
    word)."""
    want = tuple(net.input_shape[1:])
    for what, x in (("x_train", ds.x_train), ("x_test", ds.x_test)):
        got = tuple(np.shape(x)[1:])
        if len(got) != len(want) or any(w is not None and w != g for w, g in zip(want, got)):
            hint = ""
            if (str(data) in ("digits", "digits32") and None not in want and len(got) != len(want)
                    and int(np.prod(got)) == int(np.prod(want))):
                from ..datasets import LAYOUTS      # the same values laid out otherwise: the config's layout
                guess = {1: "flat", 3: "nchw"}.get(len(want), "ncl or ntf")
                hint = (f"; the same {int(np.prod(got))} values per sample in another layout: set `layout: {guess}` "
                        f"in the deployment config (one of {', '.join(LAYOUTS)})")
            raise InputError(f"{data}: {what} has samples of shape {got}; the model {net.name} takes {want}{hint}")
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
    fixed-point inputs and outputs: :class:`hlsnn.deploy.run.hostquant.HostQuant`)."""
    if host_precision == "float":
        return None
    if host_precision != "quantized":
        raise InputError(f"host precision = {host_precision!r}: expected one of {', '.join(HOST_PRECISIONS)}")
    return check_host_bits(host_bits)


def _is_table(layer):
    from ...engines.network.gate import is_table
    return is_table(layer.op, layer.attrs)


def host_layers(net, host_bits=None) -> list:
    """Every layer that runs on the host, and in what precision: what the reports must say, so
    that accuracy and latency are never read as the FPGA's alone. ``host_bits``: the quantized
    host mode's width (None: float host layers)."""
    from ..run.hostops import EXACT
    out = []
    last_engine = max((i for i, la in enumerate(net.layers) if la.kind != "host"), default=-1)
    for i, layer in enumerate(net.layers):
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
            how = ("integers: both operands quantized at run time in the nearest engine layer's format: bfp on "
                   "its bfp_systolic engine (BFP rows and columns, the engine's BFP output); fixed point at "
                   "per-sample radix points, the product exact, on sparse_cluster in fixed8 and on the host in "
                   "two-hot (shift_mac cannot multiply two activations)")
        elif host_bits is None and _is_table(layer):
            how = ("integers on a fixed-point input: a table of its 2**b codes, output b bits at the radix "
                   + ("where the table fits" if layer.op in ("HardSwish", "HardSigmoid", "Sigmoid") else
                      "calibrated for its values") + " (hlsnn.engines.network.gate rule unary_table); float64 on a float input")
        elif layer.op == "Mul" and host_bits is None:
            how = ("exact on fixed-point values (a product of two codes); the next accelerator layer "
                   "requantizes it")
        elif host_bits is not None:
            how = (f"{host_bits}-bit fixed point in and out (radix points by DETERMINE when calibrating), "
                   + ("onnx's reference implementation (--host-fallback)" if layer.op == "fallback"
                      else "float64 in numpy") + " between them")
        elif layer.op == "fallback":
            how = "float32, onnx's reference implementation (--host-fallback): not what the board computes"
        elif i > last_engine:
            how = "float64 in numpy, after the last engine layer"
        else:
            how = "float64 in numpy; the next accelerator layer requantizes the result"
        out.append({"layer": layer.name, "op": op, "precision": how})
    return out


def file_tensor(layer):
    """The model file's tensor an engine layer's output is, and how it is held there: ``(name,
    None)``, or for a 1-D or token-wise layer, whose output is a map of the importer's own,
    ``(name, "1d")`` or ``(name, "rows")`` (the file's ``(N, Z, L)`` or ``(N, *lead, O)`` tensor)."""
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
    from ...runtime import Accelerator
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
def open_deployment(config_path, assignment=None, target="emu", *, host_fallback=False, recalibrate=False,
                    **target_options):
    """A :class:`~hlsnn.deploy.run.runner.Deployment` of one assignment of a deployment config, its
    accelerators open on ``target`` for the ``with`` block (closed after it), for running the
    model on your own inputs::

        with open_deployment("configs/models/digits_mlp.yaml", "bfp8") as dep:
            dep.calibrate(x_cal)          # radix points (fixed-point formats) from these inputs
            y = dep.run(x)                # the model's outputs, float64, batch first

    ``assignment``: its name (default: the config's first); the deployment takes the config's
    calibration settings and rounding. A file quantized elsewhere (QDQ or QONNX) keeps its own radix
    points where they map exactly, as ``hlsnn deploy`` does (``recalibrate=True``: as
    ``--recalibrate``, the calibrated ones); ``dep.imported`` says per layer which mapped exactly."""
    cfg = load_deploy_config(config_path)
    name = assignment or next(iter(cfg.assignments))
    if name not in cfg.assignments:
        raise InputError(f"assignment {name!r} is not in {printable(cfg.path)}; it has {', '.join(cfg.assignments)}")
    net = load_onnx(cfg.model, host_fallback=host_fallback, output=cfg.output)
    from .. import datasets
    from ..quantize import task_formats       # a regression's fixed/sparse auto fields, as hlsnn deploy
    if cfg.task != "classification" and any(f.type in task_formats.TYPES and f.auto for f in cfg.formats.values()):
        task = cfg.task if cfg.task == "regression" else task_formats.task_of(
            cfg, datasets.load(cfg.data, layout=_layout(net, cfg.layout)))
        cfg.formats = task_formats.resolve(cfg.formats, task, net)
    from ..importer import trained                       # a model hlsnn.train exported: as hlsnn deploy follows it
    cfg.formats = trained.follow(cfg)
    from ..importer import qimport
    qmap = qimport.layer_mapping(net, cfg.model)        # {} unless the file holds Q/DQ nodes
    accs = open_accelerators(cfg, target, [name], **target_options)
    try:
        yield Deployment(net, cfg.assignments[name], cfg.formats, accs, **deployment_kwargs(cfg), qmap=qmap,
                         recalibrate=recalibrate)
    finally:
        for acc in accs.values():
            acc.close()


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
    if y_test.dtype.kind in "iub":       # integer targets are targets too
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
#: accuracy points against float, or (regression) raises the MSE by more than
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
    from ...measure.layers import input_terms, layer_cycles
    from ..quantize import twoterm
    by_layer = {}
    for ln, ex in dep.execs.items():
        f = cfg.formats[asg.format_of(ln)]
        hw = tuple(ex.in_shape[-2:]) if ex.layer.kind == "conv" else None
        try:
            r = layer_cycles(twoterm.cost_layer(ex.layer, getattr(f, "weight_terms", 1)), ex.acc.config, 1,
                             fmt_type=f.type, in_hw=hw,
                             weight_sparsity=ex.stats.weight_sparsity, input_density=ex.stats.input_density,
                             **input_terms(ex))
        except HlsnnError:
            return {"modelled_us_per_image": None, "modelled_us_by_layer": {}}
        by_layer[ln] = round(float(r["us"]), 3)
    return {"modelled_us_per_image": round(sum(by_layer.values()), 3), "modelled_us_by_layer": by_layer}


def format_result(res) -> str:
    from . import fitreport
    name = res.get("config") or res["model"]     # the config's name; the ONNX graph's beside it when it differs
    if res.get("config") and res["model"] != res["config"]:
        name += f" (graph {res['model']})"
    head = (f"{name} on {res['target']}: {res['test_images']} test images, calibrated on "
            f"{res['calibration_images']} ({res['calibration_mode']}); ")
    regression = res.get("task") == "regression"
    if regression:
        lines = [head + f"regression against {res['reference']}: float MSE {res['float_mse']:.4g}, MAE "
                 f"{res['float_mae']:.4g} (onnx ReferenceEvaluator)",
                 f"  {'assignment':<14} {'MSE':>10} {'MAE':>10} {'rel. err':>9} {'images/s':>10} {'layers us':>9}"
                 f" {'e2e us':>9} {'board':<9}  layers"]
    else:
        imported = any(e.get("imported_quantization") for e in res["assignments"].values())
        ref = ("the file's own accuracy (its quantizers simulated in float, onnx ReferenceEvaluator)" if imported
               else "float accuracy (onnx ReferenceEvaluator)")
        lines = [head + f"{ref.split(' (')[0]} {100 * res['float_accuracy']:.2f}% ({ref.split(' (', 1)[1]}",
                 f"  {'assignment':<14} {'accuracy':>9} {'vs ref' if imported else 'vs float':>9} {'images/s':>10} "
                 f"{'layers us':>9} {'e2e us':>9} {'board':<9}  layers"]
    for name, e in res["assignments"].items():
        layers = ", ".join(f"{k}={v}" for k, v in e["layers"].items())
        if "error" in e:
            lines.append(f"  {name:<14} FAILED: {e['error']}")
            continue
        us = e.get("modelled_us_per_image")
        us = f"{us:>9.1f}" if us is not None else f"{'n/a':>9}"
        e2e = (e.get("end_to_end") or {}).get("end_to_end_us")
        us += f" {e2e:>9.1f}" if e2e is not None else f" {'n/a':>9}"
        us += f" {(e.get('end_to_end') or {}).get('board') or 'n/a':<9}"
        if regression:
            lines.append(f"  {name:<14} {e['mse']:>10.4g} {e['mae']:>10.4g} {100 * e['relative_error']:>8.2f}% "
                         f"{e['images_per_s'] or 0:>10.1f} {us}  {layers}")
            for f, c in (e.get("fixed_point_calibration") or {}).items():     # hlsnn.deploy.quantize.task_formats
                lines.append(f"  {'':<14} {f}: " + ", ".join(f"{k} {v}" for k, v in c.items()))
            lines += fitreport.lines(e)                                       # hlsnn.deploy.reports.fitreport
            lines += format_per_layer(e)
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
        lines += fitreport.lines(e)
        lines += format_per_layer(e)
        on_engine = {k: v for k, v in (e.get("act_matmul") or {}).items() if v["on"] != "host" and v["gemms"]}
        if on_engine:
            lines.append(f"  {'':<14} MatMul of two activations on the engine: " + "; ".join(
                f"{k} {v['gemms']} GEMMs in {v['kernel_calls']} {v['on']} call(s)" for k, v in on_engine.items()))
        lines += format_imported(e)
    boards = sorted({(e["end_to_end"]["board"]) for e in res["assignments"].values() if e.get("end_to_end")})
    lines.append(f"  e2e us: modelled end to end per image on the row's board, host included (batch 1, `hlsnn perf "
                 f"NAME.hlsnn` of the compiled model on {', '.join(boards) or 'its board'}; the network kernel, one "
                 f"start, where it runs the model, else one call per layer): a model, not a measurement")
    lines.append("  layers us: modelled engine time per image with one kernel call per layer (batch 1, the cycle "
                 "model of `hlsnn perf`; host work not included), so it can exceed e2e us where the network kernel "
                 "runs the whole model in one start: a model, not a measurement")
    lines += format_update(res)
    hosts = res.get("host_layers") or []
    lines += format_host_layers(res)
    fallback = [h for h in hosts if h["precision"].startswith("float32") and "--host-fallback" in h["precision"]]
    if fallback:
        lines.append(f"  NOTE: {len(fallback)} layer(s) ran in float on the host through --host-fallback "
                     f"({', '.join(h['layer'] for h in fallback)}); accuracy and speed are not the board's")
    return "\n".join(lines)


def format_host_layers(res) -> list:
    """The deploy table's footer on the layers outside the engines: per group of assignments, those
    that the compiled model runs on the host (with their precision) and those that its network
    kernel runs on the fabric, as ``hlsnn compile`` and ``hlsnn perf`` say (each assignment's
    ``end_to_end``: ``host_layers``, ``fabric_layers``). An assignment without a compiled model (a
    dynamic calibration) counts every such layer as the layer path runs it: on the host."""
    hosts = res.get("host_layers") or []
    if not hosts:
        return []
    groups = {}                            # (fabric layers) -> assignments
    for name, e in res["assignments"].items():
        fab = tuple((e.get("end_to_end") or {}).get("fabric_layers") or ())
        groups.setdefault(fab, []).append(name)
    by_name = {h["layer"]: h for h in hosts}
    lines = []
    for fab, names in groups.items():
        which = "in every assignment" if len(groups) == 1 else "in " + ", ".join(names)
        on_host = [h for h in hosts if h["layer"] not in fab]
        if on_host:
            lines.append(f"  on the host ({len(on_host)} layer(s), {which}):")
            lines += [f"    {h['layer']} ({h['op']}): {h['precision']}" for h in on_host]
        else:
            lines.append(f"  on the host: nothing ({which})")
        if fab:
            lines.append(f"  on the fabric, in the network kernel ({len(fab)} layer(s), {which.removeprefix('in ')}): "
                         + ", ".join(f"{n} ({by_name[n]['op']})" for n in fab if n in by_name))
            if res.get("target") == "emu" or any(res["assignments"][n].get("run", {}).get("path") != "network kernel"
                                                 for n in names):
                lines.append("    (this run computed them layer by layer, the layer path's way; the compiled model's "
                             "self-check holds the network kernel to that path bit for bit)")
    return lines


def format_per_layer(e) -> list:
    """``hlsnn deploy --per-layer``'s lines of one assignment: per engine layer its format, the relative
    RMS error of its output against the float model's tensor, the radix points (fractional bits of
    input, weights, output; ``-`` where the format has none: BFP; ``lo..hi`` per channel), the
    weight sparsity, the input density and the saturated outputs (the same figures as ``--json``'s
    ``per_layer``)."""
    per = e.get("per_layer")
    if not per:
        return []

    def radix(v):                  # None: no radix point (BFP); a list: per channel, as its range lo..hi
        if v is None:
            return "-"
        if isinstance(v, (list, tuple)):
            lo, hi = min(v), max(v)
            return f"{lo}" if lo == hi else f"{lo}..{hi}"
        return str(v)
    lines = [f"  {'':<14} per layer: relative RMS error vs float, radix points (fractional bits) in/weights/out, "
             f"weight sparsity, input density, saturated outputs"]
    for ln, v in per.items():
        lines.append(f"  {'':<16}{ln} ({v['format']}, {v['kind']}): error {v['relative_rms_error']:.3g}, radix "
                     f"{radix(v['f_in'])}/{radix(v['f_w'])}/{radix(v['f_out'])}, sparsity "
                     f"{100 * v['weight_sparsity']:.1f}%, density {100 * v['input_density']:.1f}%, saturated "
                     f"{v['saturated_outputs']}")
    return lines


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
