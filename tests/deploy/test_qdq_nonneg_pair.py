"""A QDQ pair whose range starts at 0 on a tensor that is never negative (:func:`hlsnn.deploy.importer.qimport._nonneg_of`):
onnxruntime's ``quantize_static`` writes such a pair after a ``MaxPool`` of a ReLU's output (or a
``Sigmoid``, a ``Concat`` of them) with the ReLU's range; the importer turned every such pair into a
``Relu`` (the saturation at 0), and the network mode has no rule for a lone Relu, so
cnn1d_ts17_qdq (3 kernel starts) and cnn_func_ts13_qdq (4) ran layer by layer. On a tensor that is
never negative that Relu is the identity: it is not written.

References: onnxruntime on the file (the float import), the layer path (the network mode must give
its bits), the producers' definitions (max of values >= 0 is >= 0)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def _qdq_pool(path, zp_dtype=np.uint8, seed=5, plain=False):
    """(N, 1, 8, 8) -> Conv 1->4 3x3 pad 1 -> Q/DQ from 0 (the ReLU, as onnxruntime drops it) ->
    MaxPool 2x2 -> Q/DQ from 0 -> Flatten -> Gemm 64 -> 10. ``zp_dtype`` uint8 (zero point 0) or
    int8 (zero point -128): both ranges start at 0. ``plain``: the float model the pairs stand
    for (Conv, Relu, MaxPool, Flatten, Gemm; the same weights), the reference of the import."""
    rng = np.random.default_rng(seed)
    f = lambda a, n: numpy_helper.from_array(np.asarray(a, np.float32), n)      # noqa: E731
    z = np.zeros((), zp_dtype) if zp_dtype == np.uint8 else np.full((), -128, zp_dtype)
    inits = [f(rng.normal(0, 0.5, (4, 1, 3, 3)), "w1"), f(rng.normal(0, 0.1, 4), "b1"),
             f(rng.normal(0, 0.3, (10, 64)), "w2"), f(rng.normal(0, 0.1, 10), "b2"),
             f(4.0 / 255, "s"), numpy_helper.from_array(z, "z")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("QuantizeLinear", ["c", "s", "z"], ["cq"], name="c_q"),
             helper.make_node("DequantizeLinear", ["cq", "s", "z"], ["cd"], name="c_dq"),
             helper.make_node("MaxPool", ["cd"], ["p"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("QuantizeLinear", ["p", "s", "z"], ["pq"], name="p_q"),
             helper.make_node("DequantizeLinear", ["pq", "s", "z"], ["pd"], name="p_dq"),
             helper.make_node("Flatten", ["pd"], ["fl"], name="flat"),
             helper.make_node("Gemm", ["fl", "w2", "b2"], ["y"], name="fc", transB=1)]
    if plain:
        nodes = [nodes[0], helper.make_node("Relu", ["c"], ["cd"], name="relu")] + nodes[3:4] + \
            [helper.make_node("Flatten", ["p"], ["fl"], name="flat")] + nodes[7:]
    g = helper.make_graph(nodes, "qdq_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_nonneg_follows_the_producers(tmp_path):
    from hlsnn.deploy.importer.qimport import _nonneg_of
    g = onnx.load(str(_qdq_pool(tmp_path / "p.onnx"))).graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    nonneg = _nonneg_of(g, consts)
    assert nonneg("cd") and nonneg("p") and nonneg("fl")     # a pair from 0, its max pool, flattened
    assert not nonneg("c") and not nonneg("x") and not nonneg("y")          # a conv's output may be < 0
    extra = [helper.make_node("Sigmoid", ["c"], ["sg"]), helper.make_node("Concat", ["sg", "p"], ["cat"], axis=1),
             helper.make_node("Concat", ["sg", "c"], ["cat2"], axis=1), helper.make_node("Concat", ["sg", "b1"], ["cat3"], axis=1)]
    g.node.extend(extra)
    nonneg = _nonneg_of(g, consts)
    assert nonneg("sg") and nonneg("cat") and not nonneg("cat2")
    assert nonneg("cat3") == bool(np.all(consts["b1"] >= 0))


@pytest.mark.parametrize("zp", [np.uint8, np.int8])
def test_the_pair_after_a_pool_of_a_relu_writes_no_relu_and_runs_in_one_start(tmp_path, zp):
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    from netfixtures import FORMATS, compile_onnx
    path = _qdq_pool(tmp_path / "p.onnx", zp)
    net = load_onnx(path)
    assert [la.op for la in net.layers if la.kind == "host" and la.op == "Relu"] == []   # the conv's: fused
    x = datasets.load("digits", layout="nchw").x_test[:24]
    plain = _qdq_pool(tmp_path / "plain.onnx", zp, plain=True)
    want = ort.InferenceSession(str(plain), providers=["CPUExecutionProvider"]).run(None, {"x": x.astype(np.float32)})[0]
    np.testing.assert_allclose(float_forward(net, x), want, rtol=1e-5, atol=1e-5)   # the pairs removed
    art = compile_onnx(tmp_path, "p", path, "fixed8", formats={"fixed8": FORMATS["fixed8"]},
                       check_samples=2, calibration_samples=16)
    run = hlsnn.load(art, "emu")
    assert run.network is not None                           # before: "no integer rule" on the Relu
    np.testing.assert_array_equal(run(x), hlsnn.load(art, "emu", network=False)(x))
