"""Tap pairs: a narrow conv on a kernel with twice its channels in banks (shift_mac's network kernel).

A kernel of ``Q`` channel banks runs a conv of ``C <= Q/2`` input channels with half its banks idle:
channel ``c`` sits in bank ``c`` and banks ``Q/2 ..`` hold nothing. With tap pairs they hold a copy.

**Copies** (``dup`` of the producing op's descriptor). A tensor of ``C <= Q/2`` channels (``Q/2`` a
multiple of the ``P`` lanes) is written twice, channel ``c`` into bank ``c`` and bank ``c + Q/2`` at
the same address, when its producer is a conv (not a wide depthwise block) or a residual Add of two
copied tensors (the Add computes every bank from that bank's operands, so its output's copy is the
copy's sum; not a global pool, not a chained sum, not an Add without a shortcut), and every reader is
a conv or such an Add (not the network's output). The copy costs no memory: a tensor's region of a
buffer spans every bank (:func:`hlsnn.engines.network.kernel.allocate`), and no write site either
(the conv epilogue's bank ``j`` takes lane ``j mod P`` when its block of ``P`` banks is the output
block's, or that block plus ``Q/2`` in a copy).

**Pairs** (``pair``). A dense conv (groups 1, ``kh * kw >= 2``, not the stem's unfolded taps) whose
input is copied reads two taps a cycle: banks ``[0, Q/2)`` the taps ``0 .. S-1`` of the raster order
(``ky``, ``kx``), banks ``[Q/2, Q)`` the taps ``S .. 2S-1`` (``S = ceil(kh * kw / 2)``; a tap ``kh *
kw`` has zero codes), each half with its own tap cursor (the upper one starts at tap ``S``:
``ky1, kx1 = divmod(S, kw)``, address offset ``off1 = ky1 * w + kx1``). A pixel then takes ``S``
cycles instead of ``kh * kw``: ResNet-8's 3x3 convs of 16 channels 5 instead of 9 on a 16 x 32
kernel. The sums are the same integers in another order, and the kernel's reduction wraps like the
accumulator (``sum_t``), so no bit moves (:mod:`hlsnn.deploy.lower.program`'s rules are unchanged).
"""
from __future__ import annotations

import numpy as np

#: the descriptor fields of tap pairs, after :data:`hlsnn.engines.network.kernel.FIELDS` (network_data.h.j2)
FIELDS = ("dup", "pair", "ky1", "kx1", "off1")


def plan(net, place, pz, pc, unfold):
    """``(dup, paired)``: the tensors written twice and the names of the convs that read two taps a
    cycle (module docstring); both empty when ``pc/2`` is not a multiple of ``pz``."""
    from ...network.program import _chw
    name = lambda t: net.aliases.get(t, t)         # noqa: E731
    half = pc // 2
    if pc % 2 or half % pz or half == 0:
        return set(), set()
    readers = {}
    for op in net.ops:
        for t in op.ins:
            readers.setdefault(name(t), []).append(op)
    out = name(net.output["tensor"])

    def narrow(t):
        return _chw(net.shapes[t])[0] <= half

    def plain_add(op):
        f = op.f
        return (op.kind == "add" and len(op.ins) == 2 and not f.get("gap") and not f.get("out_bits")
                and f.get("short") is not None)

    dup = set()
    for op in net.ops:
        t = op.out
        if t == out or not narrow(t) or not all(r.kind == "conv" or plain_add(r) for r in readers.get(t, [])):
            continue
        if op.kind == "conv" and not (op.f["group"] > 1 and op.f["group"] == op.f["c"] == op.f["z"]):
            dup.add(t)
        elif plain_add(op) and all(name(x) in dup for x in op.ins):
            dup.add(t)
    paired = {op.name for op in net.ops
              if op.kind == "conv" and name(op.ins[0]) in dup and op.f["group"] == 1
              and op.f["kh"] * op.f["kw"] >= 2 and not (unfold and unfold["op"] == op.name)}
    return dup, paired


def steps(f):
    """A paired conv's cycles a pixel: ``ceil(kh * kw / 2)``."""
    return -(-f["kh"] * f["kw"] // 2)


def layout(codes, pc):
    """A paired conv's codes ``(Z, C, kh*kw)`` (raster taps) as ``(Z, pc, S)``: bank ``c`` tap ``s``,
    bank ``pc/2 + c`` tap ``S + s``, zero codes elsewhere (module docstring)."""
    z, c, taps = codes.shape
    s = -(-taps // 2)
    out = np.full((z, pc, s), 1 << 15, np.int64)
    out[:, :c, :] = codes[:, :, :s]
    out[:, pc // 2:pc // 2 + c, :taps - s] = codes[:, :, s:]
    return out


def fields(op, f, dup, paired):
    """The op's :data:`FIELDS` (``f`` its geometry as the kernel runs it)."""
    d = dict.fromkeys(FIELDS, 0)
    d["dup"] = int(op.out in dup)
    if op.name in paired:
        ky1, kx1 = divmod(steps(f), f["kw"])
        d.update(pair=1, ky1=ky1, kx1=kx1, off1=ky1 * f["w"] + kx1)
    return d
