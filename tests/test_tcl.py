"""The rendered Vitis HLS script runs under tclsh with stub tool commands (tests/tcl/),
and asks for the right part, top, clock, files and stages."""
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

import hlsnn
import hlsnn.engines
from hlsnn import codegen

from conftest import ROOT

STUBS = Path(__file__).parent / "tcl" / "vitis_hls_stubs.tcl"
pytestmark = pytest.mark.skipif(shutil.which("tclsh") is None, reason="tclsh not installed")


def run_script(script, log, *stages):
    subprocess.run(["tclsh", str(STUBS), str(script), str(log), *stages], check=True, capture_output=True, text=True)
    return [shlex.split(line.replace("{", '"').replace("}", '"')) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("path", sorted((ROOT / "configs" / "accel").glob("*.yaml")), ids=lambda p: p.stem)
def test_run_hls_tcl_calls(path, tmp_path):
    cfg = hlsnn.load_config(path)
    r = codegen.render(cfg, tmp_path / "hls")
    calls = run_script(r.dir / "run_hls.tcl", tmp_path / "log")
    names = [c[0] for c in calls]
    assert names == ["open_project", "set_top", "add_files", "add_files", "add_files", "open_solution",
                     "set_part", "create_clock", "config_export", "csim_design", "csynth_design", "export_design"]
    by = {c[0]: c for c in calls}
    assert by["set_top"][1] == hlsnn.engines.ENGINES[cfg.engine].TOP
    assert by["set_part"][1] == cfg.board.part
    assert float(by["create_clock"][2]) == pytest.approx(1000.0 / cfg.clock_mhz, abs=1e-3)
    assert "-flow_target" in by["open_solution"] and "vivado" in by["open_solution"]
    assert by["export_design"][1:] == ["-format", "ip_catalog"]
    added = [c[1] if c[1] != "-tb" else c[2] for c in calls if c[0] == "add_files"]
    for f in added:
        assert (r.dir / f).exists(), f"run_hls.tcl adds {f}, which the render did not produce"
    # stage selection: csim only
    calls = run_script(r.dir / "run_hls.tcl", tmp_path / "log2", "csim")
    names = [c[0] for c in calls]
    assert "csim_design" in names and "csynth_design" not in names and "export_design" not in names
