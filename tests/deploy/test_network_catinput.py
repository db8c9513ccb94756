"""A skip from the graph input and a pool over a one-row map in the network mode (issue 52: the
1-D autoencoders' ``torch.cat([decoded, x])`` and the TC-ResNet written with 2-D convs,
``x.permute(0, 2, 1).unsqueeze(2)`` then ``F.avg_pool2d(h, h.shape[2:])``), in one small net per
engine: netmove rule 8i (:mod:`hlsnn.engines.network.joins.catinput`), linpool rule 11g (a window over
the whole map of a pending Add is its global pool) and a conv reading an ``Unsqueeze``'s ``C x 1
x W`` view of its input.

Reference: the layer-by-layer compiled network on the emulator (float64 host ops, each engine
layer quantizing its float input), the specification of every network-mode test."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from netfixtures import (FORMATS, check_emu_network_run, check_kernel_run, check_refused_runs_layer_by_layer,  # noqa: E402
                         compile_each, compiled_once, f32_init, save_net)


def catpool_model(path, skip_scale=0.15, seed=52):
    """x (N, 8, 8) as (N, C, L): a Conv1d 8 -> 4 (k 3, pad 1) + Relu = r; Concat([r, x]) (the skip
    from the input; ``skip_scale`` the conv's weights, so r stays within x's range [0, 1] or goes
    beyond it); Unsqueeze to (N, 12, 1, 8); a (1, 3) Conv2d + Relu = a; a (1, 3) Conv2d of a, + a,
    Relu; AveragePool (1, 8) over the whole 1 x 8 map; a 1x1 Conv2d to 10; Flatten."""
    r = np.random.default_rng(seed)
    inits = [f32_init("w1", r.normal(0, skip_scale, (4, 8, 3))), f32_init("b1", r.normal(0, 0.05, 4)),
             f32_init("w2", r.normal(0, 0.25, (6, 12, 1, 3))), f32_init("b2", r.normal(0, 0.1, 6)),
             f32_init("w3", r.normal(0, 0.25, (6, 6, 1, 3))), f32_init("b3", r.normal(0, 0.1, 6)),
             f32_init("w4", r.normal(0, 0.5, (10, 6, 1, 1))), f32_init("b4", r.normal(0, 0.1, 10)),
             numpy_helper.from_array(np.array([2], np.int64), "ax")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Concat", ["r1", "x"], ["cat"], axis=1),
             helper.make_node("Unsqueeze", ["cat", "ax"], ["u"]),
             helper.make_node("Conv", ["u", "w2", "b2"], ["c2"], pads=[0, 1, 0, 1]),
             helper.make_node("Relu", ["c2"], ["a"]),
             helper.make_node("Conv", ["a", "w3", "b3"], ["c3"], pads=[0, 1, 0, 1]),
             helper.make_node("Add", ["c3", "a"], ["s"]), helper.make_node("Relu", ["s"], ["sr"]),
             helper.make_node("AveragePool", ["sr"], ["p"], kernel_shape=[1, 8], strides=[1, 8]),
             helper.make_node("Conv", ["p", "w4", "b4"], ["c4"]),
             helper.make_node("Flatten", ["c4"], ["y"])]
    return save_net(path, nodes, inits, "catpool", ["N", 8, 8])


@pytest.fixture(scope="module")
def catpool(tmp_path_factory):
    """fmt -> the compiled :func:`catpool_model`, compiled once for the module."""
    return compiled_once(tmp_path_factory, "catpool", catpool_model, layout="ncl", check_samples=2,
                         calibration_samples=16)


def _x(n):
    return datasets.load("digits", layout="ncl").x_test[:n]


def _lowered_as_meant(run, fmt):
    """The program reads the kernel's input in the concat, the convs after the Unsqueeze read the
    1 x 8 map (not an 8 x 1 one), and the pool is an Add's global pool over 8 pixels."""
    net = run.network
    cat, = [op for op in net.ops if op.kind == "concat"]
    assert net.aliases.get(cat.ins[1], cat.ins[1]) == net.input["name"], cat.ins
    convs = [op for op in net.ops if op.kind == "conv"]
    assert [(op.f["h"], op.f["w"]) for op in convs] == [(8, 1), (1, 8), (1, 8), (1, 1)]
    gap, = [op for op in net.ops if op.kind == "add" and op.f["gap"]]
    assert gap.f["relu"] and len(gap.ins) == 2 and gap.f["hw"] == 8
    if fmt != "bfp8":                  # rule 8i: the consumer's calibrated radix is the input's
        second = [j for j in run.program["layers"] if j["kind"] != "host"][1]
        assert second["f_x"] == net.input["f"] == run.program["input"]["quantization"]["frac_bits"]
        assert cat.f["shifts"][1] == 0, cat.f


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_skip_from_the_input_and_the_one_row_pool_run_in_the_emu_network_mode(catpool, fmt):
    check_emu_network_run(catpool[fmt], fmt, _x(64), lambda net: _lowered_as_meant(net, fmt))


@pytest.mark.csim
# two-hot's case slow (the README's 5 minutes): bfp8 and fixed8 run the same Concat and pool loops quick
@pytest.mark.parametrize("fmt", [pytest.param(f, marks=pytest.mark.slow) if f == "twohot" else f for f in FORMATS])
def test_skip_from_the_input_and_the_one_row_pool_in_one_start_on_csim_and_the_board(catpool, fmt):
    """The image load writes the input to the shortcut buffer too (``kInDual``), the Concat loop
    moves it from there; one start per batch on csim and the simulated board, the layer path's
    bits, every loop's iterations the perf model's."""
    run = check_kernel_run(catpool[fmt], fmt, _x(6), board=True)
    assert run._kernel.tables["in_dual"]
    assert run._kernel.counters["NetConcat"][0] > 0


def test_a_skip_from_the_input_at_another_radix_is_refused_by_name(tmp_path):
    """Rule 8i: where the concat's consumer quantizes at a radix other than the input's (the conv's
    part reaches beyond the input's range), requantizing the input's integers would round twice;
    the network mode refuses it by name and the layer path runs it."""
    m = catpool_model(tmp_path / "wide.onnx", skip_scale=1.5)
    path = compile_each(tmp_path, "wide", m, ["twohot"], layout="ncl", check_samples=2,
                        calibration_samples=16)["twohot"]
    check_refused_runs_layer_by_layer(path, InputError, r"Concat of the graph input .* rounds twice", _x(8))


def test_covers_map_is_one_window_over_the_map():
    from hlsnn.engines.network.pools.linpool import covers_map

    def pool(k, **a):
        return dict(op="AveragePool", attrs=dict(kernel_shape=k, **a))
    assert covers_map(pool([1, 8], strides=[1, 8]), (6, 1, 8))
    assert covers_map(pool([8]), (6, 8))                     # a 1-D pool of a C x L tensor
    assert not covers_map(pool([1, 4], strides=[1, 4]), (6, 1, 8))
    assert not covers_map(pool([1, 8], pads=[0, 1, 0, 1]), (6, 1, 8))
    assert not covers_map(dict(op="MaxPool", attrs=dict(kernel_shape=[1, 8])), (6, 1, 8))


@pytest.mark.slow   # the quick csim case of the same ops: ..._in_one_start_on_csim_and_the_board[fixed8]
@pytest.mark.csim
def test_skip_from_the_input_in_one_start_of_the_board_sized_sparse_kernel(tmp_path):
    """The board-sized sparse_cluster kernel (``net_shape: board``, sub-banked activations, the
    Add loop in two instances): one start, the layer path's bits, the loops' iterations its perf
    model's."""
    from hlsnn.engines.sparse_cluster.network import perf as sparseperf
    m = catpool_model(tmp_path / "catpool.onnx")
    path = compile_each(tmp_path, "catpool_sized", m, ["sized"],
                        formats={"sized": "{type: fixed, accel: sparse8net_pynq-z2}"}, layout="ncl", check_samples=2,
                        calibration_samples=16)["sized"]
    x = _x(6)
    with hlsnn.load(path, "csim", network=True) as run:
        np.testing.assert_array_equal(run(x), hlsnn.load(path, "emu", network=False)(x))
        assert run.last_kernel_starts == 1
        k = run._kernel
        assert k.tables.get("sized") is not None and k.tables["in_dual"]
        counted = {}
        for c, (it, _) in k.counters.items():          # the Add's instances: NetAdd.0, NetAdd.1
            counted[c.split(".")[0]] = counted.get(c.split(".")[0], 0) + it
        assert counted == {c: len(x) * v for c, v in sparseperf.iterations(run.network, k.tables).items()}
