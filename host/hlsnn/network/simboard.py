"""The network kernel on the simulated PYNQ board, driven through pynq as on a board.

:func:`prepare_net_overlay` writes the *network overlay* of a config and a lowered network
(as :func:`hlsnn.runtime.sim_target.prepare_sim_overlay` writes the layer kernel's): the
``.hwh`` of its block design (:mod:`hlsnn.network.hwh`: the kernel ``<name>_net`` with its
two ``m_axi`` ports on the HP port, no DMA), a placeholder ``.bit`` and the manifest
(:func:`hlsnn.network.board.manifest`), under
``build/<name>/net_overlay/<config hash>-<network hash>/<name>_net/``; a folder that is there
already is reused.

:class:`NetSimBoard` opens that overlay (or a given network overlay folder) on a
:class:`~hlsnn.runtime.sim.SimDevice` with strict cache checks, with the network kernel's
register-level model (:func:`hlsnn.network.simboard.ip_model`: ``s_axilite`` control, two
``m_axi`` ports on the simulated DDR) at the kernel IP, and runs a batch through the very
driver code of the pynq target (:class:`hlsnn.network.board.NetBoard`): ``pynq.allocate``,
``flush()``, the IP driver's writes of the two 64-bit buffer addresses and the batch,
``ap_start``, a poll of ``ap_done`` bounded by ``timeout``, ``invalidate()``: one kernel start
per batch, no DMA.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..engines.network.kernel import layout
from .board import NetBoard, manifest, net_ip_name, network_digest


def prepare_net_overlay(cfg, net, tables=None, out_dir=None) -> Path:
    """The network overlay folder of ``cfg`` and ``net`` (module docstring); ``tables``: the
    network kernel's, when known (else computed)."""
    from ..version import __version__
    from .hwh import render_net_hwh
    from ..files import write_atomic
    from ..paths import build_dir
    stem = net_ip_name(cfg)
    man = manifest(cfg, net, tables, simulated=True)
    if out_dir is None:
        key = f"{cfg.sha[:12]}-{man['network_sha256'][:12]}-{__version__}"
        out_dir = build_dir(cfg) / "net_overlay" / key / stem
    d = Path(out_dir)
    files = [d / f"{stem}.{ext}" for ext in ("hwh", "bit", "json")]
    if all(f.is_file() for f in files):
        return d
    d.mkdir(parents=True, exist_ok=True)
    render_net_hwh(cfg, files[0], net.engine, network=net.name)
    write_atomic(files[1], b"hlsnn simulated network overlay: no bitstream\n")
    write_atomic(files[2], (json.dumps(man, indent=2, sort_keys=True) + "\n").encode())
    return d


class NetSimBoard:
    """The network kernel (a :class:`~hlsnn.engines.network.kernel.NetKernel`) on the simulated
    board of ``cfg``: :meth:`run` takes the input integers of a batch and returns the output
    integers; ``last_kernel_s`` is the wall time of the start-to-done (the kernel's
    C-simulation), ``starts`` the kernel starts so far. ``overlay``: a network overlay folder
    to open instead of the prepared one."""

    name = "sim"

    def __init__(self, kernel, cfg, *, strict_cache=True, overlay=None, timeout=10.0, cacheable=None):
        from ..runtime.sim import SimDevice
        from ..runtime.sim_target import _DEVICE_LOCK
        self.kernel, self.cfg, self._lock = kernel, cfg, _DEVICE_LOCK
        self.folder = Path(overlay) if overlay else prepare_net_overlay(cfg, kernel.net, kernel.tables)
        self.sim = SimDevice(strict_cache=strict_cache)
        self.model = ip_model(kernel)
        self.sim.add_model(net_ip_name(cfg), self.model)
        self.board = None
        with _DEVICE_LOCK:
            self.sim.install()
            try:
                self.board = NetBoard(self.folder, cfg, kernel.net, device=self.sim, timeout=timeout,
                                      cacheable=cacheable)
            finally:
                self.sim.uninstall()

    @property
    def tables(self):
        return self.kernel.tables

    @property
    def starts(self):
        return self.board.starts

    @property
    def last_kernel_s(self):
        return self.board.last_kernel_s

    @property
    def last_driver_s(self):
        return self.board.last_driver_s

    @property
    def ip(self):
        return self.board.ip

    def run(self, xq):
        """``xq`` (B, ...) input integers -> (B, out_elems) int64, in one kernel start."""
        with self._lock, self.sim:
            return self.board.run(xq)

    def run_image(self, x, *, ints=True, softmax=False):
        """The batch of images ``x`` as stored -> ``(q, y)``, through the C host path
        (:meth:`hlsnn.network.board.NetBoard.run_image`; its register accesses are callbacks
        into this simulated device; ``ints``, ``softmax``: as there)."""
        with self._lock, self.sim:
            return self.board.run_image(x, ints=ints, softmax=softmax)

    def run_pipelined(self, x):
        """Double-buffered starts of one image each (:meth:`NetBoard.run_pipelined`)."""
        with self._lock, self.sim:
            return self.board.run_pipelined(x)

    def close(self):
        if self.board is not None:
            with self._lock, self.sim:
                self.board.close()


__all__ = ["NetSimBoard", "prepare_net_overlay", "network_digest"]


def ip_model(kernel, *, memory=None):
    """The network kernel as a register-level IP of the simulated board
    (:class:`hlsnn.runtime.sim.axi_master.MasterKernelModel`): ``ap_start`` reads ``batch``
    images from DDR at ``in`` through the 64-bit ``m_axi`` port ``gmem0``, runs the kernel's
    C-simulation (``kernel``, a :class:`NetKernel`) and writes the outputs at ``out`` through
    ``gmem1``; its cycles are the cycle model's (:func:`hlsnn.engines.shift_mac.network.perf.op_cycles`)."""
    from ..runtime.sim.axi_master import MasterKernelModel
    from ..engines.shift_mac.network import perf as netperf
    per_image = (kernel.cycles_per_image() if hasattr(kernel, "cycles_per_image")
                 else sum(c for _, _, c in netperf.op_cycles(kernel.net, kernel.tables)))
    n_in, n_out = kernel.in_words * 8, kernel.out_words * 8

    def run(regs, ports):
        b = regs["batch"]
        if hasattr(kernel, "run_words"):      # 64-bit words in and out (bfp_systolic's kernel)
            x = ports["gmem0"].read(regs["in"], b * n_in).view(np.uint64).reshape(b, kernel.in_words)
            ports["gmem1"].write(regs["out"], kernel.run_words(x).view(np.uint8).reshape(-1))
            return per_image * b
        lane = np.int8 if getattr(kernel, "lane_bits", 8) == 8 else np.int16     # hlsnn.engines.network.words
        x = ports["gmem0"].read(regs["in"], b * n_in).view(lane).reshape(b, -1)
        y = kernel.run(x[:, :kernel.tables["in_elems"]].astype(np.int64))
        out = np.zeros((b, n_out // np.dtype(lane).itemsize), lane)
        out[:, :y.shape[1]] = y
        ports["gmem1"].write(regs["out"], out.view(np.uint8).reshape(-1))
        return per_image * b

    spec = dict(width_bits=64, max_burst=64)
    _, offsets, m_axi = layout(getattr(getattr(kernel, "net", None), "engine", "shift_mac"))
    return MasterKernelModel(run, offsets, {m_axi["in"]: spec, m_axi["out"]: spec}, memory=memory)
