"""The functions of rule unary_table's tables (:mod:`hlsnn.engines.network.gate`): every unary
elementwise host op with an exactly defined real function ``f`` of one value, and its values
``f(q * 2**-F)`` on a ``b``-bit code ``q``, rounded *exactly* to the table's entries.

Which ops (:func:`key`; anything else, a per-channel op among them, is no table):

* rationals of ``x`` (exact, :class:`~fractions.Fraction`): ``HardSwish`` ``x * clip(x + 3, 0,
  6) / 6``; ``HardSigmoid`` ``clip(alpha x + beta, 0, 1)``; ``LeakyRelu`` ``x`` (``x >= 0``) else
  ``alpha x``; ``PRelu`` the same with one scalar ``slope``; ``Scale`` ``x * c`` or ``x / c`` and
  ``AddConst`` ``x + c`` for ONE scalar ``c`` for the whole tensor (a per-channel ``c`` is no
  table); ``Softsign`` ``x / (1 + |x|)``; ``ThresholdedRelu`` ``x`` (``x > alpha``) else 0;
  ``Bipolar`` ``scale`` (``x >= 0``) else ``-scale`` (a QONNX ``BipolarQuant`` of an activation).
  Every float64 constant is taken exactly.
* transcendental in ``x``: ``Sigmoid`` ``1 / (1 + e^-x)``; ``Tanh``; ``Elu`` ``x`` (``x >= 0``)
  else ``alpha (e^x - 1)``; ``Erf``; ``Gelu`` ``x (1 + erf(x / sqrt 2)) / 2`` (``approximate``
  none) or ``x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))) / 2`` (tanh; ``0.044715`` the
  decimal of ONNX's definition); ``Softplus`` ``ln(1 + e^x)``; ``Selu`` ``gamma x`` (``x > 0``)
  else ``gamma alpha (e^x - 1)``; ``Celu`` ``x`` (``x >= 0``) else ``alpha (e^(x / alpha) -
  1)``; ``Mish`` ``x tanh(ln(1 + e^x))`` (:mod:`hlsnn.deploy.run.hostunary`). ``x = 0`` gives the
  rational value itself (``0``; ``1/2`` for ``Sigmoid``), as do ``Elu``'s, ``Selu``'s and
  ``Celu``'s positive ``x``.

**Exact rounding of a transcendental value.** Each value is computed with :mod:`decimal` (the
same on every machine) at ``P`` significant digits (60, then 120, 240, 480) as ``v`` with a
bound ``|f(x) - v| <= err``: every decimal operation is correctly rounded (``exp``, ``ln``,
``sqrt``, ``+``, ``*``, ``/``: half an ulp each), the handful of them in one value lose less
than ``10**4`` ulps, and ``err`` is taken as ``10**(8 - P) * max(1, |v|)`` (``Erf``'s series
works at ``P + x**2 / ln 10 + 20`` digits against its cancellation, its terms stop below
``10**-(P + 10)``; beyond ``|x| >= 27``, ``|erf x| = 1 - erfc x`` with ``0 < erfc x < 10**-316``).
An entry is ``round(v * 2**F_o)`` only where the whole interval ``[v - err, v + err] *
2**F_o`` rounds to one integer (every rounding is monotone): then the true value, inside it,
rounds to that integer too. Where it does not (the value within ``err`` of a rounding
boundary), the value is recomputed at twice the digits, and a table still undecided at 480
digits is refused (:class:`ValueError`). For ``Sigmoid``, ``Tanh``, ``Elu``, ``Selu``, ``Celu``
and ``Mish`` no value lies on a boundary at all (``e^x`` of a rational ``x != 0`` is
transcendental, Lindemann-Weierstrass, and each value is a rational function of it with
rational coefficients that would make ``e^x`` algebraic were the value a dyadic rational; for
``Softplus``, ``ln(1 + e^x) = r`` rational would make ``z = e^(1/n)`` a root of ``z^a = 1 +
z^b``); for ``Erf`` and ``Gelu`` no such theorem is at
hand, and the interval check is the argument, table by table.
"""
from __future__ import annotations

import decimal
import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

#: rational functions of ``x`` (exact)
RATIONAL = ("HardSwish", "HardSigmoid", "LeakyRelu", "PRelu", "Scale", "AddConst", "Softsign", "ThresholdedRelu",
            "Bipolar")
#: transcendental functions of ``x`` (certified rounding)
TRANSCENDENTAL = ("Sigmoid", "Tanh", "Elu", "Erf", "Gelu", "Softplus", "Selu", "Celu", "Mish")
#: every op with a table rule (given :func:`key`'s conditions on its attributes); ``UnaryChain``:
#: :func:`chain_value`
OPS = RATIONAL + TRANSCENDENTAL + ("UnaryChain",)
#: the digits of the first evaluation and the last one tried (module docstring)
DIGITS = (60, 480)


def _scalar(v):
    """``v`` as one float if it is one number (any shape of size 1), else None."""
    if v is None:
        return None
    a = np.asarray(v, np.float64)
    if a.size != 1 or not np.isfinite(a).all():
        return None
    return float(a.reshape(-1)[0])


def key(op, attrs):
    """The hashable description ``(op, ((name, value), ...))`` of host ``op`` with ``attrs``
    as a table function, or None where it has no table rule (not a unary elementwise op with
    an exact definition here, or a constant that is not one scalar)."""
    a = attrs or {}
    if op in ("HardSwish", "Sigmoid", "Tanh", "Erf", "Softplus", "Softsign", "Mish", "Relu"):
        return op, ()       # Relu: a UnaryChain's node only (OPS has no Relu: a lone one is a clamp)
    if op in ("Selu", "Celu", "ThresholdedRelu"):
        names = ("alpha", "gamma") if op == "Selu" else ("alpha",)
        if any(k not in a for k in names) or (op == "Celu" and float(a["alpha"]) == 0):
            return None
        return op, tuple((k, float(a[k])) for k in names)
    if op == "Bipolar":
        s = _scalar(a.get("scale"))
        return None if s is None or not s > 0 else (op, (("scale", s),))
    if op == "HardSigmoid":
        return op, (("alpha", float(a.get("alpha", 0.2))), ("beta", float(a.get("beta", 0.5))))
    if op in ("LeakyRelu", "Elu"):
        return op, (("alpha", float(a.get("alpha", 0.01 if op == "LeakyRelu" else 1.0))),)
    if op == "Gelu":
        how = a.get("approximate", "none")
        return (op, (("approximate", how),)) if how in ("none", "tanh") else None
    if op == "PRelu":
        s = _scalar(a.get("slope"))
        return None if s is None else (op, (("slope", s),))
    if op == "UnaryChain":                       # elementwise ops from one x (hlsnn.deploy.rewrite.unaryfuse)
        nodes = []
        for i, nd in enumerate(a.get("nodes") or ()):
            args = tuple(int(v) for v in nd.get("args") or ())
            if not args or any(not 0 <= v <= i for v in args):
                return None
            if nd["op"] in ("Mul", "Add") and len(args) == 2:
                nodes.append(((nd["op"], ()), args))
                continue
            k = key(nd["op"], nd.get("attrs") or {})
            if k is None or k[0] in ("UnaryChain", "ThresholdedRelu") or len(args) != 1:
                return None
            nodes.append((k, args))
        return (op, (("nodes", tuple(nodes)),)) if nodes else None
    if op in ("Scale", "AddConst"):
        c = _scalar(a.get("c"))
        if c is None or (op == "Scale" and a.get("divide") and c == 0.0):
            return None
        return op, (("c", c),) + ((("divide", bool(a.get("divide"))),) if op == "Scale" else ())
    return None


def why_not(op, attrs):
    """Why host ``op`` (a :data:`OPS` op) with ``attrs`` has no table (None if it has one)."""
    if key(op, attrs) is not None:
        return None
    if op in ("Scale", "AddConst", "PRelu"):
        v = (attrs or {}).get("slope" if op == "PRelu" else "c")
        return (f"{op} by a constant of shape {tuple(np.shape(v))} (a value per channel or element): a table "
                f"(rule unary_table) is a function of one value and takes one scalar for the whole tensor")
    return f"{op} with {dict(attrs or {})}: no table rule"


# --------------------------------------------------------------------------- values

def _rational(op, p, x):
    """The exact value of a :data:`RATIONAL` op at the Fraction ``x``."""
    if op == "Relu":
        return max(x, Fraction(0))
    if op == "HardSwish":
        return x * min(max(x + 3, Fraction(0)), Fraction(6)) / 6
    if op == "HardSigmoid":
        return min(max(Fraction(p["alpha"]) * x + Fraction(p["beta"]), Fraction(0)), Fraction(1))
    if op in ("LeakyRelu", "PRelu"):
        return x if x >= 0 else Fraction(p["alpha" if op == "LeakyRelu" else "slope"]) * x
    if op == "Scale":
        return x / Fraction(p["c"]) if p["divide"] else x * Fraction(p["c"])
    if op == "Softsign":
        return x / (1 + abs(x))
    if op == "ThresholdedRelu":
        return x if x > Fraction(p["alpha"]) else Fraction(0)
    if op == "Bipolar":
        return Fraction(p["scale"]) if x >= 0 else -Fraction(p["scale"])
    return x + Fraction(p["c"])                                  # AddConst


def _dec(x, ctx):
    return ctx.divide(decimal.Decimal(x.numerator), decimal.Decimal(x.denominator))


def _pi(ctx):
    """pi to ``ctx.prec`` digits (the :mod:`decimal` recipe: a series of rationals)."""
    with decimal.localcontext(ctx) as c:
        c.prec += 2
        three = decimal.Decimal(3)
        lasts, t, s, n, na, d, da = 0, three, 3, 1, 0, 0, 24
        while s != lasts:
            lasts = s
            n, na = n + na, na + 8
            d, da = d + da, da + 32
            t = (t * n) / d
            s += t
    return ctx.plus(s)


def _ctx(prec):
    return decimal.Context(prec=prec, Emax=10 ** 9, Emin=-10 ** 9)


def _erfc(y, prec):
    """``(c, rel)``: erfc of the Fraction ``y > 0``, ``|erfc(y) - c| <= rel * c``. Below 27: ``1 -
    erf(y)`` by erf's series at ``P + 2 y**2 / ln 10 + 24`` digits, its terms summed to
    ``10**-(P + y**2 / ln 10 + 12)``, so that the difference keeps ``P`` digits of ``erfc(y) >
    10**-(y**2 / ln 10 + 2)``. From 27: ``e^-y**2 / (y sqrt pi) * sum (-1)^n (2n-1)!! / (2
    y**2)^n``, whose remainder is below its first omitted term (the terms decrease up to ``n ~
    y**2``). From 40: ``e^-y**2 / (sqrt pi (y + 1)) < erfc(y) < e^-y**2`` (Mills' ratio), as
    powers of two (``log2 e`` bounded by 16 digits), the midpoint with its half-width."""
    y2 = y * y
    if y < 27:
        extra = int(float(y2) / 2.302585) + 2
        ctx = _ctx(prec + 2 * extra + 24)
        d = _dec(y, ctx)
        dd = ctx.multiply(d, d)
        term, total, n = d, d, 0
        stop = decimal.Decimal(10) ** -(prec + extra + 12)
        while True:                                 # sum (-1)^n y^(2n+1) / (n! (2n+1))
            n += 1
            term = ctx.divide(ctx.multiply(ctx.minus(term), dd), n)
            add = ctx.divide(term, 2 * n + 1)
            total = ctx.add(total, add)
            if ctx.abs(add) < stop and n > 2:
                break
        e = Fraction(ctx.multiply(total, ctx.divide(2, ctx.sqrt(_pi(ctx)))))
        return 1 - e, Fraction(1, 10 ** (prec - 2))
    if y >= 40:                                     # 2**-K1 < erfc(y) < 2**-K0: dyadic bounds, no e^-y**2
        k0 = math.floor(y2 * Fraction(14426950408889634, 10 ** 16))           # below log2(e) y**2
        k1 = math.ceil(y2 * Fraction(14426950408889635, 10 ** 16)) + math.ceil(math.log2(2 * float(y) + 2)) + 1
        lo, hi = Fraction(1, 1 << k1), Fraction(1, 1 << k0)
        return (lo + hi) / 2, (hi - lo) / (hi + lo)
    ctx = _ctx(prec + 20)
    d = _dec(y, ctx)
    two_y2 = ctx.multiply(2, ctx.multiply(d, d))
    term, total, n = decimal.Decimal(1), decimal.Decimal(1), 0
    stop = decimal.Decimal(10) ** -(prec + 10)
    while ctx.abs(term) >= stop and n < y2:
        n += 1
        term = ctx.divide(ctx.multiply(term, -(2 * n - 1)), two_y2)
        total = ctx.add(total, term)
    total = ctx.subtract(total, term)               # the last term: the bound of the remainder
    lead = ctx.divide(ctx.exp(ctx.minus(ctx.multiply(d, d))), ctx.multiply(d, ctx.sqrt(_pi(ctx))))
    if lead == 0:
        raise ValueError(f"erfc at {y}: below the decimal range")
    return Fraction(ctx.multiply(lead, total)), Fraction(ctx.abs(term)) * 2 + Fraction(1, 10 ** (prec + 10))


def _erf(x, prec):
    """``(v, err)``: erf of the Fraction ``x != 0`` as ``1 - erfc |x|`` (signed), which keeps
    the distance to 1 (module docstring)."""
    y = abs(x)
    c, rel = _erfc(y, prec + 2)
    return (1 if x > 0 else -1) * (1 - c), c * rel


def _log1p(e, ctx):
    """``ln(1 + e)`` of the Fraction ``0 < e <= 1`` within a relative ``10**(5 - P)``: its
    series below ``1/10`` (terms to a relative ``10**-(P + 10)``), else ``ln`` of ``1 + e``."""
    if e >= Fraction(1, 10):
        return Fraction(ctx.ln(ctx.add(1, _dec(e, ctx))))
    d = _dec(e, ctx)
    term, total, n = d, d, 1
    stop = ctx.multiply(d, decimal.Decimal(10) ** -(ctx.prec + 10))
    while ctx.abs(term) >= stop:
        n += 1
        term = ctx.multiply(ctx.minus(term), d)
        total = ctx.add(total, ctx.divide(term, n))
    return Fraction(total)


def _transcendental(op, p, x, prec):
    """``(v, err)`` of a :data:`TRANSCENDENTAL` op at the Fraction ``x != 0`` (module docstring)."""
    ctx = _ctx(prec)
    if op == "Erf":
        return _erf(x, prec)
    if op == "Gelu" and p["approximate"] == "none":        # x (1 + erf(x / sqrt 2)) / 2
        s2 = Fraction(_ctx(prec + 10).sqrt(2))             # sqrt 2 to prec + 10 digits
        y = abs(x) / s2
        arg = y * Fraction(1, 10 ** (prec + 8))             # the argument's error bound
        c, rel = _erfc(y, prec)
        err = abs(x) * c * (rel + (2 * y + 2) * arg) / 2    # |d erfc / dy| <= (2y + 2) erfc(y) (Mills' ratio)
        return (x * (2 - c) / 2 if x > 0 else x * c / 2), err    # x (1 + erf y) / 2 or x erfc(y) / 2
    d = _dec(x, ctx)
    # the rest through e^z with a relative bound (correctly rounded exp of an argument within a
    # relative 10**-P of its value: rel = 10**(3 - P) (1 + |z|)), every value written as its
    # distance to the nearest exact limit (1 - r, alpha (E - 1), ...) so that no bound spans it
    def ex(z):
        return Fraction(ctx.exp(z)), Fraction(1, 10 ** (prec - 3)) * (1 + abs(Fraction(z)))
    ax = abs(x)
    if op == "Sigmoid":                                  # 1 - e^-x / (1 + e^-x), or e^x / (1 + e^x)
        e, rel = ex(_dec(-ax, ctx))
        r = e / (1 + e)
        return (1 - r if x > 0 else r), 3 * rel * r
    if op == "Tanh":                                     # sign (1 - 2 e^-2|x| / (1 + e^-2|x|))
        e, rel = ex(_dec(-2 * ax, ctx))
        s = 2 * e / (1 + e)
        return (1 if x > 0 else -1) * (1 - s), 3 * rel * s
    if op == "Elu":                                      # alpha (e^x - 1), x < 0
        e, rel = ex(d)
        a = Fraction(p["alpha"])
        return a * (e - 1), abs(a) * e * rel
    if op in ("Selu", "Celu"):                           # gamma alpha (e^x - 1), alpha (e^(x/alpha) - 1); x < 0
        a = Fraction(p["alpha"])
        e, rel = ex(d if op == "Selu" else _dec(x / a, ctx))
        a = a * Fraction(p["gamma"]) if op == "Selu" else a
        return a * (e - 1), abs(a) * e * rel
    if op == "Softplus":                                 # max(x, 0) + log1p(e^-|x|)
        e, rel = ex(_dec(-ax, ctx))
        lg = _log1p(e, ctx)
        return max(x, Fraction(0)) + lg, lg * (rel + Fraction(1, 10 ** (prec - 5)))
    if op == "Mish":                                     # x tanh(ln(1 + e^x)) = x E(E + 2) / (E^2 + 2E + 2)
        e, rel = ex(_dec(-ax, ctx))                      # e^-|x|
        if x < 0:
            v = x * e * (e + 2) / (e * e + 2 * e + 2)
            return v, abs(v) * 4 * rel
        r = 2 * e * e / (1 + 2 * e + 2 * e * e)          # x (1 - 2F^2 / (1 + 2F + 2F^2)), F = e^-x
        return x * (1 - r), x * r * 4 * rel
    # Gelu, tanh: u = sqrt(2/pi) (x + 0.044715 x^3) (no cancellation), x / (1 + e^-2u)
    k = ctx.sqrt(ctx.divide(2, _pi(ctx)))
    u = ctx.multiply(k, ctx.add(d, ctx.multiply(decimal.Decimal("0.044715"), ctx.power(d, 3))))
    e, rel = ex(ctx.multiply(-2, ctx.abs(u)))
    r = e / (1 + e)
    return (x * (1 - r) if x > 0 else x * r), 3 * rel * r * ax


def slope(k):
    """A bound of ``|f'|`` of the table function ``k`` (a continuous one) on the whole line."""
    op, p = k[0], dict(k[1])
    if op == "Scale":
        c = abs(Fraction(p["c"]))
        return 1 / c if p["divide"] else c
    if op in ("LeakyRelu", "PRelu", "Elu", "Celu", "HardSigmoid"):
        a = abs(Fraction(p.get("alpha", p.get("slope", 1))))
        return a if op == "HardSigmoid" else max(Fraction(1), a)
    if op == "Selu":
        return abs(Fraction(p["gamma"])) * max(Fraction(1), abs(Fraction(p["alpha"])))
    return {"HardSwish": Fraction(3, 2), "Sigmoid": Fraction(1, 4), "Erf": Fraction(113, 100),
            "Gelu": Fraction(6, 5), "Mish": Fraction(6, 5)}.get(op, Fraction(1))   # Tanh, AddConst, Softplus, Softsign: 1


def chain_value(k, x, prec):
    """``(v, err)`` of ``UnaryChain`` ``k``: its nodes in order, each unary op evaluated at the
    value before it (a Fraction) and the error carried on with the op's :func:`slope` bound
    (``|f(u) - f(u')| <= slope * |u - u'|``), a product's as ``|a| eb + |b| ea + ea eb``, a sum's
    as ``ea + eb``."""
    vals = [(x, Fraction(0))]
    for kk, args in dict(k[1])["nodes"]:
        if kk[0] in ("Mul", "Add"):
            (va, ea), (vb, eb) = vals[args[0]], vals[args[1]]
            vals.append((va * vb, abs(va) * eb + abs(vb) * ea + ea * eb) if kk[0] == "Mul" else (va + vb, ea + eb))
            continue
        v, e = vals[args[0]]
        w, ew = value(kk, v, prec)
        vals.append((w, ew + slope(kk) * e))
    return vals[-1]


@lru_cache(maxsize=1 << 16)
def value(k, x, prec=DIGITS[0]):
    """``(v, err)``: the value of the table function ``k`` (:func:`key`) at the Fraction ``x``,
    ``|f(x) - v| <= err`` (``err`` 0: exact)."""
    op, p = k[0], dict(k[1])
    if op == "UnaryChain":
        return chain_value(k, x, prec)
    if op in RATIONAL or op == "Relu":
        return _rational(op, p, x), Fraction(0)
    if x == 0 and op != "Softplus":                     # softplus(0) = ln 2
        return (Fraction(1, 2) if op == "Sigmoid" else Fraction(0)), Fraction(0)
    if op in ("Elu", "Celu") and x > 0:
        return x, Fraction(0)
    if op == "Selu" and x > 0:
        return Fraction(p["gamma"]) * x, Fraction(0)
    return _transcendental(op, p, x, prec)


def round_int(num, den, rounding):
    """``num / den`` (``den > 0``, Python integers) rounded to an integer with ``rounding``
    (``nearest_away``: half away from zero, ``nearest_even``, ``truncate``: floor)."""
    fl, r = divmod(num, den)
    if rounding == "truncate" or r == 0:
        return fl
    if 2 * r > den:
        return fl + 1
    if 2 * r < den:
        return fl
    if rounding == "nearest_even":
        return fl + (fl & 1)
    return fl + 1 if num > 0 else fl            # nearest_away: a tie goes away from zero



def entry(k, x, f_o, rounding):
    """``round(f(x) * 2**f_o)`` exactly (module docstring), or :class:`ValueError` where no
    evaluation up to :data:`DIGITS` digits decides it."""
    s = Fraction(2) ** f_o
    prec = DIGITS[0]
    while prec <= DIGITS[1]:
        v, err = value(k, x, prec)
        lo, hi = (v - err) * s, (v + err) * s
        a = round_int(lo.numerator, lo.denominator, rounding)
        if err == 0 or a == round_int(hi.numerator, hi.denominator, rounding):
            return a
        prec *= 2
    raise ValueError(f"{k[0]} at {x}: within 10**-{DIGITS[1] - 8} of a rounding boundary at radix {f_o}")


def approx(k, x):
    """A value within ``err`` of ``f(x)`` (for the choice of the output radix)."""
    return value(k, x)[0]
