"""A max pool of a pending Add, gate or concat on the integer engines' network mode (rule
late_max_pool): a keyword spotter's ``relu(x + bn(conv(x)))`` then ``AdaptiveMaxPool1d(1)``, a
TC-ResNet's SiLU then ``torch.max(x, dim=2)[0]``, InceptionTime's max pool of a concat of
branches at several radix points.

Requantization to ``F_x`` (a shift with rounding, then saturation) is monotone non-decreasing,
so the max of the requantized values is the requantized max: :func:`lower_host` materializes
the pending op at the ``F_x`` of the engine layer that reads the pool (through data moves only),
then appends the integer max pool (rule max_pool). A pool whose result reaches anything else is
refused by name. ``bfp_systolic`` needs no reader: an Add's pairs are its exact sum (rule
bfp_add), whose max pool picks its elements (rule bfp_pool)."""
from __future__ import annotations

from ..program import ALIAS_OPS, materialized


def _reader(program, t):
    """The engine layer that reads tensor ``t`` through data moves only, or None."""
    layers = program["layers"]
    while True:
        users = [la for la in layers if t in la["inputs"]]
        if len(users) != 1:
            return None
        la = users[0]
        if la["kind"] != "host":
            return la
        if la["op"] not in ALIAS_OPS:
            return None
        t = la["output"]


def lower_host(j, program, w, steps, why, op_cls, fields):
    """Host layer ``j`` as :mod:`this rule <.maxlate>` lowers it (appending to ``w.ops``): True,
    or False when it is not a max pool of a pending Add or gate on an integer engine.
    ``fields``: ``(maxpool_fields, global_max_fields)`` of :mod:`hlsnn.deploy.lower.program` (rule max_pool)."""
    from .. import gate as netgate
    maxpool_fields, global_max_fields = fields
    if j["op"] not in ("MaxPool", "GlobalMaxPool"):
        return False
    src = j["inputs"][0]
    st = w.state.get(src)
    if st is None or st[0] not in ("add", "gate", "cat") or (st[0] == "add" and st[1].get("p") is not None):
        return False
    if steps.bits is None:                  # bfp_systolic: an Add's pairs are exact, its gate has its own rules
        if st[0] != "add":
            return False
        base = steps.materialize_add(j, st[1], w)
        return _pool(j, base, w, op_cls, maxpool_fields, global_max_fields)
    reader = _reader(program, j["output"])
    if reader is None:
        raise why(j, f"a {j['op']} of a pending {'Add' if st[0] == 'add' else 'gate'}: its result must reach "
                     f"one engine layer through data moves only (Flatten, Reshape, Squeeze...)")
    if st[0] == "add":
        base = steps.materialize_add(reader, st[1], w)
    else:                                   # a gate, or a concat of parts at several radix points
        base = st[1]["name"] + "_q"
        from .. import move as netmove
        make = netmove.materialize if st[0] == "cat" else netgate.materialize
        if not materialized(reader, st[1]["name"], w.state, w.shapes, why):
            make(reader, src, st, w.state, w.shapes, w.ops, w.aliases, steps.rounding, why, op_cls)
    return _pool(j, base, w, op_cls, maxpool_fields, global_max_fields)


def _pool(j, base, w, op_cls, maxpool_fields, global_max_fields):
    """Rule max_pool's max pool of the materialized tensor ``base``."""
    shape = w.shapes[base]
    f = maxpool_fields(j, shape) if j["op"] == "MaxPool" else global_max_fields(shape)
    w.ops.append(op_cls("maxpool", j["name"], [base], j["output"], f))
    w.state[j["output"]] = w.state[base]
    w.shapes[j["output"]] = (f["c"], f["oh"]) if len(shape) == 2 else (f["c"], f["oh"], f["ow"])
    return True
