"""The gate loop's write into the shortcut buffer (with rule gate_concat of :mod:`.gatecat`):
d_unet_silu's ``a = silu(conv(x))`` is read by a ``MaxPool`` (from an activation buffer) and by
the skip ``Concat`` that waits for the decoder (from the shortcut buffer ``sc``).

The gate loop writes its output into ``sc`` (descriptor ``dual`` 1, or 2 for ``sc`` alone) when
its own shortcut operand is the map it steps through, read at the output's address: it writes
each product over the shortcut word it has just read, as the Add loop writes a chained sum
(:mod:`.chain`), and :func:`.skips.sc_regions` gives the output the operand's region when the
gate is its last reader (refused by name otherwise). A gate whose shortcut is the C-vector (or
a spatial gate's ``1 x H x W`` map) is refused: the write would overwrite gate words still to
be read. Rendered only into kernels with such a gate (``gate_sc``: the write and ``DEPENDENCE
variable = sc inter false``); no memory is added and the loop's II stays 1."""
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
