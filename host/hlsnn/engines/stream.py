"""Lane helpers shared by the engines' stream protocols.

A beat is ``stream_bits`` wide and carries equal lanes, lane *i* at bits ``[i*L, (i+1)*L)``;
values are two's complement, sign-extended to the lane. A *segment* is a run of lanes padded
with zero lanes to whole beats.
"""
import numpy as np


def pad_to(n: int, m: int) -> int:
    """``n`` rounded up to a multiple of ``m``."""
    return -(-n // m) * m


def segment_rows(rows: np.ndarray, lanes: int, dtype=np.int64) -> np.ndarray:
    """Pad each row of a 2-D lane array to whole beats and flatten."""
    r, c = rows.shape
    out = np.zeros((r, pad_to(c, lanes)), dtype=dtype)
    out[:, :c] = rows
    return out.reshape(-1)


def lanes_to_beats(lanes: np.ndarray, lane_dtype, stream_bits: int) -> np.ndarray:
    """A flat lane array as ``uint8`` beats of shape ``(n_beats, stream_bits // 8)``."""
    return np.ascontiguousarray(lanes).astype(lane_dtype, copy=False).view(np.uint8).reshape(-1, stream_bits // 8)


def beats_to_lanes(beats, lane_dtype) -> np.ndarray:
    """The inverse of :func:`lanes_to_beats` (a flat, read-only view where possible)."""
    return np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1).view(lane_dtype)


# ---------------------------------------------------------------- statistics segment
# The statistics unit (source 002; hls/include/hlsnn/stats.h) ends a call's output stream, when
# the engine's FLAG_STATS_OUT is set, with one segment of 32-bit MSB-histogram counters, in bin
# order, each split into 32 / L lanes, low part first.

def n_stats_beats(bins: int, lane_bits: int, stream_bits: int) -> int:
    """Beats of the statistics segment of ``bins`` counters."""
    lanes = stream_bits // lane_bits
    return -(-bins * (32 // lane_bits) // lanes)


def pack_stats(hist, lane_bits: int, stream_bits: int) -> np.ndarray:
    """The statistics segment of counters ``hist`` as ``uint8`` beats."""
    h = np.asarray(hist, np.int64).reshape(-1) & 0xFFFFFFFF
    parts = 32 // lane_bits
    mask = (1 << lane_bits) - 1
    lanes = (h[:, None] >> (lane_bits * np.arange(parts))[None, :]) & mask
    seg = segment_rows(lanes.reshape(1, -1), stream_bits // lane_bits)
    dt = np.dtype(f"<u{lane_bits // 8}")
    return lanes_to_beats(seg, dt, stream_bits)


def unpack_stats(beats, bins: int, lane_bits: int) -> np.ndarray:
    """The ``bins`` counters (int64) of a statistics segment (its beats, padding included)."""
    parts = 32 // lane_bits
    v = beats_to_lanes(beats, np.dtype(f"<u{lane_bits // 8}"))[:bins * parts].astype(np.int64)
    v = v.reshape(bins, parts) << (lane_bits * np.arange(parts))[None, :]
    return v.sum(axis=1)


def merge_stats(total, hist):
    """Counters of two runs added, saturating at ``2**32 - 1`` like the kernels' counters (so
    merging the runs of one layer equals counting all its values at once)."""
    h = np.asarray(hist, np.int64)
    return h.copy() if total is None else np.minimum(total + h, (1 << 32) - 1)
