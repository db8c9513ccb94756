"""Cycles and resources of the bfp_systolic network kernel
(``hls/engines/bfp_systolic/network.cpp.j2``), from its static schedule and its declared
buffers and multipliers.

**Cycles** per image (every loop pipelined at II = 1; the descriptor table fixes every trip
count):

* load: the input's ``ceil(in_elems / 2)`` 64-bit words in one burst (``LoadWords``, plus
  :data:`hlsnn.compiled.netperf.DDR_LATENCY`), then ``in_elems`` cycles to decode them (one
  float32 value per cycle);
* conv: the exponent pass ``OH * OW * ceil(steps / 2)`` (``ConvExp``: two taps a cycle, one on
  each port of the true dual-port activation banks; ``steps = ceil(C/Q) * kh * kw``) plus
  :data:`EXP_DEPTH`, then the multiply pass ``OH * OW * B * steps + B`` (``ConvMac``: every
  block of ``P`` output channels of a pixel takes the pixel's taps; a pixel's writes, one block
  a cycle, run beside the next pixel's products, the last pixel's after them) plus
  :data:`MAC_DEPTH` (``B = ceil(Z/P)``);
* maxpool: ``ceil(C/Q) * OH * OW * kh * kw`` plus its depth; add: ``ceil(C/Q) * H * W``, twice
  that with the global pool (a pass for each channel's smallest exponent, a pass for the sum);
* store: ``out_elems + 1 + ops`` cycles (the elements, the status word and an info word per
  op) plus the DDR latency.

The iteration counts are exact and checked against the C-simulation's loop counters (tests);
the depths are the model's, not a synthesis report. So is II = 1 of ``ConvMac``: its epilogue's
recurrence (the max rule's running leading one over a pixel's blocks, a leading-one encoder
and a compare) must close in one cycle, which only synthesis can confirm.

**Resources** (:mod:`hlsnn.resources`): the activation and shortcut buffers in ``Q`` banks of
36-bit elements, the pool buffer, the ``P x Q`` weight mantissa ROMs, the row-exponent and bias ROMs, the patch
exponents, and ``P x Q`` mantissa multipliers (a DSP48 each). The datapath logic is a model per
part (:func:`datapath`), the AXI and control allowances are :mod:`hlsnn.compiled.netperf`'s.
"""
from __future__ import annotations

from .netperf import AXI_LITE, AXI_MASTER, CONTROL, DDR_LATENCY, POOL_DEPTH, _f

#: act read (1), the leading-one encoder of 54 bits (2), the Q-input max tree (2), the clamp (1)
EXP_DEPTH = 6
#: act read (1), the rounding shifter (3), the DSP multiply (3), the Q-input adder tree (4),
#: the epilogue (bias alignment, saturation, leading one: 3), the output shifter (2)
MAC_DEPTH = 16
#: two reads, the leading ones, the aligning shifters, the sum and the exactness test
ADD_DEPTH = 6

LOOPS = {0: "ConvMac", 1: "NetPool", 2: "NetAdd"}


def iterations(net, tables):
    """Per image, the iterations of each counted loop of the kernel (the C-simulation's
    ``HLSNN_ITER`` counters): ``{loop: count}``."""
    it = {"NetLoadWords": -(-tables["in_elems"] // 2), "NetLoad": tables["in_elems"], "NetStore": tables["out_elems"],
          "StoreInfo": len(tables["rows"])}
    for r in tables["rows"]:
        k = LOOPS[_f(r, "op")]
        it[k] = it.get(k, 0) + _f(r, "n_iter")
        if k == "ConvMac":
            it["ConvExp"] = it.get("ConvExp", 0) + _f(r, "sa")
    return it


def op_cycles(net, tables):
    """``[(name, kind, cycles)]`` per image: the load, every op, the store."""
    rows = [("load", "load image", -(-tables["in_elems"] // 2) + DDR_LATENCY + tables["in_elems"])]
    depth = {1: POOL_DEPTH, 2: ADD_DEPTH}
    for op, r in zip(net.ops, tables["rows"]):
        k = _f(r, "op")
        c = _f(r, "sa") + EXP_DEPTH + _f(r, "n_iter") + MAC_DEPTH if k == 0 else _f(r, "n_iter") + depth[k]
        rows.append((op.name, op.kind, c))
    rows.append(("store", "store output", tables["out_words"] + DDR_LATENCY))
    return rows


def buffers(net, tables):
    """The kernel's arrays and multipliers as :mod:`hlsnn.resources` rows."""
    from ..resources import Buffer, Multiplier
    from .bfpkernel import WIDE_BITS
    from .netbfp import ELEM_BITS
    pz, pc = tables["pz"], tables["pc"]
    m = net.params["mantissa_bits"]
    wbits = 8 if m <= 8 else 16
    nw, nb = len(tables["weights"][0][0]), len(tables["biases"][0])
    nt = len(tables["taps"])
    bufs = [Buffer("act", "net_top", "array", ELEM_BITS + 10, (2, pc, tables["act_words"]),
                   partition=((1, "complete"), (2, "complete")), static=True, storage="ram_t2p",
                   note=f"ping-pong activation buffers, channel banks: {ELEM_BITS}-bit mantissa + 10-bit exponent"),
            Buffer("sc", "net_top", "array", ELEM_BITS + 10, (pc, tables["sc_words"]), partition=((1, "complete"),),
                   static=True, note="shortcut buffer, channel banks"),
            Buffer("gap", "net_top", "array", 64, (pc, tables["gap_words"]), partition=((1, "complete"),),
                   static=True, note=f"pool buffer: a global pool's sums, {WIDE_BITS}-bit mantissas"),
            Buffer("kWeights", "net_top", "array", wbits, (pz, pc, nw), partition=((1, "complete"), (2, "complete")),
                   static=True, note="resident weight mantissas, one ROM per multiplier"),
            Buffer("kWExp", "net_top", "array", 8, (pz, nb), partition=((1, "complete"),), static=True),
            Buffer("kBiasM", "net_top", "array", wbits, (pz, nb), partition=((1, "complete"),), static=True),
            Buffer("pexp", "Conv", "array", 12, (tables["max_pix"],), note="a conv's patch exponents"),
            Buffer("tz", "ConvMac", "array", net.params["acc_bits"], (2, tables["max_blocks"], pz),
                   partition=((1, "complete"), (3, "complete")), note="two pixels' results, per block and lane"),
            Buffer("e3z", "ConvMac", "array", 12, (2, tables["max_blocks"], pz),
                   partition=((1, "complete"), (3, "complete")), note="their product exponents"),
            Buffer("kTapOff", "net_top", "array", 32, (nt,), static=True, note="the exponent pass's tap table"),
            Buffer("kTapKy", "net_top", "array", 8, (nt,), static=True),
            Buffer("kTapKx", "net_top", "array", 8, (nt,), static=True),
            Buffer("kTapC", "net_top", "array", 8, (nt,), static=True)]
    muls = [Multiplier("x*w", "ConvMac", m, m, count=pz * pc,
                       note=f"{pz} lanes x {pc} banks: {m} x {m}-bit mantissa products")]
    return bufs, muls


def datapath(net, tables):
    """``{part: (LUT, FF)}`` outside the memories and DSPs, with ``P`` lanes, ``Q`` banks, ``M``
    mantissa bits, ``A`` acc_bits, ``sb`` a patch sum's bits and 54-bit elements: per bank the
    leading-one encoders of the exponent and multiply passes, the rounding shifter of 54 to
    ``M`` bits, the address and padding test, the maxpool compare and the Add's aligners; per
    lane the adder tree of ``Q`` products, the bias alignment shifter, the saturation, the
    leading one and the output shifter of ``A`` to ``M`` bits; the AXI and control
    allowances (:mod:`hlsnn.compiled.netperf`)."""
    from ..engines.shift_mac.spec import shifter_luts
    from .bfpkernel import WIDE_BITS as E
    pz, pc, sb = tables["pz"], tables["pc"], tables["sum_bits"]
    m, a = net.params["mantissa_bits"], net.params["acc_bits"]
    bank = (2 * E + shifter_luts(E, 63) + 2 * m + 2 * 32 + 4 * 8 + 3 * E + 2 * shifter_luts(E, 53) + 2 * E,
            2 * E + 2 * m + 32)
    lane = (pc * sb + shifter_luts(m, a) + 3 * a + a + shifter_luts(a, 63) + 2 * m, 3 * sb + 2 * a)
    return {"banks": (pc * bank[0], pc * bank[1]), "lanes": (pz * lane[0], pz * lane[1]),
            "axi": (2 * AXI_MASTER[0] + AXI_LITE[0], 2 * AXI_MASTER[1] + AXI_LITE[1]), "control": CONTROL}


def resources(net, tables, ps):
    """``{"bram36", "uram", "lut", "ff", "dsp", "buffers", "logic"}`` (as :func:`hlsnn.compiled.netperf.resources`)."""
    import math
    from ..resources import build
    m = build(*buffers(net, tables), ps)
    logic = datapath(net, tables)
    return {"bram36": math.ceil(m.bram36), "uram": m.uram, "lut": m.lut + sum(v[0] for v in logic.values()),
            "ff": m.ff + sum(v[1] for v in logic.values()), "dsp": m.dsp, "buffers": m.buffer_rows(),
            "logic": {k: {"lut": v[0], "ff": v[1]} for k, v in logic.items()}}
