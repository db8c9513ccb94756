"""The ``bfp_systolic`` config section: schema, cross-field rules, resource estimates, and the
flat values the Jinja2 templates receive."""
from __future__ import annotations

import math

from ...config import Field
from ...engine_registry import register
from ...errors import ConfigError
from ...primitives import ROUNDING_CODES

NAME = "bfp_systolic"
TOP = "bfp_systolic_top"
#: ID register magic: 'H' 'N' (hlsnn), engine 0x01, protocol version 0x01.
MAGIC = 0x484E0101
#: Magnitude bits the statistics unit keeps per output (see emulator.select_exponent).
STAT_BITS = 16
#: The rolling method stores leading-one positions L as L + ROLL_OFFSET, non-negative in 10 bits
#: (``|L| <= 2 * 128 + 47`` for exponents of at most 8 bits and accumulators of at most 48).
ROLL_OFFSET = 512

SCHEMA = {
    "rows": Field("int", "DSP tiles per column = output channels per pass", lo=1, hi=64),
    "cols": Field("int", "array columns = input samples per pass", lo=1, hi=64),
    "mantissa_bits": Field("int", "signed mantissa width (DSP ports take 18 bits)", lo=2, hi=16),
    "exponent_bits": Field("int", "signed shared-exponent width", default=8, lo=3, hi=8),
    "acc_bits": Field("int", "tile accumulator width (a DSP48 accumulates 48 bits)", default=48, lo=8, hi=48),
    "max_k": Field("int", "longest reduction length K of one pass: the stores hold samples and weight tiles of "
                   "max_k; a longer K runs in passes with on-chip partial sums, up to k_limit", default=1024,
                   lo=1, hi=65536),
    "max_n": Field("int", "largest number of outputs N", default=1024, lo=1, hi=8192),
    "max_batch": Field("int", "largest batch (loop trip counts only)", default=65536, lo=1, hi=1 << 24),
    "weight_exponent": Field("choice", "exponent sharing of the weights", default="row",
                             choices=("row", "tensor")),
    "rounding": Field("choice", "rounding of every right shift in the kernel", default="nearest_even",
                      choices=tuple(ROUNDING_CODES)),
    "output_exponent": Field("choice", "default output-exponent method (a register selects it per call)",
                             default="max", choices=("max", "stats", "rolling")),
    "stats_k": Field("int", "k of mean + k*sigma for the stats and rolling methods", default=3, lo=0, hi=15),
    "rolling_len": Field("int", "rolling method: block maxima the prediction looks back on (Alg 1-E)",
                         default=8, lo=1, hi=64),
    "underflow_bits": Field("int", "rolling method: unused top mantissa bits a predicted exponent may leave "
                            "before it is corrected (Alg 1-F underflow)", default=2, lo=0, hi=15),
    "stream_bits": Field("int", "AXI-Stream width; default: the board's DMA width", default=None,
                         lo=32, hi=512, pow2=True),
    "x_depth": Field("int", "activation store: words (one beat of mantissas) per column; default "
                     "max(2, beats per weight step) samples of max_k per column (the groups that hide a "
                     "weight tile's load)", default=None, lo=1, hi=1 << 20),
    "y_depth": Field("int", "result store: wide results per column (a multiple of the lanes per beat); "
                     "default as many samples of max_n per column as x_depth's default", default=None,
                     lo=1, hi=1 << 22),
    "w_depth": Field("int", "weight store: steps (2*rows mantissas) on chip, at least two tiles of max_k "
                     "(ping-pong); more keeps a layer resident; default two tiles", default=None, lo=2, hi=1 << 20),
    "weight_banks": Field("int", "weight store banks (cyclic by step, two read ports each): with more than one, "
                          "a resident batch-1 call splits K across 2*weight_banks columns, each reading its "
                          "own bank and port (GEMV mode); a power of two, at most cols/2", default=1, lo=1, hi=32),
    "dsp_packing": Field("bool", "two products per DSP: rows 2D and 2D+1 share the sample mantissa, so one DSP "
                         "multiplies both weights at once (half the DSPs, the accumulators in fabric); rows even, "
                         "mantissa_bits at most 8 on DSP48E2 and 7 on DSP48E1", default=False),
    "net_shape": Field("choice", "network kernel (hlsnn compile): 'layer' (8 lanes x 16 banks, a DSP a product) or "
                       "'board' (lanes, banks and DSP packing sized to the board: hlsnn.engines.bfp_systolic.netsize)",
                       default="layer", choices=("layer", "board")),
    # derived with net_shape: board (hlsnn.engines.bfp_systolic.netsize.size); a compiled model keeps them
    "net_lanes": Field("int", "net_shape board: the network kernel's output lanes (default: sized)", default=None,
                       lo=2, hi=64, pow2=True),
    "net_banks": Field("int", "net_shape board: its channel banks (default: sized)", default=None, lo=2, hi=64,
                       pow2=True),
    "net_pack": Field("int", "net_shape board: 1 where lanes 2i and 2i+1 share a DSP48 (two products each; "
                      "mantissa_bits at most 8), 0 a DSP a product (default: sized)", default=None, lo=0, hi=1),
    "net_maps": Field("int", "net_shape board: 1 where a conv takes its patch exponents from the leading-one map its "
                      "source's writer wrote (a conv, a residual Add, the pool, the unfolded image load), beside its "
                      "products (hlsnn.engines.bfp_systolic.network.expmap), 0 from the exponent pass (default: sized)", default=None, lo=0, hi=1),
    "net_add": Field("int", "net_shape board: the residual Add's channels a cycle, a divisor of net_banks (default: "
                     "sized)", default=None, lo=1, hi=64, pow2=True),
    "net_slots": Field("int", "net_shape board: 1 where each lane takes 3 x net_banks / 2 products a cycle over "
                       "(tap, channel) slots, two adjacent taps of half the banks read in one cycle "
                       "(hlsnn.engines.bfp_systolic.network.slots; needs net_pack and net_maps), 0 one tap of "
                       "net_banks channels (default: 0)", default=None, lo=0, hi=1),
}

#: Pipeline stages of a shadow row's post in ``Steps`` (perf/bfp_systolic.py's depth table):
#: the result-store read (2), the partial-sum add (1), the saturating bias add and ReLU (1),
#: the leading-one detector and running maximum (1), the write (1), counted from the read
#: stage: the write of iteration i completes in stage POST_DEPTH - 1, so a read of the same
#: word (``run_*``, ``ybuf``, ``o_exp``, all ``DEPENDENCE inter false``) in stage 0 of
#: iteration j sees it only when j - i >= POST_DEPTH (the strict C-simulation's required
#: distance, :data:`RAW_REQUIRED`).
POST_DEPTH = 7
#: Steps per group are at least rows + POST_GAP (kernel: kPostGap), and more than cols: a
#: sample's running state is read back POST_GAP + 1 iterations after its write at the least,
#: and a complete group's output beats start POST_GAP + 1 iterations after its last post.
#: POST_DEPTH plus one stage of margin (a depth table that is one stage short stays safe).
POST_GAP = POST_DEPTH
#: Stages from a weight beat's stream read to the weight store's write of the step it
#: completes (the read, the step assembly register, the write: the write completes in stage 2),
#: so the compute's read (stage 0) of a step written in iteration i sees it from i + 3 on.
W_DEPTH = 3
#: Iterations from a weight step's write to the first compute read of it (kernel: kWGap, the
#: delay line of the loader's progress): W_DEPTH plus one stage of margin.
W_GAP = W_DEPTH + 1
#: GEMV mode: stages from a sample beat's stream read in ``Steps`` to the activation store's
#: write of its word (the read, the lane masking register, the write: the write completes in
#: stage 2, as ``ReadSampleBeats``' depth 3 says), so a column's read (stage 0) of a word
#: written in iteration i sees it from i + 3 on.
X_DEPTH = 3
#: GEMV mode: iterations from a sample word's write to the first tile's first read of it
#: (kernel: kXGap, the delay line of the beats read): X_DEPTH plus one stage of margin.
X_GAP = X_DEPTH + 1
#: Read-after-write distances (in ``Steps`` iterations) of the arrays declared ``DEPENDENCE inter
#: false``, as the depth table of :mod:`hlsnn.perf.bfp_systolic` implies them; the strict
#: C-simulation (``HLSNN_MEM``) holds every checked read to them. ``wstore``, ``xstore``: written
#: at stage 2 (:data:`W_DEPTH`, :data:`X_DEPTH`; the kernel leaves :data:`W_GAP`, :data:`X_GAP`);
#: ``wexp``, ``wexp_o``, ``xexp``: no assembly register, 2; ``run_*``, ``ybuf``, ``o_exp``: read at
#: stage 0, written at stage 6, :data:`POST_DEPTH` (the kernel leaves ``POST_GAP + 1``). ``wexp_o``
#: is read only once a group is complete, GEMV mode's ``xexp`` never in the run that writes it.
RAW_DISTANCE = {"wstore": 3, "wexp": 2, "run": 7, "ybuf": 7, "wexp_o": 2, "o_exp": POST_DEPTH,
                "xstore": X_DEPTH, "xexp": 2}
#: Read-after-write distance each ``DEPENDENCE inter false`` array of ``Steps`` needs
#: (iterations from a write to a read of the same word), for the strict C-simulation.
RAW_REQUIRED = {"wstore": W_DEPTH, "wstore_u": W_DEPTH, "wstore_b": W_DEPTH, "run_lop": POST_DEPTH,
                "run_any": POST_DEPTH, "run_mag": POST_DEPTH, "ybuf": POST_DEPTH, "o_exp": POST_DEPTH,
                "wexp": RAW_DISTANCE["wexp"], "wexp_o": RAW_DISTANCE["wexp_o"], "xstore": X_DEPTH,
                "xexp": RAW_DISTANCE["xexp"]}
#: GEMV mode: output rows posted per cycle at most (kernel: kGemvPost, also at most the lanes)
GEMV_POST = 4


def gemv_post(p) -> int:
    """GEMV mode: rows posted per cycle, to as many distinct result banks (n mod lanes)."""
    return min(GEMV_POST, lanes(p))


def gemv_cols(p) -> int:
    """Columns a resident batch-1 call splits K across: two per weight bank, one on each of
    its ports (1: no GEMV mode)."""
    return 2 * p["weight_banks"] if p["weight_banks"] > 1 else 1


def gemv_lag(p) -> int:
    """GEMV mode: pipeline stages of the adder tree that sums a row's column partial sums
    (kernel: kGemvLag): a tile's shadow rows are posted from this many iterations on."""
    return max(1, math.ceil(math.log2(max(gemv_cols(p), 2))))


def gemv_steps(p, kp: int) -> int:
    """GEMV mode: iterations per weight tile of ``kp`` steps: each column's share of them, and
    at least enough that the tile's rows are posted (:func:`gemv_post` a cycle, after the
    adder tree) before the next tile's sums replace them."""
    return max(math.ceil(kp / gemv_cols(p)), gemv_lag(p) + math.ceil(p["rows"] / gemv_post(p)))


def gemv_applies(p, batch, k) -> bool:
    """Whether a resident call of ``batch`` samples and reduction length ``k`` runs in GEMV
    mode (the kernel's ``gemv``): the config has it, one pass of K, one group of samples, and
    the samples one after another take fewer iterations a tile (``batch * gemv_steps``) than
    the array loop's group of them (``max(kp, min_steps)``)."""
    kp = (k + 1) // 2
    return (gemv_cols(p) > 1 and k <= p["max_k"] and batch <= p["cols"]
            and batch * gemv_steps(p, kp) < max(kp, min_steps(p)))


def samples_in_loop(p, batch, k, resident) -> bool:
    """Whether a call reads its samples in the array loop (the kernel's ``xin``): a resident
    call with GEMV mode in the config (its sample write path), not in GEMV mode, one pass of K,
    and more than one group, so that the later groups' samples stream in while the first ones
    compute (the groups one after another)."""
    return (bool(resident) and gemv_cols(p) > 1 and not gemv_applies(p, batch, k) and k <= p["max_k"]
            and batch > p["cols"])


#: groups one call holds at most: the depth of the per-sample state (xexp, run_*). Only layers
#: with a few words per sample reach it, and ``512 * cols`` samples already make the per-call
#: overhead small; deeper state would cost block RAM that the stores need.
MAX_GROUPS = 512


def min_steps(p) -> int:
    """Steps per group, at least (kernel: kMinSteps): a group's ``rows`` shadow rows are posted,
    one an array cycle from ``cols`` cycles after its last step entered the array, before the next
    group's last step enters (``> cols``), and a sample's running state is written back
    ``POST_GAP + 1`` steps before it is read again (``rows + POST_GAP``)."""
    return max(p["rows"] + POST_GAP, p["cols"] + 1)


def lane_bits(p) -> int:
    """Stream lane width: 8 bits for mantissas up to 8 bits, else 16."""
    return 8 if p["mantissa_bits"] <= 8 else 16


def lanes(p) -> int:
    """Lanes per beat."""
    return p["stream_bits"] // lane_bits(p)


def validate(p: dict, board, source) -> dict:
    """Cross-field rules; fills board-derived defaults. Raises ConfigError."""
    if p["stream_bits"] is None:
        p["stream_bits"] = board.dma["stream_bits"]
    L = lanes(p)
    xw, nw, kp = math.ceil(p["max_k"] / L), math.ceil(p["max_n"] / L), (p["max_k"] + 1) // 2
    if L < 2:
        raise ConfigError(source, f"{NAME}.stream_bits", p["stream_bits"],
                          f"must hold at least two {lane_bits(p)}-bit lanes (one mantissa pair)")
    # The default stores hold the groups that hide a weight tile's load: a tile of kp steps
    # streams in kp * step_beats beats while the previous one computes groups * kp steps.
    g0 = default_groups(p)
    for key, default, least, what in (("x_depth", g0 * xw, xw, "one sample of max_k"),
                                      ("y_depth", g0 * nw * L, nw * L, "one sample of max_n"),
                                      ("w_depth", 2 * kp, 2 * kp, "two weight tiles of max_k (ping-pong)")):
        if p[key] is None:
            p[key] = default
        elif p[key] < least:
            raise ConfigError(source, f"{NAME}.{key}", p[key], f"must be at least {least}: {what}")
    if p["y_depth"] % L:
        raise ConfigError(source, f"{NAME}.y_depth", p["y_depth"],
                          f"must be a multiple of the {L} lanes per beat (one bank per lane)")
    need = 2 * p["mantissa_bits"] - 1 + math.ceil(math.log2(max(p["max_k"], 1)))
    if p["acc_bits"] < need:
        raise ConfigError(source, f"{NAME}.acc_bits", p["acc_bits"],
                          f"must be at least 2*mantissa_bits - 1 + ceil(log2(max_k)) = {need} so that "
                          f"max_k = {p['max_k']} products never overflow; lower max_k or mantissa_bits")
    if p["output_exponent"] == "stats" and p["weight_exponent"] != "tensor":
        raise ConfigError(source, f"{NAME}.output_exponent", "stats",
                          "needs weight_exponent: tensor (one product exponent per output row); "
                          "use output_exponent: max with weight_exponent: row")
    wb = p["weight_banks"]
    if wb & (wb - 1):
        raise ConfigError(source, f"{NAME}.weight_banks", wb,
                          "must be a power of two (a step's bank is the low bits of its address)")
    if wb > 1 and 2 * wb > p["cols"]:
        raise ConfigError(source, f"{NAME}.weight_banks", wb,
                          f"must be at most cols / 2 = {p['cols'] // 2}: in GEMV mode each bank's two read ports "
                          f"serve two columns")
    if p["dsp_packing"]:
        from ...resources import DSP_FAMILIES
        dsp, a_port, _ = DSP_FAMILIES[board.ps]
        if pack_bits(p) > a_port:
            most = (a_port - 2) // 3             # the largest mantissa_bits whose pack_bits fit
            raise ConfigError(source, f"{NAME}.mantissa_bits", p["mantissa_bits"],
                              f"must be at most {most} with dsp_packing on {dsp} (two weights and the gap between "
                              f"them, 3*mantissa_bits + 2 bits, fill its {a_port}-bit A port); turn dsp_packing off")
        if p["rows"] % 2:
            raise ConfigError(source, f"{NAME}.rows", p["rows"],
                              "must be even with dsp_packing (rows 2D and 2D+1 share each DSP)")
    if p["stream_bits"] > board.dma["stream_bits"] * 8:
        raise ConfigError(source, f"{NAME}.stream_bits", p["stream_bits"],
                          f"must be at most 8x the board DMA width ({board.dma['stream_bits']})")
    _net_shape(p, board, source)
    return p


def _net_shape(p, board, source):
    """The network kernel's shape fields (``net_shape: board``: sized by
    :func:`hlsnn.engines.bfp_systolic.netsize.size` unless given; a compiled model records the
    pick, so its config hash does not move with the sizer); absent for 'layer' (the configs'
    hashes stay)."""
    keys = ("net_lanes", "net_banks", "net_pack", "net_add", "net_maps")
    if p["net_shape"] != "board":
        if p.get("net_slots"):
            raise ConfigError(source, f"{NAME}.net_slots", p["net_slots"], "is only read with net_shape: board")
        for k in keys:
            if p.pop(k) is not None:
                raise ConfigError(source, f"{NAME}.{k}", p.get(k), "is only read with net_shape: board")
        p.pop("net_shape")
        p.pop("net_slots", None)
        return
    from . import netsize
    if all(p[k] is None for k in keys):
        p.update(netsize.size(p, board))
    for k, v in netsize.fill(p).items():                          # the rest of a partly given shape
        if p[k] is None:
            p[k] = v
    netsize.check(p, source)
    if not p.get("net_slots"):           # absent unless on (.network.slots): the configs' hashes stay
        p.pop("net_slots", None)


#: Estimated logic (LUT, FF), not synthesis: per tile, per column, and for streams and control.
TILE_LUT, COL_LUT, BASE_LUT, BASE_FF = 40, 250, 3000, 4000


def buffers(ctx) -> tuple:
    """Every array the kernel declares (hls/engines/bfp_systolic/kernel.cpp.j2), by its C++
    name, and its multipliers, from the template context ``ctx``."""
    from ...resources import Buffer, Multiplier
    top, rows, cols, chain = ctx["top"], ctx["rows"], ctx["cols"], ctx["chain"]
    m, e, acc, L, g = ctx["mantissa_bits"], ctx["exponent_bits"], ctx["acc_bits"], ctx["lanes"], ctx["max_groups"]
    complete = ((0, "complete"),)
    pack = ctx["dsp_packing"]
    # chain registers a tile reads, and those before them: row d's weights reach position
    # skew(d) + cols - 1, column c's samples c + skew(rows - 1) (skew: d, or d rounded down to
    # even with dsp_packing, where rows 2D and 2D+1 work on the same step)
    w_live = sum(row_skew(ctx, d) + cols for d in range(rows))
    x_live = sum(c + row_skew(ctx, rows - 1) + 1 for c in range(cols))
    bufs = [
        Buffer("hist", top, "array", 32, (ctx["acc_bits"],), partition=complete, note="statistics unit"),
        Buffer("xstore", top, "array", L * m, (cols, ctx["x_depth"]), partition=((1, "complete"),), static=True,
               note="activation store: one bank per column, a beat of mantissas per word"),
        Buffer("xexp", top, "array", e, (cols, g), partition=((1, "complete"),), static=True),
        Buffer("ybuf", top, "array", acc, (cols, L, ctx["y_words"]), partition=((1, "complete"), (2, "complete")),
               storage="ram_s2p", static=True,
               note="result store: one bank per column and lane; the partial sums between K passes"),
        Buffer("run_lop", top, "array", 12, (cols, g), partition=((1, "complete"),), storage="ram_s2p", static=True,
               note="running output-exponent state per sample"),
        Buffer("run_any", top, "array", 1, (cols, g), partition=((1, "complete"),), storage="ram_s2p", static=True),
        Buffer("run_mag", top, "array", 12, (cols, g), partition=((1, "complete"),), storage="ram_s2p", static=True),
        *_weight_store(ctx, top, 2 * rows * m),
        Buffer("wexp", top, "array", e, (L, ctx["n_words"]), partition=((1, "complete"),), storage="ram_s2p", static=True,
               used=ctx["weight_exponent_per_row"], note="per-row weight exponents (unused with a tensor-wide one)"),
        Buffer("bias", top, "array", m, (L, ctx["n_words"]), partition=((1, "complete"),), static=True),
        Buffer("wexp_o", top, "array", e, (L, ctx["n_words"]), partition=((1, "complete"),), storage="ram_s2p",
               impl="lutram", static=True, used=ctx["weight_exponent_per_row"],
               note="the output beats' copy of the per-row weight exponents (its own read port)"),
        Buffer("o_exp", top, "array", 2 * e, (cols, g), partition=((1, "complete"),), storage="ram_s2p",
               impl="lutram", static=True,
               note="each complete sample's output and sample exponents, for the output beats during the array loop"),
        Buffer("roll_u", top, "array", 10, (ctx["rolling_len"],), partition=complete, static=True,
               note="rolling method's buffer of leading-one positions"),
        Buffer("wch0", top, "array", m, (rows, chain), partition=complete, live=w_live,
               note="weight chains (even products): a skew of d registers (d rounded down to even with "
                    "dsp_packing), then one per tile"),
        Buffer("wch1", top, "array", m, (rows, chain), partition=complete, live=w_live,
               note="weight chains (odd products)"),
        Buffer("xch0", top, "array", m, (cols, chain), partition=complete, live=x_live,
               note="sample chains (even products): a skew of c registers, then one per tile"),
        Buffer("xch1", top, "array", m, (cols, chain), partition=complete, live=x_live,
               note="sample chains (odd products)"),
        Buffer("cch", top, "array", 4, (cols, chain), partition=complete, live=x_live,
               note="control bits beside the samples"),
        Buffer("acc", top, "array", acc, (rows, cols), partition=complete,
               note="tile accumulators (fabric registers with dsp_packing)" if pack
               else "tile accumulators (the second DSP's P register)"),

        Buffer("shv", top, "array", acc, (rows, cols), partition=complete, note="shadow registers"),
        Buffer("cur", top, "array", 25, (cols,), partition=complete, note="the posted samples' running state"),
        Buffer("wide", "PostRow", "array", acc, (cols,), partition=complete),
        Buffer("yr", top, "array", acc, (cols, L), partition=complete,
               note="the words read from the result store's banks in an array-loop cycle"),
        Buffer("yw", top, "array", acc, (L,), partition=complete,
               note="an output beat's words (declared in the array loop and after it; they are never live together)"),
        Buffer("counted", "PostRow", "array", 1, (cols,), partition=complete),
        Buffer("lwd", top, "array", ctx["gidx_bits"], (ctx["w_gap"],), partition=complete,
               note="the loader's progress of the last w_gap iterations: a step issues w_gap after its write"),
    ]
    if ctx["gemv_cols"] > 1:        # GEMV mode (gemv.inc.j2, in the array loop) is rendered only then
        gc = ctx["gemv_cols"]
        bufs += [Buffer("gww", top, "array", 2 * rows * m, (gc,), partition=complete,
                        note="GEMV mode: each column's weight step, read from its bank (the tiles' operands)"),
                 Buffer("gx0", top, "array", m, (cols,), partition=complete,
                        note="each column's first sample mantissa, as read at the mode's address (XRead)"),
                 Buffer("gx1", top, "array", m, (cols,), partition=complete,
                        note="each column's second sample mantissa"),
                 Buffer("xrd", top, "array", 32, (ctx["x_gap"],), partition=complete,
                        note="GEMV mode: the sample beats read as of the last x_gap iterations: the first tile "
                             "reads a word x_gap after its write"),
                 Buffer("xgd", top, "array", ctx["group_bits"] + 1, (ctx["x_gap"],), partition=complete,
                        note="xin (a resident call's samples in the array loop): the groups whose beats are all "
                             "read, as of the last x_gap iterations: a group's steps issue x_gap after its last write"),
                 Buffer("gsh", top, "array", acc, (rows,), partition=complete,
                        note="GEMV mode: a tile's row sums (the adder tree's output)"),
                 Buffer("wide", top, "array", acc, (ctx["gemv_post"],), partition=complete),
                 Buffer("we", top, "array", e, (L,), partition=complete,
                        note="GEMV mode: the posted rows' weight exponents, one read per bank (bank-major)"),
                 Buffer("bi", top, "array", m, (L,), partition=complete,
                        note="GEMV mode: the posted rows' bias mantissas, one read per bank"),
                 Buffer("counted", top, "array", 1, (ctx["gemv_post"],), partition=complete)]
    if ctx["split_acc"]:
        bufs.insert(next(i for i, b in enumerate(bufs) if b.name == "acc") + 1,
                    Buffer("acc1", top, "array", acc, (rows, cols), partition=complete,
                           note="the first DSP's own accumulator (each DSP accumulates its product)"))
    tiles = rows * cols
    if pack:
        muls = [Multiplier("w*x (packed)", "Steps", ctx["pack_bits"], m, count=tiles,
                           note="two tiles (rows 2D, 2D+1 of a column) share two DSPs: each multiplies the sample "
                           "mantissa by both rows' weights packed into its A port (w[2D+1] * 2**(2M+1) + w[2D]); "
                           "the first cascades its product (PCOUT -> PCIN) into the second, which adds it; the "
                           "fabric splits the sum into the two rows' pairs and accumulates them")]
    else:
        muls = [Multiplier("w*x", "Steps", m, m, count=2 * tiles,
                           note="two mantissa products per tile, one per DSP; each DSP accumulates its own "
                                "(P = P + M, the multiply-accumulate Vitis HLS maps), the fabric adds the two "
                                "per group")]
    # GEMV mode (gemv_cols > 1) has no product of its own: it runs in the array loop, whose
    # tiles take its operands through a multiplexer (gemv_lut), so the array's are its DSPs
    R = ctx["rolling_len"]                     # the rolling method's prediction (any weight exponent)
    muls += [Multiplier("u*u", top, 10, 10, False, False, count=R, note="rolling: squares of the buffer's entries"),
             Multiplier("n*S2", top, 7, 27, False, False, note="rolling: n * sum u^2"),
             Multiplier("S1*S1", top, 17, 17, False, False, note="rolling: (sum u)^2"),
             Multiplier("k*sd(rolling)", top, 4, 32, False, False, note="rolling: k * n*sigma")]
    if not ctx["weight_exponent_per_row"]:   # the statistics unit exists only then (use_stats)
        sb = STAT_BITS
        muls += [Multiplier("t*t", "StatSums", sb, sb, False, False, count=L,
                            note="sum of squares, a beat of results a cycle"),
                 Multiplier("cnt*s2", top, 14, 2 * sb + 13, False, False, note="n * sum t^2"),
                 Multiplier("s1*s1", top, sb + 13, sb + 13, False, False, note="(sum t)^2"),
                 Multiplier("k*sd", top, 4, 32, False, False, note="k * n*sigma")]
    return bufs, muls


def _weight_store(ctx, top, width) -> list:
    """The weight store's buffers: one array (``weight_banks: 1``), or the UltraRAM banks and
    the block RAM banks (each declared only when it has a bank)."""
    from ...resources import Buffer
    banks, ub = ctx["weight_banks"], ctx["wstore_uram_banks"]
    if banks == 1:
        return [Buffer("wstore", top, "array", width, (ctx["w_depth"],), storage="ram_s2p",
                       impl="uram" if ub else "auto", static=True, note="weight store: one step per word")]
    out = []
    for name, n, impl, what in (("wstore_u", ub, "uram", "UltraRAM"), ("wstore_b", banks - ub, "auto", "block RAM")):
        out.append(Buffer(name, top, "array", width, (max(1, n), ctx["w_bank_depth"]), partition=((1, "complete"),),
                          storage="ram_t2p", impl=impl, static=True, used=n > 0,
                          note=f"weight store banks in {what} (step a in bank a mod weight_banks), two ports each"))
    return out


def estimate(cfg) -> dict:
    """Resources from the buffers and multipliers the kernel declares (:func:`buffers`,
    mapped by :mod:`hlsnn.resources`) plus a logic estimate (documented, not a synthesis result).

    * DSP: each mantissa product (at most 16 x 16 bits) fits one DSP48 multiplier, two per
      tile, ``rows * cols * 2``; with ``dsp_packing`` one DSP makes two tiles' products,
      ``rows * cols``; the statistics unit (tensor-wide weight exponent only) adds
      its four products, tiled by width.
    * LUT / FF: ``TILE_LUT`` LUTs per tile, ``COL_LUT`` LUTs per column for the
      post-processing shifters, the shadow row multiplexer (``acc_bits`` bits of a ``rows``:1
      multiplexer per column, a 4:1 per LUT), the fabric adder of a tile's two accumulators
      when its group ends (``acc_bits`` LUTs per tile), with ``dsp_packing`` each tile's accumulator
      (``acc_bits`` LUTs: its adder is a carry chain in the fabric), GEMV mode's operand
      multiplexers and adder tree (:func:`gemv_lut`; GEMV mode shares the array's DSPs), ``BASE_LUT`` / ``BASE_FF`` for the stream
      readers, exponent path and control, plus the LUTRAM and register buffers: the weight and
      sample chains (the positions a tile reads), the accumulators and shadows.
    """
    from ... import resources
    p = cfg.params
    tiles = p["rows"] * p["cols"]
    model = resources.build(*buffers(template_context(cfg)), cfg.board.ps)
    macs_per_cycle = 2 * tiles
    step_beats = context_step_beats(p)
    return resources.estimate(
        cfg, model, logic_lut=TILE_LUT * tiles + COL_LUT * p["cols"] + BASE_LUT
        + p["acc_bits"] * p["cols"] * math.ceil((p["rows"] - 1) / 3)
        + (p["acc_bits"] * tiles if split_acc(p, cfg.board) or p["dsp_packing"] else 0) + gemv_lut(p),
        logic_ff=BASE_FF,
        extra={
            "peak_gmacs": macs_per_cycle * cfg.clock_mhz / 1e3,
            "k_limit": k_limit(p),
            "pass_k": pass_k(p),
            # A weight tile streams once per call (kp * step_beats beats) while the previous tile
            # computes groups * kp steps: at the stores' batch of max_k x max_n samples the
            # weight stream bounds the array at groups / step_beats of its peak.
            "stream_bound_gmacs": macs_per_cycle * min(1.0, call_groups(p, p["max_k"], p["max_n"]) / step_beats)
            * cfg.clock_mhz / 1e3,
            "throughput": {"value": macs_per_cycle * cfg.clock_mhz / 1e3, "unit": "GMAC/s",
                           "what": "peak multiply-accumulates per second: 2 per tile per cycle"},
        },
        notes={"lut": f"{tiles} tiles (model) + LUTRAM buffers", "ff": f"{tiles} tiles (model) + register buffers"})


def gemv_lut(p) -> int:
    """LUTs of GEMV mode (0 without it). It runs in the array loop and its products are the
    tiles' (one loop module, one set of DSPs): what it adds is the 2:1 multiplexer in front
    of each operand of the rows * gemv_cols tiles it uses (the chain's register or the
    column's bank word and sample pair: 4 * mantissa_bits bits a tile, 3 * mantissa_bits with
    dsp_packing, whose tile pair has six operands; a LUT a bit, conservatively: a LUT6_2
    makes two) and the adder tree that sums a row's partial sums (rows * (parts - 1) adders of
    acc_bits, a LUT a bit, where parts is gemv_cols, twice that with two accumulators a tile)."""
    gc = gemv_cols(p)
    if gc == 1:
        return 0
    parts = gc if p["dsp_packing"] else 2 * gc
    mux = p["rows"] * gc * (3 if p["dsp_packing"] else 4) * p["mantissa_bits"]
    return p["rows"] * (parts - 1) * p["acc_bits"] + mux


def split_acc(p, board) -> bool:
    """Whether a tile keeps two accumulators, one per DSP (P = P + M, the multiply-accumulate
    Vitis HLS maps on DSP48E1 and DSP48E2 alike; UG1399's DSP matching has no three-input
    P = P + M + PCIN, so a single accumulator of the pair sum would be a fabric adder per
    tile); with ``dsp_packing`` the fabric accumulates, so one accumulator."""
    return not p["dsp_packing"]


def pack_shift(p) -> int:
    """``dsp_packing``: the bit position of row 2D+1's weight in the packed A operand, 2M + 1:
    the low field then holds row 2D's pair sum (at most ``2**(2M-1)`` in magnitude) as a
    signed ``2M + 1``-bit number, so the fabric splits the DSP's sum exactly (kernel comment)."""
    return 2 * p["mantissa_bits"] + 1


def pack_bits(p) -> int:
    """``dsp_packing``: the width of the packed A operand (signed), 3M + 2: row 2D+1's weight at
    :func:`pack_shift` above row 2D's."""
    return pack_shift(p) + p["mantissa_bits"] + 1


def row_skew(ctx, d: int) -> int:
    """Array cycles between a step's injection and tile row ``d`` working on it (plus the
    column): ``d``, or ``d`` rounded down to even with ``dsp_packing`` (rows 2D and 2D+1 share
    the sample mantissa, so they work on the same step)."""
    return d & ~1 if ctx["dsp_packing"] else d


def max_groups(p) -> int:
    """Groups of ``cols`` samples one call holds at most (a sample takes at least one word of
    the activation store and one of each result bank), at most :data:`MAX_GROUPS`."""
    return min(p["x_depth"], p["y_depth"] // lanes(p), MAX_GROUPS)


def exp_beats(p) -> int:
    """Beats of a weight tile's row exponents (0 with a tensor-wide weight exponent)."""
    return math.ceil(p["rows"] / lanes(p)) if p["weight_exponent"] == "row" else 0


def wstore_uram_banks(p, board) -> int:
    """Weight-store banks in UltraRAM. One bank (``weight_banks: 1``): 1 where the board has
    URAM and the store fits 90% of it (``MARGINS``, ``FIT_SHARE``), else 0 (block RAM). More banks: as many
    as fit that budget; the rest are block RAM."""
    from ...resources import MARGINS, uram_for
    budget = MARGINS["uram"] * board.resources.get("uram", 0)
    banks = p["weight_banks"]
    each = uram_for(math.ceil(p["w_depth"] / banks), 2 * p["rows"] * p["mantissa_bits"])
    return min(banks, int(budget // each))


def k_limit(p) -> int:
    """The longest K a call takes: the largest K whose worst-case sum, ``K * 2**(2M-2)``
    (every mantissa ``-2**(M-1)``), fits a signed ``acc_bits`` accumulator, so that the sum
    over all passes is exact (emulator rule 1). Without K tiling (``max_k`` shorter than one
    beat of lanes, :func:`pass_k`) it is ``max_k``."""
    if p["max_k"] < lanes(p):
        return p["max_k"]
    return max(p["max_k"], ((1 << (p["acc_bits"] - 1)) - 1) >> (2 * p["mantissa_bits"] - 2))


def pass_k(p) -> int:
    """K of one full pass when K exceeds ``max_k``: ``max_k`` rounded down to whole beats of
    lanes (even, so a pass holds whole mantissa pairs and its samples whole words)."""
    L = lanes(p)
    return max(L, p["max_k"] // L * L)


def passes(p, k: int) -> list:
    """``[(k0, kq), ...]``: the passes of a call of reduction length ``k`` (the mantissas
    ``k0 .. k0+kq-1`` of every sample and weight row). One pass of ``k`` when ``k <= max_k``;
    else passes of :func:`pass_k` and a last, shorter one."""
    if k <= p["max_k"]:
        return [(0, k)]
    P = pass_k(p)
    return [(k0, min(P, k - k0)) for k0 in range(0, k, P)]


def default_groups(p) -> int:
    """Groups of ``cols`` samples of max_k / max_n the default stores hold: ``max(2, step_beats)``,
    so that a weight tile loads (``kp * step_beats`` beats) while the previous tile computes
    (``groups * kp`` steps)."""
    return max(2, context_step_beats(p))


def call_groups(p, k: int, n: int) -> int:
    """Groups of ``cols`` samples of K = ``k``, N = ``n`` that one call holds (the stores' limit;
    the activation store holds one pass of K, :func:`passes`)."""
    L = lanes(p)
    kq = max(kq for _, kq in passes(p, k))
    return min(p["x_depth"] // math.ceil(kq / L), (p["y_depth"] // L) // math.ceil(n / L), max_groups(p))


def context_step_beats(p) -> int:
    return math.ceil(2 * p["rows"] / lanes(p))


def serial_bits(p) -> dict:
    """Bits of each serial product and quotient of the geometry (kernel: SerialMul, SerialDiv;
    one bit a cycle): the quotients tiles = ceil(N / rows), groups = ceil(B / cols), passes =
    ceil(K / pass_k), slots = w_depth / kp, the tail's want = ceil(cols * nbo / S), and the
    multipliers' widths of kp * step_beats, groups * S, tiles * kp, batch * xb, cols * nbo
    and (GEMV mode) batch * gsteps."""
    L = lanes(p)
    n_tiles = math.ceil(p["max_n"] / p["rows"])
    groups = max_groups(p)
    return {
        "q_tiles_bits": _bits(n_tiles), "q_groups_bits": _bits(groups),
        "q_passes_bits": _bits(math.ceil(k_limit(p) / pass_k(p))),
        "q_slots_bits": _bits(p["w_depth"]),
        "q_want_bits": _bits(p["cols"] * math.ceil((p["max_n"] + 1) / L)),
        "m_step_beats_bits": _bits(context_step_beats(p)), "m_groups_bits": _bits(groups),
        "m_tiles_bits": _bits(n_tiles), "m_batch_bits": _bits(groups * p["cols"]),
        "m_cols_bits": _bits(p["cols"]),
    }


def serial_cycles(p) -> tuple:
    """``(per call, per pass)``: the cycles of the geometry's serial arithmetic (a bit a
    cycle, plus 2 for entering and leaving each function), from :func:`serial_bits`."""
    b = serial_bits(p)
    call = [b["q_tiles_bits"], b["q_groups_bits"], b["q_passes_bits"], b["m_cols_bits"]]
    if gemv_cols(p) > 1:
        call.append(b["m_cols_bits"])
    per_pass = [b["q_slots_bits"], b["q_want_bits"], b["m_step_beats_bits"], b["m_groups_bits"],
                b["m_tiles_bits"], b["m_batch_bits"]]
    return sum(x + 2 for x in call), sum(x + 2 for x in per_pass)


def _bits(n: int) -> int:
    """Bits of an unsigned counter that holds 0 .. n."""
    return max(1, int(n).bit_length())


def template_context(cfg) -> dict:
    """Flat, validated scalars for the templates (no C++ fragments)."""
    p = cfg.params
    lb, L = lane_bits(p), lanes(p)
    sb = context_step_beats(p)
    kp = (p["max_k"] + 1) // 2
    n_tiles = math.ceil(p["max_n"] / p["rows"])
    groups = max_groups(p)
    strict_raw = {f"raw_{k}": v for k, v in RAW_DISTANCE.items()}
    from ..timing import steps_style
    return {
        "steps_style": steps_style(cfg),    # the Steps loop's pipeline style (its stall enable: engines/timing.py)
        **strict_raw,
        **{k: p[k] for k in ("rows", "cols", "mantissa_bits", "exponent_bits", "acc_bits", "max_k",
                             "max_n", "max_batch", "stream_bits", "rounding")},
        "max_k_pairs": kp,
        "max_k_even": 2 * kp,
        "lane_bits": lb,
        "step_beats": sb,
        "step_bits": sb * p["stream_bits"],
        "lanes": L,
        "x_depth": p["x_depth"],
        "y_words": p["y_depth"] // L,
        "w_depth": p["w_depth"],
        "weight_banks": p["weight_banks"],
        "gemv_cols": gemv_cols(p),
        "gemv_post": gemv_post(p),
        "gemv_lag": gemv_lag(p),
        "gemv_steps_max": n_tiles * gemv_steps(p, kp) + gemv_lag(p) + math.ceil(p["rows"] / gemv_post(p))
        + math.ceil((p["max_k"] + 1) / L) + X_GAP,
        "wstore_uram_banks": wstore_uram_banks(p, cfg.board),
        "w_bank_depth": math.ceil(p["w_depth"] / p["weight_banks"]),
        "n_words": math.ceil(p["max_n"] / L),
        "max_groups": groups,
        "max_call_batch": groups * p["cols"],
        "exp_beats": exp_beats(p),
        "post_gap": POST_GAP,
        "w_gap": W_GAP,
        "x_gap": X_GAP,
        # products (one DSP each: mantissas fit the ports, packed A operands too) of the array
        # loop, GEMV mode's too (it multiplexes the tiles' operands), for the strict
        # C-simulation's operator list (HLSNN_OPS)
        "steps_products": p["rows"] * p["cols"] * (1 if p["dsp_packing"] else 2),
        "tile_bits": _bits(n_tiles + 1),
        "step_bits_c": _bits(max(kp, min_steps(p)) + 1),
        "group_bits": _bits(groups + 1),
        "gidx_bits": _bits(n_tiles * kp + 1),
        "waddr_bits": _bits(p["w_depth"] + max(kp, 1) + 1),
        **serial_bits(p),
        "min_steps": min_steps(p),
        "chain": p["rows"] + p["cols"] - 1,
        "split_acc": split_acc(p, cfg.board),
        "dsp_packing": p["dsp_packing"],
        "pack_shift": pack_shift(p),
        "pack_bits": pack_bits(p),
        "out_beats_max": math.ceil((p["max_n"] + 1) / L),
        "sample_beats_max": groups * p["cols"] * math.ceil((p["max_k"] + 1) / L),
        # the steps loop: every step of every group and tile, plus the loads it waits for
        "steps_max": n_tiles * (groups * max(kp, min_steps(p)) + exp_beats(p) + kp * sb) + p["rows"] + p["cols"],
        "n_tiles_max": n_tiles,
        "batch_tiles_max": math.ceil(p["max_batch"] / p["cols"]),
        "weight_exponent_per_row": p["weight_exponent"] == "row",
        "rounding_code": ROUNDING_CODES[p["rounding"]],
        "exp_min": -(1 << (p["exponent_bits"] - 1)),
        "exp_max": (1 << (p["exponent_bits"] - 1)) - 1,
        "stat_bits": STAT_BITS,
        "rolling_len": p["rolling_len"],
        "underflow_bits": p["underflow_bits"],
        "roll_offset": ROLL_OFFSET,
        "log2_max_k": math.ceil(math.log2(max(p["max_k"], 1))),
        "pass_k": pass_k(p),
        "passes_max": math.ceil(k_limit(p) / pass_k(p)),
        "k_limit": k_limit(p),
        "magic": MAGIC,
        "top": TOP,
        "cfg_struct": "BfpSystolicCfg",
        "word_type": "bfp_word_t",
    }


register(NAME, SCHEMA, validate, estimate)       # hlsnn.engine_registry: what config.py reads
