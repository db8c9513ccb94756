"""A gate of a concat on BFP pairs (GhostNet's SE block multiplies the ghost module's
``cat([x1, cheap(x1)], 1)`` by its channel gate). The network mode already runs it: the concat
moves its parts' ``(m, e)`` pairs as they are (netmove rule channel_concat on pairs), and the gate (netbfp
rule bfp_gate) multiplies each element's mantissa by its channel's gate mantissa. The kernel's gate
loop sizes its multiplier by the widest mantissa an operand can hold (``gate_bits``), which it
took from the op that made the operand: a conv's ``M`` bits or a table's entries, through max
pools (whose elements are their input's). A concat's elements are its parts' elements, so its
widest mantissa is the widest of its parts': :func:`sources` walks through concats too, and the
kernel takes the gate (before: refused, "a gate of NAME"). No kernel code changes: the gate loop
reads the concat's output from its buffer as any map."""
from __future__ import annotations


def sources(t, made, name):
    """The ops whose elements tensor ``t`` holds: its maker, through max pools (not a global one)
    and concats to the convs and tables that made the values (None for the kernel's input)."""
    src = made.get(name(t))
    if src is not None and (src.kind == "maxpool" and not src.f.get("gap") or src.kind == "concat"):
        return [s for i in (src.ins if src.kind == "concat" else src.ins[:1]) for s in sources(i, made, name)]
    return [src]
