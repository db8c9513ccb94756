"""An ``ap_ctrl_hs`` HLS kernel with AXI4-Stream data whose behaviour is a Python function
(:class:`StreamKernelModel`), the registers handed to it (:class:`RegisterValues`) and the
record of a run (:class:`KernelRun`)."""
from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np

from .errors import SimError, SimMetadataError, SimUnsupported
from .ipmodel import IPModel
from .trace import _ev_ap_start, _ev_ran, _ev_text, _fmt_bytes

# HLS ap_ctrl_hs control register
AP_START, AP_DONE, AP_IDLE, AP_READY, AUTO_RESTART = 0x1, 0x2, 0x4, 0x8, 0x80


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
