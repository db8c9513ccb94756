#!/usr/bin/env python
"""Benchmark: sparse_cluster emulation cost vs density, and vs a float32 im2col + matmul.

Target: "Emulation cost follows the non-zeros: a 64-channel 56x56 3x3 convolution at 10%
density emulates at least 3x faster than at 100%, and at 100% within 3x of a float32 im2col +
matmul convolution of the same shape, measured side by side in one run."

* Layer: ``x`` (64, 56, 56) and ``w`` (64, 64, 3, 3), int8, 'same' padding, built per density
  (seeded) with both inputs and weights non-zero with probability ``density``; ``xp`` is the
  zero-padded input (64, 58, 58) as int64, as ``Kernel.plan`` makes it. ``p`` are the params of
  configs/accel/sparse8_pynq-z2.yaml (only ``rounding`` matters to the emulator).
* Timed, round robin (one call of each per repetition, in a fresh random order each time, so
  that every series sees the same clock, thermal and cache state and no series always follows
  the same neighbour), medians compared:

  - (A) the float32 baseline: ``sliding_window_view`` im2col of the padded input, made
    contiguous, ``(H'W', C k k) @ (C k k, Z)``;
  - (B) ``emulate(p, xp, w, bias, shift)`` at every density (its default ``method="auto"``:
    the emulator picks the compiled int32 direct convolution (``hlsnn/native/int_conv.c``, where
    its sums fit int32), the dense im2col + GEMM path, the compiled non-zero-pair path
    (``hlsnn/native/sparse_conv.c``, when it builds and loads) or the numpy non-zero-pair path
    by its own cost model; which one it picked is recorded once, outside the timing);
  - (C) the same call forced to each path, ``method="dense"``, ``method="native"`` (the
    compiled pair path) and ``method="sparse"`` (the numpy pair path), to find the densities
    below which each pair path is faster than the dense one (the "crossovers"). The numpy pair
    path is skipped where it would form more than ``--max-pairs`` pairs (memory: ~40 bytes
    each), the compiled one above ``--max-native-pairs`` (time: ~1 ns each), and the compiled
    one everywhere when it is unavailable (``HLSNN_NATIVE=0``, no C compiler);
  - (D) ``postprocess`` alone on the layer's accumulators (bias, int8 requantization): the
    part of ``emulate`` that does not shrink with the non-zeros.

* Targets: ``median B(100%) / median B(10%) >= 3`` and ``median B(100%) / median A <= 3``.
  Informational: the measured crossover densities, interpolated on log-log axes between the
  two measured densities where ``dense / pairs`` changes sign.
* Noise: CPU time of OTHER processes during the run (/proc/stat) and median/min per series;
  the run is flagged NOISY when other processes used more than 0.25 CPU or a series'
  median/min exceeds 1.5.

Usage::

    python benchmarks/bench_sparse.py
    python benchmarks/bench_sparse.py --threads 1 --json
    python benchmarks/bench_sparse.py --densities 1 0.1 0.05 0.03 0.02 --budget 10
    python benchmarks/bench_sparse.py --densities 1 0.5 0.3 0.25 0.2 0.15 0.1   # the native crossover
    HLSNN_NATIVE=0 python benchmarks/bench_sparse.py                            # numpy paths only

The exit status is 0 whatever the outcome (this is a measurement); look for the PASS/FAIL
lines (or "pass" in the JSON).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import OtherLoad  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
NOISY = 1.5
BUSY = 0.25


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--densities", type=float, nargs="+", default=[1.0, 0.5, 0.2, 0.1, 0.05, 0.02],
                    help="densities of inputs and weights (default 1 0.5 0.2 0.1 0.05 0.02); the targets "
                         "need 1 and 0.1")
    ap.add_argument("--channels", type=int, default=64, help="input = output channels (default 64)")
    ap.add_argument("--size", type=int, default=56, help="map height = width (default 56)")
    ap.add_argument("--ksize", type=int, default=3, help="kernel size (default 3)")
    ap.add_argument("--config", type=Path, default=CONFIG, help="sparse_cluster config (default sparse8_pynq-z2)")
    ap.add_argument("--budget", type=float, default=6.0,
                    help="approximate seconds of timed round-robin repetitions (default 6)")
    ap.add_argument("--min-reps", type=int, default=7, help="minimum repetitions (default 7)")
    ap.add_argument("--max-reps", type=int, default=200, help="maximum repetitions (default 200)")
    ap.add_argument("--max-pairs", type=float, default=2e7,
                    help="skip the forced numpy pair path above this many non-zero pairs (default 2e7)")
    ap.add_argument("--max-native-pairs", type=float, default=5e7,
                    help="skip the forced compiled pair path above this many non-zero pairs (default 5e7)")
    ap.add_argument("--target-drop", type=float, default=3.0, help="100%% / 10%% at least this (default 3)")
    ap.add_argument("--target-ratio", type=float, default=3.0,
                    help="100%% / float32 im2col+matmul at most this (default 3)")
    ap.add_argument("--threads", type=int, default=None,
                    help="set OPENBLAS/OMP/MKL_NUM_THREADS before numpy is imported")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object on stdout (the table goes to stderr)")
    return ap.parse_args(argv)


def make_layer(np, rng, c, z, size, k, d):
    def values(shape):
        v = rng.integers(-128, 127, shape)
        return np.where(v >= 0, v + 1, v)              # non-zero int8
    x = np.where(rng.random((c, size, size)) < d, values((c, size, size)), 0).astype(np.int64)
    w = np.where(rng.random((z, c, k, k)) < d, values((z, c, k, k)), 0).astype(np.int64)
    pad = (k - 1) // 2
    return np.pad(x, ((0, 0), (pad, pad), (pad, pad))), w


PATHS = {"_dense": "dense", "_native_pairs": "native", "_scatter": "pairs", "_direct": "direct"}


def which_path(em, p, xp, w, bias, shift):
    """The path emulate(method='auto') takes for these operands (recorded, not timed):
    'dense', 'native' (the compiled pair path), 'pairs' (the numpy pair path) or 'direct' (the
    compiled int32 direct convolution, int_conv.c)."""
    seen = []
    saved = {name: getattr(em, name) for name in PATHS}

    def spy(name):
        def f(*a):
            r = saved[name](*a)
            if r is not None:                               # _native_pairs: None = unavailable
                seen.append(PATHS[name])
            return r
        return f
    for name in PATHS:
        setattr(em, name, spy(name))
    try:
        em.emulate(p, xp, w, bias, shift)
    finally:
        for name, f in saved.items():
            setattr(em, name, f)
    return seen[0] if seen else "?"


def crossover(rows, key="pairs_ms"):
    """Density where the forced pair path (``key``) and dense path take the same time,
    interpolated on log-log axes between the neighbouring measured densities where their order
    changes."""
    pts = sorted((r["density"], math.log(r["dense_ms"] / r[key])) for r in rows
                 if r.get(key) and r.get("dense_ms"))
    for (d0, g0), (d1, g1) in zip(pts, pts[1:]):           # ascending density
        if g0 > 0 >= g1:
            t = g0 / (g0 - g1)
            return math.exp(math.log(d0) + t * (math.log(d1) - math.log(d0))), (d0, d1)
    if pts and all(g > 0 for _, g in pts):
        return None, ("pairs faster at every density measured", max(d for d, _ in pts))
    if pts and all(g <= 0 for _, g in pts):
        return None, ("dense faster at every density measured", min(d for d, _ in pts))
    return None, None


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        for k in THREAD_VARS:
            os.environ[k] = str(args.threads)
    import numpy as np
    import hlsnn
    from hlsnn.engines.sparse_cluster import emulator as em

    out = sys.stderr if args.json else sys.stdout
    cfg = hlsnn.load_config(args.config)
    p = cfg.params
    C = Z = args.channels
    S, k = args.size, args.ksize
    dense_macs = Z * C * k * k * S * S
    bias, shift = np.zeros(Z, np.int64), np.full(Z, 10, np.int64)

    has_native = em._native_lib() is not None
    layers, rows = {}, []
    for i, d in enumerate(args.densities):
        xp, w = make_layer(np, np.random.default_rng([args.seed, i]), C, Z, S, k, d)
        nnz_w = np.count_nonzero(w.reshape(Z, C, -1), axis=(0, 2))
        nnz_x = np.count_nonzero(xp.reshape(C, -1), axis=1)
        pairs = int((nnz_w * nnz_x).sum())
        layers[d] = (xp, w)
        rows.append({"density": d, "density_x": float(np.count_nonzero(xp)) / (C * S * S),
                     "density_w": float(np.count_nonzero(w)) / w.size, "pairs": pairs,
                     "pairs_per_mac": pairs / dense_macs, "auto_path": which_path(em, p, xp, w, bias, shift),
                     "pairs_timed": pairs <= args.max_pairs,
                     "native_timed": has_native and pairs <= args.max_native_pairs})

    # the float32 baseline of the same shape (operands from the 100 % layer, or the densest)
    xp0, w0 = layers[max(args.densities)]
    x32, w32 = xp0.astype(np.float32), w0.reshape(Z, -1).astype(np.float32)

    def baseline():
        win = np.lib.stride_tricks.sliding_window_view(x32, (k, k), axis=(1, 2))      # (C, H', W', k, k)
        cols = np.ascontiguousarray(win.transpose(1, 2, 0, 3, 4)).reshape(S * S, C * k * k)
        return cols @ w32.T

    calls = [("baseline", None, baseline)]
    for r in rows:
        xp, w = layers[r["density"]]
        calls.append(("auto", r["density"], lambda xp=xp, w=w: em.emulate(p, xp, w, bias, shift)))
        calls.append(("dense", r["density"], lambda xp=xp, w=w: em.emulate(p, xp, w, bias, shift, method="dense")))
        if r["pairs_timed"]:
            calls.append(("pairs", r["density"],
                          lambda xp=xp, w=w: em.emulate(p, xp, w, bias, shift, method="sparse")))
        if r["native_timed"]:
            calls.append(("native", r["density"],
                          lambda xp=xp, w=w: em.emulate(p, xp, w, bias, shift, method="native")))
        acc = em.conv_accumulate(xp, w)
        calls.append(("post", r["density"],
                      lambda acc=acc: em.postprocess(acc, bias, shift, rounding=p["rounding"])))
    # correctness first: the forced paths agree with the automatic one
    for r in rows:
        xp, w = layers[r["density"]]
        ref = em.emulate(p, xp, w, bias, shift)[0]
        assert np.array_equal(ref, em.emulate(p, xp, w, bias, shift, method="dense")[0])
        if r["pairs_timed"]:
            assert np.array_equal(ref, em.emulate(p, xp, w, bias, shift, method="sparse")[0])
        if r["native_timed"]:
            assert np.array_equal(ref, em.emulate(p, xp, w, bias, shift, method="native")[0])

    sys.stdout.flush()
    print(f"  timing {len(calls)} calls round robin ...", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    for _, _, f in calls:                                   # warm-up
        f()
    one = time.perf_counter() - t0
    reps = int(min(args.max_reps, max(args.min_reps, args.budget / max(one, 1e-9))))
    times = {(kind, d): [] for kind, d, _ in calls}
    pc = time.perf_counter
    order = random.Random(args.seed)
    with OtherLoad() as other:
        for _ in range(reps):                           # every call once per repetition, in a new order
            for kind, d, f in order.sample(calls, len(calls)):
                t = pc(); f(); times[(kind, d)].append(pc() - t)
    med = {key: statistics.median(v) * 1e3 for key, v in times.items()}
    spread = {key: statistics.median(v) / min(v) for key, v in times.items()}
    base = med[("baseline", None)]
    for r in rows:
        d = r["density"]
        r["emulate_ms"], r["dense_ms"] = med[("auto", d)], med[("dense", d)]
        r["pairs_ms"] = med.get(("pairs", d))
        r["native_ms"] = med.get(("native", d))
        r["post_ms"] = med[("post", d)]
        r["faster_path"] = min((r[f"{kind}_ms"], kind) for kind in ("dense", "native", "pairs")
                               if r[f"{kind}_ms"] is not None)[1]
        r["vs_baseline"] = r["emulate_ms"] / base
    by_d = {r["density"]: r for r in rows}
    d_cross, bracket = crossover(rows)
    d_cross_native, bracket_native = crossover(rows, "native_ms")
    max_spread = max(spread.values())
    noisy = max_spread > NOISY or (other.cpus or 0.0) > BUSY

    # ---------------------------------------------------------------- table
    try:
        blas = np.show_config(mode="dicts").get("Build Dependencies", {}).get("blas", {}).get("name", "?")
    except Exception:  # older numpy
        blas = "?"
    print(f"# numpy {np.__version__} ({blas}), {os.cpu_count()} CPUs"
          + (f", threads {args.threads}" if args.threads else "")
          + f"; {C}->{Z} channels, {S}x{S}, {k}x{k} 'same' ({dense_macs:,} MACs); {reps} round-robin "
          f"repetitions, medians", file=out)
    print(f"# baseline (A): float32 im2col (sliding_window_view) + matmul: {base:.2f} ms", file=out)
    hdr = (f"{'density':>7} {'x nz':>6} {'w nz':>6} {'pairs':>12} {'pairs/MAC':>9} {'auto':>6} "
           f"{'emulate ms':>10} {'vs 100%':>7} {'vs f32':>6} {'dense ms':>9} {'native ms':>9} {'pairs ms':>9} "
           f"{'faster':>6} {'post ms':>7}")
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    full = by_d.get(1.0)
    for r in rows:
        drop = f"{full['emulate_ms'] / r['emulate_ms']:6.2f}x" if full else f"{'-':>7}"
        pm = f"{r['pairs_ms']:9.2f}" if r["pairs_ms"] is not None else f"{'skipped':>9}"
        nm = (f"{r['native_ms']:9.2f}" if r["native_ms"] is not None
              else f"{'skipped' if has_native else 'n/a':>9}")
        print(f"{r['density']:7.3g} {r['density_x']:6.3f} {r['density_w']:6.3f} {r['pairs']:12,d} "
              f"{r['pairs_per_mac']:9.4f} {r['auto_path']:>6} {r['emulate_ms']:10.2f} {drop} "
              f"{r['vs_baseline']:5.2f}x {r['dense_ms']:9.2f} {nm} {pm} {r['faster_path']:>6} "
              f"{r['post_ms']:7.2f}", file=out)
    print("  auto = the path emulate() chose (its default method='auto'; native = the compiled pair path, "
          "pairs = the numpy one);\n  vs 100% = emulate(100%) / emulate(this); vs f32 = emulate / float32 "
          "baseline;\n  dense / native / pairs ms = emulate forced to method='dense' / 'native' / 'sparse' (the "
          f"compiled pair path is skipped above\n  {args.max_native_pairs:.0e} pairs, the numpy one above "
          f"{args.max_pairs:.0e}); post ms = postprocess() alone (bias, int8 requantization),\n  a floor under "
          "every path", file=out)

    def cross_text(name, d_x, br):
        if d_x is not None:
            return (f"the {name} pair path is faster than the dense path below density ~{d_x:.3f} "
                    f"(interpolated between {br[0]:g} and {br[1]:g})")
        if br:
            return f"{name} crossover not bracketed: {br[0]} (down to/up to {br[1]:g})"
        return f"{name} crossover not measured (that pair path was not timed)"
    cross_txt = cross_text("numpy", d_cross, bracket)
    native_txt = (cross_text("compiled", d_cross_native, bracket_native) if has_native
                  else "the compiled pair path is unavailable (HLSNN_NATIVE=0, no C compiler or a failed compile)")
    auto_txt = []
    for path in ("native", "pairs"):
        sw = sorted(r["density"] for r in rows if r["auto_path"] == path)
        if sw:
            auto_txt.append(f"the {path} path at density {min(sw):g}..{max(sw):g} "
                            f"(pairs/MAC up to {by_d[max(sw)]['pairs_per_mac']:.4f})")
    auto_txt = ("emulate(method='auto') takes " + " and ".join(auto_txt) if auto_txt
                else "emulate(method='auto') takes the dense path at every density measured")
    print(f"  crossovers: {native_txt};\n              {cross_txt}", file=out)
    print(f"  other processes used {other.cpus if other.cpus is not None else float('nan'):.2f} CPUs; "
          f"largest median/min {max_spread:.2f}" + ("  [NOISY]" if noisy else ""), file=out)
    print(file=out)

    verdicts = []
    if full and 0.1 in by_d:
        drop10 = full["emulate_ms"] / by_d[0.1]["emulate_ms"]
        ok = drop10 >= args.target_drop
        verdicts.append(ok)
        print(f"{'PASS' if ok else 'FAIL'}: emulate at 10% density is {drop10:.2f}x faster than at 100% "
              f"(target >= {args.target_drop:g}x; auto path at 10%: {by_d[0.1]['auto_path']})", file=out)
    else:
        drop10 = None
        print("INFO: the 10%-vs-100% target needs densities 1 and 0.1", file=out)
    if full:
        ratio = full["emulate_ms"] / base
        ok = ratio <= args.target_ratio
        verdicts.append(ok)
        print(f"{'PASS' if ok else 'FAIL'}: emulate at 100% density takes {ratio:.2f}x the float32 "
              f"im2col + matmul (target <= {args.target_ratio:g}x)", file=out)
    else:
        ratio = None
    print(f"INFO: {native_txt}; {cross_txt}; {auto_txt}", file=out)
    if full and 0.1 in by_d:
        floor = full["emulate_ms"] / by_d[0.1]["post_ms"]
        print(f"INFO: postprocess alone takes {by_d[0.1]['post_ms']:.2f} ms at 10% (it does not shrink with the "
              f"non-zeros): even a free convolution would make 10% at most {floor:.2f}x faster than 100%", file=out)
    else:
        floor = None
    all_pass = bool(verdicts) and all(verdicts)
    print(f"{'PASS' if all_pass else 'FAIL'}: overall ({sum(verdicts)}/{len(verdicts)} targets)"
          + (" [NOISY: rerun on a quiet machine or with --threads 1]" if noisy else ""), file=out)

    if args.json:
        print(json.dumps({
            "benchmark": "sparse_emulator",
            "target": (f"emulate(100%)/emulate(10%) >= {args.target_drop:g} and "
                       f"emulate(100%)/float32 im2col+matmul <= {args.target_ratio:g}"),
            "environment": {"python": platform.python_version(), "numpy": np.__version__, "blas": blas,
                            "cpus": os.cpu_count(), "threads": args.threads, "other_cpus": other.cpus,
                            "native": has_native},
            "shape": {"C": C, "Z": Z, "H": S, "W": S, "k": k, "dense_macs": dense_macs},
            "reps": reps, "baseline_ms": base, "results": rows,
            "drop_100_vs_10": drop10, "ratio_100_vs_baseline": ratio,
            "crossover_density": d_cross, "crossover_bracket": bracket,
            "crossover_density_native": d_cross_native, "crossover_bracket_native": bracket_native,
            "best_possible_drop_100_vs_10": floor,
            "max_spread": max_spread, "noisy": noisy, "pass": all_pass}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
