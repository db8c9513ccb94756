"""Average pooling and bilinear upsampling in the network mode (U-Nets with ``F.avg_pool2d`` and
``nn.Upsample(mode='bilinear')``), as integer rules of :func:`hlsnn.deploy.lower.program.lower` on
every engine. Layer by layer both are float64 host ops whose every value is exact (a sum of a few
dyadic values with dyadic weights), so these rules give the layer path's bits. ``q`` a tensor's
integers at radix ``F``, a ``C x H x W`` map per image:

Rule avg_pool: **avgpool** (a ``kh x kw`` ``AveragePool``, strides ``(sh, sw)``, ``kh * kw = 2**p``; zero
    padding only with ``count_include_pad = 1``, which counts the zeros): the window's exact sum
    ``s[c, y, x] = sum over (ky, kx) of q[c, y*sh + ky - top, x*sw + kx - left] << t(ky, kx)``
    (the tap shifts ``t`` are 0 for a pool; rule bilinear_x2 uses them), at radix ``F + p``: the mean.
    *Integers*: requantized to the consuming engine layer's ``F_x`` by rule residual_add's
    requantization, ``shift_round_sat(s, F + p - F_x, B, rounding)``, which is what that layer's
    ``to_fixed`` does to the float mean (exact while ``F + p <= max(F_x + 24, 0)``, checked). The pool
    must be read by engine layers at one ``F_x``, or by a channel ``Concat`` they read
    (:mod:`.move` rule channel_concat: this op at the concat's ``F_x``, then the move). *BFP pairs* (``bfp_systolic``): the
    exact sum at ``e0``, the smallest exponent of the window's non-zero elements, then ``e0 -
    p`` (as netbfp rule bfp_global_pool pools a map; a window of zeros is ``(0, 0)``); the sum must stay below
    ``2**25`` at ``e0`` (the kernel's 26-bit element, as an Add's sum: ``NotExact`` otherwise;
    :func:`hlsnn.engines.bfp_systolic.network.lower.avgpool_pairs`).
    A mean over a tap count that is not a power of two (3x3) is the exact quotient by
    :mod:`.mean`'s rule mean_divide on the integer engines (its sum ``s`` at radix ``F`` divided by
    ``n``, requantized once to ``F_x``); on BFP pairs it is refused by name, as are
    ``ceil_mode``, dilation and padding that is not counted (the border windows' counts).
    A ``MaxPool`` or ``GlobalMaxPool`` (one window over the map) of the pool's output runs
    after its requantization to ``F_x``, on the integers (rule max_pool): ``to_fixed`` is
    monotone.
Rule bilinear_x2: **bilinear x2** (``ResizeLinear`` whose per-axis weights are ONNX's linear interpolation
    by 2 with ``half_pixel``, which is also ``pytorch_half_pixel`` and, from one pixel,
    ``align_corners``; an axis of scale 1 kept): along a doubled axis ``y[2i] = (x[i-1] +
    3 x[i]) / 4``, ``y[2i+1] = (3 x[i] + x[i+1]) / 4``, the neighbours clamped at the borders.
    That is the nearest upsample by 2 of the map with its edge pixel repeated once on each side
    (``edge``: rule nearest_upsample with ``y[c, y, x] = q[c, clamp((y - 1) // 2), clamp((x - 1) // 2)]``, an
    ``(2H + 2) x (2W + 2)`` map, radix unchanged), then rule avg_pool with a ``3 x 3`` window, stride
    1, no padding and tap shifts ``t = [0, 1, 0]`` per axis (the weights ``[1, 2, 1] / 4``,
    ``p = 2`` per doubled axis): ``(u[2i-1] + 2u[2i] + u[2i+1]) / 4 = (x[i-1] + 3x[i]) / 4``.
    ``align_corners`` (weights of ``1/3``, ...) is :mod:`.cornerresize`'s rule box_resize (an upsample
    by ``d`` and a ``d x d`` box, rule mean_divide's mean); other weights are refused by name.

Rule bilinear_pow2: **bilinear x4, x8** (``half_pixel`` by a power of two ``f`` on an axis,
    ``2 <= f <= MAX_HALF_PIXEL``; every axis 1, 2, 4 or 8, not all of them 1 or 2, which is rule bilinear_x2): along
    such an axis ``y[f i + r]`` is ``x[i-1]`` and ``x[i]`` weighted ``(f - 2r - 1) / 2f`` and
    ``(f + 2r + 1) / 2f`` (``r < f/2``; ``x[i]`` and ``x[i+1]`` by ``(3f - 2r - 1) / 2f`` and
    ``(2r + 1 - f) / 2f`` for ``r >= f/2``), the neighbours clamped at the borders
    (:func:`half_pixel`; x4: eighths ``3/8, 5/8``, ``1/8, 7/8``). That is the nearest upsample
    ``u[k] = x[k // f]`` (rule nearest_upsample), padded by ``f/2`` pixels of its edge on each side (``edge``
    pad, :mod:`.move` rule edge_pad), then rule avg_pool with an ``(f + 1)``-tap window per axis, stride 1,
    the weights ``[1, 2, ..., 2, 1] / 2f`` (tap shifts ``t = 0, 1, ..., 1, 0``: mask ``2**f -
    2``; ``p = 1 + log2 f`` per axis): the window at output ``k`` covers ``u[k - f/2 .. k +
    f/2]``, of which ``f/2 - r`` taps (the first at weight 1) are in block ``i - 1`` for ``r <
    f/2``: ``(2 (f/2 - r) - 1) / 2f``, the weight above (and symmetrically). Every value is a
    sum of dyadic products as in rule bilinear_x2, so the layer path's float64 resize is exact and its
    consumer's ``to_fixed`` is rule avg_pool's requantization.

Rule avg_pool_global: **a window over the whole map** (an ``AveragePool`` whose ``kh x kw`` kernel is the map's
    ``H x W``, no padding: TC-ResNet's ``F.avg_pool2d(h, h.shape[2:])`` on a ``C x 1 x W`` map)
    of a pending residual ``Add`` (and its ``Relu``) is that Add's global pool, rule residual_add of
    :mod:`hlsnn.deploy.lower.program` (rule mean_divide for a count that is not a power of two; netbfp rule bfp_global_pool
    or bfp_mean on pairs): the layer path's window mean (``nansum / count`` over the one window,
    :func:`hlsnn.deploy.run.pooling._pool`) and its ``GlobalAveragePool`` (``mean``) are both the
    exact sum divided once by ``H*W``, so the same float (:func:`covers_map`). Of an integer
    tensor such a pool stays rule avg_pool (one window).

The kernels run rule bilinear_x2's ``edge`` in their ``Move`` loop (the phase counters start one pixel
early and the input index stops at the border) and rule avg_pool in their pool loop (``MaxPool``'s
window walk with a sum instead of a maximum, the ``gap`` flag of the descriptor; the tap shifts
from the row and column masks ``sa``, ``sb``); ``NetMove`` and ``NetPool`` in ``hlsnn perf``.
"""
from __future__ import annotations

import numpy as np

from .cornerresize import mode_name
from .mean import count_fields
from ..program import _chw, materialized, pool_attrs_2d

#: the op kind of rule avg_pool (rule bilinear_x2's ``edge`` is an ``upsample`` op with ``f["edge"]``)
KINDS = ("avgpool",)
#: the tap shift mask of a bilinear axis: the middle tap's weight 2
MID = 0b010
#: the largest factor of rule bilinear_pow2 (a 9-tap window, ``p = 4`` per axis)
MAX_HALF_PIXEL = 8


def _pool_fields(j, shape, why):
    a = pool_attrs_2d(j["attrs"])
    if a.get("ceil_mode", 0) or any(d != 1 for d in a.get("dilations", [1, 1])):
        raise why(j, "an AveragePool with ceil_mode or dilation has no exact integer rule here")
    kh, kw = (int(v) for v in a["kernel_shape"])
    pads = tuple(int(v) for v in a.get("pads", [0, 0, 0, 0]))
    n = kh * kw
    c, h, w = _chw(shape)
    sh, sw = (int(v) for v in a.get("strides", [1, 1]))
    oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
    f = dict(c=c, h=h, w=w, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pads, my=0, mx=0,
             **count_fields(n))                     # n not a power of two: rule mean_divide (.mean)
    if any(pads) and not a.get("count_include_pad", 0):     # rule avg_pool_uncounted (.uncounted): each window over its count
        from .uncounted import fields
        try:
            f.update(fields(f))
        except ValueError as e:
            raise why(j, f"an AveragePool whose padding is not counted: {e}") from None
    return f


def covers_map(j, shape):
    """Whether host layer ``j`` is an ``AveragePool`` of one window over the whole ``shape`` map,
    no padding, no dilation (rule avg_pool_global)."""
    if j["op"] != "AveragePool":
        return False
    a = pool_attrs_2d(j["attrs"])
    _, h, w = _chw(shape)
    return (tuple(int(v) for v in a["kernel_shape"]) == (h, w) and not any(a.get("pads", [0, 0, 0, 0]))
            and not a.get("ceil_mode", 0) and all(d == 1 for d in a.get("dilations", [1, 1])))


def global_op(j, st, shape):
    """The op host layer ``j`` (reading a tensor in state ``st`` of per-image ``shape``) is
    lowered as: ``GlobalAveragePool`` for rule avg_pool_global (:func:`covers_map` of a pending Add), its
    own op otherwise."""
    return "GlobalAveragePool" if st[0] == "add" and covers_map(j, shape) else j["op"]


def half_pixel_x2(n):
    """Rule bilinear_x2's (2n, n) weights along a doubled axis: ``y[2i] = (x[i-1] + 3 x[i]) / 4``,
    ``y[2i+1] = (3 x[i] + x[i+1]) / 4``, the neighbours clamped to ``[0, n - 1]``."""
    m = np.zeros((2 * n, n))
    for i in range(n):
        for o, (a, b) in ((2 * i, (i - 1, i)), (2 * i + 1, (i + 1, i))):
            m[o, min(max(a, 0), n - 1)] += 0.25
            m[o, b] += 0.75
    return m


def half_pixel(n, f):
    """ONNX's (``f n``, ``n``) linear weights along an axis scaled by ``f`` with ``half_pixel``
    (torch's ``align_corners=False``), from the definition: output ``o`` at ``x = (o + 1/2) / f
    - 1/2`` clamped to ``[0, n - 1]``, weights ``1 - frac(x)`` and ``frac(x)`` on ``floor(x)``
    and the next pixel (exact: dyadic for a power-of-two ``f``)."""
    from fractions import Fraction
    m = np.zeros((f * n, n))
    for o in range(f * n):
        x = min(max(Fraction(2 * o + 1, 2 * f) - Fraction(1, 2), Fraction(0)), Fraction(n - 1))
        i0 = int(x)
        m[o, i0] += float(1 - (x - i0))
        if x > i0:
            m[o, i0 + 1] += float(x - i0)
    return m


def half_pixel_factors(mats):
    """Rule bilinear_pow2's per-axis factors of ``mats`` (each 1 or a power of two up to
    :data:`MAX_HALF_PIXEL` whose weights are :func:`half_pixel`'s), or None."""
    out = []
    for m in mats:
        n_out, n_in = m.shape
        f = n_out // n_in
        if n_out == n_in and np.array_equal(m, np.eye(n_in)):
            out.append(1)
        elif n_out == f * n_in and 2 <= f <= MAX_HALF_PIXEL and not f & (f - 1) \
                and np.array_equal(m, half_pixel(n_in, f)):
            out.append(f)
        else:
            return None
    return tuple(out)


def lower_half_pixel(j, fs, shape, src, st, state, shapes, ops, op_cls):
    """Rule bilinear_pow2's first two ops (the nearest upsample by ``fs``, the edge pad by ``f/2``)
    appended to ``ops``; returns the padded map's name and rule avg_pool's fields for the window."""
    c, h, w = _chw(shape)
    fy, fx = fs
    mid = j["output"] + "_up"
    ops.append(op_cls("upsample", j["name"] + "/up", [src], mid, dict(c=c, h=h, w=w, fh=fy, fw=fx, oh=h * fy,
                                                                        ow=w * fx)))
    state[mid], shapes[mid] = st, (c, h * fy, w * fx)
    ty, tx = fy // 2, fx // 2
    pad = j["output"] + "_edge"
    ops.append(op_cls("pad", j["name"] + "/edge", [mid], pad,
                      dict(c=c, h=h * fy, w=w * fx, oh=h * fy + 2 * ty, ow=w * fx + 2 * tx, pads=(ty, tx, ty, tx),
                           mode="edge")))
    state[pad], shapes[pad] = st, (c, h * fy + 2 * ty, w * fx + 2 * tx)

    def axis(f):
        return (f + 1, (1 << f) - 2, 1 + f.bit_length() - 1) if f > 1 else (1, 0, 0)
    (kh, my, py), (kw, mx, px) = axis(fy), axis(fx)
    return pad, dict(c=c, h=h * fy + 2 * ty, w=w * fx + 2 * tx, oh=h * fy, ow=w * fx, kh=kh, kw=kw, sh=1, sw=1,
                     pads=(0, 0, 0, 0), my=my, mx=mx, p=py + px)


def resize_mats(j, why):
    """The (2, ) per-axis weight matrices of a ``ResizeLinear`` host layer ``j`` (a 1-D resize's
    second axis of scale 1)."""
    mats = [np.asarray(m, np.float64) for m in j["attrs"]["mats"]]
    if len(mats) == 1:
        mats = mats + [np.eye(1)]
    if len(mats) != 2:
        raise why(j, f"a {mode_name(j)} Resize of {len(mats)} spatial axes; 1 or 2 have a rule here")
    return mats


def is_x2(mats):
    """Whether every axis of ``mats`` is rule bilinear_x2's (scale 1, or :func:`half_pixel_x2`)."""
    return all(np.array_equal(m, np.eye(m.shape[1])) or
               (m.shape[0] == 2 * m.shape[1] and np.array_equal(m, half_pixel_x2(m.shape[1]))) for m in mats)


def resize_factors(j, shape, why):
    """The per-axis factors ``(fy, fx)``, each 1 or 2, of a ``ResizeLinear`` host layer ``j``
    whose weights are rule bilinear_x2's (:func:`half_pixel_x2`), else :class:`InputError` naming what
    it is."""
    mats = resize_mats(j, why)
    out = []
    for m in mats:
        n_out, n_in = m.shape
        if n_out == n_in and np.array_equal(m, np.eye(n_in)):
            out.append(1)
        elif n_out == 2 * n_in and np.array_equal(m, half_pixel_x2(n_in)):
            out.append(2)
        else:
            raise why(j, f"a {mode_name(j)} Resize from {n_in} to {n_out} whose weights are not the x2 half_pixel ones "
                         f"(rule bilinear_x2; align_corners is rule box_resize, .cornerresize)")
    return tuple(out)


def lower_host(j, state, shapes, ops, bits, why, op_cls):
    """Lower host layer ``j`` if it is an ``AveragePool`` or a ``ResizeLinear`` (module rules avg_pool,
    bilinear_x2): appends its ops to ``ops`` and sets its output's state and shape (integers: a pending
    ``("avgp", {...})`` state that :func:`materialize` requantizes for its consumer; ``bits``
    None: BFP pairs, the op at once) and returns True; False for another host op."""
    op = j["op"]
    if op not in ("AveragePool", "ResizeLinear"):
        return False
    src = j["inputs"][0]
    st = state.get(src)
    if st is None or st[0] != "q":
        raise why(j, f"an {op} of an integer tensor computed on the fabric (not of a pending Add, pool or concat)")
    if op == "AveragePool":
        f = _pool_fields(j, shapes[src], why)
    elif not is_x2(resize_mats(j, why)) and half_pixel_factors(resize_mats(j, why)) is not None:   # rule bilinear_pow2
        src, f = lower_half_pixel(j, half_pixel_factors(resize_mats(j, why)), shapes[src], src, st, state, shapes,
                                  ops, op_cls)
    elif not is_x2(resize_mats(j, why)):            # rule box_resize (.cornerresize): align_corners and other boxes
        from .cornerresize import lower as box_lower
        src, f = box_lower(j, resize_mats(j, why), _chw(shapes[src]), src, st, shapes, state, ops, why, op_cls)
    else:
        fy, fx = resize_factors(j, shapes[src], why)
        c, h, w = _chw(shapes[src])
        ey, ex = int(fy == 2), int(fx == 2)
        up = dict(c=c, h=h, w=w, fh=fy, fw=fx, oh=h * fy + 2 * ey, ow=w * fx + 2 * ex, edge=(ey, ex))
        mid = j["output"] + "_edge"
        ops.append(op_cls("upsample", j["name"] + "/edge", [src], mid, up))
        state[mid], shapes[mid] = st, (c, up["oh"], up["ow"])
        src = mid
        f = dict(c=c, h=up["oh"], w=up["ow"], oh=h * fy, ow=w * fx, kh=1 + 2 * ey, kw=1 + 2 * ex, sh=1, sw=1,
                 pads=(0, 0, 0, 0), my=MID * ey, mx=MID * ex, p=2 * (ey + ex))
    shape = (f["c"], f["oh"], f["ow"]) if len(shapes[j["inputs"][0]]) != 2 else (f["c"], f["oh"])
    shapes[j["output"]] = shape
    if bits is None:                                # BFP pairs: the exact sum, its exponent less p (the shift)
        n = f.get("n", 1)
        if n & (n - 1):                             # bfp rule bfp_mean: the sum at 2**-a, read as over d
            from ...bfp_systolic.network.anymean import odd
            f = dict(f, p=odd(n)[0], mdiv=odd(n)[1])
        ops.append(op_cls("avgpool", j["name"], [src], j["output"], dict(f, shift=f["p"], rounding="nearest_even")))
        state[j["output"]] = ("q", None)
    else:
        state[j["output"]] = ("avgp", dict(f, src=src, fin=st[1], name=j["name"], bits=bits))
    return True


def materialize(j, src, st, state, shapes, ops, aliases, rounding, why, op_cls):
    """An engine layer ``j`` reads the pending pool ``st`` (directly, or as a part of a concat):
    rule avg_pool's op requantized to ``j``'s ``F_x``, as the tensor ``NAME_q`` (state ``("q", F_x)``),
    which ``src`` then names (``aliases``)."""
    a = st[1]
    f_x = j["f_x"]
    base = a["name"] + "_q"
    aliases[src] = base
    if materialized(j, a["name"], state, shapes, why):
        return
    fs = a["fin"] + a["p"]
    f = {k: v for k, v in a.items() if k not in ("src", "fin", "name", "bits", "then", "first")}
    n = a.get("n", 1)
    if n & (n - 1) and f_x is not None:             # rule mean_divide: the exact mean by a constant reciprocal
        from .mean import plan
        r = plan(n, fs, f_x, n << (a["bits"] - 1))
        if isinstance(r, str):
            raise why(j, r)
        f["div"], shift = r
    elif f_x is None or fs > max(f_x + 24, 0):
        raise why(j, f"the requantization from radix {fs} to {f_x} is not exact in today's host rule")
    else:
        shift = fs - f_x
    then = a.get("then", [])                        # max pools of the mean, at F_x (program rule max_pool)
    out = a["name"] + "_mean" if then else base
    if a.get("first") is not None:                  # reduce rule channel_reduce's transpose, made when it is read
        ops.append(a["first"])
    ops.append(op_cls("avgpool", a["name"], [a["src"]], out, dict(f, shift=shift, rounding=rounding)))
    shapes[out], state[out] = (f["c"], f["oh"], f["ow"]), ("q", f_x)
    for i, m in enumerate(then):
        nxt = base if i + 1 == len(then) else m["name"] + "_q"
        ops.append(op_cls(m.get("kind", "maxpool"), m["name"], [out], nxt,         # or reduce rule channel_reduce's transpose
                          m.get("op") or {k: v for k, v in m.items() if k != "name"}))
        shapes[nxt], state[nxt] = (m["c"], m["oh"], m["ow"]), ("q", f_x)
        out = nxt
    # the map the op writes (C, H, W), not the consumer's view of it (a Flatten's vector): the
    # kernels' channel banks hold a map
    shapes[base] = (then[-1]["c"], then[-1]["oh"], then[-1]["ow"]) if then else (f["c"], f["oh"], f["ow"])


def windows(x, f, pad_value=0):
    """The (B, C, OH, OW, kh, kw) windows of (B, C, H, W) ``x`` and the (kh, kw) tap shifts."""
    t, l, b, r = f["pads"]
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=pad_value)
    win = np.lib.stride_tricks.sliding_window_view(xp, (f["kh"], f["kw"]), axis=(2, 3))
    win = win[:, :, ::f["sh"], ::f["sw"]][:, :, :f["oh"], :f["ow"]]
    ty = np.array([(f["my"] >> k) & 1 for k in range(f["kh"])], np.int64)
    tx = np.array([(f["mx"] >> k) & 1 for k in range(f["kw"])], np.int64)
    return win, ty[:, None] + tx[None, :]


def run(op, get, b, bits):
    """Rule avg_pool on a batch of ``b`` images of integers: (B, C, OH, OW) int64."""
    from ....primitives import shift_round_sat
    f = op.f
    x = np.asarray(get(op.ins[0]), np.int64).reshape(b, f["c"], f["h"], f["w"])
    win, t = windows(x, f)
    s = (win << t).sum(axis=(-2, -1))
    if f.get("uncounted"):                           # rule avg_pool_uncounted (.uncounted): the sum over L values
        from .uncounted import scale
        s = s * scale(f)
    if "div" in f:                                   # rule mean_divide (.mean)
        from .mean import divide
        s = divide(s, f["div"])
    return shift_round_sat(s, f["shift"], bits, f["rounding"])[0]


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops` for rule avg_pool's op (its window as a maxpool's)."""
    f = op.f
    ints(op, f, ("my", "mx"), 0, (1 << MAX_HALF_PIXEL) - 2)
    ints(op, f, ("p",), 0, 8)
    ints(op, f, ("shift",), -62, 62)
    for k, m in ((f["kh"], f["my"]), (f["kw"], f["mx"])):
        if m and m != (1 << (k - 1)) - 2:
            raise bad(op, f"tap shifts {m:#b} on a window of {k} taps: none, or weight 2 on every tap but the two "
                          f"ends (rules bilinear_x2, bilinear_pow2)")


def descriptor(op, f, d, pc):
    """The pool loop's descriptor of rule avg_pool (``gap`` set: a sum, not a maximum; the tap masks
    in ``sa``, ``sb``; the requantization ``shift``; the window's fields as a maxpool's, from
    :func:`hlsnn.engines.network.kernel.descriptor_head`): the bits its sum needs beyond an
    activation's (``p`` and a sign's)."""
    d.update(n_iter=-(-f["c"] // pc) * f["oh"] * f["ow"] * f["kh"] * f["kw"], gap=1, sa=f["my"], sb=f["mx"],
             shift=f["shift"], woff=int(bool(f.get("uncounted"))))      # woff: rule avg_pool_uncounted's scale (.uncounted)
    return max(f["p"], (f.get("n", 1) - 1).bit_length()) + 1
