"""Rule mixed_concat: a global average pool or a channel gate of a pending concat whose two parts
sit at two radix points, in the integer network mode (``shift_mac``, ``sparse_cluster``).

GhostNet's ghost module ``cat([x1, cheap(x1)], 1)`` joins a conv's output at radix ``Fa`` and a
depthwise conv's at ``Fb``; its SE block reads the concat by a ``GlobalAveragePool`` and a gate
``Mul``. The layer path concatenates the parts' exact float values, so channel ``c`` holds values
of one radix ``F_c`` (``Fa`` for ``c < Ca``, ``Fb`` after), and:

* **the mixed map**: the concat moved as it is (rule channel_concat with both shifts 0),
  ``NAME_mix``: channels ``[0, Ca)`` at ``Fa`` and ``[Ca, C)`` at ``Fb`` (field ``split = Ca`` on
  the ops that read it; no other op reads it).
* **its global pool** is rule residual_add's global pool of one tensor with a pre-shift per
  channel range: ``s = q[c] << (Fm - F_c)`` (``Fm = max(Fa, Fb)``; op field ``sa`` below
  ``split``, ``sb`` from it), summed over the ``2**p`` pixels (radix ``Fm + p``), then
  ``shift_round_sat(s, Fm + p - F_x, B, rounding)`` (rule mean_divide's division where the count
  is not a power of two): the bits of the layer path's exact float mean converted at ``F_x``.
* **its gate** (rule channel_gate of :mod:`hlsnn.engines.network.gate`, a map times a C-vector at
  ``Fg``) is the exact product ``q[c, y, x] * g[c]`` at radix ``F_c + Fg`` requantized with the
  shift of its channel range ``F_c + Fg - F_x`` (op field ``shift`` below ``split``, ``shift2``
  from it): the bits of the layer path's exact float product converted at ``F_x``.

A concat of the float input, of a pending pool, or of more than two parts is refused by name.
The kernels run the mixed map in their ``Concat`` loop, the pool in the ``Add`` loop and the gate
in the ``Gate`` loop with the descriptor's ``cg`` the split channel (0: none) and ``sb`` the
second range's pre-shift or shift (``split_shift``, rendered only for such a program). BFP pairs
never leave a concat pending."""
from __future__ import annotations

import numpy as np


def _mix(st, w, op_cls, why, j):
    """The mixed map of the pending concat ``st`` (made once): its tensor name and ``(split, fa, fb)``."""
    c = st[1]
    if len(c["ins"]) != 2 or any(c.get("pools", ())) or c.get("graph_in") or None in c["fs"]:
        raise why(j, "a global pool or gate of a concat of two parts computed on the fabric (not of the float "
                     "input or a pending pool) is supported")
    base = c["name"] + "_mix"
    if base not in w.shapes:
        w.ops.append(op_cls("concat", c["name"] + "/mix", list(c["ins"]), base,
                            dict(cs=list(c["cs"]), hw=c["h"] * c["w"], h=c["h"], w=c["w"], shifts=[0, 0],
                                 rounding="nearest_even")))
        w.shapes[base], w.state[base] = (sum(c["cs"]), c["h"], c["w"]), ("mix", dict(c))
    return base, (int(c["cs"][0]), int(c["fs"][0]), int(c["fs"][1]))


def lower_host(j, op, w, steps, why, op_cls):
    """Lower host layer ``j`` (``op`` its op, a whole-map ``AveragePool`` as ``GlobalAveragePool``)
    if it is a global pool or a gate ``Mul`` of a pending concat (module docstring); True if it was."""
    if steps.bits is None or op not in ("GlobalAveragePool", "Mul"):
        return False
    sts = [w.state.get(t) for t in j["inputs"]]
    if not any(s is not None and s[0] == "cat" for s in sts):
        return False
    from ..program import _chw
    if op == "GlobalAveragePool":
        src = j["inputs"][0]
        base, (ca, fa, fb) = _mix(sts[0], w, op_cls, why, j)
        c, h, w_ = _chw(w.shapes[src])
        from ..pools.mean import count_fields
        w.state[j["output"]] = ("add", dict(ins=[base], fa=fa, fb=fb, relu=False, name=j["name"], split=ca,
                                            **count_fields(h * w_)))
        w.shapes[j["output"]] = (c, 1, 1)
        return True
    k = next(i for i, s in enumerate(sts) if s is not None and s[0] == "cat")
    other = sts[1 - k]
    ins = list(j["inputs"])
    ca_, cb_ = _chw(w.shapes[ins[k]]), _chw(w.shapes[ins[1 - k]])
    if other is None or other[0] != "q" or cb_ != (ca_[0], 1, 1):
        raise why(j, "a gate Mul of a pending concat (two radix points) by a C-vector computed on the fabric is "
                     "supported (rule mixed_concat)")
    base, (ca, fa, fb) = _mix(sts[k], w, op_cls, why, j)
    w.state[j["output"]] = ("gate", dict(ins=[base, ins[1 - k]], fa=fa, fb=other[1], c=ca_[0],
                                         hw=ca_[1] * ca_[2], name=j["name"], same=False, pix=False,
                                         split=ca, fa2=fb))
    w.shapes[j["output"]] = w.shapes[ins[k]]
    return True


def gate_shifts(g, f_x):
    """The gate's two requantization shifts (``shift``, ``shift2``) of the pending gate ``g`` of a mixed map."""
    return int(g["fa"] + g["fb"] - f_x), int(g["fa2"] + g["fb"] - f_x)


def shifts_by_channel(f, c):
    """The per-channel vector of ``c`` values of an op with a ``split``: rule residual_add's pre-shift
    (``sa``/``sb``) of an add, rule channel_gate's shift (``shift``/``shift2``) of a gate."""
    lo, hi = (f["sa"], f["sb"]) if "sa" in f else (f["shift"], f["shift2"])
    return np.where(np.arange(c) < f["split"], lo, hi).astype(np.int64)


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops`' extra check of an op with a ``split``."""
    f = op.f
    if "split" not in f:
        return
    if op.kind == "add" and not (f.get("single") and f.get("gap")):
        raise bad(op, "a split of the channels (rule mixed_concat) on an Add that is not a global pool of one tensor")
    if op.kind == "gate" and (f.get("same") or f.get("pix")):
        raise bad(op, "a split of the channels (rule mixed_concat) on a gate that is not a map times a C-vector")
    if op.kind not in ("add", "gate"):
        raise bad(op, f"a split of the channels (rule mixed_concat) on a {op.kind} op")
    ints(op, f, ("split",), 1, f["c"] - 1)
    if op.kind == "gate":
        ints(op, f, ("shift2",), -62, 62)


def logic(net, tables):
    """``{"split": (LUT, FF)}`` of rule mixed_concat's selects when the program has a pool or gate of a mixed
    map (``split_shift`` rendered), else ``{}``: per bank of the Add loop (two with the sparse
    kernel's two-pixel Add) and of the Gate loop, the channel compare ``blk * kPc + j >= cg``
    (16 bits) and the select of one of two shifts (6 bits); per loop the block's first channel
    ``blk * kPc`` as a 16-bit counter and register. Also the sparse kernel's."""
    if not any("split" in op.f for op in getattr(net, "ops", ())):
        return {}
    pc = tables["pc"]
    sites = pc * (2 if tables.get("fast_add") else 1) + pc
    return {"split": (sites * (16 + 6) + 2 * 16, 2 * 16)}
