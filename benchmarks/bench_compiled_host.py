#!/usr/bin/env python
"""Benchmark: the host's time per image of a network on the simulated board (issue 31).

For resnet8_digits32 (bfp16 on bfp16_pynq-z2, two-hot on shift8_pynq-z2), batch 1, ``--target
sim`` (the real pynq driver path on the simulated board), over ``--images`` test images after one
warm-up image:

* ``deploy``: the deployment runner (``hlsnn.deploy.run.runner.Deployment``, calibrated on 8
  training images), the path ``hlsnn deploy`` takes;
* ``compiled``: the compiled model (``hlsnn compile`` then ``hlsnn.load(path, target="sim")``),
  when this tree has it.

Host time, per image: the process's CPU time less the CPU time of the simulated kernel (the
generated C++ the sim board calls), and the wall time less the DMA waits the pynq target measures
(the simulated kernel runs inside them). On a loaded machine the CPU figure is the steadier one. Also: kernel starts and DMA bytes per image (the target's counters).

Usage::

    python benchmarks/bench_compiled_host.py --images 8            # this tree
    # another tree (before): its host/ folder first on the path
    HLSNN_BENCH_HOST=/path/to/other/host python benchmarks/bench_compiled_host.py

A measurement on a shared machine: small (a few images), medians of per-image times.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, os.environ.get("HLSNN_BENCH_HOST") or str(ROOT / "host"))

from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.deploy.config import load_deploy_config  # noqa: E402
from hlsnn.deploy.reports.evaluate import open_accelerators  # noqa: E402
from hlsnn.deploy.importer.onnx_import import load_onnx  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402

CONFIG = ROOT / "configs" / "models" / "resnet8_digits32.yaml"


class _KernelCpu:
    """CPU seconds spent in the simulated kernel (``CsimLibrary.run_stream``, the generated C++
    the sim board runs): subtracted from the process's CPU time, it leaves the host's share,
    a figure the machine's load does not inflate as it does wall time."""

    def __init__(self):
        from hlsnn.csim import CsimLibrary
        self.s, run = 0.0, CsimLibrary.run_stream

        def timed(lib, *a, **k):
            t = time.process_time()
            try:
                return run(lib, *a, **k)
            finally:
                self.s += time.process_time() - t
        CsimLibrary.run_stream = timed


KERNEL_CPU = None


class _Tally:
    """Kernel calls, DMA wait seconds and DMA bytes of the pynq targets (their ``last_timing``
    after every ``run``; works on trees without the targets' running totals)."""

    def __init__(self, targets):
        self.calls, self.wait, self.bytes = 0, 0.0, 0
        for t in targets:
            t.run = self._wrap(t, t.run)

    def _wrap(self, t, run):
        def counted(*a, **k):
            out = run(*a, **k)
            lt = t.last_timing
            self.calls, self.wait = self.calls + 1, self.wait + lt["transfer_s"]
            self.bytes += lt["bytes_in"] + lt["bytes_out"]
            return out
        return counted


def _targets(accs):
    return [a.target for a in accs]


def _measure(run, targets, xs):
    global KERNEL_CPU
    KERNEL_CPU = KERNEL_CPU or _KernelCpu()
    tally = _Tally(targets)
    run(xs[:1])                                   # warm-up: weights on chip, buffers allocated
    per, cpu, calls, nbytes = [], [], [], []
    for i in range(1, len(xs)):
        c0, k0 = (tally.calls, tally.wait, tally.bytes), KERNEL_CPU.s
        t0, p0 = time.perf_counter(), time.process_time()
        run(xs[i:i + 1])
        wall, proc = time.perf_counter() - t0, time.process_time() - p0
        per.append(wall - (tally.wait - c0[1]))
        cpu.append(proc - (KERNEL_CPU.s - k0))
        calls.append(tally.calls - c0[0])
        nbytes.append(tally.bytes - c0[2])
    return {"host_cpu_ms_per_image": 1e3 * statistics.median(cpu),
            "host_ms_per_image": 1e3 * statistics.median(per), "kernel_starts_per_image": statistics.median(calls),
            "dma_bytes_per_image": statistics.median(nbytes)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--assignments", default="bfp16,twohot")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    cfg = load_deploy_config(CONFIG)
    net = load_onnx(cfg.model)
    ds = datasets.load("digits32", layout="nchw")
    xs = ds.x_test[:args.images + 1]
    out = {}
    for name in args.assignments.split(","):
        row = {}
        accs = open_accelerators(cfg, "sim")
        try:
            dep = Deployment(net, cfg.assignments[name], cfg.formats, accs)
            dep.calibrate(ds.x_train[:8])
            row["deploy"] = _measure(dep.run, _targets(accs.values()), xs)
        finally:
            for a in accs.values():
                a.close()
        try:
            import hlsnn
            from hlsnn.network.build import compile_model
        except ImportError:
            row["compiled"] = None
        else:
            with tempfile.TemporaryDirectory() as d:
                path = Path(d) / f"{name}.hlsnn"
                compile_model(CONFIG, name, path, calibration_samples=8)
                with hlsnn.load(path, target="sim") as cn:
                    row["compiled"] = _measure(cn, _targets(cn.accs.values()), xs)
        out[name] = row
    if args.json:
        print(json.dumps(out))
    else:
        print(f"resnet8_digits32 on the sim board, batch 1, {args.images} images (median per image)")
        for name, row in out.items():
            for path, r in row.items():
                if r:
                    print(f"  {name:<8} {path:<9} host CPU {r['host_cpu_ms_per_image']:7.2f} ms  host wall "
                          f"{r['host_ms_per_image']:7.2f} ms  kernel starts "
                          f"{r['kernel_starts_per_image']:4.0f}  DMA bytes {r['dma_bytes_per_image']:>10,.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
