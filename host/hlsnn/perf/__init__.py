"""Cycle counts of the generated hardware, from the C-simulation's loop counters.

Every kernel counts, in C-simulation only, the iterations and entries of its labelled loops
(``hls/include/hlsnn/counters.h``). One page per engine (:mod:`~hlsnn.perf.bfp_systolic`,
:mod:`~hlsnn.perf.shift_mac`, :mod:`~hlsnn.perf.sparse_cluster`; each module docstring *is* the page) lists the
loops with their II, the accesses per iteration that set it, the depth and the phase, and
:mod:`.model` turns the counts into cycles as the HLS scheduler would. The csim and sim
targets log the counters of every kernel call; an operation's :attr:`Kernel.last_cycles`
(a :class:`~.model.KernelCycles`, :mod:`hlsnn.engines.instrument`) sums the calls the
transparent tiling made; ``hlsnn perf`` (:mod:`hlsnn.measure.operation`) and the deploy report read the same numbers. :mod:`.pages` holds the
pages by engine, :mod:`.calls` turns a call's counters into its cycles.
"""
