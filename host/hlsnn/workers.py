"""Worker processes that end with the process that started them.

``hlsnn sweep --jobs N`` runs its C-simulations in a :class:`~concurrent.futures.ProcessPoolExecutor`.
When the parent is killed (``kill -9``, an out-of-memory kill), nothing tells its workers: they
wait on the pool's queue for good. :func:`die_with_parent`, the pool's initializer, asks Linux
to send the worker SIGKILL when its parent dies (``prctl(PR_SET_PDEATHSIG)``), and also starts
a thread that polls :func:`os.getppid` once a second (every other system, and the case of a
parent that died before the worker got that far).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
#: Seconds between two checks of the parent by the polling thread.
POLL_S = 1.0


def die_with_parent(parent_pid: int):
    """Initializer of a worker process started by ``parent_pid``: the worker ends when that
    process does."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover - a libc without prctl
            pass
    if os.getppid() != parent_pid:         # the parent died before the line above
        os._exit(1)
    threading.Thread(target=_watch, args=(parent_pid,), name="hlsnn-parent-watch", daemon=True).start()


def _watch(parent_pid: int):
    while True:
        time.sleep(POLL_S)
        if os.getppid() != parent_pid:
            os._exit(1)
