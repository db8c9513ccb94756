"""The residual Add fused into the write path of the conv that feeds it (a board-sized
bfp_systolic network kernel, ``net_shape: board``).

A conv whose output only a residual Add (no global pool, a shortcut in the shortcut buffer, the
sum not into it) reads, the op right after it, writes the Add's sums instead of its own outputs:
its write path (``ConvMac``, :data:`~hlsnn.engines.bfp_systolic.network.resmodel.FUSE_LANES`
lanes a cycle, the block's ``P`` outputs in ``P / FUSE_LANES`` cycles) reads each output's
shortcut element at its address, forms rule bfp_add's exact sum at the smaller exponent (the
Add's ``AlignExact``, its bound and status bit, its ReLU) and writes it, and the sum's
leading one into the Add's map. The rule does not change, only its schedule: the Add's row stays
in the descriptor table with no iterations. A block's writes take ``P / FUSE_LANES`` cycles, so
a conv is fused only where its ``steps`` (the cycles of a block's products) are as many or more:
the writes keep up with the products, and the last pixel's writes take ``zb * P / FUSE_LANES``
iterations after its products (``n_iter``).

The sums go to the buffer the conv's output would have taken: the activation buffers of the
tensors made from the Add on are swapped (a consistent relabelling of the allocation,
:func:`swap`), possible where no tensor made before the conv is read from an activation buffer
after the Add.
"""
from __future__ import annotations

from .resmodel import FUSE_LANES


def _steps(f, pc):
    from .lower import taps
    kh, kw = taps(f)
    return -(-int(f["c"]) // pc) * kh * kw


def pairs(net, place, name, pz, pc, unfold=None):
    """``[(conv index, add index)]`` of ``net.ops`` that fuse (module docstring), for a
    board-sized kernel; ``place`` is :func:`hlsnn.engines.network.kernel.allocate`'s."""
    if net.params.get("net_shape") != "board":
        return []
    ops, out = net.ops, name(net.output["tensor"])
    made = {name(net.input["name"]): -1, **{op.out: i for i, op in enumerate(ops)}}
    found = []
    for ai in range(1, len(ops)):
        a, c = ops[ai], ops[ai - 1]
        if a.kind != "add" or c.kind != "conv" or (unfold and unfold["op"] == c.name):
            continue
        f, t = a.f, name(c.out)
        if (f["gap"] or f.get("short") is None or f.get("main") != t or f.get("out_bits") or "split" in f
                or f.get("mdiv", 1) > 1 or c.f.get("packs", 1) != 1 or c.f.get("mdiv", 1) > 1):
            continue
        if place[t][1] or place[name(a.out)][1] or t == out or place[t][0] is None or place[name(a.out)][0] is None:
            continue              # the conv's output or the sum also in sc, or the network's output
        if sum(name(x) == t for op in ops for x in op.ins) != 1 or _steps(c.f, pc) < pz // FUSE_LANES:
            continue
        if any(made.get(name(x), -1) < ai - 1 and place.get(name(x), (None,))[0] is not None
               for op in ops[ai + 1:] for x in op.ins):
            continue              # a tensor made before the conv read from a buffer after the Add
        found.append((ai - 1, ai))
    return found


def swap(net, place, name, pair):
    """Relabel ``place`` in place so that the Add of ``pair`` writes where its conv's output
    was placed: the two buffers swapped for every tensor made from the Add on."""
    ci, ai = pair
    ops = net.ops
    s_c, s_a = place[name(ops[ci].out)][0], place[name(ops[ai].out)][0]
    if s_c == s_a:
        return
    later = {op.out for op in ops[ai:]}
    for t, (s, sc) in list(place.items()):
        if t in later and s in (s_c, s_a):
            place[t] = (s_a if s == s_c else s_c, sc)


def apply(dc, da, pz):
    """The fused conv's descriptor ``dc`` and its Add's ``da`` (dicts of FIELDS): the conv writes
    the sums (``fa``: 1, or 2 with the Add's ReLU), reads the shortcut at the Add's
    ``sc_base`` and writes the Add's map; the Add runs no iterations."""
    assert dc["dst"] == da["dst"] and dc["dual"] == 0 and da["dual"] == 0
    dc.update(fa=1 + int(da["relu"]), sc_base=da["sc_base"], mw=da["mw"],
              n_iter=dc["n_iter"] + dc["zb"] * (pz // FUSE_LANES - 1))
    da.update(mw=0, n_iter=0)
