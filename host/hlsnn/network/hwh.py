"""The ``.hwh`` of a *network overlay*: the block design of a network kernel
(:mod:`hlsnn.engines.network.kernel`, :mod:`hlsnn.engines.sparse_cluster.network.kernel`), written without Vivado
in the dialect of :mod:`hlsnn.blockdesign.hwh` (the layer kernel's design shares its processing
system, control interconnect, SmartConnect and reset block).

The design: the kernel ``<name>_net`` (VLNV ``hlsnn.org:hls:<name>_net:1.0``, the Vitis HLS
export of the network's top function) with

* its ``s_axilite`` control ``s_axi_control`` on the PS's GP master through the control
  interconnect, at the config's kernel address, with the register map Vitis HLS gives the
  top function (:func:`hlsnn.engines.network.kernel.layout`: the two 64-bit buffer addresses at
  0x10/0x14 and 0x1C/0x20, the batch at 0x28);
* its two ``m_axi`` ports ``m_axi_gmem0`` (the input, read) and ``m_axi_gmem1`` (the
  output, written), AXI4 with 64-bit data and 64-bit addresses, through the SmartConnect to
  the PS's HP port (64 bits on the PYNQ-Z2, 128 on the ZCU104: the SmartConnect converts),
  seeing the DDR the HP port maps.

No AXI DMA and no stream ports: the kernel reads and writes DDR itself.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from .board import net_ip_name, net_masters  # noqa: F401  (re-exported)
from ..blockdesign.hwh import (AXIMM, CONTROL, CONTROL_RANGE, _axi, _base, _document, _hex, _intc, _link, _Module, _net, _rst,
                  _smc)

#: the data and address widths of the network kernels' m_axi ports (``word_t`` is 64 bits;
#: Vitis HLS's m_axi addresses are 64-bit by default)
M_AXI_DATA, M_AXI_ADDR = 64, 64


def net_vlnv(cfg):
    return f"hlsnn.org:hls:{net_ip_name(cfg)}:1.0"


def build_net_design(cfg, engine=None, *, network=""):
    """The network overlay's block design of ``cfg`` (its board, clock and addresses) as an
    ``xml.etree`` root element; ``engine`` names the network kernel's template (default: the
    config's engine), ``network`` the compiled model (a comment)."""
    from ..engines.network.kernel import layout
    d = _base(cfg)
    name = net_ip_name(cfg)
    kernel_base, freq_hz, ps = int(d.ctx["kernel_base"], 16), d.freq_hz, d.ps
    regs, offsets, m_axi = layout(engine or cfg.engine)
    ctrl_aw = max(1, (max(o for offs in offsets.values() for o in offs) + 8 - 1).bit_length())
    k = _Module(name, net_vlnv(cfg), modtype=name)
    k.addrblocks.append({"interface": CONTROL, "name": "Reg", "range_": CONTROL_RANGE, "registers": regs})
    params = [("C_S_AXI_CONTROL_ADDR_WIDTH", ctrl_aw), ("C_S_AXI_CONTROL_DATA_WIDTH", 32)]
    for bundle in m_axi.values():
        up = bundle.upper()
        params += [(f"C_M_AXI_{up}_ID_WIDTH", 1), (f"C_M_AXI_{up}_ADDR_WIDTH", M_AXI_ADDR),
                   (f"C_M_AXI_{up}_DATA_WIDTH", M_AXI_DATA), (f"C_M_AXI_{up}_AWUSER_WIDTH", 1),
                   (f"C_M_AXI_{up}_ARUSER_WIDTH", 1), (f"C_M_AXI_{up}_WUSER_WIDTH", 1),
                   (f"C_M_AXI_{up}_RUSER_WIDTH", 1), (f"C_M_AXI_{up}_BUSER_WIDTH", 1),
                   (f"C_M_AXI_{up}_USER_VALUE", "0x00000000"), (f"C_M_AXI_{up}_PROT_VALUE", "000"),
                   (f"C_M_AXI_{up}_CACHE_VALUE", "0011")]
    params += [("Component_Name", f"{d.bd}_{name}_0"), ("clk_period", f"{1000.0 / d.req:g}"), ("machine", 64),
               ("combinational", 0), ("latency", "undef"), ("II", "x"), ("EDK_IPTYPE", "PERIPHERAL"),
               ("C_S_AXI_CONTROL_BASEADDR", _hex(kernel_base)),
               ("C_S_AXI_CONTROL_HIGHADDR", _hex(kernel_base + CONTROL_RANGE - 1))]
    for kk, v in params:
        k.param(kk, v)
    k.busif(CONTROL, "SLAVE", AXIMM, _axi(ctrl_aw, 32, full=False, prot=False), lambda lg: f"{CONTROL}_{lg}",
            d.ap("AXI4LITE", 32, ctrl_aw, wstrb=1, bresp=1, rresp=1), master=False, datawidth=32)
    k.port("ap_clk", out=False, sigis="clk", CLKFREQUENCY=freq_hz)
    k.port("ap_rst_n", out=False, sigis="rst")
    k.port("interrupt", out=True, sigis="INTERRUPT", SENSITIVITY="LEVEL_HIGH")
    sigs = _axi(M_AXI_ADDR, M_AXI_DATA, id_w=1, user_w=1)
    masters = []
    for arg, bundle in m_axi.items():
        itf = f"m_axi_{bundle}"
        mode = "READ_ONLY" if arg == "in" else "WRITE_ONLY" if arg == "out" else "READ_WRITE"
        par = d.ap("AXI4", M_AXI_DATA, M_AXI_ADDR, id_w=1, mode=mode, max_burst=256, awuser=1, aruser=1, **d.full)
        k.busif(itf, "MASTER", AXIMM, sigs, lambda lg, itf=itf: f"{itf}_{lg}", par, master=True,
                datawidth=M_AXI_DATA)
        masters.append((itf, sigs, par))

    intc = _intc(d, 1)
    smc = _smc(d, [(s, p, M_AXI_DATA) for _, s, p in masters])
    rst = _rst(d)

    _net(ps, d.clk, [(ps, d.master_aclk), (ps, d.hp_aclk), (k, "ap_clk"), (intc, "ACLK"), (intc, "S00_ACLK"),
                     (intc, "M00_ACLK"), (smc, "aclk"), (rst, "slowest_sync_clk")])
    _net(ps, d.rstn, [(rst, "ext_reset_in")])
    _net(rst, "peripheral_aresetn", [(k, "ap_rst_n"), (intc, "S00_ARESETN"), (intc, "M00_ARESETN"),
                                     (smc, "aresetn")])
    _net(rst, "interconnect_aresetn", [(intc, "ARESETN")])
    _link(ps, d.master, intc, "S00_AXI")
    _link(intc, "M00_AXI", k, CONTROL)
    for i, (itf, _, _) in enumerate(masters):
        _link(k, itf, smc, f"S{i:02d}_AXI")
    _link(smc, "M00_AXI", ps, d.hp_port)

    # address maps: the PS master sees the control window; each m_axi port sees DDR through HPn
    ps.memranges.append({"ADDRESSBLOCK": "Reg", "BASENAME": "C_S_AXI_CONTROL_BASEADDR",
                         "BASEVALUE": _hex(kernel_base), "HIGHNAME": "C_S_AXI_CONTROL_HIGHADDR",
                         "HIGHVALUE": _hex(kernel_base + CONTROL_RANGE - 1), "INSTANCE": name, "IS_DATA": "TRUE",
                         "IS_INSTRUCTION": "TRUE", "MASTERBUSINTERFACE": d.master, "MEMTYPE": "REGISTER",
                         "SLAVEBUSINTERFACE": CONTROL})
    for itf, _, _ in masters:
        for block, lo, hi, memtype in d.ddr:
            k.memranges.append({"ADDRESSBLOCK": block, "BASENAME": "C_BASEADDR", "BASEVALUE": _hex(lo),
                                "HIGHNAME": "C_HIGHADDR", "HIGHVALUE": _hex(hi), "INSTANCE": "ps",
                                "IS_DATA": "TRUE", "IS_INSTRUCTION": "TRUE", "MASTERBUSINTERFACE": itf,
                                "MEMTYPE": memtype, "SLAVEBUSINTERFACE": d.hp_port})
    if network:                              # an XML comment: the reduced name, no "--"
        from ..names import comment
        network = comment(network).replace("-", "_")
    what = "the network overlay's block design (hlsnn.network.hwh)" + (f" for the compiled model {network}"
                                                                         if network else "")
    return _document(d, (ps, k, intc, smc, rst), what)


def render_net_hwh(cfg, path, engine=None, *, network=""):
    """Write the network overlay's ``.hwh`` of ``cfg`` to ``path`` (atomically); return the path."""
    from ..files import write_atomic
    root = build_net_design(cfg, engine, network=network)
    ET.indent(root, space="  ")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, b'<?xml version="1.0" encoding="UTF-8" standalone="no" ?>\n'
                 + ET.tostring(root, encoding="utf-8") + b"\n")
    return path
