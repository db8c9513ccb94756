"""A ``ReduceMean`` over a whole length or token axis in the network mode (issue 52): the host
op ``ReduceAxes`` (:mod:`hlsnn.deploy.hostextra`; ``x.mean(dim=1)`` of an (N, T, F) token
tensor, ``x.mean(-1)`` of an (N, C, L) one) lowered to the global average pool every engine's
network mode has (:mod:`hlsnn.deploy.program` rule 4 with no second operand; the
``bfp_systolic`` mode's rule 6), where its axes are a map's pixels:

* a tensor held as a ``C x H x W`` map (``(C, L)``: ``C x L x 1``), the mean over all its axes
  after the channels: that map's global pool;
* ``(T, F)`` rows made by a ``MapToRows`` of an ``F x T x 1`` map (a token-wise ``Linear``'s
  output, :mod:`hlsnn.engines.network.transpose`), the mean over the tokens ``T``: the global
  pool of that map (the mean over a row's tokens is the mean of the map channel's pixels);
  the transpose is dropped when nothing else reads its rows.

The layer path computes ``np.mean`` in float64 of values that are exact (``b``-bit integers at
a radix point, or BFP pairs): every partial sum is exact while the rule's bound holds (rule 4's
``Fm + p <= F_x + 24``; bfp rule 6's ``2**53``), and the division by ``2**p`` is exact, so it is
the rule's value, and the consumer converts it as the pool's requantization does: the same bits.
A count that is not a power of two is rule 13's mean (:mod:`.mean`: the exact quotient rounded
once, which the layer path's float64 mean gives too where :func:`.mean.plan` proves it) on the
integer engines, and refused by name on BFP pairs; a mean over other axes (part of the pixels)
or of rows not made by a transpose is refused by name; a ``ReduceMean`` or ``ReduceMax`` over the
channels of a map (CBAM's spatial attention, layer path only) is refused by name, before any
other host rule sees it.
"""
from __future__ import annotations

import numpy as np

from .mean import count_fields


def lower_host(j, program, w, steps, why):
    """Lower host layer ``j`` if it is a ``ReduceMean`` of a fabric tensor (module docstring):
    its output a pending global pool (state ``("add", {...})``, as ``GlobalAveragePool``'s);
    True if it was."""
    a = j.get("attrs", {})
    if j["op"] == "ReduceAxes" and len(w.shapes.get(j["inputs"][0], ())) == 3 and \
            {int(v) % 4 for v in a.get("axes", ())} == {1}:
        raise why(j, f"a {a.get('fn')} over the channels of a C x H x W map (CBAM's spatial attention: the "
                     f"channel mean and max, a 7x7 conv, a 1 x H x W gate over C) has no integer rule on the "
                     f"network path yet")
    if j["op"] != "ReduceAxes" or a.get("fn") != "ReduceMean":
        return False
    from .program import _chw
    state, shapes, aliases = w.state, w.shapes, w.aliases
    src = j["inputs"][0]
    st = state.get(src)
    if st is None or st[0] != "q":
        raise why(j, "a ReduceMean of an integer tensor computed on the fabric (not of a pending Add, pool or gate)")
    shape = tuple(int(d) for d in shapes[src])
    axes = sorted({int(v) % (len(shape) + 1) - 1 for v in a["axes"]})      # per image
    phys = aliases.get(src, src)
    if axes == list(range(1, len(shape))) and len(shape) >= 2:
        pool, (_, h, wd) = steps.pool_source(src, w), _chw(shape)           # the map's own pixels
        drop = None
    elif len(shape) == 2 and axes == [0]:
        made = [op for op in w.ops if op.out == phys and op.kind == "transpose"]
        if not made:
            raise why(j, f"a mean over the tokens of rows {shape} made by a MapToRows of a map (a token-wise "
                         f"Linear's output) is supported")
        t = made[0]
        pool, h, wd = steps.pool_source(t.ins[0], w), t.f["s"], 1          # the map's T pixels
        readers = sum(phys in la["inputs"] for la in program["layers"])
        drop = t if phys == src and readers == 1 else None
    else:
        raise why(j, f"a ReduceMean over axes {list(a['axes'])} of a per-image {shape} tensor: over all axes after "
                     f"the channels, or over the tokens of (T, F) rows, is supported")
    n = h * wd
    if drop is not None:
        w.ops.remove(drop)
    state[j["output"]] = ("add", dict(ins=[pool], fa=st[1], fb=st[1], relu=False, name=j["name"],
                                      **count_fields(n)))             # p, or rule 13's division
    shapes[j["output"]] = np.zeros((1,) + shape).mean(axis=tuple(v + 1 for v in axes),
                                                       keepdims=bool(a.get("keepdims"))).shape[1:]
    return True
