"""A linear ``Resize`` whose interpolation weights are not dyadic in the network mode (milesial's
Pytorch-UNet, ``nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)``), and the
exact integer rule both paths follow.

**The layer path's value** (:func:`exact_run`, :mod:`hlsnn.deploy.run.hostextra`'s
``ResizeLinear``). With ``align_corners`` an output ``o`` sits at ``x = o (n_in - 1) / (n_out -
1)``: weights ``1 - frac(x)``, ``frac(x)``, multiples of ``1 / d``, ``d = n_out - 1``. Where every
axis's weights are ``W / d`` with integer ``W`` (:func:`integer_form`, ``d <= MAX_D``), the host op
computes the exact sum ``S = W_y x W_x^T`` of its input and divides once by ``n = d_y d_x``: ``v =
fl(S / n)``, the form of :mod:`.mean`'s layer path value. Other weights keep the float products.

Rule box_resize: **box resize** (each axis's ``W`` is a ``d``-wide box over the nearest upsample by
    ``d``, sampled at a stride ``s``: ``W[o, i] = #{t in [o s, o s + d) : t // d = i}``, every
    window inside ``[0, n_in d)``; ``align_corners`` at any scale has this form with ``s = n_in -
    1``; an axis of scale 1 is ``d = s = 1``): :mod:`.move`'s rule nearest_upsample by ``(d_y,
    d_x)``, then :mod:`.linpool`'s rule avg_pool with a ``d_y x d_x`` window at strides ``(s_y,
    s_x)``, no padding: its window sum is ``S`` at the input's radix, a mean over ``n = d_y d_x``
    values; a count that is not a power of two is :mod:`.mean`'s rule mean_divide, which is the
    layer path's ``to_fixed(fl(S / n))`` (:func:`hlsnn.engines.network.pools.mean.plan` checks it
    per pool). Rule bilinear_x2 (``half_pixel`` x2) is tried first; weights of neither form are
    refused by name.

On BFP pairs the same two ops make a mean over ``n``, kept as its exact sum (rule bfp_mean of
:mod:`hlsnn.engines.bfp_systolic.network.anymean`); a ``Concat`` of it scales its parts to means
over the least common multiple of the odd divisors (rule bfp_mean_concat there)."""
from __future__ import annotations

import numpy as np

#: the largest per-axis denominator :func:`integer_form` looks for
MAX_D = 64


def integer_form(m):
    """``(W, d)``: the (n_out, n_in) float weights ``m`` as ``W / d`` with ``W`` integer and the
    smallest ``d <= MAX_D`` (rows summing to ``d``), or None."""
    m = np.asarray(m, np.float64)
    for d in range(1, MAX_D + 1):
        w = np.rint(m * d)
        if np.all(np.abs(m * d - w) <= 1e-9 * d) and np.all(w.sum(axis=1) == d) and (w >= 0).all():
            return w.astype(np.int64), d
    return None


def box(n_in, n_out, d, s):
    """Rule box_resize's weights: ``W[o, i]`` the taps of the window ``[o s, o s + d)`` of the nearest
    upsample by ``d`` in block ``i``; None when a window leaves ``[0, n_in d)``."""
    if (n_out - 1) * s + d > n_in * d:
        return None
    w = np.zeros((n_out, n_in), np.int64)
    for o in range(n_out):
        for t in range(o * s, o * s + d):
            w[o, t // d] += 1
    return w


def box_form(m):
    """``(d, s)`` when the weights ``m`` are rule box_resize's box, else None."""
    f = integer_form(m)
    if f is None:
        return None
    w, d = f
    n_out, n_in = w.shape
    if n_out == n_in and d == 1 and np.array_equal(w, np.eye(n_in, dtype=np.int64)):
        return 1, 1
    for s in range(1, n_in * d + 1):
        b = box(n_in, n_out, d, s)
        if b is not None and np.array_equal(b, w):
            return d, s
    return None


def exact_run(mats, x):
    """The layer path's ``ResizeLinear`` (module docstring): ``fl(S / n)`` with the exact
    integer sum ``S`` where every axis has an integer form, else None (the caller's float
    products)."""
    forms = [integer_form(m) for m in mats]
    if any(f is None for f in forms):
        return None
    n = 1
    for ax, (w, d) in enumerate(forms):
        x = np.moveaxis(np.tensordot(w.astype(np.float64), np.moveaxis(x, ax + 2, 0), axes=1), 0, ax + 2)
        n *= d
    return x / n


def mode_name(j):
    """The interpolation of a ``ResizeLinear`` host layer ``j`` as the refusals here and in
    :mod:`.linpool` name it: ``"cubic"`` (``nn.Upsample(mode='bicubic')``,
    :mod:`hlsnn.deploy.run.hostextra`) or ``"linear"``."""
    return "cubic" if j.get("attrs", {}).get("mode") == "cubic" else "linear"


def lower(j, mats, chw, src, st, shapes, state, ops, why, op_cls):
    """Rule box_resize for host layer ``j`` (:func:`hlsnn.engines.network.pools.linpool.lower_host`): appends
    the upsample op (``chw`` the input's map) and returns the source name and the pool's fields, or raises ``why``."""
    from .mean import count_fields
    forms = [box_form(m) for m in mats]
    if any(f is None for f in forms):
        bad = next(m for m, f in zip(mats, forms) if f is None)
        n_out, n_in = np.shape(bad)
        raise why(j, f"a {mode_name(j)} Resize from {n_in} to {n_out} whose weights are neither rule bilinear_x2's x2 "
                     f"half_pixel ones nor rule box_resize's box over a nearest upsample (align_corners); no exact integer "
                     f"rule here")
    (dy, sy), (dx, sx) = forms
    c, h, w = chw
    (oh, _), (ow, _) = (np.shape(m) for m in mats)
    if dy > 1 or dx > 1:
        up = dict(c=c, h=h, w=w, fh=dy, fw=dx, oh=h * dy, ow=w * dx)
        mid = j["output"] + "_up"
        ops.append(op_cls("upsample", j["name"] + "/up", [src], mid, up))
        state[mid], shapes[mid] = st, (c, up["oh"], up["ow"])
        src = mid
    f = dict(c=c, h=h * dy, w=w * dx, oh=oh, ow=ow, kh=dy, kw=dx, sh=sy, sw=sx, pads=(0, 0, 0, 0), my=0, mx=0,
             **count_fields(dy * dx))
    return src, f
