"""An output layer's host-quantized input in two int8 terms (a ``fixed`` / ``sparse`` format's
``input_terms: 2``, a regression deployment's default).

A regression network's last convolution often sums terms that cancel, so the rounding of its
int8 input weighs heavily on its output. Where such a layer's input is quantized on the
host (a host op's float output, not int8 codes from an engine layer), ``sparse_cluster`` can
take it in two terms, with no change to the kernel:

1. **Codes.** ``hi = to_fixed(x, F_x)`` (the layer's int8 input as it is without this rule, at
   the calibrated ``F_x``), ``lo = to_fixed(x - hi * 2**-F_x, F_x + SHIFT)`` (the residual, 8
   bits, :data:`SHIFT` bits finer; ``|lo| <= 2**(SHIFT - 1)`` where ``hi`` does not saturate),
   both with the deployment's rounding.
2. **Sums.** Each term is convolved by the kernel's raw mode (``Kernel.channel_sums``, ``FLAG_RAW``:
   the int32 sums, no bias, no ReLU; as the K tiling and the blocks of big kernels,
   :func:`hlsnn.deploy.run.blocks.raw_sums`); the host adds ``acc = acc_hi * 2**SHIFT + acc_lo``
   exactly (int64), the sums of the input ``hi * 2**SHIFT + lo`` at radix ``F_in = F_x + SHIFT + F_w``.
3. **Output.** The kernel's own output rules (``sparse_cluster.emulator.postprocess``: bias at
   ``F_in``, ReLU, the statistics unit's histogram, the shift ``F_in - F_out`` with rounding and
   saturation to int8) act on ``acc`` on the host, as for the K tiling.

The kernel runs its tested raw mode on int8 codes the host made, and the host's additions are
exact integers, so the emulator, csim and the board give the same bits. It costs a second pass
of the layer. It applies to a convolution whose output is the network's output (directly or
through reshapes or a Tanh / Sigmoid head: :func:`hlsnn.deploy.quantize.outputs.output_layers`) and whose bias fits the kernel's
field at the finer ``F_in``. The sparse network kernel sums the two passes where the layer reads
a residual Add's exact sum, as it is or through a linear ``Resize`` (rule two_term_input, :mod:`hlsnn.engines.network.lintwo`:
both terms made from that sum on chip); with another input the layer runs layer by layer
(:func:`hlsnn.deploy.lower.program.lower` says so by name).
"""
from __future__ import annotations

import numpy as np

#: bits between the two terms' radix points (the residual's 8 bits hold ``+-2**(SHIFT - 1)``)
SHIFT = 7
#: the least :func:`cost` of one term that takes two (a part of the layer's output)
WORTH = 0.01
#: the accepted values of a format's ``input_terms`` (after ``auto`` resolves)
TERMS = (1, 2)


def terms(layer, fmt, deploy):
    """2 where ``layer`` (of ``deploy.net``) takes a host-quantized input in two terms (module
    docstring: ``fmt.input_terms`` is 2 and the layer is a conv giving the network's output),
    else 1."""
    if getattr(fmt, "input_terms", 1) != 2 or layer.kind != "conv":
        return 1
    from .outputs import output_layers
    net = getattr(deploy, "net", None)
    return 2 if net is not None and layer.name in {la.name for la in output_layers(net)} else 1


def applies(ex, act, xi, fx):
    """Whether the SparseExec ``ex`` takes its input ``act`` (``hi`` codes ``xi`` at radix ``fx``)
    in two terms: it takes two (:func:`terms`), the input is not int8 codes already (it is
    quantized on the host), the bias fits the kernel's field (``2**30``) at the finer radix, and
    one term would cost the layer's output more than :data:`WORTH` (:func:`cost`, kept in
    ``ex.two_cost``: below it a second pass and the layer path are not worth it). Decided when
    the layer calibrates and kept (``ex.two``): every later run takes as many terms, and a
    compiled model records it (``in_terms`` of its entry, :mod:`hlsnn.deploy.lower.layers`).
    Also kept for the deploy report (:mod:`hlsnn.deploy.reports.fitreport`): ``ex.two_rest``, what two
    terms still lose (:func:`cost` of :func:`rest`; where two terms run, else None), and
    ``ex.two_why``, the reason in words (None where the layer was never a candidate)."""
    ex.two_cost = ex.two_rest = ex.two_why = None
    if getattr(ex, "in_terms", 1) != 2:
        return False
    if act.fmt is not None and act.fmt[1:] == (ex.BITS, True):
        ex.two_why = "its input is int8 codes of an engine layer already"
        return False
    f_w = np.asarray(ex.f_w).reshape(-1)
    if np.abs(np.ldexp(np.asarray(ex.layer.b, np.float64), int(fx) + SHIFT + int(f_w.max()))).max(initial=0) \
            >= (1 << 30) - 1:
        ex.two_why = f"its bias does not fit the kernel's 2**30 at the finer radix (+{SHIFT} bits)"
        return False
    lo = residual(ex, act, xi, fx)
    ex.two_cost = cost(ex, lo, xi, fx)
    if ex.two_cost > WORTH:                 # what two terms leave (the deploy report's), where they run
        ex.two_rest = cost(ex, lo, xi, fx, rest(act, xi, lo, fx))
    ex.two_why = (f"one term costs {100 * ex.two_cost:.2f} % of the output, "
                  + ("above" if ex.two_cost > WORTH else "not above") + f" {100 * WORTH:g} %")
    return ex.two_cost > WORTH


def cost(ex, lo, xi, fx, rest=None):
    """What one term loses at the layer, on the calibration batch: ``||W lo|| / ||W (hi + lo) +
    b||`` (float64, the layer's int8 taps at their scale, ``hi`` and ``lo`` as values): the part of
    the layer's output the residual carries, against the output. With ``rest`` (float64 values,
    :func:`rest`), what two terms lose, ``||W rest|| / ||W (hi + lo) + b||``, instead."""
    from ...engines import convgeom as conv
    f = np.asarray(ex.f_w, np.float64)
    w = np.ldexp(np.asarray(ex.w_taps, np.float64), -(f.reshape(-1, 1, 1, 1) if f.ndim else f).astype(np.int64))
    geom = ex.layer.geom
    lo_v = np.ldexp(np.asarray(lo, np.float64), -(int(fx) + SHIFT)) if rest is None else rest
    part = conv.conv_float(lo_v, w, np.zeros(w.shape[0]), geom)
    whole = conv.conv_float(values(xi, lo, fx), w, np.asarray(ex.layer.b, np.float64), geom)
    return float(np.linalg.norm(part)) / max(float(np.linalg.norm(whole)), 1e-300)


def rest(act, xi, lo, fx):
    """What two terms leave of the input ``act``: ``x - (hi * 2**SHIFT + lo) * 2**-(fx + SHIFT)`` (float64)."""
    return np.asarray(act.values, np.float64) - values(xi, lo, fx)


def residual(ex, act, xi, fx):
    """Step 1's ``lo`` codes of ``ex``'s input ``act`` whose ``hi`` codes ``xi`` are at radix ``fx``."""
    from .quant import to_fixed
    rest = np.asarray(act.values, np.float64) - np.ldexp(np.asarray(xi, np.float64), -int(fx))
    return to_fixed(rest, int(fx) + SHIFT, ex.BITS, True, ex.deploy.rounding)


def values(xi, lo, fx):
    """The input the two terms stand for, as float64 values: ``(hi * 2**SHIFT + lo) * 2**-(fx + SHIFT)``."""
    return np.ldexp(np.asarray(xi, np.float64) * (1 << SHIFT) + np.asarray(lo, np.float64), -(int(fx) + SHIFT))


def call(ex, xi, lo, bias):
    """The ``call`` of :class:`~hlsnn.deploy.run.executors.SparseExec` ``ex`` (see ``_Exec._two_pass``)
    for the two terms ``xi`` (hi) and ``lo`` (steps 2 and 3), ``bias`` in units of the finer
    ``F_in``: the layer's blocks of taps (one block of the whole kernel where it fits a call)."""
    from ..run import blocks
    g = ex.layer.geom
    oh, ow = g.out_hw(xi.shape[2], xi.shape[3])
    tiles = ex.blocks if ex.blocks is not None else [(0, g.kh, 0, g.kw)]

    def sums(w, images):
        pick = (lambda a: a) if images is None else (lambda a: a[images])
        return blocks.raw_sums(ex, pick(xi), w, tiles) * (1 << SHIFT) + blocks.raw_sums(ex, pick(lo), w, tiles)
    return blocks.summed_call(ex, sums, bias, oh, ow)
