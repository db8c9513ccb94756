#!/usr/bin/env python3
"""Regenerate docs/images/radix_update_timelines.png, the documentation's example of
``hlsnn calibrate --plot``: E6 and E8 on the digits CNN (fixed8, 16 images, 25 % sampled), each
modelled and measured on the simulated board (four kernel instances of sparse8_pynq-z2 in one
overlay; the C-simulation is compiled once and cached).

    python scripts/make_radix_timeline_example.py [OUT.png]     # needs pip install -e ".[plot]" and g++
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "radix_update_timelines.png"
MODEL = ROOT / "configs" / "models" / "digits_cnn.yaml"


def main(argv=None) -> int:
    from hlsnn.cli import main as hlsnn_main
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else OUT
    return hlsnn_main(["calibrate", str(MODEL), "--assignment", "fixed8", "--method", "e6,e8", "--images", "16",
                       "--target", "sim", "--plot", str(out)])


if __name__ == "__main__":
    sys.exit(main())
