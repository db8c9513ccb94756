"""A transpose of rows and channels in the integer network mode: the host ops
``RowsToMap`` and ``MapToRows`` (:mod:`hlsnn.deploy.importer.onnx_nodes`: a token-wise ``Linear``
on (N, T, F) rows runs as a 1x1 conv on the ``F x T x 1`` map of its rows, and back) as one
op kind, ``transpose``, of :func:`hlsnn.deploy.lower.program.lower` (the ``shift_mac`` and
``sparse_cluster`` network modes: integers at a radix point) and of the ``bfp_systolic``
network mode (per-element ``(m, e)`` pairs). The rule (a continuation of
:mod:`hlsnn.engines.network.move`'s 6-8):

Rule rows_transpose: **transpose** of an ``R x S`` matrix per image, held as the ``R x S x 1`` map (``R``
   channels of ``S`` pixels), into the ``S x R x 1`` map: ``y[s, r] = q[r, s]``; radix (or
   each element's pair) unchanged. It is :func:`hlsnn.deploy.run.hostops.run`'s ``RowsToMap``
   ((T, F) rows to the ``F x T x 1`` map: ``R = T``, ``S = F``) and ``MapToRows`` (the
   ``O x L x 1`` map back to (L, O) rows: ``R = O``, ``S = L``), which move float values
   that are the integers' (or the pairs') exactly: so the integers are the layer path's.

In BFP the layer path's next engine layer quantizes its own patches of the moved float
tensor (one shared exponent per im2col patch: a 1x1 conv's patch is one row, a dense layer's
the whole flattened tensor); the network mode's conv takes its patch exponents from the
moved pairs the same way (netbfp rule bfp_conv), so moving pairs is exact however the transpose
regroups the values.

The source must be held on chip as that ``R x S x 1`` map: a tensor made by an op of that
shape (a conv's ``O x L x 1`` output), or the input, whose load is laid out as the ``R x S``
rows it is reshaped to (:func:`lower_host`; the image's values in the same NCHW order, so
only the pixels per channel change). A row tensor with more than one leading axis
(``(T1, T2, F)``) is refused by name: its rows are not the channels of one map.

The kernels run it as a ``Transpose`` loop (``hls/engines/<engine>/network.cpp.j2``): in
``Q x Q`` blocks (``Q`` channel banks), one diagonal a cycle, so each bank is read once and
written once a cycle (``ceil(R/Q) * ceil(S/Q) * Q`` iterations)."""
from __future__ import annotations

import numpy as np

#: the host ops this module lowers
HOST_OPS = ("RowsToMap", "MapToRows")


def _rows(shape):
    """``(R, S)`` of a per-image row tensor ``(R, S)`` or map ``(R, S, 1)``; None otherwise."""
    shape = tuple(int(v) for v in shape)
    if len(shape) == 2 or len(shape) == 3 and shape[2] == 1:
        return shape[0], shape[1]
    return None


def lower_host(j, state, shapes, aliases, inp, ops, why, op_cls, ok):
    """Lower host layer ``j`` if it is a ``RowsToMap`` or ``MapToRows``: append its
    ``transpose`` op, set its output's state (its source's: ``ok`` says which states a move
    takes) and per-image shape, and return True; False for another host op. ``inp`` the
    network input's name: a transpose of it lays the input's load out as its rows.
    :class:`InputError` (``why(j, what)``) for a transpose it cannot take."""
    op = j["op"]
    if op not in HOST_OPS:
        return False
    src = j["inputs"][0]
    st = state.get(src)
    if not ok(st):
        raise why(j, "a transpose of an integer tensor computed on the fabric, or of the input")
    shape = tuple(shapes[src])
    if op == "RowsToMap":
        rs = _rows(shape)
        if rs is None or len(shape) != 2:
            raise why(j, f"rows of shape {shape}: a transpose of (T, F) rows (one leading axis) is supported")
        out_shape = (rs[1], rs[0], 1)
    else:
        lead = tuple(j.get("attrs", {}).get("lead", ()))
        rs = _rows(shape)
        if rs is None or len(lead) != 1 or lead[0] != rs[1]:
            raise why(j, f"a map of shape {shape} back to rows {lead}: one leading axis of the map's length is "
                         f"supported")
        out_shape = (rs[1], rs[0])
    r, s = rs
    phys = aliases.get(src, src)
    held = tuple(shapes[phys])
    if phys == inp and held != (r, s) and int(np.prod(held)) == r * s:
        shapes[phys] = held = (r, s)            # the input's load laid out as its rows: the same NCHW order
    from ..program import _chw
    if _chw(held) != (r, s, 1):
        raise why(j, f"its source is held on chip as a {'x'.join(map(str, _chw(held)))} map, not as the "
                     f"{r}x{s}x1 map of its rows")
    ops.append(op_cls("transpose", j["name"], [src], j["output"], dict(r=r, s=s)))
    state[j["output"]], shapes[j["output"]] = st, out_shape
    return True


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops` for a transpose."""
    ints(op, op.f, ("r", "s"), 1, 1 << 16)


def run(op, get, b):
    """Rule rows_transpose on a batch of ``b`` images: the output integers (B, S, R, 1) int64."""
    f = op.f
    x = np.asarray(get(op.ins[0]), np.int64).reshape(b, f["r"], f["s"])
    return np.ascontiguousarray(x.transpose(0, 2, 1))[..., None]


def run_pairs(op, get, b):
    """Rule rows_transpose on a batch of ``b`` images of ``(m, e)`` pairs: the output pairs."""
    m, e = get(op.ins[0])
    return tuple(run(op, lambda t, a=a: a, b) for a in (m, e))


def descriptor(op, d, place, name, pc):
    """Fill the network kernel's descriptor ``d`` of a transpose (the kernels' ``Transpose``
    loop): ``cg`` its ``R`` input channels, ``h``/``hw`` their ``S`` pixels, ``ohw`` the
    output's ``R`` pixels, ``zb`` the ``ceil(S/Q)`` blocks of output channels, ``n_iter =
    ceil(R/Q) * ceil(S/Q) * Q`` (one diagonal of a ``Q x Q`` block a cycle)."""
    r, s = op.f["r"], op.f["s"]
    d.update(src=place[name(op.ins[0])][0], cg=r, h=s, w=1, hw=s, oh=r, ow=1, ohw=r, zb=-(-s // pc),
             n_iter=-(-r // pc) * -(-s // pc) * pc)
    return 0
