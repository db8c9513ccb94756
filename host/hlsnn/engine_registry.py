"""The engines' registry: what :mod:`hlsnn.config` needs of an engine to read its config
section (its schema, ``validate`` and ``estimate``).

Each engine package registers itself when it is imported (the ``register`` call at the end of
its ``spec.py``); ``import hlsnn`` imports every engine through the runtime, so the registry is
full before any config is read. :mod:`hlsnn.config` reads this registry and imports no engine,
so imports flow one way: ``config`` <- ``engines`` <- ``runtime``. The engine-neutral network
layer finds an engine's network parts the same way (:func:`network_part`).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Dict, Mapping


@dataclass(frozen=True)
class EngineSpec:
    """An engine as the config loader sees it."""
    name: str
    schema: Mapping[str, Any]      #: its config section's fields (hlsnn.config.Field)
    validate: Callable             #: validate(params, board, source) -> params
    estimate: Callable             #: estimate(cfg) -> {"resources": ..., "notes": ...}


_ENGINES: Dict[str, EngineSpec] = {}


def register(name: str, schema, validate, estimate) -> None:
    """Register (or re-register, on a module reload) the engine ``name``."""
    _ENGINES[name] = EngineSpec(name, schema, validate, estimate)


def engines() -> Dict[str, EngineSpec]:
    """The registered engines by name, in registration order."""
    return dict(_ENGINES)


def network_part(engine: str, part: str):
    """The module ``part`` (``lower``, ``kernel``, ``perf``, ...) of ``engine``'s network mode,
    ``hlsnn/engines/<engine>/network/<part>.py``: how the engine-neutral network layer
    (:mod:`hlsnn.network`) reaches an engine, without importing the engines."""
    if engine not in _ENGINES:
        from .errors import InputError
        raise InputError(f"engine {engine!r}: not an engine of this hlsnn; the engines are {', '.join(_ENGINES)}")
    return importlib.import_module(f"hlsnn.engines.{engine}.network.{part}")
