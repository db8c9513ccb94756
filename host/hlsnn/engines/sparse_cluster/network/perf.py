"""Cycles and resources of the sparse_cluster network kernel
(``hls/engines/sparse_cluster/network.cpp.j2``), from its static schedule and its declared
buffers and multipliers.

**Cycles** per image (every loop's iterations at its derived II, :mod:`hlsnn.perf.schedule`; the descriptor and step tables fix every
trip count): the load, maxpool, add and store as the shift_mac network kernel's
(:mod:`hlsnn.engines.shift_mac.network.perf`: the same loops and depths); a conv takes one cycle per step and
output pixel, ``OH * OW * sum over blocks of the block's steps``, plus :data:`CONV_DEPTH`. A
block's steps are its schedule's (:func:`hlsnn.engines.sparse_cluster.network.kernel.schedule`): at least
``max_l ceil(n_l / M)`` (``n_l`` a lane's non-zero weights) and the most taps one bank reads,
so a pruned layer costs its non-zeros, not its MACs. The iteration counts are exact and
checked against the C-simulation's loop counters (tests); the depths are the model's, not a
synthesis report.

**Resources** (:mod:`hlsnn.resources`): the activation and shortcut buffers in ``Q`` banks
(int8), the step tables (per bank a 32-bit offset and the tap's position; the last-step
flags), the ``P x M`` weight ROMs (16-bit words: the int8 weight and its bank select), the bias
and shift ROMs, the blocks' window bases, and ``P x M`` int8 x int8 multipliers (a DSP48 each); the datapath logic (the
``Q:1`` selects, the lanes' adder trees and the epilogues) is an allowance per part
(:func:`datapath`).
"""
from __future__ import annotations

from ...shift_mac.network import perf as shiftperf
from ...network.perf import AXI_LITE, AXI_MASTER, CONTROL  # noqa: F401 - the same loops and counts
from ...shift_mac.network.perf import iterations  # noqa: F401 - the same loops and counts

#: step ROM read (1), the banks' address adds and reads (2), the select and product (DSP, 3),
#: the lane's adder tree of M products (log2 M + 1 = 4), the epilogue (bias, shift, clamp: 2)
CONV_DEPTH = 12


def op_cycles(net, tables, ii=None):
    """``[(name, kind, cycles)]`` per image: :func:`hlsnn.engines.shift_mac.network.perf.op_cycles` with this
    kernel's conv depth (``ii``: the derived IIs above 1, :func:`hlsnn.perf.schedule.ii_of`), over the
    program the kernel runs (net_bits 4: a conv with its Add fused, :mod:`.fuseadd`, one row
    ``conv + add``: the Add costs no cycle of its own)."""
    from .fuseadd import kernel_net
    net = kernel_net(net)
    fused = {op.name: op.f["fadd"]["name"] for op in net.ops if "fadd" in op.f}
    return [(f"{nm}+{fused[nm]}", "conv + add", c) if nm in fused else (nm, kind, c)
            for nm, kind, c in shiftperf.op_cycles(net, tables, CONV_DEPTH, ii=ii)]


def w_cyclic(tables):
    """The plain kernel's weight ROMs ``kW[P][M][steps]``: 0 keeps a ROM per multiplier
    (``complete`` on dimension 2); ``M / 2`` (``cyclic``) puts two multipliers' weights in one
    dual-port ROM (``2 * steps`` deep: the two reads a cycle take its two ports, II 1) where that
    takes fewer block RAMs by :mod:`hlsnn.resources`' mapping (a RAMB18 holds 1K x 18 bits; a
    network's 65-512 steps would fill a sixteenth to a half of one a multiplier). The board-sized
    kernel binds ``rom_1p`` and keeps 0."""
    from ....resources import Buffer, map_buffer
    pz, pm, ns = tables["pz"], tables["pm"], len(tables["steps"])
    if tables.get("sized") or pm % 2:
        return 0
    cost = [map_buffer(Buffer("kW", "net_top", "array", 16, (pz, pm, ns), partition=((1, "complete"), (2, how)),
                              static=True)) for how in ("complete", f"cyclic {pm // 2}")]
    return pm // 2 if cost[0].storage == cost[1].storage == "bram" and cost[1].bram18 < cost[0].bram18 else 0


def buffers(net, tables):
    """The kernel's arrays and multipliers as :mod:`hlsnn.resources` rows."""
    from ....resources import Buffer, Multiplier
    pz, pc, pm = tables["pz"], tables["pc"], tables["pm"]
    ns, nb = len(tables["steps"]), len(tables["biases"][0])
    bufs = [Buffer("act", "net_top", "array", 8, (tables.get("act_bufs", 2), pc, tables["act_words"]),
                   partition=((1, "complete"), (2, "complete")), static=True,
                   note="ping-pong activation buffers, channel banks"),
            Buffer("sc", "net_top", "array", tables.get("sc_bits", 8), (pc, tables["sc_words"]),
                   partition=((1, "complete"),), static=True,
                   note="shortcut buffer, channel banks"),
            Buffer("kTaps", "net_top", "array", 48, (pc, ns), partition=((1, "complete"),), static=True,
                   note="the step table: per bank its tap's offset, ky, kx"),
            Buffer("kLast", "net_top", "array", 8, (ns,), static=True, note="a block's last step"),
            Buffer("kW", "net_top", "array", 16, (pz, pm, ns),
                   partition=((1, "complete"), (2, f"cyclic {w_cyclic(tables)}" if w_cyclic(tables) else "complete")),
                   static=True, note="resident non-zero weights with their bank selects, one ROM per multiplier "
                   "(two a dual-port ROM: w_cyclic)"),
            Buffer("kBias", "net_top", "array", 32, (pz, nb), partition=((1, "complete"),), static=True),
            Buffer("kShift", "net_top", "array", 8, (pz, nb), partition=((1, "complete"),), static=True),
            Buffer("kWinBase", "net_top", "array", 32, (nb,), static=True, note="per block: its window's base"),
            Buffer("kLut", "net_top", "array", 8, (pc, len(tables["luts"])), partition=((1, "complete"),),
                   static=True, note="the activation tables, a copy per bank")][:None if shiftperf.has_lut(net) else -1]
    from ...network.tokens import attnkernel, layernorm
    bufs += layernorm.buffers(net, tables)            # rule layer_norm's ROMs (hlsnn.engines.network.tokens.layernorm)
    bufs += attnkernel.buffers(net, tables)           # rules attn_gather, add_const, act_matmul and int_softmax's ROMs (hlsnn.engines.network.tokens.attnkernel)
    muls = [Multiplier("w*x", "NetMac", 8, 8, count=pz * pm,
                       note=f"{pz} lanes x {pm} int8 x int8 products per cycle")] + shiftperf.multipliers(net, tables) \
        + layernorm.multipliers(net, tables) + attnkernel.multipliers(net, tables)
    return bufs, muls


def datapath(tables):
    """``{part: (LUT, FF)}`` outside the memories and DSPs, with ``P`` lanes, ``M`` multipliers
    a lane, ``Q`` banks, ``sb`` a lane sum's bits and ``wb`` a residual sum's: per multiplier
    the ``Q:1`` select of 8 bits (``8 * ceil(Q/4)``); per lane the adder tree of ``M`` products
    and the accumulator (``M * sb``), the epilogue (bias add, rounding shifter ~ ``4 * sb``,
    clamp, a fused Clip's clamp: 16); per bank its tap's address (two 32-bit adds) and padding test (four compares of
    its row and column), the read select, and the residual Add (as the shift_mac kernel's);
    the AXI and control allowances of :mod:`hlsnn.engines.shift_mac.network.perf`."""
    import math
    pz, pc, pm, sb, wb = tables["pz"], tables["pc"], tables["pm"], tables["sum_bits"], tables["add_bits"]
    sel = 8 * math.ceil(pc / 4)
    return {"selects": (pz * pm * sel, pz * pm * 8), "trees": (pz * pm * sb, pz * 2 * sb),
            "epilogues": (pz * (sb + 4 * sb + sb + 16 + 16), pz * (sb + 8)),
            "banks": (pc * (2 * 32 + 4 * 8 + 8 + 8 + 16 + 3 * wb + 4 * wb), pc * (32 + 16 + 24 + 2 * wb)),
            "axi": (2 * AXI_MASTER[0] + AXI_LITE[0], 2 * AXI_MASTER[1] + AXI_LITE[1]), "control": CONTROL}


def resources(net, tables, ps):
    """``{"bram36", "uram", "lut", "ff", "dsp", "buffers", "logic"}`` (as :func:`hlsnn.engines.shift_mac.network.perf.resources`;
    a board-sized kernel's: :func:`hlsnn.engines.sparse_cluster.netsize.estimate`)."""
    import math
    from ....resources import build
    from ...network.joins.linwide import logic as linwide_logic      # rule linear_wide's LinWide loop
    from ...network.joins.catmix import logic as split_logic         # rule mixed_concat's channel-range shifts
    from ...network.lintwo import logic as lintwo_logic        # rule two_term_input's two input terms
    from ...network.tokens.layernorm import logic as ln_logic         # rule layer_norm's LayerNorm loops
    from ...network.tokens.attnkernel import logic as attn_logic      # rules attn_gather, add_const, act_matmul and int_softmax's loops
    if tables.get("sized"):
        from .. import netsize
        e = netsize.estimate(tables["sized"], ps, len(tables["steps"]), tables["act_words"], tables["sc_words"],
                             tables["sum_bits"], tables["add_bits"], len(tables["biases"][0]),
                             ((tables["unfold"] or {}).get("c", 1), -(-tables["in_elems"] // 8))
                             if tables["load_iters"] != tables["in_elems"] else (1, -(-tables["in_elems"] // 8)),
                             tables["fast_add"], tables.get("sc_bits", 8), tables.get("act_bufs", 2),
                             sum(netsize.tap_bits(tables["steps"])), bool(tables.get("stream")),
                             tables["load_iters"] * 2 == tables.get("in_hw"),
                             (tables.get("has_add", True), any(r[0] for r in tables.get("fuse_rows", ()))))
        lg = dict(e["logic"], **shiftperf.wpool_logic(net, tables["pc"], net.input["bits"], tables["add_bits"]),
                  **shiftperf.mean_logic(net, tables),
                  **linwide_logic(net, tables["pc"], net.input["bits"], tables["add_bits"]), **split_logic(net, tables),
                  **lintwo_logic(net, tables))
        extra = [lg.get(k, (0, 0)) for k in ("wpool", "mean", "linwide", "split", "lintwo")]
        from ...network.pools.mean import multipliers as mean_multipliers       # a mean's division (rule mean_divide)
        mean_dsp = build([], mean_multipliers(net, tables), ps).dsp if tables.get("div_bits") or \
            tables.get("pool_scale") else 0
        return {"bram36": e["bram36"], "uram": e["uram"], "lut": e["lut"] + sum(v[0] for v in extra),
                "ff": e["ff"] + sum(v[1] for v in extra), "dsp": e["dsp"] + mean_dsp,
                "buffers": e["model"].buffer_rows(), "products": netsize.products(tables["sized"]),
                "logic": {k: {"lut": v[0], "ff": v[1]} for k, v in lg.items()}}
    m = build(*buffers(net, tables), ps)
    logic = dict(datapath(tables), **shiftperf.wpool_logic(net, tables["pc"], net.input["bits"], tables["add_bits"]),
                 **shiftperf.mean_logic(net, tables),
                 **linwide_logic(net, tables["pc"], net.input["bits"], tables["add_bits"]), **split_logic(net, tables),
                 **lintwo_logic(net, tables), **ln_logic(net, tables), **attn_logic(net, tables))
    return {"bram36": math.ceil(m.bram36), "uram": m.uram, "lut": m.lut + sum(v[0] for v in logic.values()),
            "ff": m.ff + sum(v[1] for v in logic.values()), "dsp": m.dsp, "buffers": m.buffer_rows(),
            "logic": {k: {"lut": v[0], "ff": v[1]} for k, v in logic.items()}}
