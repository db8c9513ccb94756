"""Row-parallel calls of the compiled helpers.

:mod:`ctypes` releases the GIL during a foreign call, so Python threads that each call a
helper on their own rows of an array run at once. :func:`run` calls ``fn(r0, r1)`` on
contiguous row ranges, the first in the calling thread and the others on a small shared pool.

``HLSNN_NATIVE_THREADS`` sets the number of threads (default: the CPUs this process may run
on, at most :data:`MAX_THREADS`); 1 runs everything in the calling thread.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor, wait

#: The most threads used by default.
MAX_THREADS = 8

_lock = threading.Lock()
_pool = None
_pool_pid = None


def threads() -> int:
    """How many threads :func:`run` uses at most."""
    env = os.environ.get("HLSNN_NATIVE_THREADS", "").strip()
    if env.isdigit() and int(env) >= 1:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_THREADS, cpus))


def parts(rows: int, min_rows: int):
    """``rows`` split into at most :func:`threads` contiguous ``(r0, r1)`` ranges of at least
    ``min_rows`` rows each (one range when ``rows < 2 * min_rows``)."""
    return split(rows, max(1, min(threads(), rows // max(1, min_rows))))


def split(rows: int, count: int):
    """``rows`` split into ``count`` contiguous ``(r0, r1)`` ranges, as even as can be."""
    step, extra = divmod(rows, count)
    out, r0 = [], 0
    for i in range(count):
        r1 = r0 + step + (i < extra)
        out.append((r0, r1))
        r0 = r1
    return out


def _executor(workers):
    global _pool, _pool_pid
    with _lock:
        # a forked child inherits the pool object but not its threads: it makes its own
        if _pool is None or _pool_pid != os.getpid() or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hlsnn-native")
            _pool_pid = os.getpid()
        return _pool


def run(fn, ranges):
    """``[fn(r0, r1) for (r0, r1) in ranges]``, the ranges at once: the first in the calling
    thread, the others on the pool. An exception in any is raised (after all have ended)."""
    if len(ranges) == 1:
        return [fn(*ranges[0])]
    pool = _executor(len(ranges) - 1)
    futures = [pool.submit(fn, *r) for r in ranges[1:]]
    try:
        first = fn(*ranges[0])
    finally:
        wait(futures)                    # no call outlives this one, even on an error
    return [first] + [f.result() for f in futures]

