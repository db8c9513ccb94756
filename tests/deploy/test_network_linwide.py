"""Rule 12w of the network mode (:mod:`hlsnn.engines.network.joins.linwide`): a linear x2 resize of a
pending residual Add's exact sum on the integer engines (k_ae_lin's ``F.interpolate(relu(d2(..)
+ a), mode='linear')`` in two-hot and fixed8), which was refused by name ("a ResizeLinear of a
pending Add's exact sum ... has no integer rule") and ran layer by layer.

Net (L) of ``test_network_addmove``: conv1d, conv1d, ``Relu(Add)``, a linear ``half_pixel``
``Resize`` by 2, conv1d, dense. References: onnx's ``ReferenceEvaluator`` ``Resize`` (float64)
of the layer path's float64 ``Relu(Add)``, rounded by numpy with the deployment's rounding at
the consumer's radix and saturated (the net is built so that rounding the sum first, as a
rule-4 requantization would, gives other integers: checked); the layer-by-layer emulator for
the bits of the network mode and of the C-simulated kernel."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.network.joins import linwide  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, PerFormat, compiled_per_format,  # noqa: E402
                         round_array)
from test_network_addmove import _lin_net, _sum, _x  # noqa: E402


def _onnx_resize(s):
    """onnx's reference linear ``half_pixel`` Resize by 2 of the last axis of (B, C, L) ``s``, float64."""
    from onnx import helper, TensorProto
    from onnx.reference import ReferenceEvaluator
    g = helper.make_graph([helper.make_node("Resize", ["s", "", "k"], ["u"], mode="linear",
                                            coordinate_transformation_mode="half_pixel")], "r",
                          [helper.make_tensor_value_info("s", TensorProto.DOUBLE, None)],
                          [helper.make_tensor_value_info("u", TensorProto.DOUBLE, None)],
                          [helper.make_tensor("k", TensorProto.FLOAT, [3], [1, 1, 2])])
    return ReferenceEvaluator(helper.make_model(g)).run(None, {"s": np.asarray(s, np.float64)})[0]


@pytest.mark.parametrize("n", [1, 2, 3, 16])
def test_resize4_is_four_times_onnxs_linear_resize(n):
    """Rule 12w's ``t``: exactly 4x onnx's reference resize of integers (rows of 1, 2, 3, 16,
    the clamped borders included)."""
    s = np.random.default_rng(n).integers(-600, 600, size=(2, 3, n))
    np.testing.assert_array_equal(linwide.resize4(s), 4 * _onnx_resize(s))


@pytest.fixture(scope="module")
def lin(tmp_path_factory):
    return PerFormat(compiled_per_format(tmp_path_factory, "linwide", lambda path, fmt: _lin_net(path),
                                          layout="ncl", calibration_samples=32))


#: the quick suite's format; fixed8 repeats the same integer rule on the sparse kernel (slow stage)
QUICK = ["twohot", pytest.param("fixed8", marks=pytest.mark.slow)]


@pytest.mark.parametrize("fmt", QUICK)
def test_the_resized_sum_is_onnxs_resize_rounded_once(lin, fmt):
    """The network mode's resized tensor is onnx's resize of the layer path's float64 sum,
    rounded once at the conv's radix; the Add's exact sum is kept wide (``out_bits`` above 8)
    and rounding it to an activation first would give other integers on these images."""
    x = _x("ncl")
    s, net = _sum(lin[fmt], x)
    assert [op.kind for op in net.ops] == ["conv", "conv", "add", "linwide", "conv", "conv"]
    add, = [op for op in net.ops if op.kind == "add"]
    lw, = [op for op in net.ops if op.kind == "linwide"]
    assert add.f["out_bits"] > 8 and add.f["shift"] == 0 and lw.ins == [add.out]
    _, ints = netmode.run_ints(net, netmode.quantize_input(net, x), keep=True)
    want = _onnx_resize(s)
    assert want.shape == (len(x), 8, 16) and np.abs(s).max() > 0
    prog = artifact.read(str(lin[fmt]))[0]
    (conv3,) = [j for j in prog["layers"] if j["name"] == "c3"]        # reads u through a Reshape
    f_x, rnd = conv3["f_x"], prog["rounding"]
    ref = np.clip(round_array(np.ldexp(want, f_x), rnd), -128, 127)
    np.testing.assert_array_equal(ints[lw.out].reshape(want.shape), ref)
    twice = np.clip(round_array(np.ldexp(_onnx_resize(np.clip(round_array(np.ldexp(s, f_x), rnd), -128, 127)), 0),
                                rnd), -128, 127)
    assert (twice != ref).any()                      # the rule this replaces would not be the layer path


@pytest.mark.parametrize("fmt", QUICK)
def test_the_resize_net_runs_in_the_emu_network_mode_with_the_layer_paths_bits(lin, fmt):
    check_emu_network_run(lin[fmt], fmt, _x("ncl", 96))


@pytest.mark.csim
@pytest.mark.slow      # the kernel's g++ build (~9 CPU-s cold): the quick suite is at its budget
@pytest.mark.parametrize("fmt", QUICK)
def test_one_kernel_start_on_csim(lin, fmt):
    """The kernel's ``LinWide`` loop (the Add writes its exact sum into the shortcut buffer): the
    layer path's bits in one start, the perf model's iterations, every bank within its ports."""
    check_kernel_run(lin[fmt], fmt, _x("ncl", 6))


@pytest.mark.csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_one_kernel_start_on_the_simulated_board(lin, fmt):
    check_kernel_run(lin[fmt], fmt, _x("ncl", 6), board=True)


@pytest.mark.parametrize("fmt", QUICK)
def test_the_latency_model_counts_the_linwide_loop(lin, fmt):
    """``hlsnn perf``'s model of the one-start kernel: one start, and the ``LinWide`` loop's logic
    (its two registers a bank: at least ``2 Q wb`` flip-flops, ``wb`` the rendered sum width)."""
    from hlsnn.network import latency
    m = latency.model(str(lin[fmt]))
    assert m["path"] == "network" and m["kernel_starts"] == 1
    lg = m["kernel_logic"]["linwide"]
    assert lg["lut"] > 0 and lg["ff"] >= 2 * 8 * 12


@pytest.mark.parametrize("shape, mats, what", [
    ((4, 3, 5), "2d", r"ResizeLinear by \(2, 2\) of a 4x3x5"),          # two doubled axes
    ((4, 3, 5), "h", r"ResizeLinear by \(2, 1\) of a 4x3x5"),           # a second axis longer than 1
])
def test_other_resizes_of_a_wide_sum_are_refused_by_name(shape, mats, what):
    """Rule 12w resizes one axis of a ``C x L`` map; a 2-D map's resize is refused by name."""
    from types import SimpleNamespace
    from hlsnn.engines.network.pools.linpool import half_pixel_x2
    from hlsnn.errors import InputError
    _, h, w = shape
    m = [half_pixel_x2(h), half_pixel_x2(w)] if mats == "2d" else [half_pixel_x2(h), np.eye(w)]
    j = dict(name="u", op="ResizeLinear", inputs=["s"], output="u", attrs=dict(mats=m))
    walk = SimpleNamespace(shapes={"s": shape}, state={})
    add = ("add", dict(fa=3, fb=4, ins=["a", "b"], relu=True, name="s", p=None))
    with pytest.raises(InputError, match=what):
        linwide.lower_host(j, walk, add, None, lambda j, what: InputError(what))


def test_an_upsample_of_the_resized_sum_is_refused_by_name():
    """Rule 12w's resize is requantized for the engine layer reading it; a move after it (which
    :mod:`hlsnn.engines.network.joins.addmove` would hold pending as rule 6a's) is refused by name."""
    from types import SimpleNamespace
    from hlsnn.engines.network.joins import addmove
    from hlsnn.errors import InputError
    st = ("addmv", dict(add={}, moves=[], lin=dict(name="u", c=4, l=8, fy=2, fx=1), name="u"))
    walk = SimpleNamespace(shapes={"u": (4, 16)}, state={"u": st})
    j = dict(name="v", op="Upsample", inputs=["u"], output="v", attrs=dict(factors=[2, 1]))
    with pytest.raises(InputError, match=r"Upsample of a linear Resize of a pending Add"):
        addmove.lower_host(j, walk, SimpleNamespace(bits=8), lambda j, what: InputError(what), None)
