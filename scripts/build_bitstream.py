#!/usr/bin/env python3
"""Build an overlay from an accelerator config: render -> C-simulation (stops on any mismatch
with the emulator) -> Vitis HLS -> Vivado block design and implementation -> overlays/<name>/.

    scripts/build_bitstream.py CONFIG [--board B] [--jobs N] [--out overlays/] [--dry-run]

The same as `hlsnn build`. Exit status: 0 built, 1 failed, 3 Xilinx tools missing (everything
up to the tools ran; the message lists the commands that finish the build).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "host"))

from hlsnn.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main(["build", *sys.argv[1:]]))
