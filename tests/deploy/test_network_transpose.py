"""A transpose of rows and channels in the network mode (issue 52,
hlsnn.engines.network.tokens.transpose): the host ops RowsToMap and MapToRows around a token-wise
Linear (a 1x1 conv over the rows) as an integer move, so tokens_clf of tests/data/torch/beyond
runs in one network kernel start per batch in bfp8, two-hot and fixed8.

References: loops written from the definition (ONNX MatMul on the last axis of (T, F) rows:
the map's channel f, pixel t is row t's feature f), numpy's transpose, and the layer-by-layer
compiled network on the emulator (the deployment's float64 host ops)."""
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.commands.network import _kernel_calls  # noqa: E402
from hlsnn.engines.network.tokens import transpose as nettr  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.deploy.lower import program as netmode
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_torch_beyond import _config, _data, compile_beyond  # noqa: E402

TOKENS = ["tokens_clf_dynamo", "tokens_clf_ts17"]
FORMATS = ("bfp8", "twohot", "fixed8")


def test_transpose_equals_loops_written_from_its_definition():
    rng = np.random.default_rng(7)
    x = rng.integers(-128, 128, (3, 5, 19))                 # 3 images of 5 rows (tokens) by 19 features
    op = netmode.Op("transpose", "t", ["x"], "o", dict(r=5, s=19))
    got = nettr.run(op, {"x": x.reshape(3, -1)}.get, 3)
    want = np.zeros((3, 19, 5, 1), np.int64)
    for n in range(3):
        for t in range(5):
            for f in range(19):
                want[n, f, t, 0] = x[n, t, f]                 # the map's channel f, pixel t: row t's feature f
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got[..., 0], np.transpose(x, (0, 2, 1)))
    # and back (MapToRows): the transpose of the transpose is the rows
    back = netmode.Op("transpose", "b", ["o"], "r", dict(r=19, s=5))
    np.testing.assert_array_equal(nettr.run(back, {"o": got}.get, 3)[..., 0], x)
    # the bfp mode moves (m, e) pairs the same way
    m, e = nettr.run_pairs(op, {"x": (x, x + 9)}.get, 3)
    np.testing.assert_array_equal(m, want)
    np.testing.assert_array_equal(e, want + 9)


def test_damaged_transpose_fields_are_refused_by_name():
    bad = netmode.Op("transpose", "tr", ["x"], "o", dict(r=0, s=4))
    net = netmode.NetProgram("n", [bad], {}, {}, {}, [], {}, "a", {})
    with pytest.raises(InputError, match=r"op tr \(transpose\): r = 0"):
        netmode.check_ops(net)


@pytest.fixture(scope="module")
def tokens(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "nettr", TOKENS, FORMATS)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", TOKENS)
def test_tokens_clf_runs_as_one_network_program_with_the_layer_paths_bits(tokens, name, fmt):
    """Before: tokens_clf ran layer by layer in every format (3 engine starts a batch, the
    transposes on the host); now the transposes are integer ops and the whole network is one
    network program, the layer path's bits on emu (both exports, every format)."""
    x = _data(name).x_test[:24]
    layers = hlsnn.load(tokens[name, fmt], "emu", network=False)
    before = _kernel_calls(layers)
    want = layers(x)
    assert _kernel_calls(layers) - before == sum(1 for j in layers.program["layers"] if j["kind"] != "host") == 3
    net = hlsnn.load(tokens[name, fmt], "emu", network=True)
    assert [op.kind for op in net.network.ops] == ["transpose", "conv", "conv", "transpose", "conv"]
    assert [op.f["r"] for op in net.network.ops if op.kind == "transpose"] == [8, 4]    # (8 tokens, 8) and (4, 8 tokens)
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before            # no engine call: the whole network in the network mode
    assert want.shape == (24, 10) and np.abs(want).max() > 0


@pytest.mark.parametrize("name", ["tokenwise_dynamo", "tokenwise_ts17"])
def test_tokenwise_output_rows_are_a_host_transpose_after_the_logits(tmp_path, name):
    """tokenwise (two token-wise Linears, the (N, 8, 4) rows out): the input's RowsToMap is a
    transpose on the fabric; the last MapToRows runs on the host after the logits (a float
    transpose of the dequantized outputs, exact); one network program, the layer path's bits."""
    from hlsnn.network.build import compile_model
    x = _data(name).x_test[:16]
    cfg = _config(tmp_path, name)
    for fmt in FORMATS:
        out = tmp_path / f"{name}-{fmt}.hlsnn"
        compile_model(cfg, fmt, out)
        net = hlsnn.load(out, "emu", network=True)
        assert [op.kind for op in net.network.ops] == ["transpose", "conv", "conv"], fmt
        assert [j["op"] for j in net.network.host_after] == ["MapToRows"], fmt
        y = net(x)
        assert y.shape == (16, 8, 4)
        np.testing.assert_array_equal(y, hlsnn.load(out, "emu", network=False)(x), err_msg=fmt)


def _tokenwise_model(path, t, f, o1, o2, seed=11):
    """Flat 64 values as (t, f) rows, a token-wise Linear (o1, ReLU), another (o2), flattened,
    a Linear to 10: the transposes of (t, f) rows and of the (o2, t) map."""
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(np.array([0, t, f], np.int64), "shape"),
            numpy_helper.from_array(rng.normal(0, 0.5, (f, o1)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, o1).astype(np.float32), "b1"),
            numpy_helper.from_array(rng.normal(0, 0.3, (o1, o2)).astype(np.float32), "w2"),
            numpy_helper.from_array(rng.normal(0, 0.1, o2).astype(np.float32), "b2"),
            numpy_helper.from_array(rng.normal(0, 0.3, (10, t * o2)).astype(np.float32), "w3"),
            numpy_helper.from_array(rng.normal(0, 0.1, 10).astype(np.float32), "b3")]
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["rows"]),
             helper.make_node("MatMul", ["rows", "w1"], ["m1"]), helper.make_node("Add", ["m1", "b1"], ["a1"]),
             helper.make_node("Relu", ["a1"], ["r1"]),
             helper.make_node("MatMul", ["r1", "w2"], ["m2"]), helper.make_node("Add", ["m2", "b2"], ["a2"]),
             helper.make_node("Flatten", ["a2"], ["fl"], axis=1),
             helper.make_node("Gemm", ["fl", "w3", "b3"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 64])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 10])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


#: bfp8 on bfp_systolic, two-hot on shift_mac, fixed8 on sparse_cluster and on its board-sized kernel
SMALL_FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
                 "fixed8": "{type: fixed, accel: sparse8_pynq-z2}", "sized": "{type: fixed, accel: sparse8net_pynq-z2}"}


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """format -> the compiled :func:`_tokenwise_model` of 2 rows of 32 (32 -> 20 -> 18 per row):
    transposes of 2 x 32 and 18 x 2 maps, more than one and partial blocks of the kernels' banks."""
    from netfixtures import compile_each
    tmp = tmp_path_factory.mktemp("nettr-wide")
    m = _tokenwise_model(tmp / "wide.onnx", 2, 32, 20, 18)
    return compile_each(tmp, "wide_tokens", m, formats=SMALL_FORMATS, layout="flat", stem="wide")


def _digits(n):
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="flat").x_test[:n]


@pytest.mark.parametrize("fmt", list(SMALL_FORMATS))
def test_wider_tokenwise_network_lowers_with_the_layer_paths_bits(wide, fmt):
    x = _digits(24)
    net = hlsnn.load(wide[fmt], "emu", network=True)
    assert [(op.f["r"], op.f["s"]) for op in net.network.ops if op.kind == "transpose"] == [(2, 32), (18, 2)]
    np.testing.assert_array_equal(net(x), hlsnn.load(wide[fmt], "emu", network=False)(x))


@pytest.mark.parametrize("case,why", [
    ("two_leading", r"rows_to_map \(RowsToMap\): rows of shape \(2, 4, 8\): a transpose of \(T, F\) rows \(one "
                    r"leading axis\)"),
    ("dense_rows", r"rows_to_map \(RowsToMap\): its source is held on chip as a 64x1x1 map, not as the 8x8x1 map of "
                   r"its rows")])
def test_a_transpose_the_kernels_cannot_hold_is_refused_by_name(tmp_path, case, why):
    """Rows with two leading axes ((2, 4, 8) per image) are not the channels of one map, and a
    dense layer's output vector reshaped to rows sits in the banks as 64 channels of one pixel:
    the network mode names the RowsToMap and the reason (the model then runs layer by layer)."""
    from onnx import helper, numpy_helper
    from hlsnn.network.build import compile_model
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.normal(size=(8, 3)).astype(np.float32), "w")
    shape = [0, 2, 4, 8] if case == "two_leading" else [0, 8, 8]
    s = numpy_helper.from_array(np.array(shape, np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("MatMul", ["r", "w"], ["m"]),
             helper.make_node("Flatten", ["m"], ["y"], axis=1)]
    init = [w, s]
    if case == "dense_rows":                     # a Linear first: its output vector reshaped to rows
        init += [numpy_helper.from_array(rng.normal(size=(64, 64)).astype(np.float32), "wd"),
                 numpy_helper.from_array(rng.normal(size=64).astype(np.float32), "bd")]
        nodes = [helper.make_node("Gemm", ["x0", "wd", "bd"], ["x"], transB=1)] + nodes
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x0" if case == "dense_rows" else "x",
                                                             onnx.TensorProto.FLOAT, [None, 64])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 24])], init)
    path = tmp_path / "two_lead.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    cfg = tmp_path / "two_lead.yaml"
    cfg.write_text(f"name: two_lead\nmodel: {path}\ndata: digits\nlayout: flat\ntask: regression\ntargets: inputs\n"
                   "formats:\n  twohot: {type: twohot, accel: shift8_pynq-z2}\nassignments:\n"
                   "  twohot: {default: twohot}\n")
    out = tmp_path / "two_lead.hlsnn"
    compile_model(cfg, "twohot", out)
    with pytest.raises(InputError, match=why):
        netmode.lower(*artifact.read(out))


def test_the_transpose_loop_runs_at_ii_1_in_every_kernel(wide):
    """The derived II (perf/schedule.py, from the rendered C++) of each engine's Transpose
    loop is 1: one read and one write of each bank a cycle, no carried dependence through
    the buffers (the source and destination buffers differ: the strict C-simulation checks it)."""
    from hlsnn.network import schedule
    from hlsnn.network.loader import config_of
    for fmt in SMALL_FORMATS:
        prog, arrays = artifact.read(wide[fmt])
        net = netmode.lower(prog, arrays)
        rows = [r for r in schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
                if r["loop"] == "TransposeDiagonals"]
        assert len(rows) == 1 and rows[0]["ii"] == 1, (fmt, rows)


def _check_counters(board, n):
    """The kernel's loop counters are the perf model's iterations (``n`` images), and each
    transpose takes ceil(R/Q) * ceil(S/Q) * Q of them."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    from hlsnn.engines.shift_mac.network import perf as netperf
    k = board._kernel
    perf = bfpperf if board.network.engine == "bfp_systolic" else netperf
    assert {m: it for m, (it, _) in k.counters.items()} == {m: n * v for m, v in perf.iterations(board.network,
                                                                                               k.tables).items()}
    q = k.tables["pc"]
    want = sum(-(-op.f["r"] // q) * -(-op.f["s"] // q) * q for op in board.network.ops if op.kind == "transpose")
    assert k.counters["NetTranspose"][0] == n * want
    if k.strict:                                   # the strict C-simulation's port checks hold
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])


@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.parametrize("fmt", list(SMALL_FORMATS))
def test_network_kernel_transpose_is_bit_exact_on_csim_in_one_start(wide, fmt):
    """The kernels' Transpose loop (strict C-simulation; bfp_systolic, shift_mac, sparse_cluster and
    its board-sized kernel, which writes every bank copy) on maps of more than one and partial
    blocks: one start per batch, the layer path's bits, the perf model's iterations."""
    x = _digits(8)
    board = hlsnn.load(wide[fmt], "csim", network=True)
    assert board.network.engine == {"bfp8": "bfp_systolic", "twohot": "shift_mac"}.get(fmt, "sparse_cluster")
    assert (board._kernel.tables.get("sized") is not None) == (fmt == "sized")
    np.testing.assert_array_equal(board(x), hlsnn.load(wide[fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    _check_counters(board, 8)


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", TOKENS)
def test_tokens_clf_runs_in_one_start_of_the_network_kernel(tokens, name, fmt):
    """tokens_clf in bfp8 (bfp_systolic), two-hot (shift_mac) and fixed8 (sparse_cluster) on the
    network kernel's C-simulation and the simulated board: one start per batch (layer by
    layer: 3), the layer path's bits, the perf model's iterations; the latency model takes the
    network path."""
    from hlsnn.network import latency
    x = _data(name).x_test[:8]
    board = hlsnn.load(tokens[name, fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(tokens[name, fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    _check_counters(board, 8)
    with hlsnn.load(tokens[name, fmt], "sim", network=True) as sim:       # the simulated board
        np.testing.assert_array_equal(sim(x), board(x))
        assert sim.last_kernel_starts == 1
    res = latency.model(tokens[name, fmt])
    assert res["path"] == "network" and res["kernel_starts"] == 1
    assert [r["kind"] for r in res["layers"] if r["kind"] == "transpose"] == ["transpose"] * 2
