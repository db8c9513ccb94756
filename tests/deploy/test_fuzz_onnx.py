"""Property-based fuzzing of the ONNX import (issue 33): small graphs built from the supported
ops with random attributes (pads, strides, dilations, groups, kernel sizes, axes, shapes,
variances, weights) and random input sizes. Whatever the graph, hlsnn either refuses it with one
clear hlsnn error, or both its float reference (onnx's ReferenceEvaluator with hlsnn's overrides)
and its import (float_forward) compute what onnxruntime computes, to float32 rounding.
onnxruntime is the independent oracle: the fuzzing found onnx's own reference pools wrong for
asymmetric pads and ceil_mode (hlsnn.deploy.importer.reference._pool_ops). Derandomized and small, so CI runs the same examples
in a few seconds; explore locally with ``--hypothesis-seed=N`` and a larger ``max_examples``."""
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.reports.evaluate import float_reference  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import float_forward  # noqa: E402
from hlsnn.errors import HlsnnError  # noqa: E402

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

small = st.integers(0, 3)


@st.composite
def conv(draw, c):
    k = (draw(st.integers(1, 4)), draw(st.integers(1, 4)))
    group = draw(st.sampled_from([1, c]))
    z = draw(st.integers(1, 3)) * group
    cin = draw(st.sampled_from([c // group, c // group, c + 1]))      # sometimes a channel mismatch
    attrs = dict(kernel_shape=list(k), pads=[draw(small) for _ in range(4)],
                 strides=[draw(st.integers(1, 3)) for _ in range(2)],
                 dilations=[draw(st.integers(1, 2)) for _ in range(2)], group=group)
    return "Conv", attrs, {"w": (z, max(cin, 1)) + k, "b": (z,) if draw(st.booleans()) else None}, z


@st.composite
def pool(draw, c):
    op = draw(st.sampled_from(["MaxPool", "AveragePool"]))
    k = [draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    attrs = dict(kernel_shape=k, strides=[draw(st.sampled_from([1, 2, 3, 1, 0])), draw(st.integers(1, 3))],
                 pads=[draw(st.sampled_from([0, 0, 1, 2])) for _ in range(4)], ceil_mode=int(draw(st.booleans())))
    if op == "AveragePool":
        attrs["count_include_pad"] = int(draw(st.booleans()))
    return op, attrs, {}, c


@st.composite
def batchnorm(draw, c):
    return "BatchNormalization", {"epsilon": draw(st.sampled_from([1e-5, 1e-3]))}, \
        {"bn": c, "negative_var": draw(st.integers(0, 9)) == 0}, c


def simple(op, **attrs):
    return st.just((op, attrs, {}, None))


@st.composite
def graphs(draw):
    c, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 7)), draw(st.integers(1, 7))
    steps, cur = [], c
    for _ in range(draw(st.integers(1, 3))):
        op, attrs, params, out_c = draw(st.one_of(conv(cur), pool(cur), batchnorm(cur), simple("Relu"),
                                                  simple("Identity"), simple("GlobalAveragePool")))
        steps.append((op, attrs, params))
        cur = out_c if out_c is not None else cur
    tail = draw(st.sampled_from(["flatten", "flatten_gemm", "reshape_matmul", "gap_softmax"]))
    flat_axis = draw(st.sampled_from([1, 1, 1, 1, 0, 2, -1]))
    return (c, h, w), steps, tail, flat_axis, draw(st.integers(1, 4)), draw(st.integers(0, 2 ** 16))


def build(tmp_path, spec):
    (c, h, w), steps, tail, flat_axis, n_out, seed = spec
    rng = np.random.default_rng(seed)
    nodes, inits, x = [], [], "x"

    def init(name, shape):
        inits.append(numpy_helper.from_array((rng.normal(size=shape) * 0.5).astype(np.float32), name))
        return name

    for i, (op, attrs, params) in enumerate(steps):
        ins = [x]
        if op == "Conv":
            ins.append(init(f"w{i}", params["w"]))
            if params["b"]:
                ins.append(init(f"b{i}", params["b"]))
        if op == "BatchNormalization":
            n = params["bn"]
            var = rng.uniform(0.2, 2.0, n) * (-1 if params["negative_var"] else 1)
            for nm, v in (("g", rng.uniform(0.5, 1.5, n)), ("b", rng.normal(size=n)), ("m", rng.normal(size=n)),
                          ("v", var)):
                inits.append(numpy_helper.from_array(v.astype(np.float32), f"bn{i}{nm}"))
                ins.append(f"bn{i}{nm}")
        nodes.append(helper.make_node(op, ins, [f"t{i}"], name=f"n{i}", **attrs))
        x = f"t{i}"
    if tail == "gap_softmax":
        nodes += [helper.make_node("GlobalAveragePool", [x], ["g"], name="gap"),
                  helper.make_node("Flatten", ["g"], ["f"], name="flat"),
                  helper.make_node("Softmax", ["f"], ["y"], name="soft", axis=-1)]
    elif tail == "flatten":
        nodes.append(helper.make_node("Flatten", [x], ["y"], name="flat", axis=flat_axis))
    else:
        if tail == "flatten_gemm":
            nodes.append(helper.make_node("Flatten", [x], ["f"], name="flat"))
        else:
            inits.append(numpy_helper.from_array(np.array([-1, n_out * 2], np.int64), "shape"))
            nodes.append(helper.make_node("Reshape", [x, "shape"], ["f"], name="reshape"))
        k = int(rng.integers(1, 40))
        if tail == "flatten_gemm":
            nodes.append(helper.make_node("Gemm", ["f", init("wd", (n_out, k)), init("bd", (n_out,))], ["y"],
                                          name="fc", transB=1))
        else:
            nodes.append(helper.make_node("MatMul", ["f", init("wd", (n_out * 2, n_out))], ["y"], name="fc"))
    g = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", c, h, w])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "M"])], initializer=inits)
    p = tmp_path / f"f{seed}.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), str(p))
    return p, rng.normal(size=(2, c, h, w)).astype(np.float32)


@FUZZ
@given(spec=graphs())
def test_onnx_graphs_are_refused_clearly_or_imported_exactly(tmp_path, spec):
    path, x = build(tmp_path, spec)
    try:
        net = load_onnx(path)
        ref = float_reference(path, x)
        got = float_forward(net, x)       # (a kernel wider than its map: onnx's shape inference misses some)
    except HlsnnError as e:
        event(f"refused: {type(e).__name__}")
        assert "\n" not in str(e).split(":\n")[0] and "Traceback" not in str(e)
        return
    event("imported and compared")
    ort = pytest.importorskip("onnxruntime")
    ort.set_default_logger_severity(3)
    oracle = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    assert ref.shape == oracle.shape
    np.testing.assert_allclose(ref, oracle, rtol=2e-4, atol=2e-5)
    assert got.shape == ref.shape
    np.testing.assert_allclose(got, ref, rtol=2e-4, atol=2e-5)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(op=st.sampled_from(["MaxPool", "AveragePool"]), k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
       strides=st.tuples(st.integers(1, 3), st.integers(1, 3)), pads=st.tuples(*[st.integers(0, 2)] * 4),
       ceil=st.booleans(), cip=st.booleans(), hw=st.tuples(st.integers(1, 7), st.integers(1, 7)),
       opset=st.sampled_from([11, 15, 19]))
def test_the_float_reference_pools_as_onnxruntime_does(op, k, strides, pads, ceil, cip, hw, opset):
    """hlsnn's float reference pools where onnx's stock reference does not (asymmetric pads,
    ceil_mode): it is held to onnxruntime."""
    ort = pytest.importorskip("onnxruntime")
    ort.set_default_logger_severity(3)
    from hlsnn.deploy.importer.reference import reference_evaluator
    pads = [min(p, kk - 1) for p, kk in zip(pads, k + k)]
    attrs = dict(kernel_shape=list(k), strides=list(strides), pads=pads, ceil_mode=int(ceil))
    if op == "AveragePool":
        attrs["count_include_pad"] = int(cip)
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2, *hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    x = np.random.default_rng(0).normal(size=(2, 2, *hw)).astype(np.float32)
    try:
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    except Exception:                                   # noqa: BLE001 - a pool onnxruntime refuses: not compared
        return
    try:
        got = reference_evaluator(m).run(None, {"x": x})[0]
    except HlsnnError:          # a window larger than the padded map: refused (onnxruntime's truncating
        # division gives such a pool an output row; the ONNX spec's floor gives none)
        assert any(n + pads[i] + pads[i + 2] < kk for i, (n, kk) in enumerate(zip(hw, k)))
        return
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
