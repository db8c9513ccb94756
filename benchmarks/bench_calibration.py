#!/usr/bin/env python
"""Benchmark: a U-Net's fixed8 calibration (a regression deployment's defaults: ``radix: search``,
``equalize: channels``, ``weight_scale: channel``, ``bias_correction: empirical``), its radix
search's runs through the compiled network mode (:mod:`hlsnn.deploy.run.fast`, which runs a U-Net's
data moves and average pools since session 27) against the numpy integer program that ran them
before (``fast.build`` refusing a program with such ops, as it did).

* Models: the family U-Nets of ``tests/data/torch/beyond`` (TorchScript exports), each deployed as
  ``tests/deploy/test_torch_beyond.py`` deploys a dense model (digits, the inputs as the targets,
  ``task_formats.resolve``'s regression defaults); 128 calibration images (``--images``).
* Per model: ``Deployment.calibrate`` on fresh deployments, the two series timed round robin
  (``--repeat`` rounds, a fresh order each round; medians), and a check that both choose the same
  radix points and give the same outputs on the test images (they must: the compiled path is the
  numpy program's bits, ``tests/deploy/test_netfast_moves.py``).
* Target: none (INFO); the speedup is reported. On a shared 2-core machine the figures move with
  the load: compare the two columns of one run, not runs.

Usage::

    python benchmarks/bench_calibration.py
    python benchmarks/bench_calibration.py --models v_f_unet_milesial_ts17 --repeat 5 --json
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

from hlsnn.deploy import datasets
from hlsnn.deploy.run import fast as netfast
from hlsnn.deploy.lower import program as netmode
from hlsnn.deploy.quantize import task_formats  # noqa: E402
from hlsnn.deploy.config import Assignment, FormatSpec  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402
from _common import interleaved_medians  # noqa: E402

DATA = ROOT / "tests" / "data" / "torch" / "beyond"
MODELS = ["v_f_unet_milesial_ts17", "v_f_unet_bil_ts17", "unet_convtranspose_ts17", "v_unet_size_ts17"]


def _refusing(build):
    """``fast.build`` as it was: None for a program with a data move, transpose, average pool
    or a dividing mean (the numpy program then ran it)."""
    def old(net, **kw):
        if any(op.kind in netmode.MOVE_KINDS or "div" in op.f for op in net.ops):
            return None
        return build(net, **kw)
    return old


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--models", nargs="*", default=MODELS)
    ap.add_argument("--images", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    acc = Accelerator(ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml", "emu")
    rows = {}
    build = netfast.build
    for name in args.models:
        net = load_onnx(DATA / f"{name}.onnx")
        layout = json.loads((DATA / "MANIFEST.json").read_text())["models"][name]["layout"]
        ds = datasets.load("digits", layout=layout)
        x_cal, x_test = ds.x_train[:args.images], ds.x_test[:64]
        fmts = {"fixed8": FormatSpec("fixed8", "fixed", "a", **task_formats.REGRESSION)}      # the regression defaults
        deps = {}

        def make(kind):
            def cal():
                netfast.build = build if kind == "compiled" else _refusing(build)
                try:
                    dep = Deployment(net, Assignment("fixed8", "fixed8", {}), fmts, {"a": acc})
                    t = dep.calibrate(x_cal)
                finally:
                    netfast.build = build
                deps[kind] = dep
                return t
            return cal
        samples = {}
        med = interleaved_medians({k: make(k) for k in ("numpy", "compiled")}, args.repeat, args.seed,
                                  self_timed=("numpy", "compiled"), samples=samples)
        same_points = all(
            (deps["numpy"].execs[k].f_x, deps["numpy"].execs[k].f_out) == (ex.f_x, ex.f_out)
            for k, ex in deps["compiled"].execs.items())
        same_out = bool(np.array_equal(deps["numpy"].run(x_test), deps["compiled"].run(x_test)))
        search = deps["compiled"].radix_search
        rows[name] = {"numpy_s": med["numpy"], "compiled_s": med["compiled"],
                      "speedup": med["numpy"] / med["compiled"], "runs": search["runs"],
                      "same_radix_points": same_points, "same_outputs": same_out,
                      "samples": {k: [round(v, 3) for v in vs] for k, vs in samples.items()}}
        print(f"{name:26s} numpy {med['numpy']:6.2f} s  compiled {med['compiled']:6.2f} s  "
              f"x{med['numpy'] / med['compiled']:4.1f}  ({search['runs']} runs; same points {same_points}, "
              f"same outputs {same_out})", file=sys.stderr if args.json else sys.stdout, flush=True)
    acc.close()
    if args.json:
        print(json.dumps({"images": args.images, "repeat": args.repeat, "models": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
