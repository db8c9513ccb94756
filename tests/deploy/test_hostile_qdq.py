"""Hostile input, round four (issue 84, findings 1-3): Q/DQ and QONNX parameters and ONNX
attributes outside the spec, and compiled models whose fields do not fit their geometry. A file
onnxruntime refuses as invalid is refused by hlsnn's import too, by name (a ModelError, never a
deploy, never a traceback, also with --host-fallback); onnxruntime is the independent oracle of
"invalid" here. A compiled model whose fields do not fit its op's geometry or its tensor's rank is
refused by the schema (written with a valid checksum, ``artifact.write``), never run with a
wrapped axis or ended in hlsnn's internal error."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.errors import InputError, ModelError  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data"


def _a(name, value, dtype):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _qdq_mlp(act_scale=0.05, act_zp=("azp", 0, np.int8), w_zp=None, q_attrs=None, dq_attrs=None, opset=21,
             w=None):
    """x (N, 4) -> QuantizeLinear/DequantizeLinear (an activation's pair) -> MatMul by a
    DequantizeLinear of int8 weights (4, 3) -> y; each parameter replaceable."""
    w_zp = w_zp if w_zp is not None else _a("wzp", 0, np.int8)
    w = w if w is not None else _a("wq", np.arange(12).reshape(4, 3) - 6, np.int8)
    inits = [_a("as", act_scale, getattr(act_scale, "dtype", np.float32)), _a(*act_zp), _a("ws", 0.1, np.float32),
             w_zp, w]
    nodes = [helper.make_node("QuantizeLinear", ["x", "as", "azp"], ["xq"], name="q", **(q_attrs or {})),
             helper.make_node("DequantizeLinear", ["xq", "as", "azp"], ["xd"], name="dq", **(dq_attrs or {})),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wzp"], ["wf"], name="wdq"),
             helper.make_node("MatMul", ["xd", "wf"], ["y"], name="fc")]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], initializer=inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def ort_refuses(model):
    """onnxruntime refuses ``model`` (to load it or to run it on a batch of two): the oracle."""
    ort = pytest.importorskip("onnxruntime")
    ort.set_default_logger_severity(4)
    shape = [2] + [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim[1:]]
    try:
        opts = ort.SessionOptions()           # the spec's semantics, not an optimizer's fused kernels
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
        sess.run(None, {"x": np.ones(shape, np.float32)})
    except Exception:                                   # noqa: BLE001 - any refusal of onnxruntime's
        return True
    return False


PER_AXIS = dict(act_scale=np.full(4, 0.05, np.float32), act_zp=("azp", np.zeros(4), np.int8))
QDQ_CASES = {
    # finding 1: each was deployed (the axis wrapped to 9 % 2; a zero point of another type ignored)
    "activation pair per axis, axis 9 of rank 2": (
        dict(q_attrs={"axis": 9}, dq_attrs={"axis": 9}, **PER_AXIS),
        r"node 'q' \(QuantizeLinear\): 4 scales along axis 9 of 'x', of shape \('\?', 4\): the axis must be one of "
        r"its 2 \(-2..1\)"),
    "int8 weight, int32 zero point 300": (
        dict(w_zp=_a("wzp", 300, np.int32)),
        r"node 'wdq' \(DequantizeLinear\): x_zero_point 'wzp' of type int32 with x 'wq' of type int8: "
        r"DequantizeLinear at opset 21 binds both to one type \(T1\) \(outside the ONNX spec\)"),
    "output_dtype uint8, int8 zero point": (
        dict(q_attrs={"output_dtype": TensorProto.UINT8}),
        r"node 'q' \(QuantizeLinear\): output_dtype uint8 with a zero point of type int8: they must agree"),
    "int32 activation pair": (
        dict(act_zp=("azp", 0, np.int32)),
        r"node 'q' \(QuantizeLinear\): y_zero_point 'azp' of type int32: QuantizeLinear at opset 21 takes "
        r"float8.*int16, int4, int8, uint16, uint4, uint8 \(outside"),
    "int4 zero point on int8 weights": (
        dict(w_zp=helper.make_tensor("wzp", TensorProto.INT4, [], [0])),
        r"node 'wdq' \(DequantizeLinear\): x_zero_point 'wzp' of type int4 with x 'wq' of type int8"),
    # the same rules' other edges
    "per-axis scales with one zero point": (
        dict(act_scale=np.full(4, 0.05, np.float32)),
        r"node 'q' \(QuantizeLinear\): zero point of shape \(\) for a scale of shape \(4,\)"),
    "an int16 pair at opset 13": (
        dict(act_zp=("azp", 0, np.int16), opset=13),
        r"y_zero_point 'azp' of type int16: QuantizeLinear at opset 13 takes int8, uint8 \(outside the ONNX spec\)"),
    "a scale of int32 at opset 13": (
        dict(act_scale=np.int32(1), opset=13),
        r"node 'q' \(QuantizeLinear\): y_scale 'as' of type int32: QuantizeLinear at opset 13 takes float"),
    "the pair's DequantizeLinear along another axis": (
        dict(q_attrs={"axis": 1}, dq_attrs={"axis": 7}, **PER_AXIS),
        r"node 'dq' \(DequantizeLinear\): 4 scales along axis 7"),
}


@pytest.mark.parametrize("case", sorted(QDQ_CASES))
def test_a_qdq_file_onnxruntime_refuses_is_refused_by_name(tmp_path, case):
    edit, want = QDQ_CASES[case]
    model = _qdq_mlp(**edit)
    assert ort_refuses(model), "the oracle takes this file: not a hostile case"
    p = tmp_path / "m.onnx"
    onnx.save(model, str(p))
    for fallback in (False, True):
        with pytest.raises(ModelError, match=want) as e:
            load_onnx(p, host_fallback=fallback)
        assert "\n" not in str(e.value)


def test_the_valid_pairs_next_to_them_still_import(tmp_path):
    """The checks refuse no file onnxruntime runs: per-axis at axis -1, uint8 through output_dtype,
    an int32 bias's DequantizeLinear."""
    for edit in (dict(q_attrs={"axis": -1}, dq_attrs={"axis": -1}, **PER_AXIS),
                 dict(act_zp=("azp", 3, np.uint8), q_attrs={"output_dtype": TensorProto.UINT8}),
                 dict(w=_a("wq", np.arange(12).reshape(4, 3), np.int32), w_zp=_a("wzp", 0, np.int32))):
        model = _qdq_mlp(**edit)
        assert not ort_refuses(model), edit
        onnx.save(model, str(tmp_path / "m.onnx"))
        net = load_onnx(tmp_path / "m.onnx")
        assert [la.kind for la in net.engine_layers()] == ["dense"]


# finding 2: QONNX parameters that are no finite integers (tracebacks at int(bw), in describe())
def _qonnx_edit(which, input_index, value):
    def edit(m):
        inits = {t.name for t in m.graph.initializer}
        n = [q for q in m.graph.node if q.op_type == "Quant" and (q.input[0] in inits) == (which == "weight")][0]
        name = f"hostile_{input_index}"
        m.graph.initializer.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        n.input[input_index] = name
        return n.name or n.output[0]
    return edit


QONNX_CASES = {
    "weight bitwidth NaN": (_qonnx_edit("weight", 3, np.nan), r"bit width \[nan\]; hlsnn takes one integer 2..32"),
    "weight bitwidth inf": (_qonnx_edit("weight", 3, np.inf), r"bit width \[inf\]; hlsnn takes one integer 2..32"),
    "activation bitwidth NaN": (_qonnx_edit("activation", 3, np.nan), r"bit width \[nan\]"),
    "activation bitwidth -inf": (_qonnx_edit("activation", 3, -np.inf), r"bit width \[-inf\]"),
    "activation zero point NaN": (_qonnx_edit("activation", 2, np.nan),
                                  r"zero point 'hostile_2' \[nan\]: QONNX zero points are finite integers"),
    "weight zero point 0.5": (_qonnx_edit("weight", 2, 0.5), r"zero point 'hostile_2' \[0.5\]"),
    "activation scale inf": (_qonnx_edit("activation", 1, np.inf), r"scale 'hostile_1' must be finite and > 0"),
}


@pytest.mark.parametrize("case", sorted(QONNX_CASES))
def test_a_qonnx_quant_of_non_finite_parameters_is_one_model_error(tmp_path, case):
    edit, want = QONNX_CASES[case]
    m = onnx.load(str(DATA / "qonnx" / "res_pot.onnx"))
    node = edit(m)
    onnx.save(m, str(tmp_path / "m.onnx"))
    with pytest.raises(ModelError, match=want) as e:
        load_onnx(tmp_path / "m.onnx")
    assert f"node {node!r} (Quant)" in str(e.value) and "\n" not in str(e.value)


# the rest of the round: attributes onnxruntime refuses, deployed with exit 0 (also with --host-fallback)
def _one_node(op, attrs, inits=(), opset=17, shape=("N", 4)):
    g = helper.make_graph([helper.make_node(op, ["x"] + [t.name for t in inits], ["y"], name="n", **attrs)], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


ATTR_CASES = {
    "LayerNormalization axis 5": (_one_node("LayerNormalization", {"axis": 5}, [_a("g", np.ones(4), np.float32)]),
                                  r"node 'n' \(LayerNormalization\): axis = 5 of a tensor of rank 2: the ONNX spec "
                                  r"allows -2..1"),
    "LayerNormalization axis -3": (_one_node("LayerNormalization", {"axis": -3}, [_a("g", np.ones(4), np.float32)]),
                                   r"axis = -3 of a tensor of rank 2"),
    "Gelu approximate 'bad'": (_one_node("Gelu", {"approximate": "bad"}, opset=20),
                               r"node 'n' \(Gelu\): approximate = 'bad': Gelu at opset 20 takes none, tanh"),
    "Softmax axis 2": (_one_node("Softmax", {"axis": 2}, opset=13), r"node 'n' \(Softmax\): axis = 2"),
    "Softmax axis 2 (opset 11)": (_one_node("Softmax", {"axis": 2}, opset=11), r"node 'n' \(Softmax\): axis = 2"),
    "Flatten axis 3": (_one_node("Flatten", {"axis": 3}, opset=13), r"axis = 3 of a tensor of rank 2: the ONNX "
                                                                    r"spec allows -2..2"),
    "ReduceMean axes [5]": (_one_node("ReduceMean", {"axes": [5]}, opset=13), r"axes = 5"),
    "Pad mode 'bad'": (_one_node("Pad", {"mode": "bad"}, [_a("p", [0, 1, 0, 1], np.int64)], opset=13),
                       r"mode = 'bad'"),
    "DepthToSpace mode 'bad'": (_one_node("DepthToSpace", {"blocksize": 2, "mode": "bad"}, opset=13,
                                          shape=("N", 4, 2, 2)), r"mode = 'bad': DepthToSpace"),
}


@pytest.mark.parametrize("case", sorted(ATTR_CASES))
def test_an_attribute_onnxruntime_refuses_is_refused_also_with_host_fallback(tmp_path, case):
    model, want = ATTR_CASES[case]
    assert ort_refuses(model), "the oracle takes this file: not a hostile case"
    for vi in model.graph.output:            # a declared output shape for onnx's checker (shape inference's)
        vi.type.tensor_type.shape.dim.add().dim_param = "N"
    p = tmp_path / "m.onnx"
    onnx.save(model, str(p))
    for fallback in (False, True):
        with pytest.raises(ModelError, match=want) as e:
            load_onnx(p, host_fallback=fallback)
        assert "\n" not in str(e.value) and "outside the ONNX spec" in str(e.value)


# finding 3: the compiled-model schema
@pytest.fixture(scope="module")
def good(tmp_path_factory):
    from compiled_fixtures import digits_cnn_three_formats
    return digits_cnn_three_formats(tmp_path_factory, "hostile4")


def _rewrite(src, tmp_path, mutate):
    from hlsnn.network import artifact
    program, arrays = artifact.read(src)
    mutate(program, arrays)
    bad = tmp_path / "bad.hlsnn"
    artifact.write(bad, program, arrays)          # a valid checksum: the schema is the check faced
    return bad


def _as_layernorm(layer, axis):
    def mutate(p, a):
        from compiled_fixtures import layer_named
        j = layer_named(p, layer)
        j["op"], j["attrs"] = "LayerNormalization", {"axis": axis, "epsilon": 1e-5, "scale": None, "bias": None}
    return mutate


@pytest.mark.parametrize("layer, axis, rank", [("softmax", 7, 2), ("softmax", -3, 2), ("pool1", 7, 4),
                                               ("pool1", 0, 4), ("softmax", -2, 2)])
@pytest.mark.parametrize("self_check", [True, False])
def test_a_layernorm_axis_beyond_its_tensor_is_refused_at_load(good, tmp_path, layer, axis, rank, self_check):
    """Axis 7 of a rank-2 tensor passed (the schema allowed -8..7 whatever the rank, the host op
    took it modulo the rank); with ``self_check=False``, the board's path, it ran with other
    outputs. Axis 0 (and -rank) would normalize over the batch."""
    import hlsnn
    bad = _rewrite(good["twohot"], tmp_path, _as_layernorm(layer, axis))
    with pytest.raises(InputError, match=f"damaged or hostile compiled model: layer {layer} "
                                         r"\(LayerNormalization\): its attributes do not fit its input") as e:
        with hlsnn.load(bad, target="emu", self_check=self_check) as net:
            net(net.check["x"])
    assert "\n" not in str(e.value) and str(bad) in str(e.value)
    assert f"axis {axis} of a tensor of rank {rank}" in str(e.value) or "axis 0 is the batch" in str(e.value)


def _sparse(field=None, value=None, **more):
    """conv1's ``field`` (an array when it starts with "/" or "_"; None: removed) set to ``value``,
    and ``more`` fields (what the schema's earlier checks ask for, so that the edit reaches the
    check of interest)."""
    def mutate(p, a):
        from compiled_fixtures import layer_named
        for k, v in ({field: value, **more} if field else more).items():
            if k.startswith("/") or k.startswith("_"):
                if v is None:
                    a.pop("conv1/" + k[1:], None)
                else:
                    a["conv1/" + k[1:]] = v
            else:
                layer_named(p, "conv1")[k] = v
    return mutate


ENGINE_CASES = {
    "sparse wq cut to (8, 1, 1, 1)": ("fixed8", _sparse("/wq", np.zeros((8, 1, 1, 1), np.int8)),
                                      r"its weights conv1/wq have shape \(8, 1, 1, 1\); its weight \[8, 1\] and "
                                      r"geometry make it \(8, 1, 3, 3\)"),
    "sparse wq of 2 channels": ("fixed8", _sparse("/wq", np.zeros((8, 2, 3, 3), np.int8)),
                                r"conv1/wq have shape \(8, 2, 3, 3\)"),
    "sparse general flipped": ("fixed8", _sparse("general", True, pads1=[1, 1, 1, 1]),
                               r"general: True, but its geometry makes it False"),
    "sparse pads1 on a simple conv": ("fixed8", _sparse("pads1", [0, 0, 0, 0]),
                                      r"pads1: \[0, 0, 0, 0\]: only a general convolution"),
    "sparse k_step set": ("fixed8", _sparse("k_step", 1),
                          r"k_step: 1, but 1 input channels on max_in_channels \d+ make it None"),
    "sparse blocks set": ("fixed8", _sparse("blocks", [[0, 1, 0, 1]], _w_taps=np.zeros((8, 1, 3, 3), np.int8)),
                          r"blocks: .* makes them None"),
    "sparse w_taps of another shape": ("fixed8", _sparse("/w_taps", np.zeros((8, 1, 2, 2), np.int8)),
                                       r"its taps conv1/w_taps have shape \(8, 1, 2, 2\)"),
    # bfp_systolic: arrays of other shapes than their chunk's rows and the weight make (internal errors)
    "bfp w0 exponents (3,)": ("bfp8", _sparse("/w0_exponents", np.zeros(3, np.int8)),
                              r"its chunk 0's w \(conv1/w0_\*\): "),
    "bfp b0 mantissas (3,)": ("bfp8", _sparse("/b0_mantissas", np.zeros(3, np.int8)),
                              r"conv1/b0_mantissas has shape \(3,\); chunk \[0, 8\] of the weight \[8, 1, 3, 3\] "
                              r"makes it \(8,\)"),
    "bfp w0 mantissas (8, 1)": ("bfp8", _sparse("/w0_mantissas", np.zeros((8, 1), np.int8)),
                                r"conv1/w0_mantissas has shape \(8, 1\)"),
    "bfp groups 2": ("bfp8", _sparse("groups", 2), r"gp 1, groups 2, zg 8: 1 group\(s\) packed 1 per GEMM"),
    # shift_mac: code fields of another shape than the weight makes (the kernel's errors, not the file's)
    "shift fields (8, 1)": ("twohot", _sparse(**{f"/{f}": np.zeros((8, 1), np.int8)
                                                for f in ("e1", "e2", "s1", "s2", "zero")}),
                            r"its weight fields conv1/e1, ... have shape \(8, 1\); the weight \[8, 1, 3, 3\] in 1 "
                            r"group\(s\) per GEMM with 1 term\(s\) makes them \(8, 9\)"),
    "shift terms 2": ("twohot", _sparse("terms", 2), r"with 2 term\(s\) makes them \(8, 18\)"),
    "shift scale exponents (3, 3)": ("twohot", _sparse("/scale_exponent", np.zeros((3, 3), np.int8)),
                                     r"its weight fields \(conv1/e1, ...\): scale_exponent: has shape \(3, 3\)"),
    "shift scale exponents missing": ("twohot", _sparse("/scale_exponent", None),
                                      r"its scale exponents conv1/scale_exponent are missing"),
    "shift groups 2": ("twohot", _sparse("groups", 2), r"gp 1, groups 2, zg 8"),
}


@pytest.mark.parametrize("case", sorted(ENGINE_CASES))
def test_an_engine_layer_whose_arrays_do_not_fit_its_geometry_is_refused(good, tmp_path, case, capsys):
    """A ``wq`` cut to (8, 1, 1, 1) passed the schema and ended in "internal error, a bug of hlsnn"
    on emu and in ``perf --host c`` (so did a bfp8 layer's exponents or bias mantissas of another
    shape): every field an engine layer derives from its weight shape and geometry is now
    compared with what they make."""
    import hlsnn
    from hlsnn.cli import main
    from hlsnn.network import artifact
    which, mutate, want = ENGINE_CASES[case]
    bad = _rewrite(good[which], tmp_path, mutate)
    with pytest.raises(InputError, match="damaged or hostile compiled model: layer conv1") as e:
        artifact.read(bad)
    assert __import__("re").search(want, str(e.value)), str(e.value)
    with pytest.raises(InputError, match="damaged or hostile compiled model: layer conv1"):
        hlsnn.load(bad, target="emu", self_check=False)
    capsys.readouterr()
    assert main(["perf", str(bad), "--host", "c"]) == 2
    err = capsys.readouterr().err
    assert "damaged or hostile compiled model: layer conv1" in err and "internal error" not in err, err
