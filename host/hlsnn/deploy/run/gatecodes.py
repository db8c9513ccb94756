"""Rule gate_in of :mod:`hlsnn.engines.network.gatein` in the layer path: a gate ``Mul``
with an engine layer after it, one of whose operands is the float output of another gate ``Mul``
(through moves), takes that operand as ``b``-bit codes at a calibrated radix ``F_g`` before
multiplying, so that the network modes (which materialize the inner gate at ``F_g``) give the
same bits. So does a residual ``Add`` or a ``GlobalAveragePool`` of a gate's product on the
integer engines (rule gate_in_sum: a GLU block's ``x + a * sigmoid(b)``). ``F_g`` is kept in
:attr:`Deployment.gate_in` (``{layer: [F or None, F or None]}``)
and the compiled program's host-layer field ``gate_in``."""
from __future__ import annotations

from ...engines.network.gate import MAX_TABLE_BITS
from ...engines.network.gatein import MOVES


def _source(made, t):
    """The layer that computed ``t``, through :data:`MOVES`."""
    p = made.get(t)
    while p is not None and p.kind == "host" and p.op in MOVES:
        p = made.get(p.inputs[0])
    return p


def _is_gate(p):
    return p is not None and p.kind == "host" and p.op == "Mul" and len(p.inputs) == 2


def _is_channel_reduce(p):
    """A ``ReduceMean`` / ``ReduceMax`` over the channels (:mod:`hlsnn.engines.network.pools.reduce` rule
    channel_reduce): of a gate's product it takes rule gate_in's codes too (CBAM: a channel gate, then the
    spatial attention's channel mean and max)."""
    return p is not None and p.kind == "host" and p.op == "ReduceAxes" and \
        p.attrs.get("fn") in ("ReduceMean", "ReduceMax") and {int(v) % 4 for v in p.attrs.get("axes", ())} == {1}


def _is_sum_or_pool(p):
    """A residual ``Add`` of two tensors, a ``GlobalAveragePool`` or an ``AveragePool`` (rule gate_in_sum of
    :mod:`hlsnn.engines.network.gatein`): of a gate's product it takes rule gate_in's codes on the
    integer engines (a GLU block's ``x + a * sigmoid(b)``, a gated map's global pool)."""
    return p is not None and p.kind == "host" and (p.op == "Add" and len(p.inputs) == 2 or
                                                   p.op in ("GlobalAveragePool", "AveragePool"))


def bfp_bits(dep, bfp_cls):
    """``M`` when every engine layer of ``dep`` runs by ``bfp_cls`` (the BFP executor class:
    rule gate_in on pairs), else None."""
    execs = list(dep.execs.values())
    if not execs or not all(isinstance(e, bfp_cls) for e in execs):
        return None
    bits = {int(e.p["mantissa_bits"]) for e in execs}
    return bits.pop() if len(bits) == 1 else None


def operand_bits(dep, layer, env, bfp_cls):
    """``{operand index: b}`` of rule gate_in for host ``layer`` of the layer path (a gate ``Mul``
    whose operand is a gate's float product of ``b``-bit codes, or of BFP pairs: every engine
    layer run by ``bfp_cls``), or ``{}``."""
    if not (_is_gate(layer) or _is_channel_reduce(layer) or _is_sum_or_pool(layer)):
        return {}
    made = {la.output: la for la in dep.net.layers}
    m_bits = bfp_bits(dep, bfp_cls)
    if m_bits is not None and not _is_gate(layer):      # rule channel_reduce on BFP pairs reads the exact product (bfp_round_odd); gate_in_sum has no BFP form
        return {}

    def bits(t, depth):
        a = env.get(t)
        if a is not None and a.fmt is not None:
            return int(a.fmt[1])
        p = _source(made, t)
        if depth > 4 or not _is_gate(p):
            return None
        bs = {bits(i, depth + 1) for i in p.inputs}
        return bs.pop() if len(bs) == 1 and None not in bs else None

    out = {}
    for k, t in enumerate(layer.inputs):
        if env[t].fmt is not None or not _is_gate(_source(made, t)):
            continue
        b = m_bits if m_bits is not None else bits(t, 0)
        if b is not None and 2 <= b <= MAX_TABLE_BITS:
            out[k] = b
    return out


def _no_radix(dep, layer, k):
    """Rule gate_in's refusal of operand ``k`` of ``layer`` without a calibrated radix (and why, for an
    artifact older than ``gate_in``)."""
    from ..lower.programrev import older
    why = older(getattr(dep, "origin", None), "gate_in of an AveragePool" if layer.op == "AveragePool" else
                "gate_in of an Add or GlobalAveragePool" if _is_sum_or_pool(layer) else "gate_in")
    return (f"layer {layer.name}: no calibrated code radix for its operand {layer.inputs[k]} "
            f"(rule gate_in)" + (f": {why}" if why else ""))


def _bfp_codes(dep, b):
    """Rule bfp_table's ``b``-bit codes of the exact BFP pairs of values at a radix, as
    :func:`hlsnn.deploy.run.calcodes.codes_at_radix` takes them."""
    from ...engines.bfp_systolic.network.gate import codes, pairs_of
    return lambda v, f: codes(*pairs_of(v), f, b, dep.rounding)


def run(dep, layer, ins, bits, calibrate, bfp_cls):
    """Rule gate_in in the layer path: ``(values, fmt)`` of gate ``layer`` on the :class:`Act`
    operands ``ins``, each operand of ``bits`` (:func:`operand_bits`) first written as codes at
    ``F_g`` (DETERMINE when calibrating, every batch when ``dynamic``)."""
    from . import hostops
    from .calcodes import codes_at_radix
    radix = dep.__dict__.setdefault("gate_in", {})
    fs = list(radix.get(layer.name) or [None, None])
    bfp = bfp_bits(dep, bfp_cls) is not None
    vals = []
    for k, a in enumerate(ins):
        if k not in bits:
            vals.append(a.values)
            continue
        pairs = _bfp_codes(dep, bits[k]) if bfp else None         # rule bfp_table's codes of the exact pairs
        v, fs[k] = codes_at_radix(dep, a.values, fs[k], bits[k], calibrate, lambda: _no_radix(dep, layer, k), pairs)
        vals.append(v)
    radix[layer.name] = fs
    return hostops.run(layer, vals), None


def any_layer(net):
    """Whether a host layer of ``net`` may take rule gate_in (a gate ``Mul`` of a gate's product with an
    engine layer after it): the paths that run BFP networks without the layer loop
    (:mod:`hlsnn.deploy.run.bfpfast`) leave such a network to it."""
    made = {la.output: la for la in net.layers}
    engine = [k for k, la in enumerate(net.layers) if la.kind != "host"]
    last = engine[-1] if engine else -1
    return any(k < last and _is_gate(la) and any(_is_gate(_source(made, t)) for t in la.inputs)
               for k, la in enumerate(net.layers))
