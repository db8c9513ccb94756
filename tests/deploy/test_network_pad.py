"""A reflect or edge ``Pad`` between engine layers in the network mode (issue 52: a U-Net's
``padding_mode='reflect'`` / ``'replicate'`` convs, which the importer keeps as a host ``Pad``
before a conv without padding): netmove rule edge_pad (:mod:`hlsnn.engines.network.move`), an index
mapping of the codes, and the Move loop's mirror mode in each engine's network kernel.

References: onnxruntime's ``Pad`` for the index mapping of each mode; the layer-by-layer compiled
network on the emulator (float64 host ops) for every network-mode run."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from netfixtures import (FORMATS, check_emu_network_run, check_kernel_run, check_refused_runs_layer_by_layer,  # noqa: E402
                         compile_each, compiled_once, f32_init, save_net)


def _pad_node(inp, out, pads, mode, name):
    """A Pad node of opset 17 (pads an input) and its pads initializer."""
    return (helper.make_node("Pad", [inp, name], [out], mode=mode),
            numpy_helper.from_array(np.asarray(pads, np.int64), name))


def ort_pad(x, pads, mode):
    """onnxruntime's ``Pad`` of ``x`` (float32) in ``mode``."""
    ort = pytest.importorskip("onnxruntime")
    node, init = _pad_node("x", "y", pads, mode, "pads")
    g = helper.make_graph([node], "pad", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [init])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})[0]


@pytest.mark.parametrize("mode", ["reflect", "edge"])
@pytest.mark.parametrize("shape,pads", [
    ((3, 5, 6), [0, 0, 1, 1, 0, 0, 1, 1]),
    ((3, 5, 6), [0, 0, 2, 0, 0, 0, 0, 3]),
    ((2, 4, 7), [0, 0, 3, 1, 0, 0, 1, 5]),
    ((2, 2, 2), [0, 0, 1, 1, 0, 0, 1, 1]),
    ((4, 9), [0, 0, 2, 0, 0, 3]),                       # a 1-D (C, L) tensor: its length is the height
])
def test_the_pad_rule_is_onnx_pad_of_the_codes(mode, shape, pads):
    """Rule edge_pad on integer codes (two images) is onnxruntime's Pad of them, exactly."""
    from types import SimpleNamespace
    from hlsnn.engines.network import move
    q = np.random.default_rng(14).integers(-128, 128, (2,) + shape)
    j = dict(name="p", op="Pad", attrs=dict(pads=pads, mode=mode))
    f = move.pad_fields(j, shape, lambda j, what: InputError(what))
    op = SimpleNamespace(kind="pad", ins=["q"], f=f)
    got = move.run(op, lambda t: q, 2)
    want = ort_pad(q.astype(np.float32), pads, mode)
    assert got.shape == (2, f["c"], f["oh"], f["ow"])
    np.testing.assert_array_equal(got.reshape(want.shape), want.astype(np.int64))


def test_the_pad_rule_refuses_what_it_does_not_move():
    from hlsnn.engines.network import move

    def why(j, what):
        return InputError(what)
    fields = lambda pads, mode, shape=(3, 4, 4): move.pad_fields(                    # noqa: E731
        dict(name="p", op="Pad", attrs=dict(pads=pads, mode=mode)), shape, why)
    with pytest.raises(InputError, match="pads below the axis length"):
        fields([0, 0, 0, 4, 0, 0, 0, 0], "reflect")                 # a second reflection (numpy's, not torch's)
    with pytest.raises(InputError, match="none of the batch or the channels"):
        fields([0, 1, 0, 0, 0, 1, 0, 0], "edge")
    with pytest.raises(InputError, match="constant Pad"):
        fields([0, 0, 1, 1, 0, 0, 1, 1], "constant")
    assert fields([0, 0, 5, 0, 0, 0, 0, 7], "edge")["pads"] == (5, 0, 0, 7)      # edge: any pad


def pad_model(path, seed=14):
    """x (N, 1, 8, 8): Conv 3x3 1 -> 6 (zero pad 1) + Relu; Pad reflect (top 1, left 2, bottom 2,
    right 1) to 11 x 11; Conv 3x3 6 -> 8 + Relu (9 x 9); Pad edge (top 2, left 0, bottom 1,
    right 3) to 12 x 12; Conv 3x3 stride 3 8 -> 6 + Relu (4 x 4); GlobalAveragePool; MatMul
    to 10."""
    r = np.random.default_rng(seed)
    p1, i1 = _pad_node("r1", "p1", [0, 0, 1, 2, 0, 0, 2, 1], "reflect", "pads1")
    p2, i2 = _pad_node("r2", "p2", [0, 0, 2, 0, 0, 0, 1, 3], "edge", "pads2")
    inits = [f32_init("w1", r.normal(0, 0.6, (6, 1, 3, 3))), f32_init("b1", r.normal(0, 0.1, 6)),
             f32_init("w2", r.normal(0, 0.3, (8, 6, 3, 3))), f32_init("b2", r.normal(0, 0.1, 8)),
             f32_init("w3", r.normal(0, 0.3, (6, 8, 3, 3))), f32_init("b3", r.normal(0, 0.1, 6)),
             f32_init("wd", r.normal(0, 0.5, (6, 10))), i1, i2]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]), p1,
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"]), helper.make_node("Relu", ["c2"], ["r2"]), p2,
             helper.make_node("Conv", ["p2", "w3", "b3"], ["c3"], strides=[3, 3]),
             helper.make_node("Relu", ["c3"], ["r3"]), helper.make_node("GlobalAveragePool", ["r3"], ["g"]),
             helper.make_node("Flatten", ["g"], ["f"]), helper.make_node("MatMul", ["f", "wd"], ["y"])]
    return save_net(path, nodes, inits, "padnet", ["N", 1, 8, 8])


@pytest.fixture(scope="module")
def padnet(tmp_path_factory):
    """fmt -> the compiled :func:`pad_model`, compiled once for the module."""
    return compiled_once(tmp_path_factory, "padnet", pad_model, check_samples=2, calibration_samples=16)


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_reflect_and_edge_pads_run_in_the_emu_network_mode(padnet, fmt):
    def lowered(net):
        pads = [op for op in net.network.ops if op.kind == "pad"]
        assert [(op.f["mode"], op.f["pads"], op.f["oh"], op.f["ow"]) for op in pads] == [
            ("reflect", (1, 2, 2, 1), 11, 11), ("edge", (2, 0, 1, 3), 12, 12)]
        assert not any(j["op"] == "Pad" for j in net.network.host_after)
    check_emu_network_run(padnet[fmt], fmt, _x(64), lowered)


@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_reflect_and_edge_pads_in_one_start_on_csim_and_the_board(padnet, fmt):
    """The Move loop's mirror mode (reflect) and its clamp (edge) with unequal pads on each side:
    one start per batch on csim and the simulated board, the layer path's bits, every loop's
    iterations the perf model's (the Move loop's: one output pixel a cycle)."""
    run = check_kernel_run(padnet[fmt], fmt, _x(6), board=True)
    assert run._kernel.counters["NetMove"][0] > 0


def test_a_reflect_pad_the_kernel_cannot_move_runs_layer_by_layer(tmp_path):
    """A reflect pad as wide as its map (numpy's second reflection; torch refuses it) is refused by
    name in the network mode; the layer path runs it."""
    m = onnx.load(str(pad_model(tmp_path / "wide.onnx")))
    for t in m.graph.initializer:
        if t.name == "pads1":
            t.CopyFrom(numpy_helper.from_array(np.asarray([0, 0, 0, 8, 0, 0, 0, 0], np.int64), "pads1"))
    onnx.save(m, str(tmp_path / "wide.onnx"))
    path = compile_each(tmp_path, "wide", tmp_path / "wide.onnx", ["twohot"], check_samples=2,
                        calibration_samples=16)["twohot"]
    check_refused_runs_layer_by_layer(path, InputError, r"Pad.*pads below the axis length", _x(8))


def pad1d_model(path, seed=41):
    """x (N, 8, 8) as (N, C, L): Conv1d 8 -> 6 (k 3, zero pad 1) + Relu; Pad reflect (2 before, 1
    after) to 11; Conv1d 6 -> 6 (k 3) + Relu (9); Pad edge (0 before, 2 after) to 11; Conv1d 6 ->
    4 (k 3, stride 2) + Relu (5); Flatten; MatMul 20 -> 10."""
    r = np.random.default_rng(seed)
    p1, i1 = _pad_node("r1", "p1", [0, 0, 2, 0, 0, 1], "reflect", "pads1")
    p2, i2 = _pad_node("r2", "p2", [0, 0, 0, 0, 0, 2], "edge", "pads2")
    inits = [f32_init("w1", r.normal(0, 0.3, (6, 8, 3))), f32_init("b1", r.normal(0, 0.1, 6)),
             f32_init("w2", r.normal(0, 0.4, (6, 6, 3))), f32_init("b2", r.normal(0, 0.1, 6)),
             f32_init("w3", r.normal(0, 0.4, (4, 6, 3))), f32_init("b3", r.normal(0, 0.1, 4)),
             f32_init("wd", r.normal(0, 0.4, (20, 10))), i1, i2]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]), p1,
             helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"]), helper.make_node("Relu", ["c2"], ["r2"]), p2,
             helper.make_node("Conv", ["p2", "w3", "b3"], ["c3"], strides=[2]),
             helper.make_node("Relu", ["c3"], ["r3"]), helper.make_node("Flatten", ["r3"], ["f"]),
             helper.make_node("MatMul", ["f", "wd"], ["y"])]
    return save_net(path, nodes, inits, "pad1d", ["N", 8, 8])


@pytest.fixture(scope="module")
def pad1d(tmp_path_factory):
    """fmt -> the compiled :func:`pad1d_model`, compiled once for the module."""
    return compiled_once(tmp_path_factory, "pad1d", pad1d_model, layout="ncl", check_samples=2,
                         calibration_samples=16)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_pads_of_a_1d_map_run_in_the_emu_network_mode(pad1d, fmt):
    """A (C, L) tensor's pads are the height's of its C x L x 1 map."""
    def lowered(net):
        assert [(op.f["pads"], op.f["oh"], op.f["ow"]) for op in net.network.ops if op.kind == "pad"] == [
            ((2, 0, 1, 0), 11, 1), ((0, 0, 2, 0), 11, 1)]
    check_emu_network_run(pad1d[fmt], fmt, datasets.load("digits", layout="ncl").x_test[:64], lowered)


@pytest.mark.slow   # the quick csim cases of the same loop: ..._in_one_start_on_csim_and_the_board[*]
@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_pads_of_a_1d_map_in_one_start_on_csim_and_the_board(pad1d, fmt):
    """The mirror walk down the rows of a one-column map (the column counter never moves)."""
    run = check_kernel_run(pad1d[fmt], fmt, datasets.load("digits", layout="ncl").x_test[:6], board=True)
    assert run._kernel.counters["NetMove"][0] > 0


@pytest.mark.slow   # the quick csim case of the same op: ..._in_one_start_on_csim_and_the_board[fixed8]
@pytest.mark.csim
def test_reflect_and_edge_pads_in_one_start_of_the_board_sized_sparse_kernel(tmp_path):
    """The board-sized sparse_cluster kernel (``net_shape: board``, sub-banked activations): one
    start, the layer path's bits."""
    path = compile_each(tmp_path, "padnet_sized", pad_model(tmp_path / "padnet.onnx"), ["sized"],
                        formats={"sized": "{type: fixed, accel: sparse8net_pynq-z2}"}, check_samples=2,
                        calibration_samples=16)["sized"]
    x = _x(6)
    with hlsnn.load(path, "csim", network=True) as run:
        np.testing.assert_array_equal(run(x), hlsnn.load(path, "emu", network=False)(x))
        assert run.last_kernel_starts == 1
        assert run._kernel.tables.get("sized") is not None
