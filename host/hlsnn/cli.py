"""``hlsnn`` command line: accelerator kernels, bitstreams and whole networks.

Commands: configs to kernels (render, csim, compare, info, sweep, build), whole networks
(deploy, compile, run, perf, report) and weight plots (plot-quant).

User mistakes (bad config, missing tool) end with one line ``hlsnn: error: …`` and exit
status 2; a mismatch between a target and the emulator ends with exit status 1.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

from .version import __version__
from .errors import HlsnnError, filesystem_message  # noqa: F401 (filesystem_message: re-exported)


def _int_at_least(lo):
    """An argparse type: an integer >= ``lo`` (argparse turns the ValueError into exit 2)."""
    def parse(text):
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if v < lo:
            raise argparse.ArgumentTypeError(f"{v} must be an integer >= {lo}")
        return v
    parse.__name__ = f"integer >= {lo}"
    return parse


NONNEG, POSITIVE = _int_at_least(0), _int_at_least(1)


class _Parser(argparse.ArgumentParser):
    """argparse with hlsnn's one error line: ``hlsnn: error: <command>: <what>`` and exit 2, and
    no abbreviated options (``run --out`` silently meant ``--output``)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message):
        command = self.prog[len("hlsnn"):].strip()
        self.exit(2, f"hlsnn: error: {command + ': ' if command else ''}{message} (see {self.prog} --help)\n")


def _load(path):
    from .config import load_config
    return load_config(path)


def cmd_render(args):
    from . import codegen
    cfg = _load(args.config)
    if args.out:
        from .paths import out_parent
        out_parent(args.out, folder=True)   # --out makes no parent folders outside build/ and overlays/
    r = codegen.render(cfg, args.out)
    print(f"rendered {cfg.name} ({cfg.engine}, board {cfg.board.name}) into {r.dir}/")
    for f in r.files:
        if "/" not in f:
            print(f"  {f}")
    print("  include/hlsnn/*.h, tb_data/ (emulator vectors for tb.cpp), config.json")
    print(f"sources sha256 {r.sha[:16]}; Vitis HLS: cd {r.dir} && vitis_hls -f run_hls.tcl")
    return 0


def _print_compare(rep, as_json):
    from .compare import format_report
    if as_json:
        print(json.dumps({k: v for k, v in rep.items() if k != "results"} | {"results": rep["results"]}))
    else:
        print(format_report(rep))
    return 0 if rep["mismatches"] == 0 and not rep["register_mismatches"] else 1


def _strict_option(args):
    """``--fast``: this process builds and loads the fast C-simulation libraries."""
    if getattr(args, "fast", False):
        from . import csim
        csim.set_strict_default(False)


def cmd_csim(args):
    from . import codegen, csim
    _strict_option(args)
    from .compare import compare
    from .runtime.targets import CsimTarget
    from .engines import ENGINES
    cfg = _load(args.config)
    t0 = time.time()
    rendered = codegen.render(cfg, args.out)
    cached = csim.library_path(rendered).is_file()
    print(f"csim: {cfg.name}: rendered {rendered.dir}; "
          + ("library cached" if cached else "compiling with g++ (first build of these sources) ..."), flush=True)
    from .progress import enabled
    tgt = CsimTarget(cfg, ENGINES[cfg.engine], rendered=rendered,
                     progress=enabled(quiet=args.quiet, json=args.json))
    print(f"csim: library {tgt.library_path} ready in {time.time() - t0:.1f} s; running "
          f"seeded GEMMs through {ENGINES[cfg.engine].TOP}() ...", flush=True)
    rep = compare(cfg, "csim", seed=args.seed, n_random=args.cases, verbose=args.verbose and not args.json,
                  target_obj=tgt)
    return _print_compare(rep, args.json)


def cmd_compare(args):
    from pathlib import Path
    from .compare import compare
    _strict_option(args)
    if Path(args.config).is_dir():        # an overlay folder: its config from <name>.json
        from .engines import ENGINES
        from .runtime.pynq_target import config_from_manifest, overlay_files, read_manifest
        from .runtime.make import make_target
        _, _, js = overlay_files(args.config)
        cfg = config_from_manifest(read_manifest(js))
        tgt = make_target(args.target, cfg, ENGINES[cfg.engine],
                          **({"overlay": Path(args.config)} if args.target in ("pynq", "sim") else {}))
        try:
            rep = compare(cfg, args.target, seed=args.seed, n_random=args.cases, target_obj=tgt,
                          verbose=args.verbose and not args.json)
        finally:
            tgt.close()
        return _print_compare(rep, args.json)
    cfg = _load(args.config)
    rep = compare(cfg, args.target, seed=args.seed, n_random=args.cases,
                  verbose=args.verbose and not args.json)
    return _print_compare(rep, args.json)


def _shadowing(name, path):
    """`` (HLSNN_CONFIG_PATH; shadows the shipped <file>)`` when a config looked up by name was found
    in HLSNN_CONFIG_PATH while a shipped config has the same name."""
    from pathlib import Path
    from .config import is_config_name
    from .paths import CONFIGS_DIR
    if not is_config_name(name) or Path(name).exists():
        return ""
    shipped = CONFIGS_DIR / "accel" / Path(path).name
    if shipped.is_file() and Path(path).resolve() != shipped.resolve():
        return f" (found in HLSNN_CONFIG_PATH; it shadows the shipped {shipped})"
    return ""


def cmd_info(args):
    cfg = _load(args.config)
    est = cfg.estimates
    if args.json:
        print(json.dumps({"config": cfg.as_dict(), "path": cfg.path, "sha256": cfg.sha, "estimates": est}))
        return 0
    print(f"{cfg.name}: engine {cfg.engine} on {cfg.board.name} ({cfg.board.part}) at {cfg.clock_mhz:g} MHz")
    print(f"  read from {cfg.path}" + _shadowing(args.config, cfg.path))
    print(f"  config sha256 {cfg.sha[:16]} (ID register hash 0x{cfg.hash32:08x})")
    for k, v in cfg.params.items():
        print(f"  {cfg.engine}.{k}: {v}")
    from .resources import MARGINS, format_buffers, over_margin
    print(f"  estimated resources (model, not synthesis; DSPs are {est['dsp_family']}):")
    for r, used in est["resources"].items():
        limit = f"  (margin {100 * MARGINS[r]:.0f}%)" if r in MARGINS else ""
        print(f"    {r:<7}{used:>8} of {cfg.board.resources[r]:>8}  ({100 * est['utilization'][r]:.0f}%){limit}")
    for r, used, limit in over_margin(est, cfg.board.resources):
        print(f"  note: {r} {used} is above the {100 * MARGINS[r]:.0f}% margin ({limit:.0f}) that shipped configs keep")
    print("  buffers the kernel declares (copies = banks x stream entries x instances; see hlsnn/resources.py):")
    for line in format_buffers(est):
        print(line)
    if "peak_gmacs" in est:
        print(f"  peak {est['peak_gmacs']:.1f} GMAC/s; weight-stream bound {est['stream_bound_gmacs']:.1f} GMAC/s "
              "(a call of as many max_k x max_n samples as the stores hold)")
    if est.get("k_limit", 0) > cfg.params.get("max_k", 0):
        print(f"  K up to {est['k_limit']} in one call (passes of {est['pass_k']} beyond max_k = "
              f"{cfg.params['max_k']}; the partial sums stay on chip, exact in {cfg.params['acc_bits']} bits)")
    if "k_tiled_limit" in est:
        print(f"  K beyond max_k = {cfg.params['max_k']}: raw calls over chunks of K, summed on the host (int64) "
              f"and requantized there by the kernel's rules, up to K = {est['k_tiled_limit']}")
    if "peak_macs_per_cycle" in est:
        print(f"  {est['units']} compute units; at most {est['peak_macs_per_cycle']} multiplies per cycle "
              f"(only non-zero pairs are multiplied: see `hlsnn report`)")
    if "lut_per_unit" in est:
        ppc = est["products_per_cycle"]
        print(f"  {est['units']} shift-MAC units x {est['lut_per_unit']} LUTs (model); products per cycle: "
              f"two-hot {ppc['twohot']}, PoT {ppc['pot']} (summed PoT {ppc['pot_sum']}); "
              f"peak {est['peak_gops']['twohot']:.1f} / {est['peak_gops']['pot']:.1f} GOP/s")
    return 0


def cmd_plot_quant(args):
    from pathlib import Path
    from .plots import default_output, load_weights, plot_quantization, report_json
    w = load_weights(args.weights, key=args.key)
    out = args.out or default_output(args.weights)
    axis = None if args.axis == "none" else int(args.axis)
    name = Path(args.weights).name + ("" if args.key is None else f"[{args.key}]")
    rep = plot_quantization(w, out, bits=args.bits, delta=args.delta, axis=axis, name=name)
    if args.json:
        print(json.dumps(report_json(rep)))
        return 0
    print(f"plot-quant: {name}: {rep['n_weights']} weights, budget {rep['bits']} bits/weight")
    for fmt, r in rep["formats"].items():
        if r.get("skipped"):
            print(f"  {fmt:<8} skipped: {r['skipped']}")
        else:
            print(f"  {fmt:<8} {r['bits_per_weight']:>2} bits/weight  MSE {r['mse']:.4g}")
    print(f"wrote {rep['out']}")
    return 0


def _is_deploy_config(path):
    """A deployment config (configs/models/*.yaml) names a model; an accel config does not."""
    from .config import find_config, read_yaml
    raw = read_yaml(find_config(path))
    return isinstance(raw, dict) and "model" in raw


def cmd_deploy(args):
    from .deploy.evaluate import deploy, format_result
    from .progress import enabled
    res = deploy(args.config, args.target, assignments=args.assignment or None, host_fallback=args.host_fallback,
                 host_precision=args.host_precision, host_bits=args.host_bits, per_layer=args.per_layer, test_samples=args.test_samples,
                 progress=enabled(quiet=args.quiet, json=args.json), radix_update=args.radix_update,
                 radix_update_by=args.radix_update_by, network=False if args.layer_by_layer else None,
                 recalibrate=args.recalibrate)
    print(json.dumps(res) if args.json else format_result(res))
    return 1 if any("error" in e for e in res["assignments"].values()) else 0     # a failed assignment


def cmd_report(args):
    from pathlib import Path
    from .build.netflow import is_compiled_model
    if is_compiled_model(args.config):          # a compiled model: its modelled end-to-end latency
        from .network.report import write_report as write_compiled
        print(f"wrote {write_compiled(args.config, out=args.out, board=args.board, batch=args.batch)}")
        return 0
    if _is_deploy_config(args.config):
        from .deploy.report import write_report
        out = write_report(args.config, args.target, out=args.out, host_fallback=args.host_fallback,
                           host_precision=args.host_precision, host_bits=args.host_bits, test_samples=args.test_samples,
                           radix_update=args.radix_update, radix_update_by=args.radix_update_by)
        print(f"wrote {out}")
        return 0
    from .perf.sparse_work import KINDS, check_engine, check_out, density_sweep, format_sweep, parse_densities, plot_sweep
    cfg = _load(args.config)
    check_engine(cfg)
    densities = parse_densities(args.densities)
    stem = Path(cfg.path).stem if cfg.path else cfg.name
    out = None if args.no_plot else check_out(args.out or Path(f"{stem}_report.png"))
    kinds = ("structured",) if args.structured else ("random",) if args.random else KINDS
    rep = density_sweep(cfg, channels=args.channels, size=args.size, ksize=args.ksize, densities=densities,
                        kinds=kinds, seed=args.seed)
    rep["out"] = None if out is None else plot_sweep(rep, out)
    if args.json:
        print(json.dumps(rep))
        return 0
    print(format_sweep(rep))
    if rep["out"]:
        print(f"wrote {rep['out']}")
    return 0


def load_for_build(path, board=None):
    """A config, optionally moved to another board (``--board``)."""
    from .config import find_config, load_config, read_yaml
    if board is None:
        return _load(path)
    from .config import load_board
    path = find_config(path)
    bname = load_board(board, source="--board").name     # a board name or a board file's path
    raw = read_yaml(path)
    if isinstance(raw, dict):
        # another board gets its own overlay name, so it never overwrites the original's
        raw = {**raw, "board": board}
        if isinstance(raw.get("name"), str) and "name" in raw:
            raw["name"] = f"{raw['name']}_{bname.replace('-', '_').replace('.', '_')}"
    cfg = load_config(raw, source=str(path))
    from dataclasses import replace
    return replace(cfg, path=str(path))     # build/<name>: the name above carries the board


_BUILD_OUTCOME = {0: "ok", 1: "FAILED", 3: "tools missing"}


def _batch_status(statuses) -> int:
    """One exit status for several builds: 1 when one failed, else 3 when the tools were
    missing for one, else 0."""
    return 1 if 1 in statuses else 3 if 3 in statuses else max(statuses, default=0)


def cmd_build(args):
    from .build import main_build
    from .build.netflow import is_compiled_model, main_build_network
    from .errors import InputError
    if args.check and args.dry_run:
        raise InputError("hlsnn build: --check and --dry-run cannot be combined (--check runs Vitis HLS; "
                          "--dry-run runs nothing)")
    from .progress import enabled
    configs = list(args.config)
    if len(configs) > 1 or args.cluster:        # a batch, or one build on a Dask cluster
        models = [c for c in configs if is_compiled_model(c)]
        if models and (args.cluster or len(configs) > 1):
            raise InputError(f"hlsnn build {models[0]}: a compiled model's network overlay is built on its own and "
                             f"locally (one argument, no --cluster); list only configs in a batch")
        if len(set(configs)) != len(configs):
            raise InputError("hlsnn build: a config is listed twice; list each once")
        cfgs = [load_for_build(c, args.board) for c in configs]      # every config checked before any build
        names = [c.stem for c in cfgs]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise InputError(f"hlsnn build: two configs build into build/{dup} (the same name {dup!r}); give them "
                             f"different names")
        if args.cluster:
            from . import cluster
            statuses = cluster.run_builds(args.cluster, cfgs, out=args.out, jobs=args.jobs, dry_run=args.dry_run,
                                          check=args.check, show_progress=enabled(quiet=args.quiet))
        else:
            statuses = [main_build(c, out=args.out, jobs=args.jobs, dry_run=args.dry_run, check=args.check,
                                   progress=enabled(quiet=args.quiet)) for c in cfgs]
        if len(cfgs) > 1:
            print("builds: " + ", ".join(f"{c.name} {_BUILD_OUTCOME.get(s, f'exit {s}')}"
                                         for c, s in zip(cfgs, statuses)))
        return _batch_status(statuses)
    args.config = configs[0]
    if is_compiled_model(args.config):          # a compiled model: its network kernel's overlay
        if args.board:
            raise InputError(f"hlsnn build {args.config} --board: a compiled model's network overlay is built for "
                             f"the config it was compiled against; compile the model for the other board instead")
        if args.check:
            raise InputError(f"hlsnn build {args.config} --check: not for the network kernel yet; run the full "
                             f"build (or --dry-run)")
        return main_build_network(args.config, out=args.out, jobs=args.jobs, dry_run=args.dry_run,
                                  progress=enabled(quiet=args.quiet))
    cfg = load_for_build(args.config, args.board)
    return main_build(cfg, out=args.out, jobs=args.jobs, dry_run=args.dry_run, check=args.check,
                      progress=enabled(quiet=args.quiet))


def cmd_sweep(args):
    from pathlib import Path
    from . import sweep
    from .errors import InputError, MissingDependency
    if args.cluster is not None and args.jobs is not None:
        raise InputError("hlsnn sweep: --jobs and --cluster cannot be combined (--jobs: processes on this machine; "
                         "--cluster: the scheduler's workers)")
    out = None
    if not args.no_plot:
        out = sweep.check_out(args.out or Path(f"{Path(args.config).stem}_sweep.png"))
        missing = sweep.matplotlib_missing()
        if missing and args.out:
            raise MissingDependency(missing)
        if missing:
            print(f"hlsnn: note: no plot: {missing}", file=sys.stderr)
            out = None
    from .progress import enabled
    rep = sweep.run_sweep(args.config, args.vary, csim=not args.no_csim, jobs=args.jobs, cases=args.cases,
                          seed=args.seed, show_progress=enabled(quiet=args.quiet, json=args.json),
                          cluster=args.cluster)
    rep["out"] = sweep.plot_sweep(rep, out) if out else None
    if args.json:
        print(json.dumps(rep))
    else:
        print(sweep.format_table(rep))
        if rep["out"]:
            print(f"wrote {rep['out']}")
    return rep["status"]


def _config_of(target_path):
    """The config of a config name, YAML path or overlay folder (its ``<name>.json``), as
    :class:`hlsnn.runtime.Accelerator` reads it, without making a target."""
    from pathlib import Path
    from .config import load_config
    if Path(target_path).is_dir() or str(target_path).endswith(".bit"):
        from .runtime.pynq_target import config_from_manifest, overlay_files, read_manifest
        return config_from_manifest(read_manifest(overlay_files(Path(target_path))[2]))
    return load_config(target_path)


def cmd_run(args):
    """One layer on a target, checked bit for bit against the emulator, with timing (or, given
    a NAME.hlsnn, a compiled network: :func:`hlsnn.commands.network.run_compiled`)."""
    if str(args.target_path).endswith(".hlsnn"):
        from .commands.network import run_compiled
        return run_compiled(args)
    import numpy as np
    from .runtime import Accelerator
    from .errors import InputError

    import zipfile
    from pathlib import Path

    def load(path, what):
        src = Path(path)
        if not src.is_file():                 # a FIFO or a device would block or never end (issue 47)
            kind = "a folder" if src.is_dir() else "not a regular file (a FIFO, device or socket)" if src.exists() \
                else "no such file"
            raise InputError(f"--{what} {path}: {kind}; give a .npy file (numpy.save)")
        try:
            a = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError, MemoryError, zipfile.BadZipFile) as exc:
            raise InputError(f"--{what} {path}: cannot be read as a .npy array ({exc})") from None
        if not isinstance(a, np.ndarray):                  # an .npz archive
            a.close()
            raise InputError(f"--{what} {path}: is an .npz archive; save one array with numpy.save (.npy)")
        if a.ndim == 0 or a.size == 0:
            raise InputError(f"--{what} {path}: holds an array of shape {a.shape}: must have at least one "
                             f"dimension and one element")
        if a.dtype.kind not in "biuf":
            raise InputError(f"--{what} {path}: has dtype {a.dtype}: must be real numbers (int or float); complex, "
                             f"string and object arrays are refused")
        return a
    if not Path(args.target_path).exists() and ("/" in str(args.target_path) or Path(args.target_path).suffix):
        raise InputError(f"{args.target_path}: no such overlay folder or config file")
    x = load(args.input, "input")
    # the input is checked against the engine before the target is made (a csim target compiles)
    from .engines import ENGINES
    engine = _config_of(args.target_path).engine
    conv = engine == "sparse_cluster" or x.ndim == 3
    op = "conv2d" if conv else "gemm"
    ops = ENGINES[engine].Kernel.OPERATIONS
    if op not in ops or x.ndim != (3 if conv else 2):
        raise InputError(f"--input {args.input}: shape {x.shape}: {engine} takes "
                         + ("a (C, H, W) feature map" if "conv2d" in ops and conv
                            else "(batch, K) activations for a GEMM")
                         + (" (or a (C, H, W) map for conv2d)" if "conv2d" in ops and not conv else ""))
    acc = Accelerator(args.target_path, target=args.target)
    ref = acc.emulator()
    try:
        rng = np.random.default_rng(args.seed)
        conv = engine == "sparse_cluster" or x.ndim == 3
        if args.weights:
            w = load(args.weights, "weights")
        elif conv:
            w = (rng.integers(-128, 128, (args.n, x.shape[0], 3, 3)) * (rng.random((args.n, x.shape[0], 3, 3)) < 0.5)
                 ).astype(x.dtype if x.dtype.kind in "iu" else np.float64)
        else:
            w = rng.normal(size=(args.n, x.shape[-1]))
        times, overheads = [], []
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            y = getattr(acc, op)(x, w)
            times.append(time.perf_counter() - t0)
            lt_call = getattr(acc.target, "last_timing", None) or {}
            if lt_call:   # this call's host overhead: its time less its own DMA time (never negative)
                overheads.append(max(0.0, times[-1] - lt_call["transfer_s"]))
        y_ref = getattr(ref, op)(x, w)
        bad = np.asarray(y != y_ref)
        res = {"config": acc.config.name, "target": acc.target.name, "operation": op, "input": list(x.shape),
               "weights": list(np.shape(w)), "output": list(np.shape(y)), "outputs": int(bad.size),
               "mismatches": int(bad.sum()), "first_mismatch": None, "seconds_per_call": float(np.median(times))}
        if bad.any():
            i = tuple(int(v) for v in np.argwhere(bad)[0])
            res["first_mismatch"] = {"index": list(i), "expected": float(y_ref[i]), "got": float(y[i]),
                                     "raw": f"expected {np.float64(y_ref[i]).hex()} got {np.float64(y[i]).hex()}"}
        lt = getattr(acc.target, "last_timing", None) or {}
        if lt:
            moved = lt["bytes_in"] + lt["bytes_out"]
            res["transfer_s"] = lt["transfer_s"]
            res["dma_MB_per_s"] = moved / lt["transfer_s"] / 1e6 if lt["transfer_s"] else None
            res["host_overhead_s"] = float(np.median(overheads)) if overheads else None
        kc = getattr(acc.kernel, "last_cycles", None)
        if kc is not None:           # csim, sim: the cycle model of the last call (hlsnn.perf)
            res["kernel_cycles"] = int(kc.cycles)
            res["kernel_model_s"] = kc.cycles / (acc.config.clock_mhz * 1e6)
            res["kernel_bound"] = kc.bound
        res["elements_per_s"] = float(np.size(y)) / res["seconds_per_call"]
        if args.output:
            from .paths import out_parent
            if not str(args.output).endswith(".npy"):
                raise InputError(f"--output {args.output}: must end in .npy (numpy.save adds it otherwise)")
            out_parent(args.output)
            from .files import atomic_path
            try:
                with atomic_path(Path(args.output)) as tmp:
                    np.save(tmp, y)
            except OSError as exc:
                raise InputError(f"--output {args.output}: cannot write ({exc.strerror or exc})") from None
        if args.json:
            print(json.dumps(res))
        else:
            print(f"{res['config']} on {res['target']}: {op} {res['input']} x {res['weights']} -> {res['output']}")
            print(f"  {res['outputs']} outputs, {res['mismatches']} mismatches against the emulator"
                  + (f"; first at {res['first_mismatch']['index']}: {res['first_mismatch']['raw']}" if bad.any() else ""))
            line = f"  {1e3 * res['seconds_per_call']:.2f} ms per call, {res['elements_per_s']:.3g} outputs/s"
            if lt:
                line += (f"; DMA transfer {1e3 * res['transfer_s']:.2f} ms ({res['dma_MB_per_s']:.1f} MB/s), "
                         f"host overhead {1e6 * res['host_overhead_s']:.0f} us per call")
            print(line)
            if kc is not None:
                print(f"  modelled kernel time {1e6 * res['kernel_model_s']:.1f} us ({res['kernel_cycles']:,} cycles at "
                      f"{acc.config.clock_mhz:g} MHz, bound: {res['kernel_bound']}; hlsnn perf for the breakdown)")
        return 0 if not bad.any() else 1
    finally:
        acc.close()
        ref.close()


def cmd_compile(args):
    from .commands.network import cmd_compile as compile_cmd
    return compile_cmd(args)


def cmd_perf(args):
    """Modelled cycles of one operation, from the C-simulation's loop counters (or, given a
    NAME.hlsnn, a compiled network's end-to-end latency: :mod:`hlsnn.network.latency`)."""
    if str(args.config).endswith(".hlsnn"):
        from .commands.network import perf_compiled
        return perf_compiled(args)
    from .perf import measure as pm
    if (args.gemm is None) == (args.conv is None):
        from .errors import InputError
        raise InputError("give exactly one of --gemm B,K,N and --conv C,H,W,Z,k")
    gemm = pm.parse_shape(args.gemm, 3, "gemm") if args.gemm else None
    conv = pm.parse_shape(args.conv, 5, "conv") if args.conv else None
    res = pm.measure(args.config, gemm=gemm, conv=conv, mode=args.mode, resident=args.resident,
                     density=args.density, padding=args.padding, seed=args.seed, target=args.target)
    if args.json:
        print(json.dumps(res))
    else:
        print(pm.format_report(res, all_loops=args.schedule_all))
        if args.loops:
            from .config import load_config
            print("\nloops (host/hlsnn/perf/" + res["engine"] + ".py):")
            print(pm.loop_table(res["engine"], load_config(args.config).params))
    return 0


def build_parser():
    ap = _Parser(prog="hlsnn", description=__doc__.splitlines()[0])
    ap.add_argument("--version", action="version", version=f"hlsnn {__version__}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("render", help="render a config into a Vitis HLS project (build/<config>/hls/)")
    p.add_argument("config")
    p.add_argument("--out", help="output folder (default build/<config name>/hls)")
    p.set_defaults(func=cmd_render)

    def compare_opts(p):
        p.add_argument("--seed", type=NONNEG, default=0, help="seed of the random cases (default 0)")
        p.add_argument("--cases", type=NONNEG, default=8, help="number of random cases besides the edge cases")
        p.add_argument("--json", action="store_true", help="print one JSON object")
        p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
        p.add_argument("--fast", action="store_true",
                       help="csim/sim: the plain sequential C-simulation, without the strict checks (bounded "
                            "FIFOs, threads, dependence distances, bank ports; docs/strict-csim.md)")

    p = sub.add_parser("csim", help="compile the rendered C++ and compare it with the emulator")
    p.add_argument("config")
    p.add_argument("--out", help="HLS project folder (default build/<config name>/hls)")
    compare_opts(p)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    p.set_defaults(func=cmd_csim)

    p = sub.add_parser("compare", help="compare a target with the emulator, bit for bit (exit 1 on mismatch)")
    p.add_argument("config", help="a config, or an overlay folder (for --target pynq or sim)")
    p.add_argument("--target", default="csim", help="csim, sim, emu, or pynq (with an overlay folder)")
    compare_opts(p)
    p.set_defaults(func=cmd_compare)

    p = sub.add_parser("build", help="build an overlay: render, csim, Vitis HLS, Vivado -> overlays/<name>/ "
                                     "(exit 3 when the Xilinx tools are missing); given a compiled model "
                                     "(NAME.hlsnn), its network kernel's overlay -> overlays/<config>_net/")
    p.add_argument("config", nargs="+", help="a config (name or YAML), or a compiled model (hlsnn compile) for its "
                                             "network overlay; several configs: one build each (a batch)")
    p.add_argument("--board", help="build for another board: a name of configs/boards or a board file's path "
                        "(default: the config's)")
    p.add_argument("--jobs", type=POSITIVE, default=None, help="parallel Vivado jobs (default: CPU count)")
    p.add_argument("--out", default="overlays", help="overlay folder (default overlays/)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="build each config as a task on the Dask scheduler at ADDRESS (tcp://host:8786); the "
                        "overlays come back here; needs hlsnn[cluster] (docs/tutorials/cluster.md)")
    p.add_argument("--dry-run", action="store_true", help="render, then print every command without running it")
    p.add_argument("--check", action="store_true",
                   help="only Vitis HLS csim_design + csynth_design (no export, no Vivado); print each loop's II and "
                        "latency and the resources against the estimate (exit 3 without Vitis HLS)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    p.set_defaults(func=cmd_build)

    p = sub.add_parser("compile", help="calibrate one assignment of a deployment config and write everything an "
                                       "inference needs into one NAME.hlsnn file (docs/compiled-models.md)")
    p.add_argument("config", help="a deployment config (configs/models/*.yaml)")
    p.add_argument("--assignment", required=True, help="the layer-format assignment to compile")
    p.add_argument("-o", "--output", help="NAME.hlsnn (default: <config>_<assignment>.hlsnn)")
    p.add_argument("--check-samples", type=NONNEG, default=4, help="self-check input/output pairs (default 4)")
    p.add_argument("--host-fallback", action="store_true",
                   help="run the nodes no rule covers on the host with onnx's reference implementation, as "
                        "`hlsnn deploy --host-fallback` does (the compiled model then needs onnx where it runs)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_compile)

    p = sub.add_parser("run", help="run one layer (or a compiled NAME.hlsnn network) on a target and check it bit "
                                   "for bit against the emulator")
    p.add_argument("target_path", metavar="OVERLAY_OR_CONFIG", help="an overlay folder (pynq, sim), a config, or a "
                                                                    "compiled model NAME.hlsnn")
    p.add_argument("--input", required=True, help="x.npy: (batch, K) for a GEMM, (C, H, W) for a convolution, a "
                                                  "batch in the model's layout for NAME.hlsnn")
    p.add_argument("--no-self-check", action="store_true", help="NAME.hlsnn: skip the self-check on load")
    p.add_argument("--layer-by-layer", action="store_true", help="NAME.hlsnn: one kernel call per layer chunk, "
                                                                   "not the network kernel (one start per batch)")
    p.add_argument("--weights", help="w.npy: (N, K) or (Z, C, k, k); default: seeded random weights")
    p.add_argument("--n", type=POSITIVE, default=64, help="outputs (N or Z) of the random weights (default 64)")
    p.add_argument("--target", default="sim", help="pynq, sim, csim or emu (default sim)")
    p.add_argument("--output", help="save the result to this .npy")
    p.add_argument("--repeat", type=POSITIVE, default=3, help="calls to time (default 3)")
    p.add_argument("--seed", type=NONNEG, default=0)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("perf", help="modelled cycles, MAC/cycle, utilization and bound of one operation, from "
                                    "the C-simulation's loop counters (hlsnn.perf)")
    p.add_argument("config", help="an accel config, or a compiled model NAME.hlsnn (end-to-end latency)")
    p.add_argument("--board", help="NAME.hlsnn: the board whose CPU and HP port are modelled (default: the "
                                   "accelerators' board)")
    p.add_argument("--batch", type=POSITIVE, default=1, help="NAME.hlsnn: images per call (default 1)")
    p.add_argument("--layer-by-layer", action="store_true", help="NAME.hlsnn: model today's per-layer kernel calls, "
                                                                   "not the network kernel (one start per batch)")
    p.add_argument("--gemm", metavar="B,K,N", help="a GEMM of batch B, K inputs, N outputs (bfp_systolic, shift_mac)")
    p.add_argument("--conv", metavar="C,H,W,Z,k", help="a stride-1 convolution of C channels of HxW to Z channels, "
                                                     "k x k kernel (shift_mac, sparse_cluster)")
    p.add_argument("--mode", choices=["twohot", "pot", "pot_sum"], help="shift_mac weight mode (default: the config's)")
    p.add_argument("--resident", action="store_true",
                   help="weights stay on chip: a first call loads them, the second is reported (shift_mac)")
    p.add_argument("--density", type=float, default=1.0, help="sparse_cluster: share of non-zero inputs and weights")
    p.add_argument("--padding", default="same", choices=["same", "valid"], help="convolution padding (default same)")
    p.add_argument("--target", default="csim", choices=["csim", "sim"], help="default csim")
    p.add_argument("--loops", action="store_true", help="also print the engine's loop table (II, accesses, depth)")
    p.add_argument("--schedule-all", action="store_true", help="the schedule table lists every pipelined loop, not only "
                                                               "those above II 1 (hlsnn.perf.schedule)")
    p.add_argument("--seed", type=NONNEG, default=0, help="seed of the data (default 0)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_perf)

    p = sub.add_parser("deploy", help="run a whole ONNX model layer by layer in each format of a deployment "
                                      "config (configs/models/*.yaml) and report accuracy (or, task: regression, "
                                      "MSE) against float and the modelled latency; exit status 1 when an "
                                      "assignment failed (its row says why)")
    p.add_argument("config", help="a deployment config")
    p.add_argument("--target", default="emu", choices=["emu", "csim", "sim", "pynq"], help="default emu")
    p.add_argument("--assignment", action="append", help="evaluate only this layer-format assignment (repeatable)")
    p.add_argument("--host-fallback", action="store_true",
                   help="run ONNX ops hlsnn has no engine for on the host (onnx's reference implementation)")
    p.add_argument("--host-precision", choices=["float", "quantized"], default="float",
                   help="host layers that compute (fallback nodes, Add, pools that average, BN, Softmax): in float "
                        "(default), or between fixed-point inputs and outputs of --host-bits bits, as a board "
                        "would compute them")
    p.add_argument("--host-bits", type=int, default=8, help="width of --host-precision quantized (default 8)")
    p.add_argument("--radix-update", choices=["e1", "e5"],
                   help="how fixed-point layers update their radix points (default: the config's calibration.update, "
                        "else e1): e1, a preceding operation on every image; e5, per layer the faster of E2 (two "
                        "operations on a sample) and E4 (the sample's wide results saved) by the cycle model, shown "
                        "in the output")
    p.add_argument("--radix-update-by", choices=["layer", "op_type"],
                   help="--radix-update e5: choose per layer or per operation type (default: the config's "
                        "calibration.update_by, else layer)")
    p.add_argument("--recalibrate", action="store_true",
                   help="a model quantized elsewhere (ONNX QDQ): calibrate every radix point instead of keeping the "
                        "file's power-of-two scales")
    p.add_argument("--per-layer", action="store_true", help="radix points, sparsity and error of every layer")
    p.add_argument("--test-samples", type=POSITIVE, help="evaluate only the first N test images")
    p.add_argument("--layer-by-layer", action="store_true",
                   help="csim/sim: run the test images one kernel call per layer chunk, not through the "
                        "assignment's network kernel (one kernel start), which is the default where it exists")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    p.set_defaults(func=cmd_deploy)

    p = sub.add_parser("info", help="validate a config and print it with resource estimates")
    p.add_argument("config")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_info)

    p = sub.add_parser("plot-quant",
                       help="plot weights against uniform, PoT and two-hot levels (needs hlsnn[plot])")
    p.add_argument("weights", help="a .npy file, or a .npz file with --key")
    p.add_argument("--key", help="the array of a .npz file (may be left out if it holds one)")
    p.add_argument("--bits", type=int, default=8, help="bit budget per weight, 4..16 (default 8)")
    p.add_argument("--delta", type=int, default=0, help="two-hot delta, 0..7 (default 0)")
    p.add_argument("--axis", choices=["none", "0"], default="none",
                   help="none: one scale for the whole tensor; 0: one scale per row (slice along axis 0)")
    p.add_argument("--out", help="image file (default <weights stem>_quant.png next to the weights)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_plot_quant)

    p = sub.add_parser("report",
                       help="a deployment config: an HTML report (accuracy per format, per-layer error, weights "
                            "against quantization levels, sparsity, latency per board); a compiled model: an HTML "
                            "report of its modelled end-to-end latency per layer; a sparse_cluster config: "
                            "modelled per-unit work, imbalance and speedup over a density sweep "
                            "(plots need hlsnn[plot])")
    p.add_argument("config", help="a deployment config (configs/models/*.yaml), a compiled model NAME.hlsnn "
                                   "(its modelled end-to-end latency per layer) or a sparse_cluster config")
    p.add_argument("--target", default="emu", choices=["emu", "csim", "sim", "pynq"],
                   help="deployment report: where the layers run (default emu)")
    p.add_argument("--board", help="NAME.hlsnn: the board whose CPU and HP port are modelled (default: the "
                                   "accelerator config's board)")
    p.add_argument("--batch", type=POSITIVE, default=1, help="NAME.hlsnn: images per call (default 1)")
    p.add_argument("--host-fallback", action="store_true", help="deployment report: see `hlsnn deploy`")
    p.add_argument("--host-precision", choices=["float", "quantized"], default="float",
                   help="deployment report: see `hlsnn deploy`")
    p.add_argument("--host-bits", type=int, default=8, help="deployment report: see `hlsnn deploy`")
    p.add_argument("--radix-update", choices=["e1", "e5"], help="deployment report: see `hlsnn deploy`")
    p.add_argument("--radix-update-by", choices=["layer", "op_type"], help="deployment report: see `hlsnn deploy`")
    p.add_argument("--test-samples", type=POSITIVE, help="deployment report: only the first N test images")
    p.add_argument("--channels", type=int, default=64, help="input = output channels of the layer (default 64)")
    p.add_argument("--size", type=int, default=56, help="feature-map height = width (default 56)")
    p.add_argument("--ksize", type=int, default=3, help="odd kernel size, 'same' padding (default 3)")
    p.add_argument("--densities", default="1,0.5,0.2,0.1,0.05",
                   help="comma-separated fractions of non-zero inputs and weights (default 1,0.5,0.2,0.1,0.05)")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--structured", action="store_true",
                      help="only inputs whose non-zeros cluster in blobs (default: random and structured rows)")
    kind.add_argument("--random", action="store_true", help="only uniformly random inputs")
    p.add_argument("--seed", type=NONNEG, default=0, help="seed of the synthetic layers (default 0)")
    p.add_argument("--out", help="output file (default <config stem>_report.png, or <config stem>_report.html for "
                                 "a deployment config, in the current folder)")
    p.add_argument("--no-plot", action="store_true", help="print the table (or JSON) only")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("sweep",
                       help="vary config keys: validate, estimate resources, flag what does not fit, C-simulate "
                            "the rest in parallel (exit 1 on a mismatch; plot needs hlsnn[plot])")
    p.add_argument("config")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=v1,v2,...",
                   help="a key of the engine section (rows, bfp_systolic.rows or array.rows) or clock_mhz, and "
                        "its values (YAML scalars); repeat for more keys: the variants are the Cartesian product")
    p.add_argument("--jobs", type=POSITIVE, default=None, help="C-simulation worker processes (default: CPU count)")
    p.add_argument("--cluster", metavar="ADDRESS",
                   help="run every variant as a task on the Dask scheduler at ADDRESS (tcp://host:8786) instead of "
                        "local processes; needs hlsnn[cluster] (docs/tutorials/cluster.md)")
    p.add_argument("--no-csim", action="store_true", help="estimates only; compile nothing")
    p.add_argument("--cases", type=NONNEG, default=2, help="random cases per variant besides the edge cases (default 2)")
    p.add_argument("--seed", type=NONNEG, default=0, help="seed of the cases (default 0)")
    p.add_argument("--out", help="image file (default <config stem>_sweep.png in the current folder)")
    p.add_argument("--no-plot", action="store_true", help="print the table (or JSON) only")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar (it is off anyway when stderr is not a terminal)")
    p.set_defaults(func=cmd_sweep)
    return ap


class Terminated(KeyboardInterrupt):
    """SIGTERM, handled like Ctrl-C: the same cleanup (temporary folders, DMA buffers), exit 143."""


def _on_sigterm(signum, frame):
    raise Terminated()


def main(argv=None):
    import signal
    import threading
    args = build_parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        return args.func(args)
    except HlsnnError as exc:
        msg = str(exc)
        print(f"hlsnn: error: {msg}", file=sys.stderr)
        return 2
    except Terminated:
        print("hlsnn: terminated (SIGTERM); cleaned up", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print("hlsnn: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:   # output piped into e.g. `head`: stop quietly
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        msg = filesystem_message(exc)
        if msg is None:
            raise
        print(f"hlsnn: error: {msg}", file=sys.stderr)
        return 2
    except MemoryError as exc:
        print(f"hlsnn: error: out of memory ({str(exc).splitlines()[0][:160] if str(exc) else 'MemoryError'}); "
              "use smaller inputs (--test-samples, fewer cases) or free memory", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
