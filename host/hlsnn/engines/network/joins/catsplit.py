"""A channel concat of more than two parts as a chain of concats of two (rule concat_chain of
:mod:`hlsnn.engines.network.move`: InceptionTime's ``cat([conv3(b), conv5(b), conv7(b),
conv1(maxpool(x))])``).

The kernels' ``Concat`` loop moves two parts, the one made first from the shortcut buffer.
``cat(p0, ..., pk)`` is ``cat(cat(... cat(cat(p0, p1), p2) ...), pk)`` bit for bit (rule
channel_concat requantizes each part alone; a running concat is at the result's radix already).
``c1 = cat(p0, p1)`` goes right after ``p2`` is made, ``cj = cat(c(j-1), pj)`` right after
``p(j+1)`` (the last where the concat was): each part waits in the shortcut buffer and the
running concat in one activation buffer while the next branch computes. A concat whose parts
are scaled means (``mscale``, netbfp rule bfp_mean_concat) stays as it is."""
from __future__ import annotations


def split(net):
    """``net`` with each concat op of more than two parts replaced by a chain of concats of two
    (module docstring); ``net.shapes`` gains the running concats' shapes."""
    from ..program import Op
    name = lambda t: net.aliases.get(t, t)             # noqa: E731
    i = 0
    while i < len(net.ops):
        op = net.ops[i]
        if op.kind != "concat" or len(op.ins) <= 2 or op.f.get("mscale"):
            i += 1
            continue
        f, ins = op.f, list(op.ins)
        k = len(ins)
        shape = net.shapes[op.out]
        del net.ops[i]
        made = lambda t: max([n + 1 for n, o in enumerate(net.ops[:i]) if o.out == name(t)] + [0])  # noqa: E731
        prev, at = ins[0], 0
        for j in range(1, k):
            last = j == k - 1
            out = op.out if last else f"{op.out}/cat{j}"
            cs = [sum(f["cs"][:j]), f["cs"][j]]
            shifts = [f["shifts"][0] if j == 1 else 0, f["shifts"][j]]
            part = Op("concat", op.name if last else f"{op.name}/{j}", [prev, ins[j]], out,
                      dict(f, cs=cs, shifts=shifts))
            # right after the next part is made (the last where the concat was), after the one before
            at = i if last else max(at, made(ins[0]), *(made(t) for t in ins[1:j + 2]))
            net.ops.insert(at, part)
            i += 1
            at += 1
            if not last:
                net.shapes[out] = (sum(cs),) + tuple(shape[1:])
            prev = out
    return net
