"""Stream protocol of ``sparse_cluster``: compressed sub-feature-maps, compressed kernels and
per-unit jobs as AXI-Stream beats. Every target moves exactly these beats.

All lanes are 16 bits. A call computes a stride-1 convolution of ``cin`` input channels to
``zout`` output channels with a ``ksize x ksize`` kernel, as ``n_groups`` passes over groups
of at most ``max_z`` output channels and, per group, ``n_rounds`` rounds; in a round every
unit ``m`` runs one *job*: an output rectangle of ``oh x ow`` outputs (``oh = 0``: idle).

Input stream, for each group ``g``, for each round:

1. one *job* segment: for each unit ``m``: ``oh, ow``, then per output channel of the group
   ``bias_lo, bias_hi, shift`` (bias: int32 in accumulator units; shift: signed);
2. for each input channel ``kz``:

   a. for each unit ``m``, one *data* segment: ``n``, then ``n`` entries ``value, (row << 8) |
      col`` — the non-zero inputs of the unit's input tile (its output rectangle plus
      ``ksize - 1`` rows and columns, in the zero-padded input's coordinates, local to the
      tile, row-major); zero inputs and padding are simply absent;
   b. one *coefficient* segment, broadcast to every unit: ``n``, then ``n`` entries ``coef,
      (z << 8) | (ky << 4) | kx`` — the non-zero coefficients of input channel ``kz`` for the
      group's output channels (``z`` local to the group), ordered by ``z``, ``ky``, ``kx``.

Output stream: for each group, round and unit with ``oh > 0``, one segment of the job's
outputs, channel-major then row-major: ``int8`` values one per lane, or (raw mode) int32
accumulators as two lanes ``low, high``; with 2x2 max pooling the job is ``oh/2 x ow/2``.
With ``FLAG_STATS_OUT`` set, one *statistics* segment follows the last job's: the
:func:`stats_bins` (= 32, ``ACC_BITS``) 32-bit counters of the statistics unit (source 002),
in bin order, each as two lanes, low 16 bits first. Counter ``k`` is the number of the call's
real outputs whose int32 value ``t`` — after bias, ReLU and 2x2 pooling if enabled (emulator
rules 2-4), just before the output shift (in raw mode: the raw value itself) — has
``unsigned_msb(t) == k`` (:func:`hlsnn.primitives.msb_histogram`: 0 and -1 are not counted,
counters saturate at ``2**32 - 1``); every unit counts its own jobs' outputs and the counters
are summed (saturating) over the units. TLAST is set on the last beat of the call (of the
statistics segment when there is one); without the flag the stream is exactly as before.

Registers (s_axilite, in this order): inputs ``cin, zout, ksize, flags, n_rounds, n_groups``
(flags bit 0 ReLU, bit 1 2x2 max pooling, bit 2 raw int32 output, bit 3 statistics segment
out), outputs ``id_magic, id_hash, sat_count``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import InputError
from .. import stream as _stream
from ..stream import beats_to_lanes, lanes_to_beats, pad_to

REGS_IN = ("cin", "zout", "ksize", "flags", "n_rounds", "n_groups")
REGS_OUT = ("id_magic", "id_hash", "sat_count")
FLAG_RELU, FLAG_POOL, FLAG_RAW, FLAG_STATS_OUT = 1, 2, 4, 8
#: Width of the accumulators and of the values the statistics unit counts.
ACC_BITS = 32
LANE = np.dtype("<i2")


@dataclass(frozen=True)
class Job:
    """One unit's output rectangle (half-open, output coordinates) in one round."""

    unit: int
    row0: int
    row1: int
    col0: int
    col1: int

    @property
    def oh(self):
        return self.row1 - self.row0

    @property
    def ow(self):
        return self.col1 - self.col0


def lanes_per_beat(p):
    return p["stream_bits"] // 16


def groups(p, zout):
    """Output-channel groups ``[(z0, z1), ...]`` of at most ``max_z`` channels."""
    return [(z0, min(zout, z0 + p["max_z"])) for z0 in range(0, zout, p["max_z"])]


def _seg(parts, lanes):
    a = np.concatenate([np.asarray(x, np.int64).reshape(-1) for x in parts]) if parts else np.zeros(0, np.int64)
    out = np.zeros(pad_to(max(a.size, 1), lanes), np.int64)
    out[:a.size] = a
    return out


def _bias_lanes(b):
    u = np.asarray(b, np.int64) & 0xFFFFFFFF
    return u & 0xFFFF, u >> 16


def pack_input(p, *, fmap_padded, coefs, rounds, bias, shift, ksize):
    """Input beats.

    ``fmap_padded`` (cin, Hp, Wp) int: the input with its zero padding; ``coefs`` a
    :class:`~hlsnn.formats.sparse.SparseKernel` of the weights; ``rounds`` a list of rounds,
    each a list of ``units`` :class:`Job` (``oh = 0`` for idle units); ``bias``/``shift``
    (zout,) ints.
    """
    lanes = lanes_per_beat(p)
    cin = fmap_padded.shape[0]
    zout = coefs.shape[0]
    k = ksize
    parts = []
    # non-zero inputs by channel, once
    nz = [np.nonzero(fmap_padded[c]) for c in range(cin)]
    vals = [fmap_padded[c][nz[c]] for c in range(cin)]
    for z0, z1 in groups(p, zout):
        zl = np.arange(z0, z1)
        blo, bhi = _bias_lanes(np.asarray(bias)[zl])
        params = np.stack([blo, bhi, np.asarray(shift, np.int64)[zl] & 0xFFFF], axis=1).reshape(-1)
        # coefficient segments of this group, per kz
        coef_segs = []
        for kz in range(cin):
            c, z, ky, kx = coefs.entries(kz)
            sel = (z >= z0) & (z < z1)
            ent = np.stack([c[sel], ((z[sel] - z0) << 8) | (ky[sel] << 4) | kx[sel]], axis=1).reshape(-1)
            coef_segs.append(_seg([[int(sel.sum())], ent], lanes))
        for jobs in rounds:
            parts.append(_seg([np.concatenate([[j.oh, j.ow], params if j.oh else params * 0]) for j in jobs], lanes))
            for kz in range(cin):
                r, cc = nz[kz]
                v = vals[kz]
                for j in jobs:
                    if j.oh == 0:
                        parts.append(_seg([[0]], lanes))
                        continue
                    sel = (r >= j.row0) & (r < j.row1 + k - 1) & (cc >= j.col0) & (cc < j.col1 + k - 1)
                    lr, lc = r[sel] - j.row0, cc[sel] - j.col0
                    ent = np.stack([v[sel], (lr << 8) | lc], axis=1).reshape(-1)
                    parts.append(_seg([[int(sel.sum())], ent], lanes))
                parts.append(coef_segs[kz])
    return lanes_to_beats(np.concatenate(parts), LANE, p["stream_bits"])


def out_dims(job, pool):
    return (job.oh // 2, job.ow // 2) if pool else (job.oh, job.ow)


def stats_bins(p) -> int:
    """Counters of the statistics segment: one per MSB position of an int32 value."""
    return ACC_BITS


def n_stats_beats(p) -> int:
    return _stream.n_stats_beats(stats_bins(p), 16, p["stream_bits"])


def pack_stats(p, hist) -> np.ndarray:
    """The statistics segment's beats for counters ``hist`` (``stats_bins(p)``,)."""
    return _stream.pack_stats(hist, 16, p["stream_bits"])


def unpack_stats(p, beats) -> np.ndarray:
    """The counters (int64) of a call's output beats that end with the statistics segment
    (only the last :func:`n_stats_beats` beats are read)."""
    return _stream.unpack_stats(np.asarray(beats)[-n_stats_beats(p):], stats_bins(p), 16)


def n_output_beats(p, rounds, zout, flags, *, stats=False):
    """Output beats of a call; with the statistics segment when ``stats`` (or when ``flags``
    has ``FLAG_STATS_OUT``: the kernel sends it then)."""
    lanes = lanes_per_beat(p)
    per = 2 if flags & FLAG_RAW else 1
    total = 0
    for z0, z1 in groups(p, zout):
        for jobs in rounds:
            for j in jobs:
                if j.oh:
                    h, w = out_dims(j, flags & FLAG_POOL)
                    total += math.ceil(max((z1 - z0) * h * w * per, 1) / lanes)
    if stats or flags & FLAG_STATS_OUT:
        total += n_stats_beats(p)
    return total


def job_segment(values, raw, lanes):
    """One job's output segment: int8 values one per lane, or int32 as ``low, high`` lanes."""
    v = np.asarray(values, np.int64).reshape(-1)
    if raw:
        u = v & 0xFFFFFFFF
        v = np.stack([u & 0xFFFF, u >> 16], axis=1).reshape(-1)
    return _seg([v], lanes)


def pack_output(p, results, rounds, zout, flags):
    """Output beats from the full result ``results`` (zout, H', W') (pooled if pooling)."""
    lanes = lanes_per_beat(p)
    pool, raw = flags & FLAG_POOL, flags & FLAG_RAW
    parts = []
    for z0, z1 in groups(p, zout):
        for jobs in rounds:
            for j in jobs:
                if not j.oh:
                    continue
                if pool:
                    blk = results[z0:z1, j.row0 // 2:j.row1 // 2, j.col0 // 2:j.col1 // 2]
                else:
                    blk = results[z0:z1, j.row0:j.row1, j.col0:j.col1]
                parts.append(job_segment(blk, raw, lanes))
    return lanes_to_beats(np.concatenate(parts), LANE, p["stream_bits"])


def unpack_output(p, beats, rounds, zout, out_shape, flags):
    """The full result (zout, H', W') (pooled dims if pooling) from output beats."""
    lanes = lanes_per_beat(p)
    pool, raw = flags & FLAG_POOL, flags & FLAG_RAW
    v = beats_to_lanes(beats, LANE).astype(np.int64)
    res = np.zeros((zout,) + tuple(out_shape), np.int64)
    pos = 0
    for z0, z1 in groups(p, zout):
        for jobs in rounds:
            for j in jobs:
                if not j.oh:
                    continue
                h, w = out_dims(j, pool)
                n = (z1 - z0) * h * w
                if raw:
                    lo, hi = v[pos:pos + 2 * n:2] & 0xFFFF, v[pos + 1:pos + 2 * n:2] & 0xFFFF
                    x = (hi << 16) | lo
                    vals = np.where(x >= 1 << 31, x - (1 << 32), x)
                    used = 2 * n
                else:
                    vals, used = v[pos:pos + n], n
                pos += pad_to(max(used, 1), lanes)
                r0, c0 = (j.row0 // 2, j.col0 // 2) if pool else (j.row0, j.col0)
                res[z0:z1, r0:r0 + h, c0:c0 + w] = vals.reshape(z1 - z0, h, w)
    return res


def unpack_input(p, beats, regs_in):
    """Decode an input stream (for the emulator target): returns the padded feature map's
    non-zeros as a dense (cin, Hp, Wp) array, the dense weights (zout, cin, k, k), bias,
    shift and the rounds of jobs."""
    cin, zout, k, flags, n_rounds, n_groups = (int(r) for r in regs_in)
    lanes = lanes_per_beat(p)
    M = p["units"]
    v = beats_to_lanes(beats, LANE).astype(np.int64)
    pos = 0
    w = np.zeros((zout, cin, k, k), np.int64)
    bias = np.zeros(zout, np.int64)
    shift = np.zeros(zout, np.int64)
    entries = {}          # (round, unit, kz) -> (values, rows, cols) tile-local
    rounds = None
    grps = groups(p, zout)
    if len(grps) != n_groups:
        raise InputError(f"n_groups = {n_groups} but zout = {zout} with max_z = {p['max_z']} needs {len(grps)}")
    for gi, (z0, z1) in enumerate(grps):
        zg = z1 - z0
        these = []
        for r in range(n_rounds):
            hdr = v[pos:pos + M * (2 + 3 * zg)].reshape(M, 2 + 3 * zg)
            pos += pad_to(M * (2 + 3 * zg), lanes)
            jobs_hw = hdr[:, :2]
            for m in range(M):
                if hdr[m, 0]:
                    trip = hdr[m, 2:].reshape(zg, 3)
                    b = ((trip[:, 1] & 0xFFFF) << 16) | (trip[:, 0] & 0xFFFF)
                    bias[z0:z1] = np.where(b >= 1 << 31, b - (1 << 32), b)
                    shift[z0:z1] = trip[:, 2]
            these.append(jobs_hw)
            for kz in range(cin):
                for m in range(M):
                    n = int(v[pos])
                    e = v[pos + 1:pos + 1 + 2 * n].reshape(n, 2)
                    pos += pad_to(1 + 2 * n, lanes)
                    if gi == 0:
                        entries[(r, m, kz)] = (e[:, 0], (e[:, 1] >> 8) & 0xFF, e[:, 1] & 0xFF)
                n = int(v[pos])
                e = v[pos + 1:pos + 1 + 2 * n].reshape(n, 2)
                pos += pad_to(1 + 2 * n, lanes)
                zz, ky, kx = (e[:, 1] >> 8) & 0xFF, (e[:, 1] >> 4) & 0xF, e[:, 1] & 0xF
                w[z0 + zz, kz, ky, kx] = e[:, 0]
        rounds = these if rounds is None else rounds
    if pos != v.size and pad_to(pos, lanes) != v.size:
        raise InputError(f"input stream has {v.size // lanes} beats; the jobs describe {pos // lanes}")
    return {"weights": w, "bias": bias, "shift": shift, "rounds_hw": rounds, "entries": entries}
