#!/usr/bin/env python3
"""Train the shipped example models on scikit-learn's bundled digits and export them to ONNX.

    python scripts/train_digits.py [--out configs/models] [--seed 0] [--opset 15]    # needs pip install -e ".[deploy]"

Writes ``digits_mlp.onnx`` (64 -> 32 -> 10 MLP) and ``digits_cnn.onnx`` (two conv-BN-relu-pool
blocks -> fc), trained with numpy only (scripts/digits_models.py; deterministic for a seed), and
prints their train/test accuracy as the ONNX float reference computes it
(``hlsnn.deploy.importer.reference.reference_evaluator``: onnx's ReferenceEvaluator with inference-mode
BatchNormalization per the spec).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "scripts"))

import digits_models as train  # noqa: E402  (beside this script)
from hlsnn.deploy import datasets  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "configs" / "models", help="output folder (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial weights and batch order (default: 0)")
    ap.add_argument("--opset", type=int, default=train.OPSET,
                    help="ONNX opset of the exported models (default: %(default)s; 14+ also evaluates correctly "
                         "under the stock ReferenceEvaluator, see hlsnn.deploy.importer.reference.reference_evaluator)")
    ap.add_argument("--verbose", action="store_true", help="print the accuracy after every epoch")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    flat, nchw = datasets.load("digits"), datasets.load("digits", layout="nchw")
    print(f"digits: {len(flat.x_train)} train / {len(flat.x_test)} test images, seed {args.seed}")
    jobs = (("digits_mlp", flat, train.train_mlp, train.export_mlp),
            ("digits_cnn", nchw, train.train_cnn, train.export_cnn))
    for name, ds, fit, export in jobs:
        model = fit(ds, args.seed, verbose=args.verbose)
        path = args.out / f"{name}.onnx"
        export(model, path, opset=args.opset)
        acc = {split: train.accuracy(train.reference_probs(path, getattr(ds, f"x_{split}")), getattr(ds, f"y_{split}"))
               for split in ("train", "test")}
        print(f"{name}: trained in {model.seconds:.1f} s; ONNX reference accuracy train {acc['train']:.4f} "
              f"test {acc['test']:.4f} -> {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
