"""C-simulation of the generated C++ == the emulator, bit for bit; the stand-alone Vitis
testbench; protocol errors; the compile cache; and proof that the comparison catches a
planted bug."""
import os
import subprocess

import numpy as np
import pytest

import hlsnn
from hlsnn import codegen, csim
from hlsnn.compare import compare
from hlsnn.engines import ENGINES
from hlsnn.runtime.targets import CsimTarget

from conftest import BFP_TEST_CONFIGS, ROOT, planted_csim, stable_seed, test_config

pytestmark = pytest.mark.csim

SHIPPED = [c for c in sorted((ROOT / "configs" / "accel").glob("*.yaml")) if c.name.startswith("bfp")]
#: configs whose csim library no other quick test compiles: their cases here are slow-only (a
#: g++ run of ~14 CPU-s each); bfp8_zcu104 runs the same 8-bit format in the quick suite, and
#: t8_packed_gemv the DSP packing of these two (test_csim_equals_emulator_on_seeded_sweep)
SLOW_CONFIGS = {"bfp8_ultra96v2", "bfp8_aup-zu3"}


def _params(paths):
    return [pytest.param(p, marks=pytest.mark.slow) if p.stem in SLOW_CONFIGS else p for p in paths]


ALL_CONFIGS = _params(SHIPPED + sorted(BFP_TEST_CONFIGS.glob("*.yaml")))


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: p.stem)
def test_csim_equals_emulator_on_seeded_sweep(path):
    cfg = hlsnn.load_config(path)
    rep = compare(cfg, "csim", seed=1234, n_random=6)
    assert rep["cases"] >= 15
    assert rep["mismatches"] == 0, rep["first_mismatch"]
    assert rep["register_mismatches"] == []


def test_worked_examples_on_csim():
    from test_emulator import _row_values
    y, sat = _row_values([255], target="csim")
    assert (int(y.exponents[0, 0]), int(y.mantissas[0, 0]), sat) == (-7, 0x7F80, 0)
    # T1.6: 255 * 257 = 65535 -> e = 1, 32767.5 rounds to 32768 and saturates to 0x7FFF
    from hlsnn.formats import bfp
    cfg = hlsnn.load_config(test_config("t16_row"))
    x = bfp.BFPTensor.from_parts(np.array([[255]]), np.zeros((1, 1), np.int32), 16, axis=1)
    w = bfp.BFPTensor.from_parts(np.array([[257]]), np.zeros((1, 1), np.int32), 16, axis=1)
    with hlsnn.Accelerator(cfg, "csim") as acc:
        y = acc.gemm_bfp(x, w)
        assert (int(y.exponents[0, 0]), int(y.mantissas[0, 0]), acc.kernel.last_sat_count) == (1, 0x7FFF, 1)


@pytest.mark.slow   # t16_stats's library (SLOW_CSIM_CONFIGS); the stats method runs on csim in the quick
#                     suite in test_bfp_gemv.py::test_gemv_mode_with_every_output_method...[stats]
def test_worked_stats_example_on_csim():
    from test_emulator import _row_values
    y, _ = _row_values([19, 21], target="csim", name="t16_stats", method="stats", stats_k=3, we=-1)
    assert int(y.exponents[0, 0]) == -11


@pytest.mark.parametrize("path", _params(SHIPPED), ids=lambda p: p.stem)
def test_float_gemm_csim_equals_emu_for_shipped_configs(path):
    rng = np.random.default_rng(stable_seed(path.stem, 4))
    x, w, b = rng.normal(size=(9, 77)), rng.normal(size=(40, 77)) * 3, rng.normal(size=40)
    with hlsnn.Accelerator(path, "csim") as c, hlsnn.Accelerator(path, "emu") as e:
        np.testing.assert_array_equal(c.gemm(x, w, bias=b, relu=True), e.gemm(x, w, bias=b, relu=True))


def test_standalone_testbench_passes_and_fails_on_corrupted_vectors(tmp_path):
    """tb.cpp is what Vitis HLS csim_design runs: build it with g++ and run it on the
    emulator's tb_data, then on a copy with one flipped bit."""
    cfg = hlsnn.load_config(test_config("t9_wide"))
    r = codegen.render(cfg, tmp_path / "hls")
    exe = tmp_path / "tb"
    subprocess.run([csim.compiler(), "-std=c++14", "-O1", f"-I{r.dir / 'include'}", f"-I{r.dir}",
                    f"-isystem{csim.ap_types_dir()}", str(r.dir / "bfp_systolic.cpp"), str(r.dir / "tb.cpp"),
                    "-o", str(exe)], check=True)
    ok = subprocess.run([str(exe), str(r.dir / "tb_data")], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout
    assert "0 mismatching" in ok.stdout
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in ("in.hex", "regs.txt"):
        (bad / f).write_text((r.dir / "tb_data" / f).read_text())
    lines = (r.dir / "tb_data" / "expected.hex").read_text().splitlines()
    lines[1] = lines[1][:-1] + format(int(lines[1][-1], 16) ^ 1, "x")
    (bad / "expected.hex").write_text("\n".join(lines) + "\n")
    res = subprocess.run([str(exe), str(bad)], capture_output=True, text=True)
    assert res.returncode == 1 and "first mismatch at byte" in res.stdout


def test_protocol_violations_raise_instead_of_hanging():
    cfg = hlsnn.load_config(test_config("t16_row"))
    eng = ENGINES[cfg.engine]
    tgt = CsimTarget(cfg, eng)
    p = cfg.params
    xm, wm = np.ones((2, 5), int), np.ones((3, 5), int)
    beats = eng.protocol.pack_input(p, xm, np.zeros(2), wm, np.zeros(3))
    regs = [2, 3, 5, 0, 3]
    n_out = eng.protocol.n_output_beats(p, 2, 3)
    out, _ = tgt.run(beats, regs, n_out)                       # well-formed: fine
    with pytest.raises(hlsnn.CsimError, match="read more input beats"):
        tgt.run(beats[:-1], regs, n_out)
    with pytest.raises(hlsnn.CsimError, match="left input beats unread"):
        tgt.run(np.concatenate([beats, beats[:1]]), regs, n_out)
    with pytest.raises(hlsnn.CsimError, match="more output beats"):
        tgt.run(beats, regs, n_out - 1)
    with pytest.raises(hlsnn.CsimError, match="fewer output beats"):
        tgt.run(beats, regs, n_out + 1)


def test_library_is_cached_by_source_hash(tmp_path):
    # the run's build folder: the library other tests of t2_tiny compile (once a run) is reused
    cfg = hlsnn.load_config(test_config("t2_tiny"))
    first = CsimTarget(cfg, ENGINES[cfg.engine])
    mtime = first.library_path.stat().st_mtime_ns
    again = CsimTarget(cfg, ENGINES[cfg.engine])
    assert again.library_path == first.library_path and again.library_path.stat().st_mtime_ns == mtime
    other = hlsnn.load_config({**_raw(test_config("t2_tiny")), "name": "t2_other"}, source="x")
    assert csim.library_path(codegen.render(other, tmp_path / "b")).name != first.library_path.name


def _raw(path):
    import yaml
    return yaml.safe_load(path.read_text())


def test_compile_error_shows_compiler_message_and_rendered_path(tmp_path):
    cfg = hlsnn.load_config(test_config("t2_tiny"))
    r = codegen.render(cfg, tmp_path / "hls")
    src = r.dir / "bfp_systolic.cpp"
    src.write_text(src.read_text().replace("sat_count = sat_total;", "sat_count = no_such_variable;"))
    broken = codegen.reread(r)
    with pytest.raises(hlsnn.CompileError) as exc:
        csim.compile_library(broken)
    assert "no_such_variable" in str(exc.value) and str(src) in str(exc.value)
    assert not list((tmp_path / "csim").glob("*.so")), "a failed compile must not leave a library"


def test_planted_kernel_bug_is_reported_as_mismatch(tmp_path, capsys):
    """The comparison must be able to fail: break ReLU at -1 in the rendered kernel."""
    cfg = hlsnn.load_config(test_config("t16_row"))
    r = codegen.render(cfg, tmp_path / "hls")
    tgt = planted_csim(cfg, r, "bfp_systolic.cpp", "if (k.relu && v < 0) v = 0;", "if (k.relu && v < -1) v = 0;")
    rep = compare(cfg, "csim", seed=0, n_random=2, target_obj=tgt)
    assert rep["mismatches"] > 0
    f = rep["first_mismatch"]
    assert f["case"] == "unit_values_relu"
    assert f["expected"]["mantissa"] == 0 and f["got"]["mantissa"] < 0
    assert f["got"]["raw"].startswith("0x")


def test_cli_csim_and_compare_exit_status():
    env = dict(os.environ)                  # the session's build folder: the library compiles once a run
    cfgp = str(test_config("t2_tiny"))
    res = subprocess.run(["hlsnn", "csim", cfgp], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert "0 mismatches" in res.stdout and "PASS" in res.stdout
    res = subprocess.run(["hlsnn", "compare", cfgp, "--target", "csim", "--json"], capture_output=True, text=True,
                         env=env)
    import json
    rep = json.loads(res.stdout)
    assert res.returncode == 0 and rep["mismatches"] == 0 and rep["target"] == "csim"
