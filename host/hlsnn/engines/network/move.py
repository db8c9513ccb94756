"""Data moves in the integer network mode: nearest ``Upsample`` by integer factors,
``ZeroStuff`` (a transposed convolution's input: ``s - 1`` zeros between the pixels) and a
channel ``Concat`` (a U-Net's skip), as ops of :func:`hlsnn.deploy.lower.program.lower` for the
``shift_mac`` and ``sparse_cluster`` network modes. The rules (``q`` a tensor's integers at
radix ``F``, a ``C x H x W`` map per image):

Rule nearest_upsample: **upsample** by ``(fh, fw)``: ``y[c, y, x] = q[c, y // fh, x // fw]``; radix unchanged
   (:func:`hlsnn.deploy.run.hostops.run`'s ``np.repeat`` of each pixel, exact). With ``edge``
   ``(ey, ex)`` (a bilinear upsample's first step, :mod:`hlsnn.engines.network.pools.linpool` rule
   bilinear_x2): ``y[c, y, x] = q[c, clamp((y - ey) // fh), clamp((x - ex) // fw)]``, an ``(H*fh +
   2ey) x (W*fw + 2ex)`` map (the border pixels once more on each side).
Rule zero_stuff: **zerostuff** by strides ``(sh, sw)``: ``y[c, y*sh, x*sw] = q[c, y, x]``, every other
   pixel 0, an ``((H-1)*sh + 1) x ((W-1)*sw + 1)`` map; radix unchanged (0 is a value of every
   fixed-point format, so the integers are the host op's values exactly).
Rule channel_concat: **concat** along the channels of parts of one ``H x W``: the parts' integers one after the
   other. When the parts share a radix the result has it (the layer path's ``Concat`` keeps a
   shared format: :func:`hlsnn.deploy.run.hostops.out_format`). Otherwise the layer path
   concatenates float values and the consuming engine layer quantizes them to its calibrated
   ``F_x``: here each part is requantized to ``F_x`` as it is moved, by rule residual_add's
   requantization of one tensor (``shifts``: ``shift_round_sat(q, F_i - F_x, B, rounding)``,
   the identity at shift 0), exact while ``F_i <= max(F_x + 24, 0)`` (checked as for an Add).
   A part that is a pending average pool or bilinear upsample (:mod:`.linpool`, its exact
   value) is that rule's op requantized to ``F_x`` first, then moved at shift 0: the layer
   path's float concat rounds each value alone, so rounding each part alone is the same.
   Parts of rank 2 (``C x L``, a 1-D model's) are ``C x L x 1`` maps, the output of rank 2.

   *Rule input_concat:* **concat with the graph input** (a skip from the input, :mod:`.catinput`): a part that is
   the kernel's input (the tensor rule input_quantize quantizes; through aliases) is its integers as the
   image load wrote them. The layer path concatenates the *float* input, which its consumer
   quantizes with ``to_fixed`` at its ``F_x``; rule input_quantize wrote ``to_fixed`` at the first layer's
   ``F_in`` with the same bits, sign and rounding, so the part is exact at shift 0 when ``F_x
   == F_in`` and refused by name otherwise (rounding the input twice is not rounding it once).
   On BFP pairs the part is the input's exact float32 pairs (netbfp rule bfp_input), moved as they are.

Rule edge_pad: **pad** in ``reflect`` or ``edge`` mode (a conv's ``padding_mode='reflect'`` /
    ``'replicate'``, which :mod:`hlsnn.deploy.rewrite.torchdecomp` keeps as a host ``Pad``) by ``(top,
    left, bottom, right)`` on the height and width (a rank-2 ``C x L`` map's length is its
    height): ``y[c, y, x] = q[c, m(y - top, H), m(x - left, W)]``, an ``(H + top + bottom) x (W +
    left + right)`` map, with ``m(i, n) = clamp(i, 0, n - 1)`` (edge) or ``m(i, n) = |i|``
    mirrored at ``n - 1`` (reflect: ``2(n - 1) - |i|`` past it; the border pixel not repeated,
    ONNX's and numpy's ``reflect``; pads below ``n`` on each side, as torch requires). Every
    output is one input's integer, radix and format unchanged: the layer path's float ``np.pad``
    moves the same values (:func:`hlsnn.deploy.run.hostops.out_format` keeps the format), so it is
    exact. On BFP pairs both the mantissa and the exponent move so. A pad of the channels or the
    batch, a ``constant`` pad (its value need not be a code) and a pad of a pending op (an Add,
    a concat at two radix points, a pool, a gate) are refused by name.

    *Rule step_pick:* **A pick of one step** (``x[:, :, k]``, a ``Gather`` of a scalar index along a length,
    height or width: :mod:`.pick`) is this reflect pad with ``k`` before and ``1 - n - k`` after on
    that axis: a crop to the one step ``|0 - k| = k`` (check_op takes those two sides only then).

These ops run in :func:`hlsnn.deploy.lower.program.run_ints` (numpy, integers only). The network
kernels run them in their ``Move`` and ``Concat`` loops (:data:`KERNEL_KINDS`); the compiled emu
fast path (:mod:`hlsnn.deploy.run.fast`) runs them by :func:`run` itself between its compiled convs
(:func:`hlsnn.deploy.lower.program.run_move`, same bits), and :func:`refuse_kernel` names an op no
kernel loop takes (the network then runs layer by layer on csim, sim and pynq)."""
from __future__ import annotations

import numpy as np

from .program import _chw

#: the op kinds of this module
KINDS = ("upsample", "zerostuff", "concat", "pad")
#: the moves each engine's network kernel has a loop for (``network.cpp.j2``'s ``Move``)
KERNEL_KINDS = dict.fromkeys(("shift_mac", "sparse_cluster", "bfp_systolic"), ("upsample", "zerostuff", "concat", "pad"))
#: the Move loop's mode (descriptor ``single``) of a pad: edge repeats the border (the upsample's
#: counters, factors 1), reflect mirrors the index at it (rule edge_pad)
PAD_MODES = {"edge": 0, "reflect": 2}


def lower_host(j, state, shapes, ops, why, op_cls, graph_in=None):
    """Lower host layer ``j`` if it is one of this module's moves: appends its op to ``ops``,
    sets its output's state and shape, and returns True; False for another host op.
    :class:`InputError` (``why(j, what)``) for a move it cannot take. ``graph_in(t)``: the
    state a Concat's part ``t`` on the float input takes (rule input_concat, :func:`.catinput.part_state`)."""
    op = j["op"]
    if op == "Pad":
        return lower_pad(j, state, shapes, ops, why, op_cls)
    if op not in ("Upsample", "ZeroStuff", "Concat"):
        return False
    ins = j["inputs"]
    sts = [state.get(i) for i in ins]
    inp = [op == "Concat" and graph_in is not None and s is not None and s[0] == "input" for s in sts]
    sts = [graph_in(t) if k else s for t, s, k in zip(ins, sts, inp)]     # rule input_concat: the kernel's input
    if any(s is None or not (s[0] == "q" or op == "Concat" and s[0] == "avgp") for s in sts):
        raise why(j, "a data move of integer tensors computed on the fabric (not of a pending Add or pool)")
    c, h, w = _chw(shapes[ins[0]])
    a = j.get("attrs", {})
    if op in ("Upsample", "ZeroStuff"):
        f = move_fields(op, a, c, h, w)
        ops.append(op_cls(op.lower(), j["name"], [ins[0]], j["output"], f))
        state[j["output"]], shapes[j["output"]] = sts[0], (c, f["oh"], f["ow"])
        return True
    chws = [_chw(shapes[i]) for i in ins]
    axis = a.get("axis", 1)
    rank = {len(shapes[i]) for i in ins}
    if rank not in ({2}, {3}) or axis not in (1, -max(rank)) or len({s[1:] for s in chws}) != 1:
        raise why(j, "a Concat along the channels of maps of one height and width is supported")
    cs = [s[0] for s in chws]
    fs = [s[1] if s[0] == "q" else None for s in sts]
    pools = [s[0] == "avgp" for s in sts]                 # a pending pool (linpool): its exact value
    shapes[j["output"]] = (sum(cs), h, w) if rank == {3} else (sum(cs), h)
    if any(fs[i] is not None for i, k in enumerate(inp) if k):     # rule input_concat: at the consumer's F_x, checked then
        state[j["output"]] = ("cat", dict(ins=list(ins), fs=fs, cs=cs, h=h, w=w, name=j["name"], pools=pools,
                                          graph_in=[i for i, k in enumerate(inp) if k]))
    elif len(set(fs)) == 1 and not any(pools):            # one format: the layer path keeps it
        ops.append(op_cls("concat", j["name"], list(ins), j["output"],
                          dict(cs=cs, hw=h * w, h=h, w=w, shifts=[0] * len(cs), rounding="nearest_even")))
        state[j["output"]] = sts[0]
    else:                                   # requantized to the consumer's F_x (materialize)
        state[j["output"]] = ("cat", dict(ins=list(ins), fs=fs, cs=cs, h=h, w=w, name=j["name"], pools=pools))
    return True


def move_fields(op, a, c, h, w):
    """The fields of an ``Upsample`` (rule nearest_upsample) or a ``ZeroStuff`` (rule zero_stuff) with
    attributes ``a`` of a ``c x h x w`` map."""
    if op == "Upsample":
        fh, fw = (int(v) for v in a["factors"])
        return dict(c=c, h=h, w=w, fh=fh, fw=fw, oh=h * fh, ow=w * fw)
    sh, sw = (int(v) for v in a["strides"])
    return dict(c=c, h=h, w=w, sh=sh, sw=sw, oh=(h - 1) * sh + 1, ow=(w - 1) * sw + 1)


def pad_fields(j, shape, why):
    """Rule edge_pad's fields of host ``Pad`` layer ``j`` on a tensor of per-image ``shape`` (``(C, H,
    W)`` or ``(C, L)``): ``c, h, w, oh, ow, pads`` (top, left, bottom, right), ``mode``; or
    :class:`InputError` (``why``) naming what it cannot move."""
    a = j.get("attrs", {})
    mode = a.get("mode", "constant")
    if mode not in PAD_MODES:
        raise why(j, f"a {mode} Pad (its value is not moved from the input): reflect and edge pads are supported")
    r = len(shape)
    p = [int(v) for v in a["pads"]]
    n = len(p) // 2
    if r not in (2, 3) or n != r + 1 or p[0] or p[n] or p[1] or p[n + 1]:
        raise why(j, f"pads {p} on a tensor of {r + 1} axes: a pad of the height and width (the length) of a map, "
                     f"none of the batch or the channels, is supported")
    c, h, w = _chw(shape)
    t, b = p[2], p[n + 2]
    left, right = (p[3], p[n + 3]) if r == 3 else (0, 0)
    if mode == "reflect" and max(t, b) >= h or mode == "reflect" and max(left, right) >= w:
        raise why(j, f"reflect pads {p} of a {h} x {w} map: pads below the axis length on each side are supported "
                     f"(one reflection)")
    if max(t, b, left, right) > 64:
        raise why(j, f"pads {p}: up to 64 a side")
    return dict(c=c, h=h, w=w, oh=h + t + b, ow=w + left + right, pads=(t, left, b, right), mode=mode)


def lower_pad(j, state, shapes, ops, why, op_cls):
    """Rule edge_pad: a reflect or edge ``Pad`` of integers computed on the fabric as a pad op."""
    src = j["inputs"][0]
    st = state.get(src)
    if st is None or st[0] != "q":
        raise why(j, "a Pad of integer tensors computed on the fabric (not of the float input or a pending Add, "
                     "concat at two radix points, pool or gate)")
    f = pad_fields(j, shapes[src], why)
    ops.append(op_cls("pad", j["name"], [src], j["output"], f))
    state[j["output"]] = st
    shapes[j["output"]] = (f["c"], f["oh"], f["ow"]) if len(shapes[src]) == 3 else (f["c"], f["oh"])
    return True


def pad_index(n, before, after, mode):
    """Rule edge_pad's input index of each of the ``before + n + after`` outputs of one axis."""
    i = np.arange(-before, n + after)
    if mode == "edge":
        return np.clip(i, 0, n - 1)
    i = np.abs(i)
    return np.where(i > n - 1, 2 * (n - 1) - i, i)


def materialize(j, src, st, state, shapes, ops, aliases, rounding, why, op_cls):
    """An engine layer ``j`` reads the pending concat ``st`` (parts at different radix points):
    each part requantized to ``j``'s ``F_x`` (module rule channel_concat), then moved, as the tensor
    ``NAME_q`` (state ``("q", F_x)``; :func:`hlsnn.deploy.lower.program.walk` calls it once per
    concat)."""
    c = st[1]
    f_x = j["f_x"]
    base = c["name"] + "_q"
    fs = list(c["fs"])
    for i, t in enumerate(c["ins"]):        # a pending pool's part: rule avg_pool's op requantized to F_x first
        if c.get("pools", [False] * len(fs))[i]:
            from .pools.linpool import materialize as pool_materialize
            pool_materialize(j, t, state[t], state, shapes, ops, aliases, rounding, why, op_cls)
            fs[i] = f_x
    if f_x is None or max(fs) > max(f_x + 24, 0):
        raise why(j, f"the requantization from radix {max(fs)} to {f_x} is not exact in today's host rule")
    from .joins.catinput import check_radix
    check_radix(j, c, fs, f_x, why)                     # rule input_concat: the graph input's part at its own radix
    hw = c["h"] * c["w"]
    ops.append(op_cls("concat", c["name"], list(c["ins"]), base,
                      dict(cs=list(c["cs"]), hw=hw, h=c["h"], w=c["w"], shifts=[f - f_x for f in fs],
                           rounding=rounding)))
    shapes[base], state[base] = (sum(c["cs"]), c["h"], c["w"]), ("q", f_x)


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops` for this module's ops."""
    f = op.f
    if op.kind == "concat":
        ints(op, f, ("hw", "h", "w"), 1, 1 << 26)
        if len(op.ins) != len(f.get("cs", ())) or len(op.ins) < 2:
            raise bad(op, f"{len(op.ins)} inputs for {len(f.get('cs', ()))} channel counts")
        for v in f["cs"]:
            if not isinstance(v, (int, np.integer)) or not 1 <= v <= 1 << 16:
                raise bad(op, f"channel counts {f['cs']}: integers in 1..65536")
        for v in f.get("shifts", ()):
            if not isinstance(v, (int, np.integer)) or not -62 <= v <= 62:
                raise bad(op, f"requantization shifts {f['shifts']}: integers within +-62")
        return
    ints(op, f, ("c", "h", "w", "oh", "ow"), 1, 1 << 16)
    if op.kind == "pad":
        t, left, b, r = pads = tuple(f.get("pads", ()))
        from .tokens.pick import axis_ok                      # rule step_pick: a pick is a reflect crop to one step
        if len(pads) != 4 or any(not isinstance(v, (int, np.integer)) for v in pads) or not (
                axis_ok(t, b, f["h"], f["oh"], f.get("mode")) and axis_ok(left, r, f["w"], f["ow"], f.get("mode"))):
            raise bad(op, f"pads {pads}: four integers in 0..64, or a pick's k and 1 - n - k (rule step_pick)")
        if f.get("mode") not in PAD_MODES or f["mode"] == "reflect" and (max(t, b) >= f["h"] or max(left, r) >= f["w"]):
            raise bad(op, f"a {f.get('mode')} pad by {pads} of a {f['h']} x {f['w']} map (reflect or edge; reflect "
                          f"pads below the axis length)")
        want = (f["h"] + t + b, f["w"] + left + r)
    elif op.kind == "upsample":
        ints(op, f, ("fh", "fw"), 1, 64)
        ey, ex = f.get("edge", (0, 0))
        if ey not in (0, 1) or ex not in (0, 1) or ey and f["fh"] != 2 or ex and f["fw"] != 2:
            raise bad(op, f"edge {f.get('edge')}: 0 or 1 per axis, 1 with a factor of 2 (netlinpool rule bilinear_x2)")
        want = (f["h"] * f["fh"] + 2 * ey, f["w"] * f["fw"] + 2 * ex)
    else:
        ints(op, f, ("sh", "sw"), 1, 64)
        want = ((f["h"] - 1) * f["sh"] + 1, (f["w"] - 1) * f["sw"] + 1)
    if (f["oh"], f["ow"]) != want:
        raise bad(op, f"an output of {f['oh']}x{f['ow']}, but its input and factors give {want[0]}x{want[1]}")


def run(op, get, b, bits=None):
    """Rules nearest_upsample, zero_stuff, channel_concat and edge_pad on a batch of ``b`` images: the op's output integers (B, C, OH, OW) int64 (a
    concat's parts requantized by their ``shifts`` to ``bits`` first; none for BFP pairs)."""
    f = op.f
    if op.kind == "concat":
        from ...primitives import shift_round_sat
        parts = [np.asarray(get(t), np.int64).reshape(b, cs, f["h"], f["w"]) for t, cs in zip(op.ins, f["cs"])]
        if bits is not None:
            parts = [a if s == 0 else shift_round_sat(a, s, bits, f["rounding"])[0]
                     for a, s in zip(parts, f["shifts"])]
        return np.concatenate(parts, axis=1)
    x = np.asarray(get(op.ins[0]), np.int64).reshape(b, f["c"], f["h"], f["w"])
    if op.kind == "pad":                              # rule edge_pad: the reflect or edge index of each axis
        t, left, bot, r = f["pads"]
        return x[:, :, pad_index(f["h"], t, bot, f["mode"])][:, :, :, pad_index(f["w"], left, r, f["mode"])]
    if op.kind == "upsample":
        ey, ex = f.get("edge", (0, 0))                # netlinpool rule bilinear_x2: the edge pixel once more
        iy = np.clip((np.arange(f["oh"]) - ey) // f["fh"], 0, f["h"] - 1)
        ix = np.clip((np.arange(f["ow"]) - ex) // f["fw"], 0, f["w"] - 1)
        return x[:, :, iy][:, :, :, ix]
    from ..convgeom import spread
    return spread(x, f["sh"], f["sw"])                # (oh, ow) as check_op holds them


def refuse_kernel(net):
    """:class:`InputError` naming the first op of this module in ``net``: the network kernels'
    C++ has no loop for it yet (module docstring)."""
    from ...errors import InputError
    from .tokens import attention, layernorm
    from . import gate
    layernorm.refuse_kernel(net)
    attention.refuse_kernel(net)
    for op in net.ops:
        if op.kind in KERNEL_KINDS.get(net.engine, ()) and (op.kind != "concat" or len(op.ins) == 2):
            continue
        if op.kind in KINDS or op.kind in gate.KINDS and op.kind not in gate.KERNEL_KINDS.get(net.engine, ()):
            raise InputError(f"network kernel: op {op.name} ({op.kind}) runs in the emu network mode only so far; "
                             f"the network kernels' C++ has no loop for it, so on csim, sim and pynq this network "
                             f"runs layer by layer")


def run_pairs(op, get, b):
    """Rules nearest_upsample, zero_stuff, channel_concat and edge_pad on a batch of ``b`` images of ``(m, e)`` pairs: the output pairs."""
    m, e = get(op.ins[0]) if op.kind != "concat" else (None, None)
    if op.kind == "concat":
        pairs = [get(t) for t in op.ins]
        return tuple(run(op, lambda t, k=k: pairs[op.ins.index(t)][k], b) for k in (0, 1))
    return tuple(run(op, lambda t, a=a: a, b) for a in (m, e))


def move_descriptor(op, f, d, place, name, pc, bits=8):
    """Fill the network kernel's descriptor ``d`` of an upsample or zerostuff op (the kernels'
    ``Move`` loop: ``kh x kw`` the factors or strides, ``single`` a ZeroStuff's zeros, one
    output pixel of ``pc`` channels an iteration; 0 extra sum bits), or of a concat of two
    parts (``shift_mac``'s ``Concat`` loop: the first part, made first, from the shortcut
    buffer; the bits its requantization needs, ``bits`` the activations')."""
    from ...errors import InputError
    if op.kind == "concat":
        a, b = (name(t) for t in op.ins)
        short, main = f.get("short"), f.get("main")
        if {short, main} != {a, b} or short == main or not place[short][1] or place[main][0] is None:
            raise InputError(f"network kernel: {op.name}: a concat of two tensors, the one made first in the "
                             f"shortcut buffer, is supported")
        ca, cb = f["cs"]
        d.update(src=place[main][0], hw=f["hw"], cg=ca, zlast=cb, kh=ca // pc, kw=ca % pc, pt_w=(ca // pc) * f["hw"],
                 sa=f["shifts"][0], sb=f["shifts"][1], single=int(short == b), n_iter=-(-(ca + cb) // pc) * f["hw"])
        return bits + max(0, -min(f["shifts"])) + 2
    if op.kind == "pad":                # rule edge_pad: factors 1, the phases from -top, -left (edge), or mirrored
        t, left = f["pads"][:2]
        d.update(src=place[name(op.ins[0])][0], h=f["h"], w=f["w"], oh=f["oh"], ow=f["ow"], kh=1, kw=1, pt=t,
                 pl=left, pt_w=t * f["w"], hw=f["h"] * f["w"], ohw=f["oh"] * f["ow"], single=PAD_MODES[f["mode"]],
                 n_iter=-(-f["c"] // pc) * f["oh"] * f["ow"])
        return 0
    fy, fx = (f["fh"], f["fw"]) if op.kind == "upsample" else (f["sh"], f["sw"])
    ey, ex = f.get("edge", (0, 0)) if op.kind == "upsample" else (0, 0)   # pt, pl: the phases start -1
    d.update(src=place[name(op.ins[0])][0], h=f["h"], w=f["w"], oh=f["oh"], ow=f["ow"], kh=fy, kw=fx,
             pt=ey, pl=ex, hw=f["h"] * f["w"], ohw=f["oh"] * f["ow"], single=int(op.kind == "zerostuff"),
             n_iter=-(-f["c"] // pc) * f["oh"] * f["ow"])
    return 0
