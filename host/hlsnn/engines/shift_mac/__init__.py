"""``shift_mac``: GEMM and 2-D convolution on multiplier-free shift-MAC units with
power-of-two and two-hot weights (source 000)."""
from . import cases, protocol
from .emulator import emulate, im2col, register_contributions
from .kernel import Kernel
from .spec import MAGIC, MODES, NAME, SCHEMA, TOP, buffers, estimate, template_context, validate

#: Jinja2 template (under hls/engines/shift_mac/ or hls/harness/) -> rendered file name.
TEMPLATES = {
    "config.h.j2": "shift_mac_config.h",
    "kernel.h.j2": "shift_mac.h",
    "kernel.cpp.j2": "shift_mac.cpp",
    "bridge.cpp.j2": "bridge.cpp",
    "tb.cpp.j2": "tb.cpp",
}
KERNEL_SOURCES = ("shift_mac.cpp",)

__all__ = ["NAME", "TOP", "MAGIC", "MODES", "SCHEMA", "TEMPLATES", "KERNEL_SOURCES", "validate", "buffers", "estimate",
           "template_context", "protocol", "cases", "emulate", "im2col", "register_contributions", "Kernel"]
