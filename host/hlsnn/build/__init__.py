"""The bitstream flow (``hlsnn build`` / ``scripts/build_bitstream.py``): tool discovery,
Vitis HLS and Vivado runs, report parsing, overlay assembly."""
from ..blockdesign.design import bd_context
from .flow import EXIT, Build, BuildFailed, main_build
from .tools import find_hls, find_vivado

__all__ = ["EXIT", "Build", "BuildFailed", "bd_context", "main_build", "find_hls", "find_vivado"]
