"""Cycles measured by running the kernels' drivers on a target (above :mod:`hlsnn.runtime`; the
cycle models they read are :mod:`hlsnn.perf`'s): ``hlsnn perf``'s one operation of a given shape
(:mod:`hlsnn.measure.operation`), a deployed layer's modelled cycles (:mod:`hlsnn.measure.layers`), the sparse engine's
work sweep (:mod:`hlsnn.measure.sparse_work`) and the emulator target that also counts the loops
(:mod:`hlsnn.measure.counting`)."""
