"""Several skips alive at once in the network kernels' one shortcut buffer ``sc``.

Each tensor a residual Add, a Concat or a Gate reads as its shortcut (:func:`.kernel.allocate`)
holds a region of ``sc`` from its own word offset. The regions are a stack: a new skip goes
above every region still to be read after the op that makes it, so nested skips (a U-Net's
encoder levels) are made in order and consumed in reverse. An op that reads a shortcut for the
last time and writes a new one (a ResNet's Add) writes it at the offset it reads. The ops that
write and read a region carry its offset as the descriptor field ``sc_base``; ``sc`` is as large
as the stack's top."""
from __future__ import annotations

from ....errors import InputError


def sc_regions(net, order, made, sc_uses, words):
    """Place every shortcut tensor of ``order`` (the input, then each op's output; ``made`` its
    producer's index, ``sc_uses`` the ops reading it from ``sc``, ``words`` its words per bank)
    at a word offset; set
    ``op.f["sc_base"]`` for each op that writes or reads a region; return the words per bank of
    ``sc``. :class:`InputError` naming the tensors when one op would need ``sc`` at two offsets."""
    for op in net.ops:
        op.f["sc_base"] = 0
    base_of, live, top = {}, [], 1                   # live: [tensor, base, end, last reader]
    for t in order:
        if not sc_uses[t]:
            continue
        i, size = made[t], words[t]
        keep = [r for r in live if r[3] > i]
        freed = [r for r in live if r[3] == i]          # the shortcut op i reads for the last time
        if freed:
            b = freed[0][1]
            clash = [r[0] for r in keep if r[1] < b + size and b < r[2]]
            if clash:
                raise InputError(f"network kernel: {net.ops[i].name} reads shortcut {freed[0][0]} at word {b} and "
                                 f"writes {t} there, over {clash[0]}, still to be read: the shortcut buffer "
                                 f"holds each op's shortcut at one offset")
        else:
            b = max([r[2] for r in keep], default=0)
            if i >= 0 and net.ops[i].f.get("short") is not None:
                s = net.ops[i].f["short"]
                raise InputError(f"network kernel: {net.ops[i].name} reads shortcut {s} (still to be read later) "
                                 f"and writes {t}: both would need the shortcut buffer at two offsets in one op")
        base_of[t] = b
        if i >= 0:
            net.ops[i].f["sc_base"] = b
        for j in sc_uses[t]:
            net.ops[j].f["sc_base"] = b
        live = keep + [[t, b, b + size, max(sc_uses[t])]]
        top = max(top, b + size)
    return top
