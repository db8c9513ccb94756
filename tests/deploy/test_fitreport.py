"""What the output-layer rules did, in ``hlsnn deploy``'s result (hlsnn.deploy.reports.fitreport; issue 52):
a ``weight_fit: network`` refit kept and one rejected, with errors checked against onnxruntime's
float outputs, and an output conv taking two input terms, with both errors written out in numpy."""
import json

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_outfit import _model, _ort, _yaml
from test_twoin import _cancelling, _round, _run

from hlsnn.deploy import datasets
from hlsnn.deploy.reports import fitreport
from hlsnn.deploy.config import load_deploy_config
from hlsnn.deploy.reports.evaluate import format_result, open_accelerators
from hlsnn.deploy.importer.onnx_import import load_onnx
from hlsnn.deploy.run.runner import Deployment
from hlsnn.engines import convgeom


def _dense(path):
    """x (N, 1, 8, 8) -> Flatten -> Gemm 64x32 -> ReLU -> Gemm 32x64: an output layer of 2048
    weights, whose refit on 32 images does not generalise to 32 others (measured: held-out error
    2.05 -> 2.49 % in fixed8, 1.47 -> 1.54 % in bfp8)."""
    rng = np.random.default_rng(3)
    w1 = rng.normal(0, 0.2, (32, 64)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 32).astype(np.float32)
    w2 = rng.normal(0, 0.2, (64, 32)).astype(np.float32)
    b2 = np.zeros(64, np.float32)
    nodes = [helper.make_node("Flatten", ["x"], ["f"]), helper.make_node("Gemm", ["f", "w1", "b1"], ["h"], transB=1),
             helper.make_node("Relu", ["h"], ["r"]), helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)]
    g = helper.make_graph(nodes, "d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])],
                          [numpy_helper.from_array(a, n) for a, n in ((w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2"))])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def _calibrated(tmp_path, path, fmt, x_cal):
    cfg = load_deploy_config(_yaml(tmp_path, path, fmt))
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(load_onnx(cfg.model), cfg.assignments["f"], cfg.formats, accs)
        dep.calibrate(x_cal)
        return dep, dep.run(x_cal)
    finally:
        for a in accs.values():
            a.close()


def _rel(y, ref):
    return np.linalg.norm(y.reshape(ref.shape) - ref) / np.linalg.norm(ref)


@pytest.mark.parametrize("model, fmt, kept", [
    (_model, "{type: bfp, accel: bfp8_zcu104, weight_fit: network}", True),
    (_dense, "{type: bfp, accel: bfp8_zcu104, weight_fit: network}", False)])
def test_the_refit_kept_or_rejected_with_its_errors_against_onnxruntime(tmp_path, model, fmt, kept):
    """The output layer's output is the network's, so its errors are the deployment's against
    onnxruntime: ``error_after`` on all calibration images after the decision, ``error_before``
    (where rejected, the same) and ``held_out_before`` on the odd-numbered images as it was."""
    path = model(tmp_path / "m.onnx")
    x_cal = np.asarray(datasets.load("digits", layout="nchw").x_train[:64], np.float64)
    dep, y = _calibrated(tmp_path, path, fmt, x_cal)
    ref = _ort(path, x_cal)
    (name, got), = fitreport.entry(dep)["output_fit"].items()
    assert name == dep.net.engine_layers()[-1].name and got["kept"] is kept
    assert got["error_after"] == pytest.approx(_rel(y, ref), abs=2e-6)
    if kept:
        assert got["error_after"] < got["error_before"] and got["held_out_after"] < got["held_out_before"]
    else:
        assert got["error_before"] == got["error_after"] and got["held_out_after"] >= got["held_out_before"]
        assert got["held_out_before"] == pytest.approx(_rel(y[1::2], ref[1::2]), abs=2e-6)
        assert "other half" in got["why"]
    text = "\n".join(fitreport.lines({"output_fit": {name: got}}))
    assert f"{name}: {'kept' if kept else 'rejected'}" in text
    assert f"{100 * got['error_before']:.2f} -> {100 * got['error_after']:.2f} %" in text


def test_two_input_terms_with_both_errors_written_out():
    """``one_term_error`` and ``two_term_error``: the part of the layer's output what one and two
    terms leave of the input carries (``||W r|| / ||W (hi + lo) + b||``), written out in numpy."""
    net, x = _cancelling()
    _, ex = _run(net, x, 2)
    dep = type("D", (), {"execs": {"l": ex}})()
    fx, fw = ex.f_x, int(np.ravel(ex.f_w)[0])
    hi = np.clip(_round(x * 2.0 ** fx, "nearest_away"), -128, 127) * 2.0 ** -fx
    lo = np.clip(_round((x - hi) * 2.0 ** (fx + 7), "nearest_away"), -128, 127) * 2.0 ** -(fx + 7)
    w, geom = ex.w_taps * 2.0 ** -fw, net.layers[0].geom
    whole = np.linalg.norm(convgeom.conv_float(hi + lo, w, np.zeros(1), geom))
    one = np.linalg.norm(convgeom.conv_float(lo, w, np.zeros(1), geom)) / whole
    two = np.linalg.norm(convgeom.conv_float(x - hi - lo, w, np.zeros(1), geom)) / whole
    got = fitreport.entry(dep)["input_terms"]["l"]
    assert got["terms"] == 2 and two < one / 50
    assert got["one_term_error"] == pytest.approx(one, abs=1e-6)
    assert got["two_term_error"] == pytest.approx(two, abs=1e-6)
    assert "above 1 %" in got["why"]
    text = fitreport.lines({"input_terms": {"l": got}})[0]
    assert "l: 2 term(s)" in text and f"{100 * one:.2f} %" in text


@pytest.mark.slow
def test_hlsnn_deploy_json_and_table_say_it(tmp_path, capsys):
    """``hlsnn deploy --json``: a regression deployment's fixed8 (weight_fit, input_terms auto:
    network, 2) reports the refit of the output conv and its one term (its input is an engine's
    int8 codes); the table prints both."""
    from hlsnn.cli import main
    path = _model(tmp_path / "m.onnx")
    cfg = _yaml(tmp_path, path, "{type: fixed, accel: sparse8_pynq-z2}")
    cfg.write_text(cfg.read_text().replace("task: regression", "task: regression\ntargets: inputs"))
    assert main(["deploy", str(cfg), "--json", "--test-samples", "4", "-q"]) == 0
    res = json.loads(capsys.readouterr().out)
    e = res["assignments"]["f"]
    name = list(e["layers"])[-1]
    assert e["output_fit"][name]["kept"] is True
    assert e["input_terms"] == {name: {"terms": 1, "one_term_error": None, "two_term_error": None,
                                       "why": "its input is int8 codes of an engine layer already"}}
    text = format_result(res)
    assert f"weight_fit network, {name}: kept" in text and f"input_terms 2, {name}: 1 term(s)" in text


def test_the_html_report_has_a_row_per_rule():
    from hlsnn.deploy.reports.report import _output_rules
    A = {"fixed8": {"output_fit": {"c": {"kept": False, "error_before": 0.0205, "error_after": 0.0205,
                                         "held_out_before": 0.02, "held_out_after": 0.025, "why": "w<hy"}},
                    "input_terms": {"c": {"terms": 2, "one_term_error": 0.034, "two_term_error": 0.0002, "why": "y"}}},
         "bfp8": {}}
    page = "".join(_output_rules(A))
    assert "<td>rejected</td>" in page and '<td class="n">2.05</td>' in page and "w&lt;hy" in page
    assert '<td class="n">3.40</td><td class="n">0.02</td>' in page
    assert _output_rules({"bfp8": {}}) == []
