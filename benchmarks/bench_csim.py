#!/usr/bin/env python
"""Benchmark: C-simulation compile time and cached GEMM latency.

Target: "C-simulation: first compile of a kernel under 60 s; a cached 64x64x64 GEMM under 2 s."

For each config (default configs/accel/bfp16_pynq-z2.yaml; --config PATH; --all for every
configs/accel/*.yaml of a GEMM engine: bfp_systolic and shift_mac), in a fresh temporary build directory (``HLSNN_BUILD``), so nothing is
cached:

1. **cold**: ``Accelerator(cfg, "csim")`` — render the HLS project (templates, headers,
   testbench vectors computed by the emulator) + g++ compile of the kernel and bridge +
   dlopen. Reported with its render / compile split. Target: < 60 s.
2. **cached construction**: another ``Accelerator(cfg, "csim")`` in the same process (the
   library is found in the cache; render still runs and rewrites nothing).
3. **gemm**: ``acc.gemm(x, w, bias=b, relu=True)`` for x (64, 64), w (64, 64), b (64,):
   first call and median of --reps calls.
4. **new process** (what "a cached 64x64x64 GEMM" means to a user): a fresh
   ``python -c`` with the same ``HLSNN_BUILD`` that times
   ``acc = hlsnn.Accelerator(cfg, 'csim'); acc.gemm(x, w, bias=b, relu=True)`` after
   ``import hlsnn``; median of --subprocess-runs runs. Target: < 2 s. The wall time of the
   whole process (interpreter start + imports) is reported next to it.

Usage::

    python benchmarks/bench_csim.py
    python benchmarks/bench_csim.py --all --json
    python benchmarks/bench_csim.py --config configs/accel/bfp8_zcu104.yaml --keep

The exit status is 0 whatever the outcome (this is a measurement), unless C-simulation is
unavailable (no g++ or no ap_types headers), which exits 2.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import OtherLoad  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
ACCEL_DIR = ROOT / "configs" / "accel"
DEFAULT_CONFIG = ACCEL_DIR / "bfp16_pynq-z2.yaml"
COMPILE_TARGET_S = 60.0
GEMM_TARGET_S = 2.0
SHAPE = 64                      # batch = K = N

# Run in a fresh interpreter: times the cached construction + one GEMM after `import hlsnn`.
CHILD = r"""
import sys, time
t_start = time.perf_counter()
import numpy as np, hlsnn

t_import = time.perf_counter()
cfg, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = np.random.default_rng(seed)
x = np.abs(rng.standard_normal((n, n))); w = rng.standard_normal((n, n)); b = rng.standard_normal(n)
t = time.perf_counter()
acc = hlsnn.Accelerator(cfg, 'csim')
t_acc = time.perf_counter()
y = acc.gemm(x, w, bias=b, relu=True)
t_end = time.perf_counter()
print(f"{t_end - t:.6f} {t_acc - t:.6f} {t_end - t_acc:.6f} {t_import - t_start:.6f} {y.shape[0]}")
"""


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--config", type=Path, action="append", default=None,
                   help="accelerator YAML (repeatable); default configs/accel/bfp16_pynq-z2.yaml")
    g.add_argument("--all", action="store_true", help="every configs/accel/*.yaml of a GEMM engine")
    ap.add_argument("--reps", type=int, default=10,
                    help="in-process GEMM repetitions (median; default 10)")
    ap.add_argument("--subprocess-runs", type=int, default=3,
                    help="fresh-process runs of construction + one GEMM (median; default 3)")
    ap.add_argument("--build-dir", type=Path, default=None,
                    help="use this (new or empty) build directory instead of a temporary one; "
                         "it is kept")
    ap.add_argument("--keep", action="store_true", help="keep the temporary build directory")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true",
                    help="print one JSON object on stdout (the table goes to stderr)")
    return ap.parse_args(argv)




def configs_from(args):
    if args.all:          # the GEMM engines: the sparse configs take convolutions only
        return sorted(c for c in ACCEL_DIR.glob("*.yaml") if "engine: sparse_cluster" not in c.read_text())
    return [Path(c).resolve() for c in (args.config or [DEFAULT_CONFIG])]


def bench_config(path, args, hlsnn, np, codegen, csim):
    cfg = hlsnn.load_config(path)
    row = {"config": cfg.name, "config_file": str(path), "shape": [SHAPE, SHAPE, SHAPE]}
    stem_dir = Path(os.environ["HLSNN_BUILD"]) / cfg.stem
    if stem_dir.exists():
        row["warning"] = f"{stem_dir} existed before the cold run: the compile may not be cold"

    # Instrument render and compile (targets.py calls them through the module attributes).
    split = {}
    orig_render, orig_compile = codegen.render, csim.compile_library

    def render(*a, **k):
        t = time.perf_counter()
        try:
            return orig_render(*a, **k)
        finally:
            split["render_s"] = split.get("render_s", 0.0) + time.perf_counter() - t

    def compile_library(*a, **k):
        t = time.perf_counter()
        try:
            return orig_compile(*a, **k)
        finally:
            split["compile_s"] = split.get("compile_s", 0.0) + time.perf_counter() - t

    codegen.render, csim.compile_library = render, compile_library
    try:
        with OtherLoad() as other:
            t = time.perf_counter()
            acc = hlsnn.Accelerator(cfg, "csim")
            row["cold_s"] = time.perf_counter() - t
        row["cold_other_cpus"] = other.cpus
        row.update({f"cold_{k}": v for k, v in split.items()})
        row["library"] = str(acc.target.library_path)
    finally:
        codegen.render, csim.compile_library = orig_render, orig_compile

    cached = []
    for _ in range(3):
        t = time.perf_counter()
        acc2 = hlsnn.Accelerator(cfg, "csim")
        cached.append(time.perf_counter() - t)
        acc2.close()
    row["cached_construct_first_s"] = cached[0]
    row["cached_construct_s"] = statistics.median(cached)

    rng = np.random.default_rng(args.seed)
    x = np.abs(rng.standard_normal((SHAPE, SHAPE)))   # after a ReLU: also for unsigned activations
    w = rng.standard_normal((SHAPE, SHAPE))
    b = rng.standard_normal(SHAPE)
    t = time.perf_counter()
    y = acc.gemm(x, w, bias=b, relu=True)
    row["gemm_first_s"] = time.perf_counter() - t
    ts = []
    for _ in range(max(1, args.reps)):
        t = time.perf_counter()
        y2 = acc.gemm(x, w, bias=b, relu=True)
        ts.append(time.perf_counter() - t)
    row["gemm_s"] = statistics.median(ts)
    row["gemm_reps"] = len(ts)
    row["deterministic"] = bool(np.array_equal(y, y2))
    row["in_process_cached_plus_gemm_s"] = row["cached_construct_first_s"] + row["gemm_first_s"]
    acc.close()

    lib_id = (lambda st: (st.st_ino, st.st_mtime_ns))(Path(row["library"]).stat())
    runs = []
    for _ in range(max(1, args.subprocess_runs)):
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", CHILD, str(path), str(SHAPE), str(args.seed)],
                              capture_output=True, text=True, env=dict(os.environ))
        wall = time.perf_counter() - t
        if proc.returncode != 0:
            row["subprocess_error"] = proc.stderr.strip().splitlines()[-1:] or ["?"]
            break
        total, construct, gemm, imp, _ = proc.stdout.split()
        runs.append({"construct_plus_gemm_s": float(total), "construct_s": float(construct),
                     "gemm_s": float(gemm), "import_s": float(imp), "process_wall_s": wall})
    row["subprocess_runs"] = runs
    if runs:
        for k in ("construct_plus_gemm_s", "construct_s", "gemm_s", "import_s", "process_wall_s"):
            row[f"new_process_{k}"] = statistics.median(r[k] for r in runs)
    # The fresh processes must have reused the cached library, not rebuilt it.
    st = Path(row["library"]).stat()
    row["recompiled_in_subprocess"] = (st.st_ino, st.st_mtime_ns) != lib_id or \
        len(list(Path(row["library"]).parent.glob("*.so"))) != 1

    row["compile_pass"] = row["cold_s"] < COMPILE_TARGET_S
    row["gemm_pass"] = bool(runs) and row["new_process_construct_plus_gemm_s"] < GEMM_TARGET_S
    return row


def main(argv=None):
    args = parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    tmp = None
    if args.build_dir is not None:
        build = args.build_dir.resolve()
        build.mkdir(parents=True, exist_ok=True)
    else:
        tmp = build = Path(tempfile.mkdtemp(prefix="hlsnn-bench-csim-"))
    os.environ["HLSNN_BUILD"] = str(build)   # before hlsnn renders anything

    import numpy as np
    import hlsnn
    from hlsnn import codegen, csim
    from hlsnn.errors import MissingDependency

    try:
        cxx, headers = csim.compiler(), csim.ap_types_dir()
    except MissingDependency as exc:
        print(f"SKIP: C-simulation unavailable: {exc}", file=out)
        if args.json:
            print(json.dumps({"benchmark": "csim", "skipped": str(exc)}))
        return 2
    cxx_path = shutil.which(cxx)
    env = {"python": platform.python_version(), "numpy": np.__version__,
           "cpu_count": os.cpu_count(), "cxx": cxx, "cxx_path": cxx_path,
           "cxx_resolved": os.path.realpath(cxx_path) if cxx_path else None,
           "cxx_flags": " ".join(csim.CXX_FLAGS), "ap_types": str(headers),
           "build_dir": str(build)}
    try:
        env["cxx_version"] = subprocess.run([cxx, "--version"], capture_output=True,
                                            text=True).stdout.splitlines()[0]
    except (OSError, IndexError):
        env["cxx_version"] = "?"
    try:
        env["loadavg_start"] = list(os.getloadavg())
    except (AttributeError, OSError):
        env["loadavg_start"] = None
    print(f"# {env['cxx_version']} ({env['cxx_resolved']}), {env['cxx_flags']}", file=out)
    print(f"# ap_types: {headers}", file=out)
    print(f"# HLSNN_BUILD={build} (fresh); {os.cpu_count()} CPUs"
          + (f", load average {env['loadavg_start'][0]:.2f}" if env["loadavg_start"] else ""),
          file=out)
    if "ccache" in (env["cxx_resolved"] or ""):
        print("# warning: the compiler is ccache: the 'cold' compile may be a ccache hit", file=out)

    rows = []
    try:
        for path in configs_from(args):
            print(f"  {path.name}: cold compile ...", file=sys.stderr, flush=True)
            rows.append(bench_config(Path(path).resolve(), args, hlsnn, np, codegen, csim))
    finally:
        if tmp is not None and not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif tmp is not None:
            print(f"# kept {tmp}", file=out)

    # ---------------------------------------------------------------- table
    def f(v, nd=3):
        return "-" if v is None else f"{v:.{nd}f}"

    hdr = (f"{'config':<22} {'cold s':>7} {'render':>7} {'g++':>7} {'other':>5} "
           f"{'cached s':>8} {'gemm ms':>8} {'1st gemm':>8} {'new proc s':>10} "
           f"{'(+start)':>8}")
    print(hdr, file=out)
    print("-" * len(hdr), file=out)
    for r in rows:
        print(f"{r['config']:<22} {r['cold_s']:7.2f} {f(r.get('cold_render_s'), 2):>7} "
              f"{f(r.get('cold_compile_s'), 2):>7} {f(r.get('cold_other_cpus'), 2):>5} "
              f"{r['cached_construct_s']:8.3f} {r['gemm_s'] * 1e3:8.2f} "
              f"{r['gemm_first_s'] * 1e3:8.2f} {f(r.get('new_process_construct_plus_gemm_s')):>10} "
              f"{f(r.get('new_process_process_wall_s'), 2):>8}", file=out)
    print("  cold s = Accelerator(cfg, 'csim') with an empty build dir (render + g++ + dlopen); "
          "other = CPUs used by\n  other processes meanwhile; cached s = the same call again, "
          "in-process (median of 3);\n  gemm ms = acc.gemm(x, w, bias=b, relu=True), 64x64x64, "
          f"median of {args.reps}; new proc s = a fresh python:\n  Accelerator + one gemm after "
          "`import hlsnn` (median of "
          f"{args.subprocess_runs}); (+start) = that process's whole wall time incl. interpreter "
          "and imports", file=out)
    for r in rows:
        if r.get("warning"):
            print(f"  warning: {r['config']}: {r['warning']}", file=out)
        if r.get("subprocess_error"):
            print(f"  error: {r['config']}: fresh process failed: {r['subprocess_error']}", file=out)
        if r.get("recompiled_in_subprocess"):
            print(f"  warning: {r['config']}: the fresh process rebuilt the library (cache miss)",
                  file=out)
        if not r.get("deterministic", True):
            print(f"  warning: {r['config']}: repeated GEMMs differ", file=out)
    print(file=out)
    for r in rows:
        print(f"{'PASS' if r['compile_pass'] else 'FAIL'}: {r['config']}: first compile "
              f"{r['cold_s']:.2f} s (target < {COMPILE_TARGET_S:g} s)", file=out)
        np_s = r.get("new_process_construct_plus_gemm_s")
        print(f"{'PASS' if r['gemm_pass'] else 'FAIL'}: {r['config']}: cached 64x64x64 GEMM in a new "
              f"process {f(np_s)} s (Accelerator + gemm; in-process {r['in_process_cached_plus_gemm_s']:.3f} s; "
              f"target < {GEMM_TARGET_S:g} s)", file=out)
    all_pass = all(r["compile_pass"] and r["gemm_pass"] for r in rows)
    print(f"{'PASS' if all_pass else 'FAIL'}: overall", file=out)

    if args.json:
        print(json.dumps({"benchmark": "csim",
                          "targets": {"first_compile_s": COMPILE_TARGET_S,
                                      "cached_gemm_64_s": GEMM_TARGET_S},
                          "environment": env, "results": rows, "pass": all_pass}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
