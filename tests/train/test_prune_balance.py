"""The pruner's balance property, against counts and orderings computed here: every output
channel of a regular layer keeps the same number of weights (its largest), a depthwise layer
keeps the layer's largest magnitudes (never a lone weight per 3x3 channel at 90%), the cubic
schedule reaches the target, and pruning a float model with BatchNorm live survives folding."""
import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import BalancedPruner, balanced_mask, cubic_schedule, fold_batchnorm, is_depthwise  # noqa: E402

torch.set_num_threads(1)


def _zeros(s, k):
    """round(s * k), halves up: the zeros of a row of k at sparsity s."""
    return math.floor(s * k + 0.5)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 8, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(), nn.Linear(8 * 16, 10))


@pytest.mark.parametrize("target", [0.75, 0.9])
def test_balanced_per_channel_and_depthwise_per_layer(target):
    m = _model()
    x = torch.rand(32, 3, 4, 4)
    y = torch.arange(32) % 10
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    pr = BalancedPruner(m, target, 0, 5)
    m.train()
    for _ in range(8):
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        pr.step()
    assert pr.sparsity == target
    for name, layer in pr.named:
        w = layer.weight.detach()
        rows = w.reshape(w.shape[0], -1)
        zeros = (rows == 0).sum(1)
        if is_depthwise(layer):
            assert name == "3"
            assert int(zeros.sum()) == _zeros(target, w.numel())
            # the layer's largest magnitudes are kept, wherever they are: not one per channel
            kept = w[w != 0].abs()
            assert kept.min() >= w.abs()[w == 0].max()
            assert int(zeros.max()) - int(zeros.min()) >= 1
        else:
            k = rows.shape[1]
            assert zeros.min() == zeros.max() == _zeros(target, k), name
            for r in rows:                                   # the kept values are the row's largest
                assert r[r != 0].abs().min() >= r.abs().sort().values[_zeros(target, k) - 1]
    folded = fold_batchnorm(m.eval())
    for (name, layer), conv in zip(pr.named, [folded[0], folded[3], folded[6], folded[10]]):
        assert torch.equal(conv.weight == 0, pr.masks[layer] == 0), name      # folding keeps the zeros


def test_balanced_mask_orders_by_magnitude():
    w = torch.tensor([[0.3, -0.1, 0.2, -0.4], [1.0, 0.5, -0.25, 0.0]])
    assert balanced_mask(w, 0.5).tolist() == [[1, 0, 0, 1], [1, 1, 0, 0]]
    assert balanced_mask(w, 0.5, per_layer=True).tolist() == [[1, 0, 0, 1], [1, 1, 0, 0]]
    assert balanced_mask(w, 0.25, per_layer=True).tolist() == [[1, 0, 1, 1], [1, 1, 1, 0]]
    assert balanced_mask(w, 0.6).tolist() == [[1, 0, 0, 1], [1, 1, 0, 0]]          # 2.4 -> 2 zeros a row
    assert balanced_mask(w, 0.65).tolist() == [[0, 0, 0, 1], [1, 0, 0, 0]]         # 2.6 -> 3


def test_cubic_schedule_values():
    assert cubic_schedule(0, 0.9, 0, 10) == 0.0 and cubic_schedule(10, 0.9, 0, 10) == 0.9
    assert cubic_schedule(5, 0.8, 0, 10) == pytest.approx(0.8 * (1 - 0.5 ** 3))
    vals = [cubic_schedule(i, 0.9, 2, 12) for i in range(14)]
    assert all(b >= a for a, b in zip(vals, vals[1:]))
