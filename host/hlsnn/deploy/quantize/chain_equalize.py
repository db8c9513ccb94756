"""Per-channel power-of-two cross-layer equalization of conv -> ReLU -> conv chains before a
fixed-point calibration (a ``fixed`` / ``sparse`` format's ``equalize: channels``).

After a ReLU, sparse_cluster keeps each map as int8 at one radix point per tensor; when the
channels' ranges differ widely, the radix that keeps the largest
channel gives the small ones few bits. :func:`apply` rewrites the network in float, exactly
(ReLU commutes with a positive scale; a power of two is exact in float64), as data-free
quantization's cross-layer equalization does (Nagel et al., ICCV 2019) with powers of two and
per channel: output channel ``c`` of a producer conv with a fused ReLU is scaled by ``2**k[c]``
(its weight row and bias), and column ``c`` of every reader's weights by ``2**-k[c]``, with

    ``r[c] = max|y[:, c]| / max|w_reader[:, c]|`` (the calibration images' float values),
    ``k[c] = min(round(log2(max r / r[c]) / 2), MAX_SHIFT)`` (``>= 0``),

half of each channel's range gap moved from the activations into the weights. A producer takes
part when it is a conv (group 1) with a ReLU whose output is read only by convs (group 1,
directly), not the network's output, all of them in such a format. The float network computes
the same values; every engine then runs the rewritten network as any other (emu, csim and the
board agree bit for bit; the network mode lowers it unchanged). The producer's rows now differ
by up to ``2**MAX_SHIFT``: it wants one weight scale per output channel (``weight_scale:
channel``, or ``auto``'s rule), and the chain is best with ``radix: search``
(:mod:`hlsnn.deploy.quantize.radix_search`) and ``bias_correction: empirical``.
"""
from __future__ import annotations

import copy

import numpy as np

from ..run.hostops import float_tensors

#: the formats whose activations are one radix point per tensor (sparse_cluster's)
FIXED_TYPES = ("fixed", "sparse")
#: the largest scale applied to one channel, in bits
MAX_SHIFT = 8


def _fmt(formats, assignment, layer):
    return formats[assignment.format_of(layer.name)]


def plan(net, x_cal, assignment, formats):
    """``{producer name: k}``, ``k`` (Z,) int the bits each output channel is scaled by (empty:
    nothing to equalize). The ranges are the original network's: a reader's columns scaled
    back by its producer leave its outputs, so the chains' scales do not interact."""
    def wanted(la):
        f = formats[assignment.format_of(la.name)]
        return la.kind == "conv" and la.group == 1 and f.type in FIXED_TYPES \
            and getattr(f, "equalize", "none") == "channels"
    env = None
    out = {}
    for la in net.layers:
        rd = _readers(net, la.output)
        if not (wanted(la) and la.relu and la.output != net.output and rd
                and all(wanted(r) and r.inputs == [la.output] for r in rd)):
            continue
        if env is None:
            env = float_tensors(net, x_cal)
        y = env[la.output]
        if y.ndim != 4:
            continue
        am = np.abs(y).max(axis=(0, 2, 3))
        wm = np.max([np.abs(r.w).max(axis=(0, 2, 3)) for r in rd], axis=0)
        ok = (am > 0) & (wm > 0)
        if not ok.any():
            continue
        ratio = np.where(ok, am / np.where(ok, wm, 1.0), 0.0)
        k = np.zeros(len(am), np.int64)
        k[ok] = np.minimum(np.rint(0.5 * np.log2(ratio.max() / ratio[ok])), MAX_SHIFT).astype(np.int64)
        if k.any():
            out[la.name] = k
    return out


def _readers(net, t):
    return [la for la in net.layers if t in la.inputs]


def apply(net, x_cal, assignment, formats):
    """The network with its chains equalized (module docstring): a new
    :class:`~hlsnn.deploy.importer.graph.Network` sharing the unchanged layers, or ``net`` itself when
    there is nothing to do. Returns ``(network, {producer name: k})``."""
    rows = plan(net, x_cal, assignment, formats)
    if not rows:
        return net, rows
    cols = {r.name: rows[la.name] for la in net.layers if la.name in rows for r in _readers(net, la.output)}
    layers = []
    for la in net.layers:
        if la.name not in rows and la.name not in cols:
            layers.append(la)
            continue
        la = copy.copy(la)
        w = np.array(la.w, np.float64)
        if la.name in rows:
            k = rows[la.name]
            w = np.ldexp(w, k[:, None, None, None])
            la.b = None if la.b is None else np.ldexp(np.asarray(la.b, np.float64), k)
        if la.name in cols:
            w = np.ldexp(w, -cols[la.name][None, :, None, None])
        la.w = w
        layers.append(la)
    new = copy.copy(net)
    new.layers = layers
    return new, rows
