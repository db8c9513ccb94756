"""Issue 32's import patterns in files PyTorch 2.13 itself wrote (``scripts/export_torch_models.py
--only patterns``): one tiny module per pattern, exported by the default dynamo exporter (opset
18+, batch 1, weights in ``.onnx.data``) and by ``dynamo=False`` at opset 17. PyTorch is not
needed here. Each file imports without ``--host-fallback``, its float network equals
onnxruntime's outputs, and the rule the pattern needs is the one that ran (the layer kinds)."""
import json

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402

DATA = ROOT / "tests" / "data" / "torch" / "patterns"
MANIFEST = json.loads((DATA / "MANIFEST.json").read_text())
MODELS = sorted(MANIFEST["models"])

#: what each pattern must import as, in both exports: the layers' kinds/ops in order
EXPECTED = {
    "adaptiveavgpool": ["conv+relu", "GlobalAveragePool", "*", "dense"],
    "adaptivemaxpool": ["conv", "*", "*", "dense"],            # ts17: MaxPool over the map; dynamo: ReduceMax
    "relu6": ["conv+relu", "Clip", "conv"],
    "hardswish": ["conv", "HardSwish", "conv", "HardSigmoid", "conv", "Sigmoid"],
    "linear_nobias": ["*", "dense+relu", "dense"],
    "flatten": ["conv", "*", "dense"],
    "depthwise_relu6": ["conv", "conv+relu", "Clip"],
    "zeropad": ["conv"],                                        # the Pad is the conv's padding
    "upsample": ["conv", "Upsample", "conv"],
    "concat_scale": ["conv", "conv+relu", "Concat", "Scale"],
}


def _kinds(net):
    return [(f"{la.kind}+relu" if la.relu else la.kind) if la.is_engine else la.op for la in net.layers]


def _onnxruntime(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {inp: x[i:i + 1]})[0] for i in range(len(x))])


def test_every_pattern_is_exported_both_ways():
    assert {m.rsplit("_", 1)[0] for m in MODELS} == set(EXPECTED)
    for p in EXPECTED:
        assert MANIFEST["models"][f"{p}_dynamo"]["export"] == {}
        assert MANIFEST["models"][f"{p}_ts17"]["export"] == {"dynamo": False, "opset_version": 17}
    ops = {m: set(e["ops"]) for m, e in MANIFEST["models"].items()}
    # the patterns the issue names, as the exporters write them
    assert "ReduceMean" in ops["adaptiveavgpool_dynamo"] and "GlobalAveragePool" in ops["adaptiveavgpool_ts17"]
    assert "Clip" in ops["relu6_dynamo"] and "Clip" in ops["relu6_ts17"]
    assert "HardSwish" in ops["hardswish_dynamo"] and "Gemm" in ops["linear_nobias_dynamo"]
    assert "MatMul" in ops["linear_nobias_ts17"] and "Reshape" in ops["flatten_dynamo"]
    assert "Pad" in ops["zeropad_ts17"] and "Resize" in ops["upsample_dynamo"]


@pytest.mark.parametrize("model", MODELS)
def test_pattern_imports_and_matches_onnxruntime(model):
    entry = MANIFEST["models"][model]
    net = load_onnx(DATA / f"{model}.onnx")
    want = EXPECTED[model.rsplit("_", 1)[0]]
    got = _kinds(net)
    assert len(got) == len(want) and all(w in ("*", g) for w, g in zip(want, got)), (model, got)
    x = np.random.default_rng(0).normal(size=(4, *entry["input_shape"])).astype(np.float32)
    ref = _onnxruntime(DATA / f"{model}.onnx", x)
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-4, atol=1e-5)
