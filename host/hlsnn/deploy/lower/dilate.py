"""Dilation in the network mode: a convolution with dilations ``(dh, dw)`` and
kernel ``(kh, kw)`` is the ordinary convolution with the kernel of extent ``(dh*(kh-1)+1,
dw*(kw-1)+1)`` whose holes hold zero weights, with the same strides and padding. Its output
is the dilated convolution's by definition (each output sums the same products, plus products
by zero), so the integer network kernels run it unchanged: the sparse engine's kernel skips the
zero weights; the dense ``shift_mac`` pays their multiply-adds. ``bfp_systolic`` does not use
it: a BFP patch's shared exponent is over the taps alone, so its network mode reads the taps
``dh``, ``dw`` apart (:mod:`hlsnn.engines.bfp_systolic.network.lower`, rule bfp_conv).
"""
from __future__ import annotations

from ...engines.convgeom import spread

#: the value of each shift-add field (``hlsnn.engines.shift_mac.network.lower._fields``) at a hole
HOLE_FIELDS = dict(zero=1, zero2=1)      # zero2: a two-term layer's second code (shift_mac.network.lower)


def dilate(codes, extra, dh, dw):
    """The zero-filled kernel of a dilated layer's taps ``codes`` (Z, C/g, kh, kw) and its
    engine fields ``extra`` (``fields``: per-tap arrays of the same shape, a hole being a zero
    code); ``(codes, extra)`` unchanged when ``dh == dw == 1``."""
    if (dh, dw) == (1, 1):
        return codes, extra
    extra = dict(extra)
    if "fields" in extra:
        extra["fields"] = {n: spread(v, dh, dw, HOLE_FIELDS.get(n, 0)) for n, v in extra["fields"].items()}
    return spread(codes, dh, dw), extra
