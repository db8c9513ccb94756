"""Per-output-channel int8 weight scales for the ``fixed`` / ``sparse`` formats (the deploy's
``weight_scale: channel``: ``SparseExec`` quantizes each output channel at its own radix and
gives ``sparse_cluster`` one output shift per channel): the fake quantizer against a reference
written here from the rule, and a prepared model's eval-mode outputs against the deployed
emulator's, bit for bit, on weights whose channels differ by orders of magnitude (a channel
more than 2**8 below the largest, and an all-zero channel)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import (FixedWeight, calibrate, deployed, fold_batchnorm, hold_zeros,  # noqa: E402
                         prepare, quantized_layers)

torch.set_num_threads(1)


def _frac(a):
    """The largest integer F with a * 2**F <= 127 (a > 0), by stepping."""
    f = 0
    while a * 2.0 ** f > 127:
        f -= 1
    while a * 2.0 ** (f + 1) <= 127:
        f += 1
    return f


def _reference(w):
    """One radix per row: the row's own, at most 8 finer than the tensor's; a row whose codes
    are all zero (or that is zero) the tensor's. Returns (codes, radix per row)."""
    rows = np.asarray(w, np.float64).reshape(w.shape[0], -1)
    whole = _frac(np.abs(rows).max())
    codes, fr = [], []
    for r in rows:
        f = min(_frac(np.abs(r).max()), whole + 8) if np.abs(r).max() > 0 else whole
        c = [min(127, max(-128, round(v * 2.0 ** f))) for v in r]    # round(): half to even
        if not any(c):
            f = whole
            c = [0] * len(r)
        codes.append(c)
        fr.append(f)
    return np.array(codes), np.array(fr)


def test_channel_fake_quant_matches_the_rule():
    g = torch.Generator().manual_seed(5)
    w = torch.randn(6, 3, 3, 3, generator=g, dtype=torch.float64)
    w[1] *= 1e-2
    w[2] *= 1e-4                    # its own radix would be more than 8 finer than the tensor's
    w[3] = 0
    w[4] *= 1e-9                    # rounds to zero at the limited radix: the tensor's radix
    wq = FixedWeight(per_channel=True)
    got = wq(w).detach().numpy().reshape(6, -1)
    codes, fr = _reference(w.numpy())
    np.testing.assert_array_equal(got, codes * 2.0 ** -fr[:, None])
    assert wq.fracs(w).tolist() == fr.tolist()
    whole = _frac(float(w.abs().max()))
    assert min(fr[0], fr[5]) == whole and fr[1] > whole + 4 and fr[2] == whole + 8 and fr[3] == fr[4] == whole
    tensor = FixedWeight()(w).detach().numpy().reshape(6, -1)
    assert np.count_nonzero(tensor[1]) < np.count_nonzero(got[1])        # per tensor, row 1 loses codes
    assert np.abs(got[1] - w.numpy()[1].reshape(-1)).max() <= 2.0 ** (-fr[1] - 1)     # within half a unit


class Net(nn.Module):
    """A strided stem, a depthwise + 1x1 pair, and a classifier (every layer on sparse_cluster)."""

    def __init__(self):
        super().__init__()
        self.f = nn.Sequential(nn.Conv2d(1, 8, 3, 2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                               nn.Conv2d(8, 8, 3, padding=1, groups=8, bias=False), nn.BatchNorm2d(8), nn.ReLU6(),
                               nn.Conv2d(8, 12, 1, bias=False), nn.BatchNorm2d(12), nn.ReLU(),
                               nn.MaxPool2d(2), nn.Flatten(), nn.Linear(48, 10))

    def forward(self, x):
        return self.f(x)


def _cfg(tmp_path, mode):
    p = tmp_path / "d.yaml"
    p.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {{mode: {mode}}}\nformats:\n"
                 f"  f:\n    type: sparse\n    accel: sparse8_pynq-z2\n    weight_scale: channel\n")
    return p


@pytest.mark.parametrize("mode", ["static", "dynamic"])
def test_channel_scale_eval_equals_deployed(tmp_path, mode):
    torch.manual_seed(6)
    m = Net()
    for bn in m.modules():
        if isinstance(bn, nn.BatchNorm2d):
            with torch.no_grad():
                bn.running_mean.uniform_(-0.2, 0.2), bn.running_var.uniform_(0.5, 2.0)
                bn.weight.uniform_(0.5, 1.5), bn.bias.uniform_(-0.1, 0.1)
    q = prepare(fold_batchnorm(m.eval()), _cfg(tmp_path, mode))
    layers = dict(quantized_layers(q))
    with torch.no_grad():                    # channels far apart: per-tensor int8 would zero them
        layers["f.6"].weight[:4] *= 0.02
        layers["f.6"].weight[4] *= 1e-4
        layers["f.6"].weight[5] = 0
        layers["f.11"].weight[2:5] *= 0.03
        layers["f.6"].weight[6, :5] = 0      # some zeros to hold
    hold_zeros(q)
    x = np.random.default_rng(8).random((48, 1, 8, 8))
    x[:, :, :2] = 0
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    q.train()
    for _ in range(2):                       # training steps on the per-channel fake quantization
        opt.zero_grad()
        q(torch.tensor(x[:16], dtype=torch.float32)).logsumexp(1).sum().backward()
        opt.step()
    assert torch.all(layers["f.6"].quantized_weight()[6, :5] == 0)
    q.double().eval()
    if mode == "static":
        calibrate(q, torch.tensor(x[:16]))
    with torch.no_grad():
        mine = q(torch.tensor(x[16:])).numpy()
    with deployed(q.float(), torch.zeros(1, 1, 8, 8), _cfg(tmp_path, mode)) as dep:
        dep.calibrate(x[:16])
        theirs = dep.run(x[16:])
        deployed_f = {ln: np.asarray(ex.f_w, np.int64).reshape(-1).tolist() for ln, ex in dep.execs.items()}
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20
    mine_f = [np.asarray(layer._weight_frac(), np.int64).reshape(-1).tolist() for layer in layers.values()]
    assert sorted(map(str, mine_f)) == sorted(map(str, deployed_f.values()))
    assert any(len(set(f)) > 2 for f in mine_f)           # the scales do differ per channel
