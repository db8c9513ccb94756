"""The AXI DMA in simple mode (:class:`AxiDmaModel`, one :class:`_DmaChannel` per direction),
its register constants and :func:`decode_dmasr`."""
from __future__ import annotations

from .errors import SimDmaError, SimUnsupported
from .ipmodel import IPModel
from .trace import _ev_done, _ev_start, _fmt_bytes

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
