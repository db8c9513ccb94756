"""Cycles and resources of the shift_mac network kernel (``network.cpp.j2``), from its static
schedule and its declared buffers.

**Cycles** per image (every loop pipelined at II = 1; the descriptor table fixes every trip
count, so the schedule is static):

* load: ``in_elems`` cycles (one activation per cycle, a 64-bit AXI word every 8) plus
  :data:`DDR_LATENCY` for the first word of the burst;
* conv: one cycle per tap, pixel and block: ``ceil(Z/P) * OH * OW * ceil(Cg/Q) * kh * kw``
  (``P`` output lanes = the config's ``cols``, ``Q`` channel banks = its ``rows``; the epilogue
  is fused into a pixel's last tap), plus :data:`CONV_DEPTH` to drain the pipeline;
* maxpool: ``ceil(C/Q) * OH * OW * kh * kw``, plus :data:`POOL_DEPTH`;
* add: ``ceil(C/Q) * H * W``, plus :data:`ADD_DEPTH`;
* store: ``out_elems`` cycles plus :data:`DDR_LATENCY`.

The iteration counts are exact and checked against the C-simulation's loop counters (tests);
the depths are the model's, not a synthesis report. Nothing overlaps between layers.

**Resources** (:mod:`hlsnn.resources`): the two ping-pong buffers and the shortcut buffer in
``Q`` banks each (``act_bits`` wide), the weight ROMs (``P x Q`` banks of 16-bit codes), the
bias ROMs (32-bit) and the shift ROMs (8-bit), each as the C++ declares it. No DSP: products
are shifts and adds.
"""
from __future__ import annotations

#: cycles from the AXI master's read request to its first data word: an assumption for a Zynq
#: HP port at 100 MHz (the PS's DDR controller and interconnect), not measured
DDR_LATENCY = 40
CONV_DEPTH = 8       # act read (BRAM, 1), shift, the Q-input adder tree (4), accumulate, epilogue (bias, shift)
POOL_DEPTH = 3
ADD_DEPTH = 4


def _f(row, key):
    from .netkernel import FIELDS
    return row["vals"][FIELDS.index(key)]


LOOPS = {0: "NetMac", 1: "NetPool", 2: "NetAdd"}


def iterations(net, tables):
    """Per image, the iterations of each counted loop of the kernel (the C-simulation's
    ``HLSNN_ITER`` counters): ``{loop: count}``."""
    it = {"NetLoad": tables["in_elems"], "NetStore": tables["out_elems"]}
    for r in tables["rows"]:
        k = LOOPS[_f(r, "op")]
        it[k] = it.get(k, 0) + _f(r, "n_iter")
    return it


def op_cycles(net, tables):
    """``[(name, kind, cycles)]`` per image: the load, every op, the store."""
    depth = {0: CONV_DEPTH, 1: POOL_DEPTH, 2: ADD_DEPTH}
    rows = [("load", "load image", tables["in_elems"] + DDR_LATENCY)]
    for op, r in zip(net.ops, tables["rows"]):
        rows.append((op.name, op.kind, _f(r, "n_iter") + depth[_f(r, "op")]))
    rows.append(("store", "store output", tables["out_elems"] + DDR_LATENCY))
    return rows


def buffers(net, tables):
    """The kernel's arrays as :class:`hlsnn.resources.Buffer` rows."""
    from ..resources import Buffer
    pz, pc = tables["pz"], tables["pc"]
    a = net.input["bits"]
    nw, nb = len(tables["weights"][0][0]), len(tables["biases"][0])
    return [Buffer("act", "net_top", "array", a, (2, pc, tables["act_words"]), partition=((1, "complete"),
                                                                                          (2, "complete")),
                   static=True, note="ping-pong activation buffers, channel banks"),
            Buffer("sc", "net_top", "array", a, (pc, tables["sc_words"]), partition=((1, "complete"),), static=True,
                   note="shortcut buffer, channel banks"),
            Buffer("kWeights", "net_top", "array", 16, (pz, pc, nw), partition=((1, "complete"), (2, "complete")),
                   static=True, note="resident weight codes, one ROM per unit"),
            Buffer("kBias", "net_top", "array", 32, (pz, nb), partition=((1, "complete"),), static=True),
            Buffer("kShift", "net_top", "array", 8, (pz, nb), partition=((1, "complete"),), static=True)]


def resources(net, tables, ps):
    """``{"bram36", "uram", "lut", "ff", "dsp", "buffers"}`` of the declared buffers (LUT and FF
    count only the memories, not the datapath)."""
    import math
    from ..resources import build
    m = build(buffers(net, tables), [], ps)
    return {"bram36": math.ceil(m.bram36), "uram": m.uram, "lut": m.lut, "ff": m.ff, "dsp": m.dsp,
            "buffers": m.buffer_rows()}
