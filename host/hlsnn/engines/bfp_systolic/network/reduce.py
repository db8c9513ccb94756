"""CBAM's channel mean and max on BFP pairs: :mod:`hlsnn.engines.network.pools.reduce` rule channel_reduce
in the ``bfp_systolic`` network mode (:mod:`hlsnn.engines.bfp_systolic.network.lower`), and the
spatial gate by the map they make (:mod:`hlsnn.engines.bfp_systolic.network.gate` rule spatial_gate).

**The layer path** (:class:`hlsnn.deploy.run.executors.BfpExec` and the host ops between BFP layers):
``ReduceMax`` / ``ReduceMean`` over axis 1 of a ``C x H x W`` map are numpy's ``max`` and ``mean``
in float64 (:mod:`hlsnn.deploy.run.hostextra`) of exact values (a BFP layer's ``m * 2**e``, a gate's
product of two such, rule bfp_gate): the max is the largest value itself, the mean the exact sum of the
``C`` values divided once by ``C`` (``np.mean``: the sum, then one division). The 7x7 conv after
the ``Concat`` quantizes those float64 values by rule bfp_conv. Neither reduction reads rule gate_in's codes on
BFP pairs (:func:`hlsnn.deploy.run.gatecodes.operand_bits`: "rule channel_reduce has no BFP form" there; the
channel gate's product pairs are exact in the element, rule bfp_gate).

Rule channel_reduce: **On pairs**: the map, held as ``C x HW x 1``, is transposed to ``HW x C x 1`` (netmove rule rows_transpose:
    each pixel's ``C`` elements one channel's pixels; the pairs move as they are), pooled by one
    ``C x 1`` window per channel, then transposed back from ``HW x 1 x 1`` to the ``1 x H x W`` map.
    The max is rule bfp_pool's max pool (the element of the largest value, an exact comparison of pairs):
    the layer path's float64 max, the same value. The mean is :mod:`hlsnn.engines.network.pools.linpool`
    rule avg_pool on pairs, the exact sum ``s`` at the smallest exponent ``e0`` of the window's non-zero
    elements (``|s|`` and the magnitudes' sum below ``2**52``: the layer path's float64 sum is then
    exact in any order; :class:`~hlsnn.engines.bfp_systolic.network.lower.NotExact` otherwise, the
    kernel's status bit), which the element holds **rounded to odd** (rule bfp_round_odd, field ``odd``):
    ``s`` shifted right by ``r = max(0, msb(|s|) - (K - 1))``, ``K = 25`` significant bits (the
    element's 26-bit mantissa), toward zero, its last bit set when a dropped bit was set; the
    element ``(+-((|s| >> r) | sticky), e0 - p + r)`` for ``C = 2**p``. A ``C = 2**a * d`` with
    ``d`` odd is rule bfp_mean of :mod:`.anymean` (``(s, e0 - a)`` read as over ``d`` by the conv,
    through the transpose back and the ``Concat``'s rule bfp_mean_concat): the layer path's one float64
    division, as proved there.

    *Why rounding to odd keeps the layer path's bits.* The exact mean ``v`` and the held ``v'`` lie
    in the same open interval between consecutive multiples of ``2**(k+1)`` (``k`` the kept last
    bit's weight; ``v' = v`` when no bit is dropped), and ``v' != 0`` exactly when ``v != 0``, in the
    same binade (so the same leading one: rule bfp_conv's patch exponent). The 7x7 conv rounds each
    element at its patch exponent ``xe >= L - (M - 2)`` (``L`` the element's leading one; a clamp
    to ``emin`` only raises ``xe``, one to ``emax`` saturates both): every decision point of the
    three roundings is a multiple of ``2**(xe - 1)``, at least ``2**(k+1)`` when ``K >= M + 1``,
    so both round alike. Read as a mean over ``d`` (rule bfp_mean), the decision points of ``t = s 2**e /
    d`` are multiples of ``d * 2**(xe - 1)``, at least ``2**(k+1)`` when ``K >= M + msb(d) + 2``
    (checked, for ``d = 1`` too; refused by name otherwise: ``M <= 23 - msb(d)``). Tested at ``K =
    11``, where the roundings' ties are frequent (a truncation instead of the odd rounding then
    gives other bits; ``tests/deploy/test_cbam_spatial.py``). A max pool (rule bfp_pool), a ``Relu``, a transpose and a
    ``Concat`` (its rule bfp_mean_concat factor an exact product) keep that; anything else reading such a mean
    (an Add, a table, a gate, the output) is refused by name (:func:`check_odd`).

Rule spatial_gate: **A spatial gate on pairs** (``Mul`` of a ``C x H x W`` map by a ``1 x H x W`` map, broadcast
    over the channels): rule bfp_gate with ``(ma[c, p] * mg[0, p], ea[c, p] + eg[0, p])``, the exact
    product (below ``2**25``), its exponent kept: the layer path's broadcast float64 ``Mul`` of two
    exact values, the same value. The kernel's ``Gate`` loop reads the gate at the pixel ``p`` and
    every bank takes bank 0's word (descriptor field ``pix``), as the integer kernels' does.

The kernel runs both with loops it has: ``Transpose`` (which also writes the shortcut
buffer: the mean's map, made first, waits there for the ``Concat``), ``MaxPool`` (its ``gap``
sum for the mean) and ``Gate``.
"""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from ....primitives import msb_index

#: rule bfp_round_odd: the significant bits ``K`` an odd-rounded mean keeps (the element's 26-bit mantissa)
ODD_BITS = 25
#: rule bfp_round_odd: the mean's exact sum and its magnitudes' sum stay below ``2**SUM_BITS`` (the kernel's
#: 54-bit sums, a term's left alignment by ``AlignExact``; float64's sum is exact below ``2**53``)
SUM_BITS = 52
#: the ops that pass an odd-rounded mean on to a conv (module docstring)
PASS = ("transpose", "concat", "maxpool", "relu")


def over_channels(j, fn, w, steps, why, op_cls, chw):
    """Rule channel_reduce on pairs (module docstring) for host layer ``j`` (``fn``: ``ReduceMean`` or
    ``ReduceMax`` over the channels; ``steps``: the walk's :class:`~.lower.BfpSteps`): appends the
    transpose, the pool and the transpose back to the walk ``w``'s ops; True."""
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
        m_bits = int(steps.p["mantissa_bits"])
        if ODD_BITS < m_bits + (d.bit_length() - 1) + 2:
            raise why(j, f"a ReduceMean over {c} channels of {m_bits}-bit BFP mantissas: rule bfp_round_odd keeps {ODD_BITS} "
                         f"bits, and a mean over {d} needs M + msb(d) + 2 = {m_bits + d.bit_length() + 1}")
        f = dict(f, my=0, mx=0, n=c, p=a, shift=a, rounding="nearest_even", odd=True, **({"mdiv": d} if d > 1 else {}))
        w.ops.append(op_cls("avgpool", j["name"], [t], pooled, f))
    w.state[pooled], w.shapes[pooled] = ("q", None), (hw, 1, 1)
    w.ops.append(op_cls("transpose", j["name"] + "/back", [pooled], out, dict(r=hw, s=1)))
    w.state[out], w.shapes[out] = ("q", None), (1, h, wd)
    return True


def round_odd(s, e):
    """Rule bfp_round_odd on int64 sums ``s`` (``|s| < 2**62``) at exponents ``e``: the pairs ``(m, e + r)``,
    ``s`` rounded to odd at :data:`ODD_BITS` significant bits (module docstring)."""
    s, e = np.asarray(s, np.int64), np.asarray(e, np.int64)
    a = np.abs(s)
    r = np.maximum(msb_index(a) - (ODD_BITS - 1), 0)
    kept = a >> r
    o = kept | ((kept << r) != a).astype(np.int64)
    return np.where(s < 0, -o, o), e + r


def check_odd(ops, aliases, out_name):
    """Rule bfp_round_odd's readers: every op reading an odd-rounded mean (through :data:`PASS`) is a conv, and
    the output is not one; :class:`InputError` naming the op otherwise."""
    name = lambda t: aliases.get(t, t)                   # noqa: E731
    held = set()
    for op in ops:
        if op.kind == "avgpool" and op.f.get("odd"):
            held.add(op.out)
            continue
        if not any(name(t) in held for t in op.ins) or op.kind == "conv":
            continue
        if op.kind not in PASS:
            raise InputError(f"network kernel (bfp): {op.name}: a {op.kind} of a channel mean held rounded to odd "
                             f"(rule bfp_round_odd of hlsnn.engines.bfp_systolic.network.reduce: exact only for the convs that "
                             f"read it); run it with network=False")
        held.add(op.out)
    if name(out_name) in held:
        raise InputError(f"network kernel (bfp): the output {out_name} is a channel mean held rounded to odd (rule "
                         f"bfp_round_odd of hlsnn.engines.bfp_systolic.network.reduce); run it with network=False")
