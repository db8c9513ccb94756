"""The network kernel on the simulated PYNQ board, driven through pynq as on a board.

:class:`NetSimBoard` opens the engine's simulated overlay (``prepare_sim_overlay``: the same
config, so the same hash) on a :class:`~hlsnn.runtime.sim.SimDevice` with strict cache checks,
and puts the network kernel's register-level model (:func:`hlsnn.compiled.netkernel.ip_model`:
``s_axilite`` control, two ``m_axi`` ports on the simulated DDR) at the kernel IP's control
address. A batch then runs through the unmodified pynq calls a board would make:
``pynq.allocate`` for the input and output buffers, ``flush()``, the IP driver's ``write`` of
the two buffer addresses and the batch, ``ap_start``, a poll of ``ap_done``, ``invalidate()``:
one kernel start per batch, no DMA.

Limit: the overlay's ``.hwh`` is the layer kernel's block design (AXI DMA and stream ports);
it does not declare the network kernel's two ``m_axi`` ports. pynq's calls above do not read
them, but an overlay built for the network kernel would have its own ``.hwh``.
"""
from __future__ import annotations

import time

import numpy as np

from .netkernel import REGISTERS, ip_model, write_registers


class NetSimBoard:
    """The network kernel (a :class:`~hlsnn.compiled.netkernel.NetKernel`) on the simulated
    board of ``cfg``: :meth:`run` takes the input integers of a batch and returns the output
    integers; ``last_kernel_s`` is the wall time of the start-to-done (the kernel's
    C-simulation), ``starts`` the kernel starts so far."""

    name = "sim"

    def __init__(self, kernel, cfg, *, strict_cache=True):
        from ..engines import ENGINES
        from ..runtime.pynq_target import _pynq, fill_pl_clock_frequencies, overlay_files
        from ..runtime.sim import SimDevice
        from ..runtime.sim_target import _DEVICE_LOCK, prepare_sim_overlay
        self.kernel, self.cfg, self._lock = kernel, cfg, _DEVICE_LOCK
        bit, _, _ = overlay_files(prepare_sim_overlay(cfg, ENGINES[cfg.engine]), cfg.name)
        self.sim = SimDevice(strict_cache=strict_cache)
        self.model = ip_model(kernel)
        self.sim.add_model(cfg.name, self.model)
        self.inb = self.outb = None
        self.starts, self.last_kernel_s, self.last_driver_s = 0, 0.0, 0.0
        with _DEVICE_LOCK:
            self.sim.install()
            try:
                self._pynq = _pynq()
                self.overlay = self._pynq.Overlay(str(bit), download=False, device=self.sim)
                fill_pl_clock_frequencies(self.overlay.clock_dict, self.overlay.parser)
                self.overlay.download()
                self.ip = getattr(self.overlay, cfg.name)
            except BaseException:
                self.sim.uninstall()
                raise
            self.sim.uninstall()

    @property
    def tables(self):
        return self.kernel.tables

    def _buffers(self, batch):
        """Allocate (on the first call and when a batch outgrows them) the input and output
        buffers, with their int8 views (``_x8``, ``_y8``: one image per row) made once: the
        padding of each input row is zeroed here and never written again. The two address
        registers are written only then, and ``batch`` only when it changes: the kernel's
        ``s_axilite`` registers keep their values across starts."""
        words_in, words_out = batch * self.kernel.in_words, batch * self.kernel.out_words
        n_in, n_out = self.kernel.in_words * 8, self.kernel.out_words * 8
        if self.inb is None or self.inb.shape[0] < words_in or self.outb.shape[0] < words_out:
            for b in (self.inb, self.outb):
                if b is not None:
                    b.freebuffer()
            self.inb = self.outb = None
            self.inb = self._pynq.allocate((words_in,), np.uint64)
            self.outb = self._pynq.allocate((words_out,), np.uint64)
            self._x8 = np.asarray(self.inb).view(np.int8).reshape(batch, n_in)
            self._y8 = np.asarray(self.outb).view(np.int8).reshape(batch, n_out)
            self._x8[:] = 0
            write_registers(self.ip, REGISTERS, {"in": self.inb.device_address, "out": self.outb.device_address})
            self._batch = None
        if self._batch != batch:
            write_registers(self.ip, REGISTERS, {"batch": batch})
            self._batch = batch

    def run(self, xq):
        """``xq`` (B, ...) input integers -> (B, out_elems) int64, in one kernel start: the
        input buffer's fill and ``flush()``, ``ap_start``, a poll of ``ap_done``,
        ``invalidate()`` and the read-back (the address and batch registers when they change)."""
        b = xq.shape[0]
        n_el, n_out = self.kernel.tables["in_elems"], self.kernel.tables["out_elems"]
        t_call = time.perf_counter()
        with self._lock, self.sim:
            self._buffers(b)
            self._x8[:b, :n_el] = np.asarray(xq).reshape(b, -1)
            self.inb.flush()
            t0 = time.perf_counter()
            self.ip.write(0x00, 1)                                    # ap_start
            while not self.ip.read(0x00) & 2:                         # ap_done
                pass
            self.last_kernel_s = time.perf_counter() - t0
            self.starts += 1
            self.outb.invalidate()
            y = self._y8[:b, :n_out].astype(np.int64)
        # the driver's share of the call (buffer fill and syncs, register accesses, read-back):
        # benchmarks/bench_network_start.py measures it
        self.last_driver_s = time.perf_counter() - t_call - self.last_kernel_s
        return y

    def close(self):
        with self._lock:
            if self.inb is not None:
                with self.sim:
                    self.inb.freebuffer()
                    self.outb.freebuffer()
                self.inb = self.outb = None
