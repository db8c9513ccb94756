"""The PS clock generator a ``.hwh`` declares, and the PS clock registers that produce it.

The simulated board (:class:`hlsnn.runtime.sim.SimDevice`) presets its SLCR (Zynq-7000) or
CRL_APB/CRF_APB (Zynq UltraScale+) registers from the ``.hwh`` it is given, as a board that booted
with that design's PS configuration would hold them. ``pynq.Clocks`` then reads and programs them
exactly as on a board, so the PL clock frequencies pynq reports are the ones the design declares.

What pynq reads (``pynq/ps.py``, the same in pynq 3.0.1 and 4.0.0):

* Zynq-7000 (``_ClocksZynq``, reference clock assumed to be 50 MHz): ``ARM_PLL_CTRL`` 0x100,
  ``DDR_PLL_CTRL`` 0x104, ``IO_PLL_CTRL`` 0x108 (``PLL_FDIV`` [18:12]); ``FPGA<n>_CLK_CTRL``
  0x170 + 0x10 n (``SRCSEL`` [5:4]: 0 or 1 IO PLL, 2 ARM PLL, 3 DDR PLL; ``DIVISOR0`` [13:8];
  ``DIVISOR1`` [25:20]); ``ARM_CLK_CTRL`` 0x120 (``SRCSEL`` [5:4]: 0 or 1 ARM PLL, 2 DDR PLL,
  3 IO PLL; ``DIVISOR`` [13:8]). ``fclk<n>_mhz = 50 * PLL_FDIV / (DIVISOR0 * DIVISOR1)``.
* Zynq UltraScale+ (``_ClocksUltrascale``, reference assumed to be 33.333 MHz): CRL_APB
  ``IOPLL_CTRL`` 0x20 and ``RPLL_CTRL`` 0x30, CRF_APB ``APLL_CTRL`` 0x20, ``DPLL_CTRL`` 0x2C,
  ``VPLL_CTRL`` 0x38 (``FBDIV`` [14:8], ``DIV2`` [16], ``PRE_SRC`` [22:20] which must be 0 =
  PS_REF_CLK); CRL_APB ``PL<n>_REF_CTRL`` 0xC0 + 4 n (``SRCSEL`` [2:0]: 0 IOPLL, 2 RPLL, 3 DPLL;
  ``DIVISOR0`` [13:8]; ``DIVISOR1`` [21:16]; ``CLKACT`` [24]); CRF_APB ``ACPU_CTRL`` 0x60
  (``SRCSEL`` [2:0]: 0 APLL, 2 DPLL, 3 VPLL; ``DIVISOR0`` [13:8]).
  ``pl_clk<n> = 33.333 * FBDIV / (2 if DIV2 else 1) / (DIVISOR0 * DIVISOR1)``.

pynq 3.x programs the ``.hwh``'s own divisors into ``FPGA<n>_CLK_CTRL`` / ``PL<n>_REF_CTRL`` at
``Overlay.download()``, so the PLL must be what the ``.hwh`` was built for or the PL clock comes
out wrong; pynq 4.0 computes divisors from the ``.hwh``'s frequency and the PLL it reads.

What the ``.hwh`` carries (the PS instance's parameters, as in every Vivado ``.hwh`` read for
this module: PYNQ-Z1/Z2, KV260, RFSoC 4x2 ones): Zynq-7000 ``PCW_CRYSTAL_PERIPHERAL_FREQMHZ``,
``PCW_{IO,ARM,DDR}PLL_CTRL_FBDIV`` (``PCW_IO_IO_PLL_FREQMHZ`` too), ``PCW_FCLK<n>_PERIPHERAL_CLKSRC``
("IO PLL"), ``PCW_FCLK<n>_PERIPHERAL_DIVISOR{0,1}``, ``PCW_FPGA_FCLK<n>_ENABLE``,
``PCW_CPU_PERIPHERAL_CLKSRC`` / ``_DIVISOR0``; Zynq UltraScale+ ``PSU__PSS_REF_CLK__FREQMHZ``,
``PSU__CRL_APB__{IOPLL,RPLL}_CTRL__{FBDIV,DIV2,SRCSEL}``, ``PSU__CRF_APB__{APLL,DPLL,VPLL}_CTRL__
{FBDIV,DIV2}``, ``PSU__CRL_APB__PL<n>_REF_CTRL__{SRCSEL,DIVISOR0,DIVISOR1}``,
``PSU__FPGA_PL<n>_ENABLE``, ``PSU__CRF_APB__ACPU_CTRL__{SRCSEL,DIVISOR0}``.

pynq's reference clock is a constant, not read from the ``.hwh``. When the ``.hwh`` was built for
another crystal (the PYNQ-Z1 designs in the pynqmetadata wheel say 33.333 MHz, the board has
50 MHz), :func:`register_values` scales the feedback divisors so the PLLs run at the frequencies the
``.hwh`` declares, and says so in its notes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import printable

#: The reference clock pynq assumes (``_ClocksZynq`` / ``_ClocksUltrascale.DEFAULT_SRC_CLK_MHZ``).
PYNQ_REF_MHZ = {"zynq7": 50.0, "zynqmp": 33.333}

#: Register offsets (SLCR for zynq7; CRL_APB / CRF_APB for zynqmp), UG585 / UG1087.
SLCR_PLL = {"ARM": 0x100, "DDR": 0x104, "IO": 0x108}
SLCR_ARM_CLK_CTRL = 0x120
SLCR_FPGA_CLK_CTRL = (0x170, 0x180, 0x190, 0x1A0)
CRL_PLL = {"IOPLL": 0x20, "RPLL": 0x30}
CRF_PLL = {"APLL": 0x20, "DPLL": 0x2C, "VPLL": 0x38}
CRL_PL_REF_CTRL = (0xC0, 0xC4, 0xC8, 0xCC)
CRF_ACPU_CTRL = 0x60

# Clock-source names as Vivado writes them in the .hwh -> (PLL, SRCSEL value pynq decodes).
_ZYNQ_FCLK_SRC = {"IO PLL": ("IO", 0), "ARM PLL": ("ARM", 2), "DDR PLL": ("DDR", 3)}
_ZYNQ_CPU_SRC = {"ARM PLL": ("ARM", 0), "DDR PLL": ("DDR", 2), "IO PLL": ("IO", 3)}
_ZU_PL_SRC = {"IOPLL": ("IOPLL", 0), "RPLL": ("RPLL", 2), "DPLL": ("DPLL", 3)}
_ZU_CPU_SRC = {"APLL": ("APLL", 0), "DPLL": ("DPLL", 2), "VPLL": ("VPLL", 3)}

# What a booted board holds when the .hwh says nothing. Zynq-7000: PYNQ-Z2, PYNQ v3.0.1
# boards/Pynq-Z2/base/base.tcl (50 MHz crystal; IO/ARM/DDR PLL FBDIV 20/26/21; FCLK0 IO PLL / 5 / 2;
# CPU ARM PLL / 2 = 650 MHz). ZynqMP: ZCU104, PYNQ v3.0.1 boards/ZCU104/base/base.tcl (33.333 MHz;
# IOPLL 90/2, RPLL 90/2, APLL 72/2, DPLL 64/2, VPLL 90/2; ACPU APLL / 1).
_DEFAULTS = {
    "zynq7": {"ref": 50.0, "plls": {"IO": (20, False), "ARM": (26, False), "DDR": (21, False)},
              "pl": ("IO PLL", 5, 2), "cpu": ("ARM PLL", 2)},
    "zynqmp": {"ref": 33.333, "plls": {"IOPLL": (90, True), "RPLL": (90, True), "APLL": (72, True),
                                       "DPLL": (64, True), "VPLL": (90, True)},
               "pl": ("IOPLL", 15, 1), "cpu": ("APLL", 1)},
}
_REF_TOLERANCE = 1e-4          # 33.333 vs 33.33333 vs 33.333333 MHz are the same crystal


@dataclass(frozen=True)
class PlClock:
    """One PL clock: its source PLL, its two divisors and whether the design enables it."""
    source: str
    div0: int
    div1: int
    enabled: bool


@dataclass(frozen=True)
class PsClocks:
    """The PS clock generator of one design, as its ``.hwh`` declares it.

    Attributes
    ----------
    family : str
        ``"zynq7"`` or ``"zynqmp"``.
    ref_mhz : float
        The reference clock the design was configured for (crystal / PS_REF_CLK).
    plls : dict
        ``{name: (fbdiv, div2)}``; names ``IO``, ``ARM``, ``DDR`` (zynq7) or ``IOPLL``, ``RPLL``,
        ``APLL``, ``DPLL``, ``VPLL`` (zynqmp). ``div2`` is always False on Zynq-7000.
    pl : tuple of PlClock
        PL clocks 0..3.
    cpu : tuple
        ``(source PLL, divisor)`` of the application CPU clock.
    assumed : tuple of str
        Parameters the ``.hwh`` lacks, with the value assumed for each.
    """
    family: str
    ref_mhz: float
    plls: dict
    pl: tuple
    cpu: tuple
    assumed: tuple = field(default=())

    def pll_mhz(self, name, ref_mhz=None):
        """Output of PLL ``name`` in MHz (from ``ref_mhz``, by default the design's reference)."""
        fbdiv, div2 = self.plls[name]
        return (self.ref_mhz if ref_mhz is None else ref_mhz) * fbdiv / (2 if div2 else 1)

    def pl_mhz(self, index):
        """PL clock ``index`` in MHz, as the design's PS configuration generates it."""
        clk = self.pl[index]
        return self.pll_mhz(clk.source) / (clk.div0 * clk.div1)

    def cpu_mhz(self):
        """The application CPU clock in MHz."""
        return self.pll_mhz(self.cpu[0]) / self.cpu[1]


def _lookup(params, name, assumed, default):
    value = params.get(name)
    if value is None or str(value).strip() == "":
        assumed.append(f"{name} (assumed {default})")
        return default
    return value


def _float(params, name, assumed, default):
    value = _lookup(params, name, assumed, default)
    try:
        return float(str(value).strip())
    except ValueError:
        raise ValueError(f"{name} = {value!r} is not a number") from None


def _int(params, name, assumed, default):
    value = _lookup(params, name, assumed, default)
    try:
        return int(float(str(value).strip()))
    except ValueError:
        raise ValueError(f"{name} = {value!r} is not a number") from None


def _source(params, name, assumed, default, table):
    value = str(_lookup(params, name, assumed, default)).strip()
    key = {k.replace(" ", "").upper(): k for k in table}.get(value.replace(" ", "").upper())
    if key is None:
        raise ValueError(f"{name} = {value!r} is not a clock source pynq can read back "
                         f"(allowed: {', '.join(table)})")
    return table[key][0]


def from_parameters(params, family):
    """Read the PS clock settings from the PS instance's ``.hwh`` parameters.

    Parameters
    ----------
    params : Mapping[str, str]
        The PS instance's parameters, name -> value (strings as in the ``.hwh``).
    family : {"zynq7", "zynqmp"}
        The PS: ``processing_system7`` or ``zynq_ultra_ps_e``.

    Returns
    -------
    PsClocks

    Raises
    ------
    ValueError
        A clock source pynq cannot read back, or a non-numeric divisor.
    """
    if family not in _DEFAULTS:
        raise ValueError(f"PS family {family!r} has no clock model (allowed: zynq7, zynqmp)")
    d = _DEFAULTS[family]
    assumed = []
    if family == "zynq7":
        ref = _float(params, "PCW_CRYSTAL_PERIPHERAL_FREQMHZ", assumed, d["ref"])
        plls = {}
        for pll, (fbdiv, _) in d["plls"].items():
            name = f"PCW_{pll}PLL_CTRL_FBDIV"
            io_freq = params.get("PCW_IO_IO_PLL_FREQMHZ") if pll == "IO" else None
            if params.get(name) in (None, "") and io_freq not in (None, ""):
                plls[pll] = (round(_float(params, "PCW_IO_IO_PLL_FREQMHZ", [], 0) / ref), False)  # only the rate
            else:
                plls[pll] = (_int(params, name, assumed, fbdiv), False)
        pl = _pl_clocks(params, assumed, d, "PCW_FCLK{}_PERIPHERAL_CLKSRC", "PCW_FCLK{}_PERIPHERAL_DIVISOR{}",
                        "PCW_FPGA_FCLK{}_ENABLE", _ZYNQ_FCLK_SRC)
        cpu = (_source(params, "PCW_CPU_PERIPHERAL_CLKSRC", assumed, d["cpu"][0], _ZYNQ_CPU_SRC),
               _int(params, "PCW_CPU_PERIPHERAL_DIVISOR0", assumed, d["cpu"][1]))
    else:
        ref = _float(params, "PSU__PSS_REF_CLK__FREQMHZ", assumed, d["ref"])
        plls = {}
        for pll, (fbdiv, div2) in d["plls"].items():
            block = "CRL_APB" if pll in CRL_PLL else "CRF_APB"
            plls[pll] = (_int(params, f"PSU__{block}__{pll}_CTRL__FBDIV", assumed, fbdiv),
                         _int(params, f"PSU__{block}__{pll}_CTRL__DIV2", assumed, int(div2)) == 1)
        pl = _pl_clocks(params, assumed, d, "PSU__CRL_APB__PL{}_REF_CTRL__SRCSEL",
                        "PSU__CRL_APB__PL{}_REF_CTRL__DIVISOR{}", "PSU__FPGA_PL{}_ENABLE", _ZU_PL_SRC)
        cpu = (_source(params, "PSU__CRF_APB__ACPU_CTRL__SRCSEL", assumed, d["cpu"][0], _ZU_CPU_SRC),
               _int(params, "PSU__CRF_APB__ACPU_CTRL__DIVISOR0", assumed, d["cpu"][1]))
    for clk in pl:
        for div in (clk.div0, clk.div1):
            if not 1 <= div <= 63:
                raise ValueError(f"PL clock divisor {div} is outside the 6-bit range 1..63")
    return PsClocks(family, ref, plls, pl, cpu, tuple(assumed))


def _pl_clocks(params, assumed, d, src, div, enable, sources):
    """The four PL clocks from the parameter names ``src``, ``div`` and ``enable`` (formats of the
    clock's index, and of the divisor's), with the defaults ``d``; FCLK0 / PL0 enabled by default."""
    return tuple(PlClock(_source(params, src.format(i), assumed, d["pl"][0], sources),
                         _int(params, div.format(i, 0), assumed, d["pl"][1]),
                         _int(params, div.format(i, 1), assumed, d["pl"][2]),
                         _int(params, enable.format(i), assumed, int(i == 0)) == 1)
                 for i in range(4))


def default_clocks(family):
    """The clocks of a booted board when no design says otherwise (see ``_DEFAULTS``)."""
    clocks = from_parameters({}, family)
    return PsClocks(clocks.family, clocks.ref_mhz, clocks.plls, clocks.pl, clocks.cpu, ())


def register_values(clocks, board_ref_mhz=None):
    """The PS clock registers that generate ``clocks`` on a board whose reference clock is
    ``board_ref_mhz`` (by default the one pynq assumes).

    Parameters
    ----------
    clocks : PsClocks
    board_ref_mhz : float, optional

    Returns
    -------
    regions : dict
        ``{"SLCR": {offset: value}}`` (zynq7) or ``{"CRL_APB": {...}, "CRF_APB": {...}}`` (zynqmp).
    notes : list of str
        Where the registers cannot hold the design's settings verbatim (another reference clock).
    """
    fam = clocks.family
    board_ref = PYNQ_REF_MHZ[fam] if board_ref_mhz is None else float(board_ref_mhz)
    notes = []
    fbdivs = {}
    same_ref = abs(clocks.ref_mhz - board_ref) <= _REF_TOLERANCE * board_ref
    for name, (fbdiv, div2) in clocks.plls.items():
        if same_ref:
            fbdivs[name] = fbdiv
            continue
        scaled = max(1, min(127, round(clocks.ref_mhz * fbdiv / board_ref)))
        fbdivs[name] = scaled
        got = board_ref * scaled / (2 if div2 else 1)
        label = name if name.endswith("PLL") else f"{name} PLL"
        notes.append(f"{label}: the .hwh configures {fbdiv} x {clocks.ref_mhz:g} MHz"
                     f"{' / 2' if div2 else ''} = {clocks.pll_mhz(name):.3f} MHz; the board's reference "
                     f"is {board_ref:g} MHz (what pynq assumes), so the simulated board uses FBDIV "
                     f"{scaled} = {got:.3f} MHz")
    if fam == "zynq7":
        regs = {SLCR_PLL[name]: fbdivs[name] << 12 for name in SLCR_PLL}
        cpu_src = {v[0]: v[1] for v in _ZYNQ_CPU_SRC.values()}[clocks.cpu[0]]
        regs[SLCR_ARM_CLK_CTRL] = 0x1F000000 | (clocks.cpu[1] << 8) | (cpu_src << 4)   # CLKACT bits set
        src = {v[0]: v[1] for v in _ZYNQ_FCLK_SRC.values()}
        for i, clk in enumerate(clocks.pl):
            regs[SLCR_FPGA_CLK_CTRL[i]] = (clk.div1 << 20) | (clk.div0 << 8) | (src[clk.source] << 4)
        return {"SLCR": regs}, notes
    crl = {CRL_PLL[n]: (fbdivs[n] << 8) | (int(clocks.plls[n][1]) << 16) for n in CRL_PLL}
    crf = {CRF_PLL[n]: (fbdivs[n] << 8) | (int(clocks.plls[n][1]) << 16) for n in CRF_PLL}
    src = {v[0]: v[1] for v in _ZU_PL_SRC.values()}
    for i, clk in enumerate(clocks.pl):
        crl[CRL_PL_REF_CTRL[i]] = ((int(clk.enabled) << 24) | (clk.div1 << 16) | (clk.div0 << 8)
                                   | src[clk.source])
    cpu_src = {v[0]: v[1] for v in _ZU_CPU_SRC.values()}[clocks.cpu[0]]
    crf[CRF_ACPU_CTRL] = (3 << 24) | (clocks.cpu[1] << 8) | cpu_src        # CLKACT_FULL, CLKACT_HALF
    return {"CRL_APB": crl, "CRF_APB": crf}, notes


_PS_MODTYPES = {"processing_system7": "zynq7", "zynq_ultra_ps_e": "zynqmp"}


def read_hwh(path):
    """:func:`from_parameters` on the processing system of the ``.hwh`` at ``path``.

    Raises
    ------
    ValueError
        The file has no (or more than one) Zynq-7000 / Zynq UltraScale+ processing system, or
        its clock settings cannot be read (see :func:`from_parameters`).
    """
    import xml.etree.ElementTree as ET
    root = ET.parse(path).getroot()
    mods = [m for m in root.iter("MODULE") if m.get("MODTYPE") in _PS_MODTYPES]
    if len(mods) != 1:
        raise ValueError(f"{printable(path)}: {len(mods)} processing systems (processing_system7 or zynq_ultra_ps_e); "
                         f"expected one")
    params = {p.get("NAME"): p.get("VALUE") for p in mods[0].iter("PARAMETER")}
    return from_parameters(params, _PS_MODTYPES[mods[0].get("MODTYPE")])


def boot_mismatch(design, booted):
    """How the PL clocks of ``design`` come out on a board that booted with ``booted``'s PLLs
    (the PLLs are the boot firmware's; pynq 3.x programs the design's divisors).

    Returns
    -------
    list of str
        One sentence per enabled PL clock whose rate differs by more than 0.01 %.
    """
    out = []
    if design.family != booted.family:
        return [f"the design is for a {design.family} PS, the board booted a {booted.family} one"]
    for i, clk in enumerate(design.pl):
        if not clk.enabled:
            continue
        want, got = design.pl_mhz(i), booted.pll_mhz(clk.source) / (clk.div0 * clk.div1)
        if abs(got - want) > 1e-4 * want:
            label = clk.source if clk.source.endswith("PLL") else f"{clk.source} PLL"
            out.append(f"PL clock {i}: the design's {label} is {design.pll_mhz(clk.source):.3f} MHz but the "
                       f"booted board's is {booted.pll_mhz(clk.source):.3f} MHz, so the design's divisors "
                       f"{clk.div0} x {clk.div1} (what pynq 3.x programs) give {got:.3f} MHz, not {want:.3f}")
    return out
