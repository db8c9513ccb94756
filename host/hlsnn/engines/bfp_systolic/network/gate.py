"""Tables and the channel gate on BFP activations (issue 52): the rules 9b and 10b of the
``bfp_systolic`` network mode (:mod:`hlsnn.engines.bfp_systolic.network.lower`), which the
layer path runs as well (:func:`host_layers`, :func:`host_run`), so both give the same bits.

A BFP activation is a pair ``(m, e)`` per element (value ``m * 2**e``), not one ``b``-bit
code, so a table of codes (:mod:`hlsnn.engines.network.gate` rule 9) cannot hold it as it is.
Rule 9b first writes the pair as a ``b``-bit fixed-point code at a radix point chosen at
calibration, then looks the code up in rule 9's table:

9b. **lut on pairs** (a ``HardSwish``, ``HardSigmoid`` or ``Sigmoid`` whose input is a BFP
    engine layer's output and after which an engine layer still runs): ``F`` is DETERMINE's
    radix point (:func:`hlsnn.deploy.quant.host_radix`, the deployment's ``overflow_ratio``)
    for ``b``-bit signed codes of the op's input on the calibration images (``b`` = the
    producing layer's ``mantissa_bits``), fixed after calibration (``dynamic`` mode: every
    batch). Each element's code is ``q = shift_round_sat(m, clamp(-(e + F), -(b + 1), 62), b,
    rounding)`` with the deployment's ``rounding``: exactly ``round(m * 2**e * 2**F)``
    saturated to ``b`` bits (the clamp changes no result: a left shift by ``b + 1`` already
    saturates every non-zero code, and a right shift by 62 leaves ``|m| < 2**54`` below a
    half). The output element is ``(T[q - lo], -F_o)`` with ``(F_o, T) = table(op, attrs,
    (F, b, signed), rounding)`` of rule 9 (the same table, exact). The output is a fixed-point
    tensor at ``F_o`` held as pairs: later rules read it as pairs.
10b. **gate on pairs** (``Mul`` of a ``C x H x W`` map by a ``C``-vector, both pairs): ``(ma *
    mg, ea + eg)``, the exact product, its exponent kept; no requantization (the next engine
    layer's patches re-block it by rule 3). The layer path's float64 product of the two exact
    values is the same value, and the next layer quantizes its float64 input by the same rule 3,
    so the bits agree. The kernel keeps a product in its 26-bit element: ``|ma * mg| < 2**25``
    (:class:`~hlsnn.engines.bfp_systolic.network.lower.NotExact` otherwise, raised by its
    ``run``; a gate of two
    ``b``-bit or ``M``-bit mantissas, ``b, M <= 12``, always fits).

Tested against an independent float64/Fraction reference of the rule
(``tests/deploy/test_network_bfp_gate.py``)."""
from __future__ import annotations

import numpy as np

from ....primitives import shift_round_sat
from ...network.gate import UNARY, table


def codes(m, e, f, bits, rounding):
    """Rule 9b's codes of the pairs ``(m, e)`` (``|m| < 2**54``) at radix ``f``."""
    m, e = np.asarray(m, np.int64), np.asarray(e, np.int64)
    s = np.clip(-(e + int(f)), -(bits + 1), 62)
    return shift_round_sat(m, s, bits, rounding)[0]


def pairs_of(values):
    """Exact float64 ``values`` as pairs ``(m, e)``, ``|m| < 2**53`` (zero: ``(0, 0)``)."""
    fr, ex = np.frexp(np.asarray(values, np.float64))
    m = np.ldexp(fr, 53).astype(np.int64)
    return m, np.where(m != 0, ex.astype(np.int64) - 53, 0)


def lut_pairs(x, f):
    """Rule 9b on pairs ``x = (m, e)`` (any shape) with the lut op's fields ``f``."""
    q = codes(x[0], x[1], f["f_in"], f["bits"], f["rounding"])
    t = np.asarray(f["table"], np.int64)
    y = t[q - f["lo"]]
    return y, np.full(y.shape, -int(f["f_out"]), np.int64)


def gate_pairs(a, g, bound_bits):
    """Rule 10b on a batch: the map ``a`` (B, C, HW) and the vector ``g`` (B, C, 1) pairs:
    ``(m, e, ok)``, ``ok`` False where a product reaches ``2**bound_bits``."""
    ma, ea = (np.asarray(v, np.int64) for v in a)
    mg, eg = (np.asarray(v, np.int64) for v in g)
    big = (np.abs(ma) >= 1 << 31).any() or (np.abs(mg) >= 1 << 31).any()      # beyond int64's product
    m = ma * mg
    ok = not big and not (np.abs(m) >= 1 << bound_bits).any()
    return m, np.broadcast_to(ea + eg, m.shape).copy(), ok


# --------------------------------------------------------------------------- the network mode

def lower_host(steps, j, st, w):
    """:meth:`BfpSteps.host` for rules 9b and 10b: True if ``j`` was lowered; :class:`InputError`
    (by :func:`hlsnn.deploy.program._why`) for a table or gate without a rule here."""
    from ...network.program import Op, _chw, _why
    op = j["op"]
    if op in UNARY:
        tab = j.get("bfp_table")
        if st[0] != "q" or tab is None:
            raise _why(j, f"{op} of BFP values with no calibrated code radix (rule 9b of "
                          f"hlsnn.engines.bfp_systolic.network.gate: a table of a BFP engine layer's output, "
                          f"calibrated by the layer path, with an engine layer after it)")
        src = j["inputs"][0]
        bits, f_in = int(tab["bits"]), int(tab["f_in"])
        f_o, t = table(op, j.get("attrs", {}), (f_in, bits, True), steps.table_rounding)
        c, h, w_ = _chw(w.shapes[src])
        w.ops.append(Op("lut", j["name"], [src], j["output"], dict(c=c, hw=h * w_, lo=-(1 << (bits - 1)), table=t,
                        f_in=f_in, f_out=int(f_o), bits=bits, fn=op, rounding=steps.table_rounding)))
        w.state[j["output"]], w.shapes[j["output"]] = ("q", None), w.shapes[src]
        return True
    if op != "Mul":
        return False
    ins = list(j["inputs"])
    sts = [w.state.get(i) for i in ins]
    if len(ins) != 2 or any(s is None or s != ("q", None) for s in sts):
        raise _why(j, "a gate Mul of two BFP tensors computed on the fabric (engine layers' or tables' outputs)")
    ca, cb = (_chw(w.shapes[i]) for i in ins)
    if ca[1:] == (1, 1) and cb[1:] != (1, 1):
        ins, ca, cb = ins[::-1], cb, ca
    if cb != (ca[0], 1, 1):
        raise _why(j, f"a Mul of a C x H x W map by a C-vector (a channel gate) is supported, not of "
                      f"{tuple(w.shapes[ins[0]])} and {tuple(w.shapes[ins[1]])}")
    w.ops.append(Op("gate", j["name"], ins, j["output"], dict(c=ca[0], hw=ca[1] * ca[2], shift=0)))
    w.state[j["output"]], w.shapes[j["output"]] = ("q", None), w.shapes[ins[0]]
    return True


def run(op, get, shaped, bound_bits):
    """Rules 9b and 10b of one op on a batch (``shaped(pair, shape)``: the pair as (B, *shape)):
    ``(m, e, ok)`` (``ok``: every gate product below ``2**bound_bits``)."""
    f = op.f
    if op.kind == "lut":
        return lut_pairs(get(op.ins[0]), f) + (True,)
    a = shaped(get(op.ins[0]), (f["c"], f["hw"]))
    g = shaped(get(op.ins[1]), (f["c"], 1))
    return gate_pairs(a, g, bound_bits)


# --------------------------------------------------------------------------- the layer path

def host_layers(layers, execs, bfp_cls):
    """``{name: bits}``: the host layers rule 9b applies to, of a network's ``layers`` (in order)
    whose engine layers run by ``execs`` (``bfp_cls``: the BFP executor class): a table op whose
    input is a BFP engine layer's output, with an engine layer after it."""
    made = {la.output: la for la in layers}
    engine = [k for k, la in enumerate(layers) if la.kind != "host"]
    last = engine[-1] if engine else -1
    out = {}
    for k, la in enumerate(layers):
        if la.kind != "host" or la.op not in UNARY or k >= last:
            continue
        src = made.get(la.inputs[0])
        ex = execs.get(src.name) if src is not None else None
        if isinstance(ex, bfp_cls):
            out[la.name] = int(ex.p["mantissa_bits"])
    return out


def host_run(layer, values, f_in, bits, rounding):
    """Rule 9b in the layer path: ``(values, fmt)`` of host ``layer`` on the exact float64
    ``values`` (a BFP layer's dequantized output) at code radix ``f_in``."""
    m, e = pairs_of(values)
    f_o, t = table(layer.op, layer.attrs, (int(f_in), bits, True), rounding)
    q = codes(m, e, f_in, bits, rounding)
    return np.ldexp(t[q + (1 << (bits - 1))].astype(np.float64), -f_o), (int(f_o), bits, True)
