"""Shift codes chosen for the layer's output (hlsnn.deploy.quantize.shift_fit, ``weight_fit: output``):
properties of the error feedback and the bias correction, the kernel running the chosen codes
unchanged (integer arithmetic written here, and csim equal to emu), and the measured note
beside a power-of-two assignment (``pot_note``)."""
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("onnx")

from test_deploy import ROOT, _base, _dense_net, _write  # noqa: E402
from compiled_fixtures import assert_grams_are_the_products  # noqa: E402

from hlsnn.deploy.quantize import shift_fit  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import format_result, open_accelerators, pot_note  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.errors import ConfigError  # noqa: E402
from hlsnn.formats import shift as sfmt  # noqa: E402
from hlsnn.formats import shift_codes  # noqa: E402
from hlsnn.primitives import shift_round_sat  # noqa: E402

SHIFT8 = f"{ROOT}/configs/accel/shift8_pynq-z2.yaml"


def _dense(w, b):
    return SimpleNamespace(kind="dense", w=np.asarray(w, np.float64), b=np.asarray(b, np.float64), group=1)


def _nearest(w, mode="twohot"):
    q = sfmt.quantize_twohot(w, 4) if mode == "twohot" else sfmt.quantize_pot(w, 4)
    f = np.full((w.shape[0], 1), int(np.asarray(q.scale_exponent).reshape(-1)[0]))
    return q.code_values().astype(np.float64), f


@pytest.mark.parametrize("mode", ["twohot", "pot"])
def test_uncorrelated_inputs_give_the_nearest_codes(mode):
    """With inputs whose Gram matrix is diagonal (here each input alone on its own rows), no
    error can be fed to another weight: every weight gets its nearest code."""
    rng = np.random.default_rng(0)
    w = rng.normal(0, 0.5, (6, 10))
    x = np.kron(np.eye(10), np.ones((3, 1))) * np.arange(1, 11)       # rows: one input each
    want, f = _nearest(w, mode)
    got, _ = shift_fit.fit_layer(_dense(w, np.zeros(6)), x, 0, f, shift_codes.table(mode, 4, 0))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("mode", ["twohot", "pot"])
def test_error_feedback_lowers_the_output_error_with_codes_of_the_format(mode, seed):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.5, (8, 24))
    mix = rng.normal(0, 1, (24, 24)) + 2 * np.eye(24)                   # correlated inputs
    x = np.rint(rng.normal(0, 20, (200, 24)) @ mix / 8)
    near, f = _nearest(w, mode)
    got, _ = shift_fit.fit_layer(_dense(w, np.zeros(8)), x, 0, f, shift_codes.table(mode, 4, 0))
    assert set(np.abs(got).reshape(-1)) <= set(sfmt.levels(mode, 4).astype(float))
    err = np.linalg.norm(x @ (np.ldexp(got, -f) - w).T)
    err_near = np.linalg.norm(x @ (np.ldexp(near, -f) - w).T)
    assert err < 0.8 * err_near, (err, err_near)


def test_bias_correction_keeps_the_mean_output():
    """On the calibration inputs, the quantized layer's mean output equals the float layer's."""
    rng = np.random.default_rng(3)
    w, b = rng.normal(0, 0.5, (5, 12)), rng.normal(0, 0.1, 5)
    x = np.maximum(rng.normal(10, 30, (100, 12)), 0).round()             # ReLU-like inputs, radix 3
    _, f = _nearest(w)
    v, bias = shift_fit.fit_layer(_dense(w, b), x, 3, f, shift_codes.table("twohot", 4, 0))
    xf = x / 8
    np.testing.assert_allclose((xf @ np.ldexp(v, -f).T + bias).mean(axis=0), (xf @ w.T + b).mean(axis=0),
                               rtol=0, atol=1e-12)


def _deploy(tmp_path, fit, target, x):
    model = _dense_net(tmp_path)
    cfg = load_deploy_config(_write(tmp_path, _base(model) + f"formats: {{th: {{type: twohot, weight_fit: {fit}, "
                                                             f"accel: {SHIFT8}}}}}\n"))
    net = load_onnx(model)
    accs = open_accelerators(cfg, target)
    try:
        dep = Deployment(net, cfg.assignments["th"], cfg.formats, accs, rounding="nearest_away")
        dep.calibrate(x)
        return dep.run(x), dep.execs["fc"], net.layer("fc")
    finally:
        for a in accs.values():
            a.close()


def test_fitted_layer_runs_its_codes_by_the_documented_rules(tmp_path):
    """The kernel is unchanged: the layer's output is the integer arithmetic of the runner's
    docstring on the chosen codes and the corrected bias (at the nearest quantizer's scale)."""
    x = np.random.default_rng(1).uniform(-1, 1, (50, 24))
    got, ex, layer = _deploy(tmp_path, "output", "emu", x)
    near = sfmt.quantize_twohot(layer.w, 4)
    assert np.array_equal(ex.wq.scale_exponent, near.scale_exponent)
    assert not np.array_equal(ex.wq.code_values(), near.code_values())    # the fit changed codes
    fx = 6 - int(np.floor(np.log2(np.abs(x).max())))
    xi = np.clip(np.floor(np.abs(x) * 2.0 ** fx + 0.5) * np.sign(x), -128, 127).astype(np.int64)
    fw = int(np.asarray(near.scale_exponent).reshape(-1)[0])
    bias = np.rint(ex.b_fit * 2.0 ** (fx + fw)).astype(np.int64)
    wide = np.maximum(xi @ ex.wq.code_values().T + bias, 0)
    s = max(int(v).bit_length() - 1 for v in wide.reshape(-1) if v > 0) - 6
    y, _ = shift_round_sat(wide, s, 8, "nearest_even")
    np.testing.assert_array_equal(got, np.ldexp(y.astype(np.float64), -(fx + fw - s)))
    # and closer to the float layer than the nearest codes
    ref = np.maximum(x @ layer.w.T + layer.b, 0)
    got_near, _, _ = _deploy(tmp_path, "nearest", "emu", x)
    assert np.linalg.norm(got - ref) < np.linalg.norm(got_near - ref)


@pytest.mark.csim
@pytest.mark.slow
def test_fitted_codes_agree_on_csim(tmp_path):
    x = np.random.default_rng(4).uniform(-1, 1, (16, 24))
    np.testing.assert_array_equal(_deploy(tmp_path, "output", "csim", x)[0], _deploy(tmp_path, "output", "emu", x)[0])


def test_weight_fit_only_for_shift_formats(tmp_path):
    with pytest.raises(ConfigError, match="formats.a.weight_fit.*only the shift formats"):
        load_deploy_config(_write(tmp_path, _base() + f"formats: {{a: {{type: fixed, weight_fit: nearest, accel: "
                                                       f"{ROOT}/configs/accel/sparse8_pynq-z2.yaml}}}}\n"))


def test_pot_note_states_the_measured_loss():
    res = {"float_accuracy": 0.93}
    assert pot_note({"accuracy": 0.705}, res, {"pot"}) == \
        "pot: -22.5 pts vs float: power-of-two weights without retraining; use two-hot or retrain"
    assert pot_note({"accuracy": 0.925}, res, {"pot"}) is None                # within a point
    assert pot_note({"accuracy": 0.5}, res, {"twohot", "bfp"}) is None         # no pot layer
    assert pot_note({"accuracy": 0.5}, res, {"pot", "bfp"}).startswith("pot: -43.0 pts")
    reg = {"float_mse": 0.02}
    assert pot_note({"mse": 0.03}, reg, {"pot"}) == \
        "pot: MSE 1.50x float's: power-of-two weights without retraining; use two-hot or retrain"
    assert pot_note({"mse": 0.021}, reg, {"pot"}) is None


def test_deploy_table_shows_the_note_beside_the_row():
    res = {"model": "m", "target": "emu", "test_images": 10, "calibration_images": 4, "calibration_mode": "static",
           "float_accuracy": 0.9, "assignments": {
               "pot": {"accuracy": 0.6, "images_per_s": 1.0, "modelled_us_per_image": 2.0, "layers": {"fc": "pot"},
                       "note": "pot: -30.0 pts vs float: power-of-two weights without retraining; use two-hot or "
                               "retrain"}}}
    lines = format_result(res).splitlines()
    row = next(i for i, ln in enumerate(lines) if ln.strip().startswith("pot "))
    assert lines[row + 1].split()[:4] == ["note:", "pot:", "-30.0", "pts"]


def test_a_long_reduction_gets_the_nearest_codes(monkeypatch):
    monkeypatch.setattr(shift_fit, "MAX_FEEDBACK_K", 5)
    rng = np.random.default_rng(0)
    w = rng.normal(0, 1, (3, 8))
    want, f = _nearest(w)
    got, _ = shift_fit.fit_layer(_dense(w, np.zeros(3)), rng.normal(0, 9, (20, 8)).round(), 0, f,
                                 shift_codes.table("twohot", 4, 0))
    np.testing.assert_array_equal(got, want)


def test_deploy_writes_the_note_from_its_measurement(monkeypatch):
    from hlsnn.deploy.reports import evaluate
    from hlsnn.evaluation.run import deploy
    monkeypatch.setattr(evaluate, "POT_NOTE_POINTS", -100.0)      # every pot result gets its note
    res = deploy(ROOT / "configs" / "models" / "digits_mlp.yaml", "emu", assignments=["pot", "twohot"],
                 test_samples=40)
    e = res["assignments"]["pot"]
    assert e["note"].startswith(f"pot: {100 * (e['accuracy'] - res['float_accuracy']):+.1f} pts vs float: ")
    assert "note" not in res["assignments"]["twohot"]


@pytest.mark.parametrize("isa", [0, 1])
@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["conv", "grouped", "dense"])
def test_the_gram_blocks_are_the_float64_products(seed, kind, isa, monkeypatch):
    """shift_fit._grams equals the float64 ``r.T @ r`` and ``r.mean(axis=0)`` of the layer's
    im2col rows bit for bit, per group: int8-range inputs through native/gram.c (its VNNI and
    its portable loops), wider ones through float32 syrk blocks, and the float64 product for
    inputs too wide for exact float32 blocks."""
    monkeypatch.setattr(shift_fit, "GRAM_ISA", isa)
    from hlsnn.deploy.importer.graph import Layer
    from hlsnn.engines import convgeom
    rng = np.random.default_rng(seed)
    amax = [127, 128, 3000, 1 << 20, 1, 0, 128, 127][seed]
    c = 6
    if kind == "dense":
        layer = Layer("l", "dense", ["x"], "y", w=rng.normal(size=(5, 40)), b=np.zeros(5))
        x = rng.integers(-amax, amax + 1, (300, 40))
    else:
        g = c if kind == "grouped" else 1
        layer = Layer("l", "conv", ["x"], "y", w=rng.normal(size=(c, c // g, 3, 2)), b=np.zeros(c),
                      pads=(1, 0, 2, 1), strides=(2, 1), group=g)
        x = rng.integers(-amax, amax + 1, (37, c, 9, 11)) * (rng.random((37, c, 9, 11)) < 0.6)
    if seed == 6:                   # large sums of one sign: a float32 block beyond 2**24 would round
        x = rng.integers(100, 129, (300, 40) if kind == "dense" else (90, c, 9, 11))
    if seed == 7:                   # the whole int8 range, more rows than one chunk of native/gram.c
        x = rng.integers(-128, 128, (1500, 40) if kind == "dense" else (90, c, 9, 11))
    xf = np.asarray(x, np.float64)
    rows = convgeom.im2col(xf, layer.geom)[0] if kind != "dense" else xf
    assert_grams_are_the_products(shift_fit._grams(layer, x), rows, layer.group if kind != "dense" else 1)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("mode", ["twohot", "pot"])
def test_the_compiled_feedback_loop_is_the_numpy_loop(seed, mode):
    """gptq_values' compiled loop (native/gptq.c) gives the numpy loop's codes bit for bit
    (ties between codes, zeros, negative zeros, a singular Gram)."""
    from hlsnn import native
    if native.load("gptq") is None:
        pytest.skip("no C compiler for the compiled helpers")
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 20)), int(rng.integers(1, 70))
    tab = shift_codes.table(mode, 3, 1 if mode == "twohot" else 0)
    thr = tab.buckets.thresholds
    w = rng.normal(0, 3, (n, k))
    w[rng.random((n, k)) < 0.1] = 0.0
    w[rng.random((n, k)) < 0.05] = -0.0
    ties = rng.random((n, k)) < 0.3                         # exactly between two codes
    w[ties] = rng.choice(thr, int(ties.sum())) * rng.choice([-1, 1], int(ties.sum()))
    x = rng.normal(size=(50, k)) if seed != 3 else np.zeros((50, k))
    h = x.T @ x + np.eye(k)
    u = np.linalg.cholesky(np.linalg.inv(h)).T
    w1, w2 = w.copy(), w.copy()
    q1, q2 = shift_fit._round(w1, u, tab), shift_fit._round_compiled(w2[None], u[None], tab)[0]
    np.testing.assert_array_equal(q2.view(np.uint64), q1.view(np.uint64))
    np.testing.assert_array_equal(w2.view(np.uint64), w1.view(np.uint64))     # the fed-back weights
    # and through gptq_values, on weights in scale units
    f = rng.integers(2, 6, (n, 1))
    got = shift_fit.gptq_values(np.ldexp(w, -f), x.T @ x, tab, f)
    orig = shift_fit._round_compiled
    try:
        shift_fit._round_compiled = lambda *a: None
        want = shift_fit.gptq_values(np.ldexp(w, -f), x.T @ x, tab, f)
    finally:
        shift_fit._round_compiled = orig
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("seed", range(5))
def test_inverse_factor_is_the_upper_cholesky_factor_of_the_inverse(seed):
    """inverse_factor (reversed Cholesky and a triangular inverse) is the unique upper
    triangular U with a positive diagonal and U^T U = H^-1, which numpy's inverse and Cholesky
    give independently, for one matrix and a stack; a matrix that is not positive definite gives
    None alone and the identity in a stack."""
    rng = np.random.default_rng(seed)
    k = [1, 9, 40, 144, 300][seed]
    x = rng.integers(-128, 128, (4 * k + 3, k)).astype(np.float64)
    h = x.T @ x + np.eye(k)
    want = np.linalg.cholesky(np.linalg.inv(h)).T
    got = shift_fit.inverse_factor(h)
    assert np.array_equal(got, np.triu(got)) and (np.diag(got) > 0).all()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    stack = np.stack([h, 2 * h + np.eye(k), -np.eye(k)])          # the last is negative definite
    us = shift_fit.inverse_factor(stack)
    np.testing.assert_allclose(us[0], want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    np.testing.assert_allclose(us[1].T @ us[1], np.linalg.inv(stack[1]), rtol=1e-8,
                               atol=1e-12 * np.abs(np.linalg.inv(stack[1])).max())
    np.testing.assert_array_equal(us[2], np.eye(k))
    assert shift_fit.inverse_factor(-np.eye(k)) is None
    bad = h.copy()
    bad[0, 0] = -1.0
    assert shift_fit.inverse_factor(bad) is None


def test_inverse_factor_without_scipy(monkeypatch):
    """Without scipy the factor is numpy's inverse then Cholesky (the same matrix up to rounding:
    even numpy's own inverse rounds differently on one BLAS thread and on two)."""
    import sys
    rng = np.random.default_rng(9)
    x = rng.integers(-128, 128, (90, 20)).astype(np.float64)
    h = x.T @ x + np.eye(20)
    monkeypatch.setitem(sys.modules, "scipy.linalg", None)          # import scipy.linalg fails
    want = np.linalg.cholesky(np.linalg.inv(h)).T
    np.testing.assert_allclose(shift_fit.inverse_factor(h), want, rtol=1e-10, atol=1e-14 * np.abs(want).max())
    assert shift_fit.inverse_factor(-np.eye(3)) is None


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_a_stack_of_groups_is_rounded_as_each_group_alone(seed, compiled, monkeypatch):
    """gptq_values on a stack (the groups of a depthwise layer in one call) gives each group
    the codes a call on that group alone gives, with the same factor of H^-1 (numpy's inverse
    and Cholesky, batched or not: one LAPACK call per matrix either way), through the
    compiled loop and the numpy loop; dead inputs (H_ii = 0) included."""
    if compiled:
        from hlsnn import native
        if native.load("gptq") is None:
            pytest.skip("no C compiler for the compiled helpers")
    else:
        monkeypatch.setattr(shift_fit, "_round_compiled", lambda *a: None)
    monkeypatch.setattr(shift_fit, "inverse_factor",
                        lambda h: np.swapaxes(np.linalg.cholesky(np.linalg.inv(h)), -1, -2))
    rng = np.random.default_rng(seed)
    g, n, k = int(rng.integers(2, 40)), int(rng.integers(1, 4)), int(rng.integers(1, 30))
    tab = shift_codes.table("twohot" if seed % 2 else "pot", 3, 1 if seed % 2 else 0)
    x = rng.integers(0, 128, (g, 60, k)).astype(np.float64)
    x[:, :, 0] = 0                                                # a dead input in every group
    h = np.einsum("gri,grj->gij", x, x)
    w = rng.normal(0, 1, (g, n, k))
    f = rng.integers(2, 6, (g, n, 1))
    got = shift_fit.gptq_values(w, h, tab, f)
    for j in range(g):
        alone = shift_fit.gptq_values(w[j], h[j], tab, f[j])
        np.testing.assert_array_equal(got[j].view(np.uint64), alone.view(np.uint64))


@pytest.mark.parametrize("seed", range(6))
def test_the_depthwise_grams_come_in_one_pass(seed):
    """A depthwise layer's Gram matrices (one per channel) come from native/gram_dw.c in one
    pass over the channels, equal to the float64 products of each group's im2col rows bit for
    bit: kernels up to 5x4, strides, dilations, asymmetric pads, a channel multiplier, the
    whole int8 range, zero images, and more pixels than one int32 chunk."""
    from hlsnn import native
    from hlsnn.deploy.importer.graph import Layer
    from hlsnn.engines import convgeom
    if native.load("gram_dw") is None:
        pytest.skip("no C compiler for the compiled helpers")
    rng = np.random.default_rng(seed)
    c = 3 if seed == 0 else int(rng.integers(1, 40))
    kh, kw = [(3, 3), (5, 4), (1, 1), (3, 1), (3, 3), (2, 3)][seed]
    mult = 2 if seed == 2 else 1
    strides, dil = [(1, 1), (2, 1), (1, 1), (2, 2), (1, 1), (1, 2)][seed], (2, 2) if seed == 4 else (1, 1)
    pads = tuple(int(v) for v in rng.integers(0, 3, 4))
    if seed == 0:
        b, h, w = 1200, 16, 16
    else:
        b, h, w = int(rng.integers(1, 20)), int(rng.integers(6, 13)), int(rng.integers(6, 13))
    layer = Layer("l", "conv", ["x"], "y", w=rng.normal(size=(c * mult, 1, kh, kw)), b=np.zeros(c * mult),
                  pads=pads, strides=strides, dilations=dil, group=c)
    x = rng.integers(-128, 128, (b, c, h, w)) * (rng.random((b, c, h, w)) < 0.7)
    if seed == 0:
        x[:, :, :, :] = rng.choice([-128, 127], x.shape)    # largest products, 2 int32 chunks a thread
    x[0] = 0
    got = shift_fit._grams_dw(layer, x)
    assert got is not None
    assert_grams_are_the_products(got, convgeom.im2col(np.asarray(x, np.float64), layer.geom)[0], c)


@pytest.mark.parametrize("seed", range(4))
def test_gptq_values_follow_the_papers_algorithm(seed, monkeypatch):
    """gptq_values against GPTQ's algorithm 1 written out here from the module docstring: dead
    inputs get H_ii = 1, lambda = 1% of the mean diagonal is added, the columns go in order of
    descending H_ii (stable), U = chol(H^-1)^T, each column rounded to the nearest code and its
    error fed to the later ones (the same factor on both sides: numpy's inverse and Cholesky)."""
    monkeypatch.setattr(shift_fit, "inverse_factor", lambda h: np.linalg.cholesky(np.linalg.inv(h)).T)
    rng = np.random.default_rng(seed)
    n, k = int(rng.integers(1, 12)), int(rng.integers(2, 60))
    tab = shift_codes.table("twohot" if seed % 2 else "pot", 3, 1 if seed % 2 else 0)
    x = rng.integers(-128, 128, (200, k)).astype(np.float64) * rng.uniform(0.1, 2, k)
    x[:, rng.random(k) < 0.2] = 0.0                                 # dead inputs
    h = x.T @ x
    w = rng.normal(0, 1, (n, k))
    f = rng.integers(2, 6, (n, 1))
    got = shift_fit.gptq_values(w, h, tab, f)
    hh = h.copy()
    d = np.diag(hh).copy()
    d[d <= 0] = 1.0
    hh[np.diag_indices(k)] = d + 0.01 * d.mean()
    order = np.argsort(-np.diag(hh), kind="stable")
    hp = hh[order][:, order]
    u = np.linalg.cholesky(np.linalg.inv(hp)).T
    ww = np.ldexp(w, f)[:, order]
    q = np.zeros_like(ww)
    for i in range(k):
        q[:, i] = shift_fit.nearest_values(ww[:, i], tab)
        ww[:, i + 1:] -= np.outer((ww[:, i] - q[:, i]) / u[i, i], u[i, i + 1:])
    want = np.empty_like(q)
    want[:, order] = q
    np.testing.assert_array_equal(got, want)


def test_one_blas_thread_is_restored_after_threads_overlap():
    """Inside the context every BLAS library runs on one thread; two threads inside it at once
    (two calibrations) leave the libraries as they found them."""
    import threading
    import time
    threadpoolctl = pytest.importorskip("threadpoolctl")
    before = [d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas"]
    seen = []

    def inside():
        with shift_fit._one_blas_thread():
            seen.append([d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas"])
            time.sleep(0.05)
    ts = [threading.Thread(target=inside) for _ in range(2)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen and all(n == 1 for s in seen for n in s)
    assert [d["num_threads"] for d in threadpoolctl.threadpool_info() if d["user_api"] == "blas"] == before
