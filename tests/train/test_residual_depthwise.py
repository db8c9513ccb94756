"""What you train is what you deploy, format by format, on a small model with a residual Add
(ReLU after it, a strided 1x1 shortcut), a strided depthwise conv with a ReLU6, a max pool, a
global average pool and BatchNorm folded (the strided convs run on ``sparse_cluster`` in their
stride-1 form, whose statistics choose the radix): the prepared model's eval-mode outputs equal
the deployed emulator's (the exported model on hlsnn's deploy path, emu target) bit for bit,
static and dynamic (source 002's E1: every radix from the current batch) radix points; for the
sparse format after pruning the float model with BatchNorm live, folding, and fine-tuning steps
with the zeros held."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import (BalancedPruner, calibrate, deployed, fold_batchnorm, hold_zeros,  # noqa: E402
                         prepare, quantized_layers)

torch.set_num_threads(1)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(8, 8, 3, 2, padding=1, groups=8, bias=False), nn.BatchNorm2d(8),
                                  nn.ReLU6(), nn.Conv2d(8, 8, 1, bias=False), nn.BatchNorm2d(8))
        self.short = nn.Sequential(nn.Conv2d(8, 8, 1, 2, bias=False), nn.BatchNorm2d(8))
        self.head = nn.Sequential(nn.MaxPool2d(2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10))

    def forward(self, x):
        y = self.stem(x)
        return self.head(nn.functional.relu(self.short(y) + self.body(y)))


def _net(seed):
    torch.manual_seed(seed)
    m = Net()
    for bn in m.modules():              # BatchNorm statistics that are not the identity
        if isinstance(bn, nn.BatchNorm2d):
            with torch.no_grad():
                bn.running_mean.uniform_(-0.2, 0.2), bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5), bn.bias.uniform_(-0.1, 0.1)
    return m


def _data():
    x = np.random.default_rng(8).random((48, 1, 8, 8))
    x[:, :, :2] = 0                     # all-zero rows, as digits have
    return x


def _cfg(tmp_path, fmt, accel, mode):
    p = tmp_path / "d.yaml"
    p.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {{mode: {mode}}}\nformats:\n"
                 f"  f:\n    type: {fmt}\n    accel: {accel}\n")
    return p


def _compare(q, cfg, x, mode):
    q.double().eval()
    if mode == "static":
        calibrate(q, torch.tensor(x[:16]))
    with torch.no_grad():
        mine = q(torch.tensor(x[16:])).numpy()
    with deployed(q.float(), torch.zeros((1,) + x.shape[1:]), cfg) as dep:
        dep.calibrate(x[:16])
        theirs = dep.run(x[16:])
    return mine, theirs


FORMATS = [("pot", "shift8_pynq-z2"), ("twohot", "shift8_pynq-z2"), ("fixed", "sparse8_pynq-z2"),
           ("sparse", "sparse8_pynq-z2")]


@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("fmt,accel", FORMATS)
def test_eval_equals_deployed(tmp_path, fmt, accel, mode):
    eval_equals_deployed(_cfg(tmp_path, fmt, accel, mode), _data(), mode)


def eval_equals_deployed(cfg, x, mode):
    """:func:`_net` prepared for the deployment config ``cfg`` (``mode``: its calibration), a
    training step's graph run, then its eval-mode outputs on ``x`` equal the deployed emulator's
    bit for bit, and not a degenerate all-equal output. Returns the prepared model."""
    q = prepare(fold_batchnorm(_net(1).eval()), cfg)
    q.train()
    q(torch.tensor(x[:16], dtype=torch.float32)).sum().backward()      # a training step's graph runs
    mine, theirs = _compare(q, cfg, x, mode)
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20                # not a degenerate all-equal output
    return q


def test_bfp_eval_equals_deployed(tmp_path):
    """bfp_systolic: the output stage (one exponent per row over its results, M-bit mantissas),
    the bias's own BFP and its alignment, all-zero patches (the digits' blank rows) taking the
    call's largest exponent, over more images than one call of the deployment (32) takes."""
    x = np.concatenate([_data(), _data()[:, :, ::-1] * 0.5])
    cfg = _cfg(tmp_path, "bfp", "bfp8_pynq-z2", "static")
    q = prepare(fold_batchnorm(_net(1).eval()), cfg)
    q.train()
    q(torch.tensor(x[:16], dtype=torch.float32)).sum().backward()      # a training step's graph runs
    mine, theirs = _compare(q, cfg, x, "static")
    assert mine.shape[0] == 80
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_pruned_before_folding_held_and_bit_exact(tmp_path, mode):
    """Prune the float model (BatchNorm live, in training mode) to 75%, fold, prepare, hold the
    zeros, take optimizer steps: every pruned weight is still zero, quantized and raw, the
    depthwise layer too, and the deployed outputs equal eval mode's."""
    x = _data()
    xt = torch.tensor(x, dtype=torch.float32)
    y = torch.tensor(np.arange(48) % 10)
    m = _net(2)
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    pr = BalancedPruner(m, 0.75, 0, 4)
    m.train()
    for _ in range(6):
        opt.zero_grad()
        nn.functional.cross_entropy(m(xt), y).backward()
        opt.step()
        pr.step()
    assert [n for n, _ in pr.named] == ["stem.0", "body.0", "body.3", "short.0", "head.3"]
    zeros = {n: (mod.weight == 0).clone() for n, mod in pr.named}
    cfg = _cfg(tmp_path, "sparse", "sparse8_pynq-z2", mode)
    q = hold_zeros(prepare(fold_batchnorm(m.eval()), cfg))
    opt = torch.optim.Adam(q.parameters(), lr=1e-2)
    q.train()
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(q(xt), y).backward()
        opt.step()
    for n, layer in quantized_layers(q):
        assert torch.all(layer.weight[zeros[n]] == 0), n
        assert torch.all(layer.quantized_weight()[zeros[n]] == 0), n
        assert float(zeros[n].float().mean()) >= 0.75, n       # 7 of 9 a row; 54 of 72 over the depthwise layer
    mine, theirs = _compare(q, cfg, x, mode)
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20


@pytest.mark.parametrize("mode", ["static", "dynamic"])
@pytest.mark.parametrize("fmt", ["fixed", "sparse"])
def test_strided_radix_from_stride1_results(tmp_path, fmt, mode):
    """A strided 1x1 conv and a strided depthwise conv on inputs whose largest values sit on the
    odd rows, which the stride drops: the engine's statistics (its stride-1 form) see them,
    so the radix is coarser than the kept outputs alone would give; torch chooses the same."""
    torch.manual_seed(3)
    m = nn.Sequential(nn.Conv2d(2, 4, 1, stride=2), nn.ReLU(), nn.Conv2d(4, 4, 3, 2, 1, groups=4), nn.ReLU(),
                      nn.Flatten(), nn.Linear(16, 10))
    x = np.random.default_rng(9).random((40, 2, 8, 8))
    x[:, :, 1::2] *= 16
    cfg = _cfg(tmp_path, fmt, "sparse8_pynq-z2", mode)
    q = prepare(m, cfg)
    mine, theirs = _compare(q, cfg, x, mode)
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20


@pytest.mark.parametrize("scale", ["tensor", "channel"])
def test_shift_bias_at_the_deployed_scale(tmp_path, scale):
    """Weights that no longer reach the top magnitude of their learned scale (halved after
    prepare): the deploy finds a finer scale exponent for the same codes, and aligns the bias
    to that radix; eval mode does too."""
    x = _data()
    cfg = tmp_path / "d.yaml"
    cfg.write_text("name: t\nmodel: m.onnx\ndata: digits\nformats:\n  f:\n    type: pot\n    accel: shift8_pynq-z2\n"
                   f"    weight_scale: {scale}\n")
    q = prepare(fold_batchnorm(_net(4).eval()), cfg)
    with torch.no_grad():
        for _, layer in quantized_layers(q):
            layer.weight.mul_(0.5)
            if layer.bias is not None:
                layer.bias.add_(torch.rand_like(layer.bias) * 0.01)
    mine, theirs = _compare(q, cfg, x, "static")
    np.testing.assert_array_equal(mine, theirs)
    with deployed(q, torch.zeros(1, 1, 8, 8), cfg) as dep:
        deployed_f = [np.asarray(ex.f_w, np.int64).tolist() for ex in dep.execs.values()]
    mine_f = [np.asarray(layer._weight_frac(), np.int64).tolist() for _, layer in quantized_layers(q)]
    assert sorted(map(str, mine_f)) == sorted(map(str, deployed_f))       # the bias is aligned to these
    assert all(np.all(np.asarray(f) > layer.wq.exponent().numpy()) for f, (_, layer) in
               zip(mine_f, quantized_layers(q)) if np.asarray(f).size == layer.wq.exponent().numel())
