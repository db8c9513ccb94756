"""Cycle counts of the generated hardware, from the C-simulation's loop counters.

Every kernel counts, in C-simulation only, the iterations and entries of its labelled loops
(``hls/include/hlsnn/counters.h``). One page per engine (:mod:`.bfp_systolic`,
:mod:`.shift_mac`, :mod:`.sparse_cluster`; each module docstring *is* the page) lists the
loops with their II, the accesses per iteration that set it, the depth and the phase, and
:mod:`.model` turns the counts into cycles as the HLS scheduler would. The csim and sim
targets log the counters of every kernel call; an operation's :attr:`Kernel.last_cycles`
(a :class:`~.model.KernelCycles`, :mod:`hlsnn.engines.instrument`) sums the calls the transparent tiling made; ``hlsnn
perf`` (:mod:`.measure`) and the deploy report read the same numbers.
"""
from __future__ import annotations

from . import bfp_systolic, shift_mac, sparse_cluster
from .model import CallCycles, KernelCycles

PAGES = {m.NAME: m for m in (bfp_systolic, shift_mac, sparse_cluster)}

__all__ = ["PAGES", "KernelCycles", "CallCycles", "call_cycles", "kernel_cycles", "log_call"]


def page(engine):
    return PAGES[engine]


def call_cycles(cfg, counts) -> CallCycles:
    """Modelled cycles of one kernel call of config ``cfg`` from its loop counters; every
    pipelined loop at the II derived from the rendered C++ (:mod:`.schedule`), and a loop whose
    loop-back does not close within the clock (:mod:`.timing`) at the II it would get."""
    from .model import DERIVED_II
    from .schedule import config_schedule, ii_of
    page = PAGES[cfg.engine]
    token = DERIVED_II.set(ii_of(config_schedule(cfg)))   # every loop at its II derived from the C++
    try:
        if hasattr(page, "loopbacks"):
            from .timing import timing_ii
            slow = timing_ii(cfg)
            if slow:
                return page.call_cycles(cfg.params, counts, ii=slow)
        return page.call_cycles(cfg.params, counts)
    finally:
        DERIVED_II.reset(token)


def kernel_cycles(cfg, log) -> KernelCycles | None:
    """The :class:`KernelCycles` of the calls in ``log`` (entries of :func:`log_call`); None
    when a call carried no counters (a library built before counters existed)."""
    if not log or any(c["counts"] is None for c in log):
        return None
    kc = KernelCycles()
    for c in log:
        kc.add(c.get("call") or call_cycles(cfg, c["counts"]), c["counts"])
        kc.beats_in += c["beats_in"]
        kc.beats_out += c["beats_out"]
    return kc


def log_call(target, counts, beats_in, beats_out, call=None):
    """Called by a target after a kernel call: keep the call's counters (and its
    :class:`CallCycles` when the target computed it already) for the operation in progress
    (:func:`measured`) and as ``target.last_counts``."""
    target.last_counts = counts
    log = getattr(target, "count_log", None)
    if log is not None:
        log.append({"counts": counts, "beats_in": int(beats_in), "beats_out": int(beats_out), "call": call})


