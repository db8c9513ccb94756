"""The errors the simulated device raises: :class:`SimError` (an ``HlsnnError``) and its kinds
(deadlock, DMA error bits, cache misuse, bus errors, unusable metadata, unmodelled features)."""
from __future__ import annotations

from ...errors import HlsnnError


class SimError(HlsnnError, RuntimeError):
    """Base class of the errors the simulated device raises."""


class SimDeadlock(SimError):
    """A transfer or a kernel run can never complete; the message says why. On hardware the
    same code hangs (the pynq driver's ``wait()`` polls without a timeout)."""


class SimDmaError(SimError):
    """The simulated AXI DMA set error bits in its status register (decoded in the message)."""


class SimCacheError(SimError):
    """Strict cache mode: a bus master read CPU-written data that was never flushed, or the
    CPU read bus-master-written data that was never invalidated."""


class SimBusError(SimError):
    """An MMIO access went to an unmapped address, to IP without a model, or to a PL that
    was never programmed."""


class SimMetadataError(SimError):
    """The overlay's metadata (``.hwh`` next to the ``.bit``) is missing or unusable."""


class SimUnsupported(SimError):
    """The design uses a feature the simulation does not model."""
