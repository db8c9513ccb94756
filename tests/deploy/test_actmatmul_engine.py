"""Attention's MatMul of two activations on the engines (issue 52): bfp on bfp_systolic
(hlsnn.deploy.run.actmm_engine), fixed8 on sparse_cluster (hlsnn.deploy.run.actmm_sparse). The engine's
result against an independent numpy reference of the rule, the block-diagonal calls against
one call per GEMM, emu == csim == sim on a small attention model, and the calls counted where
the deploy report and ``hlsnn perf`` show them."""
from types import SimpleNamespace

import numpy as np
import pytest

import hlsnn
from conftest import ROOT
from hlsnn.deploy.run import actmm_engine, actmm_sparse
from hlsnn.engines.bfp_systolic.protocol import samples_per_call

onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper  # noqa: E402

T2_TINY = ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml"
T8_TENSOR = ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t8_gemv_tensor.yaml"


def _round(v, rounding):
    if rounding == "nearest_even":
        return np.rint(v)
    if rounding == "nearest_away":
        return np.sign(v) * np.floor(np.abs(v) + 0.5)
    return np.floor(v)


def _bfp(v, p, axis):
    """Independent BFP of ``v`` with one exponent per slice over ``axis`` (None: one for all):
    the largest magnitude's leading one in bit M - 2 of its mantissa (e = floor(log2 max) - M + 2,
    clamped to the exponent range), mantissas rounded by the config's rule and clipped to M
    signed bits; the values they stand for."""
    m, eb = p["mantissa_bits"], p["exponent_bits"]
    emin, emax = -(1 << (eb - 1)), (1 << (eb - 1)) - 1
    amax = np.abs(v).max(axis=axis, keepdims=True)
    e = np.clip(np.floor(np.log2(np.where(amax > 0, amax, 1.0))) - (m - 2), emin, emax)
    q = np.clip(_round(v * 2.0 ** -e, p["rounding"]), -(1 << (m - 1)), (1 << (m - 1)) - 1)
    return q * 2.0 ** e


def reference(a, b, p):
    """The rule in numpy: A's rows and B's columns (or each GEMM's whole B, weight_exponent:
    tensor) quantized, the exact product, each row of the result rounded to one exponent per
    chunk of max_n columns (the max rule)."""
    qa = _bfp(a, p, -1)
    qb = _bfp(b, p, -2 if p["weight_exponent"] == "row" else (-2, -1))
    v = qa @ qb                            # exact: a row's products share one exponent per column
    out = np.empty_like(v)
    for c0 in range(0, v.shape[-1], p["max_n"]):
        out[..., c0:c0 + p["max_n"]] = _bfp(v[..., c0:c0 + p["max_n"]], p, -1)
    return out


def _engine(config, target="emu"):
    acc = hlsnn.Accelerator(config, target)
    return acc, actmm_engine.EngineActMatMul(SimpleNamespace(p=acc.config.params, acc=acc))


def _operands(rng, shape_a, shape_b, scale=1.0):
    a = rng.normal(size=shape_a) * scale * 2.0 ** rng.integers(-3, 4, size=shape_a[:-1] + (1,))
    b = rng.normal(size=shape_b) * scale * 2.0 ** rng.integers(-3, 4, size=shape_b[:-2] + (1, shape_b[-1]))
    a[0, 0, 1] = 0.0                        # an all-zero row of A
    b[0, 1, :, -1] = 0.0                    # an all-zero column of B
    return a, b


@pytest.mark.parametrize("config,dims,scale", [
    ("bfp8_zcu104", (3, 2, 5, 6, 7), 1.0),          # packed: every GEMM in one call
    (T2_TINY, (2, 2, 3, 4, 11), 0.5),               # 2-bit mantissas, S beyond max_n = 8: one call per GEMM
    (T2_TINY, (2, 3, 2, 3, 2), 0.5),                # packed by the tiny stores
    ("tensor", (2, 2, 4, 5, 3), 1.0)])              # one exponent per B: one call per GEMM
def test_engine_result_is_the_numpy_bfp_rule(config, dims, scale):
    n, h, t, k, s = dims
    if config == "tensor":
        import yaml
        config = dict(yaml.safe_load(T8_TENSOR.read_text()), name="t8_tensor_max")
        config["bfp_systolic"] = dict(config["bfp_systolic"], output_exponent="max")
    acc, mm = _engine(config)
    try:
        rng = np.random.default_rng(sum(dims))
        a, b = _operands(rng, (n, h, t, k), (n, h, k, s), scale)
        got = mm.matmul(a, b)
        want = reference(a, b, acc.config.params)
        np.testing.assert_array_equal(got, want)
        assert np.abs(got - a @ b).max() > 0                  # not the float product
        # calls: packs of g GEMMs; a GEMM alone in chunks of max_n outputs, each over the rows
        # in calls of as many samples as the stores hold
        pp = acc.config.params
        g = actmm_engine.packs(pp, t, k, s)
        if g > 1:
            assert mm.calls == -(-(n * h) // g) and samples_per_call(pp, g * k, g * s) >= g * t
        else:
            per_gemm = sum(-(-t // samples_per_call(pp, k, min(pp["max_n"], s - c0))) for c0 in range(0, s, pp["max_n"]))
            assert mm.calls == n * h * per_gemm
        assert mm.gemms == n * h
    finally:
        acc.close()


def test_block_diagonal_calls_equal_one_call_per_gemm(monkeypatch):
    acc, mm = _engine("bfp8_zcu104")
    try:
        rng = np.random.default_rng(7)
        a, b = _operands(rng, (4, 3, 8, 8), (4, 3, 8, 8))
        packed = mm.matmul(a, b)
        assert mm.calls == 1 and mm.gemms == 12
        monkeypatch.setattr(actmm_engine, "packs", lambda *args: 1)
        mm.reset()
        alone = mm.matmul(a, b)
        assert mm.calls == 12
        np.testing.assert_array_equal(packed, alone)
    finally:
        acc.close()


def test_packing_is_bounded_by_the_stores_and_the_limits():
    p = hlsnn.load_config("bfp8_zcu104").params
    g = actmm_engine.packs(p, 8, 8, 8)
    assert samples_per_call(p, 8 * g, 8 * g) >= 8 * g and samples_per_call(p, 8 * (g + 1), 8 * (g + 1)) < 8 * (g + 1)
    assert actmm_engine.packs(p, 8, p["max_k"], 8) == 1 and actmm_engine.packs(p, 8, 8, p["max_n"] + 1) == 1
    assert actmm_engine.packs(dict(p, output_exponent="rolling"), 8, 8, 8) == 1


T, F, H = 4, 8, 2


def _mha(path, seed=0):
    """Two-head self-attention, batch fixed at 1: q, k, v by constants (engine layers), the
    heads split by Reshape and Transpose, q·kᵀ and the scores by v MatMuls of two activations."""
    rng = np.random.default_rng(seed)
    d = F // H
    init = [numpy_helper.from_array((rng.normal(size=(F, F)) / 3).astype(np.float32), nm)
            for nm in ("wq", "wk", "wv", "wo")]
    init += [numpy_helper.from_array(np.array([1, T, H, d], np.int64), "heads"),
             numpy_helper.from_array(np.array([1, T, F], np.int64), "merged")]
    nodes = []
    for nm in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", ["x", "w" + nm], [nm + "0"]),
                  helper.make_node("Reshape", [nm + "0", "heads"], [nm + "1"]),
                  helper.make_node("Transpose", [nm + "1"], [nm + "h"], perm=[0, 2, 1, 3])]      # (1, H, T, d)
    nodes += [helper.make_node("Transpose", ["kh"], ["kt"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["qh", "kt"], ["s"]),
              helper.make_node("Softmax", ["s"], ["pr"], axis=-1),
              helper.make_node("MatMul", ["pr", "vh"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merged"], ["om"]),
              helper.make_node("MatMul", ["om", "wo"], ["y"])]
    g = helper.make_graph(nodes, "mha", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, T, F])],
                          [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, T, F])], init)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def _fixed8(v, rounding):
    """Independent fixed point: each sample's int8 at the radix point that puts its largest
    magnitude's leading one in bit 6 (a value that rounds to 128 saturates at 127)."""
    f = np.array([6 - int(np.floor(np.log2(np.abs(s).max()))) for s in v]).reshape((-1,) + (1,) * (v.ndim - 1))
    return np.clip(_round(v * 2.0 ** f, rounding), -128, 127) * 2.0 ** -f


@pytest.mark.parametrize("dims", [(3, 2, 5, 6, 7), (2, 2, 3, 70, 4), (2, 3, 40, 8, 40)])
def test_sparse_engine_product_is_the_fixed_point_rule(dims, monkeypatch):
    """fixed8 on sparse_cluster: exactly the product of the operands quantized per sample
    (K = 70 beyond max_in_channels = 64: raw calls added; 40 x 8 by 8 x 40: packs of 6)."""
    n, h, t, k, s = dims
    acc = hlsnn.Accelerator("sparse8_pynq-z2", "emu")
    try:
        mm = actmm_sparse.SparseActMatMul(SimpleNamespace(p=acc.config.params, acc=acc), "nearest_away")
        rng = np.random.default_rng(sum(dims))
        a, b = _operands(rng, (n, h, t, k), (n, h, k, s))
        got = mm.matmul(a, b)
        np.testing.assert_array_equal(got, _fixed8(a, "nearest_away") @ _fixed8(b, "nearest_away"))
        assert np.abs(got - a @ b).max() > 0
        p = acc.config.params
        g = actmm_sparse.packs(p, k, s)
        assert g == (1 if k > p["max_in_channels"] else min(p["max_in_channels"] // k, p["max_out_channels"] // s))
        # one call per pack (its map within max_hw, its channels within the limits), per chunk of K
        assert mm.gemms == n * h and mm.calls == -(-(n * h) // g) * -(-k // p["max_in_channels"])
        monkeypatch.setattr(actmm_sparse, "packs", lambda *args: 1)
        mm.reset()
        np.testing.assert_array_equal(mm.matmul(a, b), got)            # one GEMM per convolution
        assert mm.calls == n * h * -(-k // p["max_in_channels"])
    finally:
        acc.close()


FORMATS = {"bfp": "bfp8_zcu104", "fixed": "sparse8_pynq-z2"}


def _run_on(path, target, x, fmt="bfp"):
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    cfg = path.parent / "c.yaml"
    cfg.write_text(f"name: mha\nmodel: {path}\ndata: digits\nlayout: ntf\n"
                   f"formats:\n  f: {{type: {fmt}, accel: {FORMATS[fmt]}}}\nassignments:\n  f: {{default: f}}\n")
    cfg = load_deploy_config(cfg)
    accs = open_accelerators(cfg, target)
    try:
        dep = Deployment(load_onnx(cfg.model), cfg.assignments["f"], cfg.formats, accs, rounding=cfg.rounding)
        dep.calibrate(x)
        for q in dep.actmm.values():
            q.engine.reset()
        y, env = dep.run(x, keep=True)
        return y, env, {k: (q.engine.gemms, q.engine.calls) for k, q in dep.actmm.items()}
    finally:
        for a in accs.values():
            a.close()


def test_attention_runs_its_matmuls_on_the_engine_as_the_rule_says(tmp_path):
    path = _mha(tmp_path / "mha.onnx")
    x = np.random.default_rng(3).normal(size=(6, T, F))
    _, env, calls = _run_on(path, "emu", x)
    p = hlsnn.load_config("bfp8_zcu104").params
    np.testing.assert_array_equal(env["s"], reference(env["qh"], np.swapaxes(env["kh"], -1, -2), p))
    np.testing.assert_array_equal(env["o"], reference(env["pr"], env["vh"], p))
    # 6 samples x 2 heads = 12 GEMMs of (4 x 4) by (4 x 4) per MatMul, one block-diagonal call each
    assert sorted(calls.values()) == [(12, 1), (12, 1)]


@pytest.mark.csim
@pytest.mark.parametrize("fmt", ["bfp", "fixed"])
def test_emu_csim_sim_give_the_same_bits(tmp_path, fmt):
    """The whole deployment (its engine layers and both MatMuls of two activations) on the
    engine's emulator, the layer kernel's C-simulation and the simulated board."""
    path = _mha(tmp_path / "mha.onnx")
    x = np.random.default_rng(4).normal(size=(5, T, F))
    runs = {t: _run_on(path, t, x, fmt) for t in ("emu", "csim", "sim")}
    # bfp: on the engine; fixed8: attention's rule act_matmul on codes (hlsnn.deploy.run.attnrun), no engine call
    assert all((v[1] > 0) == (fmt == "bfp") for v in runs["emu"][2].values())
    for t in ("csim", "sim"):
        for name in ("s", "o", "y"):
            np.testing.assert_array_equal(runs[t][1][name], runs["emu"][1][name], err_msg=f"{t} {name}")
        assert runs[t][2] == runs["emu"][2]


def test_the_deploy_report_and_the_latency_model_count_the_engine_calls(tmp_path):
    """``hlsnn deploy`` of a torch-exported attention classifier in bfp8 (fixed8, one network
    kernel start, and two-hot below): on the emu layer path both MatMuls of two activations ran
    on bfp_systolic (100 test images x 2 heads = 200 GEMMs each, packed up to the stores' limit),
    and the end-to-end model (batch 1) is one start of the bfp network kernel (its attention
    loops on BFP pairs, hlsnn.engines.bfp_systolic.network.attnkern)."""
    from hlsnn.deploy.reports.evaluate import format_result
    from hlsnn.evaluation.run import deploy
    from hlsnn.deploy.importer.onnx_import import load_onnx
    model = ROOT / "tests" / "data" / "torch" / "beyond" / "mha_clf_ts17.onnx"
    cfg = tmp_path / "mha.yaml"
    cfg.write_text(f"name: mha\nmodel: {model}\ndata: digits\nlayout: ntf\n"
                   "formats:\n  bfp8: {type: bfp, accel: bfp8_zcu104}\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"
                   "  twohot: {type: twohot, accel: shift8_pynq-z2}\n"
                   "assignments:\n  bfp8: {default: bfp8}\n  fixed8: {default: fixed8}\n  twohot: {default: twohot}\n")
    res = deploy(cfg, "emu", test_samples=100)
    e = res["assignments"]["bfp8"]
    n_test = res["test_images"]
    g = actmm_engine.packs(hlsnn.load_config("bfp8_zcu104").params, 8, 8, 8)
    assert sorted(v["on"] for v in e["act_matmul"].values()) == ["bfp_systolic"] * 2
    # the emu runner takes the batch in slices of Deployment.chunk images, each its own packs
    from hlsnn.deploy.run.runner import Deployment
    calls = sum(-(-2 * min(Deployment.chunk, n_test - i) // g) for i in range(0, n_test, Deployment.chunk))
    assert all(v["gemms"] == 2 * n_test and v["kernel_calls"] == calls for v in e["act_matmul"].values())
    assert len(load_onnx(model).engine_layers()) > 1
    assert e["end_to_end"]["kernel_starts"] == 1        # the bfp network kernel's attention loops (issue 79)
    assert "MatMul of two activations on the engine" in format_result(res)
    # fixed8 and two-hot: attention's integer rules (hlsnn.engines.network.tokens.attention: rule act_matmul on codes,
    # no layer kernel call), the whole model in one start of the sparse or shift_mac network kernel
    fx, th = res["assignments"]["fixed8"], res["assignments"]["twohot"]
    assert [(v["on"], v["gemms"], v["kernel_calls"]) for v in fx["act_matmul"].values()] == [
        ("sparse_cluster", 0, 0)] * 2
    assert fx["end_to_end"]["kernel_starts"] == 1
    assert [v["on"] for v in th["act_matmul"].values()] == ["host"] * 2
    assert th["end_to_end"]["kernel_starts"] == 1


@pytest.mark.parametrize("fmt", ["bfp8", "fixed8"])
def test_a_compiled_attention_model_runs_its_matmuls_on_the_engine_as_deployed(tmp_path, fmt):
    """``hlsnn compile`` then ``hlsnn.load``: the loaded model places its MatMuls of two
    activations on the same engine (its self-check at load compares every layer with the
    compile-time emulator) and gives the deployment's bits."""
    from hlsnn.deploy import datasets
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    from hlsnn.network.build import compile_model
    model = ROOT / "tests" / "data" / "torch" / "beyond" / "encoder_clf_dynamo.onnx"
    cfg_path = tmp_path / "enc.yaml"
    cfg_path.write_text(f"name: enc\nmodel: {model}\ndata: digits\nlayout: ntf\n"
                        "formats:\n  bfp8: {type: bfp, accel: bfp8_zcu104}\n  fixed8: {type: fixed, accel: sparse8_pynq-z2}\n"
                        "assignments:\n  bfp8: {default: bfp8}\n  fixed8: {default: fixed8}\n")
    cfg = load_deploy_config(cfg_path)
    ds = datasets.load("digits", layout="ntf")
    accs = open_accelerators(cfg, "emu", [fmt])
    try:
        dep = Deployment(load_onnx(cfg.model), cfg.assignments[fmt], cfg.formats, accs, rounding=cfg.rounding)
        dep.calibrate(ds.x_train[:128])
        want = dep.run(ds.x_test[:16])
    finally:
        for a in accs.values():
            a.close()
    compile_model(cfg_path, fmt, tmp_path / "enc.hlsnn")
    with hlsnn.load(tmp_path / "enc.hlsnn", "emu") as got:
        engines = {q.engine.name for q in got._dep.actmm.values()}
        np.testing.assert_array_equal(got(ds.x_test[:16]), want)
    assert engines == {"bfp_systolic" if fmt == "bfp8" else "sparse_cluster"}
