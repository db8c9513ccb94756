#!/usr/bin/env python
"""Benchmark: the C host path of one network-kernel start (issue 48), the x86 source of
:data:`hlsnn.network.hostmodel.X86`.

A compiled model's lowered network (``--model``, compiled here from
``configs/models/<model>.yaml``) with the C host path (:class:`hlsnn.network.nethost.CHost`)
on a stand-in board: the real buffers' layout in plain numpy (uncached: no flush), and
``netin.c``'s null register file (writes dropped, ``CTRL`` reads done), so that what is timed
is the host's own work. Medians over ``--calls`` calls, after a warm-up, in microseconds:

* ``call_f32`` / ``call_f64`` / ``call_u8``: one ``CHost.run`` of one image as the data set
  stores it (float32), as float64 and as uint8, as the loader calls it (``ints=False``: the
  values only): the Python wrapper, the ``ctypes`` call, rule 1 into the input buffer,
  ``ap_start`` and one poll (null), the outputs read once and dequantized; ``call_u8_ints``: the
  same with the integers copied out too (``run_image``'s default);
* ``ctypes_call``: ``hlsnn_in_quantize`` on no values (a 7-argument ``ctypes`` call);
* ``quant_value_f32_ns`` / ``quant_value_f64_ns`` / ``quant_value_u8_ns``: rule 1 in C per value
  (``hlsnn_in_quantize`` on 2**20 values: the image repeated); the float32 loop has no
  data-dependent branch and GCC vectorizes it on x86 (SSE2): run with ``CC="gcc
  -fno-tree-vectorize"`` for the scalar figure the boards' build (no NEON) stands for, which
  :data:`hlsnn.network.hostmodel.X86` takes;
* ``wrapper``: ``call_u8`` less the image's uint8 quantization (at the per-value cost of
  ``hlsnn_in_quantize``, whose 256-value table build makes it an upper bound of the lookup of
  ``hlsnn_in_run``): the Python and ``ctypes`` part of a start;
* ``softmax_c``: the Softmax of the outputs in the C call (``run(softmax=True)``, the loader's
  call for a network ``nethost.softmax_rule`` accepts) less the same call without it, timed
  alternately in one loop (medians of each);
* ``softmax``: the numpy host layers after the logits on the values the C call dequantized
  (:func:`hlsnn.deploy.lower.program.finish` with ``values``, as the loader calls it: the numpy
  Softmax of 10 values, no second dequantization); ``softmax_with_dequantize``: the same with
  the Python dequantization of the integers the loader no longer runs;
* ``python_quantize``: the numpy rule 1 it replaces (:func:`hlsnn.deploy.lower.program.quantize_input`).

Usage::

    python benchmarks/bench_c_host.py --model resnet8_digits32 --assignment twohot --calls 3000
    python benchmarks/bench_c_host.py --model resnet8_digits32 --assignment bfp8_z2 --calls 3000

A ``bfp_systolic`` network (float32 words in, its 64-bit words out, unpacked in C) reports
``call_f32``, ``softmax_c`` when ``nethost.softmax_rule`` takes it (bfp8: the pairs' Softmax
from its table, ``hlsnn_in_softmax_bfp``) and, for comparison, ``numpy_unpack`` (:func:`hlsnn.engines.bfp_systolic.network.kernel.finish_words`
and the pairs' dequantization in numpy, which the C call does for a batch of one).

CPU time (``time.process_time_ns`` is too coarse for one call: wall time, medians, on a shared
2-core machine; rerun to see the spread).
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

from hlsnn.network import artifact, nethost  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.network.board import io_words  # noqa: E402
from _common import median_us  # noqa: E402


class _Buf(np.ndarray):
    coherent = True                     # uncached: CHost passes no flush callback


class _StandIn:
    """A NetBoard's buffers and counters without pynq (module docstring)."""

    def __init__(self, net):
        self.net, self.ip, self.cfg = net, None, None
        self.n_in, self.n_out, self.in_words, self.out_words = io_words(net)
        self.inb = self.outb = None
        self._batch, self.starts = None, 0

    def _buffers(self, batch):
        if self._batch != batch:
            self.inb = np.zeros(batch * self.in_words, np.uint64).view(_Buf)
            self.outb = np.zeros(batch * self.out_words, np.uint64).view(_Buf)
            self._x8 = self.inb.view(np.int8).reshape(batch, -1)
            self._y8 = self.outb.view(np.int8).reshape(batch, -1)
            self._batch = batch

    def _free(self):
        self.inb = self.outb = None
        self._batch = None


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="resnet8_digits32")
    ap.add_argument("--assignment", default="twohot")
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args(argv)
    from hlsnn.cli import main as cli
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.hlsnn"
        if cli(["compile", str(ROOT / "configs" / "models" / f"{args.model}.yaml"), "--assignment",
                args.assignment, "-o", str(path)]) != 0:
            raise SystemExit("compile failed")
        net = netmode.lower(*artifact.read(path))
    from hlsnn.deploy import datasets
    x32 = np.ascontiguousarray(datasets.load("digits32").x_test[:1], np.float32)
    x64, xu8 = x32.astype(np.float64), np.round(x32 * 255).astype(np.uint8)
    board = _StandIn(net)
    host = nethost.CHost(board, null_registers=True)
    lib = nethost._lib()
    f, bits, mode = host.rule
    n = x32.size
    dst = np.empty(n, np.int8)
    res = {"model": args.model, "assignment": args.assignment, "values": n, "outputs": board.n_out,
           "calls": args.calls}
    if host.words:                                   # bfp_systolic: float32 words in, its words out
        from hlsnn.engines.bfp_systolic.network.kernel import finish_words
        from hlsnn.engines.bfp_systolic.network.lower import dequantize
        res["call_f32"] = median_us(lambda: host.run(x32), args.calls)
        if host.exps is not None:                    # bfp8: the C Softmax of the pairs (its table's rows)
            res["softmax_c"] = _softmax_c(host, x32, args.calls)
        words = np.zeros((1, board.out_words), np.uint64)
        res["numpy_unpack"] = median_us(lambda: dequantize(finish_words(net, None, words)), args.calls)
        print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}, indent=1))
        return
    for name, x in (("f32", x32), ("f64", x64), ("u8", xu8)):
        res[f"call_{name}"] = median_us(lambda x=x: host.run(x, ints=False), args.calls)
    res["call_u8_ints"] = median_us(lambda: host.run(xu8), args.calls)
    if host.exps is not None:                        # with and without the C Softmax, alternately
        res["softmax_c"] = _softmax_c(host, xu8, args.calls)
    empty = median_us(lambda: lib.hlsnn_in_quantize(x32.ctypes.data, 0, 0, f, bits, mode, dst.ctypes.data),
                       args.calls)
    res["ctypes_call"] = empty
    big = 1 << 20                                      # per value: 2**20 values, the call's cost negligible
    reps = -(-big // n)
    bigs = {name: np.ascontiguousarray(np.tile(a.reshape(-1), reps)[:big]) for name, a in
            (("f32", x32), ("f64", x64), ("u8", xu8))}
    dbig = np.empty(big, np.int8)
    for name, code in (("f32", 0), ("f64", 1), ("u8", 2)):
        xb = bigs[name]
        t = median_us(lambda xb=xb, code=code: lib.hlsnn_in_quantize(xb.ctypes.data, code, big, f, bits, mode,
                                                                       dbig.ctypes.data), max(20, args.calls // 100))
        res[f"quant_value_{name}_ns"] = t * 1e3 / big
    res["wrapper"] = res["call_u8"] - res["quant_value_u8_ns"] * n / 1e3
    q, yv = host.run(x32)
    res["softmax"] = median_us(lambda: netmode.finish(net, q, yv), args.calls)
    res["softmax_with_dequantize"] = median_us(lambda: netmode.finish(net, q), args.calls)
    res["python_quantize"] = median_us(lambda: netmode.quantize_input(net, x64), max(100, args.calls // 10))
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in res.items()}, indent=1))


def _softmax_c(host, x, calls):
    """``run(softmax=True)`` less ``run()``, timed alternately in one loop (medians of each), us."""
    ts = {True: [], False: []}
    host.run(x, ints=False, softmax=True)
    for i in range(2 * calls):
        sm = bool(i & 1)
        t0 = time.perf_counter_ns()
        host.run(x, ints=False, softmax=sm)
        ts[sm].append(time.perf_counter_ns() - t0)
    return (statistics.median(ts[True]) - statistics.median(ts[False])) / 1e3


if __name__ == "__main__":
    main()
