"""Stream protocol of ``bfp_systolic``: how BFP operands become AXI-Stream beats and back.

Every target (emulator, C-simulation, simulated device, board) moves exactly these beats,
so the packing code that runs on the board is the code the tests run.

Beats are ``stream_bits`` wide and carry ``lane_bits``-wide lanes (8 bits for mantissas of
up to 8 bits, else 16); lane *i* of a beat is bits ``[i*L, (i+1)*L)``; every value is a
two's-complement integer sign-extended to its lane. A *segment* is a run of lanes padded
with zero lanes to a whole number of beats. A call's input stream is, in order:

1. if bias, unless ``FLAG_BIAS_KEPT``: one segment ``[bias_exp, b[0], …, b[N-1]]``;
2. if ``weight_exponent: tensor``: one segment ``[w_exp]``;
3. per sample ``b`` of the call, one segment ``[x[b,0], …, x[b,K-1], x_exp[b]]`` (the
   mantissas start at lane 0 of a beat, so a beat is one word of the activation store);
4. unless ``FLAG_RESIDENT``: per weight tile ``n0 = 0, rows, 2*rows, …``, once per call: if
   ``weight_exponent: row``, one segment of ``rows`` exponents ``w_exp[n0 … n0+rows-1]``
   (zero past N); then ``ceil(K/2)`` weight *steps*, each one segment
   ``[w[n0,2s], w[n0,2s+1], w[n0+1,2s], w[n0+1,2s+1], …]`` (``2*rows`` lanes, zero past N
   and past K).

**K passes.** A K longer than ``max_k`` (up to ``spec.k_limit``) runs in passes
(``spec.passes``: slices ``[k0, k0+Kq)`` of ``spec.pass_k`` mantissas, the last one shorter).
Items 3 and 4 are then sent once per pass, in pass order, for the pass's slice, exactly as
for a call of K = Kq: ``[x[b,k0], …, x[b,k0+Kq-1], x_exp[b]]`` per sample (``x_exp`` in every
pass; the kernel keeps the last pass's), then every weight tile's exponents (in every pass;
the last pass's are kept) and its ``ceil(Kq/2)`` steps of the slice. With K <= ``max_k`` there
is one pass and the stream is as above.

A call holds at most :func:`samples_per_call` samples (the activation and result stores); the
calls of a larger batch stream the weights once when they fit (:func:`streams_weights_once`). The
output stream is, per sample ``b``, one segment ``[y_exp[b], y[b,0], …, y[b,N-1]]``.

``FLAG_KEEP`` (bit 4) stores the call's weight tiles side by side in the weight store
(``ceil(N/rows) * ceil(K/2) <= w_depth`` steps; pass after pass, tile after tile) and keeps
them, with the row exponents;
a later call with ``FLAG_RESIDENT`` (bit 5) and the same N and K streams no weights and uses
them. Without either flag the tiles pass through the store as a ring of ``w_depth //
ceil(K/2)`` tiles (tile ``t`` of a pass at step ``(t mod slots) * ceil(K/2)``).

``FLAG_BIAS_KEPT`` (bit 8, with ``FLAG_BIAS``): the call streams no bias segment and uses the
bias and bias exponent that the last call with a bias segment left on chip (same N). The host
sets it only on resident calls whose bias is the one their keep call streamed, so that a
resident layer streams only its activations.

With ``FLAG_STATS_OUT`` set, one *statistics* segment follows the last sample's: the
:func:`stats_bins` (= ``acc_bits``) 32-bit counters of the statistics unit (source 002), in
bin order, each split into ``32 / lane_bits`` lanes (two 16-bit or four 8-bit lanes), low
part first. Counter ``k`` is the number of the call's real outputs (``batch x N``) whose
aligned wide accumulator ``v`` — the ``acc_bits`` value after the exponent-aligned bias
(saturated) and ReLU (emulator rules 1-4), the value whose leading-one position the output
exponent selector looks at, just before the output mantissa shifter — has
``unsigned_msb(v) == k`` (:func:`hlsnn.primitives.msb_histogram`: 0 and -1 are not counted,
counters saturate at ``2**32 - 1``). ``v`` is in *accumulator units*: output ``(b, n)`` is
``v * 2**e3`` with ``e3 = x_exp[b] + w_exp[n]``, so the bins are MSB positions relative to
each sample's (and, with ``weight_exponent: row``, each row's) own product exponent, not
absolute magnitudes: samples with different exponents share a bin when their accumulators
have the same leading-one position. TLAST is set on the last beat of the call (of the
statistics segment when there is one).

``FLAG_STATS`` (bit 2) is something else: it selects the mean + k*sigma *method* of the output
exponent selector (emulator rule 5); ``FLAG_STATS_OUT`` (bit 3) asks for the histogram.

Registers (s_axilite, in this order): inputs ``batch, n_out, k, flags, stats_k``
(flags bit 0 ReLU, bit 1 bias, bit 2 statistics method, bit 3 statistics segment out, bit 4
keep the weights, bit 5 resident weights, bit 6 rolling method, bit 7 empty the rolling buffer
first, emulator rule 5; bit 8 the bias is on chip),
outputs ``id_magic, id_hash, sat_count``.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from .. import stream as _stream
from ..stream import pad_to, segment_rows
from .spec import call_groups, lane_bits, passes

REGS_IN = ("batch", "n_out", "k", "flags", "stats_k")
REGS_OUT = ("id_magic", "id_hash", "sat_count")
FLAG_RELU, FLAG_BIAS, FLAG_STATS, FLAG_STATS_OUT, FLAG_KEEP, FLAG_RESIDENT = 1, 2, 4, 8, 16, 32
FLAG_ROLLING, FLAG_ROLL_CLEAR, FLAG_BIAS_KEPT = 64, 128, 256


def flags(relu, has_bias, method, stats_out=False):
    """The ``flags`` register of a call (without the weight, bias-kept and rolling-clear bits)."""
    return ((FLAG_RELU if relu else 0) | (FLAG_BIAS if has_bias else 0) | (FLAG_STATS if method == "stats" else 0)
            | (FLAG_ROLLING if method == "rolling" else 0) | (FLAG_STATS_OUT if stats_out else 0))


def _geometry(p):
    lb = lane_bits(p)
    return lb, p["stream_bits"] // lb, np.dtype(f"<i{lb // 8}")


def _head(p, n, bm, be, we, has_bias):
    _, lanes, _ = _geometry(p)
    parts = []
    if has_bias:
        parts.append(segment_rows(np.concatenate([[be], np.asarray(bm, np.int64)])[None, :], lanes))
    if p["weight_exponent"] != "row":
        parts.append(segment_rows(np.array([[int(np.asarray(we).reshape(-1)[0])]]), lanes))
    return np.concatenate(parts) if parts else np.zeros(0, np.int64)


def _shaped(a, shape):
    """``a`` viewed as ``shape`` without copying (raises if a copy would be needed), so that
    assignments through it land in ``a``."""
    v = a.view()
    v.shape = shape
    return v


def _weight_lanes(p, wm, we, n, k, dt):
    """The lanes of all weight tiles (identical in every batch tile), as a 1-D ``dt`` array:
    written straight into the lane type, without int64 intermediates."""
    _, lanes, _ = _geometry(p)
    R = p["rows"]
    kp = (k + 1) // 2
    n_tiles = math.ceil(n / R)
    explen = pad_to(R, lanes) if p["weight_exponent"] == "row" else 0
    steplen = pad_to(2 * R, lanes)
    tlen = explen + kp * steplen
    wt = np.zeros((n_tiles, tlen), dtype=dt)
    if explen:
        if n == n_tiles * R:
            wt[:, :R] = np.asarray(we).reshape(n_tiles, R)
        else:
            wexp = np.zeros(n_tiles * R, dtype=np.int64)
            wexp[:n] = np.asarray(we, np.int64).reshape(-1)
            wt[:, :R] = wexp.reshape(n_tiles, R)
    # lane 2*r + j of step s of weight tile t is w[t*R + r, 2*s + j]: moved as lane pairs
    # (one 2-lane integer per (r, s)), a transpose of (R, kp) per tile
    if n == n_tiles * R and k == 2 * kp:
        wc = np.ascontiguousarray(wm, dtype=dt)
    else:
        wc = np.zeros((n_tiles * R, 2 * kp), dtype=dt)
        wc[:n, :k] = wm
    pair = np.dtype(f"<i{2 * dt.itemsize}")
    steps = _shaped(wt.view(pair)[:, explen // 2:], (n_tiles, kp, steplen // 2))[:, :, :R]
    steps[...] = wc.view(pair).reshape(n_tiles, R, kp).transpose(0, 2, 1)
    return wt.reshape(-1)


def steps_to_rows(steps, R):
    """Weight steps ``(tiles, kp, 2*R)`` (lane ``2*r + j`` of step ``s`` of tile ``t`` is
    ``w[t*R + r, 2*s + j]``) as weight rows ``(tiles*R, 2*kp)``."""
    nt, kp = steps.shape[:2]
    return steps.reshape(nt, kp, R, 2).transpose(0, 2, 1, 3).reshape(nt * R, 2 * kp)


def rows_to_steps(rows, R):
    """Inverse of :func:`steps_to_rows`: rows ``(tiles*R, 2*kp)`` (padded) as steps ``(tiles, kp, 2*R)``."""
    nr, k2 = rows.shape
    return rows.reshape(nr // R, R, k2 // 2, 2).transpose(0, 2, 1, 3).reshape(nr // R, k2 // 2, 2 * R)


def samples_per_call(p, k, n) -> int:
    """Samples one call holds: ``cols`` per group, as many groups as the activation store
    (``ceil(K / lanes)`` words per sample) and the result store (``ceil(N / lanes)`` words per
    bank and sample) take, at most ``max_groups``."""
    return call_groups(p, k, n) * p["cols"]


def resident_fits(p, n, k) -> bool:
    """Whether an N x K layer's weight tiles fit the weight store side by side (keep / resident)."""
    return math.ceil(n / p["rows"]) * ((k + 1) // 2) <= p["w_depth"]


def streams_weights_once(p, n, k, calls) -> bool:
    """Whether a GEMM split into ``calls`` calls over its batch streams its N x K weights once:
    the first call with ``FLAG_KEEP``, the others with ``FLAG_RESIDENT`` (and ``FLAG_BIAS_KEPT``
    with a bias), when there are several calls and the tiles fit the store side by side
    (:func:`resident_fits`). ``Kernel.gemm`` and the cycle model (``perf.closed_form``) split so."""
    return calls > 1 and resident_fits(p, n, k)


def pack_input(p, xm, xe, wm, we, bm=None, be=0, *, out=None, resident=False, bias_kept=False) -> np.ndarray:
    """Input beats as a ``uint8`` array of shape ``(n_beats, stream_bits // 8)``.

    ``xm`` (batch, K), ``xe`` (batch,), ``wm`` (N, K), ``we`` (N,) or scalar (tensor),
    ``bm`` (N,) or None, ``be`` scalar. Values must already fit their fields. ``resident``:
    the call sets ``FLAG_RESIDENT``, so no weights are packed (``wm`` and ``we`` only give N).
    ``bias_kept``: the call sets ``FLAG_BIAS_KEPT``, so no bias segment is packed.

    ``out``: a writable, C-contiguous 1-D ``uint8`` array of at least
    :func:`n_input_beats` x ``stream_bits // 8`` bytes (e.g. a target's DMA input buffer,
    ``target.input_buffer``); the beats are written into its first bytes (every byte of
    them, padding included) and the result is a view of those bytes. None: a new array.
    """
    _, lanes, dt = _geometry(p)
    xm, wm = np.asarray(xm), np.asarray(wm)
    if xm.dtype.kind not in "iu":
        xm = xm.astype(np.int64)
    if wm.dtype.kind not in "iu":
        wm = wm.astype(np.int64)
    batch, k = xm.shape
    n = wm.shape[0]
    head = _head(p, n, bm, be, we, bm is not None and not bias_kept)
    h = head.size
    total = n_input_beats(p, batch, n, k, bm is not None, resident=resident, bias_kept=bias_kept) * lanes
    out = np.empty(total, dtype=dt) if out is None else _lanes_of(out, total, dt)
    out[:h] = head
    pos = h
    xe = np.asarray(xe, np.int64).reshape(-1)
    for k0, kq in passes(p, k):
        xlen = pad_to(kq + 1, lanes)
        seg = _shaped(out[pos:pos + batch * xlen], (batch, xlen))
        seg[:, :kq] = xm[:, k0:k0 + kq]
        seg[:, kq] = xe
        seg[:, kq + 1:] = 0
        pos += batch * xlen
        if not resident:
            wl = n_weight_lanes(p, n, kq)
            out[pos:pos + wl] = _weight_lanes(p, wm if kq == k else wm[:, k0:k0 + kq], we, n, kq, dt)
            pos += wl
    return out.view(np.uint8).reshape(-1, p["stream_bits"] // 8)


def n_weight_lanes(p, n, k) -> int:
    """Lanes of all weight tiles of an N x K call (every pass)."""
    _, lanes, _ = _geometry(p)
    R = p["rows"]
    explen = pad_to(R, lanes) if p["weight_exponent"] == "row" else 0
    return sum(math.ceil(n / R) * (explen + ((kq + 1) // 2) * pad_to(2 * R, lanes)) for _, kq in passes(p, k))


def _lanes_of(buf, total, dt):
    """The first ``total`` lanes of the byte buffer ``buf`` as a ``dt`` view (for ``out=``)."""
    nbytes = total * dt.itemsize
    if not (isinstance(buf, np.ndarray) and buf.dtype == np.uint8 and buf.ndim == 1 and buf.flags.c_contiguous
            and buf.flags.writeable and buf.size >= nbytes):
        raise InputError(f"out must be a writable, C-contiguous 1-D uint8 array of at least {nbytes} bytes; got "
                         f"{type(buf).__name__} {getattr(buf, 'dtype', '')} of shape {getattr(buf, 'shape', '?')}")
    return buf[:nbytes].view(dt)


def n_input_beats(p, batch, n, k, has_bias, *, resident=False, bias_kept=False) -> int:
    _, lanes, _ = _geometry(p)
    beats = math.ceil((n + 1) / lanes) if has_bias and not bias_kept else 0
    beats += 0 if p["weight_exponent"] == "row" else 1
    beats += sum(batch * math.ceil((1 + kq) / lanes) for _, kq in passes(p, k))
    return beats + (0 if resident else n_weight_lanes(p, n, k) // lanes)


def stats_bins(p) -> int:
    """Counters of the statistics segment: one per MSB position of an ``acc_bits`` value."""
    return p["acc_bits"]


def n_stats_beats(p) -> int:
    return _stream.n_stats_beats(stats_bins(p), lane_bits(p), p["stream_bits"])


def n_output_beats(p, batch, n, *, stats=False) -> int:
    """Output beats of a call; ``stats``: with the statistics segment (``FLAG_STATS_OUT``)."""
    _, lanes, _ = _geometry(p)
    return batch * math.ceil((n + 1) / lanes) + (n_stats_beats(p) if stats else 0)


def pack_stats(p, hist) -> np.ndarray:
    """The statistics segment's beats for counters ``hist`` (``stats_bins(p)``,)."""
    return _stream.pack_stats(hist, lane_bits(p), p["stream_bits"])


def unpack_stats(p, beats) -> np.ndarray:
    """The counters (int64) of a call's output beats that end with the statistics segment
    (only the last :func:`n_stats_beats` beats are read)."""
    return _stream.unpack_stats(np.asarray(beats)[-n_stats_beats(p):], stats_bins(p), lane_bits(p))


def unpack_input(p, beats, batch, n, k, has_bias, *, resident=False, bias_kept=False):
    """Inverse of :func:`pack_input` (used by the emulator target): returns
    ``xm, xe, wm, we, bm, be`` (``bm`` None without bias or with ``bias_kept``; ``we`` of
    shape (N,); ``wm`` and ``we`` None for a ``resident`` call, which streams no weights)."""
    _, lanes, dt = _geometry(p)
    v = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1).view(dt)
    want = n_input_beats(p, batch, n, k, has_bias, resident=resident, bias_kept=bias_kept)
    if v.size != want * lanes:
        raise InputError(f"input stream has {v.size // lanes} beats; a batch={batch}, N={n}, K={k} call "
                         f"{'with' if has_bias else 'without'} bias needs {want}")
    R = p["rows"]
    n_tiles = math.ceil(n / R)
    pos = 0
    bm, be = None, 0
    if has_bias and not bias_kept:
        seg = v[:n + 1].astype(np.int64)
        be, bm = int(seg[0]), seg[1:]
        pos = pad_to(n + 1, lanes)
    per_row = p["weight_exponent"] == "row"
    w_tensor = None
    if not per_row:
        w_tensor = int(v[pos])
        pos += lanes
    explen = pad_to(R, lanes) if per_row else 0
    steplen = pad_to(2 * R, lanes)
    xm = np.zeros((batch, k), np.int64)
    wm = None if resident else np.zeros((n, k), np.int64)
    xe = we = None
    for k0, kq in passes(p, k):
        xlen = pad_to(1 + kq, lanes)
        xs = v[pos:pos + batch * xlen].reshape(batch, xlen).astype(np.int64)
        pos += batch * xlen
        xm[:, k0:k0 + kq], xe = xs[:, :kq], xs[:, kq]       # the last pass's exponents are kept
        if resident:
            continue
        kp = (kq + 1) // 2
        wlen = n_tiles * (explen + kp * steplen)
        wt = v[pos:pos + wlen].astype(np.int64).reshape(n_tiles, explen + kp * steplen)
        pos += wlen
        steps = wt[:, explen:].reshape(n_tiles, kp, steplen)[:, :, :2 * R]
        wm[:, k0:k0 + kq] = steps_to_rows(steps, R)[:n, :kq]
        if per_row:
            we = wt[:, :R].reshape(-1)[:n]
    if not per_row:
        we = np.full(n, w_tensor, np.int64)
    return xm, xe, wm, we, bm, be


def pack_output(p, ym, ye) -> np.ndarray:
    """Output beats for mantissas ``ym`` (batch, N) and exponents ``ye`` (batch,)."""
    _, lanes, dt = _geometry(p)
    ym = np.asarray(ym, np.int64)
    rows = np.concatenate([np.asarray(ye, np.int64).reshape(-1, 1), ym], axis=1)
    return segment_rows(rows, lanes).astype(dt).view(np.uint8).reshape(-1, p["stream_bits"] // 8)


def unpack_output(p, beats, batch, n):
    """Inverse of :func:`pack_output`: ``(ym (batch, N) int64, ye (batch,) int64)``."""
    _, lanes, dt = _geometry(p)
    rows = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1).view(dt).reshape(batch, -1)
    return rows[:, 1:1 + n].astype(np.int64), rows[:, 0].astype(np.int64)
