"""AXI master ports (HLS ``m_axi``) on the simulated DDR, and an ``ap_ctrl_hs`` kernel that
reads and writes DDR through them (:class:`MasterKernelModel`).

:class:`AxiMaster` is one port: ``width_bits`` per beat (the PYNQ-Z2's HP ports: 64), bursts
of at most ``max_burst`` beats (the kernel's ``max_read_burst_length``, 64 for the network
kernel) that never cross a 4 KB boundary (the AXI rule), each costing :data:`LATENCY` cycles
before its first beat and one cycle per beat after. An address not aligned to the port width
is refused (an HLS ``m_axi`` port infers bursts only on aligned data; ``pynq.allocate`` gives
page-aligned buffers). It counts bursts, beats and cycles; reads and writes go to
:class:`~.memory.SimMemory` by physical address, so the strict cache model applies (a read of
a buffer the CPU changed without ``flush()`` raises).

:data:`LATENCY` is an assumption, stated as such: 40 PL cycles at 100 MHz from a read request
on a Zynq-7000 S_AXI_HP port to its first data word. It is not measured here (no board), and it
is the same constant the network kernel's cycle model uses (``hlsnn.engines.shift_mac.network.perf``).
"""
from __future__ import annotations

import numpy as np

from .errors import SimBusError
from .ipmodel import IPModel

LATENCY = 40
BOUNDARY = 4096


class AxiMaster:
    """One ``m_axi`` port on ``memory`` (module docstring)."""

    def __init__(self, memory, name, *, width_bits=64, max_burst=64, latency=LATENCY):
        if width_bits % 8 or width_bits <= 0 or max_burst < 1:
            raise ValueError(f"m_axi {name}: width {width_bits} bits and bursts of {max_burst} beats")
        self.memory, self.name = memory, name
        self.width, self.max_burst, self.latency = width_bits // 8, int(max_burst), int(latency)
        self.bursts = self.beats = self.cycles = 0

    def plan(self, address, nbytes):
        """``[(address, beats)]``: the bursts that move ``nbytes`` from ``address``."""
        if address % self.width:
            raise SimBusError(f"m_axi {self.name}: address 0x{address:x} is not aligned to the port's "
                              f"{self.width} bytes")
        out, a, left = [], address, -(-nbytes // self.width)
        while left:
            to_edge = (BOUNDARY - a % BOUNDARY) // self.width
            n = min(left, self.max_burst, to_edge)
            out.append((a, n))
            a += n * self.width
            left -= n
        return out

    def _count(self, plan):
        self.bursts += len(plan)
        self.beats += sum(n for _, n in plan)
        self.cycles += sum(self.latency + n for _, n in plan)

    def read(self, address, nbytes):
        """``nbytes`` (whole beats) read from DDR at ``address``: a uint8 array."""
        plan = self.plan(address, nbytes)
        self._count(plan)
        return self.memory.read(address, sum(n for _, n in plan) * self.width, master=f"m_axi {self.name}")[:nbytes]

    def write(self, address, data):
        data = np.asarray(data, np.uint8).reshape(-1)
        plan = self.plan(address, data.size)
        self._count(plan)
        self.memory.write(address, data, master=f"m_axi {self.name}")


class MasterKernelModel(IPModel):
    """An ``ap_ctrl_hs`` HLS kernel with ``s_axilite`` control and ``m_axi`` data: writing
    ``ap_start`` (bit 0 of ``CTRL`` at 0x00) runs ``fn(regs, ports)`` at once, which reads and
    writes DDR through ``ports`` (``{name: AxiMaster}``) and returns the kernel's cycles; then
    ``ap_done`` (bit 1, clear on read) and ``ap_idle`` (bit 2) are set. ``registers`` maps the
    argument registers' names to a byte offset, or to the offsets of their 32-bit words, low
    word first (a 64-bit address: two; Vitis HLS puts the first argument at 0x10); ``fn`` gets
    each argument's value assembled from its words. ``runs`` lists ``(regs, cycles, bursts,
    beats)`` per start."""

    def __init__(self, fn, registers, ports, *, memory=None):
        self.fn, self.port_specs = fn, dict(ports)
        self.arg_offsets = {k: (v,) if isinstance(v, int) else tuple(v) for k, v in registers.items()}
        self.memory = memory
        self.runs = []
        self.reset()

    def reset(self):
        self.values = {}
        self.done, self.idle = False, True

    def _ports(self):
        mem = self.memory if self.memory is not None else self.sim.memory
        return {k: AxiMaster(mem, k, **v) for k, v in self.port_specs.items()}

    def read(self, offset):
        if offset == 0x00:
            v = (int(self.done) << 1) | (int(self.idle) << 2)
            self.done = False                  # ap_done clears on read
            return v
        return self.values.get(offset, 0)

    def write(self, offset, value):
        if offset == 0x00:
            if value & 1:
                regs = {k: sum(self.values.get(o, 0) << (32 * i) for i, o in enumerate(offs))
                        for k, offs in self.arg_offsets.items()}
                ports = self._ports()
                self.idle = False
                cycles = int(self.fn(regs, ports))
                self.runs.append((regs, cycles, sum(p.bursts for p in ports.values()),
                                  sum(p.beats for p in ports.values())))
                self.done, self.idle = True, True
            return
        self.values[offset] = int(value) & 0xFFFFFFFF
