"""The bfp network kernel's widths (netbfp's bounds, :mod:`hlsnn.engines.bfp_systolic.network.lower`): a leaf module, so the
resource model (:mod:`.resmodel`) and the sizer (:mod:`hlsnn.engines.bfp_systolic.netsize`) read them
without the emulator."""

#: the float64 significand: sums below 2**53 (in units of their finest term) are exact
EXACT_BITS = 53
#: an activation's mantissa on chip (the network kernel's 36-bit element: this and a 10-bit
#: exponent): an Add's sum must be below 2**(ELEM_BITS - 1) (rule bfp_add)
ELEM_BITS = 26
#: a mean over a count that is not a power of two: its sum's bound (rule bfp_mean, :mod:`.anymean`)
MEAN_BITS = 52
#: a wide element's mantissa bits (a global pool's sums: below 2**53, netbfp rule bfp_global_pool; the
#: output words); an element's in the activation buffers is :data:`ELEM_BITS` (26: a 36-bit
#: element with its 10-bit exponent)
WIDE_BITS = 54
