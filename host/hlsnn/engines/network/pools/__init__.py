"""Pools, means and resizes in the network mode: a max pool of the input, average pools and
linear resizes, means over any count, global means over a length, uncounted padding, non-dyadic
corner resizes, a pool of a gate's product."""
