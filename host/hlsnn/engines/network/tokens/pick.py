"""A pick of one step (rule step_pick): a ``Gather`` of one scalar index along the length of a
``C x L`` map, or the height or width of a ``C x H x W`` map (a TCN's last step ``x[:, :, -1]``,
which the importer keeps as a host ``SwMove``), in the integer network modes (``shift_mac``,
``sparse_cluster``).

**Rule step_pick.** A pick of index ``k`` (``0 <= k < n``; a negative index counts from the end, as
numpy's) of an axis of ``n`` steps is rule edge_pad's ``reflect`` pad (:mod:`.move`) with ``k`` before
and ``1 - n - k`` after on that axis (a one-step output: a crop): its one output step reads input
``|0 - k| = k``, the picked step, and the other axis is moved as it is. Every output is one input's
integer, radix unchanged: the layer path's ``np.take`` moves the same values. The kernels run it in
their ``Move`` loop as such a pad (the mirrored input index starts at ``pt = k``: the descriptor's
start offset), with no new loop and no new field.

A pick of a pending Add (the TCN's last block: ``relu(conv + shortcut)``) first materializes the
Add requantized to the pick's consumer's ``F_x`` (rule residual_add): requantizing each value alone commutes
with the pick, and the layer path converts the picked float sums at that ``F_x`` with ``to_fixed``,
rule residual_add's bits. Other pending ops, a pick of the channels or the batch, and several indices are
refused by name; ``bfp_systolic`` pairs are not taken here (they run layer by layer)."""
from __future__ import annotations

#: host ops between the pick and the engine layer that reads it (views)
VIEWS = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")


def _consumer(program, t):
    """The one engine layer that reads ``t`` (through views), or None."""
    readers = [j for j in program["layers"] if t in j["inputs"]]
    if len(readers) != 1:
        return None
    j = readers[0]
    if j["kind"] == "host":
        return _consumer(program, j["output"]) if j["op"] in VIEWS else None
    return j


def fields(j, shape, why):
    """Rule step_pick's pad fields of ``Gather`` layer ``j`` on a tensor of per-image ``shape``."""
    from ..program import _chw
    a = j.get("attrs", {})
    idx, axis = a.get("indices"), a.get("axis")
    r = len(shape) + 1
    if isinstance(idx, (list, tuple)) or not isinstance(idx, int) or not isinstance(axis, int):
        raise why(j, f"a Gather of indices {idx!r}: a pick of one scalar index (x[:, :, k]) is supported")
    axis %= r
    if r not in (3, 4) or axis < 2:
        raise why(j, f"a Gather along axis {axis} of a tensor of {r} axes: a pick along the length of a C x L "
                     f"map or the height or width of a C x H x W map is supported")
    c, h, w = _chw(shape)
    n = h if axis == 2 else w
    if not -n <= idx < n:
        raise why(j, f"index {idx} of an axis of {n}")
    k = idx % n
    if axis == 2:
        return dict(c=c, h=h, w=w, oh=1, ow=w, pads=(k, 0, 1 - h - k, 0), mode="reflect", pick=True)
    return dict(c=c, h=h, w=w, oh=h, ow=1, pads=(0, k, 0, 1 - w - k), mode="reflect", pick=True)


def lower_host(j, program, w, steps, why, op_cls):
    """Lower host layer ``j`` if it is a pick (rule step_pick): appends the pad op (and a pending Add's
    requantization) and returns True; False for another host op."""
    a = j.get("attrs", {})
    if j["op"] != "SwMove" or a.get("fn") != "Gather":
        return False
    src = j["inputs"][0]
    st = w.state.get(src)
    f = fields(j, w.shapes[src], why)
    if st is not None and st[0] == "add" and st[1]["p"] is None:
        consumer = _consumer(program, j["output"])
        if consumer is None or steps.bits is not None and consumer.get("f_x") is None:
            raise why(j, "a pick of a pending Add read by one engine layer at its own radix point is supported")
        base = steps.materialize_add(consumer, st[1], w)
        src, st = base, w.state[base]
    if st is None or st[0] != "q":
        raise why(j, "a pick of integers computed on the fabric (not of a pending concat, pool or gate)")
    w.ops.append(op_cls("pad", j["name"], [src], j["output"], f))
    w.state[j["output"]] = st
    out = a.get("out_shape")
    w.shapes[j["output"]] = tuple(int(v) for v in out[1:]) if out else \
        ((f["c"], f["oh"] * f["ow"]) if len(w.shapes[src]) == 2 else (f["c"], f["oh"], f["ow"]))
    return True


def axis_ok(before, after, n, out, mode):
    """A pad's two sides of an axis of ``n`` steps to ``out``: rule edge_pad's (0..64 each) or rule step_pick's
    pick (reflect, one output step, ``k`` before and ``1 - n - k`` after)."""
    if 0 <= before <= 64 and 0 <= after <= 64:
        return True
    return mode == "reflect" and out == 1 and 0 <= before < n and after == 1 - n - before
