"""Pruning for the sparse engine: gradual magnitude pruning (Zhu & Gupta's cubic schedule) to a
target sparsity with the zeros balanced, and the zeros held through quantization-aware training.

* :func:`balanced_mask`: every output channel keeps the same number of weights (its largest
  magnitudes), so however output channels are split among units or lanes, each gets the same
  share of zeros and none sets the pace with a denser slice (stricter than the engines need: the
  ``lanes`` bullet below). A depthwise layer (one input channel per group) is balanced over the layer instead: per
  channel, 90% of a 3x3 kernel would leave each channel one weight, and the layer's largest
  magnitudes, wherever they are, keep the same count of zeros with far less damage.
* ``lanes=M`` (:func:`balanced_mask`, :class:`BalancedPruner`): a coarser balance, what the
  engines' timing needs and no more. The layer keeps as many weights as with every row
  balanced (``Z * kept``), its largest magnitudes wherever they are, with no row keeping more
  than ``kept`` rounded up to a multiple of ``M``. The layer kernel broadcasts every non-zero
  coefficient to all its units and partitions the feature map among them (source 003), so
  its units' work does not depend on which output channel holds a weight, only on the
  layer's (pass's) count; the network kernel runs a block's output channels in lanes of ``M``
  multipliers (8 on ``sparse8_pynq-z2``: ``units * tile_w / max_z``), a lane taking at least
  ``ceil(n / M)`` steps for its ``n`` non-zeros, and the cap keeps that bound at the balanced
  rows' ``ceil(kept / M)``.
* ``kernel=(P, B, S)`` (:func:`kernel_mask`, :class:`BalancedPruner`): the zeros in the shape the
  board-sized ``sparse_cluster`` network kernel skips (``net_shape: board``,
  :mod:`hlsnn.engines.sparse_cluster.netsize`: ``P`` output lanes, ``B`` channel banks read ``S``
  times a cycle). That kernel runs a block of ``P`` output channels as a list of steps, each bank
  reading the taps some lane of the block needs, ``S`` a step; a tap costs nothing only when all
  ``P`` lanes' weights there are zero, and a block takes as many steps as its busiest bank needs.
  So the mask zeroes whole columns (one input channel at one kernel position, across the block's
  ``P`` rows), keeps the same count in every bank, and keeps a multiple of ``S`` there.
* :class:`BalancedPruner` prunes the float model, BatchNorm still live (before
  :func:`~hlsnn.train.fold_batchnorm`: folding scales each output channel, so a zero stays zero),
  or a prepared model's sparse-format layers; call :meth:`~BalancedPruner.step` after each
  optimizer step.
* :func:`hold_zeros`: after :func:`~hlsnn.train.prepare`, every zero weight of the sparse-format
  layers is held (``prune_mask``): it is zero after quantization and stays zero after any
  optimizer step (its gradient is zero)."""
from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn

from ..deploy.quantize import kprune
from .allocate import erk_sparsities, is_depthwise


def cubic_schedule(step, target, start, end, initial=0.0):
    """Sparsity at ``step``: ``initial`` before ``start``, ``target`` from ``end``, between them
    ``target + (initial - target) * (1 - t)**3``, ``t`` the fraction of the way."""
    from .checks import NONNEG, SPARSITY
    SPARSITY.check("target", target), SPARSITY.check("initial", initial)
    NONNEG.check("start", start), NONNEG.check("end", end), NONNEG.check("step", step)
    if step <= start:
        return initial
    if step >= end:
        return target
    t = (step - start) / (end - start)
    return target + (initial - target) * (1 - t) ** 3


def balanced_mask(w, sparsity, per_layer=False, lanes=None, row_min=0, row_scale=None):
    """A 0/1 mask of ``w``'s shape that zeroes the ``n = round(sparsity * k)`` smallest
    magnitudes of every output channel (axis 0, ``k`` weights each; halves round up), or with
    ``per_layer`` the ``round(sparsity * w.numel())`` smallest of the whole tensor; ties broken
    by position. (Rounding to nearest, not down, keeps a model's sparsity near the target when
    its rows are short: 90% of 27 weights is 24 zeros rounded down, 88.9%.)

    ``lanes=M`` (not with ``per_layer``): the same count for the layer, ``Z * (k - n)`` kept,
    but the largest magnitudes of the whole tensor, no row keeping more than ``k - n`` rounded
    up to a multiple of ``M`` (nor more than ``k``): a row's ``i``-th largest weight
    (``i`` from 0, ties by position) can be kept only if ``i < cap``, and of those the layer's
    largest are kept (ties by position in the flattened tensor). ``row_min=r`` (with ``lanes``):
    every row's ``min(r, k - n)`` largest are kept first (no output channel left without a
    weight), then the rest as above. ``row_scale`` (with ``lanes`` or ``per_layer``; ``Z``
    factors): the magnitudes are compared as ``|w| * |row_scale|`` (a row's order is unchanged),
    e.g. the following BatchNorm's ``gamma / sqrt(var + eps)``, the factor folding multiplies the
    row by; with ``per_layer`` (a depthwise layer: one row a channel) the layer's smallest scaled
    magnitudes are zeroed (ties by position). With balanced rows it changes nothing."""
    from .checks import COUNT, COUNT1, FRACTION
    FRACTION.check("sparsity", sparsity), COUNT.check("row_min", row_min)
    if lanes is not None:
        COUNT1.check("lanes", lanes)
    rows = w.detach().reshape(1 if per_layer else w.shape[0], -1)
    k = rows.shape[1]
    n_zero = min(k, int(math.floor(sparsity * k + 0.5 + 1e-9)))
    if lanes is not None and not per_layer:
        if int(lanes) != lanes or lanes < 1:
            raise ValueError(f"lanes = {lanes!r}: a whole number of multipliers per lane, at least 1")
        kept = k - n_zero
        cap = min(k, -(-kept // int(lanes)) * int(lanes))
        mag = rows.abs()
        if row_scale is not None:
            mag = mag * torch.as_tensor(row_scale, dtype=mag.dtype).detach().abs().reshape(-1, 1)
        rank = torch.empty_like(mag, dtype=torch.long)
        rank.scatter_(1, torch.argsort(-mag, dim=1, stable=True),
                      torch.arange(k, device=mag.device).expand(rows.shape[0], k).contiguous())
        floor = min(int(row_min), kept)
        score = torch.where(rank < cap, mag, torch.full_like(mag, -1.0))
        score = torch.where(rank < floor, torch.full_like(mag, float("inf")), score).reshape(-1)
        keep = torch.argsort(-score, stable=True)[:rows.shape[0] * kept]
        flat = torch.zeros_like(score)
        flat[keep] = 1.0
        return flat.reshape(w.shape)
    mask = torch.ones_like(rows)
    if n_zero:
        mag = rows.abs()
        if per_layer and row_scale is not None:
            scale = torch.as_tensor(row_scale, dtype=mag.dtype).detach().abs().reshape(-1, 1)
            mag = (w.detach().abs().reshape(w.shape[0], -1) * scale).reshape(1, -1)
        idx = torch.argsort(mag, dim=1, stable=True)[:, :n_zero]
        mask.scatter_(1, idx, 0.0)
    return mask.reshape(w.shape)


def kernel_of(accel):
    """``(P, B, S)`` of the board-sized ``sparse_cluster`` network kernel of the accel config
    ``accel`` (a path, or a name of ``configs/accel``): its output lanes, channel banks and
    reads a bank a cycle as the sizer chose them (:mod:`hlsnn.engines.sparse_cluster.netsize`),
    so the pruner prunes in the shape that kernel skips. A ValueError for a config that is not
    such a kernel."""
    from pathlib import Path
    from ..config import load_config
    from ..engines.sparse_cluster.network.kernel import sized
    from ..paths import CONFIGS_DIR
    path = Path(str(accel))
    if not path.suffix:
        path = CONFIGS_DIR / "accel" / f"{accel}.yaml"
    if not path.is_file():
        raise ValueError(f"{accel!r}: no such accel config (a YAML path, or a name in configs/accel)")
    cfg = load_config(path)
    sz = sized(cfg.params) if cfg.engine == "sparse_cluster" else None
    if not sz:
        raise ValueError(f"{accel!r}: its network kernel is not sparse_cluster's sized to the board ({cfg.engine}"
                         f"{', no net_shape: board' if cfg.engine == 'sparse_cluster' else ''}); the pruner's "
                         "shape is that kernel's (e.g. sparse8net_pynq-z2)")
    return sz["net_lanes"], sz["net_banks"], sz["net_sub"]


def parse_kernel(text):
    """``P,B,S`` (``--kernel-balance``): three whole numbers >= 1, the board-sized kernel's
    lanes, banks and reads a bank a cycle (:func:`kernel_mask`), or an accel config whose
    board-sized kernel gives them (:func:`kernel_of`); a ValueError otherwise."""
    parts = str(text).split(",")
    if len(parts) == 1 and not parts[0].strip().isdigit():
        return kernel_of(parts[0].strip())
    try:
        vals = tuple(int(v) for v in parts)
    except ValueError:
        vals = ()
    if len(vals) != 3 or min(vals) < 1:
        raise ValueError(f"{text!r}: P,B,S, the kernel's output lanes, channel banks and reads a bank a cycle, "
                         "three whole numbers >= 1 (16,16,2 for sparse8net_pynq-z2), or such an accel config")
    return vals


def kernel_keep(n, sparsity, sub):
    """The columns a bank of ``n`` keeps at ``sparsity`` (:func:`kernel_mask`): ``k = round((1 -
    sparsity) * n)`` (halves to even) rounded down to a multiple of ``sub``, at least ``sub``,
    at most ``n``. A step reads ``sub`` of a bank's columns: a kept column beyond a multiple would
    cost a whole step, and fewer than ``sub`` would save none. The rule is the deployment's
    (:func:`hlsnn.deploy.quantize.kprune.keep`, which prunes without torch)."""
    return kprune.keep(n, sparsity, sub)


def kernel_banks(shape, banks, unfold=False):
    """The bank of every column ``(c, ky, kx)`` of a conv's weights of ``shape`` (Z, C, kh, kw)
    in the board-sized kernel (:func:`kernel_mask`): channel ``c`` in bank ``c mod B``; with
    ``unfold`` (the stem whose taps the image load unfolds into banks,
    :func:`hlsnn.engines.network.kernel.unfold_of`) ``c + C * kx``. An int tensor (C, kh, kw):
    :func:`hlsnn.deploy.quantize.kprune.banks`'s."""
    return torch.as_tensor(np.ascontiguousarray(kprune.banks(shape, banks, unfold)))


def kernel_mask(w, sparsity, lanes, banks, sub, unfold=False, row_scale=None):
    """A 0/1 mask of ``w``'s shape (a conv's (Z, C, kh, kw), a dense layer's (Z, C)) in the shape
    the board-sized sparse kernel skips (the module docstring's ``kernel`` bullet): per block of
    ``lanes`` output channels (rows ``[zb * P, zb * P + P)``) and per bank (:func:`kernel_banks`),
    the bank's :func:`kernel_keep` columns of the largest L2 norm over the block's rows are kept
    and the others zeroed in every row of the block (ties by position). ``row_scale`` (``Z``
    factors): the rows are compared as ``w * row_scale`` (what folding the next BatchNorm makes
    of them)."""
    from .checks import COUNT1, FRACTION
    FRACTION.check("sparsity", sparsity)
    lanes, banks, sub = (COUNT1.check(n, v) for n, v in (("lanes", lanes), ("banks", banks), ("sub", sub)))
    w4 = w.detach().reshape(w.shape[0], w.shape[1], *(w.shape[2:] if w.dim() == 4 else (1, 1)))
    mag = w4.double() ** 2
    if row_scale is not None:
        mag = mag * torch.as_tensor(row_scale, dtype=mag.dtype).detach().reshape(-1, 1, 1, 1) ** 2
    bank = kernel_banks(w4.shape, banks, unfold).reshape(-1)
    mask = torch.zeros_like(w4)
    for z0 in range(0, w4.shape[0], lanes):
        score = mag[z0:z0 + lanes].sum(0).reshape(-1)
        keep = torch.zeros_like(score, dtype=torch.bool)
        for b in torch.unique(bank).tolist():
            cols = torch.nonzero(bank == b).reshape(-1)
            k = kernel_keep(len(cols), sparsity, sub)
            keep[cols[torch.argsort(-score[cols], stable=True)[:k]]] = True
        mask[z0:z0 + lanes] = keep.reshape(w4.shape[1:]).to(mask.dtype)
    return mask.reshape(w.shape)


def _targets(model, names, formats):
    from .prepare import _QMixin
    out = []
    for n, m in model.named_modules():
        if not isinstance(m, (nn.Conv2d, nn.Linear)):
            continue
        if names is not None:
            if n in names:
                out.append((n, m))
        elif not isinstance(m, _QMixin) or formats is None or m.fmt in formats:
            out.append((n, m))
    return out


class BalancedPruner:
    """Gradual magnitude pruning of ``model``'s ``Conv2d`` / ``Linear`` layers to ``target`` on
    :func:`cubic_schedule` from step ``start`` to ``end`` (masks recomputed every ``every``
    steps, the zeros re-applied at every step); ``sparsities`` (``{name: sparsity}``, e.g.
    :func:`hlsnn.train.erk_sparsities`) or ``allocation="erk"`` (that rule at ``target``) gives
    each layer its own final sparsity instead, each reached on the schedule scaled by
    ``sparsity / target``. ``names``: the module names to prune (default:
    every plain ``Conv2d`` / ``Linear`` and, in a prepared model, the layers whose format is in
    ``formats``). Call :meth:`step` after each ``optimizer.step()``; :meth:`apply` prunes at
    once. Depthwise layers are balanced over the layer (:func:`balanced_mask`); ``lanes=M``
    balances the other layers by lanes of ``M`` multipliers instead of by rows (the module
    docstring, :func:`balanced_mask`), ``row_min`` weights a row kept at least;
    ``lane_scale="folded"`` compares a conv's weights across rows as folding will scale them (by
    the BatchNorm right after it: ``|w| * |gamma| / sqrt(var + eps)``), not as raw magnitudes,
    which BatchNorm makes arbitrary per row (depthwise layers excepted: ``depthwise_scale``; with
    ``kernel`` too); ``kernel=(P, B, S)`` prunes the other layers in the shape the board-sized
    sparse kernel skips (:func:`kernel_mask`), ``unfold`` naming the layers whose taps the
    kernel's image load unfolds into banks (default: the model's first ``Conv2d``, when it has
    groups 1 and its ``C * kw`` channels fit ``B`` banks: the stem of
    :func:`hlsnn.engines.network.kernel.unfold_of`);
    ``depthwise_scale="folded"`` does the same across the channels of a depthwise layer, which
    is balanced over the layer (its channels' raw scales are as arbitrary, so a channel whose
    BatchNorm amplifies small weights loses them first by raw magnitude)."""

    def __init__(self, model, target, start, end, *, names=None, formats=("sparse",), every=1, sparsities=None,
                 allocation="uniform", lanes=None, row_min=0, lane_scale="weight", depthwise_scale="weight",
                 kernel=None, unfold=None):
        from .checks import COUNT, COUNT1, SPARSITY, choice
        SPARSITY.check("target", target)
        start, end, every = COUNT.check("start", start), COUNT.check("end", end), COUNT1.check("every", every)
        if lanes is not None:
            COUNT1.check("lanes", lanes)
        COUNT.check("row_min", row_min)
        if row_min and lanes is None:
            raise ValueError(f"row_min = {row_min!r}: a whole number of weights >= 0, with lanes")
        choice("allocation", allocation, ("uniform", "erk"))
        for name, s in dict(sparsities or {}).items():
            SPARSITY.check(f"sparsities[{name!r}]", s)
        if kernel is not None:
            if lanes is not None or row_min:
                raise ValueError("kernel = (P, B, S): not with lanes or row_min (a column is pruned across a block's rows)")
            if len(tuple(kernel)) != 3:
                raise ValueError(f"kernel = {kernel!r}: (lanes, banks, reads a bank a cycle), three whole numbers >= 1")
            kernel = tuple(COUNT1.check(n, v) for n, v in zip(("kernel lanes", "kernel banks", "kernel reads"), kernel))
        self.kernel = kernel
        self.lanes = None if lanes is None else int(lanes)
        self.row_min = int(row_min)
        if lane_scale not in ("weight", "folded"):
            raise ValueError(f"lane_scale = {lane_scale!r}: one of weight, folded")
        if depthwise_scale not in ("weight", "folded"):
            raise ValueError(f"depthwise_scale = {depthwise_scale!r}: one of weight, folded")
        self.lane_folded, self.depthwise_folded = lane_scale == "folded", depthwise_scale == "folded"
        self.bn = _following_batchnorm(model) if self.lane_folded or self.depthwise_folded else {}
        self.model, self.target, self.start, self.end, self.every = model, float(target), start, end, max(1, every)
        self.named = _targets(model, None if names is None else set(names), formats)
        self.layers = [m for _, m in self.named]
        # each layer's own final sparsity (non-uniform: hlsnn.train.allocate), reached on the same
        # schedule scaled, or the target for every layer
        if allocation not in ("uniform", "erk"):
            raise ValueError(f"allocation = {allocation!r}: one of uniform, erk")
        if allocation == "erk" and sparsities is None:
            sparsities = erk_sparsities(self.named, self.target)
        given = dict(sparsities or {})
        missing = [n for n, _ in self.named if n not in given] if sparsities is not None else []
        if missing:
            raise ValueError(f"sparsities: no entry for the pruned layer(s) {missing}")
        self.final = {m: float(given.get(n, target)) for n, m in self.named}
        if unfold is None and kernel is not None:
            first = next((m for m in model.modules() if isinstance(m, nn.Conv2d)), None)
            self.unfold = {first} if first is not None and first.groups == 1 and \
                first.in_channels * first.kernel_size[1] <= kernel[1] and first.kernel_size[1] > 1 else set()
        else:
            mods = dict(model.named_modules())
            self.unfold = {mods[n] for n in (unfold or ())}
        self.masks = {}
        self.n = 0
        self.sparsity = 0.0

    def step(self):
        s = cubic_schedule(self.n, self.target, self.start, self.end)
        if self.n % self.every == 0 or self.n >= self.end or not self.masks:
            self.apply(s)
        else:
            self._hold()
        self.n += 1

    @torch.no_grad()
    def apply(self, sparsity):
        self.sparsity = sparsity
        frac = sparsity / self.target if self.target else 0.0
        for m in self.layers:
            s = self.final[m] if sparsity == self.target else self.final[m] * frac
            if self.kernel is not None and not is_depthwise(m):
                self.masks[m] = kernel_mask(m.weight, s, *self.kernel, unfold=m in self.unfold,
                                            row_scale=self._row_scale(m))
                continue
            self.masks[m] = balanced_mask(m.weight, s, per_layer=is_depthwise(m), lanes=self.lanes,
                                          row_min=self.row_min, row_scale=self._row_scale(m))
        self._hold()

    def _row_scale(self, m):
        """The factor folding will multiply each row of ``m`` by (``lane_scale="folded"``, for a
        depthwise ``m`` ``depthwise_scale="folded"``: the BatchNorm right after it,
        ``gamma / sqrt(running_var + eps)``), or None."""
        bn = self.bn.get(m)
        if bn is None or not (self.depthwise_folded if is_depthwise(m) else self.lane_folded):
            return None
        return bn.weight.detach() / torch.sqrt(bn.running_var + bn.eps)

    @torch.no_grad()
    def _hold(self):
        for m in self.layers:
            m.weight.mul_(self.masks[m])
            if hasattr(m, "prune_mask"):
                m.prune_mask = self.masks[m].clone()

    def report(self):
        """Per layer ``(name, zeros per output channel min, max, sparsity)``."""
        out = []
        for n, m in self.named:
            z = (m.weight.detach() == 0).reshape(m.weight.shape[0], -1).sum(1)
            out.append((n, int(z.min()), int(z.max()), round(float((m.weight == 0).float().mean()), 4)))
        return out


def _following_batchnorm(model):
    """``{conv: bn}`` for every ``Conv2d`` directly followed by a ``BatchNorm2d`` in an
    ``nn.Sequential`` (the pairs :func:`~hlsnn.train.fold_batchnorm` folds)."""
    out = {}
    for mod in model.modules():
        if isinstance(mod, nn.Sequential):
            ms = list(mod._modules.values())
            for c, bn in zip(ms, ms[1:]):
                if isinstance(c, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                    out[c] = bn
    return out


def hold_zeros(model, formats=("sparse",)):
    """Hold the zero weights of ``model``'s quantized layers whose format is in ``formats``
    (None: every quantized layer) at zero from now on: ``prune_mask`` (applied before the
    weight quantizer) is set to the weights' non-zeros, and a gradient hook zeroes the gradient
    of the held weights, so no optimizer step moves them. Returns the model."""
    from .prepare import quantized_layers
    for _, m in quantized_layers(model):
        if formats is not None and m.fmt not in formats:
            continue
        with torch.no_grad():
            m.prune_mask = (m.weight != 0).to(m.weight.dtype)
        if not getattr(m, "_hlsnn_hold_hook", False):
            m.weight.register_hook(lambda g, m=m: g * m.prune_mask.to(g.dtype))
            m._hlsnn_hold_hook = True
    return model
