"""The simulated DDR (:class:`SimMemory`): page-aligned allocations, bus-master reads and
writes, the strict cache model (flush / invalidate) and :class:`_StrictBuffer`, the PynqBuffer
whose CPU reads are checked; :class:`CacheOp` records."""
from __future__ import annotations

import bisect
import itertools
import threading
from dataclasses import dataclass

import numpy as np

from .errors import SimBusError, SimCacheError, SimError
from .pynq_base import _PynqBuffer
from .trace import _describe_in, _fmt_bytes

_PAGE = 4096


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
