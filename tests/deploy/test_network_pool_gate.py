"""A squeeze-excite gate of a max-pooled map (issue 52; the family's dw_mult: ``HardSwish``,
``MaxPool``, then a channel gate of the pooled map): the pool's output is both the gate's map,
which the kernels keep in the shortcut buffer, and the squeeze's input. The kernels' MaxPool
loop writes the shortcut buffer too (before, it wrote the activation buffer only, and the
two-hot kernel gated an unwritten map: the self-check caught it), and bfp's gate takes a pool
of pairs as its operand (a max pool picks its input's elements, whose width it knows).

References: the layer-by-layer compiled network on the emulator for the bits; the descriptor
rule written out for the refusal."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.network.kernel import allocate, descriptor_head  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
           "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}
ENGINE = {"bfp8": "bfp_systolic", "twohot": "shift_mac", "fixed8": "sparse_cluster"}


def pool_gate_model(path, seed=3):
    """conv (4, 3x3) -> HardSwish -> MaxPool 3x3 s2 p1 (4 x 4 x 4) -> the squeeze (global pool,
    1x1 conv, HardSigmoid) -> Mul(pooled map, gate) -> conv (8, 3x3) -> Relu -> global pool ->
    Gemm (10), on 1 x 8 x 8 images."""
    rng = np.random.default_rng(seed)
    t = lambda a, n: numpy_helper.from_array(np.asarray(a, np.float32), n)     # noqa: E731
    init = [t(rng.normal(0, 0.6, (4, 1, 3, 3)), "w1"), t(rng.normal(0, 0.1, 4), "b1"),
            t(rng.normal(0, 0.8, (4, 4, 1, 1)), "ws"), t(rng.normal(0, 0.2, 4), "bs"),
            t(rng.normal(0, 0.3, (8, 4, 3, 3)), "w2"), t(rng.normal(0, 0.1, 8), "b2"),
            t(rng.normal(0, 0.5, (10, 8)), "wg"), t(rng.normal(0, 0.1, 10), "bg")]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("HardSwish", ["c1"], ["h1"]),
             helper.make_node("MaxPool", ["h1"], ["p1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
             helper.make_node("GlobalAveragePool", ["p1"], ["g1"]),
             helper.make_node("Conv", ["g1", "ws", "bs"], ["s1"]),
             helper.make_node("HardSigmoid", ["s1"], ["s2"], alpha=1 / 6),
             helper.make_node("Mul", ["p1", "s2"], ["m1"]),
             helper.make_node("Conv", ["m1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["g2"]),
             helper.make_node("Flatten", ["g2"], ["f2"]),
             helper.make_node("Gemm", ["f2", "wg", "bg"], ["y"], transB=1)]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 1, 8, 8])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 10])], init)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    from netfixtures import compile_each
    tmp = tmp_path_factory.mktemp("netpoolgate")
    return compile_each(tmp, "pool_gate", pool_gate_model(tmp / "pool_gate.onnx"), formats=FORMATS)


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_gate_of_a_pool_runs_in_the_emu_network_mode_with_the_layer_paths_bits(nets, fmt):
    x = _x(48)
    net = hlsnn.load(nets[fmt], "emu", network=True)
    assert net.network is not None and net.network.engine == ENGINE[fmt]
    pool, = [op for op in net.network.ops if op.kind == "maxpool"]
    assert len([op for op in net.network.ops if op.kind == "gate" and pool.out in op.ins]) == 1
    np.testing.assert_array_equal(net(x), hlsnn.load(nets[fmt], "emu", network=False)(x))


def _kernel(nets, fmt, n=6):
    x = _x(n)
    k = hlsnn.load(nets[fmt], "csim", network=True)     # its self-check runs on the kernel too
    np.testing.assert_array_equal(k(x), hlsnn.load(nets[fmt], "emu", network=False)(x))
    assert k.last_kernel_starts == 1 and k.network.engine == ENGINE[fmt]
    pool, = [op for op in k.network.ops if op.kind == "maxpool"]
    place = k._kernel.tables["place"]
    assert place[pool.out][1]                         # the pooled map is a shortcut (the gate's)
    if k._kernel.strict:
        assert all(b["sites"] <= b["ports"] for b in k._kernel.strict_report["banks"])


@pytest.mark.csim
def test_the_shift_mac_kernel_gates_a_pooled_map_in_one_start(nets):
    _kernel(nets, "twohot")


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["bfp8", "fixed8"])
def test_the_bfp_and_sparse_kernels_gate_a_pooled_map_in_one_start(nets, fmt):
    _kernel(nets, fmt)


def test_a_shortcut_made_by_a_loop_that_does_not_write_sc_is_refused_by_name():
    """An upsample's output read as an Add's shortcut: its loop writes the activation buffers
    only, so the descriptor is refused (before, the kernel would have read an unwritten sc).
    Where the Add's other operand is a conv's, that one is the shortcut instead (InceptionTime's
    Add of a concat and a conv)."""
    Op = netmode.Op
    add = dict(c=2, hw=16, sa=0, sb=0, relu=False, gap=False, shift=0)
    ops = [Op("conv", "c0", ["x"], "a"), Op("upsample", "u", ["a"], "b"), Op("upsample", "v", ["b"], "c"),
           Op("add", "s", ["c", "b"], "y", dict(add))]
    net = netmode.NetProgram("n", ops, {t: (2, 4, 4) for t in "xabcy"}, {"name": "x"}, {"tensor": "y"}, [], {},
                             "a", {})
    place, _, _ = allocate(net, 1)
    assert place["b"][1]
    with pytest.raises(InputError, match=r"u \(upsample\) makes a shortcut"):
        descriptor_head(ops[1], None, place, lambda t: t, 1, 1)
    ops = [Op("conv", "c0", ["x"], "a"), Op("upsample", "u", ["a"], "b"), Op("conv", "c1", ["b"], "c"),
           Op("add", "s", ["c", "b"], "y", dict(add))]
    net = netmode.NetProgram("n", ops, {t: (2, 4, 4) for t in "xabcy"}, {"name": "x"}, {"tensor": "y"}, [], {},
                             "a", {})
    place, _, _ = allocate(net, 1)
    assert place["c"] == (None, True) and not place["b"][1] and ops[3].f["short"] == "c"   # the conv writes sc alone
