"""Codes at a calibrated radix: the layer path's step of rules 9e (:mod:`hlsnn.deploy.run.tablecodes`)
and 10c (:mod:`hlsnn.deploy.run.gatecodes`), where a float host value that the network modes
materialize as ``b``-bit codes is written as those codes and read back as values, so that both
paths give the same bits."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ..quantize.quant import host_radix, to_fixed


def codes_at_radix(dep, values, f, bits, calibrate, refuse, codes=None):
    """``(v, F)``: ``values`` as signed ``bits``-bit codes at radix ``F``, back as values
    ``v = q * 2**-F`` (float64, exact).

    ``F`` is ``f`` (the deployment's calibrated radix) unless calibrating, the deployment is
    ``dynamic`` or ``f`` is None: then DETERMINE, ``host_radix(values, bits, signed,
    dep.overflow_ratio)``; with ``f`` None outside a calibration (and not ``dynamic``),
    :class:`InputError` with ``refuse()``'s message. The codes are ``to_fixed(values, F, bits,
    signed, dep.rounding)``, or ``codes(values, F)`` when given (BFP pairs: rule 9b)."""
    if calibrate or dep.dynamic or f is None:
        if not calibrate and not dep.dynamic:
            raise InputError(refuse())
        f = int(host_radix(values, bits, True, dep.overflow_ratio))
    q = to_fixed(values, f, bits, True, dep.rounding) if codes is None else codes(values, f)
    return np.ldexp(q.astype(np.float64), -f), f
