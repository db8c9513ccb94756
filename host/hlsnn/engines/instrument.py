"""An engine ``Kernel``'s modelled cycles: :func:`instrument` makes every operation in its
``OPERATIONS`` :func:`measured`, so afterwards ``kernel.last_cycles`` holds the cycles of the
kernel calls the operation made, as the target models them (``target.kernel_cycles``: the csim
and sim targets use :func:`hlsnn.perf.calls.kernel_cycles`; None on targets without counters)."""
from __future__ import annotations

import functools


def instrument(cls):
    """Class decorator of an engine's ``Kernel``: every operation in ``OPERATIONS`` becomes
    :func:`measured`, and ``last_cycles`` starts as None."""
    for name in cls.OPERATIONS:
        setattr(cls, name, measured(getattr(cls, name)))
    cls.last_cycles = None
    return cls


def measured(fn):
    """Decorator of a Kernel operation: afterwards ``kernel.last_cycles`` holds the modelled
    cycles of all kernel calls the operation made (None on targets without counters: emu,
    pynq). Nested operations (``gemm`` calling ``gemm_bfp``) count once, in the outermost."""
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        tgt = self.target
        outer = getattr(tgt, "count_log", None) is None
        if outer:
            tgt.count_log = []
        try:
            return fn(self, *args, **kwargs)
        finally:
            if outer:
                log, tgt.count_log = tgt.count_log, None
                cycles = getattr(tgt, "kernel_cycles", None)      # a target with loop counters
                self.last_cycles = cycles(self.cfg, log) if cycles is not None else None
    return wrapper
