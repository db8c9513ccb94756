"""The shipped digits example models (configs/models/digits_{mlp,cnn}.onnx) and the numpy
training / ONNX export code that makes them (scripts/digits_models.py, run by
scripts/train_digits.py; an example outside the package)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("sklearn")

from onnx import numpy_helper  # noqa: E402

import sys  # noqa: E402

from conftest import ROOT  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402

sys.path.insert(0, str(ROOT / "scripts"))
import digits_models as train  # noqa: E402

MODELS = {"mlp": ("digits_mlp.onnx", ["fc1", "relu1", "fc2", "softmax"], ["Gemm", "Relu", "Gemm", "Softmax"]),
          "cnn": ("digits_cnn.onnx",
                  ["conv1", "bn1", "relu1", "pool1", "conv2", "bn2", "relu2", "pool2", "flatten", "fc", "softmax"],
                  ["Conv", "BatchNormalization", "Relu", "MaxPool", "Conv", "BatchNormalization", "Relu", "MaxPool",
                   "Flatten", "Gemm", "Softmax"])}
IN_SHAPE = {"mlp": ["N", 64], "cnn": ["N", 1, 8, 8]}


@pytest.fixture(scope="module")
def digits():
    return {"mlp": datasets.load("digits"), "cnn": datasets.load("digits", layout="nchw")}


@pytest.fixture(scope="module")
def reference_probs(root, digits):
    """Test-split probabilities of each shipped model under the float reference."""
    return {k: train.reference_probs(root / "configs" / "models" / MODELS[k][0], digits[k].x_test) for k in MODELS}


def _load(root, kind):
    return onnx.load(str(root / "configs" / "models" / MODELS[kind][0]))


def _dims(value_info):
    return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]


@pytest.mark.parametrize("kind", MODELS)
def test_shipped_model_structure(root, kind):
    model = _load(root, kind)
    onnx.checker.check_model(model, full_check=True)
    assert [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")] == [15]
    _, names, ops = MODELS[kind]
    assert [n.name for n in model.graph.node] == names
    assert [n.op_type for n in model.graph.node] == ops
    (inp,), (out,) = model.graph.input, model.graph.output
    assert inp.name == "input" and _dims(inp) == IN_SHAPE[kind]
    assert out.name == "probs" and _dims(out) == ["N", 10]
    assert all(t.data_type == onnx.TensorProto.FLOAT for t in model.graph.initializer)


def test_shipped_cnn_layers(root):
    model = _load(root, "cnn")
    nodes = {n.name: n for n in model.graph.node}
    attrs = {k: {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute} for k, n in nodes.items()}
    for conv in ("conv1", "conv2"):
        assert attrs[conv]["kernel_shape"] == [3, 3] and attrs[conv]["pads"] == [1, 1, 1, 1]
    for pool in ("pool1", "pool2"):
        assert attrs[pool]["kernel_shape"] == [2, 2] and attrs[pool]["strides"] == [2, 2]
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert init[nodes["conv1"].input[1]].shape == (8, 1, 3, 3)
    assert init[nodes["conv2"].input[1]].shape == (16, 8, 3, 3)
    assert init[nodes["fc"].input[1]].shape == (10, 64)


def test_shipped_cnn_batchnorm_is_not_trivial(root):
    model = _load(root, "cnn")
    init = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    for bn, channels in (("bn1", 8), ("bn2", 16)):
        node = next(n for n in model.graph.node if n.name == bn)
        assert {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}["epsilon"] == pytest.approx(1e-5)
        gamma, beta, mean, var = (init[name] for name in node.input[1:])
        for a in (gamma, beta, mean, var):
            assert a.shape == (channels,) and np.all(np.isfinite(a))
        assert np.all(var > 0)
        assert np.ptp(gamma) > 1e-2 and np.abs(gamma - 1).max() > 1e-2    # not the identity scale
        assert np.abs(beta).max() > 1e-2 and np.abs(mean).max() > 1e-2
        assert np.abs(var - 1).max() > 1e-2


@pytest.mark.parametrize("kind", MODELS)
def test_shipped_model_accuracy(digits, reference_probs, kind):
    probs = reference_probs[kind]
    assert probs.shape == (360, 10) and np.allclose(probs.sum(axis=1), 1, atol=1e-5)
    assert train.accuracy(probs, digits[kind].y_test) >= 0.95


@pytest.mark.parametrize("kind", MODELS)
def test_onnxruntime_agrees_with_reference(root, digits, reference_probs, kind):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(str(root / "configs" / "models" / MODELS[kind][0]), providers=["CPUExecutionProvider"])
    probs = sess.run(None, {"input": digits[kind].x_test})[0]
    np.testing.assert_allclose(probs, reference_probs[kind], rtol=1e-4, atol=1e-5)
    assert np.array_equal(probs.argmax(axis=1), reference_probs[kind].argmax(axis=1))


def test_reference_batchnorm_does_not_depend_on_the_batch(root, digits, reference_probs):
    """One image at a time gives the same probabilities as the whole split at once: the
    inference-mode BatchNormalization uses the stored mean/var only (see reference_evaluator)."""
    x = digits["cnn"].x_test[:40]
    one_by_one = train.reference_probs(root / "configs" / "models" / "digits_cnn.onnx", x, batch_size=1)
    np.testing.assert_allclose(one_by_one, reference_probs["cnn"][:40], rtol=1e-5, atol=1e-6)


# ---- the training functions ----------------------------------------------------------------

def test_short_mlp_training_learns_and_exports(digits):
    model = train.train_mlp(digits["mlp"], seed=1, epochs=3)
    assert train.accuracy(model.predict_proba(digits["mlp"].x_test), digits["mlp"].y_test) > 0.8   # chance: 0.1
    probs = train.reference_probs(train.export_mlp(model), digits["mlp"].x_test)
    np.testing.assert_allclose(probs, model.predict_proba(digits["mlp"].x_test), rtol=1e-5, atol=1e-6)


def test_training_is_deterministic(digits):
    a = train.train_mlp(digits["mlp"], seed=3, epochs=1)
    b = train.train_mlp(digits["mlp"], seed=3, epochs=1)
    c = train.train_mlp(digits["mlp"], seed=4, epochs=1)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in a.params)
    assert not np.array_equal(a.params["fc1.weight"], c.params["fc1.weight"])


@pytest.fixture(scope="module")
def short_cnn(digits):
    return train.train_cnn(digits["cnn"], seed=1, epochs=2)


def test_short_cnn_training_learns(digits, short_cnn):
    assert train.accuracy(short_cnn.predict_proba(digits["cnn"].x_test), digits["cnn"].y_test) > 0.6   # chance: 0.1


def test_cnn_export_is_equivalent_to_numpy_forward(digits, short_cnn):
    x = digits["cnn"].x_test
    model = train.export_cnn(short_cnn)
    onnx.checker.check_model(model, full_check=True)
    np.testing.assert_allclose(train.reference_probs(model, x), short_cnn.predict_proba(x), rtol=1e-5, atol=1e-6)
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(sess.run(None, {"input": x})[0], short_cnn.predict_proba(x), rtol=1e-4, atol=1e-5)


def test_cnn_batchnorm_statistics_are_the_training_set_statistics(digits, short_cnn):
    """bn1/bn2 mean and var are the per-channel statistics of the conv outputs over the training set."""
    x = digits["cnn"].x_train
    for conv, bn in (("conv1", "bn1"), ("conv2", "bn2")):
        z = short_cnn.features(x, upto=conv)
        np.testing.assert_allclose(short_cnn.params[f"{bn}.mean"], z.mean(axis=(0, 2, 3)), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(short_cnn.params[f"{bn}.var"], z.var(axis=(0, 2, 3)), rtol=1e-4, atol=1e-5)
    # normalised with them, each channel of the conv outputs has mean 0 and variance ~1 before gamma/beta
    z = short_cnn.features(x, upto="conv2")
    zhat = (z - short_cnn.params["bn2.mean"][:, None, None]) / np.sqrt(short_cnn.params["bn2.var"][:, None, None] + 1e-5)
    assert np.abs(zhat.mean(axis=(0, 2, 3))).max() < 1e-3
    assert np.abs(zhat.var(axis=(0, 2, 3)) - 1).max() < 1e-3


def test_opset14_export_matches_the_plain_reference_evaluator(digits, short_cnn):
    """At opset 14 the stock ReferenceEvaluator computes inference BN correctly; it agrees with ours."""
    from onnx.reference import ReferenceEvaluator
    x = digits["cnn"].x_test[:50]
    plain = ReferenceEvaluator(train.export_cnn(short_cnn, opset=14)).run(None, {"input": x})[0]
    np.testing.assert_allclose(plain, short_cnn.predict_proba(x), rtol=1e-5, atol=1e-6)


def test_script_writes_both_models(tmp_path, monkeypatch, capsys, root):
    import importlib.util
    spec = importlib.util.spec_from_file_location("train_digits", root / "scripts" / "train_digits.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    mlp, cnn = train.train_mlp, train.train_cnn
    fast = {"train_mlp": lambda ds, seed, **kw: mlp(ds, seed, epochs=1, **kw),
            "train_cnn": lambda ds, seed, **kw: cnn(ds, seed, epochs=1, **kw)}
    for name, fn in fast.items():
        monkeypatch.setattr(train, name, fn)
    assert script.main(["--out", str(tmp_path), "--seed", "2"]) == 0
    out = capsys.readouterr().out
    for name in ("digits_mlp", "digits_cnn"):
        onnx.checker.check_model(onnx.load(str(tmp_path / f"{name}.onnx")))
        assert f"{name}: trained in" in out
