"""The hardware handoff written without Vivado (hlsnn.blockdesign.hwh): for every shipped config it
parses with the parser pynq 4.0 uses (pynqmetadata's HwhFrontend + RuntimeMetadataParser) and
loads through an unmodified ``pynq.Overlay``, and describes what hls/tcl/bd.tcl.j2 builds: the
DMA and the kernel at the fixed addresses, the DMA parameters, the stream links both ways, the
kernel's register map at the predicted offsets and the PL clock. The real Vivado-written
resizer.hwh that ships in the pynqmetadata wheel goes through the same helpers, to show they
read a real file the same way."""
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import hlsnn
import hlsnn.cli
from hlsnn import codegen
from hlsnn import regmap
from hlsnn.blockdesign import bd_context, hwh, hwh_read, ps_presets
from hlsnn.engines import ENGINES

pynqmetadata = pytest.importorskip("pynqmetadata")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CONFIGS = sorted((ROOT / "configs" / "accel").glob("*.yaml"))
TINY = ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml"
RESIZER = Path(pynqmetadata.__file__).parent / "tests" / "hwhs" / "resizer.hwh"
#: Register attributes a field of the same name shadows in pynq's Register subclasses (pynq 4.0
#: registers.py: a field property called ``width`` recurses when the register is built).
PYNQ_REGISTER_ATTRS = {"width", "address", "access", "debug"}
FIXTURES = ROOT / "tests" / "fixtures" / "hwh"
#: The PL clocks' source PLL (IO PLL / IOPLL) in MHz as a build with each board's preset declares it:
#: pynq-z2 50 MHz x 20 (tests/fixtures/hwh/pynq_z2_dpu.hwh, a PYNQ-Z2 preset build, Vivado 2024.1; PYNQ
#: v3.0.1 boards/Pynq-Z2/base/base.tcl); kv260 33.333 x 60 / 2 (tests/fixtures/hwh/kv260_dma_ip_example.hwh,
#: kv260_som 1.3 preset, Vivado 2022.1); zcu104 33.333333 (XilinxBoardStore zcu104/1.1/preset.xml) x 90 / 2
#: (PYNQ v3.0.1 boards/ZCU104/base/base.tcl); ultra96v2 33.333333 x 45, no DIV2 (Avnet/bdf
#: ultra96v2/1.2/preset.xml).
IO_PLL = {"pynq-z2": 50 * 20, "kv260": 33.333 * 60 / 2, "zcu104": 33.333333 * 90 / 2, "ultra96v2": 33.333333 * 45,
          # no preset of its own in ps_presets (its board files' PLLs are not recorded there): the
          # Zynq UltraScale+ family default, the ZCU104's
          "aup-zu3": 33.333333 * 90 / 2}
CTRL_FIELDS = {"AP_START": (0, 1), "AP_DONE": (1, 1), "AP_IDLE": (2, 1), "AP_READY": (3, 1), "AUTO_RESTART": (7, 1)}


def _cases():
    out = [(p.stem, hlsnn.load_config(p)) for p in CONFIGS]
    # a 32-bit stream on the KV260 (64-bit DMA addresses): the design follows the config and board
    out.append(("t2_tiny@kv260", hlsnn.commands.builds.load_for_build(TINY, "kv260")))
    return out


CASES = _cases()


def _closest(pll, mhz):
    """The PL rate nearest ``mhz`` that ``pll`` gives through two 6-bit divisors (UG585 / UG1085:
    FPGA0_CLK_CTRL / PL0_REF_CTRL DIVISOR0 and DIVISOR1, 1..63 each): the closest of pll / n
    over every product n, not pll / round(pll / mhz), which can miss it (rounding the divisor
    is not rounding the rate)."""
    products = {a * b for a in range(1, 64) for b in range(1, 64)}
    return min((pll / n for n in products), key=lambda f: abs(f - mhz))
IDS = [c[0] for c in CASES]


class Rendered:
    def __init__(self, cfg, folder):
        self.cfg = cfg
        self.ctx = bd_context(cfg)
        self.path = hwh.render_hwh(cfg, folder / f"{cfg.name}.hwh")
        self.parser = hwh_read.parse_hwh(self.path)
        self.md = self.parser.systemgraph
        self.ip = self.parser.ip_dict


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    cache = {}

    def get(cfg):
        if cfg.name not in cache:
            cache[cfg.name] = Rendered(cfg, tmp_path_factory.mktemp(cfg.name))
        return cache[cfg.name]
    return get


def aliases(name):
    """The register names host code accepts for a protocol name (hlsnn.runtime.pynq_target)."""
    return (name, f"{name}_in", f"{name}_r")


# ------------------------------------------------------------------ a pynq Device for Overlay
def _reg_device_class():
    pynq = pytest.importorskip("pynq")

    class RegDevice(pynq.Device):
        """Registers as a byte dictionary; metadata through the same parser as a board
        (no _probe_: never enumerated, never the active device)."""

        def __init__(self, arch):
            super().__init__("hwh-test")
            self.name = "hwh-test"
            self.capabilities = {"REGISTER_RW": True}
            self.arch = arch
            self.mem = {}
            self.timestamp = self.bitfile_name = None

        def get_bitfile_metadata(self, bitfile_name, partial=False):
            return hwh_read.parse_hwh(Path(bitfile_name).with_suffix(".hwh"))

        def read_registers(self, address, length):
            return bytes(self.mem.get(address + i, 0) for i in range(length))

        def write_registers(self, address, data):
            for i, b in enumerate(bytes(data)):
                self.mem[address + i] = b

        def download(self, bitstream, parser=None):
            self.post_download(bitstream, parser, self.name)
    return RegDevice


@pytest.fixture
def overlay_of(tmp_path):
    """``overlay_of(hwh_path, arch)``: a pynq.Overlay (download=False) on a register device;
    pynq's class-level Clocks state is put back afterwards."""
    pynq = pytest.importorskip("pynq")
    saved_device = vars(pynq.Clocks).get("device")
    had_instance = "_real_instance" in vars(pynq.Clocks)
    RegDevice = _reg_device_class()

    def make(hwh_path, arch):
        stem = Path(hwh_path).stem
        d = tmp_path / f"ol_{stem}"
        d.mkdir()
        shutil.copy(hwh_path, d / f"{stem}.hwh")
        (d / f"{stem}.bit").write_bytes(b"")
        dev = RegDevice(arch)
        return pynq.Overlay(str(d / f"{stem}.bit"), device=dev, download=False), dev
    yield make
    if not had_instance and "_real_instance" in vars(pynq.Clocks):
        del pynq.Clocks._real_instance
    pynq.Clocks.device = saved_device


# ------------------------------------------------------------------ every config
@pytest.mark.parametrize("label,cfg", CASES, ids=IDS)
def test_dma(label, cfg, rendered):
    r = rendered(cfg)
    sb, aw = cfg.params["stream_bits"], cfg.board.dma["address_bits"]
    dma = r.ip["dma"]
    assert dma["type"].startswith("xilinx.com:ip:axi_dma:")
    assert r.md.blocks["dma"].vlnv.str == dma["type"]
    assert dma["phys_addr"] == int(r.ctx["dma_base"], 16) and dma["addr_range"] == 0x10000
    assert dma["mem_id"] == "S_AXI_LITE"
    par = dma["parameters"]
    assert par["c_include_sg"] == "0" and par["C_INCLUDE_SG"] == "0"
    assert int(par["c_sg_length_width"]) == 26
    for key in ("c_m_axis_mm2s_tdata_width", "c_s_axis_s2mm_tdata_width", "c_m_axi_mm2s_data_width",
                "c_m_axi_s2mm_data_width"):
        assert int(par[key]) == sb, key
    assert int(par["c_addr_width"]) == aw
    assert int(par["C_BASEADDR"], 16) == dma["phys_addr"]
    assert int(par["C_HIGHADDR"], 16) == dma["phys_addr"] + 0xFFFF
    assert dma["interrupts"] == {}          # bd.tcl connects no interrupts: pynq polls


@pytest.mark.parametrize("label,cfg", CASES, ids=IDS)
def test_kernel_and_register_map(label, cfg, rendered):
    r = rendered(cfg)
    eng = ENGINES[cfg.engine]
    k = r.ip[cfg.name]
    assert k["type"] == f"hlsnn.org:hls:{cfg.name}:1.0" == r.ctx["vlnv"]
    assert k["phys_addr"] == int(r.ctx["kernel_base"], 16) and k["addr_range"] == 0x10000
    assert k["mem_id"] == "s_axi_control"
    assert int(k["parameters"]["C_S_AXI_CONTROL_BASEADDR"], 16) == k["phys_addr"]
    assert set(r.ip) == {"ps", "dma", cfg.name}     # interconnects and resets are not addressable

    regs = k["registers"]
    by_off = {v["address_offset"]: (n, v) for n, v in regs.items()}
    assert len(by_off) == len(regs)                  # one register per offset
    assert [by_off[o][0] for o in (0, 4, 8, 12)] == ["CTRL", "GIER", "IP_IER", "IP_ISR"]
    ctrl = regs["CTRL"]["fields"]
    assert {f: (v["bit_offset"], v["bit_width"]) for f, v in ctrl.items() if f in CTRL_FIELDS} == CTRL_FIELDS
    assert ctrl["AP_START"]["access"] == "read-write" and ctrl["AP_DONE"]["access"] == "read-only"

    predicted = regmap.predicted_register_map(eng.protocol.REGS_IN, eng.protocol.REGS_OUT)
    assert predicted.pop("ap_ctrl") == 0
    expected_offsets = {0, 4, 8, 12}
    for i, (name, off) in enumerate(predicted.items()):
        assert off == 0x10 + 8 * i
        reg, v = by_off[off]
        assert reg in aliases(name), (name, reg)
        assert v["size"] == 32
        expected_offsets.add(off)
        if name in eng.protocol.REGS_OUT:
            assert v["access"] == "read-only"
            ctl, cv = by_off[off + 4]
            assert ctl == f"{reg}_ctrl" and cv["fields"][f"{reg}_ap_vld"]["bit_offset"] == 0
            expected_offsets.add(off + 4)
        else:
            assert v["access"] == "read-write"
    assert set(by_off) == expected_offsets

    # names="protocol": the register names are exactly the predicted map's
    p = hwh.render_hwh(cfg, r.path.with_name(f"{cfg.name}_protocol.hwh"), names="protocol")
    regs_p = hwh_read.parse_hwh(p).ip_dict[cfg.name]["registers"]
    got = {n: v["address_offset"] for n, v in regs_p.items()
           if n not in ("GIER", "IP_IER", "IP_ISR") and not n.endswith("_ctrl")}
    got["ap_ctrl"] = got.pop("CTRL")
    assert got == regmap.predicted_register_map(eng.protocol.REGS_IN, eng.protocol.REGS_OUT)


@pytest.mark.parametrize("label,cfg", CASES, ids=IDS)
def test_stream_links(label, cfg, rendered):
    r = rendered(cfg)
    md, name = r.md, cfg.name
    sb = cfg.params["stream_bits"]
    mm2s = md.blocks["dma"].ports["M_AXIS_MM2S"]
    s2mm = md.blocks["dma"].ports["S_AXIS_S2MM"]
    k_in = md.blocks[name].ports["in_r"]
    k_out = md.blocks[name].ports["out_r"]
    assert (mm2s.driver, s2mm.driver, k_in.driver, k_out.driver) == (True, False, False, True)
    # the graph pynq keeps (parser.systemgraph): port.destinations() -> {port name: Port}
    assert {(p.parent().name, p.name) for p in mm2s.destinations().values()} == {(name, "in_r")}
    assert {(p.parent().name, p.name) for p in k_out.destinations().values()} == {("dma", "S_AXIS_S2MM")}
    assert {(p.parent().name, p.name) for p in k_in.destinations().values()} == {("dma", "M_AXIS_MM2S")}
    assert hwh_read.stream_peer(md, "dma", "M_AXIS_MM2S") == (name, "in_r")
    assert hwh_read.stream_peer(md, "dma", "S_AXIS_S2MM") == (name, "out_r")
    assert hwh_read.stream_peer(md, name, "out_r") == ("dma", "S_AXIS_S2MM")
    for port in (mm2s, s2mm, k_in, k_out):
        assert port.vlnv.name == "axis"
        assert int(port.parameters["TDATA_NUM_BYTES"].value) == sb // 8
        assert set(port.signals) >= {"TDATA", "TKEEP", "TLAST", "TVALID", "TREADY"}
    # pynqmetadata takes bus signal widths from PORTMAP (Vivado writes none there: all read 1);
    # the physical ports carry the width
    root = ET.parse(r.path).getroot()
    tdata = root.find(f".//MODULE[@INSTANCE='{name}']/PORTS/PORT[@NAME='in_r_TDATA']")
    assert int(tdata.get("LEFT")) + 1 == sb
    # TLAST and TREADY run the right way
    assert mm2s.signals["TLAST"].driver and not k_in.signals["TLAST"].driver
    assert k_in.signals["TREADY"].driver and not mm2s.signals["TREADY"].driver
    # control: the PS master reaches both slaves (through the interconnect) at the fixed addresses
    ps = r.parser.ps
    master = "M_AXI_GP0" if cfg.board.ps == "zynq7" else "M_AXI_HPM0_FPD"
    port = ps.ports[master]
    amap = {(port._addrmap_obj[key].parent().name, a["baseaddr"]) for key, a in port.addrmap.items()}
    assert amap == {("dma", int(r.ctx["dma_base"], 16)), (name, int(r.ctx["kernel_base"], 16))}


@pytest.mark.parametrize("label,cfg", CASES, ids=IDS)
def test_clock_and_ps(label, cfg, rendered):
    r = rendered(cfg)
    p = r.parser
    assert p.ps_name == "ps"
    params = {k: v.value for k, v in p.ps.parameters.items()}
    clk = p.clock_dict[0]
    assert clk["enable"] == 1 and all(p.clock_dict[i]["enable"] == 0 for i in (1, 2, 3))
    mhz = hwh_read.pl_clock_mhz(p)
    pll = IO_PLL[cfg.board.name]
    assert mhz == pytest.approx(_closest(pll, cfg.clock_mhz), rel=1e-6)   # the closest the PLL allows
    if cfg.board.ps == "zynq7":
        assert p.family_ps == "processing_system7"
        assert float(params["PCW_FPGA0_PERIPHERAL_FREQMHZ"]) == cfg.clock_mhz
        assert float(params["PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ"]) == pytest.approx(mhz)
        assert clk["src_sel"] == "IO PLL"
        assert float(params["PCW_IO_IO_PLL_FREQMHZ"]) == pll
        assert float(params["PCW_CRYSTAL_PERIPHERAL_FREQMHZ"]) * int(params["PCW_IOPLL_CTRL_FBDIV"]) == pll
        assert pll / (clk["divisor0"] * clk["divisor1"]) == pytest.approx(mhz)
    else:
        assert p.family_ps == "zynq_ultra_ps_e"
        assert float(params["PSU__CRL_APB__PL0_REF_CTRL__FREQMHZ"]) == cfg.clock_mhz
        assert clk["frequency"] == pytest.approx(mhz)           # what Overlay.download() programs
        assert clk["src_sel"] == "IOPLL"
        div2 = 2 if int(params["PSU__CRL_APB__IOPLL_CTRL__DIV2"]) else 1
        assert float(params["PSU__PSS_REF_CLK__FREQMHZ"]) * int(params["PSU__CRL_APB__IOPLL_CTRL__FBDIV"]) / div2 == \
            pytest.approx(pll, rel=1e-9)
        assert pll / (clk["divisor0"] * clk["divisor1"]) == pytest.approx(mhz)
    for key, value in cfg.board.ps_config.items() if cfg.board.ps_config else ():
        assert params[key] == value
    # the kernel runs from the PS PL clock
    k_clk = r.md.blocks[cfg.name].ports["ap_clk"]
    assert {(s.parent().parent().name, s.parent().name) for s in k_clk.signals["ap_clk"].connections().values()} == \
        {("ps", "FCLK_CLK0" if cfg.board.ps == "zynq7" else "pl_clk0")}


@pytest.mark.parametrize("label,cfg", CASES, ids=IDS)
def test_systeminfo_and_bd_tcl_agree(label, cfg, rendered, tmp_path):
    r = rendered(cfg)
    root = ET.parse(r.path).getroot()
    si = root.find("SYSTEMINFO").attrib
    dev, pkg, speed = hwh.split_part(cfg.board.part)
    assert (si["DEVICE"], si["PACKAGE"], si["SPEEDGRADE"]) == (dev, pkg, speed)
    assert si["NAME"] == r.md.name == f"{cfg.name}_bd"
    assert si["ARCH"] == ("zynq" if cfg.board.ps == "zynq7" else "zynquplus")
    assert si.get("BOARD", "") == cfg.board.board_part
    # the rendered bd.tcl asks for the same cells, addresses, widths and links
    tcl = codegen.render_extra(cfg, "bd.tcl.j2", tmp_path / "bd.tcl", bd_context(cfg)).read_text()
    name = cfg.name
    assert f"create_bd_cell -type ip -vlnv {r.ip[name]['type']} {name}" in tcl
    for seg, ip in (("dma/S_AXI_LITE/Reg", "dma"), (f"{name}/s_axi_control/Reg", name)):
        m = re.search(r"-offset (0x[0-9A-Fa-f]+) -range 64K \[get_bd_addr_segs " + re.escape(seg) + r"\]", tcl)
        assert m and int(m.group(1), 16) == r.ip[ip]["phys_addr"], seg
    dma_par = r.ip["dma"]["parameters"]
    for key, value in re.findall(r"CONFIG\.(c_\w+) \{(\w+)\}", tcl):
        assert dma_par[key] == value, key
    assert f"[get_bd_intf_pins dma/M_AXIS_MM2S] [get_bd_intf_pins {name}/in_r]" in tcl
    assert f"[get_bd_intf_pins {name}/out_r] [get_bd_intf_pins dma/S_AXIS_S2MM]" in tcl
    hp = re.search(r"set PS_SLAVE /ps/(\w+)", tcl).group(1)
    assert hp in r.parser.ps.ports


@pytest.mark.filterwarnings("ignore:Setting frequency to the closest possible value")
@pytest.mark.parametrize("label,cfg", CASES, ids=IDS)
def test_pynq_overlay_loads_it(label, cfg, rendered, overlay_of):
    pynq = pytest.importorskip("pynq")
    import pynq.lib.dma
    r = rendered(cfg)
    ol, dev = overlay_of(r.path, "armv7l" if cfg.board.ps == "zynq7" else "aarch64")
    assert {"dma", cfg.name} <= set(ol.ip_dict)
    dma = ol.dma
    assert isinstance(dma, pynq.lib.dma.DMA)
    assert dma.buffer_max_size == (1 << 26) - 1
    kernel = getattr(ol, cfg.name)
    base = int(r.ctx["kernel_base"], 16)
    args = hwh.kernel_arguments(cfg)
    kernel.write(0x10, 0x1234)                # what hlsnn's pynq target does: offsets from the manifest
    assert dev.read_registers(base + 0x10, 4) == (0x1234).to_bytes(4, "little")
    if PYNQ_REGISTER_ATTRS & {reg for _, reg, _ in args}:
        # a register (and so its field) named e.g. `width`: pynq cannot build register_map for
        # this IP, on a board as here; see test_register_map_hazard
        return
    rm = kernel.register_map
    for i, (_, reg, _) in enumerate(args):
        assert getattr(rm, reg).address == 0x10 + 8 * i
    rm.CTRL.AP_START = 1                      # pynq's RegisterMap writes through the device
    assert dev.mem.get(base) == 1
    setattr(rm, args[1][1], 0x5678)
    assert dev.read_registers(base + 0x18, 4) == (0x5678).to_bytes(4, "little")
    if cfg.board.ps == "zynqmp":
        ol.download()                         # programs pl_clk0 from clock_dict, then the device
        assert ol.is_loaded()


# ------------------------------------------------------------------ register names, determinism
def test_register_names_follow_the_kernel_source():
    """Vitis HLS names each register after the kernel's C argument (bfp_systolic's ``k`` is the
    argument ``k_in``): the default names are the template's s_axilite ports, in order, and
    each is one of the aliases the runtime accepts for the protocol name."""
    for engine in ENGINES:
        cfg = next(c for _, c in CASES if c.engine == engine)
        src = (ROOT / "hls" / "engines" / engine / "kernel.cpp.j2").read_text()
        ports = [p for p in re.findall(r"s_axilite\s+port\s*=\s*(\w+)", src) if p != "return"]
        eng = ENGINES[engine]
        proto = list(eng.protocol.REGS_IN) + list(eng.protocol.REGS_OUT)
        args = hwh.kernel_arguments(cfg)
        assert [reg for _, reg, _ in args] == ports
        assert [n for n, _, _ in args] == proto
        assert [out for _, _, out in args] == [n in eng.protocol.REGS_OUT for n in proto]
        for n, reg, _ in args:
            assert reg in aliases(n), (engine, n, reg)
        assert [reg for _, reg, _ in hwh.kernel_arguments(cfg, names="protocol")] == proto
    with pytest.raises(ValueError):
        hwh.kernel_arguments(cfg, names="other")


def test_register_map_hazard():
    """Kernel arguments named like a pynq Register attribute: Vitis HLS names the register and
    its one field after the argument, and pynq 4.0's Register subclass then shadows
    ``Register.width`` (RecursionError on ``ip.register_map``). Only shift_mac has one
    (``width``); hlsnn's runtime uses offsets, so only ``register_map`` users are affected."""
    hits = {}
    for _, cfg in CASES:
        clash = PYNQ_REGISTER_ATTRS & {reg for _, reg, _ in hwh.kernel_arguments(cfg)}
        if clash:
            hits.setdefault(cfg.engine, clash)
    assert set(hits) <= {"shift_mac"}       # shift_mac's `width` (at the time of writing)


def test_render_is_deterministic(tmp_path):
    cfg = CASES[0][1]
    a = hwh.render_hwh(cfg, tmp_path / "a" / "x.hwh").read_bytes()
    b = hwh.render_hwh(cfg, tmp_path / "b" / "x.hwh").read_bytes()
    assert a == b and a.startswith(b"<?xml")


def test_part_and_divisors():
    assert hwh.split_part("xc7z020clg400-1") == ("7z020", "clg400", "-1")
    assert hwh.split_part("xczu7ev-ffvc1156-2-e") == ("xczu7ev", "ffvc1156", "-2")
    assert hwh.split_part("xczu3eg-sbva484-1-i") == ("xczu3eg", "sbva484", "-1")
    assert hwh.split_part("xck26-sfvc784-2LV-c") == ("xck26", "sfvc784", "-2LV")
    # the divisors Vivado picked in real files: resizer.hwh (IO PLL 1600: 100 -> 4, 4), PYNQ-Z2 base
    # (IO PLL 1000: 100 -> 5, 2; 142 -> 7, 1; 200 -> 5, 1), ZCU104 base.tcl (1499.985: 100 -> 15, 1;
    # 150 -> 10, 1; 250 -> 6, 1; 300 -> 5, 1), the KV260 .hwh (999.99: 100 -> 10, 1)
    assert ps_presets.pl_divisors("zynq7", 1600.0, 100) == (4, 4, 100.0)
    assert [ps_presets.pl_divisors("zynq7", 1000.0, f)[:2] for f in (100, 142, 200)] == [(5, 2), (7, 1), (5, 1)]
    assert [ps_presets.pl_divisors("zynqmp", 1499.985, f)[:2] for f in (100, 150, 250, 300)] == \
        [(15, 1), (10, 1), (6, 1), (5, 1)]
    assert ps_presets.pl_divisors("zynqmp", 999.99, 100)[:2] == (10, 1)
    d0, d1, act = ps_presets.pl_divisors("zynqmp", 999.99, 150)        # 150 MHz is not reachable from 1000 MHz
    assert (d0, d1) == (7, 1) and act == pytest.approx(142.855714)


def _ps_params(path):
    root = ET.parse(path).getroot()
    ps, = [m for m in root.iter("MODULE") if m.get("MODTYPE") in ("processing_system7", "zynq_ultra_ps_e")]
    return {q.get("NAME"): q.get("VALUE") for q in ps.iter("PARAMETER")}


def test_pynq_z2_clocks_are_those_of_a_real_preset_build(rendered):
    """The PS clock parameters of the rendered PYNQ-Z2 .hwh equal those of a real PYNQ-Z2 preset
    build at the same 100 MHz (tests/fixtures/hwh/pynq_z2_dpu.hwh): IO PLL 1000 MHz, FCLK0 / 5 / 2."""
    real = _ps_params(FIXTURES / "pynq_z2_dpu.hwh")
    keys = ["PCW_CRYSTAL_PERIPHERAL_FREQMHZ", "PCW_IOPLL_CTRL_FBDIV", "PCW_IO_IO_PLL_FREQMHZ", "PCW_ARMPLL_CTRL_FBDIV",
            "PCW_DDRPLL_CTRL_FBDIV", "PCW_CPU_PERIPHERAL_CLKSRC", "PCW_CPU_PERIPHERAL_DIVISOR0",
            "PCW_ACT_APU_PERIPHERAL_FREQMHZ", "PCW_FCLK0_PERIPHERAL_CLKSRC", "PCW_FCLK0_PERIPHERAL_DIVISOR0",
            "PCW_FCLK0_PERIPHERAL_DIVISOR1", "PCW_FPGA0_PERIPHERAL_FREQMHZ", "PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ",
            "PCW_FPGA_FCLK0_ENABLE"]
    assert real["PCW_IO_IO_PLL_FREQMHZ"] == "1000.000"
    cases = [cfg for _, cfg in CASES if cfg.board.name == "pynq-z2" and cfg.clock_mhz == 100]
    assert cases
    for cfg in cases:
        ours = _ps_params(rendered(cfg).path)
        assert {k: ours[k] for k in keys} == {k: real[k] for k in keys}


def test_kv260_clocks_are_those_of_a_real_preset_build(rendered):
    """PLLs and CPU clock of the rendered KV260 .hwh equal a real KV260 build's
    (tests/fixtures/hwh/kv260_dma_ip_example.hwh); its 100 MHz PL clocks use the same divisors."""
    real = _ps_params(FIXTURES / "kv260_dma_ip_example.hwh")
    keys = ["PSU__PSS_REF_CLK__FREQMHZ", "PSU__CRF_APB__ACPU_CTRL__SRCSEL", "PSU__CRF_APB__ACPU_CTRL__DIVISOR0"]
    for block, pll in (("CRL_APB", "IOPLL"), ("CRL_APB", "RPLL"), ("CRF_APB", "APLL"), ("CRF_APB", "DPLL"),
                       ("CRF_APB", "VPLL")):
        keys += [f"PSU__{block}__{pll}_CTRL__{f}" for f in ("FBDIV", "DIV2", "SRCSEL")]
    assert real["PSU__CRL_APB__IOPLL_CTRL__FBDIV"] == "60"
    cfg = next(cfg for _, cfg in CASES if cfg.board.name == "kv260" and cfg.clock_mhz == 100)
    ours = _ps_params(rendered(cfg).path)
    assert {k: ours[k] for k in keys} == {k: real[k] for k in keys}
    # PL1 is disabled in ours and left at 100 MHz: the divisors the real build used for 100 MHz
    assert [ours[f"PSU__CRL_APB__PL1_REF_CTRL__{k}"] for k in ("DIVISOR0", "DIVISOR1", "SRCSEL")] == \
        [real[f"PSU__CRL_APB__PL0_REF_CTRL__{k}"] for k in ("DIVISOR0", "DIVISOR1", "SRCSEL")]
    assert float(ours["PSU__CRL_APB__PL1_REF_CTRL__ACT_FREQMHZ"]) == \
        pytest.approx(float(real["PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ"]), rel=1e-6)


# ------------------------------------------------------------------ a real Vivado file, same helpers
def test_resizer_hwh_reads_the_same_way(rendered, overlay_of):
    assert RESIZER.is_file()
    p = hwh_read.parse_hwh(RESIZER)
    dma, k = p.ip_dict["axi_dma_0"], p.ip_dict["resize_accel_0"]
    assert dma["type"] == "xilinx.com:ip:axi_dma:7.1" and dma["phys_addr"] == 0x40400000
    assert dma["parameters"]["c_include_sg"] == "0" and dma["parameters"]["c_m_axis_mm2s_tdata_width"] == "32"
    assert k["type"] == "xilinx.com:hls:resize_accel:1.0" and k["phys_addr"] == 0x43C00000
    regs = {n: v["address_offset"] for n, v in k["registers"].items()}
    assert regs == {"CTRL": 0, "GIER": 4, "IP_IER": 8, "IP_ISR": 12, "src_rows": 0x10, "src_cols": 0x18,
                    "dst_rows": 0x20, "dst_cols": 0x28}
    ctrl = k["registers"]["CTRL"]["fields"]
    assert {f: (v["bit_offset"], v["bit_width"]) for f, v in ctrl.items() if f in CTRL_FIELDS} == CTRL_FIELDS
    # streams go through two axis_dwidth_converters in this design; stream_peer walks through them
    md = p.systemgraph
    assert hwh_read.stream_peer(md, "axi_dma_0", "M_AXIS_MM2S") == ("resize_accel_0", "src")
    assert hwh_read.stream_peer(md, "axi_dma_0", "S_AXIS_S2MM") == ("resize_accel_0", "dst")
    assert hwh_read.stream_peer(md, "resize_accel_0", "src") == ("axi_dma_0", "M_AXIS_MM2S")
    assert hwh_read.pl_clock_mhz(p) == 100.0
    assert p.clock_dict[0]["frequency"] is None or p.clock_dict[0]["frequency"] == 100.0
    # our file has the same shape of entries as Vivado's
    ours = rendered(CASES[0][1])
    assert set(ours.ip["dma"]) == set(dma)
    assert set(ours.ip[CASES[0][1].name]) == set(k)
    one = next(iter(k["registers"].values()))
    assert all(set(v) == set(one) for v in ours.ip[CASES[0][1].name]["registers"].values())
    assert set(ours.parser.clock_dict[0]) == set(p.clock_dict[0])
    assert {kk for kk in dma["parameters"] if kk.startswith("c_")} <= set(ours.ip["dma"]["parameters"])
    # and pynq.Overlay loads it the same way
    pynq = pytest.importorskip("pynq")
    import pynq.lib.dma
    ol, dev = overlay_of(RESIZER, "armv7l")
    assert isinstance(ol.axi_dma_0, pynq.lib.dma.DMA)
    assert ol.resize_accel_0.register_map.src_rows.address == 0x10


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_every_shipped_clock_is_one_the_board_gives(path):
    """A shipped config asks for a PL rate its board's IO PLL reaches to 100 ppm (1500/7 MHz is
    written 214.28), so its modelled figures are at the clock the bitstream runs at."""
    cfg = hlsnn.load_config(path)
    got = _closest(IO_PLL[cfg.board.name], cfg.clock_mhz)
    assert abs(got - cfg.clock_mhz) <= 1e-4 * cfg.clock_mhz, (cfg.name, cfg.clock_mhz, got)


def test_info_notes_a_clock_the_board_cannot_give(tmp_path, capsys):
    """`hlsnn info` names the rate a bitstream would run at when the config asks for another:
    200 MHz from the ZCU104's 1,500 MHz IOPLL is 187.5 (/ 8) or 214.3 (/ 7)."""
    src = (ROOT / "configs" / "accel" / "sparse8net_zcu104.yaml").read_text()
    asked = re.sub(r"(?m)^clock_mhz:.*$", "clock_mhz: 200", src)
    asked = re.sub(r"(?m)^name:.*$", "name: zcu104_at_200", asked)
    assert asked != src
    cfg = tmp_path / "zcu104_at_200.yaml"
    cfg.write_text(asked)
    assert hlsnn.cli.main(["info", str(cfg)]) == 0
    out = capsys.readouterr().out
    assert "clock_mhz 200 is not a rate" in out and "187.500 MHz" in out
    assert hlsnn.cli.main(["info", str(ROOT / "configs" / "accel" / "sparse8net_zcu104.yaml")]) == 0
    assert "note: clock_mhz" not in capsys.readouterr().out
    assert hlsnn.cli.main(["info", "--json", str(cfg)]) == 0
    import json
    assert json.loads(capsys.readouterr().out)["pl_clock_mhz"] == pytest.approx(1500 / 8, rel=1e-5)
