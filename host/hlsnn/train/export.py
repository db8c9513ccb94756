"""``export``: the prepared model's trained weights on their format's grid, written as an ONNX
file, plus a sidecar JSON (``<file>.hlsnn-train.json``) with each layer's format and scale
exponents; :func:`check_round_trip` checks that the deploy quantizer keeps every code."""
from __future__ import annotations

import copy
import json

import numpy as np
import torch
from torch import nn

from ..formats import shift as sfmt
from .prepare import QConv2d, QLinear, quantized_layers
from .quant import ShiftWeight


def _plain(model):
    """A copy of ``model`` with plain Conv2d/Linear layers holding the quantized weights."""
    m2 = copy.deepcopy(model).eval()
    for parent_name, parent in list(m2.named_modules()):
        for name, q in list(parent._modules.items()):
            if not isinstance(q, (QConv2d, QLinear)):
                continue
            with torch.no_grad():
                w = q.quantized_weight().detach()
            if isinstance(q, QConv2d):
                p = nn.Conv2d(q.in_channels, q.out_channels, q.kernel_size, q.stride, q.padding, q.dilation,
                              q.groups, q.bias is not None, q.padding_mode)
            else:
                p = nn.Linear(q.in_features, q.out_features, q.bias is not None)
            with torch.no_grad():
                p.weight.copy_(w)
                if q.bias is not None:
                    p.bias.copy_(q.bias.detach())
            parent._modules[name] = nn.Sequential(p, nn.ReLU()) if q.relu else p
    return m2


def check_round_trip(model):
    """For each shift-format layer: does ``hlsnn.formats.shift``'s quantizer (the deploy
    ``weight_fit: nearest`` path) return the trained weights unchanged? ``{layer: bool}``."""
    out = {}
    for name, q in quantized_layers(model):
        if not isinstance(q.wq, ShiftWeight):
            continue
        with torch.no_grad():
            w = q.quantized_weight().detach().double().numpy().reshape(q.weight.shape[0], -1)
        ax = 0 if q.wq.per_channel else None
        if q.wq.mode == "pot":
            t = sfmt.quantize_pot(w, q.wq.exp_bits, axis=ax)
        else:
            t = sfmt.quantize_twohot(w, q.wq.exp_bits, delta=q.wq.delta, axis=ax)
        out[name] = bool(np.array_equal(np.asarray(t.dequantize(), np.float64), w))
    return out


def export(model, example, path, **onnx_kw):
    """Write ``path`` (ONNX, via ``torch.onnx.export`` of the model with its quantized weights)
    and ``path + ".hlsnn-train.json"``: per layer the format, the scale exponents of a shift
    format, the weight sparsity, and whether the deploy quantizer keeps the codes. Deploy the
    file with ``weight_fit: nearest`` for the shift formats (``output`` re-fits the codes)."""
    plain = _plain(model)
    torch.onnx.export(plain, example, str(path), dynamo=False, **onnx_kw)
    keeps = check_round_trip(model)
    meta = {"layers": {}}
    for name, q in quantized_layers(model):
        entry = {"format": q.spec_name, "type": q.fmt}
        w = q.quantized_weight().detach()
        entry["weight_sparsity"] = float((w == 0).float().mean())
        if isinstance(q.wq, ShiftWeight):
            entry["scale_exponent"] = [int(v) for v in q.wq.exponent().tolist()]
            entry["codes_kept_by_deploy"] = keeps[name]
        meta["layers"][name] = entry
    with open(str(path) + ".hlsnn-train.json", "w") as fh:
        json.dump(meta, fh, indent=1)
    return meta
