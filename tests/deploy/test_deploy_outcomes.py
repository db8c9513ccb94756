"""Issue 32's deploy outcomes: a failing assignment gets a row saying why and the others are
kept (table, JSON, exit status 1); a regression task reports MSE, MAE and the error relative to
the float outputs, against float targets of an .npz or, without them, the float outputs; the
modelled latency per assignment is in the table and the JSON."""
import json

import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.reports.evaluate import float_reference, format_result, infer_task  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402

MLP = ROOT / "configs" / "models" / "digits_mlp.onnx"


def _config(tmp_path, extra="", data="digits"):
    # shift8_zcu104 has unsigned activations, so the MLP's last layer (no ReLU) cannot run on it
    text = (f"name: outcomes\nmodel: {MLP}\ndata: {data}\ncalibration: {{samples: 32}}\n{extra}"
            "formats:\n  bfp8: {type: bfp, accel: bfp8_zcu104}\n"
            "  unsigned: {type: twohot, accel: shift8_zcu104}\n"
            "assignments:\n  unsigned: {default: unsigned}\n  bfp8: {default: bfp8}\n")
    path = tmp_path / "outcomes.yaml"
    path.write_text(text)
    return path


def test_a_failing_assignment_keeps_the_others(tmp_path, capsys):
    from hlsnn.cli import main
    path = _config(tmp_path)
    assert main(["deploy", str(path), "--test-samples", "30", "--json"]) == 1
    res = json.loads(capsys.readouterr().out)
    bad, good = res["assignments"]["unsigned"], res["assignments"]["bfp8"]
    assert "unsigned activations" in bad["error"] and "\n" not in bad["error"]
    assert good["accuracy"] > 0.8
    assert good["modelled_us_per_image"] > 0 and set(good["modelled_us_by_layer"]) == {"fc1", "fc2"}
    assert good["modelled_us_per_image"] == pytest.approx(sum(good["modelled_us_by_layer"].values()), abs=0.01)
    text = format_result(res)
    assert "unsigned       FAILED: " in text and "layers us" in text
    # the title is the config's name (two configs of one ONNX file told apart), the graph's beside it
    assert res["config"] == "outcomes" and res["model"] != "outcomes"
    assert text.startswith(f"outcomes (graph {res['model']}) on emu: 30 test images"), text.splitlines()[0]


def test_task_is_inferred_from_the_labels():
    assert infer_task("auto", np.array([1, 2])) == "classification"
    assert infer_task("auto", None) == "regression"
    assert infer_task("auto", np.zeros((2, 3))) == "regression"
    assert infer_task("regression", np.array([1, 2])) == "regression"


def test_regression_against_targets_and_against_the_float_outputs(tmp_path):
    ds = datasets.load("digits")
    x_test = ds.x_test[:25]
    y_float = float_reference(MLP, x_test)
    targets = y_float + np.random.default_rng(0).normal(0, 0.5, y_float.shape)
    npz = tmp_path / "reg.npz"
    np.savez(npz, x_train=ds.x_train[:40], x_test=x_test, y_test=targets[:, :, None])   # (N, 10, 1) targets
    res = deploy(_config(tmp_path, data=str(npz)), assignments=["bfp8"])
    assert res["task"] == "regression" and res["reference"] == "y_test of the data"
    e = res["assignments"]["bfp8"]
    assert res["float_mse"] == pytest.approx(np.mean((y_float - targets) ** 2))
    assert 0 < e["relative_error"] < 0.05
    assert abs(e["mse"] - res["float_mse"]) < 0.1 * res["float_mse"]
    np.savez(npz, x_train=ds.x_train[:40], x_test=x_test)                                 # no targets
    res = deploy(_config(tmp_path, data=str(npz)), assignments=["bfp8"])
    assert res["reference"] == "the float model's outputs" and res["float_mse"] == 0
    e = res["assignments"]["bfp8"]
    # without targets, the MSE is the one against the float outputs: relative error squared times their power
    assert e["mse"] == pytest.approx(e["relative_error"] ** 2 * np.mean(y_float ** 2), rel=1e-6)
    assert "regression against the float model's outputs" in format_result(res)
    # task: classification with float targets is a clear error
    with pytest.raises(Exception, match="classification needs labels"):
        deploy(_config(tmp_path, "task: classification\n", data=str(npz)), assignments=["bfp8"])


def test_end_to_end_latency_is_the_compiled_models(tmp_path):
    """The deploy result's end-to-end figure is `hlsnn perf` of the same assignment compiled:
    one kernel start on the network kernel, for two-hot and for bfp8."""
    from hlsnn.network import latency
    from hlsnn.network.build import compile_model
    text = (f"name: e2e\nmodel: {MLP}\ndata: digits\ncalibration: {{samples: 16}}\n"
            "formats:\n  bfp8: {type: bfp, accel: bfp8_zcu104}\n  twohot: {type: twohot, accel: shift8_pynq-z2}\n"
            "assignments:\n  twohot: {default: twohot}\n  bfp8: {default: bfp8}\n")
    path = tmp_path / "e2e.yaml"
    path.write_text(text)
    res = deploy(path, test_samples=10)
    for name, want_path, starts in (("twohot", "network", 1), ("bfp8", "network", 1)):
        e = res["assignments"][name]["end_to_end"]
        compile_model(path, name, tmp_path / f"{name}.hlsnn", calibration_samples=16, check_samples=1)
        ref = latency.model(tmp_path / f"{name}.hlsnn")
        assert (e["path"], e["kernel_starts"]) == (want_path, starts) == (ref["path"], ref["kernel_starts"])
        assert e["kernel_us"] == pytest.approx(ref["kernel_us"], abs=1e-3)
        assert e["end_to_end_us"] == pytest.approx(ref["end_to_end_us"], abs=1e-3)
        assert e["end_to_end_us"] >= e["kernel_us"] + e["host_us"] - 1e-6 and e["host_us"] > 0
    assert "e2e us" in format_result(res)
