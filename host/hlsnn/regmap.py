"""The ``s_axilite`` register map Vitis HLS generates for a top function (``ap_ctrl_hs``),
derived from the kernel template's signature and pragmas, for the layer kernels
(:func:`hlsnn.blockdesign.hwh.kernel_registers`) and the network kernels alike.

The rule (Vitis HLS, the ``xkernel_hw.h`` header and the IP's ``component.xml``):

* ``0x00`` CTRL (ap_start, ap_done, ap_idle, ap_ready, auto_restart), ``0x04`` GIER,
  ``0x08`` IP_IER, ``0x0C`` IP_ISR;
* then each argument bound to the bundle, in declaration order, from ``0x10``: one 32-bit
  word per 32 bits of the argument, then one more word: the ``<arg>_ctrl`` word with the
  ``<arg>_ap_vld`` bit for an output scalar, a reserved word otherwise. A 32-bit scalar so
  takes 8 bytes; a pointer of an ``m_axi`` port with ``offset = slave`` is a 64-bit address
  (Vitis HLS's default ``m_axi_addr64``) and takes 12: its low word, its high word, a
  reserved word. A register of several words is named ``<arg>_1``, ``<arg>_2``, ...;
* an argument named like an HDL keyword (``in``, ``out``, ...) gets the suffix ``_r`` in the
  RTL and so in the register names (``in`` -> ``in_r_1``, ``in_r_2``).
"""
from __future__ import annotations

import re

#: the control registers every ap_ctrl_hs kernel has, as (name, offset, access, description, fields)
CONTROL = (
    ("CTRL", 0x00, "read-write", "Control signals", [
        ("AP_START", 0, 1, "read-write", "Control signal Register for 'ap_start'."),
        ("AP_DONE", 1, 1, "read-only", "Control signal Register for 'ap_done'."),
        ("AP_IDLE", 2, 1, "read-only", "Control signal Register for 'ap_idle'."),
        ("AP_READY", 3, 1, "read-only", "Control signal Register for 'ap_ready'."),
        ("RESERVED_1", 4, 3, "read-only", "Reserved.  0s on read."),
        ("AUTO_RESTART", 7, 1, "read-write", "Control signal Register for 'auto_restart'."),
        ("RESERVED_2", 8, 24, "read-only", "Reserved.  0s on read.")]),
    ("GIER", 0x04, "read-write", "Global Interrupt Enable Register", [
        ("Enable", 0, 1, "read-write", "Master enable for the device interrupt output to the system interrupt "
                                       "controller: 0 = Disabled, 1 = Enabled"),
        ("RESERVED", 1, 31, "read-only", "Reserved.  0s on read.")]),
    ("IP_IER", 0x08, "read-write", "IP Interrupt Enable Register", [
        ("CHAN0_INT_EN", 0, 1, "read-write", "Enable Channel 0 (ap_done) Interrupt.  0 = Disabled, 1 = Enabled."),
        ("CHAN1_INT_EN", 1, 1, "read-write", "Enable Channel 1 (ap_ready) Interrupt.  0 = Disabled, 1 = Enabled."),
        ("RESERVED", 2, 30, "read-only", "Reserved.  0s on read.")]),
    ("IP_ISR", 0x0C, "read-write", "IP Interrupt Status Register", [
        ("CHAN0_INT_ST", 0, 1, "read-only", "Channel 0 (ap_done) Interrupt Status."),
        ("CHAN1_INT_ST", 1, 1, "read-only", "Channel 1 (ap_ready) Interrupt Status."),
        ("RESERVED", 2, 30, "read-only", "Reserved.  0s on read.")]),
)
FIRST = 0x10

#: HDL (VHDL and Verilog) keywords a C argument may be named like; Vitis HLS renames such a
#: port ``<name>_r``. Not the whole list: the words a kernel argument plausibly takes.
HDL_KEYWORDS = frozenset(
    "in out inout input output buffer signal begin end entity module wire reg port process type range "
    "generic function task case if else for while loop next wait when with select array record access "
    "file label map new null open package procedure shared units variable all and or not xor nor nand".split())


def rtl_name(arg):
    """The RTL (and register) name Vitis HLS gives a C argument."""
    return f"{arg}_r" if arg.lower() in HDL_KEYWORDS else arg


def layout(args):
    """``(registers, offsets)`` of the arguments ``args`` = ``[(name, bits, is_output)]`` (the
    register name, e.g. from :func:`rtl_name`; 32 or 64 bits) after the control registers:
    ``registers`` in :data:`CONTROL`'s form, ``offsets`` ``{name: (offset of each data word,
    low word first)}`` (module docstring)."""
    regs, offsets, off = list(CONTROL), {}, FIRST
    for name, bits, out in args:
        if bits not in (32, 64):
            raise ValueError(f"s_axilite argument {name}: {bits} bits; the register map takes 32 or 64")
        words = bits // 32
        access = "read-only" if out else "read-write"
        offsets[name] = tuple(off + 4 * i for i in range(words))
        for i in range(words):
            reg = name if words == 1 else f"{name}_{i + 1}"
            regs.append((reg, off, access, f"Data signal of {name}",
                         [(name, 0, 32, access, f"Bit {32 * i + 31} to {32 * i} Data signal of {name}")]))
            off += 4
        if out:
            regs.append((f"{name}_ctrl", off, "read-only", f"Control signal of {name}", [
                (f"{name}_ap_vld", 0, 1, "read-only", f"Control signal {name}_ap_vld"),
                ("RESERVED", 1, 31, "read-only", "Reserved.  0s on read.")]))
        off += 4                         # the ap_vld word of an output, a reserved word otherwise
    return regs, offsets


_S_AXILITE = re.compile(r"#pragma\s+HLS\s+INTERFACE\s+s_axilite\s+port\s*=\s*(\w+)")
_M_AXI = re.compile(r"#pragma\s+HLS\s+INTERFACE\s+m_axi\s+port\s*=\s*(\w+)([^\n]*)")


def s_axilite_ports(text):
    """The arguments a kernel source binds to ``s_axilite`` (in pragma order, ``return`` left out)."""
    return [p for p in _S_AXILITE.findall(text) if p != "return"]


def m_axi_ports(text):
    """``{argument: bundle}`` of the kernel source's ``m_axi`` pragmas."""
    out = {}
    for port, rest in _M_AXI.findall(text):
        m = re.search(r"bundle\s*=\s*(\w+)", rest)
        out[port] = m.group(1) if m else "gmem"
    return out


def top_arguments(text, top):
    """``[(c_name, bits)]`` of the top function ``top`` of a kernel source (a pointer: 64, a
    32-bit integer: 32), from its definition ``void <top>(...)``; ``top`` may be the template's
    ``{{ top }}``."""
    m = re.search(r"void\s+" + re.escape(top) + r"\s*\(([^)]*)\)\s*\{", text)
    if not m:
        raise ValueError(f"no definition of the top function {top} in the kernel source")
    args = []
    for decl in m.group(1).split(","):
        decl = decl.strip()
        name = re.search(r"(\w+)\s*$", decl).group(1)
        if "*" in decl:
            bits = 64
        elif re.match(r"(const\s+)?(int|unsigned|unsigned\s+int|uint32_t|int32_t|ap_u?int<32>)\b", decl):
            bits = 32
        else:
            raise ValueError(f"top function {top}: argument {decl!r}: only pointers and 32-bit integers "
                             "are mapped to s_axilite registers here")
        args.append((name, bits))
    return args


def kernel_layout(text, top):
    """``(registers, offsets, m_axi)`` of the top function ``top`` of a kernel source: its
    ``s_axilite`` arguments in declaration order laid out by :func:`layout` (inputs only: the
    network kernels return nothing through registers), ``offsets`` keyed by the C argument
    name, ``m_axi`` the ``{C argument: bundle}`` of its ``m_axi`` ports."""
    lite = set(s_axilite_ports(text))
    args = [(c, bits) for c, bits in top_arguments(text, top) if c in lite]
    missing = lite - {c for c, _ in args}
    if missing:
        raise ValueError(f"s_axilite pragmas name {', '.join(sorted(missing))}, which {top} does not take")
    regs, by_rtl = layout([(rtl_name(c), bits, False) for c, bits in args])
    return regs, {c: by_rtl[rtl_name(c)] for c, _ in args}, m_axi_ports(text)


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
