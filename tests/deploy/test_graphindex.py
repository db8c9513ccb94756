""":func:`hlsnn.deploy.importer.graphindex.copy_fresh`, the copy and the new names of the importer's
rewrites (gatherup2d, repeatup, unshuffle, bnforward, pixelshuffle, subneg): a new tensor's name
is never one the graph has, nor one an earlier ``fresh`` gave (two rewrites of one graph would
otherwise write two initializers of one name, or one over a node's output). The expected names
follow from that rule alone."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from hlsnn.deploy.importer import graphindex
from hlsnn.deploy.rewrite import subneg  # noqa: E402


def _model(extra_init=()):
    """``y = x - Conv(x, w)``, and initializers named ``extra_init`` that nothing reads."""
    w = numpy_helper.from_array(np.ones((1, 1, 1, 1), np.float32), "w")
    inits = [w] + [numpy_helper.from_array(np.zeros(1, np.float32), n) for n in extra_init]
    g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["c"], name="conv"),
                           helper.make_node("Sub", ["x", "c"], ["y"], name="sub")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 2, 2])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 2, 2])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_fresh_names_avoid_the_graphs_names_and_each_other():
    model = _model(extra_init=["k"])
    m, fresh = graphindex.copy_fresh(model)
    assert [fresh(b) for b in ("new", "new", "w", "k", "c", "x", "y", "new")] == \
        ["new", "new_", "w_", "k_", "c_", "x_", "y_", "new__"]


def test_the_copy_is_edited_not_the_model():
    model = _model()
    m, _ = graphindex.copy_fresh(model)
    m.graph.node[1].op_type = "Add"
    del m.graph.initializer[:]
    assert [n.op_type for n in model.graph.node] == ["Conv", "Sub"] and len(model.graph.initializer) == 1


def test_a_rewrite_s_new_weight_does_not_take_an_existing_name():
    """subneg writes the negated weight as ``w__neg``; the graph already has one of that name."""
    m = subneg.rewrite(_model(extra_init=["w__neg"]))
    names = [t.name for t in m.graph.initializer]
    assert names == ["w", "w__neg", "w__neg_"] and m.graph.node[0].input[1] == "w__neg_"
    assert numpy_helper.to_array(m.graph.initializer[2]).tolist() == [[[[-1.0]]]]
