#!/usr/bin/env python
"""Benchmark: emulated inference of a whole model per format, against onnxruntime float32.

Target (issue 6): "Emulated inference of the digits CNN over the 360-image test split in
under 2 s per format; report images/s per format and the ratio to onnxruntime float32 on the
same machine in one run."

* Model and data: the deployment config (default configs/models/digits_cnn.yaml), its ONNX
  model and its test split; every assignment of the config (one per format).
* Per assignment: calibrate once on the config's calibration images (not timed), then time
  ``Deployment.run`` over the whole test split on the ``emu`` target (the stream protocol,
  packing and unpacking included, as in every target).
* Baseline: ``onnxruntime.InferenceSession`` (CPU, float32) on the same test split, in one
  ``run`` call.
* The series are timed round robin (one run of each per repetition, in a fresh random order
  each time) so that all see the same machine state; medians are reported.

Usage::

    python benchmarks/bench_deploy.py
    python benchmarks/bench_deploy.py --config configs/models/digits_mlp.yaml --repeat 5 --json

The exit status is 0 whatever the outcome; look for the PASS/FAIL lines (or "pass" in the JSON).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import _layout, open_accelerators  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from _common import interleaved_medians  # noqa: E402

LIMIT_S = 2.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--config", default=str(ROOT / "configs" / "models" / "digits_cnn.yaml"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    import onnxruntime as ort
    cfg = load_deploy_config(args.config)
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    x_cal, x_test = ds.x_train[:cfg.calibration["samples"]], ds.x_test
    sess = ort.InferenceSession(cfg.model, providers=["CPUExecutionProvider"])
    feed = {sess.get_inputs()[0].name: np.asarray(x_test, np.float32)}
    accs = open_accelerators(cfg, "emu")
    series = {"onnxruntime_float32": lambda: sess.run(None, feed)}
    try:
        for name, asg in cfg.assignments.items():
            dep = Deployment(net, asg, cfg.formats, accs, overflow_ratio=cfg.calibration["overflow_ratio"],
                             rounding=cfg.rounding)
            dep.calibrate(x_cal)
            series[name] = (lambda d: (lambda: d.run(x_test)))(dep)
        med = interleaved_medians(series, args.repeat, args.seed, warm_up=True)
    finally:
        for a in accs.values():
            a.close()
    base = med["onnxruntime_float32"]
    n = len(x_test)
    res = {"config": cfg.name, "images": n, "repeat": args.repeat, "limit_s": LIMIT_S,
           "onnxruntime_images_per_s": n / base, "formats": {}}
    for k, t in med.items():
        if k == "onnxruntime_float32":
            continue
        res["formats"][k] = {"seconds": t, "images_per_s": n / t, "slowdown_vs_onnxruntime": t / base,
                             "pass": t < LIMIT_S}
    res["pass"] = all(v["pass"] for v in res["formats"].values())
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"{cfg.name}: {n} test images, emu target, median of {args.repeat}; onnxruntime float32 "
          f"{base * 1e3:.2f} ms ({n / base:,.0f} images/s)")
    for k, v in res["formats"].items():
        print(f"  {k:<14} {v['seconds']:.3f} s  {v['images_per_s']:>9,.0f} images/s  "
              f"{v['slowdown_vs_onnxruntime']:>8.0f}x onnxruntime  {'PASS' if v['pass'] else 'FAIL'} (< {LIMIT_S} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
