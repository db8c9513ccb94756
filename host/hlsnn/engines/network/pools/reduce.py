"""A ``ReduceMean`` over a whole length or token axis in the network mode: the host op
``ReduceAxes`` (:mod:`hlsnn.deploy.run.hostextra`; ``x.mean(dim=1)`` of (N, T, F) tokens,
``x.mean(-1)`` of (N, C, L)) lowered to the global average pool every engine's network mode has
(rule residual_add with no second operand; on ``bfp_systolic`` rule bfp_global_pool):

* a ``C x H x W`` map (``(C, L)``: ``C x L x 1``), the mean over all axes after the channels: that
  map's global pool;
* ``(T, F)`` rows made by a ``MapToRows`` of an ``F x T x 1`` map
  (:mod:`hlsnn.engines.network.tokens.transpose`), the mean over the tokens: the global pool of that
  map; the transpose is dropped when nothing else reads its rows.

The layer path's float64 ``np.mean`` of exact values has exact partial sums while the rule's bound
holds (rule residual_add's ``Fm + p <= F_x + 24``; rule bfp_global_pool's ``2**53``) and divides
exactly by ``2**p``: the same bits. A count that is not a power of two is rule mean_divide
(:mod:`.mean`) on the integer engines, refused by name on BFP pairs; a mean over other axes or of
rows not made by a transpose is refused by name. A ``ReduceMax`` over the tokens of such rows is
rule token_max (:func:`_max_over_tokens`): rule max_pool's max pool of the map's ``T`` pixels.

Rule channel_reduce: **a mean or max over the channels** (CBAM's spatial attention:
    ``x.mean(1, keepdim=True)``, ``x.amax(1, keepdim=True)``; integer engines) of a ``C x H x W``
    map ``q`` at radix ``F``: the map held as ``C x HW x 1`` is transposed to ``HW x C x 1``
    (:mod:`.transpose` rule rows_transpose), pooled by one ``C x 1`` window per channel (the max:
    rule max_pool, codes at ``F``, exact; the mean: :mod:`.linpool` rule avg_pool over ``C = 2**p``
    or rule mean_divide's division, pending until its consumer requantizes it to its ``F_x``),
    then transposed back to the ``1 x H x W`` map. The layer path's float64 max is the largest
    code's value and its mean the exact rational (or the one rule mean_divide's plan proves),
    which the consumer quantizes once: the same bits. On BFP pairs the same ops run on the (m, e)
    elements, the mean held rounded to odd (rule bfp_round_odd:
    :mod:`hlsnn.engines.bfp_systolic.network.reduce`)."""
from __future__ import annotations

import numpy as np

from .mean import count_fields
from ..program import Op, _chw


def lower_host(j, program, w, steps, why):
    """Lower host layer ``j`` if it is a ``ReduceMean`` of a fabric tensor (module docstring):
    its output a pending global pool (state ``("add", {...})``, as ``GlobalAveragePool``'s);
    True if it was."""
    a = j.get("attrs", {})
    if j["op"] == "ReduceAxes" and len(w.shapes.get(j["inputs"][0], ())) == 3 and \
            {int(v) % 4 for v in a.get("axes", ())} == {1}:
        return _over_channels(j, w, steps, why)
    if j["op"] == "ReduceAxes" and a.get("fn") == "ReduceMax":
        return _max_over_tokens(j, program, w, why)
    if j["op"] != "ReduceAxes" or a.get("fn") != "ReduceMean":
        return False
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
                                      **count_fields(n)))             # p, or rule mean_divide's division
    shapes[j["output"]] = np.zeros((1,) + shape).mean(axis=tuple(v + 1 for v in axes),
                                                       keepdims=bool(a.get("keepdims"))).shape[1:]
    return True


def _max_over_tokens(j, program, w, why):
    """Rule token_max: a ``ReduceMax`` over the tokens ``T`` of ``(T, F)`` rows made by a ``MapToRows`` of
    an ``F x T x 1`` map (``x.max(dim=1).values`` after a token-wise ``Linear``): rule max_pool's max pool
    of that map's ``T`` pixels, one window per channel (codes at the map's radix, exact: the layer
    path's float64 max is the largest code's value); the transpose is dropped when nothing else
    reads its rows. False (no rule here) for another ``ReduceMax``."""
    a = j.get("attrs", {})
    src = j["inputs"][0]
    st, shape = w.state.get(src), tuple(int(d) for d in w.shapes.get(src, ()))
    phys = w.aliases.get(src, src)
    made = [op for op in w.ops if op.out == phys and op.kind == "transpose"]
    if st is None or st[0] != "q" or len(shape) != 2 or not made or \
            sorted({int(v) % 3 - 1 for v in a.get("axes", ())}) != [0]:
        return False
    t = made[0]
    readers = sum(phys in la["inputs"] for la in program["layers"])
    if phys == src and readers == 1:
        w.ops.remove(t)
    c, n = shape[1], t.f["s"]                   # rule max_pool's one window over the map's T pixels (GlobalMaxPool's)
    f = dict(c=c, h=n, w=1, oh=1, ow=1, kh=n, kw=1, sh=1, sw=1, pads=(0, 0, 0, 0))
    w.ops.append(Op("maxpool", j["name"], [t.ins[0]], j["output"], f))
    w.state[j["output"]] = st
    w.shapes[j["output"]] = np.zeros((1,) + shape).max(axis=1, keepdims=bool(a.get("keepdims"))).shape[1:]
    return True


def _over_channels(j, w, steps, why):
    """Rule channel_reduce (module docstring): a ``ReduceMean`` / ``ReduceMax`` over the channels of a
    ``C x H x W`` map as a transpose, a pool over each pixel's ``C`` values and a transpose back."""
    fn = j["attrs"].get("fn")
    if "gate_in" in j and steps.bits is not None:   # of a gate's product: its rule gate_in codes (hlsnn.deploy.run.gatecodes)
        from ..gatein import lower_operands
        j = lower_operands(j, w, steps, why, Op)
    src = j["inputs"][0]
    st = w.state.get(src)
    if fn not in ("ReduceMean", "ReduceMax"):
        raise why(j, f"a {fn} over the channels of a C x H x W map has no rule on the network path (rule channel_reduce: a "
                     f"ReduceMean or ReduceMax)")
    if steps.bits is None:                        # BFP pairs: rule channel_reduce's ops at once (module docstring)
        from ...bfp_systolic.network.reduce import over_channels
        return over_channels(j, fn, w, steps, why, Op, _chw)
    if st is not None and st[0] == "gate":
        raise why(j, f"a {fn} over the channels of a pending gate's product (CBAM's channel gate, then its spatial "
                     f"attention): the layer path reduces the exact product of two codes, wider than the pools' "
                     f"codes; rule channel_reduce takes a map of codes (a conv's, a table's, a gate's requantized output)")
    if st is None or st[0] != "q":
        raise why(j, f"a {fn} over the channels of an integer map computed on the fabric (not of a pending Add, "
                     f"pool or gate)")
    c, h, wd = _chw(w.shapes[src])
    hw = h * wd
    t = j["output"] + "_pix"                      # the HW x C x 1 map: a pixel's C values as its pixels
    first = Op("transpose", j["name"] + "/pix", [src], t, dict(r=c, s=hw))
    w.state[t], w.shapes[t] = st, (hw, c, 1)
    back = dict(r=hw, s=1)                        # the HW x 1 x 1 result back to the 1 x H x W map
    out = j["output"]
    w.shapes[out] = (1, h, wd)
    if fn == "ReduceMax":
        m = out + "_max"
        w.ops.append(first)
        w.ops.append(Op("maxpool", j["name"], [t], m, dict(c=hw, h=c, w=1, oh=1, ow=1, kh=c, kw=1, sh=1, sw=1,
                                                           pads=(0, 0, 0, 0))))
        w.state[m], w.shapes[m] = st, (hw, 1, 1)
        w.ops.append(Op("transpose", j["name"] + "/back", [m], out, back))
        w.state[out] = st
        return True
    f = dict(c=hw, h=c, w=1, oh=1, ow=1, kh=c, kw=1, sh=1, sw=1, pads=(0, 0, 0, 0), my=0, mx=0, **count_fields(c))
    w.state[out] = ("avgp", dict(f, src=t, fin=st[1], name=j["name"], bits=steps.bits, first=first,   # when read
                                 then=[dict(kind="transpose", name=j["name"] + "/back", c=1, oh=h, ow=wd, op=back)]))
    return True
