"""Every unary elementwise op as a table of its 2**b codes (issue 52, rule 9 of
hlsnn.engines.network.gate with hlsnn.engines.network.tables): Tanh, Erf, Gelu (exact and tanh),
LeakyRelu, Elu, Softplus, Selu, Celu, Softsign, Mish, ThresholdedRelu (hlsnn.deploy.run.hostunary),
PRelu and Scale / AddConst by one scalar, on the layer path and in the network
mode of all three engines (bfp through rule 9b's 8-bit code), with the layer path's bits.

References, independent of the code under test: exact rationals (Python's Fraction), published
digits of erf(1), tanh(1) and Phi(1), numpy's extended precision (longdouble) and math.erf away
from the rounding boundaries, and the layer-by-layer compiled network on the emulator."""
import math
from fractions import Fraction

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.engines.network import gate as netgate, tables  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from netfixtures import compile_onnx, round_array, round_fraction  # noqa: E402

LD = np.longdouble
ROUNDINGS = ("nearest_away", "nearest_even", "truncate")


_round = round_fraction                 # a Fraction rounded to an integer (netfixtures)


def _codes(f_in, bits):
    return [Fraction(q) * Fraction(2) ** -f_in for q in range(-(1 << (bits - 1)), 1 << (bits - 1))]


RATIONAL = [("LeakyRelu", {"alpha": 0.1}, lambda x: x if x >= 0 else Fraction(0.1) * x),
            ("PRelu", {"slope": np.array([-0.25])}, lambda x: x if x >= 0 else Fraction(-1, 4) * x),
            ("Scale", {"c": np.array(1.4142135381698608), "divide": True}, lambda x: x / Fraction(1.4142135381698608)),
            ("Scale", {"c": np.array([-0.75]), "divide": False}, lambda x: x * Fraction(-3, 4)),
            ("AddConst", {"c": np.array([[0.3]])}, lambda x: x + Fraction(0.3)),
            ("Softsign", {}, lambda x: x / (1 + abs(x))),
            ("ThresholdedRelu", {"alpha": 0.75}, lambda x: x if x > Fraction(3, 4) else Fraction(0))]


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("op,attrs,f", RATIONAL, ids=[f"{r[0]}{i}" for i, r in enumerate(RATIONAL)])
def test_rational_tables_are_the_exact_values_rounded(op, attrs, f, rounding):
    for f_in in (-1, 2, 5):
        for bits in (4, 8):
            f_out, t = netgate.table(op, attrs, (f_in, bits, True), rounding)
            want = [_round(f(x) * Fraction(2) ** f_out, rounding) for x in _codes(f_in, bits)]
            np.testing.assert_array_equal(t, want)
            lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
            above = [_round(f(x) * Fraction(2) ** (f_out + 1), rounding) for x in _codes(f_in, bits)]
            zeros = not any(want) and f_out == bits - 1                               # a table of zeros: b - 1
            assert zeros or f_out == f_in + bits or min(above) < lo or max(above) > hi   # the largest radix that fits
            # a calibrated radix: the same values there, saturated
            f2, t2 = netgate.table(op, attrs, (f_in, bits, True), rounding, f_out=f_out + 2)
            want2 = [min(max(_round(f(x) * Fraction(2) ** (f_out + 2), rounding), lo), hi) for x in _codes(f_in, bits)]
            assert f2 == f_out + 2
            np.testing.assert_array_equal(t2, want2)


def _ld_reference(op, attrs, x):
    if op == "Tanh":
        return np.tanh(x)
    if op == "Elu":
        return np.where(x >= 0, x, LD(attrs["alpha"]) * np.expm1(np.minimum(x, 0)))
    if op == "Selu":
        return LD(attrs["gamma"]) * np.where(x > 0, x, LD(attrs["alpha"]) * np.expm1(np.minimum(x, 0)))
    if op == "Celu":
        return np.where(x >= 0, x, LD(attrs["alpha"]) * np.expm1(np.minimum(x, 0) / LD(attrs["alpha"])))
    if op in ("Softplus", "Mish"):
        sp = np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))
        return sp if op == "Softplus" else x * np.tanh(sp)
    if op == "Gelu" and attrs["approximate"] == "tanh":     # ONNX's definition
        k = np.sqrt(LD(2) / LD(np.pi))               # pi to double only: keep the entries it cannot tell aside
        return LD(0.5) * x * (1 + np.tanh(k * (x + LD("0.044715") * x ** 3)))
    erf = np.vectorize(lambda v: LD(math.erf(float(v))), otypes=[LD])
    if op == "Erf":
        return erf(x)
    return LD(0.5) * x * (1 + erf(x / np.sqrt(LD(2))))        # Gelu, exact


TRANSC = [("Tanh", {}, 1e-15), ("Elu", {"alpha": 1.0}, 1e-15), ("Elu", {"alpha": 0.5}, 1e-15),
          ("Softplus", {}, 1e-15), ("Mish", {}, 1e-15), ("Celu", {"alpha": 0.5}, 1e-15),
          ("Selu", {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875}, 1e-15),
          ("Erf", {}, 1e-12), ("Gelu", {"approximate": "none"}, 1e-12), ("Gelu", {"approximate": "tanh"}, 1e-12)]


@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("op,attrs,tol", TRANSC, ids=[f"{r[0]}{i}" for i, r in enumerate(TRANSC)])
def test_transcendental_tables_equal_the_definitions(op, attrs, tol, rounding):
    for f_in in (0, 3, 5):
        bits = 8
        f_out, t = netgate.table(op, attrs, (f_in, bits, True), rounding)
        x = np.arange(-(1 << (bits - 1)), 1 << (bits - 1)).astype(LD) * LD(2) ** -f_in
        w = _ld_reference(op, attrs, x) * LD(2) ** f_out
        ref = round_array(w, rounding)
        frac = np.abs(w - np.floor(w) - (0 if rounding == "truncate" else 0.5))
        clear = (frac > tol * 2.0 ** f_out) & (np.abs(frac - 1) > tol * 2.0 ** f_out)
        clear |= ((x == 0) & (op != "Softplus")) | ((x > 0) & (op in ("Elu", "Celu")))   # exact in the reference too
        assert clear.sum() >= (10 if f_in == 0 else 80), (op, f_in)     # the rest is +-1 or x in longdouble
        np.testing.assert_array_equal(t[clear], ref[clear].astype(np.int64), err_msg=f"{op} F={f_in}")
        assert (np.abs(t[~clear] - w[~clear]) <= 1).all()
        assert -128 <= t.min() and t.max() <= 127
        if op in ("Tanh", "Erf") and rounding == "truncate":   # |f| < 1 strictly: never the step at 1
            assert t.max() < 2 ** f_out and t.min() >= -(2 ** f_out)


def test_the_evaluator_matches_published_digits():
    """erf(1) and tanh(1) to 50 digits, Phi(1) = gelu(1) to 40 (published tables)."""
    one = Fraction(1)
    known = {("Erf", ()): "0.84270079294971486934122063508260925929606699796630",
             ("Tanh", ()): "0.76159415595576488811945828260479359041276859725793",
             ("Gelu", (("approximate", "none"),)): "0.8413447460685429485852325456320379224779"}
    for k, digits in known.items():
        v, err = tables.value(k, one)
        assert err < Fraction(1, 10 ** 50)
        assert abs(v - Fraction(digits)) < Fraction(1, 10 ** (len(digits) - 3)), k
    # exact points: 0, and Elu's x >= 0
    assert tables.value(("Tanh", ()), Fraction(0)) == (0, 0)
    assert tables.value(("Elu", (("alpha", 1.0),)), Fraction(5, 2)) == (Fraction(5, 2), 0)


def test_an_undecidable_entry_is_refused():
    """An entry the certified interval cannot decide at 480 digits is refused, never guessed:
    a function whose bound never shrinks (the check itself, on a stand-in)."""
    k = ("Tanh", ())
    saved = tables.value
    try:
        tables.value = lambda kk, x, prec=60: (Fraction(1, 2), Fraction(1, 10 ** 9))  # straddles the half
        with pytest.raises(ValueError, match="rounding boundary"):
            tables.entry(k, Fraction(1), 0, "nearest_even")
    finally:
        tables.value = saved


def test_per_channel_constants_are_no_table():
    assert netgate.is_table("Scale", {"c": np.array(0.5), "divide": False})
    assert not netgate.is_table("Scale", {"c": np.array([0.5, 2.0]), "divide": False})
    assert not netgate.is_table("PRelu", {"slope": np.ones((3, 1, 1))})
    assert not netgate.is_table("BatchNormalization", {})
    assert "one scalar" in tables.why_not("Scale", {"c": np.ones(3), "divide": False})
    assert not netgate.is_table("Gelu", {"approximate": "cubic"})


# --------------------------------------------------------------------------- network == layer path

def _mlp(path, op, attrs=None, const=None, opset=17, relu=True):
    """input (N, 64) -> Gemm 16 (+ Relu) -> OP -> Gemm 10: a small ONNX graph."""
    rng = np.random.default_rng(7)
    init = [numpy_helper.from_array(rng.normal(0, 0.3, (16, 64)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, 16).astype(np.float32), "b1"),
            numpy_helper.from_array(rng.normal(0, 0.4, (10, 16)).astype(np.float32), "w2"),
            numpy_helper.from_array(np.zeros(10, np.float32), "b2")]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h0"], transB=1)]
    h = "h0"
    if relu:
        nodes.append(helper.make_node("Relu", ["h0"], ["h1"]))
        h = "h1"
    ins = [h]
    if const is not None:
        init.append(numpy_helper.from_array(np.asarray(const, np.float32), "k"))
        ins.append("k")
    nodes.append(helper.make_node(op, ins, ["a"], **(attrs or {})))
    nodes.append(helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], transB=1))
    g = helper.make_graph(nodes, "t", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], initializer=init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return path


CASES = {"tanh": ("Tanh", {}, None, 17, False), "erf": ("Erf", {}, None, 17, False),
         "gelu": ("Gelu", {}, None, 20, False), "gelu_tanh": ("Gelu", {"approximate": "tanh"}, None, 20, False),
         "leaky": ("LeakyRelu", {"alpha": 0.2}, None, 17, False), "elu": ("Elu", {"alpha": 0.7}, None, 17, False),
         "prelu": ("PRelu", {}, [0.3], 17, False), "mul": ("Mul", {}, -0.75, 17, True),
         "div": ("Div", {}, -1.4142135, 17, True), "add": ("Add", {}, 0.375, 17, True),
         "softplus": ("Softplus", {}, None, 17, False), "selu": ("Selu", {}, None, 17, False),
         "celu": ("Celu", {"alpha": 0.5}, None, 17, False), "softsign": ("Softsign", {}, None, 17, False),
         "mish": ("Mish", {}, None, 18, False), "thresholded": ("ThresholdedRelu", {"alpha": 0.25}, None, 17, False)}
FN = {"Mul": "Scale", "Div": "Scale", "Add": "AddConst"}
FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
           "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


def _compile(tmp_path, name, fmt, **kw):
    op, attrs, const, opset, relu = CASES[name] if name in CASES else kw["case"]
    model = _mlp(tmp_path / f"{name}.onnx", op, attrs, const, opset, relu)
    return compile_onnx(tmp_path, name, model, fmt, formats=FORMATS, layout="auto", check_samples=2), FN.get(op, op)


def _x():
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="flat").x_test[:48]


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("name", list(CASES))
def test_network_mode_runs_the_table_with_the_layer_paths_bits(tmp_path, name, fmt):
    out, fn = _compile(tmp_path, name, fmt)
    x = _x()
    layers = hlsnn.load(out, "emu", network=False)
    net = hlsnn.load(out, "emu", network=True)
    assert net.network is not None
    assert [op.f.get("fn") for op in net.network.ops if op.kind == "lut"] == [fn]
    want = layers(x)
    np.testing.assert_array_equal(net(x), want)
    # the layer path's table output: within a step of the float op, at the calibrated radix
    lut = next(op for op in net.network.ops if op.kind == "lut")
    if fmt != "bfp8":
        assert [j.get("table", {}).get("f_out") for j in layers.program["layers"] if j["op"] == fn] == [lut.f["f_out"]]


def test_a_per_channel_scale_is_refused_by_name(tmp_path):
    """Mul by one constant per channel after a ReLU'd Gemm with a negative entry (not folded
    into it): no table, the network mode says why; the layer path runs it in float64."""
    out, _ = _compile(tmp_path, "chan", "twohot", case=("Mul", {}, np.linspace(-1, 1, 16), 17, True))
    with pytest.raises(InputError, match="one scalar"):
        hlsnn.load(out, "emu", network=True)
    assert hlsnn.load(out, "emu", network=False)(_x()).shape == (48, 10)


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["twohot", "bfp8"])
def test_a_table_in_the_network_kernel_on_csim(tmp_path, fmt):
    """The network kernel (C-simulation) runs a Gelu table in its Lut loop in one start, with
    the layer path's bits."""
    out, _ = _compile(tmp_path, "gelu", fmt)
    x = _x()[:8]
    board = hlsnn.load(out, "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1


# --------------------------------------------------------------------------- x * g(x) as one op

def _gelu17(path, silu=False, tanh=False):
    """torch.onnx's opset-17 GELU between two Gemms: Div by sqrt 2, Erf, Add 1, Mul by x, Mul
    by 1/2 (``silu``: x * Sigmoid(x) instead; ``tanh``: its tanh GELU, x * x * x, ...)."""
    rng = np.random.default_rng(11)
    init = [numpy_helper.from_array(rng.normal(0, 0.3, (16, 64)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, 16).astype(np.float32), "b1"),
            numpy_helper.from_array(rng.normal(0, 0.4, (10, 16)).astype(np.float32), "w2"),
            numpy_helper.from_array(np.zeros(10, np.float32), "b2")]
    for n, v in (("s2", 1.4142135381698608), ("one", 1.0), ("half", 0.5)):
        init.append(numpy_helper.from_array(np.asarray(v, np.float32), n))
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1)]
    if tanh:
        for n, v in (("c3", 0.044715), ("k", 0.7978845834732056)):
            init.append(numpy_helper.from_array(np.asarray(v, np.float32), n))
        nodes += [helper.make_node("Mul", ["h", "h"], ["h2"]), helper.make_node("Mul", ["h", "h2"], ["h3"]),
                  helper.make_node("Mul", ["h3", "c3"], ["b"]), helper.make_node("Add", ["h", "b"], ["c"]),
                  helper.make_node("Mul", ["c", "k"], ["d"]), helper.make_node("Tanh", ["d"], ["t"]),
                  helper.make_node("Add", ["t", "one"], ["p"]), helper.make_node("Mul", ["h", "p"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["a"])]
    elif silu:
        nodes += [helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Mul", ["h", "s"], ["a"])]
    else:
        nodes += [helper.make_node("Div", ["h", "s2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
                  helper.make_node("Add", ["e", "one"], ["p"]), helper.make_node("Mul", ["h", "p"], ["m"]),
                  helper.make_node("Mul", ["m", "half"], ["a"])]
    nodes.append(helper.make_node("Gemm", ["a", "w2", "b2"], ["y"], transB=1))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], initializer=init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def test_the_opset17_gelu_imports_as_one_unary_op_with_the_same_floats(tmp_path):
    from hlsnn.deploy.run import hostops
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    from onnx.reference import ReferenceEvaluator
    path = _gelu17(tmp_path / "g.onnx")
    net = load_onnx(path)
    hosts = [la for la in net.layers if la.kind == "host"]
    assert [la.op for la in hosts] == ["UnaryChain"]
    assert [(nd["op"], nd["args"]) for nd in hosts[0].attrs["nodes"]] == [
        ("Scale", [0]), ("Erf", [1]), ("AddConst", [2]), ("Mul", [0, 3]), ("Scale", [4])]
    x = _x()[:8].astype(np.float32)
    ref = np.concatenate([ReferenceEvaluator(str(path)).run(None, {"x": x[i:i + 1]})[0] for i in range(8)])
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-4, atol=1e-5)
    # the table: within half a step of GELU's definition x Phi(x), in float64
    f_out, t = netgate.table("UnaryChain", hosts[0].attrs, (4, 8, True), "nearest_even")
    q = np.arange(-128, 128) / 16.0
    gelu = np.array([v * (1 + math.erf(v / 1.4142135381698608)) / 2 for v in q])
    assert np.abs(np.ldexp(t, -f_out) - gelu).max() <= 2.0 ** -(f_out + 1) + 1e-12
    from scipy.special import erf                   # the replaced ops' float64, in their order
    np.testing.assert_array_equal(hostops.run(hosts[0], [q]), q * (erf(q / 1.4142135381698608) + 1.0) * 0.5)
    # the tanh GELU (x * x * x, Add of x, ...) is one op too, its table within half a step
    net = load_onnx(_gelu17(tmp_path / "t.onnx", tanh=True))
    hosts = [la for la in net.layers if la.kind == "host"]
    assert [la.op for la in hosts] == ["UnaryChain"] and len(hosts[0].attrs["nodes"]) == 9
    f_out, t = netgate.table("UnaryChain", hosts[0].attrs, (4, 8, True), "nearest_even")
    k, c3 = float(np.float32(0.7978845834732056)), float(np.float32(0.044715))
    gelu = np.array([v * (1 + math.tanh(k * (v + c3 * v ** 3))) / 2 for v in q])
    assert np.abs(np.ldexp(t, -f_out) - gelu).max() <= 2.0 ** -(f_out + 1) + 1e-12
    # SiLU (x * sigmoid(x)) stays a Mul of two tensors
    net = load_onnx(_gelu17(tmp_path / "s.onnx", silu=True))
    assert [la.op for la in net.layers if la.kind == "host"] == ["Sigmoid", "Mul"]


@pytest.mark.parametrize("tanh", [False, True])
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_opset17_gelu_runs_in_the_network_mode_as_one_table(tmp_path, fmt, tanh):
    model = _gelu17(tmp_path / "g.onnx", tanh=tanh)
    out = compile_onnx(tmp_path, "g", model, fmt, formats=FORMATS, layout="auto", check_samples=2)
    x = _x()
    net = hlsnn.load(out, "emu", network=True)
    assert [op.f.get("fn") for op in net.network.ops if op.kind == "lut"] == ["UnaryChain"]
    np.testing.assert_array_equal(net(x), hlsnn.load(out, "emu", network=False)(x))
