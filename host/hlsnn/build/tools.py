"""Finding the Xilinx tools: Vitis HLS (``vitis_hls``, or ``vitis-run --mode hls`` on newer
Vitis) and Vivado, honouring ``XILINX_HLS`` / ``XILINX_VIVADO`` / ``XILINX_VITIS`` before
``PATH``; recording their versions."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Tool:
    """A found tool: how to call it, and the version it reported."""

    name: str
    argv: tuple          # the command prefix (e.g. ("vitis-run", "--mode", "hls"))
    path: str
    version: str

    def command(self, *args):
        return list(self.argv) + [str(a) for a in args]


def _which(exe, env_var):
    root = os.environ.get(env_var)
    if root:
        cand = Path(root) / "bin" / exe
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return shutil.which(exe)


def _version(path, *args):
    try:
        out = subprocess.run([path, *args], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    m = re.search(r"v?(\d{4}\.\d+(?:\.\d+)?)", out.stdout + out.stderr)
    return m.group(1) if m else "unknown"


def find_hls():
    """Vitis HLS: ``vitis_hls`` (XILINX_HLS, PATH), else ``vitis-run --mode hls`` (XILINX_VITIS,
    PATH). None when neither exists."""
    path = _which("vitis_hls", "XILINX_HLS")
    if path:
        return Tool("vitis_hls", (path, "-f"), path, _version(path, "-version"))
    path = _which("vitis-run", "XILINX_VITIS")
    if path:
        return Tool("vitis-run", (path, "--mode", "hls", "--tcl"), path, _version(path, "--version"))
    return None


def find_vivado():
    """Vivado (XILINX_VIVADO, PATH), or None."""
    path = _which("vivado", "XILINX_VIVADO")
    if path:
        return Tool("vivado", (path, "-mode", "batch", "-notrace", "-source"), path, _version(path, "-version"))
    return None
