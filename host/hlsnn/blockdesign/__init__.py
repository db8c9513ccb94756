"""An overlay's block design as data, without Vivado: its values for ``hls/tcl/bd.tcl.j2``
(:mod:`hlsnn.blockdesign.design`, with the boards' Vivado board files, :mod:`hlsnn.blockdesign.boardfiles`), the PS clock presets
(:mod:`hlsnn.blockdesign.ps_presets`) and its hardware handoff written (:mod:`hlsnn.blockdesign.hwh`) and read the way pynq does
(:mod:`hlsnn.blockdesign.hwh_read`). The bitstream flow (:mod:`hlsnn.build`) renders it and runs Vivado on it;
the simulated boards (:mod:`hlsnn.runtime.sim_target`, :mod:`hlsnn.network.simboard`) only
render its ``.hwh``. The network overlay's ``.hwh`` is :mod:`hlsnn.network.hwh`."""
from .design import bd_context

__all__ = ["bd_context"]
