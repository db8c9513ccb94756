"""Progress for long work (deploy, sweep, csim compiles, builds), drawn by tqdm on stderr.

Progress is shown only when stderr is a terminal, and never with ``--quiet`` or ``--json``
(:func:`enabled`); ``HLSNN_PROGRESS=0`` turns it off everywhere and ``=1`` forces it on (for
tests). Results are printed as before; progress never goes to stdout, so piped output stays
clean.
"""
from __future__ import annotations

import os
import sys
import threading
from contextlib import contextmanager

__all__ = ["enabled", "bar", "ticker"]


def enabled(*, quiet=False, json=False, stream=None) -> bool:
    """Whether to draw progress: not quiet, not JSON output, and stderr a terminal
    (``HLSNN_PROGRESS`` = 0 / 1 overrides the terminal test)."""
    if quiet or json:
        return False
    forced = os.environ.get("HLSNN_PROGRESS")
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr if stream is None else stream
    return bool(getattr(stream, "isatty", lambda: False)())


def bar(iterable=None, *, total=None, desc=None, unit="it", show=True):
    """A tqdm bar over ``iterable`` on stderr, or the iterable unchanged when ``show`` is False
    (or tqdm is missing)."""
    if not show:
        return iterable
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover - tqdm is a dependency
        return iterable
    return tqdm(iterable, total=total, desc=desc, unit=unit, file=sys.stderr, leave=False, dynamic_ncols=True)


@contextmanager
def ticker(desc, *, show=True, interval=0.5):
    """An elapsed-time line for work of unknown length (a compile, a tool run), redrawn every
    ``interval`` seconds by a background thread until the block ends."""
    if not show:
        yield
        return
    from tqdm import tqdm
    t = tqdm(total=None, desc=desc, file=sys.stderr, leave=False, dynamic_ncols=True,
             bar_format="{desc}: {elapsed}")
    stop = threading.Event()

    def redraw():
        while not stop.wait(interval):
            t.refresh()

    th = threading.Thread(target=redraw, daemon=True)
    th.start()
    try:
        yield
    finally:
        stop.set()
        th.join()
        t.close()
