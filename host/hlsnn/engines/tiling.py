"""Transparent tiling: an operation larger than one kernel call is split into calls.

Two limits bound one call:

* the kernel's maxima from the config (``max_n``, ``max_out_channels``, ``max_hw``, ...): the
  engine's ``Kernel`` splits the outputs (N, or Z) and, for feature maps, the spatial extent;
* the largest DMA transfer, :func:`transfer_limit` of the target: on ``pynq``/``sim`` the
  AXI DMA's length register (``c_sg_length_width`` bits of the overlay's .hwh) caps every
  input and output transfer at ``2**width - 1`` bytes; ``emu`` and ``csim`` have no such limit
  unless given ``max_transfer_bytes=``. The engine then splits the batch (rows of x, or rows
  of output pixels).

Rules (the same on every target, so tiled results agree bit for bit between targets):

* only splits that leave every output value unchanged are made automatically: batch rows,
  outputs N/Z of integer operations, spatial bands of a convolution on a host-padded map, and
  ``shift_mac``'s reduction length K (raw calls whose exact sums the host adds, then applies
  the kernel's output rule: ``shift_mac.tiles``);
* a feature map is padded on the host once (:func:`pad_map`, the kernel's own zero padding
  of :func:`conv_pad`) and cut into rectangles of outputs (:func:`grid`); each call reads its
  rectangle's input window with a ``k-1`` halo (:func:`halo`, :func:`halo_window`), runs
  with 'valid' padding, and its outputs are put back in place (:func:`stitch`);
* the calls' histograms are merged with :func:`engines.stream.merge_stats` and their
  saturation counts summed, both saturating as the kernel's counters do: :class:`Tally`;
* where a split would change the numerics, the operation says so in its docstring (the BFP
  float ``gemm`` over N > ``max_n``: each chunk gets its own output exponents)."""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from .stream import merge_stats

#: a 32-bit counter register saturates here
U32_MAX = 0xFFFFFFFF


def transfer_limit(target):
    """Bytes one DMA transfer may carry on ``target`` (None: unlimited)."""
    return getattr(target, "max_transfer_bytes", None)


def chunks(n: int, size: int, start: int = 0):
    """``[(a, b), ...]`` covering ``range(start, n)`` in pieces of at most ``size``."""
    size = max(1, int(size))
    return [(a, min(a + size, n)) for a in range(start, n, size)]


def largest(hi: int, fits) -> int:
    """The largest ``m`` in ``[1, hi]`` with ``fits(m)``, for a ``fits`` that holds up to some
    ``m`` and not beyond (sizes grow with ``m``); 0 when even ``fits(1)`` fails."""
    if fits(hi):
        return hi
    if hi <= 1 or not fits(1):
        return 0
    lo = 1                            # fits(lo) holds, fits(hi) does not
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def outputs_per_call(step: int, tile: int, fits) -> int:
    """Outputs per call: ``step`` when a call of them ``fits``, else the largest multiple of
    ``tile`` below ``step`` that does, and at least one ``tile`` (a call that still does not
    fit is then refused where it is made, naming its sizes)."""
    if step <= tile or fits(step):
        return step
    return max(1, largest((step - 1) // tile, lambda t: fits(t * tile))) * tile


def rows_per_call(batch: int, in_bytes, out_bytes, limit, *, what: str) -> int:
    """The largest ``b <= batch`` with ``in_bytes(b) <= limit`` and ``out_bytes(b) <= limit``.

    ``in_bytes``/``out_bytes`` are the bytes of one call's input and output transfers for a
    call of ``b`` rows (non-decreasing in ``b``). ``limit`` None means no limit. A call of a
    single row that does not fit is an :class:`InputError` naming both sizes: the fixed part
    (weights, parameters) is then too large for one transfer and only a kernel with a larger
    ``max_*`` split or a DMA with a wider length register helps.
    """
    if limit is None:
        return batch
    rows = largest(batch, lambda b: in_bytes(b) <= limit and out_bytes(b) <= limit)
    if rows == 0:
        raise InputError(f"{what}: even one row needs a {in_bytes(1)}-byte input and a {out_bytes(1)}-byte output "
                         f"transfer, more than the DMA's {limit}-byte limit (its length register); use an overlay "
                         f"whose DMA has a wider length register (c_sg_length_width) or smaller operands")
    return rows


def add_u32(a: int, b: int) -> int:
    """Sum of two 32-bit saturation counters, saturating like the register."""
    return min(int(a) + int(b), U32_MAX)


class Tally:
    """Saturation counts, histograms and calls of several kernel calls, merged as one call's."""

    def __init__(self):
        self.sat, self.stats, self.calls = 0, None, 0

    def count(self, sat, stats, calls=1):
        """Add the saturation count ``sat`` and histogram ``stats`` (None: no histogram read)
        of ``calls`` calls."""
        self.sat = add_u32(self.sat, sat)
        if stats is not None:
            self.stats = merge_stats(self.stats, stats)
        self.calls += calls

    def add(self, kern, calls=1):
        """Add ``kern.last_sat_count`` and ``kern.last_stats`` of the ``calls`` calls ``kern``
        just made."""
        self.count(kern.last_sat_count, kern.last_stats, calls)

    def store(self, kern):
        """Leave the totals in ``kern.last_sat_count`` and ``kern.last_stats``."""
        kern.last_sat_count, kern.last_stats = self.sat, self.stats


# ---------------------------------------------------------------------- feature maps
def conv_pad(padding: str, k: int) -> int:
    """Zero padding on each side of a stride-1 ``k x k`` convolution: 'valid' 0, 'same' ``(k-1)/2``."""
    if padding == "valid":
        return 0
    if padding == "same":
        if k % 2 == 0:
            raise InputError(f"padding 'same' needs an odd kernel size, got {k}")
        return (k - 1) // 2
    raise InputError(f"padding = {padding!r}: must be 'same' or 'valid'")


def pad_map(x, pad: int):
    """A new array: ``x`` (..., H, W) with ``pad`` zeros around its last two axes (the
    kernel's padding, done once on the host so that tiles can run 'valid')."""
    x = np.asarray(x)
    xp = np.zeros(x.shape[:-2] + (x.shape[-2] + 2 * pad, x.shape[-1] + 2 * pad), x.dtype)
    xp[..., pad:pad + x.shape[-2], pad:pad + x.shape[-1]] = x
    return xp


def grid(rows, cols):
    """Output rectangles ``(r0, r1, c0, c1)``: every row range by every column range, row-major."""
    return [(r0, r1, c0, c1) for r0, r1 in rows for c0, c1 in cols]


def halo(rect, k: int):
    """The input rectangle that a 'valid' ``k x k`` convolution reads for the outputs ``rect``
    = ``(r0, r1, c0, c1)``: the rectangle and a ``k-1`` halo below and to the right."""
    r0, r1, c0, c1 = rect
    return r0, r1 + k - 1, c0, c1 + k - 1


def halo_window(xp, rect, k: int):
    """The input window (a view) of the padded map ``xp`` (..., H, W) of the outputs ``rect``
    (:func:`halo`)."""
    r0, r1, c0, c1 = halo(rect, k)
    return xp[..., r0:r1, c0:c1]


def stitch(out, rect, y, step: int = 1):
    """Put a tile's outputs ``y`` (..., h, w) into ``out`` (..., H, W) at ``rect``'s corner;
    ``step`` 2 when the outputs are 2x2-pooled (``rect`` in unpooled coordinates)."""
    r0, c0 = rect[0] // step, rect[2] // step
    out[..., r0:r0 + y.shape[-2], c0:c0 + y.shape[-1]] = y
