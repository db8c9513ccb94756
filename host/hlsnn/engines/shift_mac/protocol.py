"""Stream protocol of ``shift_mac``: how activations, weight registers and requantization
parameters become AXI-Stream beats and back. Every target moves exactly these beats.

All lanes are 16 bits. A call's input stream is, in order:

1. convolution only: one segment holding the input feature map ``(cin, height, width)``,
   channel-major, row-major;
2. for each tile of ``cols`` samples (GEMM rows, or output pixels in raster order):

   a. GEMM only: per sample, one segment ``[x[b,0], …, x[b,K-1]]``;
   b. per weight tile (``tile_n`` neurons: ``2*rows`` in dual PoT mode, else ``rows``): one
      *parameter* segment with three lanes per neuron slot — bias low 16 bits, bias high 16
      bits (the bias is a 32-bit integer in accumulator units), output shift (signed) — zero
      past N; then K weight *steps*, each one segment of ``rows`` register lanes.

A weight register lane is ``{cfg, z2, s2, e2, z1, s1, e1}`` from the high bits down:
``e1`` in bits ``[0, E)``, ``s1`` at ``E``, ``z1`` at ``E+1``, ``e2`` in ``[E+2, 2E+2)``,
``s2`` at ``2E+2``, ``z2`` at ``2E+3``, ``cfg`` at ``2E+4`` (E = ``exp_bits``). Register row
``u = tile*rows + p`` of the register matrix feeds unit row ``p`` of weight tile ``tile``:
in two-hot and summed-PoT modes it serves neuron ``u``; in dual PoT mode neurons ``2u``
(shifter 1: ``e1, s1, z1``) and ``2u+1`` (shifter 2: ``e2, s2, z2``).

The output stream is, per sample, one segment of N output lanes. With ``FLAG_STATS_OUT``
set, one *statistics* segment follows the last sample's: the :func:`stats_bins` (=
``acc_bits``) 32-bit counters of the statistics unit (source 002), in bin order, each as two
lanes, low 16 bits first. Counter ``k`` is the number of the call's outputs whose wide value
``v`` — the accumulator plus bias (saturated to ``acc_bits``), after ReLU if enabled, just
before the output shift, rounding and saturation (emulator rule 5) — has ``unsigned_msb(v) ==
k`` (:func:`hlsnn.primitives.msb_histogram`: 0 and -1 are not counted, counters saturate at
``2**32 - 1``); all ``batch x N`` real outputs count, never the padding neurons of a tile.
TLAST is set on the last beat of the call (of the statistics segment when there is one);
without the flag the stream is exactly as before.

Registers (s_axilite, in this order): inputs ``batch, n_out, k, flags, mode, delta, cin,
fm_height, fm_width, ksize, pad`` (flags bit 0 ReLU, bit 1 convolution, bit 2 statistics
segment out; mode 0 two-hot, 1 PoT, 3 PoT summed; for convolution ``batch`` = output pixels and
``k`` = cin*ksize^2), outputs ``id_magic, id_hash, sat_count``.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from .. import stream as _stream
from ..stream import beats_to_lanes, lanes_to_beats, pad_to, segment_rows
from .spec import LANE_BITS, MODES

REGS_IN = ("batch", "n_out", "k", "flags", "mode", "delta", "cin", "fm_height", "fm_width", "ksize", "pad")
REGS_OUT = ("id_magic", "id_hash", "sat_count")
FLAG_RELU, FLAG_CONV, FLAG_STATS_OUT = 1, 2, 4
LANE = np.dtype("<i2")


def lanes_per_beat(p) -> int:
    return p["stream_bits"] // LANE_BITS


def tile_neurons(p, mode: str) -> int:
    return 2 * p["rows"] if mode == "pot" else p["rows"]


def register_rows(p, n: int, mode: str) -> int:
    """Rows of the register matrix a call with N outputs streams (whole tiles)."""
    return math.ceil(n / tile_neurons(p, mode)) * p["rows"]


def pack_registers(p, e1, s1, z1, e2, s2, z2, cfg) -> np.ndarray:
    """Register lanes from code fields (arrays of one shape) as uint16."""
    E = p["exp_bits"]
    f = [np.asarray(a, np.uint16) for a in (e1, s1, z1, e2, s2, z2, cfg)]
    return (f[0] | (f[1] << E) | (f[2] << (E + 1)) | (f[3] << (E + 2)) | (f[4] << (2 * E + 2))
            | (f[5] << (2 * E + 3)) | (f[6] << (2 * E + 4))).astype(np.uint16)


def unpack_registers(p, lanes):
    """Code fields ``e1, s1, z1, e2, s2, z2, cfg`` (int64 arrays) of register lanes."""
    E = p["exp_bits"]
    r = np.asarray(lanes).astype(np.int64) & 0xFFFF
    m = (1 << E) - 1
    return (r & m, (r >> E) & 1, (r >> (E + 1)) & 1, (r >> (E + 2)) & m, (r >> (2 * E + 2)) & 1,
            (r >> (2 * E + 3)) & 1, (r >> (2 * E + 4)) & 1)


def _params_part(p, bias, shift, n, mode):
    """Per weight tile, the parameter segment: (n_tiles, padded lanes)."""
    lanes = lanes_per_beat(p)
    tn = tile_neurons(p, mode)
    n_tiles = math.ceil(n / tn)
    b = np.zeros(n_tiles * tn, np.int64)
    s = np.zeros(n_tiles * tn, np.int64)
    b[:n] = bias
    s[:n] = shift
    u = b & 0xFFFFFFFF
    lo, hi = u & 0xFFFF, u >> 16
    trip = np.stack([lo, hi, s & 0xFFFF], axis=1).reshape(n_tiles, 3 * tn)
    out = np.zeros((n_tiles, pad_to(3 * tn, lanes)), np.int64)
    out[:, :3 * tn] = trip
    return out


def _shaped(a, shape):
    """``a`` viewed as ``shape`` without copying (raises if a copy would be needed), so that
    assignments through it land in ``a``."""
    v = a.view()
    v.shape = shape
    return v


def _ints(a):
    """``a`` as an integer array (kept in its own integer type: the lane casts wrap the same)."""
    a = np.asarray(a)
    return a if a.dtype.kind in "iu" else a.astype(np.int64)


def _weight_lanes(p, regs, bias, shift, n, mode):
    """All weight tiles (parameters + steps) as one flat int16 lane array, identical per batch
    tile, written straight into the lane type."""
    lanes = lanes_per_beat(p)
    R = p["rows"]
    rows_needed, k = regs.shape
    n_tiles = rows_needed // R
    plen, slen = pad_to(3 * tile_neurons(p, mode), lanes), pad_to(R, lanes)
    wt = np.zeros((n_tiles, plen + k * slen), LANE)
    wt[:, :plen] = _params_part(p, bias, shift, n, mode)
    steps = _shaped(wt[:, plen:], (n_tiles, k, slen))[:, :, :R]
    steps[...] = np.ascontiguousarray(regs, dtype=LANE).reshape(n_tiles, R, k).transpose(0, 2, 1)
    return wt.reshape(-1)


def check_fields(p, *, regs, n, mode, bias, shift, x=None, fmap=None):
    """Host-side checks that every value fits the field the kernel reads it into."""
    if mode not in MODES:
        raise InputError(f"mode = {mode!r}: must be one of {', '.join(MODES)}")
    if regs.shape[0] != register_rows(p, n, mode):
        raise InputError(f"register matrix has {regs.shape[0]} rows; N = {n} in mode {mode} needs "
                         f"{register_rows(p, n, mode)}")
    A = p["acc_bits"]
    blim = min(31, A - 1)
    if np.any(np.abs(np.asarray(bias, np.int64)) >= (1 << blim)):
        raise InputError(f"bias values must fit {blim + 1} signed bits in accumulator units")
    if np.any(np.abs(np.asarray(shift, np.int64)) > 127):
        raise InputError("output shifts must be in [-127, 127]")
    lo, hi = (-(1 << (p["act_bits"] - 1)), (1 << (p["act_bits"] - 1)) - 1) if p["act_signed"] else \
        (0, (1 << p["act_bits"]) - 1)
    for name, a in (("x", x), ("feature map", fmap)):
        if a is not None and a.size and (a.min() < lo or a.max() > hi):
            raise InputError(f"{name} values must be integers in [{lo}, {hi}] "
                             f"({p['act_bits']}-bit {'signed' if p['act_signed'] else 'unsigned'} activations); "
                             f"got [{a.min()}, {a.max()}]")


def pack_input(p, *, regs, bias, shift, n, mode, x=None, fmap=None, batch=None) -> np.ndarray:
    """Input beats. GEMM: ``x`` (batch, K). Convolution: ``fmap`` (cin, H, W) and ``batch`` =
    the number of output pixels. ``regs`` (register_rows, K) lanes, ``bias``/``shift`` (N,).

    The lanes are written once, as int16, into one preallocated array: the weight part into
    the first batch tile and copied from there into the others."""
    lanes = lanes_per_beat(p)
    C = p["cols"]
    wpart = _weight_lanes(p, _ints(regs), bias, shift, n, mode)
    wlen = wpart.size
    if fmap is not None:
        f = _ints(fmap).reshape(-1)
        flen = pad_to(f.size, lanes)
        n_tiles = -(-batch // C)
        out = np.empty(flen + n_tiles * wlen, LANE)
        out[:f.size] = f
        out[f.size:flen] = 0
        if n_tiles:
            body = _shaped(out[flen:], (n_tiles, wlen))
            body[0] = wpart
            body[1:] = body[0]
        return lanes_to_beats(out, LANE, p["stream_bits"])
    x = _ints(x)
    batch, k = x.shape
    xlen = pad_to(k, lanes)
    n_full, rem = divmod(batch, C)
    tile = C * xlen + wlen
    out = np.empty(n_full * tile + (rem * xlen + wlen if rem else 0), LANE)

    def put_x(seg, b0, b1):                       # seg: (..., xlen) view of out, samples b0..b1
        seg[..., :k] = x[b0:b1].reshape(seg.shape[:-1] + (k,))
        seg[..., k:] = 0

    if n_full:
        body = _shaped(out[:n_full * tile], (n_full, tile))
        put_x(_shaped(body[:, :C * xlen], (n_full, C, xlen)), 0, n_full * C)
        body[0, C * xlen:] = wpart
        body[1:, C * xlen:] = body[0, C * xlen:]
    if rem:
        tail = out[n_full * tile:]
        put_x(_shaped(tail[:rem * xlen], (rem, xlen)), n_full * C, batch)
        tail[rem * xlen:] = wpart
    return lanes_to_beats(out, LANE, p["stream_bits"])


def n_input_beats(p, *, batch, n, k, mode, fmap_size=None) -> int:
    lanes = lanes_per_beat(p)
    tn = tile_neurons(p, mode)
    n_tiles = math.ceil(n / tn)
    wbeats = n_tiles * (math.ceil(3 * tn / lanes) + k * math.ceil(p["rows"] / lanes))
    btiles = math.ceil(batch / p["cols"])
    if fmap_size is not None:
        return math.ceil(fmap_size / lanes) + btiles * wbeats
    return batch * math.ceil(k / lanes) + btiles * wbeats


def stats_bins(p) -> int:
    """Counters of the statistics segment: one per MSB position of an ``acc_bits`` value."""
    return p["acc_bits"]


def n_stats_beats(p) -> int:
    return _stream.n_stats_beats(stats_bins(p), LANE_BITS, p["stream_bits"])


def n_output_beats(p, batch, n, *, stats=False) -> int:
    """Output beats of a call; ``stats``: with the statistics segment (``FLAG_STATS_OUT``)."""
    return batch * math.ceil(n / lanes_per_beat(p)) + (n_stats_beats(p) if stats else 0)


def pack_stats(p, hist) -> np.ndarray:
    """The statistics segment's beats for counters ``hist`` (``stats_bins(p)``,)."""
    return _stream.pack_stats(hist, LANE_BITS, p["stream_bits"])


def unpack_stats(p, beats) -> np.ndarray:
    """The counters (int64, ``stats_bins(p)``) of a call's output beats that end with the
    statistics segment (only the last :func:`n_stats_beats` beats are read)."""
    return _stream.unpack_stats(np.asarray(beats)[-n_stats_beats(p):], stats_bins(p), LANE_BITS)


def unpack_input(p, beats, regs_in):
    """Inverse of :func:`pack_input` (used by the emulator target). Returns a dict with
    ``x`` (GEMM) or ``fmap`` (convolution), ``regs``, ``bias``, ``shift``. The weight part
    must be the same for every batch tile."""
    batch, n, k, flags, mode_code, delta, cin, height, width, ksize, pad = (int(r) for r in regs_in)
    mode = {v: m for m, v in MODES.items()}.get(mode_code)
    if mode is None:
        raise InputError(f"mode register = {mode_code}: must be one of {sorted(MODES.values())}")
    conv = bool(flags & FLAG_CONV)
    lanes = lanes_per_beat(p)
    v = beats_to_lanes(beats, LANE)
    fsize = cin * height * width if conv else None
    want = n_input_beats(p, batch=batch, n=n, k=k, mode=mode, fmap_size=fsize)
    if v.size != want * lanes:
        raise InputError(f"input stream has {v.size // lanes} beats; this call needs {want}")
    R, C = p["rows"], p["cols"]
    tn = tile_neurons(p, mode)
    n_tiles = math.ceil(n / tn)
    plen = pad_to(3 * tn, lanes)
    slen = pad_to(R, lanes)
    wlen = n_tiles * (plen + k * slen)
    pos = 0
    out = {"mode": mode}
    if conv:
        flen = pad_to(fsize, lanes)
        out["fmap"] = v[:fsize].astype(np.int64).reshape(cin, height, width)
        pos = flen
        ws = v[pos:].reshape(-1, wlen)
    else:
        xlen = pad_to(k, lanes)
        n_full, rem = divmod(batch, C)
        tile = C * xlen + wlen
        body = v[:n_full * tile].reshape(n_full, tile)
        xs, ws = [body[:, :C * xlen].reshape(-1, xlen)], [body[:, C * xlen:]]
        if rem:
            tail = v[n_full * tile:]
            xs.append(tail[:rem * xlen].reshape(rem, xlen))
            ws.append(tail[rem * xlen:].reshape(1, wlen))
        out["x"] = np.concatenate(xs)[:, :k].astype(np.int64)
        ws = np.concatenate(ws)
    if ws.shape[0] > 1 and not (ws[1:] == ws[0]).all():
        raise InputError("the weights differ between batch tiles; the emulator target models one weight "
                         "matrix per call")
    wt = ws[0].reshape(n_tiles, plen + k * slen).astype(np.int64)
    trip = wt[:, :3 * tn].reshape(n_tiles * tn, 3)
    lo, hi, sh = trip[:, 0] & 0xFFFF, trip[:, 1] & 0xFFFF, trip[:, 2]
    b = (hi << 16) | lo
    out["bias"] = np.where(b >= 1 << 31, b - (1 << 32), b)[:n]
    out["shift"] = sh[:n]
    steps = wt[:, plen:].reshape(n_tiles, k, slen)[:, :, :R]
    out["regs"] = (steps.transpose(0, 2, 1).reshape(n_tiles * R, k) & 0xFFFF).astype(np.uint16)
    return out


def pack_output(p, y) -> np.ndarray:
    return lanes_to_beats(segment_rows(np.asarray(y, np.int64), lanes_per_beat(p)), LANE, p["stream_bits"])


def unpack_output(p, beats, batch, n) -> np.ndarray:
    y = beats_to_lanes(beats, LANE).reshape(batch, -1)[:, :n].astype(np.int64)
    if not p["act_signed"]:
        y &= 0xFFFF   # unsigned outputs up to 16 bits
    return y
