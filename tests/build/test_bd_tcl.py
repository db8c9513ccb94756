"""The rendered Vivado block-design script (hls/tcl/bd.tcl.j2) runs under tclsh with stub
Vivado commands (tests/build/vivado_stubs.tcl) for every shipped config on every board it fits,
and asks for the right part, PS, DMA, connections, run and outputs; its exit codes say when the
run did not complete (2) or timing failed (3)."""
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import hlsnn.build
import hlsnn.cli
from hlsnn import codegen
from hlsnn.config import load_board
from hlsnn.build import reports
from hlsnn.errors import ConfigError

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
STUBS = HERE / "vivado_stubs.tcl"
CONFIGS = sorted((ROOT / "configs" / "accel").glob("*.yaml"))
BOARDS = sorted(p.stem for p in (ROOT / "configs" / "boards").glob("*.yaml"))
ENGINES = ("bfp_systolic", "shift_mac", "sparse_cluster")

pytestmark = pytest.mark.skipif(shutil.which("tclsh") is None, reason="tclsh not installed")


# ------------------------------------------------------------------ helpers
def tcl_list(s):
    """Split a Tcl list string (braces, double quotes, backslashes) into its elements."""
    out, i, n = [], 0, len(s)
    while i < n:
        while i < n and s[i].isspace():
            i += 1
        if i >= n:
            break
        if s[i] == "{":
            depth, j = 1, i + 1
            while depth:
                if s[j] == "\\":
                    j += 1
                elif s[j] == "{":
                    depth += 1
                elif s[j] == "}":
                    depth -= 1
                j += 1
            out.append(s[i + 1:j - 1])
            i = j
        elif s[i] == '"':
            j, buf = i + 1, []
            while s[j] != '"':
                if s[j] == "\\":
                    j += 1
                buf.append(s[j])
                j += 1
            out.append("".join(buf))
            i = j + 1
        else:
            j, buf = i, []
            while j < n and not s[j].isspace():
                if s[j] == "\\":
                    j += 1
                buf.append(s[j])
                j += 1
            out.append("".join(buf))
            i = j
    return out


def tcl_dict(s):
    items = tcl_list(s)
    assert len(items) % 2 == 0, f"not a key/value list: {s!r}"
    return dict(zip(items[::2], items[1::2]))


def test_tcl_list_parser():
    assert tcl_list('a {b c} "d e" {x {y z}} f\\ g') == ["a", "b c", "d e", "x {y z}", "f g"]
    assert tcl_dict('make_external "FIXED_IO, DDR" apply_board_preset "1"') == \
        {"make_external": "FIXED_IO, DDR", "apply_board_preset": "1"}


def _combos():
    """(config path, board, cfg) for every shipped config on every board it fits."""
    out, skipped = [], []
    for path in CONFIGS:
        for board in BOARDS:
            try:
                out.append((path, board, hlsnn.commands.builds.load_for_build(path, board)))
            except ConfigError as exc:
                skipped.append((path.stem, board, str(exc)))
    return out, skipped


COMBOS, SKIPPED = _combos()
# plus a narrow (32-bit) stream on each PS family: the DMA follows the config, not the board
TINY = ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml"
EXTRA = [(TINY, b, hlsnn.commands.builds.load_for_build(TINY, b)) for b in ("pynq-z2", "kv260")]


def render_bd(cfg, tmp):
    return codegen.render_extra(cfg, "bd.tcl.j2", tmp / "bd.tcl", hlsnn.build.bd_context(cfg))


class Run:
    def __init__(self, proc, calls, run_dir, out_dir):
        self.proc, self.calls, self.run_dir, self.out = proc, calls, run_dir, out_dir
        self.rc = proc.returncode

    def named(self, name):
        return [c[1:] for c in self.calls if c[0] == name]

    def index(self, name, pred=lambda args: True):
        return next(i for i, c in enumerate(self.calls) if c[0] == name and pred(c[1:]))


def run_bd(script, tmp, jobs=3, **env):
    """Run ``script`` under tclsh with the stubs, from tmp/run (the Vivado run folder)."""
    run_dir, out_dir, ip_repo = tmp / "run", tmp / "out", tmp / "ip_repo"
    run_dir.mkdir(parents=True, exist_ok=True)
    ip_repo.mkdir(exist_ok=True)
    log = tmp / "calls.log"
    full_env = {"PATH": "/usr/bin:/bin", **{k: str(v) for k, v in env.items()}}
    proc = subprocess.run(["tclsh", str(STUBS), str(script), str(log), str(ip_repo), str(out_dir), str(jobs)],
                          cwd=run_dir, env=full_env, capture_output=True, text=True, timeout=60)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert not [c for c in calls if c[0] == "UNKNOWN"], f"commands without a stub: {calls}\n{proc.stderr}"
    assert calls and calls[-1][0] == "exit", f"the script did not end with exit:\n{proc.stdout}\n{proc.stderr}"
    assert int(calls[-1][1]) == proc.returncode
    return Run(proc, calls, run_dir, out_dir)


# ------------------------------------------------------------------ coverage of the matrix
def test_every_board_and_engine_has_a_combination():
    assert {b for _, b, _ in COMBOS} == set(BOARDS)
    assert {cfg.engine for _, _, cfg in COMBOS} == set(ENGINES)
    assert set(BOARDS) >= {"pynq-z2", "zcu104", "kv260", "ultra96v2"}
    # every skip is a resource misfit on that board, or a packed 8-bit config on a board whose
    # DSP48E1 takes 7-bit mantissas packed, and a config always fits its own board
    for stem, board, msg in SKIPPED:
        assert ("needs about" in msg and board in msg) or \
            ("at most 7 with dsp_packing on DSP48E1" in msg and load_board(board).ps == "zynq7"), msg
    for path in CONFIGS:
        own = hlsnn.load_config(path).board.name
        assert any(p == path and b == own for p, b, _ in COMBOS), path


# ------------------------------------------------------------------ the full script, every combination
@pytest.mark.parametrize("path,board,cfg", COMBOS + EXTRA, ids=[f"{p.stem}@{b}" for p, b, _ in COMBOS + EXTRA])
def test_bd_tcl_calls(path, board, cfg, tmp_path):
    script = render_bd(cfg, tmp_path)
    r = run_bd(script, tmp_path, jobs=3)
    assert r.rc == 0, r.proc.stdout + r.proc.stderr
    name, b = cfg.name, cfg.board
    zynq7 = b.ps == "zynq7"
    sb = cfg.params["stream_bits"]

    # project on the board's part; board files used when installed
    (cp,) = r.named("create_project")
    assert cp[cp.index("-part") + 1] == b.part
    assert ["board_part", b.board_part, f"{name}_vivado"] in r.named("set_property")
    assert ["ip_repo_paths", str(tmp_path / "ip_repo"), f"{name}_vivado"] in r.named("set_property")
    assert r.index("update_ip_catalog") > r.index("set_property", lambda a: a[0] == "ip_repo_paths")

    # cells: the PS of the board's family, the newest DMA, the kernel exported by Vitis HLS
    cells = {c[-1]: c[c.index("-vlnv") + 1] for c in r.named("create_bd_cell")}
    assert cells["ps"] == ("xilinx.com:ip:processing_system7:5.5" if zynq7 else "xilinx.com:ip:zynq_ultra_ps_e:3.5")
    assert cells["dma"] == "xilinx.com:ip:axi_dma:7.1"
    assert cells[name] == f"hlsnn.org:hls:{name}:1.0"
    assert set(cells) == {"ps", "dma", name}

    props = {}              # each cell's CONFIG after all set_property -dict calls, in order
    for c in r.named("set_property"):
        if c[0] == "-dict":
            props.setdefault(c[-1], {}).update(tcl_dict(c[1]))
    # DMA: simple mode (no scatter-gather), stream and memory-map widths = the config's stream
    dma = props["dma"]
    assert dma["CONFIG.c_include_sg"] == "0"
    assert int(dma["CONFIG.c_m_axis_mm2s_tdata_width"]) == sb
    assert int(dma["CONFIG.c_s_axis_s2mm_tdata_width"]) == sb
    assert int(dma["CONFIG.c_m_axi_mm2s_data_width"]) == sb
    assert int(dma["CONFIG.c_m_axi_s2mm_data_width"]) == sb
    assert int(dma["CONFIG.c_addr_width"]) == b.dma["address_bits"]
    assert 8 <= int(dma["CONFIG.c_sg_length_width"]) <= 26

    # PS: clock, the general-purpose master and the HP slave the script connects are enabled
    ps = props["ps"]
    hp_port = b.dma.get("hp_port")
    if zynq7:
        assert r.named("apply_bd_automation")[0][:2] == ["-rule", "xilinx.com:bd_rule:processing_system7"]
        assert float(ps["CONFIG.PCW_FPGA0_PERIPHERAL_FREQMHZ"]) == cfg.clock_mhz
        n = re.fullmatch(r"S_AXI_HP(\d)", hp_port).group(1)
        assert ps[f"CONFIG.PCW_USE_S_AXI_HP{n}"] == "1" and ps["CONFIG.PCW_USE_M_AXI_GP0"] == "1"
        assert int(ps[f"CONFIG.PCW_S_AXI_HP{n}_DATA_WIDTH"]) in (32, 64)
        master = "/ps/M_AXI_GP0"
    else:
        assert r.named("apply_bd_automation")[0][:2] == ["-rule", "xilinx.com:bd_rule:zynq_ultra_ps_e"]
        assert float(ps["CONFIG.PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"]) == cfg.clock_mhz
        n = int(re.fullmatch(r"S_AXI_HP(\d)_FPD", hp_port).group(1))     # HPn_FPD is S_AXI_GP(2+n)
        assert ps[f"CONFIG.PSU__USE__S_AXI_GP{2 + n}"] == "1" and ps["CONFIG.PSU__USE__M_AXI_GP0"] == "1"
        assert int(ps[f"CONFIG.PSU__SAXIGP{2 + n}__DATA_WIDTH"]) in (32, 64, 128)
        master = "/ps/M_AXI_HPM0_FPD"
    slave = f"/ps/{hp_port}"
    for key, value in (getattr(b, "ps_config", None) or {}).items():    # the board file's explicit PS settings
        assert ps[f"CONFIG.{key}"] == str(value), key

    # AXI automation (the pattern of hls4ml's vivado_accelerator axi_stream_design.tcl): controls
    # on the PS master, DMA memory ports on the PS HP slave; each pin automated exactly once
    axi = [(tcl_dict(a[a.index("-config") + 1]), "/" + a[-1].lstrip("/")) for a in r.named("apply_bd_automation")
           if a[1] == "xilinx.com:bd_rule:axi4"]
    pairs = [(c["Master"], c["Slave"]) for c, _ in axi]
    assert pairs == [(master, "/dma/S_AXI_LITE"), (master, f"/{name}/s_axi_control"),
                     ("/dma/M_AXI_MM2S", slave), ("/dma/M_AXI_S2MM", slave)]
    targets = [target for _, target in axi]
    assert targets == ["/dma/S_AXI_LITE", f"/{name}/s_axi_control", slave, "/dma/M_AXI_S2MM"]
    # the first call of each side makes an interconnect; the second names that one (intc_ip)
    (ctl, _), (kern, _), (mm2s, _), (s2mm, _) = axi
    assert ctl["intc_ip"] == "New AXI Interconnect"
    assert mm2s["intc_ip"] == ("New AXI Interconnect" if zynq7 else "New AXI SmartConnect")
    nets = {frozenset(n.split()) for n in r.named("nets")[0]}
    ctl_ic, mem_ic = kern["intc_ip"], s2mm["intc_ip"]
    assert not ctl_ic.startswith("New") and not mem_ic.startswith("New") and ctl_ic != mem_ic
    # the interface nets the automation and the script leave: both DMA memory masters on the
    # interconnect that feeds the PS slave, both control slaves on the one behind the PS master
    assert nets == {frozenset(x) for x in [
        (master, f"{ctl_ic}/S00_AXI"), (f"{ctl_ic}/M00_AXI", "/dma/S_AXI_LITE"),
        (f"{ctl_ic}/M01_AXI", f"/{name}/s_axi_control"),
        ("/dma/M_AXI_MM2S", f"{mem_ic}/S00_AXI"), (f"{mem_ic}/M00_AXI", slave), ("/dma/M_AXI_S2MM", f"{mem_ic}/S01_AXI"),
        ("/dma/M_AXIS_MM2S", f"/{name}/in_r"), (f"/{name}/out_r", "/dma/S_AXIS_S2MM")]}
    # one clock: every automation call leaves the clocks to the rule ({Auto}, as hls4ml's and
    # PYNQ's scripts do: the PS clock is the design's only clock); nothing clocks a pin twice
    for c, _ in axi:
        assert c["Clk_master"] == c["Clk_slave"] == c["Clk_xbar"] == "Auto"
    assert [a[1] for a in r.named("apply_bd_automation")] == [
        "xilinx.com:bd_rule:" + ("processing_system7" if zynq7 else "zynq_ultra_ps_e")] + ["xilinx.com:bd_rule:axi4"] * 4

    # streams both ways
    assert ["dma/M_AXIS_MM2S", f"{name}/in_r"] in r.named("connect_bd_intf_net")
    assert [f"{name}/out_r", "dma/S_AXIS_S2MM"] in r.named("connect_bd_intf_net")
    assert len(r.named("connect_bd_intf_net")) == 2

    # addresses: the two control windows, each assigned once at its fixed offset (the automation
    # mapped everything; no blanket assign_bd_address)
    addr = r.named("assign_bd_address")
    assert [a[-2] for a in addr] == ["dma/S_AXI_LITE/Reg", f"{name}/s_axi_control/Reg"]
    ctx = hlsnn.build.bd_context(cfg)
    for a, base in zip(addr, (ctx["dma_base"], ctx["kernel_base"])):
        assert a[a.index("-offset") + 1] == base and a[a.index("-range") + 1] == "64K"
        assert a[a.index("-target_address_space") + 1] == "ps/Data" and a[-1] == "-force"

    # order: design complete -> addresses -> validate -> save -> targets -> wrapper -> run -> read
    order = [r.index(n) for n in ("assign_bd_address", "validate_bd_design", "save_bd_design",
                                   "generate_target", "make_wrapper", "launch_runs", "wait_on_run")]
    assert order == sorted(order)
    assert max(i for i, c in enumerate(r.calls) if c[0] in ("connect_bd_intf_net", "apply_bd_automation")) \
        < r.index("assign_bd_address")
    assert r.index("get_property") > r.index("wait_on_run")
    (mw,) = r.named("make_wrapper")
    assert "-top" in mw and mw[mw.index("-files") + 1].endswith(f"{name}_bd.bd")

    # implementation to the bitstream with the requested jobs
    (lr,) = r.named("launch_runs")
    assert lr[0] == "impl_1" and lr[lr.index("-to_step") + 1] == "write_bitstream" and lr[lr.index("-jobs") + 1] == "3"
    assert r.named("wait_on_run") == [["impl_1"]]

    # outputs: the bitstream of the wrapper top, the hardware handoff (.gen), timing.txt
    assert (r.out / f"{name}.bit").read_text() == f"STUB-BITSTREAM {name}_bd_wrapper"
    assert 'DIR="gen"' in (r.out / f"{name}.hwh").read_text()
    t = reports.parse_timing(r.out / "timing.txt")
    assert t == {"progress": "100%", "status": "write_bitstream Complete!", "wns": 0.5, "whs": 0.5}
    assert f"HLSNN-OK: {r.out}/{name}.bit" in r.proc.stdout


def test_kernel_vlnv_matches_the_hls_export():
    """bd.tcl instantiates hlsnn.org:hls:<name>:1.0: the identity run_hls.tcl exports."""
    text = (ROOT / "hls" / "tcl" / "run_hls.tcl.j2").read_text()
    m = re.search(r"config_export .*-vendor (\S+) -library (\S+) -version (\S+) -ipname \{\{ name \}\}", text)
    assert m and ":".join(m.groups()) == "hlsnn.org:hls:1.0"
    _, _, cfg = COMBOS[0]
    assert hlsnn.build.bd_context(cfg)["vlnv"] == f"hlsnn.org:hls:{cfg.name}:1.0"


# ------------------------------------------------------------------ variants on one zynq7 and one zynqmp design
def _one(ps):
    return next(cfg for _, _, cfg in COMBOS if cfg.board.ps == ps)


@pytest.fixture(params=["zynq7", "zynqmp"])
def script(request, tmp_path):
    cfg = _one(request.param)
    return cfg, render_bd(cfg, tmp_path)


def test_hwh_from_srcs_of_older_vivado(script, tmp_path):
    cfg, bd = script
    r = run_bd(bd, tmp_path, STUB_HWH_DIR="srcs")
    assert r.rc == 0, r.proc.stdout
    assert 'DIR="srcs"' in (r.out / f"{cfg.name}.hwh").read_text()
    assert (r.out / f"{cfg.name}.bit").is_file()


def test_no_hwh_fails(script, tmp_path):
    cfg, bd = script
    r = run_bd(bd, tmp_path, STUB_HWH_DIR="none")
    assert r.rc == 1
    assert "HLSNN-ERROR: no hardware handoff" in r.proc.stdout
    assert not (r.out / f"{cfg.name}.hwh").exists()


@pytest.mark.parametrize("knob", ["STUB_WNS", "STUB_WHS"])
def test_timing_failure_exits_3(script, tmp_path, knob):
    cfg, bd = script
    r = run_bd(bd, tmp_path, **{knob: "-0.173"})
    assert r.rc == 3, r.proc.stdout
    assert "HLSNN-ERROR: timing failed" in r.proc.stdout and "-0.173" in r.proc.stdout
    t = reports.parse_timing(r.out / "timing.txt")
    assert t[knob[-3:].lower()] == -0.173
    assert not (r.out / f"{cfg.name}.bit").exists() and not (r.out / f"{cfg.name}.hwh").exists()


def test_incomplete_run_exits_2(script, tmp_path):
    cfg, bd = script
    r = run_bd(bd, tmp_path, STUB_PROGRESS="62%", STUB_STATUS="route_design ERROR", STUB_WNS="-1.5")
    assert r.rc == 2, r.proc.stdout
    assert "implementation stopped at 62% (route_design ERROR)" in r.proc.stdout
    t = reports.parse_timing(r.out / "timing.txt")
    assert t["progress"] == "62%" and t["status"] == "route_design ERROR"
    assert not (r.out / f"{cfg.name}.bit").exists()


def test_without_board_files(script, tmp_path):
    cfg, bd = script
    r = run_bd(bd, tmp_path, STUB_BOARD_PARTS=0)
    assert r.rc == 0
    assert not [a for a in r.named("set_property") if a[0] == "board_part"]
    assert r.named("create_project")[0][3] == cfg.board.part
    (line,) = [x for x in r.proc.stdout.splitlines() if x.startswith("HLSNN-WARNING")]
    assert f"board files for {cfg.board.board_part} are not installed" in line and cfg.board.part in line
    assert ("ps_config" in line) == bool(cfg.board.ps_config)
    ok = run_bd(bd, tmp_path / "with", STUB_BOARD_PARTS=1)
    assert "HLSNN-WARNING" not in ok.proc.stdout


def _pattern_faults(r):
    """What the old bd.tcl did that no public script of this design does."""
    faults = []
    if [a for a in r.named("apply_bd_automation") if a[1] == "xilinx.com:bd_rule:clkrst"]:
        faults.append("clkrst after the AXI automation clocked the pins")
    if [a for a in r.named("assign_bd_address") if not a]:
        faults.append("blanket assign_bd_address")
    segs = [a[-2] for a in r.named("assign_bd_address") if len(a) > 1]
    if len(segs) != len(set(segs)):
        faults.append("a segment assigned twice")
    return faults


def test_new_pattern_has_no_faults(script, tmp_path):
    cfg, bd = script
    r = run_bd(bd, tmp_path)
    assert r.rc == 0 and _pattern_faults(r) == []


@pytest.mark.parametrize("old, new, fault", [
    # the S2MM call aimed at the PS slave pin that MM2S connected (the bug of issue 12)
    ("axi_auto /dma/M_AXI_S2MM $PS_SLAVE [intc_of $PS_SLAVE Master] dma/M_AXI_S2MM",
     "axi_auto /dma/M_AXI_S2MM $PS_SLAVE {Auto} $PS_SLAVE", "already connected"),
    # S2MM asking for a new interconnect instead of the MM2S one
    ("axi_auto /dma/M_AXI_S2MM $PS_SLAVE [intc_of $PS_SLAVE Master] dma/M_AXI_S2MM",
     "axi_auto /dma/M_AXI_S2MM $PS_SLAVE {New AXI SmartConnect} dma/M_AXI_S2MM", "intc_ip asks for a new interconnect"),
    # the kernel's control slave automated a second time
    ("validate_bd_design\n", "axi_auto $PS_MASTER /NAME/s_axi_control [intc_of $PS_MASTER Slave] NAME/s_axi_control\n"
     "validate_bd_design\n", "already connected"),
])
def test_old_pattern_fails_in_the_stubs(script, tmp_path, old, new, fault):
    cfg, bd = script
    text = bd.read_text()
    assert old in text
    bd.write_text(text.replace(old, new.replace("NAME", cfg.name), 1))
    proc = subprocess.run(["tclsh", str(STUBS), str(bd), str(tmp_path / "log"), str(tmp_path), str(tmp_path / "o"), "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and fault in proc.stderr, proc.stderr


@pytest.mark.parametrize("extra, fault", [
    ("apply_bd_automation -rule xilinx.com:bd_rule:clkrst -config [list Clk $PS_CLK] [get_bd_pins NAME/ap_clk]\n",
     "clkrst after the AXI automation clocked the pins"),
    ("assign_bd_address\n", "blanket assign_bd_address"),
    ("assign_bd_address -offset 0x0 -range 64K -target_address_space [get_bd_addr_spaces ps/Data] "
     "[get_bd_addr_segs dma/S_AXI_LITE/Reg] -force\n", "a segment assigned twice"),
])
def test_pattern_faults_are_caught(script, tmp_path, extra, fault):
    cfg, bd = script
    text = bd.read_text()
    bd.write_text(text.replace("validate_bd_design\n", extra.replace("NAME", cfg.name) + "validate_bd_design\n", 1))
    r = run_bd(bd, tmp_path)
    assert fault in _pattern_faults(r)


def test_missing_ip_exits_1(script, tmp_path):
    cfg, bd = script
    r = run_bd(bd, tmp_path, STUB_MISSING_IP="axi_dma")
    assert r.rc == 1
    assert "HLSNN-ERROR: IP xilinx.com:ip:axi_dma:* not found" in r.proc.stdout
    assert not r.named("launch_runs")


def test_usage_without_tclargs(script, tmp_path):
    cfg, bd = script
    log = tmp_path / "calls.log"
    proc = subprocess.run(["tclsh", str(STUBS), str(bd), str(log)], cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 1 and "usage:" in proc.stdout
    assert [json.loads(x)[0] for x in log.read_text().splitlines()] == ["nets", "exit"]


@pytest.mark.parametrize("board, dma, kernel", [("pynq-z2", "0x40400000", "0x43C00000"),
                                                ("zcu104", "0xA0000000", "0xA0010000")])
def test_fixed_control_addresses(tmp_path, board, dma, kernel):
    """The DMA and the kernel sit at fixed addresses on the PS master, so that the .hwh the
    flow renders for the simulated device and the one Vivado writes agree."""
    import hlsnn.build
    from hlsnn import codegen
    from hlsnn.commands.builds import load_for_build
    config = {"pynq-z2": "bfp16_pynq-z2.yaml", "zcu104": "bfp8_zcu104.yaml"}[board]
    cfg = load_for_build(ROOT / "configs" / "accel" / config, None)
    text = codegen.render_extra(cfg, "bd.tcl.j2", tmp_path / "bd.tcl", hlsnn.build.bd_context(cfg)).read_text()
    assert f"-target_address_space [get_bd_addr_spaces ps/Data] -offset {dma} -range 64K " \
        "[get_bd_addr_segs dma/S_AXI_LITE/Reg] -force" in text
    assert f"-target_address_space [get_bd_addr_spaces ps/Data] -offset {kernel} -range 64K " \
        f"[get_bd_addr_segs {cfg.name}/s_axi_control/Reg] -force" in text
    assert text.count("assign_bd_address") == 2
