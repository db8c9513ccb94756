"""One unary function from elementwise ops that all start from one tensor: ``x *
g(x)`` and the like, as ``torch.onnx``'s opset-17 GELU writes it (``Div`` by sqrt 2, ``Erf``,
``Add`` 1, ``Mul`` by ``x``, ``Mul`` by 1/2), its tanh GELU (``x * x * x``, ``Add`` of ``x``,
``Tanh``, ...) or a decomposed Mish (``x * tanh(softplus(x))``), becomes ONE host layer
``UnaryChain``: ``attrs["nodes"]``, in order, each ``{"op", "attrs", "args"}`` with ``args``
indices of earlier values (0: ``x``, ``i``: node ``i - 1``'s output); a node is a unary table
op (:func:`hlsnn.engines.network.tables.key`) of one value, or ``Mul`` / ``Add`` of two; the
last node is the function's value.

In float64 it computes exactly what the layers it replaces computed (:func:`run`: the same ops
on the same operands in the same order), so nothing changes where it runs on the host; where
its input is a fixed-point tensor (or a BFP layer's output) and an engine layer follows, it is
one table of rule unary_table (:mod:`hlsnn.engines.network.tables`): one rounding instead of one per
op, and no product of two tensors in the network mode.

A region is fused where a ``Mul`` or ``Add`` of two tensors has one source tensor ``x`` through
such ops only, every tensor inside is read only inside (and is not the network's output), and
it has three ops or more with the unary ops after it (``ThresholdedRelu`` aside: a step, no
slope bound): ``x * sigmoid(x)`` (SiLU) and ``x * hardsigmoid(x)`` stay a ``Mul`` of two tensors.
A ``Relu`` may be one of the unary ops before the region's last ``Mul`` or ``Add`` (not after it:
a Relu there stays the clamp it is): an onnxruntime QDQ file's GELU, whose ``1 + erf(x / sqrt 2)``
is quantized to uint8 with zero point 0, imports with a ``Relu`` for that clamp
(:mod:`hlsnn.deploy.importer.qimport`) between the ``Add`` 1 and the ``Mul`` by ``x``; its table's value is
``max(v, 0)`` (exact, slope 1).
"""
from __future__ import annotations

from types import SimpleNamespace

from ..importer.graph import Layer

#: the ops of two values a region holds (elementwise, of one shape: both are functions of ``x``)
BINARY = ("Mul", "Add")


def _unary(layer, inside=False):
    """A unary table op a region may hold; ``inside`` (before the region's last ``Mul`` / ``Add``):
    a ``Relu`` too (module docstring)."""
    from ...engines.network import tables
    if inside and layer is not None and layer.kind == "host" and layer.op == "Relu" and len(layer.inputs) == 1:
        return True
    return (layer is not None and layer.kind == "host" and len(layer.inputs) == 1 and layer.op != "ThresholdedRelu"
            and layer.op in tables.OPS and layer.op != "UnaryChain" and tables.key(layer.op, layer.attrs) is not None)


def _binary(layer):
    return (layer is not None and layer.kind == "host" and layer.op in BINARY and len(layer.inputs) == 2
            and not layer.attrs)


def _region(m, produced, single):
    """``(x, members)`` of the region ending at ``m`` (module docstring), or None."""
    members, leaves, todo = {}, set(), list(m.inputs)
    while todo:
        t = todo.pop()
        la = produced.get(t)
        if la is not None and la.name in members:
            continue
        if (_unary(la, inside=True) or _binary(la)) and single(t):
            members[la.name] = la
            todo.extend(la.inputs)
        else:
            leaves.add(t)
    if len(leaves) != 1:
        return None
    return leaves.pop(), members


def fuse(layers, output):
    """``layers`` (in order) with every fusable region (module docstring) as one ``UnaryChain``
    layer named after its last ``Mul`` or ``Add``, placed where its last op was."""
    produced = {la.output: la for la in layers}
    order = {la.name: k for k, la in enumerate(layers)}
    readers = {}
    for la in layers:
        for t in la.inputs:
            readers.setdefault(t, []).append(la)

    def single(t):
        return t != output and len(readers.get(t, ())) == 1

    drop, put = set(), {}
    for m in reversed(layers):
        if not _binary(m) or m.name in drop:
            continue
        found = _region(m, produced, single)
        if found is None:
            continue
        x, members = found
        if any(n in drop for n in members):
            continue
        post, t = [], m.output
        while single(t) and _unary(readers[t][0]) and readers[t][0].name not in drop:
            post.append(readers[t][0])
            t = post[-1].output
        body = sorted(members.values(), key=lambda la: order[la.name]) + [m] + post
        if len(body) < 3:
            continue
        index = {x: 0}
        nodes = []
        for la in body:
            nodes.append({"op": la.op, "attrs": dict(la.attrs), "args": [index[i] for i in la.inputs]})
            index[la.output] = len(nodes)
        put[body[-1].name] = Layer(m.name, "host", [x], body[-1].output, op="UnaryChain", attrs={"nodes": nodes})
        drop.update(la.name for la in body)
    return [put[la.name] if la.name in put else la for la in layers if la.name in put or la.name not in drop]


def run(layer, inputs, host_run):
    """``UnaryChain`` in float64: the replaced ops in their order (``host_run(spec, inputs)``)."""
    vals = [inputs[0]]
    for nd in layer.attrs["nodes"]:
        args = [vals[i] for i in nd["args"]]
        vals.append(host_run(SimpleNamespace(op=nd["op"], attrs=nd["attrs"]), args))
    return vals[-1]
