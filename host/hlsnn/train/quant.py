"""Fake quantizers in torch, each the rule of an hlsnn format (forward values) with a
straight-through estimator (backward):

* :class:`ShiftWeight`: power-of-two / two-hot weights (:mod:`hlsnn.formats.shift`): the
  magnitudes of the format's code table (:func:`hlsnn.formats.shift_codes.table`, seed 000's
  code sets), nearest magnitude with ties to the smaller (``torch.bucketize`` on the table's
  midpoints is the count of midpoints below, the quantizer's own rule), one power-of-two scale
  ``2**-F`` per tensor or per output channel. ``F`` is learnable: a float parameter rounded in
  the forward pass (STE), initialised to the deploy rule (the largest ``F`` at which the largest
  weight fits the top magnitude).
* :func:`bfp_fake` / :class:`BfpWeight`: block floating point (:mod:`hlsnn.formats.bfp`):
  shared exponent ``floor(log2 amax) - (m - 2)`` per block, mantissa rounded half to even and
  saturated to ``m`` signed bits.
* :class:`FixedWeight`: the int8 weights of the ``fixed`` / ``sparse`` formats, one
  power-of-two scale ``largest_frac(max |w|, 127)`` per tensor or per output channel
  (``hlsnn.deploy.quantize.quant.weight_fracs``).
* :func:`fixed_fake` / :class:`FixedAct`: dynamic fixed point (source 002): the radix point
  chosen by DETERMINE on the statistics of the values being converted *now* (E1, the
  current-statistics rule: :func:`hlsnn.deploy.quantize.quant.host_radix`), round half to even,
  saturation; unsigned formats clip negatives to 0.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from ..deploy.quantize.quant import host_radix
from ..engines.common import largest_frac
from ..formats import shift_codes


def ste_round(x):
    """``round(x)`` forward (half to even), identity backward."""
    return x + (torch.round(x) - x).detach()


def _deploy_scale_exponent(amax, max_mag):
    """The deploy quantizer's scale rule: largest integer F with ``amax * 2**F <= max_mag``."""
    a = np.asarray(amax, np.float64)
    L = int(max_mag).bit_length()
    f, e = np.frexp(a)
    F = L - e.astype(np.int64) - (np.ldexp(f, L) > max_mag)
    return np.where(a == 0, 0, F).astype(np.float64)


class ShiftWeight(nn.Module):
    """Fake quantization of a weight tensor to ``mode`` (``"pot"`` or ``"twohot"``) codes with
    ``exp_bits`` exponent bits (and ``delta`` for two-hot), scale per tensor (``per_channel``
    False) or per output channel (axis 0). ``max_code`` (an accel config's code limit, as
    ``shift8net_pynq-z2``'s 128 for its DSP banks): only the magnitudes up to it, the largest
    weight scaled to it, as :func:`hlsnn.formats.shift.quantize_twohot` does at deployment."""

    def __init__(self, w, mode, exp_bits, delta=0, per_channel=False, learn_scale=True, max_code=None):
        super().__init__()
        if mode not in ("pot", "twohot"):
            raise ValueError(f"mode = {mode!r}: one of pot, twohot")
        self.mode, self.exp_bits, self.delta, self.per_channel = mode, int(exp_bits), int(delta), bool(per_channel)
        tab = shift_codes.table(mode, self.exp_bits, self.delta if mode == "twohot" else 0,
                                None if max_code is None else int(max_code))
        self.max_mag = float(tab.max_mag)
        self.register_buffer("mags", torch.tensor(tab.mags, dtype=torch.float32))
        self.register_buffer("mids", torch.tensor((tab.mags[:-1] + tab.mags[1:]) / 2, dtype=torch.float32))
        wd = w.detach().double().cpu().numpy()
        amax = np.abs(wd.reshape(wd.shape[0], -1)).max(axis=1) if per_channel else np.abs(wd).max()
        F = _deploy_scale_exponent(amax, self.max_mag)
        self.neg_log2_scale = nn.Parameter(torch.tensor(F, dtype=torch.float32).reshape(-1),
                                           requires_grad=bool(learn_scale))

    def exponent(self):
        """The scale exponents F (a float tensor of integers, one or one per output channel)."""
        return torch.round(self.neg_log2_scale.detach())

    def codes(self, u):
        """Nearest magnitude of ``|u|`` (ties to the smaller), signed."""
        k = torch.bucketize(u.abs(), self.mids, right=False)
        return torch.sign(u) * self.mags[k]

    def forward(self, w):
        F = ste_round(self.neg_log2_scale)
        shape = (-1,) + (1,) * (w.dim() - 1)
        scale = torch.pow(2.0, F).reshape(shape) if self.per_channel else torch.pow(2.0, F[0])
        u = torch.clamp(w * scale, -self.max_mag, self.max_mag)
        uq = u + (self.codes(u.detach()) - u).detach()
        return uq / scale


def bfp_fake(x, mantissa_bits, exponent_bits=8, dim=-1):
    """BFP fake quantization along ``dim`` (None: one block for the whole tensor) with
    half-to-even rounding, STE backward."""
    xd = x.detach()
    amax = xd.abs().amax() if dim is None else xd.abs().amax(dim=dim, keepdim=True)
    emin, emax = -(1 << (exponent_bits - 1)), (1 << (exponent_bits - 1)) - 1
    _, e2 = torch.frexp(amax.double())
    e = torch.where(amax == 0, torch.full_like(e2, emin), torch.clamp(e2 - 1 - (mantissa_bits - 2), emin, emax))
    unit = torch.pow(2.0, e.double())
    lo, hi = -(1 << (mantissa_bits - 1)), (1 << (mantissa_bits - 1)) - 1
    q = (torch.clamp(torch.round(xd.double() / unit), lo, hi) * unit).to(x.dtype)
    return x + (q - xd)


class BfpWeight(nn.Module):
    """BFP fake quantization of a weight (one exponent per output row with ``row`` exponents, as
    ``bfp_systolic``'s ``weight_exponent: row``, else one for the tensor)."""

    def __init__(self, mantissa_bits, exponent_bits=8, per_row=True):
        super().__init__()
        self.m, self.e, self.per_row = int(mantissa_bits), int(exponent_bits), bool(per_row)

    def forward(self, w):
        if not self.per_row:
            return bfp_fake(w, self.m, self.e, None)
        return bfp_fake(w.reshape(w.shape[0], -1), self.m, self.e, -1).reshape(w.shape)


def _round(v, rounding):
    if rounding == "nearest_even":
        return torch.round(v)
    if rounding == "nearest_away":
        return torch.sign(v) * torch.floor(v.abs() + 0.5)
    if rounding == "truncate":
        return torch.floor(v)
    raise ValueError(f"rounding = {rounding!r}: one of nearest_even, nearest_away, truncate")


def fixed_fake(x, f, bits, signed, rounding="nearest_even"):
    """``x`` at radix ``f`` (an int, or a tensor that broadcasts against ``x``) in ``bits``
    (signed or unsigned) fixed point, rounded with
    ``rounding`` (``nearest_even``, ``nearest_away``, ``truncate``: floor), saturated; STE
    backward (zero gradient where it saturated)."""
    lo = -(1 << (bits - 1)) if signed else 0
    hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    unit = torch.pow(2.0, -f.double()) if torch.is_tensor(f) else 2.0 ** -f      # f: one, or one per element
    xd = x.detach().double()
    q = (torch.clamp(_round(xd / unit, rounding), lo, hi) * unit).to(x.dtype)
    inside = ((xd / unit) >= lo) & ((xd / unit) <= hi)
    return torch.where(inside, x + (q - x.detach()), q)


class FixedWeight(nn.Module):
    """int8 weights (the ``fixed``/``sparse`` formats): ``F = largest_frac(max |w|, 127)`` for
    the tensor, or (``per_channel``, the deploy's ``weight_scale: channel``) one ``F`` per
    output channel (axis 0) by :func:`hlsnn.deploy.quantize.quant.weight_fracs`' rule: at most
    ``CHANNEL_FRAC_LIMIT`` bits finer than the tensor's, and a channel whose codes are all zero
    (a pruned or dead unit) takes the tensor's, as the deploy finds it on the exported codes."""

    def __init__(self, per_channel=False):
        super().__init__()
        self.per_channel = "auto" if per_channel == "auto" else bool(per_channel)   # auto: weight_fracs' rule

    def fracs(self, w):
        """The weights' radix: an int, or a float64 tensor of one per output channel."""
        from ..deploy.quantize.quant import weight_fracs
        wd = w.detach().double().cpu().numpy()
        f = weight_fracs(wd, self.per_channel, 127)
        if np.ndim(f) == 0:
            return int(f)
        whole = largest_frac(float(np.abs(wd).max(initial=0.0)), 127)
        rows = wd.reshape(wd.shape[0], -1)
        codes = np.clip(np.rint(np.ldexp(rows, f[:, None])), -128, 127)
        f = np.where(np.any(codes != 0, axis=1), f, whole)          # all-zero codes: the tensor's radix
        return torch.tensor(f, dtype=torch.float64)

    def forward(self, w):
        f = self.fracs(w)
        if torch.is_tensor(f):
            f = f.reshape((-1,) + (1,) * (w.dim() - 1))
        return fixed_fake(w, f, 8, True)


class FixedAct(nn.Module):
    """Dynamic fixed-point activations (source 002, E1): the radix point of the conversion from
    the current batch's own statistics (DETERMINE, ``overflow_ratio``), in training and eval
    alike; ``last_f`` keeps the radix of the last call. A static deployment's radix
    (:attr:`frozen`, set by :func:`hlsnn.train.calibrate`) replaces it in eval mode, and in training
    too when :attr:`frozen_in_training` (static-radix quantization-aware training: the fine-tuning
    sees the radixes the deployment runs with, not each batch's own)."""

    def __init__(self, bits, signed, overflow_ratio=0.0, rounding="nearest_even", lse=None):
        super().__init__()
        self.bits, self.signed, self.overflow_ratio = int(bits), bool(signed), float(overflow_ratio)
        self.rounding = rounding
        self.lse = lse          # radix: lse (hlsnn.deploy.quantize.radix_lse): the deployment's host rounding, else None
        self.last_f = None
        self.frozen = None      # a static deployment's calibrated radix (hlsnn.train.calibrate), used in eval
        self.frozen_in_training = False     # ... and in training mode too (calibrate(..., in_training=True))
        self.calibrated_on = None   # the number of images :attr:`frozen` was calibrated on

    def forward(self, x, stats_of=None, lse=True):
        """``x`` converted; the radix from ``stats_of`` (default ``x``): the values the engine's
        statistics unit sees when they are more than the outputs kept (``sparse_cluster``'s
        stride-1 form of a strided convolution). With :attr:`lse` set (and ``lse`` true: the
        caller's exceptions, :func:`hlsnn.deploy.quantize.radix_lse.wanted_out`), DETERMINE's radix or up
        to 3 bits finer by least squared error on those values, as the deployment chooses it."""
        signed = self.signed
        fmt = getattr(x, "_hlsnn_fmt", None)
        if fmt is not None and fmt[1:] == (self.bits, signed):
            # already in this format (an engine layer's output, moved only): passed as it is,
            # at its own radix, as the deployment passes an activation in the engine's format
            self.last_f = fmt[0]
            return x
        if self.frozen is not None and (not self.training or self.frozen_in_training):
            self.last_f = self.frozen
        else:
            v = (x if stats_of is None else stats_of).detach().double().cpu().numpy()
            self.last_f = int(host_radix(v, self.bits, signed, self.overflow_ratio))
            if self.lse is not None and lse:
                from ..deploy.quantize import radix_lse
                self.last_f = int(radix_lse.input_radix(v, self.last_f, self.bits, signed, self.lse))
        return fixed_fake(x, self.last_f, self.bits, signed, self.rounding)


def tag(y, fmt):
    """``y`` carrying its fixed-point format ``(F, bits, signed)`` (as ``Act.fmt`` of the deploy path)."""
    y._hlsnn_fmt = fmt
    return y
