"""Tiling of ``shift_mac`` operations larger than one kernel call (rules: ``Kernel`` docstring,
*Tiling*, and :mod:`hlsnn.engines.tiling`).

:func:`gemm_int` and :func:`conv2d_int` run the tiled path of the operations of the same name
on a :class:`~hlsnn.engines.shift_mac.kernel.Kernel` (``kern``), through its public
``run_registers`` (one call each) and ``registers`` (re-packing a chunk of neurons); the
``Kernel`` decides with :func:`transfer_bytes`, :func:`samples_per_call` and :func:`tile_fits`
whether one call suffices.

**K tiling** (:func:`gemm_int_k`, :func:`conv2d_int_k`). A reduction length K above
``max_k`` (or any K, with an explicit ``k_step``) runs as raw calls (``FLAG_RAW``, emulator
rule 7: bias 0, no ReLU, so each call returns its chunk's exact accumulators) over chunks of
K: a GEMM's columns ``[k0, k1)``, a convolution's input channels ``[c0, c1)`` (its K
``C*k*k`` is channel-major). The host adds the chunks' sums in int64, saturates the sum to
``acc_bits`` in summed-PoT mode (rule 4's adder, which one call applies to ``acc1 + acc2``
over the whole K), and applies the output rules to the total with the emulator's own
:func:`~hlsnn.engines.shift_mac.emulator.output_rule` (bias, ReLU, statistics, output shift
with rounding and saturation). The result is :func:`~hlsnn.engines.shift_mac.emulator.emulate`
on the whole K, bit for bit: the output one call would give on a kernel whose accumulator
holds the sum (rule 3). The int64 sum cannot overflow: every product is at most
``2**product_bits`` in magnitude (``spec.product_bits``; only a negative one reaches it,
positive activations being below their bound), so every partial and total sum lies in
``[-K * 2**product_bits, K * 2**product_bits)``, inside int64 for K up to
``spec.k_tiled_limit = 2**(63 - product_bits)``, which :func:`check_k_sum` enforces. The registers' config bit must
not change along K (the registers ``Kernel.registers`` packs never do): a change would reset
the accumulators inside one chunk only.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...formats import shift as sfmt
from .. import tiling
from . import protocol
from .spec import k_tiled_limit, lb_banks, product_bits


def transfer_bytes(p, *, batch, n, k, mode, stats, fmap_shape=None, resident=False, row=None, raw=False):
    """``(input bytes, output bytes)`` of one call (beats x ``stream_bits/8``); a convolution
    gives ``fmap_shape`` (cin, H, W) and ``row``, its output width; ``raw``: the raw output mode."""
    nb = p["stream_bits"] // 8
    if fmap_shape is not None and row is None:
        row = batch
    return (protocol.n_input_beats(p, batch=batch, n=n, k=k, mode=mode, fmap_shape=fmap_shape,
                                   resident=resident) * nb,
            protocol.n_output_beats(p, batch, n, stats=stats, row=row, raw=raw) * nb)


def samples_per_call(p, k) -> int:
    """GEMM samples of K activations one call holds on chip: whole groups of ``cols`` samples
    of ``ceil(K / x_lanes)`` words each, within ``x_words`` per unit column."""
    lanes = protocol.x_lanes(p)
    return (p["x_depth"] // lanes) // -(-k // lanes) * p["cols"]


def check_k_sum(cfg, k, op, what):
    """The K-tiled sum of ``k`` products must fit int64 (module docstring); else :class:`InputError`."""
    if k > k_tiled_limit(cfg.params):
        limit = k_tiled_limit(cfg.params)
        raise InputError(f"{op}: the reduction length {what} = {k} is split into raw calls of at most max_k = "
                         f"{cfg.params['max_k']}, but the host's int64 sum of {k} products of up to "
                         f"{product_bits(cfg.params)} bits could overflow: config {cfg.name} takes K up to {limit}")


def k_chunks(p, k, step=None):
    """``[(k0, k1), ...]``: K in chunks of at most ``step`` (default: as few chunks of at most
    ``max_k`` as possible, of balanced lengths)."""
    if step is None:
        parts = -(-k // p["max_k"])
        step = -(-k // parts)
    if not 1 <= step <= p["max_k"]:
        raise InputError(f"k_step = {step}: must be in [1, max_k = {p['max_k']}]")
    return list(tiling.chunks(k, step))


def line_words(p, c, iw, ks) -> int:
    """Line-buffer words per bank a convolution needs: ``ks + 1`` input rows of ``c`` channels
    of ``ceil(iw / banks)`` words."""
    return (ks + 1) * c * -(-iw // lb_banks(p))


def conv_call_limits(p, c, ih, iw, ks, n, k, mode) -> str:
    """Why one call cannot take this convolution ('' when it can): the map beyond ``max_hw``,
    the input rows beyond the line buffer, the weights beyond the weight store."""
    if max(ih, iw) > p["max_hw"]:
        return f"a {ih}x{iw} map exceeds max_hw = {p['max_hw']}"
    if line_words(p, c, iw, ks) > p["line_depth"]:
        return (f"{ks + 1} input rows of {c} channels x {iw} pixels take {line_words(p, c, iw, ks)} words per "
                f"line-buffer bank, above line_depth = {p['line_depth']}")
    steps = protocol.n_tiles(p, n, mode) * k
    if steps > p["w_depth"]:
        return f"{n} outputs of K = {k} take {steps} weight steps, above w_depth = {p['w_depth']}"
    return ""


def tile_fits(p, c, ih, iw, ks, pad, nz, mode, stats, limit, raw=False):
    """Whether a call on a (c, ih, iw) map with ``pad`` and ``nz`` neurons fits the kernel's
    stores (:func:`conv_call_limits`) and the transfer limit (``raw``: a raw call's output)."""
    k = c * ks * ks
    if conv_call_limits(p, c, ih, iw, ks, nz, k, mode):
        return False
    oh, ow = ih + 2 * pad - ks + 1, iw + 2 * pad - ks + 1
    return limit is None or max(transfer_bytes(p, batch=oh * ow, n=nz, k=k, mode=mode, stats=stats,
                                               fmap_shape=(c, ih, iw), row=ow, raw=raw)) <= limit


# ---------------------------------------------------------------------- tiled operations
def gemm_int(kern, x, weights, regs, n, bias, shift, limit, *, mode, stats, raw=False, **kw):
    """``Kernel.gemm_int`` beyond one call: neuron chunks, each over batch rows per call
    (``raw``: raw calls, whose wide values are returned)."""
    p, k = kern.p, x.shape[1]
    bias, shift = _per_neuron(n, bias, shift)
    nbytes = lambda b, nc: transfer_bytes(p, batch=b, n=nc, k=k, mode=mode, stats=stats, raw=raw)  # noqa: E731
    fits = lambda nc: limit is None or max(nbytes(1, nc)) <= limit  # noqa: E731
    y = np.empty((x.shape[0], n), np.int64)
    tally = tiling.Tally()
    store = samples_per_call(p, k)                    # samples the activation store holds
    # the emu target's arrays without a transfer limit: the whole batch in one emulator call
    # (Kernel.run_registers' _rows; x is the int64 array Kernel.gemm_int checked)
    rows_any = bool(getattr(kern.target, "arrays", False)) and limit is None and x.dtype == np.int64
    for a, b, r in _neuron_chunks(kern, weights, regs, n, mode, fits):
        rows = max(1, x.shape[0]) if rows_any else tiling.rows_per_call(
            min(x.shape[0], store), lambda m: nbytes(m, b - a)[0], lambda m: nbytes(m, b - a)[1], limit,
            what=f"gemm_int on {kern.cfg.name} (K = {k}, {b - a} outputs per call)")
        for r0, r1 in tiling.chunks(x.shape[0], rows):
            y[r0:r1, a:b] = kern.run_registers(x[r0:r1], r, n=b - a, bias=bias[a:b], shift=shift[a:b], mode=mode,
                                               stats=stats, raw=raw, _rows=rows_any, **kw)
            tally.add(kern)
    tally.store(kern)
    return y


def conv2d_int(kern, x, flat, regs, pad, ks, bias, shift, limit, *, mode, stats, raw=False, **kw):
    """``Kernel.conv2d_int`` beyond one call: the map padded on the host once, neuron chunks,
    each over output tiles of one shape (:func:`_conv_tile`) run "valid" on their halo window.
    ``flat``: the (Z, C*k*k) weights that ``regs`` packs; ``raw``: raw calls."""
    p = kern.p
    c, h, w = x.shape
    z = flat[0].shape[0] if isinstance(flat, tuple) else flat.shape[0]
    oh, ow = h + 2 * pad - ks + 1, w + 2 * pad - ks + 1
    bias, shift = _per_neuron(z, bias, shift)
    xp = tiling.pad_map(x, pad)
    fits = lambda nc: tile_fits(p, c, ks, ks, ks, 0, nc, mode, stats, limit, raw)  # noqa: E731
    y = np.empty((z, oh, ow), np.int64)
    tally, plans = tiling.Tally(), {}
    cap = max(1, p["w_depth"] // (c * ks * ks)) * protocol.tile_neurons(p, mode)    # weight store
    for a, b, r in _neuron_chunks(kern, flat, regs, z, mode, fits, cap=cap):
        if b - a not in plans:                                          # one plan per chunk size
            plans[b - a] = _conv_tile(kern.cfg, c, oh, ow, ks, b - a, mode, stats, limit, raw)
        th, tw = plans[b - a]
        for rect in tiling.grid(tiling.chunks(oh, th), tiling.chunks(ow, tw)):
            t = kern.run_registers(regs=r, n=b - a, bias=bias[a:b], shift=shift[a:b],
                                   fmap=tiling.halo_window(xp, rect, ks), ksize=ks, pad=0, mode=mode, stats=stats,
                                   raw=raw, **kw)
            y0, y1, x0, x1 = rect
            tiling.stitch(y[a:b], rect, t.T.reshape(b - a, y1 - y0, x1 - x0))
            tally.add(kern)
    tally.store(kern)
    return y


def gemm_int_k(kern, x, weights, regs, n, bias, shift, limit, *, mode, delta, relu, stats, k_step=None, raw=False):
    """``Kernel.gemm_int`` over chunks of K (module docstring, *K tiling*): raw calls of
    :func:`gemm_int` per chunk of columns, their sums added in int64, then the output rules
    (``raw``: rules 5 and 7, the wide results)."""
    p, k = kern.p, x.shape[1]
    check_k_sum(kern.cfg, k, "gemm_int", "K")
    bias, shift = _per_neuron(n, bias, shift)
    protocol.check_fields(p, regs=None, n=n, mode=mode, bias=bias, shift=shift)     # the host applies them
    zero = np.zeros(n, np.int64)
    total = np.zeros((x.shape[0], n), np.int64)
    for k0, k1 in k_chunks(p, k, k_step):
        total += gemm_int(kern, x[:, k0:k1], _part(weights, cols=slice(k0, k1)), regs[:, k0:k1], n, zero, 0, limit,
                          mode=mode, stats=False, raw=True, delta=delta, relu=False)
    return _finish(kern, total, bias, shift, mode, relu, stats, raw)


def conv2d_int_k(kern, x, flat, regs, pad, ks, bias, shift, limit, *, mode, delta, relu, stats, k_step=None,
                 raw=False):
    """``Kernel.conv2d_int`` over chunks of input channels (module docstring, *K tiling*):
    raw calls of the whole convolution (:func:`conv2d_int`, or one call when it fits) per
    chunk of ``k_step // ks**2`` channels (default: as few chunks of at most ``max_k // ks**2``
    channels as possible), their sums added in int64, then the output rules (``raw``: the
    wide results). ``flat``: the (Z, C*k*k) weights that ``regs`` packs; returns (Z, H', W')."""
    p = kern.p
    c, h, w = x.shape
    z = flat[0].shape[0] if isinstance(flat, tuple) else flat.shape[0]
    kk = ks * ks
    check_k_sum(kern.cfg, c * kk, "conv2d_int", "C*k*k")
    if k_step is not None and not kk <= k_step <= p["max_k"]:
        raise InputError(f"k_step = {k_step}: must be in [k*k = {kk}, max_k = {p['max_k']}] (whole channels)")
    per = (k_step or p["max_k"]) // kk
    if per < 1:
        raise InputError(f"conv2d_int: one input channel of a {ks}x{ks} kernel is K = {kk}, above max_k = "
                         f"{p['max_k']}")
    parts = -(-c // per)
    per = per if k_step else -(-c // parts)                 # balanced chunks by default
    oh, ow = h + 2 * pad - ks + 1, w + 2 * pad - ks + 1
    bias, shift = _per_neuron(z, bias, shift)
    protocol.check_fields(p, regs=None, n=z, mode=mode, bias=bias, shift=shift)     # the host applies them
    zero = np.zeros(z, np.int64)
    total = np.zeros((z, oh, ow), np.int64)
    for c0, c1 in tiling.chunks(c, per):
        xc, fc, rc = x[c0:c1], _part(flat, cols=slice(c0 * kk, c1 * kk)), regs[:, c0 * kk:c1 * kk]
        kw = dict(mode=mode, stats=False, raw=True, delta=delta, relu=False)
        if z <= p["max_n"] and p["conv"] and tile_fits(p, c1 - c0, h, w, ks, pad, z, mode, False, limit, True):
            y = kern.run_registers(regs=rc, n=z, bias=zero, shift=0, fmap=xc, ksize=ks, pad=pad, **kw)
            total += y.T.reshape(z, oh, ow)
        else:
            total += conv2d_int(kern, xc, fc, rc, pad, ks, zero, 0, limit, **kw)
    y = _finish(kern, total.reshape(z, -1).T, bias, shift, mode, relu, stats, raw)
    return y.T.reshape(z, oh, ow)


def _finish(kern, total, bias, shift, mode, relu, stats, raw=False):
    """The output rules on the K-tiled sums ``total`` (batch, N): summed PoT saturates the sum
    (rule 4), then :func:`~hlsnn.engines.shift_mac.emulator.output_rule` (``raw``: the wide
    values of rule 5, as a raw call returns them); the saturation count and histogram are
    left in ``kern``."""
    from .emulator import output_rule
    from ...primitives import saturate
    p = kern.p
    acc = saturate(total, p["acc_bits"]) if mode == "pot_sum" else total
    y, sat, *hist = output_rule(p, acc, bias, shift, relu=relu, stats=stats, raw=raw)
    kern.last_sat_count = sat
    kern.last_stats = hist[0] if stats else None
    return y


def _part(weights, rows=slice(None), cols=slice(None)):
    """Neurons ``rows`` and columns ``cols`` (of K) of 2-D shift weights, or of a ``pot_sum`` pair."""
    if isinstance(weights, tuple):
        return tuple(_part(t, rows, cols) for t in weights)
    t = weights
    se = np.broadcast_to(np.asarray(t.scale_exponent), t.shape)[rows, :1]
    codes = (a[rows, cols] for a in (t.e1, t.e2, t.s1, t.s2, t.zero))
    return sfmt.ShiftTensor.from_codes(t.mode, t.exp_bits, *codes, se, delta=t.delta, axis=0)


# ---------------------------------------------------------------------- planning
def _per_neuron(n, bias, shift):
    """``bias`` and ``shift`` as (N,) int64 arrays, for slicing per neuron chunk."""
    b = np.zeros(n, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
    if b.shape != (n,):
        raise InputError(f"bias must have N = {n} values, got {b.shape}")
    s = np.asarray(shift, np.int64)
    if s.size not in (1, n):
        raise InputError(f"shift must be one value or N = {n} values, got shape {s.shape}")
    return b, np.broadcast_to(s.reshape(-1), (n,))


def _neuron_chunks(kern, weights, regs, n, mode, fits_one, cap=None):
    """``(a, b, register rows)`` per neuron chunk: whole weight tiles up to ``max_n``
    (``max_n`` when a tile is larger) and ``cap`` (a convolution's weight store), fewer tiles
    while the smallest call with them (``fits_one(neurons)``: one row or pixel) exceeds the
    transfer limit. Chunks of whole tiles (and the last) are row slices (views) of ``regs``;
    others are re-packed from ``weights``."""
    p = kern.p
    tn = protocol.tile_neurons(p, mode)
    step = min(n, p["max_n"] if p["max_n"] < tn else p["max_n"] // tn * tn)
    if cap is not None:
        step = min(step, cap)
    cn = tiling.outputs_per_call(step, tn, fits_one)
    for a, b in tiling.chunks(n, cn):
        if cn % tn == 0 or cn == n:
            r0 = a // tn * p["rows"]
            yield a, b, regs[r0:r0 + protocol.register_rows(p, b - a, mode)]
        else:
            yield a, b, kern.registers(_part(weights, slice(a, b)), mode)[0]


def _conv_tile(cfg, c, oh, ow, ks, nz, mode, stats, limit, raw=False):
    """Output tile ``(th, tw)`` for an (oh, ow) output: the fewest calls, then the fewest
    input bytes (each tile reads ``(th+ks-1) x (tw+ks-1)`` of the padded map)."""
    p = cfg.params

    def ok(th, tw):
        return tile_fits(p, c, th + ks - 1, tw + ks - 1, ks, 0, nz, mode, stats, limit, raw)

    best = None
    for tw in sorted({-(-ow // m) for m in range(1, ow + 1)}, reverse=True):
        if not ok(1, tw):
            continue
        lo = tiling.largest(oh, lambda th: ok(th, tw))      # ok(1, tw) holds: lo >= 1
        calls = -(-oh // lo) * -(-ow // tw)
        cost = (calls, calls * (lo + ks - 1) * (tw + ks - 1))
        if best is None or cost < best[0]:
            best = (cost, lo, tw)
    if best is None:
        what = f"conv2d_int on {cfg.name} ({c}x{ks}x{ks} window, {nz} outputs per call)"
        why = conv_call_limits(p, c, ks, ks, ks, nz, c * ks * ks, mode)
        if why:
            raise InputError(f"{what}: the {c}x{ks}x{ks} input window of one output pixel does not fit one call: "
                             f"{why}; use a config with larger maxima")
        one = transfer_bytes(p, batch=1, n=nz, k=c * ks * ks, mode=mode, stats=stats, fmap_shape=(c, ks, ks), row=1,
                             raw=raw)
        tiling.rows_per_call(1, lambda _: one[0], lambda _: one[1], limit,
                             what=what)                 # raises: one pixel does not fit the transfer
    return best[1], best[2]
