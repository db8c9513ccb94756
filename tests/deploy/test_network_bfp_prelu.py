"""A ``PRelu`` with one slope per channel on BFP pairs (issue 52, netbfp rule 9p of
:mod:`hlsnn.engines.bfp_systolic.network.prelu`): bfp8 ran ``nn.PReLU(C)`` layer by layer (h_jet_bnin:
3 starts), two-hot and fixed8 had rule 9ch. The layer path keeps its float64 ``PRelu``; the network
mode writes ``slope_c * x`` rounded to odd, which the next layer's block quantization reads as it
reads the exact product; read by a pool or a gate (h_dw_prelu's squeeze-excite), the exact
product itself in 53-bit elements (rule 9w).

References: numpy's block quantization of the exact float64 products (``frexp`` of a block's
largest value, the mantissas rounded by :func:`netfixtures.round_array`) for the rule; the
layer-by-layer emulator for the bits of the network mode and of the C-simulated kernel."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.engines.bfp_systolic.network import lower, prelu  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, check_refused_runs_layer_by_layer,  # noqa: E402
                         compile_onnx, f32_init, round_array, save_net, weight_drawer)


def _block_quantize(v, m_bits, rounding):
    """Rule 3 on each row of ``v`` (a block): the mantissas ``R(v 2**-xe)`` saturated to
    ``m_bits``-bit signed integers, ``xe = L - m_bits + 2`` from the row's largest ``|v|``."""
    big = np.abs(v).max(axis=1, keepdims=True)
    _, ex = np.frexp(np.where(big > 0, big, 1.0))
    xe = ex - (m_bits - 1)
    lim = (1 << (m_bits - 1)) - 1
    return np.clip(round_array(np.ldexp(v, -xe), rounding), -lim - 1, lim), xe


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
@pytest.mark.parametrize("m_bits", [4, 8, 12])
def test_the_product_rounded_to_odd_quantizes_as_the_exact_product(m_bits, rounding):
    """Rule 9p: blocks of 6 elements, each ``x = m 2**e`` (``|m| < 2**(M-1)``) or its product with
    a float32 slope, quantized by numpy's rule 3: the pairs of rule 9p give the mantissas and
    exponents of the exact float64 products, though most of the pairs' values differ from them."""
    rng = np.random.default_rng(m_bits)
    n, c = 4000, 6
    lim = 1 << (m_bits - 1)
    m = rng.integers(-lim + 1, lim, (n, c))
    e = rng.integers(-12, 4, (n, c))
    slopes = np.float32(rng.normal(0, 0.4, c)).astype(np.float64)
    slopes[0] = 0.25                                  # a power of two: exact products, ties
    sm, se = prelu.slope_pairs(slopes, lambda what: AssertionError(what))
    assert np.array_equal(np.ldexp(sm.astype(np.float64), se), slopes)
    ym, ye = prelu.prelu_pairs(m, e, sm, se, m_bits - 1, (1, c))
    x = np.ldexp(m.astype(np.float64), e)
    exact = np.where(x >= 0, x, x * slopes)           # the layer path's float64 PRelu (exact)
    got = np.ldexp(ym.astype(np.float64), ye)
    assert np.abs(ym).max() < 1 << 24 and (got != exact).mean() > 0.15   # rounded, and in the element
    want_q, want_xe = _block_quantize(exact, m_bits, rounding)
    got_q, got_xe = _block_quantize(got, m_bits, rounding)
    np.testing.assert_array_equal(got_xe, want_xe)
    np.testing.assert_array_equal(got_q, want_q)


def _net(path, relu_after=False):
    """x (64) -> Gemm (16) -> PRelu (16 slopes) [-> Relu] -> Gemm (10)."""
    from onnx import helper
    inits, w = weight_drawer(65)
    inits.append(f32_init("slope", np.linspace(-0.4, 0.7, 16)))
    nodes = [helper.make_node("Gemm", ["x", w("w1", (64, 16), 0.2), w("b1", 16, 0.1)], ["h"]),
             helper.make_node("PRelu", ["h", "slope"], ["p"])]
    if relu_after:
        nodes.append(helper.make_node("Relu", ["p"], ["pr"]))
    nodes.append(helper.make_node("Gemm", ["pr" if relu_after else "p", w("w2", (16, 10), 0.3)], ["y"]))
    return save_net(path, nodes, inits, "bfp_prelu", ("N", 64))


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bfp_prelu")
    return {k: compile_onnx(tmp, f"bfp_prelu{int(k)}", _net(tmp / f"p{int(k)}.onnx", k), "bfp8", layout="flat",
                            check_samples=2, calibration_samples=32) for k in (False, True)}


def _x(n=96):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="flat").x_test[:n]


def test_a_prelu_per_channel_runs_in_the_bfp_network_mode_with_the_layer_paths_bits(nets):
    def lowered(run):
        ops = [(op.kind, op.f.get("fn")) for op in run.network.ops]
        assert ops == [("conv", None), ("lut", "PRelu"), ("conv", None)]
    check_emu_network_run(nets[False], "bfp8", _x(), lowered)


def test_a_prelu_per_channel_read_by_a_host_op_is_refused_by_name(nets):
    check_refused_runs_layer_by_layer(nets[True], InputError, "PRelu per channel of BFP values read by a Relu",
                                      _x(8))


@pytest.mark.csim
def test_the_bfp_kernel_runs_it_in_one_start(nets):
    """The C-simulation: the layer path's bits in one start, the loops' iterations the perf model's."""
    check_kernel_run(nets[False], "bfp8", _x(6))


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.strict_csim
def test_the_bfp_kernel_on_the_strict_library_and_the_simulated_board(nets):
    k = check_kernel_run(nets[False], "bfp8", _x(6), board=True)
    assert k._kernel.strict


def test_the_slope_roms_are_a_rom_per_bank_and_lut_pixels_schedules_at_ii_1(nets, tmp_path):
    """LutPixels reads kPc slopes (and exponents) a cycle: the C++ partitions both ROMs per bank as
    the resource model counts them, and the II derived from the rendered code is 1 (one ROM in
    default storage has two ports: II 8 on the 16 banks before)."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.bfp_systolic.network import kernel as bk, perf as bfpperf
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(nets[False])
    net = netmode.lower(prog, arrays)
    t = bk.render(net, tmp_path)[2]
    cpp = (tmp_path / "network.cpp").read_text()
    for name in ("kPSlope", "kPExp"):
        row, = [b for b in bfpperf.buffers(net, t)[0] if b.name == name]
        assert row.partition == ((1, "complete"),)
        assert f"#pragma HLS ARRAY_PARTITION variable = {name} dim = 1 complete" in cpp
    loops = {r["loop"]: r["ii"] for r in schedule.network_schedule(net, config_of(prog["accels"][net.accel], "t"))}
    assert loops["LutPixels"] == 1, loops


def test_the_model_partitions_every_array_as_the_cpp_declares(nets, tmp_path):
    """Every array of the bfp network kernel's resource model is partitioned as the rendered C++'s
    ARRAY_PARTITION pragmas declare it (read here from the C++): the tap tables' ``cyclic
    factor = 2`` included (the model listed them unpartitioned), and a model array the C++ does
    not partition is unpartitioned."""
    import re
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.bfp_systolic.network import kernel as bk, perf as bfpperf
    from hlsnn.network import artifact
    net = netmode.lower(*artifact.read(nets[False]))
    t = bk.render(net, tmp_path)[2]
    declared = {}
    for m in re.finditer(r"#pragma HLS ARRAY_PARTITION variable = (\w+)(?: dim = (\d+))? (complete|cyclic factor = (\d+))",
                         (tmp_path / "network.cpp").read_text()):
        how = "complete" if m.group(3) == "complete" else f"cyclic {m.group(4)}"
        declared.setdefault(m.group(1), set()).add((int(m.group(2) or 1), how))
    bufs = bfpperf.buffers(net, t)[0]
    assert {"kTapOff", "kTapC0", "kPSlope", "act", "kWeights"} <= {b.name for b in bufs}
    for b in bufs:
        assert set(b.partition) == declared.get(b.name, set()), b.name
    tap, = [b for b in bufs if b.name == "kTapOff"]
    assert tap.banks_and_depth() == (2, -(-len(t["taps"]) // 2))


# --------------------------------------------------------------------------- rule 9w

def test_rule_9w_is_the_exact_product():
    """Rule 9p with ``t = 0`` (9w) gives the float64 PRelu of the pairs' values exactly, in
    ``M + 24`` bits: what a pool or a gate of the layer path reads."""
    rng = np.random.default_rng(5)
    m = rng.integers(-127, 128, (500, 6))
    e = rng.integers(-20, 4, (500, 6))
    slopes = np.float32(rng.normal(0, 0.4, 6)).astype(np.float64)
    sm, se = prelu.slope_pairs(slopes, lambda what: AssertionError(what))
    ym, ye = prelu.prelu_pairs(m, e, sm, se, 0, (1, 6))
    x = np.ldexp(m.astype(np.float64), e)
    np.testing.assert_array_equal(np.ldexp(ym.astype(np.float64), ye), np.where(x >= 0, x, x * slopes))
    assert np.abs(ym).max() < 1 << 31


def _se_net(path, gate_twice=False):
    """x (1 x 8 x 8) -> Conv 3x3 (4 x 8 x 8) -> PRelu (4 slopes; read by a conv: rule 9p) -> Conv 3x3
    stride 2 (6 x 4 x 4) -> PRelu (6 slopes) -> p; a squeeze-excite
    gate ``p * sigmoid(W GAP(p))`` (``gate_twice``: ``p * p``, a gate of two 9w maps) ->
    AveragePool 2x2 -> Flatten -> Gemm (10): h_dw_prelu's tail."""
    from onnx import helper, numpy_helper
    inits, w = weight_drawer(66)
    inits.append(f32_init("slope", np.reshape([-0.3, 0.27, 0.61, -0.25, 0.18, 0.4], (6, 1, 1))))
    inits.append(f32_init("slope0", np.reshape([0.2, -0.1, 0.45, 0.3], (4, 1, 1))))
    inits.append(numpy_helper.from_array(np.array([0, 6, 1, 1], np.int64), "shape"))
    nodes = [helper.make_node("Conv", ["x", w("c0w", (4, 1, 3, 3), 0.5), w("c0b", 4, 0.1)], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["c0", "slope0"], ["p0"]),
             helper.make_node("Conv", ["p0", w("cw", (6, 4, 3, 3), 0.3), w("cb", 6, 0.1)], ["c"], pads=[1, 1, 1, 1],
                              strides=[2, 2]),
             helper.make_node("PRelu", ["c", "slope"], ["p"]),
             helper.make_node("GlobalAveragePool", ["p"], ["gp"]),
             helper.make_node("Flatten", ["gp"], ["gf"]),
             helper.make_node("Gemm", ["gf", w("sw", (6, 6), 0.6), w("sb", 6, 0.1)], ["sl"]),
             helper.make_node("Sigmoid", ["sl"], ["sg"]),
             helper.make_node("Reshape", ["sg", "shape"], ["s4"]),
             helper.make_node("Mul", ["p", "p" if gate_twice else "s4"], ["g"]),
             helper.make_node("AveragePool", ["g"], ["a"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["a"], ["af"]),
             helper.make_node("Gemm", ["af", w("w2", (24, 10), 0.4)], ["y"])]
    return save_net(path, nodes, inits, "bfp_prelu_se", ("N", 1, 8, 8))


@pytest.fixture(scope="module")
def se_net(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bfp_prelu_se")
    return compile_onnx(tmp, "bfp_prelu_se", _se_net(tmp / "se.onnx"), "bfp8", check_samples=2,
                        calibration_samples=32)


def _xi(n):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="nchw").x_test[:n]


def test_a_prelu_read_by_a_pool_and_a_gate_runs_with_the_layer_paths_bits(se_net):
    """Rule 9w: the exact product, read by the global pool, the gate and (through it) the
    average pool, gives the layer path's float64 bits; the program's elements are 53-bit."""
    def lowered(run):
        ops = [(op.kind, op.f.get("fn"), op.f.get("wide")) for op in run.network.ops]
        assert ops[:4] == [("conv", None, None), ("lut", "PRelu", False), ("conv", None, None), ("lut", "PRelu", True)]
        assert [k for k, _, _ in ops[4:]] == ["add", "conv", "lut", "gate", "avgpool", "conv"]
        assert lower.elem_bits(run.network) == 53
    check_emu_network_run(se_net, "bfp8", _xi(96), lowered)


def test_a_gate_of_two_wide_prelu_maps_is_refused_by_the_kernel_by_name(tmp_path):
    """Two 9w maps' product (31 + 31 bits) could pass the 53-bit element: the kernel refuses it."""
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    path = compile_onnx(tmp_path, "bfp_prelu_pp", _se_net(tmp_path / "pp.onnx", True), "bfp8", check_samples=2,
                        calibration_samples=8)
    with pytest.raises(InputError, match="a gate of a PRelu's exact product .rule 9w."):
        kernel_network(*artifact.read(path))


@pytest.mark.csim
def test_the_bfp_kernel_runs_rule_9w_in_one_start(se_net):
    """The only C-simulation of 9w's wide elements (with a 9p op in them): the layer path's bits
    in one start."""
    check_kernel_run(se_net, "bfp8", _xi(4))


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.strict_csim
def test_the_bfp_kernel_runs_rule_9w_on_the_strict_library_and_the_simulated_board(se_net):
    k = check_kernel_run(se_net, "bfp8", _xi(4), board=True)
    assert k._kernel.strict
