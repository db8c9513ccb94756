"""The targets by name (:data:`TARGETS`) and :func:`make_target`: ``emu`` and ``csim``
(:mod:`.targets`), ``sim`` (:mod:`.sim_target`) and ``pynq`` (:mod:`.pynq_target`)."""
from __future__ import annotations

from .targets import CsimTarget, EmuTarget


def _pynq_target(cfg, engine, *, overlay=None, **kw):
    from ..errors import InputError
    from .pynq_target import PynqTarget
    if overlay is None:
        raise InputError(f"target 'pynq' runs an overlay, not config {cfg.name}: give the overlay folder that hlsnn "
                         f"build makes (overlays/{cfg.name}: hlsnn run/compare overlays/{cfg.name} --target pynq, or "
                         f"hlsnn.Accelerator('overlays/{cfg.name}', target='pynq')); without a board, target sim "
                         f"runs the same code on the simulated one")
    return PynqTarget(cfg, engine, overlay=overlay, **kw)


def _sim_target(cfg, engine, **kw):
    from .sim_target import SimTarget
    return SimTarget(cfg, engine, **kw)


TARGETS = {"emu": EmuTarget, "csim": CsimTarget, "sim": _sim_target, "pynq": _pynq_target}


def make_target(name, cfg, engine, **kw):
    from ..errors import InputError
    if name not in TARGETS:
        raise InputError(f"target = {name!r}: must be one of {', '.join(TARGETS)}")
    return TARGETS[name](cfg, engine, **kw)
