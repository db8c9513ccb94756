"""``sparse_cluster``: zero-skipping convolution on M compute units with sparsity-balanced
sub-feature-maps (sources 003 and 004)."""
from . import cases, protocol
from .emulator import conv_accumulate, emulate, postprocess
from .kernel import Kernel
from .spec import MAGIC, NAME, SCHEMA, TOP, buffers, estimate, template_context, validate

#: Jinja2 template (under hls/engines/sparse_cluster/ or hls/harness/) -> rendered file name.
TEMPLATES = {
    "config.h.j2": "sparse_cluster_config.h",
    "kernel.h.j2": "sparse_cluster.h",
    "kernel.cpp.j2": "sparse_cluster.cpp",
    "bridge.cpp.j2": "bridge.cpp",
    "tb.cpp.j2": "tb.cpp",
}
KERNEL_SOURCES = ("sparse_cluster.cpp",)

__all__ = ["NAME", "TOP", "MAGIC", "SCHEMA", "TEMPLATES", "KERNEL_SOURCES", "validate", "buffers", "estimate",
           "template_context", "protocol", "cases", "conv_accumulate", "emulate", "postprocess", "Kernel"]
