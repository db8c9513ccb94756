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


def _greedy_lanes(w, s, lanes, row_min=0):
    """Reference for ``balanced_mask(w, s, lanes=M, row_min=r)`` written here: keep each row's
    ``min(r, kept)`` largest first, then walk the weights from the largest magnitude down (ties by
    position), keeping one while its row holds fewer than the cap, until the layer holds as many
    as balanced rows would."""
    rows = w.reshape(w.shape[0], -1).tolist()
    k = len(rows[0])
    kept = k - _zeros(s, k)
    cap = min(k, math.ceil(kept / lanes) * lanes)
    order = sorted(((-abs(v), r * k + c) for r, row in enumerate(rows) for c, v in enumerate(row)))
    mask, count, n = [0.0] * (len(rows) * k), [0] * len(rows), 0
    for r, row in enumerate(rows):
        for c in sorted(range(k), key=lambda c: (-abs(row[c]), c))[:min(row_min, kept)]:
            mask[r * k + c] = 1.0
            count[r] += 1
            n += 1
    for _, pos in order:
        if mask[pos]:
            continue
        if n == len(rows) * kept:
            break
        if count[pos // k] < cap:
            mask[pos] = 1.0
            count[pos // k] += 1
            n += 1
    return torch.tensor(mask).reshape(w.shape)


@pytest.mark.parametrize("s, lanes, row_min", [(0.9375, 8, 0), (0.9, 2, 0), (0.5, 3, 0), (0.0, 8, 0), (1.0, 8, 0),
                                                (0.9375, 8, 1), (0.9, 8, 2), (0.9, 8, 9)])
def test_lane_balanced_mask_against_a_greedy_walk(s, lanes, row_min):
    torch.manual_seed(1)
    w = torch.randn(12, 4, 2, 4)                      # rows of 32
    w[3, 0, 0, :2] = w[5, 0, 0, 0]                    # ties
    w[7] *= 0.01                                      # a row of small weights: none kept without a floor
    m = balanced_mask(w, s, lanes=lanes, row_min=row_min)
    assert torch.equal(m, _greedy_lanes(w, s, lanes, row_min))
    if row_min and s < 1.0:
        assert int(m.reshape(12, -1).sum(1).min()) >= min(row_min, 32 - _zeros(s, 32))
    elif s == 0.9375 and lanes == 8:
        assert int(m[7].sum()) == 0                   # the small row keeps nothing without a floor
    k = 32
    kept = k - _zeros(s, k)
    assert int(m.sum()) == 12 * kept                  # the balanced rows' count for the layer
    assert int(m.reshape(12, -1).sum(1).max()) <= min(k, math.ceil(kept / lanes) * lanes)


def test_lane_balanced_rows_differ_and_keep_the_larger():
    # row 0 holds the four largest magnitudes: balanced rows keep 2 of each row; lanes of 4 let
    # row 0 keep all four, row 1 none
    w = torch.tensor([[9.0, 8.0, 7.0, 6.0], [1.0, 2.0, 3.0, 0.5]])
    assert balanced_mask(w, 0.5).tolist() == [[1, 1, 0, 0], [0, 1, 1, 0]]
    assert balanced_mask(w, 0.5, lanes=4).tolist() == [[1, 1, 1, 1], [0, 0, 0, 0]]
    assert balanced_mask(w, 0.5, lanes=3).tolist() == [[1, 1, 1, 0], [0, 0, 1, 0]]   # cap 3 (2 up to 3)
    with pytest.raises(ValueError, match="lanes"):
        balanced_mask(w, 0.5, lanes=0)


def test_pruner_lanes_depthwise_still_per_layer():
    m = _model()
    pr = BalancedPruner(m, 0.9, 0, 1, lanes=8)
    before = {layer: layer.weight.detach().clone() for _, layer in pr.named}
    pr.apply(0.9)
    for name, layer in pr.named:
        w = before[layer]
        if is_depthwise(layer):
            assert torch.equal(pr.masks[layer], balanced_mask(w, 0.9, per_layer=True))
        else:
            assert torch.equal(pr.masks[layer], _greedy_lanes(w, 0.9, 8)), name
    with pytest.raises(ValueError, match="lanes"):
        BalancedPruner(m, 0.9, 0, 1, lanes=True)
    with pytest.raises(ValueError, match="row_min"):
        BalancedPruner(m, 0.9, 0, 1, row_min=1)          # a floor without lanes


def test_lane_scale_folded_compares_rows_as_folding_scales_them():
    torch.manual_seed(2)
    w = torch.randn(12, 32)
    scale = torch.rand(12) * 4 - 2                    # signs do not matter, magnitudes do
    m = balanced_mask(w, 0.9375, lanes=8, row_scale=scale)
    assert torch.equal(m, _greedy_lanes(w * scale.abs()[:, None], 0.9375, 8))
    assert not torch.equal(m, balanced_mask(w, 0.9375, lanes=8))
    # the pruner: each conv's rows scaled by the BatchNorm right after it, as fold_batchnorm folds it
    net = _model()
    with torch.no_grad():
        for bn in (net[1], net[4], net[7]):
            bn.weight.copy_(torch.rand(bn.num_features) * 3)
            bn.running_var.copy_(torch.rand(bn.num_features) * 5 + 0.1)
    pr = BalancedPruner(net, 0.9, 0, 1, lanes=8, lane_scale="folded")
    before = {layer: layer.weight.detach().clone() for _, layer in pr.named}
    pr.apply(0.9)
    for (name, layer), bn in zip(pr.named, (net[1], net[4], net[7], None)):
        w = before[layer]
        if is_depthwise(layer):
            assert torch.equal(pr.masks[layer], balanced_mask(w, 0.9, per_layer=True))
            continue
        s = None if bn is None else bn.weight / torch.sqrt(bn.running_var + bn.eps)
        want = balanced_mask(w, 0.9, lanes=8, row_scale=s)
        assert torch.equal(pr.masks[layer], want), name
        if bn is not None:                            # s is what folding multiplies the rows by
            ref = fuse(w, bn)
            assert torch.allclose(ref, w * s.reshape(-1, *[1] * (w.dim() - 1)))
    with pytest.raises(ValueError, match="lane_scale"):
        BalancedPruner(net, 0.9, 0, 1, lanes=8, lane_scale="bn")


def fuse(w, bn):
    """The folded weight torch's own fuse computes (torch.nn.utils.fusion.fuse_conv_bn_weights)."""
    from torch.nn.utils.fusion import fuse_conv_bn_weights
    fw, _ = fuse_conv_bn_weights(w, None, bn.running_mean, bn.running_var, bn.eps, bn.weight, bn.bias)
    return fw.detach()


def _smallest_over_layer(folded, s):
    """A 0/1 mask zeroing the round(s * n) smallest |folded| of the whole tensor (ties by
    position), from numpy's stable sort."""
    import numpy as np
    a = np.abs(folded.detach().numpy()).reshape(-1)
    mask = np.ones_like(a)
    mask[np.argsort(a, kind="stable")[:_zeros(s, a.size)]] = 0.0
    return torch.from_numpy(mask.reshape(folded.shape))


def test_depthwise_scale_folded_ranks_channels_as_folding_scales_them():
    # a channel whose BatchNorm amplifies small raw weights keeps them: the folded weights
    # (torch's own fuse_conv_bn_weights) decide, over the whole depthwise layer
    net = _model()
    with torch.no_grad():
        dw, bn = net[3], net[4]
        dw.weight[:8].mul_(0.05)                     # half the channels small by raw magnitude ...
        bn.weight.copy_(torch.rand(16) + 0.5)
        bn.running_var.copy_(torch.rand(16) * 5 + 0.1)
        bn.running_var[:8].mul_(0.05 ** 2)           # ... as large as the rest once folded
        net[1].weight.copy_(torch.rand(16) * 3)      # the other layers' BatchNorms too, to show
        net[7].weight.copy_(torch.rand(8) * 3)       # that their balanced rows stay as they were
    before = {layer: layer.weight.detach().clone() for layer in (net[0], net[3], net[6], net[10])}
    pr = BalancedPruner(net, 0.9, 0, 1, depthwise_scale="folded")
    pr.apply(0.9)
    want = _smallest_over_layer(fuse(before[dw], bn), 0.9)
    assert torch.equal(pr.masks[dw], want)
    raw = _smallest_over_layer(before[dw], 0.9)
    assert not torch.equal(want, raw)                # raw magnitudes drop the amplified channels
    assert raw[:8].sum() == 0 and want[:8].sum() > 0
    assert int(want.sum()) == 144 - _zeros(0.9, 144)
    plain = BalancedPruner(_model(), 0.9, 0, 1)      # the regular layers: balanced rows, as without
    for layer in (net[0], net[6], net[10]):
        assert torch.equal(pr.masks[layer], balanced_mask(before[layer], 0.9))
    assert plain.lane_folded is False and plain.depthwise_folded is False
    # lane_scale="folded" alone leaves the depthwise layer by raw magnitude (as before the option)
    net2 = _model()
    with torch.no_grad():
        net2[3].weight.copy_(before[dw])
        net2[4].weight.copy_(bn.weight)
        net2[4].running_var.copy_(bn.running_var)
    pr2 = BalancedPruner(net2, 0.9, 0, 1, lanes=8, lane_scale="folded")
    pr2.apply(0.9)
    assert torch.equal(pr2.masks[net2[3]], raw)
    with pytest.raises(ValueError, match="depthwise_scale"):
        BalancedPruner(net, 0.9, 0, 1, depthwise_scale="bn")


def test_balanced_mask_per_layer_row_scale():
    torch.manual_seed(3)
    w = torch.randn(6, 1, 3, 3)
    scale = torch.rand(6) * 4 - 2
    m = balanced_mask(w, 0.8, per_layer=True, row_scale=scale)
    assert torch.equal(m, _smallest_over_layer(w * scale.abs().reshape(-1, 1, 1, 1), 0.8))
    # with balanced rows a row's factor does not change its order
    w2 = torch.randn(6, 20)
    assert torch.equal(balanced_mask(w2, 0.8, row_scale=scale), balanced_mask(w2, 0.8))
