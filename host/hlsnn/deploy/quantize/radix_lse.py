"""A fixed-point layer's radix points by least squared error on the calibration images
(a ``fixed`` / ``sparse`` format's ``radix: lse``, and a shift format's, ``twohot`` / ``pot``
on shift_mac, whose activations are ``act_bits`` codes at a radix too; a deployment config's
``fixed`` format takes it by default, ``radix: auto``, :mod:`hlsnn.deploy.config`; the other
types and a :class:`~hlsnn.deploy.config.FormatSpec` built in Python without ``radix`` keep
DETERMINE's).

DETERMINE's rule (:func:`hlsnn.formats.fixed.determine`) keeps the largest value: at
``overflow_ratio`` 0 nothing saturates. A map with a long tail (a U-Net decoder's conv: the
largest output 18 times its root mean square) then spends its 8 bits on a few values, and every
other value gets a coarse step. Here the radix is DETERMINE's ``F`` or up to :data:`DEPTH` bits
finer, whichever gives the least sum of squared errors ``sum (convert(v) * 2**-F - v * 2**-F_in)**2``
over the calibration set's values (rounding as the deployment rounds, saturating at the format's
ends); a tie keeps the coarser. The same rule chooses

* a layer's output radix ``F_out`` from its wide results, but for the layer whose output is
  the network's: a saturated output there is a clamped result the user reads, so it keeps
  DETERMINE's radix (the preceding operation's values:
  the layer path's raw call, :meth:`hlsnn.deploy.run.executors._Exec.preceding`, and the fast
  calibration's ``v``, :mod:`hlsnn.deploy.quantize.calibrate`), one radix per tensor (a layer with
  per-channel weight scales keeps DETERMINE's rule), and
* the radix ``F_x`` at which the host converts a layer's float input (the network's input, a
  Concat of maps, a residual Add's or a global pool's exact sums: :func:`hlsnn.deploy.quantize.quant.host_radix`;
  the compiled calibration chooses it from the same sums, :func:`hlsnn.deploy.quantize.calibrate._add`),
  but for a conv that reads a Concat one of whose parts is the graph input: it converts at the
  first engine layer's input radix ``F_in`` when ``F_in`` is one of the radix points it weighs
  (DETERMINE's of the concat to :data:`DEPTH` bits finer), so the graph input has one radix for
  both uses and the network kernels move its integers into the concat exactly (rule input_concat,
  :mod:`hlsnn.deploy.quantize.catradix`; the compiled calibration leaves a Concat to the layer path).

Only calibration changes: the radix points are static numbers of the program, the kernels and
the network mode run them as any other (their rules do not change), so emu, csim and the board
still agree bit for bit.
"""
from __future__ import annotations

import numpy as np

from ...formats import fixed

#: bits finer than DETERMINE's radix tried at most
DEPTH = 3


def wanted(ex):
    """True when executor ``ex``'s format asks for this rule (its input conversion)."""
    return getattr(ex.fmt, "radix", "msb") in ("lse", "search")     # search: lse, then hlsnn.deploy.quantize.radix_search


def wanted_out(ex):
    """True when executor ``ex``'s output radix follows this rule: its format asks for it and
    its output is not the network's (module docstring)."""
    net = getattr(ex.deploy, "net", None)
    return wanted(ex) and (net is None or ex.layer.output != net.output)


def refine(wide, f_in, f_msb, bits, signed, rounding):
    """The radix in ``[f_msb, f_msb + DEPTH]`` of least squared error for the integers ``wide``
    (at radix ``f_in``) in ``bits``-bit (signed or unsigned) outputs; ``f_msb`` (DETERMINE's)
    on a tie or when there are no values. The error depends on a value alone, so each distinct
    value's squared error, times its count, adds in the values' ascending order: the layer
    path's NCHW values and the fast calibration's NHWC ones give the same sum (and the rule
    converts only the distinct values)."""
    v = np.asarray(wide).reshape(-1)
    if not v.size or not v.any():
        return int(f_msb)
    vals, counts = _distinct(v)
    best, best_e = int(f_msb), None
    for f in range(int(f_msb), min(int(f_msb) + DEPTH, int(f_in) + 63) + 1):     # shifts within 63
        q, _ = fixed.convert(vals, int(f_in), f, bits, rounding=rounding, signed=signed)     # CONVERT's bits
        d = np.ldexp(q.astype(np.float64), -f) - np.ldexp(vals.astype(np.float64), -int(f_in))   # real units
        e = float(np.sum(counts * (d * d)))
        if best_e is None or e < best_e:
            best, best_e = f, e
    return best


def _distinct(v):
    """The distinct integers of ``v`` in ascending order (int64) and how often each occurs: a
    count per value of the range where the range is small, else by sorting."""
    lo, hi = int(v.min()), int(v.max())
    if hi - lo < 4 * v.size + 4096:
        c = np.bincount((v.astype(np.int64) - lo) if v.dtype != np.int64 or lo else v, minlength=1)
        nz = np.flatnonzero(c)
        return nz.astype(np.int64) + lo, c[nz].astype(np.float64)
    vals, counts = np.unique(v.astype(np.int64), return_counts=True)
    return vals, counts.astype(np.float64)


def input_radix(values, f_msb, bits, signed, rounding):
    """:func:`refine` of float ``values`` (a host conversion's input) from DETERMINE's ``f_msb``."""
    v = np.asarray(values, np.float64)
    amax = float(np.abs(v).max(initial=0.0))
    if amax == 0 or not np.isfinite(amax):
        return int(f_msb)
    g = 52 - int(np.floor(np.log2(amax))) - 1            # as host_radix writes them: 52 significant bits
    return refine(np.rint(np.ldexp(v, g)).astype(np.int64), g, f_msb, bits, signed, rounding)
