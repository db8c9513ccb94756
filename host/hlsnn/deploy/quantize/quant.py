"""The host side of a deployment's number formats (the rules: :mod:`hlsnn.deploy.run.runner`'s
docstring): activations with their fixed-point format (:class:`Act`), DETERMINE on host
values (:func:`host_radix`), conversion to fixed point (:func:`to_fixed`), the quantized host
mode (:class:`HostQuant`) and the weight preparations every format shares (:func:`prune`,
:func:`weight_fracs`). :mod:`hlsnn.deploy.run.runner` re-exports every name."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...engines.common import largest_frac, round_into, times_pow2
from ...errors import InputError
from ...formats import fixed
from ...primitives import msb_histogram


@dataclass
class Act:
    """An activation tensor: exact float64 ``values`` and their fixed-point format
    ``(F, bits, signed)`` or ``None``."""
    values: np.ndarray
    fmt: tuple = None

    def ints(self):
        return np.rint(times_pow2(self.values, self.fmt[0])).astype(np.int64)


def host_radix(values, bits, signed, overflow_ratio=0.0):
    """DETERMINE (source 002) on host-side values: the fractional bits ``F`` of a
    ``bits``-bit (signed or unsigned) format for ``values``. The values are first written as
    integers at a radix ``G`` fine enough that the largest has 52 significant bits, then
    ``determine`` runs on their MSB histogram as on any wide result. (That is the ``h_msb``
    and ``n`` of ``acquire``'s statistics, all that ``determine`` reads: their MSBs and LSBs
    are at most 52, inside its 64 bins.)"""
    v = np.asarray(values, np.float64)
    amax = max(-float(v.min()), float(v.max())) if v.size else 0.0
    if not np.isfinite(amax):
        raise InputError(f"{int(np.count_nonzero(~np.isfinite(v)))} value(s) are NaN or infinite: a fixed-point "
                         f"format holds finite values only")
    if amax == 0:
        return bits - 1
    g = 52 - int(np.floor(np.log2(amax))) - 1
    wide = np.rint(times_pow2(v, g)).astype(np.int64)
    st = fixed.Stats.from_histogram(msb_histogram(wide, 64), wide.size)
    return fixed.determine(st, g, bits, overflow_ratio=overflow_ratio, signed=signed, f_min=-64, f_max=64)


#: A channel's own weight scale is at most 2**CHANNEL_FRAC_LIMIT finer than the tensor's: a
#: channel of tiny weights (a dead unit) would otherwise get a radix at which its bias, in
#: accumulator units, overflows the kernel's bias field.
CHANNEL_FRAC_LIMIT = 8


#: ``weight_scale: auto`` (a ``fixed`` format's default): one scale per output channel where some
#: channel's scale would be at least this many bits finer than the tensor's, else one per tensor
AUTO_CHANNEL_BITS = 3


def weight_fracs(w, per_channel, limit):
    """Fractional bits of int weights, ``largest_frac(max |w|, limit)``: one for the whole
    tensor, or (``per_channel``) one per output channel (axis 0), at most
    :data:`CHANNEL_FRAC_LIMIT` above the tensor's; an all-zero channel takes the tensor's.
    ``per_channel="auto"``: the per-channel ones where some channel's is at least
    :data:`AUTO_CHANNEL_BITS` above the tensor's (a channel whose largest weight is 8 times
    below the tensor's would keep at most 4 of int8's 7 magnitude bits), else the tensor's."""
    w = np.asarray(w, np.float64)
    whole = largest_frac(float(np.abs(w).max(initial=0.0)), limit)
    if not per_channel:
        return whole
    amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1, initial=0.0)
    f = np.array([min(largest_frac(float(a), limit), whole + CHANNEL_FRAC_LIMIT) if a > 0 else whole
                  for a in amax], np.int64)
    if isinstance(per_channel, str) and per_channel == "auto" and int(f.max(initial=whole)) - whole < AUTO_CHANNEL_BITS:
        return whole
    return f


def to_fixed(values, f, bits, signed, rounding):
    """``values`` as ``bits``-bit integers at radix ``f`` (CONVERT with ``rounding``, then
    saturation to the format's range; an unsigned format clips negatives to 0). The values
    are exact dyadic rationals, so they are first written exactly at a radix 24 bits finer.

    The rule is :func:`to_fixed_reference` (integers and ``fixed.convert``); this computes
    the same bits in float64 (tested equal): ``w = rint(values * 2**g)`` is the reference's
    wide integer, held exactly while ``|w| < 2**52`` (else the reference runs); ``w * 2**-s``
    (``s = g - f >= 24``) is exact (a power-of-two scale of an integer of at most 53 bits,
    far above the subnormals), and rounding it with ``rounding`` (:func:`round_into`: rint,
    floor, or half away from zero) is ``shift_round_sat``'s right shift with that rounding;
    saturating to the format's range is the reference's clip (its ``bits + 1``-bit CONVERT of
    an unsigned format then the clip to ``[0, 2**bits - 1]`` is one clip)."""
    if rounding not in ("nearest_even", "nearest_away", "truncate"):
        return to_fixed_reference(values, f, bits, signed, rounding)        # its error
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    lo = -(1 << (bits - 1)) if signed else 0
    g = max(f + 24, 0)
    v = times_pow2(np.asarray(values, np.float64), g)
    np.rint(v, out=v)
    if v.size and not (v.max() < 2.0 ** 52 and v.min() > -2.0 ** 52):       # (a NaN fails both)
        return to_fixed_reference(values, f, bits, signed, rounding)
    times_pow2(v, -(g - f), out=v)
    round_into(v, rounding, v)
    np.clip(v, lo, hi, out=v)
    return v.astype(np.int64)


def to_fixed_reference(values, f, bits, signed, rounding):
    """:func:`to_fixed`'s rule in integers: the values written exactly at radix ``g = max(f +
    24, 0)`` as int64, CONVERT (``fixed.convert``: ``shift_round_sat`` by ``g - f``) to
    ``bits`` (unsigned: ``bits + 1``) signed bits, then clipped to the format's range."""
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    lo = -(1 << (bits - 1)) if signed else 0
    g = max(f + 24, 0)
    bad = int(np.count_nonzero(~np.isfinite(np.asarray(values, np.float64))))
    if bad:
        raise InputError(f"{bad} value(s) are NaN or infinite: a fixed-point format holds finite values only")
    wide = np.rint(np.ldexp(np.asarray(values, np.float64), g))
    if wide.size and not (np.abs(wide) < float(fixed.WIDE_LIMIT)).all():      # never a cast of 2**84 to int64
        big = float(wide.flat[int(np.argmax(np.abs(wide)))])
        raise InputError(f"value {big:g} at radix {g} is out of range: wide results must be integers with "
                         f"|v| < 2**62")
    q, _ = fixed.convert(wide.astype(np.int64), g, f, bits + (0 if signed else 1), rounding=rounding)
    return np.clip(q, lo, hi)


def prune(w, fraction):
    """``w`` with the ``round(fraction * size)`` smallest magnitudes set to zero (ties broken
    by position, so the count is exact)."""
    w = np.array(w, np.float64)
    n = int(round(fraction * w.size))
    if n:
        idx = np.argsort(np.abs(w).reshape(-1), kind="stable")[:n]
        w.reshape(-1)[idx] = 0.0
    return w
