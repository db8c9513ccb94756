"""The quantized host mode (``--host-precision quantized``): a host layer of a deployment run in fixed
point (:class:`HostQuant`) at the width :func:`check_host_bits` allows."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from . import hostops
from ..quantize.quant import Act, host_radix, to_fixed


def check_host_bits(bits):
    """The quantized host mode's width: an integer 2..32 (else :class:`InputError`)."""
    if not isinstance(bits, int) or isinstance(bits, bool) or not 2 <= bits <= 32:
        raise InputError(f"host bits = {bits!r}: an integer 2..32")
    return bits


class HostQuant:
    """A host layer of a deployment in the quantized host mode (``--host-precision quantized``),
    the fixed-point emulation of a host op that does not only move values (``Add``,
    ``AveragePool``, ``GlobalAveragePool``, ``BatchNormalization``, ``Softmax`` and every
    ``--host-fallback`` node):

    * each input that is not already a fixed-point tensor of at most ``bits`` bits is
      converted to ``bits``-bit signed fixed point at a radix chosen by DETERMINE
      (:func:`host_radix`, the deployment's ``overflow_ratio``) and the deployment's
      ``rounding``;
    * the op runs on those exact values (float64 in numpy, or onnx's reference implementation
      for a fallback node);
    * its output is converted to ``bits``-bit fixed point the same way; the format is unsigned
      when the calibration outputs had no negative value (a later negative saturates to 0),
      and the output carries that format ``(F, bits, signed)`` to the next layer.

    Radix points and signedness are chosen when calibrating (and on every batch in dynamic
    mode), like an engine layer's. The op between the quantized input and output is exact
    float64, so a board's own implementation (a lookup table, a fixed-point unit) may differ
    from it in the last bit of the output."""

    def __init__(self, layer, bits, deploy):
        self.layer, self.bits, self.deploy = layer, bits, deploy
        self.f_in, self.f_out, self.signed = {}, None, True
        self.sat_count = 0

    def run(self, ins, calibrate):
        redo = calibrate or self.f_out is None or self.deploy.dynamic
        vals = []
        for i, a in enumerate(ins):
            if a.fmt is not None and a.fmt[1] <= self.bits:
                vals.append(a.values)
                continue
            if redo or i not in self.f_in:
                self.f_in[i] = host_radix(a.values, self.bits, True, self.deploy.overflow_ratio)
            f = self.f_in[i]
            vals.append(np.ldexp(to_fixed(a.values, f, self.bits, True, self.deploy.rounding).astype(np.float64), -f))
        out = hostops.run(self.layer, vals)
        if redo:
            self.signed = bool((out < 0).any())
            self.f_out = host_radix(out, self.bits, self.signed, self.deploy.overflow_ratio)
        y = np.ldexp(to_fixed(out, self.f_out, self.bits, self.signed, self.deploy.rounding).astype(np.float64),
                     -self.f_out)
        # rounding moves a value by at most half a unit in the last place; saturation moves it further
        self.sat_count = int(np.count_nonzero(np.abs(y - out) > np.ldexp(0.5, -self.f_out)))
        return Act(y, (self.f_out, self.bits, self.signed))
