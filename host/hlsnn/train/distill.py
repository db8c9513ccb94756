"""Knowledge distillation (Hinton et al. 2015) for pruning and quantization-aware fine-tuning:
the float model (the teacher) gives its softened outputs as a second target for the pruned or
quantized model (the student).

    loss = alpha * T**2 * KL(softmax(teacher / T) || softmax(student / T)) + (1 - alpha) * CE(student, y)

KL is the batch mean of the per-image divergence (``kl_div(..., reduction="batchmean")``); the
``T**2`` keeps the soft term's gradient on the scale of the hard one whatever ``T``. The teacher's
logits are taken as constants (no gradient reaches the teacher).
"""
from __future__ import annotations

import torch
from torch.nn import functional as F


def distillation_loss(student, teacher, target, temperature=4.0, alpha=0.5):
    """The loss above for ``student`` and ``teacher`` logits ``(N, classes)`` and the labels
    ``target`` ``(N,)``; ``alpha = 0`` is plain cross entropy."""
    t, a = float(temperature), float(alpha)
    if not t > 0:
        raise ValueError(f"temperature = {temperature}: a positive number (1 is the plain softmax)")
    if not 0 <= a <= 1:
        raise ValueError(f"alpha = {alpha}: the soft target's weight, between 0 and 1")
    ce = F.cross_entropy(student, target)
    if a == 0:
        return ce
    with torch.no_grad():
        soft = F.softmax(teacher.detach() / t, 1)
    kd = F.kl_div(F.log_softmax(student / t, 1), soft, reduction="batchmean")
    return (1 - a) * ce + a * t ** 2 * kd


def parse_distill(text, default_temperature=4.0):
    """``"T,alpha"`` -> ``(T, alpha)``; a single number is ``alpha`` at ``default_temperature``
    (scripts/train_qat.py's ``--distill``; ``"0"`` is off)."""
    parts = [p.strip() for p in str(text).split(",")]
    try:
        vals = [float(p) for p in parts]
    except ValueError:
        vals = None
    if vals is None or len(vals) not in (1, 2):
        raise ValueError(f"--distill {text!r}: 'T,alpha' (e.g. 4,0.5) or 'alpha' alone")
    t, a = (default_temperature, vals[0]) if len(vals) == 1 else vals
    if not t > 0 or not 0 <= a <= 1:
        raise ValueError(f"--distill {text!r}: the temperature T > 0 and 0 <= alpha <= 1")
    return t, a
