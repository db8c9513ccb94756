"""A ghost module read by its SE block on the network path (issue 52: s_ghost of
``torch_families/variant_seventh.py``, rule mixed_concat of :mod:`hlsnn.engines.network.joins.catmix`; the bfp kernel's
gate of a concat, :mod:`hlsnn.engines.bfp_systolic.network.gatesrc`). Before: two-hot and fixed8
refused "GlobalAveragePool: no integer rule for this host op here" (a global pool of a concat
whose parts sit at two radix points), and the bfp kernel "a gate of cat; the kernel multiplies
conv or table outputs".

A small net written with ``onnx.helper``: conv + Relu -> ``a`` (4 channels), a depthwise conv of
``a`` + Relu -> ``b`` (weights 8x larger: a coarser radix), ``Concat([a, b])``;
``GlobalAveragePool``, conv 1x1 + Relu, conv 1x1, ``HardSigmoid`` -> the gate; ``Mul(cat, gate)``,
conv, Relu, a dense layer. References: the layer path's float64 pool and product rounded by
numpy at the reading conv's radix (the deployment's rounding, saturated); the layer-by-layer
emulator for the bits of the network mode and of the C-simulated kernels (the strict library on
the quick case)."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, PerFormat, compiled_per_format,  # noqa: E402
                         round_array, save_net, weight_drawer)


def _net(path):
    from onnx import helper
    inits, w = weight_drawer(9)
    nodes = [helper.make_node("Conv", ["x", w("c1_w", (4, 1, 3, 3), 0.8), w("c1_b", 4, 0.1)], ["c1"],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["a"]),
             helper.make_node("Conv", ["a", w("dw_w", (4, 1, 3, 3), 2.0), w("dw_b", 4, 0.1)], ["dw"],
                              pads=[1, 1, 1, 1], group=4),
             helper.make_node("Relu", ["dw"], ["b"]),
             helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
             helper.make_node("GlobalAveragePool", ["cat"], ["gap"]),
             helper.make_node("Conv", ["gap", w("r_w", (4, 8, 1, 1), 0.5), w("r_b", 4, 0.1)], ["r"]),
             helper.make_node("Relu", ["r"], ["rr"]),
             helper.make_node("Conv", ["rr", w("e_w", (8, 4, 1, 1), 0.8), w("e_b", 8, 0.5)], ["e"]),
             helper.make_node("HardSigmoid", ["e"], ["g"], alpha=1 / 6, beta=0.5),
             helper.make_node("Mul", ["cat", "g"], ["m"]),
             helper.make_node("Conv", ["m", w("c3_w", (4, 8, 3, 3), 0.3), w("c3_b", 4, 0.1)], ["c3"],
                              pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("Flatten", ["r3"], ["f"]),
             helper.make_node("Gemm", ["f", w("d_w", (64, 10), 0.2)], ["y"])]
    return save_net(path, nodes, inits, "catmix", ("N", 1, 8, 8))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    return PerFormat(compiled_per_format(tmp_path_factory, "catmix", lambda path, fmt: _net(path),
                                          calibration_samples=32))


def _x(n=48):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="nchw").x_test[:n]


def _split_ops(net):
    return [op for op in net.network.ops if "split" in op.f]


@pytest.mark.parametrize("fmt", ["twohot", pytest.param("fixed8", marks=pytest.mark.slow)])
def test_the_ghost_module_runs_in_the_emu_network_mode_with_the_layer_paths_bits(net, fmt):
    """The pool and the gate of the concat read its mixed map (two radix points: the rule is the
    one exercised) and give the layer path's bits."""
    def lowered(run):
        kinds = sorted(op.kind for op in _split_ops(run))
        assert kinds == ["add", "gate"], kinds
        mix, = [op for op in run.network.ops if op.out == "cat_mix"]
        assert mix.kind == "concat" and mix.f["shifts"] == [0, 0]
    check_emu_network_run(net[fmt], fmt, _x(96), lowered)


@pytest.mark.parametrize("fmt", ["twohot", pytest.param("fixed8", marks=pytest.mark.slow)])
def test_the_pool_and_the_gate_are_the_layer_paths_float_values_rounded_once(net, fmt):
    """Rule mixed_concat: the global pool of the mixed map and its gate's product are the layer path's float64
    mean and product rounded (the deployment's rounding) at the reading conv's ``F_x`` and
    saturated to 8 bits, computed by numpy."""
    x = _x()
    _, env = hlsnn.load(net[fmt], "emu", network=False).run(x, keep=True)
    prog, arrays = artifact.read(str(net[fmt]))
    lowered = netmode.lower(prog, arrays)
    _, ints = netmode.run_ints(lowered, netmode.quantize_input(lowered, x), keep=True)
    layer = {j["name"]: j for j in prog["layers"]}
    pool, = [op for op in lowered.ops if op.kind == "add" and "split" in op.f]
    gate, = [op for op in lowered.ops if op.kind == "gate" and "split" in op.f]
    assert pool.f["sa"] != pool.f["sb"] and gate.f["shift"] != gate.f["shift2"]     # two radix points
    for op, t, reader in ((pool, "gap", "r"), (gate, "m", "c3")):
        want = np.clip(round_array(np.ldexp(env[t], layer[reader]["f_x"]), prog["rounding"]), -128, 127)
        assert (want != 0).mean() > 0.3
        np.testing.assert_array_equal(ints[op.out].reshape(want.shape), want)
    from hlsnn.deploy.run import fast as netfast          # the compiled emu path runs these ops by their numpy rules
    fast = netfast.build(lowered)
    if fast is not None:
        np.testing.assert_array_equal(fast.run(netmode.quantize_input(lowered, x))[0], ints[lowered.output["tensor"]]
                                      .reshape((len(x),) + tuple(lowered.output["shape"])))


def test_a_split_on_other_ops_is_refused_by_name():
    """The last check before C: a split only on a global pool of one tensor or a channel gate."""
    from hlsnn.deploy.lower.netcheck import check_ops
    from hlsnn.engines.network.program import NetProgram, Op
    bad = Op("add", "s", ["a", "b"], "y", dict(c=8, hw=4, sa=0, sb=1, relu=False, gap=False, shift=0,
                                                rounding="nearest_even", single=False, split=4))
    prog = NetProgram("t", [bad], {}, {}, {}, [], {}, "acc", {}, "shift_mac")
    with pytest.raises(InputError, match="op s .*split of the channels"):
        check_ops(prog)


@pytest.mark.csim
@pytest.mark.strict_csim
def test_the_two_hot_kernel_runs_it_in_one_start_on_the_strict_library(net):
    """The C-simulation on the strict library: the layer path's bits in one start (the Add and Gate
    loops' shift of each channel's range), the loops' iterations the perf model's."""
    k = check_kernel_run(net["twohot"], "twohot", _x(4))
    assert k._kernel.strict and len(_split_ops(k)) == 2


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fixed8", "bfp8"])
def test_the_other_kernels_run_it_in_one_start_on_csim_and_the_simulated_board(net, fmt):
    check_kernel_run(net[fmt], fmt, _x(6), board=True)


@pytest.mark.csim
@pytest.mark.slow
def test_the_board_sized_sparse_kernel_pools_the_mixed_map_two_pixels_a_cycle(tmp_path):
    """The board-sized sparse_cluster kernel (net_shape: board) runs the Add loop two pixels a cycle
    (AddPairs), each bank with its channel's pre-shift: one start, the layer path's bits."""
    from hlsnn.network.build import compile_model
    model = _net(tmp_path / "catmix.onnx")
    cfg = tmp_path / "sized.yaml"
    cfg.write_text(f"name: catmix_sized\nmodel: {model}\ndata: digits\nlayout: nchw\nformats:\n"
                   "  sized: {type: fixed, accel: sparse8net_pynq-z2}\nassignments:\n  sized: {default: sized}\n")
    out = tmp_path / "sized.hlsnn"
    compile_model(cfg, "sized", out, calibration_samples=32, check_samples=2)
    x = _x(8)
    board = hlsnn.load(out, "csim", network=True)
    assert board._kernel.tables.get("sized") is not None and board._kernel.tables["fast_add"]
    assert sorted(op.kind for op in _split_ops(board)) == ["add", "gate"]
    np.testing.assert_array_equal(board(x), hlsnn.load(out, "emu", network=False)(x))
    assert board.last_kernel_starts == 1
