"""The ``sim`` target: the pynq target's very code path on the simulated PYNQ device.

For a config, a *sim overlay* is prepared under ``build/<name>/sim_overlay/<name>/``: the
``.hwh`` the build flow renders (the block design of ``bd.tcl``: same IP names, VLNVs,
addresses, registers and stream links), a placeholder ``.bit`` and the ``.json`` manifest.
The simulated device (:mod:`hlsnn.runtime.sim`) parses that ``.hwh`` with pynq's own
parser, models the AXI DMA behind the unmodified ``pynq.lib.dma.DMA`` driver, and serves the
kernel with the C-simulation library of that very kernel — so the register map, the DMA
protocol and TLAST handling run end to end. A real overlay folder (with a Vivado ``.hwh``)
works the same way.
"""
from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path

import numpy as np

from .. import codegen, csim, regmap
from ..files import write_atomic
from ..paths import build_dir
from .pynq_target import PynqTarget

#: pynq has one active device per process (``pynq.Device.active_device``), which a sim
#: target switches to its own for each call: calls of all sim targets of a process take turns.
_DEVICE_LOCK = threading.RLock()


def prepare_sim_overlay(cfg, engine, out_dir=None, instances=1) -> Path:
    """Write ``<name>.hwh``, a placeholder ``<name>.bit`` and ``<name>.json`` for ``cfg``; with
    ``instances`` > 1 the block design holds that many kernel instances, each with its DMA
    (under ``sim_overlay/<name>_x<instances>/`` by default)."""
    from ..blockdesign.hwh import render_hwh
    d = Path(out_dir) if out_dir else build_dir(cfg) / "sim_overlay" / (
        cfg.name if instances == 1 else f"{cfg.name}_x{instances}")
    d.mkdir(parents=True, exist_ok=True)
    render_hwh(cfg, d / f"{cfg.name}.hwh", instances=instances)
    if instances > 1:             # the Vivado block design the .hwh describes (hls/tcl/bd.tcl.j2)
        from ..blockdesign.instances import instances_context
        codegen.render_extra(cfg, "bd.tcl.j2", d / "bd.tcl", instances_context(cfg, instances))
    bit = d / f"{cfg.name}.bit"
    if not bit.exists():
        bit.write_bytes(b"hlsnn simulated overlay: no bitstream\n")
    manifest = {"name": cfg.name, "engine": cfg.engine, "config": cfg.as_dict(), "config_sha256": cfg.sha,
                "config_hash32": cfg.hash32, "simulated": True, "instances": int(instances),
                "register_map": regmap.predicted_register_map(engine.protocol.REGS_IN, engine.protocol.REGS_OUT)}
    write_atomic(d / f"{cfg.name}.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return d


def csim_kernel_model(cfg, engine, lib):
    """A StreamKernelModel function that runs the kernel's C-simulation library on the beats
    the DMA delivered, with the register values the host wrote."""
    offsets = regmap.predicted_register_map(engine.protocol.REGS_IN, engine.protocol.REGS_OUT)
    in_offsets = [offsets[n] for n in engine.protocol.REGS_IN]
    out_offsets = [offsets[n] for n in engine.protocol.REGS_OUT]

    def fn(beats_in, regs):
        regs_in = [int(regs.get(off, 0)) & 0xFFFFFFFF for off in in_offsets]
        cap = max(4 * len(beats_in), 4096)
        while True:
            out, regs_out, last, status = lib.run_stream(beats_in, regs_in, cap)
            if len(out) < cap:
                break
            cap *= 4                       # the kernel may have written more: run again, larger
        values = dict(zip(out_offsets, regs_out.tolist()))
        return out, values, last
    return fn


class SimBoard:
    """One simulated PYNQ board whose overlay holds ``instances`` kernel instances of ``cfg``
    (:func:`prepare_sim_overlay`), each served by its own copy of the kernel's C-simulation
    library; ``SimTarget(cfg, engine, board=b, instance=i)`` drives instance ``i`` through its
    own DMA. The first target made downloads the overlay; :meth:`close` after the targets'."""

    def __init__(self, cfg, engine, instances, *, strict_cache=False, verbose=False):
        from .sim import SimDevice, StreamKernelModel
        from ..blockdesign.hwh import instance_names
        self.cfg, self.instances = cfg, int(instances)
        path = csim.compile_library(codegen.render(cfg), verbose=verbose)
        self.libs = [csim.CsimLibrary(path, len(engine.protocol.REGS_IN), len(engine.protocol.REGS_OUT))
                     for _ in range(self.instances)]
        self.overlay = prepare_sim_overlay(cfg, engine, instances=self.instances)
        self.sim = SimDevice(strict_cache=strict_cache)
        for i, lib in enumerate(self.libs):          # every model before the download builds them
            self.sim.add_model(instance_names(cfg, i)[1], StreamKernelModel(csim_kernel_model(cfg, engine, lib)))
        self.shared = None                            # the pynq.Overlay, once a target made it

    def close(self):
        with _DEVICE_LOCK:
            if self.sim.installed:
                self.sim.uninstall()


class SimTarget(PynqTarget):
    """``target="sim"``: pass a config (a sim overlay is prepared) or an overlay folder; or a
    :class:`SimBoard` and the ``instance`` of it to drive."""

    name = "sim"

    def __init__(self, cfg, engine, *, overlay=None, strict_cache=False, timeout=10.0, verbose=False,
                 max_transfer_bytes=None, board=None, instance=0):
        from .sim import SimDevice, StreamKernelModel
        from ..errors import seconds
        seconds("timeout", timeout)              # the caller's option, refused before the kernel's compile
        self.board = board
        if board is not None:
            self.library_path, self.lib, self.sim = None, board.libs[instance], board.sim
            with _DEVICE_LOCK:
                with self._active():
                    super().__init__(cfg, engine, overlay=board.overlay, device=self.sim, timeout=timeout,
                                     max_transfer_bytes=max_transfer_bytes, instance=instance, shared=board.shared)
                board.shared = board.shared or self.overlay
            return
        if overlay:                              # as an overlay built from another config
            from .pynq_target import overlay_manifest
            overlay_manifest(overlay, cfg)
        rendered = codegen.render(cfg)
        self.library_path = csim.compile_library(rendered, verbose=verbose)
        lib = self.lib = csim.CsimLibrary(self.library_path, len(engine.protocol.REGS_IN),
                                          len(engine.protocol.REGS_OUT))
        overlay = Path(overlay) if overlay else prepare_sim_overlay(cfg, engine)
        self.sim = SimDevice(strict_cache=strict_cache)
        self.sim.add_model(cfg.name, StreamKernelModel(csim_kernel_model(cfg, engine, lib)))
        with _DEVICE_LOCK:
            self.sim.install()
            try:
                super().__init__(cfg, engine, overlay=overlay, device=self.sim, timeout=timeout,
                                 max_transfer_bytes=max_transfer_bytes)
            except BaseException:
                self.sim.uninstall()
                raise

    @contextlib.contextmanager
    def _active(self):
        """A context in which this target's simulated device is pynq's active device: several
        sim targets may be open at once (e.g. one per format of a deployment, or in several
        threads), and ``pynq.allocate`` and the DMA driver work on the active device. Holds
        :data:`_DEVICE_LOCK` throughout."""
        with _DEVICE_LOCK:
            if self.sim.installed:
                yield
            else:
                with self.sim:
                    yield

    def input_buffer(self, nbytes):
        if self._in is not None and self._in.nbytes >= nbytes:     # no allocation: no device needed
            return self._in_np[:nbytes]
        with self._active():
            return super().input_buffer(nbytes)

    def run(self, beats, regs_in, n_out_beats):
        """As the pynq target; ``last_timing`` also gains the kernel's modelled time from the
        C-simulation's loop counters (``kernel_cycles`` and ``kernel_model_s`` at the config's
        clock; :mod:`hlsnn.perf`), which the operation's ``last_cycles`` sums over calls."""
        from ..perf.calls import call_cycles, log_call
        with self._active():
            out = super().run(beats, regs_in, n_out_beats)
        counts = self.lib.last_counts
        call = None if counts is None else call_cycles(self.cfg, counts)
        log_call(self, counts, np.size(beats) // self._beat, n_out_beats, call)
        if call is not None:
            self.last_timing["kernel_cycles"] = call.cycles
            self.last_timing["kernel_model_s"] = call.cycles / (self.cfg.clock_mhz * 1e6)
        return out

    def close(self):
        sim = getattr(self, "sim", None)
        if sim is None:
            return super().close()
        if getattr(self, "board", None) is not None:       # the board's device: SimBoard.close
            with _DEVICE_LOCK, self._active():
                return super().close()
        with _DEVICE_LOCK:
            try:
                with self._active():
                    super().close()
            finally:
                if sim.installed:
                    sim.uninstall()
                else:       # another device was installed after this one: leave it active
                    sim._install_stack.clear()


def sim_target(cfg, engine, **kw):
    return SimTarget(cfg, engine, **kw)


__all__ = ["SimTarget", "SimBoard", "prepare_sim_overlay", "csim_kernel_model", "np"]
