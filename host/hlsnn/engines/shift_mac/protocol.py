"""Stream protocol of ``shift_mac``: how activations, weight registers and requantization
parameters become AXI-Stream beats and back. Every target moves exactly these beats.

Lanes are 16 bits (``L`` = ``stream_bits / 16`` per beat), except the activations': 8 bits
when ``act_bits <= 8`` (``stream_bits / 8`` per beat; unsigned values as unsigned bytes), else
16. A call's input stream is, in order:

1. the *parameters*: four lanes per neuron ``n < N`` -- bias low 16 bits, bias high 16 bits
   (the bias is a 32-bit integer in accumulator units), output shift (signed), 0 -- padded to
   a whole beat;
2. GEMM: the *activations*, per sample ``b``, one segment ``[x[b,0], ..., x[b,K-1]]`` of
   activation lanes;
   then, unless the call is *resident* (``FLAG_RESIDENT``), the *weights*: per weight tile
   (``tile_n`` neurons: ``2*rows`` in dual PoT mode, else ``rows``) K weight *steps*, each one
   segment of ``rows`` register lanes. The weights are streamed once per call, however many
   samples pass them.
3. Convolution: unless resident, the weights (as above); then the input feature map
   ``(cin, height, width)`` a row at a time: per input row ``iy``, per channel, one segment of
   ``width`` activation lanes.

A weight register lane is ``{cfg, z2, s2, e2, z1, s1, e1}`` from the high bits down:
``e1`` in bits ``[0, E)``, ``s1`` at ``E``, ``z1`` at ``E+1``, ``e2`` in ``[E+2, 2E+2)``,
``s2`` at ``2E+2``, ``z2`` at ``2E+3``, ``cfg`` at ``2E+4`` (E = ``exp_bits``). Register row
``u = tile*rows + p`` of the register matrix feeds unit row ``p`` of weight tile ``tile``:
in two-hot and summed-PoT modes it serves neuron ``u``; in dual PoT mode neurons ``2u``
(shifter 1: ``e1, s1, z1``) and ``2u+1`` (shifter 2: ``e2, s2, z2``).

The output stream follows the kernel's passes: per *chunk* (a convolution's output row; a
GEMM has one chunk of all its samples), per weight tile, per *group* of ``cols`` samples of
the chunk (the last group may be shorter: ``cb`` samples), per neuron ``n < N`` of the tile in
order: one segment of ``cb`` output lanes, the group's samples in order. With
``FLAG_STATS_OUT`` set, one *statistics* segment follows: the :func:`stats_bins` (=
``acc_bits``) 32-bit counters of the statistics unit (source 002), in bin order, each as two
lanes, low 16 bits first. Counter ``k`` is the number of the call's outputs whose wide value
``v`` — the accumulator plus bias (saturated to ``acc_bits``), after ReLU if enabled, just
before the output shift, rounding and saturation (emulator rule 5) — has ``unsigned_msb(v) ==
k`` (:func:`hlsnn.primitives.msb_histogram`: 0 and -1 are not counted, counters saturate at
``2**32 - 1``); all ``batch x N`` real outputs count, never the padding neurons of a tile.
TLAST is set on the last beat of the call (of the statistics segment when there is one).

With ``FLAG_RAW`` (the *raw* output mode) every output lane above is replaced by the wide
value ``v`` of emulator rule 5 (accumulator plus bias, saturated to ``acc_bits``, after ReLU
if enabled; no output shift, rounding or saturation) as a :func:`raw_bits`-bit two's-complement
integer (``int32`` when ``acc_bits <= 32``, else ``int64``; sign-extended from ``acc_bits``),
little-endian, in the same order: each 16-bit lane of the requantized layout becomes
``raw_bits / 16`` lanes, so the output segment has :func:`raw_factor` times its beats
(padding lanes are 0). ``sat_count`` reads 0; the statistics segment is unchanged.

Registers (s_axilite, in this order): inputs ``batch, n_out, k, flags, mode, delta, cin,
fm_height, fm_width, ksize, pad`` (flags bit 0 ReLU, bit 1 convolution, bit 2 statistics
segment out, bit 3 resident: the weights are those on chip, bit 4 keep: a GEMM stores its
weights for later resident calls; mode 0 two-hot, 1 PoT, 3 PoT summed; for convolution
``batch`` = output pixels and ``k`` = cin*ksize^2), outputs ``id_magic, id_hash, sat_count``.
A resident call must have the N, K and mode of the call that put the weights on chip.
"""
from __future__ import annotations

import functools
import math

import numpy as np

from ...errors import InputError
from .. import stream as _stream
from ..stream import beats_to_lanes, lanes_to_beats, pad_to
from .spec import LANE_BITS, MODES, raw_bits, x_lane_bits, x_lanes

REGS_IN = ("batch", "n_out", "k", "flags", "mode", "delta", "cin", "fm_height", "fm_width", "ksize", "pad")
REGS_OUT = ("id_magic", "id_hash", "sat_count")
FLAG_RELU, FLAG_CONV, FLAG_STATS_OUT, FLAG_RESIDENT, FLAG_KEEP, FLAG_RAW = 1, 2, 4, 8, 16, 32
LANE = np.dtype("<i2")


def raw_factor(p) -> int:
    """Output beats of the raw mode per beat of the requantized layout: ``raw_bits / 16``."""
    return raw_bits(p) // LANE_BITS


def _raw_dtype(p):
    return np.dtype("<i4") if raw_bits(p) == 32 else np.dtype("<i8")


def lanes_per_beat(p) -> int:
    return p["stream_bits"] // LANE_BITS


def tile_neurons(p, mode: str) -> int:
    return 2 * p["rows"] if mode == "pot" else p["rows"]


def n_tiles(p, n: int, mode: str) -> int:
    """Weight tiles of a call with N outputs."""
    return math.ceil(n / tile_neurons(p, mode))


def register_rows(p, n: int, mode: str) -> int:
    """Rows of the register matrix a call with N outputs streams (whole tiles)."""
    return n_tiles(p, n, mode) * p["rows"]


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


def _params_lanes(p, bias, shift, n):
    """The parameter segment: four lanes per neuron, as int64 (n*4,)."""
    u = np.asarray(bias, np.int64)[:n] & 0xFFFFFFFF
    out = np.zeros((n, 4), np.int64)
    out[:, 0], out[:, 1], out[:, 2] = u & 0xFFFF, u >> 16, np.asarray(shift, np.int64)[:n] & 0xFFFF
    return out.reshape(-1)


def _ints(a):
    """``a`` as an integer array (kept in its own integer type: the lane casts wrap the same)."""
    a = np.asarray(a)
    return a if a.dtype.kind in "iu" else a.astype(np.int64)


def _weight_lanes(p, regs):
    """Every tile's K steps of ``rows`` register lanes (padded to whole beats), flat."""
    lanes = lanes_per_beat(p)
    R = p["rows"]
    rows_needed, k = regs.shape
    nt = rows_needed // R
    slen = pad_to(R, lanes)
    wt = np.zeros((nt, k, slen), LANE)
    wt[:, :, :R] = np.ascontiguousarray(regs, dtype=LANE).reshape(nt, R, k).transpose(0, 2, 1)
    return wt.reshape(-1)


def bias_bits(p) -> int:
    """Signed bits of the bias field in accumulator units: the 32-bit parameter lanes, or the
    accumulator's width where it is narrower."""
    return min(32, p["acc_bits"])


def check_fields(p, *, regs, n, mode, bias, shift, x=None, fmap=None):
    """Host-side checks that every value fits the field the kernel reads it into."""
    if mode not in MODES:
        raise InputError(f"mode = {mode!r}: must be one of {', '.join(MODES)}")
    if regs is not None and regs.shape[0] != register_rows(p, n, mode):
        raise InputError(f"register matrix has {regs.shape[0]} rows; N = {n} in mode {mode} needs "
                         f"{register_rows(p, n, mode)}")
    blim = bias_bits(p) - 1
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


def _x_dtype(p):
    """The lane type of activations: a byte when they fit one (signed or not), else int16."""
    if x_lane_bits(p) == 16:
        return LANE
    return np.dtype("<i1") if p["act_signed"] else np.dtype("<u1")


def _x_lanes(p, a, rows, width):
    """``a`` (rows, width) integers as activation lanes, each row padded to whole beats."""
    out = np.zeros((rows, pad_to(width, x_lanes(p))), _x_dtype(p))
    out[:, :width] = a            # values fit the lane (check_fields); unsigned bytes wrap as bits
    return out


def pack_input(p, *, regs, bias, shift, n, mode, x=None, fmap=None, batch=None, resident=False) -> np.ndarray:
    """Input beats. GEMM: ``x`` (batch, K). Convolution: ``fmap`` (cin, H, W) (``batch``, the
    number of output pixels, is not needed). ``regs`` (register_rows, K) lanes, ``bias``/``shift``
    (N,). ``resident``: the weights are on chip; ``regs`` is not streamed (and may be None).
    Activations go in ``spec.x_lanes`` lanes per beat, everything else in 16-bit lanes."""
    lanes = lanes_per_beat(p)
    parts = [_segment(_params_lanes(p, bias, shift, n), lanes)]
    wl = None if resident else _weight_lanes(p, _ints(regs))
    if fmap is not None:
        if wl is not None:
            parts.append(wl)
        f = _ints(fmap)
        cin, h, w = f.shape
        parts.append(_x_lanes(p, f.transpose(1, 0, 2).reshape(h * cin, w), h * cin, w))
    else:
        x = _ints(x)
        parts.append(_x_lanes(p, x, *x.shape))
        if wl is not None:
            parts.append(wl)
    raw = np.concatenate([np.ascontiguousarray(a).reshape(-1).view(np.uint8) for a in parts])
    return raw.reshape(-1, p["stream_bits"] // 8)


def _segment(v, lanes):
    out = np.zeros(pad_to(v.size, lanes), LANE)
    out[:v.size] = v
    return out


def param_beats(p, n) -> int:
    return math.ceil(4 * n / lanes_per_beat(p))


def weight_beats(p, *, n, k, mode) -> int:
    """Beats of a call's weights (every tile's K steps)."""
    return n_tiles(p, n, mode) * k * math.ceil(p["rows"] / lanes_per_beat(p))


def n_input_beats(p, *, batch, n, k, mode, fmap_shape=None, resident=False) -> int:
    """Input beats of a call; ``fmap_shape`` = (cin, H, W) for a convolution."""
    xl = x_lanes(p)
    w = 0 if resident else weight_beats(p, n=n, k=k, mode=mode)
    if fmap_shape is not None:
        cin, h, wd = fmap_shape
        return param_beats(p, n) + w + h * cin * math.ceil(wd / xl)
    return param_beats(p, n) + batch * math.ceil(k / xl) + w


def stats_bins(p) -> int:
    """Counters of the statistics segment: one per MSB position of an ``acc_bits`` value."""
    return p["acc_bits"]


def n_stats_beats(p) -> int:
    return _stream.n_stats_beats(stats_bins(p), LANE_BITS, p["stream_bits"])


def _group_beats(p, per):
    """Output beats of one neuron summed over the groups of a chunk of ``per`` samples."""
    lanes, c = lanes_per_beat(p), p["cols"]
    full, rem = divmod(per, c)
    return full * math.ceil(c / lanes) + math.ceil(rem / lanes)


def n_output_beats(p, batch, n, *, stats=False, row=None, raw=False) -> int:
    """Output beats of a call; ``row``: a convolution's output width (its groups are per output
    row); ``stats``: with the statistics segment (``FLAG_STATS_OUT``); ``raw``: the raw mode
    (``FLAG_RAW``, :func:`raw_factor` beats per beat of outputs)."""
    per = batch if row is None else row
    chunks = 1 if row is None else batch // row
    return (chunks * n * _group_beats(p, per) * (raw_factor(p) if raw else 1)
            + (n_stats_beats(p) if stats else 0))


def pack_stats(p, hist) -> np.ndarray:
    """The statistics segment's beats for counters ``hist`` (``stats_bins(p)``,)."""
    return _stream.pack_stats(hist, LANE_BITS, p["stream_bits"])


def unpack_stats(p, beats) -> np.ndarray:
    """The counters (int64, ``stats_bins(p)``) of a call's output beats that end with the
    statistics segment (only the last :func:`n_stats_beats` beats are read)."""
    return _stream.unpack_stats(np.asarray(beats)[-n_stats_beats(p):], stats_bins(p), LANE_BITS)


def unpack_input(p, beats, regs_in, resident_regs=None):
    """Inverse of :func:`pack_input` (used by the emulator target). Returns a dict with
    ``x`` (GEMM) or ``fmap`` (convolution), ``regs``, ``bias``, ``shift``, ``mode``. A resident
    call (``FLAG_RESIDENT``) takes ``regs`` from ``resident_regs`` (the registers on chip)."""
    batch, n, k, flags, mode_code, delta, cin, height, width, ksize, pad = (int(r) for r in regs_in)
    mode = {v: m for m, v in MODES.items()}.get(mode_code)
    if mode is None:
        raise InputError(f"mode register = {mode_code}: must be one of {sorted(MODES.values())}")
    conv = bool(flags & FLAG_CONV)
    resident = bool(flags & FLAG_RESIDENT)
    lanes, xl, nb = lanes_per_beat(p), x_lanes(p), p["stream_bits"] // 8
    raw = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1)
    want = n_input_beats(p, batch=batch, n=n, k=k, mode=mode, fmap_shape=(cin, height, width) if conv else None,
                         resident=resident)
    if raw.size != want * nb:
        raise InputError(f"input stream has {raw.size // nb} beats; this call needs {want}")
    out = {"mode": mode}
    pl = raw[:param_beats(p, n) * nb].view(LANE)[:4 * n].astype(np.int64).reshape(n, 4)
    b = ((pl[:, 1] & 0xFFFF) << 16) | (pl[:, 0] & 0xFFFF)
    out["bias"] = np.where(b >= 1 << 31, b - (1 << 32), b)
    out["shift"] = pl[:, 2]
    pos = param_beats(p, n) * nb
    wbytes = 0 if resident else weight_beats(p, n=n, k=k, mode=mode) * nb

    def regs_at(a):
        R = p["rows"]
        nt = n_tiles(p, n, mode)
        steps = raw[a:a + wbytes].view(LANE).reshape(nt, k, pad_to(R, lanes))[:, :, :R]
        return (steps.transpose(0, 2, 1).reshape(nt * R, k) & 0xFFFF).astype(np.uint16)

    xdt = _x_dtype(p)
    if conv:
        if not resident:
            out["regs"] = regs_at(pos)
        pos += wbytes
        rows = raw[pos:].view(xdt).reshape(height, cin, -1)[:, :, :width]
        out["fmap"] = rows.transpose(1, 0, 2).astype(np.int64)
    else:
        xlen = pad_to(k, xl)
        xbytes = batch * xlen * xdt.itemsize
        out["x"] = raw[pos:pos + xbytes].view(xdt).reshape(batch, xlen)[:, :k].astype(np.int64)
        pos += xbytes
        if not resident:
            out["regs"] = regs_at(pos)
    if resident:
        if resident_regs is None:
            raise InputError("a resident call (FLAG_RESIDENT) found no weights on chip: load them first "
                             "(Kernel.load_weights, or a call with FLAG_KEEP)")
        if resident_regs.shape != (register_rows(p, n, mode), k):
            raise InputError(f"the weights on chip are {resident_regs.shape} registers; this call (N = {n}, "
                             f"K = {k}, mode {mode}) needs {(register_rows(p, n, mode), k)}")
        out["regs"] = resident_regs
    return out


@functools.lru_cache(maxsize=32)
def _out_index(rows, cols, lanes, chunks, per, n, tn):
    """Per output lane (in stream order, whole beats), the flat index ``b * n + j`` of the
    output it carries (``b`` the call's sample), or -1 for a padding lane."""
    full, rem = divmod(per, cols)
    parts = []
    for t0 in range(0, n, tn):
        js = np.arange(t0, min(n, t0 + tn))
        if full:
            lc = np.arange(pad_to(cols, lanes))
            b = np.arange(full)[:, None, None] * cols + lc[None, None, :]
            parts.append(np.where(lc[None, None, :] < cols, b * n + js[None, :, None], -1).reshape(-1))
        if rem:
            lc = np.arange(pad_to(rem, lanes))
            b = full * cols + lc
            parts.append(np.where(lc[None, :] < rem, b[None, :] * n + js[:, None], -1).reshape(-1))
    one = np.concatenate(parts) if parts else np.zeros(0, np.int64)
    idx = np.where(one[None, :] >= 0, one[None, :] + (np.arange(chunks) * per * n)[:, None], -1).reshape(-1)
    idx.flags.writeable = False
    return idx


def output_index(p, batch, n, mode, row=None):
    """:func:`_out_index` for a call (``row``: a convolution's output width)."""
    per = batch if row is None else row
    chunks = 1 if row is None else batch // row
    return _out_index(p["rows"], p["cols"], lanes_per_beat(p), chunks, per, n, tile_neurons(p, mode))


def pack_output(p, y, mode, row=None, raw=False) -> np.ndarray:
    """Output beats of ``y`` (batch, N) in the kernel's order (module docstring); ``raw``: the
    wide values of the raw mode (:func:`raw_bits` lanes)."""
    y = np.asarray(y, np.int64)
    idx = output_index(p, y.shape[0], y.shape[1], mode, row)
    lanes = np.where(idx >= 0, y.reshape(-1)[np.maximum(idx, 0)], 0)
    dt = _raw_dtype(p) if raw else LANE
    return lanes_to_beats(lanes.astype(dt), dt, p["stream_bits"])


def unpack_output(p, beats, batch, n, mode, row=None, raw=False) -> np.ndarray:
    """``(batch, N)`` int64 outputs of a call's output beats (without the statistics segment);
    ``raw``: the raw mode's wide values (signed ``raw_bits``)."""
    idx = output_index(p, batch, n, mode, row)
    v = beats_to_lanes(beats, _raw_dtype(p) if raw else LANE)
    ok = idx >= 0
    y = np.empty(batch * n, np.int64)
    y[idx[ok]] = v[:idx.size][ok]
    y = y.reshape(batch, n)
    if not p["act_signed"] and not raw:
        y &= 0xFFFF   # unsigned outputs up to 16 bits
    return y
