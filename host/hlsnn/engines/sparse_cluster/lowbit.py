"""Four 4-bit products per DSP48E1: the board-sized network kernel with ``net_bits: 4`` (issue 82).

A W4A4 network (Brevitas' ``Int8WeightPerTensorFixedPoint`` at 4 bits: narrow, ``-7..7``; its
``QuantReLU``/``QuantIdentity`` at 4 bits unsigned: ``0..15``, kept as the ``Clip`` of each
activation, :mod:`hlsnn.deploy.importer.qimport`) multiplies int4 weights by uint4 activations. The kernel
(``hls/engines/sparse_cluster/network.cpp.j2``, ``Cfg::kBits4``) then serves four lanes with
one DSP48E1 where the int8 kernel serves two, and builds its other products from LUTs at about
24 LUTs each (FINN's estimate for 4 x 4 bits, :data:`~hlsnn.engines.sparse_cluster.netsize.FABRIC_MUL4_LUT`)
instead of 80, so the sizer (:func:`hlsnn.engines.sparse_cluster.netsize.size`) fits more read
ports per bank: on the PYNQ-Z2 three instead of two.

**The packed quad** (lanes ``4i .. 4i + 3`` at slot ``j`` share the value ``x``): the DSP's A port
takes ``A = w0 + w1 * 2**7 + w2 * 2**14 + w3 * 2**21`` (``|A| <= 7 * (2**21 + 2**14 + 2**7 + 1) <
2**24``: 25 bits signed, the DSP48E1's A port; a weight of ``-8`` would overflow it, hence narrow
weights), its B port ``x`` (4 bits, unsigned), and the 30-bit product ``P = sum_k f_k * 2**(7k)``
with ``f_k = w_k * x``, ``|f_k| <= 105``. The fabric splits ``P`` exactly: ``f_k``'s sign ``s_k`` is
``w_k < 0 and x != 0`` (``x >= 0``), so ``f_k`` is the 8-bit two's complement word ``{s_k, r_k mod
2**7}`` (``-105 <= f_k <= 105``, and ``f_k mod 2**7`` is ``r_k``'s low 7 bits), with ``r_0 = P``,
``r_{k+1} = (r_k >> 7) + s_k`` (``(r_k - f_k) / 2**7``: exact), and ``f_3 = r_3``. These are integers,
equal to ``w_k * x``: the kernel's sums are the emulator's (:func:`hlsnn.deploy.lower.program.conv_ints`).

**Exactness ranges** (:func:`check`, at render and at compile): every conv's (and dense
layer's) weight codes in ``[-7, 7]`` and its input codes in ``[0, 15]``, proved from the program
(:func:`ranges`): the kernel's input is the host's quantization of a ``Clip`` to ``[0, 15 * 2**-F]``
(the input ``Quant``), a conv's or Add's output codes lie in its clamp (rule 2's fused ``Clip``,
rule 4q's, :mod:`hlsnn.engines.network.joins.addclip`) and its ReLU, a max pool's in its input's. A
program outside these is refused by name: it runs on the int8 kernel (``net_bits`` 8).
"""
from __future__ import annotations

import math

from ...errors import InputError

#: the packed quad's exact ranges: narrow int4 weights, uint4 activations
W_RANGE, X_RANGE = (-7, 7), (0, 15)
INT8 = (-128, 127)


def _input_range(net):
    """The codes of the kernel's input: the host quantizes a ``Clip`` (the last host op before
    the kernel, :mod:`hlsnn.deploy.lower.netprefix`) at the input's radix, else any int8."""
    if net.input.get("clip"):                     # the input Quant's Clip folded into the load (netprefix)
        return tuple(net.input["clip"])
    f = net.input.get("f")
    last = net.host_before[-1] if net.host_before else None
    if f is None or last is None or last.get("op") != "Clip":
        return INT8
    a = getattr(last.get("stub"), "attrs", None) or last.get("attrs") or {}
    lo = INT8[0] if a.get("lo") is None else max(INT8[0], math.floor(math.ldexp(a["lo"], f)))
    hi = INT8[1] if a.get("hi") is None else min(INT8[1], math.ceil(math.ldexp(a["hi"], f)))
    return lo, hi


def ranges(net) -> dict:
    """``{tensor: (lo, hi)}``: bounds of the codes of every tensor the program's ops write (and
    of the kernel's input), from the clamps and ReLUs that make them (module docstring)."""
    name = lambda t: net.aliases.get(t, t)          # noqa: E731
    r = {name(net.input["name"]): _input_range(net)}
    for op in net.ops:
        f = op.f
        if op.kind == "maxpool":
            lo, hi = r.get(name(op.ins[0]), INT8)
        elif op.kind in ("conv", "add") and f.get("terms", 1) == 1:
            lo, hi = f.get("clip") or INT8
            if f.get("relu"):
                lo = max(lo, 0)
        else:
            lo, hi = INT8
        r[name(op.out)] = (lo, max(lo, hi))
    return r


def check(net):
    """:class:`InputError` naming the first conv whose weights or input codes the packed quad
    cannot take (module docstring)."""
    name = lambda t: net.aliases.get(t, t)          # noqa: E731
    r = ranges(net)
    for op in net.ops:
        if op.kind != "conv":
            continue
        codes = op.f["codes"]
        wlo, whi = int(codes.min(initial=0)), int(codes.max(initial=0))
        xlo, xhi = r.get(name(op.ins[0]), INT8)
        if op.f.get("terms", 1) != 1 or wlo < W_RANGE[0] or whi > W_RANGE[1] or xlo < X_RANGE[0] or xhi > X_RANGE[1]:
            raise InputError(f"network kernel: {op.name}: weights {wlo}..{whi} and input codes {xlo}..{xhi}; the "
                             f"4-bit kernel (net_bits: 4) takes weights {W_RANGE[0]}..{W_RANGE[1]} and input codes "
                             f"{X_RANGE[0]}..{X_RANGE[1]} only (a W4A4 file's radix points, pinned); run it on a "
                             f"net_bits 8 kernel")
