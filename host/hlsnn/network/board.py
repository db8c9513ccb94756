"""The network kernel on a board: a *network overlay* (the block design of
:mod:`hlsnn.network.hwh`: the kernel ``<name>_net`` with two ``m_axi`` ports on the HP port,
no DMA) driven through pynq, one kernel start per batch.

:class:`NetBoard` needs numpy and pynq only (no compiler, no templates). It opens an overlay
folder ``<stem>/<stem>.bit``, ``.hwh``, ``.json`` with ``pynq.Overlay`` (on pynq's active
device: a PYNQ board, or the simulated device, :class:`hlsnn.network.simboard.NetSimBoard`) and
checks, before anything runs:

* the ``.hwh``: an IP ``<name>_net`` with the ``m_axi`` ports ``m_axi_gmem0`` and
  ``m_axi_gmem1``. The layer kernel's overlay (an AXI DMA and stream ports) is refused by
  name;
* the manifest (``<stem>.json``, :func:`manifest`): the config's hash, and the network's
  (:func:`network_digest`: the network kernel's tables, weights included, are compiled into
  the bitstream, so a network overlay runs exactly one compiled network);
* the IP's base address and its register map (the ``.hwh``'s registers at the offsets
  :func:`hlsnn.engines.network.kernel.layout` derives).

A batch is then: the input integers into a ``pynq.allocate`` buffer, ``flush()``, the two
buffer addresses (both halves of each 64-bit register) and the batch written when they
change, ``ap_start``, a poll of ``ap_done`` bounded by ``timeout`` (else
:class:`~hlsnn.runtime.pynq_target.DeviceTimeout`, the buffers freed), ``invalidate()``, the
output integers read back.
"""
from __future__ import annotations

import hashlib
import re
import json
import time

import numpy as np

from ..errors import InputError, excerpt, printable, seconds
from ..engines.network.kernel import layout
from ..engines.network.words import dtype
from .nethost import write_block

#: the manifest's ``kernel`` value of a network overlay
KIND = "network"
CTRL_DONE, CTRL_IDLE = 0x2, 0x4
M_AXI_PORTS = ("m_axi_gmem0", "m_axi_gmem1")


def net_ip_name(cfg):
    """The network kernel's IP name in a network overlay of ``cfg`` (:mod:`hlsnn.network.hwh`)."""
    return f"{cfg.name}_net"


def kernel_tables(net):
    """The network kernel's tables of a lowered network (numpy only: no compiler)."""
    if net.engine == "sparse_cluster":
        from ..engines.sparse_cluster.network import kernel as sparsekernel
        return sparsekernel.tables(net, *sparsekernel.shape(net.params))
    if net.engine == "bfp_systolic":
        from ..engines.bfp_systolic.network import kernel as bfpkernel
        return bfpkernel.tables(net, *bfpkernel.shape(net.params))
    from ..engines.shift_mac.network import kernel as shiftkernel
    return shiftkernel.tables(net, *shiftkernel.lanes(net.params))


def _plain(v):
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    raise TypeError(f"{type(v).__name__} in the network kernel's tables")


def network_digest(net, tables=None):
    """SHA-256 of what a network kernel's bitstream holds for ``net``: its engine, its
    accelerator and its tables (descriptors, weights, biases, shifts, buffer sizes)."""
    t = kernel_tables(net) if tables is None else tables
    blob = json.dumps({"engine": net.engine, "accel": net.accel, "tables": t}, sort_keys=True, default=_plain)
    return hashlib.sha256(blob.encode()).hexdigest()


def manifest(cfg, net, tables=None, **extra):
    """The ``<stem>.json`` of a network overlay of ``cfg`` for ``net``."""
    offsets = layout(net.engine)[1]
    return dict({"name": net_ip_name(cfg), "kernel": KIND, "engine": cfg.engine, "config": cfg.as_dict(),
                 "config_sha256": cfg.sha, "config_hash32": cfg.hash32, "network": net.name,
                 "network_sha256": network_digest(net, tables),
                 "register_map": {k: list(v) for k, v in offsets.items()}}, **extra)


def io_words(net):
    """``(input elements, output elements)`` per image, and the 64-bit words they take."""
    name = lambda t: net.aliases.get(t, t)                  # noqa: E731
    n_in = int(np.prod(net.shapes[name(net.input["name"])]))
    n_out = int(np.prod(net.shapes[name(net.output["tensor"])]))
    if net.engine == "bfp_systolic":       # float32 words in, two a word; 64-bit elements and the status word out
        return n_in, n_out, -(-n_in // 2), n_out + 1
    from ..engines.network.words import n_words        # 8-bit lanes, or 16-bit ones above 8 bits
    return n_in, n_out, n_words(n_in, net.input["bits"]), n_words(n_out, net.input["bits"])


def check_overlay(folder, cfg, net):
    """``(bit, hwh, json, manifest)`` of a network overlay folder for ``cfg`` and ``net``, or
    :class:`~hlsnn.runtime.pynq_target.OverlayMismatch` naming what differs (module docstring)."""
    from ..runtime.pynq_target import OverlayMismatch, overlay_files, read_manifest
    bit, hwh, js = overlay_files(folder)
    ip = net_ip_name(cfg)
    masters = net_masters(hwh, ip)
    if not set(M_AXI_PORTS) <= set(masters):
        layer = net_masters(hwh, cfg.name) == {} and _has_instance(hwh, cfg.name)
        what = (f"the layer kernel's overlay (IP {cfg.name}: an AXI DMA and stream ports, no m_axi port)" if layer
                else f"no IP {ip} with the m_axi ports {', '.join(M_AXI_PORTS)}")
        raise OverlayMismatch(f"overlay {bit.parent}: {hwh.name} is {what}; network=True needs the network overlay "
                              f"of this compiled model (IP {ip}, m_axi ports gmem0 and gmem1: docs/network-host.md, "
                              f"'The network overlay'), or run layer by layer with network=False")
    bad = {k: w for k, w in masters.items() if k in M_AXI_PORTS and w != 64}
    if bad:
        raise OverlayMismatch(f"overlay {bit.parent}: {ip} has {', '.join(f'{k} of {w} bits' for k, w in bad.items())}"
                              f"; the network kernel reads and writes 64-bit words")
    man = read_manifest(js)
    if not isinstance(man, dict) or man.get("kernel") != KIND:
        raise OverlayMismatch(f"overlay {js}: not a network overlay's manifest (its 'kernel' is "
                              f"{man.get('kernel') if isinstance(man, dict) else None!r}, not {KIND!r})")
    if man.get("config_hash32") != cfg.hash32 or man.get("config_sha256") != cfg.sha:
        got = man.get("config_hash32")
        got = f"0x{got:08x}" if isinstance(got, int) else repr(got)
        raise OverlayMismatch(f"overlay {bit.parent} was built from config hash {got}, "
                              f"but config {cfg.name} hashes to 0x{cfg.hash32:08x}: build the network overlay from "
                              f"the config the model was compiled for")
    want = network_digest(net)
    if man.get("network_sha256") != want:
        raise OverlayMismatch(f"overlay {bit.parent} holds the network {man.get('network')!r} (sha256 "
                              f"{str(man.get('network_sha256'))[:12]}), not this compiled model's {net.name} (sha256 "
                              f"{want[:12]}): a network overlay runs the one network its bitstream was built for")
    return bit, hwh, js, man


def is_network_overlay(folder):
    """True when ``folder`` (an overlay folder or its ``.bit``) holds a network overlay: an IP
    with the ``m_axi`` ports ``m_axi_gmem0`` and ``m_axi_gmem1`` in its ``.hwh``."""
    import os
    from ..runtime.pynq_target import overlay_files
    if not isinstance(folder, (str, os.PathLike)):
        return False                                  # a config (dict, Config): no overlay
    try:
        _, hwh, _ = overlay_files(folder)
        return any(set(M_AXI_PORTS) <= set(net_masters_of(m, hwh)) for m in hwh_modules(hwh))
    except (InputError, OSError):
        return False


def hwh_modules(hwh):
    """The MODULE elements of the ``.hwh`` at ``hwh``; a file that is not well-formed XML (or
    expands entities beyond expat's bound) is an InputError naming it, not a ParseError."""
    import xml.etree.ElementTree as ET
    try:
        return list(ET.parse(str(hwh)).getroot().iter("MODULE"))
    except ET.ParseError as exc:
        raise InputError(f"{printable(hwh)}: not a readable .hwh (XML: {exc})") from None


def net_masters_of(module, hwh="the .hwh"):
    """``{interface: data width}`` of the AXI4 master interfaces of a ``.hwh`` MODULE element; a
    DATAWIDTH that is not a bit count (1 to 6 digits) is an InputError naming the interface."""
    out = {}
    for bi in module.iter("BUSINTERFACE"):
        if bi.get("TYPE") == "MASTER" and bi.get("VLNV") == "xilinx.com:interface:aximm:1.0":
            w = bi.get("DATAWIDTH") or "0"
            if not re.fullmatch(r"[0-9]{1,6}", w):
                raise InputError(f"{printable(hwh)}: interface {excerpt(bi.get('NAME'), 60)} of "
                                 f"{excerpt(module.get('INSTANCE'), 60)} has DATAWIDTH {excerpt(w, 40)}; a data width "
                                 f"is a number of bits")
            out[bi.get("NAME")] = int(w)
    return out


def _has_instance(hwh, name):
    return any(m.get("INSTANCE") == name for m in hwh_modules(hwh))


def net_masters(hwh_path, ip_name):
    """The AXI4 master interfaces (``m_axi_*``) of IP ``ip_name`` in a ``.hwh`` (this package's
    or Vivado's): ``{interface: data width}``; empty when the IP has none (a layer kernel, whose
    data go through AXI-Stream ports) or is not there."""
    out = {}
    for mod in hwh_modules(hwh_path):
        if mod.get("INSTANCE") == ip_name:
            out.update(net_masters_of(mod, hwh_path))
    return out


class NetBoard:
    """The network kernel of ``net`` (a lowered network) in the network overlay ``folder`` of
    ``cfg``, on pynq's active device (or ``device``): :meth:`run` takes the input integers of
    a batch and returns the output integers, in one kernel start. ``last_kernel_s`` is the wall
    time from ``ap_start`` to ``ap_done``, ``last_driver_s`` the rest of the call, ``starts``
    the kernel starts so far."""

    name = "pynq"

    def __init__(self, folder, cfg, net, *, device=None, timeout=10.0, download=True, cacheable=None):
        from ..runtime.pynq_target import _check_address, _pynq, fill_pl_clock_frequencies
        self.cfg, self.net, self.timeout = cfg, net, seconds("timeout", timeout)
        # the buffers' allocation: pynq's default (None), or cacheable / uncached as asked; the
        # C host path (run_image) takes uncached buffers unless cacheable=True
        self.cacheable = cacheable
        self._alloc_kw = {} if cacheable is None else {"cacheable": bool(cacheable)}
        bit, hwh, _, self.manifest = check_overlay(folder, cfg, net)
        self.n_in, self.n_out, self.in_words, self.out_words = io_words(net)
        self.regs, self.offsets, _ = layout(net.engine)
        self._pynq = _pynq()
        kw = {"device": device} if device is not None else {}
        self.overlay = self._pynq.Overlay(str(bit), download=False, **kw)
        if download:
            fill_pl_clock_frequencies(self.overlay.clock_dict, self.overlay.parser)
            self.overlay.download()
        ip_name = net_ip_name(cfg)
        desc = self.overlay.ip_dict.get(ip_name)
        _check_address(ip_name, desc)
        self._check_registers(ip_name, desc, bit)
        self.ip = getattr(self.overlay, ip_name)
        self.inb = self.outb = None
        self._batch = None
        self.starts, self.last_kernel_s, self.last_driver_s = 0, 0.0, 0.0

    def _check_registers(self, ip_name, desc, bit):
        from ..runtime.pynq_target import OverlayMismatch
        got = {n: int(v.get("address_offset", -1)) for n, v in (desc.get("registers") or {}).items()}
        want = {r[0]: r[1] for r in self.regs}
        if got and got != want:
            diff = next(n for n in sorted(set(got) | set(want)) if got.get(n) != want.get(n))
            raise OverlayMismatch(f"overlay {bit.parent}: {ip_name}'s register {diff} is at "
                                  f"{got.get(diff, 'no offset')}, the network kernel's at {want.get(diff, 'none')}: "
                                  f"the overlay was built from another kernel source; rebuild it")

    def _free(self):
        for b in (self.inb, self.outb):
            if b is not None:
                b.freebuffer()
        self.inb = self.outb = None
        self._batch = None

    def _buffers(self, batch):
        """Allocate (on the first call and when a batch outgrows them) the input and output
        buffers, with their lane views (one image per row: int8, or int16 for activations of more
        than 8 bits, :mod:`hlsnn.engines.network.words`) made once: the padding of each
        input row is zeroed (and flushed) here and never written again. The two address
        registers and ``batch`` are written only then, as one block write of their span
        (:func:`hlsnn.network.nethost.write_block`), and ``batch`` again only when it changes:
        the kernel's ``s_axilite`` registers keep their values across starts."""
        words_in, words_out = batch * self.in_words, batch * self.out_words
        if self.inb is None or self.inb.shape[0] < words_in or self.outb.shape[0] < words_out:
            self._free()
            self.inb = self._pynq.allocate((words_in,), np.uint64, **self._alloc_kw)
            self.outb = self._pynq.allocate((words_out,), np.uint64, **self._alloc_kw)
            lane = np.int8 if self.net.engine == "bfp_systolic" else dtype(self.net.input["bits"])  # (words)
            per = 8 // np.dtype(lane).itemsize
            self._x8 = np.asarray(self.inb).view(lane).reshape(batch, self.in_words * per)
            self._y8 = np.asarray(self.outb).view(lane).reshape(batch, self.out_words * per)
            self._xw = np.asarray(self.inb).reshape(batch, self.in_words)
            self._yw = np.asarray(self.outb).reshape(batch, self.out_words)
            self._x8[:] = 0
            self.inb.flush()
            # the two addresses and the batch: one block write of the register span (nethost)
            write_block(self.ip, self.offsets, {"in": self.inb.device_address, "out": self.outb.device_address,
                                                "batch": batch})
            self._batch = batch
        if self._batch != batch:
            write_block(self.ip, self.offsets, {"batch": batch})
            self._batch = batch

    def run(self, xq):
        """``xq`` (B, ...) input integers -> (B, out_elems) int64, in one kernel start (module
        docstring). On an error (a timeout included) the buffers are freed."""
        from ..runtime.pynq_target import DeviceTimeout
        b = xq[0].shape[0] if isinstance(xq, tuple) else xq.shape[0]
        if b < 1:
            raise InputError(f"network kernel: a batch of {b} images; give at least one")
        t_call = time.perf_counter()
        try:
            bfp = self.net.engine == "bfp_systolic"
            if bfp:
                from ..engines.bfp_systolic.network.kernel import pack_input
                b = xq[0].shape[0]
                words = pack_input(xq)
            self._buffers(b)
            if bfp:
                self._xw[:b] = words
            else:
                self._x8[:b, :self.n_in] = np.asarray(xq).reshape(b, -1)
            self.inb.flush()
            t0 = time.perf_counter()
            self.ip.write(0x00, 1)                                    # ap_start
            if not self.ip.read(0x00) & (CTRL_DONE | CTRL_IDLE):      # ap_done (clears on read) or ap_idle
                deadline = time.monotonic() + self.timeout
                while not self.ip.read(0x00) & (CTRL_DONE | CTRL_IDLE):
                    if time.monotonic() > deadline:
                        raise DeviceTimeout(f"network kernel {net_ip_name(self.cfg)} did not finish within "
                                            f"{self.timeout:g} s (a batch of {b}); its buffers were freed")
            self.last_kernel_s = time.perf_counter() - t0
            self.starts += 1
            self.outb.invalidate()
            if bfp:
                from ..engines.bfp_systolic.network.kernel import finish_words
                y = finish_words(self.net, xq, self._yw[:b].copy())
            else:
                y = self._y8[:b, :self.n_out].astype(np.int64)
        except BaseException:
            self._free()
            raise
        # the driver's share of the call (buffer fill and syncs, register accesses, read-back):
        # benchmarks/bench_network_start.py measures it
        self.last_driver_s = time.perf_counter() - t_call - self.last_kernel_s
        return y

    def run_image(self, x, *, ints=True, softmax=False):
        """The batch of images ``x`` (B, ...) as the data set stores them (float32, float64 or
        uint8) -> ``(q, y)``: the output integers (B, out_elems) int64 and their values
        (float64), through the C host path (:class:`hlsnn.network.nethost.CHost`: rule input_quantize into
        the input buffer, ``ap_start``, the poll, the outputs read once, in one ``ctypes`` call).
        ``ints=False``: ``q`` is None (not copied out; the loader reads the values only);
        ``softmax=True``: ``y`` is the network's Softmax after the logits, applied in the C call
        (:func:`hlsnn.network.nethost.softmax_rule`). On an error (a timeout included) the buffers are freed."""
        if getattr(self, "_chost", None) is None:
            from .nethost import CHost
            self._chost = CHost(self)
        t0 = time.perf_counter()
        out = self._chost.run(x, timeout=self.timeout, ints=ints, softmax=softmax)
        # the C call timed its ap_start-to-done; the rest of the call is the driver's
        self.last_kernel_s = self._chost.ctx.kernel_s
        self.last_driver_s = max(0.0, time.perf_counter() - t0 - self.last_kernel_s)
        return out

    def run_pipelined(self, x):
        """The images ``x`` (B, ...) as stored -> ``(q, y)`` in double-buffered starts of one
        image each (:meth:`hlsnn.network.nethost.CHost.run_pipelined`: the host quantizes
        image i + 1 while the kernel runs image i)."""
        from .nethost import CHost
        if getattr(self, "_chost", None) is None:
            self._chost = CHost(self)
        return self._chost.run_pipelined(x, timeout=self.timeout)

    def close(self):
        self._free()
        self._chost = None
