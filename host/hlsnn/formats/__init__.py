"""Number formats the accelerators compute in, emulated bit-exactly in numpy.

:mod:`hlsnn.formats.bfp`
    Block floating point: one shared exponent per block of integer mantissas.
:mod:`hlsnn.formats.shift`
    Shift codes: power-of-two and two-hot weights for a multiplier-free datapath.
:mod:`hlsnn.formats.sparse`
    Compressed kernels and sub-feature-maps (zeros dropped) and the sparsity-balanced
    partitioner of the sparse accelerators.
"""
from . import bfp
from . import shift
from . import sparse

__all__ = ["bfp", "shift", "sparse"]
