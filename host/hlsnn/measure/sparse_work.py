"""Work and cycle model of ``sparse_cluster`` (sources 003/004): what each compute unit does
for one convolution layer, counted exactly from the layer's non-zeros and the real job plan.

:func:`work_model` takes the jobs that :meth:`Kernel.plan <hlsnn.engines.sparse_cluster.
kernel.Kernel.plan>` produces (the same partition, folds and rounds the kernel receives),
builds the input stream the kernel would receive, and reads the loop counts off it
(:func:`hlsnn.measure.counting.sparse_call_counts`, equal to the C-simulation's counters). The
per-unit figures are:

``multiplies``
    the products of non-zeros that land in the unit's output tiles (``EffectualMacs``):
    summed over all units (without pooling) exactly the non-zero products of the layer.
``steps``
    the iterations of the unit's ``MacLoop``: per input channel of a job, ``max(sum of the
    coefficients' cycles, entries of the next channel's tile)``, a coefficient at ``(ky, kx)``
    costing ``max(1, the most non-zeros any multiplier has in its window)`` (the kernel's
    vector unit: one coefficient per cycle on ``tile_w`` multipliers).
``cycles``
    the unit's process cycles in the cycle model (:mod:`hlsnn.perf.sparse_cluster`: every loop
    of the unit, with its II and depth): its ``MacLoop``, the first tile's load, the window
    counts, the output pixels, the parameter reads.

Derived figures: ``makespan = max(cycles)``, ``imbalance = max(cycles) / mean(cycles)``,
``dispatch_cycles`` and ``collect_cycles`` (the two stream processes), ``kernel_cycles`` (the
whole DATAFLOW region, as ``hlsnn perf`` models it), ``dense_cycles = Z * C * k^2 * H' * W' /
(units * tile_w)`` (a dense engine with as many multipliers, one MAC per multiplier and cycle,
``H' x W'`` the convolution's output before pooling) and ``speedup = dense_cycles /
makespan``. Every figure is reported for the rebalanced plan (``threshold``) and for the
equal split (the plan with ``balance="equal"``, which the partitioner returns at once, Alg
3-A step 2), so that before / after can be compared.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import ConfigError, InputError, MissingDependency
from ..plots import check_out, save_figure
from ..engines.sparse_cluster import protocol
from ..engines.sparse_cluster.kernel import Kernel, check_operands
from ..engines.sparse_cluster.spec import NAME

__all__ = ["work_model", "plan_work", "check_engine", "check_out", "synthetic_layer", "parse_densities",
           "density_sweep", "format_sweep", "plot_sweep", "KINDS"]

#: Input kinds of :func:`synthetic_layer`.
KINDS = ("random", "structured")


def check_engine(cfg):
    """``ConfigError`` unless ``cfg`` is a ``sparse_cluster`` config."""
    if getattr(cfg, "engine", None) != NAME:
        raise ConfigError(getattr(cfg, "path", "") or getattr(cfg, "name", ""), "engine",
                          getattr(cfg, "engine", None),
                          f"the work model and `hlsnn report` of an accelerator config are for {NAME!r} configs "
                          f"(e.g. sparse8_pynq-z2); hlsnn report also takes a deployment config (MODEL.yaml) or a "
                          f"compiled model (NAME.hlsnn)")


def plan_work(cfg, plan, w) -> dict:
    """The figures of the module docstring for one :class:`~.kernel.Plan` and weights ``w``,
    from the loop counts of the plan's one kernel call (the input stream the kernel would
    receive, read by :func:`hlsnn.measure.counting.sparse_call_counts`; no compiler, no
    emulation).

    Returns per-unit ``multiplies``, ``steps``, ``cycles`` (lists of ints), their totals,
    ``imbalance``, ``makespan``, ``dispatch_cycles``, ``collect_cycles``, ``kernel_cycles``,
    ``rounds`` and the partition's ``status`` and ``spread`` (its own balance metric on
    non-zero fractions)."""
    from ..perf.calls import call_cycles
    from .counting import sparse_call_counts
    from ..perf.sparse_cluster import process_cycles
    from ..formats import sparse as sfmt
    p = cfg.params
    M = p["units"]
    w = np.asarray(w)
    Z, C, k, _ = w.shape
    beats = protocol.pack_input(p, fmap_padded=plan.xp, coefs=sfmt.compress_kernel(w), rounds=plan.rounds,
                                bias=np.zeros(Z, np.int64), shift=np.zeros(Z, np.int64), ksize=k)
    flags = protocol.FLAG_POOL if plan.pool else 0
    counts = sparse_call_counts(p, beats, [C, Z, k, flags, len(plan.rounds), len(protocol.groups(p, Z))])
    procs = process_cycles(p, counts)
    get = lambda name: [int(counts.get(f"{name}.{m}", (0, 0))[0]) for m in range(M)]   # noqa: E731
    u_mult, u_steps = get("EffectualMacs"), get("MacLoop")
    u_cycles = [int(round(procs[f"Unit {m}"])) for m in range(M)]
    mean = float(np.mean(u_cycles))
    part = plan.partition
    return {
        "multiplies": u_mult, "steps": u_steps, "cycles": u_cycles,
        "total_multiplies": int(sum(u_mult)), "total_steps": int(sum(u_steps)),
        "imbalance": float(max(u_cycles)) / mean if mean > 0 else 1.0,
        "makespan": int(max(u_cycles)),
        "dispatch_cycles": int(round(procs["Dispatch"])), "collect_cycles": int(round(procs["Collect"])),
        "kernel_cycles": int(call_cycles(cfg, counts).cycles),
        "rounds": len(plan.rounds), "rects": [list(r) for r in part.rects],
        "status": part.status, "spread": float(part.spread),
    }


def work_model(cfg, x, w, *, padding="same", pool=False, threshold=0.03) -> dict:
    """Per-unit multiplies and cycles of one convolution layer on ``cfg``'s units, for the
    rebalanced plan and for the equal split (see the module docstring for every term).

    Parameters
    ----------
    cfg : hlsnn.config.Config
        A ``sparse_cluster`` config (units, tile and group sizes).
    x : array_like of int
        int8 input ``(C, H, W)``.
    w : array_like of int
        int8 weights ``(Z, C, k, k)``.
    padding, pool, threshold
        As in :meth:`Kernel.conv2d_int <hlsnn.engines.sparse_cluster.kernel.Kernel.conv2d_int>`.

    Returns
    -------
    dict
        The rebalanced plan's figures at the top level (:func:`plan_work`: ``multiplies``,
        ``steps``, ``cycles`` per unit, ``total_multiplies``, ``imbalance``, ``makespan``,
        ``dispatch_cycles``, ``collect_cycles``, ``kernel_cycles``, ...) plus ``speedup``, and the same under
        ``equal_split``; ``dense_cycles``, ``dense_macs``, ``density_x``, ``density_w``,
        ``shape`` ``{C, Z, k, H, W, H_out, W_out}``, ``units``, ``threshold``, ``padding``,
        ``pool``.

    Raises
    ------
    ConfigError
        ``cfg`` is not a ``sparse_cluster`` config.
    InputError
        Bad arrays, or sizes beyond the config's limits.
    """
    check_engine(cfg)
    p = cfg.params
    x, w = check_operands(p, x, w)
    Z, C, k, _ = w.shape
    kern = Kernel(cfg, None)
    plan = kern.plan(x, k, padding, pool, threshold, weights=w)
    plan_eq = kern.plan(x, k, padding, pool, threshold, balance="equal")
    hout, wout = plan.xp.shape[1] - k + 1, plan.xp.shape[2] - k + 1
    dense_macs = Z * C * k * k * hout * wout
    dense_cycles = dense_macs / (p["units"] * p["tile_w"])
    res = plan_work(cfg, plan, w)
    eq = plan_work(cfg, plan_eq, w)
    for r in (res, eq):
        r["speedup"] = dense_cycles / r["makespan"]
    res.update({
        "equal_split": eq,
        "dense_macs": int(dense_macs), "dense_cycles": float(dense_cycles),
        "density_x": float(np.count_nonzero(x)) / max(x.size, 1),
        "density_w": float(np.count_nonzero(w)) / max(w.size, 1),
        "shape": {"C": C, "Z": Z, "k": k, "H": int(x.shape[1]), "W": int(x.shape[2]),
                  "H_out": int(hout), "W_out": int(wout)},
        "units": p["units"], "threshold": float(threshold), "padding": padding, "pool": bool(pool),
    })
    return res


# --------------------------------------------------------------------------- density sweeps

def synthetic_layer(rng, channels, size, ksize, density, kind="random", out_channels=None):
    """A seeded int8 layer: ``x`` (channels, size, size) and ``w`` (out_channels, channels,
    ksize, ksize), both with a fraction ``density`` of non-zeros (values uniform in
    ``[-128, 127]`` without 0).

    ``kind="random"``: every input and weight is non-zero with probability ``density``.
    ``kind="structured"``: the input's non-zeros are clustered, as where objects are in an
    image: the blobs are the top ``a`` fraction of pixels of a sum of three Gaussian bumps
    (random centres, widths 8-20 % of the size), shared by all channels, and each input in a
    blob is non-zero with probability ``q = max(density, 0.9)``, ``a = density / q``. The
    weights are random as above. At density 1 both kinds are the same dense layer.
    """
    z = channels if out_channels is None else out_channels

    def values(shape):
        v = rng.integers(-128, 127, shape)
        return np.where(v >= 0, v + 1, v)                    # non-zero int8

    if kind == "random":
        x = np.where(rng.random((channels, size, size)) < density, values((channels, size, size)), 0)
    elif kind == "structured":
        q = max(density, 0.9)
        a = min(1.0, density / q)
        yy, xx = np.mgrid[0:size, 0:size]
        field = np.zeros((size, size))
        for _ in range(3):
            cy, cx = rng.uniform(0, size, 2)
            s = rng.uniform(0.08, 0.2) * size
            field += rng.uniform(0.5, 1.0) * np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / (2 * s * s))
        n_in = int(round(a * size * size))
        mask = np.zeros(size * size, bool)
        mask[np.argsort(-field, axis=None, kind="stable")[:n_in]] = True
        mask = mask.reshape(size, size)
        x = np.where(mask[None] & (rng.random((channels, size, size)) < q), values((channels, size, size)), 0)
    else:
        raise InputError(f"kind = {kind!r}: must be one of {', '.join(KINDS)}")
    w = np.where(rng.random((z, channels, ksize, ksize)) < density, values((z, channels, ksize, ksize)), 0)
    return x, w


def parse_densities(text):
    """``"1,0.5,0.2"`` -> ``[1.0, 0.5, 0.2]``: numbers in (0, 1], at least one, no repeats."""
    parts = [t.strip() for t in str(text).split(",")]
    try:
        vals = [float(t) for t in parts]
    except ValueError:
        raise InputError(f"--densities {text!r}: must be comma-separated numbers in (0, 1], "
                         f"e.g. 1,0.5,0.2,0.1,0.05") from None
    bad = [v for v in vals if not (0.0 < v <= 1.0) or not math.isfinite(v)]
    if bad:
        raise InputError(f"--densities {text!r}: {bad[0]:g} is not in (0, 1] (a fraction of non-zeros)")
    if len(set(vals)) != len(vals):
        raise InputError(f"--densities {text!r}: a density is repeated")
    return vals


def _pairs(equal, rebalanced, *keys):
    """``{<key>_equal, <key>_rebalanced}`` of each key, from the two work models."""
    return {f"{k}_{n}": m[k] for k in keys for n, m in (("equal", equal), ("rebalanced", rebalanced))}


def density_sweep(cfg, *, channels=64, size=56, ksize=3, densities=(1.0, 0.5, 0.2, 0.1, 0.05),
                  kinds=KINDS, seed=0, threshold=0.03) -> dict:
    """:func:`work_model` of a seeded synthetic layer (``channels -> channels``, ``size x
    size``, ``ksize x ksize``, 'same' padding) per kind and density: one row each."""
    check_engine(cfg)
    p = cfg.params
    for name, v, lo, hi in (("--channels", channels, 1, min(p["max_in_channels"], p["max_out_channels"])),
                            ("--size", size, 1, p["max_hw"]), ("--ksize", ksize, 1, p["max_ksize"])):
        if not lo <= v <= hi:
            raise InputError(f"{name} {v}: must be in [{lo}, {hi}] for config {cfg.name}")
    if ksize % 2 == 0:
        raise InputError(f"--ksize {ksize}: must be odd ('same' padding)")
    rows = []
    for ki, kind in enumerate(kinds):
        for di, d in enumerate(densities):
            rng = np.random.default_rng([seed, ki, di])
            x, w = synthetic_layer(rng, channels, size, ksize, d, kind)
            r = work_model(cfg, x, w, padding="same", threshold=threshold)
            e = r["equal_split"]
            rows.append({
                "kind": kind, "density": float(d), "density_x": r["density_x"], "density_w": r["density_w"],
                "multiplies": r["total_multiplies"], "steps": r["total_steps"],
                **_pairs(e, r, "makespan", "imbalance", "speedup", "rounds"), "status": r["status"],
                **_pairs(e, r, "spread", "dispatch_cycles", "collect_cycles", "cycles"),
                "rects_rebalanced": r["rects"],
                "kernel_cycles": r["kernel_cycles"],
            })
    return {"config": cfg.name, "engine": NAME, "units": p["units"],
            "shape": {"C": channels, "Z": channels, "k": ksize, "H": size, "W": size},
            "dense_cycles": (channels * channels * ksize * ksize * size * size) / (p["units"] * p["tile_w"]),
            "multipliers": p["units"] * p["tile_w"],
            "seed": seed, "threshold": threshold, "kinds": list(kinds), "rows": rows}


def kernel_cycles(cfg, x, w, *, padding="same", threshold=0.03) -> int:
    """The whole kernel's modelled cycles for this layer (:mod:`hlsnn.perf.sparse_cluster`:
    every loop of Dispatch, the units and Collect, the DATAFLOW region), from the loop counts
    of the rebalanced plan's stream (:class:`hlsnn.measure.counting.CountingTarget`, no compiler)."""
    from .counting import CountingTarget
    from ..engines import ENGINES
    kern = Kernel(cfg, CountingTarget(cfg, ENGINES[NAME]))
    kern.conv2d_int(x, w, padding=padding, threshold=threshold)
    return int(kern.last_cycles.cycles)


def format_sweep(rep) -> str:
    """The table ``hlsnn report`` prints."""
    s = rep["shape"]
    lines = [f"{rep['config']}: {rep['units']} units; {s['C']} -> {s['Z']} channels, {s['H']}x{s['W']}, "
             f"{s['k']}x{s['k']} 'same'; a dense engine with {rep['multipliers']} multipliers needs "
             f"{rep['dense_cycles']:,.0f} cycles",
             "unit cycles from the cycle model's loop counts (hlsnn.perf.sparse_cluster); before = equal split, "
             f"after = rebalanced (threshold {rep['threshold']:g})"]
    hdr = (f"{'inputs':<10} {'density':>7} {'multiplies':>12} {'makespan before':>15} {'after':>11} "
           f"{'imbalance before':>16} {'after':>6} {'speedup before':>14} {'after':>7} {'kernel model':>12}  "
           "nz-fraction spread")
    lines += [hdr, "-" * len(hdr)]
    for r in rep["rows"]:
        lines.append(f"{r['kind']:<10} {r['density']:7.3g} {r['multiplies']:12,d} {r['makespan_equal']:15,d} "
                     f"{r['makespan_rebalanced']:11,d} {r['imbalance_equal']:16.2f} {r['imbalance_rebalanced']:6.2f} "
                     f"{r['speedup_equal']:13.3g}x {r['speedup_rebalanced']:6.3g}x {r['kernel_cycles']:12,d}  "
                     f"{r['spread_equal']:.3f} -> {r['spread_rebalanced']:.3f} ({r['status']})")
    lines.append("imbalance = max/mean of the units' cycles; speedup = dense cycles / makespan; kernel model = "
                 "the whole kernel's cycles, rebalanced (hlsnn.perf, as hlsnn perf); nz-fraction "
                 "spread = what the partitioner balances (max - min of the units' non-zero fractions)")
    return "\n".join(lines)




_KIND_COLORS = {"random": "#1f77b4", "structured": "#d62728"}


def plot_sweep(rep, out, *, figsize=(10, 4.5), dpi=100) -> str:
    """Two panels against density: the imbalance (max/mean of the units' cycles) and the
    speedup over a dense engine with as many multipliers, each before (equal split, dashed)
    and after rebalancing (solid), per input kind. Returns the path written."""
    out = check_out(out)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.ticker import FuncFormatter, NullFormatter
    except ImportError:
        raise MissingDependency('hlsnn report needs matplotlib for the plot: pip install "hlsnn[plot]" '
                                '(or pass --no-plot)') from None
    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    ax_i, ax_s = fig.subplots(1, 2, gridspec_kw={"wspace": 0.22, "left": 0.065, "right": 0.985,
                                                 "top": 0.76, "bottom": 0.13})
    fmt = FuncFormatter(lambda v, _: f"{v:g}")
    handles = []
    for kind in rep["kinds"]:
        rows = sorted((r for r in rep["rows"] if r["kind"] == kind), key=lambda r: r["density"])
        if not rows:
            continue
        d = [r["density"] for r in rows]
        c = _KIND_COLORS.get(kind, "0.3")
        same = all(r["imbalance_equal"] == r["imbalance_rebalanced"] for r in rows)
        for key, ls, mk, what in (("equal", "--", "o", "equal split (before)"),
                                  ("rebalanced", "-", "s", "rebalanced (after" + (" = before)" if same else ")"))):
            ax_i.plot(d, [r[f"imbalance_{key}"] for r in rows], ls, marker=mk, color=c, ms=5,
                      mfc="white" if key == "equal" else c, lw=1.6)
            ax_s.plot(d, [r[f"speedup_{key}"] for r in rows], ls, marker=mk, color=c, ms=5,
                      mfc="white" if key == "equal" else c, lw=1.6)
            handles.append(Line2D([], [], ls=ls, marker=mk, color=c, mfc="white" if key == "equal" else c,
                                  label=f"{kind} inputs, {what}"))
    for ax in (ax_i, ax_s):
        ax.set_xscale("log")
        ax.invert_xaxis()
        ax.set_xlabel("density of inputs and weights (fraction of non-zeros)")
        ax.xaxis.set_major_formatter(fmt)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ds = sorted({r["density"] for r in rep["rows"]})
        ax.set_xticks(ds)
        ax.grid(color="0.9", lw=0.6)
        ax.set_axisbelow(True)
    ax_i.axhline(1.0, color="0.5", lw=0.8)
    ax_i.set_ylim(bottom=0.9)
    ax_i.set_ylabel("imbalance: max / mean of unit cycles")
    ax_i.set_title("load imbalance (1 = perfectly balanced)", fontsize=10)
    ax_s.set_yscale("log")
    ax_s.yaxis.set_major_formatter(fmt)
    ax_s.axhline(1.0, color="0.5", lw=0.8)
    ax_s.set_ylabel(f"speedup over a dense engine ({rep['multipliers']} MAC/cycle)")
    ax_s.set_title("speedup = dense cycles / slowest unit's cycles", fontsize=10)
    s = rep["shape"]
    fig.suptitle(f"{rep['config']}: {rep['units']} units, {s['C']}->{s['Z']} channels, {s['H']}x{s['W']}, "
                 f"{s['k']}x{s['k']} conv (cycle model, seed {rep['seed']})", fontsize=11, y=0.985)
    fig.legend(handles=handles, loc="upper center", ncol=2, fontsize=8.5, frameon=False,
               bbox_to_anchor=(0.5, 0.95), columnspacing=3.0)
    save_figure(fig, out, dpi)
    return str(out)
