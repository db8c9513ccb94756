"""The values of the Vivado block design (``hls/tcl/bd.tcl.j2``) for a config on its board: what the
bitstream flow renders and what the hardware handoff (:mod:`hlsnn.blockdesign.hwh`) describes."""
from __future__ import annotations

from . import boardfiles


def bd_context(cfg) -> dict:
    """Values for hls/tcl/bd.tcl.j2 (all validated config and board fields)."""
    b = cfg.board
    p = cfg.params
    return {
        "board": b.name, "ps": b.ps,
        "ps_family_name": "processing_system7 (Zynq-7000)" if b.ps == "zynq7" else "zynq_ultra_ps_e (Zynq UltraScale+)",
        "hp_port": b.dma.get("hp_port") or ("S_AXI_HP0" if b.ps == "zynq7" else "S_AXI_HP0_FPD"),
        "hp_width": min(b.dma["stream_bits"], 64 if b.ps == "zynq7" else 128),
        "address_bits": b.dma["address_bits"],
        "stream_bits": p["stream_bits"],
        "dma_length_width": 26,
        "clock_mhz": int(cfg.clock_mhz) if float(cfg.clock_mhz).is_integer() else cfg.clock_mhz,
        "engine": cfg.engine,
        "vlnv": f"hlsnn.org:hls:{cfg.name}:1.0",
        "ps_config": sorted((b.ps_config or {}).items()),
        # PS general-purpose master windows: Zynq-7000 GP0 from 0x4000_0000, ZU+ HPM0_FPD from 0xA000_0000
        "dma_base": "0x40400000" if b.ps == "zynq7" else "0xA0000000",
        "kernel_base": "0x43C00000" if b.ps == "zynq7" else "0xA0010000",
        # the DMA's memory interconnect, as public designs of this system choose it (hls4ml's
        # vivado_accelerator: AXI Interconnect on pynq-z2, SmartConnect on zcu102)
        "mem_intc": "New AXI Interconnect" if b.ps == "zynq7" else "New AXI SmartConnect",
        "board_vendor_note": boardfiles.where_to_get(b.board_part) if b.board_part else "",
        # the network overlay (hlsnn.build.netflow): the compiled model's name, else empty
        "network": "",
        # kernel instances beyond the first (instances_context), each with its own DMA
        "more_instances": [],
        # the Vivado project's and the overlay files' name where it is not the kernel's (several instances)
        "overlay": "",
    }

