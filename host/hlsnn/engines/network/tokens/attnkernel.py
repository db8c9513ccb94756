"""Attention's loops in the ``sparse_cluster`` network kernel (rules attn_gather, add_const, act_matmul and int_softmax of
:mod:`hlsnn.engines.network.tokens.attention`; ``hls/engines/sparse_cluster/network_attention.j2``): the
descriptors, the ROMs, the template widths, the cycles and the resources of its four loops.

A tensor of per-image shape ``(C, H, W)`` (:func:`hlsnn.engines.network.program._chw`) is held as
every tensor is: channel ``c`` in bank ``c % Q`` at word ``(c // Q) H W + y W + x``. So:

* **Gather** (rule attn_gather) moves one element a cycle: its ROM word ``kGather`` holds the source's
  bank and word and the destination's (the index pattern laid onto the two tensors' banks), every
  bank reads the source word and the source bank's value is written to the destination bank
  (``n`` iterations, ``NetGather``); a constant code (rule class_token, a class token) has the source bank
  ``0xFF`` and the code in the word field;
* **AddConst** (rule add_const) runs ``Q`` channels a cycle as the table loop does, the constant a ROM
  per bank (``kAddc``, at radix ``G``): ``ceil(C/Q) H W`` iterations (``NetAddc``);
* **Softmax** (rule int_softmax) over rows of ``n`` consecutive words of a bank (the last axis ``W`` of a
  3-D tensor, or ``H`` of a 2-D one), ``Q`` rows at a time: per row three pipelined loops of ``n``
  (the max, ``NetSmaxMax``; the table's ``e`` and their sum, ``NetSmaxSum``; the outputs,
  ``NetSmaxOut``) and one division ``2**K // S`` a bank (:data:`DIV_LATENCY` cycles);
* **ActMatMul** (rule act_matmul) of ``(G, T, K)`` by ``(G, K, S)`` (heads as channels: head ``g``'s
  operands and output all in bank ``g % Q``), ``Q`` heads a cycle, one product a head: the
  later-made operand from the activation buffer, the earlier one from the shortcut buffer, the
  exact sum requantized at ``k = K - 1`` (``ceil(G/Q) T S K`` iterations, ``NetAmm``)."""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from . import attention as at
from ..program import _chw

#: the kernels' op codes (``network_data.h``)
OP_CODES = {"gather": 9, "addc": 10, "actmm": 11, "softmax": 12}
#: the counted loops of each op code
LOOPS = {9: ("NetGather",), 10: ("NetAddc",), 11: ("NetAmm",), 12: ("NetSmaxMax", "NetSmaxSum", "NetSmaxOut")}
#: pipeline depths: the gather's (ROM, act read, select, write), the AddConst's (act and ROM read,
#: the add, the rounding, the write), the MatMul's (reads, the DSP product 3, the add, the
#: rounding, the write), each Softmax row loop's (read, table, add / product 3, write)
DEPTH = {9: 4, 10: 4, 11: 7, 12: 4}
#: the cycles of a Softmax row's division ``2**K // S`` (a sequential divider: a quotient bit a
#: cycle and its setup)
DIV_LATENCY = at.RECIP_BITS + 4


def _at(shape, pc):
    """Each element's ``(bank, word)`` of a tensor of per-image ``shape`` in ``pc`` banks, in the
    tensor's element order."""
    c, h, w = _chw(shape)
    e = np.arange(c * h * w)
    ch, px = e // (h * w), e % (h * w)
    return ch % pc, (ch // pc) * h * w + px


def smax_rows(op, shape):
    """``(C, rows a channel, n)`` of a Softmax on a tensor of per-image ``shape``, or a string why
    the kernel cannot (a row not within one bank)."""
    c, h, w = _chw(shape)
    n = op.f["n"]
    if len(shape) == 3 and w == n:
        return c, h, n
    if len(shape) == 2 and h == n:
        return c, 1, n
    return f"a Softmax over rows of {n} of a per-image {tuple(shape)} tensor: rows within one channel"


def amm_dims(net, op, name):
    """``(G, T, K, S)`` of an ActMatMul on the operands' per-image shapes, or a string why not."""
    a, b = (tuple(net.shapes[name(t)]) for t in op.ins)
    if len(a) != 3 or len(b) != 3 or a[0] != b[0] or a[2] != b[1]:
        return f"a MatMul of per-image {a} by {b}: (G, T, K) by (G, K, S), heads as channels"
    return a[0], a[1], a[2], b[2]


def tables(net, place, pc):
    """``{"gather", "addc", "exp"}``: the ROMs of the program's attention ops (``gather`` 64-bit
    words; ``addc`` and ``exp`` ``(pc, words)``), each op's first word in its field ``rom``."""
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    g, ac, ex = [], [], []
    for op in net.ops:
        if op.kind == "gather":
            sb, sa = _at(net.shapes[name(op.ins[0])], pc)
            db, da = _at(net.shapes[op.out], pc)
            idx = np.asarray(op.f["idx"], np.int64)
            if max(int(sa.max(initial=0)), int(da.max(initial=0))) >= 1 << 24 or pc >= 0xFF:
                raise InputError(f"network kernel: {op.name}: a tensor beyond 2**24 words a bank, or 255 banks")
            op.f["rom"] = len(g)
            cs = np.asarray(op.f.get("consts", ()), np.int64)        # rule class_token: bank 0xFF, the code in the word
            g += [(int(sb[i]) | int(sa[i]) << 8 if i < len(sb) else 0xFF | (int(cs[i - len(sb)]) & 0xFFFFFF) << 8)
                  | int(db[k]) << 32 | int(da[k]) << 40 for k, i in enumerate(idx)]
        elif op.kind == "addc":
            c, h, w = _chw(net.shapes[op.out])
            nb = -(-c // pc)
            a = np.zeros((nb * pc, h * w), np.int64)
            a[:c] = np.asarray(op.f["cq"], np.int64).reshape(c, h * w)
            op.f["rom"] = sum(x.shape[1] for x in ac)
            ac.append(a.reshape(nb, pc, h * w).transpose(1, 0, 2).reshape(pc, nb * h * w))
        elif op.kind == "softmax":
            op.f["rom"] = sum(len(t) for t in ex)
            ex.append(np.asarray(op.f["table"], np.int64))
    z = np.zeros((pc, 1), np.int64)
    return dict(gather=np.asarray(g or [0], np.uint64), addc=np.concatenate(ac, axis=1) if ac else z,
                exp=np.tile(np.concatenate(ex), (pc, 1)) if ex else z)


def descriptor(net, op, d, place, name, pc):
    """Fill the kernel descriptor ``d`` of an attention op (module docstring); returns 0."""
    f = op.f
    if op.kind != "actmm":
        d["src"] = place[name(op.ins[0])][0]
        if d["src"] is None:
            raise InputError(f"network kernel: {op.name}: its input is not in an activation buffer")
    if op.kind == "gather":
        d.update(n_iter=f["n"], woff=f["rom"])
    elif op.kind == "addc":
        c, h, w = _chw(net.shapes[op.out])
        d.update(n_iter=-(-c // pc) * h * w, woff=f["rom"], sa=f["g"] - f["f_in"], shift=f["g"] - f["f_out"])
    elif op.kind == "softmax":
        r = smax_rows(op, net.shapes[op.out])
        if isinstance(r, str):
            raise InputError(f"network kernel: {op.name}: {r}")
        c, rows, n = r
        d.update(zb=-(-c // pc), oh=rows, w=n, cg=c, woff=f["rom"], n_iter=-(-c // pc) * rows * n)
    else:
        r = amm_dims(net, op, name)
        if isinstance(r, str):
            raise InputError(f"network kernel: {op.name}: {r}")
        g, t, k, s = r
        main, short = f["main"], f["short"]
        if place[main][0] is None or not place[short][1] or d["dual"]:
            raise InputError(f"network kernel: {op.name}: operands not where the kernel reads them")
        d.update(src=place[main][0], single=int(name(op.ins[0]) == short), zb=-(-g // pc), h=t, w=s, kw=k,
                 hw=t * k, cg=k * s, ohw=t * s, shift=f["shift"], n_iter=-(-g // pc) * t * s * k)
    return 0


def iterations(r, get):
    """``{loop: iterations}`` of a descriptor row (``get(row, field)``) of an attention op."""
    code = get(r, "op")
    n = get(r, "n_iter")
    return {k: n for k in LOOPS[code]}


def cycles(r, get, ii=None):
    """A descriptor row's cycles per image: its loops' iterations at their derived II and their
    depths (a Softmax's three loops and its division once a row)."""
    g = (ii or {}).get
    code = get(r, "op")
    if code == 12:
        rows = get(r, "zb") * get(r, "oh")
        return sum(get(r, "n_iter") * g(k, 1) for k in LOOPS[12]) + rows * (3 * DEPTH[12] + DIV_LATENCY)
    return get(r, "n_iter") * g(LOOPS[code][0], 1) + DEPTH[code]


def widths(net, t, pc):
    """The template fields of the attention loops (``has_attn`` False without an attention op)."""
    ops = [op for op in net.ops if op.kind in at.KINDS]
    if not ops:
        return dict(has_attn=False, has_gather=False, has_addc=False, has_amm=False, has_smax=False)
    kinds = {op.kind for op in ops}
    a = net.input["bits"]
    ab = [op for op in ops if op.kind == "addc"]
    addc_bits = max([a + 2 + (op.f["g"] - op.f["f_in"]) for op in ab] +
                    [int(np.abs(op.f["cq"]).max(initial=0)).bit_length() + 2 for op in ab] + [a + 2])
    mm = [op for op in ops if op.kind == "actmm"]
    kmax = max([int(op.f["sa"][-1]) for op in mm] + [1])
    smax_n = max([op.f["n"] for op in ops if op.kind == "softmax"] + [1])
    rows = [r for r in t["rows"] if r["vals"][0] in OP_CODES.values()]

    def most(code, key="n_iter"):
        return max([r["vals"][r["names"].index(key)] for r in rows if r["vals"][0] == code] + [1])
    shifts = {op.f["g"] - op.f["f_out"] for op in ab}
    return dict(has_attn=True, addc_shift=shifts.pop() if len(shifts) == 1 else None,
                has_gather="gather" in kinds, has_addc="addc" in kinds, has_amm="actmm" in kinds,
                has_smax="softmax" in kinds, addc_bits=min(addc_bits, 64),
                amm_bits=2 * a + max(1, kmax.bit_length()) + 1,
                smax_s_bits=at.EXP_BITS + max(1, smax_n.bit_length()) + 1, recip_bits=at.RECIP_BITS,
                smax_fp=a - 1, max_gather_iter=most(9), max_addc_iter=most(10), max_amm_iter=most(11),
                max_smax_n=smax_n, max_smax_rows=max([most(12, "zb") * most(12, "oh")] + [1]),
                gather_rom=", ".join(f"0x{int(v):016x}ULL" for v in t["attn"]["gather"]),
                gather_words=len(t["attn"]["gather"]), addc_words=t["attn"]["addc"].shape[1],
                exp_words=t["attn"]["exp"].shape[1],
                addc_rom=[", ".join(str(int(v)) + "LL" for v in row) for row in t["attn"]["addc"]],
                exp_rom=[", ".join(str(int(v)) for v in row) for row in t["attn"]["exp"]])


def buffers(net, tables_):
    """The attention loops' ROMs as :class:`hlsnn.resources.Buffer` rows (none without them)."""
    from ....resources import Buffer
    t = tables_.get("attn")
    if t is None or not any(op.kind in at.KINDS for op in net.ops):
        return []
    pc = tables_["pc"]
    return [Buffer("kGather", "net_top", "array", 64, (len(t["gather"]),), static=True,
                   note="rule attn_gather's index patterns: source and destination bank and word an element"),
            Buffer("kAddc", "net_top", "array", 64, (pc, t["addc"].shape[1]), partition=((1, "complete"),),
                   static=True, note="rule add_const's constants at radix G, a ROM per bank"),
            Buffer("kExp", "net_top", "array", at.EXP_BITS + 1, (pc, t["exp"].shape[1]), partition=((1, "complete"),),
                   static=True, note="rule int_softmax's exponential tables, a copy per bank")]


def multipliers(net, tables_):
    """The attention loops' DSP products: per bank the Softmax's ``e r`` (17 x 25 bits) where the
    program has one (the MatMul's ``a b``, 8 x 8, are LUT-built: :func:`logic`)."""
    from ....resources import Multiplier
    if not any(op.kind == "softmax" for op in net.ops):
        return []
    return [Multiplier("e*r", "SmaxOut", at.EXP_BITS + 1, at.RECIP_BITS - at.EXP_BITS + 1, count=tables_["pc"],
                       note="a Softmax's exponential times its row's reciprocal, one a bank")]


def logic(net, tables_):
    """``{"attention": (LUT, FF)}`` outside the DSPs and ROMs, from the rendered widths with the LUT
    rules of :func:`hlsnn.resources.shifter_luts` (a LUT per adder bit; a LUT-built ``a x b``
    product ``(a + 1) b``), per bank and only for the loops the program has: the gather's
    ``Q:1`` select (``a ceil(Q/4)``); the AddConst's adder and rounding shifter (``addc_bits``, by
    up to its largest shift); the MatMul's product, accumulator and requantization shifter; the
    Softmax's max compare, its sum's adder, its sequential divider (a ``K + 1``-bit subtract) and
    the output's rounding add; a register per stage's value."""
    from ....resources import shifter_luts
    ops = [op for op in net.ops if op.kind in at.KINDS]
    if not ops:
        return {}
    pc, a = tables_["pc"], net.input["bits"]
    w = widths(net, tables_, pc)
    kinds = {op.kind for op in ops}
    lut = ff = 0
    if "gather" in kinds:
        lut, ff = lut + a * -(-pc // 4), ff + a
    if "addc" in kinds:
        ab = w["addc_bits"]
        sh = w["addc_shift"]                  # one constant shift (24): the rounding add only
        lut, ff = lut + ab + (shifter_luts(ab, 63) if sh is None else 0) + ab, ff + ab + a
    if "actmm" in kinds:
        mb = w["amm_bits"]
        lut, ff = lut + (a + 1) * a + mb + shifter_luts(mb, 31) + mb, ff + 2 * a + mb
    if "softmax" in kinds:
        sb, rb = w["smax_s_bits"], at.RECIP_BITS + 1
        lut, ff = lut + a + sb + rb + rb, ff + a + sb + rb + rb
    return {"attention": (pc * lut, pc * ff)}
