"""Cycles measured by running the kernels' drivers on a target (above :mod:`hlsnn.runtime`; the
cycle models they read are :mod:`hlsnn.perf`'s): ``hlsnn perf``'s one operation of a given shape
(:mod:`.operation`), a deployed layer's modelled cycles (:mod:`.layers`), the sparse engine's
work sweep (:mod:`.sparse_work`) and the emulator target that also counts the loops
(:mod:`.counting`)."""
