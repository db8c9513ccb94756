"""Quantization-aware training and pruning for hlsnn's engines, on PyTorch (an optional extra:
``pip install "hlsnn[train]"``; nothing else in hlsnn imports torch).

* :func:`prepare` wraps each ``Conv2d`` / ``Linear`` the assignment maps to a format with the
  fake quantization of that format (:mod:`hlsnn.train.quant`): power-of-two and two-hot
  weights with a learnable power-of-two scale and straight-through estimators, BFP as
  ``bfp_systolic``'s GEMM computes it (:mod:`hlsnn.train.bfpgemm`), int8 weights of the fixed/sparse formats, and the
  fixed-point activations the shift/sparse engines take, at a radix chosen by DETERMINE from
  the current batch's own statistics (source 002's current-statistics rule).
* :class:`BalancedPruner` prunes to a target sparsity on a gradual (cubic) schedule with the
  same number of zeros in every output channel (a depthwise layer: balanced over the layer), so
  every unit or lane gets the same share of zeros whatever output channels it holds
  (``lanes=M``: balanced by the network kernel's lanes of ``M`` multipliers instead, each
  layer's count as balanced rows would keep, :mod:`hlsnn.train.prune`); prune the float model
  with BatchNorm live, then fold, prepare and :func:`hold_zeros`
  (the zeros stay zero through quantization-aware training); :func:`fold_constant_channels` first
  folds a channel pruned away entirely (a constant) into the layers that read it (exact in float;
  without it a BatchNorm reading only such channels folds to weights of hundreds that int8
  cannot hold). :func:`erk_sparsities` spreads a
  model's target over its layers (the small ones pruned less), still balanced within each.
  :func:`distillation_loss` adds the float model's softened outputs as a second target while
  pruning and fine-tuning (knowledge distillation).
* :func:`export` writes the ONNX file with the trained weights already on the format's grid and
  a sidecar JSON (``<model>.onnx.hlsnn-train.json``) with the codes' scale exponents, checked to
  survive the deploy quantizer unchanged (:func:`check_round_trip`), and every deploy setting
  training evaluated with, which ``hlsnn deploy`` and ``compile`` follow (:mod:`hlsnn.deploy.importer.trained`).
* A bad argument (NaN, inf, out of its range, a fraction where a count is wanted, an unknown
  choice) is refused in one line naming it, its value and what is allowed, an
  :class:`~hlsnn.errors.InputError` (:mod:`hlsnn.train.checks`, also ``scripts/train_qat.py``'s options).
"""
from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:          # pragma: no cover - the extra is missing
    raise ImportError('hlsnn.train needs PyTorch: pip install "hlsnn[train]" (torch 2.x, CPU)') from exc

from .quant import BfpWeight, FixedAct, FixedWeight, ShiftWeight, bfp_fake, fixed_fake  # noqa: E402
from .prepare import QConv2d, QLinear, calibrate, fold_batchnorm, prepare, quantized_layers  # noqa: E402
from .constants import fold_constant_channels  # noqa: E402
from .prune import BalancedPruner, balanced_mask, cubic_schedule, hold_zeros, is_depthwise, kernel_mask  # noqa: E402
from .allocate import erk_sparsities, overall_sparsity  # noqa: E402
from .distill import distillation_loss  # noqa: E402
from .export import check_round_trip, export  # noqa: E402
from .emulate import deployed, deployed_accuracy, trained_config  # noqa: E402

__all__ = ["prepare", "calibrate", "fold_batchnorm", "fold_constant_channels", "quantized_layers", "QConv2d", "QLinear", "ShiftWeight", "BfpWeight",
           "FixedWeight", "FixedAct", "bfp_fake", "fixed_fake", "BalancedPruner", "balanced_mask", "kernel_mask",
           "cubic_schedule", "erk_sparsities", "overall_sparsity", "hold_zeros", "is_depthwise", "export", "check_round_trip", "deployed",
           "deployed_accuracy", "trained_config", "distillation_loss"]
