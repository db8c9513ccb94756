"""A ``BatchNormalization`` (and a ``Relu``) after a channel ``Concat`` of engine layers, folded
into those layers (InceptionTime's ``relu(bn(cat([conv3(b), conv5(b),
conv7(b), conv1(maxpool(x))])))``, every branch a conv without bias).

The importer folds a ``BatchNormalization`` into the dense or conv layer that makes its input
(:mod:`hlsnn.deploy.importer.onnx_import`). After a ``Concat`` on channels the normalization's channels
are the branches' output channels, in order: channel ``k`` of the concat is output ``k - o``
of the branch whose channels start at ``o``. So each branch's slice of ``s = gamma / sqrt(var +
eps)``, ``mean`` and ``beta`` folds into that branch as the importer folds a normalization into
one layer (``w' = w * s``, ``b' = (b - mean) * s + beta``, per output channel), and the concat
then reads the normalized outputs: the same float function. A ``Relu`` that alone reads the
normalized concat commutes with the concat (``relu(cat(a, b)) = cat(relu(a), relu(b))``) and is
fused into every branch as the importer fuses a ``Relu`` into one layer. Then the network has no
host op between the branches and the layers that read them, and runs on the network path where
its layers are on one engine (a host ``BatchNormalization`` has no integer rule there).

:func:`fold` applies where every concat input is made by an engine layer (dense or conv, not
token-wise, no ReLU of its own) that only the concat reads, the concat only by the
normalization (and that only by the ``Relu``), none of them the network's output, and the
parameters have one value per concat channel; the graph is left as it was otherwise.
"""
from __future__ import annotations

import numpy as np


def _readers(layers, t):
    return [la for la in layers if t in la.inputs]


def fold(layers, output):
    """``layers`` with each normalization (and its ``Relu``) after a channel concat of engine
    layers folded into those layers (module docstring); the others unchanged, in order."""
    made = {la.output: la for la in layers}
    drop = set()
    for bn in layers:
        if bn.kind != "host" or bn.op != "BatchNormalization" or bn.output == output:
            continue
        cat = made.get(bn.inputs[0])
        if cat is None or cat.kind != "host" or cat.op != "Concat" or cat.attrs.get("axis") != 1 \
                or cat.output == output or _readers(layers, cat.output) != [bn]:
            continue
        parts = [made.get(t) for t in cat.inputs]
        if any(p is None or not p.is_engine or p.relu or "rows" in p.attrs or p.output == output
               or _readers(layers, p.output) != [cat] for p in parts) or len({id(p) for p in parts}) != len(parts):
            continue
        gamma, beta, mean, var = (np.asarray(v, np.float64).reshape(-1) for v in bn.attrs["params"])
        if len(gamma) != sum(p.w.shape[0] for p in parts):
            continue
        s = gamma / np.sqrt(var + bn.attrs.get("epsilon", 1e-5))
        relu = [la for la in _readers(layers, bn.output) if la.kind == "host" and la.op == "Relu"]
        relu = relu[0] if relu and _readers(layers, bn.output) == relu and bn.output != output \
            and relu[0].output != output else None
        o = 0
        for p in parts:
            z = p.w.shape[0]
            sl = slice(o, o + z)
            p.w = p.w * s[sl].reshape((-1,) + (1,) * (p.w.ndim - 1))
            p.b = (p.b - mean[sl]) * s[sl] + beta[sl]
            p.folded.append(f"{bn.name} (channels {o}..{o + z - 1})")
            if relu is not None:
                p.relu = True
                p.folded.append(f"{relu.name} (its channels)")
            o += z
        cat.output = (relu or bn).output
        drop.add(id(bn))
        if relu is not None:
            drop.add(id(relu))
    return [la for la in layers if id(la) not in drop]
