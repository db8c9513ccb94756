#!/usr/bin/env python
"""Benchmark: the ResNet-8-shaped model (configs/models/resnet8_digits32.yaml) deployed in every
format, against onnxruntime float32 on the same CPU (issue 16).

Per format (every assignment of the deployment config), on the emu target:

* accuracy on the test split, and top-1 agreement with onnxruntime's float outputs;
* images/s of the emulation (``Deployment.run`` over the test images, calibration excluded);
* the modelled board latency per image (batch 1), per engine layer and in total, from the cycle
  counts (``hlsnn.deploy.reports.report.layer_cycles``: the kernel calls of each layer costed by the
  cycle model of ``hlsnn perf``, at the accel config's clock). Host work (im2col, the residual
  Adds, requantization) and DMA set-up are not in it; sparse layers are counted on a synthetic
  layer at the densities the run measured. A model, not a measurement.

Baseline: ``onnxruntime.InferenceSession`` (CPU, float32): the test split in one ``run`` and
one image per ``run`` (median over ``--repeat``).

Usage::

    python benchmarks/bench_resnet8.py                    # all 360 test images, about 6 minutes
    python benchmarks/bench_resnet8.py --images 64 --json

The exit status is 0 whatever the outcome (a measurement).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))

from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import _layout, open_accelerators  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.reports.report import engine_input_shapes, layer_cycles  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(ROOT / "configs" / "models" / "resnet8_digits32.yaml"))
    ap.add_argument("--images", type=int, default=None, help="test images (default: the whole split)")
    ap.add_argument("--repeat", type=int, default=5, help="onnxruntime repetitions (default: %(default)s)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import onnxruntime as ort
    cfg = load_deploy_config(args.config)
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    x_cal = ds.x_train[:cfg.calibration["samples"]]
    x_test, y_test = ds.x_test[:args.images], ds.y_test[:args.images]
    n = len(x_test)
    sess = ort.InferenceSession(cfg.model, providers=["CPUExecutionProvider"])
    name_in = sess.get_inputs()[0].name
    x32 = np.asarray(x_test, np.float32)
    ort_probs = sess.run(None, {name_in: x32})[0]
    t_batch, t_one = [], []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        sess.run(None, {name_in: x32})
        t_batch.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        sess.run(None, {name_in: x32[:1]})
        t_one.append(time.perf_counter() - t0)
    ort_top1 = ort_probs.argmax(axis=1)
    res = {"config": cfg.name, "images": n,
           "onnxruntime": {"accuracy": float(np.mean(ort_top1 == y_test)),
                           "images_per_s": n / statistics.median(t_batch),
                           "ms_per_image_batch1": 1e3 * statistics.median(t_one)},
           "formats": {}}
    shapes = engine_input_shapes(cfg.model, net)
    accs = open_accelerators(cfg, "emu")
    try:
        for name, asg in cfg.assignments.items():
            dep = Deployment(net, asg, cfg.formats, accs, overflow_ratio=cfg.calibration["overflow_ratio"],
                             rounding=cfg.rounding)
            dep.calibrate(x_cal)
            t0 = time.perf_counter()
            probs = dep.run(x_test)
            dt = time.perf_counter() - t0
            top1 = probs.argmax(axis=1)
            per_layer = {}
            for layer in net.engine_layers():
                f = cfg.formats[asg.format_of(layer.name)]
                acc = accs[f.accel]
                st = dep.execs[layer.name].stats
                hw = shapes[layer.name][-2:] if layer.kind == "conv" else None
                r = layer_cycles(layer, acc.config, 1, fmt_type=f.type, in_hw=hw,
                                 weight_sparsity=st.weight_sparsity, input_density=st.input_density)
                per_layer[layer.name] = {"accel": acc.config.name, "cycles": r["cycles"], "us": r["us"],
                                         "bound": r["bound"], "mkn": [r["m"], r["k"], r["n"]]}
            res["formats"][name] = {
                "accuracy": float(np.mean(top1 == y_test)),
                "agreement_with_onnxruntime": float(np.mean(top1 == ort_top1)),
                "images_per_s": n / dt,
                "model_us_per_image": sum(v["us"] for v in per_layer.values()),
                "per_layer": per_layer}
    finally:
        for a in accs.values():
            a.close()
    if args.json:
        print(json.dumps(res))
        return 0
    o = res["onnxruntime"]
    print(f"{cfg.name}: {n} test images; onnxruntime float32 on this CPU: accuracy {100 * o['accuracy']:.2f}%, "
          f"{o['images_per_s']:,.0f} images/s batched, {o['ms_per_image_batch1']:.2f} ms for one image")
    print(f"  {'format':<10} {'accuracy':>9} {'agree':>7} {'emu img/s':>10} {'board model':>12}  per layer (us)")
    for name, v in res["formats"].items():
        layers = ", ".join(f"{k} {p['us']:.0f}" for k, p in v["per_layer"].items())
        print(f"  {name:<10} {100 * v['accuracy']:>8.2f}% {100 * v['agreement_with_onnxruntime']:>6.1f}% "
              f"{v['images_per_s']:>10.1f} {v['model_us_per_image'] / 1e3:>9.2f} ms  {layers}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
