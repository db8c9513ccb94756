"""Attention on BFP pairs: the rules of a ``bfp_systolic`` attention network's host
ops, written once here and run by the layer path (:func:`hlsnn.deploy.run.attnrun.layer_run`, the
engine's ``MatMulAct`` through :mod:`hlsnn.deploy.run.actmm_engine`) and by the network mode
(:func:`lower_host` in the one walk, :func:`run` in :func:`hlsnn.engines.bfp_systolic.network.lower.run`), so both give the same
bits. Elements are pairs ``(m, e)`` (value ``m * 2**e``, :mod:`hlsnn.engines.bfp_systolic.network.lower`'s rule bfp_pairs); ``M`` =
``mantissa_bits``, ``rnd`` the deployment's ``rounding`` (as rule bfp_table's codes; rule bfp_act_matmul's GEMM
rounds by the accel config's, as the engine does).

Rule bfp_pair_codes: **codes of pairs** (the entry of every rule below that rounds to a radix): the op's input
    pairs written as ``b = M``-bit signed codes at the radix ``F_i`` calibrated on the op's
    input values (DETERMINE, :func:`hlsnn.deploy.quantize.quant.host_radix` with the deployment's
    overflow ratio; the compiled program's host-layer field ``pair_in``): rule bfp_table's
    conversion :func:`hlsnn.engines.bfp_systolic.network.gate.codes`, ``q =
    shift_round_sat(m, -(e + F_i), b, rnd)``, exactly ``round(m 2**(e + F_i))`` saturated.
    Error: half a unit at ``F_i``, and what DETERMINE's overflow ratio lets saturate.
Rule bfp_attn_gather: **gather** of pairs (a head split or merge, :mod:`hlsnn.engines.network.tokens.attention` rule
    attn_gather's pattern): mantissas and exponents move together; exact. class_token on pairs: a class token's
    constants are pairs of their float values (exact: :func:`pairs_of`), no rounding. bfp_scale: a
    ``Scale`` of q and k by a constant ``c`` is the exact product ``(m cm, e + ce)`` by ``c``
    rounded to :data:`SCALE_BITS` significant bits, ``cm 2**ce`` (:func:`odd_pair`; relative
    error ``2**-SCALE_BITS``), held rounded to odd at :data:`ODD_BITS` significant bits (the
    kernel's element; rule bfp_round_odd's argument: rule bfp_act_matmul's blocks round it to ``M <= ODD_BITS - 1``
    bits at an exponent no finer than its own leading one's less ``M - 2``, so they round it as the
    exact product). The layer path multiplies the exact values by the same constant in float64,
    exactly, and its rule bfp_act_matmul gives the same bits.
Rule bfp_add_const: **addc** (a position embedding ``x + P``): rule bfp_pair_codes's codes at ``F_i``, then rule add_const on
    them (:func:`~hlsnn.engines.network.tokens.attention.addc`, codes at the calibrated ``F_o``, field
    ``codes``); the output pairs are ``(y, -F_o)``.
Rule bfp_act_matmul: **actmm**, a ``MatMul`` of two BFP activations (``Q Kᵀ``, ``P V`` per head): the engine's
    own GEMM with ``B`` as its weights (:mod:`hlsnn.deploy.run.actmm_engine`'s rule): each row of
    ``A`` (``T x K``) one block (:mod:`hlsnn.engines.bfp_systolic.network.lower` rule bfp_conv's exponent ``clamp(L - (M - 2))`` over
    the row's leading ones, mantissas ``shift_round_sat`` to ``M`` bits), each column of ``B``
    one block (``weight_exponent: row``; ``tensor``: one for the head's ``B``), the exact
    products and the max rule per output row (:func:`hlsnn.engines.bfp_systolic.emulator.emulate`,
    no bias, no ReLU): pairs ``(ym, e4)``, one exponent per row of scores. The shared
    exponents carry the scores' range: no calibrated radix. ``S <= max_n``.
Rule bfp_softmax: **softmax** over the keys: rule bfp_pair_codes's codes at ``F_i`` (``b = M``), then rule int_softmax
    (:func:`~hlsnn.engines.network.tokens.attention.softmax` with ``exp_table(F_i, M)``); the output
    pairs are ``(y, -(M - 1))``. Error: rule int_softmax's bound plus rule bfp_pair_codes's rounding of the scores.
Rule bfp_layer_norm: **plnorm**, ``LayerNormalization`` over the features of ``(T, F)`` rows of pairs: rule bfp_pair_codes's
    codes at ``F_i``, rule layer_norm's normalized codes at radix ``k``
    (:func:`hlsnn.engines.network.tokens.layernorm.normalized`), then ``shift_round_sat`` to ``M`` bits
    at the calibrated ``F_o`` (field ``codes``; rule layer_norm_codes); the output pairs are ``(y, -F_o)``.

The residual ``Add``, the token mean and the GELU table are the network mode's rules bfp_add, bfp_global_pool and bfp_table
as in every BFP network. The ``bfp_systolic`` network kernel runs the rules above in its loops
(:mod:`.attnkern`, ``hls/engines/bfp_systolic/network_attention.j2``).
"""
from __future__ import annotations

import numpy as np

from ...network.tokens import attention as at
from .gate import codes, emit, pairs_of

#: the op kinds of the rules above (``plnorm`` is bfp_layer_norm; the others share rule attn_gather, add_const, act_matmul and int_softmax's names, with
#: the field ``pairs``)
KINDS = ("gather", "addc", "actmm", "softmax", "plnorm", "pscale")
#: the compiled program's revision from which the layer path runs these rules
#: (:data:`hlsnn.deploy.lower.programrev.ATTENTION_PAIRS`; before: float64 on the host)
REVISION = 8
#: rule bfp_scale: the widest constant mantissa (a float32's significand)
SCALE_BITS = 24
#: rule bfp_scale: the product's significant bits, rounded to odd (:data:`.reduce.ODD_BITS`'s argument:
#: ``>= M + 1``, so rule bfp_act_matmul's rounding of it is the exact product's)
ODD_BITS = 25


# ---- the rules (the specification) -------------------------------------------------------------

def block(m, e, p, axis):
    """Rule bfp_conv's blocks of pairs along ``axis``: ``(xm, xe)``, mantissas (``M`` bits) and one
    exponent per block (``axis`` kept, of size 1). An all-zero block's exponent is its clamped
    ``kLow`` (its mantissas are 0: no output reads it but as a zero)."""
    from ....primitives import msb_index, shift_round_sat
    m, e = np.asarray(m, np.int64), np.asarray(e, np.int64)
    low = np.iinfo(np.int64).min
    lop = np.where(m != 0, msb_index(np.abs(m)) + e, low).max(axis=axis, keepdims=True)
    E = p["exponent_bits"]
    xe = np.clip(np.where(lop == low, 0, lop) - (p["mantissa_bits"] - 2), -(1 << (E - 1)), (1 << (E - 1)) - 1)
    return shift_round_sat(m, np.clip(xe - e, -63, 63), p["mantissa_bits"], p["rounding"])[0], xe


def actmm_pairs(a, b, p):
    """Rule bfp_act_matmul on pairs ``a = (m, e)`` (G, T, K) and ``b`` (G, K, S): pairs (G, T, S)."""
    from ..emulator import emulate
    am, ae = block(a[0], a[1], p, axis=2)                      # (G, T, K), (G, T, 1)
    bm, be = block(b[0], b[1], p, axis=1 if p["weight_exponent"] == "row" else (1, 2))   # (G, 1, S) or (G, 1, 1)
    g, t, _ = am.shape
    s = bm.shape[2]
    ym, ye = np.empty((g, t, s), np.int64), np.empty((g, t, s), np.int64)
    for i in range(g):
        y, e4, _ = emulate(p, am[i], ae[i, :, 0], bm[i].T, np.broadcast_to(be[i].reshape(-1), (s,)), None, 0)
        ym[i], ye[i] = y, np.asarray(e4, np.int64).reshape(-1, 1)
    return ym, ye


def softmax_pairs(x, f_in, bits, rounding):
    """Rule bfp_softmax on pairs (..., n): pairs (..., n)."""
    y = at.softmax(codes(x[0], x[1], f_in, bits, rounding), at.exp_table(f_in, bits), bits)
    return y, np.full(y.shape, -(int(bits) - 1), np.int64)


def addc_pairs(x, cq, f_in, g, f_out, bits, rounding):
    """Rule bfp_add_const on pairs ``x`` (B, n) with rule add_const's constant ``cq`` at radix ``g``."""
    y = at.addc(codes(x[0], x[1], f_in, bits, rounding), cq, f_in, g, f_out, bits, rounding)
    return y, np.full(y.shape, -int(f_out), np.int64)


def lnorm_pairs(x, plan, f_out, bits, rounding):
    """Rule bfp_layer_norm on pairs (..., C) over the last axis, with ``plan`` rule layer_norm's constants for
    ``bits``-bit codes at the input radix ``F_i = plan["f_in"]``."""
    from ....primitives import shift_round_sat
    from ...network.tokens.layernorm import normalized
    q = codes(x[0], x[1], plan["f_in"], bits, rounding)
    y = shift_round_sat(normalized(q, plan, rounding), plan["k"] - int(f_out), bits, rounding)[0]
    return y, np.full(y.shape, -int(f_out), np.int64)


def odd_pair(c):
    """Rule bfp_scale's constant: ``c`` rounded to :data:`SCALE_BITS` significant bits (half to even)
    as ``cm * 2**ce`` with ``cm`` odd (0: ``(0, 0)``)."""
    fr, ex = np.frexp(np.float64(c))
    m, e = int(np.rint(np.ldexp(fr, SCALE_BITS))), int(ex) - SCALE_BITS
    while m and not m & 1:
        m, e = m >> 1, e + 1
    return m, e


def odd_pairs(m, e):
    """Pairs with odd mantissas (trailing zero bits moved to the exponent; zero: ``(0, 0)``), the
    same values: a float32 constant's mantissa then fits the kernel's element."""
    m, e = np.asarray(m, np.int64).copy(), np.asarray(e, np.int64).copy()
    for _ in range(64):
        even = (m != 0) & (m % 2 == 0)
        if not even.any():
            break
        m[even] //= 2
        e[even] += 1
    return m, np.where(m != 0, e, 0)


def scale_pairs(x, cm, ce):
    """Rule bfp_scale on pairs: the exact product ``(m * cm, e + ce)`` held rounded to odd at
    :data:`ODD_BITS` significant bits (``|m| < 2**26``)."""
    from ....primitives import msb_index
    p = np.asarray(x[0], np.int64) * int(cm)
    a = np.abs(p)
    r = np.maximum(msb_index(a) - (ODD_BITS - 1), 0)
    kept = a >> r
    o = kept | ((kept << r) != a).astype(np.int64)
    return np.where(p < 0, -o, o), np.asarray(x[1], np.int64) + int(ce) + r


def lnorm_plan(c, f_in, bits, attrs):
    """Rule layer_norm's constants for rule bfp_layer_norm (with ``f_in``), or a string saying why not."""
    from ...network.tokens.layernorm import plan
    p = plan(c, f_in, bits, attrs["epsilon"], attrs.get("scale"), attrs.get("bias"))
    return dict(p, f_in=int(f_in)) if isinstance(p, dict) else p


# ---- the network mode ---------------------------------------------------------------------------

def lower_host(steps, j, st, w):
    """Lower host layer ``j`` of a BFP attention network (a compiled program of revision
    :data:`REVISION` or later with a ``MatMulAct``) when it is one
    of the rules above; True if it was."""
    from ...network.program import Op, _why
    program = steps.program
    op, a = j["op"], j.get("attrs") or {}
    if int(program.get("revision", 1)) < REVISION or \
            not any(lj.get("op") == "MatMulAct" for lj in program["layers"]):
        return False
    ins = list(j["inputs"])
    sts = [w.state.get(i) for i in ins]
    if op == "LayerNormalization" and sts[0] is not None and sts[0][0] == "add" and sts[0][1].get("p") is None:
        ins[0] = steps.materialize_add(j, sts[0][1], w)          # rule bfp_add's exact sum, then bfp_layer_norm
        sts[0] = w.state[ins[0]]
    if any(s is None or s[0] != "q" for s in sts):
        return False
    M, rnd = steps.p["mantissa_bits"], steps.table_rounding          # the deployment's rounding (as rule bfp_table)
    pin = (j.get("pair_in") or {}).get("f_in")
    if op in ("Reshape", "Flatten") and w.aliases.get(ins[0], ins[0]) in w.__dict__.get("gathers", {}):
        return at._reshaped_gather(j, program, w)
    if op == "SwCompute" and a.get("fn") == "Concat" and len(ins) == 1:      # rule class_token on pairs
        got = at.concat_index(a, 0, 8, "nearest_even")                       # (the pattern; consts below)
        if got is None:
            return False
        cs = [np.asarray(v, np.float64).reshape(-1) for k, v in a["operands"] if k == "c"]
        cm, ce = odd_pairs(*pairs_of(np.concatenate(cs) if cs else np.zeros(0)))
        return emit(w, j, "gather", [ins[0]], at._per_image(a["out_shape"]), n=len(got[0]), idx=got[0], cm=cm, ce=ce,
                    pairs=True)
    if op == "SwMove":
        before = {id(o) for o in w.ops}
        if not at.lower_host(dict(j), program, w, _CodeView(steps), _why, Op):
            return False
        for o in w.ops:
            if id(o) not in before:
                o.f["pairs"] = True                                   # rule bfp_attn_gather: pairs move
        return True
    if op == "Scale" and not a.get("divide") and np.size(a["c"]) == 1:          # rule bfp_scale: q and k scaled
        cm, ce = odd_pair(float(np.asarray(a["c"], np.float64).reshape(-1)[0]))
        return emit(w, j, "pscale", [ins[0]], w.shapes[ins[0]], cm=int(cm), ce=int(ce))
    if op == "MapToRows" and len(a.get("lead", ())) > 1 and all(d == 1 for d in a["lead"][1:]):
        return at._rows_back(j, w, _why, Op) is not None
    if op == "AddConst" and "codes" in j and pin is not None:
        fo = int(j["codes"]["f_out"])
        shape = tuple(w.shapes[ins[0]])
        c = at.const_image(a["c"], shape)
        p = "a constant that does not broadcast to one image" if c is None else at.addc_plan(c.reshape(-1), pin, fo)
        if isinstance(p, str):
            raise _why(j, p)
        return emit(w, j, "addc", [ins[0]], shape, n=int(np.prod(shape)), f_in=int(pin), g=p["g"], f_out=fo,
                    cq=p["cq"].reshape(-1), rounding=rnd, bits=M, pairs=True)
    if op == "MatMulAct" and len(ins) == 2:
        sa, sb = (tuple(int(d) for d in s) for s in a["in_shapes"])
        if sb[-1] > steps.p["max_n"]:
            raise _why(j, f"a MatMul of two activations with {sb[-1]} columns: at most max_n = {steps.p['max_n']}")
        return emit(w, j, "actmm", ins, at._per_image(a["out_shape"]), sa=sa, sb=sb,
                    so=tuple(int(d) for d in a["out_shape"]), shift=0, pairs=True)
    if op == "SwCompute" and a.get("fn") == "Softmax" and at.last_axis(a) and pin is not None:
        shape = at._per_image(a["out_shape"])
        n = int(a["in_shapes"][0][-1])
        return emit(w, j, "softmax", [ins[0]], shape, rows=int(np.prod(shape)) // n, n=n,
                    table=at.exp_table(pin, M), f_in=int(pin), bits=M, rounding=rnd, pairs=True)
    if op == "LayerNormalization" and "codes" in j and pin is not None and len(w.shapes[ins[0]]) == 2:
        t_, c_ = (int(d) for d in w.shapes[ins[0]])
        pl = lnorm_plan(c_, pin, M, a)
        if isinstance(pl, str):
            raise _why(j, pl)
        return emit(w, j, "plnorm", [ins[0]], (t_, c_), rows=t_, c=c_, plan=pl, f_out=int(j["codes"]["f_out"]),
                    bits=M, rounding=rnd)
    if op == "SwCompute" and a.get("fn") == "ReduceMean" and list(a.get("axes", ())) == [1] \
            and len(a["in_shapes"][0]) == 3 and int(a["in_shapes"][0][0]) == 1 and not a.get("keepdims"):
        return at._token_mean(j, w, Op)
    return False


class _CodeView:
    """``steps`` as rule attn_gather's lowering reads it (a move of pairs: no radix, no bits)."""
    def __init__(self, steps):
        self.bits, self.rounding, self.engine = 8, steps.rounding, "bfp_pairs"


def run(op, get, b, p):
    """the pair attention rules (bfp_attn_gather to bfp_softmax) and bfp_layer_norm on a batch of ``b`` images: the output pairs ``(m, e)``, (B, n)."""
    f = op.f
    m, e = (np.asarray(v, np.int64).reshape(b, -1) for v in get(op.ins[0]))
    if op.kind == "gather":
        cm, ce = f.get("cm", ()), f.get("ce", ())
        return at.gather(m, f["idx"], cm), at.gather(e, f["idx"], ce)
    if op.kind == "pscale":
        return scale_pairs((m, e), f["cm"], f["ce"])
    if op.kind == "addc":
        return addc_pairs((m, e), f["cq"][None, :], f["f_in"], f["g"], f["f_out"], f["bits"], f["rounding"])
    if op.kind == "softmax":
        y = softmax_pairs((m.reshape(b, f["rows"], f["n"]), e.reshape(b, f["rows"], f["n"])), f["f_in"], f["bits"],
                          f["rounding"])
        return tuple(v.reshape(b, -1) for v in y)
    if op.kind == "plnorm":
        y = lnorm_pairs((m.reshape(b, f["rows"], f["c"]), e.reshape(b, f["rows"], f["c"])), f["plan"], f["f_out"],
                        f["bits"], f["rounding"])
        return tuple(v.reshape(b, -1) for v in y)
    sa, sb = f["sa"], f["sb"]                                   # actmm
    mb, eb = (np.asarray(v, np.int64).reshape(b, -1) for v in get(op.ins[1]))
    lead = np.broadcast_shapes((b,) + tuple(sa[:-2]), (b,) + tuple(sb[:-2]))
    r = len(lead)

    def lifted(v, s):
        v = v.reshape((b,) + (1,) * (r - 1 - len(s[:-2])) + tuple(s))
        return np.broadcast_to(v, lead + tuple(s[-2:])).reshape((-1,) + tuple(s[-2:]))
    ym, ye = actmm_pairs((lifted(m, sa), lifted(e, sa)), (lifted(mb, sb), lifted(eb, sb)), p)
    return ym.reshape(b, -1), ye.reshape(b, -1)


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.netcheck.check_ops` for rules bfp_layer_norm (``plnorm``) and bfp_scale (``pscale``)."""
    f = op.f
    if op.kind == "pscale":
        if not isinstance(f.get("cm"), int) or abs(f["cm"]) > 1 << SCALE_BITS:
            raise bad(op, f"a constant mantissa {f.get('cm')!r}: an int up to 2**{SCALE_BITS}")
        ints(op, f, ("ce",), -400, 400)
        return
    ints(op, f, ("rows", "c"), 1, 1 << 16)
    ints(op, f, ("bits",), 2, 12)
    for k in ("c", "e", "fg", "k", "f_in"):
        if k not in f["plan"]:
            raise bad(op, f"rule layer_norm's constants without {k}")
    if np.shape(f["plan"]["g"]) != (f["c"],):
        raise bad(op, f"scale codes of shape {np.shape(f['plan']['g'])}: one per feature ({f['c']})")

