"""Rule 12t of the network mode for a plain pending Add (:mod:`hlsnn.engines.network.lintwo`,
:func:`~hlsnn.engines.network.lintwo.materialize_add`): an output conv taking its input in two
int8 terms (``input_terms: 2``, :mod:`hlsnn.deploy.quantize.twoin`) where that input is a residual block's
``Relu(Add)`` (s_unet_res fixed8), which was refused by name ("takes its input in 2 int8 terms
...") and ran layer by layer.

Net: conv1d, conv1d, ``Relu(Add)``, the output conv1d (4 channels, no ReLU), Flatten; fixed8 with
``input_terms: 2`` (8 channels: the lo term at channel 16, the kernel's 16 banks, so the padding
is exercised). References: numpy's two terms of the layer path's float64 sum (twoin step 1
written out: ``hi`` rounded at ``F_x``, the residual at ``F_x + 7``, the deployment's rounding,
saturated), the layer-by-layer emulator for the bits of the network mode and of the C-simulated
kernel."""
import sys
from types import SimpleNamespace

import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.lower import program as netmode
from hlsnn.deploy.quantize import twoin  # noqa: E402
from hlsnn.engines.network import lintwo  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.network import artifact  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from netfixtures import (check_emu_network_run, check_kernel_run, check_layer_starts, check_two_term_map,  # noqa: E402
                         compile_onnx, save_net, weight_drawer)


def _net(path):
    """x (8, 8) as (C, L) -> conv1d k3 (8) Relu -> r1; conv1d k3 (8) -> c2; Relu(c2 + r1) -> s;
    conv1d k3 (4) -> c3 (the output); Flatten. c2 is small (a radix 3-4 bits finer than r1's), so
    the sum's radix is finer than c3's input radix and the lo term carries bits."""
    from onnx import helper
    inits, w = weight_drawer(64)
    nodes = [helper.make_node("Conv", ["x", w("c1_w", (8, 8, 3), 0.4), w("c1_b", 8, 0.1)], ["c1"], pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", w("c2_w", (8, 8, 3), 0.002), w("c2_b", 8, 0.001)], ["c2"], pads=[1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("Relu", ["a"], ["s"]),
             helper.make_node("Conv", ["s", w("c3_w", (4, 8, 3), 0.3), w("c3_b", 4, 0.1)], ["c3"], pads=[1, 1]),
             helper.make_node("Flatten", ["c3"], ["y"])]
    return save_net(path, nodes, inits, "addtwo", ("N", 8, 8), ("N", 32))


def _compile(tmp_path_factory, mp, accel):
    mp.setattr(twoin, "WORTH", 0.0)                 # two terms wherever input_terms: 2 allows them
    tmp = tmp_path_factory.mktemp("addtwo")
    fmt = {"fixed8": f"{{type: fixed, accel: {accel}, input_terms: 2}}"}
    return compile_onnx(tmp, "addtwo", _net(tmp / "addtwo.onnx"), "fixed8", formats=fmt, layout="ncl",
                        check_samples=2, calibration_samples=32)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


@pytest.fixture(scope="module")
def two(tmp_path_factory, monkeypatch_module):
    return _compile(tmp_path_factory, monkeypatch_module, "sparse8_pynq-z2")


@pytest.fixture(scope="module")
def two_sized(tmp_path_factory, monkeypatch_module):
    """The net on the board-sized kernel (``sparse8net_pynq-z2``: replicated banks, packed DSPs)."""
    return _compile(tmp_path_factory, monkeypatch_module, "sparse8net_pynq-z2")


def _x(n=48):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="ncl").x_test[:n]


def test_the_network_mode_reads_the_layer_paths_two_terms_of_the_sum(two):
    """The lowered program: the Add makes both terms (``terms`` 2, lo at channel 16 of a 24-channel
    map) and the output conv sums them; the map is numpy's two terms of the layer path's float64
    ``Relu(Add)``, the lo term not all zero; the network mode's outputs are the layer path's bits."""
    check_two_term_map(two, _x(), ["conv", "conv", "add", "conv"], "s", 8)
    check_emu_network_run(two, "fixed8", _x(96))


def test_the_latency_model_counts_the_add_twice(two):
    """``hlsnn perf``'s model: one start, rule 12t's logic, the Add's iterations twice rule 4's
    (``ceil(C / Q) HW`` a pass), its descriptor ``wide`` 2."""
    from hlsnn.engines.sparse_cluster.network import kernel as sk
    from hlsnn.network import latency
    m = latency.model(str(two))
    assert m["path"] == "network" and m["kernel_starts"] == 1
    assert m["kernel_logic"]["lintwo"]["lut"] > 0
    net = netmode.lower(*artifact.read(str(two)))
    t = sk.tables(net, *sk.shape(net.params))
    row = t["rows"][2]
    val = dict(zip(row["names"], row["vals"]))
    assert (val["n_iter"], val["wide"]) == (2 * 1 * 8, 2)          # 8 channels in one block of 16, HW 8


def test_the_layer_by_layer_latency_model_counts_both_passes(two):
    """Layer by layer the output conv runs once a term: four starts for three convs, as many as
    the emulated device sees, at batch 1 and 5."""
    assert check_layer_starts(two, _x(5)) == 4


def _why(j, what):
    return InputError(what)


def test_two_terms_of_other_adds_are_refused_by_name():
    """A pending Add with a global pool is not rule 12t's source; a sum coarser than the conv's
    radix is refused by name."""
    j = dict(name="c", kind="conv", in_terms=2, f_x=4, geom=dict(group=1))
    sparse = SimpleNamespace(engine="sparse_cluster")
    add = dict(fa=5, fb=5, ins=["a", "b"], relu=True, name="s", p=None)
    lintwo.check_input(j, ("add", add), sparse, _why)                      # the rule's case
    with pytest.raises(InputError, match=r"2 int8 terms.*only of a residual Add.s exact sum.*layer by layer"):
        lintwo.check_input(j, ("add", dict(add, p=3)), sparse, _why)      # a global pool
    walk = SimpleNamespace(shapes={"a": (8, 8, 1)}, state={}, ops=[])
    with pytest.raises(InputError, match=r"sum at radix 3, finer than the conv's 4|at radix 3.*conv's 4"):
        lintwo.materialize_add(j, dict(add, fa=3, fb=3), walk, SimpleNamespace(p={}), _why, None)


@pytest.mark.csim
@pytest.mark.slow      # the kernel's g++ build: the quick suite is at its budget
def test_one_kernel_start_on_csim_and_the_simulated_board(two):
    """The kernel's ``Add`` loop in two passes: the layer path's bits in one start, the perf
    model's iterations, every bank within its ports; the simulated board alike."""
    check_kernel_run(two, "fixed8", _x(6))
    check_kernel_run(two, "fixed8", _x(6), board=True)


def test_the_board_sized_kernels_image_load_writes_each_replica_once_a_cycle(two_sized, tmp_path):
    """The image's value goes to every replica of its channel's bank: written at one run-time
    bank index the kSub replicas were kSub writes on each bank (II 2 derived); a copy per bank,
    its replicas at constant indices, is one write a bank a cycle (II 1)."""
    from hlsnn.engines.sparse_cluster.network import kernel as sparsekernel
    from hlsnn.network import schedule
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(str(two_sized))
    net = netmode.lower(prog, arrays)
    t = sparsekernel.render(net, tmp_path)[2]
    assert t["sized"]["net_sub"] >= 2 and t["load_iters"] == t["in_elems"]     # replicas; the plain load
    loops = {r["loop"]: r for r in schedule.network_schedule(net, config_of(prog["accels"][net.accel], "t"))}
    assert loops["LoadImage"]["ii"] == 1, loops["LoadImage"]


@pytest.mark.csim
@pytest.mark.slow
def test_one_board_sized_kernel_start_on_csim_and_the_simulated_board(two_sized):
    """The board-sized kernel keeps the one-pixel ``Add`` loop for the two passes (no ``AddPairs``)."""
    assert netmode.lower(*artifact.read(str(two_sized))).ops[-2].f["terms"] == 2
    check_kernel_run(two_sized, "fixed8", _x(6), board=True)
