"""Shift codes fitted to the float network (a shift format's ``weight_fit: network``).

:mod:`hlsnn.deploy.quantize.shift_fit` (``weight_fit: output``) chooses a layer's codes so that its
output on its own quantized inputs ``X_q`` is near ``W X_q``: the error the layers before it
made stays in the input and passes on. Here the target is the float network's output of the
layer, ``W X_f`` with ``X_f`` the layer's input in the float64 network on the same calibration
images (:func:`hlsnn.deploy.run.hostops.float_tensors`), so each layer also takes back what it can
of the error that reaches it (the asymmetric calibration of GPTAQ: Y. Li et al., "GPTAQ:
Efficient Finetuning-Free Quantization for Asymmetric Calibration", ICML 2025, here as a
least-squares step before the error feedback):

1. **Target weights.** Per group (a grouped or depthwise conv: each group alone) and with the
   rows centred (``mean_q``, ``mean_f`` the mean input rows), ``W'`` minimises
   ``|| X_f W^T - X_q W'^T ||^2 + lambda || W' - W ||^2`` (ridge toward the float weights):
   ``W'^T = (H + lambda I)^-1 (C W^T + lambda W^T)`` with ``H = X_q^T X_q`` and ``C = X_q^T
   X_f`` of the centred rows, ``lambda`` = :data:`RIDGE` times the mean of ``diag H``. Rows are
   conv im2col patches (padding zeros included) or dense inputs; ``X_q`` the integers at radix
   ``F_x`` as values, the same integers the kernel is fed.
2. **Target bias.** ``b' = b + mean_f W^T - mean_q W'^T``: the layer with ``W'`` gives the float
   layer's mean output on the calibration images.
3. **Codes.** The layer ``(W', b')`` goes through :func:`hlsnn.deploy.quantize.shift_fit.fit_layer` (or
   :func:`hlsnn.deploy.quantize.twoterm.fit_layer` for two codes a weight): the error feedback on ``H``
   and the bias correction ``(W' - Q) mean_q``, at the scale exponents the format chose for
   ``W``. So the bias the kernel gets is ``b + mean_f W^T - mean_q Q^T``.

Where ``X_q = X_f`` (a layer whose inputs are exact) ``W' = W`` and ``b' = b``: the codes are
``weight_fit: output``'s. Only the codes and the float bias change (the bias is rounded into
accumulator units as every bias is), so the emulator, csim and the board compute the same bits
for them as for any other codes; the layer path and the compiled calibration
(:mod:`hlsnn.deploy.quantize.calibrate`) call the same function on the same integers.

The float inputs come from one float64 pass over the calibration images per calibration
(:func:`prepare`, kept on the deployment only for the layers that use them). A layer whose
float input is not there (a calibrating pass on other images than :func:`prepare` saw), or whose
``K`` of one group exceeds :data:`hlsnn.deploy.quantize.shift_fit.MAX_FEEDBACK_K`, gets ``output``'s fit.
"""
from __future__ import annotations

import copy
import hashlib

import numpy as np

from ...engines import convgeom as conv

#: ``lambda / mean(diag H)`` of step 1
RIDGE = 0.1

#: im2col rows per block of the sums (float64 rows of both inputs stay below ~64 MB each)
_BLOCK_VALUES = 1 << 23


def wants(dep):
    """The engine layers of ``dep`` whose format fits its codes to the float network."""
    out = []
    for layer in dep.net.engine_layers():
        ex = dep.execs.get(layer.name)
        if ex is not None and getattr(getattr(ex, "fmt", None), "weight_fit", None) == "network":
            out.append(layer)
    return out


def _key(x):
    x = np.ascontiguousarray(x)
    return x.shape, str(x.dtype), hashlib.blake2b(x.view(np.uint8).reshape(-1), digest_size=16).hexdigest()


def prepare(dep, x):
    """Keep on ``dep`` the float64 inputs, on the calibration batch ``x`` (the network's input
    as :meth:`~hlsnn.deploy.run.runner.Deployment.run` takes it), of every layer that fits its codes
    to the float network; nothing when no layer does. One float pass per new batch."""
    layers = wants(dep)
    if not layers:
        dep._netfit = None
        return
    key = _key(x)
    got = getattr(dep, "_netfit", None)
    if got is not None and got[0] == key and got[1] is dep.net:
        return
    from ..run.hostops import float_tensors
    env = float_tensors(dep.net, x)
    dep._netfit = (key, dep.net, {la.inputs[0]: env[la.inputs[0]] for la in layers})


def float_input(ex, n):
    """The float64 input of ``ex``'s layer on the batch :func:`prepare` saw, or None (not
    prepared, or a batch of another size than ``n`` images)."""
    got = getattr(getattr(ex, "deploy", None), "_netfit", None)
    if got is None:
        return None
    xf = got[2].get(ex.layer.inputs[0])
    return xf if xf is not None and xf.shape[0] == n else None


def _rows(layer, x):
    x = np.asarray(x, np.float64)
    if layer.kind == "conv":
        return conv.im2col(x, layer.geom)[0]
    return x.reshape(x.shape[0], -1)


def sums(layer, xq, xf, g, quantize=None):
    """Per group the centred ``H``, ``C`` (g, K, K) and the mean rows ``mean_q``, ``mean_f``
    (g, K) of step 1 for quantized input values ``xq`` and float inputs ``xf`` (same shape),
    the rows in blocks of images; ``quantize`` (rows -> rows), where given, maps ``xq``'s rows to
    the values the kernel multiplies (:func:`hlsnn.deploy.quantize.outfit.quantized_rows`)."""
    per = int(np.prod(xq.shape[1:])) * (layer.geom.kh * layer.geom.kw if layer.kind == "conv" else 1)
    step = max(1, _BLOCK_VALUES // max(per, 1))
    sqq = sqf = tq = tf = None
    n = 0
    for i in range(0, xq.shape[0], step):
        rq, rf = _rows(layer, xq[i:i + step]), _rows(layer, xf[i:i + step])
        if quantize is not None:
            rq = quantize(rq)
        m = rq.shape[0]
        rq, rf = rq.reshape(m, g, -1), rf.reshape(m, g, -1)
        rt = rq.transpose(1, 2, 0)                          # (g, K, m): the sums as matrix products (BLAS)
        a, c = np.matmul(rt, rq.transpose(1, 0, 2)), np.matmul(rt, rf.transpose(1, 0, 2))
        sqq, sqf = (a, c) if sqq is None else (sqq + a, sqf + c)
        tq = rq.sum(axis=0) if tq is None else tq + rq.sum(axis=0)
        tf = rf.sum(axis=0) if tf is None else tf + rf.sum(axis=0)
        n += m
    mq, mf = tq / n, tf / n
    h = sqq / n - np.einsum("gk,gj->gkj", mq, mq)
    c = sqf / n - np.einsum("gk,gj->gkj", mq, mf)
    return h, c, mq, mf


def target_weights(w, h, c, ridge=RIDGE):
    """Step 1 for weights ``w`` (g, Z, K) of each group: ``W'`` (g, Z, K). A group whose inputs
    never vary (``diag H`` all zero) keeps its weights."""
    k = w.shape[2]
    lam = ridge * np.einsum("gii->gi", h).mean(axis=1)                   # (g,)
    out = np.array(w, np.float64)
    ok = lam > 0
    if np.any(ok):
        a = h[ok] + lam[ok, None, None] * np.eye(k)
        rhs = c[ok] @ np.swapaxes(w[ok], 1, 2) + lam[ok, None, None] * np.swapaxes(w[ok], 1, 2)
        out[ok] = np.swapaxes(np.linalg.solve(a, rhs), 1, 2)
    return out


def target(ex, xi, fx):
    """Steps 1 and 2 for a calibrating ``ShiftExec`` ``ex`` on its input integers ``xi`` at radix
    ``fx``: a shallow copy of its layer with ``W'`` and ``b'``, or None (``ex`` fits to its own
    inputs: no float input, or a K beyond the error feedback's)."""
    from . import shift_fit
    layer = ex.layer
    xf = float_input(ex, np.asarray(xi).shape[0])
    if xf is None:
        return None
    g = layer.group if layer.kind == "conv" else 1
    w = np.asarray(layer.w, np.float64)
    z = w.shape[0]
    wg = w.reshape(g, z // g, -1)
    if wg.shape[2] > shift_fit.MAX_FEEDBACK_K:
        return None
    xq = np.ldexp(np.asarray(xi, np.float64), -int(fx))
    h, c, mq, mf = sums(layer, xq, np.asarray(xf, np.float64).reshape(xq.shape), g)
    wt = target_weights(wg, h, c)
    b = np.asarray(layer.b, np.float64) + (np.einsum("gk,gzk->gz", mf, wg) - np.einsum("gk,gzk->gz", mq, wt)).reshape(-1)
    out = copy.copy(layer)
    out.w = wt.reshape(w.shape)
    out.b = b
    return out
