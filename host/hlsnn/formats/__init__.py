"""Number formats the accelerators compute in, emulated bit-exactly in numpy.

:mod:`hlsnn.formats.bfp`
    Block floating point: one shared exponent per block of integer mantissas.
"""
from . import bfp

__all__ = ["bfp"]
