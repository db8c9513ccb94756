"""The targets by name (:data:`TARGETS`) and :func:`make_target`: ``emu`` and ``csim``
(:mod:`.targets`), ``sim`` (:mod:`.sim_target`) and ``pynq`` (:mod:`.pynq_target`)."""
from __future__ import annotations

from .targets import CsimTarget, EmuTarget


def _pynq_target(cfg, engine, *, overlay=None, **kw):
    from ..errors import InputError
    from .pynq_target import PynqTarget
    if overlay is None:
        raise InputError("target 'pynq' runs an overlay: pass the overlay folder, e.g. "
                         "hlsnn.Accelerator('overlays/<name>', target='pynq') (hlsnn build makes it)")
    return PynqTarget(cfg, engine, overlay=overlay, **kw)


def _sim_target(cfg, engine, **kw):
    from .sim_target import SimTarget
    return SimTarget(cfg, engine, **kw)


TARGETS = {"emu": EmuTarget, "csim": CsimTarget, "sim": _sim_target, "pynq": _pynq_target}


def make_target(name, cfg, engine, **kw):
    from ..errors import InputError
    if name not in TARGETS:
        hint = ""
        raise InputError(f"target = {name!r}: must be one of {', '.join(TARGETS)}{hint}")
    return TARGETS[name](cfg, engine, **kw)
