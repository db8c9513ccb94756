"""CBAM's spatial attention (Woo et al. 2018) as PyTorch writes it:
``x * sigmoid(conv7x7(cat([x.mean(1, keepdim=True), x.amax(1, keepdim=True)], 1)))``, ONNX
``ReduceMean`` / ``ReduceMax`` over axis 1 (an attribute at opset 17, an input at 18), a
``Concat``, a ``Conv(2 -> 1, 7x7, pads 3)``, a ``Sigmoid`` and a ``Mul`` whose 1 x H x W gate
broadcasts over the channels. The layer path imports and deploys it (the reductions are
:mod:`hlsnn.deploy.run.hostextra`'s ``ReduceAxes``, float64 of exact values that the 7x7 conv
requantizes); the network path runs it in one start on every engine (reduce rule 4c: the channel mean
and max as a transpose, a pool per pixel and a transpose back; gate rule 10p: the 1 x H x W gate; on BFP
pairs :mod:`hlsnn.engines.bfp_systolic.network.reduce`)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from netfixtures import FORMATS, compile_onnx, save_net, weight_drawer  # noqa: E402


def spatial_net(path, c=8, opset=17, seed=23, se=False):
    """conv 3x3 (1 -> c, 8x8) + Relu = h; ``h * Sigmoid(conv7x7(cat(mean_c(h), max_c(h))))``;
    conv 3x3 stride 2 + Relu, GlobalAveragePool, Gemm to 10; weights drawn from ``seed``; ``se``:
    a channel gate first (CBAM's order), ``h = h0 * Sigmoid(conv1x1(GlobalAveragePool(h0)))``."""
    from onnx import helper, numpy_helper
    init, w = weight_drawer(seed)
    n = helper.make_node
    if opset >= 18:
        init.append(numpy_helper.from_array(np.array([1], np.int64), "ax"))
        red = [n(op, ["h", "ax"], [o], keepdims=1) for op, o in (("ReduceMean", "m"), ("ReduceMax", "x1"))]
    else:
        red = [n(op, ["h"], [o], axes=[1], keepdims=1) for op, o in (("ReduceMean", "m"), ("ReduceMax", "x1"))]
    nodes = [n("Conv", ["x", w("c1_w", (c, 1, 3, 3), 0.6), w("c1_b", (c,), 0.1)], ["c1"], pads=[1, 1, 1, 1]),
             *([n("Relu", ["c1"], ["h0"]), n("GlobalAveragePool", ["h0"], ["ga"]),
                n("Conv", ["ga", w("g_w", (c, c, 1, 1), 0.3), w("g_b", (c,), 0.1)], ["gc"]),
                n("Sigmoid", ["gc"], ["gs"]), n("Mul", ["h0", "gs"], ["h"])] if se else [n("Relu", ["c1"], ["h"])]),
             *red, n("Concat", ["m", "x1"], ["mx"], axis=1),
             n("Conv", ["mx", w("s_w", (1, 2, 7, 7), 0.15), w("s_b", (1,), 0.1)], ["sc"], pads=[3, 3, 3, 3]),
             n("Sigmoid", ["sc"], ["s"]), n("Mul", ["h", "s"], ["y"]),
             n("Conv", ["y", w("c2_w", (8, c, 3, 3), 0.3), w("c2_b", (8,), 0.1)], ["c2"], strides=[2, 2],
               pads=[1, 1, 1, 1]),
             n("Relu", ["c2"], ["r2"]), n("GlobalAveragePool", ["r2"], ["gp"]), n("Flatten", ["gp"], ["f"]),
             n("Gemm", ["f", w("d_w", (10, 8), 0.5), w("d_b", (10,), 0.1)], ["out"], transB=1)]
    return save_net(path, nodes, init, "cbam_spatial", ["N", 1, 8, 8], y="out", opset=opset)


def _x(n):
    return datasets.load("digits", layout="nchw").x_test[:n]


def _ort(path, x):
    sess = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x.astype(np.float32)})[0]


@pytest.mark.parametrize("c,opset", [(8, 17), (6, 18)])
def test_spatial_attention_imports_as_onnxruntime_computes_it(tmp_path, c, opset):
    """The imported float graph (channel mean and max over axis 1, the 1 x H x W gate broadcast
    over C) is onnxruntime's, with the axes as an attribute (opset 17) and as an input (18)."""
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import float_forward
    path = spatial_net(tmp_path / "sp.onnx", c=c, opset=opset)
    net = load_onnx(path)
    red = [la for la in net.layers if la.op == "ReduceAxes"]
    assert sorted(la.attrs["fn"] for la in red) == ["ReduceMax", "ReduceMean"]
    assert all([int(v) for v in la.attrs["axes"]] == [1] for la in red)
    x = _x(16)
    ref = _ort(path, x)
    np.testing.assert_allclose(float_forward(net, x), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_spatial_attention_deploys_layer_by_layer_and_on_the_network_path(tmp_path, fmt):
    """Each format deploys it on emu near onnxruntime's outputs (the same arg max on most
    digits); the network mode gives the layer path's bits (reduce rule 4c, gate rule 10p; on
    BFP pairs the same ops on (m, e) elements)."""
    path = spatial_net(tmp_path / "sp.onnx")
    art = compile_onnx(tmp_path, "sp", path, fmt, formats={fmt: FORMATS[fmt]}, check_samples=2,
                       calibration_samples=32)
    x = _x(64)
    ref = _ort(path, x)
    got = hlsnn.load(art, "emu", network=False)(x)
    assert got.shape == ref.shape
    assert np.abs(got - ref).max() <= 0.1 * np.abs(ref).max()
    assert (got.argmax(1) == ref.argmax(1)).mean() >= 0.9
    net = hlsnn.load(art, "emu", network=True)
    np.testing.assert_array_equal(net(x), got)
    kinds = [op.kind for op in net.network.ops]
    assert kinds.count("transpose") == 4 and "avgpool" in kinds and "maxpool" in kinds


@pytest.mark.parametrize("c", [8, 6])
def test_channel_mean_and_max_ops_are_the_exact_values_rounded_once(tmp_path, c):
    """Rule 4c's ops on integers (shift_mac): the max's 1 x H x W map is each pixel's largest
    channel code (numpy's max), and the mean's (C = 8: a power of two; C = 6: rule 13's
    division) is each pixel's exact channel mean ``sum / C`` rounded once, at one radix for all
    pixels, with the deployment's rounding (a Fraction reference)."""
    from fractions import Fraction
    from hlsnn.deploy.lower.program import run_ints
    from netfixtures import round_array, round_fraction
    path = spatial_net(tmp_path / "sp.onnx", c=c, opset=17 if c == 8 else 18)
    art = compile_onnx(tmp_path, "sp", path, "twohot", formats={"twohot": FORMATS["twohot"]}, check_samples=2,
                       calibration_samples=16)
    net = hlsnn.load(art, "emu", network=True).network
    inp = net.input
    xq = np.clip(round_array(_x(4).astype(np.float64) * 2.0 ** inp["f"], inp["rounding"]), -128, 127)
    _, env = run_ints(net, xq.astype(np.int64), keep=True)
    cat = [op for op in net.ops if op.kind == "concat"][0]
    assert cat.f["shifts"] == [0, 0]
    h = np.asarray(env["h"]).reshape(4, c, 64)
    mean, mx = (np.asarray(env[net.aliases.get(t, t)]).reshape(4, 64) for t in
                [op.out for op in net.ops if op.kind == "transpose" and op.name.endswith("/back")])
    if (mean == h.max(1)).all():
        mean, mx = mx, mean
    np.testing.assert_array_equal(mx, h.max(1))
    sums = h.sum(1)
    fits = [k for k in range(-8, 9) if all(
        int(mean.flat[i]) == max(-128, min(127, round_fraction(Fraction(int(sums.flat[i]), c) * 2 ** k, inp["rounding"])))
        for i in range(sums.size))]
    assert len(fits) == 1
    assert len(set(mean.flat)) > 4                      # not a constant map


def test_perf_counts_a_same_padded_7x7_conv_beyond_max_ksize_as_the_runners_blocks():
    """CBAM's ``Conv2d(2, 1, 7, padding=3)`` on sparse8_pynq-z2 (max_ksize 5): the runner's executor
    takes it as blocks of taps (:mod:`hlsnn.deploy.run.blocks`, one raw call each: 2 input channels and
    1 output fit one call), so the layer-by-layer cycle model counts one call per block (it used
    to refuse the layer: "kernel size k = 7 exceeds max_ksize = 5")."""
    from conftest import ROOT
    from hlsnn.config import load_config
    from hlsnn.deploy.config import Assignment, FormatSpec
    from hlsnn.deploy.importer.graph import Layer, Network
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.measure.layers import layer_kernel_cycles
    from hlsnn.runtime import Accelerator
    cfg_path = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"
    rng = np.random.default_rng(3)
    layer = Layer("sp", "conv", ["x"], "y", w=rng.normal(0, 0.2, (1, 2, 7, 7)), b=rng.normal(0, 0.1, 1),
                  relu=False, pads=(3, 3, 3, 3), strides=(1, 1))
    net = Network(name="n", path="", input="x", input_shape=(None, 2, 4, 4), output="y", layers=[layer])
    acc = Accelerator(cfg_path, "emu")
    try:
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", "fixed", "a")}, {"a": acc})
        blocks = dep.execs["sp"].blocks
    finally:
        acc.close()
    assert blocks is not None and len(blocks) == 4             # 7 = 5 + 2 rows, and columns: 2 x 2 blocks
    kc = layer_kernel_cycles(layer, load_config(cfg_path), 1, in_hw=(4, 4))
    assert len(kc.per_call) == len(blocks)


def gated_net(path, c=8, rev=False, seed=5):
    """The spatial half with the reductions replaced by two 1x1 convs ``C -> 1`` (what the network
    path lowers today): conv 3x3 + Relu = h; ``s = Sigmoid(conv7x7(cat(conv1x1_a(h), conv1x1_b(h))))``,
    a 1 x H x W map; ``h * s`` (``s * h`` with ``rev``); conv 3x3 stride 2, pool, Gemm."""
    from onnx import helper
    init, w = weight_drawer(seed)
    n = helper.make_node
    nodes = [n("Conv", ["x", w("c1_w", (c, 1, 3, 3), 0.6), w("c1_b", (c,), 0.1)], ["c1"], pads=[1, 1, 1, 1]),
             n("Relu", ["c1"], ["h"]),
             n("Conv", ["h", w("a_w", (1, c, 1, 1), 0.3), w("a_b", (1,), 0.1)], ["m"]),
             n("Conv", ["h", w("b_w", (1, c, 1, 1), 0.3), w("b_b", (1,), 0.1)], ["x1"]),
             n("Concat", ["m", "x1"], ["mx"], axis=1),
             n("Conv", ["mx", w("s_w", (1, 2, 7, 7), 0.15), w("s_b", (1,), 0.1)], ["sc"], pads=[3, 3, 3, 3]),
             n("Sigmoid", ["sc"], ["s"]), n("Mul", ["s", "h"] if rev else ["h", "s"], ["y"]),
             n("Conv", ["y", w("c2_w", (8, c, 3, 3), 0.3), w("c2_b", (8,), 0.1)], ["c2"], strides=[2, 2],
               pads=[1, 1, 1, 1]),
             n("Relu", ["c2"], ["r2"]), n("GlobalAveragePool", ["r2"], ["gp"]), n("Flatten", ["gp"], ["f"]),
             n("Gemm", ["f", w("d_w", (10, 8), 0.5), w("d_b", (10,), 0.1)], ["out"], transB=1)]
    return save_net(path, nodes, init, "spatial_gate", ["N", 1, 8, 8], y="out")


def _gate_op(art):
    net = hlsnn.load(art, "emu", network=True).network
    return [op for op in net.ops if op.kind == "gate"]


@pytest.mark.parametrize("fmt,rev", [("twohot", False), ("fixed8", True), ("bfp8", True)])
def test_spatial_gate_and_the_concat_of_two_1xHxW_maps_run_on_the_network_path(tmp_path, fmt, rev):
    """Rule 10p (hlsnn.engines.network.gate): a C x H x W map times a 1 x H x W map, and the
    Concat of two 1 x H x W maps before the 7x7 conv, give the layer path's bits in the network
    mode (emu); the gate op is the spatial one, its map the C-channel operand whichever side of
    the Mul it is; onnxruntime's outputs are near."""
    path = gated_net(tmp_path / "g.onnx", rev=rev)
    art = compile_onnx(tmp_path, "g", path, fmt, formats={fmt: FORMATS[fmt]}, check_samples=2,
                       calibration_samples=16)
    x = _x(32)
    lay = hlsnn.load(art, "emu", network=False)(x)
    np.testing.assert_array_equal(hlsnn.load(art, "emu", network=True)(x), lay)
    (g,) = _gate_op(art)
    assert g.f["pix"] and not g.f["same"] and g.f["c"] == 8 and g.f["hw"] == 64
    ref = _ort(path, x)
    assert (lay.argmax(1) == ref.argmax(1)).mean() >= 0.8


@pytest.mark.slow      # two g++ builds of the network kernel and the simulated board
@pytest.mark.parametrize("fmt,c,rev", [("twohot", 8, False), ("fixed8", 20, True), ("twohot", 20, True),
                                       ("fixed8", 8, False), ("bfp8", 20, True)])
def test_spatial_gate_kernel_on_csim_and_the_simulated_board(tmp_path, fmt, c, rev):
    """The Gate loop's spatial mode (d.pix: every bank takes bank 0's word at the pixel) gives the
    layer path's bits on C-simulation and the simulated board in one start, the loops' counts the
    perf model's; C = 20 spans several channel blocks."""
    from netfixtures import check_kernel_run
    art = compile_onnx(tmp_path, "g", gated_net(tmp_path / "g.onnx", c=c, rev=rev), fmt,
                       formats={fmt: FORMATS[fmt]}, check_samples=2, calibration_samples=16)
    check_kernel_run(art, fmt, _x(3), board=True)


@pytest.mark.slow      # g++ builds of the network kernel and the simulated board
@pytest.mark.parametrize("fmt,c", [("twohot", 8), ("fixed8", 6), ("twohot", 6), ("fixed8", 8), ("bfp8", 8)])
def test_spatial_attention_kernel_on_csim_and_the_simulated_board(tmp_path, fmt, c):
    """The whole spatial attention (channel mean and max by reduce rule 4c: the Transpose loop,
    also into the shortcut buffer for the concat's earlier part; the 7x7 conv; the spatial gate)
    gives the layer path's bits on C-simulation and the simulated board in one start."""
    from netfixtures import check_kernel_run
    art = compile_onnx(tmp_path, "sp", spatial_net(tmp_path / "sp.onnx", c=c, opset=17 if c == 8 else 18), fmt,
                       formats={fmt: FORMATS[fmt]}, check_samples=2, calibration_samples=16)
    check_kernel_run(art, fmt, _x(3), board=True)


@pytest.mark.parametrize("fmt", ["twohot", "fixed8", "bfp8"])
def test_spatial_attention_after_a_channel_gate_takes_rule_10c_codes(tmp_path, fmt):
    """CBAM's order (channel gate, then the spatial attention): the channel mean and max read the
    channel gate's product as rule 10c's codes at a calibrated radix (hlsnn.deploy.run.gatecodes, the
    layer path; the compiled host layer's gate_in), which the network mode materializes before
    rule 4c: the same bits; the layer path stays near onnxruntime's outputs. On BFP pairs the
    reductions read the product's exact pairs (no codes) and the spatial gate takes rule 10c's."""
    path = spatial_net(tmp_path / "sp.onnx", se=True)
    art = compile_onnx(tmp_path, "sp", path, fmt, formats={fmt: FORMATS[fmt]}, check_samples=2,
                       calibration_samples=32)
    x = _x(64)
    lay = hlsnn.load(art, "emu", network=False)(x)
    ref = _ort(path, x)
    assert (lay.argmax(1) == ref.argmax(1)).mean() >= 0.85
    net = hlsnn.load(art, "emu", network=True)
    np.testing.assert_array_equal(net(x), lay)
    assert sum(op.kind == "transpose" for op in net.network.ops) == 4
    if fmt == "bfp8":
        made = {op.out: op for op in net.network.ops}
        pix = [op for op in net.network.ops if op.kind == "transpose" and op.name.endswith("/pix")]
        assert [made[op.ins[0]].kind for op in pix] == ["gate", "gate"]        # the channel gate's pairs
        (g,) = [op for op in net.network.ops if op.kind == "gate" and op.f["pix"]]
        assert {made[t].name for t in g.ins} == {"h_codes", "s"}             # rule 10c's codes, the table
        pytest.importorskip("clang.cindex")      # the derived II (perf/schedule.py) of every loop: 1
        from hlsnn.network import artifact, schedule
        from hlsnn.network.loader import config_of
        prog, _ = artifact.read(art)
        rows = schedule.network_schedule(net.network, config_of(prog["accels"][net.network.accel], "test"))
        assert rows and all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]


@pytest.mark.slow      # g++ builds of the network kernel and the simulated board
@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])        # bfp8: the quick strict case below
def test_spatial_attention_after_a_channel_gate_on_csim_and_the_simulated_board(tmp_path, fmt):
    """As above, on C-simulation and the simulated board in one start."""
    from netfixtures import check_kernel_run
    art = compile_onnx(tmp_path, "sp", spatial_net(tmp_path / "sp.onnx", se=True, c=6, opset=18), fmt,
                       formats={fmt: FORMATS[fmt]}, check_samples=2, calibration_samples=16)
    check_kernel_run(art, fmt, _x(3), board=True)


@pytest.mark.parametrize("c", [8, 6])
def test_channel_mean_and_max_on_bfp_pairs_are_the_exact_values(tmp_path, c):
    """Rule 4c on BFP pairs (hlsnn.engines.bfp_systolic.network.reduce): the max's 1 x H x W map
    holds each pixel's largest channel value, and the mean's each pixel's exact channel mean
    ``sum / C`` (C = 8: the pair's value; C = 6: the pair read as over 3, rule 6b, which the
    7x7 conv does through the Concat's rule 6c), against a Fraction reference of the conv's pairs."""
    from fractions import Fraction
    from hlsnn.engines.bfp_systolic.network import lower as netbfp
    path = spatial_net(tmp_path / "sp.onnx", c=c, opset=17 if c == 8 else 18)
    art = compile_onnx(tmp_path, "sp", path, "bfp8", formats={"bfp8": FORMATS["bfp8"]}, check_samples=2,
                       calibration_samples=16)
    net = hlsnn.load(art, "emu", network=True).network
    _, env = netbfp.run(net, netbfp.quantize_input(net, _x(3)), keep=True)
    val = lambda m, e: Fraction(int(m)) * Fraction(2) ** int(e)            # noqa: E731
    hm, he = (np.asarray(a).reshape(3, c, 64) for a in env[net.aliases.get("h", "h")])
    mean, mx = (tuple(np.asarray(a).reshape(3, 64) for a in env[net.aliases.get(t, t)]) for t in ("m", "x1"))
    d = 1 if c == 8 else 3
    for b in range(3):
        for p in range(64):
            vals = [val(hm[b, k, p], he[b, k, p]) for k in range(c)]
            assert val(mx[0][b, p], mx[1][b, p]) == max(vals)
            assert val(mean[0][b, p], mean[1][b, p]) / d == sum(vals) / c
    assert len({val(*v) for v in zip(mean[0].flat, mean[1].flat)}) > 4      # not a constant map
    (cat,) = [op for op in net.ops if op.kind == "concat"]
    conv = [op for op in net.ops if op.kind == "conv" and cat.out in op.ins]
    assert cat.f.get("mscale", [1, 1]) == [1, d] and conv[0].f.get("mdiv", 1) == d


def _odd_rounded(net, x):
    """The network mode's channel mean elements (rule 4o) of the batch ``x``: (mantissas, how many
    the odd rounding shortened)."""
    from hlsnn.engines.bfp_systolic.network import lower as netbfp
    from hlsnn.engines.bfp_systolic.network.reduce import ODD_BITS
    _, env = netbfp.run(net, netbfp.quantize_input(net, x), keep=True)
    (m,) = [np.asarray(env[op.out][0]) for op in net.ops if op.kind == "avgpool" and op.f.get("odd")]
    return m, int((np.abs(m) >= 1 << (ODD_BITS - 1)).sum())


@pytest.mark.parametrize("c", [8, 6])
def test_a_channel_mean_rounded_to_odd_gives_the_layer_paths_bits(tmp_path, monkeypatch, c):
    """Rule 4o (hlsnn.engines.bfp_systolic.network.reduce): the channel mean of the channel gate's
    products (sums wider than the kernel's element) held rounded to odd gives the layer path's
    bits after the 7x7 conv's rounding. At K = 11 kept bits (the rule's least for M = 8 and a mean
    over 3) nearly every mean is shortened and the conv's ties are frequent: a plain truncation
    there gives other bits, so the sticky bit is what keeps them."""
    from hlsnn.engines.bfp_systolic.network import reduce as red
    from hlsnn.primitives import msb_index
    monkeypatch.setattr(red, "ODD_BITS", 11)
    art = compile_onnx(tmp_path, "sp", spatial_net(tmp_path / "sp.onnx", se=True, c=c, opset=17 if c == 8 else 18),
                       "bfp8", formats={"bfp8": FORMATS["bfp8"]}, check_samples=2, calibration_samples=16)
    x = _x(120)
    lay = hlsnn.load(art, "emu", network=False)(x)
    net = hlsnn.load(art, "emu", network=True, self_check=False)
    np.testing.assert_array_equal(net(x), lay)
    m, short = _odd_rounded(net.network, x)
    assert short > m.size // 2

    def truncate(s, e):                          # toward zero, no sticky bit
        a = np.abs(np.asarray(s, np.int64))
        r = np.maximum(msb_index(a) - 10, 0)
        return np.where(np.asarray(s) < 0, -(a >> r), a >> r), np.asarray(e, np.int64) + r
    monkeypatch.setattr(red, "round_odd", truncate)
    assert not np.array_equal(net(x), lay)


@pytest.mark.csim
@pytest.mark.strict_csim
def test_bfp_spatial_attention_after_a_channel_gate_on_the_strict_csim(tmp_path, monkeypatch):
    """The bfp network kernel runs CBAM's order in one start with the layer path's bits on the
    strict C-simulation (every bank within its ports; .ci/sanitize runs it under ASan + UBSan):
    C = 6 (the mean over 3 pairs, rule 6b, through the Transpose back into the shortcut buffer
    and the Concat's rule 6c), rule 4o's odd rounding (kept at K = 11 bits here: the kernel's
    RoundOdd then shortens nearly every mean), rule 10c's identity table, and the spatial gate
    with its 1 x H x W map in the shortcut buffer (d.single 1, d.pix: bank 0's word for every bank)."""
    from netfixtures import check_strict_kernel_run
    from hlsnn.engines.bfp_systolic.network import reduce as red
    from hlsnn.engines.bfp_systolic.network.kernel import FIELDS
    monkeypatch.setattr(red, "ODD_BITS", 11)
    art = compile_onnx(tmp_path, "sp", spatial_net(tmp_path / "sp.onnx", se=True, c=6, opset=18), "bfp8",
                       formats={"bfp8": FORMATS["bfp8"]}, check_samples=2, calibration_samples=16)
    run, cpp, _ = check_strict_kernel_run(art, "bfp8", _x(12))
    rows = {r["comment"].split(":")[0]: dict(zip(FIELDS, r["vals"])) for r in run._kernel.tables["rows"]}
    assert rows["y"]["pix"] == 1 and rows["y"]["single"] == 1
    assert rows["m/back"]["dual"] == 2                    # the mean's map: the shortcut buffer alone
    assert rows["m"]["odd"] == 1 and "const int kOddBits = 11," in cpp
    assert "if (d.dual != 0) HLSNN_STORE_AT(sc[j], d.sc_base + wbase + i" in cpp
    assert _odd_rounded(run.network, _x(12))[1] > 12 * 64 // 2
    from hlsnn.engines.bfp_systolic.network import perf
    assert "RoundOdd(s, e - d.shift)" in cpp and "oddpool" in perf.datapath(run.network, run._kernel.tables)


def test_bfp_third_buffer_at_its_own_size(tmp_path):
    """The bfp kernel declares a third activation buffer that holds only smaller tensors (the
    spatial attention's 1 x H x W maps) apart, at their size (bfpkernel._third): LUTRAM in the
    resource model (16 BRAM36 fewer than three buffers of kActWords), every loop's DEPENDENCE
    pragma on it too, so every derived II stays 1 (perf/schedule.py). Its csim runs are the slow
    bfp8 cases above (plain C = 8) and test_network_cbam's."""
    from hlsnn.engines.bfp_systolic.network import kernel as bk, perf
    from hlsnn.resources import build
    art = compile_onnx(tmp_path, "sp", spatial_net(tmp_path / "sp.onnx"), "bfp8",
                       formats={"bfp8": FORMATS["bfp8"]}, check_samples=2, calibration_samples=16)
    net = hlsnn.load(art, "emu", network=True).network
    files, _, t = bk.render(net, tmp_path / "k")
    cpp = (tmp_path / "k" / "network.cpp").read_text()
    words = {s: max(int(np.prod(net.shapes[n][1:])) * -(-net.shapes[n][0] // t["pc"]) for n, (s2, _) in
                    t["place"].items() if s2 == s) for s in (0, 1, 2)}
    assert t["act_bufs"] == 3 and t["act3_words"] == words[2] < t["act_words"] == max(words[0], words[1])
    assert f"Mem<elem_t, {words[2]}> Act3Bank" in cpp and "static ActBank act[2][Cfg::kPc];" in cpp
    assert cpp.count("DEPENDENCE variable = act3 inter false") == cpp.count("DEPENDENCE variable = act inter false")
    bufs, muls = perf.buffers(net, t)
    (a3,) = [b for b in bufs if b.name == "act3"]
    assert tuple(a3.dims) == (t["pc"], words[2]) and a3.impl == "lutram"
    one = [b for b in bufs if b.name != "act3"]
    one[0] = type(one[0])(**dict(one[0].__dict__, dims=(3, t["pc"], t["act_words"])))     # the former layout
    assert build(one, muls, "zynqmp").bram36 - build(bufs, muls, "zynqmp").bram36 == 16
    pytest.importorskip("clang.cindex")
    from hlsnn.network import artifact, schedule
    from hlsnn.network.loader import config_of
    prog, _ = artifact.read(art)
    rows = schedule.network_schedule(net, config_of(prog["accels"][net.accel], "test"))
    assert rows and all(r["ii"] == 1 for r in rows), [(r["loop"], r["ii"]) for r in rows if r["ii"] != 1]
