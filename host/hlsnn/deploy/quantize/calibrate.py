"""Calibration at the speed of the run: :meth:`hlsnn.deploy.run.runner.Deployment.calibrate` of a
``shift_mac`` or ``sparse_cluster`` network on ``emu`` as compiled integer ops
(``native/netint.c``), setting exactly the state the layer path sets.

The layer path (:mod:`hlsnn.deploy.run.runner`, the specification) calibrates each fixed-point
layer with two kernel calls on the whole calibration batch: the *preceding operation* (the
statistics unit's MSB histogram of the wide results, then DETERMINE picks ``F_out``) and the
*main operation* (the outputs at that radix). Host glue between the layers works in float64
on exact values, and a tensor that is not in the next layer's format is converted at the
radix :func:`~hlsnn.deploy.quantize.quant.host_radix` picks from its values. Here the same steps run
once per layer on int32 NHWC maps, with the rules of :mod:`hlsnn.deploy.lower.program` (which
give the layer path's bits):

1. **Input**: ``F_x = host_radix(x)``, then :func:`~hlsnn.deploy.lower.program.quantize_input`'s
   bits (``to_fixed``'s) by :func:`hlsnn.deploy.run.fast.quantize_nhwc`, images split between
   threads.
2. **conv / dense**: a two-hot or PoT layer with ``weight_fit: output`` first re-chooses its
   codes and bias on its input integers (:func:`hlsnn.deploy.quantize.shift_fit.refit`, as the layer
   path does). The convolution stores its wide results ``v`` (``hlsnn_net_conv`` with
   ``RAW``: ``acc + bias``, the ``acc_bits`` clamp of ``shift_mac``, ReLU), which is what the
   preceding operation's statistics unit sees, so the main operation is the output stage
   applied to ``v`` (``hlsnn_net_requant``) instead of a second convolution. The histogram
   (counted per channel by the same call) goes through
   :meth:`~hlsnn.deploy.run.executors._Exec.determine_groups`, the layer path's rule for channel
   groups of different weight scales; ``F_out`` is DETERMINE's, with the layer's previous
   ``F_out`` as ``f_prev``. The statistics cover the outputs the kernel
   computes: on ``sparse_cluster``, a strided convolution runs as its stride-1 form
   (:func:`hlsnn.engines.convgeom.as_stride1`), so its histogram, count and saturations are
   those of every stride-1 output, of which the layer keeps ``[::sh, ::sw]``; with the
   deployment's ``strided_stats="kept"`` the histogram and count are those of the kept
   outputs of ``v`` instead (:meth:`~hlsnn.deploy.run.executors.SparseExec.kept_stats`, counted
   by :func:`~hlsnn.primitives.msb_histogram`; ``radix: lse`` refines on them too), while
   the saturations still count every stride-1 output; with ``clip_stats="clipped"`` and a
   ``Clip`` the conv's only reader, the histogram is that of those results clipped at the
   Clip's bounds (:meth:`~hlsnn.deploy.run.executors._Exec.clip_stats`). A ``Clip``
   after the conv clamps the outputs at the radix chosen (netmode rule conv_output).
3. **maxpool**: netmode rule max_pool.
4. **add** (residual ``Add``, ``Relu``, ``GlobalAveragePool``): the exact sum ``s`` at radix
   ``R``; the consumer's ``F_x`` is :func:`~hlsnn.deploy.quantize.quant.host_radix` of ``s * 2**-R``,
   computed from ``s``'s MSB counts (that function writes the values as ``s << d``, ``d =
   51 - msb(max |s|)``, and counts their MSBs: the counts of ``s`` moved up ``d`` bins, plus
   the ``-1`` values, which have an MSB only once shifted, at bin ``d - 1``); the
   requantization is netmode rule residual_add's ``shift_round_sat(s, R - F_x)``.

Every layer's ``f_x`` (where its input was converted), ``f_out``, ``stats.histogram``,
``f_in``, ``sat_count`` and ``input_density`` are set as the layer path sets them (tested
equal, as are the codes, the fitted biases and the next run's outputs); ``stats.calls`` is
left as it was, since no kernel calls are made.

:func:`calibrate` returns False, with the deployment unchanged, where it does not replicate
the layer path: the conditions of :meth:`~hlsnn.deploy.run.runner.Deployment.fast_network`
(one ``shift_mac``/``sparse_cluster`` accelerator on ``emu``, static radix points, no host
layers in fixed point, an op netmode lowers), E1 updates only, wide results that fit int32
(``2**(B-1) * max_z sum|c| + max|bias| < 2**31``), and radix points at which netmode's rules
are exact (a ``Clip`` bound that is a value of the output format, an ``Add`` whose
requantization is exact). The layer path then calibrates, and raises its own errors.
"""
from __future__ import annotations

import copy
import math
import threading

import numpy as np

from ...errors import InputError
from ...formats import fixed
from ...native import parallel
from ...primitives import msb_histogram
from ..run import fast as netfast
from ..lower import program as netmode
from . import radix_lse
from ...engines.convgeom import spread

#: ``rule | RAW`` makes ``hlsnn_net_conv`` store the wide results (``netint.c``)
RAW = 4
#: output pixels per thread at least
_MIN_PIXELS = 256
#: operations (multiply-adds, or values requantized) per thread at least
_MIN_WORK = 1 << 20
#: images per thread from which a thread pads its images and convolves them in one dispatch
_FUSE = 4
#: the vector unit the convolutions may use (``netint.c``: 0 portable, 1 AVX2, 2 AVX-512, 3
#: AVX-512 VNNI; the best the CPU has up to this): the tests run each
ISA = 3


class _Bail(Exception):
    """A step the compiled calibration does not replicate: the layer path calibrates."""


def calibrate(dep, x):
    """Calibrate ``dep`` on the float batch ``x`` as the layer path would (module docstring):
    True when done, False (``dep`` unchanged) where the layer path must run."""
    x = np.asarray(x, np.float64)
    if dep.update != "e1" or not x.ndim or not x.shape[0] or not dep.fast:
        return False
    so = netfast.lib()
    if so is None:
        return False
    saved = _save(dep)
    try:
        for ex in dep.execs.values():          # provisional radix points: the program's structure
            ex.f_x, ex.f_out = 0, 0
        net = dep._lowered()
        for k, ex in dep.execs.items():
            ex.f_x, ex.f_out = saved[0][k][0]["f_x"], saved[0][k][0]["f_out"]
        if net is None or any(op.kind in ("upsample", "zerostuff", "pad", "concat", "transpose", "lut", "gate", "avgpool", "lnorm") for op in net.ops):
            raise _Bail                        # no fast calibration of the data moves (netmove)
        if any(op.f.get("out_bits") for op in net.ops):
            raise _Bail                        # nor of a chained Add's exact sum (engines.network.joins.chain)
        if any(getattr(ex, "terms", 1) != 1 for ex in dep.execs.values()):
            raise _Bail                        # nor of two codes a weight (its refit is hlsnn.deploy.quantize.twoterm's)
        lse = {radix_lse.wanted(ex) for ex in dep.execs.values()}
        if True in lse and (len(lse) > 1 or _pooled_sum(net)):
            raise _Bail                        # radix: lse of a sum the layer path converts after a MaxPool
        from . import shift_netfit
        shift_netfit.prepare(dep, x)           # weight_fit: network's float inputs (cached per batch)
        _walk(dep, net, so, x)
    except (_Bail, InputError):
        _restore(dep, saved)
        return False
    dep.calibrated, dep._fastnet = True, None
    return True


def _pooled_sum(net):
    """True when a MaxPool reads an Add's (or a global pool's) sum: the layer path converts the
    pooled values, whose least-squared-error radix (``radix: lse``) is not the sum's."""
    sums = {op.out for op in net.ops if op.kind not in ("conv", "maxpool")}
    return any(op.kind == "maxpool" and net.aliases.get(op.ins[0], op.ins[0]) in sums for op in net.ops)


def _save(dep):
    return ({k: (dict(ex.__dict__), copy.deepcopy(ex.stats)) for k, ex in dep.execs.items()},
            (dep.calibrated, dep._fastnet))


def _restore(dep, saved):
    for k, (state, stats) in saved[0].items():
        ex = dep.execs[k]
        ex.__dict__.clear()
        ex.__dict__.update(state)
        ex.stats = stats
    dep.calibrated, dep._fastnet = saved[1]


_ptr = netfast._ptr


def _pixels(so_fn, n, per=1):
    """Run ``so_fn(q0, q1)`` on ranges of ``n`` pixels in threads, ``per`` operations a pixel;
    the results' list. A thread gets ``_MIN_WORK`` operations at least (handing work to another
    thread and waiting for it costs tens of microseconds: a small layer runs in one)."""
    return parallel.run(so_fn, parallel.parts(n, max(_MIN_PIXELS, _MIN_WORK // max(per, 1))))


def _walk(dep, net, so, x):
    b = x.shape[0]
    bits = net.input["bits"]
    alias = lambda name: net.aliases.get(name, name)          # noqa: E731
    clips = {la.inputs[0]: la for la in dep.net.layers if la.kind == "host" and la.op == "Clip"}
    # 1. the input at host_radix's point, as the first layer converts it
    from .quant import host_radix
    f_x = host_radix(x, bits, True, dep.overflow_ratio)
    first = dep.execs[net.ops[0].name] if net.ops and net.ops[0].kind == "conv" else None
    if first is not None and radix_lse.wanted(first):
        f_x = radix_lse.input_radix(x, f_x, bits, True, dep.rounding)
    net.input["f"] = f_x
    c, h, w = netmode._chw(net.input["shape"])
    xf = np.ascontiguousarray(x.reshape(b, -1))
    x0 = _take((b, h, w, c))
    parallel.run(lambda b0, b1: netfast.quantize_nhwc(net, so, xf[b0:b1], x0[b0:b1]), parallel.parts(b, 1))
    env = {net.input["name"]: (x0, f_x, True)}
    last = {}                                    # tensor -> the index of the last op that reads it
    for i, op in enumerate(net.ops):
        for t in op.ins:
            last[alias(t)] = i
    for i, op in enumerate(net.ops):
        a, fa, converted = env[alias(op.ins[0])]
        if op.kind == "conv":
            env[op.out] = _conv(dep, net, so, op, a, fa, converted, clips.get(op.out))
        elif op.kind == "maxpool":
            if converted:                # a pool of a sum materialized for its reader (engines.network.joins.maxlate):
                raise _Bail              # the layer path picks the reader's F_x from the pooled values
            f = op.f
            y = _take((b, f["oh"], f["ow"], f["c"]))
            so.hlsnn_net_maxpool(_ptr(a), f["h"], f["w"], f["c"], f["kh"], f["kw"], f["sh"], f["sw"], f["pads"][0],
                                 f["pads"][1], f["oh"], f["ow"], 0, b, _ptr(y))
            env[op.out] = (y, fa, False)
        else:
            other = env[alias(op.ins[1])] if len(op.ins) > 1 else None
            env[op.out] = _add(dep, so, op, a, fa, other, bits)
        for t in {alias(t) for t in op.ins}:     # tensors nothing reads any more: their buffers back
            if last[t] == i:
                _give(env.pop(t)[0])
    for t, (arr, _, _) in env.items():
        _give(arr)


def _conv(dep, net, so, op, x, fx, converted, clip):
    """Rule 2 of the module docstring for one conv op: ``(y, F_out, False)``."""
    from . import shift_fit, shift_netfit
    from ..run.executors import ShiftExec, clip_saturation_free, clipped_wide
    from ...engines import convgeom as conv
    ex, f = dep.execs[op.name], dict(op.f)
    b = x.shape[0]
    if converted:                       # the layer path converted this input (at this radix)
        ex.f_x = fx
    z = f["z"]
    is_shift = isinstance(ex, ShiftExec)
    fit = getattr(ex.fmt, "weight_fit", "nearest") if is_shift else None
    if fit in ("output", "network"):
        xi = x.transpose(0, 3, 1, 2)
        tgt = shift_netfit.target(ex, xi, fx) if fit == "network" else None     # as the layer path
        own = shift_fit.refit(ex, xi, fx, tgt)                     # the values ex.wq encodes
        dh, dw = map(int, ex.layer.dilations) if ex.layer.kind == "conv" else (1, 1)
        kc = f["codes"].shape
        own = own.reshape(kc[:2] + ((kc[2] - 1) // dh + 1, (kc[3] - 1) // dw + 1))
        f["codes"] = spread(own, dh, dw).astype(np.int64)          # a dilated layer's zero-filled kernel
    f_w = np.broadcast_to(np.asarray(ex.f_w, np.int64).reshape(-1), (z,))
    f_in = fx + ex.f_w                                     # an int, or one per output channel
    b_fit = getattr(ex, "b_fit", None)
    bias = np.rint(np.ldexp(ex.layer.b if b_fit is None else b_fit, fx + f_w))
    rules = netmode.engine_rules(net.engine)
    if np.abs(bias).max(initial=0) >= 1 << rules.bias_bits:
        raise _Bail                                        # the layer path's error
    # the outputs the kernel computes: a strided conv on sparse_cluster runs at stride 1
    whole = not is_shift and ex.general and ex.blocks is None and (f["sh"], f["sw"]) != (1, 1)
    if whole:
        pt, pl, pb, pr = f["pads"]
        f.update(sh=1, sw=1, oh=f["h"] + pt + pb - f["kh"] + 1, ow=f["w"] + pl + pr - f["kw"] + 1)
    f.update(bias=bias.astype(np.int64), shift=np.zeros(z, np.int64), clip=(-(1 << 31), (1 << 31) - 1))
    cv = netfast._Conv(netmode.Op("conv", op.name, op.ins, op.out, f), net.input["bits"], net.params, net.engine)
    if (1 << (net.input["bits"] - 1)) * cv.rowsum + int(np.abs(cv.bias).max(initial=0)) >= 1 << 31:
        raise _Bail                                        # wide results beyond int32
    # the wide results v over the kernel's outputs
    xp = _padded((b, cv.hp, cv.wp, cv.cx), f["pads"], cv.xdtype)

    def pad(b0, b1):                    # images [b0, b1): their padded copies and non-zero counts
        nzp = np.zeros(f["h"] * f["w"], np.int64)
        cv.pad(so, x[b0:b1], b1 - b0, xp[b0:b1], nzp)
        return nzp
    npix = b * f["oh"] * f["ow"]
    v = _take((b, f["oh"], f["ow"], z))

    def wide(q0, q1):                   # v on pixels [q0, q1), and its MSB counts per channel
        cnt = np.zeros((z, 32), np.int64)
        cv.conv(so, xp, q0, q1, (cv.p_bias, cv.p_shift, cv.rule | RAW, cv.acc_bits, cv.bits, cv.mode,
                                 int(f["relu"]), cv.lo, cv.hi, _ptr(v), ISA, _ptr(cnt)))
        return cnt
    # the statistics unit's histogram and DETERMINE (the layer path's rule)
    per = f["oh"] * f["ow"]
    macs = z * cv.kh * cv.kw * (1 if cv.depthwise else cv.cg)             # one output pixel's
    if b >= _FUSE * parallel.threads():  # a thread pads its images and convolves them: one dispatch
        done = parallel.run(lambda b0, b1: (pad(b0, b1), wide(b0 * per, b1 * per)),
                            parallel.parts(b, max(1, _MIN_WORK // max(per * macs, 1))))
        nz, cnt = sum(t[0] for t in done), sum(t[1] for t in done)
    else:                               # few images: every padded image first, then pixels in threads
        nz = sum(parallel.run(pad, parallel.parts(b, 1)))
        cnt = sum(_pixels(wide, npix, macs))
    nbins = int(ex.p["acc_bits"]) if is_shift else 32
    f_vec = np.asarray(f_in, np.int64).reshape(-1)
    groups = np.unique(f_vec)
    parts = []
    kept = whole and ex.kept_stats()              # strided_stats: kept: the statistics of the kept outputs
    vk = v[:, ::op.f["sh"], ::op.f["sw"]][:, :op.f["oh"], :op.f["ow"]] if kept else v
    n_st = vk.shape[0] * vk.shape[1] * vk.shape[2]          # the outputs the statistics cover
    cb = ex.clip_stats()                          # clip_stats: clipped: the statistics of the clipped results
    for g in groups:
        chans = np.arange(z) if len(groups) == 1 else np.flatnonzero(f_vec == g)
        if cb is not None:
            h = msb_histogram(clipped_wide(vk[..., chans], int(g), cb), 32)
        else:
            h = msb_histogram(vk[..., chans], 32) if kept else cnt[chans].sum(axis=0)
        if h[nbins:].any():
            raise _Bail                                    # beyond the counters (the layer path's error)
        hb = np.zeros(nbins, np.int64)
        hb[:min(nbins, 32)] = h[:nbins]
        parts.append((g, np.minimum(hb, (1 << 32) - 1), n_st * len(chans)))
    ex.determine_groups(f_vec, parts, cv.bits, True)
    if radix_lse.wanted_out(ex) and len(groups) == 1:
        wv = np.ascontiguousarray(vk) if kept else v
        ex.f_out = radix_lse.refine(wv if cb is None else clipped_wide(wv, int(groups[0]), cb), int(groups[0]),
                                    ex.f_out, cv.bits, True, dep.rounding)
    if cb is not None:
        ex.clip_saturation_free = clip_saturation_free(cb, ex.f_out, cv.bits, True)
    # the main operation: the output stage on v at that radix (and a Clip's clamp)
    lo_c, hi_c = -(1 << (cv.bits - 1)), (1 << (cv.bits - 1)) - 1
    if clip is not None:
        lo_c, hi_c = netmode._clamp({"attrs": clip.attrs}, ex.f_out, cv.bits, None, lambda what: _Bail(what))
    shift = np.ascontiguousarray(f_vec - ex.f_out if len(f_vec) > 1 else np.full(z, int(f_vec[0]) - ex.f_out))
    y = v                                                  # in place: a pixel's outputs replace its v
    sat = sum(_pixels(lambda q0, q1: so.hlsnn_net_requant(_ptr(v), z, _ptr(shift), cv.bits, cv.mode, lo_c, hi_c,
                                                          q0, q1, _ptr(y), ISA), npix, z))
    if whole:
        oh, ow = op.f["oh"], op.f["ow"]
        y = _take((b, oh, ow, z))
        np.copyto(y, v[:, ::op.f["sh"], ::op.f["sw"]][:, :oh, :ow])
        _give(v)
    st_ = ex.stats
    st_.f_out, st_.sat_count, st_.f_in = ex.f_out, int(sat), fx
    ex.in_shape = (b,) + tuple(net.shapes[ex.layer.inputs[0]])
    if dep.collect_stats:
        if is_shift and not f["dense"]:                     # non-zeros of the im2col rows
            k = f["c"] * f["kh"] * f["kw"]
            st_.input_density = conv.patch_count(nz.reshape(f["h"], f["w"]), ex.layer.geom) / max(
                b * op.f["oh"] * op.f["ow"] * k, 1)
        else:
            st_.input_density = int(nz.sum()) / max(b * f["c"] * f["h"] * f["w"], 1)
    return y, ex.f_out, False


_pool = threading.local()
#: bytes of freed tensors a thread keeps for later layers and calibrations at most
POOL_BYTES = 1 << 28


def _take(shape):
    """An int32 array of ``shape`` (contents undefined): a freed one of this thread's pool (of
    that size, whatever its shape was), else new. A fresh array's first writes fault its pages
    in, which cost as much as a small layer's convolution and vary from run to run."""
    free = getattr(_pool, "free", None)
    if free is None:
        free = _pool.free = {}
    got = free.get(math.prod(shape))            # by size: a tensor may come back reshaped
    if got:
        _pool.bytes -= got[-1].nbytes
        return got.pop().reshape(shape)
    return np.empty(shape, np.int32)


def _give(a):
    """Return ``a`` (from :func:`_take`, no longer read) to this thread's pool."""
    free = getattr(_pool, "free", None)
    if free is None:
        free = _pool.free = {}
    held = getattr(_pool, "bytes", 0)
    if held + a.nbytes > POOL_BYTES:
        free.clear()
        held = 0
    free.setdefault(a.size, []).append(a.reshape(-1))
    _pool.bytes = held + a.nbytes


def _padded(shape, pads, dtype=np.int32):
    """A zero-bordered buffer (int32, or int16 for a conv on channel pairs) for padded inputs of
    ``shape`` and ``pads``, this thread's, used again by later layers and calibrations of the
    same shape, pads and dtype (only the interior is ever written, so the border stays zero; a
    pair conv's extra channel may hold another layer's values: its weights are zero; a fresh
    array's pages cost more than the convolution of a small layer). At most ``POOL_BYTES`` of
    them are kept."""
    bufs = getattr(_pool, "bufs", None)
    if bufs is None:
        bufs = _pool.bufs = {}
    key = (tuple(shape), tuple(pads), np.dtype(dtype).str)
    if key not in bufs:
        size = math.prod(shape) * np.dtype(dtype).itemsize
        if sum(a.nbytes for a in bufs.values()) + size > POOL_BYTES:
            bufs.clear()                           # at most POOL_BYTES of them, as the pool of _take
        bufs[key] = np.zeros(shape, dtype)
    return bufs[key]


def _add(dep, so, op, a, fa, other, bits):
    """Rule 4 of the module docstring: ``(q, F_x, True)``."""
    f = op.f
    b = a.shape[0]
    fb = other[1] if other is not None else fa
    fm = max(fa, fb)
    if f["gap"] and f["hw"] & (f["hw"] - 1) or "clip" in f:
        raise _Bail                      # a mean over a count not a power of two, rule add_clip's clamp: the layer path
    p = int(math.log2(f["hw"])) if f["gap"] else 0
    r = fm + p
    hw_out = 1 if f["gap"] else f["hw"]
    s = _take((b, hw_out, f["c"]))

    counts = dep.overflow_ratio > 0          # at ratio 0 DETERMINE reads the top bin alone

    def raw(b0, b1):                     # s on images [b0, b1): min, max (, count of -1, MSB counts)
        st = np.zeros(35, np.int64)
        st[0], st[1] = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        if so.hlsnn_net_add_raw(_ptr(a), None if other is None else _ptr(other[0]), f["hw"], f["c"], fm - fa,
                                fm - fb, int(f["relu"]), int(f["gap"]), b0, b1, _ptr(s), _ptr(st), int(counts)):
            raise _Bail                                    # a sum beyond int32
        return st
    parts = parallel.run(raw, parallel.parts(b, max(1, _MIN_WORK // max(f["hw"] * f["c"], 1))))
    mn, mx = min(int(st[0]) for st in parts), max(int(st[1]) for st in parts)
    if counts:
        f_x = sum_radix(sum(st[3:] for st in parts), sum(int(st[2]) for st in parts), max(-mn, mx), s.size, r,
                        bits, dep.overflow_ratio)
    else:                                    # the extremes have the values' top bin (sum_radix's docstring)
        ends = np.array([mn, mx], np.int64)
        f_x = sum_radix(msb_histogram(ends, 32), int(np.count_nonzero(ends == -1)), max(-mn, mx), 2, r, bits, 0.0)
    if any(radix_lse.wanted(ex) for ex in dep.execs.values()):     # radix: lse of the exact sums (their values
        f_x = radix_lse.refine(s, r, f_x, bits, True, dep.rounding)   # s * 2**-r, which the layer path converts)
    if r > max(f_x + 24, 0):
        raise _Bail                                        # netmode's rule residual_add is not exact there
    q = s                                                  # in place
    shift = np.full(f["c"], r - f_x, np.int64)
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    _pixels(lambda q0, q1: so.hlsnn_net_requant(_ptr(s), f["c"], _ptr(shift), bits, netfast.MODES[dep.rounding],
                                                lo, hi, q0, q1, _ptr(q), ISA), b * hw_out, f["c"])
    return q.reshape((b,) + ((1, 1, f["c"]) if f["gap"] else tuple(a.shape[1:]))), f_x, True


def sum_radix(counts, minus_ones, amax, n, r, bits, overflow_ratio):
    """:func:`hlsnn.deploy.quantize.quant.host_radix` (signed) of ``n`` values ``s * 2**-r``, ``s``
    integers below ``2**31`` in magnitude, from what :func:`_add` gathers of them: the counts of
    their MSB positions (``counts[k]``, ``k < 32``; :func:`hlsnn.primitives.msb_histogram`'s
    rule), how many are ``-1``, and ``amax = max(-min s, max s)`` (module docstring, rule 4).
    With ``overflow_ratio`` 0, DETERMINE reads only the highest non-empty bin, which the
    smallest and the largest value alone have too: those two are enough then (tested)."""
    if amax == 0:
        return bits - 1
    d = 51 - (int(amax).bit_length() - 1)
    h = np.zeros(64, np.int64)
    h[d:d + 32] = np.asarray(counts, np.int64)[:64 - d]
    h[d - 1] += minus_ones
    st = fixed.Stats.from_histogram(np.minimum(h, (1 << 32) - 1), n)
    return fixed.determine(st, r + d, bits, overflow_ratio=overflow_ratio, signed=True, f_min=-64, f_max=64)
