"""Frozen masks and learning-rate rewinding (Renda et al., "Comparing Rewinding and Fine-tuning
in Neural Network Pruning", 2020): once pruning has ended, the masks are fixed and the masked
network is trained again from the rewound rate (the pruning phase's own starting rate, on a fresh
cosine) instead of fine-tuned at a small one.

:class:`FrozenMasks` takes a pruner's masks as they are: its :meth:`~FrozenMasks.step` (after
each ``optimizer.step()``) sets the pruned weights back to zero and never moves a mask, so no
weight is pruned or regrown by magnitude any more (a :class:`~hlsnn.train.BalancedPruner`'s own
``step`` recomputes its masks by magnitude at every step)."""
from __future__ import annotations

import torch


class FrozenMasks:
    """The masks of ``pruner`` (a :class:`~hlsnn.train.BalancedPruner` after pruning), copied and
    held: :meth:`step` zeroes the pruned weights of every pruned layer."""

    def __init__(self, pruner):
        if not pruner.masks:
            raise ValueError("FrozenMasks: the pruner has no masks yet (call its step() or apply() first)")
        self.masks = {m: mask.detach().clone() for m, mask in pruner.masks.items()}

    @torch.no_grad()
    def step(self):
        for m, mask in self.masks.items():
            m.weight.mul_(mask)
            if hasattr(m, "prune_mask"):
                m.prune_mask = mask.clone()
