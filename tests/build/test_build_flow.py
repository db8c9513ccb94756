"""`hlsnn build` end to end with fake Xilinx tools (tests/build/fake_tools/{vitis_hls,vivado}):
the overlay and its manifest, failures at every stage (each leaves the logs and never touches a
good overlay), missing tools (exit 3 with the finishing commands), --dry-run, the C-simulation
gate, tool discovery (XILINX_HLS / XILINX_VIVADO before PATH) and scripts/build_bitstream.py."""
import json
import re
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hlsnn
import hlsnn.build.flow
import hlsnn.cli
from hlsnn import codegen, csim
from hlsnn import regmap
from hlsnn.build import EXIT, BuildFailed, reports, tools
from hlsnn.build.flow import run_tool

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
FAKE_TOOLS = HERE / "fake_tools"
TINY = ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml"
NAME = "t2_tiny"          # the config's name and stem
TOP = "bfp_systolic_top"
STAGES = ("render", "csim", "hls", "hls-report", "vivado", "overlay")

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")


# ------------------------------------------------------------------ fixtures and helpers
@pytest.fixture(scope="module")
def csim_cache():
    """The compiled C-simulation library of the tiny config, the test run's own (the session's
    build folder, tests/conftest.py: compiled once per run); each test copies it into its own
    build folder (the library is keyed by the rendered sources, not by their folder)."""
    rendered = codegen.render(hlsnn.load_config(TINY))
    return csim.compile_library(rendered).parent


def _seed_build(build_root, csim_cache):
    shutil.copytree(csim_cache, Path(build_root) / NAME / "csim", dirs_exist_ok=True)


class Env:
    """The test's environment: build root, overlay folder, fake-tool call log."""

    def __init__(self, tmp_path, monkeypatch, capsys):
        self.tmp, self.mp, self.capsys = tmp_path, monkeypatch, capsys
        self.build = tmp_path / "build"
        self.out = tmp_path / "overlays"
        self.calls_log = tmp_path / "tool_calls.jsonl"
        self.proj = self.build / NAME
        self.logs = self.proj / "logs"
        self.overlay = self.out / NAME

    def main(self, *args, config=TINY, out=None):
        """``hlsnn build`` in this process; returns (status, stdout, stderr)."""
        self.capsys.readouterr()
        rc = hlsnn.cli.main(["build", str(config), "--out", str(out or self.out), *args])
        cap = self.capsys.readouterr()
        return rc, cap.out, cap.err

    def tool_calls(self, *, runs_only=True):
        """The fake tools' calls (``-version`` queries left out unless runs_only is False)."""
        if not self.calls_log.exists():
            return []
        calls = [json.loads(line) for line in self.calls_log.read_text().splitlines()]
        return [c for c in calls if not (runs_only and c["argv"][:1] == ["-version"])]

    def snapshot(self, folder):
        return {p.name: p.read_bytes() for p in sorted(Path(folder).iterdir())}


@pytest.fixture
def env(tmp_path, monkeypatch, capsys, csim_cache):
    for var in ("XILINX_HLS", "XILINX_VIVADO", "XILINX_VITIS", "FAKE_HLS_FAIL", "FAKE_VIVADO_FAIL",
                "FAKE_VIVADO_TIMING"):
        monkeypatch.delenv(var, raising=False)
    e = Env(tmp_path, monkeypatch, capsys)
    monkeypatch.setenv("PATH", f"{FAKE_TOOLS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HLSNN_BUILD", str(e.build))
    monkeypatch.setenv("FAKE_TOOLS_LOG", str(e.calls_log))
    _seed_build(e.build, csim_cache)
    return e


def _path_without_tools():
    """A PATH with python and g++ only (so the fake tools' shebang and csim still work)."""
    dirs = [os.path.dirname(sys.executable), os.path.dirname(shutil.which("g++"))]
    return os.pathsep.join(dict.fromkeys(dirs))


def _fake_header():
    return next((Path(os.environ["HLSNN_BUILD"]) / NAME / "hls").glob(f"**/x{TOP}_hw.h"))


# ------------------------------------------------------------------ the fake tools themselves
def test_fake_tool_versions(env):
    assert tools.find_hls().version == "2023.2" and tools.find_vivado().version == "2023.2"
    out = subprocess.run([str(FAKE_TOOLS / "vitis_hls"), "-version"], capture_output=True, text=True).stdout
    assert out.splitlines()[0] == "Vitis HLS - High-Level Synthesis from C, C++ and OpenCL v2023.2 (64-bit)"
    out = subprocess.run([str(FAKE_TOOLS / "vivado"), "-version"], capture_output=True, text=True).stdout
    assert out.splitlines()[0] == "Vivado v2023.2 (64-bit)"
    for tool in ("vitis_hls", "vivado"):
        f = FAKE_TOOLS / tool
        assert os.access(f, os.X_OK) and f.read_text().startswith("#!/usr/bin/env python3\n")


# ------------------------------------------------------------------ a full build
def test_full_build(env):
    rc, out, err = env.main("--jobs", "2")
    assert rc == EXIT["ok"] == 0, out + err
    cfg = hlsnn.load_config(TINY)

    # progress: every stage announced and timed, in order
    lines = out.splitlines()
    starts = [lines.index(f"[{s}] ...") for s in STAGES]
    assert starts == sorted(starts)
    for s in STAGES:
        assert any(line.startswith(f"[{s}] done in ") for line in lines), s
    assert "0 mismatches" in out and "latency {'best': 37, 'worst': 52813}" in out

    # the overlay: exactly bit, hwh, json; nothing temporary left beside it
    assert sorted(p.name for p in env.overlay.iterdir()) == [f"{NAME}.bit", f"{NAME}.hwh", f"{NAME}.json"]
    assert [p.name for p in env.out.iterdir()] == [NAME]
    umask = os.umask(0)
    os.umask(umask)
    assert env.overlay.stat().st_mode & 0o777 == 0o777 & ~umask, "overlay folder has the permissions of a normal one"
    staged = env.proj / "vivado" / "out"
    assert (env.overlay / f"{NAME}.bit").read_bytes() == (staged / f"{NAME}.bit").read_bytes()
    assert (env.overlay / f"{NAME}.hwh").read_bytes() == (staged / f"{NAME}.hwh").read_bytes()

    m = json.loads((env.overlay / f"{NAME}.json").read_text())
    assert m["name"] == NAME and m["engine"] == "bfp_systolic" and m["board"] == "pynq-z2"
    assert m["part"] == cfg.board.part
    assert m["config"] == json.loads(json.dumps(cfg.as_dict()))
    assert m["config_sha256"] == cfg.sha and m["config_hash32"] == cfg.hash32
    # the register map is the generated header's, keyed by the protocol's names: the kernel
    # argument is k_in in the header, the protocol's register is k
    hdr = _fake_header()
    assert reports.parse_register_header(hdr)["k_in"] == 0x20
    assert m["register_map_source"] == str(hdr)
    assert m["register_map"] == {"ap_ctrl": 0, "batch": 0x10, "n_out": 0x18, "k": 0x20, "flags": 0x28,
                                 "stats_k": 0x30, "id_magic": 0x38, "id_hash": 0x40, "sat_count": 0x48}
    assert m["register_map"] == regmap.predicted_register_map(("batch", "n_out", "k", "flags", "stats_k"),
                                                               ("id_magic", "id_hash", "sat_count"))
    assert m["register_names"]["k"] == "k_in" and m["register_names"]["batch"] == "batch"
    assert m["tools"] == {"vitis_hls": {"path": str(FAKE_TOOLS / "vitis_hls"), "version": "2023.2"},
                          "vivado": {"path": str(FAKE_TOOLS / "vivado"), "version": "2023.2"}}
    hr = m["hls_report"]
    assert hr["top"] == TOP
    assert hr["latency_cycles"] == {"best": 37, "worst": 52813}
    assert hr["interval"] == {"min": 38, "max": 52814}
    assert hr["resources"] == {"bram_18k": 6, "dsp": 3, "ff": 4242, "lut": 5151, "uram": 0}
    assert hr["available"] == {"bram_18k": 280, "dsp": 220, "ff": 106400, "lut": 53200, "uram": 0}
    assert hr["target_clock_ns"] == pytest.approx(1000 / cfg.clock_mhz)
    assert hr["estimated_clock_ns"] == pytest.approx(7.31)
    assert m["timing"] == {"progress": "100%", "status": "write_bitstream Complete!", "wns": 0.347, "whs": 0.021}
    assert m["csim"]["mismatches"] == 0 and m["csim"]["cases"] > 0
    assert set(m["stages"]) == set(STAGES) - {"overlay"}
    assert m["hlsnn_version"] == hlsnn.__version__ and m["built"]

    # the tools ran where and how the flow says
    hls_call, viv_call = env.tool_calls()
    assert hls_call == {"tool": "vitis_hls", "argv": ["-f", "run_hls.tcl"], "cwd": str(env.proj / "hls")}
    assert viv_call["tool"] == "vivado" and viv_call["cwd"] == str(env.proj / "vivado")
    ip_repo = env.proj / "hls" / f"{NAME}_prj" / "solution1" / "impl" / "ip"
    assert viv_call["argv"] == ["-mode", "batch", "-notrace", "-source", str(env.proj / "hls" / "bd.tcl"),
                                "-tclargs", str(ip_repo), str(staged), "2"]
    assert (env.logs / "hls.log").read_text().startswith(f"$ {FAKE_TOOLS / 'vitis_hls'} -f run_hls.tcl\n")
    assert "HLSNN-OK" in (env.logs / "vivado.log").read_text()
    assert "0 mismatches" in (env.logs / "csim.log").read_text()


def test_relative_build_root_and_out(env, monkeypatch, csim_cache):
    """The default build root is the relative ./build: the tools run in their own folders and
    must still find bd.tcl and the IP repository."""
    monkeypatch.chdir(env.tmp)
    monkeypatch.setenv("HLSNN_BUILD", "build")
    rc, out, err = env.main(out="relative-overlays")
    assert rc == 0, out + err
    assert sorted(p.name for p in (env.tmp / "relative-overlays" / NAME).iterdir()) == \
        [f"{NAME}.bit", f"{NAME}.hwh", f"{NAME}.json"]


# ------------------------------------------------------------------ failures
def test_hls_failure(env, monkeypatch):
    monkeypatch.setenv("FAKE_HLS_FAIL", "1")
    rc, out, err = env.main()
    assert rc == EXIT["failed"] == 1
    log = env.logs / "hls.log"
    assert "stage hls failed" in err and str(log) in err and "exited with status 1" in err
    assert "ERROR: [HLS 214-124]" in err, "the log tail is shown"
    assert "ERROR: [HLS 214-124]" in log.read_text() and "Pre-synthesis failed." in log.read_text()
    assert not env.overlay.exists() and (not env.out.exists() or not any(env.out.iterdir()))
    assert [c["tool"] for c in env.tool_calls()] == ["vitis_hls"], "Vivado must not run after an HLS failure"
    assert "[vivado] ..." not in out


def _good_overlay(env):
    rc, out, err = env.main()
    assert rc == 0, out + err
    return env.snapshot(env.overlay)


def test_vivado_failure_midway_keeps_the_old_overlay(env, monkeypatch):
    before = _good_overlay(env)
    monkeypatch.setenv("FAKE_VIVADO_FAIL", "midway")
    rc, out, err = env.main()
    assert rc == 1
    log = env.logs / "vivado.log"
    assert "stage vivado failed" in err and str(log) in err
    assert "place_design' failed" in log.read_text()
    assert (env.logs / "hls.log").is_file() and (env.logs / "csim.log").is_file()
    assert (env.proj / "vivado" / "out" / f"{NAME}.bit").is_file(), "the partial output is kept for inspection"
    assert env.snapshot(env.overlay) == before
    assert [p.name for p in env.out.iterdir()] == [NAME]


def test_timing_failure_keeps_the_old_overlay(env, monkeypatch):
    before = _good_overlay(env)
    monkeypatch.setenv("FAKE_VIVADO_TIMING", "fail")
    rc, out, err = env.main()
    assert rc == 1
    assert "timing" in err and "WNS -0.231" in err and "stage vivado failed" in err
    assert str(env.logs / "vivado.log") in err
    assert "timing failed" in (env.logs / "vivado.log").read_text()
    assert env.snapshot(env.overlay) == before
    assert [p.name for p in env.out.iterdir()] == [NAME]


def test_rebuild_replaces_the_overlay(env):
    _good_overlay(env)
    first = json.loads((env.overlay / f"{NAME}.json").read_text())
    rc, out, err = env.main()
    assert rc == 0, err
    assert json.loads((env.overlay / f"{NAME}.json").read_text())["config_sha256"] == first["config_sha256"]
    assert [p.name for p in env.out.iterdir()] == [NAME], "no .old or .tmp folder left"


# ------------------------------------------------------------------ tools missing
def test_no_tools_exits_3_with_the_finishing_commands(env, monkeypatch):
    monkeypatch.setenv("PATH", _path_without_tools())
    assert tools.find_hls() is None and tools.find_vivado() is None
    rc, out, err = env.main()
    assert rc == EXIT["tools_missing"] == 3 and rc != EXIT["failed"]
    assert "tools missing: vitis_hls (or vitis-run), vivado not found" in out
    assert f"cd {env.proj / 'hls'} && vitis_hls -f run_hls.tcl" in out
    assert (f"cd {env.proj / 'vivado'} && vivado -mode batch -notrace -source {env.proj / 'hls' / 'bd.tcl'} "
            f"-tclargs {env.proj / 'hls' / (NAME + '_prj') / 'solution1' / 'impl' / 'ip'} "
            f"{env.proj / 'vivado' / 'out'} ") in out
    assert f"hlsnn build {TINY}" in out
    # everything up to the tools ran
    assert "[render] done" in out and "[csim] done" in out and (env.proj / "hls" / "bd.tcl").is_file()
    assert (env.logs / "csim.log").is_file() and not (env.logs / "hls.log").exists()
    assert not env.out.exists() and env.tool_calls(runs_only=False) == []


def test_only_vivado_missing(env, monkeypatch):
    only_hls = env.tmp / "only-hls"
    only_hls.mkdir()
    (only_hls / "vitis_hls").symlink_to(FAKE_TOOLS / "vitis_hls")
    monkeypatch.setenv("PATH", f"{only_hls}{os.pathsep}{_path_without_tools()}{os.pathsep}{os.environ['PATH']}"
                       .replace(f"{FAKE_TOOLS}{os.pathsep}", ""))
    assert tools.find_vivado() is None and tools.find_hls() is not None
    rc, out, err = env.main()
    assert rc == 3
    assert "tools missing: vivado not found" in out
    assert f"{only_hls / 'vitis_hls'} -f run_hls.tcl" in out
    assert env.tool_calls() == [], "with a tool missing, neither runs"


# ------------------------------------------------------------------ dry run
def test_dry_run_prints_and_runs_nothing(env):
    rc, out, err = env.main("--dry-run", "--jobs", "5")
    assert rc == 0, err
    assert f"cd {env.proj / 'hls'} && {FAKE_TOOLS / 'vitis_hls'} -f run_hls.tcl" in out
    assert (f"cd {env.proj / 'vivado'} && {FAKE_TOOLS / 'vivado'} -mode batch -notrace -source "
            f"{env.proj / 'hls' / 'bd.tcl'} -tclargs ") in out and out.count(" 5\n") >= 1
    assert env.tool_calls() == [], "only the -version queries ran"
    assert not (env.logs / "hls.log").exists() and not (env.logs / "csim.log").exists()
    assert not env.out.exists()
    assert (env.proj / "hls" / "bd.tcl").is_file() and (env.proj / "hls" / "run_hls.tcl").is_file()


def test_dry_run_without_tools(env, monkeypatch):
    monkeypatch.setenv("PATH", _path_without_tools())
    rc, out, err = env.main("--dry-run")
    assert rc == 0
    assert "&& vitis_hls -f run_hls.tcl" in out and "&& vivado -mode batch -notrace -source" in out


def test_build_bitstream_script_dry_run(env):
    rc, expected, err = env.main("--dry-run")
    assert rc == 0
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_bitstream.py"), str(TINY), "--out",
                           str(env.out), "--dry-run"], capture_output=True, text=True, env=os.environ.copy(),
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
    assert env.tool_calls() == [] and not (env.logs / "hls.log").exists()


# ------------------------------------------------------------------ the C-simulation gate
@pytest.mark.parametrize("kind", ["outputs", "registers"])
def test_csim_mismatch_stops_before_the_tools(env, monkeypatch, kind):
    def bad_compare(cfg, target="csim", **kw):
        return {"config": cfg.name, "engine": cfg.engine, "target": target, "seed": 0, "cases": 3,
                "outputs": 96, "mismatches": 2 if kind == "outputs" else 0,
                "first_mismatch": ({"case": "edge_max", "index": [0, 1], "expected": {"value": 1.5, "raw": "0x3"},
                                    "got": {"value": 2.0, "raw": "0x4"}} if kind == "outputs" else None),
                "register_mismatches": [] if kind == "outputs" else ["edge_max"],
                "setup_s": 0.0, "run_s": 0.0, "results": []}
    monkeypatch.setattr(hlsnn.build.flow, "compare", bad_compare)
    rc, out, err = env.main()
    assert rc == 1
    assert "C-simulation disagrees with the emulator" in err and str(env.logs / "csim.log") in err
    assert "FAIL" in (env.logs / "csim.log").read_text()
    assert env.tool_calls() == [], "neither tool runs after a mismatch"
    assert not (env.logs / "hls.log").exists() and not env.out.exists()


# ------------------------------------------------------------------ tool discovery
def _decoys(tmp):
    """vitis_hls and vivado on PATH that must never be used."""
    d = tmp / "decoys"
    d.mkdir()
    for tool in ("vitis_hls", "vivado"):
        (d / tool).write_text(f"#!/bin/sh\necho decoy-{tool} >> {tmp / 'decoy.log'}\necho v1999.1\nexit 1\n")
        (d / tool).chmod(0o755)
    return d


def _root(tmp, name, tool):
    b = tmp / name / "bin"
    b.mkdir(parents=True)
    (b / tool).symlink_to(FAKE_TOOLS / tool)
    return tmp / name


def test_xilinx_roots_are_honoured_over_path(env, monkeypatch):
    decoys = _decoys(env.tmp)
    monkeypatch.setenv("PATH", f"{decoys}{os.pathsep}{_path_without_tools()}{os.pathsep}{os.environ['PATH']}")
    assert tools.find_hls().path == str(decoys / "vitis_hls")
    hls_root, viv_root = _root(env.tmp, "Vitis_HLS", "vitis_hls"), _root(env.tmp, "Vivado", "vivado")
    monkeypatch.setenv("XILINX_HLS", str(hls_root))
    monkeypatch.setenv("XILINX_VIVADO", str(viv_root))
    assert tools.find_hls().path == str(hls_root / "bin" / "vitis_hls")
    assert tools.find_vivado().path == str(viv_root / "bin" / "vivado")
    (env.tmp / "decoy.log").unlink()
    rc, out, err = env.main()
    assert rc == 0, out + err
    m = json.loads((env.overlay / f"{NAME}.json").read_text())
    assert m["tools"]["vitis_hls"] == {"path": str(hls_root / "bin" / "vitis_hls"), "version": "2023.2"}
    assert m["tools"]["vivado"] == {"path": str(viv_root / "bin" / "vivado"), "version": "2023.2"}
    assert not (env.tmp / "decoy.log").exists(), "a tool on PATH ran although XILINX_* named another"


def test_xilinx_root_without_the_tool_falls_back_to_path(env, monkeypatch):
    empty = env.tmp / "empty-root"
    (empty / "bin").mkdir(parents=True)
    monkeypatch.setenv("XILINX_HLS", str(empty))
    monkeypatch.setenv("XILINX_VIVADO", str(env.tmp / "does-not-exist"))
    assert tools.find_hls().path == str(FAKE_TOOLS / "vitis_hls")
    assert tools.find_vivado().path == str(FAKE_TOOLS / "vivado")


# ------------------------------------------------------------------ run_tool
def test_run_tool_logs_heartbeats_and_fails_with_the_tail(tmp_path, capsys):
    log = tmp_path / "logs" / "t.log"
    code = "import sys, time; print('line one'); sys.stdout.flush(); time.sleep(0.35)"
    run_tool([sys.executable, "-c", code], tmp_path, log, "slow", heartbeat=0.1)
    assert "[slow] still running" in capsys.readouterr().out
    assert log.read_text().splitlines()[1] == "line one"
    with pytest.raises(BuildFailed) as exc:
        run_tool([sys.executable, "-c", "print('boom'); raise SystemExit(7)"], tmp_path, log, "bad")
    msg = str(exc.value)
    assert "stage bad failed" in msg and "status 7" in msg and str(log) in msg and "boom" in msg


def test_header_missing_a_kernel_argument_fails_the_build():
    """The generated header must have a register for every kernel argument: a missing one is
    a BuildFailed naming it (the IP does not match the template), not a broken manifest."""
    from hlsnn.build import flow
    cfg = hlsnn.load_config(TINY)
    by_arg = {"ap_ctrl": 0, "batch": 0x10, "n_out": 0x18, "flags": 0x28, "stats_k": 0x30, "id_magic": 0x38,
              "id_hash": 0x40, "sat_count": 0x48}
    with pytest.raises(flow.BuildFailed, match=r"no register for kernel argument\(s\) k_in"):
        flow._protocol_register_map(cfg, by_arg, "xhdr_hw.h")
    regmap, names = flow._protocol_register_map(cfg, {**by_arg, "k_in": 0x20}, "xhdr_hw.h")
    assert regmap["k"] == 0x20 and "k_in" not in regmap and names["k"] == "k_in"


# ------------------------------------------------------------------ --check
def test_check_runs_only_csim_and_synth(env):
    rc, out, err = env.main("--check")
    assert rc == 0, out + err
    (call,) = env.tool_calls()
    assert call == {"tool": "vitis_hls", "argv": ["-f", "check_hls.tcl"], "cwd": str(env.proj / "hls")}
    assert (env.proj / "hls" / "check_hls.tcl").read_text().splitlines()[1:] == ["set argv {csim synth}",
                                                                                 "source run_hls.tcl"]
    log = (env.logs / "check.log").read_text()
    assert "csim_design" in log and "csynth_design" in log and "export_design" not in log
    sol = env.proj / "hls" / f"{NAME}_prj" / "solution1"
    assert (sol / "syn" / "report" / f"{TOP}_csynth.xml").is_file() and not (sol / "impl").exists()
    assert not env.out.exists(), "no overlay, no Vivado"
    assert "[csim] ..." not in out, "the g++ C-simulation is not part of --check"

    # every labelled loop of the kernel, with the II the fake reports (= the pragma's)
    cpp = (env.proj / "hls" / "bfp_systolic.cpp").read_text()
    pipelined = re.findall(r"^\s*(\w+):\s*\n\s*for[^\n]*\n#pragma HLS PIPELINE II = (\d+)", cpp, re.M)
    assert {"ReadBias", "ReadSampleBeats", "Steps", "WriteBeats"} <= {label for label, _ in pipelined}
    lines = out.splitlines()
    for label, ii in pipelined:
        row = next(x.split() for x in lines if x.split()[:2] == [f"{TOP}_Pipeline_{label}", label])
        assert row[4:7] == [ii, ii, "yes"], row
    assert any(x.split()[:2] == [TOP, "Passes"] for x in lines), "an unpipelined top-level loop"
    assert "II" in out and "target II" in out and "WARNING" not in out

    # resources: the fake's synthesis numbers against the estimate (BRAM_18K = 2 x BRAM36)
    from hlsnn.engines import ENGINES
    est = ENGINES["bfp_systolic"].estimate(hlsnn.load_config(TINY))["resources"]
    res = {x.split()[0]: x.split()[1:] for x in lines if x.split()[:1] in (["DSP"], ["BRAM_18K"], ["LUT"], ["FF"], ["URAM"])}
    assert res["DSP"][:3] == ["3", str(est["dsp"]), "220"]
    assert res["BRAM_18K"][:3] == ["6", str(2 * est["bram36"]), "280"]
    assert res["LUT"][:2] == ["5151", str(est["lut"])] and res["FF"][:2] == ["4242", str(est["ff"])]
    assert json.loads((env.logs / "check.json").read_text())["estimate"] == est


def test_check_warns_on_a_missed_ii(env, monkeypatch):
    monkeypatch.setenv("FAKE_HLS_II_MISS", "ReadSampleBeats")
    rc, out, err = env.main("--check")
    assert rc == 0, out + err
    row = next(x.split() for x in out.splitlines() if x.split()[:2] == [f"{TOP}_Pipeline_ReadSampleBeats", "ReadSampleBeats"])
    assert row[4:6] == ["2", "1"]
    assert f"WARNING: {TOP}_Pipeline_ReadSampleBeats/ReadSampleBeats II 2 > target 1" in out


def test_check_without_vitis_hls_exits_3(env, monkeypatch):
    monkeypatch.setenv("PATH", _path_without_tools())
    rc, out, err = env.main("--check")
    assert rc == EXIT["tools_missing"] == 3
    assert "vitis_hls (or vitis-run) not found" in out and "--check needs Vitis HLS" in out
    assert (env.proj / "hls" / "check_hls.tcl").is_file() and env.tool_calls() == []


def test_check_tool_failure(env, monkeypatch):
    monkeypatch.setenv("FAKE_HLS_FAIL", "1")
    rc, out, err = env.main("--check")
    assert rc == 1 and "stage check failed" in err and str(env.logs / "check.log") in err


def test_check_and_dry_run_refused(env):
    rc, out, err = env.main("--check", "--dry-run")
    assert rc != 0 and "--check and --dry-run cannot be combined" in err


# ------------------------------------------------------------------ several kernel instances (issue 77)
def test_instances_build_their_own_overlay(env):
    """``--instances 2``: one HLS IP, a block design with two kernels and two DMAs (instance 1 at
    its own control window), the overlay under ``<name>_x2`` beside (never over) the config's."""
    rc, out, err = env.main("--instances", "2", "--jobs", "1")
    assert rc == EXIT["ok"], out + err
    x2 = f"{NAME}_x2"
    assert sorted(p.name for p in (env.out / x2).iterdir()) == [f"{x2}.bit", f"{x2}.hwh", f"{x2}.json"]
    assert not (env.out / NAME).exists()
    m = json.loads((env.out / x2 / f"{x2}.json").read_text())
    assert m["instances"] == 2 and m["name"] == NAME
    bd = (env.proj / "hls" / "bd.tcl").read_text()
    assert f"set NAME {x2}\n" in bd
    assert bd.count(f"create_bd_cell -type ip -vlnv hlsnn.org:hls:{NAME}:1.0 ") == 2 and "dma_1" in bd and f"{NAME}_1/in_r" in bd
    hls_call, viv_call = env.tool_calls()
    assert viv_call["argv"][6] == str(env.proj / "hls" / f"{NAME}_prj" / "solution1" / "impl" / "ip")


def test_instances_refused_over_the_board_with_the_count_that_fits(env):
    """N kernels take N times the resources: over the fit budget, the refusal names the
    resource and the instance count that fits, and no tool runs."""
    cfg = hlsnn.load_config(TINY)
    res, board = cfg.estimates["resources"], cfg.board.resources
    fit = min(int(board[k] * 0.9) // v for k, v in res.items() if v)   # the most within every budget
    n = fit + 1
    rc, out, err = env.main("--instances", str(n))
    assert rc == 2 and env.tool_calls() == [] and not env.out.exists()
    assert f"its kernel x {n} (--instances {n}) does not fit pynq-z2: " in err
    assert f"--instances {fit} fits" in err


def test_instances_refused_for_a_batch(env):
    env.capsys.readouterr()
    rc = hlsnn.cli.main(["build", str(TINY), str(TINY), "--out", str(env.out), "--instances", "2"])
    err = env.capsys.readouterr().err
    assert rc == 2 and "hlsnn build --instances 2: for one layer config" in err and env.tool_calls() == []
