"""Cycles and resources of the shift_mac network kernel (``network.cpp.j2``), from its static
schedule and its declared buffers.

**Cycles** per image (every loop's iterations at its derived II, :mod:`hlsnn.perf.schedule`; 1 unless it says otherwise; the descriptor table fixes every trip
count, so the schedule is static):

* load: the image's ``ceil(in_elems / L)`` 64-bit words in one burst (``L`` = 8 activations a
  word, 4 above 8 bits: :mod:`hlsnn.engines.network.words`) (``LoadWords``, a plain
  sequential read, plus :data:`DDR_LATENCY` for its first word), then ``in_elems`` cycles to
  unpack them into the channel banks (one activation per cycle; the tables' ``load_iters``
  where a kernel unpacks more a cycle: the board-sized kernels' unfolded stem loads a pixel of
  every channel a cycle, shift_mac's after one group of ``L`` cycles fetching the first words);
* conv: one cycle per tap, pixel and block: ``ceil(Z/P) * OH * OW * ncb * kh * kw``
  (``P`` output lanes = the config's ``net_lanes``, ``Q`` channel banks = its ``net_banks``;
  ``ncb`` the blocks of ``Q`` input channels a block of outputs reads,
  :func:`hlsnn.engines.network.kernel.group_windows`: ``ceil(C/Q)`` dense, ``Cg/Q`` for groups of
  multiples of ``Q``, 1 depthwise; a depthwise conv runs in blocks of ``Q`` channels, each lane
  with ``Q/P`` accumulators, :func:`hlsnn.engines.shift_mac.network.kernel.tables`, so it costs
  ``ceil(C/Q) * OH * OW * kh * kw``;
  the epilogue is fused into a pixel's last tap), plus :data:`CONV_DEPTH` to drain the pipeline;
* maxpool: ``ceil(C/Q) * OH * OW * kh * kw``, plus :data:`POOL_DEPTH`;
* add: ``ceil(C/Q) * H * W``, plus :data:`ADD_DEPTH`;
* upsample / zerostuff / pad (:mod:`hlsnn.network.netmove`): one output pixel a cycle,
  ``ceil(C/Q) * OH * OW``, plus :data:`MOVE_DEPTH`; a channel concat (its requantization as
  the Add's), ``ceil(C/Q) * H * W``, plus :data:`ADD_DEPTH`; a transpose of an ``R x S``
  map (:mod:`hlsnn.engines.network.tokens.transpose`): one diagonal of a ``Q x Q`` block a cycle,
  ``ceil(R/Q) * ceil(S/Q) * Q``, plus :data:`MOVE_DEPTH`;
* lut (:mod:`hlsnn.engines.network.gate`, a table activation): ``ceil(C/Q) * H * W``, plus
  :data:`LUT_DEPTH`; gate (a channel gate, requantized as the Add's sum): ``ceil(C/Q) * H * W``,
  plus :data:`ADD_DEPTH`;
* store: ``out_elems`` cycles to pack the output's words on chip, then the words in one burst
  (``StoreWords``) plus :data:`DDR_LATENCY`.

The iteration counts are exact and checked against the C-simulation's loop counters (tests);
the depths are the model's, not a synthesis report. Nothing overlaps between layers.

**Resources.** Memories (:mod:`hlsnn.resources`): the two ping-pong buffers and the shortcut
buffer in ``Q`` banks each (``act_bits`` wide), the weight ROMs (``P/k x Q`` banks of ``k`` codes per word,
the ROM's narrow codes of :func:`hlsnn.engines.shift_mac.network.kernel.narrow_codes`: two 10-bit two-hot
codes or four 5-bit power-of-two ones at 3-bit shifts, :func:`~hlsnn.engines.shift_mac.network.kernel.weight_pack`;
twice in a two-term program), the bias ROMs (32-bit) and the
shift ROMs (8-bit), the blocks' window bases (32-bit) and a table program's ROM copies (``kLut``,
``2**act_bits`` entries a table, 8-bit, or 16-bit above 8 bits), each as the C++ declares it.
No DSP but a channel gate's ``Q`` products (:func:`multipliers`): the convs' products are shifts and adds. The
datapath's LUTs and flip-flops (:func:`datapath`) are a model from the widths the rendered code
declares, part by part, with the LUT rules of the layer kernel's model
(:func:`hlsnn.engines.shift_mac.spec.shifter_luts`: a LUT6 per output bit per 4:1 stage; one
LUT per bit of an adder on the carry chain); the AXI adapters and control are stated
allowances, not synthesis results.
"""
from __future__ import annotations

from ...network.perf import ADD_DEPTH, AXI_LITE, AXI_MASTER, CONTROL, DDR_LATENCY, LUT_DEPTH, MOVE_DEPTH, POOL_DEPTH, _f

#: the 32-bit operators of the upper banks' tap cursor of tap pairs (:func:`datapath`'s ``pairs``)
PAIR_LOGIC = 13
CONV_DEPTH = 8       # act read (BRAM, 1), shift, the Q-input adder tree (4), accumulate, epilogue (bias, shift)


from ...network.tokens.layernorm import LOOPS as LN_LOOPS, OP_CODE as LN_OP  # noqa: E402 - rule 15's loops
from ...network.tokens.attnkernel import LOOPS as ATT_LOOPS, cycles as attn_cycles, iterations as attn_iterations  # noqa: E402

LOOPS = {0: "NetMac", 1: "NetPool", 2: "NetAdd", 3: "NetMove", 4: "NetConcat", 5: "NetTranspose", 6: "NetLut", 7: "NetGate"}


def words(elems, tables=None):
    """The 64-bit AXI words of ``elems`` activations in the lanes of a kernel's ``tables``
    (:mod:`hlsnn.engines.network.words`: 8-bit lanes, or 16-bit ones above 8 bits)."""
    return -(-elems // (64 // int((tables or {}).get("lane_bits", 8))))


def iterations(net, tables):
    """Per image, the iterations of each counted loop of the kernel (the C-simulation's
    ``HLSNN_ITER`` counters): ``{loop: count}``."""
    it = {"NetLoadWords": words(tables["in_elems"], tables), "NetLoad": tables.get("load_iters", tables["in_elems"]),
          "NetStore": tables["out_elems"], "NetStoreWords": words(tables["out_elems"], tables)}
    for r in tables["rows"]:
        if _f(r, "op") == LN_OP:                # rule 15's two loops (hlsnn.engines.network.tokens.layernorm)
            for k in LN_LOOPS:
                it[k] = it.get(k, 0) + _f(r, "n_iter")
            continue
        if _f(r, "op") in ATT_LOOPS:            # attention's loops (hlsnn.engines.network.tokens.attnkernel)
            for k, n in attn_iterations(r, _f).items():
                it[k] = it.get(k, 0) + n
            continue
        k = LOOPS[_f(r, "op")]
        it[k] = it.get(k, 0) + _f(r, "n_iter")
    return it


def op_cycles(net, tables, conv_depth=CONV_DEPTH, ii=None):
    """``[(name, kind, cycles)]`` per image: the load, every op, the store (a conv's pipeline
    depth ``conv_depth``: the sparse kernel's differs, :mod:`hlsnn.engines.sparse_cluster.network.perf`).
    ``ii``: ``{loop counter: II}`` of the loops whose derived II is above 1
    (:func:`hlsnn.perf.schedule.ii_of`): their iterations cost that many cycles each."""
    g = (ii or {}).get
    depth = {0: conv_depth, 1: POOL_DEPTH, 2: ADD_DEPTH, 3: MOVE_DEPTH, 4: ADD_DEPTH, 5: MOVE_DEPTH, 6: LUT_DEPTH, 7: ADD_DEPTH}
    rows = [("load", "load image", words(tables["in_elems"], tables) * g("NetLoadWords", 1) + DDR_LATENCY
             + tables.get("load_iters", tables["in_elems"]) * g("NetLoad", 1))]   # load_iters: a pixel of
    # every channel a cycle (the board-sized sparse kernel's unfolded load), else a value a cycle
    for op, r in zip(net.ops, tables["rows"]):
        if _f(r, "op") == LN_OP:                # rule 15 (hlsnn.engines.network.tokens.layernorm)
            from ...network.tokens.layernorm import cycles as ln_cycles
            rows.append((op.name, op.kind, ln_cycles({k: _f(r, k) for k in ("zb", "hw")}, ii)))
            continue
        if _f(r, "op") in ATT_LOOPS:            # attention's loops (hlsnn.engines.network.tokens.attnkernel)
            rows.append((op.name, op.kind, attn_cycles(r, _f, ii)))
            continue
        rows.append((op.name, op.kind, _f(r, "n_iter") * g(LOOPS[_f(r, "op")], 1) + depth[_f(r, "op")]))
    rows.append(("store", "store output", tables["out_elems"] * g("NetStore", 1)
                 + words(tables["out_elems"], tables) * g("NetStoreWords", 1) + DDR_LATENCY))
    return rows


def buffers(net, tables):
    """The kernel's arrays as :class:`hlsnn.resources.Buffer` rows."""
    from ....resources import Buffer
    pz, pc = tables["pz"], tables["pc"]
    a = net.input["bits"]
    nw, nb = len(tables["weights"][0][0]), len(tables["biases"][0])
    cw = tables.get("code_bits", 16)              # a ROM code's bits (kernel.narrow_codes)
    if tables.get("dsp"):                         # DSP banks (.dsp): one reshaped ROM a bank, every lane's code a word
        sa = tables["sa_banks"]
        from .dsp import VALUE_BITS
        weights = [Buffer("kWeights", "net_top", "array", cw * pz, (sa, nw), partition=((1, "complete"),), static=True,
                          note=f"shift-add banks' codes, {pz} a word (ARRAY_RESHAPE)"),
                   Buffer("kWeightsD", "net_top", "array", VALUE_BITS * pz, (pc - sa, nw), partition=((1, "complete"),),
                          static=True, note=f"DSP banks' values, {pz} a word (ARRAY_RESHAPE)")]
    else:
        weights = [Buffer("kWeights", "net_top", "array", cw * tables["pack"], (pz // tables["pack"], pc, nw),
                          partition=((1, "complete"), (2, "complete")), static=True,
                          note=f"resident weight codes, {tables['pack']} units' codes per ROM word")]
    return [Buffer("act", "net_top", "array", a, (tables.get("act_bufs", 2), pc, tables["act_words"]),
                   partition=((1, "complete"), (2, "complete")),
                   static=True, note="ping-pong activation buffers, channel banks"),
            Buffer("sc", "net_top", "array", tables.get("sc_bits", a), (pc, tables["sc_words"]),
                   partition=((1, "complete"),), static=True, note="shortcut buffer, channel banks"),
            *weights,
            *([Buffer("kWeights2", "net_top", "array", cw * tables["pack"], (pz // tables["pack"], pc, nw),
                      partition=((1, "complete"), (2, "complete")), static=True,
                      note="the weights' second codes (a two-term program)")] if tables.get("terms", 1) == 2 else []),
            Buffer("kBias", "net_top", "array", 32, (tables["parts"] * pz, nb), partition=((1, "complete"),),
                   static=True),
            Buffer("kShift", "net_top", "array", 8, (tables["parts"] * pz, nb), partition=((1, "complete"),),
                   static=True),
            Buffer("kWinBase", "net_top", "array", 32, (nb,), static=True, note="per block: its window's base"),
            Buffer("kLut", "net_top", "array", 8 if a <= 8 else 16, (pc, len(tables["luts"])),
                   partition=((1, "complete"),),
                   static=True, note="the activation tables, a copy per bank")][:None if has_lut(net) else -1]


def has_lut(net):
    """The program has a table op (the kernel then declares ``kLut``)."""
    return any(op.kind == "lut" for op in net.ops)


def multipliers(net, tables):
    """The kernel's run-time products as :class:`hlsnn.resources.Multiplier` rows: the gate
    loop's ``Q`` act_bits x act_bits products (:mod:`hlsnn.engines.network.gate`), when the program has
    a gate; none otherwise (the convs shift and add)."""
    from ....resources import Multiplier
    from ...network.pools.mean import multipliers as mean_multipliers      # a mean's division (rule 13)
    from .dsp import multipliers as dsp_multipliers                  # the DSP banks' packed products
    if not any(op.kind == "gate" for op in net.ops):
        return mean_multipliers(net, tables) + dsp_multipliers(tables)
    a = net.input["bits"]
    return [Multiplier("gate", "GatePixels", a, a, count=tables["pc"], note="a channel gate: map x gate per bank")
            ] + mean_multipliers(net, tables) + dsp_multipliers(tables)


def datapath(net, tables):
    """``{part: (LUT, FF)}`` of the network kernel's logic outside its memories (module
    docstring), with ``P`` lanes, ``Q`` banks and the rendered widths (``a`` act_bits, ``pb``
    a product's bits, ``sb`` a reduction's, ``A`` the accumulator's, ``wb`` a residual sum's):

    * ``units`` (``P*Q``): two left shifters of ``a`` bits by up to the program's largest weight
      shift, the add/subtract of the two terms and the conditional negation (``pb`` each; the
      zero flag folds into the negation); a ``pb``-bit product register; in a two-term program
      (``weight_terms: 2``, the ROM ``kWeights2``) all of it twice and the adder of the two
      products (``pb + 1``); in a power-of-two program (no code with a second term: the kernel
      renders a one-shifter ``ShiftMul``) one shifter and the negation (``pb``);
    * ``trees`` (``P``): the lane's adder trees as the kernel writes them, one per slice of
      ``Q/R`` banks (``R = parts`` accumulators per lane: more than 1 in a network with a
      depthwise conv, :func:`hlsnn.engines.shift_mac.network.kernel.tables`), level by level each
      one bit wider: at level ``k``, ``floor(n/2)`` adders of ``leaf + k`` bits over the ``n``
      entries below (``Q/R / 2**k`` in a power of two; ``leaf`` = ``pb``, + 1 in a two-term
      program) and a register for every entry (:func:`tree_levels`);
      the ``R - 1`` adders of ``sb`` bits that sum the parts; the ``R`` accumulators' adders and
      registers (``sb`` bits each);
    * ``epilogues`` (``R P``): the bias add (``sb + 2``), the saturation's two compares and clamp
      (``3 A``), the rounding right shifter by 0..60 (``shifter_luts(A, 60)``), its increment
      and the output clamp (``A + 2a``), and a fused Clip's clamp to the descriptor's bounds
      (two compares and a select, ``2a``);
    * ``banks`` (``Q``): the read address adder and the zero-padding select (``16 + a``), the
      ping-pong source select (``a``), the write data select over ``Q/P + 1`` writers (the
      lanes' blocks and the other ops; one more with ``R > 1``: the wide block's part), the
      maxpool compare (``2a``), and the residual Add: two
      aligning shifters, the sum, the pool accumulator and its rounding shifter (``wb`` bits);
    * ``pairs`` (a program with a paired conv, :mod:`hlsnn.engines.shift_mac.network.pairs`): the
      upper banks' tap cursor, :data:`PAIR_LOGIC` operators of 32 bits (the row and column adders
      and their four bound compares, the address adder and select, the channel bound's adder, the
      two tap counters and the column compare) and its three registers;
    * ``load`` (a board-sized kernel's unfolded image load, the tables' ``load_iters``): per bank
      it writes (``C * kw``) the select of the pixel's lane of its channel's word (``lane_bits``
      LUT6 levels of a ``64 / lane_bits``:1 multiplexer), and each channel's current and next word
      (``2 * C * 64`` flip-flops);
    * ``wpool`` (``Q``, a program with an average pool): :func:`wpool_logic`;
    * ``linwide`` (a program with rule 12w's resize): :func:`hlsnn.engines.network.joins.linwide.logic`;
    * ``mean`` (a mean over a count that is not a power of two): :func:`mean_logic`;
    * ``split`` (a pool or gate of a concat's mixed map): :func:`hlsnn.engines.network.joins.catmix.logic`;
    * ``axi``, ``control``: :data:`AXI_MASTER` x 2, :data:`AXI_LITE`, :data:`CONTROL`.
    """
    import math
    from ....resources import shifter_luts
    pz, pc = tables["pz"], tables["pc"]
    a, pb, sb, wb = net.input["bits"], tables["prod_bits"], tables["sum_bits"], tables["add_bits"]
    acc = net.params["acc_bits"]
    smax = tables.get("max_shift", pb - a - 2)   # a unit's largest shift (the program's largest exponent)
    sa = tables.get("sa_banks", pc)           # the shift-add banks (net_dsp: half, the rest on DSPs, .dsp)
    mux = lambda n: math.ceil(n / 4) if n > 1 else 0          # noqa: E731 - LUT6s of an n:1 multiplexer, per bit
    r = tables.get("parts", 1)
    terms = tables.get("terms", 1)        # a two-term program: each unit's second shift-add and its adder
    if tables.get("pot"):                 # a power-of-two program: one shifter and the negation a unit
        unit = (shifter_luts(a, smax) + pb, pb)
    else:
        unit = (terms * (2 * shifter_luts(a, smax) + 2 * pb) + (terms - 1) * (pb + 1), terms * pb)
    leaf = pb + (terms - 1)
    lv = tree_levels(pc // r)            # a slice's tree (kernel.tree_fields), one a part
    tree = (r * sum(nb // 2 * (leaf + k) for k, _, _, nb in lv) + (r - 1) * sb + r * sb,
            r * sum(n * (leaf + k) for k, _, n, _ in lv) + r * sb)
    epi = ((sb + 2) + 3 * acc + shifter_luts(acc, 60) + acc + 2 * a + 2 * a, 2 * acc + a)
    writers = pc // pz + 1 + (r > 1)
    bank = (16 + a + a + a * mux(writers) + 2 * a + 2 * shifter_luts(a, 8) + 3 * wb + shifter_luts(wb, 31),
            16 + 3 * a + 2 * wb)
    parts = {"units": (pz * sa * unit[0], pz * sa * unit[1]), "trees": (pz * tree[0], pz * tree[1]),
             "epilogues": (r * pz * epi[0], r * pz * epi[1]), "banks": (pc * bank[0], pc * bank[1]),
             "axi": (2 * AXI_MASTER[0] + AXI_LITE[0], 2 * AXI_MASTER[1] + AXI_LITE[1]), "control": CONTROL}
    if "load_iters" in tables and "unfold" in tables:    # the board-sized unfolded load (kernel.tables)
        u, lb = tables["unfold"], int(tables.get("lane_bits", 8))
        parts["load"] = (u["c"] * u["kw"] * lb * mux(64 // lb), 2 * u["c"] * 64)
    if tables.get("tap_pairs"):           # the upper banks' tap cursor (.pairs; rendered with a paired conv)
        parts["pairs"] = (PAIR_LOGIC * 32, 3 * 32)
    from .dsp import logic as dsp_logic         # the DSP banks' split
    parts.update(dsp_logic(tables))
    parts.update(wpool_logic(net, pc, a, wb))
    from ...network.joins.linwide import logic as linwide_logic      # rule 12w's LinWide loop
    parts.update(linwide_logic(net, pc, a, wb))
    parts.update(mean_logic(net, tables))
    from ...network.joins.catmix import logic as split_logic         # rule 8m's channel-range shifts
    parts.update(split_logic(net, tables))
    return parts


def tree_levels(n):
    """``[(level, level below, entries, entries below)]`` of an adder tree over ``n`` leaves, each
    level pairing the entries below (an odd last one passes up) until one is left."""
    out, lv = [], 0
    while n > 1:
        lv += 1
        out.append((lv, lv - 1, (n + 1) // 2, n))
        n = (n + 1) // 2
    return out


def mean_logic(net, tables):
    """``{"mean": (LUT, FF)}`` of rule 13's datapath (:mod:`hlsnn.engines.network.pools.mean`) beside
    its products (:func:`hlsnn.engines.network.pools.mean.multipliers`, one site each, in the loops
    whose ops divide): the left
    shift by ``pre`` (``shifter_luts(db, 31)``), the offset's adder (``db``), the right shift by
    ``L`` (``shifter_luts(db, 95)``) and the requantization's wider shifter (``shifter_luts(db,
    31) - shifter_luts(wb, 31)``); a ``db``-bit register a site. ``{}`` without a mean. Also
    the sparse kernel's."""
    from ....resources import shifter_luts
    db, wb, pc = tables.get("div_bits", 0), tables["add_bits"], tables["pc"]
    if not db:
        return {}
    sites = pc * (2 if tables.get("fast_add") else 1) * tables.get("add_div", True) + pc * tables.get("pool_div", any(
        op.kind == "avgpool" for op in net.ops))                # the loops that render it (network.kernel.div_bits)
    one = shifter_luts(db, 31) + db + shifter_luts(db, 95) + max(0, shifter_luts(db, 31) - shifter_luts(wb, 31))
    return {"mean": (sites * one, sites * db)}


def wpool_logic(net, pc, a, wb):
    """``{"wpool": (LUT, FF)}`` when the program has an average pool or a bilinear upsample
    (:mod:`hlsnn.engines.network.pools.linpool`; the pool loop's sum is rendered only then), else
    ``{}``: per bank the tap's left shift by 0..2 and the sum's adder (``wb`` bits), the
    requantization (``shifter_luts(wb, 31)``, its increment and clamp, ``wb + 2a``) and the
    output select (``a``); the sum's register (``wb``). Also the sparse kernel's."""
    from ....resources import shifter_luts
    if not any(op.kind == "avgpool" for op in getattr(net, "ops", ())):
        return {}
    return {"wpool": (pc * (shifter_luts(wb, 2) + wb + shifter_luts(wb, 31) + wb + 2 * a + a), pc * wb)}


def resources(net, tables, ps):
    """``{"bram36", "uram", "lut", "ff", "dsp", "buffers", "logic"}``: the declared buffers
    (:mod:`hlsnn.resources`) plus the datapath (:func:`datapath`, in ``lut``/``ff``; ``logic``
    its parts)."""
    import math
    from ....resources import build
    from ...network.tokens import attnkernel, layernorm      # rule 15's, rules 16-19's ROMs, DSPs and logic
    m = build(buffers(net, tables) + layernorm.buffers(net, tables) + attnkernel.buffers(net, tables),
              multipliers(net, tables) + layernorm.multipliers(net, tables) + attnkernel.multipliers(net, tables), ps)
    logic = dict(datapath(net, tables), **layernorm.logic(net, tables), **attnkernel.logic(net, tables))
    return {"bram36": math.ceil(m.bram36), "uram": m.uram, "lut": m.lut + sum(v[0] for v in logic.values()),
            "ff": m.ff + sum(v[1] for v in logic.values()), "dsp": m.dsp, "buffers": m.buffer_rows(),
            "logic": {k: {"lut": v[0], "ff": v[1]} for k, v in logic.items()}}
