"""One unary function from an elementwise product of a tensor and a chain of unary ops of it
(issue 52): ``x * g(x)`` followed by unary ops, as ``torch.onnx``'s opset-17 GELU writes it
(``Div`` by sqrt 2, ``Erf``, ``Add`` 1, ``Mul`` by ``x``, ``Mul`` by 1/2) or a decomposed Mish
(``x * tanh(softplus(x))``), becomes ONE host layer ``UnaryChain`` with ``attrs`` ``pre`` (the
chain ``g``, in order) and ``post`` (the ops after the product): ``f(x) = post(x * pre(x))``.

In float64 it computes exactly what the layers it replaces computed (:func:`run`: the same ops
in the same order), so nothing changes where it runs on the host; where its input is a
fixed-point tensor (or a BFP layer's output) and an engine layer follows, it is one table of
rule 9 (:mod:`hlsnn.engines.network.tables`): one rounding instead of one per op, and no
product of two tensors in the network mode.

A chain is fused when every op in it is a unary table op (:func:`hlsnn.engines.network.tables.key`,
``ThresholdedRelu`` aside: a step, no slope bound), every tensor inside is read only by the next
op (and is not the network's output), and it has two ops or more before the product or one
after it: ``x * sigmoid(x)`` (SiLU) and ``x * hardsigmoid(x)`` stay a ``Mul`` of two tensors.
"""
from __future__ import annotations

from types import SimpleNamespace

from .graph import Layer


def _fusable(layer):
    from ..engines.network import tables
    return (layer is not None and layer.kind == "host" and len(layer.inputs) == 1 and layer.op != "ThresholdedRelu"
            and layer.op in tables.OPS and tables.key(layer.op, layer.attrs) is not None)


def fuse(layers, output):
    """``layers`` (in order) with every fusable ``x * g(x)`` region (module docstring) as one
    ``UnaryChain`` layer named after its ``Mul``, placed where its last op was."""
    produced = {la.output: la for la in layers}
    readers = {}
    for la in layers:
        for t in la.inputs:
            readers.setdefault(t, []).append(la)

    def single(t):
        return t != output and len(readers.get(t, ())) == 1

    drop, put = set(), {}
    for m in layers:
        if m.kind != "host" or m.op != "Mul" or len(m.inputs) != 2 or m.inputs[0] == m.inputs[1] or m.name in drop:
            continue
        for r, b in (m.inputs, m.inputs[::-1]):
            chain, t = [], b
            while t != r:
                la = produced.get(t)
                if not _fusable(la) or not single(t) or la.name in drop:
                    break
                chain.insert(0, la)
                t = la.inputs[0]
            if t == r and chain:
                break
        else:
            continue
        post, t = [], m.output
        while single(t) and _fusable(readers[t][0]) and readers[t][0].name not in drop:
            post.append(readers[t][0])
            t = post[-1].output
        if len(chain) < 2 and not post:
            continue
        last = (post or [m])[-1]
        spec = lambda la: {"op": la.op, "attrs": dict(la.attrs)}      # noqa: E731
        put[last.name] = Layer(m.name, "host", [r], last.output, op="UnaryChain",
                               attrs={"pre": [spec(la) for la in chain], "post": [spec(la) for la in post]})
        drop.update(la.name for la in chain + [m] + post)
    return [put[la.name] if la.name in put else la for la in layers if la.name in put or la.name not in drop]


def run(layer, inputs, host_run):
    """``UnaryChain`` in float64: the replaced ops in their order (``host_run(spec, inputs)``)."""
    x = inputs[0]
    g = x
    for s in layer.attrs["pre"]:
        g = host_run(SimpleNamespace(op=s["op"], attrs=s["attrs"]), [g])
    y = x * g
    for s in layer.attrs["post"]:
        y = host_run(SimpleNamespace(op=s["op"], attrs=s["attrs"]), [y])
    return y
