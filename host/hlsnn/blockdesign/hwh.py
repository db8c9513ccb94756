"""A hardware handoff (``.hwh``) for an overlay, written without Vivado.

:func:`render_hwh` describes exactly the block design ``hls/tcl/bd.tcl.j2`` creates for a
config, in the XML dialect Vivado writes to ``<bd>.gen/sources_1/bd/<bd>/hw_handoff/<bd>.hwh``
and PYNQ 4.0 reads through ``pynqmetadata``: the processing system ``ps``, the AXI DMA ``dma``
(simple mode) and the kernel ``<name>`` (VLNV ``hlsnn.org:hls:<name>:1.0``), their
parameters, the fixed control addresses, the stream links ``dma/M_AXIS_MM2S -> <name>/in_r``
and ``<name>/out_r -> dma/S_AXIS_S2MM``, the kernel's s_axilite register map and the PL clock.
The cells ``apply_bd_automation`` adds (the control interconnect ``ps_axi_periph``, the memory
SmartConnect ``axi_smc`` and the reset block ``rst_ps_<MHz>M``) are included too, so the
AXI-Lite path has the shape of a real design (PS master -> interconnect -> slaves); their
names follow Vivado's convention and nothing should depend on them.

Host code finds everything by the names bd.tcl fixes (``dma``, ``<name>``, the VLNVs, the
addresses), so the ``.hwh`` of a real Vivado run drops in unchanged.

The network kernel's design (its ``m_axi`` ports on the HP port, no DMA) is
:mod:`hlsnn.network.hwh`, built from the same parts (:func:`_base`, :func:`_intc`,
:func:`_smc`, :func:`_rst`, :func:`_document`).

The board presets of the PS clocks are in :mod:`hlsnn.blockdesign.ps_presets`; helpers that read any
``.hwh`` (this one or Vivado's) the way pynq does are in :mod:`hlsnn.blockdesign.hwh_read`.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

from ..version import __version__
from ..engines import ENGINES
from ..paths import HLS_DIR
from .. import regmap
from .design import bd_context
from .ps_presets import io_pll_mhz, pl_divisors, pll_mhz, ps_clocks

DMA_VLNV = "xilinx.com:ip:axi_dma:7.1"
PS_VLNV = {"zynq7": "xilinx.com:ip:processing_system7:5.5", "zynqmp": "xilinx.com:ip:zynq_ultra_ps_e:3.5"}
INTC_VLNV = "xilinx.com:ip:axi_interconnect:2.1"
SMC_VLNV = "xilinx.com:ip:smartconnect:1.0"
RST_VLNV = "xilinx.com:ip:proc_sys_reset:5.0"
AXIMM = "xilinx.com:interface:aximm:1.0"
AXIS = "xilinx.com:interface:axis:1.0"
IN_STREAM, OUT_STREAM, CONTROL = "in_r", "out_r", "s_axi_control"
CONTROL_RANGE = 0x10000          # bd.tcl: -range 64K for both control windows
INSTANCE_STRIDE = 0x20000        # from one kernel instance's control windows to the next one's

# ---------------------------------------------------------------------------------------------
# the kernel's register map

def kernel_arguments(cfg, names="kernel"):
    """The kernel's s_axilite scalar arguments in declaration order, as
    ``[(protocol_name, register_name, is_output), ...]``.

    ``protocol_name`` is the engine's ``REGS_IN``/``REGS_OUT`` entry. ``register_name`` is the
    name Vitis HLS gives the register: the C argument of the kernel template's
    ``#pragma HLS INTERFACE s_axilite port = ...`` (e.g. ``k_in`` for the protocol's ``k``)
    with ``names="kernel"``, or the protocol name with ``names="protocol"``."""
    eng = ENGINES[cfg.engine]
    proto = [(n, False) for n in eng.protocol.REGS_IN] + [(n, True) for n in eng.protocol.REGS_OUT]
    if names == "protocol":
        return [(n, n, out) for n, out in proto]
    if names != "kernel":
        raise ValueError(f"names must be 'kernel' or 'protocol', not {names!r}")
    src = HLS_DIR / "engines" / cfg.engine / "kernel.cpp.j2"
    if not src.is_file():                      # an installed wheel without the templates
        return [(n, n, out) for n, out in proto]
    ports = regmap.s_axilite_ports(src.read_text())
    if len(ports) != len(proto):
        raise ValueError(f"{src}: {len(ports)} s_axilite arguments ({', '.join(ports)}) but the {cfg.engine} protocol "
                         f"has {len(proto)} registers ({', '.join(n for n, _ in proto)})")
    return [(n, p, out) for (n, out), p in zip(proto, ports)]


def kernel_registers(cfg, names="kernel"):
    """The kernel's registers as Vitis HLS lays them out (ap_ctrl_hs, 32-bit scalars; the rule
    is :func:`hlsnn.regmap.layout`): ``[(name, offset, access, description, fields)]``
    with ``fields`` a list of ``(name, bit_offset, bit_width, access, description)``. CTRL
    0x00, GIER 0x04, IP_IER 0x08, IP_ISR 0x0C, then argument *i* at ``0x10 + 8*i`` (an output's
    ``<arg>_ctrl`` with its ``<arg>_ap_vld`` bit at +4). Offsets equal
    :func:`hlsnn.build.regmap.predicted_register_map`."""
    return regmap.layout([(reg, 32, out) for _, reg, out in kernel_arguments(cfg, names)])[0]


# ---------------------------------------------------------------------------------------------
# clocks, part, addresses

def _fmt_mhz(v):
    return f"{v:.6f}"


def _fmt_req(v):
    return str(int(v)) if float(v).is_integer() else str(v)


def split_part(part):
    """``xc7z020clg400-1`` -> ``("7z020", "clg400", "-1")``, ``xczu7ev-ffvc1156-2-e`` ->
    ``("xczu7ev", "ffvc1156", "-2")``: SYSTEMINFO's DEVICE, PACKAGE and SPEEDGRADE (Vivado drops
    the ``xc`` of 7-series devices and keeps it for UltraScale+)."""
    chunks = part.split("-")
    m = re.fullmatch(r"(?P<dev>[A-Za-z0-9]+?)(?P<pkg>[A-Za-z]{3,4}\d{3,4})", chunks[0])
    if m:                                         # 7-series: device and package run together
        dev, pkg, rest = m.group("dev"), m.group("pkg"), chunks[1:]
    else:                                         # UltraScale+: device-package-speed-temperature
        dev, pkg, rest = chunks[0], (chunks[1] if len(chunks) > 1 else ""), chunks[2:]
    dev, pkg = dev.lower(), pkg.lower()
    if dev.startswith("xc7"):
        dev = dev[2:]
    return dev, pkg, ("-" + rest[0]) if rest else ""


def _hex(v, digits=8):
    return f"0x{v:0{digits}X}"


# ---------------------------------------------------------------------------------------------
# an in-memory model of the MODULES, written out as Vivado's XML

M, S = True, False      # signal driven by the master (True) or by the slave (False)


def _axi(addr, data, *, full=True, read=True, write=True, id_w=0, user_w=0, axi3=False, strb=True, prot=True,
         qos=True, lock=True):
    """Logical AXI signals ``[(LOGICAL, driven_by_master, width)]``."""
    def address(c):                 # the write (AW) or read (AR) address channel
        ch = [(f"{c}ID", M, id_w)] if full and id_w else []
        ch.append((f"{c}ADDR", M, addr))
        if full:
            ch += [(f"{c}LEN", M, 4 if axi3 else 8), (f"{c}SIZE", M, 3), (f"{c}BURST", M, 2)]
            ch += [(f"{c}LOCK", M, 2 if axi3 else 1)] if lock else []
            ch.append((f"{c}CACHE", M, 4))
        ch += [(f"{c}PROT", M, 3)] if prot else []
        ch += [(f"{c}QOS", M, 4)] if full and qos else []
        ch += [(f"{c}USER", M, user_w)] if full and user_w else []
        return ch + [(f"{c}VALID", M, 1), (f"{c}READY", S, 1)]

    sig = []
    if write:
        sig += address("AW")
        sig += [("WID", M, id_w)] if full and axi3 and id_w else []
        sig.append(("WDATA", M, data))
        sig += [("WSTRB", M, data // 8)] if strb else []
        sig += [("WLAST", M, 1)] if full else []
        sig += [("WVALID", M, 1), ("WREADY", S, 1)]
        sig += [("BID", S, id_w)] if full and id_w else []
        sig += [("BRESP", S, 2), ("BVALID", S, 1), ("BREADY", M, 1)]
    if read:
        sig += address("AR")
        sig += [("RID", S, id_w)] if full and id_w else []
        sig += [("RDATA", S, data), ("RRESP", S, 2)]
        sig += [("RLAST", S, 1)] if full else []
        sig += [("RVALID", S, 1), ("RREADY", M, 1)]
    return sig


def _axis(data, *, strb=False):
    sig = [("TDATA", M, data), ("TKEEP", M, data // 8)]
    sig += [("TSTRB", M, data // 8)] if strb else []
    return sig + [("TLAST", M, 1), ("TVALID", M, 1), ("TREADY", S, 1)]


class _Module:
    def __init__(self, instance, vlnv, *, modtype, modclass="PERIPHERAL", iptype="PERIPHERAL", corerevision="0",
                 is_pl=True):
        self.instance, self.vlnv, self.modtype = instance, vlnv, modtype
        self.attrs = {"COREREVISION": corerevision, "FULLNAME": f"/{instance}", "HWVERSION": vlnv.rsplit(":", 1)[1],
                      "INSTANCE": instance, "IPTYPE": iptype, "IS_ENABLE": "1", "MODCLASS": modclass,
                      "MODTYPE": modtype, "VLNV": vlnv}
        if not is_pl:
            self.attrs["IS_PL"] = "FALSE"
            del self.attrs["MODCLASS"]
        self.params = {}
        self.ports = {}            # physical name -> attributes + connections
        self.busifs = []
        self.memranges = []
        self.addrblocks = []
        self.documents = []

    def param(self, name, value):
        self.params[name] = str(value)

    def port(self, name, out, width=1, sigis="undef", **extra):
        if name not in self.ports:
            attrs = {"DIR": "O" if out else "I", "NAME": name, "SIGIS": sigis}
            if width > 1 or extra.pop("vector", False):
                attrs.update(LEFT=str(width - 1), RIGHT="0")
            attrs.update({k: str(v) for k, v in extra.items()})
            self.ports[name] = {"attrs": attrs, "cons": []}
        return self.ports[name]

    def busif(self, name, btype, vlnv, signals, physical, params, *, master, datawidth=None):
        """Add a bus interface and its physical ports; ``signals`` from :func:`_axi`/:func:`_axis`."""
        maps = []
        for logical, by_master, width in signals:
            phys = physical(logical)
            self.port(phys, out=(by_master == master), width=width)
            maps.append((logical, phys))
        bi = {"NAME": name, "TYPE": btype, "VLNV": vlnv, "BUSNAME": "__NOC__", "params": params,
              "maps": maps,
              "signals": {lg: (phys, by_master, w) for (lg, by_master, w), (_, phys) in zip(signals, maps)}}
        if datawidth is not None:
            bi["DATAWIDTH"] = str(datawidth)
        self.busifs.append(bi)
        return bi

    def intf(self, name):
        return next(b for b in self.busifs if b["NAME"] == name)

    def xml(self, parent):
        mod = ET.SubElement(parent, "MODULE", dict(sorted(self.attrs.items())))
        if self.documents:
            docs = ET.SubElement(mod, "DOCUMENTS")
            for d in self.documents:
                ET.SubElement(docs, "DOCUMENT", SOURCE=d)
        if self.addrblocks:
            abs_ = ET.SubElement(mod, "ADDRESSBLOCKS")
            for ab in self.addrblocks:
                _addrblock_xml(abs_, **ab)
        params = ET.SubElement(mod, "PARAMETERS")
        for k, v in self.params.items():
            ET.SubElement(params, "PARAMETER", NAME=k, VALUE=v)
        ports = ET.SubElement(mod, "PORTS")
        for p in self.ports.values():
            pe = ET.SubElement(ports, "PORT", dict(sorted(p["attrs"].items())))
            if p["cons"]:
                cons = ET.SubElement(pe, "CONNECTIONS")
                for inst, port in p["cons"]:
                    ET.SubElement(cons, "CONNECTION", INSTANCE=inst, PORT=port)
        bis = ET.SubElement(mod, "BUSINTERFACES")
        for b in self.busifs:
            attrs = {k: b[k] for k in ("BUSNAME", "DATAWIDTH", "NAME", "TYPE", "VLNV") if k in b}
            be = ET.SubElement(bis, "BUSINTERFACE", attrs)
            for k, v in b["params"].items():
                ET.SubElement(be, "PARAMETER", NAME=k, VALUE=str(v))
            pms = ET.SubElement(be, "PORTMAPS")
            for logical, phys in b["maps"]:
                ET.SubElement(pms, "PORTMAP", LOGICAL=logical, PHYSICAL=phys)
        if self.memranges:
            mm = ET.SubElement(mod, "MEMORYMAP")
            for r in self.memranges:
                ET.SubElement(mm, "MEMRANGE", r)
            per = ET.SubElement(mod, "PERIPHERALS")
            for inst in dict.fromkeys(r["INSTANCE"] for r in self.memranges):
                ET.SubElement(per, "PERIPHERAL", INSTANCE=inst)
        return mod


def _addrblock_xml(parent, interface, name, range_, registers):
    ab = ET.SubElement(parent, "ADDRESSBLOCK", ACCESS="read-write", INTERFACE=interface, NAME=name,
                       RANGE=str(range_), USAGE="register")
    regs = ET.SubElement(ab, "REGISTERS")
    for rname, off, access, desc, fields, *rest in registers:
        enabled = rest[0] if rest else True
        r = ET.SubElement(regs, "REGISTER", NAME=rname)
        for k, v in (("DESCRIPTION", desc), ("ADDRESS_OFFSET", str(off)), ("SIZE", "32"), ("ACCESS", access),
                     ("IS_ENABLED", "true" if enabled else "false"), ("RESET_VALUE", "0")):
            ET.SubElement(r, "PROPERTY", NAME=k, VALUE=v)
        fe = ET.SubElement(r, "FIELDS")
        for fname, bit, width, faccess, fdesc in fields:
            f = ET.SubElement(fe, "FIELD", NAME=fname)
            for k, v in (("DESCRIPTION", fdesc), ("ADDRESS_OFFSET", str(bit)), ("ACCESS", faccess),
                         ("MODIFIED_READ_VALUES", ""), ("WRITE_CONSTRAINT", "0"), ("READ_ACTION", ""),
                         ("BIT_OFFSET", str(bit)), ("BIT_WIDTH", str(width))):
                ET.SubElement(f, "PROPERTY", NAME=k, VALUE=v)


def _net(driver, driver_port, sinks, signame=None):
    """A scalar net: ``driver.driver_port`` -> each ``(module, port)`` of ``sinks``."""
    name = signame or f"{driver.instance}_{driver_port}"
    d = driver.ports[driver_port]
    d["attrs"]["SIGNAME"] = name
    for mod, port in sinks:
        p = mod.ports[port]
        p["attrs"]["SIGNAME"] = name
        p["cons"].append((driver.instance, driver_port))
        d["cons"].append((mod.instance, port))


def _link(master, m_intf, slave, s_intf):
    """An interface net master/m_intf -> slave/s_intf: every logical signal both ends have."""
    mb, sb = master.intf(m_intf), slave.intf(s_intf)
    busname = f"{master.instance}_{m_intf}"
    mb["BUSNAME"] = sb["BUSNAME"] = busname
    for logical, (mphys, by_master, _) in mb["signals"].items():
        if logical not in sb["signals"]:
            continue
        sphys = sb["signals"][logical][0]
        drv, drv_port, snk, snk_port = (master, mphys, slave, sphys) if by_master else (slave, sphys, master, mphys)
        _net(drv, drv_port, [(snk, snk_port)])


def _axi_params(*, protocol, data, addr, id_w=0, mode="READ_WRITE", freq_hz, clk_domain, max_burst=1, **has):
    p = {"DATA_WIDTH": data, "PROTOCOL": protocol, "FREQ_HZ": freq_hz, "ID_WIDTH": id_w, "ADDR_WIDTH": addr,
         "AWUSER_WIDTH": has.pop("awuser", 0), "ARUSER_WIDTH": has.pop("aruser", 0), "WUSER_WIDTH": 0,
         "RUSER_WIDTH": 0, "BUSER_WIDTH": 0, "READ_WRITE_MODE": mode}
    for k in ("burst", "lock", "prot", "cache", "qos", "region", "wstrb", "bresp", "rresp"):
        p[f"HAS_{k.upper()}"] = int(has.get(k, 0))
    p.update({"SUPPORTS_NARROW_BURST": 0, "NUM_READ_OUTSTANDING": 2, "NUM_WRITE_OUTSTANDING": 2,
              "MAX_BURST_LENGTH": max_burst, "PHASE": "0.000", "CLK_DOMAIN": clk_domain, "NUM_READ_THREADS": 1,
              "NUM_WRITE_THREADS": 1, "RUSER_BITS_PER_BYTE": 0, "WUSER_BITS_PER_BYTE": 0, "INSERT_VIP": 0})
    return p


def _axis_params(data, *, strb, freq_hz, clk_domain):
    return {"TDATA_NUM_BYTES": data // 8, "TDEST_WIDTH": 0, "TID_WIDTH": 0, "TUSER_WIDTH": 0, "HAS_TREADY": 1,
            "HAS_TSTRB": int(strb), "HAS_TKEEP": 1, "HAS_TLAST": 1, "FREQ_HZ": freq_hz, "PHASE": "0.000",
            "CLK_DOMAIN": clk_domain, "LAYERED_METADATA": "undef", "INSERT_VIP": 0}


# ---------------------------------------------------------------------------------------------
# the design

def _base(cfg):
    """What every block design of ``cfg`` shares: the board's figures, the PL clock, the
    processing system ``ps`` with its GP master and HP slave port; a namespace of them."""
    ctx = bd_context(cfg)
    b = cfg.board
    name, bd = cfg.name, f"{cfg.name}_bd"
    family = b.ps
    zynq7 = family == "zynq7"
    sb, hp_w, aw = int(ctx["stream_bits"]), int(ctx["hp_width"]), int(ctx["address_bits"])
    dma_base, kernel_base = int(ctx["dma_base"], 16), int(ctx["kernel_base"], 16)
    req = float(cfg.clock_mhz)
    clocks = ps_clocks(b)
    d0, d1, act = pl_divisors(family, io_pll_mhz(b), req)
    freq_hz = str(int(round(act * 1e6)))
    hp_port = ctx["hp_port"]
    full = {"burst": 1, "lock": 1, "prot": 1, "cache": 1, "qos": 1, "wstrb": 1, "bresp": 1, "rresp": 1}

    def ap(protocol, data, addr, **kw):
        return _axi_params(protocol=protocol, data=data, addr=addr, freq_hz=freq_hz, clk_domain=clk_domain, **kw)

    def sp(strb):
        return _axis_params(sb, strb=strb, freq_hz=freq_hz, clk_domain=clk_domain)

    ps = _Module("ps", PS_VLNV[family], modtype="processing_system7" if zynq7 else "zynq_ultra_ps_e",
                 corerevision="6" if zynq7 else "5", is_pl=False)
    if zynq7:
        n_hp = int(re.fullmatch(r"S_AXI_HP(\d)", hp_port).group(1))
        clk, rstn, master = "FCLK_CLK0", "FCLK_RESET0_N", "M_AXI_GP0"
        master_aclk, hp_aclk = "M_AXI_GP0_ACLK", f"S_AXI_HP{n_hp}_ACLK"
        clk_domain = f"{bd}_ps_0_FCLK_CLK0"
        m_sigs = _axi(32, 32, id_w=12, axi3=True)
        hp_sigs = _axi(32, hp_w, id_w=6, axi3=True)
        m_phys = lambda lg: f"M_AXI_GP0_{lg}"                          # noqa: E731
        hp_phys = lambda lg: f"{hp_port}_{lg}"                         # noqa: E731
        m_proto, hp_proto, m_addr, hp_addr, m_data, m_id, hp_id = "AXI3", "AXI3", 32, 32, 32, 12, 6
        ps_params = [("C_S_AXI_HP0_DATA_WIDTH", hp_w if n_hp == 0 else 64), ("C_PS7_SI_REV", "PRODUCTION"),
                     ("C_FCLK_CLK0_BUF", "TRUE"), ("PCW_FCLK_CLK0_BUF", "TRUE")]
        ps_params += [(f"PCW_FPGA{i}_PERIPHERAL_FREQMHZ", _fmt_req(req) if i == 0 else "50") for i in range(4)]
        ps_params += [(f"PCW_ACT_FPGA{i}_PERIPHERAL_FREQMHZ", _fmt_mhz(act) if i == 0 else "10.000000")
                      for i in range(4)]
        ps_params += [("PCW_CLK0_FREQ", freq_hz), ("PCW_CLK1_FREQ", "10000000"), ("PCW_CLK2_FREQ", "10000000"),
                      ("PCW_CLK3_FREQ", "10000000")]
        ps_params += [(f"PCW_FCLK{i}_PERIPHERAL_DIVISOR{j}", (d0, d1)[j] if i == 0 else 1)
                      for j in range(2) for i in range(4)]
        ps_params += [("PCW_CRYSTAL_PERIPHERAL_FREQMHZ", clocks["ref"]),
                      ("PCW_IO_IO_PLL_FREQMHZ", f"{pll_mhz(clocks, 'IO'):.3f}")]
        ps_params += [(f"PCW_{pll}PLL_CTRL_FBDIV", fbdiv) for pll, (fbdiv, _) in clocks["plls"].items()]
        cpu_src, cpu_div = clocks["cpu"]
        ps_params += [("PCW_CPU_PERIPHERAL_CLKSRC", cpu_src), ("PCW_CPU_PERIPHERAL_DIVISOR0", cpu_div),
                      ("PCW_ACT_APU_PERIPHERAL_FREQMHZ", _fmt_mhz(pll_mhz(clocks, cpu_src.split()[0]) / cpu_div))]
        ps_params += [(f"PCW_FCLK{i}_PERIPHERAL_CLKSRC", "IO PLL") for i in range(4)]
        ps_params += [(f"PCW_FPGA_FCLK{i}_ENABLE", int(i == 0)) for i in range(4)]
        ps_params += [("PCW_EN_CLK0_PORT", 1), ("PCW_EN_RST0_PORT", 1), ("PCW_USE_M_AXI_GP0", 1),
                      (f"PCW_USE_S_AXI_HP{n_hp}", 1), (f"PCW_S_AXI_HP{n_hp}_DATA_WIDTH", hp_w),
                      ("PCW_USE_FABRIC_INTERRUPT", 0)]
        ps_params += list(ctx["ps_config"])
        ps_params += [("Component_Name", f"{bd}_ps_0"), ("EDK_IPTYPE", "PERIPHERAL"),
                      ("C_BASEADDR", "0x00000000"), ("C_HIGHADDR", "0x1FFFFFFF")]
        ddr = [(f"HP{n_hp}_DDR_LOWOCM", 0x0, 0x1FFFFFFF, "MEMORY")]     # PYNQ-Z2: 512 MB
    else:
        n_hp = int(re.fullmatch(r"S_AXI_HP(\d)_FPD", hp_port).group(1))
        gp = 2 + n_hp                                                  # HPn_FPD is S_AXI_GP(2+n)
        clk, rstn, master = "pl_clk0", "pl_resetn0", "M_AXI_HPM0_FPD"
        master_aclk, hp_aclk = "maxihpm0_fpd_aclk", f"saxihp{n_hp}_fpd_aclk"
        clk_domain = f"{bd}_ps_0_pl_clk0"
        m_sigs = _axi(40, 128, id_w=16, user_w=16)
        hp_sigs = _axi(49, hp_w, id_w=6, user_w=1)
        m_phys = lambda lg: f"maxigp0_{lg.lower()}"                     # noqa: E731
        hp_phys = lambda lg: f"saxigp{gp}_{lg.lower()}"                 # noqa: E731
        m_proto, hp_proto, m_addr, hp_addr, m_data, m_id, hp_id = "AXI4", "AXI4", 40, 49, 128, 16, 6
        o0, o1, o_act = pl_divisors(family, io_pll_mhz(b), 100.0)          # PL1..3: disabled, at 100
        ps_params = [(f"PSU__CRL_APB__PL{i}_REF_CTRL__FREQMHZ", _fmt_req(req) if i == 0 else "100") for i in range(4)]
        ps_params += [(f"PSU__CRL_APB__PL{i}_REF_CTRL__ACT_FREQMHZ", _fmt_mhz(act if i == 0 else o_act))
                      for i in range(4)]
        ps_params += [(f"PSU__CRL_APB__PL{i}_REF_CTRL__DIVISOR{j}", (d0, d1)[j] if i == 0 else (o0, o1)[j])
                      for i in range(4) for j in range(2)]
        ps_params += [(f"PSU__CRL_APB__PL{i}_REF_CTRL__SRCSEL", "IOPLL") for i in range(4)]
        ps_params += [(f"PSU__FPGA_PL{i}_ENABLE", int(i == 0)) for i in range(4)]
        ps_params += [("PSU__PSS_REF_CLK__FREQMHZ", clocks["ref"])]
        for pll, (fbdiv, div2) in clocks["plls"].items():
            block = "CRL_APB" if pll in ("IOPLL", "RPLL") else "CRF_APB"
            ps_params += [(f"PSU__{block}__{pll}_CTRL__FBDIV", fbdiv), (f"PSU__{block}__{pll}_CTRL__DIV2", div2),
                          (f"PSU__{block}__{pll}_CTRL__SRCSEL", "PSS_REF_CLK")]
        cpu_src, cpu_div = clocks["cpu"]
        ps_params += [("PSU__CRF_APB__ACPU_CTRL__SRCSEL", cpu_src), ("PSU__CRF_APB__ACPU_CTRL__DIVISOR0", cpu_div),
                      ("PSU__CRF_APB__ACPU_CTRL__ACT_FREQMHZ", _fmt_mhz(pll_mhz(clocks, cpu_src) / cpu_div))]
        ps_params += [("PSU__USE__M_AXI_GP0", 1), ("PSU__USE__M_AXI_GP1", 0), ("PSU__MAXIGP0__DATA_WIDTH", 128),
                      (f"PSU__USE__S_AXI_GP{gp}", 1), (f"PSU__SAXIGP{gp}__DATA_WIDTH", hp_w),
                      ("PSU__USE__IRQ0", 0)]
        ps_params += list(ctx["ps_config"])
        ps_params += [("Component_Name", f"{bd}_ps_0"), ("EDK_IPTYPE", "PERIPHERAL")]
        ddr = [(f"HP{n_hp}_DDR_LOW", 0x0, 0x7FFFFFFF, "MEMORY"),
               (f"HP{n_hp}_LPS_OCM", 0xFF000000, 0xFFFFFFFF, "REGISTER")]
        if aw > 32:
            ddr.insert(1, (f"HP{n_hp}_DDR_HIGH", 0x800000000, 0x87FFFFFFF, "MEMORY"))
    for k, v in ps_params:
        ps.param(k, v)
    ps.port(clk, out=True, sigis="clk", CLKFREQUENCY=freq_hz)
    ps.port(rstn, out=True, sigis="rst")
    ps.port(master_aclk, out=False, sigis="clk", CLKFREQUENCY=freq_hz)
    ps.port(hp_aclk, out=False, sigis="clk", CLKFREQUENCY=freq_hz)
    m_user = {} if zynq7 else {"awuser": 16, "aruser": 16}
    hp_user = {} if zynq7 else {"awuser": 1, "aruser": 1}
    ps.busif(master, "MASTER", AXIMM, m_sigs, m_phys,
             ap(m_proto, m_data, m_addr, id_w=m_id, max_burst=16, **full, **m_user), master=True, datawidth=m_data)
    ps.busif(hp_port, "SLAVE", AXIMM, hp_sigs, hp_phys,
             ap(hp_proto, hp_w, hp_addr, id_w=hp_id, max_burst=16, **full, **hp_user), master=False, datawidth=hp_w)
    return SimpleNamespace(**locals())


def _intc(d, n_mi):
    """The control interconnect ``ps_axi_periph`` (what apply_bd_automation adds): the PS's GP
    master to ``n_mi`` AXI-Lite slaves ``M00_AXI``, ``M01_AXI``, ..."""
    mis = [f"M{i:02d}_AXI" for i in range(n_mi)]
    intc = _Module("ps_axi_periph", INTC_VLNV, modtype="axi_interconnect", modclass="BUS", iptype="BUS",
                   corerevision="21")
    for kk, v in (("NUM_SI", 1), ("NUM_MI", n_mi), ("STRATEGY", 0), ("ENABLE_ADVANCED_OPTIONS", 0),
                  ("Component_Name", f"{d.bd}_ps_axi_periph_0"), ("EDK_IPTYPE", "BUS")):
        intc.param(kk, v)
    for p in ["ACLK", "S00_ACLK"] + [f"{mi[:3]}_ACLK" for mi in mis]:
        intc.port(p, out=False, sigis="clk", CLKFREQUENCY=d.freq_hz)
    for p in ["ARESETN", "S00_ARESETN"] + [f"{mi[:3]}_ARESETN" for mi in mis]:
        intc.port(p, out=False, sigis="rst")
    intc.busif("S00_AXI", "SLAVE", AXIMM, d.m_sigs, lambda lg: f"S00_AXI_{lg.lower()}",
               d.ap(d.m_proto, d.m_data, d.m_addr, id_w=d.m_id, max_burst=16, **d.full), master=False,
               datawidth=d.m_data)
    periph_sigs = _axi(d.m_addr, 32, full=False)
    for mi in mis:
        intc.busif(mi, "MASTER", AXIMM, periph_sigs, lambda lg, mi=mi: f"{mi}_{lg.lower()}",
                   d.ap("AXI4LITE", 32, d.m_addr, prot=1, wstrb=1, bresp=1, rresp=1), master=True, datawidth=32)
    return intc


def _smc(d, slaves):
    """The memory SmartConnect ``axi_smc``: ``slaves`` ``[(signals, params, width)]`` (the
    masters of the PL, in order ``S00_AXI``, ``S01_AXI``, ...) to the PS's HP port."""
    smc = _Module("axi_smc", SMC_VLNV, modtype="smartconnect", modclass="BUS", iptype="BUS", corerevision="10")
    for kk, v in (("NUM_SI", len(slaves)), ("NUM_MI", 1), ("NUM_CLKS", 1), ("HAS_ARESETN", 1),
                  ("Component_Name", f"{d.bd}_axi_smc_0"), ("EDK_IPTYPE", "BUS")):
        smc.param(kk, v)
    smc.port("aclk", out=False, sigis="clk", CLKFREQUENCY=d.freq_hz)
    smc.port("aresetn", out=False, sigis="rst")
    for i, (sigs, par, width) in enumerate(slaves):
        si = f"S{i:02d}_AXI"
        smc.busif(si, "SLAVE", AXIMM, sigs, lambda lg, si=si: f"{si}_{lg.lower()}", par, master=False,
                  datawidth=width)
    smc.busif("M00_AXI", "MASTER", AXIMM, d.hp_sigs, lambda lg: f"M00_AXI_{lg.lower()}",
              d.ap(d.hp_proto, d.hp_w, d.hp_addr, id_w=d.hp_id, max_burst=16, **d.full), master=True, datawidth=d.hp_w)
    return smc


def _rst(d):
    """The reset block ``rst_ps_<MHz>M``."""
    rst = _Module(f"rst_ps_{int(d.act)}M", RST_VLNV, modtype="proc_sys_reset", corerevision="13")
    for kk, v in (("C_FAMILY", "zynq" if d.zynq7 else "zynquplus"), ("C_EXT_RST_WIDTH", 4), ("C_AUX_RST_WIDTH", 4),
                  ("C_EXT_RESET_HIGH", 0), ("C_AUX_RESET_HIGH", 0), ("C_NUM_BUS_RST", 1), ("C_NUM_PERP_RST", 1),
                  ("C_NUM_INTERCONNECT_ARESETN", 1), ("C_NUM_PERP_ARESETN", 1),
                  ("Component_Name", f"{d.bd}_rst_ps_{int(d.act)}M_0"), ("EDK_IPTYPE", "PERIPHERAL")):
        rst.param(kk, v)
    rst.port("slowest_sync_clk", out=False, sigis="clk", CLKFREQUENCY=d.freq_hz)
    rst.port("ext_reset_in", out=False, sigis="rst")
    rst.port("aux_reset_in", out=False, sigis="rst")
    rst.port("mb_debug_sys_rst", out=False, sigis="rst")
    rst.port("dcm_locked", out=False)
    rst.port("mb_reset", out=True, sigis="rst")
    rst.port("bus_struct_reset", out=True, sigis="rst", vector=True)
    rst.port("peripheral_reset", out=True, sigis="rst", vector=True)
    rst.port("interconnect_aresetn", out=True, sigis="rst", vector=True)
    rst.port("peripheral_aresetn", out=True, sigis="rst", vector=True)
    return rst


def _document(d, modules, what):
    """The ``EDKSYSTEM`` root of the design of ``modules``; ``what`` says which design (a comment)."""
    root = ET.Element("EDKSYSTEM", EDWVERSION="1.2", TIMESTAMP="Thu Jan  1 00:00:00 1970",
                      VIVADOVERSION=_vivado_version())
    root.append(ET.Comment(f" Generated by hlsnn {__version__} for {d.name} on {d.b.name} "
                           f"(config sha256 {d.cfg.sha[:16]}): {what}, written without Vivado. "))
    dev, pkg, speed = split_part(d.b.part)
    si = {"ARCH": "zynq" if d.zynq7 else "zynquplus", "DEVICE": dev, "NAME": d.bd, "PACKAGE": pkg,
          "SPEEDGRADE": speed}
    if d.b.board_part:
        si["BOARD"] = d.b.board_part
    ET.SubElement(root, "SYSTEMINFO", dict(sorted(si.items())))
    ET.SubElement(root, "EXTERNALPORTS")
    ET.SubElement(root, "EXTERNALINTERFACES")
    mods = ET.SubElement(root, "MODULES")
    for mod in sorted(modules, key=lambda m: m.instance):
        mod.xml(mods)
    return root


def build_design(cfg, names="kernel", instances=1):
    """The block design of ``cfg`` as an ``xml.etree`` root element (``EDKSYSTEM``).

    ``instances``: kernel instances, each with its own AXI DMA (:func:`instance_names`: ``dma``
    and the config's name, then ``dma_1`` and ``<name>_1`` ...), their control windows
    :data:`INSTANCE_STRIDE` apart, every DMA on the one memory SmartConnect."""
    d = _base(cfg)
    return _connect(d, [_instance(d, cfg, names, i) for i in range(instances)])


def instance_names(cfg, i):
    """``(DMA, kernel)`` IP names of kernel instance ``i`` of a block design."""
    return ("dma", cfg.name) if i == 0 else (f"dma_{i}", f"{cfg.name}_{i}")


def _instance(d, cfg, names, i):
    """Kernel instance ``i``: its DMA and kernel modules and their bases and master signals."""
    ctx, name, bd, zynq7, sb, aw = d.ctx, d.name, d.bd, d.zynq7, d.sb, d.aw
    req, freq_hz, ap, sp = d.req, d.freq_hz, d.ap, d.sp
    (dma_base, kernel_base), (dma_name, k_name) = (d.dma_base + i * INSTANCE_STRIDE,
                                                   d.kernel_base + i * INSTANCE_STRIDE), instance_names(cfg, i)

    # --- AXI DMA, simple mode
    dma = _Module(dma_name, DMA_VLNV, modtype="axi_dma", corerevision="21")
    dma.documents.append("http://www.xilinx.com/cgi-bin/docs/ipdoc?c=axi_dma;v=v7_1;d=pg021_axi_dma.pdf")
    up = {"C_S_AXI_LITE_ADDR_WIDTH": 10, "C_S_AXI_LITE_DATA_WIDTH": 32, "C_DLYTMR_RESOLUTION": 125,
          "C_PRMRY_IS_ACLK_ASYNC": 0, "C_ENABLE_MULTI_CHANNEL": 0, "C_NUM_MM2S_CHANNELS": 1, "C_NUM_S2MM_CHANNELS": 1,
          "C_INCLUDE_SG": 0, "C_SG_INCLUDE_STSCNTRL_STRM": 0, "C_SG_USE_STSAPP_LENGTH": 0,
          "C_SG_LENGTH_WIDTH": ctx["dma_length_width"], "C_M_AXI_SG_ADDR_WIDTH": aw, "C_M_AXI_SG_DATA_WIDTH": 32,
          "C_M_AXIS_MM2S_CNTRL_TDATA_WIDTH": 32, "C_S_AXIS_S2MM_STS_TDATA_WIDTH": 32, "C_MICRO_DMA": 0,
          "C_INCLUDE_MM2S": 1, "C_INCLUDE_MM2S_SF": 1, "C_MM2S_BURST_SIZE": 16, "C_M_AXI_MM2S_ADDR_WIDTH": aw,
          "C_M_AXI_MM2S_DATA_WIDTH": sb, "C_M_AXIS_MM2S_TDATA_WIDTH": sb, "C_INCLUDE_MM2S_DRE": 0,
          "C_INCLUDE_S2MM": 1, "C_INCLUDE_S2MM_SF": 1, "C_S2MM_BURST_SIZE": 16, "C_M_AXI_S2MM_ADDR_WIDTH": aw,
          "C_M_AXI_S2MM_DATA_WIDTH": sb, "C_S_AXIS_S2MM_TDATA_WIDTH": sb, "C_INCLUDE_S2MM_DRE": 0,
          "C_INCREASE_THROUGHPUT": 0, "C_FAMILY": "zynq" if zynq7 else "zynquplus"}
    for k, v in up.items():
        dma.param(k, v)
    dma.param("Component_Name", f"{bd}_dma_{i}")
    low = {"c_include_sg": 0, "c_enable_multi_channel": 0, "c_num_mm2s_channels": 1, "c_num_s2mm_channels": 1,
           "c_sg_length_width": ctx["dma_length_width"], "c_dlytmr_resolution": 125, "c_prmry_is_aclk_async": 0,
           "c_sg_include_stscntrl_strm": 0, "c_micro_dma": 0, "c_include_mm2s": 1, "c_m_axi_mm2s_data_width": sb,
           "c_m_axis_mm2s_tdata_width": sb, "c_include_mm2s_dre": 0, "c_include_mm2s_sf": 1, "c_mm2s_burst_size": 16,
           "c_include_s2mm": 1, "c_sg_use_stsapp_length": 0, "c_m_axi_s2mm_data_width": sb,
           "c_s_axis_s2mm_tdata_width": sb, "c_include_s2mm_dre": 0, "c_include_s2mm_sf": 1, "c_s2mm_burst_size": 16,
           "c_addr_width": aw, "c_single_interface": 0, "c_increase_throughput": 0}
    for k, v in low.items():
        dma.param(k, v)
    dma.param("EDK_IPTYPE", "PERIPHERAL")
    dma.param("C_BASEADDR", _hex(dma_base))
    dma.param("C_HIGHADDR", _hex(dma_base + CONTROL_RANGE - 1))
    for p in ("s_axi_lite_aclk", "m_axi_mm2s_aclk", "m_axi_s2mm_aclk"):
        dma.port(p, out=False, sigis="clk", CLKFREQUENCY=freq_hz)
    dma.port("axi_resetn", out=False, sigis="rst")
    lite_sigs = _axi(10, 32, full=False, strb=False, prot=False)
    dma.busif("S_AXI_LITE", "SLAVE", AXIMM, lite_sigs, lambda lg: f"s_axi_lite_{lg.lower()}",
              ap("AXI4LITE", 32, 10, bresp=1, rresp=1), master=False, datawidth=32)
    mm2s_sigs = _axi(aw, sb, write=False, qos=False, lock=False)
    s2mm_sigs = _axi(aw, sb, read=False, qos=False, lock=False)
    mm2s_par = ap("AXI4", sb, aw, mode="READ_ONLY", max_burst=16, burst=1, prot=1, cache=1, rresp=1)
    s2mm_par = ap("AXI4", sb, aw, mode="WRITE_ONLY", max_burst=16, burst=1, prot=1, cache=1, wstrb=1, bresp=1)
    dma.busif("M_AXI_MM2S", "MASTER", AXIMM, mm2s_sigs, lambda lg: f"m_axi_mm2s_{lg.lower()}", mm2s_par,
              master=True, datawidth=sb)
    dma.port("mm2s_prmry_reset_out_n", out=True, sigis="rst")
    dma.busif("M_AXIS_MM2S", "INITIATOR", AXIS, _axis(sb), lambda lg: f"m_axis_mm2s_{lg.lower()}", sp(False),
              master=True)
    dma.busif("M_AXI_S2MM", "MASTER", AXIMM, s2mm_sigs, lambda lg: f"m_axi_s2mm_{lg.lower()}", s2mm_par,
              master=True, datawidth=sb)
    dma.port("s2mm_prmry_reset_out_n", out=True, sigis="rst")
    dma.busif("S_AXIS_S2MM", "TARGET", AXIS, _axis(sb), lambda lg: f"s_axis_s2mm_{lg.lower()}", sp(False),
              master=False)
    dma.port("mm2s_introut", out=True, sigis="INTERRUPT", SENSITIVITY="LEVEL_HIGH")
    dma.port("s2mm_introut", out=True, sigis="INTERRUPT", SENSITIVITY="LEVEL_HIGH")
    wide = aw > 32
    dma_regs = [("MM2S_DMACR", 0x00, "read-write", "MM2S DMA Control Register", []),
                ("MM2S_DMASR", 0x04, "read-write", "MM2S DMA Status Register", []),
                ("MM2S_CURDESC", 0x08, "read-write", "MM2S Current Descriptor Pointer", [], False),
                ("MM2S_TAILDESC", 0x10, "read-write", "MM2S Tail Descriptor Pointer", [], False),
                ("MM2S_SA", 0x18, "read-write", "MM2S Source Address", []),
                ("MM2S_SA_MSB", 0x1C, "read-write", "MM2S Source Address (upper 32 bits)", [], wide),
                ("MM2S_LENGTH", 0x28, "read-write", "MM2S Transfer Length (Bytes)", []),
                ("SG_CTL", 0x2C, "read-write", "Scatter/Gather User and Cache", [], False),
                ("S2MM_DMACR", 0x30, "read-write", "S2MM DMA Control Register", []),
                ("S2MM_DMASR", 0x34, "read-write", "S2MM DMA Status Register", []),
                ("S2MM_CURDESC", 0x38, "read-write", "S2MM Current Descriptor Pointer", [], False),
                ("S2MM_TAILDESC", 0x40, "read-write", "S2MM Tail Descriptor Pointer", [], False),
                ("S2MM_DA", 0x48, "read-write", "S2MM Destination Address", []),
                ("S2MM_DA_MSB", 0x4C, "read-write", "S2MM Destination Address (upper 32 bits)", [], wide),
                ("S2MM_LENGTH", 0x58, "read-write", "S2MM Buffer Length (Bytes)", [])]
    dma.addrblocks.append({"interface": "S_AXI_LITE", "name": "Reg", "range_": 4096, "registers": dma_regs})

    # --- the kernel (Vitis HLS export, ap_ctrl_hs)
    regs = kernel_registers(cfg, names)
    ctrl_aw = max(1, (0x10 + 8 * len(kernel_arguments(cfg, names)) - 1).bit_length())
    k = _Module(k_name, ctx["vlnv"], modtype=name)
    k.addrblocks.append({"interface": CONTROL, "name": "Reg", "range_": CONTROL_RANGE, "registers": regs})
    for kk, v in (("C_S_AXI_CONTROL_ADDR_WIDTH", ctrl_aw), ("C_S_AXI_CONTROL_DATA_WIDTH", 32),
                  ("Component_Name", f"{bd}_{name}_{i}"), ("clk_period", f"{1000.0 / req:g}"), ("machine", 64),
                  ("combinational", 0), ("latency", "undef"), ("II", "x"), ("EDK_IPTYPE", "PERIPHERAL"),
                  ("C_S_AXI_CONTROL_BASEADDR", _hex(kernel_base)),
                  ("C_S_AXI_CONTROL_HIGHADDR", _hex(kernel_base + CONTROL_RANGE - 1))):
        k.param(kk, v)
    ctrl_sigs = _axi(ctrl_aw, 32, full=False, prot=False)
    k.busif(CONTROL, "SLAVE", AXIMM, ctrl_sigs, lambda lg: f"{CONTROL}_{lg}",
            ap("AXI4LITE", 32, ctrl_aw, wstrb=1, bresp=1, rresp=1), master=False, datawidth=32)
    k.port("ap_clk", out=False, sigis="clk", CLKFREQUENCY=freq_hz)
    k.port("ap_rst_n", out=False, sigis="rst")
    k.port("interrupt", out=True, sigis="INTERRUPT", SENSITIVITY="LEVEL_HIGH")
    k.busif(IN_STREAM, "SLAVE", AXIS, _axis(sb, strb=True), lambda lg: f"{IN_STREAM}_{lg}", sp(True), master=False)
    k.busif(OUT_STREAM, "MASTER", AXIS, _axis(sb, strb=True), lambda lg: f"{OUT_STREAM}_{lg}", sp(True), master=True)

    return {"dma": dma, "k": k, "dma_base": dma_base, "kernel_base": kernel_base,
            "masters": [(mm2s_sigs, mm2s_par, sb), (s2mm_sigs, s2mm_par, sb)]}


def _connect(d, pairs):
    """The design of the instances ``pairs`` (:func:`_instance`) with what apply_bd_automation
    adds: control interconnect, memory SmartConnect, reset, and the nets."""
    ps, clk, rstn, master, ddr, hp_port = d.ps, d.clk, d.rstn, d.master, d.ddr, d.hp_port
    n = len(pairs)
    intc = _intc(d, 2 * n)
    smc = _smc(d, [m for p in pairs for m in p["masters"]])
    rst = _rst(d)

    # --- nets
    clocked = [(ps, d.master_aclk), (ps, d.hp_aclk)] + [(p[m], c) for p in pairs for m, c in (
        ("dma", "s_axi_lite_aclk"), ("dma", "m_axi_mm2s_aclk"), ("dma", "m_axi_s2mm_aclk"), ("k", "ap_clk"))]
    clocked += [(intc, "ACLK"), (intc, "S00_ACLK")] + [(intc, f"M{j:02d}_ACLK") for j in range(2 * n)]
    _net(ps, clk, clocked + [(smc, "aclk"), (rst, "slowest_sync_clk")])
    _net(ps, rstn, [(rst, "ext_reset_in")])
    resets = [x for p in pairs for x in ((p["dma"], "axi_resetn"), (p["k"], "ap_rst_n"))]
    resets += [(intc, "S00_ARESETN")] + [(intc, f"M{j:02d}_ARESETN") for j in range(2 * n)]
    _net(rst, "peripheral_aresetn", resets + [(smc, "aresetn")])
    _net(rst, "interconnect_aresetn", [(intc, "ARESETN")])
    _link(ps, master, intc, "S00_AXI")
    for i, p in enumerate(pairs):
        _link(intc, f"M{2 * i:02d}_AXI", p["dma"], "S_AXI_LITE"), _link(intc, f"M{2 * i + 1:02d}_AXI", p["k"], CONTROL)
    for i, p in enumerate(pairs):
        _link(p["dma"], "M_AXI_MM2S", smc, f"S{2 * i:02d}_AXI")
        _link(p["dma"], "M_AXI_S2MM", smc, f"S{2 * i + 1:02d}_AXI")
    _link(smc, "M00_AXI", ps, hp_port)
    for p in pairs:
        _link(p["dma"], "M_AXIS_MM2S", p["k"], IN_STREAM), _link(p["k"], OUT_STREAM, p["dma"], "S_AXIS_S2MM")

    # --- address maps: the PS master sees the control windows; the DMA sees DDR through HPn
    for p in pairs:
        for inst, itf, base, basename in ((p["dma"], "S_AXI_LITE", p["dma_base"], "C_BASEADDR"),
                                          (p["k"], CONTROL, p["kernel_base"], "C_S_AXI_CONTROL_BASEADDR")):
            ps.memranges.append({"ADDRESSBLOCK": "Reg", "BASENAME": basename, "BASEVALUE": _hex(base),
                                 "HIGHNAME": basename.replace("BASEADDR", "HIGHADDR"),
                                 "HIGHVALUE": _hex(base + CONTROL_RANGE - 1), "INSTANCE": inst.instance,
                                 "IS_DATA": "TRUE", "IS_INSTRUCTION": "TRUE", "MASTERBUSINTERFACE": master,
                                 "MEMTYPE": "REGISTER", "SLAVEBUSINTERFACE": itf})
    for p, mi in ((p, mi) for p in pairs for mi in ("M_AXI_MM2S", "M_AXI_S2MM")):
        for block, lo, hi, memtype in ddr:
            p["dma"].memranges.append({"ADDRESSBLOCK": block, "BASENAME": "C_BASEADDR", "BASEVALUE": _hex(lo),
                                       "HIGHNAME": "C_HIGHADDR", "HIGHVALUE": _hex(hi), "INSTANCE": "ps",
                                       "IS_DATA": "TRUE", "IS_INSTRUCTION": "TRUE", "MASTERBUSINTERFACE": mi,
                                       "MEMTYPE": memtype, "SLAVEBUSINTERFACE": hp_port})
    mods = [ps] + [x for p in pairs for x in (p["dma"], p["k"])] + [intc, smc, rst]
    return _document(d, tuple(mods), "the block design of hls/tcl/bd.tcl.j2")


def _vivado_version():
    try:
        from ..codegen import _vitis_version
        return _vitis_version()
    except Exception:  # pragma: no cover
        return "2023.2"


def render_hwh(cfg, path, *, names="kernel", instances=1):
    """Write the ``.hwh`` of ``cfg``'s block design to ``path`` (atomically); return the path.

    ``names``: register names of the kernel's arguments, ``"kernel"`` (what Vitis HLS will
    call them: the C argument names of the kernel source) or ``"protocol"`` (the engine's
    ``REGS_IN``/``REGS_OUT``); the offsets are the same either way."""
    root = build_design(cfg, names, instances)
    ET.indent(root, space="  ")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = b'<?xml version="1.0" encoding="UTF-8" standalone="no" ?>\n' + ET.tostring(root, encoding="utf-8") + b"\n"
    from ..files import write_atomic
    write_atomic(path, data)
    return path


# ---------------------------------------------------------------------------------------------
