"""Attention's integer rules in the layer path: where :func:`applies`, the host ops of
a fixed8 attention network run :mod:`hlsnn.engines.network.tokens.attention`'s rules class_token, add_const, act_matmul, int_softmax and layer_norm_codes
(a class token's concat, a position embedding, a ``MatMul`` of two activations, a ``Softmax`` over the keys, a
``LayerNormalization`` ending in codes) on fixed-point codes, each output codes at its calibrated
radix (DETERMINE on the op's values when calibrating: :attr:`Deployment.code_radix`, the compiled
program's field ``codes``), so that the network mode, which runs the same rules as ops, gives the
same bits. Before program revision :data:`~hlsnn.engines.network.tokens.attention.REVISION` these ops ran
in float64 (and a ``MatMulAct`` at per-sample radix points)."""
from __future__ import annotations

import math

import numpy as np

from ...engines.network.tokens import attention as at, layernorm


def applies(dep):
    """True when ``dep``'s layer path runs these rules: a ``MatMulAct`` in the network, every
    engine layer on ``sparse_cluster`` (fixed, sparse) or ``shift_mac`` (two-hot, power of two:
    codes at radix points), not ``dynamic``, and a program of
    revision :data:`at.REVISION` on (a deployment being made is)."""
    got = dep.__dict__.get("_attn_rules")
    if got is None:
        rev = (getattr(dep, "origin", None) or {}).get("revision", at.REVISION)
        exs = list(dep.execs.values())
        got = bool(exs) and rev >= at.REVISION and not dep.dynamic and \
            any(getattr(la, "op", "") == "MatMulAct" for la in dep.net.layers) and \
            all(ex.acc.config.engine in ("sparse_cluster", "shift_mac") for ex in exs)   # codes (not BFP pairs)
        dep._attn_rules = got
    return got


def _radix(dep, layer, values, bits, calibrate):
    """The calibrated output radix of ``layer`` (DETERMINE on ``values`` when calibrating), kept
    in ``dep.code_radix`` (the program's field ``codes``)."""
    from ...errors import InputError
    from ..quantize.quant import host_radix
    radix = dep.__dict__.setdefault("code_radix", {})
    if calibrate:
        radix[layer.name] = int(host_radix(values, bits, True, dep.overflow_ratio))
    if layer.name not in radix:
        raise InputError(f"layer {layer.name}: no calibrated output radix for its codes (rule add_const/act_matmul/layer_norm_codes); "
                         f"recompile the model")
    return radix[layer.name]


def bfp_applies(dep):
    """True when ``dep``'s layer path runs :mod:`hlsnn.engines.bfp_systolic.network.attnpairs`'
    rules (BFP pairs): a ``MatMulAct`` in the network, every engine layer on ``bfp_systolic``,
    not ``dynamic``, and a program of revision 8 on (a deployment being made is)."""
    got = dep.__dict__.get("_attn_pairs")
    if got is None:
        from ...engines.bfp_systolic.network.attnpairs import REVISION
        rev = (getattr(dep, "origin", None) or {}).get("revision", REVISION)
        exs = list(dep.execs.values())
        got = bool(exs) and rev >= REVISION and not dep.dynamic and \
            any(getattr(la, "op", "") == "MatMulAct" for la in dep.net.layers) and \
            all(ex.acc.config.engine == "bfp_systolic" for ex in exs)
        dep._attn_pairs = got
    return got


#: the host ops whose BFP input rule bfp_pair_codes writes as codes first (rules bfp_add_const, bfp_softmax, bfp_layer_norm)
PAIR_OPS = ("AddConst", "LayerNormalization")


def _pair_codes(dep, layer, act, calibrate):
    """Rule bfp_pair_codes of :mod:`~hlsnn.engines.bfp_systolic.network.attnpairs` in the layer path: the
    exact BFP values of ``act`` as ``M``-bit codes at the op's calibrated radix (``dep.pair_in``,
    the program's field ``pair_in``; DETERMINE on the values when calibrating), or None for a
    loaded program without it, or for an input that is not finite everywhere (a causal mask's
    ``-inf`` fill: no radix holds it, the float64 op runs, and the program has no ``pair_in`` for the op)."""
    from ..quantize.quant import Act, host_radix
    from ...engines.bfp_systolic.network.gate import codes, pairs_of
    bits = int(next(iter(dep.execs.values())).p["mantissa_bits"])
    radix = dep.__dict__.setdefault("pair_in", {})
    finite = bool(np.isfinite(act.values).all())
    if calibrate:
        radix.pop(layer.name, None)
        if finite:
            radix[layer.name] = int(host_radix(act.values, bits, True, dep.overflow_ratio))
    if layer.name not in radix or not finite:
        return None
    f = radix[layer.name]
    q = codes(*pairs_of(act.values), f, bits, dep.rounding)
    return Act(np.ldexp(q.astype(np.float64), -f), (f, bits, True))


def layer_run(dep, layer, ins, calibrate, env):
    """The :class:`~hlsnn.deploy.quantize.quant.Act` of host ``layer`` on ``ins`` by rules add_const, act_matmul, int_softmax and layer_norm_codes
    in ``dep``'s layer path (on BFP pairs: rules bfp_add_const, bfp_softmax, bfp_layer_norm, their inputs written as codes by
    rule bfp_pair_codes first), or None where they do not apply (the caller's other rules run; ``env`` the
    run's tensors by name)."""
    from ..quantize.quant import Act
    if not applies(dep):
        a = layer.attrs
        if layer.op == "Scale" and bfp_applies(dep) and ins[0].fmt is None and not a.get("divide") and \
                np.size(a["c"]) == 1:                                                         # rule bfp_scale
            from ...engines.bfp_systolic.network.attnpairs import odd_pair
            cm, ce = odd_pair(float(np.asarray(a["c"], np.float64).reshape(-1)[0]))
            return Act(ins[0].values * math.ldexp(cm, ce), None)                    # exact: 8 x 24 bits
        if not bfp_applies(dep) or not (
                layer.op in PAIR_OPS or layer.op == "SwCompute" and a.get("fn") == "Softmax" and at.last_axis(a)):
            return None
        got = _pair_codes(dep, layer, ins[0], calibrate)
        if got is None:
            return None
        ins = [got] + list(ins[1:])
    if layer.op == "LayerNormalization" and ins[0].fmt is None:       # layer_norm_sum: the residual sum's codes first
        from . import lnsum
        from ..quantize.quant import host_radix, to_fixed
        bits = lnsum.sum_bits(dep.net, layer, env)
        if not bits:
            return None
        radix = dep.__dict__.setdefault("lnorm_radix", {})
        if calibrate:
            radix[layer.name] = int(host_radix(ins[0].values, bits, True, dep.overflow_ratio))
        f = radix[layer.name]
        ins = [Act(np.ldexp(to_fixed(ins[0].values, f, bits, True, dep.rounding).astype(np.float64), -f),
                   (f, bits, True))]
    if any(a.fmt is None or not a.fmt[2] or a.fmt[1] > at.MAX_BITS for a in ins):
        return None
    op, a = layer.op, layer.attrs
    f, bits = ins[0].fmt[0], int(ins[0].fmt[1])
    if op == "AddConst":
        from . import hostops
        fo = _radix(dep, layer, hostops.run(layer, [ins[0].values]), bits, calibrate)
        c = at.const_image(a["c"], np.shape(ins[0].values)[1:])
        p = "no constant" if c is None else at.addc_plan(c, f, fo)
        if isinstance(p, str):
            return None
        return Act(np.ldexp(at.addc(ins[0].ints(), p["cq"], f, p["g"], fo, bits, dep.rounding).astype(np.float64),
                            -fo), (fo, bits, True))
    if op == "MatMulAct" and len(ins) == 2 and ins[1].fmt[1] == bits:
        from . import samplewise
        fs = f + ins[1].fmt[0]
        exact = samplewise.run(layer, [a_.values for a_ in ins],
                               matmul=lambda x, y: np.ldexp(at.actmm_acc(np.rint(np.ldexp(x, f)),
                                                                      np.rint(np.ldexp(y, fs - f))).astype(np.float64),
                                                            -fs))
        fo = _radix(dep, layer, exact, bits, calibrate)
        from ...primitives import shift_round_sat
        y = shift_round_sat(np.rint(np.ldexp(exact, fs)).astype(np.int64), fs - fo, bits, dep.rounding)[0]
        return Act(np.ldexp(y.astype(np.float64), -fo), (fo, bits, True))
    if op == "Add" and len(ins) == 2 and ins[1].fmt[1] == bits and \
            np.shape(ins[0].values) == np.shape(ins[1].values):              # rule residual_codes: a residual sum as codes
        from ..quantize.quant import to_fixed
        s = ins[0].values + ins[1].values                                     # exact: two codes' values
        fo = _radix(dep, layer, s, bits, calibrate)
        if max(f, ins[1].fmt[0]) > max(fo + 24, 0):
            return None
        return Act(np.ldexp(to_fixed(s, fo, bits, True, dep.rounding).astype(np.float64), -fo), (fo, bits, True))
    if op == "SwCompute" and a.get("fn") == "Concat" and len(ins) == 1 and \
            all(k == "c" or int(v) == 0 for k, v in a["operands"]):             # rule class_token: a class token
        from types import SimpleNamespace
        from . import samplewise
        ops = [[k, np.ldexp(at.const_codes(v, f, bits, dep.rounding).astype(np.float64), -f)] if k == "c" else [k, v]
               for k, v in a["operands"]]
        y = samplewise.run(SimpleNamespace(op="SwCompute", attrs=dict(a, operands=ops), name=layer.name),
                           [ins[0].values])
        return Act(y, (f, bits, True))
    if op == "SwCompute" and a.get("fn") == "Softmax" and at.last_axis(a):
        y = at.softmax(ins[0].ints(), at.exp_table(f, bits), bits)
        return Act(np.ldexp(y.astype(np.float64), -(bits - 1)), (bits - 1, bits, True))
    if op == "LayerNormalization" and layernorm.applies(layer, ins[0]):       # rule layer_norm_codes: codes for every reader
        p = layernorm.plan(np.shape(ins[0].values)[-1], f, bits, a["epsilon"], a.get("scale"), a.get("bias"))
        y = layernorm.normalized(ins[0].ints(), p, dep.rounding)
        fo = _radix(dep, layer, np.ldexp(y.astype(np.float64), -p["k"]), bits, calibrate)
        if p["k"] > fo + 24:
            return None
        from ...primitives import shift_round_sat
        q = shift_round_sat(y, p["k"] - fo, bits, dep.rounding)[0]
        return Act(np.ldexp(q.astype(np.float64), -fo), (fo, bits, True))
    return None
