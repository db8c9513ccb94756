"""Skip concatenations of two scales, balanced by powers of two before a fixed-point calibration.

A U-Net's decoder conv reads ``Concat(skip, up)``: the encoder's skip (say at most 3) beside a
transposed convolution's output (say at most 24). In a fixed-point format the parts keep their
producers' radix points, but the Concat has one format only when they agree
(:func:`hlsnn.deploy.hostops.out_format`); otherwise the next conv requantizes the whole Concat at
one radix point, the larger part's, and the smaller part loses bits (here three: unet_ct2 of
``scripts/variant_family.py`` at 4.19 % relative error in fixed8, 1.38 % in bfp8, whose block
exponents keep it).

:func:`balance` rewrites the network in float, exactly (ReLU commutes with a positive scale, and
multiplying by a power of two is exact in float64): a part whose producer is an engine layer read
by this Concat alone is scaled by ``2**k`` (the producer's weights and bias), and the consumers'
weight columns of that part by ``2**-k``; the float network computes the same values. ``k`` is
chosen on the calibration images as data-free quantization's cross-layer equalization does
(Nagel et al., ICCV 2019, with powers of two): the part's range over its weight columns' range is
brought to the reference part's (the first part that cannot be scaled, else the largest), the
bits moving half from the activations to the weights: ``k = round(log2(r_ref / r_part) / 2)``,
``r = max|x| / max|w|``, when ``|k|`` is at least :data:`MIN_SHIFT`. Only Concats of channels (axis 1) all of whose readers are convs (directly or through
:data:`PASS` ops: a transposed conv's ``ZeroStuff``, nearest ``Upsample``, ``MaxPool``) in a
``fixed`` or ``sparse`` format take part; every engine then runs the rewritten network as any
other (emu, csim and the board agree bit for bit; the network mode lowers it unchanged). A file
with Q/DQ pairs is left as it is: its own radix points map exactly (:mod:`hlsnn.deploy.qimport`).
"""
from __future__ import annotations

import copy
import math

import numpy as np

from .hostops import float_tensors

#: the formats whose activations are one radix point per tensor (sparse_cluster's)
FIXED_TYPES = ("fixed", "sparse")
#: the smallest scale applied, in bits: a part one bit apart would only trade an activation bit for a
#: weight bit (measured: v_unet_mix 1.96 % -> 2.08 % at one bit, unchanged at two)
MIN_SHIFT = 2


#: host ops between a Concat and its convs that commute with a positive per-channel scale and keep
#: the channels where they are (a transposed conv's ZeroStuff, nearest Upsample, MaxPool, ReLU)
PASS = ("ZeroStuff", "Upsample", "MaxPool", "Relu", "Identity", "Dropout")


def _consumers(t, readers, net):
    """The convs reading tensor ``t`` directly or through :data:`PASS` ops, or None when
    another layer reads it (or ``t`` is the network's output)."""
    if t == net.output or not readers.get(t):
        return None
    out = []
    for la in readers[t]:
        if la.kind == "conv" and la.inputs == [t]:
            out.append(la)
        elif la.kind == "host" and la.op in PASS and la.inputs == [t]:
            more = _consumers(la.output, readers, net)
            if more is None:
                return None
            out += more
        else:
            return None
    return out


def plan(net, x_cal, assignment, formats):
    """``{producer name: k, consumer name: [(first column, columns, k), ...]}`` of the scales
    :func:`balance` applies (empty: nothing to balance)."""
    producer = {la.output: la for la in net.layers}
    readers = {}
    for la in net.layers:
        for t in la.inputs:
            readers.setdefault(t, []).append(la)
    cats = [la for la in net.layers if la.kind == "host" and la.op == "Concat" and len(la.inputs) > 1
            and la.attrs.get("axis", 1) == 1]
    if not cats:
        return {}
    env = None
    out = {}
    for cat in cats:
        cons = _consumers(cat.output, readers, net)
        if not cons or any(c.group != 1 or formats[assignment.format_of(c.name)].type not in FIXED_TYPES
                           for c in cons):
            continue
        if env is None:
            from . import qimport
            if net.path and qimport.layer_mapping(net, net.path):
                return {}                    # a QDQ file: its own radix points map exactly as imported
            env = float_tensors(net, x_cal)
        if any(env[t].ndim != 4 for t in cat.inputs):
            continue
        parts, c0 = [], 0
        for t in cat.inputs:
            n = env[t].shape[1]
            p = producer.get(t)
            free = (p is not None and p.kind in ("conv", "dense") and len(readers.get(t, [])) == 1
                    and t != net.output and p.name not in out)
            mx = float(np.abs(env[t]).max(initial=0.0))
            mw = max(float(np.abs(c.w[:, c0:c0 + n]).max(initial=0.0)) for c in cons)
            parts.append((p, c0, n, free, mx, mw))
            c0 += n
        if any(mx <= 0 or mw <= 0 for *_, mx, mw in parts):
            continue
        fixed_parts = [q for q in parts if not q[3]]
        ref = fixed_parts[0] if fixed_parts else max(parts, key=lambda q: q[4])
        r_ref = ref[4] / ref[5]
        for p, c0, n, free, mx, mw in parts:
            if not free:
                continue
            k = int(round(0.5 * math.log2(r_ref / (mx / mw))))
            if abs(k) >= MIN_SHIFT:
                out[p.name] = k
                for c in cons:
                    out.setdefault(c.name, []).append((c0, n, k))
    return out


def balance(net, x_cal, assignment, formats):
    """The network with its skip Concats balanced (module docstring): a new
    :class:`~hlsnn.deploy.graph.Network` sharing the unchanged layers, or ``net`` itself when
    there is nothing to balance. Returns ``(network, plan)``."""
    scales = plan(net, x_cal, assignment, formats)
    if not scales:
        return net, scales
    layers = []
    for la in net.layers:
        s = scales.get(la.name)
        if s is None:
            layers.append(la)
            continue
        la = copy.copy(la)
        if isinstance(s, int):
            la.w, la.b = np.ldexp(la.w, s), np.ldexp(la.b, s)
        else:
            w = np.array(la.w, np.float64)
            for c0, n, k in s:
                w[:, c0:c0 + n] = np.ldexp(w[:, c0:c0 + n], -k)
            la.w = w
        layers.append(la)
    new = copy.copy(net)
    new.layers = layers
    return new, scales
