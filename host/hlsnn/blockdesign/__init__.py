"""An overlay's block design as data, without Vivado: its values for ``hls/tcl/bd.tcl.j2``
(:mod:`.design`, with the boards' Vivado board files, :mod:`.boardfiles`), the PS clock presets
(:mod:`.ps_presets`) and its hardware handoff written (:mod:`.hwh`) and read the way pynq does
(:mod:`.hwh_read`). The bitstream flow (:mod:`hlsnn.build`) renders it and runs Vivado on it;
the simulated boards (:mod:`hlsnn.runtime.sim_target`, :mod:`hlsnn.network.simboard`) only
render its ``.hwh``. The network overlay's ``.hwh`` is :mod:`hlsnn.network.hwh`."""
from .design import bd_context

__all__ = ["bd_context"]
