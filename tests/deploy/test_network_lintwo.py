"""Rule 12t of the network mode (:mod:`hlsnn.engines.network.lintwo`): an output conv's input in
two int8 terms (``input_terms: 2``, :mod:`hlsnn.deploy.quantize.twoin`) where it reads rule 12w's resized
wide sum (k_ae_lin fixed8), which was refused by name ("takes its input in 2 int8 terms ...") and
ran layer by layer.

Net: conv1d, conv1d, ``Relu(Add)``, a linear ``half_pixel`` ``Resize`` by 2 (8 x 16), the output
conv1d (4 channels, no ReLU), Flatten; fixed8 with ``input_terms: 2`` (8 channels: the lo term at
channel 16, the kernel's 16 banks, so the padding is exercised). References: numpy's two terms of
the layer path's float64 resized tensor (twoin step 1 written out: ``hi`` rounded at ``F_x``, the
residual at ``F_x + 7``, the deployment's rounding, saturated), the layer-by-layer emulator for
the bits of the network mode and of the C-simulated kernel."""
import sys
from types import SimpleNamespace

import numpy as np
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
                         compile_onnx, f32_init, save_net, weight_drawer)

FMT = {"fixed8": "{type: fixed, accel: sparse8_pynq-z2, input_terms: 2}"}


def _net(path):
    """x (8, 8) as (C, L) -> conv1d k3 (8) Relu -> r1; conv1d k3 (8) -> c2; Relu(c2 + r1) -> s; linear
    half_pixel Resize (1, 1, 2) -> u (8, 16); conv1d k3 (4) -> c3 (the output); Flatten."""
    from onnx import helper
    inits, w = weight_drawer(63)
    nodes = [helper.make_node("Conv", ["x", w("c1_w", (8, 8, 3), 0.4), w("c1_b", 8, 0.1)], ["c1"], pads=[1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", w("c2_w", (8, 8, 3), 0.3), w("c2_b", 8, 0.1)], ["c2"], pads=[1, 1]),
             helper.make_node("Add", ["c2", "r1"], ["a"]),
             helper.make_node("Relu", ["a"], ["s"]),
             helper.make_node("Resize", ["s", "", "scales"], ["u"], mode="linear",
                              coordinate_transformation_mode="half_pixel"),
             helper.make_node("Conv", ["u", w("c3_w", (4, 8, 3), 0.3), w("c3_b", 4, 0.1)], ["c3"], pads=[1, 1]),
             helper.make_node("Flatten", ["c3"], ["y"])]
    inits.append(f32_init("scales", [1, 1, 2]))
    return save_net(path, nodes, inits, "lintwo", ("N", 8, 8), ("N", 64))


@pytest.fixture(scope="module")
def two(tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setattr(twoin, "WORTH", 0.0)        # two terms wherever input_terms: 2 allows them
    tmp = tmp_path_factory.mktemp("lintwo")
    return compile_onnx(tmp, "lintwo", _net(tmp / "lintwo.onnx"), "fixed8", formats=FMT, layout="ncl",
                        check_samples=2, calibration_samples=32)


@pytest.fixture(scope="module")
def two_sized(tmp_path_factory, monkeypatch_module):
    """The net on the board-sized kernel (``sparse8net_pynq-z2``: replicated banks, packed DSPs)."""
    monkeypatch_module.setattr(twoin, "WORTH", 0.0)
    tmp = tmp_path_factory.mktemp("lintwo_sized")
    fmt = {"fixed8": "{type: fixed, accel: sparse8net_pynq-z2, input_terms: 2}"}
    return compile_onnx(tmp, "lintwo_sized", _net(tmp / "lintwo.onnx"), "fixed8", formats=fmt, layout="ncl",
                        check_samples=2, calibration_samples=32)


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as mp:
        yield mp


def _x(n=48):
    from hlsnn.deploy.datasets import load
    return load("digits", layout="ncl").x_test[:n]


def test_the_terms_are_twoins_terms_of_the_wide_sum():
    """Rule 12t's ``hi``, ``lo`` of integers ``t`` at radix ``F + sh`` are twoin's: ``to_fixed``
    of the value at ``F``, then of the float64 residual at ``F + 7`` (every rounding, shifts below,
    at and above 7, saturated ``hi`` included)."""
    from hlsnn.deploy.quantize.quant import to_fixed
    rng = np.random.default_rng(3)
    t = np.concatenate([rng.integers(-(1 << 20), 1 << 20, 4000), [1 << 22, -(1 << 22), 0, 1, -1]]).astype(np.int64)
    for rounding in ("nearest_even", "nearest_away", "truncate"):
        for sh in (0, 3, 7, 9, 13, 20):
            f = 5
            x = np.ldexp(t.astype(np.float64), -(f + sh))
            hi_ref = to_fixed(x, f, 8, True, rounding)
            lo_ref = to_fixed(x - np.ldexp(hi_ref.astype(np.float64), -f), f + twoin.SHIFT, 8, True, rounding)
            hi, lo = lintwo.two_terms(t, sh, 8, rounding)
            np.testing.assert_array_equal(hi, hi_ref)
            np.testing.assert_array_equal(lo, lo_ref)
            if sh == 3:                              # hi saturates, and the residual's lo with it
                assert (hi == 127).any() and (hi == -128).any() and (np.abs(lo) >= 127).any()
            if sh == 13:                             # within range: |lo| <= 2**6 (truncate: 0 <= lo < 2**7)
                inside = np.abs(hi) < 127
                bound = (0, 127) if rounding == "truncate" else (-64, 64)
                assert inside.mean() > 0.9 and (lo != 0).mean() > 0.9
                assert bound[0] <= lo[inside].min() and lo[inside].max() <= bound[1]


def test_the_network_mode_reads_the_layer_paths_two_terms(two):
    """The lowered program: the output conv takes two terms (``terms`` 2, lo at channel 16 of a
    24-channel map); its input's integers are numpy's two terms of the layer path's float64
    resize, and the lo term is not all zero (the second term matters on these images)."""
    c3, conv = check_two_term_map(two, _x(), ["conv", "conv", "add", "linwide", "conv"], "u", 16)
    fx = c3["f_x"]
    assert conv.f["shift"].tolist() == (fx + twoin.SHIFT + np.asarray(c3["f_w"]) - c3["f_out"]).reshape(-1).tolist() \
        or np.all(conv.f["shift"] == fx + twoin.SHIFT + np.asarray(c3["f_w"]) - c3["f_out"])


def test_the_two_term_net_runs_in_the_emu_network_mode_with_the_layer_paths_bits(two):
    check_emu_network_run(two, "fixed8", _x(96))


@pytest.mark.csim
@pytest.mark.slow      # the kernel's g++ build (~9 CPU-s cold): the quick suite is at its budget
def test_one_kernel_start_on_csim(two):
    """The kernel's ``LinWide`` loop in two passes and the conv's ``kShl`` step: the layer path's
    bits in one start, the perf model's iterations, every bank within its ports."""
    check_kernel_run(two, "fixed8", _x(6))


@pytest.mark.csim
@pytest.mark.slow
def test_one_kernel_start_on_the_simulated_board(two):
    check_kernel_run(two, "fixed8", _x(6), board=True)


@pytest.mark.csim
@pytest.mark.slow
def test_one_board_sized_kernel_start_on_csim_and_the_simulated_board(two_sized):
    """The board-sized lanes (DSP-packed pairs) shift their accumulators at the same ``kShl`` step."""
    assert netmode.lower(*artifact.read(str(two_sized))).ops[-1].f["terms"] == 2
    check_kernel_run(two_sized, "fixed8", _x(6), board=True)


def test_the_latency_model_counts_the_two_terms(two):
    """``hlsnn perf``'s model of the one-start kernel: one start, rule 12t's logic, and the output
    conv's steps twice the one-term schedule's (the hi steps, then as many lo steps)."""
    from hlsnn.engines.sparse_cluster.network import kernel as sk
    from hlsnn.network import latency
    m = latency.model(str(two))
    assert m["path"] == "network" and m["kernel_starts"] == 1
    assert m["kernel_logic"]["lintwo"]["lut"] > 0
    net = netmode.lower(*artifact.read(str(two)))
    t = sk.tables(net, *sk.shape(net.params))
    conv_row = t["rows"][-1]
    one = sk.schedule(np.asarray(net.ops[-1].f["codes"]), t["pc"], t["pm"], t["pz"])
    assert conv_row["vals"][conv_row["names"].index("steps")] == 2 * sum(len(b) for b in one)
    assert sum(t["shl"]) == len(one)                      # one shift a block, at its first lo step


def test_the_layer_by_layer_latency_model_counts_both_passes(two):
    """Layer by layer the output conv runs once a term (``twoin.call``'s raw sums of hi, then of
    lo): four starts for three convs, as many as the emulated device sees, at batch 1 and 5."""
    assert check_layer_starts(two, _x(5)) == 4


def test_the_deploy_reports_latency_counts_both_passes(two):
    """A deployment's per-layer statistics carry the output conv's two terms; the report's latency
    section models it as two calls (the one-term convs as one) and agrees, layer by layer, with the
    assignment's ``modelled_us_by_layer``."""
    from hlsnn.config import load_config
    from hlsnn.deploy.reports import report
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.evaluation.run import deploy
    from hlsnn.network.loader import load
    path = two.parent / "lintwo.yaml"
    e = deploy(path, per_layer=True, test_samples=8)["assignments"]["fixed8"]
    f = load_deploy_config(path).formats["fixed8"]
    acc = load_config(f.accel, check_fit=False)
    with load(str(two), "emu", self_check=False, network=False) as net:    # the engine layers' input maps
        net.run(_x(1))
        execs = net._dep.execs
        shapes = {ln: ex.in_shape[1:] for ln, ex in execs.items()}
        calls = {}
        for ln, ex in execs.items():
            r = report._cycles_of(ex.layer, f, acc, shapes, e["per_layer"][ln])
            calls[ln] = r["calls"]
            assert round(float(r["us"]), 3) == e["modelled_us_by_layer"][ln]
    assert e["per_layer"]["c3"]["input_terms"] == 2 and calls == {"c1": 1, "c2": 1, "c3": 2}


def _walk(shapes, ops=()):
    return SimpleNamespace(shapes=dict(shapes), state={}, ops=list(ops))


def _why(j, what):
    return InputError(what)


def test_two_terms_of_other_inputs_are_refused_by_name():
    """Rule 12t sums two terms of a rule-12w resize only: another input's two terms, a grouped conv,
    another engine and a residual coarser than the conv's radix are refused by name."""
    j = dict(name="c", kind="conv", in_terms=2, f_x=4, geom=dict(group=1))
    sparse, shift = SimpleNamespace(engine="sparse_cluster"), SimpleNamespace(engine="shift_mac")
    lin = ("addmv", dict(add={}, moves=[], lin=dict(name="u", c=8, l=8, fy=2, fx=1), name="u"))
    with pytest.raises(InputError, match=r"2 int8 terms.*only of a residual Add.s exact sum, as it is or "
                                         r"linearly resized.*runs layer by layer"):
        lintwo.check_input(j, ("q", 4), sparse, _why)
    with pytest.raises(InputError, match=r"2 int8 terms.*shift_mac network kernel does not sum"):
        lintwo.check_input(j, lin, shift, _why)
    with pytest.raises(InputError, match=r"grouped conv"):
        lintwo.check_input(dict(j, geom=dict(group=2)), lin, sparse, _why)
    lintwo.check_input(j, lin, sparse, _why)                               # the rule's case
    add = dict(fa=1, fb=1, ins=["a", "b"], relu=True, name="s", p=None)
    with pytest.raises(InputError, match=r"radix 3, finer than the conv's 4|at radix 3.*conv's 4"):
        lintwo.materialize(j, dict(lin[1], add=add), _walk({}), SimpleNamespace(p={}), _why, None)


def test_the_constants_are_the_layer_paths_and_the_kernels(two):
    """Rule 12t's 7 bits are twoin's; the program's bank count is the kernel's shape (the compiled
    net's config, and a board-sized one)."""
    from hlsnn.engines.sparse_cluster.network import kernel as sk
    from hlsnn.engines.sparse_cluster.network.lower import SparseRules
    assert lintwo.SHIFT == twoin.SHIFT
    p = netmode.lower(*artifact.read(str(two))).params
    sized = dict(p, net_lanes=16, net_banks=8, net_sub=2, net_pack=8)
    assert [SparseRules.banks(q) for q in (p, sized)] == [sk.shape(q)[1] for q in (p, sized)] == [16, 8]
