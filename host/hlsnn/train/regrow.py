"""Dynamic sparse training for the sparse engine: prune and regrow (RigL, Evci et al., "Rigging
the Lottery", 2020) with the zeros balanced as :func:`~hlsnn.train.balanced_mask` balances them.

:class:`RegrowPruner` is a :class:`~hlsnn.train.BalancedPruner` whose masks, once the cubic
schedule has reached the full sparsity (step ``end``), are no longer recomputed by magnitude at
every step: they are held, and every ``every_regrow`` steps until ``stop`` each balanced unit
(an output channel's row; a depthwise layer as one unit) drops the ``d`` smallest magnitudes of
the weights it keeps and regrows the ``d`` pruned positions whose loss gradient is the largest in
magnitude (the dense gradient of the last backward pass, ``weight.grad``: a pruned weight is zero,
so its gradient is what a step would give it). ``d = round(alpha_t * kept)`` (halves up: these
rows keep as few as 3 weights, which rounding down would never touch) with ``alpha_t`` on
RigL's cosine from ``alpha`` at ``end`` to 0 at ``stop``. A regrown weight starts at zero (one
dropped and regrown in the same update keeps its value), so the loss is unchanged at the
update. Every unit keeps exactly its number of zeros, and the engine's balance with it. After
``stop`` the masks stay as they are (frozen).

:func:`regrow_masks` is the one update, on one layer, for tests and other schedules."""
from __future__ import annotations

import math

import torch

from .allocate import is_depthwise
from .prune import BalancedPruner


@torch.no_grad()
def regrow_masks(weight, grad, mask, fraction, per_layer=False):
    """``(new_mask, grown)`` for one layer: in every unit (rows of axis 0, or the whole tensor
    with ``per_layer``) the ``floor(fraction * kept)`` kept weights of smallest ``|weight|`` are
    dropped and as many positions outside the remaining ones regrown, the largest ``|grad|``
    first (ties by position). ``grown`` marks the regrown positions that were pruned before (to
    be set to zero). The count of zeros in every unit is unchanged."""
    shape = weight.shape
    rows = 1 if per_layer else shape[0]
    w = weight.detach().reshape(rows, -1).abs()
    g = grad.detach().reshape(rows, -1).abs()
    m = mask.detach().reshape(rows, -1) > 0
    k = w.shape[1]
    kept = m.sum(1)
    new = m.clone()
    for r in range(rows):
        n_keep = int(kept[r])
        d = min(n_keep, int(math.floor(float(fraction) * n_keep + 0.5 + 1e-9)))
        if d <= 0 or n_keep >= k:
            continue
        # drop: the d smallest magnitudes among the kept (stable order breaks ties by position)
        score = torch.where(m[r], w[r], torch.full_like(w[r], float("inf")))
        drop = torch.argsort(score, stable=True)[:d]
        new[r, drop] = False
        # grow: the d largest gradients among the positions not kept after the drop
        gscore = torch.where(new[r], torch.full_like(g[r], -1.0), g[r])
        grow = torch.argsort(-gscore, stable=True)[:d]
        new[r, grow] = True
    grown = new & ~m
    return new.to(mask.dtype).reshape(shape), grown.reshape(shape)


def cosine_fraction(step, alpha, start, stop):
    """RigL's drop fraction at ``step``: ``alpha / 2 * (1 + cos(pi * t))``, ``t`` the fraction of
    the way from ``start`` to ``stop``; 0 outside."""
    if step < start or step >= stop or stop <= start:
        return 0.0
    return 0.5 * float(alpha) * (1.0 + math.cos(math.pi * (step - start) / (stop - start)))


class RegrowPruner(BalancedPruner):
    """:class:`~hlsnn.train.BalancedPruner` (gradual magnitude pruning to ``end``), then the
    prune-and-regrow updates of the module docstring every ``every_regrow`` steps from ``end`` to
    ``stop`` (``alpha``: the first update's drop fraction), the masks held in between and after.
    Call :meth:`step` after each ``optimizer.step()`` and before the next ``zero_grad`` (the
    update reads ``weight.grad``)."""

    def __init__(self, model, target, start, end, *, stop, every_regrow=100, alpha=0.3, **kw):
        from .checks import COUNT, COUNT1, FRACTION
        FRACTION.check("alpha", alpha), COUNT1.check("every_regrow", every_regrow), COUNT.check("stop", stop)
        super().__init__(model, target, start, end, **kw)
        self.stop, self.every_regrow, self.alpha = int(stop), int(every_regrow), float(alpha)
        self.updates = 0                      # prune-and-regrow updates done
        self.regrown = 0                      # weights regrown that were pruned before

    def step(self):
        if self.n <= self.end or not self.masks:
            super().step()
            return
        self._hold()
        if (self.n - self.end) % self.every_regrow == 0:
            frac = cosine_fraction(self.n, self.alpha, self.end, self.stop)
            if frac > 0:
                self._regrow(frac)
        self.n += 1

    @torch.no_grad()
    def _regrow(self, fraction):
        for m in self.layers:
            if m.weight.grad is None:
                continue
            new, grown = regrow_masks(m.weight, m.weight.grad, self.masks[m], fraction, per_layer=is_depthwise(m))
            m.weight[grown] = 0.0
            self.masks[m] = new
            self.regrown += int(grown.sum())
        self.updates += 1
        self._hold()
