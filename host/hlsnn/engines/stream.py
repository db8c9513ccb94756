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
