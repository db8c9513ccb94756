"""``hlsnn perf``: run one operation of a given shape in C-simulation, on seeded data, and
report the modelled cycles (:mod:`hlsnn.perf`), the useful MACs, the share of the array's
peak, the bound and the bytes each way.

Data (seed 0 unless given): GEMM operands are standard normal floats (``x`` (B, K), ``w``
(N, K); ``|x|`` for unsigned activations); convolutions take ``x`` (C, H, W) and ``w`` (Z, C, k, k) — normal floats on
``shift_mac``, int8 on ``sparse_cluster`` where both are zero outside a random ``density``
share. Useful MACs: ``B*K*N`` for a GEMM, ``Z*H'*W'*C*k*k`` for a dense convolution, and
for ``sparse_cluster`` the products of non-zeros that land in an output (the kernel's
``EffectualMacs`` counter), with the dense count beside them.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

MODES = ("twohot", "pot", "pot_sum")


def parse_shape(text, n, what):
    """``"64,512,512"`` -> (64, 512, 512), with a clear error."""
    try:
        vals = tuple(int(v) for v in str(text).split(","))
    except ValueError:
        vals = ()
    if len(vals) != n or min(vals) < 1:
        raise InputError(f"--{what} {text!r}: expected {n} positive integers separated by commas")
    return vals


#: the largest operation ``hlsnn perf`` runs: operands and result together (values) and multiply-adds;
#: beyond them the arrays alone need gigabytes and the C-simulation hours
MAX_VALUES = 1 << 26
MAX_MACS = 1 << 31


def check_size(gemm=None, conv=None):
    """Refuse an operation beyond :data:`MAX_VALUES` / :data:`MAX_MACS` with one clear error
    (``--gemm 100000000,65536,8192`` asked numpy for 48 PiB)."""
    if gemm is not None:
        b, k, n = gemm
        values, macs, what = b * k + n * k + b * n, b * k * n, f"--gemm {b},{k},{n}"
    elif conv is not None:
        c, h, w, z, ks = conv
        values, macs, what = c * h * w + z * c * ks * ks + z * h * w, z * h * w * c * ks * ks, \
            f"--conv {c},{h},{w},{z},{ks}"
    else:
        return
    if values > MAX_VALUES or macs > MAX_MACS:
        raise InputError(f"{what}: {values:,} values and {macs:,} multiply-adds; hlsnn perf runs at most "
                         f"{MAX_VALUES:,} values and {MAX_MACS:,} multiply-adds (cycles scale with the tile "
                         "count: measure a smaller shape)")


def measure(config, *, gemm=None, conv=None, mode=None, resident=False, density=1.0, padding="same", seed=0,
            target="csim", build_dir=None):
    """Run the operation on ``target`` (csim or sim) and return the report dict (the keys of
    ``hlsnn perf --json``). ``resident`` (``bfp_systolic``, ``shift_mac``): the weights are put on chip
    (``load_weights``) and a first call loads them; the report is of a second, identical
    call, which streams only the parameters and activations."""
    from ..config import Config, load_config
    from ..runtime import Accelerator
    from ..perf.pages import PAGES
    cfg = config if isinstance(config, Config) else load_config(config)
    engine = cfg.engine
    if (gemm is None) == (conv is None):
        raise InputError("give exactly one of --gemm B,K,N and --conv C,H,W,Z,k")
    if resident and engine == "sparse_cluster":
        raise InputError(f"--resident: {cfg.name} ({engine}) does not keep its weights on chip; bfp_systolic and "
                         f"shift_mac configs do (load_weights); run without --resident")
    if mode is not None and (engine != "shift_mac" or mode not in MODES):
        raise InputError(f"--mode {mode}: only shift_mac configs take a mode, one of {', '.join(MODES)}")
    if not 0.0 < float(density) <= 1.0:
        raise InputError(f"--density {density}: must be in (0, 1]")
    if density != 1.0 and engine != "sparse_cluster":
        raise InputError(f"--density: only sparse_cluster configs skip zeros ({cfg.name} is {engine})")
    if padding not in ("same", "valid"):
        raise InputError(f"--padding {padding!r}: must be 'same' or 'valid'")
    check_size(gemm, conv)
    if gemm is not None and engine == "sparse_cluster":      # refused before the target's compile
        raise InputError(f"{cfg.name} ({engine}) runs convolutions only: use --conv C,H,W,Z,k")
    if conv is not None and engine == "bfp_systolic":
        raise InputError(f"{cfg.name} ({engine}) runs GEMMs only: use --gemm B,K,N")
    rng = np.random.default_rng(seed)
    p = cfg.params
    opts = {} if build_dir is None else {"build_dir": build_dir}
    acc = Accelerator(cfg, target=target, **({} if target != "csim" else opts))
    try:
        if gemm is not None:
            b, k, n = gemm
            x, w = _acts(p, rng.normal(size=(b, k))), rng.normal(size=(n, k))
            kw = {"mode": mode} if engine == "shift_mac" else {}
            if resident:            # the weights go on chip with a first call; the second is measured
                acc.kernel.load_weights(w, **kw)
                acc.kernel.gemm(x, w, **kw)
            acc.kernel.gemm(x, w, **kw)
            macs = dense = b * k * n
            shape = {"op": "gemm", "B": b, "K": k, "N": n}
        else:
            c, h, wd, z, ks = conv
            pad = (ks - 1) // 2 if padding == "same" else 0
            oh, ow = h + 2 * pad - ks + 1, wd + 2 * pad - ks + 1
            if oh < 1 or ow < 1:
                raise InputError(f"--conv: a {ks}x{ks} kernel does not fit a {h}x{wd} map with padding {padding}")
            dense = z * oh * ow * c * ks * ks
            if engine == "sparse_cluster":
                x = (rng.integers(-128, 128, (c, h, wd)) * (rng.random((c, h, wd)) < density)).astype(np.int8)
                w = (rng.integers(-128, 128, (z, c, ks, ks)) * (rng.random((z, c, ks, ks)) < density)).astype(np.int8)
                acc.kernel.conv2d(x, w, padding=padding)
            else:
                xc, wc = _acts(p, rng.normal(size=(c, h, wd))), rng.normal(size=(z, c, ks, ks))
                if resident:
                    acc.kernel.load_weights(wc, mode=mode)
                    acc.kernel.conv2d(xc, wc, padding=padding, mode=mode)
                acc.kernel.conv2d(xc, wc, padding=padding, mode=mode)
            shape = {"op": "conv2d", "C": c, "H": h, "W": wd, "Z": z, "k": ks, "padding": padding,
                     "density": float(density)}
        kc = acc.kernel.last_cycles
        if kc is None:
            raise InputError(f"target {target}: this kernel library has no loop counters")
        if engine == "sparse_cluster":
            macs = sum(i for name, (i, _) in kc.counts.items() if name.startswith("EffectualMacs."))
        else:
            macs = dense
        peak = PAGES[engine].peak_macs_per_cycle(p, mode)
        beat = p["stream_bits"] // 8
        res = {"config": cfg.name, "engine": engine, "target": target, **shape,
               "mode": (mode or p.get("default_mode")) if engine == "shift_mac" else None,
               "resident": bool(resident),
               "cycles": int(kc.cycles), "calls": kc.calls, "clock_mhz": float(cfg.clock_mhz),
               "time_us": kc.cycles / cfg.clock_mhz, "macs": int(macs), "dense_macs": int(dense),
               "macs_per_cycle": macs / kc.cycles, "peak_macs_per_cycle": peak,
               "utilization": macs / (kc.cycles * peak), "bound": kc.bound,
               "phases": {k: int(v) for k, v in sorted(kc.phases.items(), key=lambda kv: -kv[1])},
               "beats_in": kc.beats_in, "beats_out": kc.beats_out,
               "bytes_in": kc.beats_in * beat, "bytes_out": kc.beats_out * beat,
               "processes": {k: int(v) for k, v in kc.processes.items()} or None,
               "counts": {k: list(v) for k, v in sorted(kc.counts.items())}}
        from ..engines.timing import enable_timing
        from ..perf.timing import loop_timing
        res["timing"] = loop_timing(cfg)
        res["stall_enable"] = enable_timing(cfg)
        from ..perf.schedule import config_schedule
        res["schedule"] = config_schedule(cfg)
        return res
    finally:
        acc.close()


def _acts(p, x):
    """Activations for a config: ``|x|`` where they are unsigned (``shift_mac act_signed: false``)."""
    return np.abs(x) if p.get("act_signed", True) is False else x


def loop_table(engine, p) -> str:
    """The engine page's loop rows for config parameters ``p``: pragma II, accesses per
    iteration, the II the tool gets, depth, phase (``hlsnn perf --loops``)."""
    from ..perf.pages import PAGES
    from ..perf.model import page_table
    return page_table(PAGES[engine].loops(p))


def format_report(r, all_loops=False) -> str:
    """The human-readable ``hlsnn perf`` output."""
    if r["op"] == "gemm":
        what = f"GEMM B={r['B']} K={r['K']} N={r['N']}"
    else:
        what = (f"conv C={r['C']} {r['H']}x{r['W']} -> Z={r['Z']}, {r['k']}x{r['k']} ({r['padding']})"
                + (f", density {r['density']:g}" if r["engine"] == "sparse_cluster" else ""))
    if r.get("mode"):
        what += f", mode {r['mode']}"
    if r.get("resident"):
        what += ", weights resident (loaded by a first call, not counted)"
    lines = [f"{r['config']} ({r['engine']}): {what}",
             f"  cycles      {r['cycles']:,} in {r['calls']} kernel call(s) = {r['time_us']:,.1f} us at "
             f"{r['clock_mhz']:g} MHz",
             f"  MACs        {r['macs']:,} useful" + (f" (dense {r['dense_macs']:,})" if r["macs"] != r["dense_macs"]
                                                     else ""),
             f"  MAC/cycle   {r['macs_per_cycle']:.2f} of a peak {r['peak_macs_per_cycle']} = "
             f"{100 * r['utilization']:.1f}% utilization",
             f"  bound       {r['bound']}",
             f"  bytes       {r['bytes_in']:,} in ({r['beats_in']:,} beats), {r['bytes_out']:,} out "
             f"({r['beats_out']:,} beats)",
             "  cycles by phase:"]
    for k, v in r["phases"].items():
        lines.append(f"    {k:<32} {v:>14,}  {100 * v / r['cycles']:5.1f}%")
    if r.get("processes"):
        lines.append("  DATAFLOW processes (the region takes the slowest plus the fill):")
        for k, v in r["processes"].items():
            lines.append(f"    {k:<32} {v:>14,}  {100 * v / r['cycles']:5.1f}%")
    if r.get("timing"):
        t = r["timing"]
        lines.append(f"  loop-back timing (delay model, host/hlsnn/perf/timing.py; budget {t[0]['budget_ns']:.2f} ns = "
                     f"the period less 27%):")
        for row in t:
            verdict = "closes at II = 1" if row["ii"] == 1 else f"does NOT close: modelled at II = {row['ii']}"
            lines.append(f"    {row['loop']:<16} {row['delay_ns']:5.2f} ns  {verdict}  ({row['chain']})")
    if r.get("stall_enable"):
        e = r["stall_enable"]
        verdict = ("closes with the model's margin" if e.get("closes_with_margin")
                   else "closes without the model's margin" if e["closes"] else "does NOT close")
        if e.get("style") == "frp":
            verdict += ": the loop is rendered free-running (style=frp), no global enable"
        lines.append(f"  stall enable of {e['loop']}: {e['loads']:,} flip-flops; handshake, a replication tree of "
                     f"{e['levels']} levels and the route across the array: {e['delay_ns']:.2f} ns of "
                     f"{e['budget_ns']:.2f}, {verdict} (an estimate, host/hlsnn/perf/timing.py)")
    if r.get("schedule") is not None:
        from ..perf.schedule import format_table
        lines.append("  schedule (II derived from the rendered C++, host/hlsnn/perf/schedule.py; loops above II 1"
                     + (", all loops" if all_loops else "") + "):")
        lines += ["    " + ln for ln in format_table(r["schedule"], all_loops).splitlines()]
    return "\n".join(lines)
