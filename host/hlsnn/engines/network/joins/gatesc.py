"""The gate loop's write into the shortcut buffer (issue 52, with rule 10k of :mod:`.gatecat`):
d_unet_silu's ``a = silu(conv(x))`` is read by a ``MaxPool`` (from an activation buffer) and by
the skip ``Concat`` that waits for the decoder (from the shortcut buffer ``sc``, where a
concat's earlier part waits: :func:`.kernel.allocate`). The kernels' ``Gate`` loop wrote an
activation buffer only, so such a network was refused ("makes a shortcut").

The gate loop now also writes its output into ``sc`` (descriptor ``dual`` 1, or 2 for ``sc``
alone, as a conv's or an Add's) when its own shortcut operand is the map it steps through,
read at the output's address ``i`` (a product of two maps, or a map times a C-vector whose map
waits in ``sc``): it writes each product over the shortcut word it has just read, as the Add
loop writes a chained sum (:mod:`.chain`), and :func:`.skips.sc_regions` gives the output the
operand's region when the gate is that operand's last reader (it refuses by name otherwise). A
gate whose shortcut is the C-vector (or a spatial gate's ``1 x H x W`` map), read at the
block's address, keeps the refusal: writing there would overwrite gate words still to be read.

Rendered only into kernels whose program has such a gate (``gate_sc``: the write, ``sc``'s
read-after-write distance and the loop's ``DEPENDENCE variable = sc inter false``); every other
kernel's C++ is unchanged. No memory is added (``sc`` is sized by the allocator's regions as
before) and the loop's derived II stays 1 (``sc`` is a simple dual-port RAM: one read port, one
write port).
"""
from __future__ import annotations


def writes(op, name):
    """Whether gate ``op`` may write its output into the shortcut buffer: its shortcut operand is
    read at the output's address (module docstring). ``name`` maps a tensor to its buffer name."""
    f = op.f
    if op.kind != "gate" or f.get("short") is None:
        return False
    return bool(f.get("same")) or f["short"] == name(op.ins[0])


def used(net, place):
    """Whether a gate of ``net`` writes the shortcut buffer (``place``: :func:`.kernel.allocate`'s)."""
    return any(op.kind == "gate" and place[net.aliases.get(op.out, op.out)][1] for op in net.ops)
