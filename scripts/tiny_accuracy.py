"""Accuracy of issue 32's tiny models (``tests/data/torch/tiny/``) in bfp8, two-hot and fixed8,
with two-hot codes chosen for the output (``weight_fit: output``, the default) and by nearest
rounding (``weight_fit: nearest``, as before hlsnn.deploy.quantize.shift_fit), and power-of-two both
ways: one Markdown table on stdout (``docs/deploy-models.md`` shows it).

    python scripts/tiny_accuracy.py                      # every model, all 360 test images
    python scripts/tiny_accuracy.py --only dscnn_ts17 --test-samples 120

Each model's own deployment config is read and four shift formats are added beside its
formats (same accel config as its two-hot). Classification rows give accuracy in % and the
points against float (onnx's ReferenceEvaluator); the autoencoder gives its MSE against its
inputs and the ratio to float's MSE.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "host"))

from hlsnn.config import read_yaml  # noqa: E402
from hlsnn.evaluation.run import deploy  # noqa: E402

TINY = ROOT / "tests" / "data" / "torch" / "tiny"
COLUMNS = ("bfp8", "twohot_nearest", "twohot", "fixed8", "pot_nearest", "pot")


def run(name, test_samples):
    cfg = read_yaml(TINY / f"{name}.yaml")
    accel = cfg["formats"]["twohot"]["accel"]
    cfg["model"] = str(TINY / cfg["model"])
    cfg["formats"].update({"twohot_nearest": {"type": "twohot", "accel": accel, "weight_fit": "nearest"},
                           "pot": {"type": "pot", "accel": accel},
                           "pot_nearest": {"type": "pot", "accel": accel, "weight_fit": "nearest"}})
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / f"{name}.yaml"
        path.write_text(json.dumps(cfg))          # JSON is YAML
        return deploy(path, "emu", test_samples=test_samples)


def cell(res, e):
    if "error" in e:
        return "failed"
    if res["task"] == "regression":
        return f"{e['mse']:.4f} ({e['mse'] / res['float_mse']:.2f}x)"
    return f"{100 * e['accuracy']:.2f} ({100 * (e['accuracy'] - res['float_accuracy']):+.2f})"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", help="a model name (repeatable), e.g. dscnn_ts17")
    ap.add_argument("--test-samples", type=int, default=None, help="first N test images (default: all 360)")
    args = ap.parse_args(argv)
    names = args.only or sorted(p.stem for p in TINY.glob("*.yaml"))
    print("| model | float | " + " | ".join(COLUMNS) + " |")
    print("|---" * (len(COLUMNS) + 2) + "|")
    for name in names:
        res = run(name, args.test_samples)
        fl = f"MSE {res['float_mse']:.4f}" if res["task"] == "regression" else f"{100 * res['float_accuracy']:.2f}"
        print(f"| {name} | {fl} | " + " | ".join(cell(res, res["assignments"][c]) for c in COLUMNS) + " |",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
