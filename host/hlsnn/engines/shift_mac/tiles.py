"""Tiling of ``shift_mac`` operations larger than one kernel call (rules: ``Kernel`` docstring,
*Tiling*, and :mod:`hlsnn.engines.tiling`).

:func:`gemm_int` and :func:`conv2d_int` run the tiled path of the operations of the same name
on a :class:`~hlsnn.engines.shift_mac.kernel.Kernel` (``kern``), through its public
``run_registers`` (one call each) and ``registers`` (re-packing a chunk of neurons); the
``Kernel`` decides with :func:`transfer_bytes`, :func:`samples_per_call` and :func:`tile_fits`
whether one call suffices.
"""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...formats import shift as sfmt
from .. import tiling
from . import protocol


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
    lanes = protocol.x_lanes_per_beat(p)
    return (p["x_depth"] // lanes) // -(-k // lanes) * p["cols"]


def check_k(cfg, k, op, what):
    """The reduction length is never split: ``k`` above ``max_k`` is an :class:`InputError`."""
    if k > cfg.params["max_k"]:
        raise InputError(f"{op}: the reduction length {what} = {k} exceeds max_k = {cfg.params['max_k']} of config "
                         f"{cfg.name}; it is not split (partial sums would need a wider output and a "
                         f"host-side requantization, which changes the numerics): use a config with "
                         f"max_k >= {k}")


def line_words(p, c, iw, ks) -> int:
    """Line-buffer words per bank a convolution needs: ``ks + 1`` input rows of ``c`` channels
    of ``ceil(iw / banks)`` words."""
    return (ks + 1) * c * -(-iw // (max(p["cols"], protocol.x_lanes_per_beat(p))))


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


def tile_fits(p, c, ih, iw, ks, pad, nz, mode, stats, limit):
    """Whether a call on a (c, ih, iw) map with ``pad`` and ``nz`` neurons fits the kernel's
    stores (:func:`conv_call_limits`) and the transfer limit."""
    k = c * ks * ks
    if conv_call_limits(p, c, ih, iw, ks, nz, k, mode):
        return False
    oh, ow = ih + 2 * pad - ks + 1, iw + 2 * pad - ks + 1
    return limit is None or max(transfer_bytes(p, batch=oh * ow, n=nz, k=k, mode=mode, stats=stats,
                                               fmap_shape=(c, ih, iw), row=ow)) <= limit


# ---------------------------------------------------------------------- tiled operations
def gemm_int(kern, x, weights, regs, n, bias, shift, limit, *, mode, stats, **kw):
    """``Kernel.gemm_int`` beyond one call: neuron chunks, each over batch rows per call."""
    p, k = kern.p, x.shape[1]
    bias, shift = _per_neuron(n, bias, shift)
    nbytes = lambda b, nc: transfer_bytes(p, batch=b, n=nc, k=k, mode=mode, stats=stats)  # noqa: E731
    fits = lambda nc: limit is None or max(nbytes(1, nc)) <= limit  # noqa: E731
    y = np.empty((x.shape[0], n), np.int64)
    tally = tiling.Tally()
    store = samples_per_call(p, k)                    # samples the activation store holds
    for a, b, r in _neuron_chunks(kern, weights, regs, n, mode, fits):
        rows = tiling.rows_per_call(min(x.shape[0], store), lambda m: nbytes(m, b - a)[0],
                                    lambda m: nbytes(m, b - a)[1], limit,
                                    what=f"gemm_int on {kern.cfg.name} (K = {k}, {b - a} outputs per call)")
        for r0, r1 in tiling.chunks(x.shape[0], rows):
            y[r0:r1, a:b] = kern.run_registers(x[r0:r1], r, n=b - a, bias=bias[a:b], shift=shift[a:b], mode=mode,
                                               stats=stats, **kw)
            tally.add(kern)
    tally.store(kern)
    return y


def conv2d_int(kern, x, flat, regs, pad, ks, bias, shift, limit, *, mode, stats, **kw):
    """``Kernel.conv2d_int`` beyond one call: the map padded on the host once, neuron chunks,
    each over output tiles of one shape (:func:`_conv_tile`) run "valid" on their halo window.
    ``flat``: the (Z, C*k*k) weights that ``regs`` packs."""
    p = kern.p
    c, h, w = x.shape
    z = flat[0].shape[0] if isinstance(flat, tuple) else flat.shape[0]
    oh, ow = h + 2 * pad - ks + 1, w + 2 * pad - ks + 1
    bias, shift = _per_neuron(z, bias, shift)
    xp = tiling.pad_map(x, pad)
    fits = lambda nc: tile_fits(p, c, ks, ks, ks, 0, nc, mode, stats, limit)  # noqa: E731
    y = np.empty((z, oh, ow), np.int64)
    tally, plans = tiling.Tally(), {}
    cap = max(1, p["w_depth"] // (c * ks * ks)) * protocol.tile_neurons(p, mode)    # weight store
    for a, b, r in _neuron_chunks(kern, flat, regs, z, mode, fits, cap=cap):
        if b - a not in plans:                                          # one plan per chunk size
            plans[b - a] = _conv_tile(kern.cfg, c, oh, ow, ks, b - a, mode, stats, limit)
        th, tw = plans[b - a]
        for rect in tiling.grid(tiling.chunks(oh, th), tiling.chunks(ow, tw)):
            t = kern.run_registers(regs=r, n=b - a, bias=bias[a:b], shift=shift[a:b],
                                   fmap=tiling.halo_window(xp, rect, ks), ksize=ks, pad=0, mode=mode, stats=stats, **kw)
            y0, y1, x0, x1 = rect
            tiling.stitch(y[a:b], rect, t.T.reshape(b - a, y1 - y0, x1 - x0))
            tally.add(kern)
    tally.store(kern)
    return y


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
            yield a, b, kern.registers(_neurons(weights, a, b), mode)[0]


def _conv_tile(cfg, c, oh, ow, ks, nz, mode, stats, limit):
    """Output tile ``(th, tw)`` for an (oh, ow) output: the fewest calls, then the fewest
    input bytes (each tile reads ``(th+ks-1) x (tw+ks-1)`` of the padded map)."""
    p = cfg.params

    def ok(th, tw):
        return tile_fits(p, c, th + ks - 1, tw + ks - 1, ks, 0, nz, mode, stats, limit)

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
        one = transfer_bytes(p, batch=1, n=nz, k=c * ks * ks, mode=mode, stats=stats, fmap_shape=(c, ks, ks), row=1)
        tiling.rows_per_call(1, lambda _: one[0], lambda _: one[1], limit,
                             what=what)                 # raises: one pixel does not fit the transfer
    return best[1], best[2]


def _neurons(weights, a, b):
    """Neurons (rows) ``a..b`` of 2-D shift weights, or of a ``pot_sum`` pair."""
    if isinstance(weights, tuple):
        return tuple(_neurons(t, a, b) for t in weights)
    t = weights
    se = np.broadcast_to(np.asarray(t.scale_exponent), t.shape)[a:b, :1]
    return sfmt.ShiftTensor.from_codes(t.mode, t.exp_bits, t.e1[a:b], t.e2[a:b], t.s1[a:b], t.s2[a:b],
                                       t.zero[a:b], se, delta=t.delta, axis=0)
