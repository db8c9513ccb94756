"""The sparse_cluster network kernel sized to the board (issue 48, ``net_shape: board``).

Why this engine: of the three network kernels, sparse_cluster's multiplies int8 activations by
int8 weights (``fixed`` and ``sparse`` formats, within a point of float on ResNet-8), keeps the
weights resident and compressed (a zero weight, or a tap no lane of a block needs, costs no
cycle), and its lanes are plain ``int8 x int8`` products, which pack two to a DSP48 and can be
built from LUTs beside the DSPs. shift_mac's products are shifts (no DSP at all: it cannot use
the DSPs), and bfp_systolic's network kernel runs BFP with a shared exponent per block.

**Shape.** ``P`` output lanes (``net_lanes``: the config's ``max_z``), ``B = P`` physical
activation banks (channel ``c`` in bank ``c mod B``, :func:`hlsnn.engines.network.kernel.allocate`)
and ``S`` read ports per bank (``net_sub``): the ping-pong activation buffers hold ``S``
replicas of each bank (every write goes to all ``S``, a load reads its own), so ``Q = B * S``
*virtual banks* read ``Q`` taps a cycle. Lane ``l``'s slot ``j`` multiplies virtual bank
``j``'s value by the lane's weight for that tap (no select: slot ``j`` is bank ``j``'s), so a
step is ``P * Q`` products. The step schedule (:func:`schedule`): per block of ``P`` outputs,
each physical bank's taps that some lane of the block needs (a non-zero weight) in order;
step ``k``'s virtual bank ``(r, b)`` (index ``r * B + b``) reads bank ``b``'s tap ``k * S +
r``. A block takes ``max_b ceil(n_b / S)`` steps (``n_b`` bank ``b``'s needed taps) a pixel, the
fewest any schedule with ``S`` reads per bank can take for each pixel apart; with ``net_bits: 4`` a
block may stream its output rows instead (:func:`block_steps`: a row's pixels one after another in
each bank's reads, ``ceil(OW T / S)`` steps a row; :func:`stream_plan` picks the blocks).

**Products.** Lanes ``2i`` and ``2i + 1`` take the same value at slot ``j``: their two
products share it, and for the first ``K`` slots (``net_pack``) one DSP48 forms both: its A
port takes ``w1 * 2**16 + w0`` (25 bits: a DSP48E1's A port and pre-adder, 27 on a DSP48E2),
its B port the activation, and the fabric splits the 33-bit product exactly (the low 16 bits
as signed are ``w0 * x``, ``|w0 * x| <= 2**14``; the rest plus that field's sign is ``w1 *
x``). The other ``Q - K`` slots of every lane are LUT-built multipliers (``BIND_OP impl =
fabric``): :data:`FABRIC_MUL_LUT` LUTs each.

**Sizing** (:func:`size`, at config load): ``K`` is the most slots whose ``P/2 * K`` DSPs stay
within :data:`hlsnn.resources.MARGINS` of the board's DSPs, and ``S`` the largest (up to
:data:`MAX_SUB`) whose kernel, by :func:`estimate` (the same resource model ``hlsnn perf``
reports, at :data:`NOMINAL_STEPS` steps, :data:`NOMINAL_WORDS` words a bank and the widest step
table word such a program can need, :func:`nominal_tap_bits`), keeps LUT, FF, BRAM and DSP within
:data:`hlsnn.resources.MARGINS` (:data:`~hlsnn.resources.FIT_SHARE`, 90% of each): the margins the fit check (:func:`hlsnn.resources.within_margins`,
``hlsnn perf``'s "fits", ``hlsnn compile``'s refusal, :mod:`hlsnn.network.fit`) applies, so the nominal kernel
the sizer accepts passes the check. A program larger than the nominal one (more steps or words, or extra
rules' logic) is checked on its own figures: ``hlsnn compile`` refuses it when it is over (naming the
largest ``net_sub`` whose kernel holds that program, :func:`hlsnn.network.fit.network_fix`). The figures are the model's, not a
synthesis report. A config may set ``net_sub`` above the sizer's pick for programs smaller than the
nominal one, and ``net_wlut`` (default 0) puts each lane's last weight words a step in LUT ROMs
(:func:`buffers`): block RAM for the replicas at the LUTs' cost (``sparse4net_pynq-z2``: four reads a
bank, one word).
"""
from __future__ import annotations

import math

import numpy as np

#: LUTs of one LUT-built int8 x int8 signed product: FINN's estimate of a Vivado LUT multiplier,
#: ``(2 * ceil((W + A) / 6) - 1) * (W + A)`` = 80 (``MVAU_hls.lut_estimation``); yosys 0.23 maps
#: the same product to 128-182 LUTs (``benchmarks/yosys_primitives.py``, docs/models.md). It was
#: 72, ``(8 + 1) * 8``, below both references, until issue 83. A model figure, not a synthesis result
FABRIC_MUL_LUT = 80
#: the most read ports (replicas) per bank: a 3x3 kernel's 9 taps of one channel in one step
MAX_SUB = 9
#: the steps (ResNet-8 takes 160 at two replicas) and the words a bank (one RAMB18 at 9 bits) the sizing assumes
NOMINAL_STEPS = 256
NOMINAL_WORDS = 2048
#: a lane's sum's bits the sizing assumes (ResNet-8 fixed8 needs 23)
NOMINAL_SUM_BITS = 24
#: net_bits 4 (:mod:`hlsnn.engines.sparse_cluster.lowbit`): LUTs of one LUT-built int4 x uint4 product, FINN's
#: estimate ``(2 * ceil((4 + 4) / 6) - 1) * (4 + 4)`` = 24 (yosys: ``benchmarks/yosys_primitives.py``); a
#: lane's sum's bits the sizing assumes (products of at most 105; ResNet-8 W4A4 needs 17); LUTs and FFs per DSP
#: of the packed quad: the four weights' 25-bit word (three 4-bit fields shifted, as the pair's pre-adder
#: cannot place four), the signs ``w < 0 and x != 0`` and the three 7-bit field corrections of the split
FABRIC_MUL4_LUT, FABRIC_MUL4_FF = 24, 8
NOMINAL_SUM_BITS4 = 18
PACK4_LUT, PACK4_FF = 36, 32
#: net_bits 4 with signed or 8-bit inputs (``net_x: s5``, a program's, :func:`lowbit.modes
#: <hlsnn.engines.sparse_cluster.lowbit.modes>`): a LUT-built int4 x int5 product, FINN's estimate
#: ``(2 * ceil((4 + 5) / 6) - 1) * (4 + 5)`` = 27 (yosys 0.23: 29 to 44, ``benchmarks/yosys_primitives.py``);
#: per DSP the signs' extra terms (``w != 0``, ``x != 0``, an XOR; yosys: 0 to 4 LUTs over the unsigned
#: quad's); per virtual bank the nibble select (``x``, ``x >> 4``, ``x & 15``: 8 LUTs)
FABRIC_MUL4S_LUT, PACK4S_LUT, NIB_LUT = 27, 36 + 4, 8
#: LUTs per DSP of the packed pair: the split's add of the low field's sign (17 bits); the packed
#: weight ``w1 * 2**16 + w0`` is the DSP's pre-adder's (D + A, 25 bits on a DSP48E1)
PACK_LUT, PACK_FF = 17, 33


def size(p, board, source=None, sub=None) -> dict:
    """``{net_lanes, net_banks, net_sub, net_pack}`` for ``board`` (module docstring); ``sub``
    the config's ``net_sub`` when it gives one (then only ``K`` is sized)."""
    from ...resources import MARGINS, within_margins
    pz = int(p["max_z"])
    bits = int(p.get("net_bits") or 8)
    per = 4 if bits == 4 else 2                       # lanes a DSP serves: a quad of int4 products, a pair of int8
    if pz % per:
        from ...errors import ConfigError
        raise ConfigError(source, "sparse_cluster.max_z", pz,
                          f"must be a multiple of {per} with net_shape: board" +
                          (" and net_bits: 4 (lane quads share a DSP)" if bits == 4 else " (lanes pair on a DSP)"))
    res = board.resources
    dsp = int(MARGINS["dsp"] * res["dsp"])
    extra = {"net_bits": 4} if bits == 4 else {}
    for s in ([sub] if sub else range(MAX_SUB, 0, -1)):
        shape = dict(net_lanes=pz, net_banks=pz, net_sub=s, net_pack=min(pz * s, dsp // (pz // per)), **extra)
        if sub:
            return shape
        e = estimate(shape, board.ps, NOMINAL_STEPS, NOMINAL_WORDS, NOMINAL_WORDS,
                     NOMINAL_SUM_BITS4 if bits == 4 else NOMINAL_SUM_BITS, 24, tap_bits=sum(nominal_tap_bits(p)),
                     stream=bits == 4)        # net_bits 4: the nominal program streams (block_steps)
        if within_margins(e, res, ("lut", "ff", "bram36", "dsp")):
            return shape
    return dict(net_lanes=pz, net_banks=pz, net_sub=1, net_pack=min(pz, dsp // (pz // per)), **extra)


def chunks(shape) -> int:
    """A lane's weight words a step (``kChunks``): its ``Q`` slots, sixteen int4 or eight int8 a 64-bit word."""
    return -(-shape["net_banks"] * shape["net_sub"] // (16 if shape.get("net_bits") == 4 else 8))


def products(shape) -> str:
    """The sized kernel's products a cycle and their packing, as ``hlsnn perf`` prints them."""
    pz, q, k = shape["net_lanes"], shape["net_banks"] * shape["net_sub"], shape["net_pack"]
    four = shape.get("net_bits") == 4
    per = 4 if four else 2
    signed = shape.get("net_x") == "s5"
    what = ("four int4 x int5 products a DSP48 (net_bits 4, signed inputs; int8 inputs in two nibbles)" if signed
            else "four int4 x uint4 products a DSP48 (net_bits 4)") if four else "two int8 x int8 products a DSP48"
    lut = (FABRIC_MUL4S_LUT if signed else FABRIC_MUL4_LUT) if four else FABRIC_MUL_LUT
    return (f"{pz} lanes x {q} slots = {pz * q} products a cycle: {pz * k} in {pz // per * k} DSPs ({what}), "
            f"{pz * (q - k)} LUT-built ({lut} LUTs each)")


def tap_lists(codes, pc, pz):
    """Per block of ``pz`` outputs of one conv op's weights ``codes`` (Z, ncb*pc, kh, kw): its
    weights ``wb`` and per bank the list of taps ``(cb, ky, kx)`` some lane of the block needs."""
    z, cc, kh, kw = codes.shape
    ncb = cc // pc
    out = []
    for b0 in range(0, z, pz):
        wb = np.asarray(codes[b0:b0 + pz], np.int64)
        out.append((wb, [[(cb, ky, kx) for cb in range(ncb) for ky in range(kh) for kx in range(kw)
                          if np.any(wb[:, cb * pc + b, ky, kx])] for b in range(pc)]))
    return out


def schedule(codes, pc, sub, pz):
    """The steps of one conv op's weights ``codes`` (Z, ncb*pc, kh, kw) on ``pc`` banks with
    ``sub`` reads each: per block of ``pz`` outputs a list of ``(taps, weights)``, ``taps`` one
    ``(cb, ky, kx)`` or None per virtual bank ``r * pc + b``, ``weights`` (lanes, pc*sub) the
    lanes' weights of those taps (module docstring)."""
    return [[st[:2] for st in block_steps(wb, lists, pc, sub, pz)] for wb, lists in tap_lists(codes, pc, pz)]


def period(lists) -> int:
    """``T``: the most taps one bank of a block reads for a pixel (at least 1)."""
    return max(1, max(len(t) for t in lists))


def stream_steps(t, sub, ow) -> int:
    """The table steps of a block of period ``t`` streamed with ``sub`` reads a bank (:func:`block_steps`):
    a period of ``lcm(t, sub) / sub`` steps when a row's ``ceil(ow t / sub)`` steps are whole periods, else
    the row's: a row's last step is always the table's last, so a block ends there and the next block's
    table follows it (the kernel needs no table of blocks' starts)."""
    per, row = t // math.gcd(t, sub), -(-ow * t // sub)
    return per if row % per == 0 else row


def row_steps(t, sub, ow, stream) -> int:
    """A block's steps for one output row of ``ow`` pixels: ``ceil(ow t / sub)`` streamed, else
    ``ow ceil(t / sub)`` (each pixel its own steps)."""
    return -(-ow * t // sub) if stream else ow * -(-t // sub)


def block_steps(wb, lists, pc, sub, pz, stream=None):
    """The steps of one block (its weights ``wb``, its banks' tap ``lists``): ``[(taps, weights,
    last, split, wrap)]``. Plain (``stream`` None): ``ceil(T / sub)`` steps a pixel, read ``r`` of
    bank ``b`` in step ``k`` its tap ``k sub + r``; ``last`` (the pixel's outputs are done) and
    ``wrap`` (the table's next step is the block's first) on the last step, ``split`` = ``sub``.

    **Streamed** (``stream`` = ``(ow, sw)``, ``T = period(lists) >= sub``): the pixels of an output
    row follow one another in each bank's stream of reads with no gap, bank ``b``'s position ``i``
    the tap ``i mod T`` of the row's pixel ``i // T`` (a bank with fewer taps reads nothing at the
    rest), so a row takes ``ceil(ow T / sub)`` steps, not ``ow ceil(T / sub)``. As ``T >= sub``, a
    step holds the end of at most one pixel: its reads ``r < split`` are the current pixel's, the
    others the next one's (``last``: the current pixel ends in this step). The next pixel of a row
    is ``sw`` input columns on: its taps are the current pixel's at ``kx + sw`` (an address ``sw``
    higher), so the kernel reads every tap from the current pixel's window. The table holds
    :func:`stream_steps` steps (the pattern repeats every ``lcm(T, sub)`` positions) and every row
    starts again at the block's first step, its last step's reads of a next pixel discarded."""
    q = pc * sub
    t = period(lists)
    n = stream_steps(t, sub, stream[0]) if stream else -(-t // sub)
    steps = []
    for k in range(n):
        taps = [None] * q
        w = np.zeros((pz, q), np.int64)
        cur = k * sub // t if stream else 0
        end = t * (cur + 1) - k * sub if stream else (sub if k + 1 == n else sub + 1)   # reads left in the pixel
        for b in range(pc):
            for r in range(sub):
                i = (k * sub + r) % t if stream else k * sub + r
                if i < len(lists[b]):
                    cb, ky, kx = lists[b][i]
                    w[:wb.shape[0], r * pc + b] = wb[:, cb * pc + b, ky, kx]
                    nxt = stream and (k * sub + r) // t > cur
                    taps[r * pc + b] = (cb, ky, kx + stream[1]) if nxt else (cb, ky, kx)
        steps.append((taps, w, int(end <= sub), min(end, sub), int(k + 1 == n)))
    return steps


def stream_plan(blocks, sub, n_plain, cols=64):
    """Which blocks to stream (:func:`block_steps`): ``blocks`` ``[(key, T, oh, ow)]``; a block with
    ``T > sub`` and ``T`` not a multiple of ``sub`` saves ``oh (ow ceil(T / sub) - ceil(ow T / sub))``
    cycles for ``stream_steps - ceil(T / sub)`` more table steps. The step table and each lane's
    LUT weight words are LUTRAM ROMs of ``cols``-word columns: the blocks that save the most cycles
    a step are streamed while the table stays within the columns the plain table fills
    (``ceil(n_plain / cols)``), so streaming costs no LUT ROM column. The keys chosen, a set."""
    cand = []
    for key, t, oh, ow in blocks:
        if t > sub and t % sub:
            extra = stream_steps(t, sub, ow) - -(-t // sub)
            gain = oh * (row_steps(t, sub, ow, False) - row_steps(t, sub, ow, True))
            if gain > 0:
                cand.append((-gain / max(extra, 1), key, extra))
    room = cols * max(1, -(-n_plain // cols)) - n_plain
    chosen = set()
    for _, key, extra in sorted(cand, key=lambda c: (c[0], str(c[1]))):
        if extra <= room:
            chosen.add(key)
            room -= extra
    return chosen


#: net_bits 4: a product's bits (``|w * x| <= 112 < 2**7``: the quad's fields, the LUT products)
PROD4_BITS = 8


def tree4(q) -> list:
    """net_bits 4: a lane's adder tree of its ``q`` products a step, level by level as the kernel
    writes it (``network.cpp.j2``, ``kBits4``): ``[(sums, bits)]``, level ``k`` (from 1) the
    ``ceil(n / 2)`` pairwise sums of the ``n`` values of the level before (an odd last one passed
    on), each ``PROD4_BITS + k`` bits: a sum of at most ``2**k`` products of magnitude below ``2**7``
    lies below ``2**(7 + k)`` in magnitude, so every level is exact (:func:`hlsnn.resources.adder_levels`)."""
    from ...resources import adder_levels
    return adder_levels(q, PROD4_BITS)


def split_logic(shape, sum_bits) -> tuple:
    """``(LUT, FF)`` per lane of a streamed program's split (net_bits 4, :func:`block_steps`): the
    reads ``r >= split`` masked (``S - 1`` sums of the tree's per-read level, ``kPc`` slots each) and
    summed (``S - 2`` adders two bits wider), the pixel's sum ``tot - nx`` and the accumulator's
    third input (``sb`` bits each), and the pixel's sum registered (``sb`` FFs)."""
    sub, pc = shape["net_sub"], shape["net_banks"]
    lvl = dict(enumerate(tree4(pc * sub), 1)).get(max(1, pc.bit_length() - 1), (0, PROD4_BITS))[1]
    return (sub - 1) * lvl + max(0, sub - 2) * (lvl + 2) + 2 * sum_bits, sum_bits


#: net_bits 4, the image load two pixels a cycle (:func:`hlsnn.engines.sparse_cluster.network.kernel.load_pairs`):
#: per physical bank the second pixel's column (a 10-bit add and the wrap's compare and select), its
#: address add (10 bits), its value's zero select (8) and the second port's write data select (8)
LOAD_PAIR_LUT, LOAD_PAIR_FF = 2 * 10 + 10 + 8 + 8, 16


def logic(shape, sum_bits, add_bits, add_pairs=None, stream=False, load_pairs=False, adds=(True, False)) -> dict:
    """``{part: (LUT, FF)}`` of the sized kernel's logic outside its memories and DSPs, with
    ``P`` lanes, ``B`` banks, ``Q = B * S`` virtual banks, ``K`` packed slots, ``sb`` a lane's
    sum's bits, ``wb`` a residual sum's: the LUT-built products (``P * (Q - K)`` of
    :data:`FABRIC_MUL_LUT`); per DSP the packed weight and the split (:data:`PACK_LUT`); per lane
    the adder tree of ``Q`` products into the accumulator (``Q * sb``, registered at every
    level; with ``net_bits: 4`` each level's adders at its own width, :func:`tree4`, then the
    ``sb``-bit accumulator) and the epilogue (bias add, rounding shifter ~ ``4 * sb``, clamps); per virtual bank
    its tap's address (two 32-bit adds) and padding test (four 8-bit compares) and the zero
    select; per physical bank the write data select, the residual Add (as the layer-rule
    kernel's; twice with ``add_pairs``, two pixels a cycle: default ``S >= 2``); the AXI and
    control allowances of :mod:`hlsnn.engines.shift_mac.network.perf`; with ``stream`` (a program
    with streamed blocks, net_bits 4) each lane's split (:func:`split_logic`); with ``load_pairs`` the
    image load's second pixel a cycle (:data:`LOAD_PAIR_LUT` a bank); ``adds``: ``(the Add loop is
    rendered, some Add is fused into its conv)`` (net_bits 4, :mod:`~hlsnn.engines.sparse_cluster.network.fuseadd`):
    without the loop no bank has the Add's logic, and a fused Add gives each lane the Add's (as a bank's,
    ``7 wb``, its pool register ``wb`` and its shortcut word's address add, 16)."""
    from ..network.perf import AXI_LITE, AXI_MASTER, CONTROL
    pz, pc, sub, k = shape["net_lanes"], shape["net_banks"], shape["net_sub"], shape["net_pack"]
    q, sb, wb = pc * sub, sum_bits, add_bits
    fused = (pz * (3 * wb + 4 * wb + wb + 16), pz * 2 * wb) if shape.get("net_bits") == 4 and adds[1] else None
    adds = (2 if (sub >= 2 if add_pairs is None else add_pairs) else 1) if adds[0] else 0
    fabric = pz * (q - k)
    four = shape.get("net_bits") == 4                 # lane quads: four int4 products a DSP (lowbit)
    dsps = pz // (4 if four else 2) * k
    mul, pack = ((FABRIC_MUL4_LUT, FABRIC_MUL4_FF), (PACK4_LUT, PACK4_FF)) if four else \
        ((FABRIC_MUL_LUT, 16), (PACK_LUT, PACK_FF))
    signed = four and shape.get("net_x") == "s5"     # lowbit: int4 x int5, signs of both, the nibble select
    if signed:
        mul, pack = (FABRIC_MUL4S_LUT, FABRIC_MUL4_FF), (PACK4S_LUT, PACK4_FF)
    vb = 2 * 32 + 4 * 8 + 8 + (NIB_LUT if signed else 0)
    # a lane's tree: Q sums of sb bits (int8), or (net_bits 4) its levels' adders (tree4) and the accumulator's add
    tree = sum(n * b for n, b in tree4(q)) + sb if four else q * sb
    out = {"split sums": tuple(pz * v for v in split_logic(shape, sb))} if four and stream else {}
    if load_pairs:
        out["load pairs"] = (pc * LOAD_PAIR_LUT, pc * LOAD_PAIR_FF)
    if fused:
        out["fused adds"] = fused
    return {**out, "fabric products": (fabric * mul[0], fabric * mul[1]), "dsp packing": (dsps * pack[0], dsps * pack[1]),
            "trees": (pz * tree, pz * tree), "epilogues": (pz * (sb + 4 * sb + sb + 16 + 16), pz * (sb + 8)),
            "virtual banks": (q * vb, q * (32 + 16 + 8)),
            "banks": (pc * (16 + adds * (3 * wb + 4 * wb)), pc * (24 + adds * 2 * wb)),
            "axi": (2 * AXI_MASTER[0] + AXI_LITE[0], 2 * AXI_MASTER[1] + AXI_LITE[1]), "control": CONTROL}


def nominal_tap_bits(p):
    """The sizing's step table word: :func:`tap_bits` of the widest tap a program within the
    nominal kernel can have, an offset ``NOMINAL_WORDS - 1`` (a tap's address in its bank,
    ``cb*h*w + ky*w + kx``, is below the bank's words) at kernel position ``max_ksize - 1``."""
    k = int(p.get("max_ksize") or 1) - 1
    return tap_bits([([(NOMINAL_WORDS - 1, k, k)], 1)])


def tap_bits(steps):
    """The sized kernel's step table word (``NetTap``): ``(o, k, k)``, ``o`` the signed bits of
    the largest tap offset, ``k`` the unsigned bits of the largest kernel row or column (at least
    1): the fields hold every step's taps exactly."""
    taps = [tp for st in steps for tp in st[0] if tp is not None]
    o = max(max(tp[0], -tp[0] - 1).bit_length() for tp in taps) + 1
    k = max(1, max(max(tp[1], tp[2]) for tp in taps).bit_length())
    return o, k, k


def buffers(shape, n_steps, act_words, sc_words, n_blocks, load=(3, 128), add_pairs=None, sc_bits=8, act_bufs=2,
            tap_bits=32, stream=False):
    """The sized kernel's arrays and multipliers as :mod:`hlsnn.resources` rows (the C++'s
    declarations and BIND_STORAGE pragmas); ``load``: the image's words (banks, words a bank);
    ``sc_bits``: a shortcut word's width (wider with a chained Add's sum, ``kScBits``); ``act_bufs``:
    the activation buffers (3 where two do not hold the network, :func:`hlsnn.engines.network.kernel.allocate`);
    ``tap_bits``: a step table word's width (a program's ``NetTap``, :func:`tap_bits`; the
    sizing's :func:`nominal_tap_bits`)."""
    from ...resources import Buffer, Multiplier
    pz, pc, sub, k = shape["net_lanes"], shape["net_banks"], shape["net_sub"], shape["net_pack"]
    q = pc * sub
    four = shape.get("net_bits") == 4                 # lowbit: sixteen int4 weights a word
    nw, wl = chunks(shape), int(shape.get("net_wlut") or 0)   # a lane's words a step; the last wl in LUT ROMs
    t2p = "ram_t2p" if (sub >= 2 if add_pairs is None else add_pairs) else "ram_s2p"   # the Add's two pixels a cycle
    bufs = [Buffer("act", "net_top", "array", 8, (act_bufs, q, act_words), partition=((1, "complete"), (2, "complete")),
                   static=True, storage=t2p, note=f"ping-pong activation buffers: {pc} channel banks x {sub} replicas"),
            Buffer("sc", "net_top", "array", sc_bits, (pc, sc_words), partition=((1, "complete"),), static=True, storage=t2p,
                   note="shortcut buffer, channel banks"),
            Buffer("kTaps", "net_top", "array", tap_bits, (q, n_steps), partition=((1, "complete"),), static=True,
                   impl="lutram", note="the step table: per virtual bank its tap's offset, ky, kx (LUTRAM ROMs)"),
            Buffer("kLast", "net_top", "array", 8, (n_steps,), static=True,
                   note="a pixel's last step (net_bits 4: the wrap and the split too)"),
            Buffer("kW", "net_top", "array", 64, (pz, nw - wl, n_steps), partition=((1, "complete"), (2, "complete")),
                   static=True, impl="bram", used=nw > wl, note="resident weights, " + ("sixteen slots' int4" if four
                                                                    else "eight slots' int8") + " a 64-bit word, per lane"),
            Buffer("kWl", "net_top", "array", 64, (pz, wl, n_steps), partition=((1, "complete"), (2, "complete")),
                   static=True, impl="lutram", used=wl > 0, note=f"each lane's last {wl} weight words a step in LUT "
                   "ROMs (net_wlut)"),
            Buffer("kBias", "net_top", "array", 32, (pz, n_blocks), partition=((1, "complete"),), static=True),
            Buffer("kShift", "net_top", "array", 8, (pz, n_blocks), partition=((1, "complete"),), static=True),
            Buffer("kWinBase", "net_top", "array", 32, (n_blocks,), static=True, note="per block: its window's base"),
            Buffer("buf", "LoadImage", "array", 64, tuple(load), partition=((1, "complete"),), static=True,
                   note="the image's 64-bit words (a bank per channel with the unfolded load)")]
    if shape.get("net_bits") == 4:                    # lowbit: w3:w2:w1:w0 (7 bits apart) times a uint4
        muls = [Multiplier("w3:w2:w1:w0*x", "NetMac", 25, 4, b_signed=False, count=pz // 4 * k,
                           note=f"{pz // 4} lane quads x {k} slots: four int4 x uint4 products per DSP")]
        return bufs, muls
    muls = [Multiplier("w1:w0*x", "NetMac", 25, 8, count=pz // 2 * k,
                       note=f"{pz // 2} lane pairs x {k} slots: two int8 x int8 products per DSP")]
    return bufs, muls


def estimate(shape, ps, n_steps, act_words, sc_words, sum_bits, add_bits, n_blocks=64, load=(3, 128),
             add_pairs=None, sc_bits=8, act_bufs=2, tap_bits=32, stream=False, load_pairs=False, adds=(True, False)):
    """``{"lut", "ff", "bram36", "uram", "dsp", "model", "logic"}`` of the sized kernel (``stream``: a
    program with streamed blocks, :func:`block_steps`)."""
    from ...resources import build
    m = build(*buffers(shape, n_steps, act_words, sc_words, n_blocks, load, add_pairs, sc_bits, act_bufs, tap_bits,
                       stream), ps)
    lg = logic(shape, sum_bits, add_bits, add_pairs, stream, load_pairs, adds)
    return {"lut": m.lut + sum(v[0] for v in lg.values()), "ff": m.ff + sum(v[1] for v in lg.values()),
            "bram36": math.ceil(m.bram36), "uram": m.uram, "dsp": m.dsp, "model": m, "logic": lg}
