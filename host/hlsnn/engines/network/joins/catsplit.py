"""A channel concat of more than two parts as a chain of concats of two (rule 8k of
:mod:`hlsnn.engines.network.move`; issue 52's sixth family: InceptionTime's
``cat([conv3(b), conv5(b), conv7(b), conv1(maxpool(x))])``).

The network kernels' ``Concat`` loop moves two parts, the one made first from the shortcut
buffer. ``cat(p0, ..., pk)`` is ``cat(cat(... cat(cat(p0, p1), p2) ...), pk)``: each part's
integers land at the same channels of the result (rule 8 moves values, each part requantized
to the result's radix alone by its ``shift``; a running concat is at that radix already, shift
0), so the chain gives the bits of the one concat.

Where each concat of two goes: ``c1 = cat(p0, p1)`` right after ``p2`` is made, and
``cj = cat(c(j-1), pj)`` right after ``p(j+1)`` is made (the last one where the concat was). Then every
part is made before the running concat it joins, so the kernels keep each part in the
shortcut buffer (:func:`hlsnn.engines.network.kernel.allocate`: a concat's earlier-made operand)
while the next branch computes, and the running concat in one activation buffer: a branch's
outputs do not wait in activation buffers until the last branch is done.

A concat whose parts are scaled means (``mscale``, netbfp rule 6c) stays as it is.
"""
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
