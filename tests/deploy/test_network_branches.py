"""The network kernels' newest template branches under the strict C-simulation and both
``ap_axi_sdata.h`` models, in one small network per engine (issue 52's branches, which their own
tests run on the fast C-simulation only):

* a host prefix (:mod:`hlsnn.deploy.lower.netprefix`): an input ``BatchNormalization`` on the host;
* a chained Add (:mod:`hlsnn.engines.network.joins.chain`): block 2's Add reads block 1's sum, kept
  exactly in the shortcut buffer (``sc_add``; ``kScBits`` wide on the integer engines);
* a unary table (:mod:`hlsnn.engines.network.tables`, the Lut loop's ROM): ``Tanh``;
* a product of two maps (rules 10/10b, ``Gate`` with ``same``): ``h * tanh(g)`` of two convs;
* a mean over a count that is not a power of two on the integer engines (rule 13's ``MeanDiv``,
  ``kDivBits``): the global pool over 6 x 6 pixels; bfp_systolic (no such rule on pairs) pools
  8 x 8.

The strict C-simulation (``hlsnn/strict.h``: bounded FIFOs, processes as threads, read-after-write
distances, bank ports) must pass with the layer path's bits (the layer-by-layer compiled network
on the emulator, the reference of every network-kernel test) in one start, and the loops'
iterations must be the perf model's. CI also runs this module under AddressSanitizer and UBSan
(``.ci/sanitize``: an undefined or overflowing operation in the kernel aborts). The same rendered
kernels compile (``-fsyntax-only``) against the fallback ap_types and both header models, with
and without their sim-only blocks (slow, as every header-model check)."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from netfixtures import ENGINE, FORMATS, check_strict_kernel_run, compiled_per_format, save_net  # noqa: E402

KERNEL = {"bfp8": "bfpkernel", "twohot": "netkernel", "fixed8": "sparsekernel"}


def _init(name, a):
    return numpy_helper.from_array(np.asarray(a, np.float32), name)


def branches_model(path, pow2_mean):
    """x (N, 1, 8, 8) -> BatchNormalization (host) -> 1x1 conv 4 + Relu = a; 3x3 conv + a, Relu =
    s1; 3x3 conv + s1, Relu = s2 (the chained Add); 1x1 convs h and g of s2, h * Tanh(g) = m; then (integer
    engines) a 3x3 conv to 6 x 6 + Relu and the global pool over 36 pixels, or (``pow2_mean``) the
    global pool of m over 64; Gemm to 10 logits."""
    r = np.random.default_rng(52)
    c = 4
    inits = [_init("bn_s", [1.7]), _init("bn_b", [-0.4]), _init("bn_m", [0.3]), _init("bn_v", [0.2])]
    nodes = [helper.make_node("BatchNormalization", ["x", "bn_s", "bn_b", "bn_m", "bn_v"], ["n"], epsilon=1e-5)]

    def conv(x, y, cin, k, pad, scale=0.6):
        inits.extend([_init(y + "_w", r.normal(0, scale / np.sqrt(cin * k * k), (c, cin, k, k))),
                      _init(y + "_b", r.normal(0, 0.1, c))])
        nodes.append(helper.make_node("Conv", [x, y + "_w", y + "_b"], [y], pads=[pad] * 4))
        return y
    nodes.append(helper.make_node("Relu", [conv("n", "c0", 1, 1, 0, 1.5)], ["a"]))
    nodes += [helper.make_node("Add", [conv("a", "c1", c, 3, 1), "a"], ["s1p"]), helper.make_node("Relu", ["s1p"], ["s1"])]
    nodes += [helper.make_node("Add", [conv("s1", "c2", c, 3, 1), "s1"], ["s2p"]), helper.make_node("Relu", ["s2p"], ["s2"])]
    nodes += [helper.make_node("Tanh", [conv("s2", "g", c, 1, 0)], ["t"]),
              helper.make_node("Mul", [conv("s2", "h", c, 1, 0), "t"], ["m"])]
    if pow2_mean:
        last = "m"
    else:
        nodes.append(helper.make_node("Relu", [conv("m", "c3", c, 3, 0)], ["c3r"]))
        last = "c3r"
    nodes += [helper.make_node("GlobalAveragePool", [last], ["p"]), helper.make_node("Flatten", ["p"], ["f"])]
    inits += [_init("wd", r.normal(0, 0.5, (10, c))), _init("bd", r.normal(0, 0.1, 10))]
    nodes.append(helper.make_node("Gemm", ["f", "wd", "bd"], ["y"], transB=1))
    return save_net(path, nodes, inits, "branches", ["N", 1, 8, 8])


@pytest.fixture(scope="module")
def branches(tmp_path_factory):
    """fmt -> compiled model, each compiled once for the module."""
    return compiled_per_format(tmp_path_factory, "branches", lambda p, fmt: branches_model(p, pow2_mean=fmt == "bfp8"))


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


def _has_every_branch(net, fmt):
    """The lowered program holds each branch this module is about (so a lowering change that
    drops one fails here, not silently)."""
    kinds = [op.kind for op in net.ops]
    adds = [op for op in net.ops if op.kind == "add"]
    chained = [op for op in adds if any(op.out in o.ins for o in adds if o is not op)]
    assert chained, kinds
    assert [op.f.get("fn") for op in net.ops if op.kind == "lut"] == ["Tanh"], kinds
    gates = [op for op in net.ops if op.kind == "gate"]
    assert len(gates) == 1 and gates[0].f["same"], kinds
    assert [e["op"] for e in net.host_before] == ["BatchNormalization"]
    divs = [op.f["div"]["n"] for op in net.ops if "div" in op.f]
    assert divs == ([] if fmt == "bfp8" else [36]), divs


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_branches_run_in_the_emu_network_mode_with_the_layer_paths_bits(branches, fmt):
    x = _x(48)
    net = hlsnn.load(branches(fmt), "emu", network=True)
    assert net.network is not None and net.network.engine == ENGINE[fmt]
    _has_every_branch(net.network, fmt)
    want = hlsnn.load(branches(fmt), "emu", network=False)(x)
    assert np.abs(want).max() > 0
    np.testing.assert_array_equal(net(x), want)


@pytest.mark.csim
@pytest.mark.strict_csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_branches_pass_the_strict_csim_in_one_start(branches, fmt):
    """One start per batch on the strict library: the layer path's bits, the loops' iterations
    the perf model's, every bank within its ports, and each branch rendered (``div_bits``,
    ``sc_add`` with ``kScBits``, the table ROM, the map product)."""
    n = 6
    board, cpp, h = check_strict_kernel_run(branches(fmt), fmt, _x(n))
    k = board._kernel
    # the Gate loop: ceil(C / Q) * H * W products of the two 4 x 8 x 8 maps a batch image (the
    # quick csim case of the map product: test_network_mulmap's glu rows are slow); the Lut loop
    # one pixel a cycle
    assert k.counters["NetGate"][0] == n * -(-4 // k.tables["pc"]) * 64
    assert k.counters["NetLut"][0] > 0
    assert "#pragma HLS DEPENDENCE variable = sc inter false" in cpp     # sc_add
    assert "HLSNN_ITER(NetLut" in cpp and "HLSNN_ITER(NetGate" in cpp   # the table ROM, the map product
    if fmt != "bfp8":
        assert k.tables["div_bits"] > 0 and "MeanDiv(" in cpp and f"kDivBits = {k.tables['div_bits']};" in h
        chained = [op for op in board.network.ops if op.kind == "add" and op.f.get("out_bits")]
        assert k.tables["sc_bits"] == max(op.f["out_bits"] for op in chained) > 8     # the sum's words
        assert f"kScBits = {k.tables['sc_bits']};" in h


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_the_branches_compile_against_both_header_models(branches, tmp_path, fmt):
    """The rendered kernel and bridge under the fallback ap_types and both ap_axi_sdata.h models,
    the __SYNTHESIS__ rule, and the kernel stripped of its sim-only blocks (compile-only)."""
    from test_network_kernel import compiles_against_both_header_models
    compiles_against_both_header_models(branches(fmt), KERNEL[fmt], tmp_path)
