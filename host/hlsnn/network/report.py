"""``hlsnn report NAME.hlsnn``: one self-contained HTML page of a compiled model.

The page holds what the model is (network, assignment, accelerators with their config
hashes, the layers and where each runs, the host layers, the self-check pairs) and its
modelled end-to-end latency on a board, per layer and in total, as ``hlsnn perf NAME.hlsnn``
gives it (:func:`hlsnn.network.latency.model`): the network kernel's path where the model
has one, beside the layer-by-layer path for comparison, with the resources of the network
kernel and the constants the host's share comes from. Every figure is a model, and the page
says so. A bar chart of the per-layer times is drawn when matplotlib is installed (the
``plot`` extra); without it the page has the tables only.
"""
from __future__ import annotations

import shlex
from html import escape
from pathlib import Path

from ..errors import MissingDependency
from . import artifact, latency
from ..paths import build_root

__all__ = ["write_report"]

_COLS = ("layer", "kind", "kernel starts", "kernel us", "DDR us", "host us", "host bytes", "end to end us")


def _rows(res):
    out = [[r["name"], r["kind"], r["kernel_starts"], f"{r['kernel_us']:.1f}", f"{r['ddr_us']:.1f}",
            f"{r['host_us']:.1f}", f"{r['host_bytes']:,}", f"{r['end_to_end_us']:.1f}"] for r in res["layers"]]
    out.append(["total", "", res["kernel_starts"], f"{res['kernel_us']:.1f}", f"{res['ddr_us']:.1f}",
                f"{res['host_us']:.1f}", f"{res['host_bytes']:,}", f"{res['end_to_end_us']:.1f}"])
    return out


def _path_name(res):
    return ("the network kernel, one kernel start per batch" if res["path"] == "network"
            else "layer by layer, one kernel call per layer chunk")


def _runs_on(prog, res):
    """Where each layer of the program runs on the latency model's path ``res``: on the network path a
    layer the kernel holds (pooling, Flatten, ... included) runs in the network kernel, whatever its kind
    in the layer program; on the layer path a host layer runs on the host, an engine layer in its
    accelerator's calls."""
    network = res["path"] == "network"
    timed = {r["name"] for r in res["layers"] if not r["kind"].startswith("host")}
    names = [j["name"] for j in prog["layers"]]
    last = prog["output"]["engine_layer"]
    inside = set(names[:names.index(last) + 1]) if network and last in names else set()   # up to the logits
    kernel = next(iter(prog["accels"]), "") if len(prog["accels"]) == 1 else ""
    out = {}
    for j in prog["layers"]:
        if j["name"] in inside:
            acc = j.get("accel", kernel)
            out[j["name"]] = (f"network kernel ({acc})" if acc else "network kernel") + \
                ("" if j["name"] in timed else ", a data move")
        elif j["kind"] == "host":
            out[j["name"]] = "host"
        else:
            out[j["name"]] = f"{j['accel']} (one call per layer)"
    return out


def _summary(prog, arrays, path, res):
    from ..deploy.reports.report import _table
    runs = _runs_on(prog, res)
    engine = [j for j in prog["layers"] if runs[j["name"]] != "host"]
    host = [j for j in prog["layers"] if runs[j["name"]] == "host"]
    checks = arrays.get("check/x")
    items = [("model", prog["name"]), ("deployment", prog.get("model", "")), ("assignment", prog["assignment"]),
             ("file", f"{Path(path).name}, {Path(path).stat().st_size:,} bytes"),
             ("calibration", f"{prog['calibration']['images']} images, {prog['calibration']['mode']}"),
             ("input", f"{prog['input']['name']} {tuple(prog['input']['shape'])}, quantized by "
                       f"{prog['input']['quantized_by']}"),
             ("output", f"{prog['output']['name']} (logits of {prog['output']['engine_layer']})"),
             ("self-check", f"{0 if checks is None else len(checks)} input/output pairs from the emulator")]
    dl = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in items)
    accels = _table(["accelerator", "engine", "config hash"],
                    [[k, a["engine"], a["sha"][:12]] for k, a in prog["accels"].items()])
    layers = _table(["layer", "kind", "format", "runs on", "inputs", "output"],
                    [[j["name"], j["kind"] if j["kind"] != "host" else j["op"],
                      j.get("format_name", ""), runs[j["name"]], ", ".join(j["inputs"]), j["output"]]
                     for j in prog["layers"]])
    return (f"<h2>The model</h2><dl>{dl}</dl>{accels}"
            f"<p>On {escape(_path_name(res))}: {len(engine)} layer(s) on the fabric, {len(host)} on the host.</p>"
            f"{layers}")


def _chart(res):
    """A horizontal bar chart of each layer's fabric and host time, or '' without matplotlib."""
    try:
        from ..deploy.reports.report import _img, _matplotlib
        new = _matplotlib()
    except MissingDependency:
        return "<p>(install the <code>plot</code> extra for a chart of these times)</p>"
    rows = res["layers"]
    fig = new(8, 0.8 + 0.28 * len(rows))
    ax = fig.add_subplot()
    from ..plots import plain
    names = [plain(r["name"]) for r in rows][::-1]          # layer names from the model: no mathtext
    fab = [r["fabric_us"] for r in rows][::-1]
    host = [r["host_us"] for r in rows][::-1]
    ax.barh(names, fab, color="#4c72b0", label="fabric (kernel or DDR)")
    ax.barh(names, host, left=fab, color="#dd8452", label="host")
    ax.set_xlabel("modelled microseconds per batch")
    ax.legend(loc="lower right")
    fig.tight_layout()
    return _img(fig, "modelled time per layer")


def _latency(res, other):
    from ..deploy.reports.report import _table
    c = res["constants"]
    parts = [f"<h2>End-to-end latency on {escape(res['board'])} ({escape(res['cpu'])}), batch {res['batch']}</h2>",
             f"<p>Modelled, per batch: {escape(_path_name(res))}. Kernel cycles come from the cycle model of the "
             f"kernel's loops (the strict C-simulation's counters check it), DDR at the HP port's width, and the "
             f"host's share from the per-call and per-byte constants below. "
             f"<b>{res['end_to_end_us']:.1f} us end to end</b>, of which {res['kernel_us']:.1f} us kernel and "
             f"{res['host_us']:.1f} us host; {res['kernel_starts']} kernel start(s).</p>",
             _table(_COLS, _rows(res), tid="latency"), _chart(res)]
    if other is not None:
        parts.append(f"<h3>For comparison: {escape(_path_name(other))}</h3>"
                     f"<p>{other['end_to_end_us']:.1f} us end to end ({other['kernel_us']:.1f} us kernel, "
                     f"{other['host_us']:.1f} us host, {other['kernel_starts']} kernel starts, "
                     f"{other['host_bytes']:,} bytes touched by the host).</p>"
                     + _table(_COLS, _rows(other), tid="latency-layers"))
    if "kernel_resources" in res:
        r = res["kernel_resources"]
        fits = "fits the board with the config margins" if r["fits"] else "DOES NOT FIT the board"
        parts.append("<h3>The network kernel's resources</h3>"
                     f"<p>From the resource model fed by what the kernel declares (not synthesis): {fits}.</p>"
                     + _table(["BRAM36", "URAM", "DSP", "LUT", "FF"],
                              [[r.get("bram36", 0), r.get("uram", 0), r.get("dsp", 0), f"{r.get('lut', 0):,}",
                                f"{r.get('ff', 0):,}"]]))
    consts = [["CPU", f"{c['cpu']['call_us']} us per kernel start (layer path), {c['cpu']['byte_us']} us per "
                      f"byte, {c['cpu']['op_us']} us per host op", c['cpu']['source']],
              ["HP port", f"{c['hp_bits']} bits per PL cycle", c["hp_source"]]]
    h = res.get("host") or {}
    if h.get("path") == "c":
        consts.insert(0, ["network path host (C)", f"{h['us']:.1f} us per start ("
                          + "; ".join(f"{st['step']} {st['us']:.1f} us" for st in h["steps"]) + ")", h["basis"]])
    elif "network_host" in c:
        n = c["network_host"]
        consts.insert(0, ["network path host", f"{n['start_us']} us per kernel start, quantize {n['quant_us']} us + "
                                               f"{n['quant_value_us']} us per value, finish {n['finish_us']} us",
                          "hlsnn.network.latency.NET_HOST (x86 measured by benchmarks/bench_network_start.py; "
                          "ARM cores scaled, estimates)"])
    parts.append("<h3>Constants</h3>" + _table(["what", "value", "source"], consts))
    return "".join(parts)


@artifact.as_internal_error.guard
def write_report(path, *, out=None, board=None, batch=1) -> Path:
    """Write the HTML report of the compiled model ``path`` to ``out`` (default ``<stem>_report.html``
    in the current folder) and return the path written. ``board`` and ``batch`` as in
    ``hlsnn perf NAME.hlsnn``.

    Raises
    ------
    InputError
        ``out`` does not end in .html/.htm, is a folder or its folder does not exist (checked
        before any work: :func:`hlsnn.deploy.reports.report.page_out`) or cannot be written,
        ``path`` is not a compiled model, or ``board`` is unknown.
    """
    from ..deploy.reports.report import page_out, write_page
    out = page_out(out if out is not None else build_root() / f"{Path(path).stem}_report.html")
    prog, arrays = artifact.read(path)
    res = latency.model(path, board=board, batch=batch)
    other = latency.model(path, board=board, batch=batch, network=False) if res["path"] == "network" else None
    cmd = ["hlsnn", "report", str(path), "--out", str(out), "--batch", str(batch)]
    cmd += ["--board", board] if board else []
    body = (f"<h1>hlsnn report: {escape(prog['name'])} ({escape(prog['assignment'])})</h1>"
            f"<p class=\"note\">Every time on this page is modelled, not measured on a board. "
            f"Made by <code>{escape(' '.join(shlex.quote(c) for c in cmd))}</code>.</p>"
            + _summary(prog, arrays, path, res) + _latency(res, other))
    return write_page(out, f"hlsnn report: {prog['name']}", body)
