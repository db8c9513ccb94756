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
  dequantization and the host layers after them) of :mod:`hlsnn.deploy.lower.program`.

With ``--hlsnn NAME.hlsnn ...`` (compiled models, e.g. the one-start models of
``tests/fixtures/torch_families/variant_sixth.py``; several side by side in one run, so that their
ratios share the machine's load), each model's whole host path instead, the call as a user makes it
(``hlsnn.load(path, target="sim")``, ``net.run(x)`` on one image, the real kernel's
C-simulation in every call); medians of:

(one image of the stored pairs as float32, the data sets' dtype)

* ``host_us``: ``net.last_host_s``, the call less the kernel's start-to-done (the input's check,
  the host ops before the start, the C host path's rule 1, register accesses, syncs and
  read-back, rule 5 and the host ops after the output), the real C-simulation running in
  between (it evicts the host's caches, as on a board the kernel does not);
* ``warm_us``: the same with the kernel's answer replayed after one real start (as ``driver``
  above), over ten times the calls; of which ``prefix_us`` (the host ops before the start,
  :mod:`hlsnn.deploy.lower.netprefix`) and ``driver_us`` (the C call less the kernel: rule 1, the
  simulated board's registers and syncs, the read-back);
* ``model_x86_us``: the latency model's host time for the same call on this machine
  (``hlsnn perf NAME.hlsnn --board x86-sim``: the C call of :data:`hlsnn.network.hostmodel.X86`,
  measured against a null register file by ``bench_c_host.py``, and the loader's steps around it,
  the host ops and the simulated board's share, measured by ``bench_loader_host.py``), and
  ``warm / model``;
* ``board``, ``z2_kernel_us``, ``z2_host_us``, ``z2_e2e_us``: the modelled kernel, host and
  end-to-end times on the model's board (its accelerator config's: PYNQ-Z2 or ZCU104; ``hlsnn perf
  NAME.hlsnn``, the figure ``hlsnn deploy`` reports as ``e2e us``).

Usage::

    python benchmarks/bench_network_start.py                 # the digits CNN, two-hot
    python benchmarks/bench_network_start.py --model resnet8_digits32 --calls 30
    python benchmarks/bench_network_start.py --hlsnn /tmp/hrep/*.hlsnn --calls 20

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
from hlsnn.deploy.lower import program as netmode  # noqa: E402
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


def compiled(paths, calls):
    """The ``--hlsnn`` rows (module docstring), one per compiled model."""
    from hlsnn.deploy.lower import netprefix
    from hlsnn.network import latency
    rows = []
    for p in paths:
        row = {"model": Path(p).stem}
        with hlsnn.load(p, target="sim") as net:
            x = np.ascontiguousarray(net.check["x"][:1], np.float32)     # as the data sets store images
            host = []
            for i in range(calls + 1):
                net.run(x)
                if i:                                   # the first call is a warm-up
                    host.append(net.last_host_s)
            row.update(path="network" if net.network is not None else "layers",
                       kernel_starts=net.last_kernel_starts, in_elems=int(x.size),
                       host_us=1e6 * statistics.median(host))
            n = net.network
            if n is not None and hasattr(net._kernel, "run_image"):
                kern = net._kernel.kernel              # its answer replayed: the host's steps alone, warm
                name = "run_words" if hasattr(kern, "run_words") else "run"
                real, got = getattr(kern, name), {}

                def replay(a, real=real, got=got):
                    if "y" not in got:
                        got["y"] = real(a)
                    return got["y"].copy()
                setattr(kern, name, replay)
                warm, drv = [], []
                for i in range(10 * calls + 1):
                    net.run(x)
                    if i:
                        warm.append(net.last_host_s)
                        drv.append(net._kernel.last_driver_s)
                xx = net._check_input(x, stored=net._c_path())
                row.update(warm_us=1e6 * statistics.median(warm), driver_us=1e6 * statistics.median(drv),
                           prefix_us=_wall_median(lambda: netprefix.run(n, xx), 10 * calls),
                           before=[e["op"] for e in n.host_before], after=[j["op"] for j in n.host_after])
        m, z2 = latency.model(p, board="x86-sim"), latency.model(p)
        row.update(model_x86_us=m["host_us"], board=z2["board"], z2_kernel_us=z2["kernel_us"], z2_host_us=z2["host_us"],
                   z2_e2e_us=z2["end_to_end_us"], model_path=z2["path"])
        rows.append(row)
    return rows


def _wall_median(fn, n):
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return 1e6 * statistics.median(out)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="digits_cnn", choices=("digits_cnn", "resnet8_digits32"))
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--hlsnn", nargs="+", metavar="NAME.hlsnn", help="compiled models instead, side by side")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.hlsnn:
        rows = compiled(args.hlsnn, args.calls)
        if args.json:
            print(json.dumps(rows))
            return 0
        print(f"the host per image on the sim board (this machine, batch 1, medians of {args.calls} calls; warm: "
              f"{10 * args.calls} calls, the kernel's answer replayed), modelled host on this machine; on the "
              f"model's board modelled")
        print(f"  {'model':<24} {'path':<8} {'starts':>6} {'host us':>8} {'warm us':>8} {'prefix':>7} {'driver':>7} "
              f"{'model us':>8} {'warm/model':>10} | {'board':<8} {'kernel':>7} {'host':>7} {'e2e':>7}")
        for r in rows:
            w = r.get("warm_us")
            print(f"  {r['model']:<24} {r['path']:<8} {r['kernel_starts']:>6} {r['host_us']:>8.1f} "
                  + (f"{w:>8.1f} {r['prefix_us']:>7.1f} {r['driver_us']:>7.1f} " if w is not None else f"{'':>24} ")
                  + f"{r['model_x86_us']:>8.1f} " + (f"{w / max(r['model_x86_us'], 1e-9):>10.2f}" if w else f"{'':>10}")
                  + f" | {r['board']:<8} {r['z2_kernel_us']:>7.1f} {r['z2_host_us']:>7.1f} {r['z2_e2e_us']:>7.1f}")
        return 0
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
