"""The resource model of the bfp_systolic network kernel (``hls/engines/bfp_systolic/network.cpp.j2``):
its declared buffers and multipliers (:func:`buffers`) and its datapath logic (:func:`datapath`),
as :mod:`hlsnn.engines.bfp_systolic.network.perf` reports them (which re-exports them). A module
apart so the board sizer (:mod:`hlsnn.engines.bfp_systolic.netsize`, read at config load) reads
the same model without the emulator's imports."""
from __future__ import annotations

from ...network.perf import AXI_LITE, AXI_MASTER, CONTROL
# LUTs and FFs per DSP of a packed pair (``net_pack``): the sparse engine's packed pair, the same C++
# (the split's add of the low field's sign and its registers), one figure held against yosys
from ...sparse_cluster.netsize import PACK_FF, PACK_LUT


def packed(p):
    """True where lanes ``2i`` and ``2i + 1`` share one DSP48 per bank (``net_pack``: a board-sized
    kernel of mantissas of at most 8 bits, :mod:`hlsnn.engines.bfp_systolic.netsize`)."""
    return bool(p.get("net_pack"))


#: a board-sized kernel's residual Add fused into its conv's write path
#: (:mod:`.fuse`): the sums formed a cycle (a block's ``P``
#: in ``P / FUSE_LANES`` cycles, hidden behind a 3 x 3 conv's 9 or more cycles of products)
FUSE_LANES = 2


#: the slot schedule's (:mod:`.slots`) write path: a block's ``P`` outputs rounded and written this
#: many lanes a cycle (``P / WRITE_LANES`` cycles, behind the block's products; the unfused convs)
WRITE_LANES = 8


def write_lanes(pz, slots):
    """The lanes a cycle of a conv's write path: :data:`WRITE_LANES` with the slot schedule, else all ``P``."""
    return min(pz, WRITE_LANES) if slots else pz


def add_lanes(p, pc):
    """The residual Add's channels a cycle ``kA`` (``net_add``: a board-sized kernel's, a divisor
    of the ``pc`` banks; else ``pc``): a block of ``pc`` channels takes ``pc / kA`` parts."""
    return p.get("net_add") or pc


#: the op families with a loop of their own, by descriptor op code (network_data.h.j2's ``kOp*``),
#: and the template boolean that renders each family's function, loop and dispatch only for a
#: program that has such an op; :func:`datapath` counts a family only where it is rendered
FAMILIES = {1: "has_pool", 2: "has_add", 3: "has_move", 4: "has_concat", 5: "has_transpose"}


def families(t):
    """``{template boolean: rendered}`` of :data:`FAMILIES` from the descriptor rows of
    :func:`hlsnn.engines.bfp_systolic.network.kernel.tables` ``t`` (the compiled program as the kernel walks it)."""
    codes = {r["vals"][0] for r in t["rows"]}         # "op", the descriptor's first field (kernel.FIELDS)
    return {name: code in codes for code, name in FAMILIES.items()}


def pool_odd(net):
    """True where the kernel holds a global pool's sums rounded to odd (``AddPoolOdd``):
    a program with a global pool and no mean over a count with an odd factor (rule bfp_mean reads a
    pool's exact sums, :mod:`.anymean`). Then every word a conv reads is an element (a
    ``kElemBits``-bit mantissa); otherwise the convs read the pool buffer's 54-bit sums as they are."""
    from .anymean import mean_fields
    return any(op.kind == "add" and op.f["gap"] for op in net.ops) and not mean_fields(net)["has_mean"]


def third_storage(act3_words, elem_bits=None):
    """The third activation buffer's ``(BIND_STORAGE type, impl)`` where it has a size of its own
    (:func:`hlsnn.engines.bfp_systolic.network.kernel._third`): LUTRAM where a bank fits
    :data:`hlsnn.resources.LUTRAM_MAX_BITS` (two ports: ``ram_2p``), else BRAM as ``act``
    (``elem_bits``: the element's mantissa, :data:`.lower.ELEM_BITS` unless rule bfp_prelu_exact widens it)."""
    from ....resources import LUTRAM_MAX_BITS
    from .widths import ELEM_BITS
    eb = elem_bits or ELEM_BITS
    return ("ram_2p", "lutram") if act3_words * (eb + 10) <= LUTRAM_MAX_BITS else ("ram_t2p", "bram")


#: the exponent pass's tap table ROMs (name, element bits, note), as the C++ declares them
TAP_TABLES = (("kTapOff", 32, "the exponent pass's tap table"), ("kTapKy", 8, ""), ("kTapKx", 8, ""),
              ("kTapC", 8, ""), ("kTapC0", 8, "a pack of groups' first bank"))
#: their ``ARRAY_PARTITION cyclic factor``: ``ConvExp`` reads two taps a cycle (``k`` and ``k + 1``),
#: one from each bank; the template renders the pragmas from this value (``tap_cyclic``)
TAP_CYCLIC = 2


def buffers(net, tables):
    """The kernel's arrays and multipliers as :mod:`hlsnn.resources` rows."""
    from ....resources import Buffer, Multiplier
    from .widths import ELEM_BITS, WIDE_BITS
    ELEM_BITS = tables.get("elem_bits", ELEM_BITS)    # rule bfp_prelu_exact (.prelu): 53-bit elements     # noqa: N806
    pz, pc = tables["pz"], tables["pc"]
    m = net.params["mantissa_bits"]
    wbits = 8 if m <= 8 else 16
    nw, nb = len(tables["weights"][0][0]), len(tables["biases"][0])
    nt = len(tables["taps"])
    a3 = tables.get("act3_words", 0)                  # a third buffer of its own size (bfpkernel._third)
    units = tables.get("units")                       # .slots: a bank's even and odd words apart, the unit tables
    ns = slot_count(pc) if units else pc              # the weight ROMs per lane (pair): banks, or slots
    bufs = [Buffer("act", "net_top", "array", ELEM_BITS + 10, (tables.get("act_bufs", 2), pc, 2,
                                                                -(-tables["act_words"] // 2)),
                   partition=((1, "complete"), (2, "complete"), (3, "complete")), static=True, storage="ram_s2p",
                   note=f"ping-pong activation buffers, channel banks, a bank's even and odd words apart (.slots): "
                        f"{ELEM_BITS}-bit mantissa + 10-bit exponent")
            if units else
            Buffer("act", "net_top", "array", ELEM_BITS + 10, (2 if a3 else tables.get("act_bufs", 2), pc,
                                                                tables["act_words"]),
                   partition=((1, "complete"), (2, "complete")), static=True, storage="ram_t2p",
                   note=f"ping-pong activation buffers, channel banks: {ELEM_BITS}-bit mantissa + 10-bit exponent"),
            Buffer("sc", "net_top", "array", ELEM_BITS + 10, (pc, tables["sc_words"]), partition=((1, "complete"),),
                   static=True, note="shortcut buffer, channel banks"),
            Buffer("gap", "net_top", "array", 64, (pc, tables["gap_words"]), partition=((1, "complete"),),
                   static=True, note=f"pool buffer: a global pool's sums, {WIDE_BITS}-bit mantissas"),
            (Buffer("kWQuads", "net_top", "array", 32, (pz // 2, ns // 2, nw), partition=((1, "complete"), (2, "complete")),
                    static=True, note="resident weight mantissas, a lane pair's two a 16-bit half, one ROM per two DSPs "
                                      "(.slots: slots 2m and 2m + 1, read at one address)")
             if packed(net.params) and units else
             Buffer("kWPairs", "net_top", "array", 16, (pz // 2, ns, nw), partition=((1, "complete"), (2, "complete")),
                    static=True, note="resident weight mantissas, a lane pair's two a word, one ROM per DSP")
             if packed(net.params) else
             Buffer("kWeights", "net_top", "array", wbits, (pz, pc, nw), partition=((1, "complete"), (2, "complete")),
                    static=True, note="resident weight mantissas, one ROM per multiplier")),
            Buffer("kWExp", "net_top", "array", 8, (pz, nb), partition=((1, "complete"),), static=True),
            Buffer("kBiasM", "net_top", "array", wbits, (pz, nb), partition=((1, "complete"),), static=True),
            Buffer("pexp", "Conv", "array", 12, (tables["max_pix"],), static=True, note="a conv's patch exponents"),
            *([Buffer("lmap", "net_top", "array", 12, (2, 2, -(-tables["map_words"] // 2)),
                      partition=((1, "complete"), (2, "complete")), static=True, storage="ram_t2p", impl="bram",
                      note="the leading-one maps of activation buffers 0 and 1 (.expmap), even and odd words apart "
                           "(.slots)")] if tables.get("maps") and units else
              [Buffer("lmap", "net_top", "array", 12, (2, tables["map_words"]), partition=((1, "complete"),),
                      static=True, storage="ram_t2p", impl="bram",
                      note="the leading-one maps of activation buffers 0 and 1 (.expmap)")] if tables.get("maps") else []),
            *([Buffer("omap", "LoadImage", "array", 12, (2, tables["in_hw"] // 2), partition=((1, "complete"),),
                      static=True, storage="ram_s2p", impl="bram",
                      note="the image's per-pixel largest leading one so far, even and odd columns (.expmap.load_map)")]
              if tables.get("load_map") else []),
            Buffer("tz", "ConvMac", "array", net.params["acc_bits"], (pz, tables["tz_slots"] * tables["max_blocks"]),
                   partition=((1, "complete"),), static=True, storage="ram_s2p", impl="lutram",
                   note=f"a ring of {tables['tz_slots']} pixels' results, per lane: block-major words"),
            Buffer("e3z", "ConvMac", "array", 12, (pz, tables["tz_slots"] * tables["max_blocks"]),
                   partition=((1, "complete"),), static=True, storage="ram_s2p", impl="lutram",
                   note="their product exponents"),
            *[Buffer(name, "net_top", "array", bits, (nt,), partition=((1, f"cyclic {TAP_CYCLIC}"),), static=True,
                     note=note) for name, bits, note in TAP_TABLES]]
    if units:                                         # .slots: per cycle and half the read's tap and banks
        n = len(units["pair"])
        bufs += [Buffer("kUOff", "net_top", "array", 32, (2, n), partition=((1, "complete"),), static=True,
                        note="the slot schedule's reads: address from the window's corner (.slots)"),
                 *[Buffer(name, "net_top", "array", 8, (2, n), partition=((1, "complete"),), static=True,
                          note=note) for name, note in (("kUKy", "its position"), ("kUKx", ""), ("kUN", "its live banks"))],
                 Buffer("kUPair", "net_top", "array", 8, (n,), static=True, note="the cycle's pair: 0, or its half + 1")]
        nm = len(units.get("mtaps") or [0])
        bufs += [Buffer("kMOff", "net_top", "array", 32, (nm,), static=True,
                        note="the exponent side's map taps, two across a cycle (.slots)"),
                 *[Buffer(name, "net_top", "array", 8, (nm,), static=True, note="") for name in ("kMKy", "kMKx", "kMPair")]]
    if a3:
        kind, impl = third_storage(a3, ELEM_BITS)
        bufs.append(Buffer("act3", "net_top", "array", ELEM_BITS + 10, (pc, a3), partition=((1, "complete"),),
                           static=True, storage=kind, impl=impl,
                           note="the third activation buffer, its own size: CBAM's small tensors"))
    muls = [Multiplier("w1:w0*x", "ConvMac", 25, m, count=pz // 2 * ns,
                       note=f"{pz // 2} lane pairs x {ns} {'slots' if units else 'banks'}: two {m} x {m}-bit "
                            f"mantissa products per DSP")
            if packed(net.params) else
            Multiplier("x*w", "ConvMac", m, m, count=pz * pc,
                       note=f"{pz} lanes x {pc} banks: {m} x {m}-bit mantissa products")]
    if any(op.kind == "lut" for op in net.ops):        # netbfp rule bfp_table's tables, a copy per bank
        bufs.append(Buffer("kLut", "net_top", "array", 8 if tables["lut_entry_bits"] <= 8 else 16,
                           (pc, len(tables["luts"])), partition=((1, "complete"),), static=True,
                           note="the tables of BFP values, a copy per bank"))
    if tables.get("prelu") is not None:                # rule bfp_prelu (.prelu): the slopes per bank, Q products
        words = tables["prelu"][0].shape[1]
        bufs.append(Buffer("kPSlope", "net_top", "array", 25, (pc, words), partition=((1, "complete"),),
                           static=True, note="a PRelu's slope mantissa per channel, a copy per bank (rule bfp_prelu)"))
        bufs.append(Buffer("kPExp", "net_top", "array", 12, (pc, words), partition=((1, "complete"),),
                           static=True, note="its exponent"))
        muls.append(Multiplier("prelu", "LutPixels", m, 25, count=pc,
                               note="PRelu per channel on pairs: m x the slope's mantissa per bank"))
    # rule bfp_hardswish: Q products (and / 3)
    if any(op.kind == "lut" and op.f.get("exact") and op.f.get("fn") != "PRelu" for op in net.ops):
        w = tables["hs_w"]
        muls.append(Multiplier("hswish", "LutPixels", w + 1, 2 * w + 3, count=pc,
                               note="HardSwish on pairs: xs (xs + 3 2^d) per bank"))
    from .anymean import mean_fields
    mf = mean_fields(net)
    if mf["has_mean"]:                                  # rule bfp_mean: floor(u / d) by a reciprocal per bank
        muls.append(Multiplier("mean", "ConvMac", mf["mean_cap_bits"], mf["mean_recip_bits"], False, False,
                               count=pc, note=f"a mean's mantissa: u x reciprocal of {mf['mean_div']} per bank"))
    from .anymean import cat_fields
    cf = cat_fields(net)
    if cf["has_meancat"]:                               # rule bfp_mean_concat: a part's mantissa x its factor per bank
        muls.append(Multiplier("meancat", "ConcatPixels", ELEM_BITS, cf["cat_scale_bits"], True, False, count=pc,
                               note="a concat of means: a part's mantissa x L / d per bank (anymean rule bfp_mean_concat)"))
    if any(op.kind == "gate" for op in net.ops):       # rule bfp_gate: Q mantissa products
        g = tables["gate_bits"]
        muls.append(Multiplier("gate", "GatePixels", g, g, count=pc, note="a channel gate: map x gate per bank"))
    from .attnkern import buffers as attn_buffers      # attention on pairs: its ROMs and products
    ab, am = attn_buffers(net, tables)
    return bufs + ab, muls + am


#: LUT rules of the datapath model (:func:`datapath`), the layer kernels' (a LUT per bit of a
#: carry-chain adder, subtractor or ``|.|``; a magnitude compare two bit pairs per LUT6 into the
#: carry chain, an equality three; a 2:1 select two bits per LUT6, sharing the select; a
#: shifter's stage a 4:1 multiplexer per output bit, :func:`hlsnn.engines.shift_mac.spec.shifter_luts`
#: where the output grows with the shift) and one more: a leading-one encoder of ``n`` bits (a
#: priority tree to its index) one LUT per input bit.
X_BITS = 12           # exponent arithmetic (hlsnn::exp_wide_t)


def _sel(n):
    """LUTs of a 2:1 select of ``n`` bits."""
    return -(-n // 2)


def _mux(n):
    """LUTs per bit of an ``n``:1 multiplexer: a tree of 4:1 multiplexers, one LUT6 each."""
    luts = 0
    while n > 1:
        n = -(-n // 4)
        luts += n
    return luts


def _cmp(n):
    """LUTs of an ``n``-bit magnitude compare."""
    return -(-n // 2)


def _stages(bits, max_shift):
    """LUTs of a logarithmic shifter whose every stage is ``bits`` wide (a result truncated to
    its operand's width), by ``0 .. max_shift``."""
    import math
    s = math.ceil(math.log2(max_shift + 1)) if max_shift > 0 else 0
    return bits * (s // 2) + _sel(bits) * (s % 2)


def lshift_luts(w, o, max_shift):
    """LUTs of a logarithmic left shifter of a ``w``-bit value by ``0 .. max_shift`` into ``o``
    bits (:func:`hlsnn.engines.shift_mac.spec.shifter_luts`' stages, each as wide as the value
    and the largest shift reached so far, at most ``o``)."""
    import math
    sel = math.ceil(math.log2(max_shift + 1)) if max_shift > 0 else 0
    luts, b = 0, 0
    while b < sel:
        take = 2 if sel - b >= 2 else 1
        width = min(o, w + min(max_shift, (1 << (b + take)) - 1))
        luts += width if take == 2 else -(-width // 2)
        b += take
    return luts


def srs_luts(wi, wo, right_max, left_max):
    """LUTs of ``hlsnn::ShiftRoundSat<wi, wo>`` (hls/include/hlsnn/primitives.h) as written: the
    right shift of ``wi + 3`` bits by up to ``right_max`` (at most ``wi + 1``), the rounding's
    mask and remainder, its compare and tie test against the half, the increment; the left
    shift by up to ``left_max`` (at most ``wo``) into ``wi + wo + 2`` bits; the select between
    them, the two saturation compares and the clamp."""
    from ....resources import shifter_luts
    w, t = wi + 3, wi + wo + 2
    right = _stages(w, min(right_max, wi + 1))
    rnd = w + _cmp(w) + -(-w // 3) + w
    left = shifter_luts(wi, min(left_max, wo))
    return right + rnd + left + _sel(t) + 2 * _cmp(t) + wo


def datapath(net, tables):
    """``{part: (LUT, FF)}`` outside the memories and DSPs, counted from what the kernel
    instantiates (``P`` lanes, ``Q`` banks, ``M`` mantissa bits, ``A`` acc_bits, ``sb`` a patch
    sum's bits, ``E`` = 54-bit wide mantissas, ``X`` = 12-bit exponents; the LUT rules above).
    An op family's part is counted only where the kernel renders its loop
    (:func:`hlsnn.engines.bfp_systolic.network.perf.families` of the descriptor rows, the
    template's booleans): ``maxpool`` (and ``wpool``, ``oddpool``: its loop's) with a max or
    average pool, ``add`` with a residual Add or a global pool. The parts:

    * ``conv_exp`` (``ConvExp``, ``2Q`` elements a cycle; not rendered where every conv reads a
      leading-one map, the tables' ``has_exp``): per element the source select (act
      or pool buffer, ``C + 10`` bits), ``|m|`` (``C``), its leading one (``C``), the exponent
      add (``X``), the zero test (``C/6``) and its ``kLow`` select, the bank window's two
      compares (``kTapC0 <= j < kTapC``, 8 bits); the balanced max tree of
      ``2Q - 1`` compare-selects and the compare-select with the carried maximum (``X`` bits
      each); the clamp (``3X``); per tap (two) the address adder and the padding tests;
    * ``conv_mac_banks`` (``ConvMac``, ``Q``): the source select, the exponent difference
      (``X``), the patch rounding ``ShiftRoundSat<C, M>`` (:func:`srs_luts`); ``C``, the convs'
      source, is an element's ``W`` = kElemBits mantissa bits (a global pool's sums
      are held rounded to odd, ``pool_odd``), or ``E`` in a program with a mean over a count
      with an odd factor (rule bfp_mean reads a pool's exact sums);
    * ``conv_mac_lanes`` (``P``): the adder tree of ``Q`` products (``sb`` each) and the
      accumulator; the bias alignment ``ShiftRoundSat<M, A>``, the saturating add (``3A``) and
      ReLU (``A/2``); the max rule's ``|v|``, leading one and exponent add (``2A + X``), the
      lane's share of the balanced tree over the ``P`` lanes (one compare-select of ``X``);
      the write path's exponent difference, the output ``ShiftRoundSat<A, M>`` and the lane
      window's compare (``l >= zfirst``, a pack of groups' first output);
    * ``conv_pack`` (``P / 2 x Q`` DSPs, a packed kernel's, ``net_pack``): per DSP the split of
      its product into the two lanes' (:data:`PACK_LUT`, :data:`PACK_FF`);
    * ``maxpool`` (``Q``): rule bfp_pool's exact compare (``Greater``): per operand ``|m|``, its
      leading one, the exponent add and the left-aligning shifter (``E`` bits by 0..53), then
      the magnitude compare and equality, the leading ones' compare and the signs; the running
      value's select and the first tap's (64 bits each);
    * ``add`` (``kA`` = ``net_add`` lanes, ``Q`` unless a board-sized kernel takes a block in
      ``Q / kA`` parts; then per lane each operand's select of its part's bank, ``W + 10`` bits
      from ``Q / kA``): per operand ``AlignExact`` of the element as it is (``|m|`` and its
      leading one of the element's ``W`` = kElemBits mantissa bits, the exponent difference and
      bound compare, the left shifter of ``W`` bits by ``0 .. O - 1`` into ``O`` =
      kExactBits + 1 bits: a term below ``2**53``), the smaller exponent's
      compare-selects (``2X``) and the pool's (``X``), the exactness test (two ``|.|`` of ``O``
      and their sum), the sum (``O + 1``), ReLU, the pool's sum and magnitude adders (``2 x``
      pool bits, run on unreset), their values at the channel's first pixel (two registers of
      pool bits with an enable) and the two subtractors that give the channel's sums, and the
      output element's select (``W + 10``);
    * ``wpool`` (``Q``, a program with an average pool or a bilinear upsample,
      :mod:`hlsnn.engines.network.pools.linpool`): four ``AlignExact`` (the term and its magnitude,
      the running sum and magnitudes' sum realigned to a smaller exponent), their two adders
      (``E + 1``), the exponent compare and selects, the bound compare and the output select;
    * ``oddpool`` (``Q``, a program with CBAM's channel mean, netbfp rule bfp_round_odd of
      :mod:`~hlsnn.engines.bfp_systolic.network.reduce`: ``RoundOdd``): ``|s|`` and its leading
      one (``E`` each), the shift count's compare and subtract (``2X``), the right shifter
      (``E`` bits by ``0 .. E - K``), the sticky test's mask of the dropped bits (a decoder to
      ``E`` bits, the AND) and its OR (``E / 6``), the negation (``E``) and the output select
      (64), and the pool bound's select;
    * ``oddgate`` (``Q``, a program with a gate of two tables' outputs, netbfp rule bfp_gate_odd of
      :mod:`~hlsnn.engines.bfp_systolic.network.gatero`: the gate loop's ``RoundOdd`` on the wide
      product): ``oddpool``'s parts but the pool bound's select;
    * ``pool_odd`` (a program with a global pool and no rule bfp_mean mean, ``AddPoolOdd``,
      one word a cycle): one ``RoundOdd`` (``oddgate``'s parts) and the ``Q``:1 multiplexer of
      the 64-bit word it reads from the bank (the write goes to every bank, one enabled); with
      maps the pool's map (:mod:`.expmap`): the rounded word's ``ELop``, the live-channel compare
      and select and the carried maximum's compare-select;
    * ``conv_map`` (a kernel with leading-one maps, ``net_maps``, :mod:`.expmap`): the exponent
      side's map address and padding tests (as a tap of ``conv_exp``), its compare-select with
      the carried maximum and the clamp; per lane the output mantissa's ``|m|`` and leading one
      (``M`` each) and the exponent add (``X``), the balanced tree over the ``P`` lanes and the
      compare-select with the pixel's maximum so far;
    * ``add_map`` (a kernel with leading-one maps and a residual Add, :func:`.expmap.add_writes`):
      per lane the leading one of the element it writes (``|m|`` and its leading one of ``W``
      bits, the exponent add, the zero test and its ``kLow`` select), the live-channel compare
      and its select; the tree over the ``kA`` lanes, the first part's select and the
      compare-select with the word read;
    * ``add_fused`` (a board-sized kernel whose program fuses a residual Add into a conv's write
      path, :mod:`.fuse`; ``F`` = :data:`FUSE_LANES` lanes): per
      lane its result's select from the block's ``P / F`` parts (``A + X`` bits), the exponent
      difference and the output ``ShiftRoundSat<A, M>``, the shortcut element's OR of the part's
      ``Q / F`` banks (``W + 10`` bits), rule bfp_add's ``AlignExact`` of the ``M``-bit output and of
      the ``W``-bit shortcut into ``W`` bits (``|m|``, its leading one, the exponent add and bound
      compare, the left shifter), the zero tests, the smaller exponent's two compare-selects and its
      select, the exactness test (two ``|.|`` of ``W`` and their sum), the sum (``W + 1``) and ReLU;
      with maps the written element's ``ELop``, the live-lane compare and select and the tree over
      the ``F`` lanes; per bank the read enable's compare and the select between the two write
      paths' values (``W + 10``);
    * ``load_map`` (the unfolded image load's map, :func:`.expmap.load_map`; ``kw`` the stem's
      taps across): per value of the pair the leading one of the float32 word (the exponent
      field's zero test and ``- 127``, the fraction's zero test, its leading one (23 bits) and
      ``- 149``, two selects), the channel maximum's first-pass select and compare-select; the
      window's shift selects (``kw - 1``), the two map words' ``kw - 1`` compare-selects each,
      the row's last word's ``kw - 1`` and the slot's select; the ``omap`` address adder, the two
      map addresses and the row-end and last-channel compares;
    * ``lut_9g`` (``Q``, tables of codes of several widths, netbfp rule bfp_wide_codes): the saturation of
      the ``kLutBits``-bit code to the op's ``b`` bits, two compares and two selects;
    * ``axi``, ``control``: the allowances of :mod:`hlsnn.engines.shift_mac.network.perf`.

    Flip-flops: the pipeline registers of each part's widest values (a model too)."""
    from .widths import ELEM_BITS, EXACT_BITS, WIDE_BITS as E
    pz, pc, sb = tables["pz"], tables["pc"], tables["sum_bits"]
    w, o = tables.get("elem_bits", ELEM_BITS), EXACT_BITS + 1     # an Add's elements, its aligned terms
    m, a = net.params["mantissa_bits"], net.params["acc_bits"]
    x = X_BITS
    pool = tables.get("pool_bits", E + 8)
    ops = getattr(net, "ops", ())
    from .anymean import mean_fields
    c = E if ops and mean_fields(net)["has_mean"] else w     # the convs' source: elements, or rule bfp_mean's sums
    elem = _sel(c + 10) + c + c + x + -(-c // 6) + _sel(x) + 2 * _cmp(8)      # and the bank window [c0, c)
    exp_tree = 2 * pc * (_cmp(x) + _sel(x))             # 2Q - 1 in the tree, one with the carried value
    conv_exp = (2 * pc * elem + exp_tree + x + 2 * _cmp(x) + 2 * (32 + 4 * _cmp(16)), 2 * pc * (c + x) + 2 * pc * x)
    mac_bank = (_sel(c + 10) + x + srs_luts(c, m, 63, m), c + 2 * m)
    units = tables.get("units")              # .slots: ns rounders and products a lane, the reads' selects
    ns = slot_count(pc) if units else pc
    tree = sum(n * b for n, b in lane_tree(ns)) if packed(net.params) else ns * sb   # packed: levels' widths
    kw = write_lanes(pz, units)              # the write path's lanes a cycle (.slots: parts of a block)
    mac_lane = (tree + sb + srs_luts(m, a, 63, a) + 3 * a + -(-a // 2)   # tree, accumulator, bias, AddSat, ReLU
                + 2 * a + x + (_cmp(x) + _sel(x))                           # the max rule: leading one, its tree
                + (x + srs_luts(a, m, 63, m) + _cmp(8)) * kw // pz,         # the write path (kw of the P lanes)
                3 * sb + 3 * a + 2 * x + m)
    greater = 2 * (E + E + x + _stages(E, 53)) + _cmp(E) + -(-E // 3) + _cmp(x) + 8
    maxpool = (greater + 2 * _sel(64), 2 * 64)
    align = E + E + x + _cmp(x) + _stages(E + 1, 53)          # the wide AlignExact (a pool window's sum)
    add_align = w + w + x + _cmp(x) + lshift_luts(w, o, o - 1)
    add = (2 * add_align + 3 * (_cmp(x) + _sel(x)) + 2 * o + (o + 1) + (o + 1) + -(-(o + 1) // 2) + 2 * pool
           + 2 * pool + _sel(w + 10), 2 * (o + 1) + 4 * pool + 2 * x)
    ka = add_lanes(net.params, pc)            # the Add's lanes, each picking its pair from pc / ka banks
    kh = pc // ka
    pick = 0 if kh == 1 else 2 * (_sel(w + 10) if kh == 2 else (w + 10) * _mux(kh))
    has = families(tables)                    # the op families the kernel renders
    parts = {**({"conv_exp": conv_exp} if tables.get("has_exp", True) else {}),
             "conv_mac_banks": (pc * mac_bank[0], pc * mac_bank[1]) if not units else _slot_banks(pc, ns, c, m, x),
             # .slots: the write path's kw lanes pick the part's results (A + X bits from P / kw), per bank its part's test
             **({"conv_write": (kw * (a + x) * _mux(pz // kw) + pc * _cmp(8), kw * (a + x))} if kw < pz else {}),
             "conv_mac_lanes": (pz * mac_lane[0], pz * mac_lane[1]),
             **({"conv_pack": (pz // 2 * ns * PACK_LUT, pz // 2 * ns * PACK_FF)} if packed(net.params) else {}),
             **({"maxpool": (pc * maxpool[0], pc * maxpool[1])} if has["has_pool"] else {}),
             **({"add": (ka * (add[0] + pick), ka * add[1])} if has["has_add"] else {}),
             "axi": (2 * AXI_MASTER[0] + AXI_LITE[0], 2 * AXI_MASTER[1] + AXI_LITE[1]), "control": CONTROL}
    if any(op.kind == "avgpool" for op in getattr(net, "ops", ())):     # the pool loop's exact sum (netlinpool rule avg_pool)
        wpool = 4 * align + 2 * (E + 1) + _cmp(x) + 2 * _sel(x) + _cmp(E) + _sel(64)
        parts["wpool"] = (pc * wpool, pc * (2 * E + x + 1))
    if any(op.kind == "avgpool" and op.f.get("odd") for op in getattr(net, "ops", ())):   # rule bfp_round_odd's RoundOdd
        from .reduce import ODD_BITS
        odd = E + E + 2 * _cmp(x) + _stages(E, E - ODD_BITS) + E + _sel(E) + -(-E // 6) + E + _sel(64) + _sel(8)
        parts["oddpool"] = (pc * odd, pc * (E + x))
    if any(op.kind == "gate" and op.f.get("odd") for op in getattr(net, "ops", ())):   # rule bfp_gate_odd: RoundOdd
        from .reduce import ODD_BITS
        odd = E + E + 2 * _cmp(x) + _stages(E, E - ODD_BITS) + E + _sel(E) + -(-E // 6) + E + _sel(64)
        parts["oddgate"] = (pc * odd, pc * (E + x))
    if ops and pool_odd(net):                # AddPoolOdd, one RoundOdd and the banks' multiplexer
        from .reduce import ODD_BITS
        odd = E + E + 2 * _cmp(x) + _stages(E, E - ODD_BITS) + E + _sel(E) + -(-E // 6) + E
        # with maps the pool's map (.expmap): ELop of the rounded word (W bits), the live-channel
        # compare and select, one compare-select on the loop-back
        gmap = (w + w + x + -(-w // 6) + _sel(x) + _cmp(16) + _sel(x) + _cmp(x) + _sel(x)) if tables.get("maps") else 0
        parts["pool_odd"] = (odd + 64 * _mux(pc) + gmap, 64 + 64 + x + (x if gmap else 0))
    if tables.get("maps"):                   # .expmap: the exponent side and the write side's leading ones
        parts["conv_map"] = (2 * (32 + 4 * _cmp(16)) + x + _cmp(x) + _sel(x) + 3 * x       # address, padding, max, clamp
                             + kw * (m + m + x) + (kw - 1) * (_cmp(x) + _sel(x)) + _cmp(x) + _sel(x)
                             # .slots: the pair's second word: its address adder, padding tests, the two maxima's
                             + (32 + 2 * _cmp(16) + _cmp(x) + _sel(x) if units else 0),
                             32 + 3 * x + pz * x + (x if units else 0))
    if tables.get("maps") and has["has_add"]:   # .expmap.add_writes: the Add writes its output's map
        ka_ = add_lanes(net.params, pc)
        lop = w + w + x + -(-w // 6) + _sel(x)                       # ELop of the element: |m|, leading one, +e
        parts["add_map"] = (ka_ * (lop + _cmp(8) + _sel(x)) + (ka_ - 1) * (_cmp(x) + _sel(x))   # the window, kLow
                            + _sel(x) + _cmp(x) + _sel(x), ka_ * x + 2 * x)           # first part, the compare-select
    if tables.get("fuse"):                   # .fuse: rule bfp_add in the conv's write path, FUSE_LANES lanes
        kf = FUSE_LANES
        orr = -(-(pc // kf - 1) // 5)                                # an OR of Q / F words, five more inputs a LUT6
        lane = ((a + x) * _mux(pz // kf) + x + srs_luts(a, m, 63, m) + (w + 10) * orr
                + (m + m + x + _cmp(x) + lshift_luts(m, w, w - 1)) + (w + w + x + _cmp(x) + lshift_luts(w, w, w - 1))
                + -(-m // 6) + -(-w // 6) + 2 * (_cmp(x) + _sel(x)) + _sel(x)
                + 2 * w + (w + 1) + (w + 1) + _sel(w + 1)
                + ((w + w + x + -(-w // 6) + _sel(x)) + _cmp(8) + _sel(x) if tables.get("maps") else 0))
        tree = (kf - 1) * (_cmp(x) + _sel(x)) + 2 * _sel(x) if tables.get("maps") else 0
        parts["add_fused"] = (kf * lane + tree + pc * (_cmp(8) + _sel(w + 10)),
                              kf * ((a + x) + 2 * (w + 10) + 2 * (w + 1) + x) + pc * (w + 10))
    if tables.get("load_map"):               # .expmap.load_map: the image's map in the unfolded load
        kw, cs = tables.get("unfold_kw", 3), _cmp(x) + _sel(x)
        flop = -(-8 // 6) + x + -(-23 // 6) + 23 + x + 2 * _sel(x)
        parts["load_map"] = (2 * (flop + _sel(x) + cs) + (kw - 1) * _sel(x) + 3 * (kw - 1) * cs + _sel(x)
                             + 16 + 2 * 16 + 2 * -(-16 // 3),           # the addresses, two equality compares
                             (kw + 1) * x + x + 2 * x + 2 * 16 + 16)    # window, tail, the pair's maxima, addresses
    if tables.get("lut_mixed"):              # netbfp rule bfp_wide_codes: per bank the code's two compares and selects
        k = tables["lut_bits"]
        parts["lut_9g"] = (pc * (2 * _cmp(k + 1) + 2 * _sel(k)), 0)
    from .attnkern import logic as attn_logic
    if any(getattr(op, "kind", "") in ("gather", "actmm", "softmax", "plnorm") for op in getattr(net, "ops", ())):
        parts["attention"] = attn_logic(net, tables)
    return parts


def slot_count(pc):
    """The products of a lane a cycle in the slot schedule (:mod:`.slots`): three units of ``pc / 2``."""
    return 3 * (pc // 2)


#: a packed lane's product: ``|w x| <= 2**14`` (mantissas in ``[-128, 127]``), 16 bits signed
PROD_BITS = 16


def lane_tree(q) -> list:
    """A packed lane's adder tree of its ``q`` products a cycle, level by level as the kernel writes
    it (``network.cpp.j2``, ``lane_tree``): ``[(sums, bits)]``, level ``k`` (from 1) the ``ceil(n / 2)``
    pairwise sums of the ``n`` values of the level before (an odd last one passed on), each
    ``PROD_BITS + k`` bits: a sum of at most ``2**k`` products below ``2**14`` in magnitude lies below
    ``2**(14 + k)``, so every level is exact (:func:`hlsnn.resources.adder_levels`, as
    :func:`hlsnn.engines.sparse_cluster.netsize.tree4`)."""
    from ....resources import adder_levels
    return adder_levels(q, PROD_BITS)


def _slot_banks(pc, ns, c, m, x):
    """``conv_mac_banks`` of the slot schedule (:mod:`.slots`): per bank the even word's source select
    (act or the pool buffer) and the select of the tap's element by the address's parity (units 0 and
    1); per slot of unit 2 its element, a 4:1 select of the four (even, odd word of either half) by
    the cycle's pair and the pair's parity; per slot the exponent difference and the patch rounding
    ``ShiftRoundSat<C, M>``; per bank its live-channel compare (``k < kUN``, 8 bits); per half the
    read's address adders (``a``, ``(a + 1) >> 1``), its padding tests and the second tap's (``16``-bit
    compares)."""
    lut = (pc * 2 * _sel(c + 10) + pc // 2 * (c + 10) * _mux(4) + ns * (x + srs_luts(c, m, 63, m))
           + pc * _cmp(8) + 2 * (2 * 32 + 6 * _cmp(16)))
    return lut, pc * 2 * (c + 10) + ns * (c + 2 * m)


def resources(net, tables, ps):
    """``{"bram36", "uram", "lut", "ff", "dsp", "buffers", "logic"}`` (as :func:`hlsnn.engines.shift_mac.network.perf.resources`)."""
    import math
    from ....resources import build
    m = build(*buffers(net, tables), ps)
    logic = datapath(net, tables)
    return {"bram36": math.ceil(m.bram36), "uram": m.uram, "lut": m.lut + sum(v[0] for v in logic.values()),
            "ff": m.ff + sum(v[1] for v in logic.values()), "dsp": m.dsp, "buffers": m.buffer_rows(),
            "logic": {k: {"lut": v[0], "ff": v[1]} for k, v in logic.items()}}
