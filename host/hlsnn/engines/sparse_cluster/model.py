"""Work and cycle model of ``sparse_cluster`` (sources 003/004): what each compute unit does
for one convolution layer, counted exactly from the layer's non-zeros and the real job plan.

:func:`work_model` takes the jobs that :meth:`Kernel.plan <hlsnn.engines.sparse_cluster.
kernel.Kernel.plan>` produces (the same partition, folds and rounds the kernel receives) and
counts, per job ``j`` (output rectangle ``[row0, row1) x [col0, col1)``, ``oh x ow``
outputs) and per output-channel group ``g = [z0, z1)`` of ``zg <= max_z`` channels
(:func:`protocol.groups`):

``n_d(kz)``
    the non-zero inputs of the job's input tile of channel ``kz``: the padded input
    ``xp[kz, row0 : row1 + k - 1, col0 : col1 + k - 1]`` (the entries of the unit's *data*
    segment; 0 for an idle job).
``n_w(kz, g)``
    the non-zero coefficients ``w[z0:z1, kz]`` (the entries of the *coefficient* segment).
``pairs``
    ``sum_kz n_d(kz) * n_w(kz, g)``: iterations of the kernel's ``NonZeroInputs`` loop,
    which runs over every entry of the tile for every coefficient (one cycle each at II=1).
``multiplies``
    the subset of the pairs whose product lands inside the job's output (the kernel's
    ``if (oy >= 0 && oy < oh && ox >= 0 && ox < ow)``), i.e. the products that are actually
    accumulated: ``sum_{kz, ky, kx} nnz(xp[kz, row0+ky : row0+ky+oh, col0+kx : col0+kx+ow])
    * nnz(w[z0:z1, kz, ky, kx])``. Summed over all jobs and groups (without pooling) this is
    exactly the number of non-zero products of the layer.
``cycles``
    the model's cycle count of the job for the group, the sum of four terms:

    * ``pairs`` -- the inner loop, one pair per cycle (``NonZeroInputs``, II=1);
    * ``2 * sum_kz n_d(kz)`` -- loading the tile's value and index buffers (``LoadTile``,
      II=2: two 16-bit lanes per entry), once per channel and group;
    * ``zg * tile_h * tile_w`` -- clearing the accumulation buffer (``ClearAcc``, II=1,
      over the config's whole tile, also for an idle job);
    * ``2 * zg * outputs`` -- bias, ReLU, pooling and requantization (``OutCols``, II=2);
      ``outputs = oh * ow``, or ``(oh / 2) * (ow / 2)`` with 2x2 pooling.

A unit's multiplies and cycles are the sums over its jobs (one per round, idle rounds
included) and the groups. Not modelled: loop entry and pipeline fill latencies (notably one
per non-zero coefficient and channel, when ``NonZeroInputs`` is entered), the ``ReadParams``
loop (``3 * zg`` cycles per job), and the coupling of the units through the shared
``Dispatch``. Two bounds describe that coupling and are reported beside the model:

``dispatch_cycles``
    ``Dispatch`` reads the input stream one 16-bit lane per cycle and feeds the units one
    after the other: per group and round ``units * (2 + 3 * zg)`` lanes of job headers, and
    per channel ``sum_m (1 + 2 * n_d)`` data lanes plus ``1 + 2 * n_w`` coefficient lanes. No
    unit can finish before Dispatch has read its last entry.
``lockstep_cycles``
    The FIFOs let a unit run at most about one input channel ahead of the slowest, so the
    units proceed nearly in lock step per channel: ``sum_{g, round} (sum_kz max_m (pairs_m(kz)
    + 2 n_d,m(kz)) + max_m (clear + post))``. The makespan with per-channel coupling lies
    between ``makespan`` (fully decoupled units, the model's definition) and this.

The whole-kernel cycle model is :mod:`hlsnn.perf.sparse_cluster` (``hlsnn perf``, the deploy
report, ``Kernel.last_cycles``): it costs every loop of all three DATAFLOW processes from the
C-simulation's counters, with entry depths, ``ReadParams`` and ``Dispatch``. This module's
``pairs`` and ``multiplies`` per unit equal that kernel's ``NonZeroInputs.<m>`` and
``EffectualMacs.<m>`` counters exactly (tests/perf/test_cycle_model.py); its ``cycles`` are the
partial sum above, kept for the load-balance study (before / after rebalancing).

Derived figures: ``makespan = max(cycles)``, ``imbalance = max(cycles) / mean(cycles)``,
``dense_cycles = Z * C * k^2 * H' * W' / units`` (a dense engine with as many multipliers,
one MAC per multiplier and cycle, ``H' x W'`` the convolution's output before pooling) and
``speedup = dense_cycles / makespan``. Every figure is reported for the rebalanced plan
(``threshold``) and for the equal split (the plan with ``balance="equal"``, which the
partitioner returns at once, Alg 3-A step 2), so that before / after can be compared.
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import ConfigError, InputError, MissingDependency
from ...plots import check_out, save_figure
from . import protocol
from .kernel import Kernel, check_operands
from .spec import NAME

__all__ = ["work_model", "plan_work", "check_engine", "check_out", "synthetic_layer", "parse_densities",
           "density_sweep", "format_sweep", "plot_sweep", "KINDS"]

#: Input kinds of :func:`synthetic_layer`.
KINDS = ("random", "structured")


def _box(P, r0, r1, c0, c1):
    """Counts of rectangles ``[r0, r1) x [c0, c1)`` from prefix sums ``P`` (C, H+1, W+1);
    the corner arrays are (N,), the result (C, N)."""
    return P[:, r1, c1] - P[:, r0, c1] - P[:, r1, c0] + P[:, r0, c0]


def check_engine(cfg):
    """``ConfigError`` unless ``cfg`` is a ``sparse_cluster`` config."""
    if getattr(cfg, "engine", None) != NAME:
        raise ConfigError(getattr(cfg, "path", "") or getattr(cfg, "name", ""), "engine",
                          getattr(cfg, "engine", None),
                          f"the work model and `hlsnn report` are for {NAME!r} configs "
                          f"(e.g. configs/accel/sparse4_pynq-z2.yaml)")


def plan_work(cfg, plan, w) -> dict:
    """The model of the module docstring for one :class:`~.kernel.Plan` and weights ``w``.

    Returns per-unit ``multiplies``, ``pairs``, ``cycles`` (lists of ints), their totals,
    ``imbalance``, ``makespan``, ``dispatch_cycles``, ``lockstep_cycles``, ``rounds`` and the
    partition's ``status`` and ``spread`` (its own balance metric on non-zero fractions)."""
    p = cfg.params
    M, th, tw = p["units"], p["tile_h"], p["tile_w"]
    w = np.asarray(w)
    Z, C, k, _ = w.shape
    xp = plan.xp
    nzx = np.asarray(xp != 0, np.int64)
    P = np.zeros((C, xp.shape[1] + 1, xp.shape[2] + 1), np.int64)
    np.cumsum(np.cumsum(nzx, axis=1), axis=2, out=P[:, 1:, 1:])

    jobs = [j for rnd in plan.rounds for j in rnd]                  # round-major, then unit
    R = len(plan.rounds)
    unit = np.array([j.unit for j in jobs], np.int64)
    r0 = np.array([j.row0 for j in jobs], np.int64)
    r1 = np.array([j.row1 for j in jobs], np.int64)
    c0 = np.array([j.col0 for j in jobs], np.int64)
    c1 = np.array([j.col1 for j in jobs], np.int64)
    oh, ow = r1 - r0, c1 - c0
    active = oh > 0
    outputs = (oh // 2) * (ow // 2) if plan.pool else oh * ow

    # n_d (C, N): the job's input tile, k - 1 rows and columns of halo (0 for idle jobs)
    n_d = np.where(active, _box(P, r0, np.where(active, r1 + k - 1, r0), c0, np.where(active, c1 + k - 1, c0)), 0)
    # win (C, k, k, N): non-zeros whose product with coefficient (ky, kx) lands in the job
    win = np.empty((C, k, k, len(jobs)), np.int64)
    for ky in range(k):
        for kx in range(k):
            win[:, ky, kx] = _box(P, r0 + ky, r0 + ky + oh, c0 + kx, c0 + kx + ow)

    nzw = np.asarray(w != 0, np.int64)
    grps = protocol.groups(p, Z)
    n_wo = np.stack([nzw[z0:z1].sum(axis=0) for z0, z1 in grps])          # (G, C, k, k)
    n_w = n_wo.reshape(len(grps), C, -1).sum(axis=2)                       # (G, C)
    zg = np.array([z1 - z0 for z0, z1 in grps], np.int64)                  # (G,)

    pairs_kz = n_d[None, :, :] * n_w[:, :, None]                           # (G, C, N)
    pairs = pairs_kz.sum(axis=1)                                           # (G, N)
    mult = np.einsum("gcyx,cyxn->gn", n_wo, win)                           # (G, N)
    load = 2 * n_d.sum(axis=0)                                             # (N,)
    fixed = zg[:, None] * th * tw + 2 * zg[:, None] * outputs[None, :]     # (G, N): clear + post
    cycles = pairs + load[None, :] + fixed                                 # (G, N)

    per_unit = lambda a: np.bincount(unit, weights=a.sum(axis=0), minlength=M).astype(np.int64)  # noqa: E731
    u_mult, u_pairs, u_cycles = per_unit(mult), per_unit(pairs), per_unit(cycles)

    # bounds of the units' coupling through Dispatch (module docstring)
    G = len(grps)
    dispatch = (G * R * M * 2 + R * M * 3 * int(zg.sum())                  # job segments
                + G * int((1 + 2 * n_d).sum())                             # data segments, every group
                + R * int((1 + 2 * n_w).sum()))                            # coefficient segments, every round
    by_round = (pairs_kz + 2 * n_d[None]).reshape(G, C, R, M).max(axis=3)  # (G, C, R): slowest unit per channel
    lockstep = int(by_round.sum() + fixed.reshape(G, R, M).max(axis=2).sum())

    mean = float(u_cycles.mean())
    part = plan.partition
    return {
        "multiplies": u_mult.tolist(), "pairs": u_pairs.tolist(), "cycles": u_cycles.tolist(),
        "total_multiplies": int(u_mult.sum()), "total_pairs": int(u_pairs.sum()),
        "imbalance": float(u_cycles.max()) / mean if mean > 0 else 1.0,
        "makespan": int(u_cycles.max()),
        "dispatch_cycles": int(dispatch), "lockstep_cycles": lockstep,
        "rounds": R, "rects": [list(r) for r in part.rects],
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
        ``pairs``, ``cycles`` per unit, ``total_multiplies``, ``imbalance``, ``makespan``,
        ``dispatch_cycles``, ``lockstep_cycles``, ...) plus ``speedup``, and the same under
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
    plan = kern.plan(x, k, padding, pool, threshold)
    plan_eq = kern.plan(x, k, padding, pool, threshold, balance="equal")
    hout, wout = plan.xp.shape[1] - k + 1, plan.xp.shape[2] - k + 1
    dense_macs = Z * C * k * k * hout * wout
    dense_cycles = dense_macs / p["units"]
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
                "multiplies": r["total_multiplies"], "pairs": r["total_pairs"],
                "makespan_equal": e["makespan"], "makespan_rebalanced": r["makespan"],
                "imbalance_equal": e["imbalance"], "imbalance_rebalanced": r["imbalance"],
                "speedup_equal": e["speedup"], "speedup_rebalanced": r["speedup"],
                "rounds_equal": e["rounds"], "rounds_rebalanced": r["rounds"],
                "status": r["status"], "spread_equal": e["spread"], "spread_rebalanced": r["spread"],
                "dispatch_cycles_equal": e["dispatch_cycles"], "dispatch_cycles_rebalanced": r["dispatch_cycles"],
                "lockstep_cycles_equal": e["lockstep_cycles"], "lockstep_cycles_rebalanced": r["lockstep_cycles"],
                "cycles_equal": e["cycles"], "cycles_rebalanced": r["cycles"],
                "rects_rebalanced": r["rects"],
                "kernel_cycles": kernel_cycles(cfg, x, w, threshold=threshold),
            })
    return {"config": cfg.name, "engine": NAME, "units": p["units"],
            "shape": {"C": channels, "Z": channels, "k": ksize, "H": size, "W": size},
            "dense_cycles": (channels * channels * ksize * ksize * size * size) / p["units"],
            "seed": seed, "threshold": threshold, "kinds": list(kinds), "rows": rows}


def kernel_cycles(cfg, x, w, *, padding="same", threshold=0.03) -> int:
    """The whole kernel's modelled cycles for this layer (:mod:`hlsnn.perf.sparse_cluster`:
    every loop of Dispatch, the units and Collect, the DATAFLOW region), from the loop counts
    of the rebalanced plan's stream (:class:`hlsnn.perf.counting.CountingTarget`, no compiler)."""
    from ...perf.counting import CountingTarget
    from .. import ENGINES
    kern = Kernel(cfg, CountingTarget(cfg, ENGINES[NAME]))
    kern.conv2d_int(x, w, padding=padding, threshold=threshold)
    return int(kern.last_cycles.cycles)


def format_sweep(rep) -> str:
    """The table ``hlsnn report`` prints."""
    s = rep["shape"]
    lines = [f"{rep['config']}: {rep['units']} units; {s['C']} -> {s['Z']} channels, {s['H']}x{s['W']}, "
             f"{s['k']}x{s['k']} 'same'; a dense engine with {rep['units']} multipliers needs "
             f"{rep['dense_cycles']:,.0f} cycles",
             "model cycles per unit (hlsnn.engines.sparse_cluster.model); before = equal split, "
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
    ax_s.set_ylabel(f"speedup over a dense engine ({rep['units']} MAC/cycle)")
    ax_s.set_title("speedup = dense cycles / slowest unit's cycles", fontsize=10)
    s = rep["shape"]
    fig.suptitle(f"{rep['config']}: {rep['units']} units, {s['C']}->{s['Z']} channels, {s['H']}x{s['W']}, "
                 f"{s['k']}x{s['k']} conv (cycle model, seed {rep['seed']})", fontsize=11, y=0.985)
    fig.legend(handles=handles, loc="upper center", ncol=2, fontsize=8.5, frameon=False,
               bbox_to_anchor=(0.5, 0.95), columnspacing=3.0)
    save_figure(fig, out, dpi)
    return str(out)
