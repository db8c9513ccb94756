"""Compiled models (issue 31): ``hlsnn compile`` -> one file -> ``hlsnn.load(path, target)``.

The reference for a compiled network's bits is an independent deployment of the same
assignment (``Deployment`` calibrated afresh on the same images, on the emulator), and the
emulator for the other targets."""
import json
import subprocess
import sys
import zipfile

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.cli import main  # noqa: E402
from hlsnn.network import artifact  # noqa: E402
from hlsnn.network.build import compile_model  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.errors import HlsnnError, InputError  # noqa: E402

MODELS = ROOT / "configs" / "models"
CAL = 16          # calibration images of the compiled models and of the reference deployments


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    """(model, assignment) -> path of its compiled file, compiled once per module."""
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "compiled", calibration_samples=CAL)


def _reference(model, assignment, x):
    cfg = load_deploy_config(MODELS / f"{model}.yaml")
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data, layout="nchw" if model != "digits_mlp" else "flat")
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(net, cfg.assignments[assignment], cfg.formats, accs)
        dep.calibrate(ds.x_train[:CAL])
        return dep.run(x, keep=True)
    finally:
        for a in accs.values():
            a.close()


def _x(model, n=6):
    ds = datasets.load("digits", layout="flat" if model == "digits_mlp" else "nchw")
    return ds.x_test[100:100 + n]


@pytest.mark.parametrize("model,assignment", [("digits_mlp", "bfp16"), ("digits_mlp", "twohot+bfp8"),
                                              ("digits_cnn", "twohot"),
                                              pytest.param("digits_cnn", "sparse50", marks=pytest.mark.slow),
                                              pytest.param("digits_cnn", "pot", marks=pytest.mark.slow)])
def test_round_trip_gives_the_deployments_bits(compiled, model, assignment):
    path = compiled(model, assignment)
    x = _x(model)
    y_ref, env_ref = _reference(model, assignment, x)
    with hlsnn.load(path) as net:
        y, env = net.run(x, keep=True)
    lt = net.program["output"]["engine_tensor"]
    np.testing.assert_array_equal(env[lt], env_ref[lt])
    np.testing.assert_array_equal(y, y_ref)


def test_container_is_one_npz_without_pickles(compiled):
    path = compiled("digits_cnn", "twohot")
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
    assert "__program__.npy" in names and "conv1/e1.npy" in names and "check/x.npy" in names
    prog, arrays = artifact.read(path)          # np.load(allow_pickle=False) inside
    assert prog["format"] == artifact.FORMAT and prog["version"] == artifact.VERSION
    assert [j["name"] for j in prog["layers"]] == ["conv1", "pool1", "conv2", "pool2", "flatten", "fc", "softmax"]
    conv1 = prog["layers"][0]
    assert conv1["engine"] == "shift_mac" and conv1["op"] == "conv" and conv1["geom"]["pads"] == [1, 1, 1, 1]
    assert conv1["epilogue"]["relu"] is True and conv1["epilogue"]["requant"]["frac_bits"] == conv1["f_out"]
    assert prog["input"]["quantization"]["frac_bits"] == conv1["f_x"]
    assert prog["output"]["engine_layer"] == "fc" and prog["output"]["host_after"] == ["softmax"]
    assert arrays["conv1/e1"].dtype == np.int8                       # codes, not float weights
    assert all(a.dtype.kind in "biuf" for a in arrays.values())


def test_refuses_an_overlay_of_another_config(compiled):
    path = compiled("digits_cnn", "twohot")
    key = next(iter(artifact.read(path)[0]["accels"]))
    other = ROOT / "configs" / "accel" / "shift8_zcu104.yaml"
    if not other.exists():
        other = next(p for p in (ROOT / "configs" / "accel").glob("shift*.yaml") if key not in p.name)
    with pytest.raises(InputError, match=r"hash .* compiled for .* with hash"):
        hlsnn.load(path, overlays={key: other})
    with pytest.raises(InputError, match="not an accelerator of"):
        hlsnn.load(path, overlays={"nope": other})


def test_a_damaged_config_is_refused(compiled, tmp_path):
    prog, arrays = artifact.read(compiled("digits_cnn", "twohot"))
    acc = next(iter(prog["accels"].values()))
    acc["config"][acc["engine"]]["max_batch"] = acc["config"][acc["engine"]]["max_batch"] // 2
    bad = artifact.write(tmp_path / "bad.hlsnn", prog, arrays)
    with pytest.raises(InputError, match="damaged"):
        hlsnn.load(bad)


def test_self_check_catches_a_changed_weight(compiled, tmp_path):
    prog, arrays = artifact.read(compiled("digits_cnn", "twohot"))
    e1 = arrays["fc/e1"].copy()
    z = arrays["fc/zero"]
    i = int(np.flatnonzero(z.reshape(-1) == 0)[0])
    e1.reshape(-1)[i] = (e1.reshape(-1)[i] + 1) % 8
    arrays["fc/e1"] = e1
    bad = artifact.write(tmp_path / "bad.hlsnn", prog, arrays)
    with pytest.raises(HlsnnError, match="self-check failed"):
        hlsnn.load(bad)
    with hlsnn.load(bad, self_check=False) as net:       # the flag skips it
        assert net(net.check["x"]).shape == net.check["y"].shape


def test_bad_files_and_inputs_are_one_clear_error(tmp_path, compiled):
    (tmp_path / "x.hlsnn").write_bytes(b"not a zip")
    with pytest.raises(InputError, match="not a compiled model"):
        hlsnn.load(tmp_path / "x.hlsnn")
    with pytest.raises(InputError, match="no such compiled model"):
        hlsnn.load(tmp_path / "missing.hlsnn")
    with hlsnn.load(compiled("digits_cnn", "twohot")) as net:
        with pytest.raises(InputError, match=r"batch of shape \(B,\) \+ \(1, 8, 8\)"):
            net(np.zeros((1, 8, 8)))
    with pytest.raises(InputError, match="target"):
        hlsnn.load(compiled("digits_cnn", "twohot"), target="fpga")
    with pytest.raises(InputError, match=r"target pynq: give overlays=\{name: overlay folder\} for every accelerator"):
        hlsnn.load(compiled("digits_cnn", "twohot"), target="pynq")


BLOCKER = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('onnx', 'sklearn', 'yaml', 'jinja2', 'scipy', 'onnxruntime'):
            raise ImportError('blocked on the board: ' + name)
sys.meta_path.insert(0, Block())
"""


def test_the_board_loader_needs_no_onnx_sklearn_or_yaml(compiled):
    path = compiled("digits_cnn", "twohot")
    code = BLOCKER + f"""
import numpy as np, hlsnn
net = hlsnn.load({str(path)!r}, target="emu")
y = net(net.check["x"])
assert (y == net.check["y"]).all()
import hlsnn.runtime.pynq_target                   # what target="pynq" adds
print("ok", sorted(m for m in ('onnx', 'sklearn', 'yaml', 'jinja2') if m in sys.modules))
mods = sorted(n for n in sys.modules if n.startswith("hlsnn"))
print(chr(10).join(getattr(sys.modules[n], "__file__", None) or "" for n in mods))
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={"PYTHONPATH": str(ROOT / "host"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "ok []"
    # every hlsnn module the board imports parses as Python 3.8 (the PYNQ images' Python)
    import ast
    files = [f for f in lines[1:] if f.endswith(".py")]
    assert any(f.endswith("network/loader.py") for f in files) and len(files) > 30
    for f in files:
        ast.parse(open(f).read(), filename=f, feature_version=(3, 8))
    # the blocker really blocks: importing the deploy side (onnx) fails under it
    r = subprocess.run([sys.executable, "-c", BLOCKER + "import onnx"], capture_output=True, text=True)
    assert r.returncode != 0 and "blocked on the board" in r.stderr


def test_perf_json_keys_and_totals(compiled, capsys):
    path = compiled("digits_cnn", "twohot")
    assert main(["perf", str(path), "--json", "--layer-by-layer"]) == 0     # today's calls (the network path:
    res = json.loads(capsys.readouterr().out)                            # tests/deploy/test_network_kernel.py)
    assert res["path"] == "layers"
    for k in ("board", "kernel_starts", "kernel_us", "host_us", "end_to_end_us", "layers"):
        assert k in res, k
    assert res["board"] == "pynq-z2"
    names = [r["name"] for r in res["layers"]]
    assert names == ["conv1", "pool1", "conv2", "pool2", "flatten", "fc", "softmax"]
    for k in ("kernel_starts", "kernel_us", "host_us", "end_to_end_us", "ddr_us", "host_bytes"):
        assert res[k] == pytest.approx(sum(r[k] for r in res["layers"])), k
    assert res["end_to_end_us"] == pytest.approx(res["fabric_us"] + res["host_us"])
    eng = [r for r in res["layers"] if r["kernel_starts"]]
    assert [r["name"] for r in eng] == ["conv1", "conv2", "fc"]
    for r in eng:        # DMA at the HP port's 64 bits per PL cycle: bytes / 8 per cycle, at 100 MHz
        assert r["ddr_us"] == pytest.approx(r["dma_bytes"] / 8 / 100)
        assert r["kernel_us"] > 0 and r["fabric_us"] == max(r["kernel_us"], r["ddr_us"])
    assert all(r["kernel_us"] == 0 and r["host_us"] > 0 for r in res["layers"] if r["name"] in ("pool1", "softmax"))


def test_cli_compile_and_run(tmp_path, capsys):
    out = tmp_path / "m.hlsnn"
    assert main(["compile", str(MODELS / "digits_mlp.yaml"), "--assignment", "fixed8", "-o", str(out),
                 "--check-samples", "2", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["engine_layers"] == 2 and info["host_layers"] == ["softmax (Softmax)"]
    assert info["path"] == "network" and info["layer_by_layer_because"] is None
    x = tmp_path / "x.npy"
    np.save(x, _x("digits_mlp", 3))
    y = tmp_path / "y.npy"
    assert main(["run", str(out), "--input", str(x), "--target", "emu", "--output", str(y), "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["mismatches"] == 0 and res["images"] == 3 and np.load(y).shape == (3, 10)
    assert main(["compile", str(MODELS / "digits_mlp.yaml"), "--assignment", "nope", "-o", str(out)]) == 2
    assert "not in" in capsys.readouterr().err


def test_cli_compile_says_where_each_layer_runs(tmp_path, capsys):
    """The summary names the host layers a board runs: on the network kernel the pools and the
    flatten are the kernel's (only the softmax after the logits is the host's); a model the
    network kernel refuses (two accelerators) runs layer by layer, and the summary says why."""
    out = tmp_path / "c.hlsnn"
    assert main(["compile", str(MODELS / "digits_cnn.yaml"), "--assignment", "twohot", "-o", str(out),
                 "--check-samples", "1"]) == 0
    text = capsys.readouterr().out
    assert "one network kernel start per batch" in text and "on the host after it: softmax (Softmax)" in text
    assert main(["compile", str(MODELS / "digits_cnn.yaml"), "--assignment", "twohot+bfp8", "-o", str(out),
                 "--check-samples", "1", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["path"] == "layers" and "2 accelerators" in info["layer_by_layer_because"]
    assert "pool1 (MaxPool)" in info["host_layers"] and "softmax (Softmax)" in info["host_layers"]


@pytest.mark.csim
@pytest.mark.parametrize("model,assignment", [("digits_mlp", "twohot"), ("digits_cnn", "fixed8")])
def test_emu_csim_sim_give_the_same_bits(compiled, model, assignment):
    path = compiled(model, assignment)
    x = _x(model, 4)
    outs = {}
    for target in ("emu", "csim", "sim"):
        # layer by layer (the network kernel's C-simulation: tests/deploy/test_network_kernel.py, slow)
        with hlsnn.load(path, target=target, network=False) as net:   # the self-check runs on each target too
            outs[target] = net.logits(x)
    np.testing.assert_array_equal(outs["emu"], outs["csim"])
    np.testing.assert_array_equal(outs["emu"], outs["sim"])


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("assignment", ["bfp16", "twohot"])
def test_resnet8_compiled_is_bit_exact_on_every_target(tmp_path, assignment):
    path = tmp_path / "r8.hlsnn"
    compile_model(MODELS / "resnet8_digits32.yaml", assignment, path, calibration_samples=CAL)
    x = datasets.load("digits32").x_test[:2]
    outs = {}
    for target in ("emu", "csim", "sim"):
        with hlsnn.load(path, target=target) as net:
            outs[target] = net.logits(x)
    np.testing.assert_array_equal(outs["emu"], outs["csim"])
    np.testing.assert_array_equal(outs["emu"], outs["sim"])


@pytest.mark.csim
def test_refuses_a_sim_overlay_folder_of_another_config(compiled, tmp_path):
    """The board's path: an overlay folder whose manifest names another config is refused."""
    from hlsnn.engines import ENGINES
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    path = compiled("digits_cnn", "twohot")
    key = next(iter(artifact.read(path)[0]["accels"]))
    cfg = hlsnn.load_config("bfp16_pynq-z2")
    other = prepare_sim_overlay(cfg, ENGINES[cfg.engine], tmp_path / cfg.name)
    with pytest.raises(InputError, match=r"bfp16_pynq_z2 has hash .* build the overlay from the same config"):
        hlsnn.load(path, target="sim", overlays={key: other})


def test_refuses_an_overlay_of_another_config_before_compiling_its_kernel(compiled, tmp_path, monkeypatch):
    """The config hash is compared first: a refused overlay costs no g++ run of the sim library."""
    from hlsnn import csim
    from hlsnn.engines import ENGINES
    from hlsnn.runtime.sim_target import prepare_sim_overlay
    path = compiled("digits_cnn", "twohot")
    key = next(iter(artifact.read(path)[0]["accels"]))
    cfg = hlsnn.load_config("bfp16_pynq-z2")
    other = prepare_sim_overlay(cfg, ENGINES[cfg.engine], tmp_path / cfg.name)

    def no_compiler(*a, **kw):
        pytest.fail("the kernel library was compiled before the overlay's config hash was compared")
    monkeypatch.setattr(csim, "compile_library", no_compiler)
    for ov in (other, "bfp16_pynq-z2"):              # an overlay folder, a config by name
        with pytest.raises(InputError, match=r"bfp16_pynq_z2 has hash .* build the overlay from the same config"):
            hlsnn.load(path, target="sim", overlays={key: ov})
