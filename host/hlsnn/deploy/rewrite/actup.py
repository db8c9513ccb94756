"""An elementwise activation after a nearest upsample, moved before it (``act(up(conv(x)))``).

A decoder written as ``nn.Upsample(scale_factor=2)`` then ``nn.ReLU6()`` / ``nn.Hardtanh()`` / ``nn.ELU()``
/ ``nn.SiLU()`` ... (the activation after the upsample rather than after the conv) ran layer by layer on
the network path: a ``Clip`` is a conv's output clamp only when it reads the conv (rule conv_output of
:mod:`hlsnn.deploy.lower.program`; two-hot, fixed8), and a BFP table (netbfp rule bfp_table) reads a BFP layer's
output (bfp8).

A nearest upsample (host ``Upsample``: ``np.repeat`` of each pixel by integer factors on H and W)
only copies values, so any function ``f`` applied to each element commutes with it:
``f(up(x)) == up(f(x))`` element by element, bit for bit, whatever ``f`` computes in float64 (the
same calls on the same values). :func:`rewrite` (after the importer built the layers) swaps the
two when the upsample's output is read by the activation alone and is not the network's output:
the activation reads the upsample's input, the upsample reads the activation's output and writes
the tensor the activation wrote, so every reader sees the same values. The activations: the
unary ops of rule unary_table's tables with their conditions (:func:`hlsnn.engines.network.tables.key`),
``Clip``, and ``PRelu`` / ``Scale`` / ``AddConst`` whose constant does not vary along an
upsampled axis (one value per channel at most). Then each is where the network mode has a rule
for it (after the conv), in every path: the layer path computes the same values (the function of
the same elements, then their copies), so its outputs are unchanged except where a calibrated
radix reads the activation's values (rule unary_table's table radix, netbfp bfp_table's code radix): every value
is repeated ``fh * fw`` times before and once after, the same proportions, so DETERMINE's choice
(a fraction of the values) is the same.
"""
from __future__ import annotations

import numpy as np

#: elementwise ops with per-channel constants allowed (the constant's attribute)
PER_CHANNEL = {"PRelu": "slope", "Scale": "c", "AddConst": "c"}


def _constant_along(v, factors):
    """Whether the constant ``v`` (broadcast against an N x C x H x W tensor) is the same along
    every axis of ``factors`` (H, W) whose factor is above 1."""
    a = np.asarray(v)
    if a.size <= 1:
        return True
    if a.ndim > 4:
        return False
    shape = (1,) * (4 - a.ndim) + a.shape
    return all(shape[2 + i] == 1 for i, f in enumerate(factors) if int(f) > 1)


def movable(layer, factors):
    """Whether host ``layer`` is an elementwise activation of one tensor that commutes with a
    nearest upsample by ``factors`` (module docstring)."""
    from ...engines.network import tables
    if layer.kind != "host" or len(layer.inputs) != 1:
        return False
    if layer.op == "Clip":
        return True
    if layer.op in PER_CHANNEL:
        return _constant_along(layer.attrs.get(PER_CHANNEL[layer.op]), factors)
    return layer.op in tables.OPS and tables.key(layer.op, layer.attrs) is not None


def rewrite(layers, output):
    """``layers`` with each activation read from a nearest ``Upsample`` moved before it (module
    docstring); the layers' order is kept (the activation where the upsample was)."""
    readers = {}
    for la in layers:
        for t in la.inputs:
            readers.setdefault(t, []).append(la)
    by_output = {la.output: i for i, la in enumerate(layers)}
    out = list(layers)
    for i, up in enumerate(layers):
        if up.kind != "host" or up.op != "Upsample" or up.output == output:
            continue
        users = readers.get(up.output, [])
        if len(users) != 1 or not movable(users[0], up.attrs.get("factors", ())):
            continue
        act = users[0]
        j = by_output[act.output]
        src, mid, final = up.inputs[0], up.output, act.output
        act.inputs, act.output = [src], mid         # act(src) into the tensor the upsample wrote
        up.inputs, up.output = [mid], final          # and its copies into the activation's tensor
        out[i], out[j] = act, up
    return out
