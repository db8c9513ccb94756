"""Where a sparse model's int8 step loses: one part of the int8 quantization turned off at a time.

Takes a ``scripts/train_qat.py --save-pruned`` checkpoint (the pruned float model the int8 step
starts from), folds and prepares it as the script's int8 step does (``--weight-scale``,
``--clip-stats``, ``--fold-constants`` as there), calibrates it statically on the first
``--calibration-samples`` training images, and compares post-training-quantized variants with the
folded float model on the training and validation images (never the test images): the share of
images whose class differs from the float model's (*disagree*), the relative RMS error of the
logits, and the accuracies. Variants: everything int8 (the deployment before fine-tuning); every
weight float; every activation float; one layer boundary float (the output of layer i and the
input of layer i + 1); one layer's weights float; and, with ``--unsigned``, activations that a
ReLU or the input makes non-negative held as *unsigned* 8-bit values (0..255). That last variant
is NOT a format of any engine (``sparse_cluster`` activations are signed int8): it measures what
such a format would give. Prints a table; ``--json`` one JSON line.

    PYTHONPATH=host python scripts/int8_ablation.py CKPT.pt --weight-scale channel --clip-stats clipped \\
        --fold-constants --unsigned
"""
from __future__ import annotations

import argparse
import copy
import json
import pathlib
import sys
import tempfile

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="a scripts/train_qat.py --save-pruned file")
    ap.add_argument("--weight-scale", choices=["tensor", "channel"], default=None)
    ap.add_argument("--clip-stats", choices=["off", "clipped"], default="off")
    ap.add_argument("--fold-constants", action="store_true")
    ap.add_argument("--calibration-samples", type=int, default=128)
    ap.add_argument("--unsigned", action="store_true",
                    help="also the variant with unsigned 8-bit non-negative activations (not an engine format)")
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    a = ap.parse_args(argv)

    import torch
    from torch import nn
    from export_torch_models import _tiny_models
    from hlsnn.deploy import datasets
    from hlsnn.train import (calibrate, fold_batchnorm, fold_constant_channels, hold_zeros, prepare,
                             quantized_layers)
    from hlsnn.train.data import split_images

    try:       # weights_only: tensors and plain containers, no code from the file runs
        ck = torch.load(a.checkpoint, weights_only=True)
    except Exception as exc:       # torch's unpickler raises what the bytes lead it to (IndexError, ...)
        ap.error(f"{a.checkpoint}: not a scripts/train_qat.py --save-pruned checkpoint "
                 f"({type(exc).__name__}: {str(exc)[:200]})")
    if not (isinstance(ck, dict) and isinstance(ck.get("args"), dict) and isinstance(ck.get("model"), dict)
            and ck["args"].get("model") in ("resnet8", "dscnn", "mobilenet_relu", "mobilenet_relu6")):
        ap.error(f"{a.checkpoint}: not a scripts/train_qat.py --save-pruned checkpoint (no model state and options)")
    args, state = ck["args"], ck["model"]
    if args.get("format") != "sparse":
        ap.error(f"{a.checkpoint}: format {args.get('format')!r}; this ablation is of a sparse model's int8 step "
                 "(a --format sparse checkpoint)")
    torch.set_num_threads(1)
    ds = datasets.load("digits32")
    # the checkpoint's training and held-out images, as its train_qat.py run split them
    x_train, y_train, x_val, y_val, _, _ = split_images(ds, fold=args.get("fold"), val=int(args.get("val") or 0),
                                                        val_seed=int(args.get("val_seed") or 0))
    xtr = torch.tensor(x_train, dtype=torch.float32)
    ytr = np.asarray(y_train)
    if x_val is not None:
        xva, yva = torch.tensor(x_val, dtype=torch.float32).double(), np.asarray(y_val)
    else:
        xva, yva = xtr[:0].double(), ytr[:0]
    if not 0 < a.calibration_samples <= len(xtr):
        ap.error(f"--calibration-samples {a.calibration_samples}: between 1 and the {len(xtr)} training images")
    model = _tiny_models(nn)[args["model"]][0]
    model.load_state_dict(state)
    model.eval()
    cfg = pathlib.Path(tempfile.mkdtemp()) / "deploy.yaml"
    cfg.write_text("name: ablation\nmodel: m.onnx\ndata: digits32\n"
                   f"calibration: {{samples: {a.calibration_samples}, mode: static"
                   + (f", clip_stats: {a.clip_stats}" if a.clip_stats != "off" else "") + "}\n"
                   "formats:\n  f:\n    type: sparse\n    accel: sparse8_pynq-z2\n"
                   + (f"    weight_scale: {a.weight_scale}\n" if a.weight_scale else ""))
    fm = fold_batchnorm(copy.deepcopy(model).eval())
    if a.fold_constants:
        fold_constant_channels(fm)
    x_all = torch.cat([xtr.double(), xva])
    with torch.no_grad():
        ref = fm.double()(x_all).numpy()
    fm.float()
    x_cal = xtr[:a.calibration_samples].double()

    def build(unsigned=False):
        q = prepare(copy.deepcopy(fm), cfg)
        hold_zeros(q)
        q.eval().double()
        if unsigned:            # not an engine format: what unsigned non-negative activations would give
            for i, (_, m) in enumerate(quantized_layers(q)):
                if m.relu:
                    m.oq.signed = False
                if i == 0 and float(x_all.min()) >= 0 or i > 0:
                    m.aq.signed = False
        return q

    def layers(q):
        return [m for _, m in quantized_layers(q)]

    def float_weights(m):
        m.quantized_weight = lambda m=m: m.weight if m.prune_mask is None else m.weight * m.prune_mask

    rows = []

    def score(q, name):
        with torch.no_grad():
            calibrate(q, x_cal)
            out = q(x_all).numpy()
        n = len(ytr)
        rows.append({"variant": name,
                     "disagree_pct": round(100 * float(np.mean(out.argmax(1) != ref.argmax(1))), 2),
                     "rel_err": round(float(np.sqrt(np.mean((out - ref) ** 2) / np.mean(ref ** 2))), 4),
                     "train_acc": round(100 * float(np.mean(out[:n].argmax(1) == ytr)), 2),
                     "val_acc": round(100 * float(np.mean(out[n:].argmax(1) == yva)), 2) if len(yva) else None})

    n = len(ytr)
    rows.append({"variant": "float (reference)", "disagree_pct": 0.0, "rel_err": 0.0,
                 "train_acc": round(100 * float(np.mean(ref[:n].argmax(1) == ytr)), 2),
                 "val_acc": round(100 * float(np.mean(ref[n:].argmax(1) == yva)), 2) if len(yva) else None})
    q = build()
    names = [name for name, _ in quantized_layers(q)]
    score(q, "int8 (weights and activations)")
    q = build()
    for m in layers(q):
        float_weights(m)
    score(q, "weights float")
    q = build()
    for m in layers(q):
        m.aq = m.oq = None
    score(q, "activations float")
    for i, name in enumerate(names):
        q = build()
        ms = layers(q)
        ms[i].oq = None
        if i + 1 < len(ms):
            ms[i + 1].aq = None
        score(q, f"boundary after layer {name} float")
    for i, name in enumerate(names):
        q = build()
        float_weights(layers(q)[i])
        score(q, f"layer {name}'s weights float")
    if a.unsigned:
        score(build(unsigned=True), "unsigned 8-bit non-negative activations (not an engine format)")
    if a.json:
        print(json.dumps({"checkpoint": a.checkpoint, "images": {"train": n, "val": len(yva)}, "rows": rows}))
        return
    print(f"{'variant':66s} {'disagree %':>10s} {'rel. err':>9s} {'train %':>8s} {'val %':>7s}")
    for r in rows:
        print(f"{r['variant']:66s} {r['disagree_pct']:10.2f} {r['rel_err']:9.4f} {r['train_acc']:8.2f} "
              f"{'' if r['val_acc'] is None else format(r['val_acc'], '.2f'):>7s}")


if __name__ == "__main__":
    main()
