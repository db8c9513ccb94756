"""``hlsnn deploy --per-layer`` on a batch-1 file whose token-wise layer reads a tensor holding the
batch on another axis (attention's (T, N, E) in ``nn.MultiheadAttention``, session 32): the
reference holds each sample's T rows one after the other, the layer (N, C, T, 1); the comparison
was an 'internal error, ValueError: operands could not be broadcast' for the whole assignment. Slow: a
deployment with calibration (6 s at load 15)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.evaluation.run import deploy  # noqa: E402


@pytest.mark.slow
def test_per_layer_errors_of_a_token_wise_layer_on_a_lifted_tensor(tmp_path):
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.normal(size=(8, 4)) * 0.5).astype(np.float32), "w"),
             numpy_helper.from_array(np.array([1, 32], np.int64), "flat"),
             numpy_helper.from_array((rng.normal(size=(10, 32)) * 0.5).astype(np.float32), "wf"),
             numpy_helper.from_array(np.zeros(10, np.float32), "bf")]
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="to_tne", perm=[1, 0, 2]),       # (8, 1, 8)
             helper.make_node("MatMul", ["xt", "w"], ["h"], name="proj"),                         # (8, 1, 4)
             helper.make_node("Transpose", ["h"], ["hb"], name="to_nte", perm=[1, 0, 2]),
             helper.make_node("Reshape", ["hb", "flat"], ["hf"], name="flatten"),
             helper.make_node("Gemm", ["hf", "wf", "bf"], ["y"], name="fc", transB=1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], initializer=inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(tmp_path / "m.onnx"))
    (tmp_path / "m.yaml").write_text("name: m\nmodel: m.onnx\ndata: digits\nlayout: ntf\ncalibration: {samples: 16}\n"
                                     "formats:\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n")
    res = deploy(tmp_path / "m.yaml", "emu", per_layer=True, test_samples=8)
    a = res["assignments"]["fixed8"]
    assert "error" not in a, a.get("error")
    assert set(a["per_layer"]) == {"proj", "fc"}
    assert all(v["relative_rms_error"] < 0.05 for v in a["per_layer"].values()), a["per_layer"]
