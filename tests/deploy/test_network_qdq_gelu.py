"""An onnxruntime QDQ file's GELU in the network mode (:mod:`hlsnn.deploy.rewrite.unaryfuse`): quantize_static
quantizes GELU's ``1 + erf(x / sqrt 2)`` to uint8 with zero point 0, which imports as a ``Relu``
(the saturation at 0, :mod:`hlsnn.deploy.importer.qimport`) between the ``Add`` 1 and the ``Mul`` by ``x``.
That Relu broke the GELU's fusion into one ``UnaryChain`` table, and the network mode refused the
lone Relu of a pending table ("no integer rule"), so the model ran layer by layer (toklin_ts17_qdq:
3 kernel starts in fixed8, where its float file runs in one). A Relu inside the region is now one of
its unary nodes (value ``max(v, 0)``, exact).

References: exact rational values (Fractions), the layer path (the network mode must give its
bits), onnxruntime on the file."""
from fractions import Fraction

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def test_a_relu_node_of_a_chain_is_its_exact_clamp():
    from hlsnn.engines.network import tables
    k = tables.key("UnaryChain", {"nodes": [{"op": "AddConst", "attrs": {"c": -1.0}, "args": [0]},
                                            {"op": "Relu", "attrs": {}, "args": [1]},
                                            {"op": "Mul", "attrs": {}, "args": [0, 2]}]})
    assert k is not None
    for x in (Fraction(-3, 2), Fraction(0), Fraction(1, 2), Fraction(1), Fraction(5, 4), Fraction(7)):
        assert tables.value(k, x) == (x * max(x - 1, Fraction(0)), 0)
    assert "Relu" not in tables.OPS                     # a lone Relu stays a clamp, not a table


def _layers(ops):
    from hlsnn.deploy.importer.graph import Layer
    return [Layer(n, "host", ins, out, op=op, attrs={}) for n, op, ins, out in ops]


def test_a_relu_inside_the_region_fuses_and_one_after_it_does_not():
    from hlsnn.deploy.rewrite.unaryfuse import fuse
    inside = _layers([("e", "Erf", ["h"], "e"), ("r", "Relu", ["e"], "r"), ("m", "Mul", ["h", "r"], "m"),
                      ("s", "Sigmoid", ["m"], "y")])
    out = fuse(inside, "y")
    assert [la.op for la in out] == ["UnaryChain"]
    assert [nd["op"] for nd in out[0].attrs["nodes"]] == ["Erf", "Relu", "Mul", "Sigmoid"]
    after = _layers([("s", "Sigmoid", ["h"], "s"), ("m", "Mul", ["h", "s"], "m"), ("r", "Relu", ["m"], "y")])
    assert [la.op for la in fuse(after, "y")] == ["Sigmoid", "Mul", "Relu"]     # SiLU then its clamp


def _qdq_gelu(path, seed=3):
    """flat 64 -> MatMul 16 + bias -> GELU (opset 17's Div, Erf, Add 1, Mul x, Mul 1/2) with the
    ``Add`` 1's output through a uint8 Q/DQ pair of zero point 0 (as quantize_static writes it) ->
    MatMul 10."""
    rng = np.random.default_rng(seed)
    f = lambda a, n: numpy_helper.from_array(np.asarray(a, np.float32), n)      # noqa: E731
    inits = [f(rng.normal(0, 0.25, (64, 16)), "w1"), f(rng.normal(0, 0.1, 16), "b1"),
             f(rng.normal(0, 0.4, (16, 10)), "w2"), f(np.sqrt(2.0), "r2"), f(1.0, "one"), f(0.5, "half"),
             f(2.0 / 255, "s"), numpy_helper.from_array(np.uint8(0), "z")]
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["mm"], name="fc1"),
             helper.make_node("Add", ["mm", "b1"], ["h"], name="fc1_bias"),
             helper.make_node("Div", ["h", "r2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="plus1"),
             helper.make_node("QuantizeLinear", ["a", "s", "z"], ["aq"], name="a_q"),
             helper.make_node("DequantizeLinear", ["aq", "s", "z"], ["ad"], name="a_dq"),
             helper.make_node("Mul", ["h", "ad"], ["m"], name="mul"),
             helper.make_node("Mul", ["m", "half"], ["g"], name="mul_half"),
             helper.make_node("MatMul", ["g", "w2"], ["y"], name="fc2")]
    g = helper.make_graph(nodes, "qdq_gelu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 10])], inits)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.mark.slow                  # 15-45 s: the certified GELU table of 2**12 entries, twice
@pytest.mark.parametrize("fmt", ["fixed8", "twohot"])
def test_a_qdq_gelu_runs_in_one_start_with_the_layer_paths_bits(tmp_path, fmt):
    import hlsnn
    from hlsnn.deploy import datasets
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from netfixtures import FORMATS, compile_onnx
    path = _qdq_gelu(tmp_path / "g.onnx")
    chains = [la for la in load_onnx(path).layers if la.op == "UnaryChain"]
    assert len(chains) == 1 and "Relu" in [nd["op"] for nd in chains[0].attrs["nodes"]]
    art = compile_onnx(tmp_path, "g", path, fmt, formats={fmt: FORMATS[fmt]}, layout="flat",
                       check_samples=2, calibration_samples=16)
    x = datasets.load("digits", layout="flat").x_test[:24]
    net = hlsnn.load(art, "emu", network=True)
    assert net.network is not None                      # before: "no integer rule" on the Relu
    y = net(x)
    np.testing.assert_array_equal(y, hlsnn.load(art, "emu", network=False)(x))
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": x.astype(np.float32)})[0]
    assert np.abs(y - ref).max() < 0.1 * np.abs(ref).max()
