"""Unary elementwise activations beyond :mod:`hlsnn.deploy.run.hostops` and
:mod:`hlsnn.deploy.run.hostextra` (what ``nn.Softplus``, ``nn.SELU``, ``nn.CELU``, ``nn.Softsign``,
``nn.Mish`` and ``nn.Threshold``-like modules export to), each as ONNX defines it, on the host
in float64; where the input is a fixed-point tensor (or a BFP layer's output) and an engine
layer follows, a table of its codes instead
(:mod:`hlsnn.engines.network.tables`, rule unary_table):

* ``Softplus``: ``ln(1 + e^x)``;
* ``Selu`` (``alpha``, ``gamma``): ``gamma x`` for ``x > 0``, else ``gamma alpha (e^x - 1)``;
* ``Celu`` (``alpha``): ``max(0, x) + min(0, alpha (e^(x / alpha) - 1))``;
* ``Softsign``: ``x / (1 + |x|)``;
* ``Mish``: ``x tanh(softplus(x))``;
* ``ThresholdedRelu`` (``alpha``): ``x`` for ``x > alpha``, else 0;
* ``Abs``: ``|x|`` (torch's ``F.softsign`` exports ``x / (1 + |x|)`` as ``Abs``, ``Add``, ``Div``);
* ``Bipolar`` (``scale``): ``scale`` for ``x >= 0``, else ``-scale``: a QONNX ``BipolarQuant`` of an
  activation (:func:`hlsnn.deploy.importer.qimport.strip` writes it).
"""
from __future__ import annotations

import numpy as np

#: op types of the ONNX nodes :func:`rule` takes (each becomes a host op of the same name)
OPS = ("Softplus", "Selu", "Celu", "Softsign", "Mish", "ThresholdedRelu", "Abs", "Bipolar")
#: ONNX's default attributes
DEFAULTS = {"Selu": {"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
            "Celu": {"alpha": 1.0}, "ThresholdedRelu": {"alpha": 1.0}}


def rule(node, a):
    """``(host op, attrs, inputs)`` for ``node`` (op type in :data:`OPS`), or why not."""
    op = node.op_type
    attrs = {k: float(a.get(k, v)) for k, v in DEFAULTS.get(op, {}).items()}
    if op == "Celu" and attrs["alpha"] == 0:
        return "Celu with alpha = 0"
    if op == "Bipolar":
        s = float(a.get("scale", 0.0))
        if not (np.isfinite(s) and s > 0):
            return f"Bipolar with scale {s}: a BipolarQuant's scale is finite and > 0"
        attrs = {"scale": s}
    return op, attrs, [node.input[0]]


def _softplus(x):
    return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


def run(layer, inputs):
    """Evaluate host ``layer`` (op in :data:`OPS`) on its input (float64)."""
    op, a, x = layer.op, layer.attrs, np.asarray(inputs[0], np.float64)
    if op == "Softplus":
        return _softplus(x)
    if op == "Selu":
        return a["gamma"] * np.where(x > 0, x, a["alpha"] * np.expm1(np.minimum(x, 0)))
    if op == "Celu":
        return np.maximum(x, 0) + np.minimum(0, a["alpha"] * np.expm1(np.minimum(x, 0) / a["alpha"]))
    if op == "Softsign":
        return x / (1 + np.abs(x))
    if op == "Mish":
        return x * np.tanh(_softplus(x))
    if op == "ThresholdedRelu":
        return np.where(x > a["alpha"], x, 0.0)
    if op == "Abs":
        return np.abs(x)
    if op == "Bipolar":
        return np.where(x >= 0, a["scale"], -a["scale"])
    raise ValueError(op)
