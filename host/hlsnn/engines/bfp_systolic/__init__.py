"""``bfp_systolic``: block-floating-point GEMM on a systolic array of DSP tiles (source 001)."""
from . import cases, protocol
from .emulator import RollingState, emulate, emulate_reference, exact_matmul, select_exponent
from .kernel import Kernel
from .spec import MAGIC, NAME, SCHEMA, TOP, buffers, estimate, template_context, validate

#: Jinja2 template (under hls/engines/bfp_systolic/) -> rendered file name.
TEMPLATES = {
    "config.h.j2": "bfp_systolic_config.h",
    "kernel.h.j2": "bfp_systolic.h",
    "kernel.cpp.j2": "bfp_systolic.cpp",
    "bridge.cpp.j2": "bridge.cpp",
    "tb.cpp.j2": "tb.cpp",
}
KERNEL_SOURCES = ("bfp_systolic.cpp",)

__all__ = ["NAME", "TOP", "MAGIC", "SCHEMA", "TEMPLATES", "KERNEL_SOURCES", "validate", "buffers", "estimate",
           "template_context", "protocol", "cases", "emulate", "emulate_reference", "exact_matmul", "select_exponent", "Kernel"]
