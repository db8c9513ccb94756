"""A host ``MaxPool`` (or a global max pool) as the network mode's maxpool op's fields (rule 3 of
:mod:`hlsnn.deploy.lower.program`), shared by the lowering's walk, the input pool
(:mod:`hlsnn.engines.network.pools.inputpool`) and the pool of a gate's product
(:mod:`hlsnn.engines.network.pools.gatepool`)."""
from __future__ import annotations

from ...engines.network.program import _chw, _why, pool_attrs_2d


def maxpool_fields(j, shape):
    """A host ``MaxPool`` layer ``j`` on a ``(C, H, W)`` tensor as a maxpool op's fields (rule
    3), or :class:`InputError` for what no network kernel runs (dilation). A ``ceil_mode``
    pool is the pool with more bottom/right padding (the windows' overhang, which never wins
    a max), its output size as :func:`hlsnn.deploy.run.pooling._pool` computes it."""
    a = pool_attrs_2d(j["attrs"])
    if any(d != 1 for d in a.get("dilations", [1, 1])):
        raise _why(j, "a dilated MaxPool")
    c, h, w = _chw(shape)
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    t, l, b, r = a.get("pads", [0, 0, 0, 0])
    oh, ow = (h + t + b - kh) // sh + 1, (w + l + r - kw) // sw + 1
    if a.get("ceil_mode", 0):
        oh, ow = (-(-(h + t + b - kh) // sh) + 1, -(-(w + l + r - kw) // sw) + 1)
        oh, ow = oh - ((oh - 1) * sh >= h + t), ow - ((ow - 1) * sw >= w + l)   # no window starts in the end pad
        b, r = max(b, (oh - 1) * sh + kh - h - t), max(r, (ow - 1) * sw + kw - w - l)
    return dict(c=c, h=h, w=w, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=(t, l, b, r))


def global_max_fields(shape):
    """A ``GlobalMaxPool`` of a ``(C, H, W)`` tensor as a maxpool op's fields (rule 3: one
    ``H x W`` window)."""
    c, h, w = _chw(shape)
    return dict(c=c, h=h, w=w, oh=1, ow=1, kh=h, kw=w, sh=1, sw=1, pads=(0, 0, 0, 0))
