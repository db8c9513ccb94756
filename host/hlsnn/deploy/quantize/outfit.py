"""The output layer refitted to the float network (a ``bfp`` / ``fixed`` / ``sparse`` format's
``weight_fit: network``, a regression deployment's default).

A regression network's last layer often sums many terms that cancel, so the error its
quantized inputs carry is large against its output. The layer can take part of it back:
after the calibration, its weights and bias are
fitted, on the calibration images, to the float network's output, from the inputs the
quantized network gives it, then quantized as the format quantizes any weights. For each engine
layer whose output is the network's output (directly, or through host ``Reshape`` /
``Flatten`` / ``Squeeze`` / ``Unsqueeze`` / ``Identity`` and an elementwise ``Tanh`` / ``Sigmoid``
head only: the layer's own float output is the target), of a format with ``weight_fit:
network``:

1. **Inputs.** ``X_q``: the layer's input in the calibrated deployment on the calibration
   images as the kernel multiplies it (``fixed`` / ``sparse``: the int8 codes at the layer's
   input radix as values; ``bfp``: each im2col row (each group's part of it) quantized to
   block floating point as the kernel quantizes it, one exponent a row); ``X_f``: the layer's
   input in the float64 network (:func:`hlsnn.deploy.run.hostops.float_tensors`).
2. **Weights.** Ridge least squares toward the imported weights, per group with centred rows,
   :func:`hlsnn.deploy.quantize.shift_netfit.target_weights`: ``W'`` minimises ``|| X_f W^T - X_q W'^T
   ||^2 + lambda || W' - W ||^2``, ``lambda`` = :data:`RIDGE` times the mean of ``diag H``
   (``H = X_q^T X_q``). ``X_f W^T + b`` is the float network's output of the layer.
3. **Bias.** The executor is built on ``(W', b + mean_f W^T - mean_q W'^T)`` (the float mean
   output on the calibration images) and run on ``X_q``; the bias then moves, per output
   channel, by the mean difference between the float layer's output and what it gave (the
   weights' quantization and the output's rounding, as the empirical bias correction of
   :mod:`hlsnn.deploy.quantize.biascorr` does), and the executor is built once more on it.

The new executor keeps the calibrated state of the old one (``fixed``: the input and output
radix points; ``bfp`` has none), so nothing upstream changes. Only the stored weights and bias
change (quantized into the kernel's fields as every weight and bias is): the emulator, csim,
the board and the compiled network program (:mod:`hlsnn.network.build`, which reads the
executors) compute the same bits for them as for any others.

``weight_fit: auto`` resolves to ``network`` for these formats in a regression deployment
(:mod:`hlsnn.deploy.quantize.task_formats`), to ``output`` (the weights' nearest codes; nothing refitted)
in a classifier.
"""
from __future__ import annotations

import copy

import numpy as np

from .outputs import output_layers

#: the format types whose output layer this refits
TYPES = ("bfp", "fixed", "sparse")
#: ``lambda / mean(diag H)`` of step 2
RIDGE = 0.01
#: round the fitted weights with error feedback (:func:`feedback_codes`)
FEEDBACK = True
#: the damping of :func:`feedback_codes`' covariance, times the mean of its diagonal
DAMP = 0.01


def wanted(dep):
    """The layers of :func:`output_layers` of ``dep.net`` whose format (of :data:`TYPES`) has
    ``weight_fit: network``."""
    got = []
    for la in output_layers(dep.net):
        ex = dep.execs.get(la.name)
        fmt = getattr(ex, "fmt", None)
        if fmt is not None and fmt.type in TYPES and getattr(fmt, "weight_fit", None) == "network":
            got.append(la)
    return got


def _group(layer):
    return int(layer.geom.group) if layer.kind == "conv" else 1


def quantized_rows(ex, rows, g):
    """``rows`` (m, g*K) as the kernel of ``ex`` multiplies them: ``bfp``, each group's part of
    a row quantized to BFP with one exponent (the kernel's activation quantizer, all-zero rows
    stay zero); ``fixed`` / ``sparse``: unchanged (the values are the codes already)."""
    if ex.fmt.type != "bfp":
        return rows
    from ...formats import bfp as bfpfmt
    m = rows.shape[0]
    r = rows.reshape(m * g, -1)
    q = bfpfmt.quantize(r, ex.m, axis=-1, exponent_bits=ex.e, rounding=ex.rnd).dequantize()
    return np.asarray(q, np.float64).reshape(rows.shape)


def input_values(ex, x):
    """The layer's input ``x`` (float64, as the deployment's tensor) as the values the kernel
    reads, and their format for :class:`~hlsnn.deploy.quantize.quant.Act`: ``fixed`` / ``sparse``: the
    int8 codes at the input radix of its last run (``stats.f_in``) as values (codes already at
    that radix are unchanged), ``(f_in, 8, True)``, or where its last run took two terms
    (:mod:`hlsnn.deploy.quantize.twoin`) the value they stand for, None; ``bfp``: ``x``, None."""
    if ex.fmt.type == "bfp":
        return np.asarray(x, np.float64), None
    from .quant import to_fixed
    f = int(ex.stats.f_in if ex.stats.f_in is not None else ex.f_x)
    if getattr(ex, "two", False):                 # two terms (hlsnn.deploy.quantize.twoin): the value they stand for
        from . import twoin
        from .quant import Act
        xi = to_fixed(x, f, ex.BITS, True, ex.deploy.rounding)
        return twoin.values(xi, twoin.residual(ex, Act(np.asarray(x, np.float64)), xi, f), f), None
    return np.ldexp(to_fixed(x, f, ex.BITS, True, ex.deploy.rounding).astype(np.float64), -f), (f, ex.BITS, True)


def sums(ex, layer, xq, xf):
    """Per group the centred ``H``, ``C`` (g, K, K) and the mean rows ``mean_q``, ``mean_f``
    (g, K) of step 2: :func:`hlsnn.deploy.quantize.shift_netfit.sums`, with ``X_q``'s rows quantized by
    :func:`quantized_rows`."""
    from .shift_netfit import sums as fit_sums
    g = _group(layer)
    return fit_sums(layer, xq, xf, g, quantize=lambda rows: quantized_rows(ex, rows, g))


def row_scales(ex):
    """Per output row, the power-of-two step of the weights ``ex`` stores: ``fixed`` /
    ``sparse`` ``2**-f_w`` (one per tensor or per output channel); ``bfp`` each row's step
    (its largest dequantized weight over its largest mantissa; 0 for an all-zero row)."""
    if ex.fmt.type != "bfp":
        f = np.broadcast_to(np.asarray(ex.f_w, np.float64).reshape(-1), (ex.n_out,))
        return np.ldexp(1.0, -f.astype(np.int64))
    out = np.zeros(ex.n_out)
    for a, b, wq, _ in ex.chunks:
        mant = np.abs(np.asarray(wq.mantissas, np.float64)).reshape(b - a, -1)
        deq = np.abs(np.asarray(wq.dequantize(), np.float64)).reshape(b - a, -1)
        mm = mant.max(axis=1)
        out[a:b] = np.where(mm > 0, deq.max(axis=1) / np.where(mm > 0, mm, 1), 0.0)
    return out


def feedback_codes(w, h, step, lo=-128, hi=127, damp=DAMP):
    """Weights ``w`` (g, Z, K) rounded to multiples of ``step`` (Z,) (codes in ``[lo, hi]``)
    one weight at a time in order, each rounding error fed back to the row's later weights
    through the centred input covariance ``h`` (g, K, K) of its group (GPTQ: E. Frantar et
    al., ICLR 2023): the codes whose outputs on the calibration rows are nearest ``w``'s, of
    those the greedy order reaches. A row of step 0 keeps its weights (all zero)."""
    g, z, k = w.shape
    out = np.array(w, np.float64)
    for j in range(g):
        hj = h[j] + damp * max(float(np.mean(np.diag(h[j]))), 1e-300) * np.eye(k)
        try:
            u = np.linalg.cholesky(np.linalg.inv(hj)).T           # upper
        except np.linalg.LinAlgError:
            u = None
        for r in range(z):
            s = step[j * z + r]
            if s <= 0:
                continue
            row = out[j, r].copy()
            for i in range(k):
                q = np.clip(np.rint(row[i] / s), lo, hi) * s
                if u is not None and i + 1 < k:
                    row[i + 1:] -= (row[i] - q) / u[i, i] * u[i, i + 1:]
                row[i] = q
            out[j, r] = row
    return out


def _channel_mean(y, layer):
    y = np.asarray(y, np.float64)
    return y.reshape(y.shape[0], -1).mean(axis=0) if layer.kind == "dense" \
        else y.mean(axis=tuple(i for i in range(y.ndim) if i != 1))


def _rebuilt(dep, old, layer):
    """An executor of ``old``'s format on ``layer`` with ``old``'s calibrated state."""
    from ..run.executors import EXECS
    new = EXECS[old.fmt.type](layer, old.fmt, old.acc, dep)
    for k in ("f_x", "f_out", "in_shape", "update_times", "update_choice", "update_ran", "two", "two_cost", "two_rest",
              "two_why"):
        setattr(new, k, getattr(old, k, None))
    return new


def _fit(dep, ex, layer, xq, xf, yf, fmt):
    """Steps 2-3 on the images of ``xq`` / ``xf`` / ``yf``: the refitted copy of ``layer``."""
    from . import shift_netfit
    from .quant import Act
    g = _group(layer)
    w = np.asarray(layer.w, np.float64)
    wg = w.reshape(g, w.shape[0] // g, -1)
    h, c, mq, mf = sums(ex, layer, xq, xf)
    wt = shift_netfit.target_weights(wg, h, c, RIDGE)
    new = copy.copy(layer)
    new.w = wt.reshape(w.shape)
    new.b = np.asarray(layer.b, np.float64) + (np.einsum("gk,gzk->gz", mf, wg)
                                               - np.einsum("gk,gzk->gz", mq, wt)).reshape(-1)
    ex1 = _rebuilt(dep, ex, new)
    if FEEDBACK:
        step = row_scales(ex1)
        trial = copy.copy(new)
        trial.w = feedback_codes(wt, h, step).reshape(w.shape)
        ex_c = _rebuilt(dep, ex, trial)
        if np.array_equal(row_scales(ex_c), step):        # the stored codes are the chosen ones
            new, ex1 = trial, ex_c
    y1 = np.asarray(ex1.run(Act(xq, fmt), False).values, np.float64).reshape(yf.shape)
    new.b = new.b + _channel_mean(yf, layer) - _channel_mean(y1, layer)
    return new


def _error(dep, ex, layer, xq, yf, fmt):
    """The relative error against ``yf`` of ``layer`` (``ex``'s format, calibrated state) on ``xq``."""
    from .quant import Act
    y = np.asarray(_rebuilt(dep, ex, layer).run(Act(xq, fmt), False).values, np.float64).reshape(yf.shape)
    return float(np.linalg.norm(y - yf)) / max(float(np.linalg.norm(yf)), 1e-300)


def refit(dep, x_cal):
    """Steps 1-3 (module docstring) for every layer of :func:`wanted` of the calibrated ``dep``
    on the calibration images ``x_cal`` (float64, the network's input as
    :meth:`~hlsnn.deploy.run.runner.Deployment.run` takes it), where it generalises: the fit on the
    even-numbered images must lower the layer's error against float on the odd-numbered ones
    (a fit of many weights on few images otherwise learns their noise), and the fit on all of
    them its error on all. Returns ``{layer name: (relative error of the layer's output against
    float on x_cal before, after)}`` (``after == before`` where the fit is not kept) and keeps
    in ``dep.output_fit_held_out`` ``{layer name: (error on the odd-numbered images of the layer
    as it was, of the fit on the even-numbered ones)}``, the evidence of the decision
    (:mod:`hlsnn.deploy.reports.fitreport` reports both)."""
    layers = wanted(dep)
    if not layers or x_cal.shape[0] < 2:
        return {}
    from ..run.hostops import float_tensors
    env = float_tensors(dep.net, x_cal)
    _, got = dep.run(x_cal, keep=True)
    res, held = {}, {}
    for layer in layers:
        ex = dep.execs[layer.name]
        xq, fmt = input_values(ex, got[layer.inputs[0]])
        xf = np.asarray(env[layer.inputs[0]], np.float64).reshape(xq.shape)
        yf = np.asarray(env[layer.output], np.float64)
        a, b = slice(0, None, 2), slice(1, None, 2)
        half = _fit(dep, ex, layer, xq[a], xf[a], yf[a], fmt)
        before = after = _error(dep, ex, ex.layer, xq, yf, fmt)
        held[layer.name] = (_error(dep, ex, ex.layer, xq[b], yf[b], fmt), _error(dep, ex, half, xq[b], yf[b], fmt))
        if held[layer.name][1] < held[layer.name][0]:
            new = _fit(dep, ex, layer, xq, xf, yf, fmt)
            e1 = _error(dep, ex, new, xq, yf, fmt)
            if e1 < before:
                dep.execs[layer.name] = _rebuilt(dep, ex, new)
                after = e1
        res[layer.name] = (before, after)
    dep.output_fit_held_out = held
    dep._fastnet = None
    dep._bfpnet = None
    return res
