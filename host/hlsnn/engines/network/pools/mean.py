"""A mean over any count in the network mode: the integer rule of a ``GlobalAveragePool`` over
``H*W`` pixels (:mod:`hlsnn.deploy.lower.program` rule residual_add) and of an ``AveragePool`` of
``kh*kw`` taps (:mod:`.linpool` rule avg_pool) when the count ``n`` is not a power of two, on the
integer engines.

**The layer path's value.** Layer by layer the pool is a float64 host op: the exact sum ``S =
s * 2**-Fm`` of the pooled values (``s`` an integer, ``|s| < 2**53``) divided by ``n``, one
correctly rounded division ``v = fl(S / n)``; the consuming engine layer then quantizes ``v``
with :func:`hlsnn.deploy.quantize.quant.to_fixed` at its radix ``F_x``: ``w = rint(v * 2**g)`` (``g =
max(F_x + 24, 0)``, ``D = g - F_x >= 24``), then ``R(w * 2**-D)`` with the deployment's
rounding ``R`` (half to even, half away, floor) and the saturation to ``B`` bits.

Rule mean_divide: **mean** (``n = 2**a * m``, ``m`` odd and > 1): ``q = sat_B(R(t))`` with
    ``t = s * 2**e / n``, ``e = F_x - Fm``: the exact rational rounded once. The kernel computes it as
    ``y = floor(x / m)`` of ``x = s << pre`` by a multiply with a constant reciprocal and a
    shift, ``y = (x * M + off) >> L`` (:func:`magic`), then ``shift_round_sat(y, K, B, R)``,
    the existing requantization, with ``K = pre - e + a`` fraction bits.

*Why the layer path gives these bits.* ``R`` changes value only at its decision points (the
half-integers for the nearest roundings, the integers for floor). With ``N = m *
2**max(0, a - e)``, ``t = s * 2**(e - a) / m`` is either a decision point or at least ``1 /
(2N)`` away from every one (the distance is an integer over ``2N``). At a decision point ``s /
n`` is a short dyadic value, so ``v`` and ``w`` are exact and both apply ``R``'s tie rule to the
same value. Elsewhere ``w * 2**-D`` differs from ``t`` by at most ``2**-(D+1) + |t| * 2**-53``
(the division's relative error, then ``rint``): when that is below ``1 / (2N)`` the layer path
stays on ``t``'s side of every decision point and rounds as ``R(t)`` does. :func:`plan` checks
that inequality (exact rationals, at the largest ``|t|`` the sum's bound allows) and refuses
the pool by name where it does not hold. The kernel's two steps are exact in the same way:
``y / 2**K`` lies in ``(t - 2**-K, t]`` with ``2**K > 2N``, so it is a decision point exactly
when ``t`` is one and lies on ``t``'s side otherwise; and ``(x * M + off) >> L`` is
``floor(x / m)`` for every ``|x| <= X`` when ``M = ceil(2**L / m)``, ``off = ceil(X * (M*m -
2**L) / m)`` and ``m * off + X * (M*m - 2**L) < 2**L`` (Granlund and Montgomery's argument
with a bias for the negative sums: the error ``x * (M/2**L - 1/m) + off/2**L`` lies in
``[0, 1/m)``), which :func:`magic` checks for the ``L`` it picks. Tested exhaustively against
:class:`fractions.Fraction` rounding (``tests/deploy/test_network_mean_any.py``).

BFP pairs (``bfp_systolic``) keep such a mean as its exact sum, which the reading conv divides
(:mod:`hlsnn.engines.bfp_systolic.network.anymean`, rule bfp_mean).
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np

#: the widest product ``x * M + off`` the kernels' division computes (bits, with the sign)
PRODUCT_BITS = 62


def count_fields(n):
    """A mean over ``n`` values as the pool's fields ``{"p", "n"}``: ``p = log2(n)``, the sum's
    extra fraction bits (rules residual_add and avg_pool), where ``n`` is a power of two; else ``p = 0`` and this
    rule's division by ``n`` (:func:`plan`). The global pool, the ``AveragePool``
    (:mod:`.linpool`) and the ``ReduceMean`` (:mod:`hlsnn.engines.network.pools.reduce`) take their fields from here."""
    return dict(p=0 if n & (n - 1) else n.bit_length() - 1, n=n)


def odd_part(n):
    """``(a, m)`` with ``n = 2**a * m``, ``m`` odd."""
    a = (n & -n).bit_length() - 1
    return a, n >> a


def magic(m, xmax):
    """``(M, off, L)`` with ``(x * M + off) >> L == x // m`` for every integer ``|x| <= xmax``
    (module docstring), ``m`` odd > 1; the smallest such ``L``."""
    for L in range(1, 96):
        M = -(-(1 << L) // m)
        err = M * m - (1 << L)                 # 0 <= err < m
        off = -(-(xmax * err) // m)
        if m * off + xmax * err < (1 << L):
            return M, off, L
    raise ValueError(f"no reciprocal of {m} for sums up to {xmax}")


def divide(x, div):
    """``floor(x / m)`` of the int64 array ``x`` by the plan ``div`` (:func:`plan`): ``((x <<
    pre) * M + off) >> L``, as the kernels compute it."""
    x = np.asarray(x, np.int64) << div["pre"]
    return (x * div["dm"] + div["doff"]) >> div["dl"]


def plan(n, fm, f_x, smax):
    """Rule mean_divide for a mean over ``n`` values (not a power of two) whose exact sum ``s`` at radix
    ``fm`` has ``|s| <= smax``, requantized to radix ``f_x``: ``(div, K)``, the division's
    fields ``{"pre", "dm", "doff", "dl", "n"}`` and the requantization's shift ``K``; or a
    ``str`` saying why the layer path's float mean need not round as the rule does."""
    a, m = odd_part(n)
    e = f_x - fm
    big_n = m << max(0, a - e)                        # the decision points' distance: >= 1/(2N)
    g = max(f_x + 24, 0)
    d = g - f_x
    tmax = Fraction(smax * 2 ** max(e, 0), n * 2 ** max(-e, 0))
    if not Fraction(1, 2 * big_n) > Fraction(1, 2 ** (d + 1)) + tmax / 2 ** 53:
        return (f"a mean over {n} values from radix {fm} to {f_x}: the layer path's float mean is not provably "
                f"rounded as the exact quotient (1/(2*{big_n}) is not above 2^-{d + 1} + {float(tmax):g} * 2^-53)")
    k = max(0, a - e) + (2 * m).bit_length()          # 2**k > 2N
    pre = e - a + k
    xmax = smax << pre
    dm, doff, dl = magic(m, xmax)
    if (xmax * dm + doff).bit_length() + 1 > PRODUCT_BITS or dm >= 1 << 31 or doff >= 1 << 31 or pre > 31:
        return f"a mean over {n} values: its sums (up to {smax} at radix {fm}) are too wide for the kernel's division"
    return dict(pre=pre, dm=dm, doff=doff, dl=dl, n=n, kbits=(xmax * dm + doff).bit_length() + 1,
                xbits=xmax.bit_length() + 1, mbits=dm.bit_length()), k


def multipliers(net, tables):
    """Rule mean_divide's products in the network kernels (``MeanDiv``) as :class:`hlsnn.resources.Multiplier`
    rows: a signed ``div_xbits`` by unsigned ``div_mbits`` product per bank in the Add loop (two with the sparse kernel's
    two-pixel Add) when a global mean or a ``ReduceMean`` divides (``add_div``), and per bank in the
    pool loop when an average pool does (``pool_div``); none without a mean over a count that is
    not a power of two (the division is not rendered)."""
    from ....resources import Multiplier
    db, pc = tables.get("div_bits", 0), tables["pc"]
    scale = [Multiplier("pool scale", "MaxPoolTaps", tables["add_bits"], tables["pool_scale_bits"], b_signed=False,
                        count=pc, note="rule avg_pool_uncounted: a window's sum x L / count per bank (engines/network/pools/uncounted.py)")
             ] if tables.get("pool_scale") else []
    if not db:
        return scale
    xb, mb = tables["div_xbits"], tables["div_mbits"]
    rows = scale + ([Multiplier("mean", "AddPixels", xb, mb, b_signed=False, count=pc * (2 if tables.get("fast_add") else 1),
                        note="a mean's division: (v << pre) x M per bank (engines/network/pools/mean.py)")]
                    if tables.get("add_div", True) else [])
    if tables.get("pool_div", any(op.kind == "avgpool" for op in net.ops)):
        rows.append(Multiplier("mean", "MaxPoolTaps", xb, mb, b_signed=False, count=pc,
                               note="an AveragePool's division: (v << pre) x M per bank"))
    return rows

