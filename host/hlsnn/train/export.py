"""``export``: the prepared model's trained weights on their format's grid, written as an ONNX
file, plus a sidecar JSON (``<file>.hlsnn-train.json``) with each layer's format and scale
exponents and every deploy setting training evaluated with (:func:`training_settings`, which
``hlsnn deploy`` and ``compile`` follow: :mod:`hlsnn.deploy.importer.trained`); :func:`check_round_trip`
checks that the deploy quantizer keeps every code."""
from __future__ import annotations

import copy
import json

import numpy as np
import torch
from torch import nn

from ..deploy.importer.trained import TRAINED_PARAMS
from ..formats import shift as sfmt
from .prepare import QConv2d, QLinear, quantized_layers
from .quant import FixedAct, FixedWeight, ShiftWeight


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


def _format_settings(q):
    """The deploy config fields of ``q``'s format as training ran them (:mod:`hlsnn.deploy.importer.trained`)."""
    shift = isinstance(q.wq, ShiftWeight)
    if shift:
        scale = "channel" if q.wq.per_channel else "tensor"
    elif isinstance(q.wq, FixedWeight):
        scale = {True: "channel", "auto": "auto"}.get(q.wq.per_channel, "tensor")
    else:
        scale = "tensor"
    lse = q.aq is not None and q.aq.lse is not None
    return {"type": q.fmt, "delta": q.wq.delta if shift and q.fmt == "twohot" else 0, "prune": 0.0,
            "weight_scale": scale, "weight_fit": "nearest" if shift else "output", "weight_terms": 1,
            "bias_correction": "none", "input_terms": 1, "radix": "lse" if lse else "msb", "equalize": "none",
            "accel": getattr(q, "accel", None),
            "accel_params": {k: q.params[k] for k in TRAINED_PARAMS.get(q.fmt, ()) if k in q.params}}


def training_settings(model):
    """Every deploy-config setting the prepared ``model``'s eval mode computes with: ``formats``
    (per format name, :func:`_format_settings`), ``calibration`` (``mode``: ``static`` when
    :func:`hlsnn.train.calibrate` froze the radixes, else ``dynamic``; ``samples``, the images it
    calibrated on; ``overflow_ratio``, ``strided_stats``, ``clip_stats``) and ``rounding`` (the
    host's activation rounding). The sidecar's ``training`` section: :mod:`hlsnn.deploy.importer.trained`."""
    qs = quantized_layers(model)
    formats = {}
    for _, q in qs:
        formats.setdefault(q.spec_name, _format_settings(q))
    acts = [m for m in model.modules() if isinstance(m, FixedAct)]
    frozen = [a for a in acts if a.frozen is not None]
    cal = {"mode": None if not acts else "static" if frozen else "dynamic",
           "samples": frozen[0].calibrated_on if frozen else None}
    if qs:
        q = qs[0][1]
        cal.update(strided_stats=q.strided_stats, clip_stats=q.clip_stats)
    if acts:
        cal["overflow_ratio"] = acts[0].overflow_ratio
    out = {"formats": formats, "calibration": cal}
    aqs = [q.aq for _, q in qs if q.aq is not None]
    if aqs:
        out["rounding"] = aqs[0].rounding
    return out


def export(model, example, path, **onnx_kw):
    """Write ``path`` (ONNX, via ``torch.onnx.export`` of the model with its quantized weights)
    and ``path + ".hlsnn-train.json"``: per layer the format, the scale exponents of a shift
    format, the weight sparsity, and whether the deploy quantizer keeps the codes; and, as
    ``training``, every deploy setting training evaluated with (:func:`training_settings`):
    ``hlsnn deploy`` and ``compile`` take those the deploy config leaves ``auto`` (a shift format's
    ``radix``: training's ``msb``) and warn of any the config sets otherwise
    (:mod:`hlsnn.deploy.importer.trained`)."""
    import os
    from ..errors import InputError, printable
    folder = os.path.dirname(os.path.abspath(str(path)))
    if os.path.isdir(str(path)) or not os.path.isdir(folder):
        raise InputError(f"path = {printable(path)}: {'a folder' if os.path.isdir(str(path)) else 'its folder does not exist'}; "
                         "give the ONNX file's path in an existing folder")
    plain = _plain(model)
    torch.onnx.export(plain, example, str(path), dynamo=False, **onnx_kw)
    keeps = check_round_trip(model)
    meta = {"layers": {}, "training": training_settings(model)}
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
