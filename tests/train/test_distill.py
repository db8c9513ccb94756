"""hlsnn.train.distillation_loss against a hand computation: logits chosen so that every
softmax is a simple fraction, the KL divergence and the cross entropy written out in logs."""
import math

import pytest

torch = pytest.importorskip("torch")

from hlsnn.train.distill import distillation_loss, parse_distill  # noqa: E402

L3 = math.log(3.0)
# T = 2. Image 0: student [0, 2 ln 3] -> softmax(s/T) = [1/4, 3/4], softmax(s) = [1/10, 9/10];
# teacher [0, 0] -> [1/2, 1/2]; label 1. Image 1: student [0, 0] -> [1/2, 1/2];
# teacher [0, 2 ln 3] -> softmax(t/T) = [1/4, 3/4]; label 0.
STUDENT = [[0.0, 2 * L3], [0.0, 0.0]]
TEACHER = [[0.0, 0.0], [0.0, 2 * L3]]
LABELS = [1, 0]
KL0 = 0.5 * math.log(0.5 / 0.25) + 0.5 * math.log(0.5 / 0.75)       # KL(p_teacher || q_student)
KL1 = 0.25 * math.log(0.25 / 0.5) + 0.75 * math.log(0.75 / 0.5)
CE0, CE1 = -math.log(0.9), -math.log(0.5)


def _hand(alpha, t=2.0):
    kl = (KL0 + KL1) / 2                    # batch mean
    ce = (CE0 + CE1) / 2
    return alpha * t * t * kl + (1 - alpha) * ce


@pytest.mark.parametrize("alpha", [0.0, 0.25, 0.5, 1.0])
def test_distillation_loss_by_hand(alpha):
    s = torch.tensor(STUDENT, dtype=torch.float64, requires_grad=True)
    t = torch.tensor(TEACHER, dtype=torch.float64, requires_grad=True)
    loss = distillation_loss(s, t, torch.tensor(LABELS), temperature=2.0, alpha=alpha)
    assert float(loss.detach()) == pytest.approx(_hand(alpha), rel=1e-12, abs=1e-12)
    loss.backward()
    assert t.grad is None                   # the teacher is a constant
    # d/ds of alpha*T^2*KL/N at temperature T is alpha*T*(q_student - p_teacher)/N; of the CE (softmax - onehot)/N
    q0, p0 = torch.tensor([0.25, 0.75]), torch.tensor([0.5, 0.5])
    want0 = alpha * 2.0 * (q0 - p0) / 2 + (1 - alpha) * (torch.tensor([0.1, 0.9]) - torch.tensor([0.0, 1.0])) / 2
    assert torch.allclose(s.grad[0].float(), want0, atol=1e-6)


def test_parse_distill_and_bad_values():
    assert parse_distill("4,0.5") == (4.0, 0.5)
    assert parse_distill("0.7", 3.0) == (3.0, 0.7)
    assert parse_distill("0") == (4.0, 0.0)
    for bad in ("a,b", "4,0.5,1", "0,0.5", "4,1.5"):
        with pytest.raises(ValueError, match="--distill"):
            parse_distill(bad)
    with pytest.raises(ValueError, match="alpha"):
        distillation_loss(torch.zeros(1, 2), torch.zeros(1, 2), torch.tensor([0]), 2.0, 1.5)
