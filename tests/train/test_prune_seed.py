"""scripts/train_qat.py --prune-seed: restarts of one float model's pruning. The same float model
(--seed) whatever the pruning seed; --prune-seed equal to --seed gives the run without it; another
pruning seed prunes differently; the training-image figures it reports agree with torch's
cross-entropy on the saved pruned model; a dense format refuses it."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from .test_smoothing import run_train_qat  # noqa: E402

_ARGS = ["--val", "40", "--augment", "1", "--seed", "3"]


def _result(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_prune_seed_restarts(monkeypatch, capsys, tmp_path):
    run_train_qat(monkeypatch, "train_qat_pseed_a", _ARGS)
    plain = _result(capsys)
    ck = str(tmp_path / "p.pt")
    run_train_qat(monkeypatch, "train_qat_pseed_b", _ARGS + ["--prune-seed", "3", "--save-pruned", ck])
    same = _result(capsys)
    run_train_qat(monkeypatch, "train_qat_pseed_c", _ARGS + ["--prune-seed", "4"])
    other = _result(capsys)
    # --prune-seed = --seed: the run without it, figure for figure (plus what it adds)
    assert same.pop("prune_seed") == 3 and other.pop("prune_seed") == 4
    train = same.pop("train")
    halves = same["val"].pop("deployed_acc_halves")
    for r in (plain, same):
        r.pop("seconds_total"), r.pop("seconds_float")
    assert same == plain
    # the same float model, another pruning
    assert other["float_acc"] == plain["float_acc"] and other["val"]["float_acc"] == plain["val"]["float_acc"]
    assert other["train"] != train
    assert other["bit_exact"] and other["val"]["bit_exact"]
    # the validation halves: even and odd positions of the 40 images, 20 each
    assert np.mean(halves) == pytest.approx(plain["val"]["deployed_acc"])
    assert all(round(h * 20) == pytest.approx(h * 20) for h in halves)
    # the pruned float model's training-image loss and accuracy, from torch on the saved model
    from hlsnn.deploy import datasets
    from hlsnn.train.data import validation_split
    from export_torch_models import _tiny_models
    saved = torch.load(ck, weights_only=False)
    m = _tiny_models(torch.nn)["dscnn"][0]
    m.load_state_dict(saved["model"])
    m.eval()
    ds = datasets.load("digits32")
    tr, _ = validation_split(len(ds.x_train), 40)
    x, y = torch.tensor(ds.x_train[tr], dtype=torch.float32), torch.tensor(ds.y_train[tr])
    with torch.no_grad():
        out = m(x)
    assert train["pruned_float_loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(out, y)), abs=2e-6)
    right = int((out.argmax(1) == y).sum())
    assert train["pruned_float_acc"] * len(y) == pytest.approx(right) and 0 < right < len(y)
    assert 0.0 <= train["qat_eval_acc"] <= 1.0 and train["qat_eval_loss"] > 0.0


def test_prune_seed_needs_sparse(monkeypatch, capsys):
    with pytest.raises(SystemExit):
        run_train_qat(monkeypatch, "train_qat_pseed_d", ["--format", "pot", "--prune-seed", "1"])
    assert "--prune-seed 1: with --format sparse" in capsys.readouterr().err
