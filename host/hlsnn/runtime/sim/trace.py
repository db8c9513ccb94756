"""Trace events of the simulated device (``SimDevice.trace``), formatted only when read, and
the byte-count / address wording they share with the models' messages."""
from __future__ import annotations

import collections


def _fmt_bytes(n):
    return f"{n} byte" if n == 1 else f"{n} bytes"


class _Event:
    """A trace entry formatted only when it is read: ``fn(*args)`` gives its text. ``args``
    are values that do not change afterwards (ints, strings, a run's register snapshot)."""

    __slots__ = ("fn", "args")

    def __init__(self, fn, args):
        self.fn, self.args = fn, args

    def __str__(self):
        return self.fn(*self.args)


class _Trace(collections.deque):
    """``SimDevice.trace``: the last events as text (entries are formatted when read)."""

    def __iter__(self):
        return (str(e) for e in super().__iter__())

    def __reversed__(self):
        return (str(e) for e in super().__reversed__())

    def __getitem__(self, i):
        return str(super().__getitem__(i))

    def __contains__(self, text):
        return any(text == e for e in self)

    def __eq__(self, other):
        return list(self) == list(other)

    __hash__ = None

    def __repr__(self):
        return f"_Trace({list(self)!r}, maxlen={self.maxlen})"

    def count(self, text):
        return sum(text == e for e in self)

    def copy(self):
        return _Trace(self, maxlen=self.maxlen)


def _describe_in(alloc, address):
    """``SimMemory.describe_address`` given the allocation found there (or None)."""
    if alloc is None:
        return f"0x{address:x} (no allocated buffer there)"
    if address == alloc.start:
        return f"buffer {alloc.describe()}"
    return f"0x{address:x}, offset {address - alloc.start} into buffer {alloc.describe()}"


def _ev_start(label, nbytes, alloc, address):
    return f"{label}: start {_fmt_bytes(nbytes)} at {_describe_in(alloc, address)}"


def _ev_done(label, nbytes):
    return f"{label}: done, {_fmt_bytes(nbytes)}"


def _ev_ap_start(name, regs, n):
    return f"{name}: ap_start (regs {dict(regs)}, expects {'beats up to TLAST' if n is None else f'{n} beats'})"


def _ev_ran(name, beats_in, m, last_index):
    return (f"{name}: ran on {beats_in} beats -> {m} beats, TLAST "
            f"{'never' if last_index is None else f'on beat {last_index}'}")


def _ev_text(text):
    return text
