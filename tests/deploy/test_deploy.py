"""Whole-model deployment: configs, the runner's rules checked against independent integer
arithmetic, accuracy of the shipped digits models, bit-exact agreement between targets, and
the CLI."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("sklearn")

from hlsnn.cli import main  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.deploy.quantize.quant import host_radix  # noqa: E402
from hlsnn.errors import ConfigError  # noqa: E402
from hlsnn.formats import shift as sfmt  # noqa: E402
from hlsnn.primitives import shift_round_sat  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "configs" / "models"
MLP, CNN = MODELS / "digits_mlp.yaml", MODELS / "digits_cnn.yaml"


def _write(tmp_path, text, name="m.yaml"):
    p = tmp_path / name
    p.write_text(text)
    return p


def _base(model=str(MODELS / "digits_mlp.onnx")):
    return f"name: t\nmodel: {model}\n"


@pytest.mark.parametrize("extra, key, what", [
    ("colour: red\n", "colour", "unknown key"),
    ("formats: {a: {type: float16, accel: x.yaml}}\n", "formats.a.type", "one of"),
    (f"formats: {{a: {{type: pot, accel: {ROOT}/configs/accel/bfp8_zcu104.yaml}}}}\n", "formats.a.accel",
     "runs on engine shift_mac"),
    (f"formats: {{a: {{type: pot, accel: {ROOT}/configs/accel/shift8_pynq-z2.yaml, prune: 0.5}}}}\n",
     "formats.a.prune", "only format type 'sparse'"),
    (f"formats: {{a: {{type: pot, accel: {ROOT}/configs/accel/shift8_pynq-z2.yaml}}}}\n"
     "assignments: {x: {default: b}}\n", "assignments.x.default", "must name a format"),
    ("calibration: {overflow_ratio: 2}\n", "calibration.overflow_ratio", "a number in"),
])
def test_config_errors_name_the_key(tmp_path, extra, key, what):
    with pytest.raises(ConfigError) as e:
        load_deploy_config(_write(tmp_path, _base() + extra))
    assert key in str(e.value) and what in str(e.value)


def test_default_formats_and_assignments(tmp_path):
    cfg = load_deploy_config(_write(tmp_path, _base()))
    assert set(cfg.formats) == {"bfp8", "twohot", "pot", "fixed8", "sparse50", "sparse80"}
    assert all(a.default == n and not a.layers for n, a in cfg.assignments.items())


def test_host_radix_is_max_based():
    # 1.0 needs unsigned_msb 6 above the radix in int8: F = 6 (64 = 1.0); 0.99 fits F = 7
    assert host_radix(np.array([0.0, 1.0, -0.5]), 8, True) == 6
    assert host_radix(np.array([0.99, 0.1]), 8, True) == 7
    assert host_radix(np.array([0.99, 0.1]), 8, False) == 8
    assert host_radix(np.array([-1.0, 0.25]), 8, True) == 7        # -128/128 fits


def _dense_net(tmp_path, k=24, n=20, relu=True, seed=0):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array(rng.normal(0, 0.3, (k, n)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.normal(0, 0.2, n).astype(np.float32), "b")]
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["g"], name="fc")]
    nodes.append(helper.make_node("Relu" if relu else "Identity", ["g"], ["y"], name="act"))
    g = helper.make_graph(nodes, "d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])], initializer=inits)
    p = tmp_path / "dense.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), str(p))
    return p


def test_twohot_layer_follows_the_documented_rules(tmp_path):
    """The emulator path of a two-hot dense layer equals integer arithmetic written here from
    the runner's docstring: input at the max-based radix, per-tensor two-hot weights, bias in
    accumulator units, the output radix from DETERMINE on the exact wide results."""
    model = _dense_net(tmp_path)
    cfgp = _write(tmp_path, _base(model) + f"formats: {{th: {{type: twohot, weight_fit: nearest, accel: "
                                           f"{ROOT}/configs/accel/shift8_pynq-z2.yaml}}}}\n")
    cfg = load_deploy_config(cfgp)
    net = load_onnx(model)
    layer = net.layer("fc")
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (50, 24))
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments["th"], cfg.formats, accs, rounding="nearest_away")
        dep.calibrate(x)
        got = dep.run(x)
    finally:
        for a in accs.values():
            a.close()
    # independent integer arithmetic
    amax = np.abs(x).max()
    top = int(np.floor(np.log2(amax)))                         # a float's MSB position
    fx = 6 - top                                               # int8: magnitude bits [top-6 .. top]
    xi = np.clip(np.floor(np.abs(x) * 2.0 ** fx + 0.5) * np.sign(x), -128, 127).astype(np.int64)
    wq = sfmt.quantize_twohot(layer.w, 4, delta=0, axis=None)
    fw = int(np.asarray(wq.scale_exponent).reshape(-1)[0])
    codes = wq.code_values().astype(np.int64)
    bias = np.rint(layer.b * 2.0 ** (fx + fw)).astype(np.int64)
    wide = np.maximum(xi @ codes.T + bias, 0)
    top_out = max(int(v).bit_length() - 1 for v in wide.reshape(-1) if v > 0)
    s = top_out - 6
    y, _ = shift_round_sat(wide, s, 8, "nearest_even")        # the shift8 config's rounding
    np.testing.assert_array_equal(got, np.ldexp(y.astype(np.float64), -(fx + fw - s)))


@pytest.fixture(scope="module")
def results():
    return {"mlp": deploy(MLP, "emu", per_layer=True), "cnn": deploy(CNN, "emu", per_layer=True)}


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_bfp8_and_twohot_within_one_point_of_float(results, model):
    r = results[model]
    assert r["test_images"] == 360 and r["float_accuracy"] > 0.95
    for fmt in ("bfp8", "twohot"):
        assert r["assignments"][fmt]["accuracy"] >= r["float_accuracy"] - 0.01, fmt


@pytest.mark.parametrize("model", ["mlp", "cnn"])
def test_readme_accuracy_table_is_reproduced(results, model):
    """The accuracy table of docs/deploy.md (digits, emu target; the README's before it became a
    front page) is what the shipped configs give."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    rows = re.findall(rf"^\| digits_{model} \| ([\w+]+) \| ([\d.]+)% \| ([\d.]+)% \|", text, re.M)
    assert rows, "docs/deploy.md has no accuracy rows for digits_" + model
    r = results[model]
    for fmt, float_acc, acc in rows:
        assert f"{100 * r['float_accuracy']:.2f}" == float_acc
        assert f"{100 * r['assignments'][fmt]['accuracy']:.2f}" == acc, fmt
    assert {f for f, _, _ in rows} == set(r["assignments"])


def test_pruning_reaches_the_configured_sparsity(results):
    for model in ("mlp", "cnn"):
        for fmt, want in (("sparse50", 0.5), ("sparse80", 0.8)):
            for layer, v in results[model]["assignments"][fmt]["per_layer"].items():
                assert v["weight_sparsity"] >= want - 1e-3, (model, fmt, layer)   # round(want * size) weights


@pytest.mark.csim
# csim is slow-only (~30 CPU-s of kernel runs): the sim board runs the same csim libraries behind
# its DMA and registers, and test_compiled_model / test_conv_geometry / test_torch_exports keep
# deployments on csim in the quick suite
@pytest.mark.parametrize("target", [pytest.param("csim", marks=pytest.mark.slow), "sim"])
def test_targets_agree_bit_for_bit_with_emulation(target):
    """Every format of the MLP and of the CNN, on 24 test images: the outputs of the target
    equal the emulator's, bit for bit. The two-hot pair is the first candidate's (the subject is
    the target's bits, not the choice: tests/conftest.py's first_pair)."""
    from conftest import first_pair
    with first_pair():
        _targets_agree(target)


def _targets_agree(target):
    for path in (MLP, CNN):
        cfg = load_deploy_config(path)
        net = load_onnx(cfg.model)
        ds = datasets.load("digits", layout="nchw" if "cnn" in str(path) else "flat")
        x_cal, x = ds.x_train[:32], ds.x_test[:24]
        emu, tgt = open_accelerators(cfg, "emu"), open_accelerators(cfg, target)
        try:
            for name, asg in cfg.assignments.items():
                outs = []
                for accs in (emu, tgt):
                    dep = Deployment(net, asg, cfg.formats, accs)
                    dep.calibrate(x_cal)
                    outs.append(dep.run(x))
                np.testing.assert_array_equal(outs[0], outs[1], err_msg=f"{path.name} {name} on {target}")
        finally:
            for a in list(emu.values()) + list(tgt.values()):
                a.close()


@pytest.mark.csim
@pytest.mark.slow
def test_deploy_on_sim_runs_the_network_kernel_with_the_emulators_bits():
    """On sim, an assignment with a network kernel runs its test images in one kernel start;
    its outputs equal the layer-by-layer emulator's bit for bit (compared here directly, beside
    the self-check the loader runs), and a mixed-engine assignment runs layer by layer."""
    from hlsnn.evaluation.run import network_net
    cfg = load_deploy_config(CNN)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits", layout="nchw")
    x_cal, x = ds.x_train[:32], ds.x_test[:40]
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments["twohot"], cfg.formats, accs)
        dep.calibrate(x_cal)
        want = dep.run(x)
        with network_net(dep, net, cfg, "twohot", accs, x[:2], "sim", {}) as cnet:
            got = cnet.run(x)
            assert cnet.last_kernel_starts == 1
        assert got.view(np.uint64).tolist() == want.view(np.uint64).tolist()
    finally:
        for a in accs.values():
            a.close()
    res = deploy(CNN, "sim", assignments=["twohot", "twohot+bfp8"], test_samples=40)
    a = res["assignments"]
    assert a["twohot"]["run"] == {"path": "network kernel", "kernel_starts": 1, "batch": 40}
    assert a["twohot+bfp8"]["run"] == {"path": "layer by layer"}
    lbl = deploy(CNN, "sim", assignments=["twohot"], test_samples=40, network=False)
    assert lbl["assignments"]["twohot"]["run"] == {"path": "layer by layer"}
    assert lbl["assignments"]["twohot"]["accuracy"] == a["twohot"]["accuracy"]
    req = deploy(CNN, "sim", assignments=["twohot+bfp8"], test_samples=8, network=True)
    assert "accelerator" in req["assignments"]["twohot+bfp8"]["error"], req["assignments"]["twohot+bfp8"]


def test_only_the_accelerators_of_the_chosen_assignments_are_opened():
    """A C-simulation or a simulated board is built per accelerator opened: deploy opens those of
    the assignments it runs, not every format's of the config."""
    cfg = load_deploy_config(CNN)
    accels = {name: f.accel for name, f in cfg.formats.items()}
    for wanted, formats in ((["twohot"], {"twohot"}), (["twohot+bfp8"], {"twohot", "bfp8"}),
                            (["pot", "fixed8"], {"pot", "fixed8"})):
        accs = open_accelerators(cfg, "emu", wanted)
        try:
            assert set(accs) == {accels[f] for f in formats}, wanted
        finally:
            for a in accs.values():
                a.close()
    accs = open_accelerators(cfg, "emu")
    try:
        assert set(accs) == set(accels.values())
    finally:
        for a in accs.values():
            a.close()


def test_cli_deploy_json(capsys):
    assert main(["deploy", str(MLP), "--assignment", "twohot", "--test-samples", "50", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "digits_mlp" and out["target"] == "emu" and out["test_images"] == 50
    assert set(out["assignments"]) == {"twohot"}
    assert 0 <= out["assignments"]["twohot"]["accuracy"] <= 1 and out["assignments"]["twohot"]["images_per_s"] > 0


def test_cli_unsupported_model_is_one_clear_error(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("Sin", ["x"], ["y"], name="sig")], "s",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), str(tmp_path / "s.onnx"))
    cfgp = _write(tmp_path, _base(tmp_path / "s.onnx"))
    assert main(["deploy", str(cfgp)]) == 2
    err = capsys.readouterr().err
    assert "sig (Sin)" in err and "--host-fallback" in err and "Traceback" not in err


def test_a_batch_in_slices_gives_the_bits_and_statistics_of_one_piece():
    """Deployment.run on emu takes a batch in slices of ``chunk`` images: every format of the
    CNN gives the same outputs (and kept tensors) as in one piece, and the layers' saturation
    counts and input densities are those of the whole batch."""
    cfg = load_deploy_config(CNN)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits", layout="nchw")
    x = ds.x_test[:50]
    accs = open_accelerators(cfg, "emu")
    try:
        for name, asg in cfg.assignments.items():
            dep = Deployment(net, asg, cfg.formats, accs)
            dep.calibrate(ds.x_train[:32])
            dep.chunk = 1 << 20
            whole, whole_env = dep.run(x, keep=True)
            stats = {k: (ex.stats.sat_count, ex.stats.input_density) for k, ex in dep.execs.items()}
            dep.chunk = 7                                  # 50 = 7 * 7 + 1: a short last slice
            part, part_env = dep.run(x, keep=True)
            np.testing.assert_array_equal(whole, part, err_msg=name)
            assert set(whole_env) == set(part_env)
            for k in whole_env:
                np.testing.assert_array_equal(whole_env[k], part_env[k], err_msg=f"{name} {k}")
            for k, ex in dep.execs.items():
                assert ex.stats.sat_count == stats[k][0]
                assert ex.stats.input_density == pytest.approx(stats[k][1], rel=1e-12)
    finally:
        for a in accs.values():
            a.close()
