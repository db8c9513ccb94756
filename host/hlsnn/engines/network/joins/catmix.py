"""Rule 8m (issue 52): a global average pool or a channel gate of a pending concat whose two
parts sit at two radix points, in the integer network mode (``shift_mac``, ``sparse_cluster``).

GhostNet's ghost module is ``cat([x1, cheap(x1)], 1)``: a conv's output at radix ``Fa`` and a
depthwise conv's at ``Fb``. Where an engine layer reads it, rule 8 requantizes each part to the
layer's ``F_x`` as it moves (:func:`.move.materialize`). In the SE block the concat is read by
a ``GlobalAveragePool`` and by the gate ``Mul`` instead, and neither rule 4 nor rule 10 took a
pending concat (the network ran layer by layer). The layer path concatenates the parts' float
values, each exact at its part's radix, so channel ``c`` holds values of one radix ``F_c``
(``Fa`` for ``c < Ca``, ``Fb`` after), and:

* **the mixed map**: the concat moved as it is (rule 8 with both shifts 0), ``NAME_mix``: the
  parts' integers one after the other, channels ``[0, Ca)`` at ``Fa`` and ``[Ca, C)`` at ``Fb``
  (field ``split = Ca`` on the ops that read it; no other op reads it).
* **its global pool** is rule 4's global pool of one tensor with a pre-shift per channel range:
  ``s = q[c] << (Fm - F_c)`` (``Fm = max(Fa, Fb)``; op field ``sa`` below ``split``, ``sb``
  from it), summed over the ``2**p`` pixels (radix ``Fm + p``), then ``shift_round_sat(s, Fm +
  p - F_x, B, rounding)``: rule 4's requantization of the exact mean, as an Add of operands at
  two radix points aligns them (rule 13's division where the count is not a power of two).
  The layer path's float mean of channel ``c`` reads channel ``c`` only, exact, and its
  consumer converts it with ``to_fixed`` at ``F_x``: the same bits.
* **its gate** (rule 10 of :mod:`hlsnn.engines.network.gate`, a map times a C-vector at ``Fg``) is the exact
  product ``q[c, y, x] * g[c]`` at radix ``F_c + Fg`` requantized with the shift of its
  channel range: ``F_c + Fg - F_x`` (op field ``shift`` below ``split``, ``shift2`` from it);
  the layer path multiplies the two exact float64 values and converts the product at ``F_x``:
  the same bits.

A concat of the float input (rule 8i), of a pending pool, or of more than two parts is not
taken here (the network runs layer by layer, refused by name as before). The kernels
(``shift_mac``, ``sparse_cluster``) run the mixed map in their ``Concat`` loop (shifts 0), the
pool in the ``Add`` loop and the gate in the ``Gate`` loop with the descriptor's ``cg`` the
split channel (0: none) and ``sb`` the second range's pre-shift (pool) or shift (gate): each
bank picks its channel's of the two (``split_shift``, rendered only into kernels whose program
has such an op; every other kernel's C++ is unchanged). BFP pairs carry their own exponents
and never leave a concat pending.
"""
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
                     "supported (rule 8m)")
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
    """The per-channel vector of ``c`` values of an op with a ``split``: rule 4's pre-shift
    (``sa``/``sb``) of an add, rule 10's shift (``shift``/``shift2``) of a gate."""
    lo, hi = (f["sa"], f["sb"]) if "sa" in f else (f["shift"], f["shift2"])
    return np.where(np.arange(c) < f["split"], lo, hi).astype(np.int64)


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops`' extra check of an op with a ``split``."""
    f = op.f
    if "split" not in f:
        return
    if op.kind == "add" and not (f.get("single") and f.get("gap")):
        raise bad(op, "a split of the channels (rule 8m) on an Add that is not a global pool of one tensor")
    if op.kind == "gate" and (f.get("same") or f.get("pix")):
        raise bad(op, "a split of the channels (rule 8m) on a gate that is not a map times a C-vector")
    if op.kind not in ("add", "gate"):
        raise bad(op, f"a split of the channels (rule 8m) on a {op.kind} op")
    ints(op, f, ("split",), 1, f["c"] - 1)
    if op.kind == "gate":
        ints(op, f, ("shift2",), -62, 62)


def logic(net, tables):
    """``{"split": (LUT, FF)}`` of rule 8m's selects when the program has a pool or gate of a mixed
    map (``split_shift`` rendered), else ``{}``: per bank of the Add loop (two with the sparse
    kernel's two-pixel Add) and of the Gate loop, the channel compare ``blk * kPc + j >= cg``
    (16 bits) and the select of one of two shifts (6 bits); per loop the block's first channel
    ``blk * kPc`` as a 16-bit counter and register. Also the sparse kernel's."""
    if not any("split" in op.f for op in getattr(net, "ops", ())):
        return {}
    pc = tables["pc"]
    sites = pc * (2 if tables.get("fast_add") else 1) + pc
    return {"split": (sites * (16 + 6) + 2 * 16, 2 * 16)}
