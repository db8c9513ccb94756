"""The ``shift_mac`` config section: schema, cross-field rules, the LUT model, and the flat
values the Jinja2 templates receive."""
from __future__ import annotations

import math

from ...config import Field
from ...engine_registry import register
from ...errors import ConfigError, InputError
from ...primitives import ROUNDING_CODES
from ...resources import shifter_luts  # noqa: F401  (a shift_mac unit's shifters; the model's primitive)

NAME = "shift_mac"
TOP = "shift_mac_top"
#: ID register magic: 'H' 'N' (hlsnn), engine 0x02, protocol version 0x02 (weights once per
#: call, beat-wide parameters and outputs, convolution rows through a line buffer).
MAGIC = 0x484E0202
LANE_BITS = 16
#: Register modes (the ``mode`` register; bit 0 is the unit's config bit).
MODES = {"twohot": 0, "pot": 1, "pot_sum": 3}

SCHEMA = {
    "rows": Field("int", "shift-MAC unit rows: weight registers per step", lo=1, hi=64),
    "cols": Field("int", "unit columns: samples (or output pixels) per pass", lo=1, hi=32),
    "act_bits": Field("int", "activation (and output) width", default=8, lo=2, hi=16),
    "act_signed": Field("bool", "signed activations (else unsigned, e.g. after ReLU)", default=True),
    "exp_bits": Field("int", "weight exponent width: shifts 0 .. 2^exp_bits - 1", default=4, lo=1, hi=5),
    "max_delta": Field("int", "largest extra shift of the two-hot first term", default=7, lo=0, hi=7),
    "acc_bits": Field("int", "accumulator width", default=48, lo=16, hi=62),
    "max_k": Field("int", "largest reduction length K (GEMM K, conv C*k*k)", default=1024, lo=1, hi=65536),
    "max_n": Field("int", "largest number of outputs N (conv: output channels)", default=1024, lo=1, hi=8192),
    "max_batch": Field("int", "largest batch (trip counts only)", default=65536, lo=1, hi=1 << 24),
    "conv": Field("bool", "include the 2-D convolution input stage (a line buffer)", default=True),
    "max_hw": Field("int", "largest feature-map height or width", default=256, lo=1, hi=4096),
    "x_depth": Field("int", "activations held on chip per unit column (GEMM): a call of B samples of K "
                            "holds ceil(B/cols) x ceil(K/x_lanes) x x_lanes of them (x_lanes: activation lanes per "
                            "beat); default 32 x max_k",
                     default=None, lo=1, hi=1 << 22),
    "w_depth": Field("int", "weight steps (one register per unit row) held on chip: a convolution's "
                            "weights or resident weights, tiles x K, must fit; default 4 x max_k",
                     default=None, lo=1, hi=1 << 20),
    "line_depth": Field("int", "line-buffer words per bank (convolution): (ksize + 1) x C x "
                               "ceil(W / banks) must fit", default=4096, lo=1, hi=1 << 20),
    "max_ksize": Field("int", "largest convolution kernel size", default=7, lo=1, hi=11),
    "rounding": Field("choice", "rounding of the output requantization", default="nearest_even",
                      choices=tuple(ROUNDING_CODES)),
    "default_mode": Field("choice", "mode used when a call does not name one", default="twohot",
                          choices=tuple(MODES)),
    "stream_bits": Field("int", "AXI-Stream width; default: the board's DMA width", default=None,
                         lo=32, hi=512, pow2=True),
    "net_shape": Field("choice", "network kernel (hlsnn compile): 'layer' (net_lanes x net_banks as given, by default "
                       "the layer kernel's units) or 'board' (without net_lanes and net_banks: the most units whose kernel "
                       "fits the board, hlsnn.engines.shift_mac.netsize)", default="layer", choices=("layer", "board")),
    "net_lanes": Field("int", "network kernel (hlsnn compile): output channels per cycle; default the "
                              "largest divisor of net_banks not above cols", default=None, lo=1, hi=64),
    "net_banks": Field("int", "network kernel: input channels per cycle, the activation buffers' banks; a "
                              "multiple of net_lanes; default rows", default=None, lo=1, hi=64),
    "max_code": Field("int", "two-hot: the largest code magnitude the quantizer picks (hlsnn.formats.shift's code "
                             "limit; a two-hot magnitude of the format of at least 2^(2^exp_bits - 1)); default none",
                      default=None, lo=1, hi=1 << 20),
    "net_dsp": Field("bool", "network kernel: the upper half of the channel banks multiplies on DSP48s, two lanes' "
                             "products a DSP (hlsnn.engines.shift_mac.network.dsp; needs max_code 128 or less and "
                             "act_bits 8)", default=False),
}


def shifter_bits(p) -> int:
    """Width of a shifter output: the activation shifted left by up to 2^exp_bits - 1."""
    return p["act_bits"] + (1 if not p["act_signed"] else 0) + (1 << p["exp_bits"]) - 1


def acc_bits_needed(p) -> int:
    """Accumulator bits that make overflow impossible: first term (shifter + delta), plus the
    second term (one more bit), plus K products, plus one for the pot_sum adder."""
    return shifter_bits(p) + p["max_delta"] + 1 + math.ceil(math.log2(max(p["max_k"], 1))) + 1


def product_bits(p) -> int:
    """Bits that bound one product ``|x * c|`` (emulator rule 1): ``|x| <= 2**(act_bits - 1)``
    (signed) or ``< 2**act_bits`` (unsigned), ``|c| <= 2**(emax + delta) + 2**emax <=
    2**(emax + max_delta + 1)`` (two-hot; PoT terms and their sums are smaller)."""
    xb = p["act_bits"] - 1 if p["act_signed"] else p["act_bits"]
    return xb + (1 << p["exp_bits"]) - 1 + p["max_delta"] + 1


def k_tiled_limit(p) -> int:
    """The longest K the host's K tiling takes (``shift_mac.tiles``): ``2**(63 - product_bits)``,
    so that the int64 sum of K products of at most ``2**product_bits`` cannot overflow."""
    return 1 << (63 - product_bits(p))


def raw_bits(p) -> int:
    """Bits of a raw output (``FLAG_RAW``, the protocol): the accumulator sign-extended to 32
    bits when ``acc_bits <= 32``, else to 64."""
    return 32 if p["acc_bits"] <= 32 else 64


def lanes(p) -> int:
    """16-bit lanes per stream beat."""
    return p["stream_bits"] // LANE_BITS


def x_lane_bits(p) -> int:
    """Bits of an activation lane: 8 when ``act_bits <= 8`` (signed or unsigned, the values fit
    a byte), else 16."""
    return 8 if p["act_bits"] <= 8 else 16


def x_lanes(p) -> int:
    """Activation lanes per stream beat."""
    return p["stream_bits"] // x_lane_bits(p)


def reg_bits(p) -> int:
    """A weight register: two exponents, two signs, two zero flags, the config bit."""
    return 2 * p["exp_bits"] + 5


def step_beats(p) -> int:
    """Beats of one weight step: ``rows`` 16-bit register lanes, padded to whole beats."""
    return math.ceil(p["rows"] * LANE_BITS / p["stream_bits"])


def lb_banks(p) -> int:
    """Line-buffer banks: ``max(cols, x_lanes)``, so that the ``cols`` pixels a step reads and
    the ``x_lanes`` pixels a beat writes both fall in distinct banks."""
    return max(p["cols"], x_lanes(p))


def x_words(p) -> int:
    """Words (one beat of ``x_lanes`` activations each) per unit column of the GEMM activation store."""
    return math.ceil(p["x_depth"] / x_lanes(p))


def validate(p: dict, board, source) -> dict:
    if p["stream_bits"] is None:
        p["stream_bits"] = board.dma["stream_bits"]
    if p["net_shape"] == "board":         # sized to the board, unless net_lanes or net_banks is given (a compiled
        if p["net_lanes"] is None and p["net_banks"] is None:     # model records the sizer's pick: its hash stays)
            from . import netsize
            p.update(netsize.size(p, board))
    else:
        p.pop("net_shape")                # absent for 'layer': the configs' hashes stay
    for k in ("max_code", "net_dsp"):     # absent unless given: the other configs' hashes stay
        if not p[k]:
            p.pop(k)
    if "max_code" in p:
        from ...formats.shift import _check_limit
        try:
            _check_limit(p["max_code"], "twohot", p["exp_bits"], 0)
        except InputError:
            raise ConfigError(source, f"{NAME}.max_code", p["max_code"],
                              f"must be a two-hot code magnitude at exp_bits {p['exp_bits']} of at least "
                              f"{1 << ((1 << p['exp_bits']) - 1)}") from None
    if p.get("net_dsp") and (p.get("max_code") or 1 << 30) > 128 or p.get("net_dsp") and p["act_bits"] != 8:
        raise ConfigError(source, f"{NAME}.net_dsp", True,
                          "needs max_code 128 or less and act_bits 8 (two products of |w| <= 128 by an int8 "
                          "activation pack into one DSP48E1)")
    if p["net_banks"] is None:
        p["net_banks"] = p["rows"]
    if p["net_lanes"] is None:
        p["net_lanes"] = max(d for d in range(1, min(p["cols"], p["net_banks"]) + 1) if p["net_banks"] % d == 0)
    if p["net_banks"] % p["net_lanes"]:
        raise ConfigError(source, f"{NAME}.net_banks", p["net_banks"],
                          f"must be a multiple of net_lanes = {p['net_lanes']} (a block of output channels is "
                          f"written to distinct activation banks)")
    need = acc_bits_needed(p)
    if p["acc_bits"] < need:
        raise ConfigError(source, f"{NAME}.acc_bits", p["acc_bits"],
                          f"must be at least {need} (act_bits + 2^exp_bits - 1 + max_delta + 2 + "
                          f"ceil(log2(max_k)), sign included) so that no sum can overflow")
    kpad = math.ceil(p["max_k"] / x_lanes(p)) * x_lanes(p)
    if p["x_depth"] is None:
        p["x_depth"] = 32 * kpad
    if p["w_depth"] is None:
        p["w_depth"] = 4 * p["max_k"]
    if p["x_depth"] < kpad:
        raise ConfigError(source, f"{NAME}.x_depth", p["x_depth"],
                          f"must hold one sample group of max_k = {p['max_k']} activations ({kpad}, whole beats)")
    if p["w_depth"] < p["max_k"]:
        raise ConfigError(source, f"{NAME}.w_depth", p["w_depth"],
                          f"must hold one weight tile of max_k = {p['max_k']} steps")
    if p["conv"] and p["max_ksize"] ** 2 > p["max_k"]:
        raise ConfigError(source, f"{NAME}.max_ksize", p["max_ksize"],
                          f"max_ksize^2 must not exceed max_k = {p['max_k']} (one input channel)")
    if p["conv"] and (p["max_ksize"] + 1) * math.ceil(p["max_ksize"] / lb_banks(p)) > p["line_depth"]:
        raise ConfigError(source, f"{NAME}.line_depth", p["line_depth"],
                          f"must hold max_ksize + 1 rows of one channel {p['max_ksize']} pixels wide")
    return p


# ---------------------------------------------------------------------- the LUT model
def unit_luts(p, *, fold_delta=True) -> dict:
    """LUT model of one shift-MAC unit, part by part (documented, not a synthesis result).

    * ``shifter_1`` (31 of the source): the activation (``x_bits``) shifted by ``e1`` (PoT) or
      by ``e1 + delta`` (two-hot: delta folded into the shift amount, one 5-bit adder per unit
      *row*, shared by the row's units), :func:`shifter_luts`;
    * ``shifter_2`` (32): by ``e2``;
    * ``shifter_3`` (33, delta): zero when delta is folded; otherwise a second shifter by
      ``0 .. max_delta`` on shifter 1's output, as the source draws it;
    * ``adder`` (34): add/sub of the two terms, one LUT per bit on the carry chain;
    * ``select``: the first accumulator's operand, ``B`` (two-hot) or ``A`` (PoT) with the zero
      flags, one LUT per bit;
    * ``acc1``, ``acc2``: sign-controlled add/sub with the reset on a config change, one LUT
      per accumulator bit each (the zero flag and the reset fold into the same LUT);
    * ``handover``: the shadow registers that hand a group's accumulators to the drain: each
      bit takes the accumulator (at the group's last step) or the shadow row above (shifting
      toward the FIFO), a 2:1 multiplexer, two bits per LUT6: ``acc_bits`` LUTs for the two.
    """
    xb = p["act_bits"] + (0 if p["act_signed"] else 1)
    emax, d = (1 << p["exp_bits"]) - 1, p["max_delta"]
    w1 = xb + emax + d                       # shifter 1's output, delta included
    parts = {
        "shifter_1": shifter_luts(xb, emax + d) if fold_delta else shifter_luts(xb, emax),
        "shifter_2": shifter_luts(xb, emax),
        "shifter_3": 0 if fold_delta else shifter_luts(xb + emax, d),
        "adder": w1 + 1,
        "select": w1 + 1,
        "acc1": p["acc_bits"],
        "acc2": p["acc_bits"],
        "handover": p["acc_bits"],
    }
    return parts


def lut_per_unit(p, *, fold_delta=True) -> int:
    """LUTs of one unit: the sum of :func:`unit_luts`."""
    return sum(unit_luts(p, fold_delta=fold_delta).values())


def ff_per_unit(p) -> int:
    """Flip-flops of one unit outside the declared buffers (the accumulators and their shadow
    rows are counted as register buffers): the pipeline registers after the two shifters (the
    first as wide as its delta-shifted output)."""
    xb = p["act_bits"] + (0 if p["act_signed"] else 1)
    emax = (1 << p["exp_bits"]) - 1
    return (xb + emax + p["max_delta"]) + (xb + emax)


def requantizer_luts(p) -> int:
    """One output lane of the drain: the pot_sum adder and the bias add, each saturating (two
    LUTs per bit: sum and clamp), ReLU folded, the rounding right shifter by 0..127
    (:func:`shifter_luts` on the accumulator), its rounding increment and the output clamp
    (one LUT per bit each)."""
    a = p["acc_bits"]
    return 2 * a + 2 * a + shifter_luts(a, 127) + 2 * a


def logic_luts(p) -> dict:
    """The logic LUT model outside the buffers (:func:`estimate` adds LUTRAM and SRL):

    * ``units``: ``rows x cols`` x :func:`lut_per_unit`;
    * ``rows``: per unit row the register decode, the delta adder and the config-change test
      (16 LUTs);
    * ``cols``: per unit column the activation select: the GEMM lane multiplexer (x_lanes:1),
      the line-buffer rotation (banks:1) and the GEMM/convolution choice, ``x_bits`` wide, one
      LUT6 per 4:1 multiplexer;
    * ``banks``: per line-buffer bank its read and write address adders (2 x 16 LUTs);
    * ``drain``: ``lanes`` requantizers (:func:`requantizer_luts`) and the column-to-lane
      multiplexer (one LUT per bit of the two accumulators per lane);
    * ``raw_out``: the raw output mode's beat select: each of the ``stream_bits`` output bits
      takes the requantized word or one of the ``raw_bits / 16`` beats of the raw word (the
      lanes' wide values, sign-extended: wiring), a ``(raw_bits/16 + 1):1`` multiplexer;
    * ``stats``: the statistics unit: a priority encoder per lane (``acc_bits`` LUTs) and a
      32-bit saturating counter per bin (40 LUTs);
    * ``base``: :data:`BASE_LUT`, stream reader/writer, loop control and the register file.
    """
    xb = p["act_bits"] + (0 if p["act_signed"] else 1)
    ln, banks = lanes(p), lb_banks(p)
    mux = lambda n: math.ceil(n / 4) if n > 1 else 0  # noqa: E731 - LUT6 count of an n:1 multiplexer
    return {
        "units": p["rows"] * p["cols"] * lut_per_unit(p),
        "rows": 16 * p["rows"],
        "cols": p["cols"] * xb * (mux(x_lanes(p)) + mux(banks) + 1),
        "banks": (32 * banks) if p["conv"] else 0,
        "drain": ln * (requantizer_luts(p) + 2 * p["acc_bits"]),
        "raw_out": p["stream_bits"] * mux(raw_bits(p) // LANE_BITS + 1),
        "stats": ln * p["acc_bits"] + 40 * p["acc_bits"],
        "base": BASE_LUT,
    }


#: Estimated logic (LUT, FF) outside the units, not synthesis: streams and control.
BASE_LUT, BASE_FF = 3000, 4000


def buffers(ctx) -> tuple:
    """Every array and stream the kernel declares (hls/engines/shift_mac/kernel.cpp.j2), by its
    C++ name, from the template context ``ctx``. No multipliers: products are shifts
    (``ALLOCATION mul limit=0``)."""
    from ...resources import Buffer
    top, rows, cols, ln = ctx["top"], ctx["rows"], ctx["cols"], ctx["lanes"]
    xb = ctx["act_bits"] + (0 if ctx["act_signed"] else 1)
    acc = ctx["acc_bits"]
    complete = ((0, "complete"),)
    pbanks = ctx["param_banks"]
    bufs = [
        # streams between the three DATAFLOW processes
        Buffer("pq", top, "stream", ctx["stream_bits"], (), depth=2, note="parameter beats, Load -> Drain"),
        Buffer("xq", top, "stream", ctx["stream_bits"], (), depth=2, note="activation beats, Load -> Compute"),
        Buffer("wq", top, "stream", rows * ctx["reg_bits"], (), depth=ctx["max_k"], storage="fifo", impl="bram",
               note="weight steps: one tile ahead of Compute (the ping-pong of the weights)"),
        Buffer("accq", top, "stream", 2 * acc, (cols,), depth=rows, storage="fifo", impl="srl",
               note="a group's accumulators, one unit row per write"),
        # Compute
        Buffer("wstore", "Compute", "array", rows * ctx["reg_bits"], (ctx["w_depth"],), storage="ram_s2p",
               impl=ctx["wstore_impl"], static=True, note="weight steps on chip (one tile, or all: conv/resident)"),
        Buffer("xbuf", "Compute", "array", ctx["x_lanes"] * xb, (cols, ctx["x_words"]), partition=((1, "complete"),),
               storage="ram_1p" if ctx["xbuf_impl"] == "uram" else "", impl=ctx["xbuf_impl"], static=True,
               note="GEMM activations, one bank per unit column, a beat per word"),
        Buffer("lbuf", "Compute", "array", xb, (ctx["lb_banks"], ctx["line_depth"] if ctx["conv"] else 1),
               partition=((1, "complete"),), storage="ram_s2p", impl="bram", static=True, used=ctx["conv"],
               note="convolution line buffer, cyclic in x over the banks"),
        Buffer("acc1", "Compute", "array", acc, (rows, cols), partition=complete),
        Buffer("acc2", "Compute", "array", acc, (rows, cols), partition=complete),
        Buffer("prev_cfg", "Compute", "array", 1, (rows,), partition=complete),
        Buffer("sh1", "Compute", "array", acc, (rows, cols), partition=complete,
               note="the last group's accumulators, handed over during the next group"),
        Buffer("sh2", "Compute", "array", acc, (rows, cols), partition=complete),
        Buffer("xv", "Compute", "array", xb, (cols,), partition=complete, note="a step's activations"),
        Buffer("bank_v", "Compute", "array", xb, (ctx["lb_banks"],), partition=complete,
               note="a step's line-buffer reads"),
        # Drain
        Buffer("params", "Drain", "array", 48, (pbanks, -(-ctx["max_n"] // pbanks)), partition=((1, "complete"),),
               static=True, note="bias (32) and output shift (16) per neuron, a bank per neuron of a beat"),
        Buffer("ra1", "Drain", "array", acc, (cols,), partition=complete, note="a unit row's accumulators"),
        Buffer("ra2", "Drain", "array", acc, (cols,), partition=complete),
        Buffer("wide", "Drain", "array", acc, (ln,), partition=complete),
        Buffer("valid", "Drain", "array", 1, (ln,), partition=complete),
        Buffer("hist", "Drain", "array", 32, (acc,), partition=complete, note="statistics unit"),
    ]
    return bufs, []


def estimate(cfg) -> dict:
    """Resources and throughput: no DSPs; LUTs from :func:`logic_luts` (the units by
    :func:`lut_per_unit`) plus the LUTRAM/SRL buffers; FFs per unit by :func:`ff_per_unit` and
    ``BASE_FF``; the buffers (accumulators in registers, weight store, activation store, line
    buffer, FIFOs) come from :func:`buffers`, mapped by :mod:`hlsnn.resources`. Products per
    cycle: one per unit in two-hot mode, two in PoT mode."""
    from ... import resources
    p = cfg.params
    units = p["rows"] * p["cols"]
    lut_unit = lut_per_unit(p)
    logic = logic_luts(p)
    model = resources.build(*buffers(template_context(cfg)), cfg.board.ps)
    mhz = cfg.clock_mhz
    sb = step_beats(p)
    return resources.estimate(
        cfg, model, logic_lut=sum(logic.values()), logic_ff=units * ff_per_unit(p) + BASE_FF,
        extra={
            "lut_per_unit": lut_unit,
            "lut_per_unit_parts": unit_luts(p),
            "lut_saved_by_folding_delta": units * (lut_per_unit(p, fold_delta=False) - lut_unit),
            "logic_lut": logic,
            "units": units,
            "products_per_cycle": {"twohot": units, "pot": 2 * units, "pot_sum": units},
            "k_tiled_limit": k_tiled_limit(p),
            "peak_gops": {m: 2 * n * mhz / 1e3 for m, n in {"twohot": units, "pot": 2 * units}.items()},
            "stream_bound_products_per_cycle": {"twohot": units / sb, "pot": 2 * units / sb},
            "throughput": {"value": (2 if p["default_mode"] == "pot" else 1) * units * mhz / 1e3,
                           "unit": "G products/s",
                           "what": f"peak products per second in the default mode ({p['default_mode']})"},
        },
        notes={"lut": f"{units} units x {lut_unit} LUTs (model in spec.lut_per_unit) + rows, columns, drain, "
                      f"statistics and base logic (spec.logic_luts) + LUTRAM/SRL buffers",
               "dsp": "none by design", "ff": "accumulators and shifter registers per unit (model) + register buffers"})


#: Read-after-write distances of the stores the pipelined loops both write and read; the strict
#: C-simulation holds every checked read to them (``HLSNN_MEM``). ``wstore``: ``Steps`` writes a
#: step from the stream in stage 1 (a stream read and its store, 2) and reads one at stage 0: 2.
#: ``lbuf``: the line buffer's beat goes through the bank select before its write (3: stage 2), the
#: step reads at stage 0: 3. Today neither store is read again in the loop run that wrote it (a
#: tile's steps are written in its first pass and read in the later ones; a convolution's next input
#: row goes to a line-buffer slot the window does not read), so the strict report shows no distance.
RAW_DISTANCE = {"wstore": 2, "lbuf": 3}


def template_context(cfg) -> dict:
    p = cfg.params
    sb = step_beats(p)
    ln = lanes(p)
    tn_max = 2 * p["rows"]
    from ..timing import steps_style
    return {
        "steps_style": steps_style(cfg),    # the Steps loop's pipeline style (its stall enable: engines/timing.py)
        **{f"raw_{k}": v for k, v in RAW_DISTANCE.items()},
        **{k: p[k] for k in ("rows", "cols", "act_bits", "exp_bits", "max_delta", "acc_bits", "max_k",
                             "max_n", "max_batch", "max_hw", "max_ksize", "stream_bits", "rounding", "w_depth",
                             "line_depth")},
        "act_signed": p["act_signed"],
        "conv": p["conv"],
        "shifter_bits": shifter_bits(p),
        "shift1_bits": max(1, math.ceil(math.log2((1 << p["exp_bits"]) + p["max_delta"]))),
        "lane_bits": LANE_BITS,
        "lanes": ln,
        "lane_shift": int(math.log2(ln)),
        "x_lane_bits": x_lane_bits(p),
        "x_lanes": x_lanes(p),
        "x_lane_shift": int(math.log2(x_lanes(p))),
        "reg_bits": reg_bits(p),
        "step_beats": sb,
        "step_bits": sb * p["stream_bits"],
        "x_words": x_words(p),
        "lb_banks": lb_banks(p),
        "pad_words": math.ceil(max(p["max_ksize"] - 1, 0) / lb_banks(p)),
        "col_beats": math.ceil(p["cols"] / ln),
        "raw_bits": raw_bits(p),
        "raw_factor": raw_bits(p) // LANE_BITS,
        "raw_shift": (raw_bits(p) // LANE_BITS).bit_length() - 1,
        "param_banks": max(1, ln // 4),
        "param_beats": max(1, 4 // ln),
        "param_shift": (max(1, ln // 4) - 1).bit_length(),
        "wstore_impl": "uram" if cfg.board.resources.get("uram", 0) else "bram",
        "xbuf_impl": "uram" if cfg.board.resources.get("uram", 0) else "auto",
        "n_tiles_max": math.ceil(p["max_n"] / p["rows"]),
        "groups_max": math.ceil(p["max_batch"] / p["cols"]),
        "tn_max": tn_max,
        "rounding_code": ROUNDING_CODES[p["rounding"]],
        "magic": MAGIC,
        "top": TOP,
        "cfg_struct": "ShiftMacCfg",
        "word_type": "shift_word_t",
        "log2_max_k": math.ceil(math.log2(max(p["max_k"], 1))),
    }


register(NAME, SCHEMA, validate, estimate)       # hlsnn.engine_registry: what config.py reads
