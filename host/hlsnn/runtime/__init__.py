"""Accelerator: one config, one target (``emu``, ``csim``, ``sim`` or ``pynq``), the engine's operations."""
from __future__ import annotations

import functools
import threading

from ..config import Config, is_config_name, load_config
from ..engines import ENGINES
from ..formats._validate import check_options
from .make import TARGETS, make_target


def unknown_options(engine, name, fn, options, n_args=0):
    """An option the engine's operation does not take (``gemm(..., mode="twohot")`` on a
    ``bfp_systolic`` config) is an InputError naming the engine and the options it takes, not
    Python's TypeError about ``Kernel.gemm``."""
    if not options:
        return
    allowed = _keywords(getattr(fn, "__func__", fn), n_args)
    bad = [] if allowed is None else [k for k in options if k not in allowed]
    if bad:
        from ..errors import InputError
        raise InputError(f"{name}: engine {engine} does not take {', '.join(repr(k) for k in bad)}; its options: "
                         f"{', '.join(allowed)}")


@functools.lru_cache(maxsize=256)
def _keywords(fn, n_args):
    """The keyword options of a kernel operation after its ``n_args`` positional arguments (and
    ``self``), or None when it takes any (``**options``) or has no signature to read."""
    import inspect
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    skip = n_args + (1 if params and params[0].name == "self" else 0)
    return tuple(p.name for p in params[skip:] if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD))


class Accelerator:
    """An accelerator described by a config, running on a target.

    Parameters
    ----------
    config : str, Path, dict or Config
        A config name, a YAML path, an overlay folder, a parsed config (the YAML as a dict, validated
        like the file) or a :class:`~hlsnn.config.Config`.
    target : {"emu", "csim", "sim", "pynq"}
        ``emu``: the bit-exact numpy emulator. ``csim``: the generated C++ compiled with g++
        (cached) and called through its C ABI. ``sim``: the pynq code path on the simulated
        board. ``pynq``: an overlay on a board (pass the overlay folder as ``config``).
    **target_options
        Passed to the target, e.g. ``max_transfer_bytes`` (every target: the largest DMA
        transfer, to which operations are tiled; on ``pynq``/``sim`` at most the DMA's length
        register), ``timeout`` and ``strict_cache`` (``sim``/``pynq``).

    Notes
    -----
    The engine's operations are methods: for ``bfp_systolic``, :meth:`gemm` (float in, float
    out) and :meth:`gemm_bfp` (BFPTensor in and out). Use as a context manager or call
    :meth:`close` to release the target.

    **Threads.** Each Accelerator has its own kernel state: on ``csim`` and ``sim`` its own
    loaded copy of the C-simulation library (:class:`hlsnn.csim.CsimLibrary`), so two
    Accelerators of one config never see each other's resident weights. Operations on one
    Accelerator are serialized by its lock: threads may share it, and each call runs whole (a
    tiled operation's calls, a resident-weight call after its ``load_weights``); attributes that
    describe "the last call" (``kernel.last_stats``, ``target.last_timing``) then belong to
    whichever thread called last. ``docs/threads-and-safety.md`` has the details.
    """

    def __init__(self, config, target="emu", **target_options):
        from pathlib import Path
        import os
        from collections.abc import Mapping
        if not isinstance(config, (Config, Mapping, str, os.PathLike)):
            from ..errors import InputError, excerpt
            raise InputError(f"config = {excerpt(config, 60)}: must be a config name, a YAML path, an overlay "
                             "folder, a parsed config (dict) or a Config from hlsnn.load_config")
        if target == "pynq" and isinstance(config, (str, os.PathLike)) and not Path(config).exists() \
                and not str(config).endswith((".yaml", ".yml")) and not is_config_name(config):
            from ..errors import InputError
            raise InputError(f"{config}: no such overlay folder (target pynq runs an overlay: a folder with "
                             f"<name>.bit, <name>.hwh and <name>.json, which hlsnn build writes into overlays/)")
        if isinstance(config, (str, os.PathLike)) and (Path(config).is_dir() or str(config).endswith(".bit")):
            # an overlay folder (or its .bit): the config comes from its <name>.json
            from .pynq_target import config_from_manifest, overlay_files, read_manifest
            overlay = Path(config)
            _, _, js = overlay_files(overlay)
            config = config_from_manifest(read_manifest(js))
            target_options.setdefault("overlay", overlay)
        self.config = config if isinstance(config, Config) else load_config(config)
        self.engine = ENGINES[self.config.engine]
        self.target = make_target(target, self.config, self.engine, **target_options)
        self.kernel = self.engine.Kernel(self.config, self.target)
        #: held for the length of every operation (class docstring, *Threads*)
        self.lock = threading.RLock()

    def _op(self, name):
        def call(*args, **options):
            fn = self._kernel_op(name)
            unknown_options(self.config.engine, name, fn, options, len(args))
            return self._locked(fn)(*args, **check_options(options))
        return call

    def _locked(self, fn):
        @functools.wraps(fn)
        def call(*args, **kw):
            with self.lock:
                return fn(*args, **kw)
        return call

    def _kernel_op(self, name):
        if name not in self.kernel.OPERATIONS:
            raise AttributeError(f"engine {self.config.engine!r} has no operation {name!r}; "
                                 f"it offers {', '.join(self.kernel.OPERATIONS)}")
        return getattr(self.kernel, name)

    def gemm(self, x, w, bias=None, relu=False, **options):
        """Float GEMM ``relu(x @ w.T + bias)``: quantized per the config, run on the target,
        returned as float64 (see the engine's ``Kernel.gemm``)."""
        return self._op("gemm")(x, w, bias=bias, relu=relu, **options)

    def gemm_bfp(self, x, w, bias=None, relu=False, **options):
        """GEMM on BFPTensors, returning a BFPTensor (see the engine's ``Kernel.gemm_bfp``)."""
        return self._op("gemm_bfp")(x, w, bias=bias, relu=relu, **options)

    def gemm_int(self, x, weights, **options):
        """GEMM on integer activations and weight codes (``shift_mac``: ``Kernel.gemm_int``)."""
        return self._op("gemm_int")(x, weights, **options)

    def conv2d(self, x, w, bias=None, padding="same", relu=False, **options):
        """Float 2-D convolution, stride 1: ``x`` (C, H, W), ``w`` (Z, C, k, k) -> (Z, H', W')."""
        return self._op("conv2d")(x, w, bias=bias, padding=padding, relu=relu, **options)

    def conv2d_int(self, x, weights, **options):
        """Convolution on integer activations and weight codes (``Kernel.conv2d_int``)."""
        return self._op("conv2d_int")(x, weights, **options)

    def run_registers(self, x=None, regs=None, **options):
        """Stream raw weight-register lanes through the kernel (``shift_mac``)."""
        return self._op("run_registers")(x, regs, **options)

    def load_weights(self, weights, **options):
        """Keep a layer's weights on chip, so that later calls with them stream only their
        activations (the engine's ``Kernel.load_weights``; ``shift_mac``)."""
        fn = getattr(self.kernel, "load_weights", None)
        if fn is None:
            raise AttributeError(f"engine {self.config.engine!r} keeps no weights on chip (no load_weights)")
        return self._locked(fn)(weights, **options)

    def emulator(self):
        """An ``emu`` Accelerator of the same config and the same transfer limit
        (``target.max_transfer_bytes``): operations tile exactly as on this target, so its
        results are the bit-exact reference for this one's (``hlsnn run`` compares with it)."""
        return Accelerator(self.config, target="emu",
                           max_transfer_bytes=getattr(self.target, "max_transfer_bytes", None))

    @property
    def target_name(self):
        return self.target.name

    def close(self):
        with self.lock:
            self.target.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"Accelerator({self.config.name!r}, engine={self.config.engine!r}, target={self.target.name!r})"


__all__ = ["Accelerator", "TARGETS"]
