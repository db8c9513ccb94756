"""A simulated PYNQ device: run ``pynq.Overlay`` + ``pynq.allocate`` + the unmodified
``pynq.lib.dma.DMA`` driver on a machine without an FPGA (the ``sim`` target).

:class:`SimDevice` is a ``pynq.Device`` (pynq 3.x and 4.0) with the ``REGISTER_RW`` capability: every
MMIO read and write of pynq and of its drivers (``mmio.read``, ``ip.write``, ``register_map``)
arrives here and is routed by address to a Python model of the IP at that address. Addresses,
IP types, register maps, stream widths and the AXI4-Stream wiring all come from the overlay's
``.hwh``; nothing is hard-coded. Example (the PYNQ-Z2 resizer: AXI DMA + HLS resize_accel)::

    import numpy as np, pynq
    from hlsnn.runtime.simdevice import SimDevice, StreamKernelModel

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

The code lives in the package :mod:`hlsnn.runtime.sim`, one module per idea; this module
re-exports its names (public and private) under their old home.
"""
from __future__ import annotations

from .sim.errors import (  # noqa: F401
    SimBusError, SimCacheError, SimDeadlock, SimDmaError, SimError, SimMetadataError,
    SimUnsupported,
)
from .sim.pynq_base import (  # noqa: F401
    _PYNQ_IMPORT_ERROR, _DeviceBase, _PynqBuffer, _pynq, _require_pynq,
)
from .sim.trace import (  # noqa: F401
    _describe_in, _ev_ap_start, _ev_done, _ev_ran, _ev_start, _ev_text, _Event, _fmt_bytes,
    _Trace,
)
from .sim.memory import (  # noqa: F401
    _PAGE, _Allocation, CacheOp, SimMemory, _StrictBuffer, _check_reads, _plain,
)
from .sim.ipmodel import (  # noqa: F401
    IPModel, _is_closed,
)
from .sim.registers import (  # noqa: F401
    RegisterFileModel, _PsClockModel, _ps_regions,
)
from .sim.dma import (  # noqa: F401
    CR_RESET, CR_RS, DMACR, DMASR, LENGTH, S2MM_BASE, SA, SA_MSB, SR_DECERR, SR_DLY_IRQ,
    SR_ERR_IRQ, SR_HALTED, SR_IDLE, SR_INTERR, SR_IOC_IRQ, SR_SGINCLD, SR_SLVERR, _SR_NAMES,
    AxiDmaModel, _DmaChannel, decode_dmasr,
)
from .sim.kernel_model import (  # noqa: F401
    AP_DONE, AP_IDLE, AP_READY, AP_START, AUTO_RESTART, KernelRun, RegisterValues,
    StreamKernelModel,
)
from .sim.streams import (  # noqa: F401
    StreamLink,
)
from .sim.metadata import (  # noqa: F401
    PASS_THROUGH_IP, _is_pass_through, _stream_ports, _tdata_bytes, find_stream_links,
)
from .sim.device import (  # noqa: F401
    _ALLOC_ASSIGN, _ALLOC_WITH, _MISSING, _U32, DownloadRecord, SimDevice, _SimMemoryHandle,
    _allocation_site, log,
)

__all__ = [
    "SimDevice", "IPModel", "RegisterFileModel", "AxiDmaModel", "StreamKernelModel",
    "RegisterValues", "StreamLink", "SimMemory", "DownloadRecord", "CacheOp", "KernelRun",
    "decode_dmasr", "SimError", "SimDeadlock", "SimDmaError", "SimCacheError", "SimBusError",
    "SimMetadataError", "SimUnsupported",
]
