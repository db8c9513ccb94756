"""A max pool or a move of a gate's product in the integer network mode (conv, ``nn.SiLU``,
``MaxPool2d`` or ``nn.Upsample``: a U-Net or YOLO-style encoder and decoder). ``SiLU`` is rule
channel_gate's gate ``Mul``, pending until its engine consumer requantizes the product to its
``F_x`` (:func:`hlsnn.engines.network.gate.materialize`).

**Rule gate_pool.** When every reader of a ``MaxPool``, ``GlobalMaxPool``, nearest ``Upsample``
or ``ZeroStuff`` of it is an engine layer (or a channel ``Concat`` or an alias such layers read:
rule gate_concat) reading at one radix point ``F_x``, the gate is materialized at that ``F_x``
(rule channel_gate) and the pool is rule max_pool's max of those codes (a move: rule
nearest_upsample's or zero_stuff's). Rounding and saturation are monotone non-decreasing and a
move only repeats values, so the layer path's pool of the exact products gives the same codes.
Any other reader is refused by name."""
from __future__ import annotations


def lower(j, program, w, steps, why, op_cls, pool_fields):
    """Lower host layer ``j`` if it is a ``MaxPool`` / ``GlobalMaxPool`` / ``Upsample`` /
    ``ZeroStuff`` of a pending gate (rule gate_pool): the gate materialized for the op's engine readers,
    then the op; True if it was. ``pool_fields(j, shape)``: a pool's rule max_pool fields
    (:func:`hlsnn.deploy.lower.poolfields.maxpool_fields` / ``global_max_fields``)."""
    if j["op"] not in ("MaxPool", "GlobalMaxPool", "Upsample", "ZeroStuff"):
        return False
    src = j["inputs"][0]
    st = w.state.get(src)
    if st is None or st[0] != "gate":
        return False
    from .. import gate as netgate
    from ..program import materialized
    from ..joins.gatecat import engine_readers, one_radix
    readers = engine_readers(program, j["output"])      # through a skip Concat too (rule gate_concat, .gatecat)
    if one_radix(readers) is None:
        raise why(j, f"a {j['op']} of a gate's product (a SiLU's x * sigmoid(x)) read by engine layers at one "
                     "radix point only (rule gate_pool)")
    consumer = readers[0]
    if not materialized(consumer, st[1]["name"], w.state, w.shapes, why):
        netgate.materialize(consumer, src, st, w.state, w.shapes, w.ops, w.aliases, steps.rounding, why, op_cls)
    base = st[1]["name"] + "_q"
    if j["op"] in ("Upsample", "ZeroStuff"):
        from .. import move as netmove
        return netmove.lower_host(dict(j, inputs=[base] + list(j["inputs"][1:])), w.state, w.shapes, w.ops, why,
                                  op_cls)
    shape = w.shapes[base]
    f = pool_fields(j, shape)
    w.ops.append(op_cls("maxpool", j["name"], [base], j["output"], f))
    w.state[j["output"]] = w.state[base]
    w.shapes[j["output"]] = (f["c"], f["oh"]) if len(shape) == 2 else (f["c"], f["oh"], f["ow"])
    return True
