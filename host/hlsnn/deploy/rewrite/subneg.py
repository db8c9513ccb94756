"""A residual subtraction ``x - net(x)`` rewritten as an addition of the negated last layer.

A pre-pass of the importer (:func:`rewrite`, called by :func:`hlsnn.deploy.importer.onnx_import.load_onnx`
after :mod:`hlsnn.deploy.rewrite.splitconv`; a model without the pattern passes unchanged). DnCNN-style
denoisers (``return x - self.net(x)``) export a ``Sub`` of two computed tensors, for which hlsnn has
no engine or host rule, while a residual ``Add`` is an engine layer (and an integer rule of the
network mode). ``Sub(a, b)`` where ``b`` is the only output of a ``Conv``, ``ConvTranspose``,
``Gemm`` or ``MatMul`` with weights (and bias) that are initializers that only this ``Sub`` reads becomes
``Add(a, b')`` with ``b'`` that layer with its weights and bias negated. Negating a float is exact
and a sum of negated products is the negated sum, so ``b' == -b`` bit for bit and ``Add`` and
``Sub`` broadcast alike: the same tensor by ONNX's definitions (tested against onnxruntime on files
torch wrote). The quantized formats then quantize the negated weights, as they would any layer's.
A ``Sub`` of other computed operands (``net(x) - x``, a subtrahend read elsewhere too, computed
weights) is left as it is, and the importer names it as unsupported.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex

#: The layers whose output is negated by negating their constant inputs: input index -> its role.
_LINEAR = {"Conv": (1, 2), "ConvTranspose": (1, 2), "Gemm": (1, 2), "MatMul": (1,)}


def _negatable(node, consts, readers):
    """True when ``node``'s output is linear in its constant inputs :data:`_LINEAR` names (all of
    them constant, the output read by one node)."""
    if node is None or node.op_type not in _LINEAR or len(node.output) != 1:
        return False
    if len(readers.get(node.output[0], ())) != 1:
        return False
    idx = [i for i in _LINEAR[node.op_type] if i < len(node.input) and node.input[i]]
    if node.op_type == "Gemm" and len(idx) == 2:
        return all(node.input[i] in consts for i in idx)
    return bool(idx) and all(node.input[i] in consts for i in idx) and idx[0] == 1


def rewrite(model):
    """``model`` with each such ``Sub`` rewritten (a copy), or ``model`` itself without one."""
    g = model.graph
    if not any(n.op_type == "Sub" for n in g.node):
        return model
    consts = {t.name for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for i in n.input:
            readers.setdefault(i, []).append(n)
    for o in g.output:
        readers.setdefault(o.name, []).append(None)
    todo = [k for k, n in enumerate(g.node) if n.op_type == "Sub" and len(n.input) == 2
            and n.input[0] not in consts and _negatable(producer.get(n.input[1]), consts, readers)]
    if not todo:
        return model
    from onnx import numpy_helper
    m, fresh = graphindex.copy_fresh(model)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    for sub in [g.node[k] for k in todo]:
        layer = producer[sub.input[1]]
        for i in _LINEAR[layer.op_type]:
            if i >= len(layer.input) or not layer.input[i]:
                continue
            name = layer.input[i]
            value = numpy_helper.to_array(inits[name])
            new = fresh(f"{name}__neg")
            g.initializer.append(numpy_helper.from_array(np.negative(value), new))
            layer.input[i] = new
        sub.op_type = "Add"
    return m
