"""skl2onnx's ``Scaler`` (a ``StandardScaler`` in a pipeline) and a binary classifier's ``1 - p``
(``Sub`` of a computed tensor from a constant), session 32: both were refused by name (and the
``Scaler``, a domain op, left the next ``MatMul``'s rank unknown). The float path now equals
onnxruntime's on the same file, and the scaler runs on the host before the first engine layer."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402


def _pipeline(tmp_path, offset, scale):
    """x (N, 5) -> Scaler -> MatMul (5, 1) + bias -> Sigmoid -> Concat(1 - p, p), as skl2onnx
    writes a scaled binary MLPClassifier's probabilities."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array(rng.normal(size=(5, 1)).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([0.3], np.float32), "b"),
             numpy_helper.from_array(np.array([1.0], np.float32), "unity")]
    nodes = [helper.make_node("Scaler", ["x"], ["xs"], name="Scaler", domain="ai.onnx.ml", offset=offset,
                              scale=scale),
             helper.make_node("Cast", ["xs"], ["xc"], name="Cast", to=TensorProto.FLOAT),
             helper.make_node("MatMul", ["xc", "w"], ["mm"], name="MatMul"),
             helper.make_node("Add", ["mm", "b"], ["logit"], name="Add"),
             helper.make_node("Sigmoid", ["logit"], ["p"], name="Sigmoid"),
             helper.make_node("Sub", ["unity", "p"], ["q"], name="Sub"),
             helper.make_node("Concat", ["q", "p"], ["y"], name="Concat", axis=1)]
    g = helper.make_graph(nodes, "pipe", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 2])], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 1)])
    p = tmp_path / "pipe.onnx"
    onnx.save(m, str(p))
    return p


@pytest.mark.parametrize("offset, scale", [([10.0, -2.0, 300.0, 0.5, 0.0], [0.1, 2.0, 0.004, 1.5, 1.0]),
                                           ([4.0], [0.25])])          # per feature, and one for all
def test_a_scaled_binary_classifier_imports_and_equals_onnxruntime(tmp_path, offset, scale):
    path = _pipeline(tmp_path, offset, scale)
    net = load_onnx(path)
    assert net.layers[0].kind == "host" and net.layers[1].kind == "host"      # the scaler, before the engine
    assert [la.kind for la in net.layers].count("dense") == 1
    x = (np.random.default_rng(1).normal(size=(16, 5)) * [10, 1, 200, 1, 3] + [10, -2, 300, 0, 1]).astype(np.float32)
    want = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(float_forward(net, x), want, rtol=1e-5, atol=1e-6)
