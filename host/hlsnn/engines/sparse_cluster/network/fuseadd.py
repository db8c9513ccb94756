"""The residual Add fused into the conv before it: the 4-bit board-sized kernel (``net_bits: 4``, issue 82).

A ResNet's Add follows the conv that makes its main operand (the branch's last conv, or the 1 x 1
shortcut conv): the Add loop (``AddPairs``, two pixels a cycle) then reads back a map the conv has
just written. With ``net_bits: 4`` the kernel runs such an Add in the conv's epilogue instead
(``network.cpp.j2``, ``Conv``'s ``fa``): at a pixel's last step each lane's output code ``y`` (the
conv's own rule conv_output, its clamp included) meets the shortcut's word of its channel and pixel,
read from the shortcut buffer, and the Add's rules follow as the Add loop applies them (rule
residual_add: ``s = (y << sa) + (b << sb)``, the ReLU, the global pool over the block's pixels;
``ShiftRoundSat`` by ``shift``; rule add_clip's clamp), so the bits are the Add loop's: the conv's
output map is never written, and the Add costs no cycle of its own.

:func:`fuse` takes an Add when it reads two maps (not a global pool of one), in one term (not rule
two_term_input's), without a mean's division, a mixed map's shifts or a chained Add's wide sum, and
its main operand is the output of the op just before it, a conv read by nothing else. The kernel's
buffers are then placed for the fused program (:func:`hlsnn.engines.network.kernel.allocate`: the
fused conv reads its shortcut from the shortcut buffer); a fused output that would go to the
shortcut buffer too, or a placement that fails, keeps the Adds as they are.
"""
from __future__ import annotations

import copy

from ....errors import InputError


def candidates(net, wide_sums=()):
    """``{add op index: conv op index}`` of the Adds :func:`fuse` may take (module docstring); the
    Adds' ``f["main"]`` as :func:`~hlsnn.engines.network.kernel.allocate` set them."""
    name = lambda t: net.aliases.get(t, t)          # noqa: E731
    readers = {}
    for op in net.ops:
        for t in op.ins:
            readers[name(t)] = readers.get(name(t), 0) + 1
    out = name(net.output["tensor"])
    found = {}
    for i, op in enumerate(net.ops):
        f = op.f
        if op.kind != "add" or i == 0 or len(op.ins) != 2 or f.get("terms", 1) != 1 or "div" in f or "split" in f \
                or f.get("single") or op.out in wide_sums or any(name(t) in wide_sums for t in op.ins):
            continue
        c = net.ops[i - 1]
        if c.kind == "conv" and f.get("main") == c.out and c.out != out and readers.get(c.out) == 1 \
                and c.f.get("terms", 1) == 1:
            found[i] = i - 1
    return found


def fused_net(net, pairs):
    """A copy of ``net`` whose ops are copies (their ``f`` too), with each conv of ``pairs`` (``{add:
    conv}``) writing its Add's output and reading the Add's shortcut second (``f["fadd"]``: the Add's
    ``f``), and those Adds gone."""
    fnet = copy.copy(net)
    ops = []
    for i, op in enumerate(net.ops):
        if i in pairs:
            continue
        o = copy.copy(op)
        o.f = dict(op.f)
        add = next((net.ops[a] for a, c in pairs.items() if c == i), None)
        if add is not None:
            o.out, o.ins = add.out, list(op.ins) + [add.f["short"]]
            fa = o.f["fadd"] = dict(add.f, name=add.name)
            if net.aliases.get(add.ins[0], add.ins[0]) != add.f["main"]:   # sa: the main operand's shift
                fa["sa"], fa["sb"] = add.f["sb"], add.f["sa"]
        ops.append(o)
    fnet.ops = ops
    return fnet


def fuse(net, pc):
    """``(net, place, act_words, sc_words)``: the fused program (:func:`fused_net` of every
    :func:`candidates` pair) placed, or ``net`` as placed where nothing fuses or the fused placement
    fails (module docstring)."""
    from ...network.joins.chain import wide_bits
    from ...network.kernel import allocate
    placed = allocate(net, pc)
    pairs = candidates(net, wide_bits(net))
    if not pairs:
        return (net,) + tuple(placed)
    fnet = fused_net(net, pairs)
    try:
        place, act_words, sc_words = allocate(fnet, pc)
    except InputError:
        return (net,) + tuple(allocate(net, pc))
    if any(place[o.out][1] for o in fnet.ops if "fadd" in o.f):   # a fused output read from sc too
        return (net,) + tuple(allocate(net, pc))
    return fnet, place, act_words, sc_words


def kernel_net(net):
    """The program the kernel runs: ``net``, or with ``net_bits: 4`` (a board-sized config) its Adds
    fused into their convs (:func:`fuse`, as :func:`hlsnn.engines.sparse_cluster.network.kernel.tables`
    places it)."""
    p = net.params
    if "net_sub" not in p or p.get("net_bits") != 4:
        return net
    return fuse(net, int(p["net_banks"]))[0]


def row(op, pz, pc):
    """The fused Add's ``NetFuse`` row (``network_data.h.j2``) of a conv op: ``on, sa, sb, shift, relu,
    gap, lo, hi, sc_base`` (all 0 and the int8 range for a conv without one)."""
    fa = op.f.get("fadd")
    if fa is None:
        return [0, 0, 0, 0, 0, 0, -128, 127, 0]
    if pc != pz:
        raise InputError(f"network kernel: {op.name}: a fused Add needs as many banks as lanes ({pc} and {pz})")
    lo, hi = fa.get("clip") or (-128, 127)
    return [1, int(fa["sa"]), int(fa["sb"]), int(fa["shift"]), int(bool(fa["relu"])), int(bool(fa.get("gap"))),
            int(lo), int(hi), int(op.f.get("sc_base", 0))]
