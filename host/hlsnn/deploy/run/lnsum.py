"""Rule 15s in the layer path (:mod:`hlsnn.engines.network.tokens.layernorm`): a ``LayerNormalization``
of a residual sum (a post-norm block) runs on the sum's codes at a calibrated radix, so that the
network mode, which converts the pending Add with its add op and then runs rule 15, gives the
same bits."""
from __future__ import annotations

import numpy as np

from ...engines.network.tokens import layernorm
from ...errors import InputError
from ..quantize.quant import Act, host_radix, to_fixed


def _producer(net, t):
    return next((la for la in net.layers if la.output == t), None)


def sum_bits(net, layer, env):
    """Rule 15s: the code bits of the residual sum that host ``layer`` (a ``LayerNormalization``)
    reads in the layer path, or None: its input is made by a host ``Add`` (a ``Relu`` and a
    ``Transpose`` to channels-last after it allowed) of two signed fixed-point tensors of one width (``env``: the run's
    :class:`~hlsnn.deploy.quantize.quant.Act` by tensor), which the network mode holds as a pending Add."""
    if layer.op != "LayerNormalization" or env[layer.inputs[0]].fmt is not None:
        return None
    prod = _producer(net, layer.inputs[0])
    for _ in range(2):                   # a Relu, a Transpose to channels-last (the network mode's SwMove)
        if prod is not None and prod.kind == "host" and (prod.op == "Relu" or prod.op == "SwMove" and (
                prod.attrs or {}).get("fn") == "Transpose"):
            prod = _producer(net, prod.inputs[0])
    if prod is None or prod.kind != "host" or prod.op != "Add" or len(prod.inputs) != 2:
        return None
    fmts = [env[t].fmt for t in prod.inputs]
    if any(f is None or not f[2] for f in fmts) or fmts[0][1] != fmts[1][1]:
        return None
    return int(fmts[0][1])


def sum_run(dep, layer, act, bits, calibrate):
    """Rule 15s in the layer path: the residual sum ``act`` (float64, exact) converted to
    ``bits``-bit codes at the calibrated radix ``F`` (:func:`~hlsnn.deploy.quantize.quant.to_fixed`, as
    an engine layer reading the sum converts it: the network mode's add op, netmode rule 4),
    then rule 15 (:func:`hlsnn.engines.network.tokens.layernorm.host_run`); None where rule 15 does not apply to those codes (float64
    LayerNorm then). ``F`` is DETERMINE's on the sum's values (``host_radix``, the radix the
    next engine layer would pick for them), chosen when calibrating and kept in the deployment's
    ``lnorm_radix`` (the program's host-layer field ``lnorm_in``)."""
    radix = dep.__dict__.setdefault("lnorm_radix", {})
    if calibrate or dep.dynamic:
        radix[layer.name] = int(host_radix(act.values, bits, True, dep.overflow_ratio))
    if layer.name not in radix:
        raise InputError(f"layer {layer.name}: no calibrated radix for the residual sum its LayerNormalization "
                         f"reads (rule 15s)")
    f = radix[layer.name]
    q = Act(np.ldexp(to_fixed(act.values, f, bits, True, dep.rounding).astype(np.float64), -f), (f, bits, True))
    return layernorm.host_run(layer, q, dep.rounding) if layernorm.applies(layer, q) else None
