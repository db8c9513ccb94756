"""What a fixed-point format's ``auto`` fields mean in a regression deployment.

A deployment whose task is regression (``task: regression``, or ``task: auto`` with data that
have no integer labels: :func:`infer_task`) scores its outputs by their
error against the float model's. Its ``fixed`` and ``sparse`` formats (``sparse_cluster``) then
resolve each field the config left ``auto`` to the calibration that minimises that error:

* ``radix: search`` (:mod:`hlsnn.deploy.quantize.radix_search`): lse's points, each moved by one bit
  while the network output's relative error on the calibration images drops, which is the
  regression metric itself;
* ``weight_scale: channel``, ``bias_correction: empirical`` (:mod:`hlsnn.deploy.quantize.biascorr`) and
  ``equalize: channels`` (:mod:`hlsnn.deploy.quantize.chain_equalize`; it also widens the skip Concats'
  balance, :mod:`hlsnn.deploy.quantize.equalize`);
* ``weight_fit: network``, for ``bfp`` formats too: the layers giving the network's output
  refitted to the float network's output on the calibration images (:mod:`hlsnn.deploy.quantize.outfit`);
* ``input_terms: 2`` (fixed, sparse): a conv giving the network's output takes an input the host
  quantizes in two int8 terms (:mod:`hlsnn.deploy.quantize.twoin`).

A classifier keeps the classification defaults (``radix: lse``, ``weight_scale: auto``,
``bias_correction: none``, ``equalize: none``), whose calibration takes a fraction of the time. A
model :func:`hlsnn.train.export` wrote keeps them too: it was trained with those quantizers in
the loop. An explicit setting always wins.

``hlsnn deploy`` and ``hlsnn compile`` resolve alike (:func:`resolve` on the task of
:func:`task_of`), so a compiled model carries the radix points the deploy measured."""
from __future__ import annotations

import dataclasses

import numpy as np

#: The regression meaning of a fixed/sparse format's ``auto`` fields.
REGRESSION = {"radix": "search", "weight_scale": "channel", "bias_correction": "empirical", "equalize": "channels"}
#: The format types it applies to (sparse_cluster's fixed-point formats).
TYPES = ("fixed", "sparse")
FIELDS = tuple(REGRESSION)
#: ``weight_fit``'s regression meaning, for these format types too: the output layer refitted to
#: the float network (:mod:`hlsnn.deploy.quantize.outfit`)
FIT = {"weight_fit": "network"}
#: ``input_terms``' regression meaning for the fixed-point formats: an output conv's
#: host-quantized input in two int8 terms (:mod:`hlsnn.deploy.quantize.twoin`)
TERMS = {"input_terms": 2}
FIT_TYPES = ("bfp", "fixed", "sparse")


TASKS = ("classification", "regression")


def infer_task(task, y_test):
    """The deployment's task: ``task`` when given (``"classification"``/``"regression"``),
    else (``"auto"``) classification when the data have integer labels ``y_test`` of one per
    sample, regression otherwise (float targets of any shape, or none)."""
    if task in TASKS:
        return task
    if y_test is not None and y_test.ndim == 1 and y_test.dtype.kind in "iu":
        return "classification"
    return "regression"


def task_of(cfg, ds, n_test=None):
    """The deployment's task from its config and data set ``ds`` (as ``hlsnn deploy`` infers it:
    ``targets: inputs`` or float targets are regression, integer labels classification)."""
    y = None if ds.y_test is None else np.asarray(ds.y_test[:n_test] if n_test else ds.y_test)
    if cfg.targets == "inputs":
        y = np.asarray(ds.x_test[:1], np.float64)
    return infer_task(cfg.task, y)


def resolve(formats, task, net=None):
    """``formats`` (name -> FormatSpec) with the ``auto`` fields of each fixed/sparse format set to
    :data:`REGRESSION`'s values when ``task`` is ``"regression"`` (module docstring); unchanged
    otherwise, and for a network :func:`hlsnn.train.export` wrote (``net``)."""
    if task != "regression":
        return formats
    if net is not None:
        from .biascorr import trained_export
        if trained_export(net):
            return formats
    out = {}
    for name, f in formats.items():
        table = dict(REGRESSION, **FIT, **TERMS) if f.type in TYPES else FIT if f.type in FIT_TYPES else {}
        auto = [k for k in table if k in getattr(f, "auto", ())]
        out[name] = dataclasses.replace(f, auto=(), **{k: table[k] for k in auto}) if auto else f
    return out


def choices(formats, names):
    """The calibration options of the formats ``names`` as they run (for the deploy result):
    ``{format: {radix, weight_scale, bias_correction, equalize}}`` for the fixed-point ones."""
    return {n: {k: getattr(formats[n], k) for k in FIELDS} for n in sorted(names)
            if formats[n].type in TYPES}
