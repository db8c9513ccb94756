"""The network kernel of a lowered ``shift_mac`` network (:mod:`hlsnn.deploy.lower.program` with
:mod:`~hlsnn.engines.shift_mac.network.lower`'s rules): its descriptor table and resident weights (:func:`tables`), rendered
into ``hls/engines/shift_mac/network*.j2`` (:func:`render`); the buffers, the descriptor head
and the binding are :mod:`hlsnn.engines.network.kernel`'s, which its docstring describes."""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from ....names import c_ident
from . import dsp as dspbanks, pairs
from ...network.kernel import (FIELDS, ROUNDING, TOP, _ints, _most, _size, act_bufs, allocate, descriptor_head,
                               div_bits, expand_groups, group_windows, pool_or_add, render_templates, unfold_fields,
                               unfold_of)


def _code_words(f, term=""):
    """The 16-bit weight codes (Z, Cg*kh*kw) of a conv op (bits: network_data.h.j2); ``term``
    "2": its second codes (a two-term layer, :mod:`..network.lower`; zero codes where it has none)."""
    if "zero" + term not in f["fields"]:
        return np.full((f["z"], int(np.prod(np.shape(f["fields"]["zero"]))) // f["z"]), 1 << 15, np.int64)
    ea, eb, so, hb, sb, zero = (np.asarray(f["fields"][k + term], np.int64).reshape(f["z"], -1)
                                for k in ("ea", "eb", "so", "hb", "sb", "zero"))
    return ea | (eb << 6) | (so << 12) | (hb << 13) | (sb << 14) | (zero << 15)


def depthwise(f):
    """A conv op's fields ``f`` are a depthwise conv's (``groups = C = Z``)."""
    return f["group"] > 1 and f["group"] == f["c"] == f["z"]


def tables(net, pz, pc):
    """The descriptor rows, the weight/bias/shift ROMs (``pz`` output lanes by ``pc`` channel
    banks) and the widths the kernel needs.

    **Wide depthwise blocks.** When the program has a depthwise conv and ``pc > pz``, each lane
    gets ``parts = pc/pz`` accumulators and epilogues, and a depthwise conv runs in blocks of
    ``pc`` channels (descriptor ``wide``): lane ``l``'s part ``k`` is channel ``k*pz + l`` of the
    block, in bank ``k*pz + l``, whose code sits in ROM (``l``, ``k*pz + l``); the parts are the
    sums of the lane's ``pz``-bank slices of its adder tree, kept apart. So a depthwise conv takes
    ``ceil(C/pc) * OH * OW * kh * kw`` cycles, every bank feeding one MAC a cycle. The bias
    and shift ROMs are ``parts x pz`` (row ``k*pz + l``); other convs use part 0.

    **Tap pairs** (:mod:`hlsnn.engines.shift_mac.network.pairs`): with ``pc/2`` a multiple of ``pz``,
    narrow tensors are copied into the upper banks and the dense convs that read them take two taps
    a cycle (descriptor ``dup``, ``pair``; their codes laid out by
    :func:`hlsnn.engines.shift_mac.network.pairs.layout`). **ROM codes** (:func:`narrow_codes`): as
    many bits as the program's largest shift needs, a power-of-two program's without the second
    term's fields (``pot``: the kernel renders one-shifter units), :func:`weight_pack` codes a word."""
    if pc % pz:
        raise InputError(f"network kernel: {pc} channel banks is not a multiple of {pz} output lanes")
    place, act_words, sc_words = allocate(net, pc)
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    parts = pc // pz if any(op.kind == "conv" and depthwise(op.f) for op in net.ops) else 1
    rows = []
    wl = [[[] for _ in range(pc)] for _ in range(pz)]
    terms = 2 if any(op.kind == "conv" and "zero2" in op.f["fields"] for op in net.ops) else 1
    wl2 = [[[] for _ in range(pc)] for _ in range(pz)]    # the second codes (terms 2: kWeights2)
    dsp = bool(net.params.get("net_dsp"))          # DSP banks (.dsp): the upper half of the banks
    if dsp:
        dspbanks.check(net, pz, pc)
        if terms == 2:
            raise InputError("network kernel: net_dsp takes one code a weight (weight_terms 1)")
    sa = dspbanks.banks(pc, dsp)                   # the shift-add banks
    bl, sl = [[] for _ in range(parts * pz)], [[] for _ in range(parts * pz)]
    wins = []                                      # per block: its window's base (kWinBase)
    woff = boff = 0
    max_ea, sum_bits, add_bits = 0, 0, 0
    two = terms == 2                               # a code with a second term (else pot: one shifter a unit)
    a_bits = net.input["bits"]
    unfold = unfold_of(net, place, pc)
    dup, paired = pairs.plan(net, place, pz, pc, unfold)   # tap pairs (.pairs)
    from ...network.gate import lut_roms
    luts, lut_banks = lut_roms(net, a_bits, pc)    # rule 9ch: a ROM copy per bank, else None
    from ...network.tokens.layernorm import roms as ln_roms
    ln_g, ln_b = ln_roms(net, pc)                  # rule 15's scale and bias codes, a ROM per bank
    from ...network.tokens import attention, attnkernel
    attn = attnkernel.tables(net, place, pc)       # rules 16-19's ROMs (hlsnn.engines.network.tokens.attnkernel)
    from ...network.joins.chain import wide_bits
    wide_sums = wide_bits(net)                     # chained Adds' exact sums: wider shortcut words
    for op in net.ops:
        f, d = descriptor_head(op, unfold, place, name, pz, pc, sc_transpose=True)
        d.update(pairs.fields(op, f, dup, paired))
        if op.kind == "conv":
            z, g = f["z"], f["group"]
            cg = f["c"] // g
            wide = parts > 1 and depthwise(f)
            win = group_windows(f, pc if wide else pz, pc)
            ncg = win["ncb"]
            steps = pairs.steps(f) if d["pair"] else ncg * f["kh"] * f["kw"]
            nb = -(-z // (pc if wide else pz))
            pers, mag = [], 0
            for term in ("", "2")[:terms]:
                codes = _code_words(op.f, term).reshape(z, cg, f["kh"] * f["kw"])
                if f is not op.f:                  # (z, C, kh, kw) -> (z, kw*C, kh): channel kx*C + c
                    kw0 = op.f["kw"]
                    codes = _code_words(op.f, term).reshape(z, cg // kw0, f["kh"], kw0).transpose(0, 3, 1, 2).reshape(
                        z, cg, -1)
                if d["pair"]:                      # two taps a cycle (.pairs)
                    pers.append(pairs.layout(codes, pc))
                else:
                    # a zero code outside its group
                    cpad = expand_groups(codes, f, win, pc if wide else pz, pc, 1 << 15)
                    # per output channel: tap t = (channel block, ky, kx), bank j: channel block*pc + j
                    pers.append(cpad.reshape(z, ncg, pc, -1).transpose(0, 2, 1, 3).reshape(z, pc, steps))
                if "zero" + term in f["fields"]:
                    live = np.asarray(f["fields"]["zero" + term]).reshape(z, -1) == 0
                    ea = int(np.max(np.where(live, np.asarray(f["fields"]["ea" + term]).reshape(z, -1), 0), initial=0))
                    eb = int(np.max(np.where(live, np.asarray(f["fields"]["eb" + term]).reshape(z, -1), 0), initial=0))
                    max_ea = max(max_ea, ea, eb)
                    mag += (1 << ea) + (1 << eb)
                    two = two or bool(np.any(live & (np.asarray(f["fields"]["hb" + term]).reshape(z, -1) != 0)))
            bound = (1 << (a_bits - 1)) * mag * cg * f["kh"] * f["kw"]
            sum_bits = max(sum_bits, bound.bit_length() + 1)
            shift = np.broadcast_to(np.asarray(f["shift"], np.int64).reshape(-1), (z,))
            if shift.min() < -60 or shift.max() > 60:
                raise InputError(f"network kernel: {op.name}: output shift {shift.min()}..{shift.max()} beyond +-60")
            for lane in range(pz):
                blks = [np.full((nb, pc, steps), 1 << 15, np.int64) for _ in pers]
                for k in range(parts):
                    # output channel of (block, this lane, part k): its bank's ROM in a wide block
                    zz = np.arange(nb) * pc + k * pz + lane if wide else np.arange(lane, nb * pz, pz)
                    real = zz < z
                    for blk, per in zip(blks, pers):
                        if wide:
                            blk[real, k * pz + lane] = per[zz[real], k * pz + lane]
                        elif k == 0:
                            blk[real] = per[zz[real]]
                    on = real & (wide or k == 0)
                    bl[k * pz + lane].append(np.where(on, f["bias"][np.minimum(zz, z - 1)], 0))
                    sl[k * pz + lane].append(np.where(on, shift[np.minimum(zz, z - 1)], 0))
                for j in range(pc):
                    for w_, blk in zip((wl, wl2), blks):
                        w_[lane][j].append(blk[:, j].reshape(-1))
            d.update(step_chan=f["h"] * f["w"] - (f["kh"] - 1) * f["w"] - (f["kw"] - 1),
                     cg=cg if g == 1 else min(ncg * pc, f["c"]), steps=steps, zb=nb,   # cg: the banks a tap reads
                     zlast=z - (nb - 1) * (pc if wide else pz), woff=woff, boff=boff,
                     n_iter=nb * f["oh"] * f["ow"] * steps, relu=int(f["relu"]), wide=int(wide))
            wins.append(np.asarray(win["bases"], np.int64))
            woff += nb * steps
            boff += nb
        elif op.kind in attention.KINDS:               # attention's loops (hlsnn.engines.network.tokens.attnkernel)
            attnkernel.descriptor(net, op, d, place, name, pc)
        else:
            add_bits = max(add_bits, pool_or_add(op, f, d, place, name, pc, a_bits, wide_sums))
        rows.append(dict(comment=f"{op.name}: {op.kind} {' + '.join(op.ins)} -> {op.out}",
                         vals=[int(d[k]) for k in FIELDS + pairs.FIELDS], names=FIELDS + pairs.FIELDS))
    inp, out = name(net.input["name"]), name(net.output["tensor"])
    from ...network import words as networds
    io = networds.fields(_size(net.shapes[inp]), _size(net.shapes[out]), a_bits)   # the image words' lanes
    cat = lambda parts: np.concatenate(parts) if parts else np.zeros(1, np.int64)      # noqa: E731
    from ...network.program import _chw
    hw = lambda shape: int(np.prod(_chw(shape)[1:]))                                   # noqa: E731
    ebits = max(1, max_ea.bit_length())            # the ROM's codes (narrow_codes)
    cw = code_bits(ebits, not two)
    pack = weight_pack(pz, cw)
    weights, words, weights2, words2 = [], [], None, None
    for w_ in (wl, wl2)[:terms]:
        ws = [[cat(b) if b else np.full(1, 1 << 15, np.int64) for b in lane] for lane in w_]
        wd = [[sum(narrow_codes(ws[q * pack + h][j], ebits, not two) << (cw * h) for h in range(pack))
               for j in range(sa)] for q in range(pz // pack)]
        weights, words, weights2, words2 = (ws, wd, None, None) if w_ is wl else (weights, words, ws, wd)
    max_code = net.params.get("max_code")        # the code limit: a product's bound (formats.shift)
    if max_code:
        dspbanks.limit(weights, int(max_code))
    words_d = dspbanks.rom(weights, pz, pc) if dsp else None     # the DSP banks' values (kWeightsD)
    prod_bits = (a_bits + max_ea + 2 if not max_code
                 else min(a_bits + max_ea + 2, (int(max_code) << (a_bits - 1)).bit_length() + 1))
    # a board-sized kernel's unfolded load: a pixel of every input channel a cycle, plus a group of
    # kWordLanes cycles to fetch the first words (network.cpp.j2's fast LoadImage)
    wlanes = 64 // io["lane_bits"]
    fast = bool(unfold and net.params.get("net_shape") == "board" and unfold["c"] <= wlanes
                and hw(net.shapes[inp]) % wlanes == 0)
    return dict(rows=rows, act_bufs=act_bufs(place), act_words=act_words, sc_words=sc_words, place=place, pz=pz,
                **({"load_iters": hw(net.shapes[inp]) + wlanes} if fast else {}),
                pc=pc, pack=pack, code_bits=cw, exp_bits=ebits, unfold=unfold,
                parts=parts,
                weights=weights, words=words, dsp=dsp, sa_banks=sa, max_shift=max_ea,
                **({"words_d": words_d} if dsp else {}), **(dict(terms=2, weights2=weights2, words2=words2) if terms == 2 else {}),
                biases=[cat(x) for x in bl], shifts=[cat(x) for x in sl], win_base=cat(wins),
                pot=not two, tap_pairs=bool(paired),
                prod_bits=prod_bits, sum_bits=max(sum_bits, net.params["acc_bits"]),
                add_bits=max(add_bits, a_bits + 2, 16), **div_bits(net, max(add_bits, a_bits + 2, 16)),
                sc_bits=max([a_bits] + list(wide_sums.values())), in_slot=place[inp][0], in_dual=place[inp][1],
                out_slot=place[out][0], in_elems=_size(net.shapes[inp]), out_elems=_size(net.shapes[out]),
                in_hw=hw(net.shapes[inp]), out_hw=hw(net.shapes[out]), luts=luts, **({} if lut_banks is None else {"lut_banks": lut_banks}), **io,
                ln_g=ln_g, ln_b=ln_b, attn=attn)


def lanes(p):
    """``(output lanes, channel banks)`` of a shift_mac config: its ``net_lanes`` and
    ``net_banks`` (by default its ``rows`` banks and the largest divisor of them not above its
    ``cols``: on shift8_pynq-z2 the layer kernel's 8 x 16 units; with ``net_shape: board`` the
    most that fit the board, :mod:`hlsnn.engines.shift_mac.netsize`: 16 x 16 on
    shift8net_pynq-z2). The network kernel is a bitstream of its own, so it is sized for itself."""
    return int(p.get("net_lanes") or p["cols"]), int(p.get("net_banks") or p["rows"])


def tree_fields(pc, parts):
    """The template fields of a lane's adder tree over ``pc`` banks in ``parts`` slices (one tree
    a slice): ``tree_levels`` (:func:`~hlsnn.engines.shift_mac.network.perf.tree_levels` of a slice's
    banks) and ``top_level``."""
    from .perf import tree_levels
    lv = tree_levels(pc // parts)
    return dict(tree_levels=lv, top_level=len(lv))


def weight_pack(pz, cw=16):
    """Weight codes per ROM word: the most output lanes' codes of ``cw`` bits (:func:`code_bits`)
    a 32-bit word holds, a power of two dividing ``pz``: two 10-bit two-hot codes, four 5-bit
    power-of-two codes (3-bit exponents), so that a ROM of a few hundred words fills a BRAM18 in
    its 512 x 36 shape and ``pz / pack`` ROMs a bank feed the lanes
    (:mod:`hlsnn.engines.shift_mac.network.perf`)."""
    pack = 1
    while pz % (2 * pack) == 0 and 2 * pack * cw <= 32:
        pack *= 2
    return pack


def code_bits(ebits, pot):
    """Bits of a ROM code (:func:`narrow_codes`) with ``ebits``-bit shifts: ``ebits + 2`` in a
    power-of-two program, ``2 * ebits + 4`` otherwise."""
    return ebits + 2 if pot else 2 * ebits + 4


def narrow_codes(c, ebits, pot):
    """The 16-bit weight codes ``c`` (:func:`_code_words`: ea, eb in 6 bits each, so, hb, sb, zero)
    as the ROM holds them, in :func:`code_bits` bits: ``ea`` in ``ebits`` bits, then (not ``pot``)
    ``eb`` in ``ebits``, then ``so``, (not ``pot``) ``hb`` and ``sb``, then ``zero``; the kernel's
    ``Widen`` puts the fields back. :class:`InputError` when a code does not survive the trip (a
    shift wider than ``ebits``, a second term in a ``pot`` program)."""
    c = np.asarray(c, np.int64)
    m = (1 << ebits) - 1
    ea, eb, so, hb, sb, zero = c & 63, (c >> 6) & 63, (c >> 12) & 1, (c >> 13) & 1, (c >> 14) & 1, (c >> 15) & 1
    if pot:
        out, back = ea | (so << ebits) | (zero << (ebits + 1)), (ea & m) | (so << 12) | (zero << 15)
    else:
        out = (ea | (eb << ebits) | (so << 2 * ebits) | (hb << 2 * ebits + 1) | (sb << 2 * ebits + 2)
               | (zero << 2 * ebits + 3))
        back = (ea & m) | ((eb & m) << 6) | (so << 12) | (hb << 13) | (sb << 14) | (zero << 15)
    if np.any(back != c):
        raise InputError(f"network kernel: a weight code does not fit the ROM's {code_bits(ebits, pot)}-bit codes")
    return out


def render(net, out_dir):
    """Render the kernel of ``net`` into ``out_dir``: ``network.cpp``, ``network.h``,
    ``network_data.h``, ``bridge.cpp`` and the hlsnn headers. Returns ``(files, sha, tables)``."""
    from ...network.joins.chain import sc_add
    from ...network.joins.gatesc import used as gate_sc
    from ....version import __version__
    from . import perf as netperf
    from ...network.tokens import attnkernel, layernorm
    p = net.params
    pz, pc = lanes(p)
    t = tables(net, pz, pc)
    guard = c_ident(net.name).upper()
    ctx = dict(banner=f"Generated by hlsnn {__version__} from the compiled model {net.name} for {net.accel}; "
                      f"do not edit.", net_name=net.name, accel=net.accel, guard=guard, cfg="NetCfg", top=TOP,
               header="network.h", data_header="network_data.h", act_bits=net.input["bits"],
               act_min=-(1 << (net.input["bits"] - 1)), lane_bits=t["lane_bits"], acc_bits=p["acc_bits"],
               prod_bits=t["prod_bits"], leaf_bits=t["prod_bits"] + (t.get("terms", 1) == 2), pot_units=t["pot"],
               **tree_fields(pc, t["parts"]), tap_pairs=t["tap_pairs"], fast_load="load_iters" in t,
               unfold_c=(t["unfold"] or {}).get("c", 1),
               sum_bits=t["sum_bits"], add_bits=t["add_bits"], div_bits=t["div_bits"],
               pool_scale=t["pool_scale"], pool_scale_bits=t["pool_scale_bits"], div_xbits=t["div_xbits"],
               div_mbits=t["div_mbits"], add_div=t["add_div"], pool_div=t["pool_div"], sc_bits=t["sc_bits"], pz=pz,
               pc=pc, in_hw=t["in_hw"], out_hw=t["out_hw"],
               rounding=ROUNDING[p["rounding"]],
               add_rounding=ROUNDING[net.input["rounding"]], act_bufs=t["act_bufs"], act_words=t["act_words"],
               sc_words=t["sc_words"],
               in_elems=t["in_elems"], in_words=t["in_words"], in_slot=t["in_slot"],
               in_dual="true" if t["in_dual"] else "false", out_elems=t["out_elems"],
               out_words=t["out_words"], out_slot=t["out_slot"], n_ops=len(t["rows"]), ops=t["rows"],
               w_words=len(t["weights"][0][0]), b_words=len(t["biases"][0]), pack=t["pack"], pz_words=pz // t["pack"],
               pack_log=t["pack"].bit_length() - 1, code_bits=t["code_bits"], exp_bits=t["exp_bits"],
               weights=[[_ints(b) for b in q] for q in t["words"]], net_dsp=t["dsp"], sa_banks=t["sa_banks"],
               weights_d=[[_ints(b) for b in q] for q in t.get("words_d", ())], terms2=t.get("terms", 1) == 2,
               weights2=[[_ints(b) for b in q] for q in t.get("words2", ())], biases=[_ints(b) for b in t["biases"]],
               shifts=[_ints(s) for s in t["shifts"]], win_base=_ints(t["win_base"]),
               max_conv_iter=_most(t, 0), max_pool_iter=_most(t, 1), max_add_iter=_most(t, 2),
               max_move_iter=_most(t, 3), max_cat_iter=_most(t, 4), max_tr_iter=_most(t, 5),
               has_wpool=any(op.kind == "avgpool" for op in net.ops),   # hlsnn.engines.network.pools.linpool
               has_linwide=any(op.kind == "linwide" for op in net.ops),  # hlsnn.engines.network.joins.linwide
               has_lut=any(op.kind == "lut" for op in net.ops), has_gate=any(op.kind == "gate" for op in net.ops),
               max_lut_iter=_most(t, 6), max_gate_iter=_most(t, 7), lut_words=len(t["luts"]), luts=_ints(t["luts"]),
               lut_banks=[_ints(r) for r in t["lut_banks"]] if "lut_banks" in t else None,
               lut_type="int8_t" if net.input["bits"] <= 8 else "int16_t",
               **layernorm.widths(net, net.input["bits"], pc), ln_words=t["ln_g"].shape[1],   # rule 15
               ln_g=[_ints(r) for r in t["ln_g"]], ln_b=[_ints(r) for r in t["ln_b"]],
               **attnkernel.widths(net, t, pc),                                     # rules 16-19 (.attnkernel)
               lane_of=[j % pz for j in range(pc)], block_of=[j - j % pz for j in range(pc)],
               parts=t["parts"], part_of=[j // pz if t["parts"] > 1 else 0 for j in range(pc)],
               sc_add=sc_add(net, t["place"]), gate_sc=gate_sc(net, t["place"]),
               split_shift=any("split" in op.f for op in net.ops),   # rule 8m (hlsnn.engines.network.joins.catmix)
               act_distance=max(netperf.CONV_DEPTH, netperf.POOL_DEPTH, netperf.ADD_DEPTH),
               **unfold_fields(t["unfold"], pc))
    return render_templates("shift_mac", ctx, out_dir) + (t,)
