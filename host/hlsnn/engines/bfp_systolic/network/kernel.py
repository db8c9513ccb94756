"""The network kernel of a lowered ``bfp_systolic`` network (:mod:`hlsnn.engines.bfp_systolic.network.lower`'s
rules): its descriptor table and resident BFP weights, rendered into
``hls/engines/bfp_systolic/network*.j2`` (the C ABI bridge is the shift_mac network kernel's),
built for C-simulation and run through ctypes.

**Shape** (:data:`LANES`, :data:`BANKS`): ``P = 8`` output lanes by ``Q = 16`` channel banks,
``P x Q = 128`` mantissa multipliers of ``mantissa_bits x mantissa_bits`` bits, one DSP48 each
(16 x 16 fits the DSP48E1's 25 x 18 port): 128 of the XC7Z020's 220 DSPs, the same order as the
layer kernel's 176 (8 x 11 tiles x 2), leaving room for the rest of the design. A config with
``net_shape: board`` is sized to its board (:mod:`hlsnn.engines.bfp_systolic.netsize`: ``P``
and ``Q``; lanes ``2i`` and ``2i + 1`` sharing a DSP48 per bank, ``net_pack``, their mantissas
one 16-bit ROM word, ``kWPairs``; the Add's lanes ``net_add``; the leading-one maps
``net_maps``, :mod:`.expmap`; an unfolded stem's image a word a cycle, ``load_pairs``, with
the stem's leading-one map, ``load_map``; a residual Add fused into the write path of the
conv that feeds it, the conv's descriptor ``fa``, :mod:`.fuse`; and, asked for by ``net_slots``,
``3Q/2`` products a lane a cycle over (tap, channel) slots, :mod:`.slots`: its schedule's tables,
the weights per slot two slots a ROM word, ``kWQuads``, the descriptors' ``uoff``, ``moff``).

**Buffers**: :func:`hlsnn.engines.network.kernel.allocate` (two ping-pong buffers and a shortcut
buffer in ``Q`` channel banks; a third activation buffer where two do not hold the network, declared
apart at its own size, ``act3``, when it holds only smaller tensors: :func:`_third`). An element is one 36-bit word (a bank of 1K elements is one
BRAM36): a 26-bit mantissa (a conv's ``M`` bits, the input's float32 significand, a residual
sum below ``2**25``, netbfp rule bfp_add) and a 10-bit exponent. A global pool's sums (below
``2**53``, rule bfp_global_pool) go to a small pool buffer of 64-bit words (a 54-bit mantissa), which the
conv after it reads (its descriptor's ``sb``); the output words have that form too. Where no
rule bfp_mean mean reads a pool (:func:`pool_odd`), the Add then holds each sum rounded to odd at 25
bits (``AddPoolOdd``, one word a cycle: netbfp rule bfp_round_odd's ``RoundOdd``, whose argument makes
the conv round it as the exact sum), so every word a conv reads is an element and its exponent
pass and patch rounding are 26 bits wide, not 54. The kernel renders only the op
families the program has (:func:`families`).

**Descriptors** (:data:`FIELDS`, the kernel's ``NetOp`` struct rendered from it, filled by the shared
``descriptor_head`` and ``pool_or_add``): a conv's ``sa`` is its exponent pass's iterations
(``OH*OW*ceil(steps/2)``: two taps a cycle on the banks' two ports, from the tap table at its
``group_words``), ``n_iter`` its multiply pass's (``OH*OW*blocks*steps + blocks``: per pixel
the taps of every block of ``P`` output channels; a pixel's writes, a block a cycle, beside the
next pixel's products, and the last pixel's after them),
``shift`` its bias exponent. Weights: lane ``l`` of block ``zb`` holds output channel
``zb*P + l``, its ``C*kh*kw`` mantissas in the tap order the kernel walks (channel block, ky,
kx; bank ``j`` channel ``cb*Q + j``); a partial block pads with zero weights and bias.
A dilated conv's taps are ``dh``, ``dw`` apart (the tap table's positions, the walk's ``dh``,
``dw`` and ``step_row``): its window costs its taps. A conv of packs of groups (netbfp rule bfp_conv:
the layer path's GEMM per pack) is a row per pack (:func:`~hlsnn.engines.bfp_systolic.network.lower.row_ops`,
:func:`_conv_row`): its own channel window (``pt_w``, the taps' banks ``[c0, c)``), output
lanes (``zfirst``, ``wob0``, ``wobase0``), weights and exponents.
"""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from ....names import c_ident
from ...network import kernel as netkernel
from ..emulator import zero_row_exponent
from . import expmap, reduce as netreduce, slots as netslots
from .perf import FAMILIES, MAC_DEPTH, add_lanes, families, packed, pool_odd, third_storage  # noqa: F401  (kernel's API)
from .resmodel import lane_tree, write_lanes
from .lower import ELEM_BITS, EXACT_BITS, WIDE_BITS, elem_bits, pack as netbfp_pack, taps as netbfp_taps
from ...network.kernel import (ROUNDING, TOP, _ints, _most, _size, act_bufs, allocate, descriptor_head,
                               pool_or_add)

#: ConvMac: iterations from a block's result written (``tz``, ``e3z``, at its last tap) to the
#: earliest read of it (the pixel's writes): the loop's depth (:data:`hlsnn.engines.bfp_systolic.network.perf.MAC_DEPTH`),
#: so the pipeline may hold every stage of that path without a dependence through ``tz``. A
#: pixel's writes start this many iterations after its last product; the ring of pixels that
#: wait (``tz_slots``) holds every pixel that ends within the distance and the one being read
#: (``2 + ceil(TZ_DISTANCE / (blocks * steps))`` over the convs of more than one pixel).
TZ_DISTANCE = MAC_DEPTH

#: output lanes and channel banks of the layer shape: 128 DSP multipliers (module docstring)
from ..netsize import BANKS, LANES  # noqa: E402
from .resmodel import FUSE_LANES  # noqa: E402


#: the bfp kernel's descriptor fields in the order of its ``NetOp`` struct (network_data.h.j2
#: renders the struct from this list): the shared head of :func:`netkernel.descriptor_head`
#: and :func:`netkernel.pool_or_add`, and the bfp kernel's own group fields
FIELDS = ("op", "src", "dst", "dual", "relu", "h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "pt", "pl",
          "pt_w", "sh_w", "step_row", "step_chan", "cg", "steps", "zb", "zlast", "ohw", "hw", "woff", "boff",
          "blocks_per_group", "group_words", "n_iter", "sa", "sb", "gap", "shift", "single", "dh", "dw",
          "zfirst", "wob0", "wobase0", "sc_base", "mdiv", "xz",
          "pix",                                # a gate by a 1 x H x W map (netbfp rule spatial_gate, .reduce)
          "mr", "mw", "lead",                   # a conv's leading-one maps (.expmap)
          "odd",                                # a channel mean (netbfp rule bfp_round_odd, .reduce), a gate's product (bfp_gate_odd,
#                                                 .gatero) rounded to odd; attention's ops (.attnkern) use the
#                                                 shared fields (oh: an output radix, kh: a second shift)
          "fa",                                 # a conv's fused residual Add (.fuse: 1, 2 with its ReLU)
          "uoff", "moff")                       # a conv's first cycle in the slot schedule's unit tables and map
#                                                 taps (.slots)
#: attention's op kinds on pairs (.attnkern: the pair attention rules (bfp_attn_gather to bfp_softmax), bfp_scale, bfp_layer_norm of .attnpairs)
ATTN_KINDS = ("gather", "addc", "actmm", "softmax", "pscale", "plnorm")

def shape(p):
    """``(P lanes, Q banks)`` of a bfp_systolic config (module docstring): :data:`LANES` x
    :data:`BANKS`, or the board-sized shape (``net_shape: board``, :mod:`hlsnn.engines.bfp_systolic.netsize`)."""
    return p.get("net_lanes") or LANES, p.get("net_banks") or BANKS


def pair_words(weights):
    """The packed weight ROMs (``kWPairs``): per lane pair ``i`` and bank ``j``, lane ``2i``'s
    mantissa in bits 7..0 and lane ``2i + 1``'s in bits 15..8 of a 16-bit word, as C text."""
    def word(w0, w1):
        return _ints((np.asarray(w1, np.int64) & 0xFF) << 8 | np.asarray(w0, np.int64) & 0xFF)
    return [[word(w0, w1) for w0, w1 in zip(weights[2 * i], weights[2 * i + 1])] for i in range(len(weights) // 2)]


def quad_words(weights):
    """The slot schedule's packed weight ROMs (``kWQuads``, :mod:`.slots`): per lane pair ``i`` and
    slot pair ``m``, slot ``2m``'s pair word (:func:`pair_words`) in bits 15..0 and slot ``2m + 1``'s
    in bits 31..16 of a 32-bit word, as C text."""
    def word(w0, w1):
        return (np.asarray(w1, np.int64) & 0xFF) << 8 | np.asarray(w0, np.int64) & 0xFF
    out = []
    for i in range(len(weights) // 2):
        pw = [word(a, b) for a, b in zip(weights[2 * i], weights[2 * i + 1])]
        out.append([_ints(pw[2 * m + 1] << 16 | pw[2 * m]) for m in range(len(pw) // 2)])
    return out


def tables(net, pz, pc):
    """The descriptor rows, the weight ROMs (mantissas, row exponents, bias mantissas) and the
    widths; :class:`InputError` for what the kernel does not run."""
    if pc % pz:
        raise InputError(f"network kernel: {pc} channel banks is not a multiple of {pz} output lanes")
    p = net.params
    m_bits = p["mantissa_bits"]
    if p["exponent_bits"] > 8 or m_bits > 18:
        raise InputError(f"network kernel (bfp): {net.accel}: {m_bits}-bit mantissas and {p['exponent_bits']}-bit "
                         f"exponents; the kernel takes up to 18-bit mantissas (one DSP48 product) and 8-bit "
                         f"exponents (its elements' 10-bit exponents hold their sums and the input's)")
    for op in net.ops:
        if op.kind not in ("conv", "maxpool", "avgpool", "add", "upsample", "zerostuff", "pad", "concat", "transpose",
                           "lut", "gate") + ATTN_KINDS:
            raise InputError(f"network kernel (bfp): {op.name}: a {op.kind} op is not in the kernel")
        if op.kind == "conv" and len(op.f["chunks"]) != op.f.get("packs", 1):
            raise InputError(f"network kernel (bfp): {op.name}: {len(op.f['chunks'])} output chunks (one output "
                             f"exponent per chunk) for {op.f.get('packs', 1)} pack(s) of groups; the kernel takes one "
                             f"a pack")
    lut = _lut_fields(net, m_bits)                 # tables and gates (netbfp rules bfp_table, bfp_gate)
    from .prelu import rom as prelu_rom            # rule bfp_prelu's slopes per bank (set before the descriptors)
    lut["prelu"] = prelu_rom(net, pc)
    place, act_words, sc_words = allocate(net, pc)
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    from . import fuse                             # a residual Add in its conv's write path (board-sized)
    unfold = netkernel.unfold_of(net, place, pc)   # reads only the input's place, which fuse.swap keeps
    fused = fuse.pairs(net, place, name, pz, pc, unfold)
    for pair in fused:
        fuse.swap(net, place, name, pair)
    pooled = {op.out for op in net.ops if op.kind == "add" and op.f["gap"]}   # in the pool buffer
    for op in net.ops:
        if any(name(t) in pooled for t in op.ins) and op.kind != "conv":
            raise InputError(f"network kernel (bfp): {op.name}: a {op.kind} of a global pool's output; the kernel's "
                             f"pool buffer is read by a conv")
    if name(net.output["tensor"]) in pooled:
        raise InputError("network kernel (bfp): the output is a global pool's; the kernel stores a conv's output")
    from . import attnkern                         # attention's ROMs (and the gathers' constant indices)
    attn = attnkern.tables(net, place, pc, elem_bits(net)) if attnkern.kinds(net) else None
    gap_words, tz_slots = 1, 2
    taps = []
    rows, infos = [], []                           # infos: per row what .expmap reads
    wl = [[[] for _ in range(pc)] for _ in range(pz)]
    el, bl = [[] for _ in range(pz)], [[] for _ in range(pz)]
    woff = boff = 0
    sum_bits, max_pix, max_blocks, max_hw = 2 * m_bits, 1, 1, 1
    if unfold and any(op.name == unfold["op"] and (op.f.get("dh", 1), op.f.get("dw", 1), op.f.get("packs", 1))
                      != (1, 1, 1) for op in net.ops):
        unfold = None                                # a dilated or grouped stem reads its taps as such
    first = {}                                     # an op's first descriptor row
    for i, op in enumerate(net.ops):
        first[i] = len(rows)
        f, d = descriptor_head(op, unfold, place, name, pz, pc, sc_transpose=True)   # Transpose writes sc (.reduce)
        d.update(blocks_per_group=0, group_words=0, dh=1, dw=1, zfirst=0, wob0=0, wobase0=0, xz=0, odd=0, fa=0,   # this kernel's
                 mdiv=int(f.get("mdiv", 1) > 1 and op.kind in ("conv", "add")))    # rule bfp_mean: reads / sums a mean
        if op.kind == "conv":
            for j in range(f.get("packs", 1)):          # a row per pack of groups (lower.pack)
                dj = dict(d)
                tz_slots, sum_bits, max_pix, max_blocks = _conv_row(op, f, j, dj, (pz, pc, m_bits), (taps, wl, el, bl),
                                                                    (woff, boff), (tz_slots, sum_bits, max_pix,
                                                                                   max_blocks))
                ch = netbfp_pack(f, j)["chunks"][0]             # rule bfp_conv: an all-zero patch's exponent
                dj.update(sb=int(name(op.ins[0]) in pooled),
                          xz=zero_row_exponent(ch["we"], ch["be"], p["exponent_bits"]))
                woff += dj["zb"] * dj["steps"]
                boff += dj["zb"]
                rows.append(dict(comment=f"{op.name}: {op.kind} {' + '.join(op.ins)} -> {op.out}"
                                 + (f" (pack {j} of {f['packs']})" if f.get("packs", 1) > 1 else ""),
                                 d=dj, names=FIELDS))
                infos.append((op, f.get("packs", 1), f is not op.f, name(op.ins[0])))
            continue
        elif op.kind in ATTN_KINDS:
            attnkern.descriptor(net, op, d, place, name, pc)
        else:
            pool_or_add(op, f, d, place, name, pc, ELEM_BITS)
            if op.kind == "lut" and f.get("fn") == "Clip":   # rule bfp_clip: Clip(0 or None, h 2^k): h in sb, k in sa
                d.update(single=2 if f["lo0"] else 3, sb=int(f["clip"][0]), sa=int(f["clip"][1]))
            elif op.kind == "lut" and f.get("exact") and f.get("fn") == "PRelu":   # rule bfp_prelu (.prelu): slopes at
                d.update(single=4, sa=int(f["prom"]), sb=int(f["t"]), woff=0)      # sa, t in sb
            elif op.kind == "lut" and f.get("exact"):   # rule bfp_hardswish: HardSwish, no table
                d.update(single=1)
            elif op.kind == "concat":             # rule bfp_mean_concat (.anymean): the parts' factors (1: as they are)
                d.update(sa=int((f.get("mscale") or [1, 1])[0]), sb=int((f.get("mscale") or [1, 1])[1]))
            elif op.kind == "lut":                # rule bfp_table: the code radix F and the output's -F_o; bfp_wide_codes: the
                half = 1 << (int(f["bits"]) - 1)  # code saturated to +-sb, the ROM read at woff + q + 2^(kLutBits-1)
                d.update(shift=int(f["f_in"]), sa=int(f["f_out"]), sb=half,
                         woff=int(f["rom"]) + half - (1 << (lut["lut_bits"] - 1)))
            elif op.kind in ("avgpool", "gate"):  # rule bfp_round_odd (.reduce): CBAM's channel mean, rounded to odd;
                d.update(odd=int(bool(f.get("odd"))))   # rule bfp_gate_odd (.gatero): a product of two tables' outputs
            if op.kind == "add":
                d.update(cg=int(f["c"]))          # the live banks: a bank past channel c raises no status
                max_hw = max(max_hw, f["hw"])
                # kA channels a cycle (a board-sized kernel's net_add: parts of a block, one after another)
                d.update(n_iter=-(-int(f["c"]) // add_lanes(p, pc)) * f["hw"])
                if f["gap"]:                      # two passes per part: the exponent, the sum
                    d.update(n_iter=2 * d["n_iter"], shift=int(f["p"]))
                    gap_words = max(gap_words, -(-f["c"] // pc))
        rows.append(dict(comment=f"{op.name}: {op.kind} {' + '.join(op.ins)} -> {op.out}",
                         d=d, names=FIELDS))
        infos.append((op, 1, False, None))
    inp = name(net.input["name"])
    load_pairs = bool(unfold and unfold["w"] % 2 == 0 and p.get("net_shape") == "board")
    # the unfolded load's leading-one map (.expmap.load_map): the stem then reads its patch exponents from it
    load_map = expmap.load_map(unfold, load_pairs, bool(p.get("net_maps")), place[inp],
                               _size(net.shapes[inp]) // unfold["c"] if unfold else 0)
    map_words = expmap.mark([r["d"] for r in rows], infos, name, bool(p.get("net_maps")),
                            load=(place[inp][0], inp) if load_map else None, pool=pool_odd(net))
    for ci, ai in fused:                           # .fuse: the conv writes the sums, the Add runs no iterations
        fuse.apply(rows[first[ci]]["d"], rows[first[ai]]["d"], pz)
    act_words, act3_words = _third(net, place, act_words, pc)
    from .anymean import mean_fields
    has_exp = any(r["d"]["op"] == 0 and r["d"]["sa"] > 0 for r in rows)
    units = None                                   # .slots: products over (tap, channel) slots
    if netslots.eligible(net, p, pz, pc, has_exp, act3_words, mean_fields(net)["has_mean"]):
        for r in rows:
            if r["d"].get("_g") is not None:
                r["d"]["_g"]["pairs"] = r["d"]["dw"] == 1 and not r["d"]["sb"]
        wl, units, tz_slots = netslots.relayout([r["d"] for r in rows], [r["d"].get("_g") for r in rows], pz, pc,
                                                TZ_DISTANCE, FUSE_LANES, expmap.EXP_LEAD, write_lanes(pz, True))
    for r in rows:                                 # the descriptors' values, the leading-one maps marked
        dr = r.pop("d")
        dr.pop("_g", None)
        dr.setdefault("uoff", 0)
        dr.setdefault("moff", 0)
        r["vals"] = [int(dr[k]) for k in FIELDS]
    if sum_bits > p["acc_bits"]:
        raise InputError(f"network kernel (bfp): a patch's sum needs {sum_bits} bits, beyond acc_bits = "
                         f"{p['acc_bits']}")
    out = name(net.output["tensor"])
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(1, np.int64)      # noqa: E731
    from ...network.program import _chw
    hw = lambda s: int(np.prod(_chw(s)[1:]))                                   # noqa: E731
    return dict(rows=rows, act_bufs=act_bufs(place), act_words=act_words, act3_words=act3_words, sc_words=sc_words,
                elem_bits=elem_bits(net),                                # rule bfp_prelu_exact (.prelu): 53, else 26
                place=place, pz=pz,
                pc=pc, unfold=unfold,
                weights=[[cat(b) for b in lane] for lane in wl] if units is None else wl, units=units, wexps=[cat(x) for x in el],
                biases=[cat(x) for x in bl], taps=taps or [(0, 0, 0, 0, 0), (0, 0, 0, 0, 0)], sum_bits=sum_bits,
                max_pix=max_pix, max_blocks=max_blocks, tz_slots=tz_slots, map_words=map_words,
                # a board-sized kernel's unfolded load: a word (two values) a cycle, an even row width
                load_pairs=load_pairs, load_map=load_map, unfold_kw=(unfold or {}).get("kw", 0),
                # a conv with an exponent pass (sa > 0): ConvExp rendered (.expmap: every other conv reads a map)
                has_exp=has_exp,
                maps=bool(p.get("net_maps")), fuse=bool(fused),
                pool_bits=WIDE_BITS + 2 + int(max_hw - 1).bit_length() + 1, gap_words=gap_words,
                in_slot=place[inp][0], in_dual=place[inp][1], out_slot=place[out][0],
                in_elems=_size(net.shapes[inp]), out_elems=_size(net.shapes[out]),
                in_words=-(-_size(net.shapes[inp]) // 2), out_words=_size(net.shapes[out]) + 1,
                in_value_bytes=4, out_value_bytes=8,
                in_hw=hw(net.shapes[inp]), out_hw=hw(net.shapes[out]), attn=attn, **lut)


def _third(net, place, act_words, pc):
    """``(act_words, act3_words)``: the ping-pong buffers' words per bank and, where a third
    activation buffer holds only smaller tensors (CBAM's vectors and 1 x H x W maps), its own
    (the kernel's ``act3``, declared apart; 0: the three buffers are one array of ``act_words``,
    as four always are)."""
    words = {}
    for t, (slot, _) in place.items():
        if slot is not None:
            words[slot] = max(words.get(slot, 1), netkernel.bank_words(net.shapes[t], pc))
    if len(words) != 3 or words[2] >= max(words[0], words[1]):     # four: one array of act_words
        return act_words, 0
    return max(words[0], words[1]), words[2]


def _lut_fields(net, m_bits):
    """The kernel's table ROM and widths (netbfp rules bfp_table, bfp_hardswish, bfp_gate): ``luts`` (every table op's
    ``2**b`` output mantissas, its first word in its field ``rom``; a bfp_hardswish HardSwish has none),
    ``lut_bits`` ``b`` (one code width for every table), ``lut_entry_bits``, ``lut_rounding``,
    ``hs_w`` (bfp_hardswish's ``w``), ``gate_bits`` (the widest gate operand's mantissa: a conv's ``M``
    bits, a table's entries, a bfp_hardswish output's ``w + 1``; a max pool's operand is its input's, whose
    elements it picks); :class:`InputError` for a gate of other operands."""
    from .gate import OUT_BITS
    tabs = [op for op in net.ops if op.kind == "lut" and not op.f.get("exact")]
    exact = [op for op in net.ops if op.kind == "lut" and op.f.get("exact")]
    bits = {int(op.f["bits"]) for op in tabs} or {8}         # (a program without tables renders no ROM)
    hs_w = {int(op.f["bits"]) for op in exact if op.f.get("fn") not in ("Clip", "PRelu")} or {9}
    rnd = {op.f["rounding"] for op in tabs + exact} or {net.params["rounding"]}
    if len(hs_w) != 1 or len(rnd) != 1 or max(bits) > 12 or max(hs_w) > 16:
        raise InputError(f"network kernel (bfp): tables of {sorted(bits)}-bit codes, HardSwish of {sorted(hs_w)} "
                         f"bits, {sorted(rnd)} rounding; the kernel holds one HardSwish width and one rounding "
                         f"(codes up to 12 bits)")
    b, w, mixed = max(bits), hs_w.pop(), len(bits) > 1     # rule bfp_wide_codes: codes of the widest b, each op's saturated
    parts, seen = [], {}                           # equal tables stored once (an unrolled cell's gates)
    for op in net.ops:
        if op.kind == "lut":
            op.f["rom"] = sum(len(t) for t in parts)
            if not op.f.get("exact"):
                t = np.asarray(op.f["table"], np.int64)
                if t.size != 1 << int(op.f["bits"]) or np.abs(t).max(initial=0) >= 1 << (OUT_BITS - 1):
                    raise InputError(f"network kernel (bfp): {op.name}: a table of {t.size} entries")
                op.f["rom"] = seen.setdefault(t.tobytes(), op.f["rom"])
                if op.f["rom"] == sum(len(p) for p in parts):
                    parts.append(t)
    made = {op.out: op for op in net.ops}
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    gate_bits = 2
    from .gatesrc import sources                   # through max pools and concats (a ghost module's)
    from .prelu import S_BITS, is_wide
    for op in net.ops:
        if op.kind == "gate":
            widths = []
            for t in op.ins:
                srcs = sources(t, made, name)
                for src in srcs:
                    if src is None or src.kind not in ("conv", "lut"):
                        raise InputError(f"network kernel (bfp): {op.name}: a gate of {name(t)}; the kernel "
                                         f"multiplies conv or table outputs (or max pools or concats of them)")
                widths.append(max(m_bits if src.kind == "conv" else
                                  max(m_bits, int(src.f["clip"][0]).bit_length() + 1) if src.f.get("fn") == "Clip"
                                  else m_bits + S_BITS if is_wide(src)        # rule bfp_prelu_exact: |m S_c| < 2**(M + 23)
                                  else w + 1 if src.f.get("exact") else OUT_BITS for src in srcs))
                gate_bits = max(gate_bits, widths[-1])
            if any(is_wide(src) for t in op.ins for src in sources(t, made, name)) and \
                    sum(widths) - 2 > elem_bits(net) - 1:
                raise InputError(f"network kernel (bfp): {op.name}: a gate of a PRelu's exact product (rule bfp_prelu_exact) by "
                                 f"another operand: {' x '.join(map(str, widths))}-bit mantissas, "
                                 f"products up to {sum(widths) - 2} bits, beyond the kernel's "
                                 f"{elem_bits(net)}-bit element")
    luts = np.concatenate(parts) if parts else np.zeros(1 << b, np.int64)
    return dict(luts=luts, lut_bits=b, lut_mixed=mixed, lut_entry_bits=OUT_BITS, lut_rounding=ROUNDING[rnd.pop()],
                hs_w=w, gate_bits=gate_bits)


def _conv_row(op, f, j, d, shape_bits, roms, offs, most):
    """Fill the descriptor ``d`` of pack ``j`` of the conv ``op`` (``f``: as the kernel runs it;
    one pack for a conv without groups), append its weights, row exponents, biases and its
    exponent pass's taps to ``roms`` (lists ``taps``, per lane ``wl``, ``el``, ``bl``) at
    ``offs`` (``woff``, ``boff``); return ``most`` (tz_slots, sum_bits, max_pix, max_blocks)
    updated. The pack's ``C / packs`` input channels are banks ``[s, s + C / packs)`` from
    channel block ``cb0`` on (the walk's base ``cb0 * H * W``, folded into ``pt_w``; banks
    outside them are read with zero weights and left out of the exponent by the taps' ``c0``,
    ``c``); its ``Z / packs`` outputs start at lane ``zfirst`` of output block ``zb0`` (the
    writes' first bank and word ``wob0``, ``wobase0``; lanes outside the pack hold zero weights
    and bias, so their results are 0 and leave the max rule alone, and are not written)."""
    pz, pc, m_bits = shape_bits
    taps, wl, el, bl = roms
    tz_slots, sum_bits, max_pix, max_blocks = most
    fj = netbfp_pack(f, j)
    if len(fj["chunks"]) != 1:
        raise InputError(f"network kernel (bfp): {op.name}: {len(fj['chunks'])} output chunks in pack {j} (one "
                         f"output exponent per chunk); the kernel takes one a pack")
    ch = fj["chunks"][0]
    cp, zp = fj["c"], fj["z"]
    dh, dw = f.get("dh", 1), f.get("dw", 1)
    kh, kw = netbfp_taps(f)              # the taps, dh and dw apart in the window
    cb0, s = divmod(j * cp, pc)
    cend = s + cp                        # the pack's channels: [s, cend) from channel block cb0
    ncg = -(-cend // pc)
    steps = ncg * kh * kw
    zb0, zfirst = divmod(j * zp, pz)
    nb = -(-(zfirst + zp) // pz)
    wm = np.asarray(ch["wm"], np.int64)
    if f is not op.f:                  # the unfolded stem: (z, C, kh, kw) -> (z, kw*C, kh, 1), channel kx*C + c
        wm = wm.transpose(0, 3, 1, 2).reshape(zp, cp, kh, 1)
    wpad = np.zeros((nb * pz, ncg * pc, kh * kw), np.int64)
    wpad[zfirst:zfirst + zp, s:cend] = wm.reshape(zp, cp, kh * kw)
    per = wpad.reshape(nb * pz, ncg, pc, -1).transpose(0, 2, 1, 3).reshape(nb * pz, pc, steps)
    we, bm = np.zeros(nb * pz, np.int64), np.zeros(nb * pz, np.int64)
    we[zfirst:zfirst + zp], bm[zfirst:zfirst + zp] = ch["we"], ch["bm"]
    for lane in range(pz):
        for q in range(pc):
            wl[lane][q].append(per[lane::pz, q].reshape(-1))
        el[lane].append(we[lane::pz])
        bl[lane].append(bm[lane::pz])
    ohw = f["oh"] * f["ow"]
    toff = len(taps)                    # the exponent pass's taps: (cb, ky, kx) in the walk's order
    for cb in range(ncg):
        for ky in range(kh):
            for kx in range(kw):
                taps.append((cb * f["h"] * f["w"] + ky * dh * f["w"] + kx * dw, ky * dh, kx * dw,
                             min(pc, cend - cb * pc), max(0, s - cb * pc)))
    if len(taps) % 2:
        taps.append((0, 0, 0, 0, 0))
    if (kh - 1) * dh > 127 or (kw - 1) * dw > 127:
        raise InputError(f"network kernel (bfp): {op.name}: a window of {f['kh']}x{f['kw']}; the tap table holds "
                         f"positions up to 127 (8-bit kTapKy, kTapKx)")
    bound = (1 << (2 * m_bits - 2)) * cp * kh * kw
    sum_bits = max(sum_bits, bound.bit_length() + 1)
    max_pix, max_blocks = max(max_pix, ohw), max(max_blocks, nb)
    if ohw > 1:       # the ring of pixels waiting for their writes (tz_slots)
        tz_slots = max(tz_slots, 2 + -(-TZ_DISTANCE // (nb * steps)))
    woff, boff = offs
    d.update(step_chan=f["h"] * f["w"] - (f["kh"] - 1) * f["w"] - (f["kw"] - 1), cg=cend, steps=steps, zb=nb,
             dh=dh, dw=dw, step_row=dh * f["w"] - (kw - 1) * dw, pt_w=d["pt_w"] - cb0 * f["h"] * f["w"],
             zfirst=zfirst, wob0=zb0 * pz % pc, wobase0=zb0 * pz // pc * ohw,
             zlast=zfirst + zp - (nb - 1) * pz, woff=woff, boff=boff, n_iter=ohw * nb * steps + TZ_DISTANCE - 1 + nb,
             sa=ohw * (-(-steps // 2)), shift=int(ch["be"]), blocks_per_group=nb, group_words=toff,
             relu=int(f["relu"]))
    d["_g"] = dict(wpad=wpad, ncg=ncg, cend=cend, kh=kh, kw=kw, dh=dh, dw=dw, h=f["h"], w=f["w"], nb=nb, ohw=ohw)
    return tz_slots, sum_bits, max_pix, max_blocks


def render(net, out_dir):
    """Render the kernel of ``net`` into ``out_dir`` (as :func:`hlsnn.engines.shift_mac.network.kernel.render`):
    ``(files, sha, tables)``."""
    from ...network.joins.chain import sc_add
    from ...network.joins.gatesc import used as gate_sc
    from ....version import __version__
    from . import perf as bfpperf
    from .anymean import cat_fields, mean_fields
    from ...network import perf as netperf
    p = net.params
    pz, pc = shape(p)
    t = tables(net, pz, pc)
    guard = c_ident(net.name).upper()
    e = p["exponent_bits"]
    most_exp = max([r["vals"][FIELDS.index("sa")] for r in t["rows"] if r["vals"][0] == 0] + [1])
    ctx = dict(banner=f"Generated by hlsnn {__version__} from the compiled model {net.name} for {net.accel}; "
                      f"do not edit.", net_name=net.name, accel=net.accel, guard=guard, cfg="NetCfg", top=TOP,
               header="network.h", data_header="network_data.h", mant_bits=p["mantissa_bits"],
               emin=-(1 << (e - 1)), emax=(1 << (e - 1)) - 1, acc_bits=p["acc_bits"], sum_bits=t["sum_bits"],
               elem_bits=t["elem_bits"], wide_bits=WIDE_BITS, gap_words=t["gap_words"], exact_bits=EXACT_BITS,
               pool_bits=t["pool_bits"], pz=pz, pc=pc, pack=packed(p), add_lanes=add_lanes(p, pc),
               maps=t["maps"], map_words=t["map_words"], fuse=t["fuse"], fuse_lanes=FUSE_LANES, exp_lead=expmap.EXP_LEAD, load_pairs=t["load_pairs"],
               load_map=t["load_map"], unfold_c=(t["unfold"] or {}).get("c", 1), has_exp=t["has_exp"],
               pool_map=t["maps"] and pool_odd(net),     # .expmap: the pool's map (AddPoolOdd's gmax)
               wpairs=(quad_words(t["weights"]) if t["units"] else pair_words(t["weights"])) if packed(p) else [],
               lane_tree=lane_tree(len(t["weights"][0])), write_lanes=write_lanes(pz, t["units"] is not None),
               slots=t["units"] is not None, n_slots=len(t["weights"][0]), n_units=len((t["units"] or {}).get("pair", [0])),
               **{f"u_{k}": [_ints(v) for v in t["units"][k]] for k in ("off", "ky", "kx", "n") if t["units"]},
               u_pair=_ints(t["units"]["pair"]) if t["units"] else "",
               n_mtaps=len(t["units"]["mtaps"]) if t["units"] else 0,
               **{f"m_{k}": _ints([x[i] for x in t["units"]["mtaps"]]) for i, k in enumerate(("off", "ky", "kx", "pair"))
                  if t["units"]},
               rounding=ROUNDING[p["rounding"]], act_bufs=t["act_bufs"], act_words=t["act_words"],
               act3_words=t["act3_words"], act3_type=third_storage(t["act3_words"], t["elem_bits"])[0],
               act3_impl=third_storage(t["act3_words"], t["elem_bits"])[1],
               sc_words=t["sc_words"],
               max_pix=t["max_pix"], max_blocks=t["max_blocks"], tz_slots=t["tz_slots"], tz_distance=TZ_DISTANCE,
               in_elems=t["in_elems"],
               in_words=-(-t["in_elems"] // 2), in_slot=t["in_slot"], in_hw=t["in_hw"],
               in_dual="true" if t["in_dual"] else "false", out_elems=t["out_elems"],
               out_words=t["out_words"], out_slot=t["out_slot"], out_hw=t["out_hw"], n_ops=len(t["rows"]), fields=FIELDS,
               ops=t["rows"], lane_of=[j % pz for j in range(pc)], block_of=[j - j % pz for j in range(pc)],
               w_ctype="int8_t" if p["mantissa_bits"] <= 8 else "int16_t", w_words=len(t["weights"][0][0]),
               b_words=len(t["biases"][0]),
               weights=[] if packed(p) else [[_ints(b) for b in lane] for lane in t["weights"]],
               wexps=[_ints(x) for x in t["wexps"]], biases=[_ints(x) for x in t["biases"]],
               max_exp_iter=most_exp, max_conv_iter=_most(t, 0), max_pool_iter=_most(t, 1), max_move_iter=_most(t, 3), max_cat_iter=_most(t, 4), max_tr_iter=_most(t, 5),
               max_add_iter=_most(t, 2), n_taps=len(t["taps"]),
               has_wpool=any(op.kind == "avgpool" for op in net.ops),   # hlsnn.engines.network.pools.linpool
               has_odd=any(op.kind == "avgpool" and op.f.get("odd") for op in net.ops),   # rule bfp_round_odd (.reduce)
               gate_odd=any(op.kind == "gate" and op.f.get("odd") for op in net.ops),     # rule bfp_gate_odd (.gatero)
               odd_bits=netreduce.ODD_BITS, odd_sum_bits=netreduce.SUM_BITS,
               **mean_fields(net),                                       # rule bfp_mean (.anymean)
               **netkernel.pool_scale(net),                              # rule avg_pool_uncounted (engines/network/uncounted)
               tap_off=_ints([x[0] for x in t["taps"]]), tap_ky=_ints([x[1] for x in t["taps"]]),
               tap_kx=_ints([x[2] for x in t["taps"]]), tap_c=_ints([x[3] for x in t["taps"]]),
               tap_c0=_ints([x[4] for x in t["taps"]]),
               tap_tables=[n for n, _, _ in bfpperf.TAP_TABLES], tap_cyclic=bfpperf.TAP_CYCLIC,   # the model's partitions
               has_lut=any(op.kind == "lut" for op in net.ops), has_gate=any(op.kind == "gate" for op in net.ops),
               max_lut_iter=_most(t, 6), max_gate_iter=_most(t, 7), lut_words=len(t["luts"]), luts=_ints(t["luts"]),
               lut_bits=t["lut_bits"], lut_mixed=t["lut_mixed"], lut_rounding=t["lut_rounding"], gate_bits=t["gate_bits"],
               lut_ctype="int8_t" if t["lut_entry_bits"] <= 8 else "int16_t", hs_w=t["hs_w"],
               has_hswish=any(op.kind == "lut" and op.f.get("exact") and op.f.get("fn") not in ("Clip", "PRelu")
                              for op in net.ops),
               has_clip=any(op.kind == "lut" and op.f.get("fn") == "Clip" for op in net.ops),
               has_prelu=t["prelu"] is not None,
               prelu_wide=t["elem_bits"] != ELEM_BITS,                  # rule bfp_prelu_exact: r of kElemBits bits
               prelu_words=t["prelu"][0].shape[1] if t["prelu"] is not None else 0,
               prelu_m=[_ints(b) for b in t["prelu"][0]] if t["prelu"] is not None else [],
               prelu_e=[_ints(b) for b in t["prelu"][1]] if t["prelu"] is not None else [],
               **cat_fields(net),                                        # rule bfp_mean_concat (.anymean)
               sc_add=sc_add(net, t["place"]), gate_sc=gate_sc(net, t["place"]),
               act_distance=max(bfpperf.EXP_DEPTH, bfpperf.MAC_DEPTH, bfpperf.ADD_DEPTH, netperf.POOL_DEPTH),
               **families(t),                                            # only the op families it has
               pool_odd=pool_odd(net),                                   # a pool's sums as elements
               **_attn_fields(net, t, pc),                               # attention on pairs (.attnkern)
               **netkernel.unfold_fields(t["unfold"], pc))
    return netkernel.render_templates("bfp_systolic", ctx, out_dir) + (t,)


def _attn_fields(net, t, pc):
    """The attention loops' template fields (.attnkern), the codes' rounding (the deployment's)."""
    from . import attnkern
    rnd = {op.f["rounding"] for op in net.ops if op.kind in ("addc", "softmax", "plnorm")}
    if len(rnd) > 1:
        raise InputError(f"network kernel (bfp): attention's codes in {sorted(rnd)} roundings; the kernel holds one")
    t = dict(t, attn_rounding=ROUNDING[rnd.pop()] if rnd else 0)
    return attnkern.fields(net, t, t["rows"], pc, t["elem_bits"])


def build(net, *, strict=None, out_root=None):
    """The C-simulation library of ``net``'s bfp network kernel (cached): ``(path, tables)``."""
    return netkernel.build(net, strict=strict, out_root=out_root, render_fn=render)


def pack_input(xq):
    """The input pairs ``(m, e)`` (B, ...) (netbfp rule bfp_input: float32 values) as the kernel's
    64-bit words, two float32 words each, low word first: (B, ceil(n / 2)) uint64."""
    m, e = xq
    b = m.shape[0]
    v = np.ldexp(np.asarray(m, np.float64).reshape(b, -1), np.asarray(e, np.int64).reshape(b, -1))
    w32 = v.astype(np.float32)
    if not np.array_equal(w32.astype(np.float64), v):
        raise InputError("network kernel (bfp): the input pairs are not float32 values")
    n = w32.shape[1]
    words = np.zeros((b, 2 * (-(-n // 2))), np.uint32)
    words[:, :n] = w32.view(np.uint32)
    return words.view(np.uint64)


def unpack_output(words):
    """The kernel's output words (B, n) as pairs ``(m, e)``: the 54-bit mantissa and the 10-bit
    exponent above it, both signed."""
    w = np.asarray(words, np.uint64)
    m = (w & np.uint64((1 << WIDE_BITS) - 1)).astype(np.int64)
    m = np.where(m >= 1 << (WIDE_BITS - 1), m - (1 << WIDE_BITS), m)
    e = ((w >> np.uint64(WIDE_BITS)) & np.uint64(0x3FF)).astype(np.int64)
    return m, np.where(e >= 512, e - 1024, e)


def finish_words(net, xq, out):
    """The output pairs (B, out_elems) from the kernel's output words ``out`` (B, out_elems + 1):
    the elements, then the status word. Status bit 0 raises
    :class:`hlsnn.engines.bfp_systolic.network.lower.NotExact` (a sum beyond its bound, rules bfp_add and bfp_global_pool).
    Nothing else is reported: an all-zero patch takes the descriptor's ``xz`` (rule bfp_conv, batch-free)."""
    from . import lower as netbfp
    out = np.asarray(out, np.uint64)
    n = int(np.prod(net.output["shape"]))
    status = out[:, n].astype(np.int64)
    if (status & 1).any():
        raise netbfp.NotExact(f"network kernel (bfp) of {net.name}: image(s) {np.flatnonzero(status & 1).tolist()}: "
                              f"a sum beyond its bound: a residual sum beyond 25 bits (the kernel's element) or a "
                              f"pool's beyond 53 (the layer path's float64 rounds); netbfp rules bfp_add, bfp_global_pool")
    return unpack_output(out[:, :n])


class BfpNetKernel(netkernel.NetKernel):
    """The bfp_systolic network kernel's C-simulation library (as
    :class:`~hlsnn.engines.network.kernel.NetKernel`): :meth:`run` takes the input pairs and
    returns the output pairs."""

    def __init__(self, net, *, strict=None):
        super().__init__(net, strict=strict, builder=build)
        self.in_words = -(-self.tables["in_elems"] // 2)
        self.out_words = self.tables["out_words"]

    @staticmethod
    def check(net):
        """:class:`InputError` when the kernel cannot run ``net`` (its tables refuse it)."""
        tables(net, *shape(net.params))

    def run(self, xq):
        """``xq = (m, e)`` (B, ...) -> the output pairs (B, out_elems) int64, the status word
        interpreted (:func:`finish_words`)."""
        return finish_words(self.net, xq, self.run_words(pack_input(xq)))

    def run_words(self, x):
        """The kernel on a batch of input words (B, in_words) uint64, in one call of the top
        function: its output words (B, out_words), the output elements, then the status word."""
        x = np.ascontiguousarray(x, np.uint64)
        b = x.shape[0]
        out = np.zeros((b, self.out_words), np.uint64)
        self._call(x, out, b)
        return out

    def cycles_per_image(self):
        from . import perf as bfpperf
        return sum(c for _, _, c in bfpperf.op_cycles(self.net, self.tables))
