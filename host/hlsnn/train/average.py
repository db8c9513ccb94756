"""Weight averaging over the end of a training phase (stochastic weight averaging, Izmailov et al.,
"Averaging Weights Leads to Wider Optima and Better Generalization", 2018), for the recovery of a
pruned model at its full sparsity.

:class:`WeightAverage` keeps the running mean of a model's parameters over the snapshots given
to :meth:`~WeightAverage.add` (the script takes one at the end of every epoch of the averaging
window) and :meth:`~WeightAverage.apply` writes that mean into the model. A weight pruned in
every snapshot is zero in the mean; one kept in some snapshots only (masks recomputed by
magnitude) is not, so the caller prunes the mean again (the pruner's ``apply`` or
:class:`~hlsnn.train.rewind.FrozenMasks`' ``step``) before :func:`update_batchnorm`, which
recomputes every BatchNorm's running statistics for the averaged (and pruned) weights: the
statistics of the snapshots' own training batches belong to other weights."""
from __future__ import annotations

import torch
from torch import nn


class WeightAverage:
    """The running mean of ``model``'s parameters (each snapshot weighted alike)."""

    def __init__(self, model):
        self.model = model
        self.count = 0
        self.mean = {n: torch.zeros_like(p, dtype=torch.float64) for n, p in model.named_parameters()}

    @torch.no_grad()
    def add(self):
        """Add the model's parameters as they are now to the mean."""
        self.count += 1
        for n, p in self.model.named_parameters():
            self.mean[n] += (p.detach().double() - self.mean[n]) / self.count

    @torch.no_grad()
    def apply(self):
        """Write the mean into the model's parameters (their dtype kept)."""
        if not self.count:
            raise ValueError("WeightAverage.apply: no snapshot added (call add() first)")
        for n, p in self.model.named_parameters():
            p.copy_(self.mean[n].to(p.dtype))
        return self.model


@torch.no_grad()
def update_batchnorm(model, x, batch=64):
    """Recompute the running mean and variance of every BatchNorm of ``model`` from the inputs
    ``x`` (train-mode forward passes in batches of ``batch``, no gradient): each becomes the
    mean over the batches of the batch statistics (torch's ``momentum=None``, the cumulative
    average), as ``torch.optim.swa_utils.update_bn`` does; the momentum and training flag are
    restored after. Returns the model."""
    from .checks import COUNT1
    batch = COUNT1.check("batch", batch)
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return model
    was = model.training
    momenta = [m.momentum for m in bns]
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    model.train()
    for i in range(0, len(x), batch):
        model(x[i:i + batch])
    for m, mom in zip(bns, momenta):
        m.momentum = mom
    model.train(was)
    return model
