"""An AveragePool whose padding is not counted (``count_include_pad = 0``, PyTorch's
``AvgPool2d(3, 1, 1, count_include_pad=False)``) in the network mode of the integer engines
(issue 52, rule 11u of hlsnn.engines.network.pools.uncounted): each window's sum times ``L / count``
divided by ``L`` (rule 13). References: onnx's reference AveragePool quantized by the layer
path's ``to_fixed`` (the float semantics), the layer-by-layer compiled net on emu (the bits),
and the C-simulation of the kernels."""
import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx import helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.network.pools import uncounted  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from netfixtures import avgpool_net, check_pool_is_onnx_reference, compile_each  # noqa: E402


@pytest.mark.parametrize("kernel, pads, strides, big_l", [((3, 3), (1, 1, 1, 1), (1, 1), 36),
                                                          ((3, 3), (1, 1, 1, 1), (2, 2), 36),
                                                          ((5, 5), (2, 2, 2, 2), (1, 1), 3600),
                                                          ((3, 3), (1, 0, 1, 0), (1, 1), 18),
                                                          ((2, 2), (1, 1, 1, 1), (1, 1), 4)])
def test_rule_equals_onnx_reference_quantized_by_the_layer_path(kernel, pads, strides, big_l):
    """onnx's reference mean (count_include_pad = 0) quantized by to_fixed at F_x, three
    roundings and three radix pairs, is rule 11u's integer result on random 8-bit maps."""
    q = np.random.default_rng(sum(kernel) + sum(pads)).integers(-128, 128, (4, 3, 7, 8))
    q[0] = 127
    q[1] = -128
    attrs = dict(kernel_shape=list(kernel), strides=list(strides), pads=list(pads), count_include_pad=0)

    def over_big_l(op):
        assert op.f["uncounted"] == big_l and op.f["n"] == big_l
    check_pool_is_onnx_reference(q, attrs, over_big_l)


def test_counts_are_the_taps_inside_the_map():
    f = dict(h=4, w=5, oh=4, ow=5, kh=3, kw=3, sh=1, sw=1, pads=(1, 1, 1, 1))
    want = np.array([[4, 6, 6, 6, 4], [6, 9, 9, 9, 6], [6, 9, 9, 9, 6], [4, 6, 6, 6, 4]])
    np.testing.assert_array_equal(uncounted.counts(f), want)


def test_two_tables_are_refused_by_name():
    net = type("N", (), {})()
    net.ops = [netmode.Op("avgpool", f"p{k}", ["x"], f"y{k}", dict(uncounted=big, kh=3, kw=3))
               for k, big in enumerate((36, 18))]
    with pytest.raises(InputError, match=r"least common multiples \[18, 36\]"):
        uncounted.rom(net)


FORMATS = {"twohot": "{type: twohot, accel: shift8_pynq-z2}", "fixed8": "{type: fixed, accel: sparse8_pynq-z2}",
           "bfp8": "{type: bfp, accel: bfp8_zcu104}"}


def _model(path, seed=11):
    """conv 3x3 padded (8x8), AvgPool2d(3, 1, 1, count_include_pad=False), conv 3x3 stride 2, a
    global pool over 3x3, a dense layer."""
    return avgpool_net(path, 0, seed, "avg_u")


@pytest.fixture(scope="module")
def nets(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("uncounted")
    return compile_each(tmp, "avg_u", _model(tmp / "avg_u.onnx"), formats=FORMATS, check_samples=2)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_network_path_has_the_layer_paths_bits(nets, fmt):
    """One network program (no engine call) with the layer path's bits on 200 digits (bfp8:
    the scaled sums are means over 36 = 4 x 9, rule 6b of hlsnn.engines.bfp_systolic.network.anymean)."""
    from hlsnn.commands.network import _kernel_calls
    from hlsnn.deploy import datasets
    x = datasets.load("digits", layout="nchw").x_test[:200]
    want = hlsnn.load(nets[fmt], "emu", network=False)(x)
    net = hlsnn.load(nets[fmt], "emu", network=True)
    assert [op.f.get("uncounted") for op in net.network.ops if op.kind == "avgpool"] == [36]
    before = _kernel_calls(net)
    np.testing.assert_array_equal(net(x), want)
    assert _kernel_calls(net) == before


@pytest.mark.csim
@pytest.mark.parametrize("fmt", [pytest.param("twohot"), pytest.param("fixed8", marks=pytest.mark.slow),
                                 pytest.param("bfp8", marks=pytest.mark.slow)])
def test_network_kernel_csim_has_the_layer_paths_bits_in_one_start(nets, fmt):
    """The C-simulation (the count of inside taps and kPoolScale in the pool loop): the layer
    path's bits on 16 digits, one start. (fixed8 and bfp8 in the slow suite: the same pool loop,
    bfp8's with rule 6b's divisor 9.)"""
    from hlsnn.deploy import datasets
    x = datasets.load("digits", layout="nchw").x_test[:16]
    board = hlsnn.load(nets[fmt], "csim", network=True)
    np.testing.assert_array_equal(board(x), hlsnn.load(nets[fmt], "emu", network=False)(x))
    assert board.last_kernel_starts == 1


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_the_scale_is_declared_and_the_pool_loop_stays_at_ii_1(nets, tmp_path, fmt):
    """The kernel renders kPoolScale (36 / count at counts 4, 6, 9) and declares the sum x
    scale product per bank in MaxPoolTaps; the derived II (perf/schedule.py, from the rendered
    C++) of the pool loop is 1."""
    from importlib import import_module
    from hlsnn.engines.network.pools import mean
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(nets[fmt])
    net = netmode.lower(prog, arrays)
    kern = {"twohot": "shift_mac", "fixed8": "sparse_cluster"}[fmt]
    t = import_module(f"hlsnn.engines.{kern}.network.kernel").render(net, tmp_path / "r")[2]
    assert [t["pool_scale"][c] for c in (4, 6, 9)] == [9, 6, 4]
    assert "kPoolScale" in (tmp_path / "r" / "network.cpp").read_text()
    rows = [r for r in mean.multipliers(net, t) if r.name == "pool scale"]
    assert [(r.function, r.count, r.a_bits, r.b_bits) for r in rows] == [("MaxPoolTaps", t["pc"], t["add_bits"], 7)]
    loops = {r["loop"]: r["ii"] for r in schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))}
    assert loops["MaxPoolTaps"] == 1, loops


@pytest.mark.parametrize("kernel, stride, pad", [(3, 1, 1), (3, 2, 1), (5, 1, 2)])
def test_the_layer_paths_pool_is_torchs_count_include_pad_false(kernel, stride, pad):
    """The float semantics the rule reproduces: the layer path's host AveragePool (hostops,
    float64) is torch's AvgPool2d(k, s, p, count_include_pad=False) on random maps, and so is
    onnxruntime's AveragePool (count_include_pad=0; float32, its only kernel) to float32's precision."""
    torch = pytest.importorskip("torch")
    from hlsnn.deploy.run import hostops
    x = np.random.default_rng(kernel + stride).normal(size=(2, 3, 7, 8))
    attrs = dict(kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4, count_include_pad=0)
    got = hostops.run(hostops._Spec("AveragePool", attrs), [x])
    want = torch.nn.AvgPool2d(kernel, stride, pad, count_include_pad=False)(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-15, atol=1e-15)
    ort = pytest.importorskip("onnxruntime")
    g = helper.make_graph([helper.make_node("AveragePool", ["x"], ["y"], **attrs)], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    sess = ort.InferenceSession(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString(),
                                providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(got, sess.run(None, {"x": x.astype(np.float32)})[0], rtol=1e-5, atol=1e-6)
