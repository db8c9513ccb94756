"""Non-uniform sparsity for :class:`~hlsnn.train.BalancedPruner`: how many zeros each layer
gets so that the model as a whole reaches a target weight sparsity (counted over every weight
the pruner prunes, the engine's weights), with the small layers pruned less and the big ones
more.

* :func:`erk_sparsities`: the Erdős–Rényi-Kernel rule (Evci et al., "Rigging the Lottery",
  2020): a layer's density is proportional to ``sum(shape) / prod(shape)`` of its weight
  (``(Z, C/g, kh, kw)``, a ``Linear`` ``(N, K)``), scaled so the densities reach the target, a
  layer that would be denser than ``max_density`` held there. ``fixed`` names layers whose
  sparsity is given.
* Each layer's sparsity is then a whole number of zeros per balanced unit (an output channel's
  row, or a depthwise layer as one unit, as :func:`~hlsnn.train.balanced_mask` balances it),
  and zeros are added one per unit, where the density is furthest above the rule's, until the
  model's sparsity is at least the target (rounding per row alone can fall short: 90% of 16
  weights is 14 zeros, 87.5%). Every row keeps ``min_keep`` weights.
* :func:`overall_sparsity`: the zeros over the weights of the named layers.
"""
from __future__ import annotations

import math

from torch import nn


def is_depthwise(layer):
    """A ``Conv2d`` with one input channel per group and more than one group."""
    return isinstance(layer, nn.Conv2d) and layer.groups > 1 and layer.groups == layer.in_channels


def _units(layer):
    """``(units, weights per unit)``: the balanced units of :func:`balanced_mask`."""
    w = layer.weight
    if is_depthwise(layer):
        return 1, w.numel()
    return w.shape[0], w.numel() // w.shape[0]


def erk_sparsities(named, target, *, fixed=None, max_density=1.0, min_keep=1, power=1.0):
    """``{name: sparsity}`` for the ``(name, layer)`` pairs ``named`` (Conv2d / Linear) so that
    the zeros, whole per balanced unit, are at least ``target`` of all their weights; ``fixed``
    ``{name: sparsity}`` layers keep theirs (rounded to whole zeros per unit). ``power`` bends
    the rule (0: uniform, 1: ERK)."""
    from .checks import COUNT, FRACTION, NONNEG, SPARSITY, Range
    SPARSITY.check("target", target), NONNEG.check("power", power), COUNT.check("min_keep", min_keep)
    Range(0, 1, lo_open=True).check("max_density", max_density)
    fixed = dict(fixed or {})
    for name, s in fixed.items():
        FRACTION.check(f"fixed[{name!r}]", s)
    unknown = set(fixed) - {n for n, _ in named}
    if unknown:
        raise ValueError(f"fixed sparsity for {sorted(unknown)}: not among the pruned layers "
                         f"({', '.join(n for n, _ in named)})")
    if not 0.0 <= target < 1.0:
        raise ValueError(f"target = {target}: a sparsity in [0, 1)")
    info = {n: _units(m) for n, m in named}
    total = sum(u * k for u, k in info.values())
    raw = {n: (sum(m.weight.shape) / m.weight.numel()) ** power for n, m in named}
    budget = (1.0 - target) * total - sum((1.0 - s) * info[n][0] * info[n][1] for n, s in fixed.items())
    free = [n for n, _ in named if n not in fixed]
    dens, capped = {}, set()
    while free:                          # scale the free layers' densities to the budget, capping
        left = budget - sum(max_density * info[n][0] * info[n][1] for n in capped)
        eps = left / max(1e-12, sum(raw[n] * info[n][0] * info[n][1] for n in free if n not in capped))
        over = [n for n in free if n not in capped and eps * raw[n] > max_density]
        if not over:
            for n in free:
                dens[n] = max_density if n in capped else max(0.0, eps * raw[n])
            break
        capped.update(over)
    zeros = {}
    for n, (u, k) in info.items():
        d = 1.0 - fixed[n] if n in fixed else dens[n]
        zeros[n] = min(k - min_keep, max(0, math.floor((1.0 - d) * k + 0.5)))
    need = math.ceil(target * total - 1e-9)
    while sum(zeros[n] * info[n][0] for n in info) < need:
        cand = [n for n in free if zeros[n] < info[n][1] - min_keep]
        if not cand:
            raise ValueError(f"target {target}: the layers cannot reach it keeping {min_keep} weight(s) a row "
                             f"and the fixed sparsities {fixed}")
        n = max(cand, key=lambda n: (1.0 - zeros[n] / info[n][1]) / max(dens[n], 1e-12))
        zeros[n] += 1
    return {n: zeros[n] / info[n][1] for n in info}


def overall_sparsity(named):
    """Zeros over weights of the ``(name, layer)`` pairs ``named``."""
    z = sum(int((m.weight == 0).sum()) for _, m in named)
    return z / max(1, sum(m.weight.numel() for _, m in named))
