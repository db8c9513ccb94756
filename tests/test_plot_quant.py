"""hlsnn.plots and ``hlsnn plot-quant``: the report against independent computations, the
CLI end to end, and one-line errors for bad input."""
import json
import struct
import subprocess
import sys

import numpy as np
import pytest

from hlsnn.errors import InputError, MissingDependency
from hlsnn.formats import shift
from hlsnn.plots import (format_params, load_weights, plot_quantization, quantization_report,
                         report_json)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def bimodal(n=6000, seed=1, sigma=0.1):
    """Two Gaussian modes at +-0.6 sigma and a narrow spike at 0, like trained layer weights."""
    rng = np.random.default_rng(seed)
    k = n // 10
    w = np.concatenate([rng.normal(0.6 * sigma, 0.15 * sigma, (n - k) // 2),
                        rng.normal(-0.6 * sigma, 0.15 * sigma, n - k - (n - k) // 2),
                        rng.normal(0.0, 0.02 * sigma, k)])
    return rng.permutation(w)


def uniform_by_hand(w, bits):
    qmax = 2 ** (bits - 1) - 1
    scale = np.max(np.abs(w)) / qmax
    return np.clip(np.rint(w / scale), -qmax, qmax) * scale


def mse(a, b):
    return float(np.mean((np.asarray(a, dtype=np.float64) - b) ** 2))


# --------------------------------------------------------------------------- report

@pytest.mark.parametrize("bits", [4, 5, 8, 11, 16])
def test_uniform_mse_equals_hand_computation(bits):
    w = np.random.default_rng(bits).standard_normal(3001) * 0.07
    rec = quantization_report(w, bits=bits)["formats"]["uniform"]
    assert rec["mse"] == pytest.approx(mse(w, uniform_by_hand(w, bits)), rel=1e-12, abs=0)
    assert rec["bits_per_weight"] == bits
    qmax = 2 ** (bits - 1) - 1
    assert rec["n_levels"] == 2 * qmax + 1
    assert rec["levels"][-1] == pytest.approx(np.max(np.abs(w)), rel=1e-15)
    np.testing.assert_allclose(np.diff(rec["levels"]), np.max(np.abs(w)) / qmax, rtol=1e-9)


def test_uniform_rounds_half_to_even():
    # max |w| = 127 makes the 8-bit scale exactly 1: the ties 0.5, 1.5, 2.5, -2.5 round to even.
    w = np.array([127.0, 0.5, 1.5, 2.5, -2.5])
    expected = np.array([127.0, 0.0, 2.0, 2.0, -2.0])
    assert quantization_report(w, bits=8)["formats"]["uniform"]["mse"] == mse(w, expected) == 0.2


def test_uniform_per_slice_scale_along_axis0():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 16)) * np.array([0.01, 0.1, 1.0, 10.0, 0.5])[:, None]
    w_hat = np.empty_like(w)
    for i in range(w.shape[0]):                 # axis=0: one scale per row, as formats.shift
        w_hat[i] = uniform_by_hand(w[i], 6)
    rep = quantization_report(w, bits=6, axis=0)
    assert rep["axis"] == 0
    assert rep["formats"]["uniform"]["mse"] == pytest.approx(mse(w, w_hat), rel=1e-12)
    # drawn levels: those of the row holding the largest |w|
    assert rep["formats"]["uniform"]["levels"][-1] == pytest.approx(np.max(np.abs(w[3])))
    for name, q in (("pot", shift.quantize_pot(w, 4, axis=0)),
                    ("twohot", shift.quantize_twohot(w, 1, axis=0))):
        assert rep["formats"][name]["mse"] == pytest.approx(mse(w, q.dequantize()), rel=1e-12)
        assert np.isin(q.dequantize()[3], rep["formats"][name]["levels"]).all()


@pytest.mark.parametrize("bits,delta", [(5, 0), (7, 2), (8, 0), (8, 3), (10, 1), (13, 7), (16, 0)])
def test_shift_formats_match_the_formats_module(bits, delta):
    w = bimodal(seed=bits)
    rep = quantization_report(w, bits=bits, delta=delta)
    pot_e, th_e = min(5, bits - 2), min(5, (bits - 3) // 2)
    pot = shift.quantize_pot(w, pot_e)
    th = shift.quantize_twohot(w, th_e, delta=delta)
    r = rep["formats"]
    assert r["pot"]["mse"] == pytest.approx(mse(w, pot.dequantize()), rel=1e-12)
    assert r["twohot"]["mse"] == pytest.approx(mse(w, th.dequantize()), rel=1e-12)
    assert (r["pot"]["exp_bits"], r["pot"]["bits_per_weight"]) == (pot_e, pot_e + 2)
    assert (r["twohot"]["exp_bits"], r["twohot"]["delta"]) == (th_e, delta)
    assert r["twohot"]["bits_per_weight"] == 2 * th_e + 3
    for rec in r.values():                      # no format over the budget
        assert rec["bits_per_weight"] <= bits
    # every dequantized weight is one of the levels the plot draws
    assert np.isin(pot.dequantize(), r["pot"]["levels"]).all()
    assert np.isin(th.dequantize(), r["twohot"]["levels"]).all()
    assert np.all(np.diff(r["pot"]["levels"]) > 0) and np.all(np.diff(r["twohot"]["levels"]) > 0)


@pytest.mark.parametrize("exp_bits", [1, 2, 3, 4, 5])
def test_twohot_beats_pot_on_bimodal_weights(exp_bits):
    w = bimodal(seed=10 + exp_bits)
    pot = mse(w, shift.quantize_pot(w, exp_bits).dequantize())
    th = mse(w, shift.quantize_twohot(w, exp_bits).dequantize())
    assert th <= pot


def test_default_budget_story_on_bimodal_weights():
    rep = quantization_report(bimodal())
    r = rep["formats"]
    assert rep["bits"] == 8 and rep["delta"] == 0 and rep["axis"] is None
    assert [r[f]["bits_per_weight"] for f in ("uniform", "pot", "twohot")] == [8, 7, 7]
    assert r["uniform"]["mse"] < r["twohot"]["mse"] < r["pot"]["mse"]


def test_four_bits_skips_twohot():
    rep = quantization_report(bimodal(), bits=4)
    th = rep["formats"]["twohot"]
    assert th["mse"] is None and th["levels"] is None and "5 bits" in th["skipped"]
    assert rep["formats"]["pot"]["exp_bits"] == 2
    assert format_params(4)["twohot"]["bits_per_weight"] is None
    json.dumps(report_json(rep))                # JSON-serializable


def test_report_json_drops_levels_only():
    rep = quantization_report(bimodal(n=500), bits=9, delta=2)
    js = report_json(rep)
    assert set(js) == set(rep)
    for name, rec in js["formats"].items():
        assert "levels" not in rec
        assert set(rec) == set(rep["formats"][name]) - {"levels"}
    json.dumps(js)


@pytest.mark.parametrize("kwargs,needle", [
    ({"bits": 3}, "bits = 3"), ({"bits": 17}, "bits = 17"), ({"bits": 8.0}, "bits = 8.0"),
    ({"bits": True}, "bits = True"), ({"delta": 8}, "delta = 8"), ({"delta": -1}, "delta = -1"),
    ({"axis": 2}, "axis = 2"), ({"axis": "0"}, "axis = '0'"),
])
def test_bad_parameters(kwargs, needle):
    with pytest.raises(InputError, match=needle):
        quantization_report(np.ones((4, 3)), **kwargs)


@pytest.mark.parametrize("w,needle", [
    (np.array([]), "empty"), (np.array([1.0, np.nan]), "non-finite"),
    (np.array([1.0, np.inf, -np.inf]), "2 non-finite"), (np.zeros(5), "all 5 weights are zero"),
    (np.array(["a", "b"]), "dtype"), (np.array([1 + 2j]), "dtype"), (np.array([True]), "dtype"),
])
def test_bad_weights(w, needle):
    with pytest.raises(InputError, match=needle):
        quantization_report(w)


# --------------------------------------------------------------------------- loading

def test_load_weights(tmp_path):
    w = bimodal(n=100).astype(np.float32).reshape(10, 10)
    np.save(tmp_path / "a.npy", w)
    np.savez(tmp_path / "one.npz", only=w)
    np.savez(tmp_path / "two.npz", w1=w, b1=w[0])
    np.testing.assert_array_equal(load_weights(tmp_path / "a.npy"), w)
    assert load_weights(tmp_path / "a.npy").dtype == np.float64
    np.testing.assert_array_equal(load_weights(tmp_path / "one.npz"), w)
    np.testing.assert_array_equal(load_weights(tmp_path / "two.npz", key="b1"), w[0])
    with pytest.raises(InputError, match="2 arrays .*--key"):
        load_weights(tmp_path / "two.npz")
    with pytest.raises(InputError, match="no array 'w2'"):
        load_weights(tmp_path / "two.npz", key="w2")
    with pytest.raises(InputError, match="only for .npz"):
        load_weights(tmp_path / "a.npy", key="w1")
    with pytest.raises(InputError, match="no such file"):
        load_weights(tmp_path / "missing.npy")
    (tmp_path / "w.csv").write_text("1,2\n")
    with pytest.raises(InputError, match=".npy or .npz"):
        load_weights(tmp_path / "w.csv")
    np.save(tmp_path / "obj.npy", np.array([1, "x"], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="not a numeric"):
        load_weights(tmp_path / "obj.npy")


# --------------------------------------------------------------------------- drawing

def png_size(path):
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC
    return struct.unpack(">II", data[16:24])


def test_plot_quantization_writes_png(tmp_path):
    pytest.importorskip("matplotlib")
    (tmp_path / "sub").mkdir()                      # --out makes no folders outside build/ and overlays/
    rep = plot_quantization(bimodal(n=2000), tmp_path / "sub" / "q.png", name="w.npy")
    assert rep["out"] == str(tmp_path / "sub" / "q.png")
    assert png_size(tmp_path / "sub" / "q.png") == (1000, 500)
    rep = plot_quantization(bimodal(n=2000).reshape(50, 40), tmp_path / "q4.png", bits=4, axis=0)
    assert rep["formats"]["twohot"]["skipped"] and png_size(tmp_path / "q4.png") == (1000, 500)


def test_plot_quantization_rejects_unknown_image_type(tmp_path):
    with pytest.raises(InputError, match="must end in .png"):
        plot_quantization(bimodal(n=100), tmp_path / "q.txt")


def test_missing_matplotlib_names_the_extra(tmp_path, monkeypatch):
    for mod in ("matplotlib", "matplotlib.figure", "matplotlib.lines",
                "matplotlib.backends", "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, mod, None)     # makes the import raise ImportError
    with pytest.raises(MissingDependency, match=r'pip install "hlsnn\[plot\]"'):
        plot_quantization(bimodal(n=100), tmp_path / "q.png")
    assert not (tmp_path / "q.png").exists()


# --------------------------------------------------------------------------- CLI

def hlsnn(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "hlsnn.cli", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_json_end_to_end(tmp_path):
    pytest.importorskip("matplotlib")
    w = bimodal(n=4000).reshape(40, 100)
    np.save(tmp_path / "w.npy", w)
    out = tmp_path / "tmp.png"
    r = hlsnn("plot-quant", tmp_path / "w.npy", "--out", out, "--json")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    js = json.loads(r.stdout)
    assert js["out"] == str(out) and js["n_weights"] == 4000 and js["bits"] == 8
    for name in ("uniform", "pot", "twohot"):
        for field in ("mse", "bits_per_weight", "exp_bits", "delta", "n_levels"):
            assert field in js["formats"][name]
    assert js["formats"]["pot"]["exp_bits"] == 5 and js["formats"]["twohot"]["exp_bits"] == 2
    expected = quantization_report(w)["formats"]
    for name in ("uniform", "pot", "twohot"):
        assert js["formats"][name]["mse"] == pytest.approx(expected[name]["mse"], rel=1e-12)
    assert png_size(out) == (1000, 500)
    assert 5_000 < out.stat().st_size < 300_000


def test_cli_default_output_npz_and_text(tmp_path):
    pytest.importorskip("matplotlib")
    np.savez(tmp_path / "model.npz", fc1=bimodal(n=3000), fc2=bimodal(n=300, seed=4))
    r = hlsnn("plot-quant", "model.npz", "--key", "fc2", "--bits", "12", "--delta", "3",
              "--axis", "0", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert png_size(tmp_path / "model_quant.png") == (1000, 500)
    lines = r.stdout.splitlines()
    assert lines[0].startswith("plot-quant: model.npz[fc2]: 300 weights, budget 12 bits/weight")
    assert [ln.split()[0] for ln in lines[1:4]] == ["uniform", "pot", "twohot"]
    assert lines[-1] == "wrote model_quant.png"


@pytest.mark.parametrize("setup,args,needle", [
    (None, ["missing.npy"], "no such file"),
    ("text", ["w.npy"], "not a numeric .npy"),
    ("nan", ["w.npy"], "non-finite"),
    ("empty", ["w.npy"], "empty"),
    ("ok", ["w.npy", "--bits", "3"], "bits = 3"),
    ("ok", ["w.npy", "--bits", "17"], "bits = 17"),
    ("ok", ["w.npy", "--delta", "9"], "delta = 9"),
    ("ok", ["w.npy", "--out", "w.jpg"], "must end in .png"),
    ("npz", ["w.npz"], "--key"),
])
def test_cli_bad_input_one_line_exit_2(tmp_path, setup, args, needle):
    if setup == "text":
        (tmp_path / "w.npy").write_text("0.1 0.2 0.3\n")
    elif setup == "nan":
        np.save(tmp_path / "w.npy", np.array([0.1, np.nan]))
    elif setup == "empty":
        np.save(tmp_path / "w.npy", np.zeros((0, 3)))
    elif setup == "ok":
        np.save(tmp_path / "w.npy", bimodal(n=100))
    elif setup == "npz":
        np.savez(tmp_path / "w.npz", a=np.ones(3), b=np.ones(3))
    r = hlsnn("plot-quant", *args, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("hlsnn: error: ") and needle in lines[0], r.stderr
    assert not list(tmp_path.glob("*.png"))
