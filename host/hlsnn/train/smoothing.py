"""Label smoothing by training phase (issue 49): smoothing in pruning and recovery, plain cross entropy in the
quantization-aware fine-tuning, or any other split of the three phases."""

PHASES = ("prune", "recover", "finetune")


def parse_phases(text, option="--label-smoothing-phases"):
    """'prune,recover' -> frozenset({'prune', 'recover'}); ValueError naming ``option`` and the phases allowed."""
    names = [p.strip() for p in str(text).split(",") if p.strip()]
    bad = [p for p in names if p not in PHASES]
    if bad or not names:
        raise ValueError(f"{option}: {', '.join(bad) or repr(text)} is not a phase; "
                         f"allowed: a comma-separated list of {', '.join(PHASES)}")
    return frozenset(names)


def phase_cross_entropy(out, target, smoothing, phases, phase):
    """The cross entropy of one training step in `phase`: label-smoothed by `smoothing` if `phase` is in `phases`
    (None: no training phase, e.g. the float model, never smoothed)."""
    from torch.nn import functional as F
    from .checks import FRACTION_BELOW_1
    FRACTION_BELOW_1.check("smoothing", smoothing)
    return F.cross_entropy(out, target, label_smoothing=smoothing if phase in phases else 0.0)
