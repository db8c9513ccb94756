"""Non-uniform sparsity (hlsnn.train.erk_sparsities): the model reaches its target counted over
every pruned weight, whole zeros per balanced unit (a row, or a depthwise layer), the small
layers pruned less than the big ones by the Erdős–Rényi-Kernel rule worked out here by hand,
and the pruner reaches each layer's own sparsity with every row still balanced."""
import math

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import BalancedPruner, erk_sparsities, is_depthwise, overall_sparsity  # noqa: E402

torch.set_num_threads(1)


def _model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 16, (10, 4), padding=(4, 1)), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.Conv2d(16, 16, 1), nn.BatchNorm2d(16), nn.ReLU(),
                         nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def test_erk_two_layers_by_hand():
    """Conv (8, 4, 3, 3): sum/prod = 18/288; Linear (10, 8): 18/80. At 50% the densities are
    eps * raw with eps * 36 = 184 nonzeros: 0.3194 and 1.15 -> capped at 1, so the conv takes
    the rest: 184 - 80 = 104 nonzeros of 288 (36.1%), 23 of 36 zeros a row (rounded), 184
    zeros in all, the target exactly."""
    m = nn.Sequential(nn.Conv2d(4, 8, 3), nn.Flatten(), nn.Linear(8, 10))
    named = [("0", m[0]), ("2", m[2])]
    sp = erk_sparsities(named, 0.5)
    assert sp["2"] == 0.0
    assert sp["0"] == 23 / 36
    assert 8 * 23 >= 0.5 * 368


@pytest.mark.parametrize("target", [0.75, 0.9])
def test_erk_reaches_the_target_small_layers_less(target):
    m = _model()
    named = [(n, x) for n, x in m.named_modules() if isinstance(x, (nn.Conv2d, nn.Linear))]
    sp = erk_sparsities(named, target)
    total = sum(x.weight.numel() for _, x in named)
    zeros = 0
    for n, x in named:
        k = x.weight.numel() if is_depthwise(x) else x.weight.numel() // x.weight.shape[0]
        z = sp[n] * k
        assert abs(z - round(z)) < 1e-9, n                 # whole zeros per balanced unit
        assert round(z) <= k - 1, n                        # every row keeps a weight
        zeros += round(z) * (1 if is_depthwise(x) else x.weight.shape[0])
    assert target * total <= zeros < target * total + 16    # reached, by less than one unit's step
    # the first conv (1920 weights, 33 / 1920) pruned most; the depthwise 3x3 (23 / 144) least
    assert sp["0"] > target > sp["3"]
    assert sp["0"] == max(sp.values())
    uniform = erk_sparsities(named, target, power=0.0)     # power 0: every layer the same share
    assert max(uniform.values()) - min(uniform.values()) < 0.1
    fixed = erk_sparsities(named, target, fixed={"11": 0.0})     # a dense classifier: the rest pruned more
    assert fixed["11"] == 0.0 and fixed["0"] > sp["0"] and fixed["6"] >= sp["6"]


def test_pruner_reaches_each_layers_sparsity_balanced():
    m = _model()
    x, y = torch.rand(32, 3, 12, 8), torch.arange(32) % 10
    named = [(n, l) for n, l in m.named_modules() if isinstance(l, (nn.Conv2d, nn.Linear))]
    sp = erk_sparsities(named, 0.9)
    pr = BalancedPruner(m, 0.9, 0, 4, sparsities=sp)
    opt = torch.optim.SGD(m.parameters(), lr=0.05)
    m.train()
    halfway = None
    for i in range(6):
        opt.zero_grad()
        nn.functional.cross_entropy(m(x), y).backward()
        opt.step()
        pr.step()
        if i == 2:
            halfway = {n: float((l.weight == 0).float().mean()) for n, l in named}
    for n, layer in pr.named:
        rows = layer.weight.detach().reshape(layer.weight.shape[0], -1)
        zeros = (rows == 0).sum(1)
        if is_depthwise(layer):
            assert int(zeros.sum()) == round(sp[n] * layer.weight.numel()), n
        else:
            assert zeros.min() == zeros.max() == round(sp[n] * rows.shape[1]), n
        assert halfway[n] < sp[n], n                      # on the way, each below its own final
    assert overall_sparsity(pr.named) >= 0.9
    assert BalancedPruner(m, 0.9, 0, 4, allocation="erk").final == pr.final
    assert math.isclose(overall_sparsity(pr.named), sum(sp[n] * l.weight.numel() for n, l in named)
                        / sum(l.weight.numel() for _, l in named))
