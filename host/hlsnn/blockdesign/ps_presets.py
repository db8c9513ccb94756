"""The PS clock presets of the shipped boards, as a build of ``hls/tcl/bd.tcl.j2`` with each
board's preset declares them (reference clock, PLL feedback dividers, CPU clock), and the PL
clock divisors the PS configuration wizard picks. :mod:`hlsnn.blockdesign.hwh` writes them into the
``.hwh`` it renders; the simulated board reads them back from there
(:mod:`hlsnn.runtime.ps_clocks`).
"""
from __future__ import annotations

# PS clock generation as a build of bd.tcl.j2 with each board's preset declares it: the reference
# clock, every PLL's feedback divider (FBDIV, and DIV2 on Zynq UltraScale+) and the CPU clock.
# Board presets set the reference clock and the peripheral rates; Vivado's PS wizard derives the
# PLLs from them, so the FBDIVs come from real builds with the same preset. Sources:
# - pynq-z2: crystal 50 MHz and APU 650 MHz from the TUL board files (Xilinx/XilinxBoardStore
#   boards/TUL/pynq-z2/A.0/preset.xml); IO/ARM/DDR PLL FBDIV 20/26/21 (IO PLL 1000 MHz), CPU = ARM
#   PLL / 2 from PYNQ v3.0.1 boards/Pynq-Z2/base/base.tcl, and the same in a Vivado 2024.1 .hwh of
#   a PYNQ-Z2 preset build (tests/fixtures/hwh/pynq_z2_dpu.hwh).
# - kv260: PSS_REF_CLK 33.333 MHz from XilinxBoardStore boards/Xilinx/kv260_som/1.3/preset_s4.xml;
#   IOPLL 60/2 (999.99 MHz), RPLL 64/2, APLL 80/2, DPLL 64/2, VPLL 90/2, ACPU = APLL / 1 from a
#   Vivado 2022.1 KV260 .hwh (tests/fixtures/hwh/kv260_dma_ip_example.hwh).
# - zcu104: PSS_REF_CLK 33.333333 MHz from XilinxBoardStore boards/Xilinx/zcu104/1.1/preset.xml;
#   IOPLL 90/2 (1500 MHz), RPLL 90/2, APLL 72/2, DPLL 64/2, VPLL 90/2, ACPU = APLL / 1 from PYNQ
#   v3.0.1 boards/ZCU104/base/base.tcl.
# - ultra96v2: all from the Avnet board files (Avnet/bdf ultra96v2/1.2/preset.xml): PSS_REF_CLK
#   33.333333 MHz, IOPLL 45 without DIV2 (1500 MHz), RPLL 70/2, APLL 72/2, DPLL 64/2, VPLL 71/2,
#   ACPU = APLL / 1.
# A board not listed gets its family's first entry (pynq-z2 or zcu104).
PS_CLOCKS = {
    "pynq-z2": {"ref": "50", "plls": {"IO": (20, 0), "ARM": (26, 0), "DDR": (21, 0)}, "cpu": ("ARM PLL", 2)},
    "zcu104": {"ref": "33.333333", "plls": {"IOPLL": (90, 1), "RPLL": (90, 1), "APLL": (72, 1), "DPLL": (64, 1),
                                            "VPLL": (90, 1)}, "cpu": ("APLL", 1)},
    "kv260": {"ref": "33.333", "plls": {"IOPLL": (60, 1), "RPLL": (64, 1), "APLL": (80, 1), "DPLL": (64, 1),
                                        "VPLL": (90, 1)}, "cpu": ("APLL", 1)},
    "ultra96v2": {"ref": "33.333333", "plls": {"IOPLL": (45, 0), "RPLL": (70, 1), "APLL": (72, 1),
                                               "DPLL": (64, 1), "VPLL": (71, 1)}, "cpu": ("APLL", 1)},
}
_FAMILY_DEFAULT = {"zynq7": "pynq-z2", "zynqmp": "zcu104"}


def ps_clocks(board):
    """The PS clock settings of ``board`` (a board config): ``PS_CLOCKS`` by board name, else
    the family's default board."""
    return PS_CLOCKS.get(board.name, PS_CLOCKS[_FAMILY_DEFAULT[board.ps]])


def pll_mhz(clocks, pll):
    """Output of PLL ``pll`` in MHz: reference x FBDIV (/ 2 with DIV2)."""
    fbdiv, div2 = clocks["plls"][pll]
    return float(clocks["ref"]) * fbdiv / (2 if div2 else 1)


def io_pll_mhz(board):
    """The IO PLL (Zynq-7000) / IOPLL (Zynq UltraScale+) of ``board`` in MHz, the PL clocks' source."""
    clocks = ps_clocks(board)
    return pll_mhz(clocks, "IO" if board.ps == "zynq7" else "IOPLL")


def pl_divisors(family, pll, mhz):
    """PL clock divisors (two 6-bit stages) from a PLL of ``pll`` MHz as the PS configuration wizard
    picks them: the closest achievable rate; Zynq-7000 prefers the most balanced pair with
    DIVISOR0 >= DIVISOR1 (100 MHz from 1000 MHz -> 5, 2 and from 1600 MHz -> 4, 4, as PYNQ's
    base.tcl and resizer.hwh record), Zynq UltraScale+ prefers DIVISOR1 = 1 (PYNQ's ZCU104
    base.tcl: 100 -> 15, 1)."""
    best = None
    for d0 in range(1, 64):
        for d1 in range(1, 64):
            err = abs(pll / (d0 * d1) - mhz)
            pref = (d1 != 1, d0 * d1) if family == "zynqmp" else (abs(d0 - d1), -d0)
            key = (round(err, 9), pref)
            if best is None or key < best[0]:
                best = (key, d0, d1)
    _, d0, d1 = best
    return d0, d1, pll / (d0 * d1)

