"""A lowered network as its integer ops (:class:`Op`, :class:`NetProgram`): what an engine's
lowering rules (``engines/<engine>/network/lower.py``) build and its network kernel renders;
:mod:`hlsnn.deploy.lower.program` walks a compiled model's layers into one."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...errors import InputError

#: host ops that change no value (an alias of their input), in every engine's network mode
ALIAS_OPS = ("Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze")


def pool_attrs_2d(a):
    """A pool's ONNX attributes ``a`` as a 2-D pool's: a 1-D pool is the (k, 1) pool of a
    C x L x 1 map (its strides, pads and dilations extended by the unit axis)."""
    if len(a["kernel_shape"]) != 1:
        return a
    p = list(a.get("pads", [0, 0]))
    return dict(a, kernel_shape=[a["kernel_shape"][0], 1], strides=[list(a.get("strides", [1]))[0], 1],
                pads=[p[0], 0, p[1], 0], dilations=list(a.get("dilations", [1])) + [1])


def materialized(j, name, state, shapes, why):
    """Whether the pending op ``name`` (an Add, a concat, a gate, a pool) was materialized already,
    as ``NAME_q``, for an earlier consumer: then engine layer ``j`` reads it if it wants the same
    radix point ``F_x``, and is refused by name if not."""
    base = name + "_q"
    if base not in shapes:
        return False
    if state[base][1] != j["f_x"]:
        raise why(j, f"two consumers of {name} requantize it to different radix points")
    return True


@dataclass
class Op:
    """One integer op: ``kind`` (``conv``, ``maxpool``, ``add``), its input and output
    tensors (names), and its fields (module rules 2-4)."""
    kind: str
    name: str
    ins: list
    out: str
    f: dict = field(default_factory=dict)


@dataclass
class NetProgram:
    """A lowered network: the ops, the tensors' shapes (per image, CHW or (K,)), the input's
    quantization, the output tensor and its radix, the host layers after it, the engine
    config's ``shift_mac`` parameters and its name."""
    name: str
    ops: list
    shapes: dict
    input: dict
    output: dict
    host_after: list
    params: dict
    accel: str
    aliases: dict
    engine: str = "shift_mac"
    #: host ops on the float input before the kernel (:mod:`hlsnn.deploy.lower.netprefix`), and
    #: the model's input they read (``name``, per-image ``shape``); ``input`` is the kernel's
    host_before: list = field(default_factory=list)
    source: dict = None


def _why(layer, what):
    return InputError(f"network kernel: layer {layer['name']} ({layer.get('op', layer['kind'])}): {what}; "
                      f"this network runs layer by layer (hlsnn.load(..., network=False))")


def _chw(shape):
    """A per-image shape as the (C, H, W) map the rules read: a rank-3 tensor's (C, L) is a
    ``C x L x 1`` map (a 1-D convolution's), a vector (K,) a ``K x 1 x 1`` one."""
    if len(shape) == 2:
        return (int(shape[0]), int(shape[1]), 1)
    return tuple(shape) if len(shape) == 3 else (int(np.prod(shape)), 1, 1)
