"""Grouped and depthwise convolutions on the GEMM engines: one GEMM per pack of
groups, the pack size the cycle model finds fastest (:func:`hlsnn.measure.layers.group_pack`)."""
from __future__ import annotations

import numpy as np

from ...engines import convgeom as conv
from ...engines.tiling import chunks


def gemm_weight(layer, gp=1):
    """A dense layer's (N, K) weight, or a conv layer's flattened to (Z, gp*C/g*kh*kw): row z
    holds output z's weights over the input channels of its pack of ``gp`` groups (zero
    outside its own group): a grouped layer runs as one GEMM per pack (:func:`group_parts`)."""
    if layer.kind == "dense" or layer.group == 1:
        return layer.w.reshape(layer.w.shape[0], -1)
    z = layer.w.shape[0]
    zp = z // (layer.group // gp)
    return np.concatenate([conv.dense_weight(layer.w[a:a + zp], gp) for a in range(0, z, zp)]).reshape(z, -1)


def pack_of(layer, acc, fmt_type):
    """Groups per GEMM of a grouped conv layer (:func:`hlsnn.measure.layers.group_pack`, at the
    layer's input size when the network declares it, else 16 x 16)."""
    if layer.kind != "conv" or layer.group == 1:
        return 1
    from ...measure.layers import group_pack
    return group_pack(layer, acc.config, fmt_type=fmt_type, in_hw=getattr(layer, "in_hw", None) or (16, 16))


def group_parts(chans, zg, step):
    """Chunks ``(a, b)`` of positions in the output-channel indices ``chans`` (ascending) of at
    most ``step`` outputs that never straddle two groups of ``zg`` outputs: each chunk is one
    GEMM over its group's input channels."""
    grp = np.asarray(chans) // zg
    parts, start = [], 0
    for end in list(np.flatnonzero(np.diff(grp)) + 1) + [len(grp)]:
        parts += [(start + a, start + b) for a, b in chunks(end - start, step)]
        start = end
    return parts
