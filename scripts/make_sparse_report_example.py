#!/usr/bin/env python3
"""Regenerate docs/images/sparse_balance.png, the README example of ``hlsnn report``.

Deterministic and offline: seed 0 synthetic 64 -> 64 channel, 56 x 56, 3 x 3 layers at
densities 1, 0.5, 0.2, 0.1 and 0.05 (inputs and weights), with uniformly random inputs and
with structured inputs whose non-zeros cluster in blobs, through the work model of
``configs/accel/sparse8_pynq-z2.yaml``, plotted through the CLI code path::

    hlsnn report configs/accel/sparse8_pynq-z2.yaml --out docs/images/sparse_balance.png

    python scripts/make_sparse_report_example.py            # needs pip install -e ".[plot]"
    python scripts/make_sparse_report_example.py OUT.png [CONFIG.yaml]
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "sparse_balance.png"
CONFIG = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"


def main(argv=None) -> int:
    from hlsnn.cli import main as hlsnn_main
    argv = list(argv or [])
    out = Path(argv[0]) if argv else OUT
    config = Path(argv[1]) if len(argv) > 1 else CONFIG
    rc = hlsnn_main(["report", str(config), "--seed", "0", "--densities", "1,0.5,0.2,0.1,0.05",
                     "--out", str(out)])
    if rc == 0:
        print(f"{out.stat().st_size / 1024:.0f} KiB", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
