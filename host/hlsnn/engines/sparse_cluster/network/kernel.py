"""The network kernel of a lowered ``sparse_cluster`` network (:mod:`hlsnn.deploy.lower.program`
with :mod:`hlsnn.engines.sparse_cluster.network.lower`'s rules): its compressed weights and step table, its
descriptor table, rendered into ``hls/engines/sparse_cluster/network*.j2`` (the C ABI bridge is
the shift_mac network kernel's), built for C-simulation and run through ctypes.

**Shape** (:func:`shape`): ``P`` output lanes (output channels per block: the config's
``max_z``), ``M`` multipliers per lane (``units * tile_w / max_z``: the layer kernel's int8
multipliers, 128 on sparse8_pynq-z2, one DSP each) and ``Q = P`` activation banks (each
reading its own tap in a step, so more banks than lanes would buy little).

**Buffers**: :func:`hlsnn.engines.network.kernel.allocate` (two ping-pong buffers and a shortcut
buffer in ``Q`` channel banks, as the shift_mac network kernel).

**Steps** (:func:`schedule`): a block of ``P`` output channels has a list of steps. In a step
each bank ``j`` reads one tap (channel ``cb*Q + j`` of the group at kernel position ``ky,
kx``: an address and a padding test per bank), and each lane takes up to ``M`` of its
non-zero weights among those ``Q`` values (a ``Q:1`` select per multiplier). A zero weight has
no slot, so a block needs at least ``max_l ceil(n_l / M)`` steps (``n_l`` the lane's non-zeros)
and at least as many as the most taps one bank must read; the greedy schedule comes close to
the larger of the two. A block with no non-zero weight at all keeps one empty step (its
outputs are the output rule of the bias alone). A conv taking its input in two terms (rule two_term_input,
:mod:`hlsnn.engines.network.lintwo`) has per block the schedule of its ``hi`` channels, then that
of its ``lo`` channels; the ``kShl`` flag of the first ``lo`` step shifts the accumulators left by 7
(its two terms made by the ``LinWide`` loop or, from a plain Add, by the ``Add`` loop in two
passes, descriptor ``wide`` 2: no ``AddPairs`` then). With ``net_bits: 4`` a conv of int8 input codes
runs its schedule twice, on the codes' ``hi`` then ``lo`` nibbles (``kNib``; ``kShl`` shifts by 4:
:mod:`hlsnn.engines.sparse_cluster.lowbit`). A pixel of a block takes exactly the block's
steps: the kernel's cycles follow the non-zeros (:mod:`hlsnn.engines.sparse_cluster.network.perf`).

**Board-sized** (a config with ``net_shape: board``, :mod:`hlsnn.engines.sparse_cluster.netsize`):
``P`` lanes, ``B`` channel banks read ``S`` times a cycle (replicas), every lane multiplying all
``Q = B * S`` virtual banks' values (no select; lane pairs share a DSP48 for ``K`` slots), its
own step schedule (:func:`hlsnn.engines.sparse_cluster.netsize.schedule`), the unfolded image
load a pixel of every channel a cycle (``load_iters``) and the residual Add two pixels a cycle
(``fast_add``: its descriptors count pixel pairs).
"""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from ....names import c_ident
from ...network import kernel as netkernel
from ...network import lintwo
from ...network.kernel import (FIELDS, ROUNDING, TOP, _ints, _most, _size, act_bufs, allocate, descriptor_head,
                               div_bits, pool_or_add)


def sized(p):
    """The board-sized shape ``{net_lanes, net_banks, net_sub, net_pack}`` of a config with
    ``net_shape: board`` (:mod:`hlsnn.engines.sparse_cluster.netsize`), else None."""
    if "net_sub" not in p:
        return None
    four = {"net_bits": 4} if p.get("net_bits") == 4 else {}     # four int4 products a DSP (netsize, lowbit)
    wlut = {"net_wlut": int(p["net_wlut"])} if p.get("net_wlut") else {}   # weight words in LUT ROMs (netsize.buffers)
    return dict({k: int(p[k]) for k in ("net_lanes", "net_banks", "net_sub", "net_pack")}, **four, **wlut)


def shape(p):
    """``(P lanes, Q banks, M multipliers per lane)`` of a sparse_cluster config (module
    docstring); board-sized: ``(P, B physical banks, Q = B * S slots)``."""
    sz = sized(p)
    if sz:
        return sz["net_lanes"], sz["net_banks"], sz["net_banks"] * sz["net_sub"]
    pz = int(p["max_z"])
    pm = max(1, int(p["units"]) * int(p["tile_w"]) // pz)
    return pz, pz, pm


def schedule(codes, pc, pm, pz):
    """The steps of one conv op's weights ``codes`` (Z, Cg, kh, kw) int: a list per block of
    ``(taps, lanes)``: ``taps`` one ``(cb, ky, kx)`` (or None) per bank, ``lanes`` per lane up
    to ``pm`` ``(weight, bank)`` (module docstring). Greedy: in each step every bank reads the
    tap whose remaining non-zeros belong to the busiest lanes, and every lane takes up to
    ``pm`` of its non-zeros among the banks' taps, the banks with the most taps still to read
    first."""
    z, cg, kh, kw = codes.shape
    ncb = -(-cg // pc)
    blocks = []
    for b0 in range(0, z, pz):
        wb = np.asarray(codes[b0:b0 + pz], np.int64)
        lanes_n = wb.shape[0]
        w4 = np.zeros((lanes_n, ncb * pc, kh, kw), np.int64)
        w4[:, :cg] = wb
        # (lane, bank j, tap t = (cb*kh + ky)*kw + kx): channel cb*pc + j at (ky, kx)
        wt = w4.reshape(lanes_n, ncb, pc, kh, kw).transpose(0, 2, 1, 3, 4).reshape(lanes_n, pc, -1)
        need = wt != 0
        steps = []
        while need.any():
            rem = need.sum(axis=(1, 2))
            has = need.any(axis=0)                                   # (bank, tap)
            score = np.where(has, (need * rem[:, None, None]).sum(axis=0), -1)
            banks = np.flatnonzero(has.any(axis=1))
            tsel = score.argmax(axis=1)
            order = banks[np.argsort(-has[banks].sum(axis=1), kind="stable")]
            lanes = []
            for lane in range(lanes_n):
                js = [int(j) for j in order if need[lane, j, tsel[j]]][:pm]
                lanes.append([(int(wt[lane, j, tsel[j]]), j) for j in js])
                need[lane, js, tsel[js]] = False
            taps = [None] * pc
            for j in banks:
                cb, r = divmod(int(tsel[j]), kh * kw)
                taps[j] = (cb, r // kw, r % kw)
            steps.append((taps, lanes))
        if not steps:
            steps.append(([None] * pc, [[] for _ in range(lanes_n)]))
        blocks.append(steps)
    return blocks


def tables(net, pz, pc, pm, plan=None):
    """The descriptor rows, the step table, the weight/bias/shift ROMs and the widths (a
    board-sized kernel: ``pm`` virtual banks, each lane's weights in 64-bit words of eight
    slots, :mod:`hlsnn.engines.sparse_cluster.netsize`). With ``net_bits: 4`` the blocks
    :func:`hlsnn.engines.sparse_cluster.netsize.stream_plan` picks (``plan``: the keys ``(op
    name, block)``; None: picked from this program's plain tables) stream their pixels
    (:func:`~hlsnn.engines.sparse_cluster.netsize.block_steps`)."""
    from .. import netsize
    sz = sized(net.params)
    sub = pm // pc if sz else 1
    nq = pc * sub                                  # the banks a step's taps are read from
    four = bool(sz) and sz.get("net_bits") == 4    # lowbit: int4 weights, sixteen slots a word, uint4 inputs
    if four and plan is None:                      # the plain tables first: their blocks and steps choose
        if sub < 2 or pc & (pc - 1):               # the split sums need kPc a power of two (netsize.tree4)
            return tables(net, pz, pc, pm, frozenset())
        t0 = tables(net, pz, pc, pm, frozenset())
        plan = netsize.stream_plan(t0["stream_blocks"], sub, len(t0["steps"]))
        return tables(net, pz, pc, pm, frozenset(plan)) if plan else t0
    stream_blocks = []                             # lowbit: the blocks that may stream
    xmode = {}                                     # lowbit: per conv u4, s5 (signed inputs) or nib (int8 in nibbles)
    if four:
        from .. import lowbit
        lowbit.check(net)
        xmode = lowbit.modes(net)
        if any(m != "u4" for m in xmode.values()):
            sz = dict(sz, net_x="s5")              # int4 x int5 products (netsize.logic, lowbit)
    slots = 16 if four else 8
    if sz:
        wl = [[[] for _ in range(-(-pm // slots))] for _ in range(pz)]
    if pc % pz:
        raise InputError(f"network kernel: {pc} channel banks is not a multiple of {pz} output lanes")
    if four:                                       # lowbit: the Adds fused into their convs (.fuseadd)
        from .fuseadd import fuse
        net, place, act_words, sc_words = fuse(net, pc)
    else:
        place, act_words, sc_words = allocate(net, pc)
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    fuse_rows = []                                 # lowbit: per op its fused Add (NetFuse, .fuseadd.row)
    rows, steps = [], []
    if not sz:
        wl = [[[] for _ in range(pm)] for _ in range(pz)]
    bl, sl = [[] for _ in range(pz)], [[] for _ in range(pz)]
    wins = []                                      # per block: its window's base (kWinBase)
    shl = []                                       # per step: rule two_term_input's shift of the accumulator
    nib = []                                       # per step: lowbit's nibble of the input (0 all, 1 hi, 2 lo)
    boff = 0
    sum_bits, add_bits = 18, 16
    a_bits = 8
    unfold = netkernel.unfold_of(net, place, pc)
    from ...network.joins.chain import wide_bits
    wide_sums = wide_bits(net)                     # chained Adds' exact sums: wider shortcut words, Add one pixel a cycle
    fast_add = bool(sz) and sub >= 2 and all(op.f["hw"] % 2 == 0 for op in net.ops if op.kind == "add") \
        and not wide_sums and not lintwo.add_used(net)   # rule two_term_input's add: the one-pixel Add loop
    from ...network.gate import lut_roms
    luts, lut_banks = lut_roms(net, a_bits, pc)    # rule channel_table: a ROM copy per bank, else None
    from ...network.tokens.layernorm import roms as ln_roms
    if sz and any(op.kind == "lnorm" for op in net.ops):
        raise InputError("network kernel: a LayerNormalization (rule layer_norm) in a board-sized sparse kernel (net_shape: "
                         "board): its loop is in the plain kernel only so far; this network runs layer by layer")
    ln_g, ln_b = ln_roms(net, pc)                  # rule layer_norm's scale and bias codes, a ROM per bank
    from ...network.tokens import attention, attnkernel
    if sz and any(op.kind in attention.KINDS for op in net.ops):
        raise InputError("network kernel: attention's ops (rules attn_gather, add_const, act_matmul and int_softmax) in a board-sized sparse kernel (net_shape: "
                         "board): their loops are in the plain kernel only so far; this network runs layer by layer")
    attn = attnkernel.tables(net, place, pc)       # rules attn_gather, add_const, act_matmul and int_softmax's ROMs (hlsnn.engines.network.tokens.attnkernel)
    for op in net.ops:
        f, d = descriptor_head(op, unfold, place, name, pz, pc, sc_transpose=True)
        if op.kind == "conv":
            two = f.get("terms", 1) == 2               # rule two_term_input (hlsnn.engines.network.lintwo): hi and lo
            z, g = f["z"], f["group"]
            codes = np.asarray(f["codes"], np.int64)
            if f is not op.f:                  # (z, C, kh, kw) -> (z, kw*C, kh, 1): channel kx*C + c
                codes = codes.transpose(0, 3, 1, 2).reshape(z, f["c"], f["kh"], 1)
            if two:                            # the map of both terms, Cp + C channels
                codes, lo_codes = lintwo.split_codes(codes, f)
                f = dict(f, c=f["lo"] + f["c"])
            cg = f["c"] // g
            win = netkernel.group_windows(f, pz, pc)         # groups as such: each block's input channels
            codes = netkernel.expand_groups(codes, f, win, pz, pc, 0)
            if two:
                lo_codes = netkernel.expand_groups(lo_codes, f, win, pz, pc, 0)
            if np.abs(codes).max(initial=0) > 128 or codes.min(initial=0) < -128:
                raise InputError(f"network kernel: {op.name}: weights beyond int8")
            bias = np.asarray(f["bias"], np.int64)
            xm = xmode.get(op.name, "u4")     # lowbit: |x| at most 15, 16, or 8 * 16 + 15 in nibbles
            bound = ({"u4": 15, "s5": 16, "nib": 143}[xm] if four else 128) * \
                np.abs(codes).reshape(z, -1).sum(axis=1) * (129 if two else 1) + np.abs(bias)
            sum_bits = max(sum_bits, int(bound.max(initial=0)).bit_length() + 1)
            shift = np.broadcast_to(np.asarray(f["shift"], np.int64).reshape(-1), (z,))
            if shift.min() < -60 or shift.max() > 60:
                raise InputError(f"network kernel: {op.name}: output shift {shift.min()}..{shift.max()} beyond +-60")
            woff = len(steps)
            sched = (lambda cd: netsize.schedule(cd, pc, sub, pz)) if sz else (lambda cd: schedule(cd, pc, pm, pz))
            rows_it = None
            if four:                           # (taps, weights, last, split, wrap) a step (netsize.block_steps)
                can = not two and xm != "nib" and f is op.f
                blocks, rows_it = [], 0
                for bi, (wb, lists) in enumerate(netsize.tap_lists(codes, pc, pz)):
                    if can:
                        stream_blocks.append(((op.name, bi), netsize.period(lists), d["oh"], d["ow"]))
                    on = (op.name, bi) in plan
                    blk = netsize.block_steps(wb, lists, pc, sub, pz, (d["ow"], d["sw"]) if on else None)
                    if xm == "nib":            # the hi nibbles' steps end no pixel, then the lo nibbles' steps
                        blk = [st[:2] + (0, sub, 0) for st in blk] + blk
                    rows_it += d["oh"] * netsize.row_steps(netsize.period(lists), sub, d["ow"], on) * \
                        (2 if xm == "nib" else 1)
                    blocks.append(blk)
            else:
                blocks = sched(codes)
            first_lo = [None] * len(blocks)
            if four and xm == "nib":           # lowbit: the first lo step of each block
                first_lo = [len(b) // 2 for b in blocks]
            elif two:                          # per block: the hi steps, then the lo steps (rule two_term_input)
                first_lo = [len(b) for b in blocks]
                blocks = [bh + bl for bh, bl in zip(blocks, sched(lo_codes))]
            elif xm == "nib":                  # lowbit: per block the steps on hi nibbles, then on lo ones
                first_lo = [len(b) for b in blocks]
                blocks = [b + b for b in blocks]
            hw, w = f["h"] * f["w"], f["w"]
            for bi, blk in enumerate(blocks):
                for k, (taps, lanes, *flags) in enumerate(blk):
                    bank_taps = [(0, 0, 0) if tp is None else (tp[0] * hw + tp[1] * w + tp[2], tp[1], tp[2])
                                 for tp in taps]
                    if sz and max(abs(t[0]) for t in bank_taps) >= 1 << 15:
                        raise InputError(f"network kernel: {op.name}: a tap's offset beyond 16 bits")
                    # kLast: the pixel's last step; lowbit also the table's wrap (bit 1) and the split (bits 2..)
                    steps.append((bank_taps, flags[0] | flags[2] << 1 | flags[1] << 2 if four else int(k + 1 == len(blk))))
                    shl.append(int(k == first_lo[bi]))
                    nib.append(0 if xm != "nib" else 1 if k < first_lo[bi] else 2)
                    if sz:                     # lanes: (pz, pm) weights; eight slots' int8 a word (sixteen int4)
                        nb, mask = 64 // slots, (1 << (64 // slots)) - 1
                        for lane in range(pz):
                            for c in range(len(wl[lane])):
                                wl[lane][c].append(sum((int(v) & mask) << (nb * i)
                                                       for i, v in enumerate(lanes[lane, slots * c:slots * c + slots])))
                        continue
                    for lane in range(pz):
                        slots = lanes[lane] if lane < len(lanes) else []
                        for m in range(pm):
                            wv, j = slots[m] if m < len(slots) else (0, 0)
                            wl[lane][m].append((j << 8) | (wv & 0xFF))
                zz = bi * pz + np.arange(pz)
                real = zz < z
                for lane in range(pz):
                    bl[lane].append(int(bias[zz[lane]]) if real[lane] else 0)
                    sl[lane].append(int(shift[zz[lane]]) if real[lane] else 0)
            nb = len(blocks)
            n_steps = len(steps) - woff
            d.update(step_chan=0, cg=cg, steps=n_steps, zb=nb, zlast=z - (nb - 1) * pz, woff=woff, boff=boff,
                     n_iter=f["oh"] * f["ow"] * n_steps if rows_it is None else rows_it, relu=int(f["relu"]))
            wins += win["bases"]
            boff += nb
        elif op.kind in attention.KINDS:               # attention's loops (hlsnn.engines.network.tokens.attnkernel)
            attnkernel.descriptor(net, op, d, place, name, pc)
        else:
            ab = pool_or_add(op, f, d, place, name, pc, a_bits, wide_sums)
            if op.kind == "add" and f.get("terms", 1) == 2:   # rule two_term_input: hi, then lo (network.lintwo)
                ab = lintwo.add_descriptor(op, f, d, pc, ab, net)
            add_bits = max(add_bits, ab)
            if op.kind == "add" and "clip" in f:        # rule add_clip: a low-bit Quant's clamp (network.addclip)
                d.update(clo=f["clip"][0], chi=f["clip"][1])
            if op.kind == "add" and fast_add:           # two pixels a cycle (network.cpp.j2 AddPairs)
                d["n_iter"] //= 2
        rows.append(dict(comment=f"{op.name}: {op.kind} {' + '.join(op.ins)} -> {op.out}"
                         + (f" (with {op.f['fadd']['name']})" if "fadd" in op.f else ""),
                         vals=[int(d[k]) for k in FIELDS], names=FIELDS))
        if four:
            from .fuseadd import row as fuse_row
            fuse_rows.append(fuse_row(op, pz, pc))
    if sum_bits > 62:
        raise InputError(f"network kernel: a layer's sum needs {sum_bits} bits (at most 62)")
    if not steps:
        steps.append(([(0, 0, 0)] * nq, 1 | 1 << 1 | sub << 2 if four else 1))
        shl.append(0)
        nib.append(0)
        for lane in range(pz):
            for m in range(len(wl[lane])):
                wl[lane][m].append(0)
    inp, out = name(net.input["name"]), name(net.output["tensor"])
    from ...network.program import _chw
    hwf = lambda s: int(np.prod(_chw(s)[1:]))                                   # noqa: E731
    return dict(rows=rows, act_bufs=act_bufs(place), steps=steps, act_words=act_words, sc_words=sc_words, place=place,
                pz=pz, pc=pc, pm=pm, shl=shl, nib=nib, stream_blocks=stream_blocks, stream=sorted(plan or ()),
                fuse_rows=fuse_rows, has_add=any(op.kind == "add" for op in net.ops),
                unfold=unfold, sized=sz, nq=nq, fast_add=fast_add,
                load_iters=hwf(net.shapes[inp]) // (2 if load_pairs(net, sz, unfold) else 1)
                if sz and unfold and hwf(net.shapes[inp]) % 8 == 0 else _size(net.shapes[inp]),
                weights=[[np.asarray(m, np.uint64 if sz else np.int64) for m in lane] for lane in wl],
                biases=[np.asarray(x or [0], np.int64) for x in bl],
                shifts=[np.asarray(x or [0], np.int64) for x in sl], win_base=np.asarray(wins or [0], np.int64),
                sum_bits=sum_bits, add_bits=add_bits, **div_bits(net, add_bits),
                sc_bits=max([a_bits] + list(wide_sums.values())), in_slot=place[inp][0], in_dual=place[inp][1],
                out_slot=place[out][0], in_elems=_size(net.shapes[inp]), out_elems=_size(net.shapes[out]),
                in_hw=hwf(net.shapes[inp]), out_hw=hwf(net.shapes[out]), luts=luts, **({} if lut_banks is None else {"lut_banks": lut_banks}),
                ln_g=ln_g, ln_b=ln_b, attn=attn)


def load_pairs(net, sz, unfold) -> bool:
    """net_bits 4: the unfolded image load takes two pixels of a row a cycle (``LoadImage``: two writes a
    replica, its two ports, ``ram_t2p``): an input of even width, two replicas a bank or more."""
    return bool(sz) and sz.get("net_bits") == 4 and sz["net_sub"] >= 2 and bool(unfold) and unfold["w"] % 2 == 0


def _words(a, per_line=8):
    """64-bit ROM words as C++ unsigned literals."""
    a = [f"0x{int(v):016x}ULL" for v in np.asarray(a, np.uint64).reshape(-1)]
    return ",\n      ".join(", ".join(a[i:i + per_line]) for i in range(0, len(a), per_line))


def render(net, out_dir):
    """Render the kernel of ``net`` into ``out_dir`` (as :func:`hlsnn.engines.shift_mac.network.kernel.render`):
    ``(files, sha, tables)``."""
    from ...network.joins.chain import sc_add
    from ...network.joins.gatesc import used as gate_sc
    from ....version import __version__
    from ...network.tokens import attnkernel, layernorm
    from ...network import perf as netperf
    from . import perf as sparseperf
    from .. import netsize
    p = net.params
    pz, pc, pm = shape(p)
    t = tables(net, pz, pc, pm)
    from .fuseadd import kernel_net
    net = kernel_net(net)                          # the program the kernel runs (lowbit: its Adds fused, .fuseadd)
    guard = c_ident(net.name).upper()
    ctx = dict(banner=f"Generated by hlsnn {__version__} from the compiled model {net.name} for {net.accel}; "
                      f"do not edit.", net_name=net.name, accel=net.accel, guard=guard, cfg="NetCfg", top=TOP,
               header="network.h", data_header="network_data.h", sum_bits=t["sum_bits"], add_bits=t["add_bits"],
               div_bits=t["div_bits"], pool_scale=t["pool_scale"], pool_scale_bits=t["pool_scale_bits"],
               div_xbits=t["div_xbits"], div_mbits=t["div_mbits"], add_div=t["add_div"], pool_div=t["pool_div"],
               sc_bits=t["sc_bits"],
               pz=pz, pc=pc, pm=pm, sel_bits=max(1, (pc - 1).bit_length()), in_hw=t["in_hw"], out_hw=t["out_hw"],
               sized=bool(t["sized"]), w_cyclic=sparseperf.w_cyclic(t), nq=t["nq"], tap_bits=netsize.tap_bits(t["steps"]), sub=t["nq"] // pc, n_chunks=len(t["weights"][0]),
               pack=(t["sized"] or {}).get("net_pack", 0), bits4=(t["sized"] or {}).get("net_bits") == 4, tree4=netsize.tree4(t["nq"]), fast_load=t["load_iters"] != t["in_elems"],
               unfold_c=(t["unfold"] or {}).get("c", 1), fast_add=t["fast_add"],
               load_pairs=t["load_iters"] * 2 == t["in_hw"],                 # load_pairs: two pixels a cycle
               rounding=ROUNDING[p["rounding"]], add_rounding=ROUNDING[net.input["rounding"]],
               act_bufs=t["act_bufs"], act_words=t["act_words"], sc_words=t["sc_words"], in_elems=t["in_elems"],
               in_words=-(-t["in_elems"] // 8), in_slot=t["in_slot"], in_dual="true" if t["in_dual"] else "false",
               out_elems=t["out_elems"], out_words=-(-t["out_elems"] // 8), out_slot=t["out_slot"],
               n_ops=len(t["rows"]), ops=t["rows"], n_steps=len(t["steps"]),
               taps=[[", ".join(map(str, st[0][j])) for st in t["steps"]] for j in range(t["nq"])],
               last=_ints([st[1] for st in t["steps"]]), b_words=len(t["biases"][0]),
               weights=[[_words(m) if t["sized"] else _ints(m) for m in lane] for lane in t["weights"]],
               w_lut=(t["sized"] or {}).get("net_wlut", 0),                # each lane's last words in LUT ROMs (kWl)
               stream=bool(t["stream"]),                                   # lowbit: streamed blocks (netsize.block_steps)
               fuse=any(r[0] for r in t["fuse_rows"]), fuse_rows=t["fuse_rows"], has_add=t["has_add"],   # .fuseadd
               split_level=max(1, pc.bit_length() - 1),                    # the tree's level of the per-read sums
               biases=[_ints(b) for b in t["biases"]],
               shifts=[_ints(s) for s in t["shifts"]], win_base=_ints(t["win_base"]),
               max_conv_iter=_most(t, 0), max_pool_iter=_most(t, 1), max_add_iter=_most(t, 2), max_move_iter=_most(t, 3), max_cat_iter=_most(t, 4), max_tr_iter=_most(t, 5),
               has_wpool=any(op.kind == "avgpool" for op in net.ops),   # hlsnn.engines.network.pools.linpool
               has_linwide=any(op.kind == "linwide" for op in net.ops),  # hlsnn.engines.network.joins.linwide
               has_lintwo=lintwo.used(net), shl=_ints(t["shl"]),          # hlsnn.engines.network.lintwo
               lowx=(t["sized"] or {}).get("net_x") == "s5", has_nib=any(t["nib"]), nib=_ints(t["nib"]),  # lowbit
               has_addtwo=lintwo.add_used(net), add_clip=any(op.kind == "add" and "clip" in op.f for op in net.ops),
               in_clip=net.input.get("clip"),                         # netprefix._fold_clip
               has_lut=any(op.kind == "lut" for op in net.ops), has_gate=any(op.kind == "gate" for op in net.ops),
               max_lut_iter=_most(t, 6), max_gate_iter=_most(t, 7), lut_words=len(t["luts"]), luts=_ints(t["luts"]),
               lut_banks=[_ints(r) for r in t["lut_banks"]] if "lut_banks" in t else None,
               **layernorm.widths(net, 8, pc), ln_words=t["ln_g"].shape[1],        # rule layer_norm (engines/network/layernorm)
               ln_g=[_ints(r) for r in t["ln_g"]], ln_b=[_ints(r) for r in t["ln_b"]],
               **attnkernel.widths(net, t, pc),                                     # rules attn_gather, add_const, act_matmul and int_softmax (.attnkernel)
               sc_add=sc_add(net, t["place"]), gate_sc=gate_sc(net, t["place"]),
               split_shift=any("split" in op.f for op in net.ops),   # rule mixed_concat (hlsnn.engines.network.joins.catmix)
               act_distance=max(sparseperf.CONV_DEPTH, netperf.POOL_DEPTH, netperf.ADD_DEPTH),
               **netkernel.unfold_fields(t["unfold"], pc))
    return netkernel.render_templates("sparse_cluster", ctx, out_dir) + (t,)


def build(net, *, strict=None, out_root=None):
    """The C-simulation library of ``net``'s sparse network kernel (cached): ``(path, tables)``."""
    return netkernel.build(net, strict=strict, out_root=out_root, render_fn=render)


class SparseNetKernel(netkernel.NetKernel):
    """The sparse_cluster network kernel's C-simulation library (as :class:`~hlsnn.engines.network.kernel.NetKernel`)."""

    def __init__(self, net, *, strict=None):
        super().__init__(net, strict=strict, builder=build)

    @staticmethod
    def check(net):
        """:class:`InputError` when the kernel cannot run ``net`` (its tables refuse it)."""
        tables(net, *shape(net.params))

    def cycles_per_image(self):
        from . import perf as sparseperf
        return sum(c for _, _, c in sparseperf.op_cycles(self.net, self.tables))
