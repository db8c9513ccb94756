#!/usr/bin/env python3
"""Train the tiny DS-CNN example model on digits at 32x32x3, with a held-out validation split,
and export it to ONNX.

    pip install torch==2.13.0        # PyTorch trains it; hlsnn does not depend on it
    python scripts/train_dscnn.py [--out configs/models] [--seed 0] [--epochs 30] [--holdout 400]

The network has the shape of MLPerf Tiny's keyword-spotting DS-CNN (a strided stem conv, four
depthwise-separable blocks of 128 channels, global average pooling, a dense classifier), sized
for the digits shown as 32x32x3 images (``data: digits32``):

* ``stem``: Conv 3->128 3x3 stride 2 pad 1 (16x16), BatchNorm, ReLU;
* four blocks: a depthwise Conv 128->128 3x3 pad 1 (groups 128), BatchNorm, ReLU, a pointwise
  Conv 128->128 1x1, BatchNorm, ReLU; the third block's depthwise conv has stride 2 (8x8);
* GlobalAveragePool, Flatten, Gemm 128->10 (logits).

Training: Adam (lr 3e-3, batches of 64 in a seeded order, cross-entropy), deterministic for a
seed (one thread, torch's deterministic algorithms), on every training image but the last
``--holdout`` (default 400), which no step sees: the deployment config's ``validation: 400``,
the split ``hlsnn autotune`` chooses on. The export is TorchScript's (``dynamo=False``, opset
17, batch 1, BatchNorm folded into the convs), one file with its weights; the script prints
onnxruntime's accuracy of the file on the training, held-out and test images.
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))

from hlsnn.deploy import datasets  # noqa: E402

NAME = "dscnn_digits32"
WIDTH = 128


def model_of(nn, width=WIDTH):
    def block(i, stride):
        return [(f"dw{i}", nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=width, bias=False)),
                (f"dw{i}_bn", nn.BatchNorm2d(width)), (f"dw{i}_relu", nn.ReLU()),
                (f"pw{i}", nn.Conv2d(width, width, 1, bias=False)), (f"pw{i}_bn", nn.BatchNorm2d(width)),
                (f"pw{i}_relu", nn.ReLU())]
    from collections import OrderedDict
    layers = [("stem", nn.Conv2d(3, width, 3, stride=2, padding=1, bias=False)), ("stem_bn", nn.BatchNorm2d(width)),
              ("stem_relu", nn.ReLU())]
    for i, s in enumerate((1, 1, 2, 1), start=1):
        layers += block(i, s)
    layers += [("gap", nn.AdaptiveAvgPool2d(1)), ("flatten", nn.Flatten()), ("fc", nn.Linear(width, 10))]
    return nn.Sequential(OrderedDict(layers))


def train(torch, model, x, y, *, epochs, seed, batch=64, lr=3e-3):
    torch.manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))
    gen = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        for idx in torch.randperm(len(xt), generator=gen).split(batch):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(model(xt[idx]), yt[idx]).backward()
            opt.step()
        sched.step()
    model.eval()
    return model


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "configs" / "models", help="output folder (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the initial weights and batch order (default: 0)")
    ap.add_argument("--epochs", type=int, default=30, help="training epochs (default: %(default)s)")
    ap.add_argument("--holdout", type=int, default=400, help="the last N training images held out of training "
                    "(default: %(default)s)")
    args = ap.parse_args(argv)
    try:
        import onnxruntime as ort
        import torch
        from torch import nn
    except ImportError as exc:
        ap.error(f"needs torch and onnxruntime ({exc}): pip install torch==2.13.0 onnxruntime")
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    ds = datasets.load("digits32")
    if not 0 <= args.holdout < len(ds.x_train):
        ap.error(f"--holdout {args.holdout}: 0..{len(ds.x_train) - 1} training images")
    n_fit = len(ds.x_train) - args.holdout
    print(f"digits32: {n_fit} train (+{args.holdout} held out) / {len(ds.x_test)} test images, seed {args.seed}")
    t = time.perf_counter()
    torch.manual_seed(args.seed)
    model = train(torch, model_of(nn), ds.x_train[:n_fit].astype(np.float32), ds.y_train[:n_fit],
                  epochs=args.epochs, seed=args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"{NAME}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (torch.from_numpy(ds.x_test[:1].astype(np.float32)),), str(path), dynamo=False,
                          opset_version=17, input_names=["input"], output_names=["logits"])
    sess = ort.InferenceSession(str(path))
    splits = {"train": (ds.x_train[:n_fit], ds.y_train[:n_fit]), "held-out": (ds.x_train[n_fit:], ds.y_train[n_fit:]),
              "test": (ds.x_test, ds.y_test)}
    acc = {}
    for k, (x, y) in splits.items():
        if len(x):
            out = np.concatenate([sess.run(None, {"input": x[i:i + 1].astype(np.float32)})[0] for i in range(len(x))])
            acc[k] = float(np.mean(out.argmax(1) == y))
    print(f"{NAME}: trained in {time.perf_counter() - t:.0f} s; onnxruntime accuracy "
          + " ".join(f"{k} {a:.4f}" for k, a in acc.items()) + f" -> {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
