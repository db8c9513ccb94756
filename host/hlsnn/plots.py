"""Plots of weight distributions against quantization levels (``hlsnn plot-quant``).

The point of the picture (source 000, figs. 1-2): trained weights are often bimodal.
Power-of-two (PoT) levels are dense next to zero and sparse where the weights are;
two-hot levels ``±(2^(e1+δ) ± 2^e2)`` are close to linear. :func:`quantization_report`
quantizes one weight array in three formats of the same budget of ``bits`` per weight
and measures each format's mean squared error; :func:`plot_quantization` draws the
histogram of the weights with the three level sets under it.

The three formats for a budget of B bits per weight
    uniform
        B-bit signed integers, symmetric: ``scale = max|w| / (2^(B-1) - 1)``,
        ``q = clip(rint(w / scale), -(2^(B-1) - 1), 2^(B-1) - 1)`` (round half to even,
        saturating), ``w_hat = q * scale``. B bits per weight.
    pot
        :func:`hlsnn.formats.shift.quantize_pot` with ``exp_bits = min(5, B - 2)``:
        ``exp_bits + 2`` bits per weight (exponent, sign, zero flag).
    twohot
        :func:`hlsnn.formats.shift.quantize_twohot` with ``exp_bits = min(5, (B - 3) // 2)``
        and the given ``delta``: ``2 * exp_bits + 3`` bits per weight. It needs B >= 5;
        with B = 4 it is reported as skipped.

No format gets more than B bits; the bits each actually uses are reported.

``axis`` is passed to the shift quantizers unchanged and means the same for the uniform
format: None shares one scale over the whole tensor; an int gives one scale per slice
along that axis (``axis=0`` of ``(N, K)`` weights: one per row, i.e. per output neuron).
With several scales the drawn level sets are those of the slice that holds the largest
``|w|``.

matplotlib is imported inside :func:`plot_quantization` only (``pip install "hlsnn[plot]"``);
it draws with the Agg canvas and never opens a window.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np

from .errors import InputError, MissingDependency

__all__ = ["BITS_RANGE", "DELTA_RANGE", "FORMATS", "load_weights", "default_output",
           "format_params", "quantization_report", "report_json", "plot_quantization",
           "shift_levels", "draw_weight_levels", "check_out", "save_figure"]

#: Inclusive range of the per-weight bit budget.
BITS_RANGE = (4, 16)

#: Inclusive range of the two-hot ``delta``.
DELTA_RANGE = (0, 7)

#: The formats compared, in drawing order.
FORMATS = ("uniform", "pot", "twohot")

_COLORS = {"uniform": "#1f77b4", "pot": "#d62728", "twohot": "#2ca02c"}
_NAMES = {"uniform": "uniform", "pot": "PoT", "twohot": "two-hot"}
_SAVE_FORMATS = (".png", ".svg", ".pdf")


def plain(text) -> str:
    """``text`` as matplotlib draws it literally: every ``$`` escaped, so a pair of them in a name
    from a model or a file (``$\\foo$``) is not taken as mathtext, which stopped the drawing with
    a ValueError on anything it cannot parse."""
    return str(text).replace("$", r"\$")


def check_out(out, suffixes=_SAVE_FORMATS) -> Path:
    """An output path as a Path; ``InputError`` unless it ends in one of ``suffixes`` (by
    default the image types .png, .svg, .pdf; checked before any work, so a typo costs
    nothing)."""
    out = Path(out)
    if out.suffix.lower() not in suffixes:
        raise InputError(f"--out {out}: must end in {', '.join(suffixes)}")
    return out


def save_figure(fig, out, dpi):
    """Write a matplotlib figure to ``out`` (its folder must exist, or be under build/ or
    overlays/: :func:`hlsnn.paths.out_parent`), atomically (:mod:`hlsnn.files`: a full disk
    leaves no 0-byte file under the name); an unwritable path is an ``InputError``."""
    from .files import atomic_path
    from .paths import out_parent
    out = Path(out)
    out_parent(out)
    try:
        with atomic_path(out) as tmp:
            fig.savefig(tmp, format=out.suffix.lower()[1:], dpi=dpi)
    except OSError as exc:
        raise InputError(f"--out {out}: cannot write ({exc.strerror or exc})") from None


# --------------------------------------------------------------------------- inputs

def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _check_int(name: str, value, lo: int, hi: int) -> int:
    if not _is_int(value) or not lo <= value <= hi:
        raise InputError(f"{name} = {value!r}: must be an int in [{lo}, {hi}]")
    return int(value)


def _check_weights(w, what: str = "weights") -> np.ndarray:
    """Array-like -> finite float64 array with ndim >= 1 and at least one element."""
    arr = np.asarray(w)
    if arr.dtype.kind not in "iuf":
        raise InputError(f"{what}: has dtype {arr.dtype}: must be real numbers (int or float)")
    arr = np.atleast_1d(arr.astype(np.float64))
    if arr.size == 0:
        raise InputError(f"{what}: is empty (shape {arr.shape}): need at least one weight")
    bad = ~np.isfinite(arr)
    if bad.any():
        raise InputError(f"{what}: has {int(bad.sum())} non-finite value(s) (NaN or Inf) "
                         f"of {arr.size}: must be finite")
    if not arr.any():
        raise InputError(f"{what}: all {arr.size} weights are zero: nothing to quantize")
    big = float(np.abs(arr).max())
    if big > 1e300:   # the histogram's range and the formats' scales overflow float64 beyond this
        raise InputError(f"{what}: the largest magnitude is {big:.3g}: must be at most 1e300 (scale the weights)")
    return arr


def load_weights(path, key: Optional[str] = None) -> np.ndarray:
    """Read a weight array from a ``.npy`` file or one array of a ``.npz`` file.

    Parameters
    ----------
    path : str or Path
        A ``.npy`` or ``.npz`` file (never unpickled).
    key : str, optional
        The array of a ``.npz`` file; may be left out when the file holds one array.

    Returns
    -------
    numpy.ndarray of float64
        Finite, ``ndim >= 1``, not empty, not all zero.

    Raises
    ------
    InputError
        Missing or unreadable file, a ``.npz`` without the key, a non-numeric, empty,
        all-zero or non-finite array.
    """
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    suffix = p.suffix.lower()
    if suffix not in (".npy", ".npz"):
        raise InputError(f"{p}: expected a .npy or .npz file")
    if suffix == ".npy" and key is not None:
        raise InputError(f"{p}: --key {key} is only for .npz files")
    try:
        loaded = np.load(p, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"{p}: not a numeric {suffix} array numpy can read ({first})") from None
    if suffix == ".npz":
        with loaded:
            names = list(loaded.files)
            if key is None:
                if len(names) != 1:
                    listed = ", ".join(names) if names else "none"
                    raise InputError(f"{p}: holds {len(names)} arrays ({listed}): "
                                     f"choose one with --key NAME")
                key = names[0]
            elif key not in names:
                raise InputError(f"{p}: has no array {key!r} (it has {', '.join(names) or 'none'})")
            try:
                arr = loaded[key]
            except ValueError as exc:
                raise InputError(f"{p}[{key}]: not a numeric array ({str(exc).splitlines()[0]})") from None
        what = f"{p}[{key}]"
    else:
        arr, what = loaded, str(p)
    return _check_weights(arr, what)


def default_output(path) -> Path:
    """``<stem>_quant.png`` next to the weights file."""
    p = Path(path)
    return p.with_name(f"{p.stem}_quant.png")


def format_params(bits: int, delta: int = 0) -> dict:
    """Exponent widths of the three formats for a budget of ``bits`` per weight.

    >>> p = format_params(8)
    >>> p["uniform"], p["pot"]
    ({'bits_per_weight': 8}, {'exp_bits': 5, 'bits_per_weight': 7})
    >>> p["twohot"]
    {'exp_bits': 2, 'delta': 0, 'bits_per_weight': 7}
    >>> format_params(4)["twohot"]
    {'exp_bits': None, 'delta': 0, 'bits_per_weight': None}
    """
    bits = _check_int("bits", bits, *BITS_RANGE)
    delta = _check_int("delta", delta, *DELTA_RANGE)
    pot_e = min(5, bits - 2)
    th_e = min(5, (bits - 3) // 2)
    th_e = th_e if th_e >= 1 else None
    return {"uniform": {"bits_per_weight": bits},
            "pot": {"exp_bits": pot_e, "bits_per_weight": pot_e + 2},
            "twohot": {"exp_bits": th_e, "delta": delta,
                       "bits_per_weight": None if th_e is None else 2 * th_e + 3}}


# --------------------------------------------------------------------------- computation

def _check_axis(axis, ndim: int) -> Optional[int]:
    if axis is None:
        return None
    if not _is_int(axis) or not -ndim <= axis < ndim:
        raise InputError(f"axis = {axis!r}: must be None or an int in [{-ndim}, {ndim})")
    return int(axis) % ndim


def _uniform(w: np.ndarray, bits: int, axis: Optional[int]):
    qmax = 2 ** (bits - 1) - 1
    others = None if axis is None else tuple(i for i in range(w.ndim) if i != axis)
    amax = np.max(np.abs(w), axis=others, keepdims=True)
    scale = np.where(amax > 0, amax / qmax, 1.0)     # an all-zero slice stays exactly zero
    q = np.clip(np.rint(w / scale), -qmax, qmax)
    return q * scale, scale, qmax


def quantization_report(w, bits: int = 8, delta: int = 0, axis: Optional[int] = None) -> dict:
    """Quantize ``w`` in the uniform, PoT and two-hot formats of one bit budget.

    Parameters
    ----------
    w : array_like
        Real, finite, not empty, not all zero.
    bits : int, default 8
        Budget of bits per weight, in ``[4, 16]``.
    delta : int, default 0
        Two-hot ``delta`` (extra shift of the first term), in ``[0, 7]``.
    axis : int or None, default None
        Scale sharing, see the module docstring.

    Returns
    -------
    dict
        ``n_weights``, ``shape``, ``bits``, ``delta``, ``axis``, ``range`` ([min, max]) and
        ``formats``: for each of :data:`FORMATS` a dict with ``mse``, ``bits_per_weight``,
        ``exp_bits`` and ``delta`` (None where they do not apply), ``levels`` (the sorted
        real levels of the slice with the largest ``|w|``, a float64 array) and
        ``n_levels``. A format that does not fit the budget (two-hot with 4 bits) has
        ``skipped`` (the reason) and None for ``mse`` and ``levels``.

    Raises
    ------
    InputError
        Bad ``w``, ``bits``, ``delta`` or ``axis``.
    """
    params = format_params(bits, delta)
    w = _check_weights(w)
    axis = _check_axis(axis, w.ndim)

    widest = np.unravel_index(int(np.argmax(np.abs(w))), w.shape)
    formats = {}

    w_hat, scale, qmax = _uniform(w, bits, axis)
    s = float(np.broadcast_to(scale, w.shape)[widest])
    formats["uniform"] = {"mse": float(np.mean((w - w_hat) ** 2)), "bits_per_weight": bits,
                          "exp_bits": None, "delta": None,
                          "levels": np.arange(-qmax, qmax + 1, dtype=np.float64) * s}

    for name in ("pot", "twohot"):
        p = params[name]
        if p["exp_bits"] is None:
            formats[name] = {"mse": None, "bits_per_weight": None, "exp_bits": None,
                             "delta": p.get("delta"), "levels": None,
                             "skipped": f"needs at least 5 bits per weight, got {bits}"}
            continue
        t, lv = shift_levels(w, name, p["exp_bits"], delta if name == "twohot" else 0, axis)
        formats[name] = {"mse": float(np.mean((w - t.dequantize()) ** 2)),
                         "bits_per_weight": int(t.bits_per_weight), "exp_bits": p["exp_bits"],
                         "delta": delta if name == "twohot" else None, "levels": lv}
    for rec in formats.values():
        rec["n_levels"] = None if rec["levels"] is None else int(rec["levels"].size)
    return {"n_weights": int(w.size), "shape": list(w.shape), "bits": int(bits),
            "delta": int(delta), "axis": axis, "range": [float(w.min()), float(w.max())],
            "formats": formats}


def shift_levels(w, mode: str, exp_bits: int, delta: int = 0, axis: Optional[int] = None):
    """Quantize ``w`` with :func:`hlsnn.formats.shift.quantize_pot` (``mode="pot"``) or
    ``quantize_twohot`` and return ``(ShiftTensor, levels)``: the sorted real levels
    (:func:`hlsnn.formats.shift.levels` times ``2**-F``) of the slice that holds the largest
    ``|w|``."""
    from .formats import shift                      # the formats package stays lazy here
    w = np.asarray(w, np.float64)
    if mode == "pot":
        t = shift.quantize_pot(w, exp_bits, axis=axis)
    else:
        t = shift.quantize_twohot(w, exp_bits, delta=delta, axis=axis)
    widest = np.unravel_index(int(np.argmax(np.abs(w))), w.shape)
    f = int(np.broadcast_to(np.asarray(t.scale_exponent), w.shape)[widest])
    codes = shift.levels(mode, exp_bits, delta)
    return t, np.ldexp(np.asarray(codes, dtype=np.float64), -f)


def report_json(report: dict) -> dict:
    """The report without the level arrays (what ``hlsnn plot-quant --json`` prints)."""
    out = {k: v for k, v in report.items() if k != "formats"}
    out["formats"] = {name: {k: v for k, v in rec.items() if k != "levels"}
                      for name, rec in report["formats"].items()}
    return out


def _label(name: str, rec: dict) -> str:
    if rec.get("skipped"):
        return f"{_NAMES[name]}: skipped ({rec['skipped']})"
    if name == "uniform":
        head = f"uniform int{rec['bits_per_weight']}"
    elif name == "pot":
        head = f"PoT (exp_bits {rec['exp_bits']})"
    else:
        head = f"two-hot (exp_bits {rec['exp_bits']}, δ {rec['delta']})"
    return f"{head}: {rec['bits_per_weight']} bits/weight, MSE {rec['mse']:.2e}"


# --------------------------------------------------------------------------- drawing

def plot_quantization(w, out, *, bits: int = 8, delta: int = 0, axis: Optional[int] = None,
                      name: Optional[str] = None, figsize=(10, 5), dpi: int = 100) -> dict:
    """Draw the weight histogram with the levels of the three formats and save it.

    Parameters
    ----------
    w : array_like
        The weights (see :func:`quantization_report`).
    out : str or Path
        Image file to write (``.png``, ``.svg`` or ``.pdf``); missing folders are created.
    bits, delta, axis
        As in :func:`quantization_report`.
    name : str, optional
        What the title calls the weights (e.g. the file name).
    figsize, dpi
        Figure size in inches and resolution (the default is 1000 x 500 pixels).

    Returns
    -------
    dict
        The :func:`quantization_report`, plus ``out`` (the path written, a str).

    Raises
    ------
    InputError
        Bad inputs or an output path that cannot be written.
    MissingDependency
        matplotlib is not installed.
    """
    out = check_out(out)
    rep = quantization_report(w, bits=bits, delta=delta, axis=axis)
    w = _check_weights(w)
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.lines import Line2D
    except ImportError:
        raise MissingDependency('plot-quant needs matplotlib: pip install "hlsnn[plot]"') from None

    fig = Figure(figsize=figsize, dpi=dpi)
    FigureCanvasAgg(fig)
    gs = fig.add_gridspec(2, 1, height_ratios=(3.2, 1.0), hspace=0.06,
                          left=0.085, right=0.985, top=0.91 if rep["axis"] is None else 0.87,
                          bottom=0.11)
    ax = fig.add_subplot(gs[0])
    rug = fig.add_subplot(gs[1], sharex=ax)
    rows = [{"label": _NAMES[fmt], "color": _COLORS[fmt], "levels": rep["formats"][fmt]["levels"],
             "missing": "does not fit the budget"} for fmt in FORMATS]
    draw_weight_levels(ax, rug, w, rows)

    handles = [Line2D([], [], color="0.6", linewidth=6, label="float weights (histogram)")]
    handles += [Line2D([], [], color=_COLORS[fmt], linewidth=2.5, label=_label(fmt, rep["formats"][fmt]))
                for fmt in FORMATS]
    ax.legend(handles=handles, loc="upper left", fontsize=8.5, framealpha=0.92,
              title=f"budget {rep['bits']} bits/weight", title_fontsize=8.5)
    who = name if name else "weights"
    scale_note = "" if rep["axis"] is None else \
        (f"\none scale per slice along axis {rep['axis']}; "
         "the levels drawn are those of the slice with the largest |w|")
    fig.suptitle(f"{plain(who)}: {rep['n_weights']:,} weights, shape {tuple(rep['shape'])}: levels of three "
                 f"formats of at most {rep['bits']} bits/weight{scale_note}", fontsize=11)

    save_figure(fig, out, dpi)
    rep["out"] = str(out)
    return rep


def draw_weight_levels(ax, rug, w, rows, *, max_ticks=None):
    """Draw the histogram of the weights ``w`` on ``ax`` and quantization levels on ``rug``
    (an axes sharing x with ``ax``, under it).

    ``rows`` is a list of dicts, drawn top to bottom: ``label`` (the row's y tick), ``color``,
    ``levels`` (real levels, or None: then the row shows ``missing``) and optionally
    ``lines``, values marked on the histogram as dashed lines in the row's colour (e.g. a
    pruning threshold). Only levels inside the weights' range (plus 3 % margin) are drawn;
    with ``max_ticks`` and more levels than that in range, every n-th level is drawn and the
    row's tick says so. Returns the x limits.
    """
    w = np.asarray(w, np.float64).ravel()
    lo, hi = float(w.min()), float(w.max())
    pad = 0.03 * (hi - lo) if hi > lo else 0.05 * max(abs(lo), 1e-12)
    xlim = (lo - pad, hi + pad)

    bins = min(200, max(20, int(np.sqrt(w.size))))
    counts, _, _ = ax.hist(w, bins=bins, range=(lo, hi), density=True, color="0.72",
                           edgecolor="0.55", linewidth=0.3)
    ax.set_xlim(*xlim)
    ax.set_ylim(0, 1.5 * float(np.max(counts)))     # headroom for the legend
    ax.set_ylabel("density")
    ax.tick_params(labelbottom=False)
    ax.grid(axis="y", color="0.92", linewidth=0.6)
    ax.set_axisbelow(True)

    yticks, ylabels = [], []
    for i, row in enumerate(rows):
        y = len(rows) - 1 - i
        yticks.append(y)
        label = row["label"]
        for v in row.get("lines", ()):
            ax.axvline(v, color=row["color"], linestyle="--", linewidth=1.0)
        if row["levels"] is None:
            rug.text(np.mean(xlim), y, row.get("missing", ""), ha="center", va="center",
                     fontsize=9, color="0.4")
            ylabels.append(label)
            continue
        lv = np.asarray(row["levels"], np.float64)
        lv = lv[(lv >= xlim[0]) & (lv <= xlim[1])]
        if max_ticks and lv.size > max_ticks:
            step = -(-lv.size // max_ticks)
            lv = lv[::step]
            label = f"{label} (1 in {step})"
        ylabels.append(label)
        lw = 0.6 if lv.size > 120 else 1.4
        rug.vlines(lv, y - 0.36, y + 0.36, color=row["color"], linewidth=lw)
    rug.set_yticks(yticks)
    rug.set_yticklabels(ylabels)
    for tick, row in zip(rug.get_yticklabels(), rows):
        tick.set_color(row["color"])
    rug.set_ylim(-0.6, len(rows) - 0.4)
    rug.set_xlabel("weight value   (vertical ticks: quantization levels in the plotted range)")
    rug.tick_params(axis="y", length=0)
    return xlim
