"""Per-output-channel weight scales (``weight_scale: channel``, issue 16) on the shift and
fixed formats: the shared output radix comes from the preceding operation's histograms, one
per group of channels of equal radix, moved to the finest radix before they add; rows of small
weights keep their precision; emu and csim agree bit for bit."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.deploy.run.executors import _add_histogram  # noqa: E402
from hlsnn.deploy.quantize.quant import CHANNEL_FRAC_LIMIT, weight_fracs  # noqa: E402
from hlsnn.errors import ConfigError  # noqa: E402
from hlsnn.formats import fixed  # noqa: E402

ROW_SCALES = np.array([1.0, 1.0, 1 / 8, 1 / 8, 1 / 64, 1 / 64])


def test_histograms_of_two_radix_points_add_at_the_finest():
    """_add_histogram against acquire() of the values themselves written at the finest radix.
    Exact for every value but -1, which has no MSB at its own radix and one at a finer one
    (the MSB of a negative value is that of its complement), so -1 is left out here."""
    rng = np.random.default_rng(0)
    groups = {5: rng.integers(-3000, 3000, 200), 9: rng.integers(-40000, 40000, 150), 7: rng.integers(-9, 9, 50)}
    groups = {f: v[v != -1] for f, v in groups.items()}
    ref = max(groups)
    merged = None
    for f, v in groups.items():
        merged = _add_histogram(merged, fixed.acquire(v, bins=40).h_msb, ref - f)
    want = fixed.acquire(np.concatenate([v << (ref - f) for f, v in groups.items()]), bins=64).h_msb
    assert np.array_equal(np.pad(merged, (0, 64 - len(merged))), want)


def test_channel_fracs_are_capped_above_the_tensor():
    w = np.array([[1.0, -0.5], [0.01, 0.0], [1e-9, 0.0], [0.0, 0.0]])
    whole = weight_fracs(w, False, 127)
    assert whole == 6                                              # 1.0 * 2**6 = 64 <= 127 < 128
    assert weight_fracs(w, True, 127).tolist() == [6, 13, whole + CHANNEL_FRAC_LIMIT, whole]


def _model(tmp_path):
    rng = np.random.default_rng(1)
    w = (rng.normal(size=(6, 16)) * ROW_SCALES[:, None]).astype(np.float32)
    b = (rng.normal(size=6) * ROW_SCALES * 0.1).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1)], "rows",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 6])],
                          initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), str(tmp_path / "rows.onnx"))
    fmts = "".join(f"  {t}{s}: {{type: {t}, accel: {a}{', weight_scale: channel' if s else ', weight_scale: tensor'}}}\n"
                   for t, a in (("twohot", "shift8_pynq-z2"), ("fixed", "sparse8_pynq-z2")) for s in ("", "_ch"))
    (tmp_path / "rows.yaml").write_text(f"name: rows\nmodel: rows.onnx\nformats:\n{fmts}")
    return load_deploy_config(tmp_path / "rows.yaml"), w.astype(np.float64), b.astype(np.float64)


def _run(cfg, fmt, target, x):
    net = load_onnx(cfg.model)
    accs = open_accelerators(cfg, target)
    try:
        dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs)
        dep.calibrate(x)
        return dep.run(x), dep.execs["fc"]
    finally:
        for a in accs.values():
            a.close()


@pytest.mark.parametrize("fmt", ["twohot", "fixed"])
def test_small_rows_keep_their_precision_and_csim_agrees(tmp_path, fmt):
    """fixed: the int8 weights of the rows 64x smaller than the first are quantized far more
    finely with a scale per channel. (The outputs share one radix point, so the layer's output
    error on those rows is bounded by the output's 8 bits either way: the gain is in the
    weights.) Two-hot levels are logarithmic, so rows 64x smaller are already within their
    exponent range: a scale per channel changes their error by little, which is checked too."""
    cfg, w, b = _model(tmp_path)
    x = np.random.default_rng(2).uniform(-1, 1, (64, 16))
    _, ex_t = _run(cfg, fmt, "emu", x)
    _, ex_c = _run(cfg, fmt + "_ch", "emu", x)
    assert np.ndim(ex_t.f_w) == 0 and len(set(np.asarray(ex_c.f_w).tolist())) >= 3   # one scale; three or more

    def deq(ex):
        if fmt == "twohot":
            return ex.wq.dequantize()
        return np.ldexp(ex.wq.reshape(6, 16).astype(np.float64), -np.reshape(ex.f_w, (-1, 1)))
    small = slice(4, 6)
    err_t = np.abs(deq(ex_t) - w)[small].mean()
    err_c = np.abs(deq(ex_c) - w)[small].mean()
    if fmt == "fixed":
        assert err_c < err_t / 8, (err_c, err_t)
    else:
        assert 0.5 * err_t < err_c < 2 * err_t, (err_c, err_t)
    y_csim, _ = _run(cfg, fmt + "_ch", "csim", x[:8])
    y_emu, _ = _run(cfg, fmt + "_ch", "emu", x[:8])
    np.testing.assert_array_equal(y_csim, y_emu)


def test_auto_takes_a_scale_per_channel_only_where_a_channel_is_three_bits_finer(tmp_path):
    """fixed's default ``weight_scale: auto``: rows of largest |w| 1, 1/4 (two bits finer: 64
    of 127 at radix 6 and 8) keep the tensor's radix 6; a row of 1/8 (radix 9, three bits
    finer) gives each row its own. The config resolves auto for fixed only; the deployed layer
    follows the rule (its f_w), and the rows of test_small_rows (64x smaller) take one each."""
    from hlsnn.deploy.quantize.quant import weight_fracs
    rows = np.array([[1.0, -0.5], [0.25, 0.1], [-0.125, 0.0]])
    assert weight_fracs(rows[:2], "auto", 127) == 6 and np.ndim(weight_fracs(rows[:2], "auto", 127)) == 0
    assert weight_fracs(rows, "auto", 127).tolist() == [6, 8, 9]
    assert weight_fracs(rows, False, 127) == 6
    cfg, w, _ = _model(tmp_path)
    text = (tmp_path / "rows.yaml").read_text() + "  auto: {type: fixed, accel: sparse8_pynq-z2}\n" \
        "  sp: {type: sparse, accel: sparse8_pynq-z2}\n  th: {type: twohot, accel: shift8_pynq-z2}\n"
    (tmp_path / "rows.yaml").write_text(text)
    cfg = load_deploy_config(tmp_path / "rows.yaml")
    assert {k: cfg.formats[k].weight_scale for k in ("auto", "sp", "th")} == {"auto": "auto", "sp": "tensor",
                                                                              "th": "tensor"}
    _, ex = _run(cfg, "auto", "emu", np.random.default_rng(2).uniform(-1, 1, (8, 16)))
    assert np.asarray(ex.f_w).tolist() == weight_fracs(w, True, 127).tolist()


def test_bfp_formats_refuse_a_channel_scale(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"")
    (tmp_path / "bad.yaml").write_text("name: bad\nmodel: m.onnx\nformats:\n"
                                       "  b: {type: bfp, accel: bfp8_zcu104, weight_scale: channel}\n")
    with pytest.raises(ConfigError, match="weight_scale.*weight_exponent: row"):
        load_deploy_config(tmp_path / "bad.yaml")
