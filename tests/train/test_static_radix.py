"""Static-radix quantization-aware training (``calibrate(..., in_training=True)``): the fine-tuning
converts at the radixes the static deployment runs with, not at each batch's own (DETERMINE of
the batch); and calibration on more images than the default, deployed bit for bit."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.train import calibrate, deployed, prepare  # noqa: E402

torch.set_num_threads(1)


def _cfg(tmp_path, samples=128):
    cfg = tmp_path / "d.yaml"
    cfg.write_text(f"name: t\nmodel: m.onnx\ndata: digits\ncalibration: {{samples: {samples}, mode: static}}\n"
                   "formats:\n  f:\n    type: sparse\n    accel: sparse8_pynq-z2\n")
    return cfg


def _model():
    torch.manual_seed(3)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 8 * 8, 10))


def test_frozen_radix_used_in_training_only_when_asked(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.random((16, 1, 8, 8))
    x[0, 0, 0, 0] = 1.0                       # max |x| = 1: DETERMINE's int8 radix is 6 (64 <= 127 < 128)
    big = torch.tensor(x * 8)                 # max 8: its own radix would be 3
    m = prepare(_model(), _cfg(tmp_path)).double()
    aq = m[0].aq                              # the first conv's input conversion
    calibrate(m, torch.tensor(x))
    assert aq.frozen == 6
    m.train()
    m(big)
    assert aq.last_f == 3                     # default: training converts at the batch's own radix
    calibrate(m, torch.tensor(x), in_training=True)
    m.train()
    out = m[0].aq(big)
    assert aq.last_f == 6                     # the static radix, in training too
    want = np.clip(np.round(x * 8 * 64), -128, 127) / 64       # int8 at radix 6, saturated
    np.testing.assert_array_equal(out.detach().numpy(), want)
    calibrate(m, None)                        # unfrozen: current statistics again, in both modes
    m.train()
    m(big)
    assert aq.last_f == 3 and aq.frozen is None and not aq.frozen_in_training


def test_calibrate_float32_model_in_float64(tmp_path):
    """A float32 model in training calibrates in x_cal's float64 and is float32 again after,
    its weights unchanged; the radixes are those of the float64 model."""
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.random((16, 1, 8, 8)))
    m32 = prepare(_model(), _cfg(tmp_path)).float().train()
    w = m32[0].weight.detach().clone()
    calibrate(m32, x, in_training=True)
    m64 = prepare(_model(), _cfg(tmp_path)).double()
    calibrate(m64, x)
    assert m32[0].weight.dtype == torch.float32 and m32.training
    assert torch.equal(m32[0].weight.detach(), w)
    assert [m32[i].oq.frozen for i in (0, 3)] == [m64[i].oq.frozen for i in (0, 3)]


def test_static_radix_step_trains_and_deploys_bit_exact(tmp_path):
    """A few optimizer steps with the static radixes, calibrated on 40 images (the config's
    samples 40), then the eval outputs equal the deployment's."""
    rng = np.random.default_rng(2)
    x = rng.random((60, 1, 8, 8))
    y = torch.tensor(rng.integers(0, 10, 60))
    cfg = _cfg(tmp_path, samples=40)
    m = prepare(_model(), cfg)
    calibrate(m, torch.tensor(x[:40]), in_training=True)
    frozen = [m[i].oq.frozen for i in (0, 3)]
    opt = torch.optim.Adam(m.parameters(), lr=1e-2)
    w0 = m[0].weight.detach().clone()
    for _ in range(3):
        m.train()
        opt.zero_grad()
        nn.functional.cross_entropy(m(torch.tensor(x[40:], dtype=torch.float32)), y[40:]).backward()
        opt.step()
        assert [m[i].oq.last_f for i in (0, 3)] == frozen
    assert not torch.equal(m[0].weight.detach(), w0)
    m.eval().double()
    calibrate(m, torch.tensor(x[:40]))
    with torch.no_grad():
        mine = m(torch.tensor(x[40:])).numpy()
    with deployed(m.float(), torch.zeros(1, 1, 8, 8), cfg) as dep:
        dep.calibrate(x[:40])
        theirs = dep.run(x[40:])
    np.testing.assert_array_equal(mine, theirs)
    assert np.unique(mine).size > 20
