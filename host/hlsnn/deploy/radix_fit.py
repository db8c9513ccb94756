"""The output radix point of a shift layer (two-hot, power-of-two) chosen for the error its
readers see (issue 52).

DETERMINE (source 002, :func:`hlsnn.formats.fixed.determine`) with ``overflow_ratio`` 0 puts
the largest calibration value in range: ``F_det``, the finest radix at which nothing
saturates. On 8-bit activations one value a little above a power of two then costs every
other value a bit, and a reader that saturates anyway (``Clip``/ReLU6, ``HardSigmoid``,
``HardSwish`` below -3, ``Relu`` below 0) makes range that it flattens useless. So when
calibrating, a shift layer's output radix is the one of ``F_det``, ``F_det + 1``,
``F_det + 2`` whose squared error on the calibration outputs is least, the error measured
as the readers see the values (both sides clamped to their range, :func:`reader_range`):

    ``F_out = argmin_F  sum (clamp(q_F(v)) - clamp(v))**2``,  ``q_F(v) = clip(rint(v 2**F), lo, hi) 2**-F``

``v`` are the layer's exact wide results on the calibration images (the kernel's raw mode
on the layer path, :meth:`hlsnn.deploy.executors._Exec.preceding`; the compiled
calibration's own, :mod:`hlsnn.deploy.calibrate`), so both paths choose the same radix. Ties
keep the coarser radix. Only the choice changes: one radix per tensor, the kernels, the
emulator and the network program as before (calibration only). It applies where the
deployment's ``overflow_ratio`` is 0 (a ratio set by hand is the user's choice) and the
radix points are static.

Measured (``scripts/radix_fit.py``): dw_a two-hot over 8 calibration sets ... see
``docs/deploy-models.md``.
"""
from __future__ import annotations

import numpy as np

#: candidates above DETERMINE's radix (``F_det + 0 .. F_det + EXTRA``)
EXTRA = 2

#: the most values the error is measured on (an even sample of the wide results beyond)
MAX_VALUES = 1 << 18

def _flat_range(layer):
    """``(lo, hi)`` of a host op whose output does not change below ``lo`` nor above ``hi``
    (its input's), or None."""
    a = getattr(layer, "attrs", None) or {}
    if layer.op == "Clip":
        return (-np.inf if a.get("lo") is None else float(a["lo"]),
                np.inf if a.get("hi") is None else float(a["hi"]))
    if layer.op == "Relu":
        return 0.0, np.inf
    if layer.op == "HardSwish":                   # x * clip(x/6 + 1/2, 0, 1): 0 below -3
        return -3.0, np.inf
    if layer.op == "HardSigmoid" and a.get("alpha", 0) > 0:
        al, be = float(a["alpha"]), float(a["beta"])
        return -be / al, (1.0 - be) / al
    return None


def wanted(ex):
    """The rule applies to executor ``ex``: a shift format, static radix points, overflow_ratio 0."""
    from .executors import ShiftExec
    dep = ex.deploy
    return (isinstance(ex, ShiftExec) and not getattr(dep, "dynamic", False)
            and getattr(dep, "overflow_ratio", 0.0) == 0.0 and getattr(dep, "update", None) != "e5")


def reader_range(net, layer):
    """``(lo, hi)``: the input interval outside of which none of the readers of ``layer``'s
    output tell values apart (the union of their flat sides' complements); ``(-inf, inf)``
    where a reader is not such an op (an engine layer, an Add, ...) or the output is the
    network's."""
    readers = [la for la in net.layers if layer.output in la.inputs]
    if not readers or layer.output == net.output:
        return -np.inf, np.inf
    lo, hi = np.inf, -np.inf
    for r in readers:
        rng = _flat_range(r) if r.kind == "host" else None
        if rng is None:
            return -np.inf, np.inf
        lo, hi = min(lo, rng[0]), max(hi, rng[1])
    return lo, hi


def squared_errors(v, fs, bits, signed, lo=-np.inf, hi=np.inf):
    """``sum (clamp(q_F(v)) - clamp(v))**2`` for each radix of ``fs`` (the module docstring),
    ``v`` float64 values, ``clamp`` to ``[lo, hi]``."""
    qlo, qhi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    t = np.clip(v, lo, hi)
    out = []
    for f in fs:
        q = np.ldexp(np.clip(np.rint(np.ldexp(v, f)), qlo, qhi), -f)
        out.append(float(np.sum((np.clip(q, lo, hi) - t) ** 2)))
    return out


def refine(ex, wide, f_vec, axis, bits, signed, f_max=None):
    """Set ``ex.f_out`` (DETERMINE's, already set) to the rule's choice, from ``wide``: the
    layer's wide results (integers) at radix ``f_vec`` (one value, or one per output channel
    along ``axis``). ``f_max``: the finest radix allowed (DETERMINE's clamp)."""
    f_det = int(ex.f_out)
    v = np.asarray(wide)
    f_vec = np.asarray(f_vec, np.int64).reshape(-1)
    v = np.moveaxis(v, axis, -1).astype(np.float64)  # channels last: the same order on both paths
    v = np.ldexp(v, -f_vec if len(f_vec) > 1 else -int(f_vec[0])).reshape(-1)
    if v.size > MAX_VALUES:
        v = v[::-(-v.size // MAX_VALUES)]
    fs = [f_det + d for d in range(EXTRA + 1) if f_max is None or f_det + d <= f_max]
    lo, hi = reader_range(ex.deploy.net, ex.layer)
    err = squared_errors(v, fs, bits, signed, lo, hi)
    ex.f_out = int(fs[int(np.argmin(err))])           # argmin: the first (coarsest) of equal ones
