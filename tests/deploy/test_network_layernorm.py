"""Rule 15, a LayerNormalization over the channels of each position in integers
(hlsnn.engines.network.tokens.layernorm): its table and its error against float64, the two small graphs
built here (Linear -> LayerNorm -> Relu -> Linear; conv -> Transpose -> LayerNorm over the
channels -> Transpose -> conv), the network mode's bits against the layer path's, the
sparse_cluster kernel's C-simulation and the simulated board, onnxruntime's outputs, and the
refusals by name.

References: exact integer and decimal arithmetic for the table, numpy's float64 LayerNorm for the
rule, onnxruntime for the models; the layer-by-layer emulator for the bits."""
import decimal
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.engines.network.tokens import layernorm as ln  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from netfixtures import f32_init, save_net  # noqa: E402

FORMATS = {"fixed8": "{type: fixed, accel: sparse8_pynq-z2}", "twohot": "{type: twohot, accel: shift8_pynq-z2}"}


_init = f32_init


def _save(path, nodes, inits, in_shape, out_dim):
    """The graph "g" of x (N, *in_shape) -> y (N, out_dim), checked and saved (netfixtures.save_net)."""
    return save_net(path, nodes, inits, "g", ["N", *in_shape], ("N", out_dim))


def mlp_ln(path):
    """x (N, 64) -> Gemm 64x32 -> LayerNormalization (scale, bias) -> Relu -> Gemm 32x10."""
    r = np.random.default_rng(11)
    inits = [_init("w1", r.normal(0, 0.2, (32, 64))), _init("b1", r.normal(0, .1, 32)),
             _init("g", r.uniform(0.5, 1.5, 32)), _init("be", r.normal(0, 0.2, 32)),
             _init("w2", r.normal(0, 0.3, (10, 32))), _init("b2", r.normal(0, .1, 10))]
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1),
             helper.make_node("LayerNormalization", ["h", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)]
    return _save(path, nodes, inits, [64], 10)


def conv_ln(path, axis=-1, ch=8):
    """x (N, 1, 8, 8) -> Conv 3x3 (``ch``) -> Transpose to NHWC -> LayerNormalization over the
    channels (``axis``) -> Transpose back -> Conv 3x3 stride 2 (8) -> Relu -> Gemm (ConvNeXt's
    channel norm)."""
    r = np.random.default_rng(12)
    inits = [_init("w1", r.normal(0, 0.5, (ch, 1, 3, 3))), _init("b1", r.normal(0, .1, ch)),
             _init("g", r.uniform(0.5, 1.5, ch)), _init("be", r.normal(0, 0.2, ch)),
             _init("w2", r.normal(0, 0.3, (8, ch, 3, 3))), _init("b2", r.normal(0, .1, 8)),
             _init("w3", r.normal(0, 0.2, (10, 8 * 4 * 4))), _init("b3", r.normal(0, .1, 10))]
    g_shape = (ch,) if axis == -1 else (8, ch)
    inits[2], inits[3] = _init("g", r.uniform(0.5, 1.5, g_shape)), _init("be", r.normal(0, 0.2, g_shape))
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["t", "g", "be"], ["n"], axis=axis, epsilon=1e-6),
             helper.make_node("Transpose", ["n"], ["u"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["u", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c2"], ["r2"]), helper.make_node("Flatten", ["r2"], ["f"]),
             helper.make_node("Gemm", ["f", "w3", "b3"], ["y"], transB=1)]
    return _save(path, nodes, inits, [1, 8, 8], 10)


def convnext(path):
    """A ConvNeXt-style block: x (N, 1, 8, 8) -> Conv 3x3 (16) -> Relu = s; depthwise 7x7 ->
    LayerNormalization over the channels (between Transposes) -> 1x1 conv 16 -> 32 -> Erf -> 1x1
    conv 32 -> 16 -> Add s -> GlobalAveragePool -> Gemm."""
    r = np.random.default_rng(5)
    n = helper.make_node
    inits = [_init("w0", r.normal(0, .5, (16, 1, 3, 3))), _init("b0", r.normal(0, .1, 16)),
             _init("wd", r.normal(0, .3, (16, 1, 7, 7))), _init("bd", r.normal(0, .1, 16)),
             _init("g", r.uniform(.5, 1.5, 16)), _init("be", r.normal(0, .2, 16)),
             _init("w1", r.normal(0, .3, (32, 16, 1, 1))), _init("b1", r.normal(0, .1, 32)),
             _init("w2", r.normal(0, .2, (16, 32, 1, 1))), _init("b2", r.normal(0, .1, 16)),
             _init("w3", r.normal(0, .2, (10, 16))), _init("b3", r.normal(0, .1, 10))]
    nodes = [n("Conv", ["x", "w0", "b0"], ["s"], pads=[1, 1, 1, 1]), n("Relu", ["s"], ["s1"]),
             n("Conv", ["s1", "wd", "bd"], ["d"], pads=[3, 3, 3, 3], group=16),
             n("Transpose", ["d"], ["t"], perm=[0, 2, 3, 1]),
             n("LayerNormalization", ["t", "g", "be"], ["n"], axis=-1, epsilon=1e-6),
             n("Transpose", ["n"], ["u"], perm=[0, 3, 1, 2]), n("Conv", ["u", "w1", "b1"], ["p1"]),
             n("Erf", ["p1"], ["er"]), n("Conv", ["er", "w2", "b2"], ["p2"]), n("Add", ["s1", "p2"], ["res"]),
             n("GlobalAveragePool", ["res"], ["gp"]), n("Flatten", ["gp"], ["f"]),
             n("Gemm", ["f", "w3", "b3"], ["y"], transB=1)]
    return _save(path, nodes, inits, [1, 8, 8], 10)


GRAPHS = {"mlp_ln": (mlp_ln, "flat"), "conv_ln": (conv_ln, "nchw"), "convnext": (convnext, "nchw")}
OPS = {"mlp_ln": ["conv", "lnorm", "conv"], "conv_ln": ["conv", "lnorm", "conv", "conv"],
       "convnext": ["conv", "conv", "lnorm", "conv", "lut", "conv", "add", "conv"]}
CHW = {"mlp_ln": (32, 1), "conv_ln": (8, 64), "convnext": (16, 64)}


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    from netfixtures import compile_each
    tmp = tmp_path_factory.mktemp("netln")
    out = {}
    for name, (make, layout) in GRAPHS.items():
        model = make(tmp / f"{name}.onnx")
        for fmt, p in compile_each(tmp, name, model, formats=FORMATS, layout=layout).items():
            out[name, fmt] = p
        out[name, "onnx"] = model
    return out


def _x(layout, n=64):
    return np.asarray(datasets.load("digits", layout=layout).x_test[:n], np.float64)


def test_rsqrt_table_rounds_the_reciprocal_square_root():
    """Every entry is 2**16 / sqrt(m) rounded to the nearest integer (50 decimal digits)."""
    t = ln.rsqrt_table()
    assert t.shape == (1 << ln.T_BITS,) and t[0] == 0 and t[1] == 1 << ln.R_BITS
    with decimal.localcontext() as ctx:
        ctx.prec = 50
        for m in range(1, 1 << ln.T_BITS):
            exact = decimal.Decimal(1 << ln.R_BITS) / decimal.Decimal(m).sqrt()
            assert abs(exact - int(t[m])) <= decimal.Decimal("0.5"), m


@pytest.mark.parametrize("c, f_in", [(8, 4), (32, 3), (96, 5), (512, 2)])
def test_rule_is_within_its_stated_error_of_float(c, f_in):
    """On random 8-bit codes the rule's value y * 2**-K is the float64 LayerNorm of the codes'
    values (numpy) within the module's stated bound: 2**-(T-1) + 0.3 / Vt of |gamma n| (the
    table's truncation; E's rounding), |n| 2**-(Fg+1) (the scale's), 2**-K and the bias's
    rounding; and it gives the same codes for every batch split."""
    r = np.random.default_rng(c)
    gamma, beta = r.uniform(-2, 2, c), r.normal(0, 1, c)
    p = ln.plan(c, f_in, 8, 1e-5, gamma, beta)
    q = r.integers(-128, 128, (300, c)) >> r.integers(0, 7, (300, 1))        # spreads from 1 to 256 codes
    q[0] = 5                                                                   # one position of zero variance
    y = ln.normalized(q, p, "nearest_away")
    x = np.ldexp(q.astype(np.float64), -f_in)
    m = x.mean(axis=1, keepdims=True)
    n = (x - m) / np.sqrt(((x - m) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    want = n * gamma + beta
    got = np.ldexp(y.astype(np.float64), -p["k"])
    vt = c * c * ((x - m) ** 2).mean(axis=1, keepdims=True) * 4.0 ** f_in          # C**2 var in codes
    tol = (2.0 ** -(ln.T_BITS - 1) + 0.3 / np.maximum(vt, 1)) * np.abs(n * gamma) + np.abs(n) * 2.0 ** -(p["fg"] + 1) \
        + 2.0 ** -p["k"] + 2.0 ** -(p["fg"] + ln.R_BITS)
    assert np.all(np.abs(got - want) <= tol)
    assert np.abs(got - want).max() > 1e-4                                     # not a trivial comparison
    assert np.array_equal(np.concatenate([ln.normalized(q[:7], p, "nearest_away"), ln.normalized(q[7:], p,
                                                                                            "nearest_away")]), y)


def test_plan_refuses_by_name():
    assert "channels" in ln.plan(1, 4, 8, 1e-5)
    assert "not finite" in ln.plan(8, 4, 8, 1e-5, [np.inf] * 8)


def _same(path, x):
    net = hlsnn.load(path, "emu", network=True)
    lay = hlsnn.load(path, "emu", network=False)
    a, b = net.logits(x), lay.logits(x)
    assert np.asarray(a).view(np.uint64).tolist() == np.asarray(b).view(np.uint64).tolist()
    return net


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_network_mode_is_the_layer_paths_bits(graphs, name, fmt):
    """Before: 'no integer rule for this host op here' (layer by layer); now the norm is op lnorm
    between the engine layers (the Transposes around it dropped, the Relu fused), the layer path's
    bits on emu."""
    net = _same(graphs[name, fmt], _x(GRAPHS[name][1]))
    assert [op.kind for op in net.network.ops] == OPS[name]
    (op,) = [o for o in net.network.ops if o.kind == "lnorm"]
    assert (op.f["c"], op.f["hw"]) == CHW[name]
    assert op.f.get("relu", False) == (name == "mlp_ln")


@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_accuracy_against_onnxruntime(graphs, name, fmt):
    """The deployed network (rule 15 in its layer path and network mode) against onnxruntime's
    float model on 360 test digits: logits within 6 % relative error, the same class on at least
    93 % of the images (docs/deploy-beyond-cnn.md's table; float64 LayerNorm on the host gave the
    same figures to 0.1 %)."""
    ort = pytest.importorskip("onnxruntime")
    x = _x(GRAPHS[name][1], 360)
    ref = ort.InferenceSession(str(graphs[name, "onnx"])).run(None, {"x": x.astype(np.float32)})[0]
    y = hlsnn.load(graphs[name, fmt], "emu", network=True).logits(x)
    assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 0.06
    assert (y.argmax(1) == ref.argmax(1)).mean() >= 0.93


@pytest.mark.slow
@pytest.mark.parametrize("name", list(GRAPHS))
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_kernel_csim_and_board_are_the_bits(graphs, name, fmt):
    """The sparse_cluster (fixed8) and shift_mac (two-hot) network kernels' C-simulation (strict)
    and the simulated board give the layer path's bits in one start, each loop's iterations the
    perf model's."""
    from netfixtures import check_kernel_run
    k = check_kernel_run(graphs[name, fmt], fmt, _x(GRAPHS[name][1], 24), board=True)
    c = k._kernel.counters
    (op,) = [o for o in k.network.ops if o.kind == "lnorm"]
    blocks = -(-op.f["c"] // k._kernel.tables["pc"])
    assert c["NetLnSum"][0] == c["NetLnOut"][0] == 24 * blocks * op.f["hw"]


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(FORMATS))
def test_kernel_many_blocks_and_positions(tmp_path, fmt):
    """40 channels at 8 x 8 positions: three blocks of 16 banks a position (the last one half
    used), so both flattened loops step blocks within a position and positions in one run; the
    C-simulation (strict) and the simulated board give the layer path's bits, each loop's
    iterations the perf model's (64 x 3)."""
    from netfixtures import check_kernel_run, compile_each
    p = compile_each(tmp_path, "conv_ln40", conv_ln(tmp_path / "conv_ln40.onnx", ch=40), [fmt], formats=FORMATS)[fmt]
    k = check_kernel_run(p, fmt, _x("nchw", 12), board=True)
    (op,) = [o for o in k.network.ops if o.kind == "lnorm"]
    assert (op.f["c"], op.f["hw"], k._kernel.tables["pc"]) == (40, 64, 16)
    assert k._kernel.counters["NetLnSum"][0] == k._kernel.counters["NetLnOut"][0] == 12 * 3 * 64


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("fmt,kernel", [("twohot", "netkernel"), ("fixed8", "sparsekernel")])
def test_layernorm_kernels_compile_against_both_header_models(graphs, tmp_path, fmt, kernel):
    """Both network kernels with the shared LayerNorm loops (convnext: a map's norm between
    Transposes) compile against both ap_axi_sdata.h models and the open-source headers, with and
    without their simulation-only code (test_network_kernel's check)."""
    from test_network_kernel import compiles_against_both_header_models
    compiles_against_both_header_models(graphs["convnext", fmt], kernel, tmp_path)
    src = (tmp_path / "net" / "network.cpp").read_text()
    assert "LnSums:" in src and "LnOut:" in src              # the checked kernel has the LayerNorm loops


def test_compile_is_one_start(graphs):
    """`hlsnn compile`'s status: one kernel start in fixed8 and two-hot (on main: 'no integer rule
    for this host op here')."""
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    for name in GRAPHS:
        for fmt in FORMATS:
            assert kernel_network(*artifact.read(graphs[name, fmt])[:2])[0].engine == \
                {"fixed8": "sparse_cluster", "twohot": "shift_mac"}[fmt]


@pytest.mark.slow
def test_bfp_refuses_by_name(graphs, tmp_path):
    """BFP pairs have no rule 15 and say so (a bfp8 compile of mlp_ln)."""
    from netfixtures import compile_each
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    p = compile_each(tmp_path, "mlp_ln", graphs["mlp_ln", "onnx"], ["bfp8"],
                     formats={"bfp8": "{type: bfp, accel: bfp8_zcu104}"}, layout="flat")["bfp8"]
    with pytest.raises(InputError, match=r"layer n \(LayerNormalization\): a LayerNormalization of BFP pairs"):
        netmode.lower(*artifact.read(p)[:2])


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_perf_lnorm_row_is_its_loops(graphs, fmt):
    """`hlsnn perf`'s lnorm row: two pipelined loops over every (position, channel block) and their
    stated depths once (8 x 8 positions of 8 channels: 64 x (1 + 1) + 28 cycles at 100 MHz; before,
    the depth was paid at every position: 64 x 30); the kernel fits the PYNQ-Z2 (the sparse
    kernel's squares and C q in LUTs, the shift kernel's on DSPs)."""
    from hlsnn.network import latency
    r = latency.model(graphs["conv_ln", fmt], batch=1)
    (row,) = [x for x in r["layers"] if x["kind"] == "lnorm"]
    assert ln.SUM_DEPTH + ln.STAT_DEPTH + ln.OUT_DEPTH == 28
    assert round(row["kernel_us"] * 100) == 64 * 2 + 28
    assert r["kernel_resources"]["fits"]


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_layernorm_loop_products_are_declared_and_modelled(graphs, fmt, tmp_path):
    """Counted from the rendered C++ (tests/loop_operators.py): LnSums has Q + 2 run-time
    products (the Q squares, C S2, S1^2), LnOut 3 Q (C q, G d and (G d) r a bank), as their
    HLSNN_OPS declare; the resource model pays a DSP for each declared DSP product of each loop
    (the sparse kernel builds the squares and C q from LUTs). The counter used to read
    `gd * ap_int<W>(r)` as a product by a constant and counted 2 Q in LnOut."""
    from loop_operators import loop_operators
    from hlsnn.network import artifact
    from hlsnn.network.loader import kernel_network
    net, _ = kernel_network(*artifact.read(graphs["convnext", fmt]))
    if fmt == "twohot":
        from hlsnn.engines.shift_mac.network.kernel import render
    else:
        from hlsnn.engines.sparse_cluster.network.kernel import render
    _, _, t = render(net, tmp_path)
    q = t["pc"]
    ops = loop_operators(tmp_path, "network.cpp", "network.h", with_declared=True)
    fabric = fmt == "fixed8"
    assert ops["LnSums"]["mul"] == q + 2 and ops["LnOut"]["mul"] == 3 * q
    assert ops["LnSums"]["declared"] == (q + 2, 0, 2 if fabric else q + 2)
    assert ops["LnOut"]["declared"] == (3 * q, 0, 2 * q if fabric else 3 * q)
    model = {}
    for m in ln.multipliers(net, t):
        model[m.function] = model.get(m.function, 0) + m.count
    assert model == {"LnSums": ops["LnSums"]["declared"][2], "LnOut": ops["LnOut"]["declared"][2]}


def test_not_over_the_channels_is_refused_by_name(tmp_path):
    """A LayerNormalization over (W, C) of the channels-last map (axis 2) is not rule 15's."""
    from netfixtures import compile_each
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    p = compile_each(tmp_path, "lnwc", conv_ln(tmp_path / "lnwc.onnx", axis=2), ["fixed8"], formats=FORMATS)["fixed8"]
    with pytest.raises(InputError, match=r"layer n \(LayerNormalization\): a LayerNormalization over the channels"):
        netmode.lower(*artifact.read(p)[:2])


def test_an_older_program_keeps_float64(graphs):
    """A program of revision 4 ran the norm in float64 in its layer path (its self-check pairs):
    the network mode refuses it by name rather than give other bits."""
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network import artifact
    prog, arrays = artifact.read(graphs["mlp_ln", "fixed8"])[:2]
    prog = dict(prog, revision=4)
    with pytest.raises(InputError, match="revision 4 ran this LayerNormalization in float64"):
        netmode.lower(prog, arrays)


STORED = Path(__file__).resolve().parents[1] / "data" / "layernorm"


def test_stored_graphs_are_the_builders(tmp_path):
    """tests/data/layernorm/NAME.onnx, which docs/deploy-beyond-cnn.md's table compiles
    (benchmarks/doc_figures.py), is this module's graph NAME (written by ``python
    tests/deploy/test_network_layernorm.py``)."""
    for name, (make, _) in GRAPHS.items():
        assert onnx.load(str(STORED / f"{name}.onnx")).graph == onnx.load(str(make(tmp_path / f"{name}.onnx"))).graph


if __name__ == "__main__":
    STORED.mkdir(parents=True, exist_ok=True)
    for name, (make, _) in GRAPHS.items():
        print(make(STORED / f"{name}.onnx"))
