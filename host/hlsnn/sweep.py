"""Parameter sweeps over one accelerator config (``hlsnn sweep``).

A sweep takes one config file and, for each varied key, a list of values; the variants are
the Cartesian product of those lists, applied to the parsed YAML of the file (the first key
varies slowest). Variant ``i`` is named ``<name>_v<i>``. Each variant then goes through
three stages, and stops at the first it does not pass:

1. **validation** -- :func:`hlsnn.config.load_config` with ``check_fit=False``: every rule
   except "fits the board". A variant that breaks one (e.g. ``acc_bits`` too small for the
   mantissas) is listed with its one-line error; the sweep goes on.
2. **budget** -- the engine's resource model (``cfg.estimates``: resources, utilization,
   throughput) against the board. A variant that needs more of a resource than the board
   has is *flagged* (which resource, by how much) and is not compiled.
3. **C-simulation** -- :func:`hlsnn.compare.compare` on the ``csim`` target (the rendered
   kernel compiled with g++) against the emulator, in parallel worker processes. The csim
   library cache is keyed by a hash of the sources, so the workers share the build folder.

With ``cluster=ADDRESS`` (``hlsnn sweep --cluster``) every variant is instead one task on a
Dask scheduler (:mod:`hlsnn.cluster`): the three stages run on a worker, in its own temporary
folder, from the variant, its board file and the rendered kernel sent as bytes (this machine
validates too, only to know which kernels to render and send), and the row comes back.

Keys (``KEY`` of ``--vary KEY=v1,v2,...``): a key of the engine's section, written ``rows``,
``bfp_systolic.rows`` or ``array.rows`` (``array`` is an alias of the engine's section), or
the top-level ``clock_mhz``. Values are parsed with ``yaml.safe_load``: ``8``, ``1.5``,
``true``, ``nearest_even``, ``null`` (the default of keys such as ``stream_bits``).

Resource figures are the engine's model (``estimate()`` in its ``spec.py``, built on
:mod:`hlsnn.resources` from the buffers the kernel declares), not synthesis. Each variant also
carries that per-buffer breakdown (``buffers``, ``multipliers``); the table is followed by one
line per variant naming the buffers that take block RAM or UltraRAM.
"""
from __future__ import annotations

import copy
import itertools
import json
import os
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import yaml

from .config import engine_of, find_config, load_board, read_yaml, safe_yaml
from .errors import ConfigError, InputError, MissingDependency, excerpt
from .plots import check_out, save_figure
from .variant import RESOURCES, _check_csim_tools, _csim_ok, _csim_one, _row

__all__ = ["RESOURCES", "MAX_VARIANTS", "parse_vary", "allowed_keys", "resolve_key", "variants", "run_sweep",
           "format_table", "check_out", "plot_sweep", "matplotlib_missing"]

#: Most variants one sweep may have.
MAX_VARIANTS = 512
#: Names of the engine's section besides the engine's own name.
SECTION_ALIASES = ("array",)
#: Top-level keys that may be varied.
TOP_KEYS = ("clock_mhz",)

_LABELS = {"dsp": "DSP", "bram36": "BRAM", "uram": "URAM", "lut": "LUT", "ff": "FF"}
_FLOAT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)[eE][+-]?\d+$")   # 1e3: a string in YAML 1.1


# --------------------------------------------------------------------------- variants

def _engine_of(raw, source):
    from . import engines  # noqa: F401  (registers the engines)
    engine, _ = engine_of(raw, source)
    section = raw.get(engine)
    if section is not None and not isinstance(section, Mapping):
        raise ConfigError(source, engine, section, "must be a mapping of keys to values")
    return engine


def allowed_keys(engine: str) -> list:
    """The keys ``--vary`` accepts for ``engine`` (engine-section keys without prefix)."""
    from .engines import ENGINES
    return list(TOP_KEYS) + list(ENGINES[engine].SCHEMA)


def resolve_key(key: str, engine: str) -> str:
    """``rows`` / ``<engine>.rows`` / ``array.rows`` -> ``rows``; ``clock_mhz`` -> ``clock_mhz``.

    Raises InputError naming the key and the allowed keys.
    """
    from .engines import ENGINES
    schema = ENGINES[engine].SCHEMA
    allowed = ", ".join(allowed_keys(engine))
    name = key
    if "." in key:
        prefix, name = key.split(".", 1)
        if prefix not in (engine,) + SECTION_ALIASES:
            raise InputError(f"--vary {key}: {prefix!r} is not the config's engine section ({engine}, alias "
                             f"{', '.join(SECTION_ALIASES)}); allowed keys: {allowed}")
        if name not in schema:
            raise InputError(f"--vary {key}: unknown key of the {engine} section; allowed keys: {allowed}")
        return name
    if name in TOP_KEYS or name in schema:
        return name
    raise InputError(f"--vary {key}: unknown key for engine {engine}; allowed keys: {allowed}")


def _parse_value(key, text):
    text = text.strip()
    if not text:
        raise InputError(f"--vary {key}: empty value; write --vary {key}=v1,v2,... with no empty items")
    try:
        v = safe_yaml(text)
    except yaml.YAMLError:
        raise InputError(f"--vary {key}: value {excerpt(text)} is not a YAML scalar") from None
    if isinstance(v, str) and _FLOAT.fullmatch(v):
        v = float(v)
    if v is not None and not isinstance(v, (bool, int, float, str)):
        raise InputError(f"--vary {key}: value {text!r} must be a number, true/false, null or a string, "
                         f"not a {type(v).__name__}")
    return v


def parse_vary(specs: Sequence[str]) -> dict:
    """``["rows=8,16", "clock_mhz=100"]`` -> ``{"rows": [8, 16], "clock_mhz": [100]}``.

    Keys are returned as written (see :func:`resolve_key`); values are parsed with
    ``yaml.safe_load``. Raises InputError on bad syntax, empty or repeated values and keys.
    """
    if isinstance(specs, str):
        specs = [specs]
    out = {}
    for spec in specs:
        key, sep, values = str(spec).partition("=")
        key = key.strip()
        if not sep or not key or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", key):
            raise InputError(f"--vary {spec!r}: expected KEY=v1,v2,... (e.g. --vary rows=8,16)")
        if key in out:
            raise InputError(f"--vary {key}: given twice; put all its values in one list")
        vals = [_parse_value(key, t) for t in values.split(",")]
        seen = set()
        for v in vals:
            kind = "bool" if isinstance(v, bool) else "num" if isinstance(v, (int, float)) else type(v).__name__
            if (kind, v) in seen:
                raise InputError(f"--vary {key}: value {v!r} is listed twice")
            seen.add((kind, v))
        out[key] = vals
    return out


def _base_name(raw, source):
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        name = re.sub(r"\W", "_", Path(str(source)).stem) or "config"
    return name


def variants(config, vary, *, source: Optional[str] = None) -> list:
    """The variants of ``config`` (a YAML path, or a parsed dict) for ``vary``.

    Parameters
    ----------
    config : str, Path or Mapping
        The base config. A name in ``board:`` is resolved once, relative to the file as
        :func:`hlsnn.config.load_board` does, and replaced by that board file's path, so
        that the variants (loaded from dicts) find the same board.
    vary : Mapping[str, Sequence] or Sequence[str]
        ``{key: [values]}``, or ``--vary`` strings ``"KEY=v1,v2,..."``.
    source : str, optional
        What error messages call the config (default: the path, or ``<dict>``).

    Returns
    -------
    list of dict
        ``index``, ``name`` (``<name>_v<index>``), ``values`` (``{key: value}``, keys as
        resolved by :func:`resolve_key`), ``source`` and ``data`` (the variant's YAML dict),
        in the order of the Cartesian product (the first key varies slowest).

    Raises
    ------
    InputError
        Bad ``--vary`` syntax, an unknown or repeated key, more than :data:`MAX_VARIANTS`.
    ConfigError
        The base config is not a YAML mapping with a known engine, or names an unknown board.
    """
    if isinstance(config, Mapping):
        raw, path = copy.deepcopy(dict(config)), None
        source = source or "<dict>"
    else:
        path = find_config(config)          # a path, or the name of a user or shipped config
        source = source or str(path)
        raw = read_yaml(path)
    engine = _engine_of(raw, source)
    if isinstance(vary, str) or (isinstance(vary, Sequence) and all(isinstance(s, str) for s in vary)):
        vary = parse_vary(vary)
    if not vary:
        raise InputError("sweep needs at least one --vary KEY=v1,v2,... (e.g. --vary rows=8,16)")
    keys, lists = [], []
    for key, vals in vary.items():
        k = resolve_key(key, engine)
        if k in keys:
            raise InputError(f"--vary {key}: the key {k} is already varied")
        vals = [vals] if isinstance(vals, (str, bytes, int, float, bool)) or vals is None else list(vals)
        if not vals:
            raise InputError(f"--vary {key}: needs at least one value")
        keys.append(k)
        lists.append(vals)
    n = 1
    for vals in lists:
        n *= len(vals)
    if n > MAX_VARIANTS:
        raise InputError(f"--vary lists make {n} variants ({' x '.join(str(len(v)) for v in lists)}); "
                         f"at most {MAX_VARIANTS}: shorten the lists")
    if isinstance(raw.get("board"), str):
        raw["board"] = load_board(raw["board"], source=source, config_path=path).path
    base = _base_name(raw, source)
    out = []
    for i, combo in enumerate(itertools.product(*lists)):
        suffix = f"_v{i}"
        data = copy.deepcopy(raw)
        data["name"] = base[:64 - len(suffix)] + suffix
        section = dict(data.get(engine) or {})
        for k, v in zip(keys, combo):
            if k in TOP_KEYS:
                data[k] = v
            else:
                section[k] = v
        data[engine] = section
        out.append({"index": i, "name": data["name"], "values": dict(zip(keys, combo)),
                    "source": f"{source} [{data['name']}]", "data": data})
    return out


# --------------------------------------------------------------------------- the sweep


def _csim_outcome(c) -> str:
    """One variant's C-simulation in a few words (the progress line and the bar's postfix)."""
    if "error" in c:
        return f"error: {c['error'].splitlines()[0]}"
    return f"{c['mismatches']} mismatches in {c['cases']} cases ({c['outputs']} outputs)"


def _tick(name, what, line, progress, pbar, show_progress):
    """A finished variant: ``line`` to the progress callback, the bar one step on with ``what``."""
    if progress:
        progress(f"  {name}: {line}")
    if show_progress:
        pbar.update(1)
        pbar.set_postfix_str(f"{name}: {what}")


def run_sweep(config, vary, *, csim: bool = True, jobs: Optional[int] = None, cases: int = 2, seed: int = 0,
              progress: Optional[Callable[[str], Any]] = None, show_progress: bool = False,
              cluster: Optional[str] = None) -> dict:
    """Validate, estimate and (optionally) C-simulate every variant of a sweep.

    Parameters
    ----------
    config, vary
        As in :func:`variants`.
    csim : bool, default True
        C-simulate the variants that are valid and fit the board.
    jobs : int, optional
        Worker processes for C-simulation (default ``os.cpu_count()``).
    cases : int, default 2
        Random cases per variant besides the engine's edge cases (``n_random`` of compare).
    seed : int, default 0
        Seed of the cases.
    progress : callable, optional
        Called with one line of text when C-simulation starts and as each variant ends.
    show_progress : bool, default False
        A progress bar over the C-simulated variants on stderr (:mod:`hlsnn.progress`).
    cluster : str, optional
        The address of a Dask scheduler (``tcp://host:8786``): every variant becomes one task
        there (validation, estimate and C-simulation on a worker, :mod:`hlsnn.cluster`);
        ``jobs`` is then ignored and ``jobs`` of the result counts the cluster's workers
        (at most the C-simulated variants, as locally). Needs ``hlsnn[cluster]``.

    Returns
    -------
    dict
        ``config``, ``name``, ``engine``, ``board``, ``clock_mhz`` (the variants' clock; None
        when ``clock_mhz`` is varied), ``budget`` (the board's resources), ``keys``, ``vary``,
        ``csim``, ``cases``, ``seed``, ``jobs`` (worker processes used), ``throughput_unit``,
        ``variants``, ``summary`` (counts) and ``status`` (0: every C-simulated variant
        matched, 1: one did not or failed to compile). Each variant has
        ``index``, ``name``, ``values``, ``valid``, ``error`` (one line, or None),
        ``resources``, ``utilization``, ``throughput`` (``{value, unit, what}``), ``fits``,
        ``over_budget`` (list of ``{resource, used, available, over}``) and ``csim`` (None
        when not run, else ``cases``, ``outputs``, ``mismatches``, ``first_mismatch``,
        ``register_mismatches``, ``setup_s``, ``run_s``, ``time_s``; or ``error``, ``time_s``)
        and ``csim_skipped`` (why not run, or None); valid variants also ``model``: the
        modelled cycles of a 64x512x512 GEMM (:func:`hlsnn.perf.closed_form.reference_gemm`).
    """
    if jobs is None:
        jobs = os.cpu_count() or 1
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise InputError(f"--jobs {jobs!r}: must be a positive integer")
    if isinstance(cases, bool) or not isinstance(cases, int) or not 0 <= cases <= 10000:
        raise InputError(f"--cases {cases!r}: must be an integer in [0, 10000]")
    vs = variants(config, vary)
    first = vs[0]["data"]
    engine = first["engine"]
    board = load_board(first["board"], source=vs[0]["source"]) if isinstance(first.get("board"), str) else None

    if cluster is not None:
        return _finish(config, vs, engine, board, csim, cases, seed,
                       *_run_on_cluster(cluster, vs, csim=csim, cases=cases, seed=seed, progress=progress,
                                        show_progress=show_progress))
    results = [_row(v, csim)[0] for v in vs]

    todo = [(r, v) for r, v in zip(results, vs) if r["valid"] and r["fits"] and csim]
    workers = min(jobs, len(todo)) if todo else 0
    if todo:
        _check_csim_tools()
        if progress:
            progress(f"csim: {len(todo)} variant(s) on {workers} worker process(es); each compiles once "
                     f"(cached by source hash) and runs the edge cases + {cases} random case(s) ...")

        from .progress import bar
        pbar = bar(total=len(todo), desc=f"sweep csim ({workers} worker(s))", unit="variant", show=show_progress)

        def done(r):
            what = _csim_outcome(r["csim"])
            _tick(r["name"], what, f"{what}, {r['csim']['time_s'] or 0:.1f} s", progress, pbar, show_progress)

        if workers == 1:                            # --jobs 1: in this process, one after the other
            for r, v in todo:
                r["csim"] = _csim_one(v["data"], v["source"], seed, cases)
                done(r)
        else:
            from concurrent.futures import ProcessPoolExecutor, as_completed
            from concurrent.futures.process import BrokenProcessPool
            from .workers import die_with_parent   # workers end when this process is killed
            with ProcessPoolExecutor(max_workers=workers, initializer=die_with_parent,
                                     initargs=(os.getpid(),)) as pool:
                futures = {pool.submit(_csim_one, v["data"], v["source"], seed, cases): r for r, v in todo}
                for fut in as_completed(futures):
                    r = futures[fut]
                    try:
                        r["csim"] = fut.result()
                    except BrokenProcessPool as exc:
                        r["csim"] = {"error": f"the worker process died ({exc})", "time_s": None}
                    done(r)
        if show_progress:
            pbar.close()

    return _finish(config, vs, engine, board, csim, cases, seed, results, workers)


def _finish(config, vs, engine, board, csim, cases, seed, results, workers):
    ran = [r for r in results if r["csim"] is not None]
    failed = [r for r in ran if not _csim_ok(r["csim"])]
    unit = next((r["throughput"]["unit"] for r in results if r["throughput"]), None)
    summary = {
        "variants": len(results),
        "invalid": sum(not r["valid"] for r in results),
        "over_budget": sum(r["valid"] and not r["fits"] for r in results),
        "fit": sum(bool(r["valid"] and r["fits"]) for r in results),
        "csim_run": len(ran),
        "csim_failed": len(failed),
        "mismatches": sum(r["csim"].get("mismatches", 0) for r in ran),
    }
    keys = list(vs[0]["values"])
    vary_lists = {}
    for k in keys:
        seen = []
        for v in vs:
            if not any(type(s) is type(v["values"][k]) and s == v["values"][k] for s in seen):
                seen.append(v["values"][k])
        vary_lists[k] = seen
    return {
        "config": "<dict>" if isinstance(config, Mapping) else str(config),
        "name": vs[0]["name"].rsplit("_v", 1)[0],
        "engine": engine,
        "board": board.name if board else vs[0]["data"].get("board"),
        "clock_mhz": None if "clock_mhz" in keys else next((r["clock_mhz"] for r in results if r["valid"]), None),
        "budget": {k: board.resources[k] for k in RESOURCES} if board else None,
        "keys": keys,
        "vary": vary_lists,
        "csim": bool(csim), "cases": cases, "seed": seed, "jobs": workers,
        "throughput_unit": unit,
        "variants": results,
        "summary": summary,
        "status": 1 if failed else 0,
    }


def _run_on_cluster(address, vs, *, csim, cases, seed, progress, show_progress):
    """Every variant as one task on the Dask cluster at ``address`` (:mod:`hlsnn.cluster`):
    the rows as the workers made them, and the workers used (as ``jobs`` locally)."""
    from . import cluster as cl
    local = [_row(v, csim) for v in vs]          # which variants to render for C-simulation
    todo = [bool(csim and r["valid"] and r["fits"]) for r, _ in local]
    client = cl.connect(address)
    try:
        n = cl.n_workers(client)
        if progress:
            progress(f"cluster {address}: {len(vs)} task(s) on {n} worker(s), {sum(todo)} with C-simulation ...")
        payloads = [cl.sweep_payload(v, cfg if do else None, csim=csim, seed=seed, cases=cases)
                    for v, (_, cfg), do in zip(vs, local, todo)]
        from .progress import bar
        pbar = bar(total=len(vs), desc=f"sweep on cluster ({n} worker(s))", unit="variant", show=show_progress)
        results = [None] * len(vs)

        def on_done(i, res, err):
            if err is None:
                r = json.loads(res)
            else:
                r = local[i][0]
                if todo[i]:
                    r["csim"] = {"error": err, "time_s": None}
                else:                               # the row: this machine's estimate, and why
                    r["csim_skipped"] = f"task failed: {err}"
            results[i] = r
            what = r["csim_skipped"] or "estimate" if r["csim"] is None else _csim_outcome(r["csim"])
            _tick(r["name"], what, what, progress, pbar, show_progress)

        cl.run_tasks(client, cl.sweep_point, payloads, on_done)
        if show_progress:
            pbar.close()
    finally:
        client.close()
    return results, (min(n, sum(todo)) if any(todo) else 0)


# --------------------------------------------------------------------------- the table

def _pct(u) -> str:
    p = 100 * u
    return f"{p:.1f}" if p < 10 else f"{p:.0f}"


def _fmt_value(v) -> str:
    if isinstance(v, bool) or v is None:
        return {True: "true", False: "false", None: "null"}[v]
    if isinstance(v, float):
        return f"{v:g}"
    from .errors import printable
    return printable(v)          # a value with a newline (an invalid variant's) stays on its row


def _fits_text(r) -> str:
    if not r["valid"]:
        return ""
    if r["fits"]:
        return "yes"
    return "NO: " + ", ".join(f"{_LABELS.get(o['resource'], o['resource'].upper())} {o['used']}/{o['available']} "
                              f"(+{o['over']})" for o in r["over_budget"])


def _csim_text(r) -> str:
    c = r["csim"]
    if c is None:
        if (r["csim_skipped"] or "").startswith("task failed: "):
            return "TASK FAILED: " + r["csim_skipped"][len("task failed: "):]
        return {"over budget": "not compiled", "--no-csim": "-", "invalid": ""}.get(r["csim_skipped"], "-")
    if "error" in c:
        return "ERROR: " + c["error"].splitlines()[0]
    bad = c["mismatches"] or c["register_mismatches"]
    status = "ok" if not bad else "MISMATCH"
    regs = f", registers differ in {len(c['register_mismatches'])} case(s)" if c["register_mismatches"] else ""
    return f"{status}: {c['mismatches']} mismatches / {c['cases']} cases{regs}, {c['time_s']:.1f} s"


def _shown(report) -> list:
    """The resources to show: those the board has (a board without URAM gets no URAM column)."""
    budget = report.get("budget") or {}
    return [k for k in RESOURCES if budget.get(k, 1)]


def format_table(report: dict) -> str:
    """The sweep as a text table: one row per variant, then a summary line."""
    keys = report["keys"]
    shown = _shown(report)
    unit = report["throughput_unit"] or "throughput"
    head = ["variant", *keys, *(_LABELS[k] + "%" for k in shown), unit, "fits?", "csim"]
    rows = []
    for r in report["variants"]:
        vals = [_fmt_value(r["values"][k]) for k in keys]
        if not r["valid"]:
            rows.append([r["name"], *vals, None, "invalid: " + r["error"]])
            continue
        util = [_pct(r["utilization"][k]) for k in shown]
        tp = f"{r['throughput']['value']:.3g}" if r["throughput"] else "-"
        rows.append([r["name"], *vals, *util, tp, _fits_text(r), _csim_text(r)])
    n_num = len(keys) + len(shown) + 1          # right-aligned columns after the name
    ncols = len(head)
    width = [len(h) for h in head]
    for row in rows:
        if row[-2] is None:                       # an invalid row: name, values, message
            for i in range(1 + len(keys)):
                width[i] = max(width[i], len(row[i]))
            continue
        for i, cell in enumerate(row[:ncols - 1]):  # the last column is not padded
            width[i] = max(width[i], len(cell))

    def line(cells):
        out = []
        for i, cell in enumerate(cells):
            if i == len(cells) - 1:
                out.append(cell)
            elif 1 <= i <= n_num:
                out.append(cell.rjust(width[i]))
            else:
                out.append(cell.ljust(width[i]))
        return "  ".join(out).rstrip()

    budget = report["budget"] or {}
    clock = f" at {report['clock_mhz']:g} MHz" if isinstance(report["clock_mhz"], (int, float)) else ""
    lines = [f"sweep of {report['name']} ({report['engine']} on {report['board']}{clock}): "
             f"{len(report['variants'])} variants of {' x '.join(keys)}",
             "board budget " + ", ".join(f"{k.upper()} {budget[k]}" for k in shown if k in budget)
             + "; utilization and throughput from the engine's model, not synthesis",
             line(head)]
    for row in rows:
        if row[-2] is None:
            lines.append(line([*row[:1 + len(keys)], row[-1]]))
        else:
            lines.append(line(row))
    s = report["summary"]
    tail = (f"{s['variants']} variants: {s['fit']} fit the board, {s['over_budget']} over budget (not compiled), "
            f"{s['invalid']} invalid; ")
    if not report["csim"]:
        tail += "csim skipped (--no-csim)"
    else:
        tail += (f"csim: {s['csim_run']} run on {report['jobs']} worker(s), {s['csim_failed']} failed "
                 f"({s['mismatches']} mismatching outputs)")
    lines.append(tail)
    from .resources import memory_summary
    valid = [r for r in report["variants"] if r["valid"] and r.get("buffers")]
    if valid:
        lines.append("block memory by buffer (BRAM36 / URAM; `hlsnn info` or --json for every buffer):")
        lines += [f"  {r['name']}: {memory_summary(r)}" for r in valid]
    whats = list(dict.fromkeys(r["throughput"]["what"] for r in report["variants"] if r["throughput"]))
    if whats:
        lines.append(f"{unit}: {'; '.join(whats)}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the plot


def matplotlib_missing() -> Optional[str]:
    """None if matplotlib can be imported, else the message saying how to install it."""
    import importlib.util
    if importlib.util.find_spec("matplotlib") is None:
        return 'hlsnn sweep needs matplotlib for the plot: pip install "hlsnn[plot]" (or pass --no-plot)'
    return None


_MARKERS = {"dsp": ("o", "#1f77b4"), "bram36": ("s", "#ff7f0e"), "uram": ("v", "#8c564b"), "lut": ("^", "#2ca02c"),
            "ff": ("D", "#9467bd")}


def _offset(k, shown) -> float:
    """Horizontal offset of resource ``k``'s marker around its variant."""
    return (shown.index(k) - (len(shown) - 1) / 2) * 0.09


def plot_sweep(report: dict, out, *, dpi: int = 100) -> str:
    """Two panels per variant: the estimated utilization of each resource (one marker per
    resource, the board budget at 100 %) and the peak throughput. Over-budget variants are
    shaded red, invalid ones are labelled. Returns the path written."""
    out = check_out(out)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
        from matplotlib.patches import Patch
    except ImportError:
        raise MissingDependency(matplotlib_missing() or 'pip install "hlsnn[plot]"') from None
    vs = report["variants"]
    n = len(vs)
    keys = report["keys"]
    shown = _shown(report)
    fig = Figure(figsize=(max(8.0, 0.75 * n + 2.5), 7.4), dpi=dpi)
    FigureCanvasAgg(fig)
    legend_rows = 1 if n >= 9 else 2
    ax_u, ax_t = fig.subplots(2, 1, sharex=True, gridspec_kw={
        "height_ratios": (3, 2), "hspace": 0.08, "left": 0.08, "right": 0.985,
        "top": 0.87 - 0.035 * (legend_rows - 1), "bottom": 0.06 + 0.035 * len(keys)})
    x = list(range(n))
    utils = [100 * r["utilization"][k] for r in vs if r["valid"] for k in shown]
    top = max(utils, default=100)
    log = top > 400
    for i, r in enumerate(vs):
        if r["valid"] and not r["fits"]:
            for ax in (ax_u, ax_t):
                ax.axvspan(i - 0.45, i + 0.45, color="#d62728", alpha=0.12, lw=0)
    for k in shown:
        mk, col = _MARKERS[k]
        xs = [i for i, r in enumerate(vs) if r["valid"]]
        ys = [100 * vs[i]["utilization"][k] for i in xs]
        offs = _offset(k, shown)
        ax_u.plot([i + offs for i in xs], ys, mk, color=col, ms=7, mec="white", mew=0.6,
                  label=_LABELS[k], linestyle="none")
    ax_u.axhline(100, color="#d62728", ls="--", lw=1.2)
    if log:
        ax_u.set_yscale("log")
        low = min([u for u in utils if u > 0], default=1)
        ax_u.set_ylim(max(low / 2, 0.05), top * 3)
    else:
        ax_u.set_ylim(0, max(110, top * 1.18))
    ax_u.set_ylabel("estimated utilization (% of board)")
    ax_u.grid(axis="y", color="0.9", lw=0.6)
    ax_u.set_axisbelow(True)
    for i, r in enumerate(vs):
        if not r["valid"]:
            for ax in (ax_u, ax_t):
                ax.axvspan(i - 0.45, i + 0.45, color="0.5", alpha=0.12, lw=0)
            ax_u.text(i, 0.5, "invalid config", rotation=90, ha="center", va="center", fontsize=9,
                      color="0.35", transform=ax_u.get_xaxis_transform())
        elif not r["fits"]:
            worst = max(r["over_budget"], key=lambda o: o["used"] / max(o["available"], 1))
            k = worst["resource"]
            more = f" & {len(r['over_budget']) - 1} more" if len(r["over_budget"]) > 1 else ""
            ax_u.annotate(f"+{worst['over']} {_LABELS.get(k, k.upper())}{more}",
                          (i + _offset(k, shown) if k in shown else i,
                           100 * r["utilization"].get(k, worst["used"] / max(worst["available"], 1))),
                          xytext=(0, 7), textcoords="offset points", ha="center", va="bottom",
                          fontsize=8, color="#b22222", fontweight="bold")
    handles = [Line2D([], [], marker=_MARKERS[k][0], color=_MARKERS[k][1], ls="none", ms=7, label=_LABELS[k])
               for k in shown]
    handles += [Line2D([], [], color="#d62728", ls="--", lw=1.2, label="board budget (100%)"),
                Patch(color="#d62728", alpha=0.18, label="over budget: flagged, not compiled")]
    if any(not r["valid"] for r in vs):
        handles.append(Patch(color="0.5", alpha=0.2, label="invalid config"))
    ax_u.legend(handles=handles, loc="lower left", fontsize=8, ncol=len(handles) if n >= 9 else 4,
                framealpha=0.92, bbox_to_anchor=(0, 1.02), borderaxespad=0)

    unit = report["throughput_unit"] or ""
    tps = [r["throughput"]["value"] if r["valid"] and r["throughput"] else 0.0 for r in vs]
    colors = ["#4c72b0" if (r["valid"] and r["fits"]) else "#d62728" for r in vs]
    bars = ax_t.bar(x, tps, width=0.6, color=colors, alpha=0.85)
    for b, r in zip(bars, vs):
        if r["valid"] and not r["fits"]:
            b.set_hatch("///")
            b.set_alpha(0.45)
    tmax = max(tps, default=0) or 1
    ax_t.set_ylim(0, tmax * 1.28)
    for i, (t, r) in enumerate(zip(tps, vs)):
        if not r["valid"]:
            continue
        label = f"{t:.3g}"
        c = r["csim"]
        if c is not None:
            label += "\ncsim ok" if _csim_ok(c) else "\ncsim FAIL"
        ax_t.text(i, t + tmax * 0.02, label, ha="center", va="bottom", fontsize=7.5,
                  color="black" if c is None or _csim_ok(c) else "#b22222")
    ax_t.set_ylabel(f"peak throughput ({unit})" if unit else "peak throughput")
    ax_t.grid(axis="y", color="0.9", lw=0.6)
    ax_t.set_axisbelow(True)
    ax_t.set_xticks(x)
    ticks = [f"v{r['index']}\n" + "\n".join(f"{k}={_fmt_value(r['values'][k])}" for k in keys) for r in vs]
    from .plots import plain
    ax_t.set_xticklabels([plain(t) for t in ticks], fontsize=8)     # an invalid variant's "$..$" is no mathtext
    for lab, r in zip(ax_t.get_xticklabels(), vs):
        if r["valid"] and not r["fits"]:
            lab.set_color("#b22222")
        elif not r["valid"]:
            lab.set_color("0.45")
    ax_t.set_xlim(-0.6, n - 0.4)
    s = report["summary"]
    csim_note = (f"csim: {s['csim_run']} run, {s['csim_failed']} failed" if report["csim"] else "csim not run")
    fig.suptitle(f"sweep of {report['name']} ({report['engine']} on {report['board']}) over {', '.join(keys)}\n"
                 f"{s['fit']} of {s['variants']} fit, {s['over_budget']} over budget, {s['invalid']} invalid; "
                 f"{csim_note}; estimates from the engine's resource model, not synthesis", fontsize=10)
    save_figure(fig, out, dpi)
    return str(out)
