"""Eval mode of a prepared model against hlsnn's deploy path (the emu target) on the exported
model: the same outputs, bit for bit, for the fixed-point engines' formats; the deployed
weights are the trained codes."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import calibrate, deployed, fold_batchnorm, prepare, quantized_layers  # noqa: E402

torch.set_num_threads(1)


def _model(seed):
    torch.manual_seed(seed)
    m = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                      nn.Conv2d(8, 8, 3, stride=2, padding=1), nn.ReLU6(), nn.AvgPool2d(2), nn.Flatten(),
                      nn.Linear(32, 10))
    with torch.no_grad():               # BatchNorm statistics that are not the identity
        bn = m[1]
        bn.running_mean.uniform_(-0.2, 0.2), bn.running_var.uniform_(0.5, 2.0)
        bn.weight.uniform_(0.5, 1.5), bn.bias.uniform_(-0.1, 0.1)
    return fold_batchnorm(m.eval())


@pytest.mark.parametrize("fmt,accel,mode", [("pot", "shift8_pynq-z2", "static"),
                                            ("pot", "shift8_pynq-z2", "dynamic"),
                                            ("twohot", "shift8_pynq-z2", "static"),
                                            ("sparse", "sparse8_pynq-z2", "static")])
def test_eval_equals_deployed_emulator(tmp_path, fmt, accel, mode):
    rng = np.random.default_rng(7)
    x = rng.random((40, 1, 8, 8))
    x[:, :, :2] = 0                                     # some all-zero rows, as digits have
    cfg = tmp_path / "d.yaml"
    cfg.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {{mode: {mode}}}\nformats:\n"
                   f"  f:\n    type: {fmt}\n    accel: {accel}\n")
    m = prepare(_model(1), cfg)
    m.double().eval()
    if mode == "static":
        calibrate(m, torch.tensor(x[:16]))
    with torch.no_grad():
        mine = m(torch.tensor(x[16:])).numpy()
    trained = {n: q.quantized_weight().detach().double().numpy() for n, q in quantized_layers(m)}
    with deployed(m.float(), torch.zeros(1, 1, 8, 8), cfg) as dep:
        dep.calibrate(x[:16])
        theirs = dep.run(x[16:])
        if fmt != "sparse":                              # the deployed codes are the trained ones
            got = sorted(np.sort(e.wq.dequantize().reshape(-1)).tolist() for e in dep.execs.values())
            want = sorted(np.sort(w.reshape(-1)).tolist() for w in trained.values())
            assert got == want
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20                     # not a degenerate all-equal output


class _Res(nn.Module):
    """A residual block (host Add, ReLU after it), a max pool and a global average pool."""

    def __init__(self):
        super().__init__()
        self.a = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.b = nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1))
        self.head = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 10))

    def forward(self, x):
        y = self.a(x)
        return self.head(nn.functional.relu(y + self.b(y)))


@pytest.mark.parametrize("fmt,accel", [("pot", "shift8_pynq-z2"), ("sparse", "sparse8_pynq-z2")])
def test_residual_eval_equals_deployed_emulator(tmp_path, fmt, accel):
    torch.manual_seed(2)
    x = np.random.default_rng(8).random((48, 1, 8, 8))
    cfg = tmp_path / "d.yaml"
    cfg.write_text(f"name: t\nmodel: m.onnx\ndata: digits\nformats:\n  f:\n    type: {fmt}\n    accel: {accel}\n")
    m = prepare(_Res().eval(), cfg).double()
    calibrate(m, torch.tensor(x[:16]))
    with torch.no_grad():
        mine = m(torch.tensor(x[16:])).numpy()
    with deployed(m.float(), torch.zeros(1, 1, 8, 8), cfg) as dep:
        dep.calibrate(x[:16])
        theirs = dep.run(x[16:])
    np.testing.assert_array_equal(mine, theirs)
