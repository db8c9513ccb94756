"""``hlsnn.seed002.calibrate``: one calibration batch (source 002's "iteration") of a deployment
by one of the methods E1-E4, E6-E9, on the circuits and boards of its layout; returns the radix
points, the outputs and the timelines. ``docs/seed002-methods.md`` is the one-page picture.

How the bits come about (the same code for every method)
    The deployment runs the network once with ``calibrate=True`` (:meth:`Deployment.run`), every
    fixed-point engine layer updating its output radix point by
    :func:`hlsnn.deploy.quantize.update.run` (E2 or E4, forced per method: ``layout.BITS_OF``) or, for
    e1, :meth:`_Exec._two_pass` (E1). The sample is :func:`hlsnn.formats.radix_update.sample_mask`
    of the batch's images at ``percent`` %, DETERMINE is :meth:`_Exec.determine_groups`
    (:func:`hlsnn.formats.fixed.determine`) on the kernels' histograms. e3 is E4 at 100 %. The
    layout only decides which circuits serve each phase's kernel calls
    (:class:`~hlsnn.seed002.circuits.CircuitGroup`, whose calls give one kernel's bits). So for
    one sample: e2 = e4 = e6 = e7 = e8 = e9, bit for bit, and e1 = e3 (= every method at 100 %,
    since E2 at 100 % is E1). The tests run them and compare (tests/seed002/).

What differs is the time: :mod:`hlsnn.seed002.timeline` (modelled from the cycle model, and
on ``sim``/``csim`` from the cycles of the kernel calls each circuit made).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ..errors import InputError
from . import layout as layouts
from . import timeline

#: the number formats whose layers a method updates (fixed-point engine layers)
FIXED_TYPES = ("twohot", "pot", "fixed", "sparse")


@dataclass
class Result:
    """What :func:`calibrate` returns.

    ``points``: per fixed-point engine layer, its output radix point ``F_out``; ``inputs``: the
    input radix points the host chose (``f_x``, None where the input came in a fixed-point
    format); ``saturated``: per layer, the outputs that saturated; ``outputs``: the network's
    outputs (float64, images first); ``timeline`` the modelled rows, ``measured`` the measured
    ones (None on ``emu``), ``summary`` / ``measured_summary`` their :func:`timeline.summary`;
    ``records``: every circuit call (layer, phase, circuit, cycles, items, wall seconds);
    ``workers``: per circuit, the process ids that served it (boards on a cluster);
    ``placement``: per circuit, its board and its kernel instance's IP name in the board's overlay."""
    method: str
    percent: float
    layout: layouts.Layout
    points: dict
    inputs: dict
    saturated: dict
    outputs: np.ndarray
    sampled: int
    timeline: list
    summary: dict
    measured: list = None
    measured_summary: dict = None
    records: list = field(default_factory=list, repr=False)
    workers: dict = field(default_factory=dict)
    placement: dict = field(default_factory=dict)

    def same_bits(self, other) -> bool:
        """Identical radix points, saturation counts and outputs, bit for bit."""
        return (self.points == other.points and self.inputs == other.inputs and self.saturated == other.saturated
                and self.outputs.shape == other.outputs.shape
                and np.array_equal(self.outputs.view(np.uint64), other.outputs.view(np.uint64)))


def _accel_of(cfg, asg, net):
    """The one accel config of the assignment's engine layers, all of them fixed point."""
    accels = set()
    for layer in net.engine_layers():
        fmt = cfg.formats[asg.format_of(layer.name)]
        if fmt.type not in FIXED_TYPES:
            raise InputError(f"layer {layer.name}: format {fmt.name!r} is {fmt.type}; the methods update the radix "
                             f"points of fixed-point layers: formats of type {', '.join(FIXED_TYPES)}")
        accels.add(fmt.accel)
    if len(accels) != 1:
        raise InputError(f"assignment {asg.name}: its layers use {len(accels)} accel configs; the methods run one "
                         f"accel config's circuits: give an assignment of one")
    return accels.pop()


def _first_fixed(cfg, net):
    """The first assignment of ``cfg`` that :func:`calibrate` can run (fixed point, one accel config)."""
    for name, asg in cfg.assignments.items():
        try:
            _accel_of(cfg, asg, net)
            return name
        except InputError:
            continue
    raise InputError(f"{cfg.path}: no assignment puts every engine layer in a fixed-point format of one accel config "
                     f"(types {', '.join(FIXED_TYPES)}); the methods update those layers' radix points")


def calibration_images(config_path, n=None):
    """The first ``n`` (default the config's ``calibration.samples``) images of the deployment
    config's training split, in the model's input layout, as ``hlsnn deploy`` calibrates on."""
    from ..deploy import datasets
    from ..deploy.config import load_deploy_config
    from ..deploy.reports.evaluate import _layout
    from ..deploy.importer.onnx_import import load_onnx
    cfg = load_deploy_config(config_path)
    net = load_onnx(cfg.model, output=cfg.output)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    return ds.x_train[:cfg.calibration["samples"] if n is None else n]


def calibrate(config_path, x, *, method, percent=25.0, assignment=None, target="emu", cluster=None, circuits=4,
              low=layouts.LOW_CAPABILITY, **target_options) -> Result:
    """Calibrate the deployment ``config_path`` (its ``assignment``, default the first in fixed
    point on one accel config) on the images ``x`` by ``method`` (one of
    :data:`layout.METHODS`) with ``percent`` % of the images sampled, on ``target`` (``emu``,
    ``csim``, ``sim``). ``cluster``: None (every board in this
    process) or a Dask scheduler address / ``distributed.Client`` (each board in a worker);
    ``circuits``, ``low``: :func:`hlsnn.seed002.layout.layout`."""
    from ..deploy.config import deployment_kwargs, load_deploy_config
    from ..deploy.importer.onnx_import import load_onnx
    from ..deploy.run.runner import Deployment
    from ..formats import radix_update
    from ..errors import printable
    from .circuits import CircuitGroup
    lay = layouts.layout(method, circuits=circuits, low=low)
    if isinstance(percent, bool) or not isinstance(percent, (int, float)) or not 0 < percent <= 100:
        raise InputError(f"percent = {percent!r}: a number in (0, 100], the sampled share of the images")
    cfg = load_deploy_config(config_path)
    net = load_onnx(cfg.model, output=cfg.output)
    name = assignment or _first_fixed(cfg, net)
    if name not in cfg.assignments:
        raise InputError(f"assignment {name!r} is not in {printable(cfg.path)}; it has {', '.join(cfg.assignments)}")
    asg = cfg.assignments[name]
    accel = _accel_of(cfg, asg, net)
    # every point by DETERMINE alone: a format's radix lse / search (a least-squares refinement the
    # E1 path applies to all the wide results) is not part of the source's methods
    formats = {k: dataclasses.replace(f, radix="msb") for k, f in cfg.formats.items()}
    bits = layouts.BITS_OF[method]
    kw = deployment_kwargs(cfg)
    kw.update(update="e1" if bits == "e1" else "e5", update_percent=100.0 if method in ("e1", "e3") else percent,
              strided_stats="all", clip_stats="off", dynamic=False)
    boards = None
    if cluster is not None:
        from .boards import Boards
        boards = Boards(cluster)
    try:
        with CircuitGroup(accel, lay, target, boards=boards, **target_options) as group:
            dep = Deployment(net, asg, formats, {accel: group}, **kw)
            dep.update_force = None if bits == "e1" else bits
            dep.fast = False
            y = dep.run(np.asarray(x), calibrate=True)
            costs = timeline.layer_costs(dep, {c.capability for c in lay.circuits})
            rows = timeline.schedule(method, lay, costs)
            meas = timeline.schedule(method, lay, costs, group.records, group.config.clock_mhz)
            execs = {n: ex for n, ex in dep.execs.items() if ex.f_out is not None}
            workers = {c.circuit.name: sorted(getattr(c, "pids", ())) for c in group.circuits.values()}
            n_img = len(x)
            k = int(np.count_nonzero(radix_update.sample_mask((n_img,), dep.update_percent)))
            return Result(method, float(dep.update_percent), lay, {n: int(ex.f_out) for n, ex in execs.items()},
                          {n: None if ex.f_x is None else int(ex.f_x) for n, ex in execs.items()},
                          {n: int(ex.stats.sat_count) for n, ex in execs.items()}, np.asarray(y, np.float64), k,
                          rows, timeline.summary(rows), meas,
                          timeline.summary(meas) if meas else None, list(group.records), workers,
                          dict(group.placement))
    finally:
        if boards is not None:
            boards.close()
