"""A data move or a linear resize of a pending residual ``Add`` (issue 52, rules 6a and 12a of
the network mode): a U-Net decoder's ``Upsample`` (or a transposed conv's ``ZeroStuff``) of ``relu(up(c) + skip)`` (k_unet_freq's
``nn.Upsample(scale_factor=(2, 1))`` of a pending Add), a 1-D autoencoder's
``F.interpolate(relu(d2(..) + a), mode='linear')`` (k_ae_lin).

Layer by layer the Add is a host op in float64 whose exact sum ``s`` (rule 4 of
:mod:`hlsnn.deploy.lower.program`: ``max((qa << sa) + (qb << sb), 0)`` at radix ``Fm``) the move or
resize reads as it is; the engine layer after it quantizes the moved values with ``to_fixed``
at its calibrated ``F_x``.

6a. **A nearest upsample of a pending Add** (:mod:`.move` rule 6 on rule 4's sum). A move
    copies values: ``to_fixed(up(s)) = up(to_fixed(s))`` element by element, so the network
    mode requantizes the Add to the consumer's ``F_x`` first (rule 4's add op, exact under
    rule 4's condition ``Fm <= max(F_x + 24, 0)``, refused by name otherwise) and then moves
    its integers (rule 6, the radix unchanged). The Add is held pending through the move
    (state ``("addmv", ...)``) until an engine layer reads it; a chain of moves (an upsample
    of an upsample) is moved in order. On BFP pairs (``bfp_systolic``) rule 5's sum is
    exact pairs already: the Add is materialized at once and rule 6 moves its pairs (mantissa
    and exponent alike), which is the layer path's float values, element by element.
    A transposed conv's ``ZeroStuff`` (s_unet_res's ``ConvTranspose2d(4, 2, 1)`` of a residual
    block's ``Relu(Add)``; :mod:`.move` rule 7) is such a move too: 0 is a value of every
    format, so ``to_fixed(zs(s)) = zs(to_fixed(s))``; it joins the chain of moves alike.
12a. **A linear resize or AveragePool of a pending Add on BFP pairs**: rule 5's exact pairs
    (materialized at once), then :mod:`.linpool` rule 11 or 12 on them (the window's exact sum
    at its smallest exponent; a sum beyond the 26-bit element raises the status bit, and the
    host then runs the layer path: ``NotExact``), which is the float64 resize of the float sum.
    On the integer engines the resize reads the Add's exact sum, wider than an activation
    word (rounding it to ``F_x`` first would round twice): a ``ResizeLinear`` is
    :mod:`.linwide`'s rule 12w (the sum kept wide, resized, requantized once); an
    ``AveragePool`` stays refused by name.

Every op this rule emits is an op the kernels have a loop for (the Add loop, the ``Move``
loop, the pool loop), so no loop and no memory is added.
"""
from __future__ import annotations

#: the state kind of a pending Add moved by rule 6a (integer engines)
KIND = "addmv"


def _pending_add(st):
    return st is not None and st[0] == "add" and st[1]["p"] is None


def lower_host(j, w, steps, why, op_cls):
    """Rules 6a and 12a for host layer ``j``: True when it was lowered here (an ``Upsample`` or
    ``ZeroStuff`` of a pending Add or of an ``addmv``; on BFP pairs also a ``ResizeLinear`` or ``AveragePool`` of a
    pending Add), else False (another rule decides)."""
    op = j["op"]
    src = j["inputs"][0]
    st = w.state.get(src)
    if op not in ("Upsample", "ZeroStuff", "ResizeLinear", "AveragePool") or not (_pending_add(st) or st and st[0] == KIND):
        return False
    if steps.bits is None:                               # BFP pairs: rule 5's exact sum, then the op as it is
        if st[0] != "add":
            return False
        base = steps.materialize_add(dict(j, kind="host", f_x=None), st[1], w)
        w.aliases[src] = base
        j2 = dict(j, inputs=[base] + list(j["inputs"][1:]))
        from ..pools import linpool
        from .. import move
        if op in ("Upsample", "ZeroStuff"):
            return move.lower_host(j2, w.state, w.shapes, w.ops, why, op_cls)
        return linpool.lower_host(j2, w.state, w.shapes, w.ops, steps.bits, why, op_cls)
    if st[0] == KIND and "lin" in st[1]:             # rule 12w's resize is the last op on the wide sum
        raise why(j, f"an {op} of a linear Resize of a pending Add's exact sum has no integer rule in this engine's "
                     f"network kernel (rule 12w requantizes the resize for an engine layer)")
    if op == "ResizeLinear":                         # rule 12w (.linwide): the exact sum resized, then rounded
        from .linwide import lower_host as lin
        return lin(j, w, st, steps, why)
    if op not in ("Upsample", "ZeroStuff"):
        raise why(j, f"{'an' if op[0] in 'AEIOU' else 'a'} {op} of a pending Add's exact sum (wider than an "
                     f"activation word) has no integer rule in this engine's network kernel; an Upsample or a "
                     f"ZeroStuff (rule 6a) has")
    from ..program import _chw
    c, h, wd = _chw(w.shapes[src])
    if op == "Upsample":
        kind = "upsample"
        fh, fw = (int(v) for v in j["attrs"]["factors"])
        f = dict(c=c, h=h, w=wd, fh=fh, fw=fw, oh=h * fh, ow=wd * fw)
    else:                                            # rule 6z: a transposed conv's zeros between the pixels
        kind = "zerostuff"
        sh, sw = (int(v) for v in j["attrs"]["strides"])
        f = dict(c=c, h=h, w=wd, sh=sh, sw=sw, oh=(h - 1) * sh + 1, ow=(wd - 1) * sw + 1)
    prev = st[1] if st[0] == KIND else dict(add=st[1], moves=[])
    w.state[j["output"]] = (KIND, dict(prev, moves=prev["moves"] + [dict(name=j["name"], f=f, kind=kind)],
                                       name=j["name"]))
    w.shapes[j["output"]] = (c, f["oh"], f["ow"]) if len(w.shapes[src]) == 3 else (c, f["oh"])
    return True


def materialize(j, st, w, steps, why, op_cls):
    """Engine layer ``j`` reads the moved pending Add ``st``: rule 4's add op at ``j``'s ``F_x``,
    then the moves on its integers; returns the last move's tensor ``NAME_q`` (state
    ``("q", F_x)``)."""
    from ..program import materialized
    a = st[1]
    if "lin" in a:                                   # rule 12w (.linwide)
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
