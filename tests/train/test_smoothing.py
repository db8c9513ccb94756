"""Label smoothing by phase (hlsnn.train.smoothing, scripts/train_qat.py --label-smoothing-phases): the loss of
each training step is torch's own F.cross_entropy, label-smoothed exactly in the phases asked for."""
import importlib.util
import pathlib

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from hlsnn.train import smoothing  # noqa: E402
from hlsnn.train.smoothing import PHASES, parse_phases, phase_cross_entropy  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_parse_phases():
    assert parse_phases("prune,recover") == {"prune", "recover"}
    assert parse_phases(" finetune ") == {"finetune"}
    assert parse_phases(",".join(PHASES)) == set(PHASES)
    for bad in ("prune,qat", "", ","):
        with pytest.raises(ValueError, match="allowed: a comma-separated list of prune, recover, finetune"):
            parse_phases(bad)


def test_phase_cross_entropy_against_torch():
    g = torch.Generator().manual_seed(0)
    out, y = torch.randn(16, 10, generator=g), torch.randint(0, 10, (16,), generator=g)
    smooth, plain = F.cross_entropy(out, y, label_smoothing=0.1), F.cross_entropy(out, y)
    assert not torch.isclose(smooth, plain)                       # the two differ, so the test can tell them apart
    phases = parse_phases("prune,recover")
    assert torch.equal(phase_cross_entropy(out, y, 0.1, phases, "prune"), smooth)
    assert torch.equal(phase_cross_entropy(out, y, 0.1, phases, "recover"), smooth)
    assert torch.equal(phase_cross_entropy(out, y, 0.1, phases, "finetune"), plain)
    assert torch.equal(phase_cross_entropy(out, y, 0.1, phases, None), plain)       # the float model
    assert torch.equal(phase_cross_entropy(out, y, 0.0, phases, "prune"), plain)


def _run_script(monkeypatch, extra):
    """scripts/train_qat.py, one epoch a phase; every loss it takes, with the phase, logits and labels."""
    seen = []
    real = smoothing.phase_cross_entropy

    def record(out, target, ls, phases, phase):
        loss = real(out, target, ls, phases, phase)
        seen.append((phase, out.detach().clone(), target.clone(), loss.detach().clone()))
        return loss

    monkeypatch.setattr(smoothing, "phase_cross_entropy", record)
    run_train_qat(monkeypatch, "train_qat_under_test", ["--label-smoothing", "0.1"] + extra)
    return seen


def run_train_qat(monkeypatch, name, args):
    """scripts/train_qat.py loaded afresh as module ``name`` (so that patches of hlsnn.train take), run on
    DS-CNN at 90 %, one epoch a phase, with ``args`` after those."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "train_qat.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.main(["--model", "dscnn", "--format", "sparse", "--sparsity", "0.9", "--float-epochs", "1", "--qat-epochs", "1",
              "--prune-epochs", "1", "--recover-epochs", "1"] + args)


@pytest.mark.parametrize("asked", ["prune,recover", None])
def test_script_loss_per_phase(monkeypatch, capsys, asked):
    seen = _run_script(monkeypatch, ["--label-smoothing-phases", asked] if asked else [])
    capsys.readouterr()
    smoothed = set(asked.split(",")) if asked else set(PHASES)
    order = [p for i, (p, *_) in enumerate(seen) if i == 0 or seen[i - 1][0] != p]
    assert order == [None, "prune", "recover", "finetune"]
    for phase, out, y, loss in seen:
        want = F.cross_entropy(out, y, label_smoothing=0.1) if phase in smoothed else F.cross_entropy(out, y)
        assert torch.allclose(loss, want, rtol=1e-6, atol=0), phase
        other = F.cross_entropy(out, y) if phase in smoothed else F.cross_entropy(out, y, label_smoothing=0.1)
        assert not torch.allclose(loss, other, rtol=1e-6, atol=0), phase
