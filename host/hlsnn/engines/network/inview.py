"""The kernel's input read by its first conv as another map (rule input_view: flat features into
``x.unsqueeze(1)`` and a ``Conv1d``, a ``(64,)`` input read as ``1 x 64``).

The network kernels keep a tensor in channel banks (channel ``c`` in bank ``c % Q``, its ``H x W``
pixels at consecutive words), so the input's per-image shape decides where the image load writes
each value. A view (:func:`hlsnn.deploy.run.hostops.alias_shape`) changes no value and no NCHW
order, so where the first reader of the kernel's input is a conv reading it through a view, the
kernel's input takes that view's shape (``net.input["shape"]`` and ``net.shapes``). Later readers
read it in that shape; one that reads it as yet another map is refused by name. Not with host ops
on the float input before the kernel (:mod:`hlsnn.deploy.lower.netprefix`) or after the logits
that read it."""
from __future__ import annotations

import math


def take(j, src, own, w, program):
    """Whether the conv ``j``, reading ``src`` as the map ``own`` (its view's ``(C, H, W)``), is
    the first reader of the kernel's input, whose shape then becomes ``own`` (module docstring;
    recorded in ``w.input_view`` for :func:`attach`)."""
    t = w.aliases.get(src, src)
    if t != w.kernel_in or t != program["input"]["name"] or getattr(w, "prefix", None):
        return False
    if any(w.aliases.get(i, i) == t for op in w.ops for i in op.ins):
        return False
    after = set(program["output"].get("host_after", []))
    if any(t in la["inputs"] for la in program["layers"] if la["name"] in after):
        return False
    if math.prod(int(d) for d in w.shapes[t]) != math.prod(int(d) for d in own):
        return False
    w.shapes[t] = tuple(int(d) for d in own)
    w.input_view = w.shapes[t]
    return True


def attach(net, w):
    """``net`` with the kernel input's shape the view :func:`take` chose, if any."""
    view = getattr(w, "input_view", None)
    if view is not None:
        net.input = dict(net.input, shape=view)
        net.shapes[net.input["name"]] = view
    return net
