"""The delay model of the generated kernels' register-to-register paths (not a timing report),
and the stall enable that decides a stall-style loop's pipeline style (:func:`steps_style`, which
the templates render). :mod:`hlsnn.perf.timing` holds each loop-back against it.

A pipelined loop at II = 1 must close, within one clock cycle, the logic that computes an
iteration's loop-carried registers from the previous iteration's (its loop-back: the exit test,
the counters and flags that decide the next iteration). Vitis HLS cannot spread that logic over
more cycles without raising the II. Each engine page that knows its loop-backs lists them
(``loopbacks(p)``: ``{loop: chain}``), a chain being the elements in series from a register to
a register:

* ``("carry", bits)``: an adder, subtractor or magnitude compare: a LUT into the carry chain
  and the chain's ``bits``;
* ``("lut", levels)``: LUT levels (an equality test of a few bits, a 4:1 or 2:1 multiplexer
  level, AND/OR of conditions), each a LUT plus its route.

Delay = clock-to-out + setup + sum of the elements. The budget is the clock period less
Vitis HLS's default clock uncertainty of 27% (``config_clock -uncertainty`` default, UG1399);
a chain longer than the budget is modelled at ``II = ceil(delay / budget)`` (the loop-back
then takes that many cycles) (:mod:`hlsnn.perf.timing`).

The constants (:data:`FAMILY_DELAYS`) are round figures for the slowest speed grade of each
family, from the switching characteristics of DS187 (Zynq-7000: LUT T_ILO about 0.1 ns, CARRY4
about 0.1 ns per 4 bits, flip-flop clock-to-out and setup about 0.5 ns) and DS925 (Zynq
UltraScale+: CARRY8 about 0.1 ns per 8 bits, faster LUTs and flip-flops), plus a routing
allowance per LUT level of about four times the LUT's own delay (a typical share of routed
delay in Vivado timing reports). They are estimates to compare chains with each other and with
the budget, not sign-off figures.
"""
from __future__ import annotations

import math

#: Per PS family: ns per LUT level (LUT + route), per carry bit, and clock-to-out + setup.
FAMILY_DELAYS = {
    "zynq7": {"lut": 0.55, "carry_bit": 0.03, "reg": 0.75},
    "zynqmp": {"lut": 0.35, "carry_bit": 0.015, "reg": 0.40},
}


#: Vitis HLS's default clock uncertainty: 27% of the period (UG1399, config_clock).
UNCERTAINTY = 0.27


def chain_delay_ns(chain, ps: str) -> float:
    """Delay of a loop-back chain (module notes) on PS family ``ps``."""
    d = FAMILY_DELAYS[ps]
    t = d["reg"]
    for kind, n in chain:
        if kind == "carry":
            t += d["lut"] + n * d["carry_bit"]
        elif kind == "lut":
            t += n * d["lut"]
        else:
            raise ValueError(f"unknown chain element {kind!r}; allowed: carry, lut")
    return t


def budget_ns(clock_mhz: float) -> float:
    """The clock period less the default uncertainty (27%)."""
    return 1e3 / clock_mhz * (1 - UNCERTAINTY)


def chain_text(chain) -> str:
    return " -> ".join(f"{n}-bit carry" if k == "carry" else f"{n} LUT" for k, n in chain)


#: The registers a stall-style pipeline freezes with one enable, per engine: ``(loop, buffer
#: names of the resource model whose flip-flops it holds)``. A blocking stream access in the
#: loop (bfp ``Steps``: the weight beats in, the output beats out; shift ``Steps``: the weight
#: steps, the line buffer's rows and the hand-over FIFOs) stalls every stage at once, so the
#: stream's handshake drives the clock enable of all of them.
STALL_ENABLES = {
    "bfp_systolic": ("Steps", ("acc", "acc1", "shv", "wch0", "wch1", "xch0", "xch1", "cch")),
    "shift_mac": ("Steps", ("acc1", "acc2", "sh1", "sh2")),
}


#: Loads a driver of the replicated enable serves (Vivado replicates a high-fan-out net, with
#: ``phys_opt_design`` or a ``MAX_FANOUT`` attribute, into a tree of drivers): an assumption of
#: this model, not a datasheet figure.
FANOUT_PER_DRIVER = 64


#: The route from the enable's root to the far end of the region the array spans, per PS family
#: (ns): an allowance of this model (a long horizontal and vertical route), not a measurement.
SPAN_ROUTE = {"zynq7": 1.5, "zynqmp": 1.0}


#: The handshake logic that makes the enable: a stream's valid (or ready) with the access's
#: condition, two LUT levels.
ENABLE_LOGIC = [("lut", 2)]


#: The share of the budget the enable's path must leave free to count as closing: the model's
#: constants above (loads per driver, the span route) are assumptions, not measurements, so a
#: path within a quarter of the budget is not taken to close. Where it does not close with this
#: margin, the kernel's stall-style loop is rendered as a free-running pipeline
#: (``#pragma HLS PIPELINE II = 1 style=frp``, :func:`steps_style`): no enable freezes every
#: register, the stream handshakes are absorbed by small FIFOs Vitis HLS adds at the loop's
#: outputs (UG1448 "Pipeline Styles": less fanout on the pipeline control, more resources).
ENABLE_MARGIN = 0.25


def enable_timing(cfg) -> dict | None:
    """The stall enable of ``cfg``'s stall-style pipeline (:data:`STALL_ENABLES`; None for an
    engine without one): ``{loop, loads, levels, delay_ns, budget_ns, closes}``. ``loads``: the
    flip-flops it freezes, from the resource model's buffers; the path is the handshake logic,
    a replication tree of ``ceil(log(loads) / log(FANOUT_PER_DRIVER))`` LUT levels and the route
    across the array. ``closes_with_margin``: within :data:`ENABLE_MARGIN` of the budget;
    ``style``: ``stp`` (the stalled pipeline, the enable as modelled) or ``frp`` (the loop is
    rendered free-running, :func:`steps_style`: no global enable). The cycle model does not
    charge either (a free-running pipeline has the same II)."""
    if cfg.engine not in STALL_ENABLES:
        return None
    loop, names = STALL_ENABLES[cfg.engine]
    loads = sum(b["ff"] for b in cfg.estimates.get("buffers", []) if b["name"] in names)
    if not loads:
        return None
    levels = max(1, math.ceil(math.log(loads) / math.log(FANOUT_PER_DRIVER)))
    ps, budget = cfg.board.ps, budget_ns(cfg.clock_mhz)
    t = chain_delay_ns(ENABLE_LOGIC + [("lut", levels)], ps) + SPAN_ROUTE[ps]
    margin = t <= budget * (1 - ENABLE_MARGIN)
    return {"loop": loop, "loads": loads, "levels": levels, "delay_ns": round(t, 2),
            "budget_ns": round(budget, 2), "closes": t <= budget, "closes_with_margin": margin,
            "style": "stp" if margin else "frp"}


def steps_style(cfg) -> str:
    """The pipeline style option of ``cfg``'s stall-style loop for its template: ``""`` (the
    default stalled pipeline) when its enable closes with :data:`ENABLE_MARGIN`, else
    ``" style=frp"`` (a free-running pipeline, no global enable)."""
    e = enable_timing(cfg)
    return " style=frp" if e is not None and e["style"] == "frp" else ""
