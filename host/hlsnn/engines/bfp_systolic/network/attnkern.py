"""Attention's loops in the ``bfp_systolic`` network kernel (the pair attention rules (bfp_attn_gather to bfp_softmax), bfp_scale and bfp_layer_norm of
:mod:`.attnpairs`; ``hls/engines/bfp_systolic/network_attention.j2``): descriptors, ROMs, template
fields, iterations, cycles and resources.

Tensors are held as every tensor of the kernel (:func:`hlsnn.engines.network.kernel.allocate`):
channel ``c`` in bank ``c % Q`` at word ``(c // Q) H W + y W + x`` (a ``(T, F)`` tensor: row ``t``
in bank ``t % Q``, its ``F`` features consecutive words). So the gather (bfp_attn_gather), the AddConst (bfp_add_const)
and the Softmax (bfp_softmax) walk their tensors as :mod:`hlsnn.engines.network.tokens.attnkernel` describes
(its ROM builder is shared: the gather's pattern, the constants at radix ``G``, the exponential
tables), on elements: rule bfp_pair_codes's code of an element is rule bfp_table's rounding shifter; a class
token's constant elements (class_token) are a ROM of their own, ``kGConst``, which the gather's word
field indexes. The Scale (bfp_scale) runs ``Q`` channels a cycle, one ``kElemBits x 25`` product a
bank, rounded to odd. The MatMul (bfp_act_matmul) of ``(G, T, K)`` by ``(G, K, S)``, ``Q`` heads a cycle
(head ``g`` in bank ``g % Q``), per head block: B's column exponents (``S K`` iterations), A's
row exponents (``T K``, ``NetAmmBExp``, ``NetAmmAExp``), per row of A its ``S K`` products (``NetAmm``) and
the row's ``S`` outputs at the max rule's exponent (``NetAmmOut``). The LayerNorm (bfp_layer_norm) over
rows of ``F`` words, ``Q`` rows a time: the sums (``NetPlnSum``, ``F``), the statistics a bank
a cycle (``NetPlnStat``, ``Q``), the outputs (``NetPlnOut``, ``F``)."""
from __future__ import annotations

import numpy as np

#: the descriptor op codes (``network_data.h``; 9-12 as the integer kernels', 13 and 14 this kernel's)
OP_CODES = {"gather": 9, "addc": 10, "actmm": 11, "softmax": 12, "pscale": 13, "plnorm": 14}
#: the counted loops of each op code
LOOPS = {9: ("NetGather",), 10: ("NetAddc",), 11: ("NetAmmBExp", "NetAmmAExp", "NetAmm", "NetAmmOut"),
         12: ("NetSmaxMax", "NetSmaxSum", "NetSmaxOut"), 13: ("NetPScale",),
         14: ("NetPlnSum", "NetPlnStat", "NetPlnOut")}
#: pipeline depths: the gather's (ROM, act read, select, write); the AddConst's (read, the code's
#: shifter 2, the add, the rounding, the write); the Scale's (read, the DSP product 3, the
#: leading one 2, the odd rounding 2, the write); the MatMul's exponent passes (read, leading
#: one 2, max), its products (reads, the rounding shifters 2, the DSP product 3, the add) and
#: outputs (the shifter 2, the write); the Softmax's rows (read, the code 2, table, add /
#: product 3, write); the LayerNorm's (read, the code 2, products 3 x 2, shifters 4, write)
DEPTH = {9: 4, 10: 6, 11: (4, 7, 3), 12: 6, 13: 9, 14: 12}
#: the cycles of a Softmax row's division ``2**K // S`` (:data:`hlsnn.engines.network.tokens.attnkernel.DIV_LATENCY`)
DIV_LATENCY = 44


def kinds(net):
    """The attention op kinds of ``net`` (a bfp program)."""
    return {op.kind for op in net.ops if op.kind in OP_CODES}


def _chw(shape):
    from ...network.program import _chw as chw
    return chw(tuple(shape))


def elem_word(m, e, elem_bits):
    """An element's bits (``kElemBits``-bit mantissa, 10-bit exponent above it) as an int."""
    return (int(m) & ((1 << elem_bits) - 1)) | ((int(e) & 0x3FF) << elem_bits)


def tables(net, place, pc, elem_bits):
    """The ROMs of the program's attention ops: :func:`hlsnn.engines.network.tokens.attnkernel.tables`'
    (``gather``, ``addc``, ``exp``), the class tokens' constant elements ``gconst`` and the
    LayerNorms' ``pln_g``, ``pln_b`` (each op's first word in its field ``rom``);
    :class:`InputError` for a constant beyond the element."""
    from ....errors import InputError
    from ...network.tokens import attnkernel
    consts = []
    for op in net.ops:
        if op.kind == "gather" and len(op.f.get("cm", ())):
            cm, ce = (np.asarray(v, np.int64) for v in (op.f["cm"], op.f["ce"]))
            if (np.abs(cm) >= 1 << (elem_bits - 1)).any() or (np.abs(ce) >= 512).any():
                raise InputError(f"network kernel (bfp): {op.name}: a constant beyond the kernel's element")
            op.f["consts"] = np.arange(len(consts), len(consts) + len(cm), dtype=np.int64)
            consts += [elem_word(a, b, elem_bits) for a, b in zip(cm, ce)]
    t = attnkernel.tables(net, place, pc)
    g, b = [], []
    for op in net.ops:
        if op.kind == "plnorm":
            op.f["rom"] = len(g)
            g += np.asarray(op.f["plan"]["g"], np.int64).tolist()
            b += np.asarray(op.f["plan"]["b"], np.int64).tolist()
    t.update(gconst=consts or [0], pln_g=g or [0], pln_b=b or [0])
    return t


def descriptor(net, op, d, place, name, pc):
    """Fill the descriptor ``d`` of an attention op (module docstring)."""
    from ....errors import InputError
    from ...network.tokens import attnkernel
    f = op.f
    if op.kind in ("gather", "addc", "actmm", "softmax"):
        attnkernel.descriptor(net, op, d, place, name, pc)
    else:
        d["src"] = place[name(op.ins[0])][0]
        if d["src"] is None:
            raise InputError(f"network kernel: {op.name}: its input is not in an activation buffer")
    if op.kind == "addc":
        d.update(shift=int(f["f_in"]), sa=int(f["g"] - f["f_in"]), sb=int(f["g"] - f["f_out"]), oh=int(f["f_out"]))
    elif op.kind == "softmax":
        d.update(shift=int(f["f_in"]))
    elif op.kind == "actmm":
        d.update(shift=0)
    elif op.kind == "pscale":
        c, h, w = _chw(net.shapes[op.out])
        d.update(n_iter=-(-c // pc) * h * w, sa=int(f["cm"]), sb=int(f["ce"]))
    elif op.kind == "plnorm":
        pl = f["plan"]
        from ...network.tokens.layernorm import R_BITS
        d.update(zb=-(-f["rows"] // pc), w=int(f["c"]), shift=int(pl["f_in"]), sb=int(pl["e"]),
                 sa=int(pl["fg"] + R_BITS - pl["k"]), kh=int(pl["k"] - f["f_out"]), oh=int(f["f_out"]),
                 woff=int(f["rom"]), n_iter=-(-f["rows"] // pc) * int(f["c"]))
        if pl["e"] >= 1 << 31:
            raise InputError(f"network kernel (bfp): {op.name}: an epsilon of {pl['e']} codes beyond 2**31")
    return 0


def _get(r, k):
    return r["vals"][r["names"].index(k)]


def iterations(r, pc):
    """``{loop: iterations}`` of a descriptor row of an attention op (one image; ``pc`` banks)."""
    code, n = _get(r, "op"), _get(r, "n_iter")
    if code == 11:
        zb, t, s, k = (_get(r, x) for x in ("zb", "h", "w", "kw"))
        return {"NetAmmBExp": zb * s * k, "NetAmmAExp": zb * t * k, "NetAmm": zb * t * s * k, "NetAmmOut": zb * t * s}
    if code == 14:
        zb, w = _get(r, "zb"), _get(r, "w")
        return {"NetPlnSum": zb * w, "NetPlnStat": zb * pc, "NetPlnOut": zb * w}
    return {k: n for k in LOOPS[code]}


def cycles(r, pc, ii=None):
    """A descriptor row's cycles per image (its loops' iterations at their derived II, the depths
    once a loop run, the Softmax's division once a row)."""
    g = (ii or {}).get
    code = _get(r, "op")
    it = iterations(r, pc)
    c = sum(n * g(k, 1) for k, n in it.items())
    if code == 11:
        zb, t = _get(r, "zb"), _get(r, "h")
        de, dm, do = DEPTH[11]
        return c + zb * (2 * de + t * (dm + do))
    if code == 12:
        rows = _get(r, "zb") * _get(r, "oh")
        return c + rows * (3 * DEPTH[12] + DIV_LATENCY)
    if code == 14:
        return c + _get(r, "zb") * 3 * DEPTH[14]
    return c + DEPTH[code]


def fields(net, t, rows, pc, elem_bits):
    """The template fields of the attention loops (all False without an attention op)."""
    from ...network.tokens import attention as at
    from ...network.tokens.layernorm import T_BITS, Y_BITS, rsqrt_table
    ks = kinds(net)
    flags = {f"has_{k}": k in ks for k in ("gather", "addc", "pscale", "plnorm")}
    flags.update(has_amm="actmm" in ks, has_smax="softmax" in ks, has_attn=bool(ks))
    if not ks:
        return flags
    m = net.params["mantissa_bits"]
    codes = {k: [r for r in rows if r["vals"][0] == v] for k, v in OP_CODES.items()}

    def most(kind, key):
        return max([_get(r, key) for r in codes[kind]] + [1])
    ab = [op for op in net.ops if op.kind == "addc"]
    addc_bits = max([m + 2 + (op.f["g"] - op.f["f_in"]) for op in ab] +
                    [int(np.abs(op.f["cq"]).max(initial=0)).bit_length() + 2 for op in ab] + [m + 2])
    mm = [op for op in net.ops if op.kind == "actmm"]
    kmax = max([int(op.f["sa"][-1]) for op in mm] + [1])
    smax_n = max([op.f["n"] for op in net.ops if op.kind == "softmax"] + [1])
    ln = [op for op in net.ops if op.kind == "plnorm"]
    cmax = max([int(op.f["c"]) for op in ln] + [2])
    r = rsqrt_table()
    tr = t["attn"]
    flags.update(
        attn_rounding=t.get("attn_rounding", 0),
        addc_bits=min(addc_bits, 64), amm_bits=2 * m + max(1, kmax.bit_length()) + 1,
        max_amm_zb=most("actmm", "zb"), max_amm_t=most("actmm", "h"), max_amm_s=most("actmm", "w"),
        max_amm_sk=max([_get(q, "w") * _get(q, "kw") for q in codes["actmm"]] + [1]),
        max_amm_tk=max([_get(q, "h") * _get(q, "kw") for q in codes["actmm"]] + [1]),
        smax_s_bits=at.EXP_BITS + max(1, smax_n.bit_length()) + 1, recip_bits=at.RECIP_BITS, smax_fp=m - 1,
        max_gather_iter=most("gather", "n_iter"), max_addc_iter=most("addc", "n_iter"),
        max_pscale_iter=most("pscale", "n_iter"), max_smax_n=smax_n,
        max_smax_rows=max([_get(q, "zb") * _get(q, "oh") for q in codes["softmax"]] + [1]),
        max_pln_rows=most("plnorm", "zb"), max_pln_c=cmax,
        pln_s1_bits=m + cmax.bit_length() + 2, pln_s2_bits=2 * m + cmax.bit_length() + 1, pln_v_bits=54,
        pln_p_bits=max([int(op.f["plan"]["pbits"]) + 1 for op in ln] + [32]), pln_y_bits=Y_BITS,
        pln_t_bits=T_BITS, pln_r_bits=int(r.max()).bit_length() + 1,
        pln_rsqrt=", ".join(str(int(v)) for v in r), pln_rsqrt_words=len(r),
        gather_rom=", ".join(f"0x{int(v):016x}ULL" for v in tr["gather"]), gather_words=len(tr["gather"]),
        gconst=", ".join(f"0x{int(v):x}ULL" for v in tr["gconst"]), gconst_words=len(tr["gconst"]),
        addc_words=tr["addc"].shape[1], exp_words=tr["exp"].shape[1],
        addc_rom=[", ".join(str(int(v)) + "LL" for v in row) for row in tr["addc"]],
        exp_rom=[", ".join(str(int(v)) for v in row) for row in tr["exp"]],
        pln_g=", ".join(str(int(v)) for v in tr["pln_g"]), pln_b=", ".join(str(int(v)) + "LL" for v in tr["pln_b"]),
        pln_words=len(tr["pln_g"]))
    return flags


def buffers(net, tables_):
    """The attention loops' ROMs and multipliers as :mod:`hlsnn.resources` rows (none without them)."""
    from ....resources import Buffer, Multiplier
    t = tables_.get("attn")
    ks = kinds(net)
    if t is None or not ks:
        return [], []
    pc, m = tables_["pc"], net.params["mantissa_bits"]
    eb = tables_.get("elem_bits", 26)
    bufs, muls = [], []
    if "gather" in ks:
        bufs += [Buffer("kGather", "net_top", "array", 64, (len(t["gather"]),), static=True,
                        note="rule bfp_attn_gather's index patterns: source and destination bank and word an element"),
                 Buffer("kGConst", "net_top", "array", eb + 10, (len(t["gconst"]),), static=True,
                        note="rule class_token's constant elements (a class token)")]
    if "addc" in ks:
        bufs.append(Buffer("kAddc", "net_top", "array", 64, (pc, t["addc"].shape[1]), partition=((1, "complete"),),
                           static=True, note="rule bfp_add_const's constants at radix G, a ROM per bank"))
    if "softmax" in ks:
        bufs.append(Buffer("kExp", "net_top", "array", 17, (pc, t["exp"].shape[1]), partition=((1, "complete"),),
                           static=True, note="rule bfp_softmax's exponential tables, a copy per bank"))
        muls.append(Multiplier("e*r", "SmaxOut", 17, 26, count=pc, note="a Softmax's e times its row's reciprocal"))
    if "actmm" in ks:
        w = max([_get(r, "w") for r in tables_["rows"] if r["vals"][0] == 11] + [1])
        h = max([_get(r, "h") for r in tables_["rows"] if r["vals"][0] == 11] + [1])
        bufs += [Buffer("amm_be", "ActMatMul", "array", 12, (pc, w), partition=((1, "complete"),), static=True,
                        storage="ram_s2p", impl="lutram", note="B's column exponents"),
                 Buffer("amm_ae", "ActMatMul", "array", 12, (pc, h), partition=((1, "complete"),), static=True,
                        storage="ram_s2p", impl="lutram", note="A's row exponents"),
                 Buffer("amm_racc", "ActMatMul", "array", 2 * m + 8, (pc, w), partition=((1, "complete"),),
                        static=True, storage="ram_s2p", impl="lutram", note="a row's exact sums")]
        muls.append(Multiplier("a*b", "AmmMacs", m, m, count=pc, note="two BFP activations' mantissas per bank"))
    if "pscale" in ks:
        muls.append(Multiplier("x*c", "PScalePixels", eb, 25, count=pc, note="q or k times the Scale's mantissa"))
    if "plnorm" in ks:
        bufs += [Buffer("kPlnG", "net_top", "array", 16, (len(t["pln_g"]),), static=True,
                        note="rule bfp_layer_norm's scale codes"),
                 Buffer("kPlnB", "net_top", "array", 46, (len(t["pln_b"]),), static=True,
                        note="rule bfp_layer_norm's bias at radix fg + R"),
                 Buffer("kPlnRsqrt", "net_top", "array", 18, (1024,), static=True,
                        note="rule layer_norm's reciprocal square roots")]
        muls += [Multiplier("q*q", "PlnSums", m, m, count=pc, note="the codes' squares"),
                 Multiplier("g*d*r", "PlnOut", 32, 32, count=2 * pc, note="G d and (G d) r per bank")]
    return bufs, muls


def logic(net, tables_):
    """``(LUT, FF)`` of the attention loops' datapath outside the DSPs and ROMs: per bank and loop
    the code's rounding shifter (an element to ``M`` bits), the adders, compares and the output
    shifters at the loops' widths (:func:`hlsnn.resources.shifter_luts`), a register per stage."""
    from ....resources import shifter_luts
    ks = kinds(net)
    if not ks:
        return 0, 0
    pc, m, eb = tables_["pc"], net.params["mantissa_bits"], tables_.get("elem_bits", 26)
    code = shifter_luts(eb, 31) + eb
    lut = ff = 0
    if "gather" in ks:
        lut, ff = lut + (eb + 10) * -(-pc // 4), ff + eb + 10
    if "addc" in ks:
        lut, ff = lut + code + 64 + shifter_luts(64, 63), ff + 64 + eb
    if "actmm" in ks:
        lut, ff = lut + 2 * code + 3 * (2 * m + 8) + shifter_luts(2 * m + 8, 63) + 4 * 12, ff + 4 * (2 * m + 8)
    if "softmax" in ks:
        lut, ff = lut + 3 * code + m + 26 + 41 + 41, ff + m + 26 + 41 + 41
    if "pscale" in ks:
        lut, ff = lut + 2 * (eb + 25) + shifter_luts(54, 30), ff + 2 * 54
    if "plnorm" in ks:
        lut, ff = lut + 2 * code + 64 * 3 + 2 * shifter_luts(64, 63), ff + 64 * 4
    return pc * lut, pc * ff
