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
"""
from __future__ import annotations

import bisect
import collections
import itertools
import linecache
import logging
import os
import re
import struct
import sys
import threading
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import HlsnnError, MissingDependency
from . import ps_clocks as _ps_clocks

with warnings.catch_warnings():
    # pynq warns at import time that x86 is not a board architecture: irrelevant here.
    warnings.filterwarnings("ignore", message="Pynq does not support the CPU Architecture",
                            category=ResourceWarning)
    try:
        from .pynq_compat import import_pynq as _import_pynq
        _pynq = _import_pynq()  # with a pkg_resources stand-in on setuptools >= 81
        from pynq.buffer import PynqBuffer as _PynqBuffer
        _DeviceBase = _pynq.Device
        _PYNQ_IMPORT_ERROR = None
    except ImportError as _exc:  # pragma: no cover - exercised only without pynq
        _pynq = None
        _PynqBuffer = np.ndarray
        _DeviceBase = object
        _PYNQ_IMPORT_ERROR = _exc

log = logging.getLogger(__name__)

__all__ = [
    "SimDevice", "IPModel", "RegisterFileModel", "AxiDmaModel", "StreamKernelModel",
    "RegisterValues", "StreamLink", "SimMemory", "DownloadRecord", "CacheOp", "KernelRun",
    "decode_dmasr", "SimError", "SimDeadlock", "SimDmaError", "SimCacheError", "SimBusError",
    "SimMetadataError", "SimUnsupported",
]


# --------------------------------------------------------------------------------------------
# errors

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


# --------------------------------------------------------------------------------------------
# AXI DMA register constants (PG021, simple / direct register mode)

DMACR, DMASR, SA, SA_MSB, LENGTH = 0x00, 0x04, 0x18, 0x1C, 0x28
S2MM_BASE = 0x30
CR_RS, CR_RESET = 0x1, 0x4
SR_HALTED, SR_IDLE, SR_SGINCLD = 0x1, 0x2, 0x8
SR_INTERR, SR_SLVERR, SR_DECERR = 0x10, 0x20, 0x40
SR_IOC_IRQ, SR_DLY_IRQ, SR_ERR_IRQ = 0x1000, 0x2000, 0x4000
_SR_NAMES = [(SR_HALTED, "Halted"), (SR_IDLE, "Idle"), (SR_SGINCLD, "SGIncld"),
             (SR_INTERR, "DMAIntErr"), (SR_SLVERR, "DMASlvErr"), (SR_DECERR, "DMADecErr"),
             (0x100, "SGIntErr"), (0x200, "SGSlvErr"), (0x400, "SGDecErr"),
             (SR_IOC_IRQ, "IOC_Irq"), (SR_DLY_IRQ, "Dly_Irq"), (SR_ERR_IRQ, "Err_Irq")]


def decode_dmasr(value):
    """Name the bits set in an AXI DMA status register value.

    >>> decode_dmasr(0x4011)
    'Halted | DMAIntErr | Err_Irq'
    >>> decode_dmasr(0)
    'running, not idle'
    """
    names = [n for bit, n in _SR_NAMES if value & bit]
    return " | ".join(names) if names else "running, not idle"


# HLS ap_ctrl_hs control register
AP_START, AP_DONE, AP_IDLE, AP_READY, AUTO_RESTART = 0x1, 0x2, 0x4, 0x8, 0x80

# AXI4-Stream IP that forward bytes unchanged as far as a byte-level model is concerned.
PASS_THROUGH_IP = frozenset({
    "axis_dwidth_converter", "axis_data_fifo", "axis_register_slice", "axis_clock_converter",
    "axis_subset_converter", "axis_protocol_checker", "fifo_generator",
})

_PAGE = 4096
_MISSING = object()
_U32 = struct.Struct("<I")


def _require_pynq():
    if _pynq is None:  # pragma: no cover
        raise MissingDependency(
            f"hlsnn.runtime.simdevice needs pynq ({_PYNQ_IMPORT_ERROR}); install it with "
            "`pip install pynq==4.0.0 'setuptools<81'` (pynq 4.0 still imports pkg_resources)")


def _fmt_bytes(n):
    return f"{n} byte" if n == 1 else f"{n} bytes"


class _Event:
    """A trace entry formatted only when it is read: ``fn(*args)`` gives its text. ``args``
    are values that do not change afterwards (ints, strings, a run's register snapshot)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __str__(self):
        return self.fn(*self.args)


class _Trace(collections.deque):
    """``SimDevice.trace``: the last events as text (entries are formatted when read)."""

    def __iter__(self):
        return (str(e) for e in super().__iter__())

    def __reversed__(self):
        return (str(e) for e in super().__reversed__())

    def __getitem__(self, i):
        return str(super().__getitem__(i))

    def __contains__(self, text):
        return any(text == e for e in self)

    def __eq__(self, other):
        return list(self) == list(other)

    __hash__ = None

    def __repr__(self):
        return f"_Trace({list(self)!r}, maxlen={self.maxlen})"

    def count(self, text):
        return sum(text == e for e in self)

    def copy(self):
        return _Trace(self, maxlen=self.maxlen)


def _describe_in(alloc, address):
    """``SimMemory.describe_address`` given the allocation found there (or None)."""
    if alloc is None:
        return f"0x{address:x} (no allocated buffer there)"
    if address == alloc.start:
        return f"buffer {alloc.describe()}"
    return f"0x{address:x}, offset {address - alloc.start} into buffer {alloc.describe()}"


def _ev_start(label, nbytes, alloc, address):
    return f"{label}: start {_fmt_bytes(nbytes)} at {_describe_in(alloc, address)}"


def _ev_done(label, nbytes):
    return f"{label}: done, {_fmt_bytes(nbytes)}"


def _ev_ap_start(name, regs, n):
    return f"{name}: ap_start (regs {dict(regs)}, expects {'beats up to TLAST' if n is None else f'{n} beats'})"


def _ev_ran(name, beats_in, m, last_index):
    return (f"{name}: ran on {beats_in} beats -> {m} beats, TLAST "
            f"{'never' if last_index is None else f'on beat {last_index}'}")


def _ev_text(text):
    return text


# --------------------------------------------------------------------------------------------
# simulated DDR, buffers and the cache model

@dataclass
class CacheOp:
    """One ``flush()`` or ``invalidate()`` the CPU did (see :attr:`SimDevice.cache_ops`)."""
    op: str
    buffer: str
    address: int
    nbytes: int


class _Allocation:
    """One ``allocate()``d region of the simulated DDR."""

    def __init__(self, ident, start, offset, size, nbytes, coherent, name, host, strict):
        self.id, self.start, self.offset, self.size = ident, start, offset, size
        self.nbytes, self.coherent, self.name, self.host = nbytes, coherent, name, host
        tracked = strict and not coherent
        self.synced = host.copy() if tracked else None        # host contents at the last sync
        self.dev_dirty = np.zeros(nbytes, bool) if tracked else None
        self.dev_writer = None
        self.freed = False

    @property
    def end(self):
        return self.start + self.nbytes

    def describe(self):
        return f"{self.name} at 0x{self.start:x} ({_fmt_bytes(self.nbytes)})"


class SimMemory:
    """The simulated DDR seen by bus masters (DMA engines, m_axi kernels).

    Buffers from :meth:`SimDevice.allocate` live here at page-aligned physical addresses from
    ``base``. Models read and write it by physical address with :meth:`read` / :meth:`write`.
    Without strict cache mode the CPU's numpy view and the DDR are the same bytes. In strict
    mode each cacheable buffer has its own CPU copy: CPU writes reach the DDR only on
    ``flush()``, bus-master writes reach the CPU only on ``invalidate()``, and a read of
    unsynchronised data raises :class:`SimCacheError`.
    """

    def __init__(self, base, size, strict):
        if base % _PAGE or size % _PAGE or size <= 0:
            raise ValueError(f"memory base 0x{base:x} and size {size} must be positive multiples of {_PAGE}")
        self.base, self.size, self.strict = base, size, strict
        self.ddr = np.zeros(size, np.uint8)          # untouched pages cost nothing
        self._free = [(0, size)]                     # (offset, length), sorted, coalesced
        self._allocs = {}                            # id -> _Allocation
        self._starts = []                            # sorted physical starts of live allocations
        self._by_start = {}
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    # allocation ---------------------------------------------------------------------------
    def _allocate(self, nbytes, coherent, name):
        size = max(_PAGE, -(-nbytes // _PAGE) * _PAGE)
        with self._lock:
            for i, (off, length) in enumerate(self._free):
                if length >= size:
                    if length == size:
                        del self._free[i]
                    else:
                        self._free[i] = (off + size, length - size)
                    break
            else:
                live = sum(a.nbytes for a in self._allocs.values())
                raise SimError(f"simulated DDR exhausted: cannot allocate {_fmt_bytes(nbytes)} for {name}; "
                               f"{len(self._allocs)} live buffers hold {_fmt_bytes(live)} of "
                               f"{self.size >> 20} MiB (SimDevice(memory_size=...) to enlarge)")
            ident = next(self._ids)
            if self.strict and not coherent:
                host = np.zeros(nbytes, np.uint8)
                self.ddr[off:off + nbytes] = 0
            else:
                host = self.ddr[off:off + nbytes]
            alloc = _Allocation(ident, self.base + off, off, size, nbytes, coherent, name, host, self.strict)
            self._allocs[ident] = alloc
            bisect.insort(self._starts, alloc.start)
            self._by_start[alloc.start] = alloc
            return alloc

    def _release(self, alloc):
        with self._lock:
            if alloc.freed:
                return
            alloc.freed = True
            self._allocs.pop(alloc.id, None)
            self._by_start.pop(alloc.start, None)
            i = bisect.bisect_left(self._starts, alloc.start)
            if i < len(self._starts) and self._starts[i] == alloc.start:
                del self._starts[i]
            off, size = alloc.offset, alloc.size
            j = bisect.bisect_left(self._free, (off, 0))
            self._free.insert(j, (off, size))
            merged = []
            for o, n in self._free:
                if merged and merged[-1][0] + merged[-1][1] == o:
                    merged[-1] = (merged[-1][0], merged[-1][1] + n)
                else:
                    merged.append((o, n))
            self._free = merged

    def allocation(self, bo):
        """The live allocation with id ``bo`` (the ``bo`` attribute of its buffers)."""
        return self._allocs[bo]

    @property
    def allocations(self):
        """Live allocations, by physical address."""
        return [self._by_start[s] for s in self._starts]

    def find(self, address):
        """The live allocation containing physical ``address``, or None."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i >= 0:
            alloc = self._by_start[self._starts[i]]
            if alloc.start <= address < max(alloc.end, alloc.start + 1):
                return alloc
        return None

    def describe_address(self, address):
        return _describe_in(self.find(address), address)

    def contains(self, address, nbytes):
        return self.base <= address and address + nbytes <= self.base + self.size

    def _overlapping(self, lo, hi):
        i = max(0, bisect.bisect_right(self._starts, lo) - 1)
        out = []
        while i < len(self._starts) and self._starts[i] < hi:
            alloc = self._by_start[self._starts[i]]
            if alloc.end > lo and alloc.dev_dirty is not None:
                out.append(alloc)
            i += 1
        return out

    # bus-master access ----------------------------------------------------------------------
    def _check_range(self, address, nbytes, master):
        if not self.contains(address, nbytes):
            raise SimBusError(f"{master}: access to 0x{address:x}..0x{address + nbytes:x} is outside the "
                              f"simulated DDR 0x{self.base:x}..0x{self.base + self.size:x}")

    def check_flushed(self, address, nbytes, master="bus master"):
        """Strict mode: raise :class:`SimCacheError` if the CPU changed any of these bytes after
        the last ``flush()`` of their buffer (a bus master would read stale DDR)."""
        if not self.strict:
            return
        lo, hi = address, address + nbytes
        for alloc in self._overlapping(lo, hi):
            a, b = max(lo, alloc.start) - alloc.start, min(hi, alloc.end) - alloc.start
            stale = np.count_nonzero(alloc.host[a:b] != alloc.synced[a:b])
            if stale:
                raise SimCacheError(
                    f"{master} reads buffer {alloc.describe()}, but the CPU changed {_fmt_bytes(stale)} "
                    f"of it after its last flush(): on hardware the PL would read stale DDR contents. "
                    f"Call flush() (sync_to_device()) on the buffer after writing it and before the PL "
                    f"reads it (the pynq DMA driver does this in sendchannel.transfer())")

    def read(self, address, nbytes, master="bus master"):
        """Bytes at physical ``address`` as a bus master sees them (a uint8 copy)."""
        self._check_range(address, nbytes, master)
        self.check_flushed(address, nbytes, master)
        off = address - self.base
        return self.ddr[off:off + nbytes].copy()

    def write(self, address, data, master="bus master"):
        """Store ``data`` (bytes or uint8 array) at physical ``address`` as a bus master."""
        data = np.frombuffer(bytes(data), np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8).ravel()
        nbytes = data.size
        self._check_range(address, nbytes, master)
        off = address - self.base
        self.ddr[off:off + nbytes] = data
        lo, hi = address, address + nbytes
        for alloc in self._overlapping(lo, hi):
            a, b = max(lo, alloc.start) - alloc.start, min(hi, alloc.end) - alloc.start
            alloc.dev_dirty[a:b] = True
            alloc.dev_writer = master

    # cache maintenance (strict mode) --------------------------------------------------------
    def _flush(self, alloc, offset, nbytes):
        if alloc.dev_dirty is None:
            return
        a, b = offset, min(alloc.nbytes, offset + nbytes)
        changed = alloc.host[a:b] != alloc.synced[a:b]
        ddr = self.ddr[alloc.offset + a:alloc.offset + b]
        ddr[changed] = alloc.host[a:b][changed]          # write back the dirty bytes only
        alloc.synced[a:b] = alloc.host[a:b]

    def _invalidate(self, alloc, offset, nbytes):
        if alloc.dev_dirty is None:
            return
        a, b = offset, min(alloc.nbytes, offset + nbytes)
        alloc.host[a:b] = self.ddr[alloc.offset + a:alloc.offset + b]
        alloc.synced[a:b] = alloc.host[a:b]
        alloc.dev_dirty[a:b] = False

    def _check_cpu_read(self, alloc, a, b):
        if alloc.dev_dirty is None:
            return
        n = np.count_nonzero(alloc.dev_dirty[max(a, 0):min(b, alloc.nbytes)])
        if n:
            raise SimCacheError(
                f"CPU read of buffer {alloc.describe()}: {alloc.dev_writer} wrote {_fmt_bytes(n)} of it "
                f"that were never invalidated, so on hardware the CPU may read stale cached data. Call "
                f"invalidate() (sync_from_device()) on the buffer after the transfer completes (the "
                f"pynq DMA driver does this in recvchannel.wait())")


def _plain(obj):
    """``obj`` with every PynqBuffer replaced by a plain ndarray view (recursing containers)."""
    if isinstance(obj, _PynqBuffer):
        return obj.view(np.ndarray)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_plain(x) for x in obj)
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def _check_reads(obj):
    if isinstance(obj, _StrictBuffer):
        obj._sim_check_read()
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _check_reads(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            _check_reads(x)


class _StrictBuffer(_PynqBuffer):
    """A PynqBuffer whose CPU reads are checked against data a bus master wrote but the CPU
    never invalidated (strict cache mode only). Indexing, ufuncs, numpy functions,
    ``tobytes``/``tolist``/``copy``/``astype``/``item`` and iteration are checked;
    ``np.asarray``/``memoryview`` bypass the check and then see the stale data, as the CPU
    would on the board."""

    def __array_finalize__(self, obj):
        super().__array_finalize__(obj)
        self._sim_alloc = getattr(obj, "_sim_alloc", None)

    def _sim_check_read(self):
        alloc = getattr(self, "_sim_alloc", None)
        if alloc is None or alloc.dev_dirty is None or alloc.freed:
            return
        base = alloc.host.__array_interface__["data"][0]
        lo, hi = np.byte_bounds(self.view(np.ndarray))
        memory = getattr(self.device, "memory", None)
        if memory is not None:
            memory._check_cpu_read(alloc, lo - base, hi - base)

    def _sim_is_view(self, res):
        alloc = getattr(self, "_sim_alloc", None)
        if alloc is None:
            return False
        base = alloc.host.__array_interface__["data"][0]
        ptr = res.__array_interface__["data"][0]
        return base <= ptr < base + max(alloc.nbytes, 1)

    def __getitem__(self, key):
        res = super().__getitem__(key)
        if isinstance(res, np.ndarray) and self._sim_is_view(res):
            return res                       # a view: its own reads are checked later
        self._sim_check_read()
        if isinstance(res, _StrictBuffer):   # a copy (fancy indexing) is plain host memory
            res._sim_alloc = None
        return res

    def __iter__(self):
        self._sim_check_read()
        return super().__iter__()

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        _check_reads(inputs)
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = _plain(out)
        result = getattr(ufunc, method)(*_plain(inputs), **kwargs)
        if out is None or method == "at":
            return result
        # hand back the caller's own output arrays (so `buf += 1` keeps buf a PynqBuffer)
        if isinstance(result, tuple):
            return tuple(r if o is None else o for o, r in zip(out, result))
        return result if out[0] is None else out[0]

    def __array_function__(self, func, types, args, kwargs):
        _check_reads(args)
        _check_reads(kwargs)
        return func(*_plain(args), **_plain(kwargs))

    def tobytes(self, *a, **k):
        self._sim_check_read()
        return super().tobytes(*a, **k)

    def tolist(self):
        self._sim_check_read()
        return super().tolist()

    def item(self, *a):
        self._sim_check_read()
        return super().item(*a)

    def copy(self, *a, **k):
        self._sim_check_read()
        return self.view(np.ndarray).copy(*a, **k)

    def astype(self, *a, **k):
        self._sim_check_read()
        return self.view(np.ndarray).astype(*a, **k)


_ALLOC_ASSIGN = re.compile(r"([A-Za-z_][\w.]*)\s*(?::[^=]+)?=\s*(?:[A-Za-z_][\w.]*\.)?allocate\s*\(")
_ALLOC_WITH = re.compile(r"allocate\s*\(.*\)\s*as\s+([A-Za-z_]\w*)\s*:")


def _allocation_site():
    """(variable name or None, 'file:line') of the user code that called allocate()."""
    frame = sys._getframe(1)
    while frame is not None:
        mod = frame.f_globals.get("__name__", "")
        if not (mod == __name__ or mod == "pynq" or mod.startswith("pynq.")):
            break
        frame = frame.f_back
    if frame is None:  # pragma: no cover
        return None, "?"
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    line = linecache.getline(filename, lineno)
    names = _ALLOC_ASSIGN.findall(line) or _ALLOC_WITH.findall(line)
    return (names[0] if len(names) == 1 else None), f"{os.path.basename(filename)}:{lineno}"


# --------------------------------------------------------------------------------------------
# AXI4-Stream links

class StreamLink:
    """An AXI4-Stream path from a master port to a slave port, found in the ``.hwh``, through
    any pass-through IP (width converters, FIFOs, register slices). It carries bytes and
    packet boundaries (TLAST); each end reads or writes it in its own beat width, which is how
    width converters behave for whole bytes.

    Attributes: ``src``/``dst`` (block, port) names, ``path`` (pass-through blocks in
    between), ``capacity`` (bytes it can buffer; None = unbounded), ``producer`` and
    ``consumer`` (the models at the ends, None where the IP has no model), ``src_width`` and
    ``dst_width`` (TDATA bytes at each end).
    """

    def __init__(self, src, dst, path, capacity, src_width, dst_width):
        self.src, self.dst, self.path, self.capacity = src, dst, list(path), capacity
        self.src_width, self.dst_width = src_width, dst_width
        self.producer = self.consumer = None
        self.fifo_bytes = 0                     # depth of axis_data_fifo IP on the path
        self._chunks = collections.deque()      # uint8 arrays in flight, oldest first (never copied)
        self._ends = collections.deque()        # absolute byte counts at which packets end
        self.pushed = self.popped = 0

    def describe(self):
        hops = [f"{self.src[0]}.{self.src[1]}", *self.path, f"{self.dst[0]}.{self.dst[1]}"]
        return " -> ".join(hops)

    __str__ = describe

    def __repr__(self):
        return f"<StreamLink {self.describe()} ({self.level()} bytes buffered)>"

    def level(self):
        return self.pushed - self.popped

    def space(self):
        if self.capacity is None:
            return sys.maxsize
        room = max(0, self.capacity - self.level())
        c = self.consumer
        # A started kernel that reads up to TLAST, or an armed receive channel, takes all it
        # can at once (no back-pressure to model then); before that, the link's capacity holds.
        if isinstance(c, StreamKernelModel) and c.state == "input" and c.n_in is None:
            return sys.maxsize
        if isinstance(c, AxiDmaModel) and c.s2mm.active:
            return max(room, c.s2mm.total - c.s2mm.done - self.level())
        return room

    def push(self, data, last, *, copy=True):
        """Append ``data`` (bytes-like or an array, taken as its raw bytes), TLAST after its
        last byte if ``last``. ``copy=False``: ``data`` is a private array the link may keep
        as it is (the caller never changes it afterwards), so nothing is copied."""
        if isinstance(data, np.ndarray):
            arr = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
            if copy:
                arr = arr.copy()
        else:
            arr = np.frombuffer(bytes(data), np.uint8)      # bytes are immutable: no copy needed
        if arr.size:
            self._chunks.append(arr)
        self.pushed += arr.size
        if last:
            self._ends.append(self.pushed)

    def bytes_to_end(self):
        """Bytes up to and including the next TLAST in the buffer, or None."""
        return self._ends[0] - self.popped if self._ends else None

    def pop(self, nbytes):
        """Pop up to ``nbytes`` bytes, never across a packet end. Returns (data, tlast), ``data``
        a ``uint8`` array (possibly read-only, possibly a view of what was pushed: a consumer
        reads it, copies what it keeps, and never writes to it)."""
        to_end = self.bytes_to_end()
        n = min(nbytes, self.level())
        if to_end is not None:
            n = min(n, to_end)
        parts, need, chunks = [], n, self._chunks
        while need > 0:
            c = chunks[0]
            if c.size <= need:
                parts.append(chunks.popleft())
                need -= c.size
            else:
                parts.append(c[:need])
                chunks[0] = c[need:]
                need = 0
        data = parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.zeros(0, np.uint8)
        self.popped += n
        last = bool(self._ends) and self._ends[0] == self.popped
        if last:
            self._ends.popleft()
        return data, last


# --------------------------------------------------------------------------------------------
# IP models

class IPModel:
    """Base class of register-level IP models.

    :meth:`SimDevice.add_model` registers a model under an IP name of the overlay (a key of
    ``ip_dict``); at download the device calls :meth:`bind` with the IP's ``ip_dict`` entry,
    then :meth:`connect` with the stream links of its AXI4-Stream ports. Register accesses
    arrive as :meth:`read` / :meth:`write` of 32-bit words at byte offsets from the IP's base
    address. After every access the device calls :meth:`step` on all models until none makes
    progress. A model that can be polled forever returns a reason from
    :meth:`blocked_reason`.
    """

    sim = None
    name = None
    description = None

    def bind(self, sim, name, description):
        self.sim, self.name, self.description = sim, name, description
        self.registers = dict(description.get("registers") or {})
        self.offsets = {r: int(d["address_offset"]) for r, d in self.registers.items()}
        self.reset()

    def connect(self, inputs, outputs):
        """``inputs``: {slave port: StreamLink}; ``outputs``: {master port: [StreamLink, ...]}."""
        self.inputs, self.outputs = dict(inputs), {k: list(v) for k, v in outputs.items()}

    def reset(self):
        pass

    def read(self, offset):
        raise NotImplementedError

    def write(self, offset, value):
        raise NotImplementedError

    def step(self):
        return False

    #: True when :meth:`step` can make progress only after a register access that
    #: :meth:`inert` does not vouch for, or through a stream link another model's step fed
    #: (not by itself, e.g. by reading DDR the CPU changed). While every model of a design
    #: says so, the device skips stepping after inert accesses to a settled design.
    closed = False

    def inert(self, offset, write):
        """True if this read (``write`` False) or write of the register at ``offset`` cannot
        let any model make progress (the device then need not step the models after it)."""
        return False

    def blocked_reason(self):
        return None

    # helpers used by other models' diagnostics
    def producer_state(self, link):
        return f"{self.name} ({type(self).__name__}) produces no more data on {link.src[1]}"

    def consumer_state(self, link):
        return f"{self.name} ({type(self).__name__}) does not read {link.dst[1]}"

    def pending_packet_bytes(self, link):
        """Bytes this producer still holds for ``link`` up to the next TLAST, or None."""
        return None


def _is_closed(model):
    """``model.closed``, trusted only if the class that declared it also defined (or inherited)
    the ``step``, ``inert``, ``read`` and ``write`` in effect: a subclass that overrides one of
    them without declaring ``closed`` again is not closed."""
    mro = type(model).__mro__

    def owner(attr):
        return next(c for c in mro if attr in c.__dict__)
    decl = owner("closed")
    return bool(model.closed) and all(issubclass(decl, owner(a)) for a in ("step", "inert", "read", "write"))


class RegisterFileModel(IPModel):
    """Plain 32-bit read/write registers (reads return what was written, 0 at first)."""

    def __init__(self, initial=None):
        self.initial = dict(initial or {})
        self.reset()

    def reset(self):
        self.values = dict(self.initial)

    def read(self, offset):
        return self.values.get(offset, 0)

    def write(self, offset, value):
        self.values[offset] = value

    closed = True

    def inert(self, offset, write):
        return True


class _PsClockModel(RegisterFileModel):
    """The PS clock registers pynq.Clocks programs during Overlay.download() (Zynq-7000 SLCR,
    ZynqMP CRL_APB/CRF_APB), preset like a board booted with the loaded design's PS
    configuration (see :mod:`hlsnn.runtime.ps_clocks`)."""

    def __init__(self, name, initial):
        super().__init__(initial)
        self.name = name

    def preset(self, values):
        """Set registers as the boot firmware would (reset values and current values)."""
        self.initial.update(values)
        self.values.update(values)


def _ps_regions():
    """(base, size, name, registers) of the PS clock blocks, preset for a PYNQ-Z2 (SLCR) and a
    ZCU104 (CRL_APB/CRF_APB) until a design's .hwh says otherwise."""
    regs = {}
    for family in ("zynq7", "zynqmp"):
        regs.update(_ps_clocks.register_values(_ps_clocks.default_clocks(family))[0])
    return [(0xF8000000, 0x1000, "SLCR", regs["SLCR"]), (0xFF5E0000, 0x1000, "CRL_APB", regs["CRL_APB"]),
            (0xFD1A0000, 0x1000, "CRF_APB", regs["CRF_APB"])]


class _DmaChannel:
    """One channel (MM2S or S2MM) of an :class:`AxiDmaModel`."""

    def __init__(self, dma, kind, base, present, width, burst):
        self.dma, self.kind, self.base, self.present = dma, kind, base, present
        self.width, self.burst = width, burst
        self.link = None
        self._label = None
        self.reset()

    @property
    def label(self):
        name = self.dma.name
        if self._label is None or self._label[0] != name:
            role = "sendchannel" if self.kind == "MM2S" else "recvchannel"
            self._label = (name, f"{name} {self.kind} ({role})")
        return self._label[1]

    @property
    def port(self):
        return "M_AXIS_MM2S" if self.kind == "MM2S" else "S_AXIS_S2MM"

    def reset(self):
        self.rs = False
        self.cr_other = 0x00010000           # IRQThreshold = 1 after reset
        self.halted, self.idle = True, False
        self.err = self.irq = 0
        self.sa = self.sa_msb = self.sa_msb_dropped = self.length = 0
        self.active = False
        self.addr = self.total = self.done = 0
        self.transfers = 0
        self.last_transfer = None            # (address, bytes, tlast) of the last completed one
        self.error_reason = None
        self.error_reported = False
        self.rs_after_error = False
        self.ignored_length = None
        self.other = {}

    # registers --------------------------------------------------------------------------
    def dmasr(self):
        return ((SR_HALTED if self.halted else 0) | (SR_IDLE if self.idle else 0)
                | self.err | self.irq)

    def dmacr(self):
        return (CR_RS if self.rs else 0) | self.cr_other

    def read(self, rel):
        if not self.present:
            return 0
        if rel == DMACR:
            return self.dmacr()
        if rel == DMASR:
            return self.dmasr()
        if rel == SA:
            return self.sa
        if rel == SA_MSB:
            return self.sa_msb if self.dma.addr_width > 32 else 0
        if rel == LENGTH:
            return self.length
        return self.other.get(rel, 0)

    def write(self, rel, value):
        if not self.present:
            return
        if rel == DMACR:
            self.write_dmacr(value)
        elif rel == DMASR:
            self.irq &= ~(value & (SR_IOC_IRQ | SR_DLY_IRQ | SR_ERR_IRQ))   # write 1 to clear
        elif rel == SA:
            self.sa = value
        elif rel == SA_MSB:
            if self.dma.addr_width > 32:
                self.sa_msb = value
            else:
                self.sa_msb_dropped = value     # no such register in a 32-bit DMA
        elif rel == LENGTH:
            self.write_length(value)
        else:
            self.other[rel] = value

    def write_dmacr(self, value):
        if value & CR_RESET:
            self.dma.soft_reset()
            return
        self.cr_other = value & ~(CR_RS | CR_RESET) & 0xFFFFFFFF
        if value & CR_RS:
            if self.err:
                self.rs_after_error = True       # errors halt the channel until a reset
            elif self.halted:
                self.halted, self.idle, self.rs = False, False, True
        elif not self.halted:
            self.halted, self.idle, self.rs, self.active = True, False, False, False

    def write_length(self, value):
        value &= (1 << self.dma.length_width) - 1
        if self.halted:
            self.ignored_length = (f"{self.kind}_LENGTH={value} was written while the channel was "
                                   f"halted (DMACR.RS=0), which the IP ignores")
            return
        if self.active:
            raise SimDmaError(
                f"{self.label}: {self.kind}_LENGTH written while the channel is busy with a transfer "
                f"of {_fmt_bytes(self.total)} ({self.done} done); on hardware the result is undefined. "
                f"The pynq driver refuses this with 'DMA channel not idle': wait() for the running "
                f"transfer before starting the next one")
        if value == 0:
            self.ignored_length = f"{self.kind}_LENGTH=0 was written, which starts no transfer"
            return
        addr = self.sa | ((self.sa_msb << 32) if self.dma.addr_width > 32 else 0)
        memory = self.dma.sim.memory
        inside = memory.contains(addr, value)
        if inside and self.kind == "MM2S":
            memory.check_flushed(addr, value, master=self.label)   # strict mode; before any state change
        self.ignored_length = None
        self.addr, self.total, self.done = addr, value, 0
        self.active, self.idle = True, False
        if not inside:
            hint = ""
            if self.dma.addr_width <= 32 and self.sa_msb_dropped:
                hint = (f"; the upper address word 0x{self.sa_msb_dropped:x} was dropped because the DMA has "
                        f"c_addr_width={self.dma.addr_width} (rebuild with c_addr_width=64 or allocate "
                        f"below 4 GiB)")
            self._fail(SR_DECERR, f"{_fmt_bytes(value)} at 0x{addr:x} are not in the simulated DDR "
                                  f"0x{memory.base:x}..0x{memory.base + memory.size:x}{hint}")
        else:
            self.dma.sim._event(_ev_start, self.label, value, memory.find(addr), addr)

    # data movement ----------------------------------------------------------------------
    def _complete(self, tlast=True):
        self.active, self.idle = False, True
        self.irq |= SR_IOC_IRQ
        self.transfers += 1
        self.last_transfer = (self.addr, self.done, tlast)
        if self.kind == "S2MM":
            self.length = self.done
        self.dma.sim._event(_ev_done, self.label, self.done)

    def _fail(self, bit, reason):
        self.err |= bit
        self.irq |= SR_ERR_IRQ
        self.halted, self.idle, self.rs, self.active = True, False, False, False
        self.error_reason = reason
        self.error_reported = False
        self.dma.sim._trace(f"{self.label}: error {decode_dmasr(self.dmasr())}: {reason}")

    def step(self):
        if not self.active:
            return False
        memory = self.dma.sim.memory
        link = self.link
        if link is None:
            return False
        if self.kind == "MM2S":
            n = min(self.total - self.done, link.space())
            if n <= 0:
                return False
            data = memory.read(self.addr + self.done, n, master=self.label)   # a private copy
            self.done += n
            link.push(data, last=self.done == self.total, copy=False)
            if self.done == self.total:
                self._complete()
            return True
        # S2MM
        if link.level() == 0:
            return False
        room = self.total - self.done
        progress = False
        if room > 0:
            data, last = link.pop(room)
            memory.write(self.addr + self.done, data, master=self.label)
            self.done += len(data)
            progress = True
            if last:
                self._complete(tlast=True)
                return True
        if self.done == self.total and link.level() > 0:
            # more bytes of the same packet (no TLAST yet) than the armed length
            self._fail(SR_INTERR, self._overflow_reason())
            return True
        return progress

    def _overflow_reason(self):
        link = self.link
        size = None
        if link.bytes_to_end() is not None:
            size = self.done + link.bytes_to_end()
        elif link.producer is not None:
            more = link.producer.pending_packet_bytes(link)
            if more is not None:
                size = self.done + link.level() + more
        known = f" (the packet is {_fmt_bytes(size)})" if size else ""
        where = self.dma.sim.memory.describe_address(self.addr)
        return (f"the packet from {link.describe()} is longer than the {_fmt_bytes(self.total)} armed "
                f"in S2MM_LENGTH{known}: {where} filled up before TLAST. Allocate the receive buffer "
                f"at least as large as the largest packet")

    # diagnostics ------------------------------------------------------------------------
    def blocked(self):
        return (not self.halted and not self.idle) or (self.halted and self.rs_after_error)

    def state(self):
        """One sentence on what this channel is doing (for other models' diagnostics)."""
        if self.err:
            return f"{self.label} is halted after an error ({decode_dmasr(self.dmasr())})"
        if self.halted:
            return (f"{self.label} is halted (DMACR.RS=0; the pynq DMA driver sets RS=1 when it is "
                    f"created, e.g. on the first access to ol.{self.dma.name})")
        if self.active:
            return (f"{self.label} is busy: {self.done} of {_fmt_bytes(self.total)} "
                    f"{'sent' if self.kind == 'MM2S' else 'received'}")
        if self.transfers == 0:
            note = f" ({self.ignored_length})" if self.ignored_length else ""
            verb = "sendchannel.transfer()" if self.kind == "MM2S" else "recvchannel.transfer()"
            return f"{self.label} has no transfer started ({verb} was never called){note}"
        addr, n, _ = self.last_transfer
        return f"{self.label} is idle: its last transfer of {_fmt_bytes(n)} has completed"

    def blocked_reason(self):
        head = f"{self.label} will never complete"
        if self.halted:
            return (f"{head}: it halted after an error ({decode_dmasr(self.dmasr())}: {self.error_reason}) "
                    f"and DMACR.RS=1 is ignored until the DMA is reset (DMACR bit 2)")
        if not self.active:
            note = f"; {self.ignored_length}" if self.ignored_length else ""
            return (f"{head}: no transfer was started on it ({self.kind}_LENGTH was never written{note}), "
                    f"and DMASR.Idle stays 0 until a first transfer completes")
        link = self.link
        where = self.dma.sim.memory.describe_address(self.addr)
        if link is None:
            return (f"{head}: its {self.port} port is not connected to anything in the .hwh; "
                    f"{self.done} of {_fmt_bytes(self.total)} moved")
        if self.kind == "MM2S":
            cap = "" if link.capacity is None else f" (which buffers {_fmt_bytes(link.capacity)})"
            msg = (f"{head}: it has sent {self.done} of {_fmt_bytes(self.total)} from {where} into "
                   f"{link.describe()}{cap}, and nothing drains the stream: ")
            if link.consumer is None:
                return msg + (f"{link.dst[0]} has no model (register one with "
                              f"sim.add_model({link.dst[0]!r}, ...))")
            return msg + link.consumer.consumer_state(link)
        # S2MM
        got = f"received {self.done} of the {_fmt_bytes(self.total)} armed in S2MM_LENGTH ({where})"
        if link.producer is None:
            return (f"{head}: it {got}, and the stream comes from {link.src[0]}.{link.src[1]} "
                    f"(via {link.describe()}), which has no model (register one with "
                    f"sim.add_model({link.src[0]!r}, ...))")
        producer = link.producer.producer_state(link)
        if self.done > 0:
            full = ", the whole buffer," if self.done == self.total else ""
            return (f"{head}: TLAST never arrived. It {got}{full} from {link.describe()} without TLAST, "
                    f"and no more data will come: {producer}. On hardware recvchannel.wait() hangs "
                    f"here; the kernel must assert TLAST on the last beat of the packet (hls::axis / "
                    f"ap_axiu with .last set; a plain hls::stream has no TLAST)")
        return f"{head}: it {got} from {link.describe()}, and no data will come: {producer}"

    def consumer_state(self, link):  # the DMA's S2MM as the consumer of a loopback link
        if self.halted:
            return self.state()
        if not self.active:
            return f"{self.label} is not armed (call recvchannel.transfer())"
        return f"{self.label} has room for {self.total - self.done} more bytes"

    def producer_state(self, link):  # the DMA's MM2S as the producer of a link
        return self.state()


class AxiDmaModel(IPModel):
    """The AXI DMA (PG021) in simple / direct register mode, as ``pynq.lib.dma.DMA`` drives it.

    Registers: MM2S_DMACR 0x00, MM2S_DMASR 0x04, MM2S_SA 0x18 (+0x1C), MM2S_LENGTH 0x28,
    S2MM_DMACR 0x30, S2MM_DMASR 0x34, S2MM_DA 0x48 (+0x4C), S2MM_LENGTH 0x58. DMACR bit 0
    run/stop, bit 2 soft reset (both channels); DMASR bit 0 halted, 1 idle (0 before the
    first transfer), 4 DMAIntErr, 5 DMASlvErr, 6 DMADecErr, 12 IOC_Irq, 14 Err_Irq (12-14
    write-1-to-clear). Writing a non-zero LENGTH starts a transfer; LENGTH is masked to
    ``c_sg_length_width`` bits and the upper address word is ignored when
    ``c_addr_width`` <= 32, as in the IP.

    MM2S reads the buffer from the simulated DDR and pushes it into the stream found on
    ``M_AXIS_MM2S`` (TLAST on the last byte); S2MM, once armed, takes bytes from the stream on
    ``S_AXIS_S2MM`` up to TLAST, writes them to DDR and puts the received length in
    S2MM_LENGTH. A packet longer than the armed length sets DMAIntErr and halts the channel.
    Attributes ``mm2s`` and ``s2mm`` expose each channel's state.
    """

    def bind(self, sim, name, description):
        params = {k.lower(): v for k, v in (description.get("parameters") or {}).items()}

        def p(key, default):
            try:
                return int(params.get(key, default))
            except (TypeError, ValueError):
                return default

        self.sg = bool(p("c_include_sg", 0))
        self.addr_width = p("c_addr_width", 32)
        self.length_width = p("c_sg_length_width", 26)
        self.mm2s = _DmaChannel(self, "MM2S", 0x00, bool(p("c_include_mm2s", 1)),
                                p("c_m_axis_mm2s_tdata_width", 32) // 8, p("c_mm2s_burst_size", 16))
        self.s2mm = _DmaChannel(self, "S2MM", S2MM_BASE, bool(p("c_include_s2mm", 1)),
                                p("c_s_axis_s2mm_tdata_width", 32) // 8, p("c_s2mm_burst_size", 16))
        super().bind(sim, name, description)

    def connect(self, inputs, outputs):
        super().connect(inputs, outputs)
        outs = outputs.get("M_AXIS_MM2S") or []
        if len(outs) > 1:
            raise SimUnsupported(f"{self.name}.M_AXIS_MM2S fans out to "
                                 f"{', '.join(str(x) for x in outs)}; broadcast is not modelled")
        self.mm2s.link = outs[0] if outs else None
        self.s2mm.link = inputs.get("S_AXIS_S2MM")

    def reset(self):
        self.mm2s.reset()
        self.s2mm.reset()

    def soft_reset(self):
        self.sim._trace(f"{self.name}: soft reset")
        self.reset()

    def _unsupported(self):
        raise SimUnsupported(
            f"{self.name} is configured for scatter-gather (c_include_sg=1), which SimDevice does "
            f"not model; build the DMA in simple mode (c_include_sg=0) or register your own model "
            f"with sim.add_model({self.name!r}, ...)")

    def _channel(self, offset):
        return (self.mm2s, offset) if offset < S2MM_BASE else (self.s2mm, offset - S2MM_BASE)

    def read(self, offset):
        if self.sg:
            self._unsupported()
        ch, rel = self._channel(offset)
        if rel == DMASR and ch.present:
            if ch.err and ch.error_reason and not ch.error_reported and self.sim.raise_on_dma_error:
                ch.error_reported = True
                value = ch.dmasr()
                raise SimDmaError(
                    f"{ch.label} stopped with an error: DMASR=0x{value:08x} ({decode_dmasr(value)}): "
                    f"{ch.error_reason}. The channel is halted until the DMA is reset (DMACR bit 2, "
                    f"or load the overlay again); the pynq driver itself would only report "
                    f"'DMA channel not started' here")
            if ch.blocked():
                self.sim._note_poll((self.name, ch.kind), ch.blocked_reason)
        return ch.read(rel)

    def write(self, offset, value):
        if self.sg:
            self._unsupported()
        ch, rel = self._channel(offset)
        ch.write(rel, value)

    def step(self):
        a = self.mm2s.step()
        b = self.s2mm.step()
        return a or b

    closed = True

    def inert(self, offset, write):
        return not write          # a status read changes no channel (an error is raised, not stepped)

    def consumer_state(self, link):
        return self.s2mm.consumer_state(link)

    def producer_state(self, link):
        return self.mm2s.producer_state(link)


class RegisterValues(dict):
    """The scalar registers handed to a kernel function: a dict ``offset -> 32-bit value`` that
    also accepts the register names of the ``.hwh`` (``regs["src_rows"]``)."""

    def __init__(self, values, offsets):
        super().__init__(values)
        self.offsets = dict(offsets)

    def _key(self, key):
        if isinstance(key, str):
            if key not in self.offsets:
                raise KeyError(f"no register named {key!r}; the .hwh has {', '.join(self.offsets)}")
            return self.offsets[key]
        return key

    def __getitem__(self, key):
        k = self._key(key)
        if super().__contains__(k):
            return super().__getitem__(k)
        if k in self.offsets.values():
            return 0                          # a register of the .hwh never written: reset value
        raise KeyError(f"register offset {k!r} was never written and is not in the .hwh register map")

    def __contains__(self, key):
        try:
            return super().__contains__(self._key(key))
        except KeyError:
            return False

    def get(self, key, default=None):
        try:
            return super().get(self._key(key), default)
        except KeyError:
            return default


@dataclass
class KernelRun:
    """One completed run of a :class:`StreamKernelModel`."""
    regs: dict
    beats_in: int
    beats_out: int
    last_index: object
    regs_out: dict


class StreamKernelModel(IPModel):
    """An HLS kernel with ``ap_ctrl_hs`` control and AXI4-Stream data, behaviour in Python.

    ``fn(beats_in, regs) -> (beats_out, regs_out, last_index)``:

    * ``beats_in``: ``uint8`` array ``(n, in_bytes)``, the input beats of one run, ``in_bytes``
      being the kernel port's TDATA width from the ``.hwh`` (a beat that ended a packet early is
      zero-padded);
    * ``regs``: :class:`RegisterValues` -- ``{offset: value}`` of the scalar registers written
      before ``ap_start`` (names work too);
    * ``beats_out``: ``(m, out_bytes)`` uint8 (or a flat byte array of ``m * out_bytes``);
    * ``regs_out``: ``{offset or name: value}`` stored into registers the CPU can read;
    * ``last_index``: index of the output beat that carries TLAST, or None when the kernel never
      sets TLAST (which hangs the S2MM on hardware; here the wait raises :class:`SimDeadlock`).

    ``n_in`` is how many input beats one run reads: an int, a function of ``regs``, or None to
    read up to the first beat with TLAST. ``in_port`` / ``out_port`` name the stream ports when
    the kernel has more than one of a kind.

    Control register (0x00): ap_start bit 0, ap_done bit 1 (clear on read), ap_idle bit 2,
    ap_ready bit 3 (clear on read), auto_restart bit 7; GIER 0x04, IP_IER 0x08, IP_ISR 0x0C
    (toggle on write). ``runs`` records every completed run.
    """

    def __init__(self, fn, *, n_in=None, in_port=None, out_port=None):
        if not callable(fn):
            raise TypeError("StreamKernelModel needs a function fn(beats_in, regs) -> "
                            "(beats_out, regs_out, last_index)")
        self.fn, self.n_in, self.in_port, self.out_port = fn, n_in, in_port, out_port
        self.runs = []

    def bind(self, sim, name, description):
        super().bind(sim, name, description)
        self.runs = []

    def connect(self, inputs, outputs):
        super().connect(inputs, outputs)
        self.in_link = self._pick(inputs, self.in_port, "input", "in_port")
        outs = self._pick(outputs, self.out_port, "output", "out_port")
        if outs is not None and len(outs) > 1:
            raise SimUnsupported(f"{self.name}.{outs[0].src[1]} fans out to "
                                 f"{', '.join(str(x) for x in outs)}; broadcast is not modelled")
        self.out_link = outs[0] if outs else None
        # TDATA_NUM_BYTES of the kernel's own port; the other end's width if the .hwh lacks it
        self.in_width = (self.in_link.dst_width or self.in_link.src_width or 1) if self.in_link else 1
        self.out_width = (self.out_link.src_width or self.out_link.dst_width or 1) if self.out_link else None

    def _pick(self, ports, wanted, kind, arg):
        if wanted is not None:
            if wanted not in ports:
                raise SimMetadataError(f"{self.name} has no {kind} stream port {wanted!r} in the .hwh "
                                       f"(it has {', '.join(ports) or 'none'})")
            return ports[wanted]
        if len(ports) > 1:
            raise SimMetadataError(f"{self.name} has {len(ports)} {kind} stream ports "
                                   f"({', '.join(ports)}); say which one with StreamKernelModel({arg}=...)")
        return next(iter(ports.values())) if ports else None

    def reset(self):
        self.values = {}
        self.state = "idle"                  # idle | input | output
        self.ap_done = self.ap_ready = False
        self.auto_restart = False
        self.start_pending = False
        self.gier = self.ier = self.isr = 0
        self.started = 0
        self._chunks, self._have, self._need, self._tlast = [], 0, None, False
        self._run_regs = None
        self._pending = collections.deque()  # [bytes, tlast]
        self._last_run = None

    # registers --------------------------------------------------------------------------
    def read(self, offset):
        if offset == 0x00:
            value = ((AP_START if self.state == "input" or self.start_pending else 0)
                     | (AP_DONE if self.ap_done else 0) | (AP_IDLE if self.state == "idle" else 0)
                     | (AP_READY if self.ap_ready else 0) | (AUTO_RESTART if self.auto_restart else 0))
            self.ap_done = self.ap_ready = False             # clear on read
            if self.state != "idle":
                self.sim._note_poll((self.name, "CTRL"), self.blocked_reason)
            return value
        if offset == 0x04:
            return self.gier
        if offset == 0x08:
            return self.ier
        if offset == 0x0C:
            return self.isr
        return self.values.get(offset, 0)

    closed = True

    def inert(self, offset, write):
        # reads only clear ap_done/ap_ready; scalar arguments are read at the next ap_start
        return not write or offset >= 0x10

    def write(self, offset, value):
        if offset == 0x00:
            self.auto_restart = bool(value & AUTO_RESTART)
            if value & AP_START:
                if self.state == "idle":
                    self._start()
                else:
                    self.start_pending = True
        elif offset == 0x04:
            self.gier = value & 1
        elif offset == 0x08:
            self.ier = value & 3
        elif offset == 0x0C:
            self.isr ^= value & 3
        else:
            self.values[offset] = value

    # behaviour --------------------------------------------------------------------------
    def _start(self):
        self.state = "input"
        self.started += 1
        self._run_regs = RegisterValues({k: v for k, v in self.values.items() if k >= 0x10}, self.offsets)
        n = self.n_in(self._run_regs) if callable(self.n_in) else self.n_in
        if n is not None and (not isinstance(n, (int, np.integer)) or n < 0):
            raise SimError(f"{self.name}: n_in gave {n!r}; it must be a non-negative int (beats per run)")
        self._need = None if n is None else int(n)
        self._chunks, self._have, self._tlast = [], 0, False
        self.sim._event(_ev_ap_start, self.name, self._run_regs, n)

    def _input_complete(self):
        if self.in_link is None:
            return True
        if self._need is None:
            return self._tlast
        return self._have >= self._need

    def _collect(self):
        link, w = self.in_link, self.in_width
        progress = False
        while not self._input_complete() and link.level() > 0:
            want = None if self._need is None else self._need - self._have
            to_end = link.bytes_to_end()
            if to_end is not None and (want is None or -(-to_end // w) <= want):
                data, _ = link.pop(to_end)
                beats = -(-len(data) // w)
                if beats * w != len(data):       # a beat that ended the packet early: zero-padded
                    data = np.concatenate([data, np.zeros(beats * w - len(data), np.uint8)])
                self._chunks.append(data)
                self._have += beats
                self._tlast = True
                progress = True
                if self._need is None:
                    break
                continue
            full = link.level() // w if to_end is None else (to_end - 1) // w
            take = full if want is None else min(full, want)
            if take <= 0:
                break
            data, _ = link.pop(take * w)
            self._chunks.append(data)
            self._have += take
            progress = True
        return progress

    def _compute(self):
        w = self.in_width
        chunks = self._chunks
        if len(chunks) == 1 and chunks[0].flags.writeable and chunks[0].base is None:
            flat = chunks[0]                     # the whole input in one private array (the DMA's copy)
        else:
            flat = np.concatenate(chunks) if chunks else np.zeros(0, np.uint8)
        beats_in = flat.reshape(-1, w)
        regs = self._run_regs
        result = self.fn(beats_in, regs)
        if not (isinstance(result, tuple) and len(result) == 3):
            raise SimError(f"{self.name}: the kernel function must return (beats_out, regs_out, "
                           f"last_index), got {type(result).__name__}")
        beats_out, regs_out, last_index = result
        out = self._as_beats(beats_out)
        m = 0 if out is None else out.shape[0]
        if last_index is not None:
            if not isinstance(last_index, (int, np.integer)) or not 0 <= last_index < max(m, 0):
                raise SimError(f"{self.name}: last_index={last_index!r} is not the index of one of the "
                               f"{m} output beats (use None when the kernel sets no TLAST)")
            last_index = int(last_index)
        stored = {}
        for key, value in dict(regs_out or {}).items():
            off = self.offsets.get(key) if isinstance(key, str) else key
            if off is None:
                raise SimError(f"{self.name}: regs_out names register {key!r}, which the .hwh does not "
                               f"have ({', '.join(self.offsets)})")
            value = int(value)
            size = int(self.registers.get(key, {}).get("size", 32)) if isinstance(key, str) else 32
            self.values[off] = value & 0xFFFFFFFF
            if size > 32 or value >> 32:
                self.values[off + 4] = (value >> 32) & 0xFFFFFFFF
            stored[off] = value
        if m:
            data = out.tobytes()
            if last_index is None:
                self._pending.append([data, False])
            else:
                cut = (last_index + 1) * self.out_width
                self._pending.append([data[:cut], True])
                if cut < len(data):
                    self._pending.append([data[cut:], False])
        self._last_run = KernelRun(dict(regs), beats_in.shape[0], m, last_index, stored)
        self.ap_ready = True
        if self.ier & 2:
            self.isr |= 2
        self.state = "output"
        self.sim._event(_ev_ran, self.name, beats_in.shape[0], m, last_index)

    def _as_beats(self, beats_out):
        if beats_out is None:
            return None
        arr = np.asarray(beats_out)
        if arr.size == 0:
            return None
        if self.out_link is None:
            raise SimError(f"{self.name}: the kernel function returned {arr.shape[0]} output beats but "
                           f"{self.name} has no output stream connected in the .hwh")
        if arr.dtype != np.uint8:
            if not np.issubdtype(arr.dtype, np.integer) or arr.min() < 0 or arr.max() > 255:
                raise SimError(f"{self.name}: output beats must be uint8 bytes, got dtype {arr.dtype}")
            arr = arr.astype(np.uint8)
        w = self.out_width
        if arr.ndim == 1:
            if arr.size % w:
                raise SimError(f"{self.name}: {arr.size} output bytes are not a whole number of "
                               f"{w}-byte beats ({self.out_link.src[1]} is {w} bytes wide in the .hwh)")
            arr = arr.reshape(-1, w)
        if arr.ndim != 2 or arr.shape[1] != w:
            raise SimError(f"{self.name}: output beats have shape {arr.shape}, but "
                           f"{self.name}.{self.out_link.src[1]} is {w} bytes wide (TDATA_NUM_BYTES in "
                           f"the .hwh): return an (m, {w}) uint8 array")
        return np.ascontiguousarray(arr)

    def _push(self):
        link = self.out_link
        progress = False
        while self._pending:
            space = link.space()
            if space <= 0:
                break
            seg = self._pending[0]
            n = min(space, len(seg[0]))
            whole = n == len(seg[0])
            link.push(seg[0][:n], last=seg[1] and whole)
            progress = True
            if whole:
                self._pending.popleft()
            else:
                seg[0] = seg[0][n:]
        return progress

    def _finish(self):
        self.runs.append(self._last_run)
        self.ap_done = True
        if self.ier & 1:
            self.isr |= 1
        self.sim._event(_ev_text, f"{self.name}: ap_done")
        if self.auto_restart or self.start_pending:
            self.start_pending = False
            self.state = "idle"
            self._start()
        else:
            self.state = "idle"

    def step(self):
        progress = False
        if self.state == "input":
            if self.in_link is not None:
                progress = self._collect()
            if self._input_complete():
                self._compute()
                progress = True
        if self.state == "output":
            if self._pending:
                progress = self._push() or progress
            if not self._pending:
                self._finish()
                progress = True
        return progress

    # diagnostics ------------------------------------------------------------------------
    def _input_side(self):
        link = self.in_link
        need = "beats up to TLAST" if self._need is None else f"{self._need} beats"
        head = (f"{self.name} is waiting for input on {self.name}.{link.dst[1]}: it has received "
                f"{self._have} of {need} ({link.dst_width} bytes each) for this run")
        if link.producer is None:
            return f"{head}, and its stream comes from {link.src[0]}.{link.src[1]}, which has no model"
        return f"{head}, and {link.producer.producer_state(link)}"

    def _output_side(self):
        link = self.out_link
        left = sum(len(s[0]) for s in self._pending)
        head = (f"{self.name} is blocked writing its output: {_fmt_bytes(left)} of this run are still "
                f"to go into {link.describe()}")
        if link.consumer is None:
            return f"{head}, whose end {link.dst[0]} has no model"
        return f"{head}, and {link.consumer.consumer_state(link)}"

    def blocked_reason(self):
        head = f"{self.name} will never finish (CTRL polled without progress)"
        if self.state == "input":
            return f"{head}: {self._input_side()}"
        if self.state == "output":
            return f"{head}: {self._output_side()}"
        return None

    def producer_state(self, link):
        if self.state == "input":
            return self._input_side()
        if self.state == "output":
            return self._output_side()
        if self._last_run is None:
            return (f"{self.name} was never started (write ap_start = 1, bit 0 of CTRL at offset 0x00, "
                    f"e.g. ip.write(0x00, 0x01) or register_map.CTRL.AP_START = 1)")
        run = self._last_run
        tl = ("and never set TLAST (the kernel model returned last_index=None)"
              if run.last_index is None else f"with TLAST on beat {run.last_index}")
        return (f"{self.name} is done: its last run sent {run.beats_out} beats "
                f"({_fmt_bytes(run.beats_out * (self.out_width or 0))}) {tl}, and it was not "
                f"started again")

    def consumer_state(self, link):
        if self.state == "output":
            return self._output_side()
        if self.state == "input":
            return f"{self.name} is reading (has {self._have} beats)"
        if self._last_run is None:
            return (f"{self.name} is not started, so it reads nothing (write ap_start = 1 to its CTRL "
                    f"register before waiting on the send channel)")
        run = self._last_run
        return (f"{self.name} finished its last run after reading {run.beats_in} beats "
                f"({_fmt_bytes(run.beats_in * self.in_width)}) and was not started again, so nothing "
                f"reads the remaining {_fmt_bytes(link.level())} in the stream: the transfer is longer "
                f"than the kernel reads")

    def pending_packet_bytes(self, link):
        n = 0
        for data, last in self._pending:
            n += len(data)
            if last:
                return n
        return None


# --------------------------------------------------------------------------------------------
# stream discovery in the .hwh

def _stream_ports(block):
    from pynqmetadata import StreamPort
    return {n: p for n, p in block.ports.items() if isinstance(p, StreamPort)}


def _tdata_bytes(port, default=None):
    param = port.parameters.get("TDATA_NUM_BYTES") if port.parameters else None
    try:
        return int(param.value)
    except (AttributeError, TypeError, ValueError):
        return default


def _is_pass_through(block, modelled):
    if block.hierarchy_name in modelled:
        return False
    vlnv = getattr(block, "vlnv", None)
    if vlnv is None or vlnv.name not in PASS_THROUGH_IP:
        return False
    ports = _stream_ports(block).values()
    return sum(p.driver for p in ports) == 1 and sum(not p.driver for p in ports) == 1


def find_stream_links(md, modelled=()):
    """Every AXI4-Stream path in metadata ``md`` (a pynqmetadata Module, ``parser.systemgraph``)
    from a master port to a slave port, walking through pass-through IP. Returns a list of
    :class:`StreamLink` (not yet attached to models)."""
    modelled = set(modelled)
    links = []

    def walk(port, path, capacity):
        for dst in port.destinations().values():
            blk = dst.parent()
            if blk is None:
                continue
            if hasattr(blk, "blocks"):       # an external port of the design
                yield (blk.name, dst.name, path, capacity, _tdata_bytes(dst))
                continue
            if _is_pass_through(blk, modelled):
                extra = 0
                if blk.vlnv.name == "axis_data_fifo":
                    try:
                        extra = int(blk.parameters["FIFO_DEPTH"].value) * (_tdata_bytes(dst, 1))
                    except (KeyError, TypeError, ValueError, AttributeError):
                        extra = 0
                for out in _stream_ports(blk).values():
                    if out.driver and len(path) < 32:
                        yield from walk(out, path + [blk.hierarchy_name or blk.name], capacity + extra)
            else:
                yield (blk.hierarchy_name or blk.name, dst.name, path, capacity, _tdata_bytes(dst))

    for block in md.blocks.values():
        if _is_pass_through(block, modelled):
            continue
        for pname, port in _stream_ports(block).items():
            if not port.driver:
                continue
            for dname, dport, path, extra, dwidth in walk(port, [], 0):
                link = StreamLink((block.hierarchy_name or block.name, pname), (dname, dport), path,
                                  None, _tdata_bytes(port), dwidth)
                link.fifo_bytes = extra
                links.append(link)
    return links


# --------------------------------------------------------------------------------------------
# the device

@dataclass
class DownloadRecord:
    """One bitstream the SimDevice "programmed" (see :attr:`SimDevice.downloads`)."""
    bitfile: str
    hwh: str
    timestamp: str
    size: int
    design: str


class SimDevice(_DeviceBase):
    """A ``pynq.Device`` that runs overlays in Python (the ``sim`` target).

    Parameters
    ----------
    strict_cache : bool
        Model the non-coherent cache between the CPU and the PL: a bus master reading bytes the
        CPU wrote after the last ``flush()``, or the CPU reading bytes a bus master wrote before
        an ``invalidate()``, raises :class:`SimCacheError` naming the buffer.
    arch : {'armv7l', 'aarch64'} or None
        CPU architecture pynq.Clocks sees; None takes it from the ``.hwh`` (processing_system7
        -> armv7l, Zynq UltraScale+ / Versal -> aarch64).
    memory_base, memory_size : int
        Physical address range of the simulated DDR that ``allocate`` hands out (page aligned).
        A base above 4 GiB reproduces 64-bit buffers meeting a 32-bit DMA.
    stream_buffer : int or None
        Bytes each AXI4-Stream path can hold while its consumer is not reading. None: the DMA's
        burst buffer (``c_*_burst_size`` beats) plus any ``axis_data_fifo`` depth on the path.
    deadlock_polls : int or None
        Consecutive polls of a status register that cannot change before :class:`SimDeadlock`
        is raised (None: spin forever, as the board does).
    raise_on_dma_error : bool
        Raise :class:`SimDmaError` (decoded) on the first DMASR read after a DMA error; with
        False the status reads return the raw bits and the pynq driver reports the error its way.
    unmodeled : {'error', 'ram'}
        What an access to IP without a model does: raise :class:`SimBusError`, or behave as
        plain registers.
    name : str
        The device (board) name pynq uses to resolve ``<overlay>.bit.d/<name>/`` folders.
    boot_hwh : str or Path or None
        The ``.hwh`` of the design the board booted with (on PYNQ images, the base overlay): its
        PLLs stay for every overlay loaded later, as on a board, and an overlay whose PL clocks
        would come out differently on them is reported in :attr:`fixups`. None: the board boots
        with the PS configuration of each ``.hwh`` it loads.

    Use it as a context manager (or :meth:`install` / :meth:`uninstall`) so pynq's global
    lookups (``pynq.allocate``, ``Overlay()`` without ``device=``, ``PL``, ``Clocks``) find it.
    """

    capabilities = {"REGISTER_RW": True}
    _instances = itertools.count()

    def __init__(self, *, strict_cache=False, arch=None, memory_base=0x1000_0000,
                 memory_size=256 << 20, stream_buffer=None, deadlock_polls=256,
                 raise_on_dma_error=True, unmodeled="error", name="sim", boot_hwh=None):
        _require_pynq()
        super().__init__(f"sim{next(SimDevice._instances)}")
        if unmodeled not in ("error", "ram"):
            raise ValueError(f"unmodeled={unmodeled!r}: use 'error' or 'ram'")
        if arch not in (None, "armv7l", "aarch64"):
            raise ValueError(f"arch={arch!r}: use 'armv7l' (Zynq-7000), 'aarch64' (Zynq UltraScale+) or None")
        self.name = name
        self.strict_cache = bool(strict_cache)
        self._fixed_arch = arch
        self.arch = arch or "armv7l"
        self.memory = SimMemory(memory_base, memory_size, self.strict_cache)
        self.stream_buffer = stream_buffer
        self.deadlock_polls = deadlock_polls
        self.raise_on_dma_error = raise_on_dma_error
        self.unmodeled = unmodeled
        self.bitfile_name = None
        self.timestamp = None
        self.downloads = []
        self.cache_ops = []
        self.fixups = []
        self.trace = _Trace(maxlen=2000)
        self.dtbo_ops = []
        self.models = {}                     # live models of the programmed design, by IP name
        self.streams = []
        self._registered = {}                # user models by IP name
        self._regions = []                   # sorted (base, end, name, model)
        self._region_bases = []
        self._programmed = False
        self._install_stack = []
        self._lock = threading.RLock()
        self._epoch = 0
        self._model_list = []                # models in stepping order
        self._closed = False                 # all models closed (see IPModel.closed)
        self._settled = False                # stepping now would change nothing (see _settle)
        self._polls = {}
        self._poll_epoch = -1
        self.ps_clocks = None                # PsClocks of the last .hwh read (ps_clocks module)
        self._ps_models = [(base, base + size, name, _PsClockModel(name, regs))
                           for base, size, name, regs in _ps_regions()]
        self.boot_clocks = None
        if boot_hwh is not None:
            try:
                self.boot_clocks = _ps_clocks.read_hwh(boot_hwh)
            except (OSError, ValueError, SyntaxError) as exc:
                raise SimMetadataError(f"SimDevice: boot_hwh {boot_hwh}: {exc}") from None
            self._program_ps_clocks(self.boot_clocks)
        self._rebuild_regions()

    def __repr__(self):
        design = self.downloads[-1].design if self.downloads else "nothing"
        return f"<SimDevice {self.tag} ({self.arch}, {design} loaded, strict_cache={self.strict_cache})>"

    # installation ---------------------------------------------------------------------------
    def install(self):
        """Make this the ``pynq.Device.active_device`` (and the device of ``pynq.Clocks``);
        :meth:`uninstall` restores what was there. Calls nest (last in, first out)."""
        Device, Clocks = _pynq.Device, _pynq.Clocks
        saved = (Device.__dict__.get("_active_device", _MISSING),
                 Clocks.__dict__.get("_real_instance", _MISSING), Clocks.__dict__.get("device", _MISSING))
        self._install_stack.append(saved)
        Device.active_device = self
        self._bind_clocks()
        return self

    def uninstall(self):
        """Undo the last :meth:`install` (a no-op when not installed)."""
        if not self._install_stack:
            return
        active, clocks, clocks_device = self._install_stack.pop()
        Device, Clocks = _pynq.Device, _pynq.Clocks
        for cls, attr, value in ((Device, "_active_device", active), (Clocks, "_real_instance", clocks),
                                 (Clocks, "device", clocks_device)):
            if value is _MISSING:
                if attr in cls.__dict__:
                    delattr(cls, attr)
            else:
                setattr(cls, attr, value)

    @property
    def installed(self):
        """True while this device is ``pynq.Device.active_device``."""
        return _pynq.Device.__dict__.get("_active_device") is self

    def __enter__(self):
        return self.install()

    def __exit__(self, *exc):
        self.uninstall()

    def _bind_clocks(self):
        """Point pynq.Clocks at this device; drop a Clocks instance bound to another device
        (pynq caches one per process and set_device() alone does not replace it)."""
        Clocks = _pynq.Clocks
        Clocks.device = self
        inst = Clocks.__dict__.get("_real_instance")
        if inst is not None:
            mmio = getattr(inst, "_slcr_mmio", None) or getattr(inst, "_crl_mmio", None)
            wanted = "_ClocksZynq" if self.arch == "armv7l" else "_ClocksUltrascale"
            if mmio is None or mmio.device is not self or type(inst).__name__ != wanted:
                del Clocks._real_instance
        if not hasattr(Clocks, "set_device") and "_real_instance" not in Clocks.__dict__:
            # pynq 3.0.x (no Clocks.set_device before 3.1): Clocks picks its class from the
            # *host's* CPU (os.uname(), so on x86 'Architecture not supported for Clocks'), not
            # from device.arch, and its MMIO from Device.active_device. Build it for this device.
            import pynq.ps as ps
            cls = ps._ClocksZynq if self.arch == "armv7l" else ps._ClocksUltrascale
            Device, saved = _pynq.Device, _pynq.Device.__dict__.get("_active_device", _MISSING)
            Device.active_device = self
            try:
                Clocks._real_instance = cls()
            finally:
                if saved is _MISSING:
                    del Device._active_device
                else:
                    Device.active_device = saved

    # models -------------------------------------------------------------------------------
    def add_model(self, ip_name, model):
        """Use ``model`` (an :class:`IPModel`) for the IP called ``ip_name`` in the overlay's
        ``ip_dict``. Register models before ``Overlay()`` (or before the first transfer: adding
        one to a loaded design rebuilds the stream paths). Returns the model."""
        if not isinstance(model, IPModel):
            raise TypeError(f"sim.add_model({ip_name!r}, ...) needs an IPModel (e.g. "
                            f"StreamKernelModel(fn)), got {type(model).__name__}")
        with self._lock:
            self._registered[ip_name] = model
            if self._programmed:
                if ip_name not in self.parser.ip_dict:
                    raise SimMetadataError(self._no_such_ip(ip_name))
                self._build(self.parser)
        return model

    def model(self, ip_name):
        """The live model of ``ip_name`` in the programmed design."""
        try:
            return self.models[ip_name]
        except KeyError:
            raise KeyError(f"no model for {ip_name!r}; the design has models for "
                           f"{', '.join(self.models) or 'nothing (no bitstream downloaded)'}") from None

    def _no_such_ip(self, ip_name):
        return (f"SimDevice: {ip_name!r} is not an addressable IP of the loaded design; ip_dict has "
                f"{', '.join(self.parser.ip_dict)}")

    def _build(self, parser):
        """(Re)create the models of a programmed design, their address map and stream links."""
        ip_dict = parser.ip_dict
        unknown = [n for n in self._registered if n not in ip_dict]
        if unknown:
            raise SimMetadataError(self._no_such_ip(unknown[0]))
        models = {}
        for name, desc in ip_dict.items():
            if "phys_addr" not in desc:
                continue
            model = self._registered.get(name)
            if model is None:
                if str(desc.get("type", "")).startswith("xilinx.com:ip:axi_dma:"):
                    model = AxiDmaModel()
                elif self.unmodeled == "ram":
                    model = RegisterFileModel()
                else:
                    continue
            model.bind(self, name, desc)
            models[name] = model
        self.models = models
        # streams
        links = find_stream_links(parser.systemgraph, modelled=models)
        for link in links:
            link.producer = models.get(link.src[0])
            link.consumer = models.get(link.dst[0])
            link.capacity = self._capacity(link)
        self.streams = links
        for name, model in models.items():
            inputs = {l.dst[1]: l for l in links if l.dst[0] == name}
            outputs = {}
            for l in links:
                if l.src[0] == name:
                    outputs.setdefault(l.src[1], []).append(l)
            model.connect(inputs, outputs)
        self._rebuild_regions()

    def _capacity(self, link):
        if self.stream_buffer is not None:
            return self.stream_buffer
        cap = link.fifo_bytes
        if isinstance(link.producer, AxiDmaModel):
            cap += link.producer.mm2s.burst * link.producer.mm2s.width
        if isinstance(link.consumer, AxiDmaModel):
            cap += link.consumer.s2mm.burst * link.consumer.s2mm.width
        return cap if cap > 0 else 1024

    def _rebuild_regions(self):
        regions = list(self._ps_models)
        if self._programmed:
            for name, model in self.models.items():
                desc = model.description
                base, size = int(desc["phys_addr"]), int(desc["addr_range"])
                regions.append((base, base + size, name, model))
        regions.sort(key=lambda r: r[0])
        self._regions = regions
        self._region_bases = [r[0] for r in regions]
        self._model_list = list(self.models.values())
        self._closed = all(_is_closed(m) for m in self._model_list)
        self._settled = False

    def describe_streams(self):
        """The AXI4-Stream paths of the loaded design, one per line."""
        lines = []
        for l in self.streams:
            ends = [f"{'model' if l.producer else 'no model'}", f"{'model' if l.consumer else 'no model'}"]
            lines.append(f"{l.describe()}  [{l.src_width} -> {l.dst_width} bytes/beat, buffers "
                         f"{l.capacity} bytes; {ends[0]} -> {ends[1]}]")
        return "\n".join(lines)

    # register access (the REGISTER_RW capability) -------------------------------------------
    def _decode(self, address, length):
        i = bisect.bisect_right(self._region_bases, address) - 1
        if i >= 0:
            base, end, name, model = self._regions[i]
            if address + length <= end:
                return base, name, model
        if self.bitfile_name is not None and not self._programmed:
            raise SimBusError(
                f"SimDevice: access to 0x{address:x} but the PL is not programmed: "
                f"Overlay(..., download=False) parses the design without loading it (pynq still "
                f"reports is_loaded() True); call ol.download() first")
        parser = getattr(self, "parser", None)
        if parser is not None:
            for name, desc in parser.ip_dict.items():
                if "phys_addr" in desc and desc["phys_addr"] <= address < desc["phys_addr"] + desc["addr_range"]:
                    raise SimBusError(
                        f"SimDevice: access to {name} (0x{address:x}, offset "
                        f"0x{address - desc['phys_addr']:x}), which has no model (type {desc.get('type')}); "
                        f"register one before loading the overlay: sim.add_model({name!r}, "
                        f"StreamKernelModel(fn)) or RegisterFileModel(), or SimDevice(unmodeled='ram')")
        raise SimBusError(f"SimDevice: access to unmapped address 0x{address:x} (no IP of the loaded "
                          f"design covers it)")

    def read_registers(self, address, length):
        with self._lock:
            if length % 4 or address % 4:
                raise SimBusError(f"SimDevice: unaligned register read of {length} bytes at 0x{address:x}")
            base, _, model = self._decode(address, length)
            off = address - base
            if not (self._settled and model.inert(off, False)):
                self._settle()
            if length == 4:
                return _U32.pack(model.read(off) & 0xFFFFFFFF)
            return b"".join(_U32.pack(model.read(o) & 0xFFFFFFFF) for o in range(off, off + length, 4))

    def write_registers(self, address, data):
        with self._lock:
            data = bytes(data)
            if len(data) == 4 and not address & 3:          # one word: the common case
                base, _, model = self._decode(address, 4)
                off = address - base
                model.write(off, _U32.unpack(data)[0])
                self._epoch += 1
                if not (self._settled and model.inert(off, True)):
                    self._settle()
                return
            if len(data) % 4 or address % 4:
                raise SimBusError(f"SimDevice: unaligned register write of {len(data)} bytes at 0x{address:x}")
            base, _, model = self._decode(address, len(data))
            for i, (value,) in enumerate(_U32.iter_unpack(data)):
                off = address - base + 4 * i
                model.write(off, value)
                self._epoch += 1
                if not (self._settled and model.inert(off, True)):
                    self._settle()

    def _settle(self):
        """Step every model until none makes progress. Afterwards the design is *settled*
        (when all its models are ``closed``): until an access that is not ``inert``, stepping
        again could change nothing, so register accesses skip it."""
        self._settled = False
        models = self._model_list
        for _ in range(100000):
            progress = False
            for model in models:
                if model.step():
                    progress = True
            if not progress:
                self._settled = self._closed
                return
            self._epoch += 1
        raise SimError("SimDevice: the models keep making progress without end (a kernel in "
                       "auto_restart mode with no input stream?)")

    def _note_poll(self, key, reason):
        """Count a poll of a register that can only change through progress; raise SimDeadlock
        after ``deadlock_polls`` of them with no progress in between."""
        if not self.deadlock_polls:
            return
        if self._poll_epoch != self._epoch:
            self._polls.clear()
            self._poll_epoch = self._epoch
        n = self._polls.get(key, 0) + 1
        self._polls[key] = n
        if n >= self.deadlock_polls:
            self._polls[key] = 0
            text = reason() if callable(reason) else reason
            raise SimDeadlock(text or f"SimDevice: {key} polled {n} times without progress")

    def _trace(self, text):
        self.trace.append(text)
        log.debug("%s", text)

    def _event(self, fn, *args):
        """Trace ``fn(*args)``, formatted only when the trace is read (or logged)."""
        ev = _Event(fn, args)
        self.trace.append(ev)
        log.debug("%s", ev)

    # memory ---------------------------------------------------------------------------------
    def allocate(self, shape, dtype="u4", cacheable=True, name=None, **kwargs):
        """A contiguous buffer in the simulated DDR (what ``pynq.allocate`` returns).

        ``cacheable=False`` gives a coherent buffer (flush/invalidate are no-ops). ``name`` is
        used in messages; by default it is the variable the call site assigns to."""
        if kwargs:
            raise TypeError(f"SimDevice.allocate() got unexpected arguments {', '.join(kwargs)}")
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64)) if np.ndim(shape) else int(shape)
        nbytes = count * dtype.itemsize
        var, site = _allocation_site()
        ident_name = name or (f"'{var}'" if var else None)
        with self._lock:
            alloc = self.memory._allocate(nbytes, not cacheable, "?")
            alloc.name = (f"{ident_name} ({site})" if ident_name else f"#{alloc.id} ({site})")
            cls = _StrictBuffer if alloc.dev_dirty is not None else _PynqBuffer
            buf = cls(shape, dtype, buffer=alloc.host.data, offset=0, device=self,
                      device_address=alloc.start, bo=alloc.id, coherent=not cacheable)
            if cls is _StrictBuffer:
                buf._sim_alloc = alloc
            weakref.finalize(buf, self.memory._release, alloc)
            self._trace(f"allocate {alloc.describe()}")
            return buf

    def _sync(self, op, bo, offset, nbytes):
        with self._lock:
            try:
                alloc = self.memory.allocation(bo)
            except KeyError:
                raise SimError(f"SimDevice.{op}: buffer id {bo} is not a live allocation of this device") from None
            self.cache_ops.append(CacheOp(op, alloc.name, alloc.start + offset, nbytes))
            (self.memory._flush if op == "flush" else self.memory._invalidate)(alloc, offset, nbytes)

    def flush(self, bo, offset, ptr, size):
        """Write CPU-cached bytes of a buffer back to DDR (``PynqBuffer.flush``)."""
        self._sync("flush", bo, offset, size)

    def invalidate(self, bo, offset, ptr, size):
        """Drop CPU-cached bytes so the CPU reads DDR (``PynqBuffer.invalidate``)."""
        self._sync("invalidate", bo, offset, size)

    def get_memory(self, description):
        """pynq asks this for memories in ``mem_dict``; they all allocate from the simulated DDR."""
        return _SimMemoryHandle(self, description)

    @property
    def default_memory(self):
        return _SimMemoryHandle(self, None)

    # bitstreams and metadata ------------------------------------------------------------------
    def get_bitfile_metadata(self, bitfile_name, partial=False):
        """Parse the ``.hwh`` next to ``bitfile_name`` (same stem), fill in what pynq 4.0.0
        needs and Zynq-7000 metadata lacks (PL clock frequencies), and pick ``arch``."""
        from pynqmetadata.frontends import Metadata
        from pynqmetadata.views.runtime import RuntimeMetadataParser

        bit = Path(bitfile_name)
        hwh = bit.with_suffix(".hwh")
        if not hwh.is_file():
            raise SimMetadataError(self._missing_hwh(bit, hwh))
        try:
            parser = RuntimeMetadataParser(Metadata(input=str(hwh)))
        except Exception as exc:
            raise SimMetadataError(f"SimDevice: cannot parse {hwh}: {type(exc).__name__}: {exc}") from exc
        parser.refresh_hierarchy_dict()
        parser._sim_hwh = str(hwh)
        self._fill_clock_frequencies(parser)
        self._preset_ps_clocks(parser, hwh)
        if self._fixed_arch is None:
            family = str(getattr(parser, "family_ps", ""))
            self.arch = "armv7l" if family == "processing_system7" else "aarch64"
        self._bind_clocks()
        return parser

    @staticmethod
    def _missing_hwh(bit, hwh):
        folder = bit.parent
        others = sorted(p.name for p in folder.glob("*.hwh")) if folder.is_dir() else []
        xsa = bit.with_suffix(".xsa")
        msg = (f"SimDevice: no metadata for bitstream {bit}: PYNQ reads the .hwh with the same name "
               f"next to the .bit ({hwh.name}), and there is none")
        if others:
            msg += (f"; {folder} has {', '.join(others)}: rename it (or the .bit) so both share the stem "
                    f"(Vivado writes <bd>_wrapper.bit but <bd>.hwh)")
        if xsa.is_file():
            msg += f"; {xsa.name} exists: extract the .hwh from it (an .xsa is a zip archive)"
        return msg + ". On the board pynq fails the same way: 'Unable to find metadata for bitstream'"

    def _fill_clock_frequencies(self, parser):
        ps = getattr(parser, "ps", None)
        params = getattr(ps, "parameters", {}) or {}
        for i, clk in parser.clock_dict.items():
            if clk.get("frequency") is not None:
                continue
            for key in (f"PCW_ACT_FPGA{i}_PERIPHERAL_FREQMHZ", f"PCW_FPGA{i}_PERIPHERAL_FREQMHZ",
                        f"PSU__CRL_APB__PL{i}_REF_CTRL__FREQMHZ"):
                param = params.get(key)
                try:
                    value = float(param.value)
                except (AttributeError, TypeError, ValueError):
                    continue
                clk["frequency"] = value
                self.fixups.append(f"clock_dict[{i}]['frequency'] was None (pynqmetadata 0.2.0 reads "
                                   f"no achieved-frequency parameter for this PS); set to {value} MHz from "
                                   f"{key}. On a board pynq 4.0.0 raises TypeError in Clocks.set_pl_clk "
                                   f"for this .hwh")
                break
            else:
                clk["frequency"] = 100.0
                self.fixups.append(f"clock_dict[{i}]['frequency'] was None and the .hwh has no "
                                   f"frequency for it; set to 100.0 MHz")

    def _preset_ps_clocks(self, parser, hwh):
        """Preset the PS clock registers from the PS configuration in the .hwh: reference clock,
        PLL feedback dividers (and DIV2), each PL clock's source and divisors, the CPU clock. With
        ``boot_hwh`` the registers stay as booted and a PL clock that comes out otherwise is
        reported in :attr:`fixups`."""
        family = {"processing_system7": "zynq7", "zynq_ultra_ps_e": "zynqmp"}.get(
            str(getattr(parser, "family_ps", "")))
        ps = getattr(parser, "ps", None)
        if family is None or ps is None:
            return
        params = {k: getattr(v, "value", v) for k, v in (getattr(ps, "parameters", {}) or {}).items()}
        try:
            clocks = _ps_clocks.from_parameters(params, family)
        except ValueError as exc:
            raise SimMetadataError(f"SimDevice: {hwh}: PS clock configuration: {exc}") from None
        self.ps_clocks = clocks
        if clocks.assumed:
            self.fixups.append("PS clocks: the .hwh lacks " + "; ".join(clocks.assumed))
        if self.boot_clocks is not None:             # the PLLs are the boot firmware's
            self.fixups.extend(f"PS clocks on the booted board: {m}"
                               for m in _ps_clocks.boot_mismatch(clocks, self.boot_clocks))
        else:
            self._program_ps_clocks(clocks)

    def _program_ps_clocks(self, clocks):
        regions, notes = _ps_clocks.register_values(clocks)
        for _, _, name, model in self._ps_models:
            if name in regions:
                model.preset(regions[name])
        self.fixups.extend(f"PS clocks: {note}" for note in notes)

    def download(self, bitstream, parser=None):
        """"Program" the PL: accept any bitstream, record it, and build the models of the
        design from its metadata."""
        with self._lock:
            if getattr(bitstream, "partial", False):
                raise SimUnsupported("SimDevice: partial reconfiguration is not modelled")
            if parser is None:
                parser = self.get_bitfile_metadata(bitstream.bitfile_name)
            if parser.interrupt_pins and not self.installed:
                raise SimError(
                    "SimDevice: this design has interrupt pins and pynq's Interrupt looks up "
                    "pynq.Device.active_device: install the SimDevice first (sim.install() or "
                    "`with SimDevice() as sim:`)")
            self.parser = parser
            self._programmed = True
            self._build(parser)
            for model in self.models.values():
                model.reset()
            self._polls.clear()
            path = bitstream.bitfile_name
            size = os.path.getsize(path) if os.path.isfile(path) else 0
            self.post_download(bitstream, parser, self.name)
            design = Path(getattr(parser, "_sim_hwh", path)).stem
            self.downloads.append(DownloadRecord(path, getattr(parser, "_sim_hwh", ""),
                                                 bitstream.timestamp, size, design))
            self._trace(f"download {path}")

    @property
    def bitstream(self):
        """The last :class:`DownloadRecord`, or None."""
        return self.downloads[-1] if self.downloads else None

    def insert_device_tree(self, abs_dtbo):
        self.dtbo_ops.append(("insert", abs_dtbo))

    def remove_device_tree(self, abs_dtbo):
        self.dtbo_ops.append(("remove", abs_dtbo))

    def gen_cache(self, bitstream, parser=None):
        pass

    def shutdown(self):
        pass

    def close(self):
        pass


class _SimMemoryHandle:
    """What ``SimDevice.get_memory`` returns: an allocator into the simulated DDR."""

    def __init__(self, device, description):
        self.device, self.description = device, description

    def allocate(self, shape, dtype="u4", **kwargs):
        return self.device.allocate(shape, dtype, **kwargs)
