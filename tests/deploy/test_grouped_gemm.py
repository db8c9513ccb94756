"""Grouped and depthwise convolutions on the GEMM engines (issue 32): one GEMM per pack of
groups (the pack the cycle model finds fastest; one group per GEMM where that is fastest), not
one block-diagonal GEMM over every channel. On shift_mac the integer sums of a group's GEMM equal the block-
diagonal GEMM's (its zeros add nothing), so the layer's bits equal those of the same
convolution written ungrouped with the block-diagonal weight; on bfp_systolic the layer is
within BFP error of the float convolution; the modelled cost is a depthwise cost (about 1/g
of the block-diagonal GEMM's compute)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from hlsnn.config import load_config  # noqa: E402
from hlsnn.deploy.config import Assignment, FormatSpec  # noqa: E402
from hlsnn.deploy.importer.graph import Layer, Network  # noqa: E402
from hlsnn.deploy.run.runner import Deployment, float_forward  # noqa: E402
from hlsnn.engines.convgeom import dense_weight  # noqa: E402
from hlsnn.measure.layers import layer_cycles  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402

ACCEL = {"twohot": "shift8_pynq-z2", "bfp": "bfp8_zcu104"}


def _net(group, c=8, z=8, seed=0, block_diagonal=False):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.3, (z, c // group, 3, 3))
    b = rng.normal(0, 0.1, z)
    if block_diagonal:
        w, group = dense_weight(w, group), 1
    layer = Layer("l", "conv", ["x"], "y", w=w, b=b, relu=True, pads=(1, 1, 1, 1), strides=(2, 2), group=group)
    return Network(name="n", path="", input="x", input_shape=(None, c, 8, 8), output="y", layers=[layer])


def _run(net, x, fmt, fit="output"):
    acc = Accelerator(ACCEL[fmt], "emu")
    try:
        spec = FormatSpec("f", fmt, ACCEL[fmt], weight_fit=fit)
        dep = Deployment(net, Assignment("a", "f", {}), {"f": spec}, {"a": acc} |
                         {ACCEL[fmt]: acc})
        dep.calibrate(x)
        return dep.run(x), dep.execs["l"]
    finally:
        acc.close()


X = np.random.default_rng(1).uniform(0, 1, (3, 8, 8, 8))


@pytest.mark.parametrize("group", [8, 2])
def test_shift_groups_equal_the_block_diagonal_convolution(group):
    """With nearest codes (the fitted codes of an ungrouped layer may move rounding error onto
    its zero weights, which a grouped layer does not have)."""
    y, ex = _run(_net(group), X, "twohot", "nearest")
    y_bd, ex_bd = _run(_net(group, block_diagonal=True), X, "twohot", "nearest")
    np.testing.assert_array_equal(y, y_bd)
    assert ex.stats.f_out == ex_bd.stats.f_out
    assert len(ex.n_chunks) == group // ex.gp                # one GEMM per pack of groups


def test_bfp_depthwise_is_within_bfp_error_of_float():
    net = _net(8)
    y, ex = _run(net, X, "bfp")
    ref = float_forward(net, X)
    assert len(ex.chunks) == 8 // ex.gp
    assert np.sqrt(np.mean((y - ref) ** 2)) / np.sqrt(np.mean(ref ** 2)) < 0.02


@pytest.mark.parametrize("name", ["bfp8_zcu104", "shift8_pynq-z2"])
@pytest.mark.parametrize("group", [8, 64])
def test_grouped_cost_is_at_most_the_block_diagonal_cost(name, group):
    """The pack of groups per GEMM is the fastest the cycle model finds, so a grouped layer
    never costs more than its block-diagonal GEMM (one of the candidates); a depthwise layer
    of 64 channels costs much less on shift_mac."""
    cfg = load_config(name, check_fit=False)
    dw = layer_cycles(_net(group, c=64, z=64).layers[0], cfg, in_hw=(16, 16), fmt_type="twohot")
    bd = layer_cycles(_net(group, c=64, z=64, block_diagonal=True).layers[0], cfg, in_hw=(16, 16),
                      fmt_type="twohot")
    assert dw["cycles"] <= bd["cycles"]
    if name.startswith("shift") and group == 64:
        assert dw["cycles"] * 2 < bd["cycles"]


def test_sparse_cluster_cost_of_a_depthwise_layer_counts_its_own_weights():
    """sparse_cluster skips zero weights: the block-diagonal zeros of a depthwise layer cost it
    nothing, so its modelled compute is near that of the layer's own MACs, far below a dense
    layer of the same shape."""
    from hlsnn.perf import schedule
    cfg = load_config("sparse8_pynq-z2", check_fit=False)
    # the MAC loop's skipping alone: the loops' derived II (hlsnn.perf.schedule; the output loops
    # at 1 since their acc dependence was declared) left out, it would cost both layers alike
    mp = pytest.MonkeyPatch()
    mp.setattr(schedule, "config_schedule", lambda cfg: [])
    dw = layer_cycles(_net(16, c=16, z=16).layers[0], cfg, in_hw=(8, 8), fmt_type="fixed")
    dense = layer_cycles(_net(1, c=16, z=16).layers[0], cfg, in_hw=(8, 8), fmt_type="fixed")
    mp.undo()
    assert dw["compute"] * 4 < dense["compute"], (dw["compute"], dense["compute"])
