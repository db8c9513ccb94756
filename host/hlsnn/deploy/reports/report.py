"""The page of ``hlsnn report MODEL.yaml``, one self-contained HTML page about a deployment config.

:func:`hlsnn.evaluation.report.write_report` runs :func:`hlsnn.evaluation.run.deploy` with
per-layer statistics and writes, from its result and the sections here, one HTML file
(inline CSS, figures as base64 PNG, no scripts, no external files):

1. the run: model, target, test and calibration images, float accuracy (onnx's
   ReferenceEvaluator), hlsnn version and the command that reproduces the page;
2. accuracy per assignment against float (table and bar chart);
3. per-layer relative RMS error against the float reference, radix points and saturated
   outputs (table and grouped bar chart, log scale);
4. per engine layer, the float weights (after BN folding) with the quantization levels of
   every format used (:func:`hlsnn.plots.draw_weight_levels`);
5. weight sparsity and input density per layer and format (table and chart);
6. modelled latency per layer and board (:func:`layer_cycles`): a model, not a measurement;
7. with ``--radix-update e5`` (or ``calibration.update: e5``): each fixed-point layer's
   radix-point update, E2 or E4, with both modelled times (:mod:`hlsnn.deploy.quantize.update`).
"""
from __future__ import annotations

import base64
import io
from html import escape
from pathlib import Path

import numpy as np

from ...version import __version__
from ...config import find_config, load_config, read_yaml
from ...engines.common import largest_frac
from ...errors import ConfigError, InputError, MissingDependency
from ...formats import bfp as bfpfmt
from ...paths import CONFIGS_DIR
from ...plots import draw_weight_levels, plain, shift_levels
from . import evaluate
from ..quantize.quant import prune

__all__ = ["layer_cycles", "layer_shape", "engine_input_shapes"]

_CSS = """body{font:14px/1.45 system-ui,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
h1{font-size:1.6em}h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.8em 0;font-size:13px}th,td{border:1px solid #ccc;padding:3px 8px}
th{background:#f2f2f2}td.n{text-align:right;font-variant-numeric:tabular-nums}
img{max-width:100%;display:block;margin:.8em 0}.note{background:#fff6d5;border-left:4px solid #e0b000;
padding:.5em .8em}code{background:#f4f4f4;padding:1px 4px}dl{display:grid;grid-template-columns:max-content auto;
gap:2px 1em}dt{font-weight:600}dd{margin:0}"""


# --------------------------------------------------------------------------- cycle model

def layer_shape(layer, in_hw=None) -> dict:
    """A layer's GEMM per sample (:func:`hlsnn.measure.layers.gemm_shape`): ``positions``
    (output pixels; 1 for dense), ``k`` (reduction length: K, or C*k*k), ``n`` (outputs),
    ``in_elems`` (input values)."""
    from ...measure.layers import gemm_shape
    positions, k, n, chw = gemm_shape(layer, in_hw)
    return {"positions": positions, "k": k, "n": n, "in_elems": k if chw is None else int(np.prod(chw))}


def layer_cycles(layer, cfg, batch=1, *, fmt_type=None, in_hw=None, weight_sparsity=0.0, input_density=1.0,
                 x=None, w=None, **terms):
    """Modelled cycles of one engine layer on the accelerator ``cfg`` (a model, not a measurement).

    The kernel calls the deploy runner makes for the layer, costed by the same cycle model as
    ``hlsnn perf`` and ``Kernel.last_cycles`` (:mod:`hlsnn.perf`: the loop counts of the
    kernel's templates, II, depths, serial phases): :func:`hlsnn.measure.layers.layer_cycles`,
    whose docstring lists the calls per engine. ``bfp_systolic`` and ``shift_mac`` counts
    depend on the shape only; ``sparse_cluster`` counts are taken on ``x`` and ``w`` (int8)
    when given, else on a seeded synthetic layer with ``weight_sparsity`` and
    ``input_density``; ``terms``: ``input_terms`` and ``lo_density`` of a conv taking its input
    in two terms (:func:`hlsnn.measure.layers.input_terms`, kept in a layer's ``per_layer``
    statistics).

    Returns a dict: ``compute``, ``stream_in``, ``stream_out``, ``serial`` (cycles per phase
    group), ``cycles``, ``bound`` (the phase that limits the layer), ``us``, ``calls`` and the
    GEMM view ``m``, ``k``, ``n``.
    """
    from ...measure.layers import layer_cycles as _model
    return _model(layer, cfg, batch, fmt_type=fmt_type, in_hw=in_hw, weight_sparsity=weight_sparsity,
                  input_density=input_density, x=x, w=w, **terms)


def retarget(accel_path, board):
    """The accel config at ``accel_path`` built for ``board`` instead (its clock and DMA width;
    the resource check is left to the caller)."""
    raw = dict(read_yaml(find_config(accel_path)))     # a bare name (bfp8_zcu104) is looked up
    raw["board"] = board
    return load_config(raw, source=f"{accel_path}@{board}", check_fit=False)


# --------------------------------------------------------------------------- html helpers

def _table(headers, rows, tid=None):
    """An HTML table; every cell is escaped, numbers are right-aligned."""
    head = "".join(f"<th>{escape(str(h))}</th>" for h in headers)
    body = []
    for r in rows:
        cells = "".join(f'<td class="n">{escape(str(v))}</td>' if isinstance(v, (int, float, np.number))
                        or _numeric(v) else f"<td>{escape(str(v))}</td>" for v in r)
        body.append(f"<tr>{cells}</tr>")
    ident = f' id="{escape(tid)}"' if tid else ""
    return f"<table{ident}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _numeric(v):
    try:
        float(str(v).rstrip("%").replace("+", ""))
        return True
    except ValueError:
        return False


def _img(fig, alt):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90)
    data = base64.b64encode(buf.getvalue()).decode("ascii")
    return f'<img src="data:image/png;base64,{data}" alt="{escape(alt)}">'


def _pct(x):
    return "" if x is None else f"{100 * x:.2f}"


def _opt(v):
    return "" if v is None else v


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise MissingDependency('hlsnn report needs matplotlib: pip install "hlsnn[plot]"') from None

    def new(w, h):
        fig = Figure(figsize=(w, h))
        FigureCanvasAgg(fig)
        return fig
    return new


def _bars(new, groups, series, ylabel, *, log=False, hline=None, title=""):
    """Grouped bar chart: ``series`` is {name: [value per group]} (None: no bar)."""
    fig = new(10, 4)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(groups))
    wdt = 0.8 / max(len(series), 1)
    for i, (name, vals) in enumerate(series.items()):
        v = np.array([np.nan if a is None else a for a in vals], float)
        ax.bar(x - 0.4 + wdt * (i + 0.5), v, wdt, label=plain(name))
    if hline is not None:
        ax.axhline(hline[0], color="k", linestyle="--", linewidth=1.2, label=plain(hline[1]))
    ax.set_xticks(x)
    ax.set_xticklabels([plain(g) for g in groups], rotation=20 if len(groups) > 6 else 0,
                       ha="right" if len(groups) > 6 else "center")
    if log:
        ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.set_title(plain(title), fontsize=11)
    ax.grid(axis="y", color="0.9")
    ax.set_axisbelow(True)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- sections

def _output_rules(A) -> list:
    """The section of the output-layer rules (:mod:`hlsnn.deploy.reports.fitreport`): per assignment and
    layer, the ``weight_fit: network`` refit kept or rejected and the ``input_terms: 2`` terms
    taken, with their errors; nothing where no assignment has them."""
    fits = [(n, ln, v) for n, e in A.items() for ln, v in (e.get("output_fit") or {}).items()]
    terms = [(n, ln, v) for n, e in A.items() for ln, v in (e.get("input_terms") or {}).items()]
    if not fits and not terms:
        return []
    out = ['<h2 id="output-rules">The output layer: refit and input terms</h2>']
    if fits:
        out.append(_table(["assignment", "layer", "weight_fit network", "error before %", "error after %",
                           "held-out before %", "held-out after %", "why"],
                          [(n, ln, "kept" if v["kept"] else "rejected", _pct(v["error_before"]),
                            _pct(v["error_after"]), _pct(v["held_out_before"]), _pct(v["held_out_after"]), v["why"])
                           for n, ln, v in fits], "output-fit-table"))
    if terms:
        out.append(_table(["assignment", "layer", "input terms", "one term's error %", "two terms' error %", "why"],
                          [(n, ln, v["terms"], _pct(v["one_term_error"]), _pct(v["two_term_error"]), v["why"])
                           for n, ln, v in terms], "input-terms-table"))
    out.append("<p>Errors: the layer's output against the float network's on the calibration images (relative "
               "L2 norm; held-out: the odd-numbered images, the fit made on the even-numbered ones); one and two "
               "terms' error: the part of the layer's output the rounding of its input carries "
               "(<code>hlsnn.deploy.reports.fitreport</code>).</p>")
    return out


def _weight_rows(layer, fmts, accels):
    """Level rows for :func:`draw_weight_levels` and description rows for the table."""
    w2 = layer.w.reshape(layer.w.shape[0], -1)
    widest_row = int(np.argmax(np.abs(w2).max(axis=1)))
    rows, info = [], []
    for i, f in enumerate(fmts):
        p = accels[f.accel].params
        color = f"C{i % 10}"
        lines = ()
        if f.type == "bfp":
            m = p["mantissa_bits"]
            axis = -1 if p["weight_exponent"] == "row" else None
            q = bfpfmt.quantize(w2, m, axis=axis, exponent_bits=p["exponent_bits"], rounding=p["rounding"])
            ex = np.asarray(q.exponents).reshape(-1)
            e = int(ex[widest_row] if ex.size > 1 else ex[0])
            levels = np.ldexp(np.arange(-(1 << (m - 1)), 1 << (m - 1), dtype=np.float64), e)
            desc = f"{m}-bit mantissas x 2^{e} (exponent per {p['weight_exponent']}; row with the largest |w|)"
        elif f.type in ("twohot", "pot"):
            t, levels = shift_levels(w2, f.type, p["exp_bits"], f.delta if f.type == "twohot" else 0, None)
            desc = (f"{f.type} codes, exp_bits {p['exp_bits']}" + (f", delta {f.delta}" if f.type == "twohot" else "")
                    + f", x 2^-{int(np.asarray(t.scale_exponent).reshape(-1)[0])}")
        else:
            wp = prune(layer.w, f.prune)
            fw = largest_frac(float(np.abs(wp).max()), 127)
            levels = np.ldexp(np.arange(-128, 128, dtype=np.float64), -fw)
            desc = f"int8 x 2^-{fw} (one scale per tensor)"
            if f.prune:
                thr = float(np.abs(layer.w[wp == 0]).max())
                lines = (-thr, thr)
                desc += f"; pruned {100 * f.prune:g} %: |w| <= {thr:.4g} set to 0 (dashed lines)"
        rows.append({"label": f.name, "color": color, "levels": levels, "lines": lines})
        info.append((f.name, f.type, desc))
    return rows, info


def _sections(res, cfg, net, accels, shapes, new, command):
    failed = {n: e for n, e in res["assignments"].items() if "error" in e}
    A = {n: e for n, e in res["assignments"].items() if "error" not in e}
    regression = res.get("task") == "regression"
    fl = None if regression else res["float_accuracy"]
    elayers = net.engine_layers()
    out = []
    # 1. header
    out.append(f"<h1>Deployment report: {escape(str(res['model']))}</h1>")
    meta = [("model", res["model"]), ("config", f"{res.get('config', cfg.name)} ({cfg.path})"),
            ("target", res["target"]), ("test images", res["test_images"]),
            ("calibration images", f"{res['calibration_images']} ({res.get('calibration_mode', '')})"),
            ("radix-point update", _update_summary(res.get("radix_update"))),
            ("float accuracy", f"{_pct(fl)} % (onnx ReferenceEvaluator)") if not regression else
            ("float model", f"regression against {res['reference']}: MSE {res['float_mse']:.4g}, MAE "
                            f"{res['float_mae']:.4g} (onnx ReferenceEvaluator)"), ("hlsnn version", __version__),
            ("reproduce", command)]
    out.append('<dl id="summary">' + "".join(f"<dt>{escape(str(k))}</dt><dd>{escape(str(v))}</dd>"
                                            for k, v in meta) + "</dl>")
    hosts = res.get("host_layers") or []
    if hosts:
        out.append('<h2 id="host-layers">Layers on the host</h2>')
        fab = {n: set((e.get("end_to_end") or {}).get("fabric_layers") or ()) for n, e in A.items()}
        out.append(_table(["layer", "op", "precision (the layer path)", "on the fabric instead, in the network kernel of"],
                          [(h["layer"], h["op"], h["precision"], ", ".join(n for n in A if h["layer"] in fab[n]))
                           for h in hosts], "host-layers-table"))
    # 2. accuracy (or, for regression, the errors)
    out.append('<h2 id="accuracy">' + ("Error per assignment" if regression else "Accuracy per assignment")
               + "</h2>")
    if failed:
        out.append('<p class="note"><b>Failed assignments</b> (the others ran): '
                   + "; ".join(f"{escape(n)}: {escape(e['error'])}" for n, e in failed.items()) + "</p>")
    if regression:
        rows = [(n, f"{e['mse']:.4g}", f"{e['mae']:.4g}", f"{100 * e['relative_error']:.2f}",
                 _opt(e["images_per_s"]), e["calibration_s"], _opt(e.get("modelled_us_per_image")), _e2e(e),
                 e.get("note", ""), ", ".join(f"{k}={v}" for k, v in e["layers"].items())) for n, e in A.items()]
        out.append(_table(["assignment", "MSE", "MAE", "error relative to float %", "images/s", "calibration s",
                           "modelled us/image", "end to end us/image", "note", "layer formats"], rows,
                          "accuracy-table"))
    else:
        rows = [(n, _pct(e["accuracy"]), f"{100 * (e['accuracy'] - fl):+.2f}", _pct(e["agreement_with_float"]),
                 _opt(e["images_per_s"]), e["calibration_s"], _opt(e.get("modelled_us_per_image")), _e2e(e),
                 e.get("note", ""), ", ".join(f"{k}={v}" for k, v in e["layers"].items())) for n, e in A.items()]
        out.append(_table(["assignment", "accuracy %", "vs float (points)", "agreement with float %", "images/s",
                           "calibration s", "modelled us/image", "end to end us/image", "note", "layer formats"], rows,
                          "accuracy-table"))
    out.append(f"<p>images/s: test inference on target <code>{escape(res['target'])}</code>, calibration "
               "excluded (on emu/csim this is simulation speed, not hardware speed); modelled us/image: the "
               "latency section's sum over the engine layers; end to end us/image: the assignment compiled and "
               "modelled with the host included, batch 1, as <code>hlsnn perf NAME.hlsnn</code> gives it (one kernel "
               "start where a network kernel runs the model).</p>")
    if regression:
        fig = _bars(new, list(A), {"MSE": [e["mse"] for e in A.values()]}, "MSE",
                    hline=(res["float_mse"], f"float {res['float_mse']:.4g}"), title="test MSE per assignment")
    else:
        fig = _bars(new, list(A), {"accuracy %": [100 * e["accuracy"] for e in A.values()]}, "accuracy %",
                    hline=(100 * fl, f"float {100 * fl:.2f} %"), title="test accuracy per assignment")
    out.append(_img(fig, "accuracy per assignment"))
    out += _output_rules(A)
    # 3. per-layer error
    out.append('<h2 id="layer-error">Per-layer error against the float reference</h2>')
    rows = []
    for n, e in A.items():
        for ln, s in e.get("per_layer", {}).items():
            rows.append((n, ln, s["kind"], s["format"], f"{s['relative_rms_error']:.3e}", _opt(s["f_in"]),
                         _opt(s["f_w"]), _opt(s["f_out"]), s["saturated_outputs"], s["kernel_calls"]))
    out.append(_table(["assignment", "layer", "kind", "format", "relative RMS error", "f_in", "f_w", "f_out",
                       "saturated outputs", "kernel calls"], rows, "layer-error-table"))
    out.append("<p>Relative RMS error: RMS(deployed - float) / RMS(float) of the layer's output tensor, float "
               "from onnx's ReferenceEvaluator on the same test images; radix points are fractional bits "
               "(empty: not a fixed-point tensor, e.g. BFP).</p>")
    names = [la.name for la in elayers]
    series = {n: [max(e["per_layer"][ln]["relative_rms_error"], 1e-12) if ln in e.get("per_layer", {}) else None
                  for ln in names] for n, e in A.items()}
    out.append(_img(_bars(new, names, series, "relative RMS error", log=True,
                          title="relative RMS error per layer (log scale)"), "per-layer error"))
    # per (layer, format): the first assignment that ran it, for its measured statistics
    used = {}
    for n, e in A.items():
        for ln, s in e.get("per_layer", {}).items():
            used.setdefault((ln, s["format"]), (n, s))
    # 4. weights
    out.append('<h2 id="weights">Weights and quantization levels</h2>')
    out.append("<p>Histogram of each engine layer's float weights after BN folding, with the levels of every "
               "format that layer runs in (ticks below the histogram).</p>")
    for la in elayers:
        fmts = [cfg.formats[f] for (ln, f) in used if ln == la.name]
        rows, info = _weight_rows(la, fmts, accels)
        fig = new(10, 3 + 0.35 * len(rows))
        gs = fig.add_gridspec(2, 1, height_ratios=(3.0, 0.3 * len(rows) + 0.5), hspace=0.08, left=0.12,
                              right=0.98, top=0.9, bottom=0.12)
        ax = fig.add_subplot(gs[0])
        rug = fig.add_subplot(gs[1], sharex=ax)
        draw_weight_levels(ax, rug, la.w, rows, max_ticks=400)
        fig.suptitle(plain(f"{la.name}: {la.describe()}, {la.w.size} weights"), fontsize=11)
        out.append(f"<h3>{escape(la.name)}</h3>" + _img(fig, f"weights of {la.name}")
                   + _table(["format", "type", "levels drawn"], info))
    # 5. sparsity
    out.append('<h2 id="sparsity">Sparsity per layer</h2>')
    rows = [(ln, f, n, _pct(s["weight_sparsity"]), _pct(s["input_density"])) for (ln, f), (n, s) in used.items()]
    out.append(_table(["layer", "format", "measured in assignment", "weight sparsity %", "input density %"],
                      rows, "sparsity-table"))
    labels = [f"{ln}/{f}" for (ln, f) in used]
    fig = _bars(new, labels, {"weight sparsity %": [100 * s["weight_sparsity"] for _, s in used.values()],
                              "input density %": [100 * s["input_density"] for _, s in used.values()]},
                "%", title="weight sparsity (zero weights after quantization/pruning) and input density")
    out.append(_img(fig, "sparsity per layer"))
    # 6. latency
    out.append(_latency(res, cfg, elayers, accels, shapes, used, new))
    # 7. E5
    out.append(_update_section(res, new))
    return "\n".join(out)


def _update_summary(ru):
    if not ru:
        return "e1"
    if ru["update"] == "e1":
        return "e1: a preceding operation on every calibration image, then the main operation"
    by = "per operation type" if ru["by"] == "op_type" else "per layer"
    return f"e5: E2 or E4 {by}, the faster by the cycle model, on a {ru['percent']:g} % sample of the images"


def _update_section(res, new):
    """Section 7: the E5 choice of every fixed-point layer (empty unless E5 ran)."""
    rows = [(n, ln, u) for n, e in res["assignments"].items() for ln, u in (e.get("radix_update") or {}).items()]
    if (res.get("radix_update") or {}).get("update") != "e5" or not rows:
        return ""
    out = ['<h2 id="radix-update">Radix-point update per layer: E2 or E4 (E5, model)</h2>',
           '<p class="note"><b>Modelled times, not measurements.</b> Source 002\'s E5: each fixed-point layer '
           "updates its output radix point either by two operations (E2: the preceding operation on the sample, "
           "then the main operation on every image) or by saving results (E4: the sample's wide results streamed "
           "out, their statistics give the point, they are converted, and the main operation runs the other "
           "images), whichever is faster. Times per calibration batch at the accel config's clock: t_prev the "
           "main operation (the cycle model of the latency section, for the whole batch), t_pre the preceding "
           "operation on every image (costed the same: the statistics unit sits in the output stage), t_store "
           "= t_prev + streaming the wide results out and back in (bytes / stream bytes per cycle, each way); "
           "E2 = N t_pre + t_prev, E4 = N t_store + (1 - N) t_prev (fig. 15), N the sampled fraction. Both "
           "methods give the same bits; the calibration ran both and checked that.</p>"]
    table = [(n, ln, u["op_type"], f"{u['sampled_images']} / {u['batch']}", u["main_cycles"],
              u["wide_stream_cycles"], f"{u['t_prev_us']:.2f}", f"{u['t_pre_us']:.2f}", f"{u['t_store_us']:.2f}",
              f"{u['e2_us']:.2f}", f"{u['e4_us']:.2f}",
              "layer" if u["by"] == "layer" else f"type {u['op_type']}: E2 {u['compared_e2_us']:.2f}, E4 "
                                                 f"{u['compared_e4_us']:.2f}",
              u["method"].upper(), u["note"]) for n, ln, u in rows]
    out.append(_table(["assignment", "layer", "op type", "sampled images", "main cycles", "wide stream cycles (each way)",
                       "t_prev us", "t_pre us", "t_store us", "E2 us", "E4 us", "compared", "chosen", "note"],
                      table, "radix-update-table"))
    labels = [f"{n}/{ln}" for n, ln, _ in rows]
    fig = _bars(new, labels, {"E2 us": [u["e2_us"] for _, _, u in rows], "E4 us": [u["e4_us"] for _, _, u in rows]},
                "us per calibration batch (model)", title="modelled time of updating the radix point: E2 vs E4")
    out.append(_img(fig, "E2 and E4 modelled times"))
    return "\n".join(out)


def engine_input_shapes(model_path, net) -> dict:
    """The input shape (without the batch) of every engine layer of ``net``, from one zero
    image through onnx's evaluator of ``model_path``."""
    x1 = np.zeros((1,) + tuple(d or 1 for d in net.input_shape[1:]))
    names = sorted({la.inputs[0] for la in net.engine_layers()} - {net.input})
    _, tens = evaluate.float_reference(model_path, x1, names=names) if names else (None, {})
    return {la.name: (x1 if la.inputs[0] == net.input else tens[la.inputs[0]]).shape[1:]
            for la in net.engine_layers()}


def _cycles_of(la, f, accel, shapes, stats):
    hw = shapes[la.name][-2:] if la.kind == "conv" else None
    from ..quantize.twoterm import cost_layer             # weight_terms: 2 runs K doubled (hlsnn.deploy.quantize.twoterm)
    la = cost_layer(la, getattr(f, "weight_terms", 1))
    return layer_cycles(la, accel, 1, fmt_type=f.type, in_hw=hw, weight_sparsity=stats["weight_sparsity"],
                        input_density=stats["input_density"],        # two input terms: two raw passes
                        **{k: stats[k] for k in ("input_terms", "lo_density") if k in stats})


def _e2e(e):
    """The end-to-end cell: microseconds, with the board and the path, or why there is none."""
    r = e.get("end_to_end")
    if not r:
        return e.get("end_to_end_note", "n/a")
    return f"{r['end_to_end_us']:.1f} ({r['board']}, {r['kernel_starts']} start{'s' if r['kernel_starts'] != 1 else ''})"


def _latency(res, cfg, elayers, accels, shapes, used, new):
    out = ['<h2 id="latency">Estimated latency per layer and board (model)</h2>',
           '<p class="note"><b>These are models, not measurements.</b> Cycles per image (batch 1) from '
           "<code>hlsnn.deploy.reports.report.layer_cycles</code>: the kernel calls of the layer, costed by the "
           "cycle model of <code>hlsnn perf</code> (loop counts of the kernels, II, depths, serial phases), "
           "at the accel config's clock. Host work (im2col, requantization, host ops) and DMA set-up are not "
           "included; sparse layers are counted on a synthetic layer at the measured densities.</p>"]
    by_layer = {la.name: la for la in elayers}
    rows, est = [], {}
    for (ln, fname), (_, s) in used.items():
        f = cfg.formats[fname]
        acc = accels[f.accel]
        r = _cycles_of(by_layer[ln], f, acc, shapes, s)
        est[(ln, fname)] = r["us"]
        rows.append((ln, fname, acc.name, acc.board.name, f"{acc.clock_mhz:g}", acc.params["stream_bits"],
                     f"{r['m']}x{r['k']}x{r['n']}", r["compute"], r["stream_in"], r["stream_out"], r["serial"],
                     r["bound"], r["cycles"], f"{r['us']:.2f}"))
    out.append(_table(["layer", "format", "accel config", "board", "clock MHz", "stream bits", "M x K x N",
                       "compute", "stream in", "stream out", "serial", "bound", "cycles", "us"], rows,
                      "latency-table"))
    fmts = list(dict.fromkeys(f for _, f in used))
    names = [la.name for la in elayers]
    fig = _bars(new, names, {f: [est.get((ln, f)) for ln in names] for f in fmts}, "us per image (model)",
                log=True, title="modelled latency per layer and format (log scale)")
    out.append(_img(fig, "modelled latency"))
    rows = [(n, f"{sum(est.get((ln, s['format']), 0.0) for ln, s in e.get('per_layer', {}).items()):.2f}")
            for n, e in res["assignments"].items() if "error" not in e]
    out.append("<h3>Engine time per image per assignment (model)</h3>"
               + _table(["assignment", "sum of layer times, us"], rows))
    # the same engine parameters on each shipped board
    boards = sorted(p.stem for p in (CONFIGS_DIR / "boards").glob("*.yaml"))
    rows = []
    for fname in fmts:
        f = cfg.formats[fname]
        row = [fname, f"{accels[f.accel].name} ({accels[f.accel].board.name})"]
        for b in boards:
            try:
                acc = retarget(f.accel, b)
            except ConfigError as exc:
                row.append(f"n/a ({exc})")
                continue
            t = sum(_cycles_of(la, f, acc, shapes, used[(la.name, fname)][1])["us"] for la in elayers
                    if (la.name, fname) in used)
            from ...resources import FIT_SHARE, over_budget       # the budget hlsnn info / build refuse above
            over = over_budget(acc.estimates["resources"], acc.board.resources)
            fit = "fits" if not over else "over the {:.0f} % budget: ".format(100 * FIT_SHARE) + ", ".join(
                f"{r} {100 * acc.estimates['utilization'][r]:.0f} %" for r, *_ in over)
            row.append(f"{t:.2f} us @ {acc.clock_mhz:g} MHz, {acc.params['stream_bits']}-bit ({fit})")
        rows.append(row)
    out.append("<h3>Same engine parameters on each shipped board (model)</h3><p>Sum over the layers that run "
               "in the format, with each board's clock and DMA stream width; resources from the engine's "
               "<code>spec.estimate</code> model.</p>" + _table(["format", "accel config"] + boards, rows,
                                                                "boards-table"))
    return "\n".join(out)


def page_out(out) -> Path:
    """``out`` as the path :func:`write_page` will write, refused before any work: a name not
    ending in .html/.htm (:func:`hlsnn.plots.check_out`), a folder, a folder that does not exist
    outside build/ and overlays/ (:func:`hlsnn.paths.out_parent`, which makes it there)."""
    from ...paths import out_parent
    from ...plots import check_out
    out = check_out(out, (".html", ".htm"))
    out_parent(out)
    return out


def write_page(out, title, body) -> Path:
    """Write one self-contained HTML page (``title`` escaped here, ``body`` HTML) to ``out``
    atomically, making its folder only where :func:`hlsnn.paths.out_parent` allows."""
    from ...files import write_atomic
    from ...paths import out_parent
    page = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(str(title))}'
            f"</title><style>{_CSS}</style></head><body>\n{body}\n</body></html>\n")
    out_parent(out)
    try:
        write_atomic(out, page)
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    return out
