"""The network kernel of a lowered ``shift_mac`` network (:mod:`hlsnn.deploy.lower.program`):
its buffers, its descriptor table and resident weights, rendered into
``hls/engines/shift_mac/network*.j2``, built for C-simulation and run through ctypes.

**Buffers** (:func:`allocate`). Activations stay on chip in ping-pong buffers ``act[0]``,
``act[1]`` and one shortcut buffer ``sc``. A tensor that a residual Add reads as its shortcut (of
its two operands, the one computed earlier) is written to ``sc``, and also to an activation
buffer when another op reads it; every other tensor goes to an activation buffer not holding a
tensor still to be read. Shortcuts alive at once each hold a region of ``sc`` at its own word
offset (:mod:`.skips`: a stack; the descriptor's ``sc_base``). A network that two activation
buffers do not hold gets the fewest more that do (``act[kActBufs]``, up to
:data:`MAX_ACT_BUFS`); one that needs more is refused with the tensor's name. Each activation
buffer is as large as the largest tensor any of them holds, ``sc`` as the most words live in it
at once.

**Descriptors.** One :data:`FIELDS` row per op, with the address steps precomputed so the
kernel's index arithmetic is incremental. Weights: lane ``l`` of block ``zb`` holds output
channel ``zb*P + l`` (``P`` = the config's ``net_lanes``), its codes in the tap order the
kernel walks (channel, ky, kx); a partial last block pads with zero codes.

**Groups as such** (:func:`group_windows`): a block of ``P`` output channels reads the blocks
of ``Q`` input channels its outputs' groups cover, and each output's codes sit at its own
group's channels in that window, zero codes elsewhere (:func:`expand_groups`). A depthwise conv
so takes ``ceil(C/Q) * OH * OW * kh * kw`` cycles. Each block's window base is a word of the ROM
``kWinBase`` (indexed as the biases), read when the block starts."""
from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from ...errors import CsimError, InputError, printable
from ...engine_registry import network_part
from ...names import c_ident, comment, check_slug
from .joins.skips import sc_regions

FIELDS = ("op", "src", "dst", "dual", "relu", "h", "w", "oh", "ow", "kh", "kw", "sh", "sw", "pt", "pl",
          "pt_w", "sh_w", "step_row", "step_chan", "cg", "steps", "zb", "zlast", "ohw", "hw", "woff", "boff",
          "n_iter", "sa", "sb", "gap", "shift", "clo", "chi", "single", "wide", "sc_base",
          "dpre", "dm", "doff", "dl",           # a mean's division (hlsnn.engines.network.pools.mean; dm 1: none)
          "pix")                                # a gate by a 1 x H x W map (hlsnn.engines.network.gate rule spatial_gate)
OPS = {"conv": 0, "maxpool": 1, "avgpool": 1, "add": 2, "upsample": 3, "zerostuff": 3, "pad": 3, "concat": 4,     # 3: hlsnn.engines.network.move
       "transpose": 5,                                                                  # 5: ... .transpose
       "lut": 6, "gate": 7,                                                             # 6, 7: ... .gate
       "linwide": 1,
       "lnorm": 8,                                  # 8: hlsnn.engines.network.tokens.layernorm
       "gather": 9, "addc": 10, "actmm": 11, "softmax": 12,      # 9-12: ... .attention (.attnkernel)
       "pscale": 13, "plnorm": 14}                  # 13, 14: BFP pairs (hlsnn.engines.bfp_systolic.network.attnkern)
#: the ops whose kernel loops also write the shortcut buffer (descriptor ``dual``)
SC_WRITERS = ("conv", "lut", "add", "maxpool", "avgpool", "gather", "addc", "softmax", "pscale", "plnorm")
#: the ops with two operands, the earlier-made one read from the shortcut buffer
TWO_IN = ("add", "concat", "gate", "actmm")
ROUNDING = {"nearest_even": 0, "nearest_away": 1, "truncate": 2}
TOP = "net_top"
#: the most images a co-simulation test bench of a network kernel passes in one call: the
#: ``m_axi`` ports' ``depth`` is that many images (Vitis HLS sizes the co-simulation's buffers
#: from it; one image's depth would let a batch run past them)
COSIM_BATCH = 16


def _size(shape):
    return int(np.prod(shape))


def bank_words(shape, pc):
    """Words per bank of a tensor (C, H, W), (C, L) (a ``C x L x 1`` map) or (K,) in ``pc``
    channel banks."""
    from .program import _chw
    c, h, w = _chw(shape)
    return -(-c // pc) * h * w


def allocate(net, pc=1):
    """``{tensor: (slot or None, in_sc)}``, the words per bank ``(act_words, sc_words)`` of the
    buffers in ``pc`` channel banks (module docstring); :class:`InputError` when
    :data:`MAX_ACT_BUFS` buffers and a shortcut do not suffice."""
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    order = [name(net.input["name"])] + [op.out for op in net.ops]
    made = {t: i - 1 for i, t in enumerate(order)}          # producer's op index (-1: the input)
    main_uses, sc_uses = {t: [] for t in order}, {t: [] for t in order}
    for i, op in enumerate(net.ops):
        ins = [name(t) for t in op.ins]
        if op.kind == "add" and len(ins) == 1:          # the global pool of one tensor: no shortcut
            op.f["main"], op.f["short"] = ins[0], None
            main_uses[ins[0]].append(i)
        elif op.kind in TWO_IN:                        # a concat, a gate, a MatMul: the earlier-made operand in sc
            a, b = ins
            if made[a] < made[b]:
                a, b = b, a
            if op.kind in ("gate", "add") and not writes_sc(net, made[b]) and writes_sc(net, made[a]):
                a, b = b, a                 # a gate of a move's output: the conv's or table's in sc; an
                #                             Add of a concat (InceptionTime's residual): the conv's
            if a == b:
                raise InputError(f"network kernel: {op.name} adds {a} to itself")
            op.f["main"], op.f["short"] = a, b
            main_uses[a].append(i)
            sc_uses[b].append(i)
        elif op.kind == "conv" and "fadd" in op.f:      # a conv with its Add fused (sparse_cluster.network.fuseadd):
            op.f["main"], op.f["short"] = ins[0], ins[1]  # the Add's shortcut read from sc
            main_uses[ins[0]].append(i)
            sc_uses[ins[1]].append(i)
        elif op.kind == "linwide":                      # rule linear_wide reads the exact sum from sc (.linwide)
            op.f["main"], op.f["short"] = None, ins[0]
            sc_uses[ins[0]].append(i)
        else:
            main_uses[ins[0]].append(i)
    out = name(net.output["tensor"])
    main_uses[out].append(len(net.ops))
    for n in range(2, MAX_ACT_BUFS + 1):  # the fewest that hold it: a third (CBAM), a fourth (InceptionTime)
        try:
            place = _slots(net, order, made, main_uses, sc_uses, name, n)
            break
        except InputError:
            if n == MAX_ACT_BUFS:
                raise
    check_disjoint(net, place)
    from .joins.chain import check_place
    check_place(net, place, name)
    act_words = max([bank_words(net.shapes[t], pc) for t in order if place[t][0] is not None] + [1])
    sc_words = sc_regions(net, order, made, sc_uses, {t: bank_words(net.shapes[t], pc) for t in order if sc_uses[t]})
    return place, act_words, sc_words


def _slots(net, order, made, main_uses, sc_uses, name, n):
    """:func:`allocate`'s placement with ``n`` activation buffers: each tensor an op reads from
    one goes to the lowest-numbered buffer whose tensor is read no more and is not the op's input."""
    place, holder = {}, [None] * n
    last = lambda t, uses: max(uses[t], default=-2)       # noqa: E731
    for t in order:
        i = made[t]
        slot = None
        if main_uses[t]:
            # the tensor op i reads from an activation buffer (an add's shortcut is in sc)
            reading = set() if i < 0 else {net.ops[i].f["main"] if net.ops[i].kind in TWO_IN
                                           else name(net.ops[i].ins[0])}
            free = [s for s in range(n) if holder[s] is None or (last(holder[s], main_uses) <= i
                                                                 and holder[s] not in reading)]
            if not free:
                held = ", ".join(str(h) for h in holder[:-1]) + f" and {holder[-1]}"
                raise InputError(f"network kernel: {t} needs a {_ORD.get(n + 1, f'{n + 1}th')} activation buffer "
                                 f"({held} are still to be read)")
            slot = free[0]
            holder[slot] = t
        place[t] = (slot, bool(sc_uses[t]))
    return place


#: the most activation buffers a network kernel declares (``act[kActBufs]``): a third for CBAM's
#: channel attention (a map and two vectors live), a fourth for InceptionTime's second block, up to
#: eight for an unrolled recurrent cell (:mod:`hlsnn.deploy.rewrite.rnnunroll`)
MAX_ACT_BUFS = 8
_ORD = {3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth", 9: "ninth"}


def act_bufs(place):
    """The activation buffers ``allocate``'s ``place`` uses: 2, or up to :data:`MAX_ACT_BUFS` where it
    needs more."""
    return max([2] + [s + 1 for s, _ in place.values() if s is not None])


def writes_sc(net, i):
    """Whether op ``i`` of ``net`` (-1: the image load, which writes it) writes the shortcut
    buffer (:data:`SC_WRITERS`)."""
    return i < 0 or net.ops[i].kind in SC_WRITERS


def check_disjoint(net, place):
    """The guarantee the network kernels' ``DEPENDENCE variable = act inter false`` rests on:
    no op writes the activation buffer it reads (its loops read ``act[src]`` and write
    ``act[dst]`` in one pipelined loop). :func:`allocate` never does it; this check catches a
    change that would, at allocation time (the strict C-simulation catches it at run time)."""
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    for op in net.ops:
        src = op.f["main"] if op.kind in TWO_IN else name(op.ins[0])
        s, d = place[src][0], place[op.out][0]
        if s is not None and s == d:
            raise AssertionError(f"network kernel: {op.name} would write activation buffer {d}, which it reads "
                                 f"({src}): its pipelined loop's DEPENDENCE inter false would not hold")


def descriptor_head(op, unfold, place, name, pz, pc, sc_transpose=False):
    """``(f, d)``: the geometry of ``op`` as the kernel runs it (the stem's unfolded one,
    :func:`unfold_of`) and the descriptor fields every network kernel fills alike: the op, its
    buffers (``dual``: 0 an activation buffer, 1 that and the shortcut buffer, 2 the shortcut
    buffer only), a conv's or pool's shapes and address steps. :class:`InputError` for what
    no network kernel runs (a pool into the shortcut buffer alone; an output read from the
    shortcut buffer that the op's loop does not write there, :data:`SC_WRITERS`). ``sc_transpose``:
    the kernel's ``Transpose`` loop writes the shortcut buffer too (the integer kernels: reduce
    rule channel_reduce's transpose back to the 1 x H x W map may be a concat's earlier part)."""
    f = op.f
    if unfold and op.name == unfold["op"]:       # the stem reads its kw taps from kw x C banks
        f = dict(f, c=unfold["c"] * unfold["kw"], kw=1, pads=(f["pads"][0], 0, f["pads"][2], 0))
    dst, dual = place[op.out]
    d = dict.fromkeys(FIELDS, 0)
    d.update(op=OPS[op.kind], dst=dst if dst is not None else 0, dual=2 if dst is None else int(dual),
             sc_base=f.get("sc_base", 0),          # the op's region of the shortcut buffer (.skips)
             dm=1)
    if "div" in f:
        dv = f["div"]
        d.update(dpre=dv["pre"], dm=dv["dm"], doff=dv["doff"], dl=dv["dl"])
    from .joins.gatesc import writes as gate_writes       # a gate over its own shortcut map (.gatesc)
    gate = ("gate",) if gate_writes(op, name) else ()
    writers = SC_WRITERS + (("transpose",) if sc_transpose else ()) + gate
    if dst is None and op.kind not in ("conv", "lut", "add", "gather", "addc", "softmax", "pscale", "plnorm") + \
            (("transpose",) if sc_transpose else ()) + gate:
        raise InputError(f"network kernel: {op.name}: only a conv, a table, an Add or a gather, AddConst or "
                         f"Softmax of attention can write the shortcut buffer alone")
    if dual and op.kind not in writers:      # its loop has no write to sc: refused, not wrong bits
        raise InputError(f"network kernel: {op.name} ({op.kind}) makes a shortcut: its output is read from the "
                         f"shortcut buffer, which the kernels' {op.kind} loop does not write (a "
                         f"{', '.join(writers)} op's loop does); this network runs layer by layer")
    if op.kind in ("conv", "maxpool", "avgpool"):       # avgpool: hlsnn.engines.network.pools.linpool
        src = place[name(op.ins[0])][0]
        t, l, _, _ = f["pads"]
        d.update(src=src, h=f["h"], w=f["w"], oh=f["oh"], ow=f["ow"], kh=f["kh"], kw=f["kw"], sh=f["sh"],
                 sw=f["sw"], pt=t, pl=l, pt_w=t * f["w"], sh_w=f["sh"] * f["w"], step_row=f["w"] - (f["kw"] - 1),
                 hw=f["h"] * f["w"], ohw=f["oh"] * f["ow"])
    if op.kind == "conv" and "clip" in f:          # the integer kernels' fused Clip (bfp has none)
        d.update(clo=f["clip"][0], chi=f["clip"][1])
    return f, d


def group_windows(f, pz, pc):
    """Groups as such: the input channels each block of ``pz`` output channels reads. Block
    ``b`` reads ``ncb`` blocks of ``pc`` channels (one per bank) from channel block
    ``cb0[b]``, enough for the groups of its outputs: a dense conv all ``ceil(C/pc)``, a
    depthwise conv the one block of ``pc`` channels holding its channels (``pc`` a multiple of
    ``pz``), a conv with groups of multiples of ``pc`` inputs and ``pz`` outputs its group's,
    narrower groups the channel blocks their groups span (``ncb`` the most of any block; a
    block that needs fewer reads zero codes). ``{"ncb", "cb0", "bases"}``, ``bases`` the
    windows' first addresses in a bank (``cb0 * H * W``: the kernel's ``kWinBase``)."""
    z, c, g = f["z"], f["c"], f["group"]
    zg, cg = z // g, c // g
    nb = -(-z // pz)
    first = [(b * pz // zg) * cg for b in range(nb)]                       # the block's first input channel
    end = [((min(b * pz + pz, z) - 1) // zg + 1) * cg for b in range(nb)]  # and its last + 1
    cb0 = [a // pc for a in first]
    ncb = max(-(-e // pc) - c0 for e, c0 in zip(end, cb0))
    return dict(ncb=ncb, cb0=cb0, bases=[b * f["h"] * f["w"] for b in cb0])


def expand_groups(a, f, win, pz, pc, fill):
    """A conv's per-output taps ``a`` (Z, C/g, ...) placed in its block's window
    (:func:`group_windows`): (Z, ncb*pc, ...), output ``z``'s taps at its group's input
    channels less the window's first, ``fill`` elsewhere (a zero weight)."""
    z, cg = a.shape[:2]
    zg = z // f["group"]
    out = np.full((z, win["ncb"] * pc) + a.shape[2:], fill, np.int64)
    for zz in range(z):
        s = (zz // zg) * cg - win["cb0"][zz // pz] * pc
        out[zz, s:s + cg] = a[zz]
    return out


def pool_or_add(op, f, d, place, name, pc, a_bits, wide=None):
    """Fill the descriptor ``d`` of a maxpool or a residual Add (every network kernel alike: the
    Add's main operand first, from an activation buffer, its shortcut from the shortcut
    buffer); return the bits a residual sum and its global pool need (0 for a pool). ``wide``:
    ``{tensor: bits}`` of the chained sums (:mod:`.chain`), operands wider than ``a_bits``."""
    if op.kind in ("upsample", "zerostuff", "pad", "concat"):   # a data move (hlsnn.engines.network.move)
        from .move import move_descriptor
        return move_descriptor(op, f, d, place, name, pc, a_bits)
    if op.kind == "transpose":                                # rows and channels (hlsnn.engines.network.tokens.transpose)
        from .tokens.transpose import descriptor
        return descriptor(op, d, place, name, pc)
    if op.kind in ("lut", "gate"):                            # a table, a gate (hlsnn.engines.network.gate)
        from .gate import gate_descriptor
        return gate_descriptor(op, f, d, place, name, pc, a_bits)
    if op.kind == "lnorm":                                    # a LayerNorm (hlsnn.engines.network.tokens.layernorm)
        from .tokens.layernorm import descriptor as lnorm
        return lnorm(op, f, d, place, name, pc)
    if op.kind == "linwide":                                  # a resized wide sum (hlsnn.engines.network.joins.linwide)
        from .joins.linwide import descriptor as lin
        return lin(op, f, d, pc)
    if op.kind == "avgpool":                                  # a window sum (hlsnn.engines.network.pools.linpool)
        from .pools.linpool import descriptor
        return a_bits + descriptor(op, f, d, pc)
    if op.kind == "maxpool":
        d.update(n_iter=-(-f["c"] // pc) * f["oh"] * f["ow"] * f["kh"] * f["kw"])
        return 0
    main, short = f["main"], f["short"]
    if short is not None and name(op.ins[0]) != main:       # the kernel's a is the main operand
        f["sa"], f["sb"] = f["sb"], f["sa"]
        op.ins = [op.ins[1], op.ins[0]]
    src = place[main][0]
    if src is None or (short is not None and not place[short][1]):
        raise InputError(f"network kernel: {op.name}: operands not where the kernel reads them")
    p = (f["hw"] - 1).bit_length() if f["gap"] else 0       # ceil(log2): a mean over any count (.mean)
    d.update(src=src, relu=int(f["relu"]), n_iter=-(-f["c"] // pc) * f["hw"], hw=f["hw"], sa=f["sa"],
             sb=f["sb"], gap=int(f["gap"]), shift=f["shift"], single=int(short is None),
             wide=int(bool(f.get("out_bits"))))          # a chained sum: the sum itself into sc (.chain)
    if "split" in f:                                        # a mixed map's pool (.catmix): sb from channel cg
        d.update(cg=f["split"])
    wide = wide or {}
    return max(wide.get(main, a_bits) + f["sa"], wide.get(short, a_bits) + f["sb"]) + 2 + p


def unfold_of(net, place, pc):
    """The stem's tap unfolding, or None: when the input is read only by one conv (groups 1,
    ``kw > 1``) whose ``C * kw`` channels fit the ``pc`` banks, the kernel's image load writes
    each input value of channel ``c`` at column ``x`` into the ``kw`` banks ``c + C*kx``, at
    column ``x - kx + pl`` of the same row (a zero where that falls outside the row, at the
    position it wraps to: every column of every bank is written once per row), and the conv
    runs as a ``kh x 1`` kernel over ``C * kw`` channels with no left/right padding: ``kw``
    times fewer taps, the same integer sums. Its output column ``ox`` reads column ``ox * sw``,
    which must lie in the row: ``(ow - 1) * sw <= w - 1``."""
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    inp = name(net.input["name"])
    readers = [op for op in net.ops if inp in [name(t) for t in op.ins]]
    if len(readers) != 1 or readers[0].kind != "conv" or place[inp][1] or len(net.shapes[inp]) != 3:
        return None
    f = readers[0].f
    if f["group"] != 1 or f["kw"] < 2 or f["c"] * f["kw"] > pc or (f["ow"] - 1) * f["sw"] > f["w"] - 1:
        return None
    return dict(op=readers[0].name, c=f["c"], kw=f["kw"], pl=f["pads"][1], w=f["w"])


def pool_scale(net):
    """``{"pool_scale", "pool_scale_bits"}``: rule avg_pool_uncounted's ROM (:mod:`.uncounted`; an empty list
    without such a pool)."""
    from .pools.uncounted import rom
    r = rom(net)
    return dict(pool_scale=r["pool_scale"], pool_scale_bits=r["pool_scale_bits"]) if r else \
        dict(pool_scale=[], pool_scale_bits=0)


def div_bits(net, add_bits):
    """``{"div_bits", "div_xbits", "div_mbits"}``: the widths of the network kernels' division
    datapath (:mod:`.mean`): the widest product ``(v << pre) * M + off`` of the program's means
    (``div_t``), its signed operand ``v << pre`` and its unsigned multiplier ``M``, each at
    least what an op without a division passes through it (a residual sum's ``add_bits``, ``M
    = 1``); all 0 without a mean (the division is not rendered)."""
    divs = [op.f["div"] for op in net.ops if "div" in op.f]
    if not divs:
        return dict(div_bits=0, div_xbits=0, div_mbits=0, add_div=False, pool_div=False, **pool_scale(net))
    # the loops that render it: the Add loop for a global mean or a ReduceMean, the pool loop for an AveragePool
    # (or a box resize, .cornerresize); a loop with no op dividing keeps its plain requantization
    return dict(**pool_scale(net), div_bits=max([d["kbits"] for d in divs] + [add_bits + 1]),
                div_xbits=max([d["xbits"] for d in divs] + [add_bits]), div_mbits=max(d["mbits"] for d in divs),
                add_div=any("div" in op.f and op.kind != "avgpool" for op in net.ops),
                pool_div=any("div" in op.f and op.kind == "avgpool" for op in net.ops))


def _most(t, op):
    """The most iterations of the rows of op code ``op`` (a row's ``names``: its kernel's fields, bfp's own)."""
    return max([r["vals"][r.get("names", FIELDS).index("n_iter")] for r in t["rows"] if r["vals"][0] == op] + [1])


def _ints(a, per_line=24):
    a = [str(int(v)) for v in np.asarray(a).reshape(-1)]
    return ",\n      ".join(", ".join(a[i:i + per_line]) for i in range(0, len(a), per_line))


def unfold_fields(unfold, pc):
    """The template fields of the stem's unfolded image load (:func:`unfold_of`, or None)
    over ``pc`` banks, as every network kernel's templates read them."""
    u = unfold or {}
    return dict(unfold=unfold is not None, in_w=u.get("w", 1), unfold_kw=u.get("kw", 0), unfold_pl=u.get("pl", 0),
                unfold_chan=[j % u["c"] if unfold else 0 for j in range(pc)],
                unfold_kx=[min(j // u["c"], u["kw"]) if unfold else 0 for j in range(pc)])


@functools.lru_cache(maxsize=None)
def _template_environment(engine):
    """The Jinja2 Environment of an engine's network templates, one per process: each template
    compiles once (``auto_reload``, the default, recompiles one whose file changed)."""
    import jinja2
    from ...paths import HLS_DIR
    return jinja2.Environment(loader=jinja2.ChoiceLoader([
        jinja2.FileSystemLoader(str(HLS_DIR / "engines" / engine)),
        jinja2.FileSystemLoader(str(HLS_DIR / "engines" / "shift_mac"))]),       # the shared C ABI bridge
        undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render_templates(engine, ctx, out_dir):
    """Render an engine's network templates (``hls/engines/<engine>/network*.j2``, the C ABI
    bridge from shift_mac's folder where the engine has none) with ``ctx`` into ``out_dir``:
    ``(files, sha)`` of :func:`write_rendered`."""
    env = _template_environment(engine)
    ctx = comment_safe(dict(ctx, cosim_batch=COSIM_BATCH))
    texts = {"network.cpp": env.get_template("network.cpp.j2").render(**ctx),
             "network.h": env.get_template("network.h.j2").render(**ctx),
             "network_data.h": env.get_template("network_data.h.j2").render(**ctx),
             "bridge.cpp": env.get_template("network_bridge.cpp.j2").render(**ctx)}
    for k, text in texts.items():           # a second guard: generated C++ is plain ASCII
        bad = next((c for c in text if not (" " <= c <= "~" or c in "\n\t")), None)
        if bad is not None:
            raise InputError(f"network kernel: the rendered {k} would hold the character {bad!r}; names from "
                             f"the model reach generated C++ only in a reduced form (hlsnn.names.comment)")
    return write_rendered(texts, out_dir)


#: The template fields that hold free text (names from the model): each is reduced to
#: :func:`hlsnn.names.comment` before any template sees it, so a name cannot end a ``//`` comment.
COMMENT_FIELDS = ("banner", "net_name", "accel")


def comment_safe(ctx):
    """``ctx`` with its free-text fields (:data:`COMMENT_FIELDS`, each op row's ``comment``) in
    the reduced form of :func:`hlsnn.names.comment` and its ``guard`` an ASCII identifier."""
    ctx = dict(ctx)
    for k in COMMENT_FIELDS:
        if k in ctx:
            ctx[k] = comment(ctx[k])
    if "guard" in ctx:
        ctx["guard"] = c_ident(ctx["guard"])
    if "ops" in ctx:
        ctx["ops"] = [dict(d, comment=comment(d["comment"])) if isinstance(d, dict) and "comment" in d else d
                      for d in ctx["ops"]]
    return ctx


def write_rendered(texts, out_dir):
    """Write the rendered ``texts`` ({file: text}) and the hlsnn headers into ``out_dir``:
    ``(files, sha)``."""
    from ...paths import HLS_DIR
    texts = dict(texts)
    inc = HLS_DIR / "include" / "hlsnn"
    for f in sorted(inc.glob("*.h")):
        texts[f"include/hlsnn/{f.name}"] = f.read_text()
    out = Path(out_dir)
    digest = hashlib.sha256()
    for k in sorted(texts):
        (out / k).parent.mkdir(parents=True, exist_ok=True)
        (out / k).write_text(texts[k])
        digest.update(k.encode() + b"\0" + texts[k].encode() + b"\0")
    return sorted(texts), digest.hexdigest()


def build(net, *, strict=None, out_root=None, render_fn=None):
    """Render (``render_fn``, by default the ``render`` of ``net``'s engine's network kernel,
    ``engines/<engine>/network/kernel.py``) and compile (cached by the sources' and
    flags' hash) the C-simulation library of ``net``'s network kernel. Returns ``(library
    path, tables)``."""
    from ... import csim, compiling
    from ...paths import build_root
    root = Path(out_root) if out_root else build_root() / "netkernel"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="render-", dir=root))
    try:
        files, sha, t = (render_fn or network_part(net.engine, "kernel").render)(net, tmp)
        flags = csim._flags(strict)
        key = hashlib.sha256(json.dumps([sha, csim.compiler(), list(flags), str(csim.ap_types_dir())]).encode()
                             ).hexdigest()[:16]
        folder = root / f"{check_slug('compiled model name', net.name)}_{key}"
        lib = folder / "libnet.so"
        if lib.is_file():
            return lib, t
        place_sources(tmp, folder, files)
        fd, part = tempfile.mkstemp(dir=folder, suffix=".so")
        os.close(fd)
        argv = [csim.compiler(), *flags, "-Wno-unused-label", f"-I{folder / 'include'}", f"-I{folder}", f"-isystem{csim.ap_types_dir()}",
                str(folder / "network.cpp"), str(folder / "bridge.cpp"), "-o", part]
        from ...csim import pch as csim_pch
        pch = csim_pch.pch_args(csim.compiler(), flags, csim.ap_types_dir())   # faster, never different
        proc = compiling.run(argv[:1] + pch + argv[1:], f"the C-simulation of the network kernel of {net.name}")
        if csim_pch.retry_without(pch, proc):
            proc = compiling.run(argv, f"the C-simulation of the network kernel of {net.name}")
        if proc.returncode != 0:
            os.unlink(part)
            (folder / "compile-error.log").write_text(" ".join(argv) + "\n\n" + proc.stderr)
            raise CsimError(f"network kernel of {net.name}: the C++ did not compile; see "
                            f"{printable(folder / 'compile-error.log')}:\n{proc.stderr[:2000]}")
        with open(part, "rb") as f:
            head = f.read(4)
        if head != b"\x7fELF":
            os.unlink(part)
            raise CsimError(f"network kernel of {net.name}: the C++ compiler {csim.compiler()!r} (CXX) reported "
                            f"success but wrote no shared library ({len(head)}+ bytes, not an ELF file); check CXX")
        os.replace(part, lib)
        return lib, t
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def place_sources(src, folder, files):
    """Copy ``files`` from ``src`` into the shared cache ``folder``: a file already there with
    the same bytes is left alone, any other written atomically (:func:`hlsnn.files.write_atomic`),
    so two processes building one network kernel never read each other's half-written sources."""
    from ...files import write_atomic
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for f in files:
        data = (Path(src) / f).read_bytes()
        dst = folder / f
        try:
            if dst.read_bytes() == data:
                continue
        except OSError:
            pass
        dst.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(dst, data)


class NetKernel:
    """The network kernel's C-simulation library: :meth:`run` takes a batch of input
    integers and returns the output integers, in one call of the top function."""

    @staticmethod
    def check(net):
        """:class:`InputError` when the kernel cannot run ``net`` (its tables refuse it)."""
        k = network_part(net.engine, "kernel")            # shift_mac's (no static import: it imports this)
        k.tables(net, *k.lanes(net.params))

    def __init__(self, net, *, strict=None, builder=None):
        self.net = net
        self.path, self.tables = (builder or build)(net, strict=strict)
        from ...csim import require_symbols
        try:
            self.lib = ctypes.CDLL(str(self.path))
        except OSError as exc:
            raise CsimError(f"network kernel library {printable(self.path)} does not load ({exc}): check CXX, delete "
                            f"it and run again") from None
        require_symbols(self.lib, self.path, ("hlsnn_net_run", "hlsnn_last_assert", "hlsnn_strict",
                                              "hlsnn_counter_name", "hlsnn_counter_count", "hlsnn_counter_values"))
        self.lib.hlsnn_net_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        self.lib.hlsnn_last_assert.restype = ctypes.c_char_p
        self.strict = bool(self.lib.hlsnn_strict())
        if self.strict:
            self.lib.hlsnn_strict_report.restype = ctypes.c_char_p
        self.lib.hlsnn_counter_name.restype = ctypes.c_char_p
        from .words import of_tables
        self.lane_bits, self.in_words, self.out_words = of_tables(self.tables)    # the image words (.words)
        self._lane = np.int8 if self.lane_bits == 8 else np.int16
        self.calls, self.last_kernel_s = 0, 0.0
        #: loop counters of the last run: ``{label: (iterations, entries)}`` for every loop it reached
        self.counters = {}
        self.strict_report = None

    def run(self, xq):
        """``xq`` (B, ...) integers of the input -> (B, out_elems) int64."""
        b, per = xq.shape[0], 64 // self.lane_bits
        x8 = np.zeros((b, self.in_words * per), self._lane)      # the words' lanes (.words), little-endian
        x8[:, :self.tables["in_elems"]] = np.asarray(xq).reshape(b, -1)
        out = np.zeros((b, self.out_words * per), self._lane)
        self._call(x8, out, b)
        return out[:, :self.tables["out_elems"]].astype(np.int64)

    def _call(self, x, out, b):
        """One call of the top function on the contiguous arrays ``x`` and ``out`` (batch
        ``b``): :class:`CsimError` on a strict-rule violation or a kernel assert; the loop
        counters, the strict report and the call's wall time kept."""
        t0 = time.perf_counter()
        st = self.lib.hlsnn_net_run(x.ctypes, out.ctypes, b)      # the arrays stay alive for the call
        self.calls += 1
        if st:
            raise CsimError(f"network kernel of {self.net.name}: "
                            f"{'strict C-simulation' if st == 128 else 'a kernel assert'}: "
                            f"{self.lib.hlsnn_last_assert().decode(errors='replace')}")
        from ...csim import check_counter_table
        check_counter_table(self.lib, self.path)
        n = self.lib.hlsnn_counter_count()
        it, en = (ctypes.c_uint64 * max(n, 1))(), (ctypes.c_uint64 * max(n, 1))()
        self.lib.hlsnn_counter_values(it, en, n)
        # the loops the run reached (as CsimLibrary.last_counts): the strict library also registers
        # a slot for each loop an HLSNN_OPS / HLSNN_SITES names (GatePixels, LutPixels), never counted
        self.counters = {self.lib.hlsnn_counter_name(i).decode(): (int(it[i]), int(en[i])) for i in range(n) if it[i]}
        if self.strict:
            self.strict_report = json.loads(self.lib.hlsnn_strict_report().decode())
        # the simulation's own bookkeeping (loop counters, the strict report) is the kernel's time
        self.last_kernel_s = time.perf_counter() - t0


#: the network kernels' top function when the templates are not installed (a board): what
#: ``hls/engines/<engine>/network.cpp.j2`` declares (a test checks that they agree)
TOP_ARGUMENTS = (("in", 64), ("out", 64), ("batch", 32))
M_AXI = {"in": "gmem0", "out": "gmem1"}


@functools.lru_cache(maxsize=None)
def layout(engine="shift_mac"):
    """``(registers, offsets, m_axi)`` of the engine's network kernel as Vitis HLS lays out its
    ``s_axilite`` map (:func:`hlsnn.regmap.kernel_layout`, from the template's top
    function and pragmas): ``offsets`` ``{"in": (lo, hi), "out": (lo, hi), "batch": (off,)}``
    (the two buffer addresses are 64-bit: 0x10/0x14, 0x1C/0x20, the batch at 0x28),
    ``m_axi`` ``{argument: bundle}``."""
    from ... import regmap
    from ...paths import HLS_DIR
    src = HLS_DIR / "engines" / engine / "network.cpp.j2"
    if not src.is_file():
        regs, by_rtl = regmap.layout([(regmap.rtl_name(c), bits, False) for c, bits in TOP_ARGUMENTS])
        return regs, {c: by_rtl[regmap.rtl_name(c)] for c, _ in TOP_ARGUMENTS}, dict(M_AXI)
    return regmap.kernel_layout(src.read_text(), "{{ top }}")


#: the network kernel's s_axilite argument registers: ``{argument: (byte offset of each
#: 32-bit word, low word first)}`` (CTRL is at 0x00); see :func:`layout`
REGISTERS = layout()[1]


def write_registers(ip, offsets, values):
    """Write ``values`` ``{argument: int}`` to an IP driver (``ip.write(offset, int)``), each
    argument in its 32-bit words, low word first: both halves of a 64-bit address, so an
    address above 4 GB (ZCU104's DDR) and a stale high word from an earlier run cannot
    misdirect the kernel."""
    for name, value in values.items():
        value = int(value)
        words = offsets[name]
        if value < 0 or value >> (32 * len(words)):
            raise ValueError(f"register {name}: {value:#x} does not fit {32 * len(words)} bits")
        for i, off in enumerate(words):
            ip.write(off, (value >> (32 * i)) & 0xFFFFFFFF)
