"""Deployed evaluation of a prepared model: the model exported (:func:`hlsnn.train.export`) and
run by hlsnn's own deploy path (:class:`hlsnn.deploy.run.runner.Deployment` on the ``emu``
target, or any target), so the accuracy seen while training is the deployed accuracy, bit for
bit. The shift formats deploy with ``weight_fit: nearest``, which keeps the trained codes
(:func:`hlsnn.train.check_round_trip`)."""
from __future__ import annotations

import dataclasses
import os
import tempfile
from contextlib import contextmanager

import numpy as np

from ..deploy.config import DeployConfig, deployment_kwargs, load_deploy_config
from ..deploy.reports.evaluate import open_accelerators
from ..deploy.importer.onnx_import import load_onnx
from ..deploy.run.runner import Deployment
from ..errors import InputError, printable
from .export import export


def trained_config(deploy_config, onnx_path):
    """The deployment config for an exported model: ``model`` the exported file, the shift
    formats with ``weight_fit: nearest`` (the trained codes, not a re-fit), every format with
    ``bias_correction: none`` (the trained biases), one shift code per weight and, for a shift
    format's ``radix: auto``, the radix rule training used (``msb``: :mod:`hlsnn.train.prepare`),
    not one chosen at calibration (:mod:`hlsnn.deploy.quantize.shift_auto`)."""
    cfg = deploy_config if isinstance(deploy_config, DeployConfig) else load_deploy_config(deploy_config)
    fm = {n: dataclasses.replace(f, weight_fit="nearest", weight_terms=1, bias_correction="none",
                                 radix="msb" if f.radix == "auto" else f.radix)
          if f.type in ("pot", "twohot") else dataclasses.replace(f, bias_correction="none")
          for n, f in cfg.formats.items()}
    return dataclasses.replace(cfg, model=str(onnx_path), formats=fm)


@contextmanager
def deployed(model, example, deploy_config, assignment=None, *, target="emu", workdir=None, **target_options):
    """The exported ``model`` as an open :class:`~hlsnn.deploy.run.runner.Deployment` (calibrate
    it, then ``run``), with the config's calibration settings and rounding."""
    if workdir is not None and not os.path.isdir(workdir):
        raise InputError(f"workdir = {printable(workdir)}: not an existing folder (the exported model is written "
                         "there; None: a temporary one)")
    cfg = trained_config(deploy_config, "-")
    name = assignment or next(iter(cfg.assignments))
    if name not in cfg.assignments:
        raise InputError(f"assignment {name!r} is not in {printable(cfg.path)}; it has {', '.join(cfg.assignments)}")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(workdir or tmp, "trained.onnx")
        export(model, example, path)
        cfg = trained_config(cfg, path)
        net = load_onnx(path)
        accs = open_accelerators(cfg, target, [name], **target_options)
        try:
            dep = Deployment(net, cfg.assignments[name], cfg.formats, accs, **deployment_kwargs(cfg))
            dep.train_context = {"net": net, "config": cfg, "assignment": name, "accelerators": accs}
            yield dep
        finally:
            for acc in accs.values():
                acc.close()


def modelled_latency(dep, x1):
    """The modelled latency of a calibrated, run deployment from :func:`deployed`, per image:
    ``layer_kernels`` (:func:`hlsnn.deploy.reports.evaluate.modelled_latency`: each engine layer's
    calls, at the measured weight sparsity and input density), ``layer_kernels_dense`` (the
    same at weight sparsity 0) and ``network`` (``hlsnn perf`` of the compiled model,
    :func:`hlsnn.evaluation.run.end_to_end_latency`; x1 one input)."""
    from ..deploy.reports.evaluate import modelled_latency as layers
    from ..evaluation.run import end_to_end_latency
    from ..measure.layers import layer_cycles
    c = dep.train_context
    asg = c["config"].assignments[c["assignment"]]
    out = {"layer_kernels_us": layers(dep, c["config"], asg)["modelled_us_per_image"]}
    dense = 0.0
    for ln, ex in dep.execs.items():
        f = c["config"].formats[asg.format_of(ln)]
        hw = tuple(ex.in_shape[-2:]) if ex.layer.kind == "conv" else None
        dense += float(layer_cycles(ex.layer, ex.acc.config, 1, fmt_type=f.type, in_hw=hw, weight_sparsity=0.0,
                                    input_density=ex.stats.input_density)["us"])
    out["layer_kernels_dense_us"] = round(dense, 3)
    e2e = end_to_end_latency(dep, c["net"], c["config"], c["assignment"], c["accelerators"], x1)
    out["network"] = e2e.get("end_to_end") or e2e.get("end_to_end_note")
    return out


def deployed_accuracy(model, example, deploy_config, x_cal, x, y, assignment=None, **kw):
    """Top-1 accuracy of the deployed model on ``(x, y)`` after calibrating on ``x_cal``
    (numpy arrays, NCHW / NC as the model takes them) and the outputs."""
    if len(x) != len(y):
        raise InputError(f"x and y: {len(x)} inputs and {len(y)} labels; one label per input")
    with deployed(model, example, deploy_config, assignment, **kw) as dep:
        dep.calibrate(np.asarray(x_cal, np.float64))
        out = dep.run(np.asarray(x, np.float64))
    return float(np.mean(np.argmax(out, axis=1) == np.asarray(y))), out
