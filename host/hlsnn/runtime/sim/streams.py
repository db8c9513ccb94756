"""AXI4-Stream links (:class:`StreamLink`): bytes and TLASTs in flight between a producer and a
consumer model; how much a link takes depends on the kind of model reading it."""
from __future__ import annotations

import collections
import sys

import numpy as np

from .dma import AxiDmaModel
from .kernel_model import StreamKernelModel


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
