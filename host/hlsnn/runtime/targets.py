"""Targets move an engine's stream beats and registers through one implementation of the
kernel: the emulator (``emu``), or the C-simulated C++ (``csim``). Every target has the same
``run(beats, regs_in, n_out_beats) -> (beats_out, regs_out)``; the engine's protocol module
packs and unpacks beats the same way for all of them. A target with a DMA input buffer
(``pynq``, ``sim``) also has ``input_buffer(nbytes)``: a writable ``uint8`` view of that buffer
the engine packs the next call's beats into, so ``run`` copies nothing; the others have none
and the beats go into a new array."""
from __future__ import annotations

import numpy as np


def kernel_cycles(target, cfg, log):
    """The modelled cycles of the kernel calls in ``log`` (:func:`hlsnn.perf.calls.kernel_cycles`; None
    where a call carried no loop counters): ``target.kernel_cycles``, which an engine
    Kernel's measured operations read (:mod:`hlsnn.engines.instrument`)."""
    from ..perf.calls import kernel_cycles as model
    return model(cfg, log)


class EmuTarget:
    """The bit-exact numpy emulator, behind the same stream interface as the hardware."""

    name = "emu"
    kernel_cycles = kernel_cycles

    def __init__(self, cfg, engine, *, max_transfer_bytes=None, arrays=True):
        self.cfg, self.engine = cfg, engine
        #: True: the GEMM engines call the emulator on their operand arrays and skip the stream
        #: protocol (pack -> beats -> unpack), which only csim, sim and the board need; False:
        #: every call goes through ``run`` (the beats), as the tests that hold the two equal do
        self.arrays = bool(arrays)
        #: bytes one call's input or output may take (None: unlimited); the engines tile
        #: larger operations (``engines.tiling``) exactly as on a board's DMA
        self.max_transfer_bytes = _limit(max_transfer_bytes)
        #: what the emulated kernel keeps on chip between calls, for an engine whose Kernel sets
        #: ``EMULATOR_STATE`` (shift_mac: its weight store, for resident weights)
        self.state = {}

    def run(self, beats, regs_in, n_out_beats):
        emulate = self.engine.Kernel.emulate_stream
        if getattr(self.engine.Kernel, "EMULATOR_STATE", False):
            out, regs_out = emulate(self.cfg, beats, regs_in, state=self.state)
        else:
            out, regs_out = emulate(self.cfg, beats, regs_in)
        if out.shape[0] != n_out_beats:  # pragma: no cover - protocol self-check
            raise AssertionError(f"emulator produced {out.shape[0]} beats, protocol expects {n_out_beats}")
        return out, regs_out

    def close(self):
        pass


class CsimTarget:
    """The rendered kernel compiled with g++ and called through ctypes."""

    name = "csim"
    kernel_cycles = kernel_cycles

    def __init__(self, cfg, engine, *, build_dir=None, rendered=None, verbose=False, max_transfer_bytes=None,
                 include_dirs=(), progress=False):
        from .. import codegen, csim      # only csim needs Jinja2 and a compiler: the board path does not
        self.cfg, self.engine = cfg, engine
        self.max_transfer_bytes = _limit(max_transfer_bytes)
        # a project the caller already rendered is not rendered (nor its testbench vectors emulated) again
        self.rendered = rendered if rendered is not None else codegen.render(cfg, build_dir)
        # include_dirs: extra header folders searched first (e.g. a model of ap_axi_sdata.h)
        self.library_path = csim.compile_library(self.rendered, verbose=verbose, include_dirs=include_dirs,
                                                 progress=progress)
        self.lib = csim.CsimLibrary(self.library_path, len(engine.protocol.REGS_IN),
                                    len(engine.protocol.REGS_OUT))

    def run(self, beats, regs_in, n_out_beats):
        from ..perf.calls import log_call
        out = self.lib.run(beats, regs_in, n_out_beats)
        log_call(self, self.lib.last_counts, np.size(beats) // (self.lib.stream_bits // 8), n_out_beats)
        return out

    def close(self):
        pass


def _limit(value):
    """``max_transfer_bytes`` checked: None or a positive integer."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        from ..errors import InputError
        raise InputError(f"max_transfer_bytes = {value!r}: must be a positive integer (bytes) or None (unlimited)")
    return int(value)


