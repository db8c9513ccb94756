"""The engine layers whose output is the network's output (:mod:`hlsnn.deploy.quantize.outfit` refits
them, :mod:`hlsnn.deploy.quantize.twoin` reads their input finer)."""
from __future__ import annotations

#: host ops that only reshape (the network's output reached through them is the layer's)
SHAPE_OPS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")
#: elementwise monotone host activations after an output layer (a U-Net's ``Tanh`` / ``Sigmoid`` head):
#: the layer's own float output is still the target its output is fitted to
HEAD_OPS = ("Tanh", "Sigmoid")


def output_layers(net):
    """The engine layers whose output is ``net``'s output, directly or through host layers of
    :data:`SHAPE_OPS` and :data:`HEAD_OPS` that each read one tensor (a pix2pix U-Net's ``Tanh``
    head)."""
    by_out = {la.output: la for la in net.layers}
    out, seen = [], set()
    stack = [net.output]
    while stack:
        t = stack.pop()
        la = by_out.get(t)
        if la is None or la.name in seen:
            continue
        seen.add(la.name)
        if la.kind in ("conv", "dense"):
            out.append(la)
        elif la.kind == "host" and getattr(la, "op", None) in SHAPE_OPS + HEAD_OPS and len(la.inputs) == 1:
            stack.append(la.inputs[0])
    return out
