"""Models exported by PyTorch 2.13 and skl2onnx 1.20, as their users export them (issue 16's
"done when"): ``tests/data/torch/`` holds the files ``scripts/export_torch_models.py`` wrote
(the default dynamo exporter with its ``.onnx.data`` weights, and ``dynamo=False`` at opsets 13
and 17 with and without constant folding, each with the batch fixed at 1; skl2onnx's MLP with
and without ZipMap). Neither PyTorch nor skl2onnx is needed here: the files are real exports.

Checked against onnxruntime (not hlsnn's code): every file imports without ``--host-fallback``,
its float network equals onnxruntime's outputs, and 8-bit BFP and two-hot stay within one point
of onnxruntime's float accuracy. One file per model runs bit-exact on csim."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from conftest import ROOT, slow_cases  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment, float_forward  # noqa: E402
from hlsnn.errors import InputError, UnsupportedModelError  # noqa: E402

DATA = ROOT / "tests" / "data" / "torch"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
MODELS = sorted(MANIFEST["models"])
EXACT_HOST_OPS = {"MaxPool", "Flatten", "Reshape", "Identity", "Softmax"}


def _output(name):
    """The output a deployment names: the probabilities of skl2onnx's two-output models."""
    outs = MANIFEST["models"][name].get("outputs")
    return outs[1] if outs else None


def _data(name):
    return datasets.load("digits", layout=MANIFEST["models"][name]["layout"])


def _onnxruntime(name, x):
    """onnxruntime's float outputs: one sample a call when the export fixed the batch at 1."""
    sess = ort.InferenceSession(str(DATA / f"{name}.onnx"), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    out = _output(name) or sess.get_outputs()[0].name
    if out == "output_probability":                 # ZipMap's sequence of {class: p} maps
        maps = sess.run([out], {inp.name: x.astype(np.float32)})[0]
        return np.array([[m[j] for j in range(len(m))] for m in maps])
    step = 1 if inp.shape[0] == 1 else len(x)
    return np.concatenate([sess.run([out], {inp.name: x[i:i + step].astype(np.float32)})[0]
                           for i in range(0, len(x), step)])


def _config(tmp_path, name):
    out = _output(name)
    text = (f"name: {name}\nmodel: {DATA / (name + '.onnx')}\ndata: digits\n"
            + (f"output: {out}\n" if out else "")
            + "formats:\n  bfp8: {type: bfp, accel: bfp8_zcu104}\n"
              "  twohot: {type: twohot, accel: shift8_pynq-z2}\n"
              "assignments:\n  bfp8: {default: bfp8}\n  twohot: {default: twohot}\n")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path


def test_the_files_are_what_the_issue_names():
    exports = {m: MANIFEST["models"][m]["export"] for m in MODELS}
    for model in ("mlp", "lenet", "strided"):
        assert exports[f"{model}_dynamo"] == {}                              # today's default exporter
        assert (DATA / f"{model}_dynamo.onnx.data").is_file()                # its external weights
        for opset in (13, 17):
            assert exports[f"{model}_ts{opset}"] == {"dynamo": False, "opset_version": opset}
            assert exports[f"{model}_ts{opset}_nofold"] == {"dynamo": False, "opset_version": opset,
                                                            "do_constant_folding": False}
    assert MANIFEST["torch"].startswith("2.") and MANIFEST["models"]["skl_mlp_zipmap"]["outputs"] == [
        "output_label", "output_probability"]
    for m in MODELS:                                                         # batch fixed at 1
        graph = onnx.load(str(DATA / f"{m}.onnx"), load_external_data=False).graph
        dim = graph.input[0].type.tensor_type.shape.dim[0]
        assert dim.dim_value == 1 or m.startswith("skl_"), m


@pytest.mark.parametrize("name", MODELS)
def test_imports_without_fallback_and_equals_onnxruntime(name):
    net = load_onnx(DATA / f"{name}.onnx", output=_output(name))
    host = {la.op for la in net.layers if la.kind == "host"}
    assert host <= EXACT_HOST_OPS, host
    assert net.engine_layers(), name
    x = _data(name).x_test[:64]
    np.testing.assert_allclose(float_forward(net, x), _onnxruntime(name, x), rtol=1e-4, atol=1e-5)


def test_two_outputs_need_a_name(tmp_path):
    with pytest.raises(InputError, match=r"2 outputs \(output_label, output_probability\); name the one"):
        load_onnx(DATA / "skl_mlp_zipmap.onnx")


def test_zipmap_with_other_labels_is_refused_with_the_way_out(tmp_path):
    m = onnx.load(str(DATA / "skl_mlp_zipmap.onnx"))
    node = next(n for n in m.graph.node if n.op_type == "ZipMap")
    attr = next(a for a in node.attribute if a.name == "classlabels_int64s")
    attr.ints[:] = [3, 1, 2, 0, 4, 5, 6, 7, 8, 9]
    path = tmp_path / "relabelled.onnx"
    onnx.save(m, str(path))
    with pytest.raises(UnsupportedModelError, match=r"ZipMap with class labels \[3, 1, 2, 0, 4, 5\].*zipmap': False"):
        load_onnx(path, output="output_probability")


# The other exports of a model run the same deploy in the slow suite (CI): their import is checked
# in the quick suite by test_imports_without_fallback_and_equals_onnxruntime. (tests/conftest.py's
# SLOW_REPEAT_CASES moves lenet_ts17, mlp_dynamo and strided_ts13_nofold to the slow suite too: the
# digits models' accuracy in bfp8 and two-hot is test_deploy.py's; and skl_mlp_zipmap, the same
# sklearn model as skl_mlp_nozipmap, which stays quick, with a ZipMap output: its import and its
# bits on csim are checked quickly here.)
OTHER_EXPORTS = {"lenet_dynamo", "lenet_ts13", "lenet_ts13_nofold", "lenet_ts17_nofold", "mlp_ts13",
                 "mlp_ts13_nofold", "mlp_ts17", "mlp_ts17_nofold", "strided_dynamo", "strided_ts13",
                 "strided_ts17", "strided_ts17_nofold"}


@pytest.mark.parametrize("name", slow_cases(MODELS, OTHER_EXPORTS))
def test_bfp8_and_twohot_within_one_point_of_float(tmp_path, name):
    ds = _data(name)
    float_acc = np.mean(_onnxruntime(name, ds.x_test).argmax(1) == ds.y_test)
    assert float_acc == pytest.approx(MANIFEST["models"][name]["float_accuracy"])
    res = deploy(_config(tmp_path, name), "emu")
    assert res["host_layers"] == [] or all(h["op"] in EXACT_HOST_OPS for h in res["host_layers"]), res["host_layers"]
    for fmt in ("bfp8", "twohot"):
        acc = res["assignments"][fmt]["accuracy"]
        assert acc >= float_acc - 0.01, (name, fmt, acc, float_acc)
        # compiled (for the end-to-end model) and loaded back, whatever slashes the ONNX names hold
        assert res["assignments"][fmt]["end_to_end"]["end_to_end_us"] > 0, res["assignments"][fmt].get(
            "end_to_end_note")


@pytest.mark.parametrize("name", ["mlp_dynamo", "lenet_ts13_nofold", "strided_ts17", "skl_mlp_zipmap"])
def test_bit_exact_on_csim(tmp_path, name):
    cfg = load_deploy_config(_config(tmp_path, name))
    net = load_onnx(cfg.model, output=cfg.output)
    ds = _data(name)
    emu, tgt = open_accelerators(cfg, "emu"), open_accelerators(cfg, "csim")
    try:
        for fmt in ("bfp8", "twohot"):
            outs = []
            for accs in (emu, tgt):
                dep = Deployment(net, cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
                dep.calibrate(ds.x_train[:16])
                outs.append(dep.run(ds.x_test[:4]))
            np.testing.assert_array_equal(outs[0], outs[1], err_msg=f"{name} {fmt}")
    finally:
        for a in list(emu.values()) + list(tgt.values()):
            a.close()
