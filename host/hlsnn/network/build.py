"""``hlsnn compile MODEL.yaml --assignment A -o NAME.hlsnn``: import, calibrate once (on the
emulator, static radix points), and write everything an inference needs into one file
(:mod:`hlsnn.network.artifact`). This side needs onnx and the data set; the board does not."""
from __future__ import annotations

import numpy as np

from ..errors import InputError, printable
from . import artifact
from ..deploy.lower.layers import program_of


def choose_assignment(cfg, assignment=None) -> str:
    """The assignment of deployment config ``cfg`` to compile: ``assignment`` if the config has it;
    None (``hlsnn compile`` without ``--assignment``) picks the only one, and a config with several
    is an error listing them."""
    names = ", ".join(cfg.assignments)
    if assignment is None:
        if len(cfg.assignments) == 1:
            return next(iter(cfg.assignments))
        raise InputError(f"{printable(cfg.path)} has {len(cfg.assignments)} assignments: give one with --assignment "
                         f"({names})")
    if assignment not in cfg.assignments:
        raise InputError(f"--assignment {assignment!r}: not in {printable(cfg.path)}; it has {names}")
    return assignment


def compile_model(config_path, assignment, output, *, check_samples=4, calibration_samples=None,
                  host_fallback=False, recalibrate=False, allow_overfit=False):
    """Compile one assignment of a deployment config to ``output``; returns the program.
    ``assignment`` None: the config's only one (:func:`choose_assignment`).
    ``host_fallback``: nodes no rule covers run on the host with onnx's reference
    implementation (``hlsnn deploy --host-fallback``); the loader then needs onnx.
    ``recalibrate``: a model quantized elsewhere gets calibrated radix points in every layer, not the
    file's where they map exactly (``hlsnn deploy --recalibrate``, :func:`hlsnn.deploy.importer.qimport.for_assignment`).
    A network kernel above the board's fit budget (90% of each resource, :func:`hlsnn.network.fit.check_network`)
    is refused before anything is written, unless ``allow_overfit`` (``hlsnn compile --allow-overfit``)."""
    from ..deploy import datasets
    from ..deploy.config import deployment_kwargs, load_deploy_config
    from ..deploy.reports.evaluate import _check_data, _layout, open_accelerators
    from ..deploy.importer.onnx_import import load_onnx
    from ..deploy.run.runner import Deployment
    cfg = load_deploy_config(config_path)
    assignment = choose_assignment(cfg, assignment)
    cal = cfg.calibration
    if cal["mode"] != "static":
        raise InputError(f"{printable(cfg.path)}: calibration.mode = {cal['mode']!r}: a compiled model needs static "
                         f"radix points (mode: static)")
    if not 0 <= check_samples <= 64:
        raise InputError(f"check samples = {check_samples}: 0..64")
    net = load_onnx(cfg.model, output=cfg.output, host_fallback=host_fallback)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    _check_data(cfg.data, net, ds, None, "regression")     # the samples' shape, as hlsnn deploy checks it (no labels)
    from ..deploy.quantize import task_formats               # as hlsnn deploy resolves a regression's fixed/sparse auto
    cfg.formats = task_formats.resolve(cfg.formats, task_formats.task_of(cfg, ds), net)
    from ..deploy.importer import trained                    # a model hlsnn.train exported: as hlsnn deploy follows it
    cfg.formats = trained.follow(cfg)
    x_cal = ds.x_train[:calibration_samples or cal["samples"]]
    asg = cfg.assignments[assignment]
    accs = open_accelerators(cfg, "emu", [assignment])
    try:
        from ..deploy.importer import qimport                    # a file's own radix points where they map exactly
        dep = Deployment(net, asg, cfg.formats, accs, **deployment_kwargs(cfg),   # static: mode checked above
                         qmap=qimport.layer_mapping(net, cfg.model), recalibrate=recalibrate)
        dep.task = _task(cfg, ds)                       # how shift_auto scores a candidate, as hlsnn deploy does
        from ..deploy.quantize.shift_auto import cal_labels
        dep.cal_labels = cal_labels(ds, len(x_cal), dep.task)
        dep.calibrate(x_cal)                            # and the file's radix points (Deployment.qmap)
        xc = np.asarray(ds.x_test[:check_samples], np.float64) if check_samples else None
        program, arrays = program_of(dep, dep.net, cfg, assignment, accs, x_cal=len(x_cal), x_check=xc,
                                     host_fallback=host_fallback)
        _check_written(program, arrays, cfg.path)
        import json
        from .fit import check_network                # as a reader will see it (through JSON)
        check_network(json.loads(json.dumps(program)), arrays, allow_overfit=allow_overfit, source=str(cfg.path))
        artifact.write(output, program, arrays)
        return program
    finally:
        for a in accs.values():
            a.close()


def _check_written(program, arrays, source):
    """The program as a reader will see it (through JSON) against the schema a loader checks
    (:mod:`hlsnn.network.schema`), before the file is written: a refusal here is a bug of the
    writer (:class:`~hlsnn.errors.InternalError`), not a damaged file."""
    import json
    from ..errors import InternalError
    from .schema import Bad, check_program
    try:
        check_program(json.loads(json.dumps(program)), arrays)
    except Bad as exc:
        raise InternalError(f"hlsnn compile {source}: internal error, a bug of hlsnn: the program it wrote fails "
                            f"the compiled-model schema that loaders check ({exc}); please report it") from None


def _task(cfg, ds):
    """The task ``hlsnn deploy`` infers for ``cfg`` (:func:`hlsnn.evaluation.run.deploy`)."""
    from ..deploy.reports.evaluate import infer_task
    if cfg.targets == "inputs":
        return "regression"
    y = None if ds.y_test is None else np.asarray(ds.y_test)
    return infer_task(cfg.task, y)
