"""scripts/train_qat.py --save-pruned / --from-pruned: the int8 step resumed from the saved pruned float
model gives the uninterrupted run's figures, and a command whose options before the int8 step differ
from the checkpoint's is refused."""
import json

import pytest

pytest.importorskip("torch")

from .test_smoothing import run_train_qat  # noqa: E402

_ARGS = ["--val", "40", "--augment", "1", "--average-from", "0.0", "--label-smoothing", "0.1"]


def _result(capsys):
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_resumed_int8_step_equals_uninterrupted(monkeypatch, capsys, tmp_path):
    ck = str(tmp_path / "p.pt")
    run_train_qat(monkeypatch, "train_qat_resume_a", _ARGS + ["--save-pruned", ck])
    full = _result(capsys)
    run_train_qat(monkeypatch, "train_qat_resume_b", _ARGS + ["--from-pruned", ck])
    resumed = _result(capsys)
    assert resumed.pop("from_pruned") == ck
    for r in (full, resumed):
        r.pop("seconds_total")
    assert resumed == full
    assert full["bit_exact"] and full["val"]["bit_exact"] and "pruned_float_acc" in full["val"]
    # an int8-step option may change: the same checkpoint, static-radix fine-tuning, still bit-exact
    run_train_qat(monkeypatch, "train_qat_resume_c", _ARGS + ["--from-pruned", ck, "--qat-radix", "static"])
    static = _result(capsys)
    assert static["qat_radix"] == "static" and static["bit_exact"] and static["val"]["bit_exact"]
    assert static["val"]["pruned_float_acc"] == full["val"]["pruned_float_acc"]


def test_resume_refuses_other_pruning(monkeypatch, capsys, tmp_path):
    ck = str(tmp_path / "p.pt")
    run_train_qat(monkeypatch, "train_qat_resume_d", _ARGS + ["--save-pruned", ck])
    capsys.readouterr()
    with pytest.raises(SystemExit):
        run_train_qat(monkeypatch, "train_qat_resume_e", _ARGS + ["--from-pruned", ck, "--prune-lr", "1e-2"])
    err = capsys.readouterr().err
    assert "differ from the checkpoint's" in err and "--prune-lr: 0.001, 0.01" in err
    # a checkpoint older than an option is taken at the option's default: --lane-balance (new) is 0
    # there, so the same command resumes and --lane-balance 8 is refused
    import torch
    saved = torch.load(ck, weights_only=False)
    del saved["args"]["lane_balance"]
    torch.save(saved, ck)
    with pytest.raises(SystemExit):
        run_train_qat(monkeypatch, "train_qat_resume_f", _ARGS + ["--from-pruned", ck, "--lane-balance", "8"])
    assert "--lane-balance: 0, 8" in capsys.readouterr().err
