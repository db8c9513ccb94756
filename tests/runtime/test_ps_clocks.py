"""The simulated board's PS clocks come from the .hwh: real Vivado .hwh files load through
``pynq.Overlay`` and pynq reports the PL clock frequencies they declare.

Expected values are read straight from the XML here (the PS instance's ``PARAMETER`` elements),
never through hlsnn. Real files: two kept in tests/fixtures/hwh (see the README there for
provenance and licences) and two in the installed pynqmetadata wheel. pynq 3.x programs the
.hwh's divisors at download and pynq 4.0 computes its own from the declared frequency, so each
test also programs the .hwh's divisors itself: with a wrong PLL that read-back is wrong on both.
"""
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from hlsnn.runtime.sim.pynq_base import _pynq

if _pynq is None:  # pragma: no cover
    pytest.skip("pynq is not installed", allow_module_level=True)

import pynq  # noqa: E402
import pynqmetadata  # noqa: E402

from hlsnn.runtime.sim import SimDevice, SimMetadataError  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore:Setting frequency to the closest possible value:UserWarning")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "hwh"
WHEEL = Path(pynqmetadata.__file__).parent / "tests" / "hwhs"
KV260 = FIXTURES / "kv260_dma_ip_example.hwh"
PYNQ_Z2 = FIXTURES / "pynq_z2_dpu.hwh"
REAL = {"kv260": KV260, "pynq_z2": PYNQ_Z2, "resizer": WHEEL / "resizer.hwh", "rfsoc_sam": WHEEL / "rfsoc_sam.hwh"}
PS_TYPES = ("processing_system7", "zynq_ultra_ps_e")
# pynq's fixed reference clocks (pynq/ps.py DEFAULT_SRC_CLK_MHZ) differ from what the .hwh files
# say by up to 1e-5 (33.333 vs 33.33333 MHz); on a board pynq reports the same.
REL = 2e-5

# The PYNQ-Z2 base overlay's PL clocks: github.com/Xilinx/PYNQ boards/Pynq-Z2/base/base.hwh @ e2586e01
# (Vivado 2018.2; base.tcl @ v3.0.1 has the same): IO PLL 1000 MHz (FBDIV 20 x 50 MHz crystal),
# FCLK0..3 = IO PLL / (5*2), / (7*1), / (5*1), / (5*2), ACT 100, 142.857132, 200, 100 MHz.
PYNQ_Z2_BASE = {"PCW_FPGA_FCLK1_ENABLE": "1", "PCW_FPGA_FCLK2_ENABLE": "1", "PCW_FPGA_FCLK3_ENABLE": "1",
                "PCW_FCLK1_PERIPHERAL_DIVISOR0": "7", "PCW_FCLK1_PERIPHERAL_DIVISOR1": "1",
                "PCW_FCLK2_PERIPHERAL_DIVISOR0": "5", "PCW_FCLK2_PERIPHERAL_DIVISOR1": "1",
                "PCW_FCLK3_PERIPHERAL_DIVISOR0": "5", "PCW_FCLK3_PERIPHERAL_DIVISOR1": "2",
                "PCW_ACT_FPGA1_PERIPHERAL_FREQMHZ": "142.857132", "PCW_ACT_FPGA2_PERIPHERAL_FREQMHZ": "200.000000",
                "PCW_ACT_FPGA3_PERIPHERAL_FREQMHZ": "100.000000"}


# ------------------------------------------------------------------ reading the XML directly
def _ps_module(root):
    mods = [m for m in root.iter("MODULE") if m.get("MODTYPE") in PS_TYPES]
    assert len(mods) == 1, "one processing system per design"
    return mods[0]


def ps_params(path):
    """The PS instance's parameters, name -> value, as the .hwh writes them."""
    ps = _ps_module(ET.parse(path).getroot())
    return ps.get("MODTYPE"), {p.get("NAME"): p.get("VALUE") for p in ps.iter("PARAMETER")}


def declared(path):
    """``[(index, enabled, achieved MHz, divisor0, divisor1)]`` for PL clocks 0..3."""
    modtype, p = ps_params(path)
    out = []
    for i in range(4):
        if modtype == "processing_system7":
            en, act = p[f"PCW_FPGA_FCLK{i}_ENABLE"], p[f"PCW_ACT_FPGA{i}_PERIPHERAL_FREQMHZ"]
            divs = p[f"PCW_FCLK{i}_PERIPHERAL_DIVISOR0"], p[f"PCW_FCLK{i}_PERIPHERAL_DIVISOR1"]
        else:
            en, act = p[f"PSU__FPGA_PL{i}_ENABLE"], p[f"PSU__CRL_APB__PL{i}_REF_CTRL__ACT_FREQMHZ"]
            divs = (p[f"PSU__CRL_APB__PL{i}_REF_CTRL__DIVISOR0"], p[f"PSU__CRL_APB__PL{i}_REF_CTRL__DIVISOR1"])
        out.append((i, en == "1", float(act), int(divs[0]), int(divs[1])))
    return out


def patched(src, dst, values):
    """Copy the .hwh ``src`` to ``dst`` with some PS parameters changed (the rest byte for byte)."""
    tree = ET.parse(src)
    ps = _ps_module(tree.getroot())
    params = {p.get("NAME"): p for p in ps.iter("PARAMETER")}
    for name, value in values.items():
        params[name].set("VALUE", value)
    tree.write(dst, encoding="UTF-8", xml_declaration=True)
    return dst


def overlay_files(hwh, folder, stem="design"):
    folder.mkdir(parents=True, exist_ok=True)
    if Path(hwh) != folder / f"{stem}.hwh":
        shutil.copy(hwh, folder / f"{stem}.hwh")
    (folder / f"{stem}.bit").write_bytes(b"not a bitstream")
    return folder / f"{stem}.bit"


def fclk(i):
    return getattr(pynq.Clocks, f"fclk{i}_mhz")


# ------------------------------------------------------------------ real files
@pytest.mark.parametrize("name", sorted(REAL))
def test_real_hwh_loads_with_the_pl_clocks_it_declares(name, tmp_path):
    path = REAL[name]
    assert path.is_file(), path
    clocks = declared(path)
    assert any(en for _, en, *_ in clocks)
    with SimDevice(unmodeled="ram") as sim:
        pynq.Overlay(str(overlay_files(path, tmp_path)))            # download programs the PL clocks
        for i, en, act, _, _ in clocks:
            if en:
                assert fclk(i) == pytest.approx(act, rel=REL), f"PL clock {i} after download"
        # the .hwh's own divisors, as pynq 3.x programs them: the PLL must be the design's
        for i, en, act, d0, d1 in clocks:
            if en:
                pynq.Clocks.set_pl_clk(i, div0=d0, div1=d1)
                assert fclk(i) == pytest.approx(act, rel=REL), f"PL clock {i} with divisors {d0}, {d1}"
        assert sim.ps_clocks is not None


@pytest.mark.parametrize("name,key", [("kv260", "PSU__CRF_APB__ACPU_CTRL__ACT_FREQMHZ"),
                                      ("pynq_z2", "PCW_ACT_APU_PERIPHERAL_FREQMHZ")])
def test_cpu_clock_is_the_declared_one(name, key, tmp_path):
    want = float(ps_params(REAL[name])[1][key])          # 1333.333008 and 650.000000
    with SimDevice(unmodeled="ram") as sim:
        pynq.Overlay(str(overlay_files(REAL[name], tmp_path)))
        assert pynq.Clocks.cpu_mhz == pytest.approx(want, rel=REL)
        assert not [f for f in sim.fixups if f.startswith("PS clocks")]     # nothing assumed or scaled


def test_pynq_z2_io_pll_is_1000_mhz(tmp_path):
    _, p = ps_params(PYNQ_Z2)
    assert (p["PCW_CRYSTAL_PERIPHERAL_FREQMHZ"], p["PCW_IOPLL_CTRL_FBDIV"], p["PCW_IO_IO_PLL_FREQMHZ"]) == \
        ("50", "20", "1000.000")
    with SimDevice(unmodeled="ram"):
        pynq.Overlay(str(overlay_files(PYNQ_Z2, tmp_path)))
        pynq.Clocks.set_pl_clk(0, div0=1, div1=1)          # FCLK0 = the IO PLL itself
        assert pynq.Clocks.fclk0_mhz == pytest.approx(1000.0)


def test_pynq_z2_base_overlay_clocks(tmp_path):
    # four PL clocks, 142.857 MHz among them: from a 1600 MHz IO PLL pynq 4.0 would pick /11
    # (145.45 MHz) and pynq 3.x would program /7 (228.57 MHz)
    hwh = patched(PYNQ_Z2, tmp_path / "base.hwh", PYNQ_Z2_BASE)
    with SimDevice(unmodeled="ram"):
        pynq.Overlay(str(overlay_files(hwh, tmp_path, "base")))
        assert [fclk(i) for i in range(4)] == pytest.approx([100.0, 142.857132, 200.0, 100.0], rel=1e-6)


@pytest.mark.parametrize("fbdiv", [20, 32])
def test_the_io_pll_fbdiv_of_the_hwh_sets_what_pynq_reads(fbdiv, tmp_path):
    # the PYNQ-Z2 base clocks with IO PLL FBDIV 20 (1000 MHz, the real one) or 32 (1600 MHz): the
    # board follows the .hwh, so a wrong FBDIV gives the wrong FCLK1
    hwh = patched(PYNQ_Z2, tmp_path / "io.hwh", {**PYNQ_Z2_BASE, "PCW_IOPLL_CTRL_FBDIV": str(fbdiv),
                                                 "PCW_IO_IO_PLL_FREQMHZ": f"{50 * fbdiv:.3f}"})
    with SimDevice(unmodeled="ram"):
        pynq.Overlay(str(overlay_files(hwh, tmp_path, "io")))
        assert (pynq.Clocks.fclk1_mhz == pytest.approx(142.857132, rel=1e-6)) == (fbdiv == 20)
        pynq.Clocks.set_pl_clk(1, div0=7, div1=1)                 # the .hwh's divisors
        assert pynq.Clocks.fclk1_mhz == pytest.approx(50 * fbdiv / 7)


@pytest.mark.parametrize("fbdiv", [60, 90])
def test_the_iopll_fbdiv_of_a_zynqmp_hwh_sets_what_pynq_reads(fbdiv, tmp_path):
    # the KV260 design with its real IOPLL (60 / 2) or the one assumed before (90 / 2)
    hwh = patched(KV260, tmp_path / "zu.hwh", {"PSU__CRL_APB__IOPLL_CTRL__FBDIV": str(fbdiv)})
    with SimDevice(unmodeled="ram"):
        pynq.Overlay(str(overlay_files(hwh, tmp_path, "zu")))
        pynq.Clocks.set_pl_clk(0, div0=10, div1=1)                # the .hwh's divisors
        assert pynq.Clocks.fclk0_mhz == pytest.approx(33.333 * fbdiv / 2 / 10)
        assert (pynq.Clocks.fclk0_mhz == pytest.approx(99.999001, rel=REL)) == (fbdiv == 60)


def test_a_design_for_another_crystal_keeps_its_pll_rates(tmp_path):
    # resizer.hwh was configured for a 33.333333 MHz crystal (IO PLL 48 x = 1600 MHz); pynq and the
    # PYNQ-Z1/Z2 assume 50 MHz, so the board runs the IO PLL at FBDIV 32 and says so
    _, p = ps_params(REAL["resizer"])
    assert (p["PCW_CRYSTAL_PERIPHERAL_FREQMHZ"], p["PCW_IOPLL_CTRL_FBDIV"]) == ("33.333333", "48")
    with SimDevice(unmodeled="ram") as sim:
        pynq.Overlay(str(overlay_files(REAL["resizer"], tmp_path)))
        pynq.Clocks.set_pl_clk(0, div0=1, div1=1)
        assert pynq.Clocks.fclk0_mhz == pytest.approx(1600.0)
        notes = [f for f in sim.fixups if f.startswith("PS clocks: IO PLL")]
        assert len(notes) == 1 and "FBDIV 32" in notes[0] and "50 MHz" in notes[0]


def test_disabled_clocks_and_unknown_sources(tmp_path):
    # a clock source pynq cannot read back is a clear error naming the parameter
    hwh = patched(PYNQ_Z2, tmp_path / "bad.hwh", {"PCW_FCLK0_PERIPHERAL_CLKSRC": "EXTERNAL"})
    with SimDevice(unmodeled="ram"):
        with pytest.raises(SimMetadataError, match="PCW_FCLK0_PERIPHERAL_CLKSRC.*IO PLL"):
            pynq.Overlay(str(overlay_files(hwh, tmp_path, "bad")))


# ------------------------------------------------------------------ the rendered .hwh of each board
def _board_configs():
    import hlsnn
    import hlsnn.commands.builds
    root = Path(__file__).resolve().parents[2]
    cfgs = [hlsnn.load_config(root / "configs" / "accel" / f"{n}.yaml")
            for n in ("bfp16_pynq-z2", "bfp8_zcu104", "bfp12_ultra96v2-stats")]
    cfgs.append(hlsnn.commands.builds.load_for_build(root / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml",
                                         "kv260"))
    return cfgs


@pytest.mark.parametrize("cfg", _board_configs(), ids=lambda c: c.board.name)
def test_rendered_hwh_clocks_on_the_simulated_board(cfg, tmp_path):
    from hlsnn.blockdesign import hwh
    path = hwh.render_hwh(cfg, tmp_path / "design.hwh")
    (i, en, act, d0, d1), *_ = declared(path)
    assert en
    with SimDevice(unmodeled="ram") as sim:
        pynq.Overlay(str(overlay_files(path, tmp_path)))
        assert pynq.Clocks.fclk0_mhz == pytest.approx(act, rel=REL)
        pynq.Clocks.set_pl_clk(0, div0=d0, div1=d1)
        assert pynq.Clocks.fclk0_mhz == pytest.approx(act, rel=REL)
        assert not [f for f in sim.fixups if f.startswith("PS clocks")]


# ------------------------------------------------------------------ reading the parameters
def test_missing_parameters_are_assumed_and_listed():
    from hlsnn.runtime import ps_clocks
    # an older .hwh with the IO PLL rate but no FBDIV: the divider follows from the crystal
    c = ps_clocks.from_parameters({"PCW_CRYSTAL_PERIPHERAL_FREQMHZ": "50", "PCW_IO_IO_PLL_FREQMHZ": "1000.000"},
                                  "zynq7")
    assert c.plls["IO"] == (20, False)
    assert not any(a.startswith("PCW_IOPLL_CTRL_FBDIV") for a in c.assumed)
    assert any(a.startswith("PCW_FCLK0_PERIPHERAL_DIVISOR0") for a in c.assumed)
    with pytest.raises(ValueError, match="PSU__CRL_APB__PL0_REF_CTRL__DIVISOR0.*not a number"):
        ps_clocks.from_parameters({"PSU__CRL_APB__PL0_REF_CTRL__DIVISOR0": "ten"}, "zynqmp")
    with pytest.raises(ValueError, match="outside the 6-bit range"):
        ps_clocks.from_parameters({"PCW_FCLK2_PERIPHERAL_DIVISOR1": "64"}, "zynq7")
    with pytest.raises(ValueError, match="allowed: zynq7, zynqmp"):
        ps_clocks.from_parameters({}, "versal")


def test_the_rendered_pl0_matches_the_model_of_the_real_files():
    # the model's own arithmetic against the numbers the real files state
    from hlsnn.runtime import ps_clocks
    for path, key in ((KV260, "PSU__CRL_APB__PL0_REF_CTRL__ACT_FREQMHZ"),
                      (PYNQ_Z2, "PCW_ACT_FPGA0_PERIPHERAL_FREQMHZ")):
        modtype, p = ps_params(path)
        c = ps_clocks.from_parameters(p, "zynq7" if modtype == "processing_system7" else "zynqmp")
        assert c.assumed == ()
        assert c.pl_mhz(0) == pytest.approx(float(p[key]), rel=1e-6)


# ------------------------------------------------------------------ a board booted with another design
def test_a_board_booted_at_1000_mhz_runs_a_1600_mhz_design_slower(tmp_path):
    # resizer.hwh's FCLK0 divisors (4 x 4) were computed for an IO PLL of 1600 MHz; a PYNQ-Z2 booted
    # with a preset design (IO PLL 1000 MHz) keeps its PLL, so they give 1000 / 16 = 62.5 MHz there
    with SimDevice(unmodeled="ram", boot_hwh=PYNQ_Z2) as sim:
        assert sim.boot_clocks.pll_mhz("IO") == 1000.0
        pynq.Overlay(str(overlay_files(REAL["resizer"], tmp_path)))
        # pynq 3.x programs the .hwh's divisors; pynq 4.0 computes its own from the 100 MHz
        assert pynq.Clocks.fclk0_mhz == pytest.approx(62.5 if pynq.__version__.startswith("3.") else 100.0)
        pynq.Clocks.set_pl_clk(0, div0=4, div1=4)
        assert pynq.Clocks.fclk0_mhz == pytest.approx(62.5)
        notes = [f for f in sim.fixups if f.startswith("PS clocks on the booted board")]
        assert len(notes) == 1 and "62.500 MHz, not 100.000" in notes[0]
    # the design it booted with, or one built with the same preset, runs as declared
    with SimDevice(unmodeled="ram", boot_hwh=PYNQ_Z2) as sim:
        pynq.Overlay(str(overlay_files(PYNQ_Z2, tmp_path / "same")))
        pynq.Clocks.set_pl_clk(0, div0=5, div1=2)
        assert pynq.Clocks.fclk0_mhz == pytest.approx(100.0)
        assert not [f for f in sim.fixups if f.startswith("PS clocks")]
    with pytest.raises(SimMetadataError, match="boot_hwh"):
        SimDevice(boot_hwh=tmp_path / "missing.hwh")
