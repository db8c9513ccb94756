"""Rule table_in of :mod:`hlsnn.engines.network.tablein` in the layer path: a table
activation of the float output of an ``Add``, a gate ``Mul`` or an ``AveragePool`` (through a
``Relu``, a global pool, a max pool or an alias) of ``b``-bit codes converts that output to
``b``-bit codes at a calibrated radix, then runs rule unary_table's table, so that the integer network
modes (which materialize the pending op at that radix) give the same bits."""
from __future__ import annotations

from ...engines.network.gate import MAX_TABLE_BITS
from ...engines.network.tablein import SOURCES, THROUGH


def code_bits(net, layer, env):
    """The code width ``b`` of rule table_in for table ``layer`` of the layer path (its input the
    float output of a :data:`SOURCES` op, through :data:`THROUGH` ops, whose inputs are
    fixed-point codes of ``b`` bits), or None."""
    from ...engines.network.gate import applies
    if not applies(layer.op, (0, 8, True), layer.attrs) or env[layer.inputs[0]].fmt is not None:
        return None
    made = {la.output: la for la in net.layers}

    def bits(t, depth):
        a = env.get(t)
        if a is not None and a.fmt is not None:
            return int(a.fmt[1])
        p = made.get(t)
        if p is None or p.kind != "host" or depth > 4 or p.op not in SOURCES + THROUGH:
            return None
        bs = {bits(i, depth + 1) for i in p.inputs}
        return bs.pop() if len(bs) == 1 and None not in bs else None

    p = made.get(layer.inputs[0])
    if p is None or p.kind != "host" or p.op not in SOURCES + THROUGH:
        return None
    b = bits(layer.inputs[0], 0)
    return b if b is not None and 2 <= b <= MAX_TABLE_BITS else None


def run(dep, layer, act, b, calibrate):
    """Rule table_in in the layer path: ``(values, fmt)`` of table ``layer`` on the float ``act``:
    ``F_t`` by DETERMINE when calibrating (every batch when ``dynamic``), kept in the
    deployment's ``table_in``; the codes ``to_fixed(v, F_t, b)``; then rule unary_table's table."""
    from ...engines.network import gate
    from .calcodes import codes_at_radix
    from ..quantize.quant import Act
    radix = dep.__dict__.setdefault("table_in", {})
    v, radix[layer.name] = codes_at_radix(
        dep, act.values, radix.get(layer.name), b, calibrate,
        lambda: f"layer {layer.name}: no calibrated input radix for its table (rule table_in)")
    codes = Act(v, (radix[layer.name], b, True))
    return gate.host_run(layer, codes, dep.rounding, dep._table_radix(layer, codes, calibrate))
