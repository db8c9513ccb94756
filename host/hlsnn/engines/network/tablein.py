"""A table activation of a computed tensor (rule table_in): a unary table op (rule unary_table of
:mod:`hlsnn.engines.network.gate`) whose input is the float output of an op the integer network
modes hold pending (:data:`SOURCES`: a residual ``Add``, a gate ``Mul``, an ``AveragePool``, and
the ops :data:`THROUGH` after them). CBAM's ``Sigmoid(mlp(avg) + mlp(max))``, a ``LeakyRelu``
after a U-Net's ``Add(ConvTranspose, skip)``.

**Rule table_in.** The op's exact float64 values ``v`` are converted to ``b``-bit signed codes at
the radix ``F_t`` that DETERMINE picks on the calibration images
(``hlsnn.deploy.quantize.quant.host_radix``): ``q = to_fixed(v, F_t, b)``; the table (rule
unary_table) reads ``q`` at ``F_t``. ``F_t`` is the host-layer field ``table_in`` (``{"f_in":
F_t}``). The layer path (:mod:`hlsnn.deploy.run.tablecodes`) does exactly that; the network mode
(:func:`lower_host`) materializes the pending op requantized to ``F_t`` (the op's own rule, exact
under the same conditions as for an engine consumer, else refused by name) and puts the table op
after it: the op's loop, then the table's loop. Where the op's inputs are not fixed-point codes of
one width (a BFP layer's output, the float input) the network refuses it."""
from __future__ import annotations

#: the ops whose float output rule table_in converts for a table (a Relu or a global mean only of one of them)
SOURCES = ("Add", "Mul", "AveragePool")
#: ops between a source and the table that keep rule table_in (the network mode fuses them into the
#: pending op; a global mean of codes is a source too); where the network mode cannot, it refuses by name
THROUGH = ("Relu", "GlobalAveragePool", "MaxPool", "GlobalMaxPool", "Flatten", "Reshape", "Squeeze", "Unsqueeze",
           "Identity")


def lower_host(j, w, steps, why, op_cls):
    """Rule table_in in the network mode: table ``j`` of a pending Add, gate or pool (state ``add``,
    ``gate``, ``avgp``): the op materialized at ``j``'s ``table_in`` radix, then the table op
    (:func:`hlsnn.engines.network.gate.lower_host`) on it. True if it was."""
    from . import gate
    if j["op"] not in gate.UNARY or j.get("output") is None:
        return False
    src = j["inputs"][0]
    st = w.state.get(src)
    if st is None or st[0] not in ("add", "gate", "avgp"):
        return False
    if steps.bits is None:                               # BFP pairs: rules bfp_table/bfp_hardswish (netbfp) decide
        return False
    if not gate.is_table(j["op"], j.get("attrs", {})):
        return False                                     # gate.lower_host names why
    f_t = (j.get("table_in") or {}).get("f_in")
    if f_t is None:
        raise why(j, "a table activation of a computed tensor without its calibrated code radix (table_in, "
                     "rule table_in): recompile the model")
    consumer = dict(name=j["name"], op=j["op"], kind="host", f_x=int(f_t))
    if st[0] == "add":
        base = steps.materialize_add(consumer, st[1], w)
    else:
        from .pools import linpool
        base = st[1]["name"] + "_q"
        from .program import materialized
        if not materialized(consumer, st[1]["name"], w.state, w.shapes, why):
            make = {"gate": gate.materialize, "avgp": linpool.materialize}[st[0]]
            make(consumer, src, st, w.state, w.shapes, w.ops, w.aliases, steps.rounding, why, op_cls)
    w.aliases[src] = base
    return gate.lower_host(dict(j, inputs=[base] + list(j["inputs"][1:])), w.state, w.shapes, w.ops, steps.bits,
                           steps.rounding, why, op_cls)
