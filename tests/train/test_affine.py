"""scripts/train_qat.py --augment-affine DEG,SCALE: every training batch of the pruning, recovery
and fine-tuning (the phases --augment shifts; the float model only with --augment-float) goes
through hlsnn.train.data.random_affine with those bounds before its shift, the JSON records them,
the run stays bit-exact, and a malformed value is refused in one line. --weight-decay likewise
for the pruning and recovery optimizer."""
import json

import pytest

torch = pytest.importorskip("torch")

from .test_smoothing import run_train_qat  # noqa: E402


def test_affine_augmentation_in_the_shifted_phases(monkeypatch, capsys):
    import hlsnn.train.data as data
    calls, real = [], data.random_affine

    def spy(x, degrees, scale, generator=None):
        out = real(x, degrees, scale, generator=generator)
        calls.append((degrees, scale, tuple(x.shape), bool(torch.equal(out, x))))
        return out

    monkeypatch.setattr(data, "random_affine", spy)
    run_train_qat(monkeypatch, "train_qat_affine", ["--val", "40", "--augment", "1", "--augment-affine", "10,0.1"])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["augment_affine"] == [10.0, 0.1]
    assert res["bit_exact"] and res["val"]["bit_exact"]
    # one epoch each of pruning, recovery and fine-tuning: every batch of 64 of the 1397 images
    batches = -(-(1437 - 40) // 64)
    assert len(calls) == 3 * batches
    assert {c[:2] for c in calls} == {(10.0, 0.1)}
    assert not any(c[3] for c in calls)                 # every batch moved
    with pytest.raises(SystemExit):
        run_train_qat(monkeypatch, "train_qat_affine2", ["--augment-affine", "60,0.1"])
    err = capsys.readouterr().err
    assert "--augment-affine: affine '60,0.1': DEG between 0 and 45" in err and "Traceback" not in err


def test_weight_decay_in_pruning_and_recovery_only(monkeypatch, capsys):
    """--weight-decay WD: the pruning's and the recovery's optimizer is AdamW with that decay (the
    float training and the fine-tuning keep Adam without); refused for a dense format and for a
    negative, NaN or infinite decay, in one line."""
    made = []

    class Spy(torch.optim.AdamW):
        def __init__(self, params, **kw):
            made.append(kw)
            super().__init__(params, **kw)

    monkeypatch.setattr(torch.optim, "AdamW", Spy)
    run_train_qat(monkeypatch, "train_qat_wd", ["--weight-decay", "5e-4"])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert res["weight_decay"] == 5e-4 and res["bit_exact"]
    assert [m["weight_decay"] for m in made] == [5e-4, 5e-4]
    with pytest.raises(SystemExit):
        run_train_qat(monkeypatch, "train_qat_wd2", ["--weight-decay", "-1"])
    assert "argument --weight-decay: '-1' is not a finite number >= 0" in capsys.readouterr().err
    for bad in ("nan", "inf"):
        with pytest.raises(SystemExit):
            run_train_qat(monkeypatch, "train_qat_wd3", ["--weight-decay", bad])
        assert f"argument --weight-decay: '{bad}' is not a finite number >= 0" in capsys.readouterr().err
