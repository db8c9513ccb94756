"""Model selection on the validation images: of k runs of one recipe (k seeds, each its own float
model), keep the one whose deployed model is the most accurate on the validation split and report
its test accuracy (and its gap to its own float model). This is model selection, an honest
protocol as long as the test figures play no part in the choice: :func:`best_on_validation`
reads only the validation figures (``run["val"]``) and the seed, never a test figure.

The runs are ``scripts/train_qat.py`` result dicts (one JSON line each, with ``--val``)."""
from __future__ import annotations


def _val(run, key):
    v = run.get("val")
    if not v or key not in v:
        raise ValueError(f"run {run.get('tag', '?')!r}: no validation figure {key!r} (train with --val N)")
    return float(v[key])


def _train(run, key):
    t = run.get("train")
    if not t or key not in t:
        raise ValueError(f"run {run.get('tag', '?')!r}: no training-image figure {key!r} (train with --prune-seed P)")
    return float(t[key])


def best_on_validation(runs, key="deployed_acc", tie=None):
    """The run of ``runs`` with the highest validation ``key`` (default: the deployed model's
    accuracy). A tie goes to the earlier run (the lower seed, in a seed-ordered list), or, with
    ``tie`` a figure of the training images (``run["train"]``, e.g. ``"pruned_float_loss"``:
    restarts of one float model), to the run where that figure is lowest, then to the earlier
    run. Neither reads a test figure."""
    runs = list(runs)
    if not runs:
        raise ValueError("best_on_validation: no runs")
    lower = (lambda i: -_train(runs[i], tie)) if tie else (lambda i: 0.0)
    best = max(range(len(runs)), key=lambda i: (_val(runs[i], key), lower(i), -i))
    return runs[best]


def selection_report(runs, key="deployed_acc", tie=None):
    """``{chosen, val, val_gap, test, test_gap, float_test, runs}`` in points: the run chosen by
    :func:`best_on_validation` (its ``tag`` or index), its validation accuracy and gap to its own
    float model there, the same on the test images (read after the choice), and every run's
    validation figure. ``tie``: as :func:`best_on_validation`'s."""
    runs = list(runs)
    ch = best_on_validation(runs, key, tie)
    i = runs.index(ch)
    pts = lambda v: round(100.0 * float(v), 2)  # noqa: E731
    return {"chosen": ch.get("tag", i), "val": pts(_val(ch, key)),
            "val_gap": round(pts(_val(ch, key)) - pts(_val(ch, "float_acc")), 2),
            "test": pts(ch[key]), "test_gap": round(pts(ch[key]) - pts(ch["float_acc"]), 2),
            "float_test": pts(ch["float_acc"]),
            "runs": [(r.get("tag", j), pts(_val(r, key))) for j, r in enumerate(runs)]}
