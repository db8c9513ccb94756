"""A residual Add fused into the write path of the conv that feeds it (issue 83,
:mod:`hlsnn.engines.bfp_systolic.network.fuse`, a board-sized bfp_systolic kernel): the conv writes
rule bfp_add's sums two lanes a cycle, the Add's row runs no iterations; the bits stay the
layer-by-layer emulator's (ResNet-8's ``Relu(Add)`` of 16, 32 and 64 channels:
tests/deploy/test_network_bfp.py).

Net (digits, 1 x 8 x 8): conv 3x3 (24) Relu -> r1; conv 3x3 (24) -> c2; ``Add(c2, r1)`` -> a (its
sum also a later Add's shortcut: not fused); conv 3x3 (24) Relu -> r3; conv 3x3 (24) -> c4;
``Add(c4, a)`` -> b, no ReLU (fused: ``fa`` 1); the output conv 8x8 (10), Flatten. 24 channels are
a full block of 16 lanes and a partial one of 8: the lanes past the last channel write nothing,
set no status and leave the map alone. References: the layer-by-layer emulator (the bits), the
descriptor rows (what is fused)."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, compile_onnx, save_net, weight_drawer  # noqa: E402


def _net(path):
    from onnx import helper
    inits, w = weight_drawer(83)
    conv = lambda i, o, c, n, k=3, p=1: helper.make_node(                       # noqa: E731
        "Conv", [i, w(n + "_w", (o, c, k, k), 0.3), w(n + "_b", o, 0.05)], [n], pads=[p] * 4)
    nodes = [conv("x", 24, 1, "c1"), helper.make_node("Relu", ["c1"], ["r1"]),
             conv("r1", 24, 24, "c2"), helper.make_node("Add", ["c2", "r1"], ["a"]),
             conv("a", 24, 24, "c3"), helper.make_node("Relu", ["c3"], ["r3"]),
             conv("r3", 24, 24, "c4"), helper.make_node("Add", ["c4", "a"], ["b"]),
             conv("b", 10, 24, "c5", k=8, p=0), helper.make_node("Flatten", ["c5"], ["y"])]
    return save_net(path, nodes, inits, "fuseadd", ("N", 1, 8, 8))


@pytest.fixture(scope="module")
def fused(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuseadd")
    return compile_onnx(tmp, "fuseadd", _net(tmp / "fuseadd.onnx"), "bfp8",
                        formats={"bfp8": "{type: bfp, accel: bfp8net_pynq-z2}"}, check_samples=2,
                        calibration_samples=32)


def test_the_fused_rows(fused):
    """The Add whose sum is no later shortcut is fused into c4 (no ReLU: fa 1, its shortcut read at
    the Add's sc_base, its map written by the conv, the Add's n_iter 0, c4's 8 x 1 more); the
    other stays an Add of its own."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
    from hlsnn.network import artifact
    net = netmode.lower(*artifact.read(fused))
    t = bfpkernel.tables(net, *bfpkernel.shape(net.params))
    rows = [dict(zip(bfpkernel.FIELDS, r["vals"])) for r in t["rows"]]
    by = {r["comment"].split(":")[0]: row for r, row in zip(t["rows"], rows)}
    (c2, a1), (c4, a2) = [(n, m) for n, m in zip(list(by)[:-1], list(by)[1:]) if by[m]["op"] == 2]
    ka = net.params["net_add"]                                    # the Add's channels a cycle
    assert by[c2]["fa"] == 0 and by[a1]["n_iter"] == 64 * -(-24 // ka)     # 24 channels ka a cycle, 64 pixels
    assert by[c4]["fa"] == 1 and by[a2]["n_iter"] == 0 and t["fuse"]
    # a block's cycles: one tap of 16 channels a cycle; with the slot schedule (.slots, the shipped config's
    # net_slots) one read of each half of 8 banks a cycle: half 0 holds channels of both channel blocks, each
    # window row a pair of taps and a single: 2 x 3 x 2 reads
    steps = 12 if t["units"] else 18
    assert (by[c4]["zb"], by[c4]["zlast"], by[c4]["steps"]) == (2, 8, steps)
    assert by[c4]["dst"] == by[a2]["dst"] != by[c4]["src"] and by[c4]["mw"] == 1 and by[a2]["mw"] == 0
    assert by[c4]["n_iter"] == 64 * 2 * steps + 16 - 1 + 2 * 8 + by[c4]["lead"]  # the last pixel's writes: 2 blocks x 8
    # the map's taps a pixel: 9, or (slots) a pair and a single a row
    assert by[c4]["lead"] == (6 if t["units"] else 9) + 16


@pytest.mark.csim
@pytest.mark.strict_csim
def test_the_fused_add_keeps_the_bits(fused):
    """Strict C-simulation and the simulated board: the layer-by-layer emulator's bits in one
    start, the cycle model's iterations, every bank within its ports."""
    from hlsnn.deploy.datasets import load
    x = load("digits", layout="nchw").x_test[:6]
    k_run = check_kernel_run(fused, "bfp8", x, board=True)
    ka = k_run.network.params["net_add"]                             # the Add's channels a cycle
    assert k_run._kernel.counters["NetAdd"][0] == 6 * 64 * -(-24 // ka)    # add1's alone
    y = np.asarray(k_run(x))
    assert len({tuple(r) for r in y}) == len(x)                      # six images, six different outputs


@pytest.mark.csim
def test_a_fused_sum_beyond_its_bound_sets_the_status(fused):
    """Rule bfp_add's bound in the write path: c4's outputs made ~2^-50 (its row exponents -60, no
    bias) against a shortcut near 1, so each sum's terms lie more than 25 bits apart: the network
    mode refuses the batch (NotExact) and the kernel sets status bit 0 for every image."""
    from hlsnn.deploy.datasets import load
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.engines.bfp_systolic.network import lower as netbfp
    from hlsnn.engines.bfp_systolic.network.kernel import BfpNetKernel
    from hlsnn.network import artifact
    net = netmode.lower(*artifact.read(fused))
    ch = next(op for op in net.ops if op.name == "c4").f["chunks"][0]
    ch["we"] = np.full_like(np.asarray(ch["we"]), -60)
    ch["bm"] = np.zeros_like(np.asarray(ch["bm"]))
    xq = netmode.quantize_input(net, load("digits", layout="nchw").x_test[:3])
    with pytest.raises(netbfp.NotExact):
        netmode.run_ints(net, xq)
    with pytest.raises(netbfp.NotExact, match=r"image\(s\) \[0, 1, 2\]: a sum beyond its bound"):
        BfpNetKernel(net).run(xq)
