"""A linear Resize with ``align_corners`` in the network mode (issue 52, milesial's Pytorch-UNet:
``nn.Upsample(scale_factor=2, mode='bilinear', align_corners=True)``;
hlsnn.engines.network.pools.cornerresize rule 14): an upsample by ``d = n_out - 1`` and a ``d x d`` box
at stride ``n_in - 1``, the mean over ``d**2`` by rule 13, and the layer path's host op as the
exact sum divided once.

References: torch's ``F.interpolate`` (the weights, the float values), onnx's reference ``Resize``
and the exact rational of the definition (``x = o (n_in - 1) / (n_out - 1)``) rounded by hand
(:func:`netfixtures.round_fraction`) to the consumer's radix point; the layer-by-layer compiled
network on the emulator for the bits of the network kernels."""
import sys
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.run import hostextra
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.deploy.importer.graph import Layer  # noqa: E402
from hlsnn.deploy.quantize.quant import to_fixed  # noqa: E402
from hlsnn.engines.network.pools import cornerresize, linpool
from hlsnn.engines.network import move as netmove  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import check_kernel_run, compile_each, round_fraction  # noqa: E402


def _mats(shape, size, coord="align_corners"):
    kind, attrs = hostextra.resize_linear(None, {"coordinate_transformation_mode": coord}, None,
                                          [1, shape[1]] + list(size), (None,) + tuple(shape[1:]))
    assert kind == "ResizeLinear"
    return attrs


def _exact(q, f_in, size):
    """The align_corners resize of integers ``q`` (B, C, H, W) at radix ``f_in`` as Fractions,
    from the definition: output ``o`` at ``x = o (n_in - 1) / (n_out - 1)``, its two neighbours
    weighted ``1 - frac(x)``, ``frac(x)``."""
    def axis(n_in, n_out):
        m = [[Fraction(0)] * n_in for _ in range(n_out)]
        for o in range(n_out):
            x = Fraction(o * (n_in - 1), n_out - 1) if n_out > 1 else Fraction(0)
            i0 = int(x)
            m[o][i0] += 1 - (x - i0)
            if x > i0:
                m[o][i0 + 1] += x - i0
        return m
    b, c, h, w = q.shape
    my, mx = axis(h, size[0]), axis(w, size[1])
    out = np.empty((b, c, size[0], size[1]), object)
    for idx in np.ndindex(b, c):
        for oy in range(size[0]):
            for ox in range(size[1]):
                out[idx + (oy, ox)] = sum(my[oy][i] * mx[ox][k] * int(q[idx + (i, k)])
                                          for i in range(h) for k in range(w) if my[oy][i] and mx[ox][k]) \
                    * Fraction(1, 2 ** f_in)
    return out


def _round_sat(v, f_x, rounding, bits=8):
    r = np.vectorize(lambda t: round_fraction(t * 2 ** f_x, rounding))(v).astype(np.int64)
    return np.clip(r, -(1 << (bits - 1)), (1 << (bits - 1)) - 1)


def _lower(attrs, q, f_in, f_x, rounding):
    """Rule 14 for a ``ResizeLinear`` of ``q`` at ``f_in`` read by an engine layer at ``f_x``."""
    j = dict(kind="host", op="ResizeLinear", name="r", inputs=["x"], output="y", attrs=attrs)
    state, shapes, ops = {"x": ("q", f_in)}, {"x": q.shape[1:]}, []
    assert linpool.lower_host(j, state, shapes, ops, 8, netmode._why, netmode.Op)
    linpool.materialize({"name": "next", "f_x": f_x}, "y", state["y"], state, shapes, ops, {}, rounding,
                        netmode._why, netmode.Op)
    env = {"x": q}
    for op in ops:
        env[op.out] = (netmove.run(op, env.get, len(q)) if op.kind == "upsample"
                       else linpool.run(op, env.get, len(q), 8))
    return env[ops[-1].out], ops


@pytest.mark.parametrize("n_in, n_out", [(2, 4), (4, 8), (3, 6), (8, 16), (3, 7), (5, 3), (1, 4)])
def test_align_corners_weights_are_torchs_and_a_box_over_a_nearest_upsample(n_in, n_out):
    """The imported weights are torch's ``F.interpolate(align_corners=True)`` (one-hot inputs),
    ``W / d`` with ``d = n_out - 1``; rule 14's box gives the same ``W`` (a 1-pixel input is
    rule 12's, ``d = 1``)."""
    torch = pytest.importorskip("torch")
    eye = torch.eye(n_in, dtype=torch.float64).reshape(n_in, 1, 1, n_in)
    ref = torch.nn.functional.interpolate(eye, size=(1, n_out), mode="bilinear", align_corners=True)
    m = np.asarray(_mats((1, 1, 1, n_in), (1, n_out))["mats"][1])
    np.testing.assert_allclose(m, ref.reshape(n_in, n_out).numpy().T, rtol=0, atol=1e-12)
    w, d = cornerresize.integer_form(m)
    assert d == ((n_out - 1) // np.gcd(n_out - 1, n_in - 1) if n_in > 1 else 1)
    if n_in > 1:
        dd, s = cornerresize.box_form(m)
        assert (dd, s) == (d, (n_in - 1) // np.gcd(n_out - 1, n_in - 1))
        np.testing.assert_array_equal(cornerresize.box(n_in, n_out, dd, s), w)


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
def test_rule_and_layer_path_round_the_exact_rational(rounding):
    """Rule 14 (upsample, box sum, rule 13's division) and the layer path's host op followed by
    the consumer's ``to_fixed`` both give the exact rational rounded once at ``F_x`` (ties
    included: radixes that shift right make many), 2 -> 4 and 4 -> 8 (``d**2`` = 9, 49), a
    3 -> 6 by 4 -> 4 (one axis of scale 1)."""
    rng = np.random.default_rng(14)
    for shape, size in (((2, 3, 2, 2), (4, 4)), ((2, 2, 4, 4), (8, 8)), ((2, 2, 3, 4), (6, 4))):
        q = rng.integers(-128, 128, shape)
        attrs = _mats(shape, size)
        for f_in, f_x in ((4, 4), (6, 3), (3, 6), (7, 2)):
            want = _round_sat(_exact(q, f_in, size), f_x, rounding)
            got, ops = _lower(attrs, q, f_in, f_x, rounding)
            assert [op.kind for op in ops] == ["upsample", "avgpool"]
            np.testing.assert_array_equal(got, want)
            layer = Layer("r", "host", ["x"], "y", op="ResizeLinear", attrs=attrs)
            v = hostextra.run(layer, [np.ldexp(q.astype(np.float64), -f_in)])
            np.testing.assert_array_equal(to_fixed(v, f_x, 8, True, rounding), want)


def test_layer_path_is_onnxs_and_torchs_resize():
    """The host op's values (exact sum, one division) are onnx's reference ``Resize``
    (align_corners) and torch's ``F.interpolate`` to float rounding."""
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).normal(size=(2, 3, 4, 5))
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")
    g = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], mode="linear",
                                            coordinate_transformation_mode="align_corners")], "g",
                          [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 3, 8, 10])], [scales])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    onnx.checker.check_model(m)
    ref = ReferenceEvaluator(m).run(None, {"x": x.astype(np.float32)})[0]
    layer = Layer("r", "host", ["x"], "y", op="ResizeLinear", attrs=_mats(x.shape, (8, 10)))
    y = hostextra.run(layer, [x])
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    tr = torch.nn.functional.interpolate(torch.from_numpy(x), scale_factor=2, mode="bilinear", align_corners=True)
    np.testing.assert_allclose(y, tr.numpy(), rtol=1e-12, atol=1e-12)


def test_weights_of_no_exact_form_are_refused_by_name():
    """``half_pixel`` by 3 (weights of 1/3 with clamped borders) is neither rule 12's nor 14's."""
    attrs = _mats((1, 2, 4, 4), (12, 12), coord="half_pixel")
    j = dict(kind="host", op="ResizeLinear", name="r", inputs=["x"], output="y", attrs=attrs)
    with pytest.raises(InputError, match=r"layer r \(ResizeLinear\): a linear Resize from 4 to 12 whose weights are "
                                         r"neither rule 12's"):
        linpool.lower_host(j, {"x": ("q", 4)}, {"x": (2, 4, 4)}, [], 8, netmode._why, netmode.Op)


def mini_milesial(path, seed=7):
    """milesial's U-Net in miniature on 1 x 8 x 8 images: conv (ReLU) -> 4 x 8 x 8 skip a; max
    pool, conv -> 4 x 4 x 4 skip b; max pool, conv -> 4 x 2 x 2; ``Resize`` align_corners x2
    (2 -> 4, d = 3) and a ``Pad`` of nothing (``F.pad`` to the skip's own size) into ``Concat``
    with b, conv; ``Resize`` x2 (4 -> 8, d = 7) into ``Concat`` with a; a 1x1 conv."""
    rng = np.random.default_rng(seed)
    init, nodes = [], []

    def conv(x, y, cin, cout, k, relu=True):
        init.extend([numpy_helper.from_array(rng.normal(0, 0.8 / np.sqrt(cin * k * k), (cout, cin, k, k))
                                             .astype(np.float32), y + "_w"),
                     numpy_helper.from_array(rng.normal(0, 0.1, cout).astype(np.float32), y + "_b")])
        nodes.append(helper.make_node("Conv", [x, y + "_w", y + "_b"], [y + ("_c" if relu else "")],
                                      pads=[k // 2] * 4))
        if relu:
            nodes.append(helper.make_node("Relu", [y + "_c"], [y]))
        return y
    init += [numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales"),
             numpy_helper.from_array(np.zeros(8, np.int64), "nopad")]
    a = conv("x", "a", 1, 4, 3)
    nodes.append(helper.make_node("MaxPool", [a], ["ap"], kernel_shape=[2, 2], strides=[2, 2]))
    b = conv("ap", "b", 4, 4, 3)
    nodes.append(helper.make_node("MaxPool", [b], ["bp"], kernel_shape=[2, 2], strides=[2, 2]))
    c = conv("bp", "c", 4, 4, 3)
    for i, (lo, skip) in enumerate(((c, b), ("u", a))):
        nodes += [helper.make_node("Resize", [lo, "", "scales"], [f"r{i}"], mode="linear",
                                   coordinate_transformation_mode="align_corners"),
                  helper.make_node("Pad", [f"r{i}", "nopad"], [f"p{i}"]),
                  helper.make_node("Concat", [skip, f"p{i}"], [f"k{i}"], axis=1)]
        if i == 0:
            conv("k0", "u", 8, 4, 3)
    conv("k1", "y", 8, 1, 1, relu=False)
    nodes[-1].output[0] = "y"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [None, 1, 8, 8])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [None, 1, 8, 8])], init)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    onnx.save(m, str(path))
    return path


@pytest.fixture(scope="module")
def minis(tmp_path_factory):
    """format -> :func:`mini_milesial` compiled (bfp8, two-hot, fixed8)."""
    from test_network_move import SMALL_FORMATS
    tmp = tmp_path_factory.mktemp("netcorner")
    return compile_each(tmp, "mini_milesial", mini_milesial(tmp / "mm.onnx"),
                        formats={k: SMALL_FORMATS[k] for k in ("bfp8", "twohot", "fixed8")}, check_samples=2,
                        calibration_samples=16)


def _x():
    from hlsnn.deploy import datasets
    return datasets.load("digits", layout="nchw").x_test[:6]


@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8"])
def test_mini_milesial_runs_as_one_network_program_with_the_layer_paths_bits(minis, fmt):
    """Integer engines: the two resizes are rule 13 means over 9 and 49 in the pool loop. BFP
    pairs: means over 9 and 49 kept as sums (rule 6b); each Concat scales its parts to means over
    441 = lcm(9, 49) (rule 6c), which the conv after it divides by."""
    net = hlsnn.load(minis[fmt], "emu", network=True)
    ops = net.network.ops
    kinds = [op.kind for op in ops]
    assert kinds.count("upsample") == 2 and kinds.count("avgpool") == 2 and kinds.count("concat") == 2, kinds
    if fmt == "bfp8":
        assert sorted(op.f["mdiv"] for op in ops if op.kind == "avgpool") == [9, 49]
        assert sorted(sorted(op.f["mscale"]) for op in ops if op.kind == "concat") == [[9, 441], [49, 441]]
        assert {op.f.get("mdiv", 1) for op in ops if op.kind == "conv"} == {1, 441}
    else:
        assert sorted(op.f["n"] for op in ops if op.kind == "avgpool") == [9, 49]
    np.testing.assert_array_equal(net(_x()), hlsnn.load(minis[fmt], "emu", network=False)(_x()))


@pytest.mark.csim
@pytest.mark.slow        # the quick suite runs rule 13's division, rule 6b and the upsample in these kernels
@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8"])   # (test_network_mean_any.py, test_network_linpool.py)
def test_mini_milesial_runs_in_one_kernel_start_on_csim_and_the_board(minis, fmt):
    check_kernel_run(minis[fmt], fmt, _x(), board=True)


def test_bfp_convs_reading_two_divisors_are_refused_by_name():
    """Rule 6c scales a Concat's parts; two means over 9 and 49 each read by a conv directly
    would need two divisors in the kernel: refused by name."""
    from hlsnn.engines.bfp_systolic.network.anymean import mark
    from hlsnn.engines.network.program import Op
    ops = [Op("avgpool", "r0", ["x"], "m0", dict(mdiv=9)), Op("conv", "c0", ["m0"], "y0", {}),
           Op("avgpool", "r1", ["y0"], "m1", dict(mdiv=49)), Op("conv", "c1", ["m1"], "y1", {})]
    with pytest.raises(InputError, match=r"convs read means over counts with odd parts \[9, 49\]"):
        mark(ops, {}, "y1")
    ops = [Op("avgpool", "r0", ["x"], "m0", dict(mdiv=9)), Op("concat", "k0", ["m0", "x"], "k", {}),
           Op("conv", "c0", ["k"], "y0", {}), Op("avgpool", "r1", ["y0"], "m1", dict(mdiv=49)),
           Op("concat", "k1", ["m1", "y0"], "k1o", {}), Op("conv", "c1", ["k1o"], "y1", {})]
    mark(ops, {}, "y1")
    assert [o.f["mscale"] for o in ops if o.kind == "concat"] == [[49, 441], [9, 441]]
    assert [o.f["mdiv"] for o in ops if o.kind == "conv"] == [441, 441]


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_only_the_pool_loop_divides_and_every_loop_stays_at_ii_1(minis, fmt, tmp_path):
    """The resizes' means are the pool loop's (one signed ``v << pre`` by unsigned ``M`` product
    per bank); with no global mean the Add loop renders no division (the board-sized two-hot
    milesial fits the PYNQ-Z2 only so), and the derived II (perf/schedule.py) of every loop is 1."""
    from importlib import import_module

    from hlsnn.engines.network.pools import mean
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(minis[fmt])
    net = netmode.lower(prog, arrays)
    km = import_module(f"hlsnn.engines.{ {'twohot': 'shift_mac', 'fixed8': 'sparse_cluster'}[fmt]}.network.kernel")
    files, _, tables = km.render(net, tmp_path / "r")
    assert [(r.function, r.count) for r in mean.multipliers(net, tables)] == [("MaxPoolTaps", tables["pc"])]
    cpp = (tmp_path / "r" / "network.cpp").read_text()
    assert cpp.count("MeanDiv(") == 2                     # its definition and the pool loop's call
    sched = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    assert {r["loop"]: r["ii"] for r in sched if r["ii"] != 1} == {}


@pytest.fixture(scope="module")
def milesial(tmp_path_factory):
    from test_torch_beyond import compile_beyond
    return compile_beyond(tmp_path_factory, "netmilesial", ["v_f_unet_milesial_dynamo"])


@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8"])
def test_milesial_unet_on_the_network_path(milesial, fmt):
    """milesial's Pytorch-UNet as torch exports it (two align_corners resizes, each through an
    ``F.pad`` of nothing into a ``Concat``): before, refused ("weights are not the x2 half_pixel
    ones"); now one network program in every format with the layer path's bits."""
    from test_torch_beyond import _data
    path = milesial["v_f_unet_milesial_dynamo", fmt]
    x = _data("v_f_unet_milesial_dynamo").x_test[:24]
    net = hlsnn.load(path, "emu", network=True)
    key = "mdiv" if fmt == "bfp8" else "n"
    assert sorted(op.f[key] for op in net.network.ops if op.kind == "avgpool") == [9, 49]
    np.testing.assert_array_equal(net(x), hlsnn.load(path, "emu", network=False)(x))


@pytest.mark.parametrize("coord", ["half_pixel", "align_corners"])
def test_cubic_weights_are_refused_as_cubic(coord):
    """A bicubic x2 (``nn.Upsample(mode='bicubic')``, Keys' weights, some negative) reaches the
    same refusal, which names the mode it is (cubic), not linear."""
    kind, attrs = hostextra.resize_linear(None, {"coordinate_transformation_mode": coord}, None, [1, 2, 8, 8],
                                          (None, 2, 4, 4), mode="cubic")
    assert kind == "ResizeLinear" and (np.asarray(attrs["mats"][0]) < 0).any()
    j = dict(kind="host", op="ResizeLinear", name="r", inputs=["x"], output="y", attrs=attrs)
    with pytest.raises(InputError, match=r"layer r \(ResizeLinear\): a cubic Resize from 4 to 8 whose weights") as e:
        linpool.lower_host(j, {"x": ("q", 4)}, {"x": (2, 4, 4)}, [], 8, netmode._why, netmode.Op)
    assert "linear" not in str(e.value).split("whose")[0]
