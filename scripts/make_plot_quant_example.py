#!/usr/bin/env python3
"""Regenerate docs/images/plot_quant_example.png, the README example of ``hlsnn plot-quant``.

Deterministic and offline: a seeded bimodal weight set shaped like a trained layer's weights
(two Gaussian modes at +-0.6 sigma-scaled means and a narrow spike of near-zero weights, as
in source 000, figs. 1-2) is saved to a temporary .npy file and plotted through the CLI code
path (``hlsnn plot-quant W.npy --out docs/images/plot_quant_example.png --json``).

    python scripts/make_plot_quant_example.py            # needs pip install -e ".[plot]"
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "images" / "plot_quant_example.png"


def bimodal_weights(n: int = 20_000, seed: int = 0, sigma: float = 0.1) -> np.ndarray:
    """A (128, n // 128) float32 layer: 43 % around +0.6 sigma, 43 % around -0.6 sigma, 14 % near 0."""
    rng = np.random.default_rng(seed)
    n_spike = int(0.14 * n)
    n_pos = (n - n_spike) // 2
    n_neg = n - n_spike - n_pos
    w = np.concatenate([rng.normal(+0.6 * sigma, 0.16 * sigma, n_pos),
                        rng.normal(-0.6 * sigma, 0.16 * sigma, n_neg),
                        rng.normal(0.0, 0.03 * sigma, n_spike)])
    w = rng.permutation(w).astype(np.float32)
    return w.reshape(128, -1) if n % 128 == 0 else w


def main(argv=None) -> int:
    from hlsnn.cli import main as hlsnn_main
    out = Path(argv[0]) if argv else OUT
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bimodal_layer.npy"
        np.save(path, bimodal_weights(n=20_480))
        rc = hlsnn_main(["plot-quant", str(path), "--out", str(out)])
    if rc == 0:
        print(f"{out.stat().st_size / 1024:.0f} KiB", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
