#!/usr/bin/env python
"""Benchmark: bit-exact float GEMM on the emulator vs numpy float32 matmul of the same shape.

Target (issue 18): ``Accelerator(cfg, "emu").gemm(x, w)`` (float in, float out: quantization
of x and w, the bit-exact kernel model, dequantization) within 3x the time of a numpy float32
matmul of the same shape, measured side by side in one run, at 512; the ratio at 128 and 1024
is reported.

For each size S and each format (by default the BFP configs bfp16_pynq-z2.yaml and
bfp8_zcu104.yaml; ``--engine shift_mac``: shift8_pynq-z2.yaml, two-hot, and
shift8_zcu104.yaml, dual PoT):

* x (S, S) and w (S, S) are random normal (x = |x| for unsigned activations).
* (A) ``x32 @ w32.T`` on float32 arrays, (B) ``Accelerator(cfg, "emu").gemm(x, w)`` (the
  target: the "full" column) and (C) the emulator core alone on operands quantized ONCE
  outside the timing (``emulate(p, xm, xe, wm, we, bm=None)`` for BFP, one exponent per row;
  ``emulate(p, xi, regs, ...)`` for shift_mac; information) are timed round robin A, B, C,
  A, B, C, ... so all see the same clock/thermal state; the medians are compared. The
  repetition count adapts to --budget (at least --min-reps).
* Every (size, format) point runs in a fresh Python process (``--no-isolate`` to run them
  all in this one): how many pages fresh multi-MB temporaries fault in depends on glibc
  malloc's adaptive thresholds, i.e. on what the process did before. A fresh process per
  point makes the result independent of the order.
* Noise checks, since the ratio is only meaningful on an otherwise idle machine: the CPU
  time other processes used during the point (from /proc/stat) and median/min of the
  timings; a point is flagged NOISY when either is high. With two BLAS threads on two
  CPUs, one busy CPU makes every float32 matmul wait for a scheduler slice (a 40 us
  matmul can take 15 ms), so the ratio can look far better than it is.

Usage::

    python benchmarks/bench_emulator.py                 # sizes 128 512 1024
    python benchmarks/bench_emulator.py --sizes 512 --engine shift_mac
    python benchmarks/bench_emulator.py --sizes 256 --json
    python benchmarks/bench_emulator.py --threads 1     # pin BLAS to one thread
    python benchmarks/bench_emulator.py --emulate mymodule.py:my_emulate   # another core (C)

The exit status is 0 whatever the outcome (this is a measurement); look for the PASS/FAIL
lines (or "pass" in the JSON).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import OtherLoad  # noqa: E402


ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIGS = (ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml",
                   ROOT / "configs" / "accel" / "bfp8_zcu104.yaml")
SHIFT_CONFIGS = (ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml",   # two-hot, signed
                 ROOT / "configs" / "accel" / "shift8_zcu104.yaml")    # dual PoT, unsigned
NOISY = 1.5          # median/min above this: the timings were disturbed
BUSY = 0.25          # other processes used more than this many CPUs during a point
THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[128, 512, 1024],
                    help="square GEMM sizes S (x and w are S x S); default 128 512 1024")
    ap.add_argument("--engine", choices=("bfp_systolic", "shift_mac"), default="bfp_systolic",
                    help="which engine's shipped configs to measure by default (default bfp_systolic)")
    ap.add_argument("--config", dest="configs", action="append", type=Path, default=None,
                    help="accelerator YAML whose params define a format (repeatable); default "
                         "bfp16_pynq-z2.yaml and bfp8_zcu104.yaml")
    ap.add_argument("--target-sizes", type=int, nargs="+", default=[512],
                    help="sizes the target applies to (default 512, as the issue states it); other "
                         "sizes are reported")
    ap.add_argument("--target-ratio", type=float, default=3.0,
                    help="the float gemm may take at most this many times float32 matmul (default 3)")
    ap.add_argument("--budget", type=float, default=1.5,
                    help="approximate seconds of timed A/B/C rounds per size and format "
                         "(default 1.5; --min-reps still applies)")
    ap.add_argument("--min-reps", type=int, default=5, help="minimum repetitions (default 5)")
    ap.add_argument("--max-reps", type=int, default=500, help="maximum repetitions (default 500)")
    ap.add_argument("--threads", type=int, default=None,
                    help="set OPENBLAS/OMP/MKL_NUM_THREADS before numpy is imported "
                         "(default: leave the environment as it is)")
    ap.add_argument("--emulate", default=None, metavar="FILE.py:FUNC",
                    help="time this function as the core (C) instead of hlsnn's emulate (same "
                         "signature), e.g. mymodule.py:my_emulate, to try a candidate "
                         "implementation under the same conditions; it is checked bit-exact "
                         "against hlsnn's emulate on the benchmark operands first")
    ap.add_argument("--no-isolate", action="store_true",
                    help="measure every point in this process (default: one fresh process per "
                         "size and format, so earlier points cannot change malloc's state)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--_point", nargs=2, metavar=("S", "CONFIG"), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object on stdout (the table goes to stderr)")
    return ap.parse_args(argv)


def blas_threads_info(np):
    """What we know about the BLAS thread count, without requiring threadpoolctl."""
    info = {"cpu_count": os.cpu_count(),
            "env": {k: os.environ[k] for k in THREAD_VARS if k in os.environ}}
    try:
        info["affinity_cpus"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        pass
    try:
        from threadpoolctl import threadpool_info  # optional
        pools = [{"api": d.get("internal_api"), "num_threads": d.get("num_threads"),
                  "version": d.get("version")} for d in threadpool_info()]
        info["threadpoolctl"] = pools
        blas = [d["num_threads"] for d in pools if d["api"] in ("openblas", "mkl", "blis")]
        info["blas_threads"] = blas[0] if blas else None
        info["source"] = "threadpoolctl"
    except ImportError:
        env = [int(os.environ[k]) for k in THREAD_VARS if os.environ.get(k, "").isdigit()]
        # OpenBLAS/MKL default to one thread per available CPU unless an env var caps them.
        info["blas_threads"] = env[0] if env else info.get("affinity_cpus", os.cpu_count())
        info["source"] = ("environment variable" if env else
                          "threadpoolctl not installed; assumed = available CPUs")
    try:
        cfg = np.show_config(mode="dicts")
        blas = cfg.get("Build Dependencies", {}).get("blas", {})
        info["blas"] = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
    except Exception:  # older numpy: show_config has no mode=
        info["blas"] = "unknown"
    return info




def loadavg():
    try:
        return list(os.getloadavg())
    except (AttributeError, OSError):  # pragma: no cover - not on Unix
        return None


def _minflt():
    try:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    except ImportError:  # pragma: no cover - not on Unix
        return 0


def round_robin(fns, budget, min_reps, max_reps):
    """Time the functions in turn (A, B, C, A, B, C, ...).

    Returns one list of times (s) per function and the minor page faults per call of each."""
    for f in fns:                                # warm-up: allocations, BLAS threads, caches
        f()
    t0 = time.perf_counter()
    for f in fns:
        f()
    one = time.perf_counter() - t0
    reps = int(min(max_reps, max(min_reps, budget / max(one, 1e-9))))
    times, faults = [[] for _ in fns], [0] * len(fns)
    pc = time.perf_counter
    for _ in range(reps):
        for i, f in enumerate(fns):
            f0 = _minflt()
            t = pc(); f(); times[i].append(pc() - t)
            faults[i] += _minflt() - f0
    return times, [f / reps for f in faults]


def _bfp_operands(cfg, x, w, args):
    """bfp_systolic: operands quantized once (one exponent per row); returns (bits, call)."""
    from hlsnn.engines.bfp_systolic.emulator import emulate
    from hlsnn.formats.bfp import quantize
    p = cfg.params
    m, e = p["mantissa_bits"], p["exponent_bits"]
    xq = quantize(x, m, axis=-1, exponent_bits=e, rounding=p["rounding"])
    wq = quantize(w, m, axis=-1, exponent_bits=e, rounding=p["rounding"])
    xm, xe = xq.mantissas, xq.exponents.ravel()
    wm, we = wq.mantissas, wq.exponents.ravel()
    if args.emulate:
        ref = emulate(p, xm, xe, wm, we, bm=None)
        emulate = load_function(args.emulate)
        got = emulate(p, xm, xe, wm, we, bm=None)
        if not (np.array_equal(ref[0], got[0]) and np.array_equal(ref[1], got[1]) and ref[2] == got[2]):
            raise SystemExit(f"{args.emulate} is not bit-exact with hlsnn's emulate")
    return m, lambda: emulate(p, xm, xe, wm, we, bm=None)


def _shift_operands(cfg, x, w, args):
    """shift_mac: integer activations at the largest fitting scale, weights quantized per row
    in the config's default mode, the register matrix built once; returns (bits, call)."""
    import hlsnn
    from hlsnn.engines.shift_mac.emulator import emulate
    p = cfg.params
    acc = hlsnn.Accelerator(cfg, "emu")
    mode = p["default_mode"]
    xi, _ = acc.kernel._act(np.abs(x) if not p["act_signed"] else x)
    wq = acc.kernel._quantize_weights(w, mode, min(3, p["max_delta"]) if mode == "twohot" else 0)
    regs, _, mode, delta = acc.kernel.registers(wq, mode)
    n = w.shape[0]
    bias = np.zeros(n, np.int64)
    shift = np.full(n, p["act_bits"] + (1 << p["exp_bits"]) - 2)
    call = lambda: emulate(p, xi, regs, bias, shift, n=n, mode=mode, delta=delta)  # noqa: E731
    if args.emulate:
        ref = call()
        alt = load_function(args.emulate)
        got = alt(p, xi, regs, bias, shift, n=n, mode=mode, delta=delta)
        if not (np.array_equal(ref[0], got[0]) and ref[1] == got[1]):
            raise SystemExit(f"{args.emulate} is not bit-exact with hlsnn's emulate")
        call = lambda: alt(p, xi, regs, bias, shift, n=n, mode=mode, delta=delta)  # noqa: E731
    return p["act_bits"], call


def measure_point(S, path, args):
    """One size and format: float32 matmul (A), the float gemm (B, the target) and the
    emulator core (C), round robin."""
    global np
    import numpy as np
    import hlsnn

    rng = np.random.default_rng([args.seed, S])      # the same x, w for every format
    x = rng.standard_normal((S, S))
    w = rng.standard_normal((S, S))
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    cfg = hlsnn.load_config(path)
    p = cfg.params
    m, core = (_shift_operands if cfg.engine == "shift_mac" else _bfp_operands)(cfg, x, w, args)
    row = {"size": S, "config": cfg.name, "config_file": str(Path(path)), "engine": cfg.engine,
           "mantissa_bits": m, "acc_bits": p["acc_bits"], "full_note": None}
    limits = (p.get("max_k"), p.get("max_n"))
    acc = hlsnn.Accelerator(cfg, "emu")
    xin = np.abs(x) if (cfg.engine == "shift_mac" and not p["act_signed"]) else x
    full = lambda: acc.gemm(xin, w)  # noqa: E731
    if cfg.engine == "shift_mac" and limits[0] is not None and S > limits[0]:
        row["full_note"] = f"skipped: K = {S} > max_k = {limits[0]}"
        fns = [lambda: x32 @ w32.T, core]
    else:
        fns = [lambda: x32 @ w32.T, full, core]
    with OtherLoad() as other:
        times, faults = round_robin(fns, args.budget, args.min_reps, args.max_reps)
    acc.close()
    ta = statistics.median(times[0])
    tc = statistics.median(times[-1])
    row.update({"reps": len(times[0]), "float32_ms": ta * 1e3, "float32_min_ms": min(times[0]) * 1e3,
                "emulate_ms": tc * 1e3, "emulate_ratio": tc / ta, "emulate_page_faults_per_call": faults[-1],
                "other_cpus": other.cpus})
    spread = [statistics.median(t) / min(t) for t in times]
    if len(times) == 3:
        tb = statistics.median(times[1])
        row.update({"full_gemm_ms": tb * 1e3, "full_gemm_min_ms": min(times[1]) * 1e3, "ratio": tb / ta,
                    "ratio_of_mins": min(times[1]) / min(times[0]), "pass": tb / ta <= args.target_ratio,
                    "full_page_faults_per_call": faults[1]})
    else:
        row.update({"full_gemm_ms": None, "full_gemm_min_ms": None, "ratio": None, "ratio_of_mins": None,
                    "pass": None, "full_page_faults_per_call": None})
    # median/min of the noisiest of the timings: ~1.0-1.2 on a quiet machine
    row["spread"] = max(spread)
    row["noisy"] = row["spread"] > NOISY or (other.cpus or 0.0) > BUSY
    return row


def load_function(spec):
    """``path/to/file.py:func`` or ``package.module:func`` -> the function."""
    import importlib
    import importlib.util
    target, _, name = spec.rpartition(":")
    if target.endswith(".py"):
        mspec = importlib.util.spec_from_file_location(Path(target).stem, target)
        module = importlib.util.module_from_spec(mspec)
        mspec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    return getattr(module, name)


def run_isolated(S, path, args):
    """measure_point in a fresh interpreter (same options), so the points do not share
    allocator state: glibc's malloc adapts its mmap/trim thresholds to the sizes a process
    has freed, which changes how many pages emulate()'s temporaries fault in."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--_point", str(S), str(path),
            "--target-ratio", repr(args.target_ratio), "--budget", repr(args.budget),
            "--min-reps", str(args.min_reps), "--max-reps", str(args.max_reps),
            "--seed", str(args.seed)] + (["--emulate", args.emulate] if args.emulate else [])
    proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ))
    if proc.returncode != 0:
        raise RuntimeError(f"point S={S} {path} failed:\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    args = parse_args(argv)
    if args.threads is not None:
        if "numpy" in sys.modules:  # pragma: no cover - only when imported as a module
            print("warning: numpy already imported; --threads may have no effect", file=sys.stderr)
        for k in THREAD_VARS:
            os.environ[k] = str(args.threads)
    if args._point:
        S, path = args._point
        print(json.dumps(measure_point(int(S), Path(path), args)))
        return 0

    import numpy as np

    configs = args.configs or list(DEFAULT_CONFIGS if args.engine == "bfp_systolic" else SHIFT_CONFIGS)
    out = sys.stderr if args.json else sys.stdout
    env = {"python": platform.python_version(), "numpy": np.__version__,
           "machine": platform.machine(), "processor": platform.processor() or None,
           "threads": blas_threads_info(np), "loadavg_start": loadavg(),
           "isolated_points": not args.no_isolate,
           "emulate": args.emulate or f"hlsnn.engines.{args.engine}.emulator:emulate"}
    th = env["threads"]
    print(f"# numpy {np.__version__} ({th['blas']}), BLAS threads: {th['blas_threads']} "
          f"({th['source']}); os.cpu_count() = {th['cpu_count']}"
          + (f", env {th['env']}" if th["env"] else "")
          + (f"; load average {env['loadavg_start'][0]:.2f}" if env["loadavg_start"] else ""), file=out)
    if args.emulate:
        print(f"# (C) is {args.emulate}, NOT hlsnn's emulate (checked bit-exact against it)",
              file=out)
    print("# (A) x32 @ w32.T float32, (B) full = Accelerator(cfg, 'emu').gemm(x, w) (the target), "
          "(C) core = the emulator alone on operands quantized once; round robin, medians"
          + ("; each point in a fresh process" if not args.no_isolate else ""), file=out)

    rows = []
    for S in args.sizes:
        for path in configs:
            print(f"  S={S:5d} {Path(path).name:<26s} timing ...", file=sys.stderr, flush=True)
            rows.append(measure_point(S, path, args) if args.no_isolate
                        else run_isolated(S, path, args))

    env["loadavg_end"] = loadavg()
    # ---------------------------------------------------------------- table
    target = "<=" + format(args.target_ratio, "g") + "x"
    hdr = (f"{'S':>5} {'format':<22} {'M':>2} {'reps':>5} {'f32 ms':>8} {'full ms':>8} "
           f"{'full ratio':>10} {target:>5} {'min-ratio':>9} {'core ms':>8} {'core ratio':>10} "
           f"{'spread':>6} {'other':>5} {'faults':>6}")
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    na = lambda v, fmt, w: f"{'n/a':>{w}}" if v is None else format(v, fmt)  # noqa: E731
    for r in rows:
        other = f"{r['other_cpus']:5.2f}" if r["other_cpus"] is not None else f"{'?':>5}"
        verdict = "n/a" if r["pass"] is None else ("yes" if r["pass"] else "no")
        print(f"{r['size']:5d} {r['config']:<22} {r['mantissa_bits']:2d} {r['reps']:5d} "
              f"{r['float32_ms']:8.3f} {na(r['full_gemm_ms'], '8.3f', 8)} {na(r['ratio'], '10.2f', 10)} "
              f"{verdict:>5} {na(r['ratio_of_mins'], '9.2f', 9)} {r['emulate_ms']:8.3f} {r['emulate_ratio']:10.2f} "
              f"{r['spread']:6.2f} {other} {na(r['full_page_faults_per_call'], '6.0f', 6)}", file=out)
    for r in rows:
        if r["full_note"]:
            print(f"  note: S={r['size']} {r['config']}: full gemm {r['full_note']}", file=out)
    print("  full ratio = median(full) / median(float32) (the target); min-ratio = min(full) / "
          "min(float32);\n  core ratio = median(core) / median(float32) (information); spread = "
          f"median/min of the noisiest timing (> {NOISY:g} flags the point as noisy);\n  other = CPUs "
          f"used by OTHER processes during the point (/proc/stat; > {BUSY:g} flags it as noisy);\n  "
          "faults = minor page faults per full gemm call (fresh multi-MB temporaries being mapped in)",
          file=out)
    if env["loadavg_end"]:
        print(f"  load average at the end: {env['loadavg_end'][0]:.2f} on {os.cpu_count()} CPUs",
              file=out)
    print(file=out)
    for r in rows:
        if r["pass"] is None:
            continue
        targeted = r["size"] in args.target_sizes
        verdict = ("PASS" if r["pass"] else "FAIL") if targeted else "INFO"
        oc = "?" if r["other_cpus"] is None else f"{r['other_cpus']:.2f}"
        noisy = (f"  [NOISY: spread {r['spread']:.1f}, other processes used {oc} CPUs; rerun "
                 f"on a quiet machine or with --threads 1]" if r["noisy"] else "")
        print(f"{verdict}: gemm {r['config']} ({r['mantissa_bits']}-bit) S={r['size']}: "
              f"{r['ratio']:.2f}x float32 matmul (target <= {args.target_ratio:g}x; core "
              f"{r['emulate_ratio']:.2f}x){noisy}", file=out)
    judged = [r for r in rows if r["size"] in args.target_sizes and r["pass"] is not None]
    all_pass = all(r["pass"] for r in judged)
    any_noisy = any(r["noisy"] for r in judged)
    print(f"{'PASS' if all_pass else 'FAIL'}: overall ({sum(r['pass'] for r in judged)}/{len(judged)} "
          f"points at S in {args.target_sizes} within {args.target_ratio:g}x; other sizes reported)"
          + (" [some points NOISY, see above]" if any_noisy else ""), file=out)

    if args.json:
        print(json.dumps({"benchmark": "emulator",
                          "target": f"Accelerator(cfg, 'emu').gemm median <= {args.target_ratio:g} x "
                                    f"float32 matmul median",
                          "target_ratio": args.target_ratio, "environment": env,
                          "results": rows, "pass": all_pass, "noisy": any_noisy}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
