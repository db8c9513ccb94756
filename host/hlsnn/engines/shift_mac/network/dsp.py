"""DSP banks: the upper half of shift_mac's network kernel's channel banks multiplies on DSP48s.

A config with ``net_dsp: true`` (``shift8net_pynq-z2``) splits the ``Q`` channel banks of its ``P x
Q`` units: banks ``[0, Q/2)`` keep the two-hot shift-add units (LUTs, ``BIND_OP impl=fabric`` is
moot: they are shifts and adds), banks ``[Q/2, Q)`` form their products on DSP48E1s, lanes ``2i``
and ``2i + 1`` sharing one DSP a bank: its A port takes ``w1 * 2**16 + w0`` (25 bits), its B port
the bank's activation ``x``, its post-adder the constant ``2**15``, as sparse_cluster's board-sized
kernel packs int8 (``BIND_OP op=mul impl=dsp`` and ``op=add impl=dsp`` on the packed product). The
offset keeps the low field ``w0 * x + 2**15`` in ``[0, 2**16)``, so bits ``[16, 33)`` are ``w1 * x``
exactly and the low 16 bits with bit 15 flipped are ``w0 * x``: the split is wiring (sparse_cluster
adds the low field's sign to the high field instead, 17 LUTs a DSP). So ``P/2 * Q/2`` DSPs (128 at
16 x 32) double the products a cycle for the adder trees' extra levels.

**Exactness.** The split is exact when ``|w0 * x| < 2**15`` and ``w1 * 2**16 + w0`` fits 25 bits:
with 8-bit activations (``|x| <= 128``) that is ``|w| <= 128``, which the config's code limit
(``max_code: 128``, :mod:`hlsnn.formats.shift`'s "Code limit") guarantees: the quantizer never
picks a larger code, and :func:`rom` refuses a program that has one. The products are the code
values times ``x``, exact integers, so the sums, and every output bit, are the emulator's whatever
bank forms a product (the emulator is unchanged; the tests compare emu, csim and the simulated
board).

**ROMs.** A DSP bank's ROM holds each weight's value as a 9-bit two's complement integer, two
lanes to an 18-bit element (``kWeightsD[P/2][Q/2][words]``, ``ARRAY_RESHAPE`` of dimension 1: one
ROM a bank, ``9 P`` bits a word, 4 RAMB18 at 16 lanes and up to 512 words); the shift-add banks'
ROM (``kWeights``) is reshaped the same way (``P`` codes a word, 5 RAMB18 at 16 lanes of 10-bit
codes), not split into ``P / 2`` 32-bit ROMs: 16 x 32 would otherwise need 176 BRAM36.
"""
from __future__ import annotations

import numpy as np

from ....errors import InputError

#: the largest code magnitude the packing takes (module docstring)
MAX_CODE = 128
#: bits of a weight value in a DSP bank's ROM (two's complement; ``|w| <= 128``)
VALUE_BITS = 9
#: LUTs and FFs per DSP of the split: none. The DSP's post-adder adds ``2**15`` (its C port, a
#: constant), so the low field ``w0 * x + 2**15`` is in ``[0, 2**16)``: the high field is ``w1 * x``
#: without a correction, and the low one is ``w0 * x`` with bit 15 flipped (an inverter the first
#: adder's LUT absorbs); the product's register is the DSP's P register. sparse_cluster's packing
#: corrects the high field in the fabric instead (its ``PACK_LUT`` 17, ``PACK_FF`` 33)
PACK_LUT, PACK_FF = 0, 0


def values(c):
    """The code values of 16-bit weight codes ``c`` (``kernel._code_words``: ea, eb in 6 bits,
    the outer sign, a second term, its sign, zero): ``(-1)**so (2**ea + hb (-1)**sb 2**eb)``."""
    c = np.asarray(c, np.int64)
    ea, eb, so, hb, sb, zero = c & 63, (c >> 6) & 63, (c >> 12) & 1, (c >> 13) & 1, (c >> 14) & 1, (c >> 15) & 1
    v = (np.int64(1) << ea) + hb * (1 - 2 * sb) * (np.int64(1) << eb)
    return np.where(zero == 1, 0, (1 - 2 * so) * v)


def banks(pc, dsp):
    """The shift-add banks of ``pc``: ``pc / 2`` with DSP banks, else all of them."""
    return pc // 2 if dsp else pc


def rom(wl, pz, pc, where="network kernel"):
    """The DSP banks' ROM words ``[P/2][Q/2]`` (arrays of words) from the lanes' 16-bit codes
    ``wl[lane][bank]`` (each an array over the ROM's words): element ``(w0 mod 512) | (w1 mod
    512) << 9`` of lanes ``2i``, ``2i + 1``. :class:`InputError` for a code above
    :data:`MAX_CODE`."""
    lo = pc // 2
    out = []
    for i in range(pz // 2):
        row = []
        for j in range(lo, pc):
            w0, w1 = values(wl[2 * i][j]), values(wl[2 * i + 1][j])
            big = max(int(np.abs(w0).max(initial=0)), int(np.abs(w1).max(initial=0)))
            if big > MAX_CODE:
                raise InputError(f"{where}: a weight code of magnitude {big} on the DSP banks (net_dsp); allowed "
                                 f"|code| <= {MAX_CODE}: quantize with the config's max_code: {MAX_CODE}")
            m = (1 << VALUE_BITS) - 1
            row.append((w0 & m) | ((w1 & m) << VALUE_BITS))
        out.append(row)
    return out


def limit(weights, max_code):
    """:class:`InputError` when a code of the lanes' ROM codes ``weights[lane][bank]`` is above
    the config's code limit ``max_code`` (the kernel's product width rests on it)."""
    big = max(int(np.abs(values(b)).max(initial=0)) for lane in weights for b in lane)
    if big > max_code:
        raise InputError(f"network kernel: a weight code of magnitude {big} is above the config's max_code "
                         f"{max_code}; allowed |code| <= {max_code} (compile the model with this config: its "
                         f"quantizer keeps to the limit)")


def check(net, pz, pc):
    """:class:`InputError` where a program cannot take DSP banks on ``pz x pc`` units."""
    if pz % 2 or pc % 2:
        raise InputError(f"network kernel: net_dsp needs an even number of output lanes and channel banks "
                         f"(got {pz} x {pc})")
    if net.input["bits"] != 8:
        raise InputError(f"network kernel: net_dsp needs 8-bit activations (got {net.input['bits']})")


def multipliers(tables):
    """The DSP banks' packed products as :class:`hlsnn.resources.Multiplier` rows (25 x 8 bits,
    one DSP48E1 each), none without DSP banks."""
    from ....resources import Multiplier
    if not tables.get("dsp"):
        return []
    pz, pc = tables["pz"], tables["pc"]
    return [Multiplier("dsp pairs", "ConvTaps", 25, 8, count=pz // 2 * (pc // 2),
                       note="net_dsp: two lanes' products a DSP48E1, (w1 * 2^16 + w0) * x")]


def logic(tables):
    """``{"dsp split": (LUT, FF)}`` of the DSP banks (:data:`PACK_LUT`, :data:`PACK_FF` a DSP):
    none at the offset packing, and ``{}`` without DSP banks."""
    if not tables.get("dsp") or not (PACK_LUT or PACK_FF):
        return {}
    n = tables["pz"] // 2 * (tables["pc"] // 2)
    return {"dsp split": (n * PACK_LUT, n * PACK_FF)}
