"""Quantization-aware fine-tuning with hlsnn.train on the tiny model shapes of
scripts/export_torch_models.py (digits32, CPU, one thread): float training, then a few epochs
of fine-tuning in a format, then the accuracy three ways on the same test images: the float
model, the prepared model's eval mode (torch) and the exported model deployed on the emu
target (hlsnn's deploy path). Prints one JSON line.

    PYTHONPATH=host python scripts/train_qat.py --model resnet8 --format pot
    PYTHONPATH=host python scripts/train_qat.py --model dscnn --format sparse --sparsity 0.9
    PYTHONPATH=host python scripts/train_qat.py --model mobilenet_relu6 --format fixed --mode dynamic

Formats: pot, twohot (shift8_pynq-z2), sparse (sparse8_pynq-z2, balanced magnitude pruning to
--sparsity on a cubic schedule over the first half of the fine-tuning), fixed (sparse8_pynq-z2,
int8, dynamic fixed point: the radix of every conversion from the current batch, E1).
"""
from __future__ import annotations

import argparse
import copy
import json
import pathlib
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet8", choices=["resnet8", "dscnn", "mobilenet_relu", "mobilenet_relu6"])
    ap.add_argument("--format", default="pot", choices=["pot", "twohot", "sparse", "fixed"])
    ap.add_argument("--sparsity", type=float, default=0.75)
    ap.add_argument("--mode", default="static", choices=["static", "dynamic"])
    ap.add_argument("--float-epochs", type=int, default=10)
    ap.add_argument("--qat-epochs", type=int, default=4)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--qat-lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency", action="store_true", help="modelled latency (always for sparse)")
    a = ap.parse_args(argv)

    import torch
    from torch import nn
    from export_torch_models import _tiny_models
    from hlsnn.deploy import datasets
    from hlsnn.train import BalancedPruner, calibrate, deployed, fold_batchnorm, prepare

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    ds = datasets.load("digits32")
    xtr, ytr = torch.tensor(ds.x_train, dtype=torch.float32), torch.tensor(ds.y_train)
    xte, yte = ds.x_test.astype(np.float64), np.asarray(ds.y_test)
    model = _tiny_models(nn)[a.model][0]
    t0 = time.time()

    def fit(m, epochs, lr, step=None):
        opt = torch.optim.Adam(m.parameters(), lr=lr)
        gen = torch.Generator().manual_seed(a.seed)
        for _ in range(epochs):
            m.train()
            for idx in torch.randperm(len(xtr), generator=gen).split(64):
                opt.zero_grad()
                nn.functional.cross_entropy(m(xtr[idx]), ytr[idx]).backward()
                opt.step()
                if step:
                    step()

    def acc(out):
        return float(np.mean(np.argmax(out, 1) == yte))

    fit(model, a.float_epochs, a.lr)
    model.eval()
    with torch.no_grad():
        float_acc = acc(model(torch.tensor(xte, dtype=torch.float32)).numpy())
    t_float = time.time() - t0

    accel = "shift8_pynq-z2" if a.format in ("pot", "twohot") else "sparse8_pynq-z2"
    tmp = pathlib.Path(tempfile.mkdtemp())
    cfg = tmp / "deploy.yaml"
    cfg.write_text(f"name: qat\nmodel: m.onnx\ndata: digits32\ncalibration: {{samples: 128, mode: {a.mode}}}\n"
                   f"formats:\n  f:\n    type: {a.format}\n    accel: {accel}\n")
    q = prepare(fold_batchnorm(copy.deepcopy(model).eval()), cfg)
    pruner = None
    if a.format == "sparse":
        steps = a.qat_epochs * ((len(xtr) + 63) // 64)
        pruner = BalancedPruner(q, a.sparsity, 0, max(1, steps // 2))
        pruner.apply(0.0)
    q.eval().double()
    with torch.no_grad():                                     # before fine-tuning (post-training quantization)
        if a.mode == "static":
            calibrate(q, xtr[:128].double())
        ptq_acc = acc(q(torch.tensor(xte)).numpy())
    q.float()
    calibrate(q, None)
    fit(q, a.qat_epochs, a.qat_lr, pruner.step if pruner else None)
    if pruner:
        pruner.apply(a.sparsity)
    q.eval().double()
    x_cal = xtr[:128].double()
    if a.mode == "static":
        calibrate(q, x_cal)
    with torch.no_grad():
        torch_out = q(torch.tensor(xte)).numpy()
    q.float()
    with deployed(q, torch.zeros(1, 3, 32, 32), cfg) as dep:
        dep.calibrate(x_cal.numpy())
        dep_out = dep.run(xte)
        latency = None
        if a.format == "sparse" or a.latency:
            from hlsnn.train.emulate import modelled_latency
            latency = modelled_latency(dep, xte[:1])
    res = {"model": a.model, "format": a.format, "mode": a.mode, "float_acc": float_acc, "ptq_acc": ptq_acc,
           "qat_eval_acc": acc(torch_out), "deployed_acc": acc(dep_out),
           "bit_exact": bool(np.array_equal(torch_out, dep_out)),
           "float_epochs": a.float_epochs, "qat_epochs": a.qat_epochs, "seconds_float": round(t_float, 1),
           "seconds_total": round(time.time() - t0, 1)}
    if latency:
        res["modelled_latency"] = latency
    if pruner:
        res["sparsity_target"] = a.sparsity
        res["pruned_layers"] = pruner.report()
    print(json.dumps(res))


if __name__ == "__main__":
    main()
