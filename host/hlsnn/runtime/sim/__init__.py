"""A simulated PYNQ device: run ``pynq.Overlay`` + ``pynq.allocate`` + the unmodified
``pynq.lib.dma.DMA`` driver on a machine without an FPGA (the ``sim`` target).

:class:`SimDevice` is a ``pynq.Device`` (pynq 3.x and 4.0) with the ``REGISTER_RW`` capability: every
MMIO read and write of pynq and of its drivers (``mmio.read``, ``ip.write``, ``register_map``)
arrives here and is routed by address to a Python model of the IP at that address. Addresses,
IP types, register maps, stream widths and the AXI4-Stream wiring all come from the overlay's
``.hwh``; nothing is hard-coded. Example (the PYNQ-Z2 resizer: AXI DMA + HLS resize_accel)::

    import numpy as np, pynq
    from hlsnn.runtime.sim import SimDevice, StreamKernelModel

    def resize(beats, regs):                 # beats: uint8 (n, 3), one RGB pixel per beat
        img = beats.reshape(regs["src_rows"], regs["src_cols"], 3)   # registers by name or offset
        rows = np.arange(regs["dst_rows"]) * img.shape[0] // regs["dst_rows"]
        cols = np.arange(regs["dst_cols"]) * img.shape[1] // regs["dst_cols"]
        out = img[rows][:, cols].reshape(-1, 3)
        return out, {}, len(out) - 1         # output beats, output registers, beat with TLAST

    with SimDevice(strict_cache=True) as sim:    # installs itself as pynq.Device.active_device
        sim.add_model("resize_accel_0", StreamKernelModel(
            resize, n_in=lambda regs: regs["src_rows"] * regs["src_cols"]))
        ol = pynq.Overlay("resizer.bit")         # resizer.hwh next to it; the .bit can be anything
        ...                                      # from here on, the same code as on the board

Models: :class:`AxiDmaModel` (AXI DMA in simple mode; created for every
``xilinx.com:ip:axi_dma``), :class:`StreamKernelModel` (an ``ap_ctrl_hs`` HLS kernel whose
behaviour is a Python function on stream beats), :class:`RegisterFileModel` (plain
registers), or your own :class:`IPModel` subclass. The PS clock registers that
``Overlay.download()`` programs are modelled too, preset from the ``.hwh``'s PS configuration
(reference clock, PLL feedback dividers, PL clock sources and divisors: see
:mod:`hlsnn.runtime.ps_clocks`) as on a board booted with that design, so ``pynq.Clocks`` reports
the PL clocks the design declares; the PL clock frequency that Zynq-7000 ``.hwh`` files lack in
pynq 4.0.0 is filled in (see :attr:`SimDevice.fixups`).

Nothing hangs: when the driver polls a DMA status register (``wait()``) or a kernel's ``CTRL``
for something that can no longer happen (a missing TLAST, a kernel waiting for input nobody
sends, a kernel never started, a transfer longer than the kernel reads...), the register read
raises :class:`SimDeadlock` saying why. DMA error bits (DMAIntErr for a packet longer than the
receive buffer, DMADecErr for an address outside the DDR) are decoded into
:class:`SimDmaError`. ``strict_cache=True`` turns a missing ``flush()`` / ``invalidate()`` into
:class:`SimCacheError` naming the buffer (by the variable it was allocated into).

Inspection: ``sim.models`` (live models by IP name; ``sim.model("axi_dma_0").s2mm``...),
``sim.streams`` / ``sim.describe_streams()`` (the stream paths found in the ``.hwh``),
``sim.trace`` (transfers and kernel runs), ``sim.cache_ops``, ``sim.downloads``, ``sim.ps_clocks``
(the PS clock settings read from the last ``.hwh``),
``sim.memory`` (the simulated DDR, for bus-master models: ``read``/``write`` by physical address).

Not modelled: timing; scatter-gather DMA, VDMA, interrupt-driven ``wait_async``, partial
reconfiguration; TKEEP/TSTRB beyond whole bytes (width converters and FIFOs between the DMA and
the kernel are byte-transparent). A kernel model sees the whole input of a run at once, so once
started it buffers its input: a real kernel that streams output while reading input back-pressures
an unarmed S2MM earlier than the model does.

The code is one module per idea; the public names above are importable from this package.
Imports flow one way, each module using only those listed before it:

- ``errors``: :class:`~.errors.SimError` and its kinds;
- ``pynq_base``: pynq imported quietly (``pynq.Device``, ``PynqBuffer``, or stand-ins);
- ``trace``: trace events, formatted when read;
- ``memory``: the simulated DDR, buffers and the strict cache model;
- ``ipmodel``: :class:`~.ipmodel.IPModel`, the base of the IP models;
- ``axi_master``: ``m_axi`` ports on the simulated DDR (width, bursts, an assumed latency) and
  an ``ap_ctrl_hs`` kernel that uses them (:class:`~.axi_master.MasterKernelModel`);
- ``registers``: plain register files and the PS clock registers;
- ``dma``: the AXI DMA in simple mode;
- ``kernel_model``: an ``ap_ctrl_hs`` HLS kernel with stream data, behaviour in Python;
- ``streams``: AXI4-Stream links between the models;
- ``metadata``: the stream paths of a ``.hwh``;
- ``device``: :class:`~.device.SimDevice`, the ``pynq.Device`` that ties them together.
"""
from __future__ import annotations

from .errors import (
    SimBusError, SimCacheError, SimDeadlock, SimDmaError, SimError, SimMetadataError, SimUnsupported,
)
from .memory import CacheOp, SimMemory
from .ipmodel import IPModel
from .axi_master import AxiMaster, MasterKernelModel
from .registers import RegisterFileModel
from .dma import AxiDmaModel, decode_dmasr
from .kernel_model import KernelRun, RegisterValues, StreamKernelModel
from .streams import StreamLink
from .device import DownloadRecord, SimDevice

__all__ = [
    "SimDevice", "IPModel", "RegisterFileModel", "AxiDmaModel", "StreamKernelModel", "AxiMaster",
    "MasterKernelModel",
    "RegisterValues", "StreamLink", "SimMemory", "DownloadRecord", "CacheOp", "KernelRun",
    "decode_dmasr", "SimError", "SimDeadlock", "SimDmaError", "SimCacheError", "SimBusError",
    "SimMetadataError", "SimUnsupported",
]
