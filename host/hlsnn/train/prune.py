"""Pruning for the sparse engine: gradual magnitude pruning (Zhu & Gupta's cubic schedule) to a
target sparsity with the zeros balanced: every output channel keeps the same number of
weights (its largest magnitudes), so however the sparse cluster's partition (source 003)
splits the output channels among its units, each unit gets the same share of zeros and no
unit sets the pace with a denser slice."""
from __future__ import annotations

import math

import torch

from .prepare import quantized_layers


def cubic_schedule(step, target, start, end, initial=0.0):
    """Sparsity at ``step``: ``initial`` before ``start``, ``target`` from ``end``, between them
    ``target + (initial - target) * (1 - t)**3``, ``t`` the fraction of the way."""
    if step <= start:
        return initial
    if step >= end:
        return target
    t = (step - start) / (end - start)
    return target + (initial - target) * (1 - t) ** 3


def balanced_mask(w, sparsity):
    """A 0/1 mask of ``w``'s shape that zeroes ``floor(sparsity * k)`` smallest magnitudes
    in every output channel (axis 0, ``k`` weights each), ties broken by position."""
    rows = w.detach().reshape(w.shape[0], -1)
    k = rows.shape[1]
    n_zero = min(k, int(math.floor(sparsity * k + 1e-9)))
    mask = torch.ones_like(rows)
    if n_zero:
        idx = torch.argsort(rows.abs(), dim=1, stable=True)[:, :n_zero]
        mask.scatter_(1, idx, 0.0)
    return mask.reshape(w.shape)


class BalancedPruner:
    """Prune the quantized layers of a prepared model whose format is ``sparse`` (or every
    quantized layer with ``formats=None``) on :func:`cubic_schedule`; call :meth:`step` once per
    optimizer step. The mask is applied in the forward pass (``prune_mask``) and the pruned
    weights are held at zero."""

    def __init__(self, model, target, start, end, formats=("sparse",), every=1):
        self.model, self.target, self.start, self.end, self.every = model, float(target), start, end, every
        self.layers = [m for _, m in quantized_layers(model) if formats is None or m.fmt in formats]
        self.n = 0
        self.sparsity = 0.0

    def step(self):
        s = cubic_schedule(self.n, self.target, self.start, self.end)
        if self.n % self.every == 0 or self.n >= self.end:
            self.apply(s)
        self.n += 1

    @torch.no_grad()
    def apply(self, sparsity):
        self.sparsity = sparsity
        for m in self.layers:
            m.prune_mask = balanced_mask(m.weight, sparsity)
            m.weight.mul_(m.prune_mask)

    def report(self):
        """Per layer ``(zeros per output channel min, max, total sparsity)``."""
        out = []
        for m in self.layers:
            z = (m.weight.detach() == 0).reshape(m.weight.shape[0], -1).sum(1)
            out.append((int(z.min()), int(z.max()), float((m.weight == 0).float().mean())))
        return out
