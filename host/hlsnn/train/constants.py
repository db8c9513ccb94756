"""Constant channels folded into the layers that read them.

A channel whose weights were all pruned (a depthwise channel at 90 % sparsity keeps about one of
its nine weights, and balanced pruning may take all of them) outputs its bias at every position of
every input: a constant. A layer reading it adds ``w * c`` to every result, which belongs in its
bias. Left as a product, it hurts the int8 step twice: the weights spend non-zeros on a constant,
and a ``BatchNorm`` after a channel that reads *only* constants sees (almost) no variance, so
folding it gives weights of hundreds whose products cancel exactly in float and not on the int8
grid (a MobileNet-ReLU6 pruned to 90 %: weights of +-600 to +-820 on two constant inputs of a
1x1 layer, a channel that is 0.26 in float read as 0 or 5 in int8; 11 points lost on validation).

:func:`fold_constant_channels` finds those channels in each ``nn.Sequential`` and folds them, in
place and exactly in real arithmetic (float rounding aside):

* a **constant channel** is the output channel of a ``Conv2d`` or ``Linear`` whose weights are all
  zero (its value: the bias, or 0; a ``Linear``'s only where its input is features: after a
  ``Flatten`` or another such ``Linear``), then carried through what maps a constant to a constant: a
  ``BatchNorm2d`` on a map or ``BatchNorm1d`` on features, in eval mode, the per-element activations of
  :data:`ELEMENTWISE` and ``PReLU`` (each value computed by the module itself, in float64), ``MaxPool2d``, an ``AvgPool2d`` without padding, the adaptive
  pools, and a ``Flatten(1)`` after a pool to one position (channel ``c`` becomes feature ``c``);
* it is **folded** into the next ``Conv2d`` when that layer has no padding (every tap of every
  result reads the constant; any kernel, stride, dilation and grouping), or into a ``Linear``
  reading the flattened features: the weights on the channel become zero and the constant times
  their sum moves into the bias (a bias is added when the layer has none). An output channel of
  that layer whose weights are now all zero is a constant channel in turn.
* Anything else (a padded convolution, whose border results see zeros; a module this rule does
  not know; the end of a ``Sequential``) ends the constants: nothing after it is folded.

Run it on the float model in eval mode after :func:`hlsnn.train.fold_batchnorm`, before
:func:`hlsnn.train.prepare` and :func:`hlsnn.train.hold_zeros` (the zeros it makes are then held
like the pruned ones, and the engine skips them).
"""
from __future__ import annotations

import copy

import torch
from torch import nn

#: Per-element functions (in eval mode): a constant channel stays a constant channel.
ELEMENTWISE = (nn.ReLU, nn.ReLU6, nn.Hardtanh, nn.LeakyReLU, nn.ELU, nn.SiLU, nn.GELU, nn.Sigmoid, nn.Tanh,
               nn.Hardswish, nn.Hardsigmoid, nn.Mish, nn.Identity, nn.Dropout)


def fold_constant_channels(model) -> list:
    """Fold every constant channel of ``model``'s ``nn.Sequential`` containers into the layer that
    reads it (module docstring), in place. Returns ``[(layer name, channels folded), ...]`` for
    the layers whose weights changed (empty: the model is unchanged)."""
    if model.training:
        raise ValueError("fold_constant_channels: put the model in eval mode first (model.eval()): "
                         "BatchNorm and Dropout map a constant as in evaluation")
    names = {id(m): n for n, m in model.named_modules()}
    done = []
    with torch.no_grad():
        for seq in model.modules():
            if isinstance(seq, nn.Sequential):
                done += _fold_sequence(seq, names)
    return done


def _fold_sequence(seq, names) -> list:
    done = []
    const, flat, width = {}, False, 0        # channel -> value; flat: indexed as features (after Flatten)
    pooled_to_one = False
    for m in seq.children():
        if type(m) in (nn.Conv2d, nn.Linear):     # not a subclass (a prepared layer)
            if const and _foldable(m, flat):
                _fold_into(m, const)
                done.append((names.get(id(m), "?"), sorted(const)))
            w = m.weight.detach().flatten(1)
            dead = (w == 0).all(dim=1).nonzero().flatten().tolist()
            bias = m.bias.detach() if m.bias is not None else torch.zeros(w.shape[0], dtype=w.dtype)
            # a Linear's outputs are features only where its input is (after a Flatten or a
            # Linear); on a map it acts on the last axis, which no rule here follows
            known = isinstance(m, nn.Conv2d) or flat
            const = {c: float(bias[c]) for c in dead} if known else {}
            flat = isinstance(m, nn.Linear) and known
            width = w.shape[0]
            pooled_to_one = False
        elif _maps_constants(m, flat):
            const = _through(m, const, width, flat)
        elif isinstance(m, (nn.AdaptiveAvgPool2d, nn.AdaptiveMaxPool2d, nn.AdaptiveAvgPool1d, nn.AdaptiveMaxPool1d)):
            size = m.output_size
            pooled_to_one = all(s == 1 for s in (size if isinstance(size, tuple) else (size,)))
        elif isinstance(m, nn.MaxPool2d) or (isinstance(m, nn.AvgPool2d) and _no_padding(m.padding)):
            pooled_to_one = False
        elif isinstance(m, nn.Flatten) and m.start_dim == 1 and not flat:
            if not pooled_to_one:
                const = {}
            flat = True
        else:
            const = {}
    return done


def _maps_constants(m, flat) -> bool:
    """Whether ``m`` maps a constant channel to a constant channel: an eval-mode BatchNorm of the
    layout (``BatchNorm2d`` on a map, ``BatchNorm1d`` on features), ``PReLU``, :data:`ELEMENTWISE`."""
    if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
        return not m.training and m.track_running_stats and isinstance(m, nn.BatchNorm1d) == flat
    return isinstance(m, ELEMENTWISE + (nn.PReLU,))


def _through(m, const, width, flat) -> dict:
    """The constants after ``m``: ``m`` itself (a float64 copy) run on one position of the
    ``width`` channels holding them."""
    if not const:
        return {}
    x = torch.zeros((1, width) if flat else (1, width, 1, 1), dtype=torch.float64)
    for c, v in const.items():
        x[0, c] = v
    y = copy.deepcopy(m).double()(x).reshape(1, width)
    return {c: float(y[0, c]) for c in const}


def _no_padding(p) -> bool:
    return (p == 0) if isinstance(p, int) else all(v == 0 for v in p)


def _foldable(m, flat) -> bool:
    if isinstance(m, nn.Linear):
        return flat
    return not flat and isinstance(m.padding, (int, tuple)) and _no_padding(m.padding)


def _fold_into(m, const):
    """``m``'s weights on the constant input channels to zero, their products into the bias."""
    w = m.weight
    if m.bias is None:
        m.bias = nn.Parameter(torch.zeros(w.shape[0], dtype=w.dtype, device=w.device))
    if isinstance(m, nn.Linear):
        for c, v in const.items():
            m.bias += w[:, c] * v
            w[:, c] = 0
        return
    ipg, opg = m.in_channels // m.groups, m.out_channels // m.groups
    for c, v in const.items():
        g, j = divmod(c, ipg)
        rows = slice(g * opg, (g + 1) * opg)
        m.bias[rows] += w[rows, j].sum(dim=(1, 2)) * v
        w[rows, j] = 0
