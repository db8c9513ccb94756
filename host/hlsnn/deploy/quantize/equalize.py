"""Skip concatenations of two scales, balanced by powers of two before a fixed-point calibration.

A U-Net's decoder conv reads ``Concat(skip, up)``: the encoder's skip (say at most 3) beside a
transposed convolution's output (say at most 24). In a fixed-point format the parts keep their
producers' radix points, but the Concat has one format only when they agree
(:func:`hlsnn.deploy.run.hostops.out_format`); otherwise the next conv requantizes the whole Concat at
one radix point, the larger part's, and the smaller part loses bits (BFP's block exponents keep
them).

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
with Q/DQ pairs is left as it is: its own radix points map exactly (:mod:`hlsnn.deploy.importer.qimport`).

With ``equalize: channels`` (a regression deployment's default, :mod:`hlsnn.deploy.quantize.task_formats`)
on every consumer, two rules widen (:func:`plan`'s ``wide``):

* a part may come from its producer through channel-wise linear host ops (:data:`WIDE_PASS`: the
  :data:`PASS` ops, ``AveragePool`` and a linear ``Resize``, all of which commute with a positive
  per-channel scale, exactly in float64 for a power of two), and the producer's output may be
  read elsewhere too, where every other path ends, through such ops, in convs (group 1, the
  same formats) that read that tensor alone: their weights are scaled by ``2**-k`` whole. A
  bilinear U-Net's encoder conv, read by the pool and by the skip, is such a producer;
* a part below the reference (``k`` before rounding positive: its range over its columns' range
  smaller) is scaled up by at least one bit (:data:`MIN_SHIFT_WIDE`), however small the gap: its
  consumers' columns then shrink, so no weight column grows and the channel's other columns keep
  their weight scale (one weight scale per output channel, ``weight_scale: channel``). A one-bit
  scale *down* (``k = -1``) grows columns and is not applied.
  The regression calibration's radix search and bias correction then adjust the rest.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from ..run.hostops import float_tensors

#: the formats whose activations are one radix point per tensor (sparse_cluster's)
FIXED_TYPES = ("fixed", "sparse")
#: the smallest scale applied, in bits: a part one bit apart would only trade an activation bit for a
#: weight bit
MIN_SHIFT = 2


#: host ops between a Concat and its convs that commute with a positive per-channel scale and keep
#: the channels where they are (a transposed conv's ZeroStuff, nearest Upsample, MaxPool, ReLU)
PASS = ("ZeroStuff", "Upsample", "MaxPool", "Relu", "Identity", "Dropout")
#: with ``equalize: channels``: the ops a part may pass between its producer and the Concat, and
#: between a producer and its other readers (linear per channel: a positive scale commutes)
WIDE_PASS = PASS + ("AveragePool", "ResizeLinear")
#: with ``equalize: channels``: the smallest scale applied, in bits
MIN_SHIFT_WIDE = 1


def _consumers(t, readers, net, passing=PASS, skip=None):
    """The convs reading tensor ``t`` directly or through ``passing`` ops, or None when
    another layer (other than ``skip``) reads it (or ``t`` is the network's output)."""
    if t == net.output or not readers.get(t):
        return None
    out = []
    for la in readers[t]:
        if skip is not None and la is skip:
            continue
        if la.kind == "conv" and la.inputs == [t]:
            out.append(la)
        elif la.kind == "host" and la.op in passing and la.inputs == [t]:
            more = _consumers(la.output, readers, net, passing, skip)
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
            from ..importer import qimport
            if net.path and qimport.layer_mapping(net, net.path):
                return {}                    # a QDQ file: its own radix points map exactly as imported
            env = float_tensors(net, x_cal)
        if any(env[t].ndim != 4 for t in cat.inputs):
            continue
        wide = all(getattr(formats[assignment.format_of(c.name)], "equalize", "none") == "channels" for c in cons)
        parts, c0 = [], 0
        for t in cat.inputs:
            n = env[t].shape[1]
            p, others = _part_producer(t, cat, producer, readers, net, wide)
            free = (p is not None and p.kind in ("conv", "dense") and others is not None
                    and all(o.group == 1 and o.name not in out
                            and formats[assignment.format_of(o.name)].type in FIXED_TYPES for o in others)
                    and p.output != net.output and p.name not in out)
            mx = float(np.abs(env[t]).max(initial=0.0))
            mw = max(float(np.abs(c.w[:, c0:c0 + n]).max(initial=0.0)) for c in cons)
            parts.append((p, c0, n, free, mx, mw, others))
            c0 += n
        if any(mx <= 0 or mw <= 0 for *_, mx, mw, _o in parts):
            continue
        fixed_parts = [q for q in parts if not q[3]]
        ref = fixed_parts[0] if fixed_parts else max(parts, key=lambda q: q[4])
        r_ref = ref[4] / ref[5]
        for p, c0, n, free, mx, mw, others in parts:
            if not free or p.name in out or any(isinstance(out.get(c.name), int) for c in cons + others):
                continue                # one scale per layer: a producer scaled already, or a consumer that is one
            raw = 0.5 * math.log2(r_ref / (mx / mw))
            k = int(round(raw))
            if wide and raw > 1e-9:
                k = max(k, MIN_SHIFT_WIDE)     # a part below the reference goes up by one bit at least
            if abs(k) >= MIN_SHIFT or (wide and k >= MIN_SHIFT_WIDE):
                out[p.name] = k
                for c in cons:
                    out.setdefault(c.name, []).append((c0, n, k))
                for o in others:                  # the producer's other readers: their whole weights
                    out.setdefault(o.name, []).append((0, int(o.w.shape[1]), k))
    return out


def _part_producer(t, cat, producer, readers, net, wide):
    """``(producer layer, its other readers)`` of Concat ``cat``'s part ``t``: the layer that
    writes ``t`` and no other reader (``[]``); with ``wide``, the layer found back from ``t``
    through :data:`WIDE_PASS` ops each read only on this path, and the convs that read its output
    on other paths (through :data:`WIDE_PASS` ops; None when something else reads it there)."""
    if not wide:
        p = producer.get(t)
        return p, ([] if len(readers.get(t, [])) == 1 and t != net.output else None)
    nxt = cat
    while True:
        if t == net.output or len(readers.get(t, [])) < 1:
            return None, None
        p = producer.get(t)
        if p is None:
            return None, None
        if p.kind == "host" and p.op in WIDE_PASS and len(p.inputs) == 1 and len(readers.get(t, [])) == 1:
            nxt, t = p, p.inputs[0]
            continue
        if p.kind not in ("conv", "dense"):
            return p, None
        if len(readers.get(t, [])) == 1:
            return p, []
        others = _consumers(t, readers, net, WIDE_PASS, skip=nxt)
        return p, others


def balance(net, x_cal, assignment, formats):
    """The network with its skip Concats balanced (module docstring): a new
    :class:`~hlsnn.deploy.importer.graph.Network` sharing the unchanged layers, or ``net`` itself when
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
