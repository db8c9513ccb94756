"""The timelines of source 002's methods: per circuit, per layer, the preceding operation,
DETERMINE, the conversion of saved results (``quantize``) and the main operation, each with a
start and an end in µs (fig. 20-25).

The cost of a layer (the cycle model: :func:`hlsnn.deploy.quantize.update.modelled_times`, the cycles
of ``hlsnn perf`` and the deploy report at the measured weight sparsity and input density,
at the accel config's clock) for the whole batch:

* ``t``: the operation on every image (the main operation; the preceding one costs the same,
  its statistics unit sits in the output stage);
* ``w``: streaming the wide results of every image once (``wide_stream_cycles``: int32 or
  int64 per output at one beat of the config's stream per cycle);
* ``d``: DETERMINE, one cycle per histogram bin (the controller reads the counters);
* ``n``: the sampled share of the images (``k/B``, the sample's images over the batch's).

On a circuit of capability ``c < 1`` (:func:`hlsnn.seed002.circuits.scaled`: the config with
``c`` times its compute units) ``t`` is that config's cycle model; streaming (``w``) and ``d``
do not change. A part on a share ``s`` of the images takes ``s`` times its cost. The rules of
each method (``P``: the circuits of the preceding phase, ``M`` of the main phase, ``Q`` of the
quantize phase, :mod:`hlsnn.seed002.layout`; one circuit for e1-e4, layer after layer):

* e1: pre ``t``, det ``d``, main ``t``.
* e2: pre ``n t``, det, main ``t``.
* e3: pre ``t + w`` (the wide results out), det, quantize ``w`` (read back and converted).
* e4: pre ``n (t + w)``, det, quantize ``n w``, main ``(1 - n) t``.
* e6, e7 (pipelined E2): each circuit of ``M`` runs main ``t / |M|`` of layer L once DETERMINE
  of L is done and its part of layer L-1 is, the sampled images first; ``P`` runs pre ``n t``
  of layer L+1 as soon as the sample's outputs of layer L are there (its input), then det. So
  ``P`` keeps ahead of ``M`` while ``n t_P + n t / |M| + d <= t / |M|`` (``t_P``: ``t`` on
  ``P``), and the overhead is then one layer's preceding operation and DETERMINE (the
  source's T1); a slow ``P`` (E7's quarter accelerator) needs a small N.
* e8, e9 (pipelined E4): each of the ``|P|`` circuits of ``P`` runs pre ``n (t + w) / |P|``
  (the wide results go to ``Q``'s RAM), det after all of them; ``Q`` runs quantize ``n w``
  (the saved results: the sample's outputs, ``P``'s next input) and main ``(1 - n) t`` of
  layer L once DETERMINE of L is done and its layer L-1 is.

The measured timeline (``sim``, ``csim``) places the phases by the same rules with the
modelled cycles of the kernel calls each circuit made (:attr:`CircuitGroup.records`: the
C-simulation's loop counts) where the controller ran any; the phases it runs on the host
(DETERMINE, the conversion of saved results) keep their model. What is left out: the host
layers between engine layers, and moving points and results between boards (a LAN).

``overhead`` of a timeline = its end minus the main operations alone (each layer's main
operation on the main circuits, back to back, the points known in advance); the source's
claim for E6 is that it is about the single longest layer's preceding operation.
"""
from __future__ import annotations

from ..deploy.quantize import update as updates
from .layout import PIPELINED


def layer_costs(dep, capabilities=(1.0,)) -> list:
    """``[{layer, t, w, d, n, t_at}]`` in µs for the fixed-point engine layers of ``dep`` that ran
    (module docstring), in network order; ``t_at[c]`` is ``t`` on a circuit of capability ``c``
    (the cycle model of :func:`hlsnn.seed002.circuits.scaled`'s narrower config)."""
    import numpy as np
    from ..formats import radix_update
    from ..measure.layers import layer_cycles
    from .circuits import scaled
    rows = []
    for name, ex in dep.execs.items():
        if ex.in_shape is None or ex.f_out is None:
            continue
        b = ex.in_shape[0]
        k = int(np.count_nonzero(radix_update.sample_mask((b,), dep.update_percent)))
        in_hw = tuple(ex.in_shape[-2:]) if ex.layer.kind == "conv" else None
        m = updates.modelled_times(ex, b, in_hw, 100.0)
        cfg = ex.acc.config
        mhz = cfg.clock_mhz
        t_at = {1.0: m["main_cycles"] / mhz}
        for c in set(capabilities) - {1.0}:
            t_at[c] = layer_cycles(ex.layer, scaled(cfg, c), b, fmt_type=ex.fmt.type, in_hw=in_hw,
                                   weight_sparsity=ex.stats.weight_sparsity,
                                   input_density=ex.stats.input_density)["cycles"] / mhz
        rows.append({"layer": name, "t": t_at[1.0], "w": m["wide_stream_cycles"] / mhz,
                     "d": len(ex.stats.histogram or [0] * 32) / mhz, "n": k / b, "t_at": t_at})
    return rows


def _measured(records, mhz):
    out = {}
    for r in records:
        if r["cycles"] is None or r["layer"] is None:
            return {}
        key = (r["layer"], r["phase"], r["circuit"])
        out[key] = out.get(key, 0.0) + r["cycles"] / mhz
    return out


class _Board:
    """The circuits' free times and the rows placed so far."""

    def __init__(self, lay, measured, source):
        self.lay, self.measured, self.source = lay, measured, source
        self.free = {c.name: 0.0 for c in lay.circuits}
        self.cap = {c.name: c.capability for c in lay.circuits}
        self.board = {c.name: c.board for c in lay.circuits}
        self.rows = []

    def place(self, circuit, layer, phase, model_us, after=0.0):
        """Place ``phase`` of ``layer`` on ``circuit`` after ``after`` and the circuit's last
        part (``model_us``: its modelled time on that circuit). Returns its end."""
        got = self.measured.get((layer, phase, circuit))
        dur = got if got is not None else model_us
        start = max(self.free[circuit], after)
        end = start + dur
        if dur > 0:
            self.rows.append({"circuit": circuit, "board": self.board[circuit], "layer": layer, "phase": phase,
                              "start_us": start, "end_us": end,
                              "source": "measured" if got is not None else self.source})
        self.free[circuit] = end
        return end


def schedule(method, lay, costs, records=None, mhz=None) -> list:
    """The timeline rows of ``method`` on layout ``lay`` for the layer ``costs`` of
    :func:`layer_costs` (module docstring); with ``records`` (a circuit group's) and the
    clock ``mhz``, the measured timeline (None when there are no cycle counts)."""
    measured = _measured(records, mhz) if records is not None else {}
    if records is not None and not measured:
        return None
    bd = _Board(lay, measured, "model")
    P = [c.name for c in lay.of("preceding")]
    M = [c.name for c in lay.of("main")]
    Q = [c.name for c in lay.of("quantize")]
    det = lay.of("determine")[0].name
    ready = 0.0          # pipelined: when the sample's input of the next layer is there
    for c in costs:
        L, w, d, n = c["layer"], c["w"], c["d"], c["n"]

        def T(circuit):                                 # the operation on every image, on ``circuit``
            cap = bd.cap[circuit]
            return c.get("t_at", {}).get(cap, c["t"] / cap)
        if method not in PIPELINED:
            x = P[0]
            t = T(x)
            if method == "e1":
                bd.place(x, L, "preceding", t), bd.place(x, L, "determine", d), bd.place(x, L, "main", t)
            elif method == "e2":
                bd.place(x, L, "preceding", n * t), bd.place(x, L, "determine", d), bd.place(x, L, "main", t)
            elif method == "e3":
                bd.place(x, L, "preceding", t + w), bd.place(x, L, "determine", d), bd.place(x, L, "quantize", w)
            else:
                bd.place(x, L, "preceding", n * (t + w)), bd.place(x, L, "determine", d)
                bd.place(x, L, "quantize", n * w), bd.place(x, L, "main", (1 - n) * t)
            continue
        share = 1.0 / len(P)
        ends = [bd.place(p, L, "preceding", n * (T(p) + (w if method in ("e8", "e9") else 0)) * share, after=ready)
                for p in P]
        known = bd.place(det, L, "determine", d, after=max(ends))
        if method in ("e6", "e7"):
            ready = known
            for m in M:
                start = max(bd.free[m], known)
                end = bd.place(m, L, "main", T(m) / len(M), after=known)
                ready = max(ready, start + n * (end - start))      # its sampled images go first
        else:
            for q in Q:
                ready = bd.place(q, L, "quantize", n * w, after=known)
                bd.place(q, L, "main", (1 - n) * T(q), after=known)
    return bd.rows


def summary(rows) -> dict:
    """End, the main operations alone (per layer the longest of its main parts, added up: what
    the main circuits take with the points known in advance), the overhead (end minus that)
    and the longest layer's preceding operation (its longest part), in µs."""
    if not rows:
        return {}
    end = max(r["end_us"] for r in rows)
    main, pre = {}, {}
    for r in rows:
        into = main if r["phase"] == "main" else pre if r["phase"] == "preceding" else None
        if into is not None:
            into[r["layer"]] = max(into.get(r["layer"], 0.0), r["end_us"] - r["start_us"])
    alone = sum(main.values())
    return {"end_us": end, "main_alone_us": alone, "overhead_us": end - alone,
            "longest_preceding_us": max(pre.values(), default=0.0),
            "longest_preceding_layer": max(pre, key=pre.get) if pre else None}


def format_timeline(rows, title="") -> str:
    """The timeline as text: one line per part, by circuit."""
    lines = [title] if title else []
    lines.append(f"{'circuit':8} {'board':7} {'layer':24} {'phase':10} {'start µs':>10} {'end µs':>10}  source")
    for r in sorted(rows, key=lambda r: (r["circuit"], r["start_us"])):
        lines.append(f"{r['circuit']:8} {r['board']:7} {r['layer'][:24]:24} {r['phase']:10} {r['start_us']:10.2f} "
                     f"{r['end_us']:10.2f}  {r['source']}")
    return "\n".join(lines)


COLORS = {"preceding": "#4c72b0", "determine": "#c44e52", "quantize": "#dd8452", "main": "#55a868"}


def plot_timelines(panels, path) -> str:
    """A png of one or more timelines: ``panels`` is ``[(title, rows)]``; one row of bars per
    circuit, coloured by phase, each bar labelled with its layer's index (fig. 21-25)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from ..files import write_atomic
    import io
    panels = [(t, r) for t, r in panels if r]
    height = 0.6 + sum(1.0 + 0.45 * len({x["circuit"] for x in r}) for _, r in panels)
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, height), squeeze=False)
    for ax, (title, rows) in zip(axes[:, 0], panels):
        circuits = sorted({r["circuit"] for r in rows})
        layers = list(dict.fromkeys(r["layer"] for r in rows))
        for i, c in enumerate(circuits):
            for r in (r for r in rows if r["circuit"] == c):
                w = r["end_us"] - r["start_us"]
                ax.broken_barh([(r["start_us"], w)], (i - 0.4, 0.8), facecolors=COLORS[r["phase"]],
                               edgecolor="black", linewidth=0.3, hatch="//" if r["source"] == "model" and
                               any(x["source"] == "measured" for x in rows) else None)
                if r["phase"] in ("preceding", "main"):
                    ax.text(r["start_us"] + w / 2, i, str(layers.index(r["layer"]) + 1), ha="center",
                            va="center", fontsize=6, color="white")
        ax.set_yticks(range(len(circuits)), [f"{c} ({next(r['board'] for r in rows if r['circuit'] == c)})"
                                             for c in circuits])
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("µs")
        ax.invert_yaxis()
    axes[0, 0].legend(handles=[Patch(color=v, label=k) for k, v in COLORS.items()], fontsize=7, ncol=4,
                      loc="upper right")
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    write_atomic(path, buf.getvalue())
    return str(path)
