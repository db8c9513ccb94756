"""A SiLU's product read by a skip Concat on the network path (issue 52: d_unet_silu, rule 10k of
:mod:`hlsnn.engines.network.joins.gatecat` and the gate loop's shortcut write of
:mod:`hlsnn.engines.network.joins.gatesc`). Before: two-hot and fixed8 refused "a Upsample of a gate's
product ... read by engine layers at one radix point only (rule 10m)" (the upsample's reader is
the concat), and every kernel refused "(gate) makes a shortcut" (bfp8 too).

A small net written with ``onnx.helper``: conv, SiLU (``Sigmoid``, ``Mul``) -> ``a``; ``MaxPool``
of ``a``, conv, SiLU, nearest ``Resize`` x2 -> ``u``; ``Concat([a, u])``, conv, Relu, a dense
layer. References: the layer path's float64 concat rounded by numpy at the reading conv's radix
(the deployment's rounding, saturated); the layer-by-layer emulator for the bits of the network
mode and of the C-simulated kernels (the strict library on the quick case)."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.network.joins import gatesc  # noqa: E402
from hlsnn.engines.network.program import Op  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, PerFormat, compiled_per_format, f32_init,  # noqa: E402
                         round_array, save_net, weight_drawer)

#: the quick suite's formats: fixed8 repeats two-hot's integer rules (slow stage)
FORMATS = ("twohot", pytest.param("fixed8", marks=pytest.mark.slow), "bfp8")


def _silu(x, out):
    from onnx import helper
    return [helper.make_node("Sigmoid", [x], [out + "_s"]), helper.make_node("Mul", [x, out + "_s"], [out])]


def _net(path):
    from onnx import helper
    inits, w = weight_drawer(64)
    nodes = ([helper.make_node("Conv", ["x", w("c1_w", (4, 1, 3, 3), 0.8), w("c1_b", 4, 0.1)], ["c1"],
                               pads=[1, 1, 1, 1])] + _silu("c1", "a")
             + [helper.make_node("MaxPool", ["a"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                helper.make_node("Conv", ["p", w("c2_w", (8, 4, 3, 3), 0.4), w("c2_b", 8, 0.1)], ["c2"],
                                 pads=[1, 1, 1, 1])] + _silu("c2", "b")
             + [helper.make_node("Resize", ["b", "", "scales"], ["u"], mode="nearest"),
                helper.make_node("Concat", ["a", "u"], ["cat"], axis=1),
                helper.make_node("Conv", ["cat", w("c3_w", (4, 12, 3, 3), 0.3), w("c3_b", 4, 0.1)], ["c3"],
                                 pads=[1, 1, 1, 1]),
                helper.make_node("Relu", ["c3"], ["r3"]),
                helper.make_node("Flatten", ["r3"], ["f"]),
                helper.make_node("Gemm", ["f", w("d_w", (256, 10), 0.1)], ["y"])])
    inits.append(f32_init("scales", [1, 1, 2, 2]))
    return save_net(path, nodes, inits, "gatecat", ("N", 1, 8, 8))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    return PerFormat(compiled_per_format(tmp_path_factory, "gatecat", lambda path, fmt: _net(path),
                                          calibration_samples=32))


def _x(n=48):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_silu_unet_runs_in_the_emu_network_mode_with_the_layer_paths_bits(net, fmt):
    check_emu_network_run(net[fmt], fmt, _x(96))


@pytest.mark.parametrize("fmt", ["twohot", pytest.param("fixed8", marks=pytest.mark.slow)])
def test_the_concat_is_the_layer_paths_float_concat_rounded_once_at_the_convs_radix(net, fmt):
    """Rule 10k: the network mode's concat of the two SiLU products (one through the upsample)
    is the layer path's float64 concat rounded (the deployment's rounding) at the reading conv's
    ``F_x`` and saturated to 8 bits, computed by numpy."""
    x = _x()
    _, env = hlsnn.load(net[fmt], "emu", network=False).run(x, keep=True)
    prog, arrays = artifact.read(str(net[fmt]))
    lowered = netmode.lower(prog, arrays)
    cat, = [op for op in lowered.ops if op.kind == "concat"]
    # c1's SiLU is read at c2's radix (through the MaxPool) and at c3's (through the concat): two
    # gate ops when those differ (as here: 5 and 4), the second right after the first
    kinds = [op.kind for op in lowered.ops]
    assert kinds[:5] == ["conv", "lut", "gate", "gate", "maxpool"] and kinds.count("gate") == 3
    assert lowered.ops[3].out == "a_cat" and cat.ins[0] == "a_cat"
    (c3,) = [j for j in prog["layers"] if j["name"] == "c3"]
    _, ints = netmode.run_ints(lowered, netmode.quantize_input(lowered, x), keep=True)
    want = np.clip(round_array(np.ldexp(env["cat"], c3["f_x"]), prog["rounding"]), -128, 127)
    assert want.shape == (len(x), 12, 8, 8) and (want != 0).mean() > 0.3
    np.testing.assert_array_equal(ints[cat.out].reshape(want.shape), want)


def test_a_gate_writes_the_shortcut_buffer_only_over_its_own_shortcut_map():
    """gatesc.writes: a product of two maps, or a map whose map waits in sc, may write its output
    there (over the word it reads); a gate whose C-vector waits in sc may not (later pixels read
    those words)."""
    name = lambda t: t        # noqa: E731
    assert gatesc.writes(Op("gate", "g", ["m", "v"], "y", dict(same=True, short="v")), name)
    assert gatesc.writes(Op("gate", "g", ["m", "v"], "y", dict(same=False, short="m")), name)
    assert not gatesc.writes(Op("gate", "g", ["m", "v"], "y", dict(same=False, short="v")), name)
    assert not gatesc.writes(Op("conv", "c", ["m"], "y", dict(short=None)), name)


@pytest.mark.csim
@pytest.mark.strict_csim
def test_the_two_hot_kernel_runs_it_in_one_start_on_the_strict_library(net):
    """The C-simulation on the strict library: the layer path's bits in one start, the loops'
    iterations the perf model's, every bank within its ports (the gate loop reads and writes sc)."""
    k = check_kernel_run(net["twohot"], "twohot", _x(4))
    assert k._kernel.strict
    assert k._kernel.tables["place"]["a_cat"] == (None, True)      # the gate loop writes sc alone


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["fixed8", "bfp8"])
def test_the_other_kernels_run_it_in_one_start_on_csim_and_the_simulated_board(net, fmt):
    check_kernel_run(net[fmt], fmt, _x(6), board=True)
