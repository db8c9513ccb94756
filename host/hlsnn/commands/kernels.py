"""``hlsnn render``, ``csim``, ``compare``, ``info``, ``plot-quant``, ``run`` and ``perf``: the commands of
one layer kernel (a config) on a target (:mod:`hlsnn.cli` builds the parser)."""
from __future__ import annotations

import json
import time

from ..errors import printable


def _load(path):
    from ..config import load_config
    return load_config(path)


def cmd_render(args):
    from .. import codegen
    from ..network.fit import check_config
    cfg = _load(args.config)
    check_config(cfg, allow_overfit=getattr(args, "allow_overfit", False))
    if args.out:
        from ..paths import out_parent
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
    from ..compare import format_report
    if as_json:
        print(json.dumps({k: v for k, v in rep.items() if k != "results"} | {"results": rep["results"]}))
    else:
        print(format_report(rep))
    return 0 if rep["mismatches"] == 0 and not rep["register_mismatches"] else 1


def _strict_option(args):
    """``--fast``: this process builds and loads the fast C-simulation libraries."""
    if getattr(args, "fast", False):
        from .. import csim
        csim.set_strict_default(False)


def cmd_csim(args):
    from .. import codegen, csim
    _strict_option(args)
    from ..compare import compare
    from ..runtime.targets import CsimTarget
    from ..engines import ENGINES
    cfg = _load(args.config)
    t0 = time.time()
    rendered = codegen.render(cfg, args.out)
    cached = csim.library_path(rendered).is_file()
    print(f"csim: {cfg.name}: rendered {rendered.dir}; "
          + ("library cached" if cached else "compiling with g++ (first build of these sources) ..."), flush=True)
    from ..progress import enabled
    tgt = CsimTarget(cfg, ENGINES[cfg.engine], rendered=rendered,
                     progress=enabled(quiet=args.quiet, json=args.json))
    print(f"csim: library {tgt.library_path} ready in {time.time() - t0:.1f} s; running "
          f"seeded GEMMs through {ENGINES[cfg.engine].TOP}() ...", flush=True)
    rep = compare(cfg, "csim", seed=args.seed, n_random=args.cases, verbose=args.verbose and not args.json,
                  target_obj=tgt)
    return _print_compare(rep, args.json)


def cmd_compare(args):
    from pathlib import Path
    from ..compare import compare
    _strict_option(args)
    if Path(args.config).is_dir():        # an overlay folder: its config from <name>.json
        from ..engines import ENGINES
        from ..runtime.pynq_target import config_from_manifest, overlay_files, read_manifest
        from ..runtime.make import make_target
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
    from ..config import is_config_name
    from ..paths import CONFIGS_DIR
    if not is_config_name(name) or Path(name).exists():
        return ""
    shipped = CONFIGS_DIR / "accel" / Path(path).name
    if shipped.is_file() and Path(path).resolve() != shipped.resolve():
        return f" (found in HLSNN_CONFIG_PATH; it shadows the shipped {shipped})"
    return ""


def _pl_clock(cfg):
    """``(IO PLL MHz, divisor0, divisor1, PL MHz)``: the PL clock a bitstream built from ``cfg``
    runs at, from the IO PLL through two integer divisors as the PS configuration wizard picks
    them (:func:`hlsnn.blockdesign.ps_presets.pl_divisors`)."""
    from ..blockdesign.ps_presets import io_pll_mhz, pl_divisors
    pll = io_pll_mhz(cfg.board)
    return (pll, *pl_divisors(cfg.board.ps, pll, float(cfg.clock_mhz)))


def _clock_note(cfg):
    """A note when ``cfg.clock_mhz`` is no rate the board's PS can give the PL (:func:`_pl_clock`):
    a bitstream built from the config runs at the nearest such rate while every modelled figure
    is at the asked one. ``""`` when it is reachable to 100 ppm (a config writes 1500/7 MHz as
    214.28)."""
    pll, d0, d1, act = _pl_clock(cfg)
    if abs(act - cfg.clock_mhz) <= 1e-4 * cfg.clock_mhz:
        return ""
    return (f"  note: clock_mhz {cfg.clock_mhz:g} is not a rate {cfg.board.name}'s PS can give the PL: its IO PLL "
            f"({pll:g} MHz) / {d0} / {d1} gives {act:.3f} MHz, the nearest, and the bitstream would run there while "
            f"the modelled figures assume {cfg.clock_mhz:g}; set clock_mhz to a rate {pll:g} / (d0 x d1) gives")


def cmd_info(args):
    from ..network.fit import check_config
    from ..resources import FIT_SHARE
    cfg = _load(args.config)
    est = cfg.estimates
    over = check_config(cfg, allow_overfit=getattr(args, "allow_overfit", False))   # refused above the budget
    if args.json:
        print(json.dumps({"config": cfg.as_dict(), "path": cfg.path, "sha256": cfg.sha, "estimates": est,
                          "fit": {"share": FIT_SHARE, "fits": not over,
                                  "over": [{"resource": r, "used": u, "budget": b, "available": a}
                                           for r, u, b, a in over]},
                          "pl_clock_mhz": round(_pl_clock(cfg)[3], 6)}))
        return 0
    print(f"{cfg.name}: engine {cfg.engine} on {cfg.board.name} ({cfg.board.part}) at {cfg.clock_mhz:g} MHz")
    print(f"  read from {cfg.path}" + _shadowing(args.config, cfg.path))
    note = _clock_note(cfg)
    if note:
        print(note)
    print(f"  config sha256 {cfg.sha[:16]} (ID register hash 0x{cfg.hash32:08x})")
    for k, v in cfg.params.items():
        print(f"  {cfg.engine}.{k}: {v}")
    from ..resources import MARGINS, RESOURCE_NAMES, format_buffers
    print(f"  estimated resources (model, not synthesis; DSPs are {est['dsp_family']}; the budget is "
          f"{100 * FIT_SHARE:.0f}% of each):")
    for r, used in est["resources"].items():
        avail = cfg.board.resources[r]
        margin = (f"  margin {MARGINS[r] * avail - used:,.0f} to the budget" if used <= MARGINS[r] * avail
                  else f"  OVER the budget ({MARGINS[r] * avail:,.0f}) by {used - MARGINS[r] * avail:,.0f}") \
            if r in MARGINS and avail else ""
        print(f"    {r:<7}{used:>8} of {avail:>8}  ({100 * est['utilization'][r]:.0f}%){margin}")
    for r, used, limit, _ in over:
        print(f"  note: {RESOURCE_NAMES.get(r, r)} {used:,} is above the budget ({limit:,.0f}, "
              f"{100 * FIT_SHARE:.0f}%): "
              f"kept with --allow-overfit; hlsnn render and build refuse it without")
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
    from ..plots import default_output, load_weights, plot_quantization, report_json
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


def _config_of(target_path):
    """The config of a config name, YAML path or overlay folder (its ``<name>.json``), as
    :class:`hlsnn.runtime.Accelerator` reads it, without making a target."""
    from pathlib import Path
    from ..config import load_config
    if Path(target_path).is_dir() or str(target_path).endswith(".bit"):
        from ..runtime.pynq_target import config_from_manifest, overlay_files, read_manifest
        return config_from_manifest(read_manifest(overlay_files(Path(target_path))[2]))
    return load_config(target_path)


def cmd_run(args):
    """One layer on a target, checked bit for bit against the emulator, with timing (or, given
    a NAME.hlsnn, a compiled network: :func:`hlsnn.commands.network.run_compiled`)."""
    if str(args.target_path).endswith(".hlsnn"):
        from .network import run_compiled
        return run_compiled(args)
    import numpy as np
    from ..runtime import Accelerator
    from ..errors import InputError
    if getattr(args, "overlay", None):
        raise InputError(f"--overlay: only for a compiled model (NAME.hlsnn); for one layer give the overlay folder "
                         f"itself: hlsnn run overlays/<name> --target pynq (not {printable(args.target_path)})")
    from pathlib import Path
    if not Path(args.target_path).exists() and ("/" in str(args.target_path) or Path(args.target_path).suffix):
        raise InputError(f"{printable(args.target_path)}: no such overlay folder or config file")
    from .network import check_npy_out, read_npy, save_npy
    x = read_npy(args.input, "input")
    # the input is checked against the engine before the target is made (a csim target compiles)
    from ..engines import ENGINES
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
        if args.weights:
            w = read_npy(args.weights, "weights")
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
            check_npy_out(args.output)
            save_npy(args.output, y)
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


def cmd_perf(args):
    """Modelled cycles of one operation, from the C-simulation's loop counters (or, given a
    NAME.hlsnn, a compiled network's end-to-end latency: :mod:`hlsnn.network.latency`)."""
    from .network import PERF_COMPILED_FLAGS, perf_compiled, refuse_flags
    if str(args.config).endswith(".hlsnn"):
        return perf_compiled(args)
    refuse_flags(args, "an accel config", "a compiled model (NAME.hlsnn)", PERF_COMPILED_FLAGS)
    from ..measure import operation as pm
    if (args.gemm is None) == (args.conv is None):
        from ..errors import InputError
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
            from ..config import load_config
            print("\nloops (host/hlsnn/perf/" + res["engine"] + ".py):")
            print(pm.loop_table(res["engine"], load_config(args.config).params))
    return 0
