"""Models quantized elsewhere (issue 50): ONNX QDQ files that onnxruntime's ``quantize_static``
wrote (``scripts/make_qdq_models.py``; the ``*_pot`` files' scales rewritten to powers of two
with onnx's helpers, onnxruntime has no option for it) deploy; where every layer maps exactly their
integer outputs equal onnxruntime's execution of the same file bit for bit, otherwise accuracy
stays within one point of onnxruntime's and every layer says what was approximated."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper, TensorProto  # noqa: E402

from hlsnn.deploy import datasets
from hlsnn.deploy.importer import qimport  # noqa: E402
from hlsnn.deploy.reports.evaluate import float_reference, open_deployment  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.errors import ModelError  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "qdq"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
MODELS = ("mlp", "cnn", "res")


def _layout(name):
    return "nchw"          # every file takes (1, 8, 8) images (the MLP flattens them)


def _config(tmp_path, name, rounding="nearest_even", formats="  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"):
    assignments = "".join(f"  {line.split(':')[0].strip()}: {{default: {line.split(':')[0].strip()}}}\n"
                          for line in formats.strip("\n").split("\n"))
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nmodel: {DATA / (name + '.onnx')}\ndata: digits\nlayout: {_layout(name)}\n"
                    f"rounding: {rounding}\nformats:\n{formats}assignments:\n{assignments}")
    return path


def _onnxruntime(name, x):
    """onnxruntime's execution of the file's ops as ONNX defines them: graph optimizations off.
    With them on, onnxruntime fuses each Q/DQ pair into integer kernels (QLinearConv, ...) whose
    results depend on the CPU: on a 2-core AVX2 machine without AVX-512 VNNI (2026-11-27) they
    differ from the file's ops by up to 6.3 in the logits (cnn_pc), where the machine of the
    earlier sessions, with VNNI, gave the ops' values."""
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(str(DATA / f"{name}.onnx"), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": np.asarray(x, np.float32).reshape((-1, 1, 8, 8))})[0]


def _output_scale(name):
    """The scale of the file's last QuantizeLinear (the logits'), read with onnx."""
    m = onnx.load(str(DATA / f"{name}.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    q = [n for n in m.graph.node if n.op_type == "QuantizeLinear"][-1]
    return float(inits[q.input[1]])


def test_the_files_are_onnxruntime_qdq():
    assert MANIFEST["onnxruntime"] == ort.__version__ or MANIFEST["onnxruntime"].startswith("1.")
    for model in MODELS:
        for v in ("u8", "pc", "pot"):
            m = onnx.load(str(DATA / f"{model}_{v}.onnx"))
            ops = {n.op_type for n in m.graph.node}
            assert {"QuantizeLinear", "DequantizeLinear"} <= ops
            inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
            scales = [inits[n.input[1]] for n in m.graph.node if n.op_type in qimport.QDQ]
            per_axis = any(s.size > 1 for s in scales)
            assert per_axis == (v == "pc")
            pow2 = all(np.all(np.frexp(s.astype(np.float64))[0] == 0.5) for s in scales)
            assert pow2 == (v == "pot")


@pytest.mark.parametrize("model", MODELS)
def test_power_of_two_files_equal_onnxruntime_bit_for_bit(model, tmp_path):
    name = f"{model}_pot"
    ds = datasets.load("digits", layout=_layout(name))
    net = load_onnx(DATA / f"{name}.onnx")
    mapping = qimport.layer_mapping(net, DATA / f"{name}.onnx")
    with open_deployment(_config(tmp_path, name)) as dep:       # the documented path, as written
        dep.calibrate(ds.x_train[:128])
        y = dep.run(ds.x_test)
        layers = dep.imported                                   # the file's radix points, pinned by calibrate
    assert layers == qimport.for_assignment(mapping, dep)       # the same record as hlsnn deploy's
    assert [v["mapping"] for v in layers.values()] == ["exact"] * len(net.engine_layers())
    s = _output_scale(name)
    want = _onnxruntime(name, ds.x_test) / s
    assert np.array_equal(want, np.rint(want))          # onnxruntime's integers
    assert np.array_equal(y / s, want)
    assert np.abs(want).max() > 8                       # not a trivial output


def test_the_files_radix_points_are_the_ones_that_run(tmp_path):
    """Each layer runs at the radix points of the file's scales (read here with onnx), and one
    layer's output radix moved by one bit no longer gives onnxruntime's integers (the comparison
    above can fail). On these files DETERMINE (``--recalibrate``) happens to choose the same radix
    points: the rewrite chose each scale from the calibration maximum, as DETERMINE does."""
    name = "res_pot"
    m = onnx.load(str(DATA / f"{name}.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    frac = {n.input[0]: -int(np.log2(inits[n.input[1]])) for n in m.graph.node if n.op_type == "QuantizeLinear"}
    conv_out = {(n.name or n.output[0]): n.output[0] for n in m.graph.node if n.op_type in ("Conv", "Gemm")}
    ds = datasets.load("digits", layout="nchw")
    want = _onnxruntime(name, ds.x_test)
    with open_deployment(_config(tmp_path, name)) as dep:
        dep.calibrate(ds.x_train[:128])
        mapping = qimport.layer_mapping(dep.net, DATA / f"{name}.onnx")
        assert {ln: ex.f_out for ln, ex in dep.execs.items()} == {ln: frac[conv_out[ln]] for ln in dep.execs}
        assert np.array_equal(dep.run(ds.x_test), want)
        first = next(iter(dep.execs))
        qimport.pin(dep, {first: dict(mapping[first], f_out=mapping[first]["f_out"] + 1)})
        assert not np.array_equal(dep.run(ds.x_test), want)
        layers = qimport.for_assignment(mapping, dep, recalibrate=True)
    assert all(v["mapping"] == "approximated" and "--recalibrate" in v["why"] for v in layers.values())


@pytest.mark.parametrize("name", [f"{m}_{v}" for m in MODELS for v in ("u8", "pc")])
def test_other_scales_are_approximated_within_one_point(name, tmp_path):
    res = deploy(_config(tmp_path, name, formats="  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"
                                                 "  twohot: {type: twohot, accel: shift8_pynq-z2}\n"))
    ds = datasets.load("digits", layout=_layout(name))
    ort_acc = float(np.mean(np.argmax(_onnxruntime(name, ds.x_test), 1) == ds.y_test))
    assert ort_acc == pytest.approx(MANIFEST["files"][f"{name}.onnx"]["onnxruntime_accuracy"])
    for a in ("fixed8", "twohot"):
        e = res["assignments"][a]
        assert abs(e["accuracy"] - ort_acc) <= 0.01 + 1e-9, (a, e["accuracy"], ort_acc)
        for layer in e["imported_quantization"].values():
            assert layer["mapping"] == "approximated"
            assert "power-of-two" in layer["why"]
        errs = [v["weight_max_abs_error"] for v in e["imported_quantization"].values()]
        assert (all(0 < x < 0.01 for x in errs) if a == "fixed8" else all(x is None for x in errs))


def test_float_reference_of_a_qdq_file_equals_onnxruntime():
    ds = datasets.load("digits", layout="nchw")
    for name in ("res_u8", "cnn_pc", "mlp_pot"):
        x = ds.x_test[:64]
        want = _onnxruntime(name, ds.x_test[:64])
        got = float_reference(DATA / f"{name}.onnx", x)
        # equal but for float32 rounding of the few values a QuantizeLinear rounds at a tie
        assert np.mean(got == want) > 0.99 and np.abs(got - want).max() <= _output_scale(name) + 1e-6


def test_weights_fold_to_the_dequantized_integers():
    """A conv's weights are the file's int8 times its scale (read from the file with numpy)."""
    m = onnx.load(str(DATA / "cnn_pc.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    dq = next(n for n in m.graph.node if n.op_type == "DequantizeLinear" and inits.get(n.input[0]) is not None
              and inits[n.input[0]].ndim == 4)
    q, s = inits[dq.input[0]], inits[dq.input[1]]
    net = load_onnx(DATA / "cnn_pc.onnx")
    conv = net.engine_layers()[0]
    assert conv.relu and np.array_equal(conv.w, (q.astype(np.float32) * s.reshape(-1, 1, 1, 1)).astype(np.float64))


def _qdq(tmp_path, *, block=None, dtype=np.int8, lone=False):
    """A tiny Gemm graph with its input quantized by one Q/DQ pair."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])
    inits = [numpy_helper.from_array(np.float32(0.25).reshape(()) if block is None
                                     else np.full((1, 1), 0.25, np.float32), "s"),
             numpy_helper.from_array(np.zeros(() if block is None else (1, 1), dtype), "z"),
             numpy_helper.from_array(np.ones((4, 2), np.float32), "w")]
    kw = {"block_size": block, "axis": 1} if block else {}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q", **kw)]
    if lone:
        nodes.append(helper.make_node("Cast", ["xq"], ["xf"], to=TensorProto.FLOAT))
    else:
        nodes.append(helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xf"], name="dq", **kw))
    nodes.append(helper.make_node("MatMul", ["xf", "w"], ["y"]))
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                          opset_imports=[helper.make_opsetid("", 21 if block else 13)])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    return path


def test_unsupported_quantization_is_a_clear_error(tmp_path):
    net = load_onnx(_qdq(tmp_path))
    assert [la.kind for la in net.layers] == ["dense"]
    with pytest.raises(ModelError, match="blocked quantization"):
        load_onnx(_qdq(tmp_path, block=4))
    with pytest.raises(ModelError, match="int16.*int8, uint8"):
        load_onnx(_qdq(tmp_path, dtype=np.int16))
    with pytest.raises(ModelError, match="'q' \\(QuantizeLinear\\) is not part of"):
        load_onnx(_qdq(tmp_path, lone=True))



def test_a_quantized_constant_node_folds_to_what_the_pair_gives(tmp_path):
    """onnxruntime's quantize_static quantizes a Constant node's output (GELU's ``+ 1`` at opset 17)
    as it quantizes an activation: Q -> DQ of a constant, which was refused as 'not part of a
    pair' (session 32). It folds to QuantizeLinear's value (half to even, saturated), and the
    float path equals onnxruntime on the same file."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])
    inits = [numpy_helper.from_array(np.float32(0.0078), "s"), numpy_helper.from_array(np.uint8(3), "z"),
             numpy_helper.from_array(np.random.default_rng(0).normal(size=(4, 2)).astype(np.float32), "w")]
    c = numpy_helper.from_array(np.array([1.0, -0.3], np.float32), "cval")   # -0.3 saturates at -3 * 0.0078
    nodes = [helper.make_node("Constant", [], ["c"], name="const", value=c),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="c_q"),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["cf"], name="c_dq"),
             helper.make_node("MatMul", ["x", "w"], ["mm"], name="fc"),
             helper.make_node("Add", ["mm", "cf"], ["y"], name="plus")]
    path = tmp_path / "c.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                                opset_imports=[helper.make_opsetid("", 13)]), str(path))
    net = load_onnx(path)
    xs = np.random.default_rng(1).normal(size=(8, 4)).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": xs})[0]
    from hlsnn.deploy.run.runner import float_forward
    np.testing.assert_allclose(float_forward(net, xs), want, rtol=1e-6, atol=1e-6)
    bias = xs @ numpy_helper.to_array(inits[2]) - want
    np.testing.assert_allclose(-bias, np.broadcast_to([128 * 0.0078, -3 * 0.0078], bias.shape), rtol=1e-5)


def test_onnxruntimes_qoperator_format_is_named_with_the_remedy(tmp_path):
    """quantize_static(quant_format=QOperator) writes QLinearMatMul/QLinearConv/QGemm: refused by
    name, saying that hlsnn reads QDQ (it said a QuantizeLinear was 'not part of a pair')."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])
    inits = [numpy_helper.from_array(np.float32(0.05), "s"), numpy_helper.from_array(np.int8(0), "z"),
             numpy_helper.from_array(np.ones((4, 2), np.int8), "wq")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q"),
             helper.make_node("QLinearMatMul", ["xq", "s", "z", "wq", "s", "z", "s", "z"], ["yq"], name="qmm"),
             helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"], name="dq")]
    path = tmp_path / "qop.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                                opset_imports=[helper.make_opsetid("", 13)]), str(path))
    with pytest.raises(ModelError, match=r"QLinearMatMul: onnxruntime's QOperator format.*"
                                         r"quant_format=QuantFormat.QDQ"):
        load_onnx(path)

def test_deploy_table_names_the_mapping(tmp_path):
    from hlsnn.deploy.reports.evaluate import format_result
    res = deploy(_config(tmp_path, "mlp_pot", formats="  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"
                                                      "  sparse50: {type: sparse, accel: sparse8_pynq-z2, "
                                                      "prune: 0.5}\n"))
    text = format_result(res)
    assert "the file's quantization: 2 of 2 layer(s) exact" in text
    # the reference is the file's own quantized graph, not a float model, and the table says so
    assert "the file's own accuracy" in text.splitlines()[0] and "float accuracy" not in text.splitlines()[0]
    assert "vs ref" in text.splitlines()[1] and "board" in text.splitlines()[1]
    assert "prunes 0.5 of the weights" in text
    assert json.loads(json.dumps(res))["assignments"]["fixed8"]["imported_quantization"]["/1/Gemm"]["f_w"] == 7
    res = deploy(_config(tmp_path, "mlp_pot", rounding="nearest_away"))
    why = res["assignments"]["fixed8"]["imported_quantization"]["/1/Gemm"]["why"]
    assert "QuantizeLinear rounds half to even" in why


@pytest.mark.slow
def test_residual_file_on_csim_equals_onnxruntime(tmp_path):
    """C-simulation of the sparse_cluster kernels gives onnxruntime's integers too (about a minute)."""
    name = "res_pot"
    ds = datasets.load("digits", layout="nchw")
    with open_deployment(_config(tmp_path, name), target="csim") as dep:
        dep.calibrate(ds.x_train[:32])
        y = dep.run(ds.x_test[:48])
    assert np.array_equal(y, _onnxruntime(name, ds.x_test[:48]))


def test_the_python_path_recalibrates_on_request(tmp_path):
    """``open_deployment(..., recalibrate=True)``: the calibrated radix points, every layer reported
    approximated (as ``hlsnn deploy --recalibrate``)."""
    ds = datasets.load("digits", layout="nchw")
    with open_deployment(_config(tmp_path, "mlp_pot"), recalibrate=True) as dep:
        dep.calibrate(ds.x_train[:128])
    assert dep.imported and all(v["mapping"] == "approximated" and "--recalibrate" in v["why"]
                                for v in dep.imported.values())


def test_recalibrate_flag(tmp_path, capsys):
    from hlsnn.cli import main
    assert main(["deploy", str(_config(tmp_path, "mlp_pot")), "--recalibrate", "--json"]) == 0
    layers = json.loads(capsys.readouterr().out)["assignments"]["fixed8"]["imported_quantization"]
    assert all(v["mapping"] == "approximated" and "--recalibrate" in v["why"] for v in layers.values())


def test_compiled_model_keeps_the_files_integers(tmp_path):
    """``hlsnn compile`` of a power-of-two QDQ file: the .hlsnn model gives onnxruntime's outputs."""
    from hlsnn.network.build import compile_model
    from hlsnn.network.loader import load
    ds = datasets.load("digits", layout="nchw")
    out = tmp_path / "res_pot.hlsnn"
    compile_model(_config(tmp_path, "res_pot"), "fixed8", out)
    assert np.array_equal(load(out)(ds.x_test[:64]), _onnxruntime("res_pot", ds.x_test[:64]))


@pytest.mark.slow
def test_compile_recalibrate_takes_the_radix_points_deploy_recalibrate_runs(tmp_path, capsys):
    """``hlsnn compile --recalibrate`` (there was none: a compiled model always kept the file's radix
    points): its layers' radix points are those ``hlsnn deploy --recalibrate --per-layer`` reports;
    without it, the file's (the scales of its QuantizeLinear nodes, read with onnx). About 10 CPU-s."""
    from hlsnn.cli import main
    from hlsnn.network import artifact
    cfg = str(_config(tmp_path, "mlp_pot"))
    radix = {}
    for flag in ((), ("--recalibrate",)):
        out = tmp_path / f"m{len(flag)}.hlsnn"
        assert main(["compile", cfg, "-o", str(out), "--check-samples", "0", *flag]) == 0
        radix[flag] = {j["name"]: (j["f_x"], j["f_w"], j["f_out"]) for j in artifact.read(out)[0]["layers"]
                       if j["kind"] != "host"}
    capsys.readouterr()
    assert main(["deploy", cfg, "--recalibrate", "--per-layer", "--json", "--test-samples", "8"]) == 0
    per = json.loads(capsys.readouterr().out)["assignments"]["fixed8"]["per_layer"]
    assert {k: v[1:] for k, v in radix[("--recalibrate",)].items()} == {k: (v["f_w"], v["f_out"]) for k, v in per.items()}
    m = onnx.load(str(DATA / "mlp_pot.onnx"))
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    act = [-int(np.log2(float(inits[n.input[1]]))) for n in m.graph.node if n.op_type == "QuantizeLinear"]
    pairs = list(zip(act, act[1:]))         # (in, out) of the file's quantized activations, in order
    assert all((v[0], v[2]) in pairs for v in radix[()].values()) and list(radix[()].values())[-1][2] == act[-1]
    assert radix[()] != radix[("--recalibrate",)]
