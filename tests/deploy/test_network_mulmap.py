"""The product of two maps in the network mode (issue 52: ``Mul`` of two computed tensors of one
shape, hlsnn.engines.network.gate rule 10 and its bfp twin 10b): a SiLU ``x * sigmoid(x)`` (the
exported dw_b's ``Sigmoid`` + ``Mul``, tok_res's gating on an (8, 8) token tensor) and a GLU-style
``a * sigmoid(b)`` of two convs run in one network kernel start with the layer path's bits, in
two-hot, fixed8 and bfp8.

References: the product of two codes in float64 rounded by hand, the layer path's own float64
product converted by ``to_fixed`` (hlsnn.deploy.quantize.quant), and the layer-by-layer compiled network
on the emulator. The models are small ONNX graphs built here with onnx.helper."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.deploy.quantize.quant import to_fixed  # noqa: E402
from hlsnn.engines.network import gate as netgate  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from netfixtures import compile_onnx  # noqa: E402

FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
           "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


def _by_hand(p, shift, rounding, bits=8):
    """``p * 2**-shift`` (exact in float64) rounded with ``rounding`` and saturated."""
    v = p.astype(np.float64) * 2.0 ** -shift
    if rounding == "nearest_away":
        r = np.sign(v) * np.floor(np.abs(v) + 0.5)
    elif rounding == "nearest_even":
        r = np.rint(v)
    else:
        r = np.floor(v)
    return np.clip(r, -(1 << (bits - 1)), (1 << (bits - 1)) - 1).astype(np.int64)


@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even", "truncate"])
def test_map_product_is_the_exact_product_requantized(rounding):
    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (3, 4, 10))
    b = rng.integers(-128, 128, (3, 4, 10))
    a[0, 0, :4], b[0, 0, :4] = [127, -128, 3, -3], [127, -128, 1, 1]     # saturation; ties at shift 1
    for shift in (-2, 0, 1, 3, 7, 14):
        f = dict(c=4, hw=10, shift=shift, rounding=rounding, same=True)
        got = netgate.gate_ints(a, b, f, 8)
        np.testing.assert_array_equal(got, _by_hand(a * b, shift, rounding), err_msg=f"shift {shift}")
        # run() reads the second operand as a map of the first's shape (not a C-vector)
        op = netmode.Op("gate", "g", ["a", "b"], "o", f)
        env = {"a": a.reshape(3, 4, 2, 5), "b": b.reshape(3, 4, 2, 5)}
        np.testing.assert_array_equal(netgate.run(op, env.get, 3, 8).reshape(3, 4, 10), got)
    # worked examples: 100 * 100 = 10000 at radix 7 + 7, to radix 7: 78.125 -> 78; 127 * 127 = 16129:
    # 126.0078 -> 126, and at shift 6 252 saturates to 127; 3 * 1 >> 1 = 1.5: 2 (away, even) or 1 (truncate)
    f = dict(c=1, hw=3, shift=7, rounding=rounding, same=True)
    assert netgate.gate_ints(np.array([[[100, 127, -100]]]), np.array([[[100, 127, 100]]]), f, 8).tolist() == \
        [[[78, 126, -78 if rounding != "truncate" else -79]]]
    assert netgate.gate_ints(np.array([[[127, -128]]]), np.array([[[127, 127]]]), dict(f, shift=6), 8).tolist() == \
        [[[127, -128]]]
    f = dict(f, shift=1)
    assert netgate.gate_ints(np.array([[[3, -3, 5]]]), np.array([[[1, 1, 1]]]), f, 8).tolist() == \
        [[{"nearest_away": [2, -2, 3], "nearest_even": [2, -2, 2], "truncate": [1, -2, 2]}[rounding]]]


@pytest.mark.parametrize("rounding", ["nearest_away", "nearest_even", "truncate"])
@pytest.mark.parametrize("bits", [8, 16])
def test_layer_paths_float_product_converts_to_the_same_bits(rounding, bits):
    """The layer path multiplies the two exact float64 values and the consumer converts the
    product at its radix with to_fixed: rule 10 on the codes gives the same bits wherever
    lower() takes the gate (Fa + Fb <= F_x + 24), at 8-bit and at 16-bit codes."""
    rng = np.random.default_rng(11)
    lo, hi = -(1 << (bits - 1)), 1 << (bits - 1)
    a = rng.integers(lo, hi, (2, 3, 50))
    b = rng.integers(lo, hi, (2, 3, 50))
    for fa, fb, f_x in ((3, 7, 4), (5, 5, 9), (0, 2, 6), (-2, 4, 1), (6, 7, -3), (10, 12, 0)):
        if fa + fb > max(f_x + 24, 0):
            continue
        prod = np.ldexp(a.astype(np.float64), -fa) * np.ldexp(b.astype(np.float64), -fb)
        want = to_fixed(prod, f_x, bits, True, rounding)
        got = netgate.gate_ints(a, b, dict(shift=fa + fb - f_x, rounding=rounding, same=True), bits)
        np.testing.assert_array_equal(got, want, err_msg=f"{fa} {fb} {f_x}")


# --------------------------------------------------------------------------- small models

def _init(name, arr):
    return numpy_helper.from_array(np.asarray(arr, np.float32), name)


def _model(kind):
    """``silu``: conv, x * sigmoid(x), conv, Gemm (dw_b's SiLU); ``glu``: conv h, conv a(h),
    conv g(h), a * sigmoid(g), Gemm; ``tokens``: an (8, 8) token tensor, a token-wise Linear,
    x * sigmoid(x), Gemm (tok_res's gating); ``spatial``: a map times a 1 x H x W map (refused);
    ``poolgate``: a channel gate of a MaxPool's output (dw_mult's)."""
    rng = np.random.default_rng({"silu": 1, "glu": 2, "tokens": 3, "spatial": 4, "poolgate": 5}[kind])
    w = lambda *s: rng.normal(0, 1 / np.sqrt(np.prod(s[1:])), s)       # noqa: E731
    init, nodes = [], []
    if kind == "tokens":
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 8])
        init += [_init("w0", w(8, 8).T), _init("b0", 0.1 * rng.normal(size=8)),
                 numpy_helper.from_array(np.array([0, -1], np.int64), "shape"),
                 _init("w1", w(10, 64)), _init("b1", np.zeros(10))]
        nodes += [helper.make_node("MatMul", ["x", "w0"], ["m"]), helper.make_node("Add", ["m", "b0"], ["h"]),
                  helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Mul", ["h", "s"], ["y"]),
                  helper.make_node("Reshape", ["y", "shape"], ["f"]),
                  helper.make_node("Gemm", ["f", "w1", "b1"], ["out"], transB=1)]
    else:
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])
        init += [_init("w0", w(4, 1, 3, 3)), _init("b0", 0.1 * rng.normal(size=4)),
                 _init("w1", w(4, 4, 3, 3)), _init("b1", 0.1 * rng.normal(size=4)),
                 _init("w2", w(4, 4, 1, 1)), _init("b2", 0.1 * rng.normal(size=4)),
                 _init("wg", w(1, 4, 1, 1)), _init("bg", np.zeros(1)),
                 _init("wd", w(10, 64 if kind == "poolgate" else 256)), _init("bd", np.zeros(10))]
        conv = lambda i, wn, bn, o, k: helper.make_node("Conv", [i, wn, bn], [o], pads=[k // 2] * 4)  # noqa: E731
        nodes.append(conv("x", "w0", "b0", "h", 3))
        if kind == "silu":
            nodes += [helper.make_node("Sigmoid", ["h"], ["s"]), helper.make_node("Mul", ["h", "s"], ["y"]),
                      conv("y", "w1", "b1", "z", 3), helper.make_node("Relu", ["z"], ["r"])]
        elif kind == "poolgate":          # dw_mult's channel gate of a MaxPool's output
            init += [_init("wf", w(4, 4, 1, 1)), _init("bf", 0.1 * rng.normal(size=4))]
            nodes += [helper.make_node("MaxPool", ["h"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                      helper.make_node("GlobalAveragePool", ["p"], ["v"]), conv("v", "wf", "bf", "g", 1),
                      helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["p", "s"], ["r"])]
        elif kind == "glu":
            nodes += [conv("h", "w1", "b1", "a", 3), conv("h", "w2", "b2", "g", 1),
                      helper.make_node("Sigmoid", ["g"], ["s"]), helper.make_node("Mul", ["a", "s"], ["r"])]
        else:
            nodes += [conv("h", "wg", "bg", "g", 1), helper.make_node("Sigmoid", ["g"], ["s"]),
                      helper.make_node("Mul", ["h", "s"], ["y"]), conv("y", "w1", "b1", "r", 3)]
        nodes += [helper.make_node("Flatten", ["r"], ["f"]), helper.make_node("Gemm", ["f", "wd", "bd"], ["out"], transB=1)]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 10])
    m = helper.make_model(helper.make_graph(nodes, kind, [x], [out], init), opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def _compile(tmp, kind, fmt):
    onnx.save(_model(kind), str(tmp / f"{kind}.onnx"))
    return compile_onnx(tmp, kind, tmp / f"{kind}.onnx", fmt, formats=FORMATS, layout="auto")


def _x(kind, n):
    return datasets.load("digits", layout="ntf" if kind == "tokens" else "nchw").x_test[:n]


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("mulmap")
    return {(k, f): _compile(tmp, k, f) for k in ("silu", "glu", "tokens") for f in FORMATS}


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("kind", ["silu", "glu", "tokens"])
def test_map_products_run_as_one_network_program_with_the_layer_paths_bits(models, kind, fmt):
    """Before: refused ("a Mul of a C x H x W map by a C-vector (a channel gate) is supported,
    not of (4, 8, 8) and (4, 8, 8)"), layer by layer; now a gate op of two maps in one start,
    the layer path's bits on the emulator."""
    from hlsnn.commands.network import _kernel_calls
    x = _x(kind, 48)
    layers = hlsnn.load(models[kind, fmt], "emu", network=False)
    before = _kernel_calls(layers)
    want = layers(x)
    assert _kernel_calls(layers) - before >= (2 if kind == "tokens" else 3)      # engine starts, layer by layer
    net = hlsnn.load(models[kind, fmt], "emu", network=True)
    gates = [op for op in net.network.ops if op.kind == "gate"]
    assert len(gates) == 1 and gates[0].f["same"] and gates[0].f["hw"] == (8 if kind == "tokens" else 64)
    assert [op.f["fn"] for op in net.network.ops if op.kind == "lut"] == ["Sigmoid"]
    before = _kernel_calls(net)
    got = net(x)
    np.testing.assert_array_equal(got, want)
    assert _kernel_calls(net) == before                    # no layer kernel: the network program
    assert np.abs(want).max() > 0


def test_the_compiled_emu_path_runs_the_map_product(models):
    """netfast (the emu network mode compiled: the gate in numpy on its NHWC maps) gives run_ints'
    integers for a product of two maps."""
    from hlsnn.deploy.run import fast as netfast
    for fmt in ("twohot", "fixed8"):
        net = hlsnn.load(models["glu", fmt], "emu", network=True)
        fn = netfast.build(net.network)
        if fn is None:
            pytest.skip("the native helpers are off (HLSNN_NATIVE=0 or no C compiler)")
        xq = netmode.quantize_input(net.network, _x("glu", 40))
        np.testing.assert_array_equal(fn.run(xq)[0], netmode.run_ints(net.network, xq))


@pytest.mark.parametrize("fmt", ["twohot", "bfp8"])
def test_a_spatial_gate_runs_on_integers_and_on_pairs(tmp_path, fmt):
    """A map times a 1 x H x W map (a spatial gate): rule 10p on the integer engines and on BFP
    pairs (hlsnn.engines.network.gate, hlsnn.engines.bfp_systolic.network.reduce): the layer path's
    bits in the network mode."""
    x = _x("spatial", 8)
    out = _compile(tmp_path, "spatial", fmt)
    assert any(op.kind == "gate" and op.f["pix"] for op in hlsnn.load(out, "emu", network=True).network.ops)
    np.testing.assert_array_equal(hlsnn.load(out, "emu", network=True)(x), hlsnn.load(out, "emu", network=False)(x))


def test_damaged_same_field_is_refused_by_name():
    bad = netmode.Op("gate", "g", ["a", "b"], "o", dict(c=2, hw=4, shift=3, rounding="nearest_away", same="yes"))
    net = netmode.NetProgram("n", [bad], {}, {}, {}, [], {}, "a", {})
    with pytest.raises(InputError, match=r"op g \(gate\).*same = 'yes'"):
        netmode.check_ops(net)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_gate_loop_products_are_declared_and_modelled(models, fmt, tmp_path):
    """Counted from the rendered C++ (tests/loop_operators.py): the Gate loop of a program with a
    product of two maps has Q run-time products (its HLSNN_OPS), which the resource model counts
    as Q multipliers (a DSP each), as for a channel gate."""
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT / "tests"))
    from loop_operators import bank_sites, loop_operators, over_ports
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    net, _ = kernel_network(*artifact.read(models["glu", fmt]))
    if fmt == "bfp8":
        from hlsnn.engines.bfp_systolic.network import perf
        from hlsnn.engines.bfp_systolic.network.kernel import render
    elif fmt == "twohot":
        from hlsnn.engines.shift_mac.network import perf
        from hlsnn.engines.shift_mac.network.kernel import render
    else:
        from hlsnn.engines.shift_mac.network import perf
        from hlsnn.engines.sparse_cluster.network.kernel import render
    _, _, t = render(net, tmp_path)
    muls = perf.buffers(net, t)[1] if fmt == "bfp8" else perf.multipliers(net, t)
    assert [m.count for m in muls if m.function == "GatePixels"] == [t["pc"]]
    if fmt == "bfp8":          # (tests/loop_operators.py does not evaluate the bfp kernel's C++)
        return
    ops = loop_operators(tmp_path, "network.cpp", "network.h", with_declared=True)
    assert ops["GatePixels"]["mul"] == t["pc"] and ops["GatePixels"]["declared"] == (t["pc"], 0, t["pc"])
    assert over_ports(bank_sites(tmp_path, "network.cpp", "network.h")) == []


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_gate_loop_ii_is_one(models, fmt):
    """The Gate loop's II derived from the rendered C++ (hlsnn.perf.schedule) is 1 with a
    product of two maps in the program, as every other loop's."""
    pytest.importorskip("clang.cindex")
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(models["glu", fmt])
    net = netmode.lower(prog, arrays)
    rows = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    gate = [r for r in rows if r["loop"] == "GatePixels"]
    assert len(gate) == 1 and gate[0]["ii"] == 1, gate
    assert all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]


SLOW = pytest.mark.slow      # the quick case of the map product's Gate loop on every engine (strict csim, the hand
#                              count of its iterations): test_network_branches.py::test_the_branches_pass_the_strict_
#                              csim_in_one_start (the channel gate's: test_network_gate, test_network_pool_gate)


@pytest.mark.csim
@pytest.mark.parametrize("kind,fmt", [pytest.param("glu", "twohot", marks=SLOW), pytest.param("glu", "fixed8", marks=SLOW),
                                      pytest.param("glu", "bfp8", marks=SLOW),
                                      pytest.param("tokens", "twohot", marks=SLOW),
                                      pytest.param("tokens", "fixed8", marks=SLOW),
                                      pytest.param("silu", "bfp8", marks=SLOW)])   # bfp8: tokens' Sigmoid is on the host
def test_map_product_on_the_network_kernels_csim(models, kind, fmt):
    """shift_mac (two-hot), sparse_cluster (fixed8) and bfp_systolic (bfp8) network kernels on
    C-simulation: one start per batch, the layer path's bits; the Gate loop runs ceil(C/Q) * H * W
    iterations of the product of two maps (its second operand at the map's address)."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    from hlsnn.engines.shift_mac.network import perf as netperf
    x = _x(kind, 8)
    board = hlsnn.load(models[kind, fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(models[kind, fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    perf = bfpperf if fmt == "bfp8" else netperf
    assert {n: it for n, (it, _) in k.counters.items()} == {
        n: 8 * v for n, v in perf.iterations(board.network, k.tables).items()}
    c, hw = (8, 8) if kind == "tokens" else (4, 64)
    assert k.counters["NetGate"][0] == 8 * -(-c // k.tables["pc"]) * hw
    if k.strict:
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    if kind != "glu":                              # the slow rows: the simulated board too
        with hlsnn.load(models[kind, fmt], "sim", network=True) as sim:
            np.testing.assert_array_equal(sim(x), board(x))
            assert sim.last_kernel_starts == 1


def test_an_output_its_loop_does_not_write_to_the_shortcut_buffer_is_refused_by_name():
    """The kernels' Move, Concat, Transpose and Gate loops write an activation buffer only:
    a program that reads such an output from the shortcut buffer is refused naming the op (before,
    the kernel read stale words there); a pool's MaxPool loop writes it on every engine."""
    from hlsnn.engines.network.kernel import SC_WRITERS, descriptor_head
    place = {"s": (0, True), "a": (None, True), "b": (1, False)}
    op = netmode.Op("concat", "cat1", ["b", "a"], "s", dict(c=2, hw=16))
    with pytest.raises(InputError, match=r"cat1 \(concat\) makes a shortcut: its output is read from the shortcut"):
        descriptor_head(op, None, place, lambda t: t, 1, 1)
    pool = netmode.Op("maxpool", "mp", ["b"], "s", dict(c=2, h=4, w=4, oh=2, ow=2, kh=2, kw=2, sh=2, sw=2,
                                                         pads=(0, 0, 0, 0)))
    _, d = descriptor_head(pool, None, place, lambda t: t, 1, 1)
    assert d["dual"] == 1
    assert "maxpool" in SC_WRITERS                          # one list for every engine's kernel


@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.slow       # quick: test_network_pool_gate.py::test_the_shift_mac_kernel_gates_a_pooled_map_in_one_start
@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_channel_gate_of_a_maxpool_on_csim(tmp_path, fmt):
    """dw_mult's channel gate of a MaxPool's output: the MaxPool loop writes its output to the
    shortcut buffer too, where the gate reads it (before: the gate read stale words, 19 of 20
    logits wrong on csim); the layer path's bits in one start."""
    out = _compile(tmp_path, "poolgate", fmt)
    x = _x("poolgate", 8)
    board = hlsnn.load(out, "csim", network=True)
    gate, = [op for op in board.network.ops if op.kind == "gate"]
    assert not gate.f["same"] and [op.kind for op in board.network.ops][:2] == ["conv", "maxpool"]
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    assert k.strict                                # the MaxPool loop's second write: one a bank a cycle
    assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
