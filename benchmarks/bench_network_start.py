#!/usr/bin/env python
"""Benchmark: the host's cost of one network-kernel start on the simulated board (issue 31),
the source of :data:`hlsnn.network.latency.CPUS`'s ``net_start_us`` and ``quant_us``.

A compiled model's network path (``hlsnn.load(path, target="sim")``, one kernel start per
batch) at batch 1, after a warm-up call, over ``--calls`` calls; medians of:

* ``driver``: the pynq calls of one start (``NetSimBoard.last_driver_s``: the input buffer's
  fill and ``flush()``, three register writes, ``ap_start``, the last poll of ``ap_done``,
  ``invalidate()``, the read-back), with the kernel's C-simulation replaced, after one real
  call, by a stand-in returning that call's output (the simulated AXI master still reads
  and writes the simulated DDR). The simulated
  board's register and memory models run in Python here, where a board's MMIO is a store to
  a mapped page, so this is an upper bound of the x86 cost of those calls;
* ``pynq``: ``driver`` less the time spent in the simulated board's own models (its register
  file behind ``read_registers``/``write_registers``, the cache model behind ``flush()`` and
  ``invalidate()``, the device's install on entering its context): what is left is pynq's
  Python and numpy, the part a board runs as well (its MMIO a store to a mapped page, its
  syncs a cache-maintenance call that is not modelled here);
* ``quantize`` and ``finish``: rule 1 (the input's integers) and rule 5 (the logits'
  dequantization and the host layers after them) of :mod:`hlsnn.deploy.program`.

Usage::

    python benchmarks/bench_network_start.py                 # the digits CNN, two-hot
    python benchmarks/bench_network_start.py --model resnet8_digits32 --calls 30

A measurement on a shared machine: small, medians; ``driver`` is wall time (the call less the
kernel's start-to-done), ``quantize`` and ``finish`` CPU time.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "host"))

import hlsnn  # noqa: E402
from hlsnn.deploy import program as netmode  # noqa: E402
from hlsnn.network.build import compile_model  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402


class _ModelTime:
    """Seconds spent inside the simulated board's models (wrapped SimDevice methods)."""

    METHODS = ("read_registers", "write_registers", "_sync", "__enter__", "__exit__")

    def __init__(self):
        from hlsnn.runtime.sim.device import SimDevice
        self.s = 0.0
        for name in self.METHODS:
            setattr(SimDevice, name, self._timed(getattr(SimDevice, name)))

    def _timed(self, fn):
        def timed(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                self.s += time.perf_counter() - t
        return timed


def _cpu_median(fn, n):
    out = []
    for _ in range(n):
        t = time.process_time()
        fn()
        out.append(time.process_time() - t)
    return 1e6 * statistics.median(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="digits_cnn", choices=("digits_cnn", "resnet8_digits32"))
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    ds = datasets.load("digits32" if args.model == "resnet8_digits32" else "digits", layout="nchw")
    x = np.asarray(ds.x_test[:1], np.float64)
    models = _ModelTime()
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.hlsnn"
        compile_model(ROOT / "configs" / "models" / f"{args.model}.yaml", "twohot", path, calibration_samples=8)
        with hlsnn.load(path, target="sim") as net:
            board, prog = net._kernel, net.network
            xq = netmode.quantize_input(prog, x)
            want = board.run(xq)                   # the real kernel once; then a stand-in that returns
            board.kernel.run = lambda _xq: want    # its answer, so that its seconds do not swamp the driver's
            drv, own = [], []
            for _ in range(args.calls):
                m0 = models.s
                q = board.run(xq)
                t_models = models.s - m0 - board.last_kernel_s     # the kernel runs inside a register write
                drv.append(board.last_driver_s)
                own.append(board.last_driver_s - max(0.0, t_models))
            res = {"model": args.model, "calls": args.calls, "in_elems": int(xq.size),
                   "driver_us": 1e6 * statistics.median(drv), "pynq_us": 1e6 * statistics.median(own),
                   "quantize_us": _cpu_median(lambda: netmode.quantize_input(prog, x), args.calls),
                   "finish_us": _cpu_median(lambda: netmode.finish(prog, q), args.calls)}
    if args.json:
        print(json.dumps(res))
    else:
        print(f"{res['model']}, two-hot, network kernel on the sim board, batch 1, median of {args.calls} calls "
              f"(this machine):")
        print(f"  driver (pynq calls of one start, kernel excluded) {res['driver_us']:8.1f} us")
        print(f"  of which pynq's own Python and numpy              {res['pynq_us']:8.1f} us")
        print(f"  quantize ({res['in_elems']} input values)               {res['quantize_us']:8.1f} us")
        print(f"  finish (dequantize, host layers after the logits) {res['finish_us']:8.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
