#!/usr/bin/env python
"""Benchmark: emulated evaluation at a user's scale, against onnxruntime float32 (issue 32).

Target: "A batch of 1,000 images runs through the emulator in bfp and shift formats within
5x of onnxruntime float32's time on the same CPU, and in fixed/sparse formats within 20x.
Calibration uses ``calibration.samples`` images and no more, and it is as fast per image as
the run."

* **Models.** The ResNet-8 (``configs/models/resnet8_digits32.yaml``: bfp8, bfp16, twohot,
  pot, fixed8, sparse50) and the MobileNetV1-shaped model with ReLU6
  (``tests/data/torch/tiny/mobilenet_relu6_ts17.yaml``: bfp8, twohot, fixed8), or the
  deployment configs given with ``--config``.
* **Images.** ``--images`` (default 1000) test images, the test split repeated when it is
  shorter (digits32 has 360).
* **Per format** (every assignment of the config), on the ``emu`` target: the calibration
  (``Deployment.calibrate`` on the config's ``calibration.samples`` training images, each on a
  fresh deployment, the time ``calibrate`` returns: the median, and the first, which also
  pays for the first use of its memory), the cost of one more calibration image (per round,
  the time on twice the images less the time on once, per added image: what a larger
  calibration set costs, without the per-layer fixed costs; the median), and
  ``Deployment.run`` over the whole batch in one call.
* **Baseline.** ``onnxruntime.InferenceSession`` (CPU, float32, default threads) on the same
  batch in one ``run`` (a model exported with the batch fixed at 1 runs image by image): the
  issue's target is against this. onnxruntime is also timed on the batch in slices of 32 and
  256 images (on a 2-core machine it runs a 1,000-image batch about 3x slower per image than
  256-image slices); the ratio to its best time is printed beside (``ratio_to_best``).
* The series (runs and calibrations alike) are timed round robin (``--repeat`` rounds, a fresh
  random order each), so that all see the same machine state, 0.1 s apart (``SETTLE``: after
  a run onnxruntime's worker threads spin for tens of milliseconds, and whatever ran next took
  up to 35% longer); medians are compared.
* **Targets.** ``run / onnxruntime <= 5`` for ``bfp``, ``twohot`` and ``pot`` formats, ``<= 20``
  for ``fixed`` and ``sparse``; the calibration's time per image at most twice the run's
  (``--cal-ratio``: a fixed-point layer runs twice when calibrating, the preceding operation
  with the statistics unit and the main one).

Usage::

    python benchmarks/bench_eval_speed.py                      # both models, 1000 images
    python benchmarks/bench_eval_speed.py --images 200 --repeat 1 --json

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

CONFIGS = [ROOT / "configs" / "models" / "resnet8_digits32.yaml",
           ROOT / "tests" / "data" / "torch" / "tiny" / "mobilenet_relu6_ts17.yaml"]
#: onnxruntime also runs the batch in slices of these many images (the fair baseline is its best)
ORT_SLICES = (32, 256)
#: seconds between timed calls (onnxruntime's worker threads spin for a while after a run)
SETTLE = 0.1
LIMITS = {"bfp": 5.0, "twohot": 5.0, "pot": 5.0, "fixed": 20.0, "sparse": 20.0}


def bench(cfg_path, n_images, repeat, seed):
    import onnxruntime as ort
    cfg = load_deploy_config(cfg_path)
    net = load_onnx(cfg.model)
    ds = datasets.load(cfg.data, layout=_layout(net, cfg.layout))
    x_cal = ds.x_train[:cfg.calibration["samples"]]
    x_cal2 = np.concatenate([ds.x_train] * -(-2 * len(x_cal) // len(ds.x_train)))[:2 * len(x_cal)]
    reps = -(-n_images // len(ds.x_test))
    x = np.concatenate([ds.x_test] * reps)[:n_images]
    sess = ort.InferenceSession(cfg.model, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    x32 = np.asarray(x, np.float32)
    if isinstance(inp.shape[0], int) and inp.shape[0] == 1:        # batch fixed at 1 by the export
        series = {"onnxruntime_float32": lambda: [sess.run(None, {inp.name: x32[i:i + 1]}) for i in range(len(x32))]}
    else:
        series = {"onnxruntime_float32": lambda: sess.run(None, {inp.name: x32})}
        for s in ORT_SLICES:              # the same batch in slices (onnxruntime's best is the fair baseline)
            series[f"onnxruntime_float32/{s}"] = (lambda s: lambda: [sess.run(None, {inp.name: x32[i:i + s]})
                                                                   for i in range(0, len(x32), s)])(s)
    accs = open_accelerators(cfg, "emu")
    cal_first, kinds, timed = {}, {}, set()
    try:
        for name, asg in cfg.assignments.items():
            def make(asg=asg):
                return Deployment(net, asg, cfg.formats, accs, overflow_ratio=cfg.calibration["overflow_ratio"],
                                  rounding=cfg.rounding, dynamic=cfg.calibration.get("mode") == "dynamic")
            # warm-up: the compiled helpers are built on a machine's first use (then cached on
            # disk); that is not calibration's cost
            make().calibrate(x_cal[:8])
            dep = make()
            cal_first[name] = dep.calibrate(x_cal)
            kinds[name] = sorted({cfg.formats[asg.format_of(lay.name)].type for lay in net.engine_layers()})
            series[name] = (lambda d: (lambda: d.run(x)))(dep)
            # calibrations on fresh deployments, timed by calibrate itself (not the deployment's making)
            series[name + "/cal"] = (lambda m: (lambda: m().calibrate(x_cal)))(make)
            series[name + "/cal2"] = (lambda m: (lambda: m().calibrate(x_cal2)))(make)
            timed |= {name + "/cal", name + "/cal2"}
        samples = {}
        med = interleaved_medians(series, repeat, seed, self_timed=timed, samples=samples, settle=SETTLE)
    finally:
        for a in accs.values():
            a.close()
    cal = {k[:-4]: med.pop(k) for k in list(med) if k.endswith("/cal")}
    # the cost of one more image: twice the images against once, round by round
    cal_more = {k[:-5]: float(np.median(np.subtract(samples[k], samples[k[:-1]]))) for k in list(med)
                if k.endswith("/cal2")}
    for k in cal_more:
        med.pop(k + "/cal2")
    base = med.pop("onnxruntime_float32")
    sliced = {int(k.split("/")[1]): med.pop(k) for k in list(med) if k.startswith("onnxruntime_float32/")}
    best = min([base] + list(sliced.values()))
    out = {"config": cfg.name, "images": n_images, "calibration_images": len(x_cal), "repeat": repeat,
           "onnxruntime_ms_per_image": base / n_images * 1e3,
           "onnxruntime_sliced_ms_per_image": {s: t / n_images * 1e3 for s, t in sliced.items()},
           "onnxruntime_best_ms_per_image": best / n_images * 1e3, "formats": {}}
    for k, t in med.items():
        limit = max(LIMITS[t_] for t_ in kinds[k])
        ratio = t / base
        cal_ms, run_ms = cal[k] / len(x_cal) * 1e3, t / n_images * 1e3
        out["formats"][k] = {"types": kinds[k], "run_ms_per_image": run_ms, "ratio": ratio, "limit": limit,
                             "ratio_to_best": t / best, "calibration_ms_per_image": cal_ms,
                             "first_calibration_ms_per_image": cal_first[k] / len(x_cal) * 1e3,
                             "calibration_ms_per_added_image": cal_more[k] / len(x_cal) * 1e3,
                             "pass": ratio <= limit}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--config", action="append", help="deployment config(s) (default: ResNet-8 and the MobileNet)")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cal-ratio", type=float, default=2.0,
                    help="calibration time per image at most this times the run's (default: %(default)s)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    res = [bench(c, args.images, args.repeat, args.seed) for c in (args.config or CONFIGS)]
    for r in res:
        for v in r["formats"].values():
            v["calibration_pass"] = v["calibration_ms_per_image"] <= args.cal_ratio * v["run_ms_per_image"]
    ok = all(v["pass"] and v["calibration_pass"] for r in res for v in r["formats"].values())
    if args.json:
        print(json.dumps({"models": res, "pass": ok}))
        return 0
    for r in res:
        sl = ", ".join(f"{t:.3f} in slices of {s}" for s, t in r["onnxruntime_sliced_ms_per_image"].items())
        print(f"{r['config']}: {r['images']} images, emu target, median of {r['repeat']}; onnxruntime float32 "
              f"{r['onnxruntime_ms_per_image']:.3f} ms/image in one batch ({sl or 'batch fixed at 1'}); "
              f"calibration on {r['calibration_images']} images")
        for k, v in r["formats"].items():
            print(f"  {k:<10} run {v['run_ms_per_image']:8.3f} ms/image {v['ratio']:7.1f}x onnxruntime "
                  f"({v['ratio_to_best']:.1f}x its best)  "
                  f"{'PASS' if v['pass'] else 'FAIL'} (<= {v['limit']:.0f}x)   calibration "
                  f"{v['calibration_ms_per_image']:8.3f} ms/image (first {v['first_calibration_ms_per_image']:.3f}, "
                  f"per added image {v['calibration_ms_per_added_image']:.3f})  "
                  f"{'PASS' if v['calibration_pass'] else 'FAIL'} (<= {args.cal_ratio:g}x the run's)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
