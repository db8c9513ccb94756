"""Stream protocol of ``bfp_systolic``: how BFP operands become AXI-Stream beats and back.

Every target (emulator, C-simulation, simulated device, board) moves exactly these beats,
so the packing code that runs on the board is the code the tests run.

Beats are ``stream_bits`` wide and carry ``lane_bits``-wide lanes (8 bits for mantissas of
up to 8 bits, else 16); lane *i* of a beat is bits ``[i*L, (i+1)*L)``; every value is a
two's-complement integer sign-extended to its lane. A *segment* is a run of lanes padded
with zero lanes to a whole number of beats. A call's input stream is, in order:

1. if bias: one segment ``[bias_exp, b[0], …, b[N-1]]``;
2. if ``weight_exponent: tensor``: one segment ``[w_exp]``;
3. for each batch tile ``t`` (samples ``t*cols …``, the last tile may be short):

   a. per sample ``b`` of the tile, one segment ``[x_exp[b], x[b,0], …, x[b,K-1]]``;
   b. per weight tile ``n0 = 0, rows, 2*rows, …``: if ``weight_exponent: row``, one segment
      of ``rows`` exponents ``w_exp[n0 … n0+rows-1]`` (zero past N); then ``ceil(K/2)`` weight
      *steps*, each one segment ``[w[n0,2s], w[n0,2s+1], w[n0+1,2s], w[n0+1,2s+1], …]``
      (``2*rows`` lanes, zero past N and past K).

The weights are streamed again for every batch tile (they are never stored on chip). The
output stream is, per sample ``b``, one segment ``[y_exp[b], y[b,0], …, y[b,N-1]]``; TLAST
is set on the last beat of the call.

Registers (s_axilite, in this order): inputs ``batch, n_out, k, flags, stats_k``
(flags bit 0 ReLU, bit 1 bias, bit 2 statistics method), outputs ``id_magic, id_hash,
sat_count``.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError
from .spec import lane_bits

REGS_IN = ("batch", "n_out", "k", "flags", "stats_k")
REGS_OUT = ("id_magic", "id_hash", "sat_count")
FLAG_RELU, FLAG_BIAS, FLAG_STATS = 1, 2, 4


def _geometry(p):
    lb = lane_bits(p)
    lanes = p["stream_bits"] // lb
    return lb, lanes, np.dtype(f"<i{lb // 8}")


def _pad_to(n, m):
    return -(-n // m) * m


def _segment_rows(rows: np.ndarray, lanes: int) -> np.ndarray:
    """Pad each row of a 2-D lane array to whole beats and flatten."""
    r, c = rows.shape
    out = np.zeros((r, _pad_to(c, lanes)), dtype=np.int64)
    out[:, :c] = rows
    return out.reshape(-1)


def pack_input(p, xm, xe, wm, we, bm=None, be=0) -> np.ndarray:
    """Input beats as a ``uint8`` array of shape ``(n_beats, stream_bits // 8)``.

    ``xm`` (batch, K), ``xe`` (batch,), ``wm`` (N, K), ``we`` (N,) or scalar (tensor),
    ``bm`` (N,) or None, ``be`` scalar.
    """
    lb, lanes, dt = _geometry(p)
    xm, wm = np.asarray(xm, np.int64), np.asarray(wm, np.int64)
    batch, k = xm.shape
    n = wm.shape[0]
    R, C = p["rows"], p["cols"]
    kp = (k + 1) // 2
    parts = []
    if bm is not None:
        parts.append(_segment_rows(np.concatenate([[be], np.asarray(bm, np.int64)])[None, :], lanes))
    per_row = p["weight_exponent"] == "row"
    if not per_row:
        parts.append(_segment_rows(np.array([[int(np.asarray(we).reshape(-1)[0])]]), lanes))
    # weight part, identical for every batch tile
    n_tiles = math.ceil(n / R)
    wpad = np.zeros((n_tiles * R, 2 * kp), dtype=np.int64)
    wpad[:n, :k] = wm
    steps = wpad.reshape(n_tiles, R, kp, 2).transpose(0, 2, 1, 3).reshape(n_tiles, kp, 2 * R)
    step_lanes = _pad_to(2 * R, lanes)
    steps_p = np.zeros((n_tiles, kp, step_lanes), dtype=np.int64)
    steps_p[:, :, :2 * R] = steps
    wparts = []
    if per_row:
        wexp = np.zeros(n_tiles * R, dtype=np.int64)
        wexp[:n] = np.asarray(we, np.int64).reshape(-1)
        exp_seg = _segment_rows(wexp.reshape(n_tiles, R), lanes).reshape(n_tiles, -1)
        for t in range(n_tiles):
            wparts += [exp_seg[t], steps_p[t].reshape(-1)]
    else:
        wparts = [steps_p.reshape(-1)]
    wpart = np.concatenate(wparts)
    xrows = np.zeros((batch, 1 + k), dtype=np.int64)
    xrows[:, 0] = np.asarray(xe, np.int64).reshape(-1)
    xrows[:, 1:1 + k] = xm
    xseg = _segment_rows(xrows, lanes).reshape(batch, -1)
    for b0 in range(0, batch, C):
        parts += [xseg[b0:b0 + C].reshape(-1), wpart]
    lanes_all = np.concatenate(parts)
    return lanes_all.astype(dt).view(np.uint8).reshape(-1, p["stream_bits"] // 8)


def n_input_beats(p, batch, n, k, has_bias) -> int:
    lb, lanes, _ = _geometry(p)
    kp = (k + 1) // 2
    R = p["rows"]
    n_tiles = math.ceil(n / R)
    beats = math.ceil((n + 1) / lanes) if has_bias else 0
    beats += 0 if p["weight_exponent"] == "row" else 1
    wbeats = n_tiles * (kp * math.ceil(2 * R / lanes) + (math.ceil(R / lanes) if p["weight_exponent"] == "row" else 0))
    xbeats = math.ceil((1 + k) / lanes)
    n_btiles = math.ceil(batch / p["cols"])
    return beats + batch * xbeats + n_btiles * wbeats


def n_output_beats(p, batch, n) -> int:
    _, lanes, _ = _geometry(p)
    return batch * math.ceil((n + 1) / lanes)


def unpack_input(p, beats, batch, n, k, has_bias):
    """Inverse of :func:`pack_input` (used by the emulator target): returns
    ``xm, xe, wm, we, bm, be`` (``bm`` None without bias; ``we`` of shape (N,))."""
    lb, lanes, dt = _geometry(p)
    v = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1).view(dt).astype(np.int64)
    if v.size != n_input_beats(p, batch, n, k, has_bias) * lanes:
        raise InputError(f"input stream has {v.size // lanes} beats; a {batch}x{n}x{k} call "
                         f"needs {n_input_beats(p, batch, n, k, has_bias)}")
    pos = 0

    def take(count):
        nonlocal pos
        seg = v[pos:pos + count]
        pos += _pad_to(count, lanes)
        return seg

    bm, be = None, 0
    if has_bias:
        seg = take(n + 1)
        be, bm = int(seg[0]), seg[1:].copy()
    per_row = p["weight_exponent"] == "row"
    w_tensor = None if per_row else int(take(1)[0])
    R, C = p["rows"], p["cols"]
    kp = (k + 1) // 2
    n_tiles = math.ceil(n / R)
    xm = np.zeros((batch, k), np.int64)
    xe = np.zeros(batch, np.int64)
    wm = np.zeros((n_tiles * R, 2 * kp), np.int64)
    we = np.zeros(n_tiles * R, np.int64)
    step_lanes = _pad_to(2 * R, lanes)
    for b0 in range(0, batch, C):
        for b in range(b0, min(b0 + C, batch)):
            seg = take(1 + k)
            xe[b], xm[b] = seg[0], seg[1:1 + k]
        for t in range(n_tiles):
            if per_row:
                we[t * R:(t + 1) * R] = take(R)
            block = v[pos:pos + kp * step_lanes].reshape(kp, step_lanes)[:, :2 * R]
            pos += kp * step_lanes
            wm[t * R:(t + 1) * R] = block.reshape(kp, R, 2).transpose(1, 0, 2).reshape(R, 2 * kp)
    if not per_row:
        we[:] = w_tensor
    return xm, xe, wm[:n, :k], we[:n], bm, be


def pack_output(p, ym, ye) -> np.ndarray:
    """Output beats for mantissas ``ym`` (batch, N) and exponents ``ye`` (batch,)."""
    _, lanes, dt = _geometry(p)
    ym = np.asarray(ym, np.int64)
    rows = np.concatenate([np.asarray(ye, np.int64).reshape(-1, 1), ym], axis=1)
    return _segment_rows(rows, lanes).astype(dt).view(np.uint8).reshape(-1, p["stream_bits"] // 8)


def unpack_output(p, beats, batch, n):
    """Inverse of :func:`pack_output`: ``(ym (batch, N) int64, ye (batch,) int64)``."""
    _, lanes, dt = _geometry(p)
    v = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1).view(dt).astype(np.int64)
    rows = v.reshape(batch, -1)
    return rows[:, 1:1 + n].copy(), rows[:, 0].copy()
