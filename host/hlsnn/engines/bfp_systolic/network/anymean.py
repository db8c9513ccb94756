"""A mean over a count that is not a power of two on BFP pairs: rule bfp_mean of the
bfp_systolic network mode (:mod:`hlsnn.engines.bfp_systolic.network.lower`), for a ``GlobalAveragePool`` (rule bfp_global_pool), an
``AveragePool`` (rule bfp_pool, :mod:`hlsnn.engines.network.pools.linpool` rule avg_pool) and a ``ReduceMean``
over ``n = 2**a * d`` values, ``d`` odd and > 1.

**The layer path's value.** Layer by layer the pool is a float64 host op
(:mod:`hlsnn.deploy.run.hostops`, :mod:`hlsnn.deploy.run.pooling`): the exact sum ``S = s * 2**e0``
of the pooled values (exact: rules bfp_global_pool and bfp_pool bound ``|s|``) divided by ``n``, one correctly
rounded division ``v = fl(S / n)``; a ``MaxPool`` after it picks the largest ``v``; the next
BFP layer quantizes its patch of such values by rule bfp_conv: the patch exponent from ``floor(log2
max |v|)`` (``np.frexp``, :func:`hlsnn.formats.bfp.shared_exponent`) and ``xm = R(v *
2**-xe)`` saturated to ``M`` bits (``v * 2**-xe`` is exact in float64).

Rule bfp_mean: **mean over n** (``n`` not a power of two). The element is the pair ``(s, e)`` of the sum
    with ``e = e0 - a``, whose value is ``t = s * 2**e / d`` (kept exactly, not rounded); the
    tensor carries ``d`` (one odd divisor per network kernel). A ``MaxPool`` or ``Relu`` of
    such elements works on the pairs as they are (``d > 0`` keeps the order; ties are equal
    values); a transpose moves them as they are (CBAM's channel mean back to its map, :mod:`hlsnn.engines.bfp_systolic.network.reduce`). A conv reading them (rule bfp_conv) takes, per element,

    * its leading one ``floor(log2(|s| / d)) + e`` (:func:`lop`): with ``k = msb(|s|) -
      msb(d)``, ``T = |s| >> k`` (``|s| << -k`` for ``k < 0``; ``T`` has ``d``'s width), it is
      ``k + e - (T < d)``;
    * its mantissa at the patch exponent ``xe`` (:func:`mantissa`), ``R(t * 2**-xe)``
      saturated: with ``h = e - xe + 1``, ``u = floor(|s| * 2**h)`` (a right shift's dropped
      bits make a sticky bit; ``u`` capped at ``d * 2**(M+1)``, beyond which every rounding
      saturates), ``y = floor(u / d)``, ``st`` = any dropped bit or ``u mod d != 0``; then
      ``shift_round_sat(+-(2y + st), 2, M, R)``.

*Why these are the layer path's bits* (for ``|s| < 2**52``, which rules bfp_global_pool and bfp_pool check).
Leading one: ``fl`` is monotone and every power of two is a float, so ``fl(t)`` can leave
``t``'s binade only upwards, when ``2**k - |t| <= 2**(k-54)`` for the next power ``2**k``; but
``2**k - |t|`` is a non-zero multiple of ``2**min(k, e) / n``, which with ``|s| < 2**53``
exceeds ``2**(k-54)``. Mantissa: ``y / 2`` is ``floor(2 |t'|) / 2`` with ``|t'| = |s| 2**(e-xe)
/ d``, and ``(y + st / 2) / 2`` lies strictly inside ``(y / 2, (y + 1) / 2)`` exactly when
``|t'|`` does: no decision point of ``R`` (the multiples of 1/2) lies strictly inside that
interval, so ``R`` gives ``+-|t'|``'s result from it, both signs, all three roundings. The
layer path rounds ``v' = fl(t) * 2**-xe``, ``|v' - t'| <= |t'| 2**-53``; where ``t'`` is not
a decision point its distance to one is a non-zero multiple of ``2**min(0, e - xe) / (2 d)``,
which exceeds ``|t'| 2**-53`` when ``|s| < 2**52`` and ``|t'| < 2**(M-1) + 1`` (beyond that
both saturate); where it is one, ``t`` is a short dyadic and ``v = t``. So both give ``R(t')``.
Tested against float64 numpy on many random sums (``tests/deploy/test_network_bfp_mean.py``).

Rule bfp_mean_concat: **concat of means** (a ``Concat`` with a part that is a mean: milesial's U-Net, an
    ``align_corners`` resize (:mod:`hlsnn.engines.network.pools.cornerresize`) into the skip's
    ``Concat``). With ``L`` the least common multiple of the program's odd divisors, each part
    over ``d`` (1: plain pairs) has its mantissas multiplied by ``L / d``: ``(s L / d) * 2**e / L =
    s * 2**e / d``, the same values, now every element a mean over ``L`` (one divisor per kernel).
    The product must stay below ``2**25`` (the kernel's element; ``NotExact`` otherwise, the
    kernel's status bit), and the conv reading the concat divides by ``L`` (rule bfp_mean).

A mean tensor read by anything else (an Add, a pool's sum, a table, a move, the output) is
refused by name: its value is not a pair.
"""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from ....primitives import msb_index, shift_round_sat

#: a mean's sum must stay below this (the proof's bound; rules bfp_global_pool and bfp_pool check it)
SUM_BITS = 52
#: the ops that pass a mean's pairs on unchanged (rule bfp_mean)
PASS = ("maxpool", "relu", "transpose")        # transpose: CBAM's channel mean back to its map (.reduce)


def lop(m, e, d):
    """``floor(log2(|m| / d)) + e`` where ``m != 0``, the int64 minimum elsewhere (int64 arrays)."""
    m, e = np.asarray(m, np.int64), np.asarray(e, np.int64)
    a = np.abs(m)
    k = msb_index(a) - (int(d).bit_length() - 1)
    t = np.where(k >= 0, a >> np.clip(k, 0, 62), a << np.clip(-k, 0, 62))
    return np.where(m != 0, k + e - (t < d), np.iinfo(np.int64).min)


def cap_bits(d, mant_bits):
    """The width of ``u`` (rule bfp_mean): ``u <= d * 2**(M+1)``."""
    return (int(d) << (mant_bits + 1)).bit_length()


def mantissa(m, e, xe, d, mant_bits, rounding):
    """``R(m * 2**(e - xe) / d)`` saturated to ``mant_bits`` (rule bfp_mean's integer steps)."""
    m, e, xe = np.broadcast_arrays(*(np.asarray(v, np.int64) for v in (m, e, xe)))
    a = np.abs(m)
    h = e - xe + 1
    ub = cap_bits(d, mant_bits)
    left = h >= 0
    big = left & (a != 0) & (msb_index(a) + h >= ub)
    u = np.where(left, a << np.clip(h, 0, 62), a >> np.clip(-h, 0, 62))
    u = np.where(big, int(d) << (mant_bits + 1), u)
    r = np.clip(-h, 0, 62)
    st = ~left & (((a & ((np.int64(1) << r) - 1)) != 0) | ((-h > 62) & (a != 0)))
    u = np.where(~left & (-h > 62), 0, u)
    y = u // d
    st = st | (u - y * d != 0)
    v = 2 * y + st.astype(np.int64)
    return shift_round_sat(np.where(m < 0, -v, v), 2, mant_bits, rounding)[0]


def mark(ops, aliases, out_name):
    """Propagate the means' divisors through the lowered ops: each conv reading a mean gets
    ``f["mdiv"] = d``; a ``Concat`` of means (rule bfp_mean_concat) gets ``f["mscale"]``, each part's factor
    to a mean over ``L``, the least common multiple of the program's odd divisors; a mean read by
    any other op but a ``MaxPool`` or a ``Relu``, or the network's output, is refused by name
    (:class:`InputError`), as are convs reading two odd divisors (the kernel holds one).
    Returns ``{tensor: d}``."""
    name = lambda t: aliases.get(t, t)                   # noqa: E731
    div, ds = {}, set()
    from math import lcm
    big = lcm(1, *(op.f["mdiv"] for op in ops if op.kind in ("avgpool", "add") and op.f.get("mdiv", 1) > 1))
    for op in ops:
        src = [div.get(name(t)) for t in op.ins]
        d = op.f.get("mdiv", 1) if op.kind in ("avgpool", "add") else 1
        if d > 1:
            if any(src):
                raise InputError(f"network kernel (bfp): {op.name}: a mean of means (rule bfp_mean of "
                                 f"hlsnn.engines.bfp_systolic.network.anymean); run it with network=False")
            div[op.out] = d
            continue
        if not any(src):
            continue
        if op.kind == "conv":
            op.f["mdiv"] = src[0]
            ds.add(src[0])
        elif op.kind == "concat":                        # rule bfp_mean_concat: every part a mean over the kernel's lcm
            op.f["mscale"] = [big // (d or 1) for d in src]
            div[op.out] = big
        elif op.kind in PASS and len(src) == 1:
            div[op.out] = src[0]
        else:
            raise InputError(f"network kernel (bfp): {op.name}: a {op.kind} of a mean over a count that is not a "
                             f"power of two; such a mean is exact only as the sum a conv, MaxPool, Relu or transpose reads "
                             f"(rule bfp_mean of hlsnn.engines.bfp_systolic.network.anymean); run it with network=False")
    if div.get(name(out_name)):
        raise InputError(f"network kernel (bfp): the output {out_name} is a mean over a count that is not a power of "
                         f"two (rule bfp_mean of hlsnn.engines.bfp_systolic.network.anymean); run it with network=False")
    if len(ds) > 1:
        raise InputError(f"network kernel (bfp): convs read means over counts with odd parts {sorted(ds)}; the kernel "
                         f"divides by one odd divisor (rule bfp_mean of hlsnn.engines.bfp_systolic.network.anymean; a "
                         f"Concat scales its parts to their least common multiple, rule bfp_mean_concat)")
    return div


def scale_parts(op, get, bound_bits):
    """Rule bfp_mean_concat: ``(get', ok)``, ``get'`` reading a concat's parts with their mantissas times
    ``f["mscale"]``, ``ok`` False where a product reaches ``2**bound_bits`` (the kernel's element)."""
    scaled, ok = {}, True
    for t, k in zip(op.ins, op.f["mscale"]):
        m, e = get(t)
        m = np.asarray(m, np.int64) * int(k)
        ok = ok and not (np.abs(m) >= 1 << bound_bits).any()
        scaled[t] = (m, e)
    return (lambda t: scaled[t] if t in scaled else get(t)), ok


def cat_fields(net):
    """The template's fields of rule bfp_mean_concat: ``has_meancat`` and the factors' width (unsigned)."""
    ks = [int(k) for op in net.ops if op.kind == "concat" and op.f.get("mscale") for k in op.f["mscale"]]
    return dict(has_meancat=bool(ks), cat_scale_bits=max(ks, default=1).bit_length())


def odd(n):
    """``(a, d)`` with ``n = 2**a * d``, ``d`` odd."""
    a = (n & -n).bit_length() - 1
    return a, n >> a


def magic(d, mant_bits):
    """The kernel's constant reciprocal for ``floor(u / d)``, ``0 <= u <= d * 2**(M+1)``:
    ``(M_d, off, L)`` of :func:`hlsnn.engines.network.pools.mean.magic`."""
    from ...network.pools.mean import magic as mg
    return mg(int(d), int(d) << (mant_bits + 1))


def mean_fields(net):
    """The template's fields of rule bfp_mean (:mod:`.anymean`): ``has_mean`` and, with it, the means' odd
    divisor ``d``, its msb, the cap's width and the reciprocal of ``floor(u / d)``."""
    ds = {op.f["mdiv"] for op in net.ops if op.kind == "conv" and op.f.get("mdiv", 1) > 1}
    if not ds:
        return dict(has_mean=False)
    d, = ds
    mb = net.params["mantissa_bits"]
    recip, off, shift = magic(d, mb)
    ub = cap_bits(d, mb)
    prod = (((d << (mb + 1)) * recip + off).bit_length())
    if recip >= 1 << 32 or off >= 1 << 32 or prod > 64:
        raise InputError(f"network kernel (bfp): a mean's divisor {d}: its reciprocal is wider than the kernel's "
                         f"32-bit constant")
    return dict(has_mean=True, mean_div=d, mean_msb=d.bit_length() - 1, mean_cap_bits=ub, mean_recip=recip,
                mean_off=off, mean_shift=shift, mean_prod_bits=prod, mean_recip_bits=recip.bit_length())
