"""A max pool or a move of a gate's product in the integer network mode (conv, ``nn.SiLU``,
``MaxPool2d`` or ``nn.Upsample``: a U-Net or YOLO-style encoder and decoder). ``SiLU`` is ``x * sigmoid(x)``: rule 10's gate ``Mul`` of the conv's
codes and their table, pending until its engine consumer requantizes the product to its ``F_x``
(:func:`hlsnn.engines.network.gate.materialize`). A ``MaxPool`` (or ``GlobalMaxPool``), a nearest
``Upsample`` or a ``ZeroStuff`` (a transposed conv's input) between them had no rule, so such a
model ran layer by layer in two-hot and fixed8.

**Rule 10m.** When every reader of the pool's output is an engine layer (or a channel ``Concat``
or an alias such layers read: :mod:`.gatecat`, rule 10k) and they read it at one radix point
``F_x``, the gate is materialized at that ``F_x`` (rule 10, as for a direct consumer),
and the pool is rule 3's max of those codes (a move: rule 6's or 7's move of them). The layer path
pools (moves) the exact float products, then its consumer quantizes them (``to_fixed`` at ``F_x``:
round and saturate, both monotone non-decreasing); the max of rounded values is the rounded max,
padding never wins either max, a move only repeats values and a stuffed 0 is a code: the same
codes. Any other reader (a table, an Add, a host op) is refused by name (the
network then runs layer by layer). The kernels run the existing ``gate`` and ``maxpool`` loops.
"""
from __future__ import annotations


def lower(j, program, w, steps, why, op_cls, pool_fields):
    """Lower host layer ``j`` if it is a ``MaxPool`` / ``GlobalMaxPool`` / ``Upsample`` /
    ``ZeroStuff`` of a pending gate (rule 10m): the gate materialized for the op's engine readers,
    then the op; True if it was. ``pool_fields(j, shape)``: a pool's rule-3 fields
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
    readers = engine_readers(program, j["output"])      # through a skip Concat too (rule 10k, .gatecat)
    if one_radix(readers) is None:
        raise why(j, f"a {j['op']} of a gate's product (a SiLU's x * sigmoid(x)) read by engine layers at one "
                     "radix point only (rule 10m)")
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
