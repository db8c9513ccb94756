"""The ``shift_mac`` config section: schema, cross-field rules, the LUT model, and the flat
values the Jinja2 templates receive."""
from __future__ import annotations

import math

from ...config import Field
from ...errors import ConfigError
from ...primitives import ROUNDING_CODES

NAME = "shift_mac"
TOP = "shift_mac_top"
#: ID register magic: 'H' 'N' (hlsnn), engine 0x02, protocol version 0x01.
MAGIC = 0x484E0201
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
    "conv": Field("bool", "include the 2-D convolution input stage", default=True),
    "max_fmap": Field("int", "largest input feature map C*H*W for convolution", default=16384, lo=1,
                      hi=1 << 20),
    "max_hw": Field("int", "largest feature-map height or width", default=256, lo=1, hi=4096),
    "max_ksize": Field("int", "largest convolution kernel size", default=7, lo=1, hi=11),
    "rounding": Field("choice", "rounding of the output requantization", default="nearest_even",
                      choices=tuple(ROUNDING_CODES)),
    "default_mode": Field("choice", "mode used when a call does not name one", default="twohot",
                          choices=tuple(MODES)),
    "stream_bits": Field("int", "AXI-Stream width; default: the board's DMA width", default=None,
                         lo=32, hi=512, pow2=True),
}


def shifter_bits(p) -> int:
    """Width of a shifter output: the activation shifted left by up to 2^exp_bits - 1."""
    return p["act_bits"] + (1 if not p["act_signed"] else 0) + (1 << p["exp_bits"]) - 1


def acc_bits_needed(p) -> int:
    """Accumulator bits that make overflow impossible: first term (shifter + delta), plus the
    second term (one more bit), plus K products, plus one for the pot_sum adder."""
    return shifter_bits(p) + p["max_delta"] + 1 + math.ceil(math.log2(max(p["max_k"], 1))) + 1


def validate(p: dict, board, source) -> dict:
    if p["stream_bits"] is None:
        p["stream_bits"] = board.dma["stream_bits"]
    need = acc_bits_needed(p)
    if p["acc_bits"] < need:
        raise ConfigError(source, f"{NAME}.acc_bits", p["acc_bits"],
                          f"must be at least {need} (act_bits + 2^exp_bits - 1 + max_delta + 2 + "
                          f"ceil(log2(max_k)), sign included) so that no sum can overflow")
    if p["conv"] and p["max_ksize"] ** 2 > p["max_k"]:
        raise ConfigError(source, f"{NAME}.max_ksize", p["max_ksize"],
                          f"max_ksize^2 must not exceed max_k = {p['max_k']} (one input channel)")
    if p["conv"] and p["max_hw"] > p["max_fmap"]:
        raise ConfigError(source, f"{NAME}.max_hw", p["max_hw"],
                          f"must not exceed max_fmap = {p['max_fmap']}")
    return p


def lut_per_unit(p) -> int:
    """LUT model of one shift-MAC unit (documented, not a synthesis result).

    * two barrel shifters of ``shifter_bits`` outputs and ``exp_bits`` stages: a LUT6 is a
      4:1 mux, so ``ceil(exp_bits / 2)`` LUT levels per output bit, each;
    * the delta shifter on the first path: ``ceil(log2(max_delta + 1) / 2)`` levels over
      ``shifter_bits + max_delta`` bits;
    * the add/sub of the two terms: one LUT per bit on the carry chain;
    * two accumulators with sign-controlled add/sub: one LUT per bit each;
    * 16 LUTs of control (mode-change reset, zero flags, routing).
    """
    ws = shifter_bits(p)
    d = p["max_delta"]
    stages = lambda n: math.ceil(n / 2)  # noqa: E731
    shifters = 2 * ws * stages(p["exp_bits"])
    delta = (ws + d) * stages(math.ceil(math.log2(d + 1))) if d else 0
    return shifters + delta + (ws + d + 1) + 2 * p["acc_bits"] + 16


#: Estimated logic (LUT, FF) outside the units, not synthesis: streams and control.
BASE_LUT, BASE_FF = 3000, 4000


def buffers(ctx) -> tuple:
    """Every array the kernel declares (hls/engines/shift_mac/kernel.cpp.j2), by its C++ name,
    from the template context ``ctx``. No multipliers: products are shifts (``ALLOCATION mul
    limit=0``)."""
    from ...resources import Buffer
    top, rows, cols = ctx["top"], ctx["rows"], ctx["cols"]
    xb = ctx["act_bits"] + (0 if ctx["act_signed"] else 1)
    acc = ctx["acc_bits"]
    complete = ((0, "complete"),)
    bufs = [
        Buffer("xbuf", top, "array", xb, (cols, ctx["max_k"]), partition=((1, "complete"),), static=True,
               note="activations, one bank per column"),
        Buffer("ybuf", top, "array", ctx["act_bits"] + 1, (cols, ctx["max_n"]), partition=((1, "complete"),),
               static=True, note="requantized outputs of a batch tile"),
        Buffer("fmap", top, "array", xb, (ctx["max_fmap"] if ctx["conv"] else 1,), static=True,
               used=ctx["conv"], note="convolution input feature map"),
        Buffer("bias", top, "array", 32, (2 * rows,), partition=complete),
        Buffer("shift", top, "array", 16, (2 * rows,), partition=complete),
        Buffer("acc1", top, "array", acc, (rows, cols), partition=complete),
        Buffer("acc2", top, "array", acc, (rows, cols), partition=complete),
        Buffer("prev_cfg", top, "array", 1, (rows,), partition=complete),
        Buffer("hist", top, "array", 32, (acc,), partition=complete, note="statistics unit"),
        Buffer("wide_a", top, "array", acc, (cols,), partition=complete),
        Buffer("wide_b", top, "array", acc, (cols,), partition=complete),
        Buffer("count_a", top, "array", 1, (cols,), partition=complete),
        Buffer("count_b", top, "array", 1, (cols,), partition=complete),
    ]
    return bufs, []


def estimate(cfg) -> dict:
    """Resources and throughput: no DSPs; LUTs from :func:`lut_per_unit` per unit plus the
    requantization (one shifter per column) and ``BASE_LUT`` of stream logic and control; FFs
    for the weight register per unit and ``BASE_FF``; the buffers (accumulators in registers,
    input/result/feature-map RAMs) come from :func:`buffers`, mapped by :mod:`hlsnn.resources`.
    Products per cycle: one per unit in two-hot mode, two in PoT mode."""
    from ... import resources
    p = cfg.params
    units = p["rows"] * p["cols"]
    lut_unit = lut_per_unit(p)
    reg_bits = 2 * p["exp_bits"] + 5
    model = resources.build(*buffers(template_context(cfg)), cfg.board.ps)
    step_beats = math.ceil(p["rows"] * LANE_BITS / p["stream_bits"])
    mhz = cfg.clock_mhz
    return resources.estimate(
        cfg, model, logic_lut=units * lut_unit + p["cols"] * (2 * p["acc_bits"]) + BASE_LUT,
        logic_ff=units * reg_bits + BASE_FF,
        extra={
            "lut_per_unit": lut_unit,
            "units": units,
            "products_per_cycle": {"twohot": units, "pot": 2 * units, "pot_sum": units},
            "peak_gops": {m: 2 * n * mhz / 1e3 for m, n in {"twohot": units, "pot": 2 * units}.items()},
            "stream_bound_products_per_cycle": {"twohot": units / step_beats, "pot": 2 * units / step_beats},
            "throughput": {"value": (2 if p["default_mode"] == "pot" else 1) * units * mhz / 1e3,
                           "unit": "G products/s",
                           "what": f"peak products per second in the default mode ({p['default_mode']})"},
        },
        notes={"lut": f"{units} units x {lut_unit} LUTs (model in spec.lut_per_unit) + LUTRAM buffers",
               "dsp": "none by design", "ff": "a weight register per unit (model) + register buffers"})


def template_context(cfg) -> dict:
    p = cfg.params
    sb = math.ceil(p["rows"] * LANE_BITS / p["stream_bits"])
    return {
        **{k: p[k] for k in ("rows", "cols", "act_bits", "exp_bits", "max_delta", "acc_bits", "max_k",
                             "max_n", "max_batch", "max_fmap", "max_hw", "max_ksize", "stream_bits", "rounding")},
        "act_signed": p["act_signed"],
        "conv": p["conv"],
        "shifter_bits": shifter_bits(p),
        "lane_bits": LANE_BITS,
        "reg_bits": 2 * p["exp_bits"] + 5,
        "step_beats": sb,
        "step_bits": sb * p["stream_bits"],
        "steps_max": p["max_k"] * sb,
        "n_tiles_max": math.ceil(p["max_n"] / p["rows"]),
        "batch_tiles_max": math.ceil(p["max_batch"] / p["cols"]),
        "rounding_code": ROUNDING_CODES[p["rounding"]],
        "magic": MAGIC,
        "top": TOP,
        "cfg_struct": "ShiftMacCfg",
        "word_type": "shift_word_t",
        "log2_max_k": math.ceil(math.log2(max(p["max_k"], 1))),
    }
