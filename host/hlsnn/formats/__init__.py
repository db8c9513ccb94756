"""Number formats the accelerators compute in, emulated bit-exactly in numpy.

:mod:`hlsnn.formats.bfp`
    Block floating point: one shared exponent per block of integer mantissas.
:mod:`hlsnn.formats.shift`
    Shift codes: power-of-two and two-hot weights for a multiplier-free datapath.
"""
from . import bfp
from . import shift

__all__ = ["bfp", "shift"]
