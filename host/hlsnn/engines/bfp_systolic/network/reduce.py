"""CBAM's channel mean and max on BFP pairs (issue 52): :mod:`hlsnn.engines.network.reduce` rule 4c
in the ``bfp_systolic`` network mode (:mod:`hlsnn.engines.bfp_systolic.network.lower`), and the
spatial gate by the map they make (:mod:`hlsnn.engines.bfp_systolic.network.gate` rule 10p).

**The layer path** (:class:`hlsnn.deploy.executors.BfpExec` and the host ops between BFP layers):
``ReduceMax`` / ``ReduceMean`` over axis 1 of a ``C x H x W`` map are numpy's ``max`` and ``mean``
in float64 (:mod:`hlsnn.deploy.hostextra`) of exact values (a BFP layer's ``m * 2**e``, a gate's
product of two such, rule 10b): the max is the largest value itself, the mean the exact sum of the
``C`` values divided once by ``C`` (``np.mean``: the sum, then one division). The 7x7 conv after
the ``Concat`` quantizes those float64 values by rule 3. Neither reduction reads rule 10c's codes on
BFP pairs (:func:`hlsnn.deploy.gatecodes.operand_bits`: "rule 4c has no BFP form" there; the
channel gate's product pairs are exact in the element, rule 10b).

4c. **On pairs**: the map, held as ``C x HW x 1``, is transposed to ``HW x C x 1`` (netmove rule 9:
    each pixel's ``C`` elements one channel's pixels; the pairs move as they are), pooled by one
    ``C x 1`` window per channel, then transposed back from ``HW x 1 x 1`` to the ``1 x H x W`` map.
    The max is rule 7's max pool (the element of the largest value, an exact comparison of pairs):
    the layer path's float64 max, the same value. The mean is :mod:`hlsnn.engines.network.linpool`
    rule 11 on pairs (the exact sum at the smallest exponent ``e0`` of the window's non-zero
    elements, ``(s, e0 - p)`` for ``C = 2**p``; the sum below ``2**25``, the kernel's element, else
    :class:`~hlsnn.engines.bfp_systolic.network.lower.NotExact`): exactly the float64 mean, which
    the next conv's rule 3 blocks to the same bits. A ``C = 2**a * d`` with ``d`` odd is rule 6b of
    :mod:`.anymean` (``(s, e0 - a)`` read as over ``d`` by the conv, through the transpose back and
    the ``Concat``'s rule 6c): the layer path's one float64 division, as proved there.

10p. **A spatial gate on pairs** (``Mul`` of a ``C x H x W`` map by a ``1 x H x W`` map, broadcast
    over the channels): rule 10b with ``(ma[c, p] * mg[0, p], ea[c, p] + eg[0, p])``, the exact
    product (below ``2**25``), its exponent kept: the layer path's broadcast float64 ``Mul`` of two
    exact values, the same value. The kernel's ``Gate`` loop reads the gate at the pixel ``p`` and
    every bank takes bank 0's word (descriptor field ``pix``), as the integer kernels' does.

The kernel runs both with loops it has: ``Transpose`` (which now also writes the shortcut
buffer: the mean's map, made first, waits there for the ``Concat``), ``MaxPool`` (its ``gap``
sum for the mean) and ``Gate``.
"""
from __future__ import annotations


def over_channels(j, fn, w, why, op_cls, chw):
    """Rule 4c on pairs (module docstring) for host layer ``j`` (``fn``: ``ReduceMean`` or
    ``ReduceMax`` over the channels): appends the transpose, the pool and the transpose back to
    the walk ``w``'s ops; True."""
    src = j["inputs"][0]
    st = w.state.get(src)
    if st != ("q", None):
        raise why(j, f"a {fn} over the channels of BFP pairs computed on the fabric (a conv's, a table's or a "
                     f"gate's output; not of a pending Add or pool)")
    c, h, wd = chw(w.shapes[src])
    hw = h * wd
    out = j["output"]
    t, pooled = out + "_pix", out + "_red"      # the HW x C x 1 map, its HW x 1 x 1 pool
    w.ops.append(op_cls("transpose", j["name"] + "/pix", [src], t, dict(r=c, s=hw)))
    w.state[t], w.shapes[t] = ("q", None), (hw, c, 1)
    f = dict(c=hw, h=c, w=1, oh=1, ow=1, kh=c, kw=1, sh=1, sw=1, pads=(0, 0, 0, 0))
    if fn == "ReduceMax":
        w.ops.append(op_cls("maxpool", j["name"], [t], pooled, f))
    else:
        from .anymean import odd
        a, d = odd(c)
        f = dict(f, my=0, mx=0, n=c, p=a, shift=a, rounding="nearest_even", **({"mdiv": d} if d > 1 else {}))
        w.ops.append(op_cls("avgpool", j["name"], [t], pooled, f))
    w.state[pooled], w.shapes[pooled] = ("q", None), (hw, 1, 1)
    w.ops.append(op_cls("transpose", j["name"] + "/back", [pooled], out, dict(r=hw, s=1)))
    w.state[out], w.shapes[out] = ("q", None), (1, h, wd)
    return True
