"""Activation tables and the channel gate in integers: every unary elementwise op with an exact
definition (``HardSwish``, ``Sigmoid``, ``Gelu``, a scalar ``Scale``, ...) on a fixed-point
tensor, and a squeeze-excite block's ``Mul`` of a map by a per-channel vector, as ops of
:func:`hlsnn.deploy.lower.program.lower` for the ``shift_mac`` and ``sparse_cluster`` network modes. The layer path
(:meth:`hlsnn.deploy.run.runner.Deployment.run`) runs the same rules where the op's input is a
fixed-point tensor, so both give the same bits. The rules (``q`` a tensor's ``b``-bit
integers at radix ``F``, value ``q * 2**-F``):

Rule unary_table: **lut** (a unary activation ``f`` on a ``b``-bit code, ``b <= 12``): a table of the
   ``2**b`` codes, made once from the input's format ``(F, b, signed)`` and the deployment's
   rounding: ``T[q] = round(f(q * 2**-F) * 2**F_o)``, rounded exactly (on the rational value)
   with the rounding (``nearest_away``: half away from zero, ``nearest_even``, ``truncate``:
   floor), signed ``b`` bits. ``F_o`` is calibrated: DETERMINE on the op's float64 values on
   the calibration images (the layer path's ``table_radix``, the compiled program's host-layer
   field ``table``), each entry then saturated to ``b`` bits (a ``HardSwish`` of a ``twohot``
   layer with ``radix: lse``: DETERMINE's or up to 3 bits finer, the least squared error on
   those values, :mod:`hlsnn.deploy.quantize.radix_lse`); for the other :data:`MAX_FIT` tables
   and where no radix is recorded, the largest radix at which every entry fits without
   saturation (``F_o <= F + b``; ``b - 1`` for a table of zeros). The ops and their values
   ``f(x)``: :mod:`hlsnn.engines.network.tables`
   (:data:`UNARY`: ``HardSwish``, ``HardSigmoid``, ``Sigmoid``, ``Tanh``, ``Erf``, ``Gelu``,
   ``LeakyRelu``, ``Elu``, ``Softplus``, ``Selu``, ``Celu``, ``Softsign``, ``Mish``,
   ``ThresholdedRelu``, ``PRelu``, ``Scale``, ``AddConst`` by one scalar, ``Bipolar`` (a QONNX
   ``BipolarQuant`` of an activation: its ``+-scale``, exact at the largest radix that fits; a
   power-of-two ``scale = 2**-f`` at ``F_o = f``, codes ``+-1`` as the file's sign, the 4-bit
   kernel taking them as 5-bit signed inputs, :mod:`hlsnn.engines.sparse_cluster.lowbit`), and
   :mod:`hlsnn.deploy.rewrite.unaryfuse`'s ``UnaryChain``: ``x * g(x)`` as one op), rationals
   exact and transcendental values rounded only where a certified interval decides. The table
   is the rule: a kernel holds it as a ROM of ``2**b`` entries.

   Rule channel_table, **a table per channel** (``PRelu`` whose slope, broadcast as ONNX broadcasts it, varies along
   the channel axis only: ``nn.PReLU(C)`` after a conv, slope ``(C, 1, 1)``, or after a
   ``Linear``, ``(C,)``; :func:`channel_consts`): ``C`` tables of rule unary_table, row ``c`` with
   channel ``c``'s slope taken exactly, all at one calibrated ``F_o`` (DETERMINE on the op's
   float64 values, as rule unary_table), ``y[c, ...] = T[c, q[c, ...] - lo]``; the layer path runs the same
   (:func:`host_run`). The kernels (``shift_mac``, ``sparse_cluster``) keep one ROM copy per
   bank, bank ``j`` holding channel ``k pc + j``'s table for block ``k`` one after the other
   (:func:`lut_rom` with ``pc``); their Lut loop adds ``step_chan = 2**b`` words to its read
   offset at each block's end (rendered only for a program with such a table). BFP pairs
   (``bfp_systolic``) have no such rule: refused by name, layer by layer.
Rule channel_gate: **gate** (``Mul`` of a ``C x H x W`` map ``qa`` at ``Fa`` by a ``C``-vector ``qg`` at ``Fg``,
    the vector broadcast over the pixels): ``p = qa[c, y, x] * qg[c]`` exact (int64, radix
    ``Fa + Fg``), then requantized to the consuming engine layer's calibrated input radix
    ``F_x`` by rule residual_add's requantization of one tensor: ``shift_round_sat(p, Fa + Fg - F_x, B,
    rounding)``, exact while ``Fa + Fg <= max(F_x + 24, 0)`` (checked). The layer path
    multiplies the two exact float64 values (a product of two ``b``-bit codes is exact) and the
    engine layer converts it at ``F_x`` with :func:`hlsnn.deploy.quantize.quant.to_fixed`: the same bits.
    **The product of two maps** (``Mul`` of two computed tensors of one shape, a
    SiLU ``x * sigmoid(x)`` or a GLU-style ``a * sigmoid(b)``, field ``same``) is this rule
    element by element, ``p = qa[c, y, x] * qb[c, y, x]``: the same exact product, the same
    requantization. Its codes are ``b``-bit (``b <= 26``: a product below ``2**52``, exact in
    float64 as in int64), so the layer path's product is exact and ``to_fixed`` rounds it as
    ``shift_round_sat`` does. The kernel runs it in the gate's loop with the vector's
    address stepping every pixel (``hw`` 1 in its descriptor): both operands at the map's
    address, the one a conv or a table wrote (the earlier one when both were) waiting in the
    shortcut buffer (:func:`hlsnn.engines.network.kernel.allocate`). **A spatial gate**
    (rule spatial_gate, field ``pix``: ``Mul`` of a ``C x H x W`` map by a ``1 x H x W`` map broadcast
    over the channels, CBAM's spatial attention or scSE's sSE) is the same rule with
    ``p = qa[c, y, x] * qg[0, y, x]``: the same exact product and requantization, so the layer
    path's broadcast float64 ``Mul`` gives the same bits. The kernel (``shift_mac``,
    ``sparse_cluster``) runs it in the gate's loop with the gate's address the pixel ``p``
    and every bank taking bank 0's word (the 1 x H x W map's one channel); ``bfp_systolic``
    the same on pairs (:mod:`hlsnn.engines.bfp_systolic.network.reduce`). **A gate of a gate's
    product** (``x * s * t``) first writes the inner product as codes at a calibrated radix:
    rule gate_in (:mod:`hlsnn.engines.network.gatein`).

A table's input must be one fixed-point tensor (an engine layer's output, or a move of one);
a ``Sigmoid`` of a float (a BFP layer's output, a sum) runs on the host in float64, and so does
one after the last engine layer (the network's output stays float64: rule net_output).
"""
from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np

from .program import _chw


#: the unary elementwise ops with a table rule (rule unary_table; :func:`is_table`: Scale, AddConst and
#: PRelu only by one scalar, Gelu exact or tanh)
UNARY = ("HardSwish", "HardSigmoid", "Sigmoid", "Tanh", "Erf", "Gelu", "LeakyRelu", "Elu", "PRelu", "Scale",
         "AddConst", "Softplus", "Selu", "Celu", "Softsign", "Mish", "ThresholdedRelu", "UnaryChain", "Bipolar")
#: the ops whose table keeps the radix where every entry fits (rule unary_table's rule before the calibrated
#: one; bounded activations, for which a calibrated radix would saturate a gate's values near 1)
MAX_FIT = ("HardSwish", "HardSigmoid", "Sigmoid", "Bipolar")
#: the widest input code a table takes (2**12 entries)
MAX_TABLE_BITS = 12
#: the op kinds of this module
KINDS = ("lut", "gate")
#: the ops each engine's network kernel has a loop for (``network.cpp.j2``)
KERNEL_KINDS = {"shift_mac": ("lut", "gate"), "sparse_cluster": ("lut", "gate"),
                "bfp_systolic": ("lut", "gate")}          # bfp: rules bfp_table, bfp_gate (hlsnn.engines.bfp_systolic.network.gate)


@lru_cache(maxsize=256)
def _table(k, f_in, bits, signed, rounding, out_bits, f_out=None):
    from . import tables
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    xs = [Fraction(q) * Fraction(2) ** -f_in for q in range(lo, hi + 1)]
    bits = out_bits
    olo, ohi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1

    def at(f):
        return [tables.entry(k, x, f, rounding) for x in xs]

    if f_out is not None:                       # a calibrated radix: entries saturated to the b bits
        return int(f_out), np.clip(np.asarray(at(int(f_out)), np.int64), olo, ohi)
    if k[0] == "Bipolar" and math.frexp(dict(k[1])["scale"])[0] == 0.5:
        f = 1 - math.frexp(dict(k[1])["scale"])[1]      # +-scale = +-2**-f: codes +-1 (the file's radix)
        if olo <= -1 and f <= f_in + bits:
            return f, np.asarray(at(f), np.int64)
    m = max(abs(tables.approx(k, x)) for x in xs)
    if m == 0:
        f = bits - 1
    else:
        f = min(f_in + bits, math.floor(math.log2(ohi / m)) + 1)
    while True:
        t = at(f)
        if olo <= min(t) and max(t) <= ohi:
            break
        f -= 1
    return f, np.asarray(t, np.int64)


def table(op, attrs, fmt, rounding, out_bits=None, f_out=None):
    """Rule unary_table: ``(F_o, T)`` of unary ``op`` (its ``attrs``) on codes of the fixed-point format
    ``fmt = (F, b, signed)``: ``T`` the ``2**b`` output codes, indexed by ``q - lo`` (``lo`` the
    format's smallest code), signed ``b`` bits at radix ``F_o`` (``out_bits`` bits where given:
    the bfp network mode's wider table outputs, its rule bfp_table; ``F_o <= F + out_bits``); with
    ``f_out`` (the calibrated radix, rule unary_table's ``F_o`` by DETERMINE) ``T`` at ``F_o = f_out``,
    each entry saturated to the ``b`` bits."""
    from . import tables
    f_in, bits, signed = (int(fmt[0]), int(fmt[1]), bool(fmt[2]))
    k = tables.key(op, attrs)
    if k is None:
        raise ValueError(f"no table rule for {op}: {tables.why_not(op, attrs)}")
    return _table(k, f_in, bits, signed, rounding, int(out_bits or bits), None if f_out is None else int(f_out))


#: the ops with a table per channel (rule channel_table) and the attribute holding their constant
CHANNEL = {"PRelu": "slope"}


def channel_consts(op, attrs, ndim):
    """Rule channel_table: the per-channel constants (a float64 vector of ``C``) of host ``op`` with
    ``attrs`` on an input of rank ``ndim`` (the batch first) when its constant, broadcast as
    ONNX broadcasts it (aligned to the last axis), varies along the channel axis (axis 1) only
    and is not one scalar (which is rule unary_table's one table); else None."""
    if op not in CHANNEL or ndim is None or ndim < 2:
        return None
    v = np.asarray((attrs or {}).get(CHANNEL[op]), np.float64)
    if v.size <= 1 or v.ndim > ndim or not np.isfinite(v).all():
        return None
    shape = (1,) * (ndim - v.ndim) + v.shape
    if shape[0] != 1 or any(d != 1 for d in shape[2:]):
        return None
    return v.reshape(-1)


def channel_table(op, attrs, consts, fmt, rounding, f_out):
    """Rule channel_table: ``(F_o, T)`` with ``T`` of shape ``(C, 2**b)``: row ``c`` is rule unary_table's table of
    ``op`` with its scalar constant ``consts[c]`` (each an exact function of one value, as
    :func:`table`), all at the one calibrated radix ``f_out``, each entry saturated to the
    ``b`` bits. Channel ``c``'s code ``q`` maps to ``T[c, q - lo]``."""
    if f_out is None:
        raise ValueError(f"a table per channel of {op} needs a calibrated output radix")
    rows = [table(op, dict(attrs, **{CHANNEL[op]: float(k)}), fmt, rounding, f_out=f_out)[1] for k in consts]
    return int(f_out), np.stack(rows)


def is_table(op, attrs):
    """Host ``op`` with ``attrs`` has a table rule (:func:`hlsnn.engines.network.tables.key`)."""
    from . import tables
    return op in UNARY and tables.key(op, attrs) is not None


def applies(op, fmt, attrs=None, ndim=None):
    """The layer path runs rule unary_table (or channel_table, a table per channel, given the input's rank
    ``ndim``) for host ``op`` (its ``attrs``) on an input of format ``fmt`` (when an engine
    layer follows it: :meth:`hlsnn.deploy.run.runner.Deployment.run`)."""
    return (is_table(op, attrs) or channel_consts(op, attrs, ndim) is not None) and fmt is not None \
        and 2 <= int(fmt[1]) <= MAX_TABLE_BITS


def host_run(layer, act, rounding, f_out=None):
    """Rule unary_table in the layer path: host ``layer``'s output on the :class:`~hlsnn.deploy.quantize.quant.Act`
    ``act`` (a fixed-point tensor) as ``(values, fmt)``: the table's codes times ``2**-F_o``
    (exact), format ``(F_o, b, True)`` (``F_o`` = ``f_out``, calibrated, where given:
    ``Deployment._table_radix`` of :mod:`hlsnn.deploy.run.runner`)."""
    f, bits, signed = act.fmt
    lo = -(1 << (bits - 1)) if signed else 0
    q = act.ints()
    consts = None if is_table(layer.op, layer.attrs) else channel_consts(layer.op, layer.attrs, q.ndim)
    if consts is not None:                       # rule channel_table: channel c's row
        f_o, t = channel_table(layer.op, layer.attrs, consts, act.fmt, rounding, f_out)
        c = np.arange(q.shape[1]).reshape((1, -1) + (1,) * (q.ndim - 2))
        return np.ldexp(t[c, q - lo].astype(np.float64), -f_o), (f_o, bits, True)
    f_o, t = table(layer.op, layer.attrs, act.fmt, rounding, f_out=f_out)
    return np.ldexp(t[q - lo].astype(np.float64), -f_o), (f_o, bits, True)


def lut_ints(x, f):
    """Rule unary_table on integers ``x`` (any shape): ``T[x - lo]``; rule channel_table (``T`` of ``C`` rows, ``x``
    a batch of ``C x HW`` maps): ``T[c, x - lo]``."""
    t = np.asarray(f["table"], np.int64)
    x = np.asarray(x, np.int64)
    if t.ndim == 2:
        xs = x.reshape(x.shape[0], f["c"], -1)
        return t[np.arange(f["c"])[None, :, None], xs - f["lo"]].reshape(x.shape)
    return t[x - f["lo"]]


def gate_ints(a, g, f, bits):
    """Rule channel_gate on a batch: ``a`` (B, C, HW) and ``g`` (B, C, 1) integers, or ``g`` (B, C,
    HW) for the product of two maps (``f["same"]``), or ``g`` (B, 1, HW) for a spatial gate
    (``f["pix"]``, rule spatial_gate; numpy broadcasts it over C): (B, C, HW)."""
    from ...primitives import shift_round_sat
    p = np.asarray(a, np.int64) * np.asarray(g, np.int64)
    if "split" in f:                    # rule mixed_concat: a shift per channel range of (B, C, HW) (.catmix)
        from .joins.catmix import shifts_by_channel
        return shift_round_sat(p, shifts_by_channel(f, p.shape[1])[None, :, None], bits, f["rounding"])[0]
    return shift_round_sat(p, f["shift"], bits, f["rounding"])[0]


def lower_host(j, state, shapes, ops, bits, rounding, why, op_cls):
    """Lower host layer ``j`` if it is a table op (rule unary_table) or a gate ``Mul`` (rule channel_gate, pending
    until its engine consumer: state ``("gate", {...})``); True if it was."""
    op = j["op"]
    consts = None
    if op in UNARY and not is_table(op, j.get("attrs", {})):
        consts = channel_consts(op, j.get("attrs", {}), 1 + len(shapes.get(j["inputs"][0], ())))
        if consts is None:
            from .tables import why_not
            raise why(j, why_not(op, j.get("attrs", {})) + "; a table per channel (rule channel_table) takes a PRelu "
                         "whose slope varies along the channels only")
    if op in UNARY:
        st = state.get(j["inputs"][0])
        if st is None or st[0] != "q":
            raise why(j, "a table activation of an integer tensor computed on the fabric (not of a pending Add, "
                         "pool or gate)")
        if not 2 <= bits <= MAX_TABLE_BITS:      # the layer path's rule unary_table (applies) stops there too
            raise why(j, f"a table activation of {bits}-bit codes: a table takes codes of 2..{MAX_TABLE_BITS} bits "
                         f"(the layer path computes it in float64)")
        src = j["inputs"][0]
        c, h, w = _chw(shapes[src])
        if consts is not None:                  # rule channel_table: a table per channel
            if len(consts) != c:
                raise why(j, f"{len(consts)} slopes for {c} channels")
            f_out = (j.get("table") or {}).get("f_out")
            if f_out is None:
                raise why(j, "a table per channel without its calibrated output radix (recompile the model)")
            f_o, t = channel_table(op, j.get("attrs", {}), consts, (st[1], bits, True), rounding, f_out)
        else:
            f_o, t = table(op, j.get("attrs", {}), (st[1], bits, True), rounding,
                           f_out=(j.get("table") or {}).get("f_out"))
        ops.append(op_cls("lut", j["name"], [src], j["output"],
                          dict(c=c, hw=h * w, lo=-(1 << (bits - 1)), table=t, f_in=int(st[1]), f_out=int(f_o), fn=op)))
        state[j["output"]], shapes[j["output"]] = ("q", int(f_o)), shapes[src]
        return True
    if op != "Mul":
        return False
    ins = list(j["inputs"])
    sts = [state.get(i) for i in ins]
    if any(s is None or s[0] != "q" for s in sts):
        raise why(j, "a gate Mul of two integer tensors computed on the fabric" + (
            " (a gate of a pending gate's product: rule gate_in of hlsnn.engines.network.gatein, with its calibrated "
            "code radix gate_in; recompile the model)" if any(s is not None and s[0] == "gate" for s in sts) else ""))
    ca, cb = (_chw(shapes[i]) for i in ins)
    if (ca[1:] == (1, 1) and cb[1:] != (1, 1)) or (ca[0] == 1 < cb[0] and ca[1:] == cb[1:]):
        ins, sts, ca, cb = ins[::-1], sts[::-1], cb, ca
    same = ca == cb                                 # the product of two maps of one shape
    pix = not same and cb == (1,) + ca[1:]           # rule spatial_gate: a 1 x H x W gate over the channels
    if cb != (ca[0], 1, 1) and not same and not pix:
        raise why(j, f"a Mul of a C x H x W map by a C-vector (a channel gate), by a 1 x H x W map (a spatial "
                     f"gate) or by a map of its shape is supported, not of {tuple(shapes[ins[0]])} and "
                     f"{tuple(shapes[ins[1]])}")
    state[j["output"]] = ("gate", dict(ins=ins, fa=sts[0][1], fb=sts[1][1], c=ca[0], hw=ca[1] * ca[2], name=j["name"],
                                       same=same, pix=pix))
    shapes[j["output"]] = shapes[ins[0]]
    return True


def materialize(j, src, st, state, shapes, ops, aliases, rounding, why, op_cls, out=None):
    """An engine layer ``j`` reads the pending gate ``st``: the gate op with its requantization
    to ``j``'s ``F_x`` (rule channel_gate), as the tensor ``NAME_q`` (:func:`hlsnn.deploy.lower.program.walk`
    calls it once per gate); ``out``: another tensor (and op) name, for a second radix (rule gate_in,
    :mod:`hlsnn.engines.network.gatein`)."""
    g = st[1]
    f_x = j["f_x"]
    fp = g["fa"] + g["fb"]
    if f_x is None or np.ndim(f_x) or fp > max(f_x + 24, 0):
        raise why(j, f"the requantization from radix {fp} to {f_x} is not exact in today's host rule")
    t = out or g["name"] + "_q"
    split = {}
    if g.get("split"):                  # rule mixed_concat: a gate of a concat's mixed map, a shift per channel range
        from .joins.catmix import gate_shifts
        fp = max(fp, g["fa2"] + g["fb"])
        if fp > max(f_x + 24, 0):
            raise why(j, f"the requantization from radix {fp} to {f_x} is not exact in today's host rule")
        split = dict(split=g["split"], shift2=gate_shifts(g, f_x)[1])
    ops.append(op_cls("gate", out or g["name"], list(g["ins"]), t,
                      dict(c=g["c"], hw=g["hw"], shift=int(g["fa"] + g["fb"] - f_x), rounding=rounding,
                           same=bool(g.get("same")), pix=bool(g.get("pix")), **split)))
    shapes[t], state[t] = shapes[g["ins"][0]], ("q", f_x)


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops` for this module's ops."""
    f = op.f
    if op.kind == "lut":
        ints(op, f, ("c", "hw"), 1, 1 << 26)
        if f.get("exact") and op.f.get("fn") == "HardSwish":     # bfp rule bfp_hardswish: no table
            return
        if f.get("exact") and op.f.get("fn") == "PRelu":         # bfp rule bfp_prelu: slopes per channel
            sm, se = np.asarray(f.get("sm", ())), np.asarray(f.get("se", ()))
            if sm.shape != (f["c"],) or se.shape != (f["c"],) or np.abs(sm).max(initial=0) >= 1 << 24 \
                    or np.abs(se).max(initial=0) > 300 or not (int(f.get("t", 0)) == 0 if f.get("wide") else
                                                               1 <= int(f.get("t", 0)) <= 11):    # bfp_prelu_exact: t = 0
                raise bad(op, f"PRelu slopes {sm.shape} / {se.shape} for {f['c']} channels, t = {f.get('t')}: "
                              f"rule bfp_prelu takes one 24-bit mantissa and exponent a channel, t in 1..11 (bfp_prelu_exact: 0)")
            return
        if f.get("exact") and op.f.get("fn") == "Clip":          # bfp rule bfp_clip: Clip(0 or None, h 2**k)
            hk = f.get("clip")
            if not (isinstance(hk, (list, tuple)) and len(hk) == 2 and 0 < int(hk[0]) < 1 << 25
                    and -512 <= int(hk[1]) <= 511):
                raise bad(op, f"a Clip bound {hk}: (h, k) with 0 < h < 2**25, -512 <= k <= 511")
            return
        t = np.asarray(f.get("table", ()))
        if t.ndim == 2 and t.shape[0] != f["c"]:
            raise bad(op, f"{t.shape[0]} tables for {f['c']} channels (rule channel_table: one a channel)")
        n = t.shape[-1] if t.ndim in (1, 2) else 0
        if t.ndim not in (1, 2) or n < 4 or n > 1 << MAX_TABLE_BITS or n & (n - 1) or f.get("lo") != -(n // 2):
            raise bad(op, f"a table of {n} entries from code {f.get('lo')}: 2**b entries (b 2..12) from "
                          f"-2**(b-1), one table or one a channel")
        return
    ints(op, f, ("c", "hw"), 1, 1 << 26)
    ints(op, f, ("shift",), -62, 62)
    if len(op.ins) != 2:
        raise bad(op, f"{len(op.ins)} inputs: a gate multiplies a map by a vector or by a map of its shape")
    if f.get("same", False) not in (True, False):
        raise bad(op, f"same = {f.get('same')!r}: true (a map times a map) or false (times a C-vector)")
    if f.get("pix", False) not in (True, False) or (f.get("pix") and f.get("same")):
        raise bad(op, f"pix = {f.get('pix')!r}: true (times a 1 x H x W map, rule spatial_gate; not with same) or false")


def run(op, get, b, bits):
    """Rules unary_table and channel_gate on a batch of ``b`` images."""
    f = op.f
    if op.kind == "lut":
        return lut_ints(get(op.ins[0]), f)
    a = np.asarray(get(op.ins[0]), np.int64).reshape(b, f["c"], f["hw"])
    g = np.asarray(get(op.ins[1]), np.int64).reshape(
        (b, 1, f["hw"]) if f.get("pix") else (b, f["c"], f["hw"] if f.get("same") else 1))
    return gate_ints(a, g, f, bits)


def lut_rom(net, bits=8, pc=None):
    """The network kernels' table ROM ``kLut``: every lut op's ``2**bits`` codes one after the
    other (int64; one zero table when there is none), each op's first word in its field ``rom``.
    With ``pc`` (the channel banks): ``(pc, words)``, bank ``j``'s copy, where a table per
    channel (rule channel_table) holds, for each block ``k`` of ``pc`` channels, channel ``k pc + j``'s
    table (zeros past the last channel), and the op's field ``rstep`` is ``2**bits`` (0 for one
    table): the Lut loop reads bank ``j`` at ``rom + k rstep + q - lo``. Equal tables are stored
    once (an unrolled recurrent cell's gates, step after step): an op whose table equals an
    earlier op's reads that op's words."""
    from ...errors import InputError
    parts, seen = [], {}
    for op in net.ops:
        if op.kind == "lut":
            t = np.asarray(op.f["table"], np.int64)
            if t.shape[-1] != 1 << bits:
                raise InputError(f"network kernel: {op.name}: a table of {t.shape[-1]} codes for {bits}-bit "
                                 f"activations")
            key = (t.shape, t.tobytes())
            if key in seen:
                op.f["rom"], op.f["rstep"] = seen[key]
                continue
            op.f["rom"] = sum(p.shape[-1] for p in parts)
            op.f["rstep"] = 0
            if t.ndim == 2:
                if pc is None:
                    raise InputError(f"network kernel: {op.name}: a table per channel (rule channel_table) in a kernel "
                                     f"without its per-bank tables")
                nb = -(-t.shape[0] // pc)
                tp = np.zeros((nb * pc, t.shape[1]), np.int64)
                tp[:t.shape[0]] = t
                op.f["rstep"] = 1 << bits
                parts.append(tp.reshape(nb, pc, -1).transpose(1, 0, 2).reshape(pc, -1))
            else:
                parts.append(t if pc is None else np.tile(t, (pc, 1)))
            seen[key] = (op.f["rom"], op.f["rstep"])
    if not parts:
        z = np.zeros(1 << bits, np.int64)
        return z if pc is None else np.tile(z, (pc, 1))
    return np.concatenate(parts, axis=-1)


def lut_roms(net, bits, pc):
    """A network kernel's tables: ``(luts, banks)``, :func:`lut_rom`'s one copy and, where the
    program has a table per channel (:func:`channel_luts`), its ``(pc, words)`` copies per bank
    (``luts`` is then bank 0's, which sizes the ROM), else None."""
    if channel_luts(net):
        banks = lut_rom(net, bits, pc)
        return banks[0], banks
    return lut_rom(net, bits), None


def channel_luts(net):
    """The program has a table per channel (rule channel_table: the kernels render the Lut loop's block
    counter and a ROM copy per bank)."""
    return any(op.kind == "lut" and np.ndim(op.f.get("table", ())) == 2 for op in net.ops)


def gate_descriptor(op, f, d, place, name, pc, bits=8):
    """Fill the network kernel's descriptor ``d`` of a lut op (``woff`` its table's first ROM
    word, :func:`lut_rom`) or a gate op (``single``: the map in an activation buffer and the
    vector in the shortcut buffer, else the other way round; ``hw`` the map's pixels, 1 for the
    product of two maps: the second operand's address then steps with the map's); return the
    bits the gate's product of two ``bits``-bit activations needs (0 for a table)."""
    from ...errors import InputError
    n_iter = -(-f["c"] // pc) * f["hw"]
    if op.kind == "lut":
        src = place[name(op.ins[0])][0]
        if src is None:
            raise InputError(f"network kernel: {op.name}: its input is not in an activation buffer")
        d.update(src=src, hw=f["hw"], woff=f["rom"], step_chan=f.get("rstep", 0), n_iter=n_iter)
        return 0
    a, g = (name(t) for t in op.ins)                 # the map and the vector (netgate.lower_host)
    main, short = f.get("main"), f.get("short")
    if {main, short} != {a, g} or place[main][0] is None or not place[short][1]:
        raise InputError(f"network kernel: {op.name}: a gate of two tensors, the one made first in the shortcut "
                         f"buffer, is supported")
    d.update(src=place[main][0], hw=1 if f.get("same") else f["hw"], shift=f["shift"], single=int(main == a),
             pix=int(bool(f.get("pix"))),
             n_iter=n_iter)
    if "split" in f:                    # a mixed map's gate (rule mixed_concat, .catmix): shift sb from channel cg
        d.update(cg=f["split"], sb=f["shift2"])
    return 2 * bits + 2
