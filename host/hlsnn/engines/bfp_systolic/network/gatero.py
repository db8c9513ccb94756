"""A gate's product of two tables' outputs, held rounded to odd (netbfp rule bfp_gate_odd: a
WaveNet's ``tanh(f) * sigmoid(g)`` on BFP pairs).

Rule bfp_gate (:mod:`hlsnn.engines.bfp_systolic.network.gate`) keeps a gate's exact product ``(ma * mg,
ea + eg)`` in the kernel's 26-bit element, and the network mode is
:class:`~hlsnn.engines.bfp_systolic.network.lower.NotExact` where ``|ma * mg|`` reaches ``2**25``.
Two rule bfp_table tables' outputs have ``OUT_BITS``-bit entries
(:data:`~hlsnn.engines.bfp_systolic.network.gate.OUT_BITS`; ``|T| < 2**15`` for bfp8), so their
product reaches ``2**30``: without this rule the network mode would refuse it on every batch.

Rule bfp_gate_odd: **The product of two tables' outputs**, when every op that reads it is a conv (rule bfp_conv's
     patches; through the moves of :data:`~hlsnn.engines.bfp_systolic.network.reduce.PASS`, as
     rule bfp_round_odd's mean), is held rounded to odd at ``K = 25`` significant bits
     (:data:`~hlsnn.engines.bfp_systolic.network.reduce.ODD_BITS`; field ``odd`` of the gate op;
     :func:`~hlsnn.engines.bfp_systolic.network.reduce.round_odd`, the kernel's ``RoundOdd``):
     ``p = ma * mg`` shifted right by
     ``r = max(0, msb(|p|) - (K - 1))`` toward zero, its last bit set when a dropped bit was set,
     at exponent ``ea + eg + r``. A product below ``2**25`` is kept as it is (``r = 0``).

     *Why the convs' bits are the layer path's* (rule bfp_round_odd's argument): the layer path's float64
     product ``v`` is exact (below ``2**53``) and the held ``v'`` lies in the same open interval
     between consecutive multiples of ``2**(k+1)`` (``k`` the kept last bit's weight; ``v' = v``
     when nothing is dropped), is zero exactly when ``v`` is, and has the same sign and leading
     one, so rule bfp_conv's patch exponent ``xe = clamp(L - (M - 2), emin, emax)`` is the same. Each
     element is rounded at ``xe >= L - (M - 2)``; every decision point of the three roundings is
     a multiple of ``2**(xe - 1)``, which is at least ``2**(k+1)`` when ``K >= M + 1`` (checked:
     ``M <= 24``), so both round alike; a clamp to ``emax`` saturates both alike. Any other reader
     (an Add, a table, the output) would read other values: the rule is not taken then, and the
     product keeps rule bfp_gate and its run-time check.

Rule bfp_gate_wide: **The product of two tables' outputs read by an Add** (an LSTM cell's ``i * g`` in ``c = f * c +
i * g``: rule bfp_gate_odd does not apply) keeps rule bfp_gate's exact product, and the program's elements
are :data:`~hlsnn.engines.bfp_systolic.network.prelu.WIDE_ELEM_BITS`-bit (:func:`wide`, as rule
bfp_prelu_exact's: :func:`~hlsnn.engines.bfp_systolic.network.lower.elem_bits`), so the product (below
``2**31``) and the cell's exact sum (below ``2**52``, the layer path's float64 exact sum; the
status bit beyond) fit the element. The layer path is the same exact arithmetic.

The layer path is unchanged (its float64 product, rounded by the next layer). The kernels of
other networks are unchanged: the ``Gate`` loop has its ``RoundOdd`` only in a kernel with such a
gate, where the gate's descriptor field ``odd`` (rule bfp_round_odd's) selects it.
"""
from __future__ import annotations

from .reduce import PASS


def _maker(t, ops, aliases):
    t = aliases.get(t, t)
    return next((o for o in reversed(ops) if o.out == t), None)


def _tables(op, ops, aliases):
    """Both operands of the gate ``op`` are rule bfp_table tables' outputs (not bfp_hardswish's, bfp_clip's)."""
    made = [_maker(t, ops, aliases) for t in op.ins]
    return all(m is not None and m.kind == "lut" and not m.f.get("exact") for m in made)


def mark(ops, aliases, out_name, m_bits):
    """Rule bfp_gate_odd's gates of a lowered ``bfp_systolic`` network (its ``ops``): each gate of two
    tables' outputs whose readers are convs (through :data:`PASS`), not the output, with ``M =
    m_bits <= K - 1``, gets the field ``odd``."""
    from . import reduce
    if int(m_bits) > reduce.ODD_BITS - 1:             # (the module's: a test may narrow it)
        return
    name = lambda t: aliases.get(t, t)              # noqa: E731
    for g in ops:
        if g.kind != "gate" or not _tables(g, ops, aliases):
            continue
        held, ok = {g.out}, True
        for op in ops[ops.index(g) + 1:]:
            if not any(name(t) in held for t in op.ins) or op.kind == "conv":
                continue
            if op.kind not in PASS:
                ok = False
                break
            held.add(op.out)
        if ok and name(out_name) not in held:
            g.f["odd"] = True


def wide(net):
    """Rule bfp_gate_wide: ``net`` (a lowered bfp program) has a gate of two tables' outputs that rule bfp_gate_odd
    does not hold rounded to odd (an Add reads it), so its elements are wide."""
    ops, aliases = getattr(net, "ops", ()), getattr(net, "aliases", {})
    return any(g.kind == "gate" and not g.f.get("odd") and _tables(g, ops, aliases) for g in ops)
