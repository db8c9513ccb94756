"""A residual U-Net on the network path (issue 52: s_unet_res; rule 6a's ``ZeroStuff`` of
:mod:`hlsnn.engines.network.joins.addmove` and rule 8a of :mod:`hlsnn.engines.network.joins.addcat`). Before:
every format ran layer by layer, "a data move of integer tensors computed on the fabric (not of a
pending Add or pool)": the ``ConvTranspose2d(4, 2, 1)``'s ``ZeroStuff`` read a pending
``Relu(Add)``, and then the skip ``Concat`` read another.

A small net written with ``onnx.helper``: conv (Relu) -> r1, conv -> c2, ``Relu(c2 + r1)`` -> e;
``MaxPool`` of e, conv (Relu) -> r3, conv -> c4, ``Relu(c4 + r3)`` -> e2; ``ConvTranspose`` (k 4,
s 2, p 1; large weights, so the concat's consumer reads at a coarser radix than the max pool's)
-> t; ``Concat([t, e])``, conv, Relu, a dense layer. References: the layer path's float64 tensors
(``e2`` spread with zeros by numpy, the concat) rounded by numpy at the reading conv's radix (the
deployment's rounding, saturated); the layer-by-layer emulator for the bits of the network mode
and of the C-simulated kernel."""
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, PerFormat, compiled_per_format,  # noqa: E402
                         round_array, save_net, weight_drawer)

#: the quick suite's formats: fixed8 repeats two-hot's integer rules, and bfp8's rules 6a and 8a
#: hand the Add's exact pairs to rules 7 and 8 as they are (slow stage: the quick suite's CPU)
FORMATS = ("twohot", pytest.param("fixed8", marks=pytest.mark.slow), pytest.param("bfp8", marks=pytest.mark.slow))


def _net(path):
    from onnx import helper
    inits, w = weight_drawer(65)

    def conv(x, y, cin, cout, scale, relu=True):
        nodes = [helper.make_node("Conv", [x, w(y + "_w", (cout, cin, 3, 3), scale), w(y + "_b", cout, 0.1)],
                                  [y + "_c" if relu else y], pads=[1, 1, 1, 1])]
        return nodes + ([helper.make_node("Relu", [y + "_c"], [y])] if relu else [])
    nodes = (conv("x", "r1", 1, 4, 0.8) + conv("r1", "c2", 4, 4, 0.3, relu=False)
             + [helper.make_node("Add", ["c2", "r1"], ["a1"]), helper.make_node("Relu", ["a1"], ["e"]),
                helper.make_node("MaxPool", ["e"], ["p"], kernel_shape=[2, 2], strides=[2, 2])]
             + conv("p", "r3", 4, 8, 0.4) + conv("r3", "c4", 8, 8, 0.2, relu=False)
             + [helper.make_node("Add", ["c4", "r3"], ["a2"]), helper.make_node("Relu", ["a2"], ["e2"]),
                helper.make_node("ConvTranspose", ["e2", w("t_w", (8, 4, 4, 4), 0.8), w("t_b", 4, 0.1)], ["t"],
                                 strides=[2, 2], pads=[1, 1, 1, 1]),
                helper.make_node("Concat", ["t", "e"], ["cat"], axis=1)]
             + conv("cat", "r5", 8, 4, 0.3)
             + [helper.make_node("Flatten", ["r5"], ["f"]),
                helper.make_node("Gemm", ["f", w("d_w", (256, 10), 0.1)], ["y"])])
    return save_net(path, nodes, inits, "addcat", ("N", 1, 8, 8))


@pytest.fixture(scope="module")
def net(tmp_path_factory):
    return PerFormat(compiled_per_format(tmp_path_factory, "addcat", lambda path, fmt: _net(path)))


def _x(n=48):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="nchw").x_test[:n]


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_residual_unet_runs_in_the_emu_network_mode_with_the_layer_paths_bits(net, fmt):
    check_emu_network_run(net[fmt], fmt, _x(96))


@pytest.mark.parametrize("fmt", ["twohot", pytest.param("fixed8", marks=pytest.mark.slow)])
def test_the_zerostuff_and_the_concat_are_the_layer_paths_sums_rounded_once(net, fmt):
    """Rule 6a (ZeroStuff): the transposed conv reads numpy's zero-spread of the layer path's
    float64 ``Relu(c4 + r3)`` rounded at its radix; rule 8a: the concat is the layer path's
    float64 concat rounded at the reading conv's radix, whose ``e`` part is a second add op
    ``a1_cat`` (the max pool's conv reads ``e`` at a finer radix), placed right after the first."""
    x = _x()
    _, env = hlsnn.load(net[fmt], "emu", network=False).run(x, keep=True)
    prog, arrays = artifact.read(str(net[fmt]))
    lowered = netmode.lower(prog, arrays)
    zs, = [op for op in lowered.ops if op.kind == "zerostuff"]
    cat, = [op for op in lowered.ops if op.kind == "concat"]
    names = [op.name for op in lowered.ops]
    assert names.index("a1_cat") == names.index("a1") + 1 and cat.ins[1] == "a1_cat_q"
    (r3,), (r5,) = ([j for j in prog["layers"] if j["inputs"] == [t]] for t in ("p", "cat"))
    assert r5["f_x"] < r3["f_x"]                     # the two radix points of e differ
    _, ints = netmode.run_ints(lowered, netmode.quantize_input(lowered, x), keep=True)
    e2 = env["e2"]
    spread = np.zeros(e2.shape[:2] + (7, 7))
    spread[:, :, ::2, ::2] = e2
    stuff, = [j for j in prog["layers"] if j["kind"] == "host" and j["op"] == "ZeroStuff"]
    tconv, = [j for j in prog["layers"] if j["inputs"] == [stuff["output"]]]
    want = np.clip(round_array(np.ldexp(spread, tconv["f_x"]), prog["rounding"]), -128, 127)
    assert (want != 0).mean() > 0.1
    np.testing.assert_array_equal(ints[zs.out].reshape(want.shape), want)
    want = np.clip(round_array(np.ldexp(env["cat"], r5["f_x"]), prog["rounding"]), -128, 127)
    assert want.shape == (len(x), 8, 8, 8) and (want[:, 4:] != 0).mean() > 0.3
    np.testing.assert_array_equal(ints[cat.out].reshape(want.shape), want)


@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8"])
def test_every_kernel_runs_it_in_one_start_on_csim_and_the_simulated_board(net, fmt):
    """The C-simulation (the strict library): the layer path's bits in one start, the loops'
    iterations the perf model's, every bank within its ports (the Add loop writes the concat's
    skip into sc while the max pool reads the other sum); the simulated board alike. No kernel
    loop is new, so this is the slow stage's (the quick suite's kernels run each loop already)."""
    assert check_kernel_run(net[fmt], fmt, _x(6), board=True)._kernel.strict


def test_a_concat_of_a_pending_add_read_at_two_radix_points_is_refused_by_name():
    """Rule 8a needs one ``F_x`` for the concat's readers (the layer path rounds the float concat
    once per reader); two convs reading it at radix points 4 and 5 are refused by name."""
    from types import SimpleNamespace
    from hlsnn.engines.network.joins import addcat
    from hlsnn.errors import InputError
    j = dict(kind="host", op="Concat", name="cat", inputs=["t", "e"], output="cat", attrs={"axis": 1})
    program = {"layers": [j] + [dict(kind="conv", name=n, inputs=["cat"], output=n + "_y", f_x=f)
                                for n, f in (("c1", 4), ("c2", 5))]}
    add = dict(ins=["a", "b"], fa=4, fb=4, relu=True, p=None, name="e")
    w = SimpleNamespace(state={"t": ("q", 5), "e": ("add", add)}, shapes={"t": (4, 8, 8), "e": (4, 8, 8)}, ops=[])
    with pytest.raises(InputError, match=r"layer cat \(Concat\): a Concat of a pending Add's sum .* at one radix "
                                         r"point only \(rule 8a\)"):
        addcat.lower_host(j, program, w, SimpleNamespace(bits=8), netmode._why, None)
