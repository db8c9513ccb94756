"""hlsnn.train: the fake quantizers against hlsnn's numpy formats, STE gradients, balanced
pruning, export keeping the codes. Skipped without torch; marked ``train`` (CI's own stage)."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from hlsnn.deploy.quantize.quant import host_radix, to_fixed  # noqa: E402
from hlsnn.formats import bfp as bfpfmt  # noqa: E402
from hlsnn.formats import shift as sfmt  # noqa: E402
from hlsnn.train import (BalancedPruner, ShiftWeight, balanced_mask, bfp_fake, check_round_trip,  # noqa: E402
                         cubic_schedule, export, fixed_fake, prepare, quantized_layers)

torch.set_num_threads(1)


@pytest.mark.parametrize("relu", [False, True])
def test_bfp_gemm_equals_the_emulator_with_dead_rows(relu):
    """The train extra's bfp_gemm and the bfp_systolic emulator (emu target, float API) on weights
    with all-zero rows (rule 0w: their exponent is the largest live row's), bit for bit. One live
    row is coarse (weights -64, cut by the ReLU where ``relu``), so a dead row's bias is rounded to
    that row's product grid (1/16 here) where the sample's outputs are finer: a bfp_gemm that
    kept the format's all-zero exponent (the bias exact) differs there."""
    from pathlib import Path
    import hlsnn
    from hlsnn.train.bfpgemm import bfp_gemm
    rng = np.random.default_rng(11)
    w = rng.standard_normal((9, 24)) * 0.1
    w[8] = -64.0
    w[[0, 4, 5]] = 0.0
    w = bfpfmt.quantize(w, 8, axis=-1, exponent_bits=8, rounding="nearest_even").dequantize()   # on the grid
    b = rng.standard_normal(9) * 2
    b[[0, 4, 5, 8]] = [0.3, -0.2, 0.45, 0.0]
    x = np.abs(rng.standard_normal((6, 24))) * 3
    x[2] = 0.0                                       # an all-zero sample too (rule 0)
    accel = Path(__file__).resolve().parents[2] / "configs" / "accel" / "bfp8_zcu104.yaml"
    with hlsnn.Accelerator(accel, "emu") as acc:
        ref = acc.gemm(x, w, bias=b, relu=relu)
    got = bfp_gemm(torch.tensor(x), torch.tensor(w), torch.tensor(b), 8, 8, "nearest_even", relu=relu,
                   max_n=acc.config.params["max_n"]).detach().double().numpy()
    np.testing.assert_array_equal(got, ref)
    if relu:    # the bias on the coarse row's product grid 2**(xe + 0) (its exponent: 64 = 2**(6 + 0)), not 0
        live = [s for s in range(6) if s != 2]
        grid = np.exp2(np.floor(np.log2(np.abs(x[live]).max(axis=1, keepdims=True))) - 6)
        np.testing.assert_array_equal(got[live][:, [0, 5]], np.round(np.array([0.3, 0.45]) / grid) * grid)


@pytest.mark.parametrize("mode,delta", [("pot", 0), ("twohot", 0), ("twohot", 2)])
@pytest.mark.parametrize("per_channel", [False, True])
def test_shift_fake_equals_numpy_quantizer(mode, delta, per_channel):
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((6, 20)) * 0.1).astype(np.float32)
    q = ShiftWeight(torch.tensor(w), mode, 4, delta, per_channel=per_channel)
    got = q(torch.tensor(w)).detach().double().numpy()
    ax = 0 if per_channel else None
    ref = (sfmt.quantize_pot(w.astype(np.float64), 4, axis=ax) if mode == "pot"
           else sfmt.quantize_twohot(w.astype(np.float64), 4, delta=delta, axis=ax)).dequantize()
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("per_channel", [False, True])
def test_shift_fake_with_a_code_limit_equals_the_deploy_quantizer(per_channel):
    """An accel config's code limit (shift8net_pynq-z2's ``max_code: 128``, its DSP banks): the
    fake quantizer keeps the magnitudes up to it and scales the largest weight to it, as
    formats.shift.quantize_twohot(max_code=) does at deployment; no code above it."""
    rng = np.random.default_rng(31)
    w = (rng.standard_normal((6, 40)) * 0.1).astype(np.float32)
    q = ShiftWeight(torch.tensor(w), "twohot", 3, 0, per_channel=per_channel, max_code=128)
    got = q(torch.tensor(w)).detach().double().numpy()
    ref = sfmt.quantize_twohot(w.astype(np.float64), 3, axis=0 if per_channel else None, max_code=128)
    np.testing.assert_array_equal(got, ref.dequantize())
    F = q.exponent().double().numpy().reshape(-1, 1) if per_channel else float(q.exponent()[0])
    codes = np.abs(got * np.exp2(F))
    assert codes.max() <= 128 and np.all(codes == np.round(codes))
    unlimited = ShiftWeight(torch.tensor(w), "twohot", 3, 0, per_channel=per_channel)
    assert unlimited.max_mag > 128 and q.max_mag == 128


def test_bfp_fake_equals_numpy_quantizer():
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((5, 33)) * 3).astype(np.float32)
    got = bfp_fake(torch.tensor(x), 8, 8, -1).double().numpy()
    ref = bfpfmt.quantize(x.astype(np.float64), 8, axis=-1, exponent_bits=8, rounding="nearest_even").dequantize()
    np.testing.assert_array_equal(got, ref)


def test_fixed_fake_equals_deploy_conversion():
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(200) * 2.5).astype(np.float32)
    f = host_radix(x.astype(np.float64), 8, True)
    got = fixed_fake(torch.tensor(x), f, 8, True).double().numpy()
    ref = np.ldexp(to_fixed(x.astype(np.float64), f, 8, True, "nearest_even").astype(np.float64), -f)
    np.testing.assert_array_equal(got, ref)


def test_ste_gradients_reach_weights_and_scale():
    w = nn.Parameter(torch.randn(4, 9) * 0.1)
    q = ShiftWeight(w, "pot", 4, learn_scale=True)
    (q(w) * torch.arange(36.0).reshape(4, 9)).sum().backward()
    assert w.grad is not None and torch.count_nonzero(w.grad) > 0
    assert q.neg_log2_scale.grad is not None and torch.isfinite(q.neg_log2_scale.grad).all()
    x = torch.randn(10, requires_grad=True)
    fixed_fake(x, 4, 8, True).sum().backward()
    assert torch.equal(x.grad, torch.ones(10))       # nothing saturates at radix 4 for |x| < 8


def test_balanced_pruning_hits_target_and_balance():
    w = torch.randn(8, 3, 3, 3)
    m = balanced_mask(w, 0.75)
    zeros = (m == 0).reshape(8, -1).sum(1)
    assert zeros.min() == zeros.max() == 20                     # round(0.75 * 27)
    kept = (w.abs() * m).reshape(8, -1)
    dropped = (w.abs() * (1 - m)).reshape(8, -1)
    assert (kept.max(1).values >= dropped.max(1).values).all()
    assert all(kept[i][m.reshape(8, -1)[i] > 0].min() >= dropped[i].max() for i in range(8))
    assert cubic_schedule(0, 0.9, 0, 10) == 0.0 and cubic_schedule(10, 0.9, 0, 10) == 0.9
    assert 0 < cubic_schedule(5, 0.9, 0, 10) < 0.9


def _cfg(tmp_path, fmt_type, accel, extra=""):
    p = tmp_path / "d.yaml"
    p.write_text(f"name: t\nmodel: m.onnx\ndata: digits\nformats:\n  f:\n    type: {fmt_type}\n"
                 f"    accel: {accel}\n{extra}")
    return p


def test_prepare_prune_export_round_trip(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(256, 10))
    prepare(model, _cfg(tmp_path, "sparse", "sparse8_pynq-z2"))
    assert [n for n, _ in quantized_layers(model)] == ["0", "3"]
    pr = BalancedPruner(model, 0.9, 0, 4)
    for _ in range(5):
        pr.step()
    for _, zmin, zmax, s in pr.report():
        assert zmin == zmax and s >= 0.85
    out = model(torch.rand(2, 1, 8, 8))
    assert out.shape == (2, 10)

    torch.manual_seed(1)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
    prepare(model, _cfg(tmp_path, "pot", "shift8_pynq-z2", "    weight_fit: nearest\n"))
    model(torch.rand(3, 1, 8, 8))
    assert all(check_round_trip(model).values())
    meta = export(model.eval(), torch.rand(1, 1, 8, 8), tmp_path / "m.onnx")
    side = json.loads((tmp_path / "m.onnx.hlsnn-train.json").read_text())
    assert side == meta and all(e["codes_kept_by_deploy"] for e in side["layers"].values())
    import onnx
    from onnx import numpy_helper
    inits = [numpy_helper.to_array(t) for t in onnx.load(str(tmp_path / "m.onnx")).graph.initializer]
    ws = [a for a in inits if a.ndim == 2]
    for a in ws:                  # every exported weight is a signed power of two (or 0) times a scale
        nz = np.abs(a[a != 0]).astype(np.float64)
        assert np.all(np.log2(nz) == np.round(np.log2(nz)))
