"""ECA-Net's channel attention: a ``Conv1d`` across the pooled channels, as the 1x1 conv it is.

ECA (Wang et al., 2020) writes ``y = self.conv(self.avg_pool(x).squeeze(-1).transpose(-1, -2))
.transpose(-1, -2).unsqueeze(-1)``: the (N, C, 1, 1) pooled vector moved to (N, 1, C), a
``Conv1d(1, 1, k, padding=(k - 1) // 2)`` along the channels, and moved back. A convolution of a
length-C sequence with one input and one output channel is a linear map of the C values: the
banded matrix ``T`` whose column j is the convolution of the unit vector ``e_j`` (plus the bias on
every output). :func:`rewrite` replaces the moves and the ``Conv1d`` by one 1x1 ``Conv`` of the
pooled (N, C, 1, 1) tensor with the weight ``T`` (exact: the same products, zeros elsewhere), so
the gate is an SE block's (a 1x1 conv of a global pool, a sigmoid, a product), which the network
mode takes. It applies when the moves (``Squeeze``/``Unsqueeze``/``Transpose``/``Reshape``, each
the only reader of the last) take channel c of the pooled tensor to position c of the conv's
input and position c of its output back to channel c (checked by running them on indices, with
the per-sample shapes of :mod:`hlsnn.deploy.rewrite.shapefold`); anything else is left as it is.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex

_MOVES = ("Squeeze", "Unsqueeze", "Transpose", "Reshape")


def _back(t, producer, readers, outputs):
    """The moves that make ``t`` (each read only by the next), from the first: (source, nodes)."""
    nodes = []
    while True:
        n = producer.get(t)
        if n is None or n.op_type not in _MOVES or len(readers.get(t, [])) != 1 or t in outputs:
            break
        nodes.insert(0, n)
        t = n.input[0]
    return t, nodes


def _forward(t, readers, outputs):
    nodes = []
    while len(readers.get(t, [])) == 1 and t not in outputs and readers[t][0].op_type in _MOVES \
            and readers[t][0].input[0] == t:
        nodes.append(readers[t][0])
        t = nodes[-1].output[0]
    return t, nodes


def rewrite(model, fs):
    """``model`` with each ECA conv as a 1x1 conv of the pooled tensor (a copy), or ``model``."""
    g = model.graph
    if fs is None or not any(n.op_type == "Conv" for n in g.node):
        return model
    from onnx import helper, numpy_helper
    from onnx.reference import ReferenceEvaluator
    consts, producer, readers, outputs = graphindex.index(g)
    plans, drop = {}, set()
    for n in g.node:
        if n.op_type != "Conv" or len(n.input) < 2 or n.input[1] not in consts:
            continue
        w = np.asarray(consts[n.input[1]])
        if w.shape[:2] != (1, 1) or w.ndim != 3:
            continue
        src, back = _back(n.input[0], producer, readers, outputs)
        dst, fwd = _forward(n.output[0], readers, outputs)
        ps, xs, ys, qs = fs.get(src), fs.get(n.input[0]), fs.get(n.output[0]), fs.get(dst)
        if not back or not fwd or None in (ps, xs, ys, qs) or len(ps) != 4 or tuple(ps[2:]) != (1, 1) \
                or ps[0] != 1 or len(qs) != 4 or tuple(qs[2:]) != (1, 1) or qs[0] != 1 \
                or tuple(xs[:2]) != (1, 1) or tuple(ys[:2]) != (1, 1):
            continue
        c, z = ps[1], qs[1]
        a = graphindex.run_moves(back, tuple(ps), fs)
        b = graphindex.run_moves(fwd, tuple(ys), fs)
        if a is None or b is None or not np.array_equal(a.reshape(-1), np.arange(c)) \
                or not np.array_equal(b.reshape(-1), np.arange(z)) or xs[2] != c or ys[2] != z:
            continue
        try:                                        # T's columns: the conv of each unit vector
            probe = helper.make_node("Conv", [n.input[0], n.input[1]], [n.output[0]], name="probe")
            probe.attribute.extend(n.attribute)
            cols = ReferenceEvaluator(probe).run(None, {n.input[0]: np.eye(c, dtype=np.float64).reshape(c, 1, c),
                                                        n.input[1]: w.astype(np.float64)})[0]
        except Exception:  # noqa: BLE001 - an attribute the reference cannot take: left as it is
            continue
        if cols.shape != (c, 1, z):
            continue
        t = cols[:, 0, :].T                         # (z, c): output i = sum_j T[i, j] x_j
        bias = None
        if len(n.input) > 2 and n.input[2]:
            if n.input[2] not in consts:
                continue
            bias = np.full(z, float(np.asarray(consts[n.input[2]]).reshape(-1)[0]))
        plans[id(n)] = (src, dst, t, bias)
        drop.update(id(k) for k in back + fwd)
    if not plans:
        return model
    m, fresh = graphindex.copy_fresh(model)
    kept = []
    for n, orig in zip(m.graph.node, g.node):
        if id(orig) in drop:
            continue
        if id(orig) in plans:
            src, dst, t, bias = plans[id(orig)]
            base = n.name or n.output[0]
            ins = [src, fresh(f"{base}/eca_w")]
            m.graph.initializer.append(numpy_helper.from_array(t.reshape(t.shape + (1, 1)).astype(np.float32), ins[1]))
            fs[ins[1]] = t.shape + (1, 1)
            if bias is not None:
                ins.append(fresh(f"{base}/eca_b"))
                m.graph.initializer.append(numpy_helper.from_array(bias.astype(np.float32), ins[2]))
                fs[ins[2]] = bias.shape
            n = helper.make_node("Conv", ins, [dst], name=base, kernel_shape=[1, 1])
        kept.append(n)
    graphindex.replace(m.graph.node, kept)
    return m
