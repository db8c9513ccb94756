"""Cycles and resources of the shift_mac network kernel (``network.cpp.j2``), from its static
schedule and its declared buffers.

**Cycles** per image (every loop pipelined at II = 1; the descriptor table fixes every trip
count, so the schedule is static):

* load: ``in_elems`` cycles (one activation per cycle, a 64-bit AXI word every 8) plus
  :data:`DDR_LATENCY` for the first word of the burst;
* conv: per block of ``P`` output channels (``P`` = the config's ``rows``) and output pixel,
  the reduction ``Cg*kh*kw`` cycles plus :data:`MAC_DEPTH`, then the epilogue ``P`` cycles plus
  :data:`EPI_DEPTH`, plus :data:`LOOP_ENTRY` for the pixel loop;
* maxpool: one cycle per window value, plus :data:`POOL_DEPTH`;
* add: one cycle per pixel and channel, plus :data:`ADD_DEPTH`;
* store: ``out_elems`` cycles plus :data:`DDR_LATENCY`.

The iteration counts are exact and checked against the C-simulation's loop counters (tests);
the depths are the model's, not a synthesis report. Nothing overlaps: the layers run one
after another and the reduction and epilogue of a pixel do too.

**Resources** (:mod:`hlsnn.resources`): the two ping-pong buffers and the shortcut buffer
(``act_bits`` wide), the weight ROMs (``P`` banks of 16-bit codes), the bias ROMs (32-bit) and
the shift ROMs (8-bit), each as the C++ declares it. No DSP: products are shifts and adds (the
only multiply, ``b * kInWords`` per image, is by a constant).
"""
from __future__ import annotations

#: cycles from the AXI master's read request to its first data word: an assumption for a Zynq
#: HP port at 100 MHz (the PS's DDR controller and interconnect), not measured
DDR_LATENCY = 40
MAC_DEPTH = 3        # act read (BRAM, 1 cycle), shift-add, accumulate
EPI_DEPTH = 4        # bias add and saturation, ReLU, shift-round, saturate and write
POOL_DEPTH = 3
ADD_DEPTH = 4
LOOP_ENTRY = 1


def _f(row, key):
    from .netkernel import FIELDS
    return row["vals"][FIELDS.index(key)]


def iterations(net, tables):
    """Per image, the iterations of each counted loop of the kernel (the C-simulation's
    ``HLSNN_ITER`` counters): ``{loop: count}``."""
    pz = int(net.params["rows"])
    it = {"NetLoad": tables["in_elems"], "NetStore": tables["out_elems"], "NetMac": 0, "NetEpilogue": 0,
          "NetPool": 0, "NetAdd": 0}
    for r in tables["rows"]:
        op = _f(r, "op")
        if op == 0:
            pix = _f(r, "zb") * _f(r, "oh") * _f(r, "ow")
            it["NetMac"] += pix * _f(r, "kg")
            it["NetEpilogue"] += pix * pz
        elif op == 1:
            it["NetPool"] += _f(r, "n_iter")
        else:
            it["NetAdd"] += _f(r, "n_iter")
    return {k: v for k, v in it.items() if v}


def op_cycles(net, tables):
    """``[(name, kind, cycles)]`` per image: the load, every op, the store."""
    pz = int(net.params["rows"])
    rows = [("load", "load image", tables["in_elems"] + DDR_LATENCY)]
    for op, r in zip(net.ops, tables["rows"]):
        k = _f(r, "op")
        if k == 0:
            pix = _f(r, "zb") * _f(r, "oh") * _f(r, "ow")
            c = pix * (_f(r, "kg") + MAC_DEPTH + pz + EPI_DEPTH + LOOP_ENTRY)
        elif k == 1:
            c = _f(r, "n_iter") + POOL_DEPTH
        else:
            c = _f(r, "n_iter") + ADD_DEPTH
        rows.append((op.name, op.kind, c))
    rows.append(("store", "store output", tables["out_elems"] + DDR_LATENCY))
    return rows


def buffers(net, tables):
    """The kernel's arrays as :class:`hlsnn.resources.Buffer` rows."""
    from ..resources import Buffer
    pz = int(net.params["rows"])
    a = net.input["bits"]
    nw, nb = len(tables["weights"][0]), len(tables["biases"][0])
    return [Buffer("act", "net_top", "array", a, (2, tables["act_words"]), partition=((1, "complete"),),
                   static=True, note="ping-pong activation buffers"),
            Buffer("sc", "net_top", "array", a, (tables["sc_words"],), static=True, note="shortcut buffer"),
            Buffer("kWeights", "net_top", "array", 16, (pz, nw), partition=((1, "complete"),), static=True,
                   note="resident weight codes, one ROM per lane"),
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
