"""hlsnn.train.fold_constant_channels: a channel pruned away entirely is a constant, folded into
the layers that read it. Expected values are properties: the model computes the same function
(float64, before and after), the folded weights are zero, and a layer that cannot see the
constant at every tap (a padded convolution) is left as it was."""
import copy

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from hlsnn.train import fold_batchnorm, fold_constant_channels  # noqa: E402


def _bn(c, gen):
    bn = nn.BatchNorm2d(c)
    bn.running_mean.copy_(torch.randn(c, generator=gen))
    bn.running_var.copy_(torch.rand(c, generator=gen) + 0.5)
    bn.weight.data.copy_(torch.randn(c, generator=gen))
    bn.bias.data.copy_(torch.randn(c, generator=gen))
    return bn


def _net(gen):
    net = nn.Sequential(
        nn.Conv2d(3, 4, 3, padding=1), _bn(4, gen), nn.ReLU6(),            # 0-2: channels 1, 3 dead
        nn.Conv2d(4, 6, 1), nn.ReLU(),                                      # 3-4: 1x1, folds 1 and 3
        nn.Conv2d(6, 6, 3, padding=1, groups=6), nn.ReLU(),                 # 5-6: padded: not folded; channel 2 dead
        nn.Conv2d(6, 5, 3), nn.Hardswish(),                                 # 7-8: no padding: folds channel 2
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(5, 3))             # 9-11: channel 4 of 7 dead -> Linear
    with torch.no_grad():
        for m in net:
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                m.weight.copy_(torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(torch.randn(m.bias.shape, generator=gen))
        net[0].weight[[1, 3]] = 0
        net[3].weight[:, 2] = 0              # not a constant input: stays as it is
        net[3].weight[5] = 0                 # a dead channel the padded depthwise layer reads
        net[5].weight[2] = 0
        net[7].weight[4] = 0
        net[5].bias[0] = 0.3
    return net.eval().double()


def test_the_function_is_unchanged_and_the_constants_are_gone():
    gen = torch.Generator().manual_seed(0)
    net = _net(gen)
    before = copy.deepcopy(net)
    x = torch.randn(16, 3, 12, 12, generator=gen, dtype=torch.float64)
    want = before(x)
    done = fold_constant_channels(net)
    assert done == [("3", [1, 3]), ("7", [2]), ("11", [4])]
    torch.testing.assert_close(net(x), want, rtol=1e-12, atol=1e-12)
    assert (net[3].weight[:, [1, 3]] == 0).all() and (net[3].weight[:5, 0] != 0).all()
    assert (net[7].weight[:, 2] == 0).all()
    assert (net[11].weight[:, 4] == 0).all()
    # the padded depthwise layer reads channel 5, a constant, but its border results see zeros:
    # never folded into
    torch.testing.assert_close(net[5].weight, before[5].weight, rtol=0, atol=0)
    assert (net[5].weight[5] != 0).all()
    # the other weights are untouched
    torch.testing.assert_close(net[3].weight[:, [0, 2]], before[3].weight[:, [0, 2]], rtol=0, atol=0)
    torch.testing.assert_close(net[3].bias[5], before[3].bias[5], rtol=0, atol=0)


def test_a_padded_reader_would_differ_at_the_border():
    """Why a padded convolution is never folded into: a constant input's products at the
    border read zeros, so they are no bias (the property the rule rests on)."""
    conv = nn.Conv2d(1, 1, 3, padding=1, bias=False).double()
    with torch.no_grad():
        conv.weight.fill_(1.0)
    y = conv(torch.full((1, 1, 4, 4), 2.0, dtype=torch.float64))
    y = y.detach()
    assert float(y[0, 0, 1, 1]) == 18.0 and float(y[0, 0, 0, 0]) == 8.0


def test_a_batchnorm_reading_only_constants_no_longer_makes_huge_weights():
    """The failure it mends: a 1x1 channel that reads only pruned-away (constant) channels has a
    BatchNorm with almost no variance; folding it gives weights of hundreds that cancel in float
    only. After fold_constant_channels that channel's weights are zero and its bias is its value."""
    gen = torch.Generator().manual_seed(1)
    net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, groups=1), nn.ReLU6(),
                        nn.Conv2d(4, 2, 1, bias=False), nn.BatchNorm2d(2), nn.ReLU6())
    with torch.no_grad():
        net[0].weight.copy_(torch.randn(net[0].weight.shape, generator=gen))
        net[0].weight[[1, 2]] = 0
        net[0].bias.copy_(torch.tensor([0.1, 0.5, 0.37, -0.2]))
        net[2].weight.zero_()
        net[2].weight[0, [1, 2], 0, 0] = torch.tensor([0.9, -0.4])     # channel 0 reads only constants
        net[2].weight[1, [0, 3], 0, 0] = torch.tensor([0.7, 0.2])
    net.train()
    with torch.no_grad():
        for _ in range(300):                                           # running statistics from data
            net(torch.randn(4, 3, 8, 8, generator=gen))
    net.eval()
    fold_batchnorm(net)
    net.double()
    assert float(net[2].weight[0].abs().max()) > 100                    # the huge folded weights
    x = torch.randn(8, 3, 8, 8, generator=gen, dtype=torch.float64)
    want = net(x)
    assert fold_constant_channels(net) == [("2", [1, 2])]
    assert (net[2].weight[0] == 0).all()
    torch.testing.assert_close(net(x), want, rtol=1e-9, atol=1e-9)
    assert float(net[2].weight.abs().max()) < 100


def test_nothing_to_fold_and_training_mode():
    gen = torch.Generator().manual_seed(2)
    net = nn.Sequential(nn.Conv2d(2, 3, 1), nn.ReLU(), nn.Conv2d(3, 2, 1)).eval()
    before = copy.deepcopy(net)
    assert fold_constant_channels(net) == []
    for a, b in zip(net.parameters(), before.parameters()):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="eval mode"):
        fold_constant_channels(net.train())
    del gen


def test_a_linear_on_a_map_is_not_read_as_features():
    """A Linear on a (N, C, H, W) map acts on W: its dead rows are not channels, and a BatchNorm2d
    after it normalizes C, so the last axis's index 1 is no constant after it. Nothing is folded,
    and the function is unchanged (read as features, the BatchNorm's channel-1 statistics would be
    applied to it and a wrong constant folded into the last Linear)."""
    gen = torch.Generator().manual_seed(3)
    net = nn.Sequential(nn.Conv2d(2, 3, 1), nn.Linear(4, 4), _bn(3, gen), nn.Linear(4, 2))
    with torch.no_grad():
        net[1].weight[1] = 0
    net = net.eval().double()
    x = torch.randn(5, 2, 4, 4, generator=gen, dtype=torch.float64)
    want = net(x)
    assert fold_constant_channels(net) == []
    torch.testing.assert_close(net(x), want, rtol=0, atol=0)


def test_prelu_and_batchnorm1d_carry_a_constant():
    """A negative constant through a per-channel PReLU and a BatchNorm2d, and a dead Linear row
    through a BatchNorm1d and a shared PReLU: each value computed by the module itself; the
    function is unchanged."""
    gen = torch.Generator().manual_seed(5)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.PReLU(4), _bn(4, gen), nn.Conv2d(4, 3, 1), nn.AdaptiveAvgPool2d(1),
                        nn.Flatten(), nn.Linear(3, 5), nn.BatchNorm1d(5), nn.PReLU(), nn.Linear(5, 2))
    with torch.no_grad():
        for k in (0, 1, 3, 6, 8, 9):
            for prm in net[k].parameters():
                prm.copy_(torch.randn(prm.shape, generator=gen))
        net[7].running_mean.copy_(torch.randn(5, generator=gen))
        net[7].running_var.copy_(torch.rand(5, generator=gen) + 0.5)
        net[0].weight[1] = 0
        net[0].bias[1] = -0.7                 # negative: the PReLU's slope acts
        net[6].weight[2] = 0
        net[6].bias[2] = -0.4
    net = net.eval().double()
    x = torch.randn(6, 3, 7, 7, generator=gen, dtype=torch.float64)
    want = net(x)
    assert fold_constant_channels(net) == [("3", [1]), ("9", [2])]
    torch.testing.assert_close(net(x), want, rtol=1e-12, atol=1e-12)
