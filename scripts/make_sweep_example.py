#!/usr/bin/env python3
"""Regenerate docs/images/sweep_example.png, the documentation's example of ``hlsnn sweep``.

Deterministic and offline: ``hlsnn sweep configs/accel/bfp16_pynq-z2.yaml --vary rows=8,16,32
--vary cols=2,4,8`` through the CLI code path, with the resource estimates only (``--no-csim``:
the picture shows which variants fit the board, which does not depend on the C-simulation).

    python scripts/make_sweep_example.py [OUT.png]     # needs pip install -e ".[plot]"
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "sweep_example.png"
CONFIG = ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml"


def main(argv=None) -> int:
    from hlsnn.cli import main as hlsnn_main
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else OUT
    return hlsnn_main(["sweep", str(CONFIG), "--vary", "rows=8,16,32", "--vary", "cols=2,4,8", "--no-csim",
                       "--out", str(out), "-q"])


if __name__ == "__main__":
    sys.exit(main())
