"""A ``PRelu`` with one slope per channel on BFP pairs (netbfp rule bfp_prelu): ``nn.PReLU(C)``
after a BFP conv or dense layer (h_jet_bnin's per-feature ``PReLU``) ran layer by layer in
bfp8, "a table (rule unary_table) is a function of one value"; two-hot and fixed8 have rule channel_table (a table
per channel of codes). The layer path is unchanged: its float64 ``PRelu``
(:mod:`hlsnn.deploy.run.hostextra`: ``x`` or ``slope_c * x``) of the layer's exact pairs, which the
next BFP engine layer quantizes by its rule bfp_conv (per patch: the leading one ``L`` of the largest
``|v|``, then ``R(v 2**-xe)`` to ``M``-bit mantissas, ``xe = L - M + 2``).

Rule bfp_prelu: **PReLU per channel on pairs**, for an input that is a BFP engine layer's output
    (``|m| < 2**(M-1)``) read only by engine layers (through aliases): ``m >= 0`` gives ``(m, e)``;
    else with the slope ``s_c = S_c 2**E_c`` (float32: ``S_c`` an integer of 24 bits, exact),
    ``P = m S_c`` (exact, ``|P| < 2**(M + 23)``), the output is ``(+-r, e + E_c + t)`` with ``t = M - 1``
    and ``r = (|P| >> t) | sticky``, ``sticky`` 1 when a dropped bit is 1 (the product *rounded
    to odd* at ``t`` bits below its units; ``|r| < 2**24``, in the kernel's element), ``(0, 0)``
    for a product of zero.

    Why the next layer gets the layer path's bits: the float64 product ``v = x s_c`` is exact
    and ``v' = r 2**(e + E_c + t)`` is ``v`` rounded to odd at the unit ``u`` of ``r``. A round
    to odd never makes a power of two (``r`` is odd where it differs from ``|P| >> t``, and
    ``|P| >> t >= 2**(23 - t) > 1``), so ``v'`` has ``v``'s leading one ``L_v`` and rule bfp_conv picks
    the same ``xe`` for every patch. ``r`` keeps ``K >= 24 - t = 25 - M`` significant bits
    (``|m| >= 1``, ``|S_c| >= 2**23``), so ``u = 2**(L_v - K + 1)``; rule bfp_conv's unit is at least
    ``2**(L_v - M + 2)`` (``xe`` from the patch's largest leading one), its decision points
    (multiples of half a unit; of a unit for ``truncate``) multiples of ``2**(L_v - M + 1)``,
    which is ``2u`` or coarser when ``K >= M + 1``, i.e. ``M <= 12`` (checked). Where
    ``v' != v``, ``v`` lies strictly inside ``(T, T + u)`` (``T`` its truncation) and ``v'`` is the odd
    multiple of ``u`` among ``T``, ``T + u``: no decision point lies between ``v`` and ``v'``,
    so both round alike; a ``v`` on a decision point has at most ``M`` significant bits and is
    exact (``v' = v``). The saturation of rule bfp_conv is monotone. Any other reader (an Add, a
    pool, a gate, a table, a move) would take ``v'`` for ``v``: for those, rule bfp_prelu_exact.
Rule bfp_prelu_exact: **the exact product, in a wide element** (e.g. a last ``PReLU(16)`` that
    feeds an SE block's global pool and its gate ``x * se(x)``, then an ``AveragePool``): where
    a reader of the output (through aliases) is not an engine layer, the op is bfp_prelu with ``t = 0``:
    ``(m S_c, e + E_c)`` for ``m < 0``, the float64 product of the layer path itself (``|m S_c| <
    2**(M + 23)``: 31 bits for bfp8). Its readers must be engine layers, global pools
    (``GlobalAveragePool``, ``ReduceMean``: rule bfp_global_pool), ``AveragePool`` (rule avg_pool) and gates
    (``Mul``: rule bfp_gate), each exact on pairs of any width up to the element's; others, and the
    network's output, are refused by name. Such a program's kernel holds its activations in
    elements of :data:`WIDE_ELEM_BITS`-bit mantissas (:func:`hlsnn.engines.bfp_systolic.network.lower.elem_bits`: 53, a 63-bit element,
    where every other program's is ``ELEM_BITS`` = 26; the bound of every sum of rules bfp_add, avg_pool
    and of a gate's product is then ``2**52``), so a gate's product of the bfp_prelu_exact map by a table's
    ``OUT_BITS``-bit entries (``< 2**(M + 23 + 15)``) is exact in it; the kernel refuses by name a
    gate whose operands' product could pass the element
    (:mod:`hlsnn.engines.bfp_systolic.network.kernel` ``_lut_fields``). A sum beyond ``2**52`` is
    :class:`~.lower.NotExact` (the status bit), as every sum beyond its bound.

    Why the layer path's bits: its float64 ``PRelu`` is this exact value (a product of ``M`` and 24
    significant bits), and its pool, gate and average pool compute the float64 sums and products
    of exact values, which rules bfp_global_pool, bfp_gate and avg_pool compute exactly on pairs (within their bounds); an
    engine layer reading the product block-quantizes the same value by rule bfp_conv.

The kernel runs bfp_prelu in its ``Lut`` loop (mode ``single = 4``): per bank an ``M x 25``-bit product
with the bank's slope mantissa and exponent of its channel (``kPSlope``, ``kPExp``: one word per
block of ``Q`` channels, an op's words from ``d.sa``; ``t`` in ``d.sb``: 0 for bfp_prelu_exact), the sticky bit and the
exponent's sum; rendered only into kernels whose program has such an op (its result ``r`` of
``kElemBits`` bits where a bfp_prelu_exact op makes the element wide, else 26).
"""
from __future__ import annotations

import numpy as np

#: the slopes' mantissa bits (float32)
S_BITS = 24
#: rule bfp_prelu_exact: the element's mantissa bits of a program with an exact (wide) PRelu product: the
#: sums' bound ``2**52`` is the kernel's pool loop's aligner's (``AlignExact`` at ``kWideBits - 2``)
WIDE_ELEM_BITS = 53
#: rule bfp_prelu_exact: the host ops that read a wide PRelu's pairs exactly (besides engine layers and aliases)
WIDE_READERS = ("GlobalAveragePool", "ReduceMean", "AveragePool", "Mul")


def is_wide(op):
    """Whether ``op`` is a rule bfp_prelu_exact PRelu (the exact product)."""
    return op.kind == "lut" and op.f.get("fn") == "PRelu" and bool(op.f.get("wide"))


def slope_pairs(consts, why):
    """``(S, E)`` int64 of the per-channel slopes ``consts`` (float64 values of float32 slopes):
    ``s_c = S_c 2**E_c`` with ``2**23 <= |S_c| < 2**24`` (0 for a zero slope), or ``why(what)``
    for a slope that is not a float32 value."""
    s = np.asarray(consts, np.float64)
    fr, ex = np.frexp(s)
    m = np.ldexp(fr, S_BITS)
    if not np.array_equal(m, np.rint(m)) or not np.isfinite(s).all():
        raise why("a PRelu slope that is not a float32 value (rule bfp_prelu takes 24-bit slope mantissas)")
    mi = m.astype(np.int64)
    return mi, np.where(mi != 0, ex.astype(np.int64) - S_BITS, 0)


def prelu_pairs(m, e, slope_m, slope_e, t, c_axis_shape):
    """Rule bfp_prelu on pairs ``(m, e)`` of a batch ``(B, C, ...)`` (``c_axis_shape``: the shape that puts
    the per-channel ``slope_m``, ``slope_e`` on axis 1): the output pairs."""
    m, e = np.asarray(m, np.int64), np.asarray(e, np.int64)
    sm = np.asarray(slope_m, np.int64).reshape(c_axis_shape)
    se = np.asarray(slope_e, np.int64).reshape(c_axis_shape)
    p = m * sm
    a = np.abs(p)
    r = (a >> t) | ((a & ((1 << t) - 1)) != 0).astype(np.int64)
    ym = np.where(m >= 0, m, np.sign(p) * r)
    ye = np.where(m >= 0, e, e + se + t)
    return ym, np.where(ym != 0, ye, 0)


def readers_are_engine_layers(program, t):
    """Whether every layer reading tensor ``t`` (through alias host ops) is an engine layer."""
    from ...network.program import ALIAS_OPS
    for k in program["layers"]:
        if t not in k.get("inputs", ()):
            continue
        if k["kind"] == "host":
            if k["op"] not in ALIAS_OPS or not readers_are_engine_layers(program, k["output"]):
                return False
    return t != program["output"].get("engine_tensor") and t != program["output"]["name"]


def wide_refusal(program, t):
    """Rule bfp_prelu_exact's readers of tensor ``t``: None when every reader (through alias host ops) is an
    engine layer or a host op of :data:`WIDE_READERS`, else what is not (for the refusal)."""
    from ...network.program import ALIAS_OPS
    if t == program["output"].get("engine_tensor") or t == program["output"]["name"]:
        return "the network's output"
    for k in program["layers"]:
        if t not in k.get("inputs", ()) or k["kind"] != "host" or k["op"] in WIDE_READERS:
            continue
        if k["op"] not in ALIAS_OPS:
            return f"a {k['op']} ({k['name']})"
        why = wide_refusal(program, k["output"])
        if why:
            return why
    return None


def lower_host(steps, j, st, w, engine_made):
    """Rule bfp_prelu for host layer ``j`` (a ``PRelu`` with one slope per channel of a BFP engine layer's
    output: ``engine_made(t, w)``): the lut op (fields ``exact``, ``fn = "PRelu"``, ``sm``, ``se``,
    ``t``); True if it was lowered; :class:`InputError` naming what it does not take; False for
    another op."""
    from ...network.gate import channel_consts
    from ...network.program import Op, _chw, _why
    if j["op"] != "PRelu":
        return False
    src = j["inputs"][0]
    consts = channel_consts("PRelu", j.get("attrs", {}), len(w.shapes[src]) + 1)
    if consts is None:
        return False                                     # one slope: rule bfp_table's table
    m_bits = int(steps.p["mantissa_bits"])
    if st[0] != "q" or not engine_made(src, w):
        raise _why(j, "a PRelu per channel of BFP values that are not an engine layer's output (rule bfp_prelu takes a "
                      "BFP layer's M-bit mantissas)")
    wide = not readers_are_engine_layers(steps.program, j["output"])
    if wide:                                             # rule bfp_prelu_exact: the exact product
        why = wide_refusal(steps.program, j["output"])
        if why:
            raise _why(j, f"a PRelu per channel of BFP values read by {why}: rule bfp_prelu's output is the product "
                          f"rounded to odd, which only an engine layer's block quantization reads exactly, and "
                          f"rule bfp_prelu_exact's exact product is read by engine layers, global pools, average pools and "
                          f"gates only")
    if m_bits > 12:
        raise _why(j, f"a PRelu per channel after {m_bits}-bit mantissas (rule bfp_prelu: up to 12)")
    c, h, w_ = _chw(w.shapes[src])
    if consts.size != c:
        raise _why(j, f"{consts.size} slopes for {c} channels")
    sm, se = slope_pairs(consts, lambda what: _why(j, what))
    w.ops.append(Op("lut", j["name"], [src], j["output"], dict(c=c, hw=h * w_, exact=True, fn="PRelu", sm=sm,
                                                                 se=se, t=0 if wide else m_bits - 1,
                                                                 bits=m_bits, wide=wide,
                                                                 rounding=steps.table_rounding)))
    w.state[j["output"]], w.shapes[j["output"]] = ("q", None), w.shapes[src]
    return True


def run(op, x, shaped):
    """Rule bfp_prelu of the lut op ``op`` on the pairs ``x`` of a batch: the output pairs."""
    f = op.f
    xm, xe = shaped(x, (f["c"], f["hw"]))
    ym, ye = prelu_pairs(xm, xe, f["sm"], f["se"], f["t"], (1, f["c"], 1))
    return ym.reshape(np.shape(x[0])), ye.reshape(np.shape(x[0]))


def rom(net, pc):
    """The kernel's slope ROMs of rule bfp_prelu: ``(sm, se)`` each ``(pc, words)`` (bank ``j``'s word
    ``woff + k`` is channel ``k pc + j``'s slope; zeros past the last channel), each op's first
    word in its field ``prom``; None when the program has no such op."""
    parts_m, parts_e, n = [], [], 0
    for op in net.ops:
        if op.kind == "lut" and op.f.get("fn") == "PRelu" and op.f.get("exact"):
            nb = -(-op.f["c"] // pc)
            sm = np.zeros(nb * pc, np.int64)
            se = np.zeros(nb * pc, np.int64)
            sm[:op.f["c"]], se[:op.f["c"]] = op.f["sm"], op.f["se"]
            op.f["prom"] = n
            n += nb
            parts_m.append(sm.reshape(nb, pc).T)
            parts_e.append(se.reshape(nb, pc).T)
    if not parts_m:
        return None
    return np.concatenate(parts_m, axis=1), np.concatenate(parts_e, axis=1)
