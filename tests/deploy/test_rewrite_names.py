"""The importer's rewrite passes against names a user's file already holds (hostile or unlucky):
each model here has tensors (and nodes) named exactly as the pass would name its new ones
(``{conv}/{split}/{start}_{stop}/w``, ``{einsum}/a_t``, ``{node}/scales``, ``{node}/constmm_w``,
``{output}__meanfold_axes``). The rewritten model must still be one onnx accepts
(``full_check``), with every tensor and node name once, and compute what the file computes:
onnxruntime on the rewritten model against onnxruntime on the original. Before the passes took
their names through :func:`hlsnn.deploy.importer.graphindex.copy_fresh` these gave two initializers of
one name (a weight in place of another) or two producers of one tensor. meanfold also leaves
the caller's model as it was (it edited it in place)."""
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.rewrite import constmm, meanfold, splitconv, torchdecomp
from hlsnn.deploy.importer import graphindex  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from netfixtures import compile_onnx, save_net  # noqa: E402

RNG = np.random.default_rng(7)


def _init(name, shape):
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _model(nodes, inputs, outputs, inits, opset=17):
    vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)   # noqa: E731
    g = helper.make_graph(nodes, "g", [vi(n, s) for n, s in inputs], [vi(n, s) for n, s in outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _run(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def _check(orig, new, feeds):
    """``new`` (a rewrite of ``orig``) is valid, names each tensor and node once, and computes what
    ``orig`` computes (onnxruntime)."""
    assert new is not orig, "the pass did not rewrite: the test's pattern is wrong"
    onnx.checker.check_model(new, full_check=True)
    g = new.graph
    tensors = [t.name for t in g.initializer] + [o for n in g.node for o in n.output] + \
        [i.name for i in g.input if i.name not in {t.name for t in g.initializer}]
    assert len(tensors) == len(set(tensors)), sorted(t for t in tensors if tensors.count(t) > 1)
    nodes = [n.name for n in g.node if n.name]
    assert len(nodes) == len(set(nodes)), sorted(n for n in nodes if nodes.count(n) > 1)
    for a, b in zip(_run(orig, feeds), _run(new, feeds)):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)


def test_splitconv_new_weights_and_nodes_take_no_name_of_the_file():
    # conv "c" split by "s" into channels 0:2 and 2:4: the old names c/s/0_2/w, c/s/0_2/b, node c/s/0_2
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="c", kernel_shape=[1, 1]),
             helper.make_node("Split", ["y", "sizes"], ["p", "q"], name="s", axis=1),
             helper.make_node("Add", ["p", "c/s/0_2/w"], ["c/s/2_4/b"], name="c/s/0_2"),
             helper.make_node("Mul", ["c/s/2_4/b", "q"], ["z"], name="mul")]
    inits = [_init("w", (4, 3, 1, 1)), _init("b", (4,)), numpy_helper.from_array(np.array([2, 2], np.int64), "sizes"),
             _init("c/s/0_2/w", (1, 1, 1))]
    model = _model(nodes, [("x", [1, 3, 2, 2])], [("z", [1, 2, 2, 2])], inits)
    _check(model, splitconv.rewrite(model), {"x": RNG.standard_normal((1, 3, 2, 2)).astype(np.float32)})


def test_splitconv_gemm_parts_take_no_name_of_the_file():
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc", transB=1),
             helper.make_node("Split", ["y", "sizes"], ["p", "q"], name="s", axis=1),
             helper.make_node("Mul", ["p", "fc/s/0_3/b"], ["pm"], name="m"),
             helper.make_node("Add", ["pm", "q"], ["z"], name="a")]
    inits = [_init("w", (6, 4)), _init("b", (6,)), numpy_helper.from_array(np.array([3, 3], np.int64), "sizes"),
             _init("fc/s/0_3/b", (3,))]
    model = _model(nodes, [("x", [2, 4])], [("z", [2, 3])], inits)
    _check(model, splitconv.rewrite(model), {"x": RNG.standard_normal((2, 4)).astype(np.float32)})


def test_torchdecomp_einsum_moves_take_no_name_of_the_file():
    # 'bdt,bsd->bst': a Transpose of each operand (e/a_t, e/b_t), the MatMul (e/mm), a Transpose back;
    # the file's inputs are called e/a_t and e/b_t and its output e/mm
    nodes = [helper.make_node("Einsum", ["e/a_t", "e/b_t"], ["y"], name="e", equation="bdt,bsd->bst"),
             helper.make_node("Relu", ["y"], ["e/mm"], name="e/mm")]
    model = _model(nodes, [("e/a_t", [2, 3, 4]), ("e/b_t", [2, 5, 3])], [("e/mm", [2, 5, 4])], [])
    feeds = {"e/a_t": RNG.standard_normal((2, 3, 4)).astype(np.float32),
             "e/b_t": RNG.standard_normal((2, 5, 3)).astype(np.float32)}
    _check(model, torchdecomp.rewrite(model), feeds)


def test_torchdecomp_gather_resize_constants_take_no_name_of_the_file():
    # dynamo's 1-D nearest upsampling by 2 (Transpose, GatherND, Transpose "u"): the Resize's
    # constants were u/roi and u/scales; the file has a u/scales of its own
    idx = np.repeat(np.arange(3), 2).reshape(6, 1).astype(np.int64)
    nodes = [helper.make_node("Transpose", ["x"], ["xt"], name="t0", perm=[2, 0, 1]),
             helper.make_node("GatherND", ["xt", "idx"], ["gx"], name="g"),
             helper.make_node("Transpose", ["gx"], ["up"], name="u", perm=[1, 2, 0]),
             helper.make_node("Mul", ["up", "u/scales"], ["z"], name="m")]
    inits = [numpy_helper.from_array(idx, "idx"), _init("u/scales", (1,))]
    model = _model(nodes, [("x", [1, 2, 3])], [("z", [1, 2, 6])], inits)
    new = torchdecomp.rewrite(model)
    assert "Resize" in [n.op_type for n in new.graph.node]
    _check(model, new, {"x": RNG.standard_normal((1, 2, 3)).astype(np.float32)})


def test_constmm_moves_take_no_name_of_the_file():
    # C @ X with C (5, 3) constant: mm/constmm_xt, mm/constmm_w, mm/constmm_z; the file has a mm/constmm_w
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="r"),
             helper.make_node("MatMul", ["c", "h"], ["y"], name="mm"),
             helper.make_node("Add", ["y", "mm/constmm_w"], ["z"], name="a")]
    inits = [_init("c", (5, 3)), _init("mm/constmm_w", (1,))]
    model = _model(nodes, [("x", [1, 3, 4])], [("z", [1, 5, 4])], inits)
    fs = graphindex.shapes(model)
    new = constmm.rewrite(model, fs, lambda n, c: None)
    _check(model, new, {"x": RNG.standard_normal((1, 3, 4)).astype(np.float32)})
    assert "mm/constmm_w" not in fs and fs["mm/constmm_w_"] == (3, 5)   # the new weight's shape: its own name


def _mean_pair(extra=False):
    """x.mean(3, keepdim=True).mean(2, keepdim=True) at opset 18 (axes an input); with ``extra`` the
    file also has an initializer ``m2__meanfold_axes`` (added to the mean)."""
    ax = lambda n, v: numpy_helper.from_array(np.array([v], np.int64), n)   # noqa: E731
    nodes = [helper.make_node("ReduceMean", ["x", "a3"], ["m1"], name="mean_w", keepdims=1),
             helper.make_node("ReduceMean", ["m1", "a2"], ["m2"], name="mean_h", keepdims=1)]
    inits = [ax("a3", 3), ax("a2", 2)]
    out = "m2"
    if extra:
        nodes.append(helper.make_node("Add", ["m2", "m2__meanfold_axes"], ["z"], name="add"))
        inits.append(_init("m2__meanfold_axes", (1,)))
        out = "z"
    return _model(nodes, [("x", [1, 2, 3, 4])], [(out, [1, 2, 1, 1])], inits, opset=18)


def test_meanfold_axes_take_no_name_of_the_file():
    model = _mean_pair(extra=True)
    src = onnx.ModelProto()
    src.CopyFrom(model)
    new = meanfold.rewrite(src)                    # a model of its own: the reference stays the file
    assert [n.op_type for n in new.graph.node] == ["ReduceMean", "Add"]
    _check(model, new, {"x": RNG.standard_normal((1, 2, 3, 4)).astype(np.float32)})


def test_meanfold_leaves_the_callers_model_as_it_was():
    model = _mean_pair()
    before = model.SerializeToString(deterministic=True)
    new = meanfold.rewrite(model)
    assert new is not model and len(new.graph.node) == 1
    assert model.SerializeToString(deterministic=True) == before


# --- the importer's own names: layers after nodes, {layer}/map, {layer}/stuffed ... ------------------

def _import_and_float(tmp_path, nodes, inits, x_shape, ref=None):
    """The file of ``nodes`` imported (``load_onnx``): its network, and the network in float64
    (:func:`hlsnn.deploy.run.hostops.float_tensors`) against onnxruntime on the file (or on the
    nodes ``ref``, where onnxruntime refuses the file)."""
    from hlsnn.deploy.run.hostops import float_tensors
    from hlsnn.deploy.importer.onnx_import import load_onnx
    path = save_net(tmp_path / "m.onnx", nodes, inits, "m", ("N",) + x_shape)
    net = load_onnx(path)
    x = RNG.standard_normal((3,) + x_shape).astype(np.float32)
    ref_path = path if ref is None else save_net(tmp_path / "ref.onnx", ref, inits, "ref", ("N",) + x_shape)
    want = _run(onnx.load(str(ref_path)), {"x": x})[0]
    np.testing.assert_allclose(float_tensors(net, x)[net.output], want, rtol=1e-4, atol=1e-4)
    names, outs = [la.name for la in net.layers], [la.output for la in net.layers]
    assert len(names) == len(set(names)) and len(outs) == len(set(outs)), (names, outs)
    return net, path


def _dup_nodes(names):
    inits = [_init("w1", (4, 1, 3, 3)), _init("w2", (4, 4, 3, 3)), _init("w3", (10, 256))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"], name=names[0], pads=[1] * 4),
             helper.make_node("Relu", ["a"], ["b"], name="r"),
             helper.make_node("Conv", ["b", "w2"], ["c2"], name=names[1], pads=[1] * 4),
             helper.make_node("Flatten", ["c2"], ["f"], name="fl"),
             helper.make_node("Gemm", ["f", "w3"], ["y"], name=names[2], transB=1)]
    return nodes, inits


def test_nodes_of_one_name_are_layers_of_their_own(tmp_path):
    # three nodes named "c" (ONNX asks for unique node names, onnxruntime refuses the file; the
    # importer takes it): three layers, "c", "c_", "c__", each with its node's weights (before:
    # three layers "c", whose weights a compiled model stores under one name), computing what the
    # file with names of their own computes
    nodes, inits = _dup_nodes(["c", "c", "c"])
    net, _ = _import_and_float(tmp_path, nodes, inits, (1, 8, 8), ref=_dup_nodes(["c1", "c2", "g"])[0])
    engine = [la for la in net.layers if la.kind != "host"]
    assert [la.name for la in engine] == ["c", "c_", "c__"]
    assert [la.w.shape[:2] for la in engine] == [(4, 1), (4, 4), (10, 256)]


def test_a_file_tensor_named_like_the_importers_map_keeps_its_place(tmp_path):
    # a 1-D conv "c" runs as a 2-D map (tensors c/map, c/map_out): the file's ReLU output is called c/map
    inits = [_init("w1", (4, 1, 3)), _init("w3", (10, 32))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["y1"], name="c", pads=[1, 1]),
             helper.make_node("Relu", ["y1"], ["c/map"], name="r"),
             helper.make_node("Flatten", ["c/map"], ["f"], name="fl"),
             helper.make_node("Gemm", ["f", "w3"], ["y"], name="g", transB=1)]
    net, _ = _import_and_float(tmp_path, nodes, inits, (1, 8))
    assert [la.output for la in net.layers][:3] == ["c/map_", "c/map_out", "c/map"]


@pytest.mark.slow
def test_nodes_of_one_name_deploy_as_the_same_file_with_names_of_their_own(tmp_path):
    # on the emulator: the file with three nodes named "c" gives the bits of the same file named c1, c2, g
    import hlsnn
    x = RNG.standard_normal((4, 1, 8, 8)).astype(np.float32)
    outs = []
    for stem, names in (("dup", ["c", "c", "c"]), ("own", ["c1", "c2", "g"])):
        nodes, inits = _dup_nodes(names)
        # the same weights in both files
        inits = [numpy_helper.from_array(np.random.default_rng(i).standard_normal(numpy_helper.to_array(t).shape)
                                         .astype(np.float32) * 0.3, t.name) for i, t in enumerate(inits)]
        path = save_net(tmp_path / f"{stem}.onnx", nodes, inits, stem, ("N", 1, 8, 8))
        outs.append(hlsnn.load(compile_onnx(tmp_path, stem, path, "twohot"), "emu", network=False)(x))
    np.testing.assert_array_equal(outs[0], outs[1])


def test_nodes_of_one_name_have_the_float_reference_of_the_file_named_apart(tmp_path):
    # onnxruntime refuses a file with two nodes of one name; hlsnn deploy's float reference is
    # onnx's ReferenceEvaluator (hlsnn.deploy.reports.evaluate.float_reference), which takes it: the
    # deploy runs, and its float outputs and accuracy are onnxruntime's on the same file with
    # names of their own (node names do not change what a graph computes)
    from hlsnn.deploy import datasets
    from hlsnn.deploy.reports.evaluate import float_reference
    from hlsnn.evaluation.run import deploy
    nodes, inits = _dup_nodes(["c", "c", "c"])
    path = save_net(tmp_path / "dup.onnx", nodes, inits, "dup", ("N", 1, 8, 8))
    own = _model(_dup_nodes(["c1", "c2", "g"])[0], [("x", ["N", 1, 8, 8])], [("y", ["N", 10])], inits)
    with pytest.raises(Exception, match="same node name"):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    ds = datasets.load("digits", layout="nchw")
    x = np.asarray(ds.x_test[:12], np.float32)
    want = _run(own, {"x": x})[0]
    np.testing.assert_allclose(float_reference(path, x), want, rtol=1e-5, atol=1e-5)
    cfg = tmp_path / "dup.yaml"
    cfg.write_text("name: dup\nmodel: dup.onnx\ndata: digits\ntest_samples: 12\ncalibration: {samples: 16}\n"
                   "formats:\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n")
    res = deploy(cfg, "emu")
    assert "error" not in res["assignments"]["fixed8"], res["assignments"]["fixed8"]
    assert res["float_accuracy"] == np.mean(np.argmax(want, axis=1) == np.asarray(ds.y_test[:12]))
