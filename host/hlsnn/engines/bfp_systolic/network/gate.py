"""Tables, HardSwish and the channel gate on BFP activations (rule bfp_elementwise): the rules
bfp_table, bfp_hardswish and bfp_gate of the ``bfp_systolic`` network mode (:mod:`hlsnn.engines.bfp_systolic.network.lower`),
which the layer path runs as well (:func:`host_layers`, :func:`host_run`; the layer path's
float64 op before), so both give the same bits.

A BFP activation is a pair ``(m, e)`` per element (value ``m * 2**e``), not one ``b``-bit
code, so a table of codes (:mod:`hlsnn.engines.network.gate` rule unary_table) cannot hold it as it is.
``HardSwish`` is piecewise a rational of ``x`` and has an exact integer rule on the pair
(bfp_hardswish); ``Sigmoid`` and ``HardSigmoid`` first write the pair as a ``b``-bit fixed-point code at a
radix point chosen at calibration, then look the code up in rule unary_table's table (bfp_table). They apply to
an op whose input is a BFP engine layer's output (``M = mantissa_bits``: ``|m| < 2**(M-1)``)
and after which an engine layer still runs (``rounding``: the deployment's).

Rule bfp_table: **table on pairs** (``Sigmoid``, ``HardSigmoid`` and every other table op of
    :data:`hlsnn.engines.network.gate.UNARY` but ``HardSwish``; its input a BFP engine layer's
    output, or one moved by :data:`MOVES`; or an ``Add`` (its ``Relu``) or a gate
    ``Mul`` of pairs: exact pairs of wider mantissas, coded the same way): ``F`` is DETERMINE's radix point
    (:func:`hlsnn.deploy.quantize.quant.host_radix`, the deployment's ``overflow_ratio``) for ``b =
    M``-bit signed codes of the op's input on the calibration images, fixed after calibration
    (``dynamic`` mode: every batch). Each element's code is ``q = shift_round_sat(m,
    clamp(-(e + F), -(b + 1), 62), b, rounding)``: exactly ``round(m * 2**e * 2**F)`` saturated
    to ``b`` bits (the clamp changes no result: a left shift by ``b + 1`` already saturates
    every non-zero code, and a right shift by 62 leaves ``|m| < 2**54`` below a half). The
    output element is ``(T[q - lo], -F_o)`` with ``(F_o, T) = table(op, attrs, (F, b, True),
    rounding, OUT_BITS)``: rule unary_table's table, exact, with :data:`OUT_BITS`-bit entries (a BFP
    element has room for them).
Rule bfp_hardswish: **HardSwish on pairs**: ``x = m * 2**e``, ``L = msb_index(|m|) + e`` its leading one,
    ``w = M +`` :data:`W_EXTRA`. ``x >= 3``: ``(m, e)`` (``x`` itself); ``x <= -3`` or ``x = 0``:
    ``(0, 0)``; else ``(ym, -d)``, ``d = w - 1 - L``, ``ym = round(x (x + 3) / 6 * 2**d)``
    exactly with ``rounding`` (``|ym| < 2**w``: the output keeps ``w`` significant bits of the
    input's scale, as a BFP block does). In integers: ``xs = m * 2**(e + d)`` (``w`` bits,
    exact), ``P = xs (xs + 3 * 2**d)``, ``ym = round(P / (3 * 2**(d + 1)))``: ``q3 = floor(P /
    3)``, ``r3 = P - 3 q3``, ``fl = q3 >> (d + 1)``, ``rem = q3 mod 2**(d + 1)``, above the
    half when ``rem > 2**d`` or ``rem = 2**d`` and ``r3 > 0``, a tie when ``rem = 2**d`` and
    ``r3 = 0``. For ``d >= 2w`` (``|x|`` below ``2**(1-w)``) ``P / (3 * 2**(d+1)) = xs / 2 + xs**2
    / (3 * 2**(d+1))`` with the second term in ``(0, 1/2)``, so ``ym = floor(xs / 2)``, plus one
    for a nearest rounding when ``xs`` is odd (no large shift in the kernel).
Rule bfp_hardswish_table: **HardSwish of a sum or product** (its input an ``Add`` (its ``Relu``), a gate ``Mul`` or
    an ``AveragePool`` of pairs: MobileNetV3's ``HardSwish`` after a squeeze-excite gate): the
    product's mantissas are wider than bfp_hardswish's ``w`` bits, so bfp_hardswish (exact for at most ``w``
    significant bits) does not apply; the op is rule bfp_table instead, a table of codes (rule bfp_wide_codes's
    width) at the calibrated radix ``F`` (as ``Sigmoid`` of such a tensor), in both paths (:func:`host_layers`
    takes it; the compiled program's ``bfp_table`` marks it).
Rule bfp_wide_codes: **wider codes of a sum or product** (CBAM's ``sigmoid(mlp(avg) + mlp(max))``
    loses accuracy to 8-bit codes of the sum): a bfp_table (or bfp_hardswish_table)
    table whose input is an ``Add`` (its ``Relu``), a gate ``Mul`` or an ``AveragePool`` of pairs
    (exact values of wider mantissas, not an engine layer's ``M``-bit block) reads codes of
    ``b = min(M + SUM_EXTRA, max(M, MAX_TABLE_BITS))`` bits (:func:`sum_code_bits`,
    :data:`SUM_EXTRA`; 11 for bfp8: a ``2**11``-entry table), as bfp_hardswish widens HardSwish's
    mantissas by :data:`W_EXTRA`: ``F`` is DETERMINE's radix for ``b``-bit codes, every other
    step is bfp_table's with that ``b``. A table of an engine layer's output keeps ``b = M``. The compiled program stores
    each table's ``b`` (``bfp_table.bits``), and a loaded program runs the ``b`` it stores (a
    file of before, ``b = M``, keeps its bits). The kernel holds one ROM of every table and
    codes of the widest ``b`` (``kLutBits``); a narrower table's code is its ``kLutBits``-bit code
    saturated to its own ``b`` bits (the same value: both round the same exact product, and
    saturating to ``kLutBits`` then to ``b <= kLutBits`` bits is saturating to ``b``).
Rule bfp_gate: **gate on pairs** (``Mul`` of a ``C x H x W`` map by a ``C``-vector, both pairs):
    ``(ma * mg, ea + eg)``, the exact product, its exponent kept; no requantization (the next engine
    layer's patches re-block it by rule bfp_conv). The layer path's float64 product of the two exact
    values is the same value, and the next layer quantizes its float64 input by the same rule
    bfp_conv, so the bits agree. The kernel keeps a product in its 26-bit element: ``|ma * mg| <
    2**25`` (:class:`~hlsnn.engines.bfp_systolic.network.lower.NotExact` otherwise, raised by
    its ``run``); its operands are conv, bfp_table or bfp_hardswish outputs (``M``, ``OUT_BITS`` or ``w + 1``
    bits: 10 x 16 for bfp8, below ``2**24``). **The product of two maps** of one shape (a SiLU
    ``x * sigmoid(x)``, field ``same``) is this rule element by element, in the same loop
    (:mod:`hlsnn.engines.network.gate` rule channel_gate's note: the second operand's address steps
    every pixel); so is **a spatial gate** by a ``1 x H x W`` map (rule spatial_gate, field ``pix``:
    :mod:`hlsnn.engines.bfp_systolic.network.reduce`). A gate of a gate's product (three pairs' mantissas, beyond the element) first
    writes the inner product's pairs as ``M``-bit codes at a calibrated radix by bfp_table's table of
    the identity: rule gate_in (:mod:`hlsnn.engines.network.gatein`).

Rule bfp_clip: **Clip on pairs** (``Clip(0, hi)`` or ``Clip(None, hi)``: ReLU6 where no conv's output
    stage holds it; the ``Lut`` loop's third mode): ``hi > 0`` is written as the pair ``(h, k)``, ``h`` odd, ``hi = h *
    2**k`` (6: ``(3, 1)``), which must fit the kernel's element (``|h| < 2**25``, ``k`` a 10-bit
    exponent; refused by name otherwise), and ``lo`` must be 0 or absent. ``lo = 0`` and ``m <= 0``:
    ``(0, 0)``; ``x = m *
    2**e > hi`` (the exact comparison of rule bfp_pool): ``(h, k)``; else ``(m, e)`` itself. The layer
    path's float64 ``Clip`` of an exact value gives ``0``, ``hi`` or ``x`` itself: the same value,
    so the next layer's rule bfp_conv blocks the same bits (no change to the layer path).

Tested against independent Fraction references of the rules
(``tests/deploy/test_network_bfp_gate.py``)."""
from __future__ import annotations

import numpy as np

from ....primitives import shift_round_sat
from ...network.gate import UNARY, is_table, table


#: the width of a bfp_table table's output mantissas: a BFP element holds more than the code's ``b``
#: bits, and a gate's products stay below ``2**25`` with a bfp_hardswish map of ``M + 2`` bits (bfp8)
OUT_BITS = 16


#: rule bfp_wide_codes: a table of a sum or product reads codes of ``M + SUM_EXTRA`` bits: +3 (a
#: 2**11 x 16-bit table, one BRAM36 per bank's copy) was as accurate as +4 (two) on bfp8
SUM_EXTRA = 3


def sum_code_bits(m_bits):
    """Rule bfp_wide_codes's code width for a table of a sum or product after ``m_bits``-bit BFP layers."""
    from ...network.gate import MAX_TABLE_BITS
    return min(int(m_bits) + SUM_EXTRA, max(int(m_bits), MAX_TABLE_BITS))


#: the ops with an exact rule on pairs (bfp_hardswish) rather than a table of codes (bfp_table)
EXACT = ("HardSwish",)
#: rule bfp_hardswish's output mantissas: ``w = M + W_EXTRA`` bits (and a sign) for ``M``-bit inputs
W_EXTRA = 1


def codes(m, e, f, bits, rounding):
    """Rule bfp_table's codes of the pairs ``(m, e)`` (``|m| < 2**54``) at radix ``f``; also rule
    bfp_pair_codes's, attention's ops on pairs (:mod:`.attnpairs`)."""
    m, e = np.asarray(m, np.int64), np.asarray(e, np.int64)
    s = np.clip(-(e + int(f)), -(bits + 1), 62)
    return shift_round_sat(m, s, bits, rounding)[0]


def pairs_of(values):
    """Exact float64 ``values`` as pairs ``(m, e)``, ``|m| < 2**53`` (zero: ``(0, 0)``)."""
    fr, ex = np.frexp(np.asarray(values, np.float64))
    m = np.ldexp(fr, 53).astype(np.int64)
    return m, np.where(m != 0, ex.astype(np.int64) - 53, 0)


def lut_pairs(x, f):
    """Rule bfp_table on pairs ``x = (m, e)`` (any shape) with the lut op's fields ``f``."""
    q = codes(x[0], x[1], f["f_in"], f["bits"], f["rounding"])
    t = np.asarray(f["table"], np.int64)
    y = t[q - f["lo"]]
    return y, np.full(y.shape, -int(f["f_out"]), np.int64)


def hardswish_pairs(m, e, w, rounding):
    """Rule bfp_hardswish (module docstring): ``HardSwish`` of the pairs ``(m, e)`` (any shape; at most
    ``w`` significant bits where ``|x| < 3``) as pairs ``(ym, ye)``."""
    from ....primitives import msb_index
    m, e = np.asarray(m, np.int64), np.asarray(e, np.int64)
    a = np.abs(m)
    top = msb_index(a)
    lead = top + e
    nz = m != 0
    big = nz & ((lead >= 2) | ((lead == 1) & (top >= 1) & (a >= 3 * (np.int64(1) << np.clip(top - 1, 0, 62)))))
    mid = nz & ~big
    d = np.where(mid, w - 1 - lead, 0)
    sh = np.where(mid, w - 1 - top, 0)
    xs = np.where(sh >= 0, m << np.clip(sh, 0, 62), m >> np.clip(-sh, 0, 62))
    if (mid & (sh < 0) & ((xs << np.clip(-sh, 0, 62)) != m)).any():
        raise ValueError(f"HardSwish on pairs (rule bfp_hardswish): an input of more than {w} significant bits")
    tiny = d >= 2 * w
    near = rounding != "truncate"
    ym_tiny = (xs >> 1) + (near & ((xs & 1) == 1))
    dd = np.clip(d, 0, 2 * w - 1)
    pw = np.int64(1) << dd
    pp = xs * (xs + 3 * pw)                     # |P| < 2**(3w + 2)
    q3 = pp // 3                                # floor
    r3 = pp - 3 * q3
    fl = q3 >> (dd + 1)
    rem = q3 & ((pw << 1) - 1)
    up = (rem > pw) | ((rem == pw) & (r3 > 0))
    tie = (rem == pw) & (r3 == 0)
    if rounding == "truncate":
        ym_mid = fl
    elif rounding == "nearest_even":
        ym_mid = fl + (up | (tie & ((fl & 1) == 1)))
    else:                                       # nearest_away: a tie goes away from zero
        ym_mid = fl + (up | (tie & (pp > 0)))
    ym = np.where(big & (m > 0), m, np.where(mid, np.where(tiny, ym_tiny, ym_mid), 0))
    ye = np.where(big & (m > 0), e, np.where(mid, -d, 0))
    return ym, ye


def clip_pair(lo, hi):
    """Rule bfp_clip's ``hi`` as the pair ``(h, k)`` (``h`` odd); ``None`` when ``(lo, hi)`` has no
    rule here (``lo`` neither 0 nor absent, ``hi`` not a positive value of a kernel element)."""
    import math
    if (lo is not None and float(lo) != 0.0) or hi is None or not math.isfinite(float(hi)) or float(hi) <= 0:
        return None
    fr, ex = math.frexp(float(hi))
    h, k = int(math.ldexp(fr, 53)), ex - 53
    while h % 2 == 0:
        h, k = h // 2, k + 1
    if h >= 1 << 25 or not -512 <= k <= 511:
        return None
    return h, k


def clip_pairs(m, e, h, k, lo0=True):
    """Rule bfp_clip: ``Clip(0, h * 2**k)`` (``lo0``; else ``Clip(None, h * 2**k)``) of the pairs
    ``(m, e)`` (any shape) as pairs."""
    m, e = np.asarray(m, np.int64), np.asarray(e, np.int64)
    x = np.ldexp(m.astype(np.float64), e)        # exact: |m| < 2**53, a 10-bit exponent's range
    over = (m > 0) & (x > np.ldexp(float(h), int(k)))
    keep = ((m > 0) | (not lo0)) & ~over
    return np.where(over, h, np.where(keep, m, 0)), np.where(over, k, np.where(keep, e, 0))


def gate_pairs(a, g, bound_bits):
    """Rule bfp_gate on a batch: the map ``a`` (B, C, HW) and the vector ``g`` (B, C, 1) pairs (or
    a map ``g`` (B, C, HW): the product of two maps; (B, 1, HW): a spatial gate, rule spatial_gate of
    :mod:`hlsnn.engines.bfp_systolic.network.reduce`):
    ``(m, e, ok)``, ``ok`` False where a product reaches ``2**bound_bits``."""
    ma, ea = (np.asarray(v, np.int64) for v in a)
    mg, eg = (np.asarray(v, np.int64) for v in g)
    big = (np.abs(ma) >= 1 << 31).any() or (np.abs(mg) >= 1 << 31).any()      # beyond int64's product
    m = ma * mg
    ok = not big and not (np.abs(m) >= 1 << bound_bits).any()
    return m, np.broadcast_to(ea + eg, m.shape).copy(), ok


# --------------------------------------------------------------------------- the network mode

#: host ops that only move an engine layer's values: a table's input may be their output (its
#: pairs are still the engine layer's ``M``-bit mantissas; the layer path's float values too)
MOVES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout", "RowsToMap", "MapToRows")


def _engine_made(t, w):
    """Tensor ``t`` of the network mode's walk ``w`` is an engine layer's output, or one moved
    by :data:`MOVES` (an alias or a ``transpose`` op)."""
    for _ in range(len(w.ops) + 2):
        t = w.aliases.get(t, t)
        if t in w.made_by:
            return True
        op = next((o for o in reversed(w.ops) if o.out == t), None)
        if op is None or op.kind != "transpose":
            return False
        t = op.ins[0]
    return False


def _computed(t, w):
    """Tensor ``t`` is an add, gate or avgpool op's output (exact pairs of wider mantissas: rule bfp_table's
    note on sums and products in the module docstring)."""
    t = w.aliases.get(t, t)
    op = next((o for o in reversed(w.ops) if o.out == t), None)
    return op is not None and op.kind in ("add", "gate", "avgpool")


def emit(w, j, kind, ins, shape, **f):
    """Append the op ``kind`` (fields ``f``) of host layer ``j`` on ``ins`` to the walk ``w``, its
    output pairs of ``shape``: True."""
    from ...network.program import Op
    w.ops.append(Op(kind, j["name"], list(ins), j["output"], f))
    w.state[j["output"]], w.shapes[j["output"]] = ("q", None), shape
    return True


def _lut_op(j, w, **f):
    """:func:`emit` of the lut op of host op ``j`` (fields ``f``): pairs of its input's shape."""
    from ...network.program import _chw
    src = j["inputs"][0]
    c, h, w_ = _chw(w.shapes[src])
    return emit(w, j, "lut", [src], w.shapes[src], c=c, hw=h * w_, **f)


def lower_host(steps, j, st, w):
    """:meth:`BfpSteps.host` for rules bfp_table and bfp_gate: True if ``j`` was lowered; :class:`InputError`
    (by :func:`hlsnn.deploy.lower.program._why`) for a table or gate without a rule here."""
    from ...network.program import Op, _chw, _why
    op = j["op"]
    if op == "Clip" and st[0] == "q":                      # rule bfp_clip: Clip(0, hi) exactly
        a = j.get("attrs", {})
        hk = clip_pair(a.get("lo"), a.get("hi"))
        if hk is None:
            raise _why(j, f"Clip({a.get('lo')}, {a.get('hi')}) of BFP values: rule bfp_clip of "
                          f"hlsnn.engines.bfp_systolic.network.gate takes Clip(0, hi) or Clip(None, hi), hi > 0 = h * 2**k with "
                          f"|h| < 2**25 and a 10-bit k")
        return _lut_op(j, w, exact=True, fn="Clip", clip=hk, lo0=a.get("lo") is not None,
                       bits=int(steps.p["mantissa_bits"]), rounding=steps.table_rounding)
    from .prelu import lower_host as prelu_host
    if prelu_host(steps, j, st, w, _engine_made):         # rule bfp_prelu: a PRelu per channel (.prelu)
        return True
    if op in UNARY and not is_table(op, j.get("attrs", {})):
        from ...network.tables import why_not
        raise _why(j, why_not(op, j.get("attrs", {})) + "; a table per channel (rule channel_table of "
                      "hlsnn.engines.network.gate) runs on the integer engines (two-hot, fixed8), not on BFP pairs")
    exact = op in EXACT and not j.get("bfp_table")       # bfp_hardswish; a HardSwish of a sum or product: bfp_table (bfp_hardswish_table)
    if op in UNARY and not exact and st[0] == "add" and j.get("bfp_table"):    # rule bfp_table of a sum
        base = steps.materialize_add(j, st[1], w)
        w.aliases[j["inputs"][0]] = base
        j, st = dict(j, inputs=[base]), w.state[base]
    if op in UNARY and (st[0] != "q" or not (_engine_made(j["inputs"][0], w)
                                             or not exact and _computed(j["inputs"][0], w))):
        raise _why(j, f"{op} of BFP values that are not an engine layer's output (rules bfp_table, bfp_hardswish of "
                      f"hlsnn.engines.bfp_systolic.network.gate take a BFP layer's M-bit mantissas)")
    if exact:                                             # rule bfp_hardswish: HardSwish exactly, w = M + W_EXTRA
        return _lut_op(j, w, exact=True, fn=op, bits=int(steps.p["mantissa_bits"]) + W_EXTRA,
                       rounding=steps.table_rounding)
    if op in UNARY:
        tab = j.get("bfp_table")
        if st[0] != "q" or tab is None:
            raise _why(j, f"{op} of BFP values with no calibrated code radix (rule bfp_table of "
                          f"hlsnn.engines.bfp_systolic.network.gate: a table of a BFP engine layer's output, "
                          f"calibrated by the layer path, with an engine layer after it)")
        bits, f_in = int(tab["bits"]), int(tab["f_in"])
        f_o, t = table(op, j.get("attrs", {}), (f_in, bits, True), steps.table_rounding, OUT_BITS)
        return _lut_op(j, w, lo=-(1 << (bits - 1)), table=t, f_in=f_in, f_out=int(f_o), bits=bits, fn=op,
                       rounding=steps.table_rounding)
    if op != "Mul":
        return False
    if "gate_in" in j:                                    # a gate of a gate's product (rule gate_in)
        from ...network.gatein import bfp_operands
        j = bfp_operands(j, w, steps, _why, Op)
    ins = list(j["inputs"])
    sts = [w.state.get(i) for i in ins]
    if len(ins) != 2 or any(s is None or s != ("q", None) for s in sts):
        raise _why(j, "a gate Mul of two BFP tensors computed on the fabric (engine layers' or tables' outputs)")
    ca, cb = (_chw(w.shapes[i]) for i in ins)
    if (ca[1:] == (1, 1) and cb[1:] != (1, 1)) or (ca[0] == 1 < cb[0] and ca[1:] == cb[1:]):
        ins, ca, cb = ins[::-1], cb, ca
    same = ca == cb                                       # the product of two maps of one shape
    pix = not same and cb == (1,) + ca[1:]                # rule spatial_gate (.reduce): a 1 x H x W gate over C
    if cb != (ca[0], 1, 1) and not same and not pix:
        raise _why(j, f"a Mul of a C x H x W map by a C-vector (a channel gate), by a 1 x H x W map (a spatial "
                      f"gate) or by a map of its shape is supported, not of {tuple(w.shapes[ins[0]])} and "
                      f"{tuple(w.shapes[ins[1]])}")
    return emit(w, j, "gate", ins, w.shapes[ins[0]], c=ca[0], hw=ca[1] * ca[2], shift=0, same=same, pix=pix)


def run(op, get, shaped, bound_bits):
    """Rules bfp_table and bfp_gate of one op on a batch (``shaped(pair, shape)``: the pair as ``(B, *shape)``):
    ``(m, e, ok)`` (``ok``: every gate product below ``2**bound_bits``)."""
    f = op.f
    if op.kind == "lut" and f.get("fn") == "Clip":
        x = get(op.ins[0])
        return clip_pairs(x[0], x[1], *f["clip"], f["lo0"]) + (True,)
    if op.kind == "lut" and f.get("exact") and f.get("fn") == "PRelu":      # rule bfp_prelu (.prelu)
        from .prelu import run as prelu_run
        return prelu_run(op, get(op.ins[0]), shaped) + (True,)
    if op.kind == "lut" and f.get("exact"):
        x = get(op.ins[0])
        return hardswish_pairs(x[0], x[1], f["bits"], f["rounding"]) + (True,)
    if op.kind == "lut":
        return lut_pairs(get(op.ins[0]), f) + (True,)
    a = shaped(get(op.ins[0]), (f["c"], f["hw"]))
    g = shaped(get(op.ins[1]), (1, f["hw"]) if f.get("pix") else (f["c"], f["hw"] if f.get("same") else 1))
    if f.get("odd"):                               # rule bfp_gate_odd (.gatero): held rounded to odd
        from .reduce import round_odd
        m, e, _ = gate_pairs(a, g, 62)
        return round_odd(m, e) + (True,)
    return gate_pairs(a, g, bound_bits)


# --------------------------------------------------------------------------- the layer path

def host_layers(layers, execs, bfp_cls):
    """``{name: bits}``: the host layers rule bfp_table applies to, of a network's ``layers`` (in order)
    whose engine layers run by ``execs`` (``bfp_cls``: the BFP executor class): a table op whose
    input is a BFP engine layer's output (or one moved by :data:`MOVES`; ``bits`` = ``M``) or a
    sum or product of pairs (``bits`` by rule bfp_wide_codes), with an engine layer after it."""
    made = {la.output: la for la in layers}
    engine = [k for k, la in enumerate(layers) if la.kind != "host"]
    last = engine[-1] if engine else -1
    out = {}
    for k, la in enumerate(layers):
        if la.kind != "host" or not is_table(la.op, la.attrs) or k >= last:
            continue
        src = _unmoved(la, made)
        ex = execs.get(src.name) if src is not None else None
        if isinstance(ex, bfp_cls):
            out[la.name] = int(ex.p["mantissa_bits"])
        elif src is not None and _sum_or_product(src, made) and execs \
                and all(isinstance(e, bfp_cls) for e in execs.values()):     # rule bfp_table of a sum or product
            out[la.name] = sum_code_bits(next(iter(execs.values())).p["mantissa_bits"])    # rule bfp_wide_codes
    return out


def _unmoved(layer, made):
    """The layer that made ``layer``'s input, through host ops of :data:`MOVES` (None: the network's input)."""
    src = made.get(layer.inputs[0])
    while src is not None and src.kind == "host" and src.op in MOVES:
        src = made.get(src.inputs[0])
    return src


def tabled(layer, layers):
    """Host ``layer`` (of :func:`host_layers`) reads a sum or product (rule bfp_table of one; a
    ``HardSwish`` of one is bfp_hardswish_table, a table, not bfp_hardswish)."""
    made = {la.output: la for la in layers}
    src = _unmoved(layer, made)
    return src is not None and _sum_or_product(src, made)


def _sum_or_product(src, made):
    """Host layer ``src`` is an ``Add``, a ``Mul`` or an ``AveragePool`` (or a ``Relu`` of an ``Add``): exact pairs
    whose mantissas may be wider than ``M`` (bfp_table reads them all the same: :func:`codes`)."""
    if src.kind == "host" and src.op == "Relu":
        src = made.get(src.inputs[0])
    return src is not None and src.kind == "host" and src.op in ("Add", "Mul", "AveragePool")


def host_run(layer, values, f_in, bits, rounding):
    """Rules bfp_table, bfp_hardswish in the layer path: ``(values, fmt)`` of host ``layer`` on the exact float64
    ``values`` (a BFP layer's dequantized output; ``bits`` its mantissa bits) at code radix
    ``f_in`` (bfp_table and bfp_hardswish_table; None: bfp_hardswish)."""
    m, e = pairs_of(values)
    if layer.op in EXACT and f_in is None:     # bfp_hardswish (a HardSwish of a sum or product has its code radix: bfp_hardswish_table)
        ym, ye = hardswish_pairs(m, e, bits + W_EXTRA, rounding)
        return np.ldexp(ym.astype(np.float64), ye), None
    f_o, t = table(layer.op, layer.attrs, (int(f_in), bits, True), rounding, OUT_BITS)
    q = codes(m, e, f_in, bits, rounding)
    return np.ldexp(t[q + (1 << (bits - 1))].astype(np.float64), -f_o), (int(f_o), OUT_BITS, True)
