"""A model :func:`hlsnn.train.export` wrote, deployed with the settings it was trained with.

``export`` writes, beside ``model.onnx``, the sidecar ``model.onnx.hlsnn-train.json``; its
``training`` section holds every deploy-config setting that training-time eval computed with:

* ``formats``: per format name (the deploy config's that :func:`hlsnn.train.prepare` read) the
  fields of a config's format as training ran them: ``type``, ``delta``, ``prune`` (0.0: training
  does not prune at deployment), ``weight_scale``, ``weight_fit`` (``nearest`` for the shift
  formats: the trained codes; ``output`` for the others), ``weight_terms`` (1),
  ``bias_correction`` (``none``: the trained biases), ``input_terms`` (1), ``radix`` (``msb`` or
  ``lse``: the rule training chose each activation radix by) and ``equalize`` (``none``), and
  ``accel`` with ``accel_params``, the accel config's parameters training read
  (:data:`TRAINED_PARAMS`);
* ``calibration``: ``mode`` (``static`` when :func:`hlsnn.train.calibrate` froze the radixes,
  ``dynamic`` otherwise), ``samples`` (the number of images calibrated on, static only),
  ``overflow_ratio``, ``strided_stats``, ``clip_stats``; and ``rounding`` (the host's).

:func:`follow` applies it where ``hlsnn deploy``, ``hlsnn compile`` and
:func:`~hlsnn.deploy.reports.evaluate.open_deployment` load such a model, so that the exported model
deploys with training-time eval's bits:

1. a format field the config leaves ``auto`` (or out) takes training's value: a shift format's
   ``radix: auto`` is training's ``msb`` rather than the rule :mod:`hlsnn.deploy.quantize.shift_auto`
   would choose at calibration, as ``bias_correction: auto`` is ``none`` for such a model
   (:func:`hlsnn.deploy.quantize.biascorr.policy`);
2. a field the config sets otherwise than training, a calibration setting or the rounding that
   differs, is kept as the config says, with one line on stderr naming the key, the config's
   value and training's (``hlsnn: warning: ...``): that deployment does not give eval mode's bits.

The config's formats are matched to training's by name; when the sidecar has one format and
the config none of its name, each config format of the same type is compared with it. A model
file without a sidecar, or a sidecar without a ``training`` section, is deployed as the config says.
"""
from __future__ import annotations

import dataclasses
import json
import os
import sys

from ...errors import InputError, printable

#: the sidecar's suffix (``<model>.onnx.hlsnn-train.json``)
SIDECAR = ".hlsnn-train.json"

#: per format type, the accel config parameters hlsnn.train's quantizers read (the others, a
#: board's array sizes and depths, do not change a value)
TRAINED_PARAMS = {
    "pot": ("exp_bits", "act_bits", "act_signed", "rounding"),
    "twohot": ("exp_bits", "act_bits", "act_signed", "rounding"),
    "fixed": ("act_bits", "act_signed", "rounding", "max_ksize"),
    "sparse": ("rounding", "max_ksize"),
    "bfp": ("mantissa_bits", "exponent_bits", "weight_exponent", "rounding", "max_n"),
}

#: the format fields training records, in a deploy config's order
FORMAT_KEYS = ("type", "delta", "prune", "weight_scale", "weight_fit", "weight_terms", "bias_correction",
               "input_terms", "radix", "equalize")
#: the calibration settings training records
CALIBRATION_KEYS = ("mode", "samples", "overflow_ratio", "strided_stats", "clip_stats")


def settings(model_path):
    """The sidecar's ``training`` section of the model file ``model_path``, or None (no sidecar,
    or one written before the section existed). An unreadable sidecar is an :class:`InputError`."""
    if not model_path:
        return None
    path = str(model_path) + SIDECAR
    if not os.path.exists(path):
        return None
    try:
        with open(path) as fh:
            meta = json.load(fh)
    except (OSError, ValueError) as exc:
        raise InputError(f"{printable(path)}: cannot be read as the JSON hlsnn.train.export writes beside its model "
                         f"({type(exc).__name__}: {str(exc)[:160]}); export the model again, or remove it") from None
    section = meta.get("training") if isinstance(meta, dict) else None
    if section is not None and not (isinstance(section, dict) and isinstance(section.get("formats"), dict)):
        raise InputError(f"{printable(path)}: its 'training' section is not the one hlsnn.train.export writes "
                         "(a mapping with 'formats'); export the model again")
    return section


def _left_auto(f, key):
    """Whether the config left format field ``key`` of ``f`` to its default (``auto``)."""
    return getattr(f, key) == "auto" or key in getattr(f, "auto", ())


def _matches(cfg, trained):
    """``{config format name: training's format settings}``."""
    out = {n: trained[n] for n in cfg.formats if n in trained}
    if not out and len(trained) == 1:
        (only,) = trained.values()
        out = {n: only for n, f in cfg.formats.items() if f.type == only.get("type")}
    return out


def follow(cfg, model_path=None, *, warn=None):
    """``cfg.formats`` for the model ``model_path`` (default ``cfg.model``) as training ran it (module
    docstring): each field left ``auto`` set to training's, the others as the config says. Returns
    the formats; every disagreement is one line passed to ``warn`` (default: printed on stderr as
    ``hlsnn: warning: ...``). Without a sidecar the formats are returned unchanged."""
    path = cfg.model if model_path is None else model_path
    tr = settings(path)
    if tr is None:
        return cfg.formats
    lines = []
    where = f"{printable(cfg.path)}"
    side = f"{printable(os.path.basename(str(path)) + SIDECAR)}"

    def differ(key, mine, theirs, hint=""):
        lines.append(f"{where}: {key} is {mine}, training evaluated with {theirs} ({side}); the deployment will "
                     f"not give training-time eval's bits{hint}")

    formats = dict(cfg.formats)
    for name, t in _matches(cfg, tr["formats"]).items():
        f = formats[name]
        if t.get("type") != f.type:
            differ(f"formats.{name}.type", f.type, t.get("type"))
            continue
        set_ = {}
        for key in FORMAT_KEYS[1:]:
            if key not in t:
                continue
            if _left_auto(f, key):
                set_[key] = t[key]
            elif getattr(f, key) != t[key]:
                differ(f"formats.{name}.{key}", getattr(f, key), t[key], f"; leave {key} out or set {t[key]}")
        if set_:
            formats[name] = dataclasses.replace(f, auto=tuple(k for k in f.auto if k not in set_), **set_)
        params = t.get("accel_params") or {}
        if params:
            from ...config import load_config
            have = load_config(f.accel, check_fit=False).params
            for k, v in params.items():
                if have.get(k) != v:
                    differ(f"formats.{name}.accel ({k})", have.get(k), v, f" (training's accel: {t.get('accel')})")
    cal = tr.get("calibration") or {}
    for key in CALIBRATION_KEYS:
        if key in cal and cal[key] is not None and cfg.calibration.get(key) != cal[key]:
            if key == "samples" and cal.get("mode") != "static":
                continue
            differ(f"calibration.{key}", cfg.calibration.get(key), cal[key])
    if "rounding" in tr and tr["rounding"] != cfg.rounding:
        differ("rounding", cfg.rounding, tr["rounding"])
    for line in lines:
        if warn is not None:
            warn(line)
        else:
            print(f"hlsnn: warning: {line}", file=sys.stderr, flush=True)
    return formats

def trained_file(path):
    """Whether the model file ``path`` was written by :func:`hlsnn.train.export` (its sidecar
    ``<file>.hlsnn-train.json`` exists beside it; read by :mod:`hlsnn.deploy.rewrite.constchan` and
    :func:`hlsnn.deploy.quantize.biascorr.trained_export`)."""
    return bool(path) and os.path.exists(str(path) + ".hlsnn-train.json")
