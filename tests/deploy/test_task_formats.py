"""A regression deployment's fixed-point defaults (hlsnn.deploy.quantize.task_formats, issue 52): the
``auto`` fields of its fixed/sparse formats resolve to ``radix: search, weight_scale: channel,
bias_correction: empirical, equalize: channels``; a classifier's and the other types' stay as they
were; explicit settings win; ``hlsnn compile`` resolves as ``hlsnn deploy`` (the compiled model has
the deployment's bits), and on the tiny autoencoder the new defaults are closer to onnxruntime's
float outputs than the classification defaults."""
import numpy as np
from conftest import ROOT

import hlsnn
from hlsnn.deploy import datasets
from hlsnn.deploy.quantize import task_formats
from hlsnn.deploy.config import load_deploy_config
from hlsnn.deploy.reports.evaluate import open_accelerators
from hlsnn.deploy.importer.onnx_import import load_onnx
from hlsnn.deploy.run.runner import Deployment

TINY = ROOT / "tests" / "data" / "torch" / "tiny"
CAL = 16


def _yaml(tmp_path, formats, task="regression", targets="inputs", name="ae", model=TINY / "autoencoder_ts17.onnx"):
    p = tmp_path / f"{name}.yaml"
    p.write_text(f"name: {name}\nmodel: {model}\ndata: digits\ntask: {task}\n"
                 f"targets: {targets}\ncalibration: {{samples: {CAL}}}\nformats:\n"
                 + "".join(f"  {k}: {v}\n" for k, v in formats.items()))
    return p


FORMATS = {"fixed8": "{type: fixed, accel: sparse8_pynq-z2}",
           "sparse50": "{type: sparse, accel: sparse8_pynq-z2, prune: 0.5}",
           "mine": "{type: fixed, accel: sparse8_pynq-z2, radix: lse, equalize: none}",
           "bfp8": "{type: bfp, accel: bfp8_zcu104}",
           "twohot": "{type: twohot, accel: shift8_pynq-z2}"}
FIELDS = ("radix", "weight_scale", "bias_correction", "equalize")
OLD = {"fixed": ("lse", "auto", "auto", "none"), "sparse": ("msb", "tensor", "auto", "none"),
       "bfp": ("msb", "tensor", "auto", "none"), "twohot": ("auto", "tensor", "auto", "none")}     # twohot: shift_auto chooses


def _fields(f):
    return tuple(getattr(f, k) for k in FIELDS)


def test_regression_resolves_the_fixed_point_formats_auto_fields_only(tmp_path):
    cfg = load_deploy_config(_yaml(tmp_path, FORMATS))
    for name, f in cfg.formats.items():                     # as loaded: today's (classification) defaults
        assert _fields(f) == ((OLD[f.type][0], "auto", "auto", "none") if name == "mine" else OLD[f.type]), name
    assert task_formats.resolve(cfg.formats, "classification") is cfg.formats
    reg = task_formats.resolve(cfg.formats, "regression")
    assert _fields(reg["fixed8"]) == _fields(reg["sparse50"]) == ("search", "channel", "empirical", "channels")
    assert _fields(reg["mine"]) == ("lse", "channel", "empirical", "none")      # explicit settings win
    # weight_fit: network (the output layer refitted, hlsnn.deploy.quantize.outfit) for bfp too; a classifier's: output
    assert [cfg.formats[n].weight_fit for n in ("fixed8", "sparse50", "mine", "bfp8")] == ["output"] * 4
    assert [reg[n].weight_fit for n in ("fixed8", "sparse50", "mine", "bfp8")] == ["network"] * 4
    assert _fields(reg["bfp8"]) == _fields(cfg.formats["bfp8"]) and reg["twohot"] is cfg.formats["twohot"]
    assert task_formats.choices(reg, {"fixed8", "bfp8"}) == {
        "fixed8": {"radix": "search", "weight_scale": "channel", "bias_correction": "empirical",
                   "equalize": "channels"}}


def test_the_task_is_inferred_as_hlsnn_deploy_infers_it(tmp_path):
    ds = datasets.load("digits", layout="nchw")
    auto = lambda **kw: load_deploy_config(_yaml(tmp_path, FORMATS, **kw))
    assert task_formats.task_of(auto(task="auto", targets="inputs"), ds) == "regression"
    assert task_formats.task_of(auto(task="auto", targets="data"), ds) == "classification"   # integer labels
    assert task_formats.task_of(auto(task="regression", targets="data"), ds) == "regression"


def _deployment(cfg, formats, x_cal):
    net = load_onnx(cfg.model)
    accs = open_accelerators(cfg, "emu", ["fixed8"])
    dep = Deployment(net, cfg.assignments["fixed8"], formats, accs)
    dep.calibrate(x_cal)
    return dep, accs


def test_compile_resolves_as_deploy_and_beats_the_classification_defaults(tmp_path):
    """The compiled model (regression: search, channel, empirical, channels) has the bits of a
    deployment calibrated with the resolved formats, not those of the classification defaults;
    its relative error against onnxruntime's float outputs is lower than theirs."""
    import onnxruntime as ort
    from hlsnn.network.build import compile_model
    path = _yaml(tmp_path, {"fixed8": FORMATS["fixed8"]})
    out = tmp_path / "ae.hlsnn"
    compile_model(path, "fixed8", out, check_samples=2)
    cfg = load_deploy_config(path)
    ds = datasets.load("digits", layout="flat")           # the autoencoder's input: 64 pixels
    x_cal, x = ds.x_train[:CAL], np.asarray(ds.x_test[:60], np.float64)
    with hlsnn.load(out) as net:
        y = net.run(x)
    sess = ort.InferenceSession(str(cfg.model), providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name                    # the export's batch is 1
    y_ort = np.concatenate([sess.run(None, {name: x[i:i + 1].astype(np.float32)})[0].reshape(1, -1)
                            for i in range(len(x))])
    rel = lambda y: np.linalg.norm(y.reshape(len(x), -1) - y_ort) / np.linalg.norm(y_ort)
    ys = {}
    for task in ("regression", "classification"):
        dep, accs = _deployment(cfg, task_formats.resolve(cfg.formats, task), x_cal)
        try:
            ys[task] = dep.run(x)
        finally:
            for a in accs.values():
                a.close()
    np.testing.assert_array_equal(y, ys["regression"])
    assert not np.array_equal(y, ys["classification"])
    assert rel(ys["regression"]) < rel(ys["classification"]) < 0.05


def test_deploy_records_the_resolved_choices(tmp_path):
    from hlsnn.evaluation.run import deploy
    res = deploy(_yaml(tmp_path, {"fixed8": FORMATS["fixed8"], "bfp8": FORMATS["bfp8"]}), "emu", test_samples=8,
                 assignments=["fixed8"])
    assert res["task"] == "regression"
    assert res["assignments"]["fixed8"]["fixed_point_calibration"] == {"fixed8": dict(zip(
        FIELDS, ("search", "channel", "empirical", "channels")))}
    from hlsnn.deploy.reports.evaluate import format_result
    assert "fixed8: radix search, weight_scale channel, bias_correction empirical, equalize channels" \
        in format_result(res)
    cls = deploy(_yaml(tmp_path, {"fixed8": FORMATS["fixed8"]}, task="auto", targets="data",
                       name="cls", model=ROOT / "configs" / "models" / "digits_mlp.onnx"), "emu", test_samples=8)
    assert cls["task"] == "classification"
    assert cls["assignments"]["fixed8"]["fixed_point_calibration"] == {"fixed8": dict(zip(
        FIELDS, ("lse", "auto", "auto", "none")))}


def test_open_deployment_resolves_as_deploy(tmp_path):
    from hlsnn.deploy.reports.evaluate import open_deployment
    for kw, want in (({"task": "auto"}, "search"), ({"task": "regression", "targets": "data"}, "search"),
                     ({"task": "auto", "targets": "data", "name": "cls",
                       "model": ROOT / "configs" / "models" / "digits_mlp.onnx"}, "lse")):
        with open_deployment(_yaml(tmp_path, {"fixed8": FORMATS["fixed8"]}, **kw), "fixed8") as dep:
            assert dep.formats["fixed8"].radix == want, kw
            assert (dep.formats["fixed8"].equalize == "channels") == (want == "search"), kw
