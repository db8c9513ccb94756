"""An end-to-end refinement of a fixed-point network's radix points at calibration (a ``fixed``
/ ``sparse`` format's ``radix: search``): after :mod:`hlsnn.deploy.quantize.radix_lse` has chosen each
tensor's radix on its own, each one is moved by one bit at a time while the *network output's*
error against the float network on the calibration images drops.

The rule (deterministic: a fixed order, ties keep the current point):

1. The moves: every engine layer of such a format in the network's order, its output radix
   ``F_out`` and, where it converts its input (a Concat, a residual sum, the graph input), its
   input radix ``F_x``; then the output radix points of the parts of each Concat, together
   (:func:`points`).
2. The objective: ``||y_q - y_float|| / ||y_float||`` over the calibration images, ``y_q`` the
   deployment's output at the current radix points (the calibrated network as its integer
   program, :mod:`hlsnn.deploy.run.fast`, the bits every target gives; the layer path where the
   network does not lower to one), ``y_float`` the imported network in float64.
3. A sweep: for each move in order, ``-1`` then ``+1``; a move is kept when it lowers the
   objective by more than :data:`MIN_GAIN` (relative, 1 %), and the next try starts from it. Sweeps repeat,
   at most :data:`SWEEPS`, until one keeps no move. A point the network mode refuses (an
   :class:`~hlsnn.errors.InputError`) is not taken.

Only calibration changes: the radix points are static numbers of the program, so the kernels,
the network mode, emu, csim and the board run them as any other and agree bit for bit. The
cost is one run of the calibration images per try: ``2 x points x sweeps`` runs, compiled
(:mod:`hlsnn.deploy.run.fast`, a U-Net's data moves and average pools too).
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError

#: full passes over the moves at most
SWEEPS = 3
#: the relative drop of the objective a move must make to be kept (smaller gains on the
#: calibration images lost on the test images)
MIN_GAIN = 0.01


def wanted(dep):
    """True when some engine layer of ``dep`` has a format with ``radix: search``."""
    return any(getattr(ex.fmt, "radix", "msb") == "search" for ex in dep.execs.values())


def points(dep):
    """The moves of rule 1: tuples of ``(layer name, attribute)`` (``"f_out"`` or ``"f_x"``)
    moved together: one per tensor, in the network's order, then one per Concat whose parts
    (through views) are two or more such layers' outputs, all of them (the network mode takes a
    Concat its reader does not convert only at one radix: one part alone is refused)."""
    from .catradix import _source
    one = []
    for layer in dep.net.engine_layers():
        ex = dep.execs[layer.name]
        if getattr(ex.fmt, "radix", "msb") != "search":
            continue
        if ex.f_x is not None and np.ndim(ex.f_x) == 0:
            one.append(((layer.name, "f_x"),))
        if ex.f_out is not None and np.ndim(ex.f_out) == 0:
            one.append(((layer.name, "f_out"),))
    outs = {p[0] for (p,) in one if p[1] == "f_out"}
    producers = {la.output: la for la in dep.net.layers}
    groups = []
    for cat in dep.net.layers:
        if cat.kind != "host" or cat.op != "Concat":
            continue
        parts = [producers.get(_source(dep.net, t, producers)) for t in cat.inputs]
        names = tuple(dict.fromkeys(la.name for la in parts if la is not None and la.name in outs))
        if len(names) >= 2:
            groups.append(tuple((n, "f_out") for n in names))
    return one + groups


def _program(dep):
    """The deployment at its current radix points as the network mode's integer program
    (:func:`hlsnn.deploy.lower.program.lower`, as :meth:`~hlsnn.deploy.run.runner.Deployment.fast_network`
    lowers it, here on any target: its bits are every target's), or None where the network does
    not lower to one."""
    return dep._lowered(any_target=True) if dep.fast else None


def _error(dep, x, y_ref, norm, compiled):
    """Rule 2's objective at the current radix points, or None where they are refused.
    ``compiled``: through :func:`_program` (compiled by :mod:`hlsnn.deploy.run.fast` where it
    takes the ops, else :func:`hlsnn.deploy.lower.program.run_ints`), else the deployment's
    :meth:`run`."""
    from ..run import fast as netfast
    from ..lower import program as netmode
    dep._fastnet = None                       # the program is made from the radix points as they are
    try:
        net = _program(dep) if compiled else None
        fn = None if net is None else netfast.build(net)
        if fn is not None:
            q = fn.run(x.reshape((len(x),) + tuple(fn.net.input["shape"])), floats=True)[0]
        elif net is not None:
            q = netmode.run_ints(net, netmode.quantize_input(net, x.reshape((len(x),) + tuple(net.input["shape"]))))
        if net is not None:
            y = netmode.finish(net, q)
        else:
            y = _layer_path(dep, x)
            if y is None:
                return None
    except InputError:
        return None
    y = np.asarray(y, np.float64).reshape(y_ref.shape)
    return float(np.linalg.norm(y - y_ref) / norm)


def _layer_path(dep, x):
    """The deployment's output on ``x`` through :meth:`~hlsnn.deploy.run.runner.Deployment.run`, or
    None where a layer that passed its input through at calibration had to convert it (a Concat
    whose parts' radix points now differ): it would choose that radix from each batch, so the
    point is refused as the network mode refuses it."""
    before = {k: ex.f_x for k, ex in dep.execs.items()}
    y = dep.run(x)
    if any(before[k] is None and ex.f_x is not None for k, ex in dep.execs.items()):
        for k, ex in dep.execs.items():
            ex.f_x = before[k]
        return None
    return y


def refine(dep, x_cal):
    """Rules 1-3 on a calibrated deployment ``dep``: moves its radix points in place and
    returns ``{"points", "runs", "moves", "error_before", "error_after"}``."""
    from ..run.hostops import (
        float_tensors,  # the imported network in float64 (runner.float_forward)
    )
    y_ref = np.asarray(float_tensors(dep.net, x_cal)[dep.net.output], np.float64)
    norm = float(np.linalg.norm(y_ref)) or 1.0
    pts = points(dep)
    try:
        compiled = _program(dep) is not None
    except InputError:
        compiled = False
    best = _error(dep, x_cal, y_ref, norm, compiled)
    start, runs, moves = best, 1, 0
    if best is None:
        return {"points": len(pts), "runs": runs, "moves": 0, "error_before": None, "error_after": None}
    for _ in range(SWEEPS):
        moved = False
        for move in pts:
            old = [getattr(dep.execs[n], a) for n, a in move]
            for d in (-1, 1):
                for (n, a), v in zip(move, old):
                    setattr(dep.execs[n], a, int(v) + d)
                e = _error(dep, x_cal, y_ref, norm, compiled)
                runs += 1
                if e is not None and e < best * (1 - MIN_GAIN):
                    best, moved, moves = e, True, moves + 1
                    break
                for (n, a), v in zip(move, old):
                    setattr(dep.execs[n], a, v)
        if not moved:
            break
    dep._fastnet = None
    for ex in dep.execs.values():
        ex.stats.f_out = ex.f_out
    return {"points": len(pts), "runs": runs, "moves": moves, "error_before": start, "error_after": best}
