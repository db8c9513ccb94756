"""Number formats the accelerators compute in, emulated bit-exactly in numpy.

:mod:`hlsnn.formats.bfp`
    Block floating point: one shared exponent per block of integer mantissas.
:mod:`hlsnn.formats.fixed`
    Dynamic fixed point: the decimal point of each output chosen from statistics (MSB/LSB
    histograms) of the current operation's wide results, and the embodiments E1-E4.
:mod:`hlsnn.formats.shift`
    Shift codes: power-of-two and two-hot weights for a multiplier-free datapath.
:mod:`hlsnn.formats.sparse`
    Compressed kernels and sub-feature-maps (zeros dropped) and the sparsity-balanced
    partitioner of the sparse accelerators.
"""
from . import bfp
from . import fixed
from . import shift
from . import sparse

__all__ = ["bfp", "fixed", "shift", "sparse"]
