"""The simulated PYNQ device (:class:`SimDevice`, a ``pynq.Device``): installation as pynq's
active device, the address map routing MMIO to the IP models, stepping and deadlock detection,
``allocate`` / flush / invalidate into the simulated DDR, bitstream download and ``.hwh``
metadata (PS clocks, PL clock frequencies); :class:`DownloadRecord`."""
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
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ... import errors as _errors
from .. import ps_clocks as _ps_clocks
from .dma import AxiDmaModel
from .errors import SimBusError, SimDeadlock, SimError, SimMetadataError, SimUnsupported
from .ipmodel import IPModel, _is_closed
from .memory import CacheOp, SimMemory, _StrictBuffer
from .metadata import find_stream_links
from .pynq_base import _DeviceBase, _PynqBuffer, _pynq, _require_pynq
from .registers import RegisterFileModel, _PsClockModel, _ps_regions
from .trace import _Event, _Trace

log = logging.getLogger(__name__)

_MISSING = object()
_U32 = struct.Struct("<I")


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

    Notes
    -----
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
        #: register accesses so far: ``reads``/``writes`` (calls of read_registers /
        #: write_registers, a block write counting once) and the 32-bit words they moved
        self.mmio_counts = collections.Counter()
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
                raise SimMetadataError(f"SimDevice: boot_hwh {_errors.printable(boot_hwh)}: {exc}") from None
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
            self.mmio_counts["reads"] += 1
            self.mmio_counts["read_words"] += length // 4
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
            self.mmio_counts["writes"] += 1
            self.mmio_counts["write_words"] += len(data) // 4
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
            raise SimMetadataError(f"SimDevice: cannot parse {_errors.printable(hwh)}: {type(exc).__name__}: "
                                   f"{exc}") from exc
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
            raise SimMetadataError(f"SimDevice: {_errors.printable(hwh)}: PS clock configuration: {exc}") from None
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
