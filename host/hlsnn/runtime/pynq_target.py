"""The ``pynq`` target: an overlay on a PYNQ board (or on the simulated device, ``sim``),
driven through ``pynq.Overlay``, ``pynq.allocate`` and the unmodified ``pynq.lib.dma.DMA``.

Everything is found from the overlay's metadata: the DMA is the IP ``dma`` and the kernel the
IP named like the config, bound to a driver class by its VLNV (``hlsnn.org:hls:<name>:1.0``);
register offsets come from the overlay's manifest (``<name>.json``, read from the IP's
generated header at build time). The run-time path needs numpy and pynq only; pynq is
imported here, lazily, so the package imports without it.
"""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import numpy as np

from ..errors import HlsnnError, InputError, MissingDependency, excerpt, printable, seconds
from .targets import _limit, kernel_cycles

#: AXI DMA status register (DMASR) bits.
DMASR_BITS = {0: "halted", 1: "idle", 4: "internal error (DMAIntErr: e.g. a packet longer than the buffer, or a "
              "zero length)", 5: "slave error (DMASlvErr)", 6: "decode error (DMADecErr: bad address)",
              12: "transfer complete (IOC)", 14: "error interrupt"}
CTRL_START, CTRL_DONE, CTRL_IDLE = 0x1, 0x2, 0x4
_U32 = struct.Struct("<I")


class DeviceTimeout(HlsnnError, TimeoutError):
    """A DMA channel or the kernel did not finish in time; the DMA was reset and is usable."""


class OverlayMismatch(HlsnnError, ValueError):
    """The overlay does not match the config (hash, DMA parameters, stream widths)."""


def decode_dmasr(value: int) -> str:
    flags = [msg for bit, msg in DMASR_BITS.items() if value >> bit & 1]
    return f"DMASR 0x{value:08x} ({', '.join(flags) if flags else 'running, no flags'})"


def _pynq():
    try:
        from .pynq_compat import import_pynq
        return import_pynq()  # with a pkg_resources stand-in on setuptools >= 81
    except ImportError as exc:
        raise MissingDependency(f"target 'pynq'/'sim' needs the pynq package (`pip install \"hlsnn[board]\"`): {exc}") \
            from None


def fill_pl_clock_frequencies(clock_dict, parser):
    """Fill in ``clock_dict[i]['frequency']`` where the metadata left it None; returns the indices.

    pynq 4.0.0's ``Overlay.download()`` programs each enabled PL clock with that frequency, and
    pynqmetadata 0.2.0 reads none from a Zynq-7000 ``.hwh`` (PYNQ-Z2): ``Clocks.set_pl_clk``
    then raises TypeError. The PS records the achieved rate (``PCW_ACT_FPGA<i>_PERIPHERAL_FREQMHZ``).
    pynq 3.x programs the divisors instead and ignores the frequency."""
    params = getattr(getattr(parser, "ps", None), "parameters", None) or {}
    filled = []
    for i, clk in clock_dict.items():
        if clk.get("frequency") is not None or not clk.get("enable"):
            continue
        for key in (f"PCW_ACT_FPGA{i}_PERIPHERAL_FREQMHZ", f"PCW_FPGA{i}_PERIPHERAL_FREQMHZ"):
            try:
                clk["frequency"] = float(params[key].value)
            except (KeyError, AttributeError, TypeError, ValueError):
                continue
            filled.append(i)
            break
    return filled


def overlay_files(path, name=None):
    """``(bit, hwh, json)`` of an overlay folder ``overlays/<name>/`` or a ``<name>.bit`` path."""
    p = Path(path)
    if p.is_dir():
        name = name or p.name
        bit = p / f"{name}.bit"
    else:
        bit = p
        name = p.stem
    hwh, js = bit.with_suffix(".hwh"), bit.with_suffix(".json")
    missing = [f.name for f in (bit, hwh, js) if not f.is_file()]
    if missing:
        raise InputError(f"overlay {bit.parent}: missing {', '.join(missing)}; an overlay needs {name}.bit, {name}.hwh "
                         f"and {name}.json with the same stem (hlsnn build writes all three)")
    return bit, hwh, js


#: ap_start as the bytes MMIO.write takes: one register write, as an int would be (on pynq's
#: REGISTER_RW devices it skips the per-word array emulation)
_START = _U32.pack(CTRL_START)


def _runs(offsets):
    """``[(first offset, [indices])]``: the registers at ``offsets`` grouped into runs of
    adjacent 32-bit words, in offset order, so each run is one ``MMIO.write`` of its bytes
    (no word between two registers is ever written)."""
    runs = []
    for i in sorted(range(len(offsets)), key=offsets.__getitem__):
        if runs and runs[-1][0] + 4 * len(runs[-1][1]) == offsets[i]:
            runs[-1][1].append(i)
        else:
            runs.append((offsets[i], [i]))
    return runs


def _with_view(buf):
    return buf, buf.view(np.ndarray)


def _driver_class(vlnv):
    """A DefaultIP subclass bound to the kernel's VLNV (pynq picks drivers by ``bindto``)."""
    from pynq import DefaultIP

    class HlsnnKernel(DefaultIP):
        bindto = [vlnv]

        def start(self):
            self.write(0x00, _START)

        def done(self):
            return bool(self.read(0x00) & (CTRL_DONE | CTRL_IDLE))
    return HlsnnKernel


def overlay_manifest(overlay, cfg):
    """``(bit, hwh, json, manifest)`` of the overlay folder ``overlay``, refused unless its manifest
    is a JSON object built from ``cfg`` (the same hash): checked before anything is compiled or
    downloaded for it."""
    bit, hwh, js = overlay_files(overlay, cfg.name)
    manifest = read_manifest(js)
    if not isinstance(manifest, dict):
        raise InputError(f"overlay manifest {js}: must be a JSON object (is this an hlsnn overlay's <name>.json?)")
    got = manifest.get("config_hash32")
    if got != cfg.hash32:
        shown = f"0x{got:08x}" if isinstance(got, int) and not isinstance(got, bool) else excerpt(got, 40)
        raise OverlayMismatch(f"overlay {bit.parent} was built from config hash {shown}, but config "
                              f"{cfg.name} hashes to 0x{cfg.hash32:08x}: rebuild the overlay (hlsnn build) or use "
                              f"the config it was built from")
    return bit, hwh, js, manifest


class PynqTarget:
    """Runs an engine's stream protocol through an overlay's AXI DMA.

    Parameters
    ----------
    cfg, engine
        The config (its hash must match the overlay's) and its engine module.
    overlay : path
        The overlay folder (``overlays/<name>``) or its ``.bit``.
    device : pynq.Device, optional
        The device (default: pynq's active device; the simulated device for ``sim``).
    timeout : float
        Seconds a transfer may take before it is an error (the DMA is then reset).
    max_transfer_bytes : int, optional
        Cap one transfer below the DMA's length-register limit (e.g. to bound the contiguous
        buffers); operations larger than one transfer are tiled by the engine.
    instance : int
        Which kernel instance of the overlay to drive: 0 (``dma`` and the config's name) or, in
        an overlay of several (``hlsnn.blockdesign.hwh.instance_names``), ``i`` for ``dma_i``
        and ``<name>_i``.
    shared : pynq.Overlay, optional
        The overlay object another instance's target made (and downloaded): this target drives
        its own instance of it and neither makes nor downloads one.
    """

    name = "pynq"
    kernel_cycles = kernel_cycles

    def __init__(self, cfg, engine, *, overlay, device=None, timeout=10.0, download=True, max_transfer_bytes=None,
                 instance=0, shared=None):
        pynq = _pynq()
        self.cfg, self.engine, self.timeout = cfg, engine, seconds("timeout", timeout)
        bit, hwh, js, self.manifest = overlay_manifest(overlay, cfg)
        vlnv = f"hlsnn.org:hls:{cfg.name}:1.0"
        self._driver = _driver_class(vlnv)
        kw = {"device": device} if device is not None else {}
        self.overlay = shared if shared is not None else pynq.Overlay(str(bit), download=False, **kw)
        if download and shared is None:
            fill_pl_clock_frequencies(self.overlay.clock_dict, self.overlay.parser)
            self.overlay.download()
        ips = self.overlay.ip_dict
        # the IP names of the instance (hlsnn.blockdesign.hwh.instance_names)
        dma_ip, k_ip = ("dma", cfg.name) if not instance else (f"dma_{instance}", f"{cfg.name}_{instance}")
        if dma_ip not in ips or k_ip not in ips:
            raise OverlayMismatch(f"overlay {bit.name} has IPs {sorted(ips)}; expected '{dma_ip}' and '{k_ip}'")
        for ip_name in (dma_ip, k_ip):
            _check_address(ip_name, ips[ip_name])
        self._check_dma(ips[dma_ip])
        self._dma_limit = (1 << self.length_width) - 1          # what the length register can count
        user = _limit(max_transfer_bytes)
        #: bytes one transfer may carry: the DMA's length register, or less if asked; the
        #: engines tile larger operations to it (``engines.tiling``)
        self.max_transfer_bytes = self._dma_limit if user is None else min(user, self._dma_limit)
        try:                      # pynq's drivers read the IPs' .hwh parameters (the DMA's c_micro_dma ...)
            self.dma = getattr(self.overlay, dma_ip)
            self.kernel = getattr(self.overlay, k_ip)
        except (ValueError, KeyError, TypeError) as exc:
            raise OverlayMismatch(f"overlay {bit.name}: pynq's drivers cannot read its IPs' parameters "
                                  f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]}); is the .hwh damaged? "
                                  f"rebuild the overlay with hlsnn build") from None
        # the manifest's register map is keyed by the protocol's register names (hlsnn build
        # translates the kernel's argument names, e.g. k_in for k, from the generated header)
        regs = self.manifest.get("register_map") or {}
        if not isinstance(regs, dict):
            raise OverlayMismatch(f"overlay {js.name}: register_map = {excerpt(regs, 40)}: must be a JSON object of "
                                  "register names to offsets; rebuild the overlay (hlsnn build)")
        names = list(engine.protocol.REGS_IN) + list(engine.protocol.REGS_OUT)
        missing = [n for n in names if n not in regs]
        if missing:
            raise OverlayMismatch(f"overlay {js.name}: register_map has no register for {', '.join(missing)} (it has "
                                  f"{', '.join(sorted(regs))}); rebuild the overlay with this hlsnn (hlsnn build)")
        bad = next((n for n in names if isinstance(regs[n], bool) or not isinstance(regs[n], int)
                    or not 0x10 <= regs[n] < 0x10000 or regs[n] % 4), None)
        if bad is not None:
            raise OverlayMismatch(f"overlay {js.name}: register_map[{bad!r}] = {excerpt(regs[bad], 40)}: must be a "
                                  "register offset, a JSON integer in [0x10, 0x10000) and a multiple of 4; rebuild "
                                  "the overlay (hlsnn build) or restore its <name>.json")
        self._offsets = {n: int(regs[n]) for n in names}
        _check_register_map(js.name, self._offsets, names, ips[k_ip])
        self._pynq = pynq
        self._in = self._out = None
        self._in_np = self._out_np = None          # plain ndarray views of the DMA buffers
        self._in_addr = None                       # the input buffer's virtual address
        self._beat = cfg.params["stream_bits"] // 8
        # fixed for the overlay: looked up once, not per call
        self._mmio = self.kernel.mmio
        self._in_runs = _runs([self._offsets[n] for n in engine.protocol.REGS_IN])
        self._out_offsets = [self._offsets[n] for n in engine.protocol.REGS_OUT]
        self.last_timing = {}
        # running totals over this target's life (hlsnn.network: the kernel's share of a call)
        self.total_calls, self.total_transfer_s, self.total_bytes = 0, 0.0, 0

    # ------------------------------------------------------------------ checks
    def _check_dma(self, ip):
        par = {k.lower(): v for k, v in (ip.get("parameters") or {}).items()}
        sb = self.cfg.params["stream_bits"]

        def need(key, ok, what):
            if key not in par:
                raise OverlayMismatch(f"the overlay's DMA has no parameter {key}")
            try:
                good = ok(str(par[key]))
            except ValueError:                 # a width that is no number (a damaged or hostile .hwh)
                good = False
            if not good:
                raise OverlayMismatch(f"the overlay's DMA has {key} = {excerpt(par[key], 40)}: {what}")
        need("c_include_sg", lambda v: v == "0", "it must run in simple mode (no scatter-gather)")
        need("c_m_axis_mm2s_tdata_width", lambda v: int(v) == sb, f"the kernel's input stream is {sb} bits")
        need("c_s_axis_s2mm_tdata_width", lambda v: int(v) == sb, f"the kernel's output stream is {sb} bits")
        for key in ("c_include_mm2s", "c_include_s2mm"):      # both channels, or a call never returns
            if key in par and str(par[key]) != "1":
                raise OverlayMismatch(f"the overlay's DMA has {key} = {par[key]}: the kernel needs both channels "
                                      "(MM2S for its input, S2MM for its output)")
        self.length_width = _int_param(par, "c_sg_length_width", 14, 8, 26)
        self.addr_width = _int_param(par, "c_addr_width", 32, 32, 64)

    def _buffers(self, n_in, n_out):
        limit = self._dma_limit
        for what, n in (("input", n_in), ("output", n_out or 0)):
            if n > limit:       # the engines tile to max_transfer_bytes: only a raw run() gets here
                raise InputError(f"{what} transfer of {n} bytes exceeds the DMA's {self.length_width}-bit length "
                                 f"register ({limit} bytes): split the call (the engines' operations tile "
                                 f"to target.max_transfer_bytes)")
        if self._in is None or self._in.nbytes < n_in:
            self._in, self._in_np = self._allocate(self._in, n_in)
            self._in_addr = self._in_np.ctypes.data
        if n_out is not None and (self._out is None or self._out.nbytes < n_out):
            self._out, self._out_np = self._allocate(self._out, n_out)

    def _allocate(self, old, n):
        """A contiguous buffer of at least ``n`` bytes (``old`` freed) and a plain ndarray view of it."""
        if old is not None:
            old.freebuffer()
        # not assigned on the allocate() line: the simulated device names such buffers '#id'
        return _with_view(self._pynq.allocate(shape=(max(n, 64),), dtype=np.uint8))

    def input_buffer(self, nbytes):
        """A writable ``uint8`` view of the first ``nbytes`` of the DMA input buffer, to pack
        the next :meth:`run`'s input beats into directly (``run`` then copies nothing).

        Valid until the next ``input_buffer``/``run`` call of this target (``run`` may grow
        and so replace the buffer); a ``run`` given other beats copies them in as before.
        """
        if self._in is None or self._in.nbytes < nbytes:
            self._buffers(nbytes, None)
        return self._in_np[:nbytes]

    # ------------------------------------------------------------------ run
    def run(self, beats, regs_in, n_out_beats):
        t0 = time.perf_counter()
        beats = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1, self._beat)
        n_in, n_out = beats.nbytes, n_out_beats * self._beat
        self._buffers(n_in, n_out)
        # the bytes go straight into the DMA buffer through a plain ndarray view (a PynqBuffer
        # slice would build buffer metadata for nothing); sendchannel.transfer() flushes it.
        # Beats packed into input_buffer() are there already.
        if n_in and beats.ctypes.data != self._in_addr:
            self._in_np[:n_in] = beats.reshape(-1)
        mmio = self._mmio
        values = [int(v) & 0xFFFFFFFF for v in regs_in]
        for off, idx in self._in_runs:       # one write per run of adjacent registers
            mmio.write(off, b"".join(_U32.pack(values[i]) for i in idx))
        t1 = time.perf_counter()
        send, recv = self.dma.sendchannel, self.dma.recvchannel
        # both channels and the kernel start before anything waits
        recv.transfer(self._out, start=0, nbytes=n_out)
        mmio.write(0x00, _START)
        send.transfer(self._in, start=0, nbytes=n_in)
        self._wait(send, "MM2S (input) channel")
        self._wait(recv, "S2MM (output) channel")
        if not mmio.read(0x00) & (CTRL_DONE | CTRL_IDLE):
            deadline = time.monotonic() + self.timeout
            while not self.kernel.done():
                if time.monotonic() > deadline:
                    raise DeviceTimeout(f"kernel {self.cfg.name} did not finish within {self.timeout:g} s")
        t2 = time.perf_counter()
        self._out.invalidate()
        out = self._out_np[:n_out].reshape(n_out_beats, self._beat).copy()
        regs_out = np.array([mmio.read(off) for off in self._out_offsets], dtype=np.uint32)
        t3 = time.perf_counter()
        self.last_timing = {"host_before_s": t1 - t0, "transfer_s": t2 - t1, "host_after_s": t3 - t2,
                            "bytes_in": n_in, "bytes_out": n_out}
        self.total_calls += 1
        self.total_transfer_s += t2 - t1
        self.total_bytes += n_in + n_out
        return out, regs_out

    def _wait(self, ch, what):
        deadline = time.monotonic() + self.timeout
        while True:
            sr = self._dmasr(ch)
            if sr & 0x70:           # an error bit
                self._reset(ch)
                raise DeviceTimeout(f"DMA {what} failed: {decode_dmasr(sr)}; the DMA was reset")
            if sr & 0x2 or ch.idle:
                return
            if time.monotonic() > deadline:
                self._reset(ch)
                raise DeviceTimeout(f"DMA {what} did not finish within {self.timeout:g} s: {decode_dmasr(sr)} "
                                    "(a kernel that never sets TLAST, a buffer shorter than the packet, or a stalled "
                                    "kernel); the DMA was reset")

    @staticmethod
    def _dmasr(ch):
        return int(ch._mmio.read(ch._offset + 0x4))

    @staticmethod
    def _reset(ch):
        try:
            ch._mmio.write(ch._offset, 0x4)      # DMACR reset
            ch.start()
        except Exception:                        # pragma: no cover - best effort
            pass

    def close(self):
        for attr in ("_in", "_out"):
            buf = getattr(self, attr, None)
            if buf is not None:
                setattr(self, attr + "_np", None)
                buf.freebuffer()
                setattr(self, attr, None)
        self._in_addr = None


def _int_param(par, key, default, lo, hi):
    """An integer IP parameter of the ``.hwh`` in [lo, hi] (a tampered one is an OverlayMismatch)."""
    raw = par.get(key, default)
    try:
        value = int(str(raw), 0)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        raise OverlayMismatch(f"the overlay's DMA has {key} = {excerpt(raw, 40)}: must be an integer in [{lo}, {hi}] "
                              "(is the .hwh damaged? rebuild the overlay with hlsnn build)")
    return value


#: the highest address an IP of the boards' PS-PL ports can sit at (ZynqMP: 40-bit physical addresses)
ADDRESS_LIMIT = 1 << 40


def _check_address(name, ip):
    """An IP's base address and range from the ``.hwh`` must lie in the physical address space."""
    base, span = (ip or {}).get("phys_addr"), (ip or {}).get("addr_range")
    ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (base, span)) and \
        0 <= base and 0 < span <= 1 << 32 and base + span <= ADDRESS_LIMIT
    if not ok:
        def show(v):
            return f"{v:#x}" if isinstance(v, int) and not isinstance(v, bool) else excerpt(v, 30)
        raise OverlayMismatch(f"the overlay's IP {name!r} has base address {show(base)} and range "
                              f"{show(span)}: must lie within the {ADDRESS_LIMIT.bit_length() - 1}-bit physical "
                              "address space (is the .hwh damaged? rebuild the overlay with hlsnn build)")


_CONTROL_REGS = {"CTRL", "GIER", "IP_IER", "IP_ISR"}


def _check_register_map(what, offsets, names, ip):
    """The manifest's register map must be the kernel's: the same offsets as the ``.hwh``'s
    register list of the kernel IP (its data registers in address order are the top function's
    arguments in declaration order, which is the protocol's order), or, where the ``.hwh`` lists
    none, the map the template implies (Vitis HLS: 0x10 on, 8 bytes per 32-bit argument).
    A wrong map would write registers the kernel does not read."""
    hw = sorted((int(v.get("address_offset", -1)), k) for k, v in ((ip or {}).get("registers") or {}).items()
                if k not in _CONTROL_REGS and not k.endswith("_ctrl"))
    if hw:
        expected, source = [off for off, _ in hw], "the .hwh's register list"
    else:
        expected, source = [0x10 + 8 * i for i in range(len(names))], "the map the kernel template implies"
    got = [offsets[n] for n in names]
    if got != expected:
        bad = next(i for i in range(max(len(got), len(expected)))
                   if i >= len(got) or i >= len(expected) or got[i] != expected[i])
        there = f"0x{expected[bad]:x}" if bad < len(expected) else "nothing"
        here = f"{names[bad]} at 0x{got[bad]:x}" if bad < len(got) else "no register"
        raise OverlayMismatch(f"overlay {what}: register_map disagrees with {source}: {here}, where it has "
                              f"{there}; rebuild the overlay (hlsnn build) or restore its <name>.json")


def read_manifest(path) -> dict:
    """An overlay's ``<name>.json``, parsed (duplicate keys refused); unreadable or malformed
    JSON is an InputError naming the file."""
    def no_duplicates(pairs):
        keys = [k for k, _ in pairs]
        dup = next((k for k in keys if keys.count(k) > 1), None)
        if dup is not None:
            raise ValueError(f"duplicate key {dup!r}")
        return dict(pairs)
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"), object_pairs_hook=no_duplicates)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"overlay manifest {printable(path)}: not a readable hlsnn manifest ({exc})") from None
    except RecursionError:
        raise InputError(f"overlay manifest {printable(path)}: not a readable hlsnn manifest (nested too "
                         "deeply)") from None


def config_from_manifest(manifest: dict):
    """The Config an overlay was built from, from its ``<name>.json`` alone (no YAML files
    needed on the board); its sha256 must equal the manifest's."""
    from dataclasses import replace

    from ..config import config_from_data
    from ..engines import ENGINES
    if not isinstance(manifest, dict) or not isinstance(manifest.get("config"), dict):
        raise InputError("overlay manifest: no 'config' mapping (is this an hlsnn overlay's <name>.json?)")
    c = manifest["config"]
    # validated like a YAML config: names are C identifiers, parameters in range, the board a name
    cfg = config_from_data(c, c.get("board"), source="overlay manifest")
    eng = ENGINES[cfg.engine]
    if cfg.sha != manifest.get("config_sha256"):
        raise OverlayMismatch(f"overlay manifest is inconsistent: its config hashes to {cfg.sha[:16]}, "
                              f"it records {str(manifest.get('config_sha256'))[:16]}")
    return replace(cfg, estimates=eng.estimate(cfg))
