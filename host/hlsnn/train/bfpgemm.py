"""The ``bfp_systolic`` GEMM in torch, as its emulator specifies it
(:mod:`hlsnn.engines.bfp_systolic.emulator`, steps 1-6, the ``max`` output-exponent rule),
forward values exact in float64 and a straight-through estimator backward:

1. the input rows get one exponent each (``floor(log2 max|x|) - (M - 2)``); an all-zero row the
   exponent that puts the bias alignment shift at 0 for the largest weight exponent of its
   chunk, ``clamp(be - max we, emin, emax)`` (the emulator's rule 0: its output is the bias,
   whatever rows share the call), as ``Kernel.quantize_activations`` gives it;
2. exact products, ``e3 = xe + we`` per result, an all-zero weight row's ``we`` the largest of its
   chunk's other rows (the emulator's rule 0w);
3. the bias, BFP with one exponent ``be`` per chunk of at most ``max_n`` outputs, moved to the
   product's exponent (rounded with the config's rounding when ``e3 > be``, exact otherwise);
4. the fused ReLU;
5. one output exponent per row and chunk, ``floor(log2 max|y|) - (M - 2)``, clamped;
6. the outputs rounded to ``M``-bit mantissas at that exponent and saturated.

(The accumulator's own saturation at ``acc_bits`` is not modelled: the configs' ``acc_bits``
hold every sum of the layers they accept.)"""
from __future__ import annotations

import torch

from .quant import _round


def _exponent(amax, m, e):
    emin, emax = -(1 << (e - 1)), (1 << (e - 1)) - 1
    _, e2 = torch.frexp(amax.double())
    return torch.where(amax == 0, torch.full_like(e2, emin), torch.clamp(e2 - 1 - (m - 2), emin, emax)).double()


def _mant(v, ex, m, rounding):
    lo, hi = -(1 << (m - 1)), (1 << (m - 1)) - 1
    unit = torch.pow(2.0, ex)
    return torch.clamp(_round(v / unit, rounding), lo, hi) * unit


def bfp_gemm(rows, w, bias, m, e, rounding="nearest_even", relu=False, max_n=None):
    """``rows`` (R, K) float activations, ``w`` (N, K) weights already on the BFP grid with one
    exponent per row (``BfpWeight``), ``bias`` (N,) float or None: the kernel's (R, N) outputs."""
    emin, emax = -(1 << (e - 1)), (1 << (e - 1)) - 1
    xd, wd = rows.detach().double(), w.detach().double()
    wamax = wd.abs().amax(1)
    we = _exponent(wamax, m, e)                                              # (N,)
    ramax = xd.abs().amax(1)
    xe = _exponent(ramax, m, e)                                              # (R,)
    nonzero = ramax > 0
    n_out = w.shape[0]
    step = n_out if not max_n else int(max_n)
    outs = []
    for a in range(0, n_out, step):
        b = min(n_out, a + step)
        bq = be = None
        if bias is not None:
            bd = bias.detach().double()[a:b]
            be = _exponent(bd.abs().amax(), m, e)
            bq = _mant(bd, be, m, rounding)
        live = wamax[a:b] > 0
        if bool(live.any()) and not bool(live.all()):       # rule 0w: a dead row's exponent, the chunk's largest
            we = we.clone()
            we[a:b] = torch.where(live, we[a:b], we[a:b][live].max())
        xe_c = xe.clone()
        if not bool(nonzero.all()) and bq is not None:     # without a bias no output reads it
            xe_c[~nonzero] = torch.clamp(be - we[a:b].max(), emin, emax)
        xq = _mant(xd, xe_c.unsqueeze(1), m, "nearest_even" if rounding == "stochastic" else rounding)
        y = xq @ wd[a:b].T                                                   # exact: few, short sums
        if bq is not None:
            e3 = xe_c.unsqueeze(1) + we[a:b].unsqueeze(0)
            y = y + torch.where(e3 > be, _round(bq / torch.pow(2.0, e3), rounding) * torch.pow(2.0, e3), bq)
        if relu:
            y = torch.relu(y)
        e4 = _exponent(y.abs().amax(1), m, e).unsqueeze(1)
        outs.append(_mant(y, e4, m, rounding))
    q = torch.cat(outs, dim=1).to(rows.dtype)
    # straight-through: the float GEMM's gradient
    yf = rows @ w.T + (0 if bias is None else bias)
    if relu:
        yf = torch.relu(yf)
    return yf + (q - yf.detach())
