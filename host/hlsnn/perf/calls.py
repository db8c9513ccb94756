"""A kernel call's modelled cycles from its loop counters (:func:`call_cycles`), the calls of an
operation summed (:func:`kernel_cycles`), and the targets' log of them (:func:`log_call`)."""
from __future__ import annotations

from .pages import PAGES
from .model import CallCycles, KernelCycles


def call_cycles(cfg, counts) -> CallCycles:
    """Modelled cycles of one kernel call of config ``cfg`` from its loop counters; every
    pipelined loop at the II derived from the rendered C++ (:mod:`~hlsnn.perf.schedule`), and a loop whose
    loop-back does not close within the clock (:mod:`~hlsnn.perf.timing`) at the II it would get."""
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


