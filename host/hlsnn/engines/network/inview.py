"""The kernel's input read by its first conv as another map (rule 1v; issue 52's sixth family:
flat features into ``x.unsqueeze(1)`` and a ``Conv1d``, a ``(64,)`` input read as ``1 x 64``).

A conv reads its own view of its input (an ``Unsqueeze``'s, a ``Reshape``'s: the same values in
NCHW order, :func:`hlsnn.deploy.run.hostops.alias_shape`). The network kernels keep a tensor in
channel banks (channel ``c`` in bank ``c % Q``, its ``H x W`` pixels at consecutive words), so
the input's per-image shape decides where the image load writes each value: a ``(64,)`` input is
64 channels of one pixel, which a conv reading ``1 x 64`` (one channel of 64 pixels) would read
past (its C-simulation read beyond the buffer before the network mode refused it by name).

The image's words are the input's values in NCHW order whatever its shape (the host reshapes the
batch to ``(B,) + shape``; rule 1 quantizes each value alone), and a view changes no value and no
order. So where the first op that reads the kernel's input is a conv reading it through such a
view, the kernel's input takes that view's shape (``net.input["shape"]`` and its tensor's
``net.shapes`` entry): the image load writes one channel of 64 pixels, which the conv reads as it
wants. The emulator's network mode reads the same integers (its ops reshape every input to the
shape they read). Later readers read the input in that shape; one that reads it as yet another
map is refused by name as before. Not with host ops on the float input before the kernel
(:mod:`hlsnn.deploy.lower.netprefix`) or after the logits that read it (their shapes are the model's).
"""
from __future__ import annotations


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
    if int(_prod(w.shapes[t])) != int(_prod(own)):
        return False
    w.shapes[t] = tuple(int(d) for d in own)
    w.input_view = w.shapes[t]
    return True


def _prod(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def attach(net, w):
    """``net`` with the kernel input's shape the view :func:`take` chose, if any."""
    view = getattr(w, "input_view", None)
    if view is not None:
        net.input = dict(net.input, shape=view)
        net.shapes[net.input["name"]] = view
    return net
