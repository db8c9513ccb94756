"""Property-based fuzzing of the QDQ import and of the attributes the ONNX spec bounds (issue 84):
small graphs of an activation's QuantizeLinear/DequantizeLinear pair, a DequantizeLinear of
integer weights and one node of an attribute with hostile values (axes beyond the rank, mode
strings no op defines, zero points of other types, ``output_dtype``, per-axis scales), at
opsets 13 to 21. onnxruntime is the oracle of what is invalid: whatever it refuses to load or run,
hlsnn's import refuses with an :class:`~hlsnn.errors.InputError` (a ModelError naming the node),
also with ``--host-fallback`` (never a deploy); whatever it runs, hlsnn imports or refuses with one
hlsnn error (it supports less than onnxruntime), never a traceback. Derandomized and bounded: the
same examples in CI, in a few seconds; explore with ``--hypothesis-seed=N`` and more examples."""
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.errors import HlsnnError, InputError  # noqa: E402

FUZZ = settings(max_examples=120, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

ZP_TYPES = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32, "int16": np.int16, "none": None}
#: mostly valid values, a hostile one now and then (so that both sides of the oracle are met)
ZPS = ["same"] * 6 + ["int8", "uint8", "int32", "int16", "none"]
OUT_DTYPES = [0] * 6 + [TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16]
axes = st.one_of(st.integers(-2, 2), st.integers(-2, 2), st.integers(-9, 9))


@st.composite
def qparams(draw, n):
    """(scale shape: one number or one per index, zero-point type, axis or None)."""
    per_axis = draw(st.sampled_from([False, False, True]))
    count = draw(st.sampled_from([n, n, n, n + 1, 1])) if per_axis else 1
    return dict(count=count, per_axis=per_axis, zp=draw(st.sampled_from(ZPS)),
                axis=draw(st.one_of(st.none(), st.none(), axes)))


@st.composite
def attribute_node(draw):
    op = draw(st.sampled_from(["LayerNormalization", "Softmax", "Gelu", "Flatten", "Concat", "ReduceMean", "Pad",
                               "LogSoftmax", "Unsqueeze", "Gather", "ArgMax", "Hardmax", "Resize", "none"]))
    if op == "LayerNormalization":
        return op, {"axis": draw(axes)}
    if op in ("Softmax", "LogSoftmax", "Flatten", "Concat", "Gather", "ArgMax", "Hardmax"):
        return op, {"axis": draw(axes)}
    if op == "Resize":
        return op, {"mode": draw(st.sampled_from(["nearest", "linear", "cubic", "bad"])),
                    "coordinate_transformation_mode": draw(st.sampled_from(
                        ["half_pixel", "asymmetric", "align_corners", "tf_half_pixel_for_nn", "bad"]))}
    if op == "Gelu":
        return op, {"approximate": draw(st.sampled_from(["none", "tanh", "bad", "Tanh"]))}
    if op == "ReduceMean":
        return op, {"axes": draw(st.lists(axes, min_size=1, max_size=2)), "keepdims": 1}
    if op == "Unsqueeze":
        return op, {"axes": draw(st.lists(axes, min_size=1, max_size=2))}
    if op == "Pad":
        return op, {"mode": draw(st.sampled_from(["constant", "reflect", "edge", "bad"]))}
    return op, {}


@st.composite
def graphs(draw):
    return dict(c=draw(st.integers(2, 4)), length=draw(st.sampled_from([None, None, 3])),
                opset=draw(st.sampled_from([13, 17, 19, 20, 21])), act=draw(qparams(4)), act_dq_axis=draw(
                    st.one_of(st.none(), st.none(), st.none(), axes)), out_dtype=draw(st.sampled_from(OUT_DTYPES)),
                weight=draw(qparams(3)), w_dtype=draw(st.sampled_from(["int8", "int8", "uint8", "int32"])),
                node=draw(attribute_node()), seed=draw(st.integers(0, 2 ** 16)))


def _zp(name, kind, count, per_axis, same):
    kind = same if kind == "same" else kind
    if ZP_TYPES[kind] is None:
        return None
    v = np.zeros(count if per_axis else (), ZP_TYPES[kind])
    return numpy_helper.from_array(v, name)


def build(spec):
    """The ONNX model of ``spec``: x (N, C[, L]) -> Q/DQ pair -> [Flatten] -> MatMul by a
    DequantizeLinear of (K, 3) integer weights -> the attribute node -> y."""
    rng = np.random.default_rng(spec["seed"])
    c, length, opset = spec["c"], spec["length"], spec["opset"]
    shape = ["N", c] + ([length] if length else [])
    inits, nodes = [], []
    act, w = spec["act"], spec["weight"]
    # the activation's pair (its scales along act["axis"] when per axis)
    count = act["count"] if act["per_axis"] else 1
    inits.append(numpy_helper.from_array(np.full(count if act["per_axis"] else (), 0.05, np.float32), "as"))
    azp = _zp("azp", act["zp"], count, act["per_axis"], "int8")
    qin = ["x", "as"] + (["azp"] if azp is not None else [])
    inits += [azp] if azp is not None else []
    q_attrs = {} if act["axis"] is None else {"axis": act["axis"]}
    if spec["out_dtype"] and opset >= 21:
        q_attrs["output_dtype"] = spec["out_dtype"]
    dq_axis = act["axis"] if spec["act_dq_axis"] is None else spec["act_dq_axis"]
    nodes += [helper.make_node("QuantizeLinear", qin, ["xq"], name="q", **q_attrs),
              helper.make_node("DequantizeLinear", ["xq"] + qin[1:], ["xd"], name="dq",
                               **({} if dq_axis is None else {"axis": dq_axis}))]
    x = "xd"
    if length:
        nodes.append(helper.make_node("Flatten", [x], ["xf"], name="flat"))
        x = "xf"
    k = c * (length or 1)
    wt = {"int8": np.int8, "uint8": np.uint8, "int32": np.int32}[spec["w_dtype"]]
    inits.append(numpy_helper.from_array(rng.integers(0, 20, size=(k, 3)).astype(wt), "wq"))
    wcount = w["count"] if w["per_axis"] else 1
    inits.append(numpy_helper.from_array(np.full(wcount if w["per_axis"] else (), 0.01, np.float32), "ws"))
    wzp = _zp("wzp", w["zp"], wcount, w["per_axis"], spec["w_dtype"])
    inits += [wzp] if wzp is not None else []
    nodes.append(helper.make_node("DequantizeLinear", ["wq", "ws"] + (["wzp"] if wzp is not None else []), ["wf"],
                                  name="wdq", **({} if w["axis"] is None else {"axis": w["axis"]})))
    nodes.append(helper.make_node("MatMul", [x, "wf"], ["m"], name="fc"))
    op, attrs = spec["node"]
    if op == "none":
        nodes.append(helper.make_node("Identity", ["m"], ["y"], name="id"))
    elif op == "Concat":
        nodes.append(helper.make_node(op, ["m", "m"], ["y"], name="node", **attrs))
    elif op == "LayerNormalization":
        inits.append(numpy_helper.from_array(np.ones(3, np.float32), "g"))
        nodes.append(helper.make_node(op, ["m", "g"], ["y"], name="node", **attrs))
    elif op == "Pad":
        inits.append(numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads"))
        nodes.append(helper.make_node(op, ["m", "pads"], ["y"], name="node", **attrs))
    elif op == "Gather":
        inits.append(numpy_helper.from_array(np.array([0, 1], np.int64), "idx"))
        nodes.append(helper.make_node(op, ["m", "idx"], ["y"], name="node", **attrs))
    elif op == "Resize":
        inits.append(numpy_helper.from_array(np.array([1, 2], np.float32), "scales"))
        nodes.append(helper.make_node(op, ["m", "", "scales"], ["y"], name="node", **attrs))
    elif op == "ArgMax":
        nodes += [helper.make_node(op, ["m"], ["am"], name="node", **attrs),
                  helper.make_node("Cast", ["am"], ["y"], name="cast", to=TensorProto.FLOAT)]
    elif op in ("ReduceMean", "Unsqueeze") and opset >= (18 if op == "ReduceMean" else 13):
        a = dict(attrs)
        inits.append(numpy_helper.from_array(np.array(a.pop("axes"), np.int64), "axes"))
        nodes.append(helper.make_node(op, ["m", "axes"], ["y"], name="node", **a))
    elif op == "Gelu" and opset < 20:
        nodes.append(helper.make_node("Identity", ["m"], ["y"], name="id"))
    else:
        nodes.append(helper.make_node(op, ["m"], ["y"], name="node", **attrs))
    g = helper.make_graph(nodes, "fuzz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    try:                         # the output's rank as onnx infers it (onnx's checker wants a shape)
        out = onnx.shape_inference.infer_shapes(m).graph.output[0]
        rank = len(out.type.tensor_type.shape.dim) if out.type.tensor_type.HasField("shape") else 2
    except Exception:            # noqa: BLE001 - inference fails on the hostile ones: any rank
        rank = 2
    del m.graph.output[:]
    m.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N"] + [None] * (rank - 1)))
    return m, np.random.default_rng(spec["seed"]).normal(size=[2] + shape[1:]).astype(np.float32)


def _oracle_refuses(m, x):
    ort.set_default_logger_severity(4)
    try:
        opts = ort.SessionOptions()           # the spec's semantics, not an optimizer's fused kernels (whose
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL    # limits are no invalidity)
        ort.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    except Exception:            # noqa: BLE001 - any refusal: invalid to onnxruntime
        return True
    return False


@FUZZ
@given(spec=graphs())
def test_what_onnxruntime_refuses_hlsnn_refuses_by_name(tmp_path, spec):
    m, x = build(spec)
    path = tmp_path / f"f{spec['seed']}.onnx"
    onnx.save(m, str(path))
    refused = _oracle_refuses(m, x)
    event("onnxruntime refuses" if refused else "onnxruntime runs")
    for fallback in (True, False):
        try:
            load_onnx(path, host_fallback=fallback)
        except HlsnnError as e:
            msg = str(e)
            assert "Traceback" not in msg and "\n" not in msg.split(":\n")[0], msg
            if refused:
                assert isinstance(e, InputError), f"{type(e).__name__}: {msg}"
            continue
        assert not refused, f"imported (host_fallback={fallback}) a file onnxruntime refuses: {spec}"
