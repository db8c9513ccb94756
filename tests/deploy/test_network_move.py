"""Data moves in the network mode (issue 52, hlsnn.engines.network.move): nearest Upsample,
ZeroStuff (a transposed convolution's input) and a channel Concat (a U-Net's skip) as integer
ops, so the two U-Nets of tests/data/torch/beyond lower to one network program on every engine.

References: plain-Python loops written from the ops' definitions (ONNX Resize nearest with
integer scales, the transposed convolution's zero insertion, concatenation), and the
layer-by-layer compiled network on the emulator (the deployment's float64 host ops)."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT, slow_cases  # noqa: E402
from hlsnn.engines.network import move as netmove  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.commands.network import _kernel_calls  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_torch_beyond import _config, _data, compile_beyond  # noqa: E402
from netfixtures import classifier_fixed_defaults  # noqa: E402,F401

# the network path's bits, with a classifier's fixed8 calibration (netfixtures.classifier_fixed_defaults)
pytestmark = pytest.mark.usefixtures("classifier_fixed_defaults")

UNETS = ["unet_upsample_ts17", "unet_convtranspose_dynamo"]
KINDS = {"unet_upsample_ts17": "upsample", "unet_convtranspose_dynamo": "zerostuff"}


def test_moves_equal_loops_written_from_their_definitions():
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (2, 3, 4, 5))
    y = rng.integers(-128, 128, (2, 2, 4, 5))
    up = netmode.Op("upsample", "u", ["x"], "o", dict(c=3, h=4, w=5, fh=2, fw=3, oh=8, ow=15))
    zs = netmode.Op("zerostuff", "z", ["x"], "o", dict(c=3, h=4, w=5, sh=3, sw=2, oh=10, ow=9))
    cat = netmode.Op("concat", "c", ["x", "y"], "o", dict(cs=[3, 2], hw=20, h=4, w=5))
    env = {"x": x.reshape(2, -1), "y": y}
    got = {op.kind: netmove.run(op, env.get, 2) for op in (up, zs, cat)}
    want_up = np.zeros((2, 3, 8, 15), np.int64)
    want_zs = np.zeros((2, 3, 10, 9), np.int64)
    want_cat = np.zeros((2, 5, 4, 5), np.int64)
    for n in range(2):
        for c in range(3):
            for i in range(8):
                for j in range(15):
                    want_up[n, c, i, j] = x[n, c, i // 2, j // 3]       # Resize nearest, asymmetric, floor
            for i in range(4):
                for j in range(5):
                    want_zs[n, c, 3 * i, 2 * j] = x[n, c, i, j]
                    want_cat[n, c, i, j] = x[n, c, i, j]
        want_cat[n, 3:] = y[n]
    np.testing.assert_array_equal(got["upsample"], want_up)
    np.testing.assert_array_equal(got["zerostuff"], want_zs)
    np.testing.assert_array_equal(got["concat"], want_cat)
    # the bfp mode moves (m, e) pairs the same way
    m, e = netmove.run_pairs(up, {"x": (x, x + 7)}.get, 2)
    np.testing.assert_array_equal(m, want_up)
    np.testing.assert_array_equal(e, want_up + 7)


def test_damaged_move_fields_are_refused_by_name():
    bad = netmode.Op("upsample", "u", ["x"], "o", dict(c=3, h=4, w=5, fh=2, fw=2, oh=8, ow=11))
    net = netmode.NetProgram("n", [bad], {}, {}, {}, [], {}, "a", {})
    with pytest.raises(InputError, match=r"op u \(upsample\).*8x10"):
        netmode.check_ops(net)


@pytest.fixture(scope="module")
def unets(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netmove", UNETS)


@pytest.mark.parametrize("fmt", ["bfp8", "twohot", "fixed8"])
@pytest.mark.parametrize("name", UNETS)
def test_unet_runs_as_one_network_program_with_the_layer_paths_bits(unets, name, fmt):
    """Before: the U-Net ran layer by layer, one engine start per conv (5 or 4 a batch) with
    the moves on the host between them; now it lowers to one network program (upsample or
    zerostuff, a requantization of the skip where its radix differs, concat) and runs in one
    pass of the network mode on emu, with the layer path's bits."""
    x = _data(name).x_test[:24]
    layers = hlsnn.load(unets[name, fmt], "emu", network=False)
    before = _kernel_calls(layers)
    want = layers(x)
    starts = _kernel_calls(layers) - before
    assert starts == sum(1 for j in layers.program["layers"] if j["kind"] != "host") >= 4
    net = hlsnn.load(unets[name, fmt], "emu", network=True)
    kinds = [op.kind for op in net.network.ops]
    assert KINDS[name] in kinds and "concat" in kinds, kinds
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before            # no engine call: the whole network in the network mode


def test_the_kernels_refuse_a_move_by_name_until_they_have_its_loop(unets):
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    # every engine's kernel has the three loops: a concat of three parts is still refused by name
    for name in UNETS:
        for fmt in ("bfp8", "twohot", "fixed8"):
            kernel_network(*artifact.read(unets[name, fmt]))
    net = netmode.NetProgram("n", [netmode.Op("concat", "c3", ["a", "b", "c"], "o", dict(cs=[1, 1, 1]))], {}, {}, {},
                             [], {}, "a", {}, "shift_mac")
    with pytest.raises(InputError, match=r"op c3 \(concat\) runs in the emu network mode only"):
        netmove.refuse_kernel(net)


@pytest.mark.csim
# twohot and fixed8 in the slow suite (CI): both moves on those engines' network kernels run on
# csim in the quick suite (test_network_kernel_moves_are_bit_exact_on_csim_in_one_start)
@pytest.mark.parametrize("fmt", slow_cases(["bfp8", "twohot", "fixed8"], {"twohot", "fixed8"}))
@pytest.mark.parametrize("name", UNETS)
def test_unet_runs_in_one_start_of_the_network_kernel(unets, name, fmt):
    """Both U-Nets in bfp8 (bfp_systolic; no requantization: elements keep their exponents),
    two-hot (shift_mac) and fixed8 (sparse_cluster) on the network kernel's
    C-simulation and the simulated board: one start per
    batch (layer by layer: one per conv, 5), the layer path's bits. The skip tensor waits in the
    shortcut buffer and the Concat loop requantizes it as it moves it (upsample_ts17: a shift
    of 1), and its iterations are the perf model's."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    from hlsnn.engines.shift_mac.network import perf as netperf
    x = _data(name).x_test[:8]
    board = hlsnn.load(unets[name, fmt], "csim", network=True)
    kinds = [op.kind for op in board.network.ops]
    assert kinds == ["conv", "maxpool", "conv", KINDS[name], "conv", "concat", "conv", "conv"], kinds
    np.testing.assert_array_equal(board(x), hlsnn.load(unets[name, fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    k = board._kernel
    assert {n: it for n, (it, _) in k.counters.items()} == {
        n: 8 * v for n, v in (bfpperf if fmt == "bfp8" else netperf).iterations(board.network, k.tables).items()}
    cat, = [op for op in board.network.ops if op.kind == "concat"]
    assert k.counters["NetConcat"][0] == 8 * -(-sum(cat.f["cs"]) // k.tables["pc"]) * cat.f["hw"]
    if name == "unet_upsample_ts17" and fmt == "twohot":
        assert cat.f["shifts"] == [1, 0], cat.f["shifts"]
    if k.strict:                                   # the strict C-simulation's port checks hold
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
    with hlsnn.load(unets[name, fmt], "sim", network=True) as sim:       # the simulated board
        np.testing.assert_array_equal(sim(x), board(x))
        assert sim.last_kernel_starts == 1


def small_model(path, kind, seed=3):
    """A conv (ReLU), then a nearest x2 ``Resize`` (``upsample``) or a stride-2
    ``ConvTranspose`` (``zerostuff``: its zero-stuffed input), then a conv, on 1 x 8 x 8 images."""
    import onnx
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(seed)
    init = [numpy_helper.from_array(rng.normal(0, 0.5, (4, 1, 3, 3)).astype(np.float32), "w1"),
            numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "b1"),
            numpy_helper.from_array(rng.normal(0, 0.3, (3, 4, 3, 3)).astype(np.float32), "w2"),
            numpy_helper.from_array(rng.normal(0, 0.1, 3).astype(np.float32), "b2")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"])]
    if kind == "upsample":
        init.append(numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"))
        nodes.append(helper.make_node("Resize", ["r1", "", "scales"], ["m"], mode="nearest",
                                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    else:
        init += [numpy_helper.from_array(rng.normal(0, 0.3, (4, 4, 2, 2)).astype(np.float32), "wt"),
                 numpy_helper.from_array(rng.normal(0, 0.1, 4).astype(np.float32), "bt")]
        nodes.append(helper.make_node("ConvTranspose", ["r1", "wt", "bt"], ["m"], strides=[2, 2]))
    nodes.append(helper.make_node("Conv", ["m", "w2", "b2"], ["y"], pads=[1, 1, 1, 1]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 3, 16, 16])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


#: the small models' formats: bfp8 on bfp_systolic, two-hot on shift_mac, fixed8 on sparse_cluster, and fixed8 on the
#: board-sized sparse_cluster kernel (net_shape: board, sub-banked activations)
SMALL_FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
                 "fixed8": "{type: fixed, accel: sparse8_pynq-z2}", "sized": "{type: fixed, accel: sparse8net_pynq-z2}"}


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """(kind, format) -> the compiled small model (:func:`small_model`)."""
    from netfixtures import compile_each
    tmp = tmp_path_factory.mktemp("netmove-small")
    out = {}
    for kind in ("upsample", "zerostuff"):
        m = small_model(tmp / f"small_{kind}.onnx", kind)
        out.update({(kind, fmt): p for fmt, p in compile_each(tmp, f"small_{kind}", m, formats=SMALL_FORMATS).items()})
    return out


#: the small models' csim cases run in the slow suite (CI) where a quick case already runs the same kernel's
#: Move loop with the same branch: bfp8's upsample and zerostuff (single 0 and 1) in
#: test_unet_runs_in_one_start_of_the_network_kernel (the two U-Nets, bfp8: the layer path's bits, one
#: start, every counter the perf model's, NetMove among them), the board-sized kernel's upsample in
#: test_unet_in_one_start_of_the_board_sized_sparse_kernel (its Move writes every bank copy)
SLOW_MOVES = {"upsample-bfp8", "zerostuff-bfp8", "upsample-sized"}


@pytest.mark.csim
@pytest.mark.parametrize("kind, fmt", [pytest.param(k, f, id=f"{k}-{f}", marks=[pytest.mark.slow] * (f"{k}-{f}" in SLOW_MOVES))
                                       for k in ("upsample", "zerostuff") for f in SMALL_FORMATS])
def test_network_kernel_moves_are_bit_exact_on_csim_in_one_start(small, kind, fmt):
    """The network kernels' Move loop (C-simulation; bfp_systolic, shift_mac, sparse_cluster and its
    board-sized kernel, which writes every bank copy): one start per batch, the layer path's
    bits, and its loop's iteration count the perf model's (ceil(C/Q) * OH * OW)."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    from hlsnn.engines.shift_mac.network import perf as netperf
    from hlsnn.deploy import datasets
    x = datasets.load("digits", layout="nchw").x_test[:8]
    board = hlsnn.load(small[kind, fmt], "csim", network=True)
    assert board.network.engine == {"bfp8": "bfp_systolic", "twohot": "shift_mac"}.get(fmt, "sparse_cluster")
    assert (board._kernel.tables.get("sized") is not None) == (fmt == "sized")
    assert kind in [op.kind for op in board.network.ops]
    np.testing.assert_array_equal(board(x), hlsnn.load(small[kind, fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1
    t = board._kernel.tables
    move = [op for op in board.network.ops if op.kind == kind][0]
    want = -(-move.f["c"] // t["pc"]) * move.f["oh"] * move.f["ow"]
    assert want == (16 * 16 if kind == "upsample" else 15 * 15) * -(-4 // t["pc"])
    k = board._kernel
    assert {n: it for n, (it, _) in k.counters.items()} == {
        n: 8 * v for n, v in (bfpperf if fmt == "bfp8" else netperf).iterations(board.network, t).items()}
    assert k.counters["NetMove"][0] == 8 * want
    if k.strict:                                   # the strict C-simulation's port checks hold
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])


@pytest.mark.csim
def test_shift_mac_upsample_on_the_simulated_board_and_in_the_latency_model(small):
    """The simulated PYNQ board runs the same kernel (one start, the layer path's bits), and
    the latency model takes the network path with the Move loop's cycles (ceil(C/Q)*OH*OW + depth)."""
    from hlsnn.network import latency
    from hlsnn.engines.shift_mac.network import perf as netperf
    from hlsnn.deploy import datasets
    x = datasets.load("digits", layout="nchw").x_test[:8]
    path = small["upsample", "twohot"]
    with hlsnn.load(path, "sim", network=True) as board:
        np.testing.assert_array_equal(board(x), hlsnn.load(path, "emu", network=False)(x))
        assert board.last_kernel_starts == 1
    res = latency.model(path)
    assert res["path"] == "network"
    row, = [r for r in res["layers"] if r["kind"] == "upsample"]
    assert row["kernel_cycles"] >= 16 * 16 + netperf.MOVE_DEPTH


@pytest.mark.csim
def test_unet_in_one_start_of_the_board_sized_sparse_kernel(tmp_path):
    """unet_upsample on the board-sized sparse_cluster kernel (net_shape: board, sub-banked
    activations): the Move and Concat loops write every bank copy; one start, the layer path's bits."""
    from hlsnn.network.build import compile_model
    name = "unet_upsample_ts17"
    cfg = tmp_path / "u.yaml"
    cfg.write_text(_config(tmp_path, name).read_text().split("formats:")[0]
                   + "formats:\n  sized: {type: fixed, accel: sparse8net_pynq-z2}\nassignments:\n"
                   "  sized: {default: sized}\n")
    out = tmp_path / "u.hlsnn"
    compile_model(cfg, "sized", out)
    x = _data(name).x_test[:8]
    board = hlsnn.load(out, "csim", network=True)
    assert board._kernel.tables.get("sized") is not None
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
