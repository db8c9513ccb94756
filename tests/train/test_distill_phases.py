"""Knowledge distillation by training phase (hlsnn.train.distill.phase_loss, scripts/train_qat.py --distill-alpha /
--distill-temperature / --distill-phases): every step's loss against torch's own F.cross_entropy and F.kl_div (and
the KL divergence written out in numpy), the teacher the frozen float model in eval mode, used in the phases asked
for and nowhere else."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from hlsnn.train import distill
from hlsnn.train.distill import (
    PHASES,
    frozen_teacher,
    parse_distill_phases,
    phase_loss,
    resolve,
)

from .test_smoothing import run_train_qat


def _reference(s, t, y, phase, alpha, temp, kd_phases, ls, ls_phases):
    """torch's own functions, not hlsnn's."""
    ce = F.cross_entropy(s, y, label_smoothing=ls if phase in ls_phases else 0.0)
    if t is None or phase not in kd_phases:
        return ce
    kl = F.kl_div(F.log_softmax(s / temp, 1), F.softmax(t / temp, 1), reduction="batchmean")
    return (1 - alpha) * ce + alpha * temp * temp * kl


def test_parse_phases_and_resolve():
    assert parse_distill_phases("recover, finetune") == {"recover", "finetune"}
    assert parse_distill_phases(",".join(PHASES)) == set(PHASES)
    for bad in ("prune,qat", "", ","):
        with pytest.raises(ValueError, match="allowed: a comma-separated list of prune, recover, finetune"):
            parse_distill_phases(bad)
    # the older spelling: --distill T,ALPHA or ALPHA, --distill-in all|prune|finetune
    assert resolve("4,0.5", 4.0, "all") == (0.5, 4.0, set(PHASES))
    assert resolve("0.7", 3.0, "prune") == (0.7, 3.0, {"prune", "recover"})
    assert resolve("0.7", 3.0, "finetune") == (0.7, 3.0, {"finetune"})
    # the spelled-out flags, which override --distill-t and --distill-in
    assert resolve("0", 4.0, "all", 0.3, 2.0, "recover") == (0.3, 2.0, {"recover"})
    assert resolve("0", 4.0, "prune", None, None, "finetune") == (0.0, 4.0, {"finetune"})
    with pytest.raises(ValueError, match="give one of them"):
        resolve("0.5", 4.0, "all", 0.3)
    for a, t in ((1.5, 4.0), (-0.1, 4.0), (0.5, 0.0)):
        with pytest.raises(ValueError, match="T > 0 and 0 <= alpha <= 1"):
            resolve("0", 4.0, "all", a, t)


@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_phase_loss_against_torch_and_numpy(ls):
    g = torch.Generator().manual_seed(1)
    s = (3 * torch.randn(32, 10, generator=g, dtype=torch.float64)).requires_grad_(True)
    t = (3 * torch.randn(32, 10, generator=g, dtype=torch.float64)).requires_grad_(True)
    y = torch.randint(0, 10, (32,), generator=g)
    alpha, temp, kd_ph, ls_ph = 0.3, 2.0, frozenset({"recover", "finetune"}), frozenset({"prune", "recover"})
    for phase in (None, "prune", "recover", "finetune"):
        got = phase_loss(s, t, y, phase, alpha=alpha, temperature=temp, kd_phases=kd_ph, smoothing=ls, ls_phases=ls_ph)
        want = _reference(s, t, y, phase, alpha, temp, kd_ph, ls, ls_ph)
        assert torch.allclose(got, want, rtol=1e-12, atol=0), phase
    # the KL term in numpy: mean over the images of sum_k p_k (log p_k - log q_k), p the teacher's softmax at T
    sn, tn = s.detach().numpy() / temp, t.detach().numpy() / temp
    logp = tn - tn.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    logq = sn - sn.max(1, keepdims=True)
    logq -= np.log(np.exp(logq).sum(1, keepdims=True))
    kl = float(np.mean(np.sum(np.exp(logp) * (logp - logq), 1)))
    ce = float(F.cross_entropy(s, y).detach())                      # finetune: not smoothed
    got = phase_loss(s, t, y, "finetune", alpha=alpha, temperature=temp, kd_phases=kd_ph, smoothing=ls,
                     ls_phases=ls_ph)
    assert float(got.detach()) == pytest.approx((1 - alpha) * ce + alpha * temp ** 2 * kl, rel=1e-10)
    assert kl > 0.1                                                  # the soft term is there to see
    got.backward()
    assert t.grad is None and s.grad is not None                     # no gradient reaches the teacher
    # no teacher logits, or alpha 0: the cross entropy alone
    assert torch.equal(phase_loss(s, None, y, "recover", alpha=0.5, kd_phases=kd_ph), F.cross_entropy(s, y))
    assert torch.equal(phase_loss(s, t, y, "recover", alpha=0.0, kd_phases=kd_ph), F.cross_entropy(s, y))


def test_frozen_teacher():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Flatten(), torch.nn.LazyLinear(2))
    m(torch.randn(8, 3, 6, 6))
    m.train()
    teacher = frozen_teacher(m)
    assert m.training and not teacher.training and not any(mod.training for mod in teacher.modules())
    assert all(p.requires_grad for p in m.parameters()) and not any(p.requires_grad for p in teacher.parameters())
    x = torch.randn(5, 3, 6, 6)
    m.eval()
    assert torch.equal(teacher(x), m(x))                            # the same model, BatchNorm's running statistics


def _run_script(monkeypatch, extra):
    """scripts/train_qat.py, one epoch a phase, on DS-CNN at 90%; every loss it takes (phase, logits, teacher
    logits, labels, loss) and every teacher call (its mode, input and output)."""
    seen, calls, teachers = [], [], []
    real_loss, real_teacher = distill.phase_loss, distill.frozen_teacher

    def record(out, t_out, y, phase, **kw):
        loss = real_loss(out, t_out, y, phase, **kw)
        seen.append((phase, out.detach().clone(), None if t_out is None else t_out.clone(), y.clone(),
                     loss.detach().clone(), kw))
        return loss

    def teacher_of(model):
        t = real_teacher(model)
        snap = {k: v.clone() for k, v in t.state_dict().items()}
        t.register_forward_hook(lambda mod, i, o: calls.append((mod.training, i[0].clone(), o.clone())))
        teachers.append((t, snap))
        return t

    monkeypatch.setattr(distill, "phase_loss", record)
    monkeypatch.setattr(distill, "frozen_teacher", teacher_of)
    run_train_qat(monkeypatch, "train_qat_kd_under_test", ["--augment", "2"] + extra)
    return seen, calls, teachers


@pytest.mark.parametrize("flags, alpha, temp, kd_phases, ls_phases, clean", [
    (["--distill-alpha", "0.3", "--distill-temperature", "2", "--distill-phases", "recover,finetune",
      "--label-smoothing", "0.1", "--label-smoothing-phases", "prune,recover", "--distill-input", "clean"],
     0.3, 2.0, {"recover", "finetune"}, {"prune", "recover"}, True),
    (["--distill", "4,0.5", "--distill-in", "prune"], 0.5, 4.0, {"prune", "recover"}, set(), False),
])
def test_script_loss_per_phase(monkeypatch, capsys, flags, alpha, temp, kd_phases, ls_phases, clean):
    seen, calls, teachers = _run_script(monkeypatch, flags)
    capsys.readouterr()
    order = [p for i, (p, *_) in enumerate(seen) if i == 0 or seen[i - 1][0] != p]
    assert order == [None, "prune", "recover", "finetune"]
    assert len(teachers) == 1
    n_kd = 0
    for phase, out, t_out, y, loss, _ in seen:
        if phase in kd_phases:
            assert t_out is not None, phase
            training, _, t_call = calls[n_kd]                      # the teacher's own output, in order
            assert not training and torch.equal(t_out, t_call)
            n_kd += 1
        else:
            assert t_out is None, phase                            # no teacher outside the phases asked for
        want = _reference(out, t_out, y, phase, alpha, temp, kd_phases, 0.1, ls_phases)
        assert torch.allclose(loss, want, rtol=1e-5, atol=0), phase
        if t_out is not None:                                     # the soft term changes the loss
            plain = _reference(out, None, y, phase, alpha, temp, kd_phases, 0.1, ls_phases)
            assert not torch.allclose(loss, plain, rtol=1e-5, atol=0), phase
    assert n_kd == len(calls) > 0                                  # the teacher ran only for those steps
    teacher, snap = teachers[0]
    assert all(torch.equal(v, snap[k]) for k, v in teacher.state_dict().items())    # frozen: nothing changed
    # --distill-input clean: the teacher sees training images as they are, not the shifted ones the student sees
    from hlsnn.deploy import datasets
    train = {r.tobytes() for r in np.asarray(datasets.load("digits32").x_train, dtype=np.float32)}
    as_is = np.mean([r.numpy().tobytes() in train for _, x, _ in calls for r in x])
    assert (as_is == 1.0) if clean else (as_is < 0.5), as_is
