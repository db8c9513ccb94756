"""A causal convolution written as a padded convolution and a crop, as the conv's own padding.

locuslab's TCN (Bai et al.) and many WaveNet ports write a causal ``Conv1d`` as
``nn.Conv1d(c, z, k, padding=(k - 1) * d, dilation=d)`` followed by ``Chomp1d``,
``x[:, :, :-chomp].contiguous()``: both exporters write a ``Conv`` with pads ``[p, p]`` and a
``Slice`` (starts 0, ends ``-chomp``, axes 2, steps 1) of its output. At stride 1, dropping the
last ``c`` outputs of a convolution is the convolution with ``c`` less padding at the end (and
dropping the first ``s``, ``s`` less at the start): output ``j`` reads the same padded inputs
either way. :func:`rewrite` does this when the ``Slice`` is the conv's only reader, crops only
spatial axes of a stride-1 axis within its padding, and steps by 1; the ``Slice`` is dropped and
the conv writes its output. So the cropped conv is one engine layer, with no per-sample move
after it (a network kernel runs it in its one start). Anything else is left as it is.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex

_BIG = 2 ** 62          # an end at or beyond this is "to the end" (torch writes INT64_MAX)


def _ints(consts, name, default=None):
    if not name:
        return default
    v = consts.get(name)
    return None if v is None else [int(a) for a in np.asarray(v).reshape(-1)]


def rewrite(model):
    """``model`` with each such conv + crop as one conv (a copy), or ``model`` itself."""
    g = model.graph
    if not any(n.op_type == "Slice" for n in g.node):
        return model
    from onnx import helper
    consts, producer, readers, outputs = graphindex.index(g)
    plans = {}
    for n in g.node:
        if n.op_type != "Slice" or len(n.input) < 3:
            continue
        conv = producer.get(n.input[0])
        if conv is None or conv.op_type != "Conv" or n.input[0] in outputs or len(readers.get(n.input[0], [])) != 1:
            continue
        a = {x.name: helper.get_attribute_value(x) for x in conv.attribute}
        w = consts.get(conv.input[1]) if len(conv.input) > 1 else None
        if w is None or (a.get("auto_pad") or b"NOTSET") not in (b"NOTSET", "NOTSET"):
            continue
        nsp = np.ndim(w) - 2
        pads = list(a.get("pads") or [0] * 2 * nsp)
        strides = list(a.get("strides") or [1] * nsp)
        starts, ends = _ints(consts, n.input[1]), _ints(consts, n.input[2])
        axes = _ints(consts, n.input[3] if len(n.input) > 3 else "", list(range(len(starts or []))))
        steps = _ints(consts, n.input[4] if len(n.input) > 4 else "", [1] * len(starts or []))
        if None in (starts, ends, axes, steps) or not (len(starts) == len(ends) == len(axes) == len(steps)):
            continue
        ok = True
        for s, e, ax, st in zip(starts, ends, axes, steps):
            ax = ax + nsp + 2 if ax < 0 else ax
            i = ax - 2
            if st != 1 or not 0 <= i < nsp or strides[i] != 1 or s < 0 or s > pads[i] \
                    or not (e >= _BIG or -pads[nsp + i] <= e < 0):
                ok = False
                break
            pads[i] -= s
            if e < 0:
                pads[nsp + i] += e
        if ok:
            plans[id(conv)] = (pads, n)
    if not plans:
        return model
    m = graphindex.copied(model)
    drop = {id(sl) for _, sl in plans.values()}
    new = []
    for n, orig in zip(m.graph.node, g.node):
        if id(orig) in drop:
            continue
        if id(orig) in plans:
            pads, sl = plans[id(orig)]
            for x in n.attribute:
                if x.name == "pads":
                    graphindex.replace(x.ints, pads)
                    break
            else:
                n.attribute.append(helper.make_attribute("pads", pads))
            n.output[0] = sl.output[0]
        new.append(n)
    graphindex.replace(m.graph.node, new)
    return m
