"""Host ops on the float input before the network kernel starts (hlsnn.deploy.lower.netprefix), a
ReduceMean over a length or token axis as the global average pool (hlsnn.engines.network.pools.reduce)
and a ceil_mode MaxPool (more end padding) in the network mode (issue 52).

References: the layer-by-layer compiled network on the emulator (the bits), numpy's mean and
PyTorch's/ONNX's ceil_mode output size written out, and small ONNX graphs built here."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import helper  # noqa: E402

import hlsnn  # noqa: E402
from hlsnn.deploy import datasets
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402
from hlsnn.network import artifact  # noqa: E402
from hlsnn.network.loader import kernel_network  # noqa: E402

from conftest import slow_cases, ROOT  # noqa: E402
from netfixtures import f32_init, save_net  # noqa: E402

BEYOND = ROOT / "tests" / "data" / "torch" / "beyond"
FORMATS = {"bfp8": "{type: bfp, accel: bfp8_zcu104}", "twohot": "{type: twohot, accel: shift8_pynq-z2}",
           "fixed8": "{type: fixed, accel: sparse8_pynq-z2}"}


_init = f32_init


def _save(path, nodes, inits, in_shape, out_dim):
    """The graph "g" of x (N, *in_shape) -> y (N, out_dim), checked and saved (netfixtures.save_net)."""
    return save_net(path, nodes, inits, "g", ["N", *in_shape], ("N", out_dim))


def bn_mlp(path):
    """x (N, 64) -> BatchNormalization -> Gemm 64x16 -> Relu -> Gemm 16x10."""
    r = np.random.default_rng(1)
    inits = [_init("s", r.uniform(0.5, 2, 64)), _init("b", r.normal(0, 0.3, 64)), _init("m", r.normal(5, 2, 64)),
             _init("v", r.uniform(1, 30, 64)), _init("w1", r.normal(0, 0.2, (16, 64))),
             _init("b1", r.normal(0, .1, 16)),
             _init("w2", r.normal(0, 0.3, (10, 16))), _init("b2", r.normal(0, .1, 10))]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["n"], epsilon=1e-5),
             helper.make_node("Gemm", ["n", "w1", "b1"], ["h"], transB=1), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"], transB=1)]
    return _save(path, nodes, inits, [64], 10)


def tok_mean(path):
    """x (N, 8, 8) tokens -> LayerNormalization -> token-wise Linear 8x16 -> Relu -> mean over the
    tokens -> Gemm 16x10."""
    r = np.random.default_rng(2)
    inits = [_init("g", r.uniform(0.5, 1.5, 8)), _init("be", r.normal(0, 0.2, 8)),
             _init("w1", r.normal(0, 0.4, (8, 16))), _init("b1", r.normal(0, .1, 16)),
             _init("w2", r.normal(0, 0.3, (10, 16))), _init("b2", r.normal(0, .1, 10))]
    nodes = [helper.make_node("LayerNormalization", ["x", "g", "be"], ["n"], axis=-1, epsilon=1e-5),
             helper.make_node("MatMul", ["n", "w1"], ["h0"]), helper.make_node("Add", ["h0", "b1"], ["h"]),
             helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("ReduceMean", ["r"], ["p"], axes=[1], keepdims=0),
             helper.make_node("Gemm", ["p", "w2", "b2"], ["y"], transB=1)]
    return _save(path, nodes, inits, [8, 8], 10)


def ceil_pool(path):
    """x (N, 1, 8, 8) -> Conv 3x3 (4, pad 1) -> Relu -> MaxPool 3x3 stride 2 ceil_mode -> Gemm."""
    r = np.random.default_rng(3)
    inits = [_init("w", r.normal(0, 0.5, (4, 1, 3, 3))), _init("b", r.normal(0, .1, 4)),
             _init("w2", r.normal(0, 0.2, (10, 64))), _init("b2", r.normal(0, .1, 10))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1),
             helper.make_node("Flatten", ["p"], ["f"]), helper.make_node("Gemm", ["f", "w2", "b2"], ["y"], transB=1)]
    return _save(path, nodes, inits, [1, 8, 8], 10)


GRAPHS = {"bn_mlp": (bn_mlp, "flat"), "tok_mean": (tok_mean, "ntf"), "ceil_pool": (ceil_pool, "nchw")}


def _compile(tmp, name, model, layout, fmts=tuple(FORMATS)):
    from netfixtures import compile_each
    return compile_each(tmp, name, model, fmts, formats=FORMATS, layout=layout)


@pytest.fixture(scope="module")
def graphs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("netprefix")
    return {name: _compile(tmp, name, make(tmp / f"{name}.onnx"), layout) for name, (make, layout) in GRAPHS.items()}


def _x(layout, n=32, noise=0.0):
    x = datasets.load("digits", layout=layout).x_test[:n]
    if noise:
        x = (x + np.random.default_rng(7).normal(0, noise, x.shape)).astype(np.float32)
    return np.asarray(x, np.float64)


def _same(path, x):
    """The network path (one start, emu) and the layer path give the same output bits."""
    net = hlsnn.load(path, "emu", network=True)
    lay = hlsnn.load(path, "emu", network=False)
    a, b = net.logits(x), lay.logits(x)
    assert a.view(np.uint64).tolist() == np.asarray(b).view(np.uint64).tolist()
    np.testing.assert_array_equal(net(x), lay(x))
    return net


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_input_batchnorm_runs_on_the_host_before_one_start(graphs, fmt):
    """Before: layer by layer ('a host op on the float input'); now the BatchNormalization runs
    on the host in float64, then rule 1, then the kernel: the layer path's bits, the kernel's
    input the BatchNormalization's output; bfp8 forms the dense layer's one patch on the host."""
    x = _x("flat")
    for xx in (x, _x("flat", noise=0.7)):
        net = _same(graphs["bn_mlp"][fmt], xx)
    n = net.network
    assert [e["op"] for e in n.host_before] == ["BatchNormalization"]
    assert n.input["name"] == "n" and tuple(n.input["shape"]) == (64,) and n.source["name"] == "x"
    assert [op.kind for op in n.ops] == ["conv", "conv"]
    if fmt == "bfp8":
        assert n.input["patches"] == "image"
        from hlsnn.deploy.lower.netprefix import run
        v = run(n, x)                         # each image one patch: 8-bit mantissas at one exponent
        _, e = np.frexp(v)
        assert np.array_equal(v.astype(np.float32), v)
        scale = np.ldexp(1.0, (e.max(axis=1, keepdims=True) - 7))
        assert np.array_equal(np.rint(v / scale), v / scale) and np.abs(v / scale).max() <= 127


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_layernorm_and_token_mean_in_one_start(graphs, fmt):
    """LayerNormalization on the host before the start, the token-wise Linear on the fabric, the
    mean over the tokens as the global pool of the Linear's F x T x 1 map (its MapToRows dropped):
    the layer path's bits."""
    for xx in (_x("ntf"), _x("ntf", noise=0.5)):
        net = _same(graphs["tok_mean"][fmt], xx)
    n = net.network
    assert [e["op"] for e in n.host_before] == ["LayerNormalization"]
    assert [op.kind for op in n.ops] == ["transpose", "conv", "add", "conv"]
    pool = n.ops[2]
    assert pool.f["gap"] and pool.ins == [n.ops[1].out]
    if fmt == "bfp8":
        assert n.input["patches"] == "rows"


@pytest.mark.parametrize("fmt", ["twohot", "fixed8"])
def test_token_mean_is_numpys_mean_requantized(graphs, fmt):
    """The pooled integers are numpy's mean of the Linear's outputs over the 8 tokens, rounded
    half away from zero at the head's input radix and saturated to 8 bits."""
    net = hlsnn.load(graphs["tok_mean"][fmt], "emu", network=True)
    n = net.network
    x = _x("ntf", 48)
    _, env = netmode.run_ints(n, netmode.quantize_input(n, x), keep=True)
    conv, pool, head = n.ops[1], n.ops[2], n.ops[3]
    vals = np.ldexp(env[conv.out].reshape(len(x), 16, 8).astype(np.float64), -int(
        [j for j in net.program["layers"] if j["name"] == conv.name][0]["f_out"]))
    mean = vals.mean(axis=2)                                     # numpy's mean over the tokens
    f_x = [j for j in net.program["layers"] if j["name"] == head.name][0]["f_x"]
    w = mean * 2.0 ** f_x
    want = np.clip(np.sign(w) * np.floor(np.abs(w) + 0.5), -128, 127)
    np.testing.assert_array_equal(env[pool.out].reshape(len(x), 16), want)
    assert np.abs(want).max() > 8                                # not a trivial pool


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_ceil_mode_maxpool_is_more_end_padding(graphs, fmt):
    """MaxPool 3x3 stride 2 with ceil_mode on an 8x8 map: ceil((8 - 3) / 2) + 1 = 4 outputs a
    side (floor would give 3), the last window's overhang one more bottom/right pad; the layer
    path's bits."""
    net = _same(graphs["ceil_pool"][fmt], _x("nchw", 24))
    (pool,) = [op for op in net.network.ops if op.kind == "maxpool"]
    assert (pool.f["oh"], pool.f["ow"], pool.f["pads"]) == (4, 4, (0, 0, 1, 1))


def test_a_dilated_maxpool_is_refused_by_name():
    j = {"name": "p", "op": "MaxPool", "kind": "host",
         "attrs": {"kernel_shape": [2, 2], "strides": [1, 1], "dilations": [2, 2], "ceil_mode": 1}}
    with pytest.raises(InputError, match=r"layer p \(MaxPool\): a dilated MaxPool"):
        netmode.maxpool_fields(j, (4, 8, 8))


@pytest.fixture(scope="module")
def beyond(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("netprefix_beyond")
    out = {}
    for name, layout in (("v_tc_mean_ts17", "ncl"), ("v_tok_clf_ts17", "ntf"), ("v_jet_log_ts17", "flat"),
                         ("v_tok_clf_dynamo", "ntf")):
        out.update({(name, f): p for f, p in _compile(tmp, name, BEYOND / f"{name}.onnx", layout).items()})
    return out


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_tok_clf_runs_in_the_network_mode(beyond, fmt):
    """v_tok_clf (x.mean(dim=1) of the token-wise Linears' output; before: 'no integer rule for this
    host op here'): one program, the layer path's bits, the kernels take it."""
    for name in ("v_tok_clf_ts17", "v_tok_clf_dynamo"):
        net = _same(beyond[name, fmt], _x("ntf"))
        assert [op.kind for op in net.network.ops] == ["transpose", "conv", "conv", "add", "conv"]
        kernel_network(*artifact.read(beyond[name, fmt]))


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_tc_mean_runs_its_transpose_on_the_host(beyond, fmt):
    """v_tc_mean (a Transpose of the (N, T, F) input; before: 'a host op on the float input'): the
    network mode on emu with the layer path's bits; the kernels take it (its MaxPool's output is
    the residual Add's shortcut: the pool loops write the shortcut copy)."""
    p = beyond["v_tc_mean_ts17", fmt]
    net = _same(p, _x("ncl"))
    assert [e["op"] for e in net.network.host_before] == ["SwMove"]
    kernel_network(*artifact.read(p))


@pytest.mark.csim
@pytest.mark.parametrize("fmt", slow_cases(list(FORMATS), ["fixed8"]))   # sparse's kernel: the ceil_mode pool's
def test_tc_mean_in_one_start_of_the_network_kernels(beyond, fmt):
    """The three network kernels on C-simulation: the host Transpose, one start, the layer path's
    bits; its MaxPool writes the residual Add's shortcut (dual; before, the kernels' pool loop
    wrote none, so the shortcut held stale values)."""
    from hlsnn.engines.network.kernel import allocate
    p = beyond["v_tc_mean_ts17", fmt]
    x = _x("ncl", 8, noise=0.3)
    with hlsnn.load(p, "csim", network=True) as board:
        np.testing.assert_array_equal(board(x), hlsnn.load(p, "emu", network=False)(x))
        assert board.last_kernel_starts == 1
        n = board.network
        (pool,) = [op for op in n.ops if op.kind == "maxpool"]
        place, _, _ = allocate(n)
        assert place[pool.out][1]                # in the shortcut buffer
        if board._kernel.strict:
            assert all(b["sites"] <= b["ports"] for b in board._kernel.strict_report["banks"])


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_jet_log_runs_in_one_start_its_input_batchnorm_on_the_host(beyond, fmt):
    """v_jet_log: the input BatchNormalization on the host before the start, LeakyRelu and Elu
    as tables (hlsnn.engines.network.tables), the LogSoftmax after the logits: one network
    program with the layer path's bits."""
    net = kernel_network(*artifact.read(beyond["v_jet_log_ts17", fmt]))[0]
    assert [e["op"] for e in net.host_before] == ["BatchNormalization"]
    assert {op.f["fn"] for op in net.ops if op.kind == "lut"} >= {"LeakyRelu", "Elu"}
    _same(beyond["v_jet_log_ts17", fmt], _x("flat", 64))


@pytest.mark.csim
@pytest.mark.parametrize("fmt", slow_cases(["twohot", "bfp8"], ["twohot"]))   # twohot's kernel: tc_mean's below
def test_prefix_and_token_mean_on_the_network_kernel(graphs, fmt):
    """The shift_mac and bfp_systolic network kernels (C-simulation, and the simulated board's C
    host path): the host prefix, one start, the layer path's bits."""
    x = _x("ntf", 8, noise=0.3)
    want = hlsnn.load(graphs["tok_mean"][fmt], "emu", network=False)(x)
    with hlsnn.load(graphs["tok_mean"][fmt], "csim", network=True) as board:
        np.testing.assert_array_equal(board(x), want)
        assert board.last_kernel_starts == 1
    with hlsnn.load(graphs["tok_mean"][fmt], "sim", network=True) as sim:
        np.testing.assert_array_equal(sim(x), want)
        assert sim.last_kernel_starts == 1


@pytest.mark.csim
def test_ceil_mode_maxpool_on_the_sparse_network_kernel(graphs):
    x = _x("nchw", 8, noise=0.3)
    with hlsnn.load(graphs["ceil_pool"]["fixed8"], "csim", network=True) as board:
        np.testing.assert_array_equal(board(x), hlsnn.load(graphs["ceil_pool"]["fixed8"], "emu", network=False)(x))
        assert board.last_kernel_starts == 1


def test_perf_counts_the_host_prefix(graphs):
    """hlsnn perf: the BatchNormalization before the start is a host row of the network path's
    model, after the loader's input check, at the BatchNormalization's measured cost on its 64
    elements (hostmodel.HOST_OPS) at the CPU's Python factor; a step of the host's breakdown,
    in the end-to-end time."""
    from hlsnn.network import hostmodel, latency
    res = latency.model(graphs["bn_mlp"]["twohot"], batch=1)
    assert res["path"] == "network" and res["kernel_starts"] == 1
    assert res["layers"][0]["kind"] == "host input check (loader)"
    row = res["layers"][1]
    assert row["kind"] == "host BatchNormalization (before the start)" and res["layers"][2]["name"] == "input"
    assert row["host_bytes"] == 8 * (64 + 64)
    fixed, ns = hostmodel.HOST_OPS["BatchNormalization"]
    assert row["host_us"] == pytest.approx((fixed + ns * 64 / 1e3) * hostmodel.SCALE[res["cpu"]]["python"])
    steps = res["host"]["steps"]
    assert [s["step"] for s in steps[:2]] == ["input check (float32)",
                                               "BatchNormalization (before the start)"]
    assert res["host"]["us"] == pytest.approx(sum(s["us"] for s in steps))
    assert res["end_to_end_us"] == pytest.approx(sum(r["end_to_end_us"] for r in res["layers"]))


def test_cli_compile_names_the_host_ops_before_the_start(tmp_path, capsys):
    """`hlsnn compile`: the network path, the BatchNormalization listed as a host op before the start."""
    import json
    from hlsnn.cli import main
    model = bn_mlp(tmp_path / "bn.onnx")
    cfg = tmp_path / "bn.yaml"
    cfg.write_text(f"name: bn\nmodel: {model}\ndata: digits\nlayout: flat\nformats:\n  twohot: {FORMATS['twohot']}\n"
                   "assignments:\n  twohot: {default: twohot}\n")
    assert main(["compile", str(cfg), "--assignment", "twohot", "-o", str(tmp_path / "bn.hlsnn"),
                 "--check-samples", "2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["path"] == "network" and info["host_layers"] == []
    assert [h.split(" (")[1] for h in info["host_before_layers"]] == ["BatchNormalization)"]


def _rule3_fractions(x, how, p):
    """Rule 3 of the bfp network kernel on each patch in exact rationals: the exponent from the
    patch's largest leading one, ``xe = clip(lop - (M - 2))``, each value ``/ 2**xe`` rounded by
    ``p["rounding"]`` and saturated to M bits, times ``2**xe``."""
    import math
    from fractions import Fraction
    b = len(x)
    v = (x.reshape(b, 1, -1) if how == "image" else x.reshape(b, x.shape[1], -1) if how == "rows"
         else x.reshape(b, x.shape[1], -1).transpose(0, 2, 1))
    out = np.zeros(v.shape)
    M, E = p["mantissa_bits"], p["exponent_bits"]
    for i in np.ndindex(v.shape[:2]):
        row = [Fraction(float(a)) for a in v[i]]
        lops = [abs(a).numerator.bit_length() - abs(a).denominator.bit_length() for a in row if a]
        xe = min(max(max(lops) - (M - 2), -(1 << (E - 1))), (1 << (E - 1)) - 1) if lops else 0
        for j, a in enumerate(row):
            q = a / Fraction(2) ** xe
            r = (round(q) if p["rounding"] == "nearest_even" else math.floor(q) if p["rounding"] == "truncate"
                 else int(math.copysign(math.floor(abs(q) + Fraction(1, 2)), q)))
            out[i + (j,)] = float(min(max(r, -(1 << (M - 1))), (1 << (M - 1)) - 1) * Fraction(2) ** xe)
    return (out.transpose(0, 2, 1) if how == "pixels" else out).reshape(x.shape)


@pytest.mark.parametrize("how, rounding", [("image", "nearest_even"), ("rows", "truncate"), ("pixels", "nearest_away")])
def test_bfp_patches_are_rule_3_in_exact_rationals(how, rounding):
    """The host prefix's bfp patches (float64 arithmetic) against rule 3 in Python's Fractions,
    over magnitudes from 1e-30 to 1e30, zeros, a clipped exponent and values rounding up a bit."""
    from types import SimpleNamespace
    from hlsnn.deploy.lower.netprefix import bfp_patches
    p = {"mantissa_bits": 8, "exponent_bits": 8, "rounding": rounding}
    rng = np.random.default_rng(11)
    for scale in (1e-30, 1e-3, 1.0, 7.9, 1e30):
        x = rng.normal(0, scale, (2, 3, 5)) * (1 + 2.0 ** -30)          # not exact in float32
        x[rng.random(x.shape) < 0.2] = 0
        x[1, 1] = 0                                                      # an all-zero patch (rows)
        net = SimpleNamespace(input={"patches": how}, params=p)
        np.testing.assert_array_equal(bfp_patches(net, x), _rule3_fractions(x, how, p))
