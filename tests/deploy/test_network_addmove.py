"""A move or a linear resize of a pending residual Add on the network path (issue 52, rules 6a
and 12a of :mod:`hlsnn.engines.network.joins.addmove`): k_unet_freq's ``nn.Upsample(scale_factor=(2,
1))`` of ``relu(up(c) + b)`` and k_ae_lin's ``F.interpolate(relu(d2(..) + a), mode='linear')``
ran layer by layer ("a data move of integer tensors computed on the fabric (not of a pending Add
or pool)").

Small nets written with ``onnx.helper``: (U) conv, conv, ``Add`` of the two, ``Relu``, a nearest
``Resize`` by (2, 1), a 1x1 conv, a dense layer; (L) the same in 1-D with a ``linear``
``half_pixel`` ``Resize`` by 2. References: the layer path's float64 ``Relu(Add)`` moved by
``np.repeat`` (U) or resized by onnx's reference ``Resize`` (L, BFP), then rounded by numpy
(the deployment's rounding at the consumer's radix, saturated); the layer-by-layer emulator for the bits of
the network mode and of the C-simulated kernel."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, PerFormat,  # noqa: E402
                         compiled_per_format, round_array, save_net, weight_drawer)

def _up_net(path):
    """(U): x (1, 8, 8) -> conv 3x3 (4) Relu -> r1; conv 3x3 (4) of r1 -> c2 (small weights: a finer
    radix than the sum's consumer, so the requantization rounds); Relu(c2 + r1) -> s;
    nearest Resize (1, 1, 2, 1) -> (4, 16, 8); conv 1x1 (4) Relu; Flatten; Gemm (10)."""
    from onnx import helper
    inits, w = weight_drawer(61)
    nodes = [helper.make_node("Conv", ["x", w("c1_w", (4, 1, 3, 3), 0.6), w("c1_b", 4, 0.1)], ["c1"],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", w("c2_w", (4, 4, 3, 3), 0.03), w("c2_b", 4, 0.01)], ["c2"],
                              pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("Relu", ["a"], ["s"]),
             helper.make_node("Resize", ["s", "", w("scales", 4, 0.0)], ["u"], mode="nearest"),
             helper.make_node("Conv", ["u", w("c3_w", (4, 4, 1, 1), 0.5), w("c3_b", 4, 0.1)], ["c3"]),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("Flatten", ["r3"], ["f"]),
             helper.make_node("Gemm", ["f", w("d_w", (512, 10), 0.1)], ["y"])]
    from netfixtures import f32_init
    inits[[i.name for i in inits].index("scales")] = f32_init("scales", [1, 1, 2, 1])
    return save_net(path, nodes, inits, "addmove_up", ("N", 1, 8, 8))


def _lin_net(path):
    """(L): x (8, 8) as (C, L) -> conv1d k3 (8) Relu -> r1; conv1d k3 (8) -> c2; Relu(c2 + r1) -> s;
    linear half_pixel Resize (1, 1, 2) -> (8, 16); conv1d k3 (4) Relu; Flatten; Gemm (10)."""
    from onnx import helper
    from netfixtures import f32_init
    inits, w = weight_drawer(62)
    nodes = [helper.make_node("Conv", ["x", w("c1_w", (8, 8, 3), 0.4), w("c1_b", 8, 0.1)], ["c1"], pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", w("c2_w", (8, 8, 3), 0.3), w("c2_b", 8, 0.1)], ["c2"], pads=[1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("Relu", ["a"], ["s"]),
             helper.make_node("Resize", ["s", "", "scales"], ["u"], mode="linear",
                              coordinate_transformation_mode="half_pixel"),
             helper.make_node("Conv", ["u", w("c3_w", (4, 8, 3), 0.4), w("c3_b", 4, 0.1)], ["c3"], pads=[1, 1]),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("Flatten", ["r3"], ["f"]),
             helper.make_node("Gemm", ["f", w("d_w", (64, 10), 0.2)], ["y"])]
    inits.append(f32_init("scales", [1, 1, 2]))
    return save_net(path, nodes, inits, "addmove_lin", ("N", 8, 8))


@pytest.fixture(scope="module")
def up(tmp_path_factory):
    return PerFormat(compiled_per_format(tmp_path_factory, "addmove_up", lambda path, fmt: _up_net(path),
                                          calibration_samples=32))


@pytest.fixture(scope="module")
def lin(tmp_path_factory):
    return PerFormat(compiled_per_format(tmp_path_factory, "addmove_lin", lambda path, fmt: _lin_net(path),
                                          layout="ncl", calibration_samples=32))


#: the formats of the quick suite: the other one repeats the same integer rule (slow stage)
QUICK = ["twohot", pytest.param("fixed8", marks=pytest.mark.slow), "bfp8"]


def _x(layout, n=48):
    from hlsnn.deploy.datasets import load
    return load("digits", layout=layout).x_test[:n]


def _sum(path, x):
    """The layer path's float64 ``Relu(Add)`` (tensor ``s``) on ``x``, and the lowered network."""
    _, env = hlsnn.load(path, "emu", network=False).run(x, keep=True)
    return env["s"], netmode.lower(*artifact.read(str(path)))


@pytest.mark.parametrize("fmt", QUICK)
def test_the_upsample_of_a_pending_add_is_the_layer_paths_sum_moved_and_rounded_once(up, fmt):
    """Rule 6a: the network mode's upsampled tensor is numpy's ``np.repeat`` (by 2 along H) of the
    layer path's float64 ``Relu(Add)``, rounded (the deployment's rounding) at the 1x1 conv's radix and
    saturated to 8 bits (integers), or the same values (BFP pairs, exact)."""
    x = _x("nchw")
    s, net = _sum(up[fmt], x)
    assert [op.kind for op in net.ops] == ["conv", "conv", "add", "upsample", "conv", "conv"]
    mv, = [op for op in net.ops if op.kind == "upsample"]
    _, ints = netmode.run_ints(net, netmode.quantize_input(net, x), keep=True)
    want = np.repeat(s, 2, axis=2)
    assert want.shape == (len(x), 4, 16, 8) and np.abs(s).max() > 0
    if fmt == "bfp8":
        got = netmode.dequantize(net, ints[mv.out])
        np.testing.assert_array_equal(got.reshape(want.shape), want)
        return
    prog = artifact.read(str(up[fmt]))[0]
    (conv3,) = [j for j in prog["layers"] if j["inputs"] == ["u"]]
    f_x = conv3["f_x"]
    add, = [op for op in net.ops if op.kind == "add"]
    assert net.shapes[mv.out] == (4, 16, 8) and add.f["shift"] > 0         # the requantization rounds
    ref = np.clip(round_array(np.ldexp(want, f_x), prog["rounding"]), -128, 127)
    np.testing.assert_array_equal(ints[mv.out].reshape(want.shape), ref)


@pytest.mark.parametrize("fmt", QUICK)
def test_the_upsample_net_runs_in_the_emu_network_mode_with_the_layer_paths_bits(up, fmt):
    check_emu_network_run(up[fmt], fmt, _x("nchw", 96))


def test_the_linear_resize_of_a_pending_add_on_bfp_pairs_is_onnxs_resize_of_the_sum(lin):
    """Rule 12a: bfp's resized pairs are onnx's reference ``Resize`` (linear, half_pixel, float64)
    of the layer path's float64 ``Relu(Add)``, exactly; the network mode gives the layer path's bits."""
    from onnx import helper, TensorProto
    from onnx.reference import ReferenceEvaluator
    x = _x("ncl")
    s, net = _sum(lin["bfp8"], x)
    assert [op.kind for op in net.ops] == ["conv", "conv", "add", "upsample", "avgpool", "conv", "conv"]
    pool, = [op for op in net.ops if op.kind == "avgpool"]
    _, ints = netmode.run_ints(net, netmode.quantize_input(net, x), keep=True)
    got = netmode.dequantize(net, ints[pool.out])
    g = helper.make_graph([helper.make_node("Resize", ["s", "", "k"], ["u"], mode="linear",
                                            coordinate_transformation_mode="half_pixel")], "r",
                          [helper.make_tensor_value_info("s", TensorProto.DOUBLE, None)],
                          [helper.make_tensor_value_info("u", TensorProto.DOUBLE, None)],
                          [helper.make_tensor("k", TensorProto.FLOAT, [3], [1, 1, 2])])
    want, = ReferenceEvaluator(helper.make_model(g)).run(None, {"s": s})
    assert want.shape == (len(x), 8, 16)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    check_emu_network_run(lin["bfp8"], "bfp8", _x("ncl", 96))


@pytest.mark.csim
@pytest.mark.parametrize("net, fmt", [("up", "twohot"), ("lin", "bfp8"),
                                      pytest.param("up", "fixed8", marks=pytest.mark.slow),
                                      pytest.param("up", "bfp8", marks=pytest.mark.slow)])
def test_one_kernel_start_on_csim(up, lin, net, fmt):
    """The network kernel's C-simulation: the layer path's bits in one start, each loop's
    iterations the perf model's (the Add loop, then the Move loop; bfp8's resize: the Move loop's
    edge upsample and the pool loop's window sum of the Add's pairs)."""
    paths, layout = (up, "nchw") if net == "up" else (lin, "ncl")
    check_kernel_run(paths[fmt], fmt, _x(layout, 6))


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("net, fmt", [("up", "twohot"), ("lin", "bfp8")])
def test_one_kernel_start_on_the_simulated_board(up, lin, net, fmt):
    paths, layout = (up, "nchw") if net == "up" else (lin, "ncl")
    check_kernel_run(paths[fmt], fmt, _x(layout, 6), board=True)
