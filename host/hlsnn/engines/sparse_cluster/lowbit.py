"""Four 4-bit products per DSP48E1: the board-sized network kernel with ``net_bits: 4`` (issue 82).

A W4A4 network (Brevitas' ``Int8WeightPerTensorFixedPoint`` at 4 bits: narrow, ``-7..7``; its
``QuantReLU``/``QuantIdentity`` at 4 bits unsigned: ``0..15``, kept as the ``Clip`` of each
activation, :mod:`hlsnn.deploy.importer.qimport`) multiplies int4 weights by uint4 activations. The kernel
(``hls/engines/sparse_cluster/network.cpp.j2``, ``Cfg::kBits4``) then serves four lanes with
one DSP48E1 where the int8 kernel serves two, and builds its other products from LUTs at about
24 LUTs each (FINN's estimate for 4 x 4 bits, :data:`~hlsnn.engines.sparse_cluster.netsize.FABRIC_MUL4_LUT`)
instead of 80, and sums each lane's 8-bit products in a tree as narrow as its sums
(:func:`hlsnn.engines.sparse_cluster.netsize.tree4`), so more read ports per bank fit: on the PYNQ-Z2
four instead of two (``sparse4net_pynq-z2``, with each lane's last weight word in LUT ROMs, ``net_wlut``;
the sizer's nominal pick, :func:`hlsnn.engines.sparse_cluster.netsize.size`, is three).

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
layer's) weight codes in ``[-7, 7]`` (a program outside them is refused by name: it runs on the
int8 kernel, ``net_bits`` 8). The input codes, proved from the program (:func:`ranges`), choose the
quad's form (:func:`mode`): the kernel's input is the host's quantization of a ``Clip`` to ``[0, 15
* 2**-F]`` (the input ``Quant``) or any int8, a conv's or Add's output codes lie in its clamp (rule
conv_output's fused ``Clip``, rule add_clip's, :mod:`hlsnn.engines.network.joins.addclip`) and its ReLU, a table's in its
entries (a ``Bipolar``'s ``+-1``), a max pool's in its input's. Codes in ``[0, 15]`` take the
unsigned quad above (``"u4"``).

**Signed and 8-bit inputs** (:func:`mode`, a CNV's 8-bit image and its sign activations): the
quad's split holds for any ``x`` with ``|w_k * x| <= 127``, so a conv whose input codes lie in
``[-16, 15]`` (:data:`X_SIGNED`: a bipolar ``+-1``, a signed low-bit activation) takes them as
5-bit signed (``"s5"``): ``|f_k| <= 7 * 16 = 112`` and ``s_k`` is ``w_k * x < 0``, that is
``w_k != 0 and x != 0 and (w_k < 0) != (x < 0)``. A conv whose input codes are wider (any int8:
an 8-bit input ``Quant``) runs in **nibbles** (``"nib"``): ``x = 16 * hi + lo`` with ``hi = x >>
4`` in ``[-8, 7]`` (arithmetic) and ``lo = x & 15`` in ``[0, 15]``; each block takes its steps
on ``hi``, then the same steps on ``lo`` (the step ROM ``kNib``: 1 hi, 2 lo), and the first
``lo`` step shifts each lane's accumulator left by 4 (``kShl``), so ``acc = 16 * sum w hi + sum
w lo = sum w x`` exactly: twice the steps (cycles) of that layer, nothing else. The kernel
renders these lines only for a program with such a conv (a W4A4 ResNet's stays as above); its
LUT products are then int4 x int5 (:data:`~hlsnn.engines.sparse_cluster.netsize.FABRIC_MUL4S_LUT`).
"""
from __future__ import annotations

import math

import numpy as np

from ...errors import InputError

#: the packed quad's exact ranges: narrow int4 weights, uint4 activations
W_RANGE, X_RANGE = (-7, 7), (0, 15)
#: the input codes the quad takes as 5-bit signed; wider ones run in nibbles (module docstring)
X_SIGNED = (-16, 15)
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
        elif op.kind == "lut" and f.get("table") is not None:      # rule unary_table's table (a Bipolar's +-1)
            t = np.asarray(f["table"]).astype(np.int64)
            lo, hi = int(t.min()), int(t.max())
        else:
            lo, hi = INT8
        r[name(op.out)] = (lo, max(lo, hi))
    return r


def mode(xr) -> str:
    """How the quad takes a conv's input codes in ``xr`` (module docstring): ``"u4"`` (``0..15``,
    the unsigned quad), ``"s5"`` (within :data:`X_SIGNED`) or ``"nib"`` (two nibbles)."""
    if X_RANGE[0] <= xr[0] and xr[1] <= X_RANGE[1]:
        return "u4"
    if X_SIGNED[0] <= xr[0] and xr[1] <= X_SIGNED[1]:
        return "s5"
    return "nib"


def modes(net) -> dict:
    """``{conv op name: mode}`` of every conv of ``net`` (:func:`mode` of its input's :func:`ranges`)."""
    name = lambda t: net.aliases.get(t, t)          # noqa: E731
    r = ranges(net)
    return {op.name: mode(r.get(name(op.ins[0]), INT8)) for op in net.ops if op.kind == "conv"}


def check(net):
    """:class:`InputError` naming the first conv whose weights the packed quad cannot take (module
    docstring: every input code of int8 it takes, the wider ones in nibbles)."""
    for op in net.ops:
        if op.kind != "conv":
            continue
        codes = op.f["codes"]
        wlo, whi = int(codes.min(initial=0)), int(codes.max(initial=0))
        if op.f.get("terms", 1) != 1 or wlo < W_RANGE[0] or whi > W_RANGE[1]:
            raise InputError(f"network kernel: {op.name}: weights {wlo}..{whi} in {op.f.get('terms', 1)} input "
                             f"term(s); the 4-bit kernel (net_bits: 4) takes weights {W_RANGE[0]}..{W_RANGE[1]} in one "
                             f"term only (a low-bit file's radix points, pinned); run it on a net_bits 8 kernel")
