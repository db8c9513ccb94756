"""Weight averaging over the recovery and the fine-tuning (hlsnn.train.average, scripts/train_qat.py
--average-from, --qat-average-from): the mean of the snapshots against numpy's, BatchNorm statistics against numpy's batch statistics, and the script's use."""
import importlib.util
import json
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from hlsnn.train import average  # noqa: E402
from hlsnn.train.average import WeightAverage, update_batchnorm  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_mean_of_snapshots():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3), nn.Flatten(), nn.Linear(12, 4))
    mask = (torch.rand_like(m[0].weight) > 0.5).float()
    avg, seen = WeightAverage(m), []
    for _ in range(5):
        with torch.no_grad():
            for p in m.parameters():
                p.add_(torch.randn_like(p))
            m[0].weight.mul_(mask)                       # the same weights pruned in every snapshot
        seen.append({n: p.detach().numpy().astype(np.float64).copy() for n, p in m.named_parameters()})
        avg.add()
    avg.apply()
    assert avg.count == 5
    for n, p in m.named_parameters():
        want = np.mean([s[n] for s in seen], axis=0)
        assert p.dtype == torch.float32
        np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-6, atol=1e-6)
    assert torch.all(m[0].weight[mask == 0] == 0)       # zero in every snapshot: zero in the mean


def test_apply_without_snapshot():
    with pytest.raises(ValueError, match="no snapshot added"):
        WeightAverage(nn.Linear(2, 2)).apply()


def test_batchnorm_statistics_recomputed():
    torch.manual_seed(1)
    conv, bn = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4, momentum=0.3)
    m = nn.Sequential(conv, bn, nn.ReLU()).eval()
    bn.running_mean.fill_(5.0)                          # stale statistics, to be replaced
    bn.running_var.fill_(7.0)
    x = torch.randn(96, 3, 8, 8)
    update_batchnorm(m, x, batch=32)
    with torch.no_grad():
        y = conv(x).numpy().astype(np.float64)          # the BatchNorm's inputs
    means = [y[i:i + 32].mean(axis=(0, 2, 3)) for i in range(0, 96, 32)]
    variances = [y[i:i + 32].transpose(1, 0, 2, 3).reshape(4, -1).var(axis=1, ddof=1) for i in range(0, 96, 32)]
    np.testing.assert_allclose(bn.running_mean.numpy(), np.mean(means, axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(bn.running_var.numpy(), np.mean(variances, axis=0), rtol=1e-5, atol=1e-6)
    assert bn.momentum == 0.3 and not m.training        # restored


def test_script_averages_the_recovery(monkeypatch, capsys):
    """--recover-epochs 4 --average-from 0.5: a snapshot at the end of recovery epochs 3 and 4 only, the
    mean re-pruned (every output channel still the same zeros) and bit-exact when deployed."""
    adds = []
    real_add = average.WeightAverage.add

    def add(self):
        adds.append(self.model.training)
        real_add(self)

    monkeypatch.setattr(average.WeightAverage, "add", add)
    mod = _script(monkeypatch)
    mod.main(["--model", "dscnn", "--format", "sparse", "--sparsity", "0.9", "--float-epochs", "1",
              "--qat-epochs", "1", "--prune-epochs", "1", "--recover-epochs", "4", "--allocation", "erk",
              "--val", "287", "--average-from", "0.5"])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(adds) == 2 and res["average"] == {"from": 0.5, "snapshots": 2}
    assert "recovered_float_acc" in res["val"]
    assert all(zmin == zmax for n, zmin, zmax, _ in res["pruned_layers"] if n not in ("3", "9", "15"))
    assert res["bit_exact"] and res["val"]["bit_exact"]


@pytest.mark.parametrize("args", [["--average-from", "0.5"], ["--recover-epochs", "2", "--average-from", "1.0"]])
def test_script_rejects(monkeypatch, capsys, args):
    mod = _script(monkeypatch)
    with pytest.raises(SystemExit):
        mod.main(["--model", "dscnn", "--format", "sparse"] + args)
    err = capsys.readouterr().err
    if "1.0" in args:                    # out of its declared range: argparse's line (hlsnn.train.checks)
        assert "argument --average-from: '1.0' is not a number in [0, 1)" in err
    else:
        assert "a fraction in [0, 1) of the recovery epochs" in err and "--recover-epochs N" in err


def test_script_averages_the_fine_tuning(monkeypatch, capsys):
    """--qat-epochs 2 --qat-average-from 0: a snapshot at the end of both fine-tuning epochs (train mode), the
    prepared model's weights then their mean (numpy's), the held zeros still zero, and bit-exact when deployed."""
    seen, checked = [], []
    real_add, real_apply = average.WeightAverage.add, average.WeightAverage.apply

    def add(self):
        seen.append((self.model.training, {n: p.detach().double().numpy().copy()
                                           for n, p in self.model.named_parameters()}))
        real_add(self)

    def apply(self):
        out = real_apply(self)
        for n, p in self.model.named_parameters():
            np.testing.assert_allclose(p.detach().double().numpy(), np.mean([s[n] for _, s in seen], axis=0),
                                       rtol=1e-6, atol=1e-7)
        masks = [m.prune_mask for m in self.model.modules() if getattr(m, "prune_mask", None) is not None]
        assert masks and all(torch.all(m.weight[m.prune_mask == 0] == 0) for m in self.model.modules()
                             if getattr(m, "prune_mask", None) is not None)
        checked.append(True)
        return out

    monkeypatch.setattr(average.WeightAverage, "add", add)
    monkeypatch.setattr(average.WeightAverage, "apply", apply)
    mod = _script(monkeypatch)
    mod.main(["--model", "dscnn", "--format", "sparse", "--sparsity", "0.9", "--float-epochs", "1",
              "--qat-epochs", "2", "--prune-epochs", "1", "--allocation", "erk", "--weight-scale", "channel",
              "--val", "287", "--qat-average-from", "0"])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert len(seen) == 2 and all(training for training, _ in seen) and checked == [True]
    assert not np.allclose(seen[0][1]["0.weight"], seen[1][1]["0.weight"])     # two different snapshots
    assert res["qat_average"] == {"from": 0.0, "snapshots": 2} and "qat_last_eval_acc" in res["val"]
    assert res["bit_exact"] and res["val"]["bit_exact"]


@pytest.mark.parametrize("args", [["--qat-epochs", "0", "--qat-average-from", "0.5"],
                                  ["--qat-average-from", "1.0"], ["--qat-average-from", "-0.1"]])
def test_script_rejects_qat_average(monkeypatch, capsys, args):
    mod = _script(monkeypatch)
    with pytest.raises(SystemExit):
        mod.main(["--model", "dscnn", "--format", "sparse"] + args)
    err = capsys.readouterr().err
    if args[-1] in ("1.0", "-0.1"):      # out of its declared range: argparse's line (hlsnn.train.checks)
        assert f"argument --qat-average-from: '{args[-1]}' is not a number in [0, 1)" in err
    else:
        assert "a fraction in [0, 1) of the fine-tuning epochs" in err and "--qat-epochs N" in err


def _script(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location("train_qat_average_under_test", ROOT / "scripts" / "train_qat.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
