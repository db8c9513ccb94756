"""A data move or a linear resize of a pending residual ``Add`` (rules add_upsample and
add_resize_pairs of the network mode): a U-Net decoder's ``Upsample`` (or a transposed conv's
``ZeroStuff``) of ``relu(up(c) + skip)``, a 1-D autoencoder's ``F.interpolate(relu(d2(..) + a),
mode='linear')``. Layer by layer the move or resize reads rule residual_add's exact float64 sum
``s`` (radix ``Fm``); the engine layer after it quantizes with ``to_fixed`` at its ``F_x``.

Rule add_upsample: **a nearest upsample of a pending Add** (:mod:`.move` rule nearest_upsample).
    A move copies values: ``to_fixed(up(s)) = up(to_fixed(s))``, so the network mode
    requantizes the Add to the consumer's ``F_x`` first (rule residual_add's add op, exact under
    its condition ``Fm <= max(F_x + 24, 0)``, refused by name otherwise) and then moves its
    integers. The Add is held pending through the moves (state ``("addmv", ...)``) until an
    engine layer reads it. On BFP pairs rule bfp_add's sum is exact pairs already: the Add is
    materialized at once and rule nearest_upsample moves its pairs. A transposed conv's
    ``ZeroStuff`` (:mod:`.move` rule zero_stuff) is such a move too (rule add_zerostuff: 0 is a
    value of every format).
Rule add_resize_pairs: **a linear resize or AveragePool of a pending Add on BFP pairs**: rule
    bfp_add's exact pairs, then :mod:`.linpool` rule avg_pool or bilinear_x2 on them (a sum
    beyond the 26-bit element raises the status bit: ``NotExact``). On the integer engines a
    ``ResizeLinear`` is :mod:`.linwide`'s rule linear_wide (the sum kept wide, resized,
    requantized once); an ``AveragePool`` stays refused by name.

Every op emitted has a kernel loop already (Add, ``Move``, pool)."""
from __future__ import annotations

from .. import move
from ..program import _chw, materialized

#: the state kind of a pending Add moved by rule add_upsample (integer engines)
KIND = "addmv"


def _pending_add(st):
    return st is not None and st[0] == "add" and st[1]["p"] is None


def lower_host(j, w, steps, why, op_cls):
    """Rules add_upsample and add_resize_pairs for host layer ``j``: True when it was lowered here (an ``Upsample`` or
    ``ZeroStuff`` of a pending Add or of an ``addmv``; on BFP pairs also a ``ResizeLinear`` or ``AveragePool`` of a
    pending Add), else False (another rule decides)."""
    op = j["op"]
    src = j["inputs"][0]
    st = w.state.get(src)
    if op not in ("Upsample", "ZeroStuff", "ResizeLinear", "AveragePool") or not (_pending_add(st) or st and st[0] == KIND):
        return False
    if steps.bits is None:                               # BFP pairs: rule bfp_add's exact sum, then the op as it is
        if st[0] != "add":
            return False
        base = steps.materialize_add(dict(j, kind="host", f_x=None), st[1], w)
        w.aliases[src] = base
        j2 = dict(j, inputs=[base] + list(j["inputs"][1:]))
        from ..pools import linpool
        if op in ("Upsample", "ZeroStuff"):
            return move.lower_host(j2, w.state, w.shapes, w.ops, why, op_cls)
        return linpool.lower_host(j2, w.state, w.shapes, w.ops, steps.bits, why, op_cls)
    if st[0] == KIND and "lin" in st[1]:             # rule linear_wide's resize is the last op on the wide sum
        raise why(j, f"an {op} of a linear Resize of a pending Add's exact sum has no integer rule in this engine's "
                     f"network kernel (rule linear_wide requantizes the resize for an engine layer)")
    if op == "ResizeLinear":                         # rule linear_wide (.linwide): the exact sum resized, then rounded
        from .linwide import lower_host as lin
        return lin(j, w, st, steps, why)
    if op not in ("Upsample", "ZeroStuff"):
        raise why(j, f"{'an' if op[0] in 'AEIOU' else 'a'} {op} of a pending Add's exact sum (wider than an "
                     f"activation word) has no integer rule in this engine's network kernel; an Upsample or a "
                     f"ZeroStuff (rule add_upsample) has")
    c, h, wd = _chw(w.shapes[src])
    kind = op.lower()                                # a ZeroStuff: rule add_zerostuff
    f = move.move_fields(op, j["attrs"], c, h, wd)
    prev = st[1] if st[0] == KIND else dict(add=st[1], moves=[])
    w.state[j["output"]] = (KIND, dict(prev, moves=prev["moves"] + [dict(name=j["name"], f=f, kind=kind)],
                                       name=j["name"]))
    w.shapes[j["output"]] = (c, f["oh"], f["ow"]) if len(w.shapes[src]) == 3 else (c, f["oh"])
    return True


def materialize(j, st, w, steps, why, op_cls):
    """Engine layer ``j`` reads the moved pending Add ``st``: rule residual_add's add op at ``j``'s ``F_x``,
    then the moves on its integers; returns the last move's tensor ``NAME_q`` (state
    ``("q", F_x)``)."""
    a = st[1]
    if "lin" in a:                                   # rule linear_wide (.linwide)
        from .linwide import materialize as lin
        return lin(j, a, w, steps, why, op_cls)
    cur = steps.materialize_add(j, a["add"], w)
    for m in a["moves"]:
        out = m["name"] + "_q"
        if not materialized(j, m["name"], w.state, w.shapes, why):
            f = m["f"]
            w.ops.append(op_cls(m.get("kind", "upsample"), m["name"], [cur], out, dict(f)))
            w.shapes[out], w.state[out] = (f["c"], f["oh"], f["ow"]), w.state[cur]
        cur = out
    return cur
