"""More of the network kernels' template branches under the strict C-simulation and both
``ap_axi_sdata.h`` models, in a second small network per engine (the first:
tests/deploy/test_network_branches.py). Their own tests run them on the fast C-simulation:

* a Concat with the graph input (netmove rule 8i, :mod:`hlsnn.engines.network.joins.catinput`);
* a ``HardSwish`` of a residual sum: a table on every engine, on BFP pairs rule 9f's table of
  calibrated codes (:mod:`hlsnn.engines.bfp_systolic.network.gate`);
* an ``AveragePool`` with ``count_include_pad = 0`` (rule 11u, :mod:`hlsnn.engines.network.pools.uncounted`:
  the ``kPoolScale`` ROM in the pool loop);
* a linear ``Resize`` with ``align_corners`` (rule 14, :mod:`hlsnn.engines.network.pools.cornerresize`):
  on the integer engines a mean over 49 divided in the pool loop (``pool_div``) and the global pool
  over 6 x 6 after an Add divided in the Add loop (``add_div``, both rule 13); on BFP pairs (the
  kernel divides by one odd divisor) a resize 2 -> 4, a mean over 9 (rule 6b, descriptor ``mdiv``)
  and a Concat of it with a conv's map scaled to a mean over 9 (rule 6c);
* on BFP pairs, all-zero patches (the digits' blank borders) taking the descriptor's ``xz``
  (rule 3).

The strict C-simulation (``hlsnn/strict.h``) must give the layer path's bits (the layer-by-layer
compiled network on the emulator) in one start, the loops' iterations the perf model's (bfp8 in
the quick suite, ~25 s: its branches' own C-simulation cases are slow; the integer engines' in
the slow one: the quick suite runs their branches on the fast C-simulation). CI runs the strict
case of every engine under AddressSanitizer and UBSan too (``.ci/sanitize``). The rendered kernels
compile against the fallback ap_types and both header models, with and without their sim-only
blocks (slow)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from netfixtures import ENGINE, FORMATS, check_strict_kernel_run, compiled_per_format, save_net  # noqa: E402

KERNEL = {"bfp8": "bfpkernel", "twohot": "netkernel", "fixed8": "sparsekernel"}


def branches2_model(path, bfp, seed=53):
    """x (N, 1, 8, 8): 3x3 conv 3 + Relu (small weights: within x's range) = r; Concat([r, x])
    (rule 8i); 3x3 conv 4 + Relu = a; 3x3 conv of a + a, HardSwish = h; AveragePool 3x3 stride 1
    padded by 1, count_include_pad 0 = u; 3x3 conv stride 2 + Relu = b (4 x 4); integer engines:
    Resize align_corners x2 of b (4 -> 8, a mean over 49), Concat with h, an unpadded 3x3 conv +
    Relu = c (6 x 6); ``bfp``: a 3x3 conv stride 2 of b (2 x 2), its Resize (2 -> 4, a mean over 9),
    Concat with b, a padded 3x3 conv = c (4 x 4); then a 3x3 conv of c + c, Relu, the global pool
    (over 36 on the integer engines), Gemm to 10 logits."""
    r = np.random.default_rng(seed)
    inits, nodes = [], []

    def init(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, np.float32), name))

    def conv(x, y, cin, cout, k, pad, stride=1, scale=0.6, act="Relu"):
        init(y + "_w", r.normal(0, scale / np.sqrt(cin * k * k), (cout, cin, k, k)))
        init(y + "_b", r.normal(0, 0.05, cout))
        nodes.append(helper.make_node("Conv", [x, y + "_w", y + "_b"], [y + "_c" if act else y], pads=[pad] * 4,
                                      strides=[stride] * 2))
        if act:
            nodes.append(helper.make_node(act, [y + "_c"], [y]))
    conv("x", "r", 1, 3, 3, 1, scale=0.15)
    nodes.append(helper.make_node("Concat", ["r", "x"], ["cat0"], axis=1))
    conv("cat0", "a", 4, 4, 3, 1)
    conv("a", "a2", 4, 4, 3, 1, act=None)
    nodes += [helper.make_node("Add", ["a2", "a"], ["s0"]), helper.make_node("HardSwish", ["s0"], ["h"]),
              helper.make_node("AveragePool", ["h"], ["u"], kernel_shape=[3, 3], pads=[1] * 4, count_include_pad=0)]
    conv("u", "b", 4, 4, 3, 1, stride=2)
    lo, skip = ("b2", "b") if bfp else ("b", "h")
    if bfp:
        conv("b", "b2", 4, 4, 3, 1, stride=2)
    init("scales", [1, 1, 2, 2])
    nodes += [helper.make_node("Resize", [lo, "", "scales"], ["up"], mode="linear",
                               coordinate_transformation_mode="align_corners"),
              helper.make_node("Concat", [skip, "up"], ["k"], axis=1)]
    conv("k", "c", 8, 4, 3, 1 if bfp else 0)
    conv("c", "d", 4, 4, 3, 1, act=None)
    nodes += [helper.make_node("Add", ["d", "c"], ["s1"]), helper.make_node("Relu", ["s1"], ["s1r"]),
              helper.make_node("GlobalAveragePool", ["s1r"], ["p"]), helper.make_node("Flatten", ["p"], ["f"])]
    init("wd", r.normal(0, 0.5, (10, 4)))
    init("bd", r.normal(0, 0.1, 10))
    nodes.append(helper.make_node("Gemm", ["f", "wd", "bd"], ["y"], transB=1))
    return save_net(path, nodes, inits, "branches2", ["N", 1, 8, 8])


@pytest.fixture(scope="module")
def branches2(tmp_path_factory):
    """fmt -> the compiled :func:`branches2_model`, each compiled once for the module."""
    return compiled_per_format(tmp_path_factory, "branches2", lambda p, fmt: branches2_model(p, bfp=fmt == "bfp8"))


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


def _has_every_branch(run, fmt):
    """The lowered program holds each branch this module is about (a lowering change that drops
    one fails here, not silently)."""
    net = run.network
    ops = {op.out: op for op in net.ops}
    cats = [op for op in net.ops if op.kind == "concat"]
    assert net.aliases.get(cats[0].ins[1], cats[0].ins[1]) == net.input["name"], cats[0].ins     # rule 8i
    hs, = [op for op in net.ops if op.kind == "lut"]
    assert hs.f["fn"] == "HardSwish" and ops[hs.ins[0]].kind == "add"
    pools = [op for op in net.ops if op.kind == "avgpool"]
    assert [op.f.get("uncounted") for op in pools] == [36, None]                                  # rule 11u
    gap, = [op for op in net.ops if op.kind == "add" and op.f["gap"]]
    if fmt == "bfp8":
        assert not hs.f.get("exact")                                # rule 9f: a table of codes, not 9c
        assert any(j.get("bfp_table") for j in run.program["layers"] if j.get("op") == "HardSwish")
        assert [op.f["mdiv"] for op in pools] == [9, 9]            # rule 6b (36 = 4 x 9; the resize's 9)
        assert [op.f.get("mscale") for op in cats] == [None, [9, 1]]       # rule 6c: b as a mean over 9
        assert {op.f.get("mdiv", 1) for op in net.ops if op.kind == "conv"} == {1, 9}
    else:
        assert [op.f["div"]["n"] for op in pools] == [36, 49]     # 11u's L, the resize's 7 x 7 (pool_div)
        assert gap.f["div"]["n"] == 36                            # the global pool over 6 x 6 (add_div)


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_branches_run_in_the_emu_network_mode_with_the_layer_paths_bits(branches2, fmt):
    x = _x(48)
    run = hlsnn.load(branches2(fmt), "emu", network=True)
    assert run.network is not None and run.network.engine == ENGINE[fmt]
    _has_every_branch(run, fmt)
    want = hlsnn.load(branches2(fmt), "emu", network=False)(x)
    assert np.abs(want).max() > 0
    np.testing.assert_array_equal(run(x), want)


@pytest.mark.csim
@pytest.mark.strict_csim
# every engine's strict case is slow (the README's 5 minutes); .ci/sanitize runs all three
@pytest.mark.parametrize("fmt", [pytest.param("bfp8", marks=pytest.mark.slow), pytest.param("twohot", marks=pytest.mark.slow),
                                 pytest.param("fixed8", marks=pytest.mark.slow)])
def test_the_branches_pass_the_strict_csim_in_one_start(branches2, fmt):
    """One start per batch on the strict library: the layer path's bits, the loops' iterations
    the perf model's, every bank within its ports, and each branch rendered (the integer
    engines: ``MeanDiv`` in the pool and the Add loops, ``kPoolScale``; BFP: rule 6b's divisor 9,
    rule 6c's Concat product, ``kPoolScale``, the table ROM, all-zero patches taking ``xz``)."""
    x = _x(6)
    board, cpp, h = check_strict_kernel_run(branches2(fmt), fmt, x)
    k = board._kernel
    assert "kPoolScale[" in cpp and "HLSNN_ITER(NetLut" in cpp
    assert k.counters["NetLut"][0] == len(x) * -(-4 // k.tables["pc"]) * 64   # the HardSwish of 4 x 8 x 8: Q channels a cycle
    if fmt == "bfp8":
        from hlsnn.engines.network.perf import _f
        assert "kMeanDiv = 9;" in h and "Concat(d, act, sc, status);" in cpp     # 6b, 6c's product
        rows = k.tables["rows"]
        stem = next(r for r in rows if _f(r, "op") == 0)
        assert _f(stem, "xz") != 0                               # rule 3: not the exponent floor, so
        pad = np.pad(x.reshape(len(x), 8, 8), ((0, 0), (1, 1), (1, 1)))     # the bits check the xz path:
        win = np.lib.stride_tricks.sliding_window_view(pad, (3, 3), axis=(1, 2))
        assert (np.abs(win).sum(axis=(-1, -2)) == 0).any()       # the stem sees all-zero patches
    else:
        assert cpp.count("MeanDiv(") == 3                      # its definition, the pool and the Add loops
        assert k.tables["add_div"] and k.tables["pool_div"] and k.tables["div_bits"] > 0
        assert f"kDivBits = {k.tables['div_bits']};" in h


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_branches_compile_against_both_header_models(branches2, tmp_path, fmt):
    """The rendered kernel and bridge under the fallback ap_types and both ap_axi_sdata.h models,
    the __SYNTHESIS__ rule, and the kernel stripped of its sim-only blocks (compile-only)."""
    from test_network_kernel import compiles_against_both_header_models
    compiles_against_both_header_models(branches2(fmt), KERNEL[fmt], tmp_path)
