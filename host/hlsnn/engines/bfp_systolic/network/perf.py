"""Cycles and resources of the bfp_systolic network kernel
(``hls/engines/bfp_systolic/network.cpp.j2``), from its static schedule and its declared
buffers and multipliers.

**Cycles** per image (every loop pipelined at II = 1; the descriptor table fixes every trip
count):

* load: the input's ``ceil(in_elems / 2)`` 64-bit words in one burst (``LoadWords``, plus
  :data:`hlsnn.engines.network.perf.DDR_LATENCY`), then ``in_elems`` cycles to decode them (one
  float32 value per cycle); a board-sized kernel's unfolded stem of an even row width
  (``load_pairs``): the words alone, each decoded as it arrives (two values a cycle), and where
  it writes the stem's leading-one map (:func:`.expmap.load_map`) one cycle more
  (``LoadTail``: the map's last word);
* conv: the exponent pass ``OH * OW * ceil(steps / 2)`` (``ConvExp``: two taps a cycle, one on
  each port of the true dual-port activation banks; ``steps = ceil(C/Q) * kh * kw``) plus
  :data:`EXP_DEPTH`, then the multiply pass ``OH * OW * B * steps + TZ_DISTANCE - 1 + B``
  (``ConvMac``: every block of ``P`` output channels of a pixel takes the pixel's taps; a
  pixel's writes, one block a cycle, start ``TZ_DISTANCE`` (:data:`MAC_DEPTH`) iterations after
  its last product and run beside the later pixels' products, the last pixel's after them)
  plus :data:`MAC_DEPTH` (``B = ceil(Z/P)``; with the slot schedule, ``net_slots``, ``steps`` is a
  block's cycles of :func:`.slots.schedule`, one read of each half of the banks a cycle, raised to
  the map's taps a cycle (pairs of map words) over ``B`` and to a fused Add's ``P / FUSE_LANES``;
  ``kh * kw`` map taps are then ``kh * ceil(kw / 2)``); ``kh x kw`` are the taps (a dilated window's
  alone: its holes cost nothing); a conv that reads a leading-one map (:mod:`.expmap`, ``mr``)
  has no exponent pass and its multiply pass ``kh * kw + EXP_LEAD`` iterations more (the map's
  taps of its first pixel run ahead of the products). A conv of ``n`` packs of groups (the layer path's GEMM per
  pack) is ``n`` such rows, pack ``j`` over the channel blocks its ``C/n`` inputs span and the
  output blocks its ``Z/n`` outputs span;
* maxpool: ``ceil(C/Q) * OH * OW * kh * kw`` plus its depth; add: ``ceil(C/kA) * H * W`` (``kA``
  its lanes: ``Q``, or a board-sized kernel's ``net_add``, :func:`add_lanes`), twice
  that with the global pool (a pass for each channel's smallest exponent, a pass for the sum),
  and then, where the kernel holds the pool's sums rounded to odd (``AddPoolOdd``),
  ``ceil(C/Q) * Q`` words one a cycle plus :data:`POOL_ODD_DEPTH`; an Add fused into its conv's
  write path (:mod:`.fuse`, a board-sized kernel's) has no iterations and no cycles of its own:
  its conv's block writes take ``P / FUSE_LANES`` iterations each, hidden behind its products
  but the last pixel's, so its multiply pass is ``B * (P / FUSE_LANES - 1)`` iterations longer;
  lut and gate (netbfp rules bfp_table, bfp_gate): ``ceil(C/Q) * H * W`` each plus :data:`LUT_DEPTH`,
  :data:`GATE_DEPTH`;
* store: ``out_elems + 1`` cycles (the elements, then the status word) plus the DDR latency.

The iteration counts are exact and checked against the C-simulation's loop counters (tests);
the depths are the model's, not a synthesis report. The carried maxima are a max tree: in
``ConvExp`` the ``2Q`` leading ones of a cycle, in ``ConvMac`` the ``P`` leading ones of a
block's results, each reduced by a balanced tree before one compare-select with the carried
value, so the loop-carried path is one 12-bit compare and select.

**Resources** (:mod:`hlsnn.resources`; the model lives in :mod:`.resmodel`, re-exported here, so
the board sizer reads it at config load without the emulator's imports): the activation and shortcut buffers in ``Q`` banks of
36-bit elements (a third activation buffer that holds only smaller tensors at its own size, in
LUTRAM where a bank fits), the pool buffer, the ``P x Q`` weight mantissa ROMs, the row-exponent and bias ROMs, the patch
exponents (and a board-sized kernel's two leading-one maps), and ``P x Q`` mantissa multipliers
(a DSP48 each; ``P/2 x Q`` DSPs of two products each where packed). The datapath logic is a model per
part (:func:`datapath`), the AXI and control allowances are :mod:`hlsnn.engines.shift_mac.network.perf`'s.
"""
from __future__ import annotations

from ...network.perf import AXI_LITE, AXI_MASTER, CONTROL, DDR_LATENCY, MOVE_DEPTH, POOL_DEPTH, _f  # noqa: F401
# the resource model (its own module: the board sizer reads it at config load), re-exported
from . import expmap
from .resmodel import (FAMILIES, PACK_FF, PACK_LUT, TAP_CYCLIC, TAP_TABLES, X_BITS, _cmp, _mux, _sel,  # noqa: F401
                       _stages, add_lanes, buffers, datapath, families, lshift_luts, packed, pool_odd, resources,
                       srs_luts, third_storage)

#: act read (1), the leading-one encoder (2), the Q-input max tree (2), the clamp (1)
EXP_DEPTH = 6
#: act read (1), the rounding shifter (3), the DSP multiply (3), the Q-input adder tree (4),
#: the epilogue (bias alignment, saturation, leading one: 3), the output shifter (2)
MAC_DEPTH = 16
#: two reads, the leading ones, the aligning shifters, the sum and the exactness test
ADD_DEPTH = 6

#: a table (netbfp rule bfp_table): act read (1), the code's rounding shifter (2), the ROM read (1), the write (1)
LUT_DEPTH = 5
#: a gate (rule bfp_gate): two reads (1), the DSP product (3), the write (1)
GATE_DEPTH = 5
#: ``AddPoolOdd`` (a global pool's sums rounded to odd, one word a cycle): the read
#: through the banks' multiplexer (1), the leading one (2), the right shifter and its sticky
#: test (2), the write (1)
POOL_ODD_DEPTH = 6
#: rule bfp_gate_odd's rounding to odd in the gate loop (a kernel with a gate of two tables' outputs):
#: the leading one (2), the right shifter and its sticky test (2)
GATE_ODD_DEPTH = 4
LOOPS = {0: "ConvMac", 1: "NetPool", 2: "NetAdd", 3: "NetMove", 4: "NetConcat", 5: "NetTranspose", 6: "NetLut",
         7: "NetGate"}


def iterations(net, tables):
    """Per image, the iterations of each counted loop of the kernel (the C-simulation's
    ``HLSNN_ITER`` counters): ``{loop: count}``."""
    it = ({"NetLoad": tables["in_words"]} if tables.get("load_pairs") else      # a word a cycle, decoded at once
          {"NetLoadWords": -(-tables["in_elems"] // 2), "NetLoad": tables["in_elems"]})
    if tables.get("load_map"):                                  # .expmap: the image's last map word
        it["NetLoadTail"] = expmap.LOAD_TAIL
    it["NetStore"] = tables["out_elems"]
    from .attnkern import LOOPS as ATTN_LOOPS, iterations as attn_iterations
    for r in tables["rows"]:
        if _f(r, "op") in ATTN_LOOPS:                      # attention on pairs (.attnkern)
            for k, n in attn_iterations(r, tables["pc"]).items():
                it[k] = it.get(k, 0) + n
            continue
        k = LOOPS[_f(r, "op")]
        it[k] = it.get(k, 0) + _f(r, "n_iter")
        if k == "ConvMac" and _f(r, "sa"):      # (no ConvExp loop where no conv has an exponent pass)
            it["ConvExp"] = it.get("ConvExp", 0) + _f(r, "sa")
        if _pool_odd_words(net, tables, r):
            it["NetPoolOdd"] = it.get("NetPoolOdd", 0) + _pool_odd_words(net, tables, r)
    return it


def _pool_odd_words(net, tables, r):
    """``AddPoolOdd``'s iterations after the descriptor row ``r``: a global pool's
    ``ceil(C/Q)`` words in each of the ``Q`` banks where the kernel holds its sums rounded to odd
    (:func:`hlsnn.engines.bfp_systolic.network.perf.pool_odd`), else 0."""
    if _f(r, "op") != 2 or not _f(r, "gap") or not pool_odd(net):
        return 0
    return -(-_f(r, "cg") // tables["pc"]) * tables["pc"]


def op_cycles(net, tables, ii=None):
    """``[(name, kind, cycles)]`` per image: the load, every op (a conv of packs of groups: each
    pack, a descriptor row each), the store. ``ii``: ``{loop
    counter: II}`` of the loops whose derived II is above 1 (:func:`hlsnn.perf.schedule.ii_of`):
    their iterations cost that many cycles each."""
    g = (ii or {}).get
    rows = [("load", "load image", tables["in_words"] * g("NetLoad", 1) + DDR_LATENCY if tables.get("load_pairs")
             else -(-tables["in_elems"] // 2) * g("NetLoadWords", 1) + DDR_LATENCY + tables["in_elems"] * g("NetLoad", 1))]
    if tables.get("load_map"):                # .expmap: the image's last map word, a cycle after the load
        rows[0] = (rows[0][0], rows[0][1], rows[0][2] + expmap.LOAD_TAIL * g("NetLoadTail", 1))
    depth = {1: POOL_DEPTH, 2: ADD_DEPTH, 3: MOVE_DEPTH, 4: MOVE_DEPTH, 5: MOVE_DEPTH, 6: LUT_DEPTH, 7: GATE_DEPTH}     # 3: netmove's Move loop, 5: Transpose
    gate_odd = any(op.kind == "gate" and op.f.get("odd") for op in net.ops)      # rule bfp_gate_odd: the loop is deeper
    from .lower import row_ops
    from .attnkern import LOOPS as ATTN_LOOPS, cycles as attn_cycles
    for (op, j), r in zip(row_ops(net), tables["rows"]):
        k = _f(r, "op")
        if k in ATTN_LOOPS:                                     # attention on pairs (.attnkern)
            rows.append((op.name, op.kind, attn_cycles(r, tables["pc"], ii)))
            continue
        c = (_f(r, "sa") * g("ConvExp", 1) + (EXP_DEPTH if _f(r, "sa") else 0)    # .expmap: no exponent pass
             + _f(r, "n_iter") * g("ConvMac", 1) + MAC_DEPTH if k == 0
             else 0 if k == 2 and not _f(r, "n_iter")              # .fuse: an Add in its conv's write path
             else _f(r, "n_iter") * g(LOOPS[k], 1) + depth[k] + (GATE_ODD_DEPTH if k == 7 and gate_odd else 0))
        odd = _pool_odd_words(net, tables, r)                  # a global pool's sums rounded to odd
        c += odd * g("NetPoolOdd", 1) + POOL_ODD_DEPTH if odd else 0
        n = op.f.get("packs", 1) if op.kind == "conv" else 1
        rows.append((op.name + (f" [pack {j + 1}/{n}]" if n > 1 else ""), op.kind, c))
    rows.append(("store", "store output", tables["out_words"] * g("NetStore", 1) + DDR_LATENCY))
    return rows
