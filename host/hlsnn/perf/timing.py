"""Timing of a pipelined loop's loop-back (:mod:`hlsnn.engines.timing`: the delay model, its
constants and the budget): each engine page that knows its loop-backs lists them
(``loopbacks(p)``: ``{loop: chain}``); a chain longer than the budget is modelled at
``II = ceil(delay / budget)`` (the loop-back then takes that many cycles) and ``hlsnn perf`` says so.
"""
from __future__ import annotations

import math

from ..engines.timing import budget_ns, chain_delay_ns, chain_text


def loop_timing(cfg) -> list:
    """Per pipelined loop of ``cfg``'s engine page that lists its loop-backs: ``{loop, chain,
    delay_ns, budget_ns, ii}`` (``ii``: 1 when the chain closes within the budget). Empty for a
    page without ``loopbacks``."""
    from .pages import PAGES
    page = PAGES[cfg.engine]
    if not hasattr(page, "loopbacks"):
        return []
    ps, budget = cfg.board.ps, budget_ns(cfg.clock_mhz)
    rows = []
    for loop, chain in page.loopbacks(cfg.params).items():
        t = chain_delay_ns(chain, ps)
        rows.append({"loop": loop, "chain": chain_text(chain), "delay_ns": round(t, 2),
                     "budget_ns": round(budget, 2), "ii": max(1, math.ceil(t / budget))})
    return rows


def timing_ii(cfg) -> dict:
    """``{loop: II}`` of the loops whose loop-back does not close at II = 1."""
    return {r["loop"]: r["ii"] for r in loop_timing(cfg) if r["ii"] > 1}
