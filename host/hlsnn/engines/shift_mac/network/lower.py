"""``shift_mac``'s rules of the integer network mode (:mod:`hlsnn.deploy.lower.program`'s walk, module
rule 2): two-hot / power-of-two codes as their shift-add values (:func:`_fields`, the kernel's
fields), ``saturate_A(acc + bias)``, ReLU and ``shift_round_sat`` with the config's rounding
(:func:`hlsnn.engines.shift_mac.emulator.output_rule`)."""
from __future__ import annotations

import numpy as np

from ....errors import InputError
from ....formats import shift as sfmt
from ..emulator import output_rule


class ShiftRules:
    """The ``shift_mac`` layer rules (module rule 2): two-hot / power-of-two codes as their
    shift-add values, ``saturate_A(acc + bias)``, ReLU and ``shift_round_sat`` with the config's
    rounding (:func:`hlsnn.engines.shift_mac.emulator.output_rule`)."""
    engine = "shift_mac"
    formats = ("twohot", "pot")
    bias_bits = 31

    @staticmethod
    def activations(p, acc_name):
        if not p["act_signed"]:
            raise InputError(f"network kernel: {acc_name} has unsigned activations; the network kernel takes "
                             f"signed ones")
        from ...network.words import MAX_BITS      # the image words' lanes: 8 bits, or 16 above 8
        if not 2 <= p["act_bits"] <= MAX_BITS:
            raise InputError(f"network kernel: {acc_name} has {p['act_bits']}-bit activations; the network kernel "
                             f"takes 2..{MAX_BITS}-bit ones (such a config runs layer by layer)")
        return p["act_bits"]

    #: the shift codes per weight the kernel sums (:mod:`hlsnn.deploy.quantize.twoterm`; 2: a second
    #: shift-add per unit, the kernel's ``kWeights2``)
    terms = (1, 2)

    @staticmethod
    def weights(j, arrays, chw, why):
        """``(values (Z, Cg, kh, kw) int64, extra op fields)`` of an engine layer. Two codes per
        weight (``terms`` 2, :mod:`hlsnn.deploy.quantize.twoterm` rule 2: each GEMM's rows ``[Q1 | Q2]``):
        the values ``Q1 + Q2`` (the accumulator ``sum (q1 + q2) x`` is the layer path's, exact)
        and the second term's shift-add fields as ``ea2``, ``eb2``, ... beside the first's."""
        t = sfmt.ShiftTensor.from_codes(j["mode"], j["exp_bits"], *(arrays[f"{j['name']}/{k}"] for k in
                                                                      ("e1", "e2", "s1", "s2", "zero",
                                                                       "scale_exponent")),
                                        delta=j["delta"], axis=j["axis"])
        shape = (j["w_shape"][0],) + tuple(chw) if j["kind"] == "dense" else tuple(j["w_shape"])
        if int(j.get("terms", 1)) == 2:
            k = t.e1.shape[-1] // 2
            if t.e1.ndim != 2 or 2 * k != t.e1.shape[-1]:
                raise why(f"two-term codes of shape {t.e1.shape}, not (Z, 2K)")
            half = [sfmt.ShiftTensor.from_codes(t.mode, t.exp_bits, *(getattr(t, a)[:, h * k:(h + 1) * k] for a in
                                                                      ("e1", "e2", "s1", "s2", "zero")),
                                                t.scale_exponent, delta=t.delta, axis=t.axis) for h in (0, 1)]
            (v1, x1), (v2, x2) = (_one(h, j, shape, why) for h in half)
            second = {n + "2": v for n, v in x2["fields"].items()}
            return v1 + v2, dict(mode=j["mode"], fields=dict(x1["fields"], **second))
        return _one(t, j, shape, why)

    @staticmethod
    def output(p, acc, bias, shift, relu):
        return output_rule(p, acc, bias, shift, relu=relu)[0]


def _one(t, j, shape, why):
    """``(values, extra)`` of one code per weight (``t``) for the layer ``j`` of ``shape``."""
    values = t.code_values()
    if values.size == int(np.prod(shape)):
        return values.reshape(shape), dict(mode=j["mode"], fields=_fields(t, shape))
    # a grouped conv stored as the layer path runs it: gp groups packed to one GEMM
    # (hlsnn.deploy.run.groups.gemm_weight); the layer's own (Z, C/g, kh, kw) codes taken back
    z = shape[0]
    k = int(np.prod(shape[1:]))
    gp, g = int(j.get("gp") or 1), (j.get("geom") or {}).get("group", 1)
    if values.size != z * gp * k or g % gp:
        raise why(f"weights of {values.size} codes for {shape} packed {gp} groups to a GEMM")
    packed = (z, gp * k)
    fields = _fields(t, packed)
    zg = z // g
    col = ((np.arange(z) // zg) % gp)[:, None] * k + np.arange(k)[None, :]     # (Z, Cg*kh*kw)
    own = np.zeros(packed, bool)
    np.put_along_axis(own, col, True, axis=1)
    values = values.reshape(packed)
    if values[~own].any():
        raise why("its packed GEMM weight has non-zero codes outside the layer's groups")
    take = lambda a: np.take_along_axis(np.asarray(a).reshape(packed), col, axis=1).reshape(shape)  # noqa: E731
    return take(values), dict(mode=j["mode"], fields={n: take(v) for n, v in fields.items()})


def _fields(t, shape):
    """The kernel's shift-add fields of a ShiftTensor's codes: ``value = (-1)**so * (2**ea +
    hb * (-1)**sb * 2**eb)``, 0 where ``zero`` (two-hot: ``ea = e1 + delta``, ``eb = e2``, ``so =
    s2``, ``sb = s1``, ``hb = 1``; PoT: ``ea = e1``, ``so = s1``, ``hb = 0``). Checked against
    :meth:`~hlsnn.formats.shift.ShiftTensor.code_values`."""
    i = lambda a: np.asarray(a, np.int64).reshape(shape)          # noqa: E731
    zero = i(t.zero)
    if t.mode == "twohot":
        f = dict(ea=i(t.e1) + t.delta, eb=i(t.e2), so=i(t.s2), hb=1 - zero, sb=i(t.s1), zero=zero)
    else:
        f = dict(ea=i(t.e1), eb=np.zeros(shape, np.int64), so=i(t.s1), hb=np.zeros(shape, np.int64),
                 sb=np.zeros(shape, np.int64), zero=zero)
    f["ea"], f["so"] = np.where(zero == 1, 0, f["ea"]), np.where(zero == 1, 0, f["so"])
    v = (1 - 2 * f["so"]) * ((1 << f["ea"]) + f["hb"] * (1 - 2 * f["sb"]) * (1 << f["eb"]))
    if not np.array_equal(np.where(zero == 1, 0, v), t.code_values().reshape(shape)):
        raise InputError("network kernel: the shift-add fields do not give the codes' values")
    if f["ea"].max(initial=0) > 63 or f["eb"].max(initial=0) > 63:
        raise InputError("network kernel: a weight shift beyond 63")
    return f


#: the rules :func:`hlsnn.deploy.lower.program.engine_rules` finds (:func:`hlsnn.engine_registry.network_part`)
RULES = ShiftRules
