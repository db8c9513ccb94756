"""``hlsnn build NAME.hlsnn``: the network overlay of a compiled model, end to end with the fake
Xilinx tools (tests/build/fake_tools): the rendered kernel and TCL, the C-simulation gate (the
network kernel against the network mode), the register header checked against the network
kernel's map, the .hwh checked for the two m_axi ports, and the overlay a NetBoard opens."""
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import hlsnn.cli
from hlsnn.build import EXIT, reports

pytest.importorskip("onnx")
HERE = Path(__file__).resolve().parent
FAKE_TOOLS = HERE / "fake_tools"
pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="C-simulation needs g++")


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    import sys
    sys.path.insert(0, str(HERE.parent / "deploy"))
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netbuild", calibration_samples=16, check_samples=2)("digits_cnn",
                                                                                                  "twohot")


@pytest.fixture
def env(tmp_path, monkeypatch, capsys):
    for var in ("XILINX_HLS", "XILINX_VIVADO", "XILINX_VITIS", "FAKE_HLS_FAIL", "FAKE_VIVADO_FAIL",
                "FAKE_VIVADO_TIMING"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PATH", f"{FAKE_TOOLS}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("FAKE_TOOLS_LOG", str(tmp_path / "calls.jsonl"))

    def main(*args):
        capsys.readouterr()
        rc = hlsnn.cli.main(["build", *map(str, args), "--out", str(tmp_path / "overlays")])
        cap = capsys.readouterr()
        return rc, cap.out, cap.err
    return tmp_path, main


def _lowered(model):
    from hlsnn.network import artifact
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.network.loader import config_of
    prog, arrays = artifact.read(model)
    net = netmode.lower(prog, arrays)
    return net, config_of(prog["accels"][net.accel], str(model))


def test_dry_run_renders_the_network_kernel_and_its_tcl(model, env):
    tmp, main = env
    net, cfg = _lowered(model)
    rc, out, err = main(model, "--dry-run")
    assert rc == EXIT["ok"], out + err
    hls = tmp / "build" / cfg.name / "network" / net.name / "hls"
    assert {"network.cpp", "network.h", "network_data.h", "run_hls.tcl", "bd.tcl"} <= {p.name for p in hls.iterdir()}
    tcl = (hls / "run_hls.tcl").read_text()
    for line in ("set_top net_top", f"open_project -reset {cfg.name}_net_prj",
                 'add_files network.cpp -cflags "-std=c++14 -Iinclude"',
                 f"-vendor hlsnn.org -library hls -version 1.0 -ipname {cfg.name}_net"):
        assert line in tcl, line
    assert "csim_design" not in tcl and "add_files -tb" not in tcl
    bd = (hls / "bd.tcl").read_text()
    name = f"{cfg.name}_net"
    assert f"set NAME {name}\n" in bd and f"create_bd_cell -type ip -vlnv hlsnn.org:hls:{name}:1.0 {name}\n" in bd
    assert f"axi_auto /{name}/m_axi_gmem0 $PS_SLAVE " in bd and f"axi_auto /{name}/m_axi_gmem1 $PS_SLAVE " in bd
    assert f"[get_bd_addr_segs {name}/s_axi_control/Reg]" in bd
    assert "dma" not in bd.replace("no DMA", "") and "in_r" not in bd
    assert f"overlays/{name}/" in out.replace(str(tmp) + "/", "")


def test_what_a_network_build_refuses(model, env, monkeypatch):
    """One line each: --board and --check with a compiled model, and a model the network kernel
    cannot run (its reason named)."""
    _, main = env
    for args, msg in (((model, "--board", "zcu104"), "--board: a compiled model's network overlay is built for"),
                      ((model, "--check"), "--check: not for the network kernel yet")):
        rc, out, err = main(*args)
        assert rc != 0 and msg in err and "Traceback" not in err, err
    from hlsnn.deploy.lower import program as netmode
    from hlsnn.errors import InputError

    def refuse(prog, arrays):
        raise InputError("layer pool1 (MaxPool): ceil_mode or dilation")
    monkeypatch.setattr(netmode, "lower", refuse)
    rc, out, err = main(model)
    assert rc != 0 and "no network overlay for this compiled model: layer pool1 (MaxPool): ceil_mode" in err, err


@pytest.mark.slow
@pytest.mark.csim
def test_full_network_build_with_the_fake_tools(model, env):
    tmp, main = env
    net, cfg = _lowered(model)
    name = f"{cfg.name}_net"
    rc, out, err = main(model, "--jobs", "2")
    assert rc == EXIT["ok"], out + err
    assert "0 mismatches" in out
    overlay = tmp / "overlays" / name
    assert sorted(p.name for p in overlay.iterdir()) == [f"{name}.bit", f"{name}.hwh", f"{name}.json"]
    m = json.loads((overlay / f"{name}.json").read_text())
    from hlsnn.network.board import network_digest
    assert m["kernel"] == "network" and m["name"] == name and m["network"] == net.name
    assert m["network_sha256"] == network_digest(net) and m["config_sha256"] == cfg.sha
    assert m["register_map"] == {"in": [0x10, 0x14], "out": [0x1C, 0x20], "batch": [0x28]}
    hdr = Path(m["register_map_source"])
    assert reports.parse_register_header(hdr) == {"ap_ctrl": 0, "in_r": 0x10, "out_r": 0x1C, "batch": 0x28}
    assert m["csim"]["mismatches"] == 0 and m["csim"]["cases"] == 2 + 2
    assert m["hls_report"]["top"] == "net_top"
    hls_call, viv_call = [json.loads(ln) for ln in (tmp / "calls.jsonl").read_text().splitlines()
                          if json.loads(ln)["argv"][:1] != ["-version"]]
    root = tmp / "build" / cfg.name / "network" / net.name
    assert hls_call["argv"] == ["-f", "run_hls.tcl"] and hls_call["cwd"] == str(root / "hls")
    assert viv_call["argv"][-3:] == [str(root / "hls" / f"{name}_prj" / "solution1" / "impl" / "ip"),
                                       str(root / "vivado" / "out"), "2"]
    # the overlay is refused by a board only for what the fake .hwh lacks (a register map), not its ports
    from hlsnn.network.board import is_network_overlay
    assert is_network_overlay(overlay)


@pytest.mark.slow
@pytest.mark.csim
def test_a_csim_mismatch_stops_the_network_build_before_the_tools(model, env, monkeypatch):
    tmp, main = env
    from hlsnn.deploy.lower import program as netmode
    real = netmode.run_ints
    monkeypatch.setattr(netmode, "run_ints", lambda net, xq, **kw: np.asarray(real(net, xq, **kw)) ^ 1)
    rc, out, err = main(model)
    assert rc == EXIT["failed"] and "disagrees with the network mode (the spec)" in err
    assert not (tmp / "calls.jsonl").exists() or all(json.loads(ln)["argv"][:1] == ["-version"]
                                                     for ln in (tmp / "calls.jsonl").read_text().splitlines())


@pytest.mark.parametrize("config", ["shift8_pynq-z2", "shift8_zcu104"])
def test_network_tcl_uses_only_the_vocabulary(config, tmp_path):
    """The network overlay's bd.tcl and run_hls.tcl use only commands, options and automation
    keys that public scripts use (tests/build/tcl_vocabulary.yaml)."""
    from conftest import ROOT
    from hlsnn import codegen
    from hlsnn.build import bd_context
    from hlsnn.config import load_config
    from test_tcl_vocabulary import commands, violations
    cfg = load_config(ROOT / "configs" / "accel" / f"{config}.yaml")
    name = f"{cfg.name}_net"
    bd = codegen.render_extra(cfg, "bd.tcl.j2", tmp_path / "bd.tcl", dict(
        bd_context(cfg), network="m", net_name=name, net_vlnv=f"hlsnn.org:hls:{name}:1.0")).read_text()
    assert violations(bd, "vivado") == [] and len(commands(bd)) > 30
    hls = codegen.render_extra(cfg, "run_hls_net.tcl.j2", tmp_path / "run_hls.tcl", dict(
        ip_name=name, network="m", project=f"{name}_prj", top="net_top", kernel_cpp="network.cpp",
        clock_period_ns=10.0)).read_text()
    assert violations(hls, "vitis_hls") == []
    assert {"open_project", "set_top", "csynth_design", "export_design"} <= {c for c, _ in commands(hls)}


@pytest.fixture(scope="module")
def bfp_model(tmp_path_factory):
    import sys
    sys.path.insert(0, str(HERE.parent / "deploy"))
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netbuild_bfp", calibration_samples=16, check_samples=2)("digits_cnn",
                                                                                                      "bfp16")


def test_full_bfp_network_build_with_the_fake_tools(bfp_model, env):
    """The bfp_systolic network kernel through the same stages: its own template rendered, its
    C-simulation against the network mode (the check images and two random float32 images, one
    image a call), the register map, the overlay."""
    tmp, main = env
    net, cfg = _lowered(bfp_model)
    name = f"{cfg.name}_net"
    rc, out, err = main(bfp_model, "--jobs", "2")
    assert rc == EXIT["ok"], out + err
    assert "0 mismatches" in out
    m = json.loads((tmp / "overlays" / name / f"{name}.json").read_text())
    assert m["engine"] == "bfp_systolic" and m["csim"]["mismatches"] == 0 and m["csim"]["cases"] == 2 + 2
    assert m["register_map"] == {"in": [0x10, 0x14], "out": [0x1C, 0x20], "batch": [0x28]}
    src = (tmp / "build" / cfg.name / "network" / net.name / "hls" / "network.cpp").read_text()
    assert "on bfp_systolic" in src and "ConvMac" in src
