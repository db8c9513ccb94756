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

from .smoothing import PHASES, parse_phases


def distillation_loss(student, teacher, target, temperature=4.0, alpha=0.5):
    """The loss above for ``student`` and ``teacher`` logits ``(N, classes)`` and the labels
    ``target`` ``(N,)``; ``alpha = 0`` is plain cross entropy."""
    from .checks import FRACTION, POSITIVE
    t, a = float(POSITIVE.check("temperature", temperature)), float(FRACTION.check("alpha", alpha))
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
    from .checks import FRACTION, POSITIVE
    if not POSITIVE.ok(t) or not FRACTION.ok(a):
        raise ValueError(f"--distill {text!r}: the temperature T > 0 and 0 <= alpha <= 1 (T finite)")
    return t, a


# --- by training phase (scripts/train_qat.py --distill-alpha / --distill-temperature / --distill-phases) ---

LEGACY_IN = {"all": PHASES, "prune": ("prune", "recover"), "finetune": ("finetune",)}   # --distill-in


def parse_distill_phases(text):
    """'recover,finetune' -> frozenset({'recover', 'finetune'}); ValueError naming the phases allowed."""
    return parse_phases(text, option="--distill-phases")


def frozen_teacher(model):
    """A copy of the trained float ``model`` as the teacher: eval mode (BatchNorm's running
    statistics, no dropout) and every parameter frozen (``requires_grad`` off)."""
    import copy
    teacher = copy.deepcopy(model).eval()
    for p in teacher.parameters():
        p.requires_grad_(False)
    return teacher


def phase_loss(student, teacher, target, phase, *, alpha=0.0, temperature=4.0, kd_phases=(),
               smoothing=0.0, ls_phases=()):
    """The loss of one training step in ``phase`` (one of :data:`PHASES`; None for the float
    model's own training): the cross entropy, label-smoothed by ``smoothing`` when ``phase`` is in
    ``ls_phases`` (:func:`hlsnn.train.smoothing.phase_cross_entropy`), and where ``phase`` is in
    ``kd_phases`` with ``alpha > 0`` and ``teacher`` logits given,
    ``(1 - alpha) * CE + alpha * T**2 * KL(softmax(teacher / T) || softmax(student / T))``
    (:func:`distillation_loss` with that cross entropy)."""
    from . import smoothing as _smoothing
    ce = _smoothing.phase_cross_entropy(student, target, smoothing, ls_phases, phase)
    if teacher is None or not alpha or phase not in kd_phases:
        return ce
    from .checks import FRACTION, POSITIVE
    t, a = float(POSITIVE.check("temperature", temperature)), float(FRACTION.check("alpha", alpha))
    with torch.no_grad():
        soft = F.softmax(teacher.detach() / t, 1)
    kd = F.kl_div(F.log_softmax(student / t, 1), soft, reduction="batchmean")
    return (1 - a) * ce + a * t ** 2 * kd


def resolve(distill, distill_t, distill_in, alpha=None, temperature=None, phases=None):
    """scripts/train_qat.py's distillation flags -> ``(alpha, T, phases)``. The spelled-out flags
    (``--distill-alpha``, ``--distill-temperature``, ``--distill-phases``) take precedence over the
    older ``--distill T,ALPHA`` / ``--distill-t`` / ``--distill-in``; ``--distill`` and
    ``--distill-alpha`` both given is an error."""
    t, a = parse_distill(distill, distill_t)
    if alpha is not None:
        if a:
            raise ValueError("--distill and --distill-alpha: give one of them")
        a = float(alpha)
    if temperature is not None:
        t = float(temperature)
    from .checks import FRACTION, POSITIVE
    if not POSITIVE.ok(t) or not FRACTION.ok(a):
        raise ValueError(f"--distill-alpha {a}, --distill-temperature {t}: T > 0 and 0 <= alpha <= 1 (T finite)")
    ph = parse_distill_phases(phases) if phases is not None else frozenset(LEGACY_IN[distill_in])
    return a, t, ph
