"""A pending residual ``Add`` read by a skip ``Concat`` in the network mode (rule add_concat:
s_unet_res's encoder ``e = relu(conv(conv(x)) + x)`` read by its ``MaxPool2d`` and by the
decoder's ``torch.cat([up(d), e], 1)``).

Layer by layer the host's ``Concat`` joins rule residual_add's exact float64 sum ``s`` (at radix
``Fm``) with the other parts, and the engine layer after it quantizes with ``to_fixed`` at its
``F_x``. Rule add_concat: **a concat part that is a pending Add** is rule residual_add's add op at
the ``F_x`` of the engine layers that read the concat (all at one radix point, else refused by
name, as :mod:`.gatecat`): ``shift_round_sat(s, Fm - F_x, B, rounding)``, which is what
``to_fixed`` does to the float sum (exact under rule residual_add's condition ``Fm <= max(F_x +
24, 0)``). Where another consumer (:mod:`.maxlate`) materialized the Add at that ``F_x``, the
concat reads that tensor ``NAME_q``; at another radix a second add op ``NAME_cat`` is placed right
after the first (or its operands' last op), where its operands are live; then rule
channel_concat's concat of the parts. On ``bfp_systolic`` the Add's pairs are exact (rule
bfp_add): the concat moves them as they are. No new kernel loop."""
from __future__ import annotations


def _pending(s):
    return s is not None and s[0] == "add" and s[1]["p"] is None


def lower_host(j, program, w, steps, why, op_cls):
    """Rule add_concat: a ``Concat`` with a part that is a pending Add: each such part materialized for
    the concat's consumers, then :func:`.move.lower_host` on the materialized parts. True if it
    was lowered here."""
    if j["op"] != "Concat":
        return False
    sts = [w.state.get(t) for t in j["inputs"]]
    if not any(_pending(s) for s in sts):
        return False
    from .. import move as netmove
    from .gatecat import _early, engine_readers, one_radix
    if steps.bits is None:                           # BFP pairs: rule bfp_add's exact sum, moved as it is
        ins = [steps.materialize_add(j, s[1], w) if _pending(s) else t for t, s in zip(j["inputs"], sts)]
        return netmove.lower_host(dict(j, inputs=ins), w.state, w.shapes, w.ops, why, op_cls)
    readers = engine_readers(program, j["output"])
    f_x = one_radix(readers)
    if f_x is None:
        raise why(j, "a Concat of a pending Add's sum (a residual block's output) read by engine layers at one "
                     "radix point only (rule add_concat)")
    consumer = dict(readers[0], f_x=f_x)
    ins = []
    for t, s in zip(j["inputs"], sts):
        if not _pending(s):
            ins.append(t)
            continue
        a = s[1]
        base = a["name"] + "_q"
        if base in w.shapes and w.state[base][1] != f_x:        # made at another radix for another reader
            a = dict(a, name=a["name"] + "_cat")
            base = a["name"] + "_q"
        if base not in w.shapes:
            _early(w, s[1], lambda a=a: steps.materialize_add(consumer, a, w))
        ins.append(base)
    return netmove.lower_host(dict(j, inputs=ins), w.state, w.shapes, w.ops, why, op_cls)
