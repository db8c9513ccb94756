"""Reading what the tools wrote: the Vitis HLS synthesis report (csynth.xml), the register
map of the exported IP (its generated ``x<top>_hw.h``), and Vivado's timing summary."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path


def _num(text):
    if text is None:
        return None
    t = text.strip()
    try:
        return int(t)
    except ValueError:
        try:
            return float(t)
        except ValueError:
            return t


def parse_csynth(path) -> dict:
    """Latency, interval (II), estimated clock and resources from a Vitis HLS ``csynth.xml``.

    Missing fields are None; resources include DSP (``DSP`` or ``DSP48E``), BRAM_18K, URAM,
    LUT and FF, with the available counts of the part."""
    root = ET.parse(path).getroot()

    def find(*names):
        for n in names:
            el = root.find(f".//{n}")
            if el is not None and el.text is not None:
                return _num(el.text)
        return None

    res, avail = {}, {}
    for key, names in {"dsp": ("DSP", "DSP48E"), "bram_18k": ("BRAM_18K",), "uram": ("URAM",),
                       "lut": ("LUT",), "ff": ("FF",)}.items():
        for n in names:
            el = root.find(f".//AreaEstimates/Resources/{n}")
            if el is not None:
                res[key] = _num(el.text)
                break
        for n in names:
            el = root.find(f".//AreaEstimates/AvailableResources/{n}")
            if el is not None:
                avail[key] = _num(el.text)
                break
    return {
        "top": find("TopModelName"),
        "target_clock_ns": find("TargetClockPeriod"),
        "estimated_clock_ns": find("EstimatedClockPeriod"),
        "latency_cycles": {"best": find("Best-caseLatency"), "worst": find("Worst-caseLatency")},
        "interval": {"min": find("Interval-min"), "max": find("Interval-max")},
        "resources": res,
        "available": avail,
    }


_REG = re.compile(r"#define\s+X\w+_CONTROL_ADDR_(\w+?)_(DATA|CTRL)\s+0x([0-9a-fA-F]+)")


def parse_register_header(path) -> dict:
    """Register offsets from the IP's generated ``x<top>_hw.h``: ``{name: offset}`` of each
    argument's data register (lower-case names), plus ``ap_ctrl`` at 0x00."""
    regs = {"ap_ctrl": 0x00}
    for name, kind, off in _REG.findall(Path(path).read_text(errors="replace")):
        if kind == "DATA":
            regs[name.lower()] = int(off, 16)
    return regs


def predicted_register_map(regs_in, regs_out) -> dict:
    """The s_axilite map Vitis HLS generates for 32-bit scalar arguments, in declaration order:
    control at 0x00 (GIE 0x04, IER 0x08, ISR 0x0C), then 8 bytes per argument from 0x10 (an
    input: data + reserved; an output: data + its ap_vld control word)."""
    regs = {"ap_ctrl": 0x00}
    off = 0x10
    for name in list(regs_in) + list(regs_out):
        regs[name] = off
        off += 8
    return regs


def parse_timing(path) -> dict:
    """``<out_dir>/timing.txt`` written by bd.tcl: progress, status, WNS and WHS."""
    out = {}
    for line in Path(path).read_text().splitlines():
        key, _, value = line.partition(" ")
        out[key] = _num(value) if key in ("wns", "whs") else value.strip()
    return out
