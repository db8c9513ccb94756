"""Helpers shared by the benchmark scripts."""
import os
import random
import statistics
import time


class OtherLoad:
    """CPU time used by OTHER processes while a block runs, in CPUs (Linux /proc/stat).

    ``(busy jiffies of the whole machine - this process's CPU time) / wall time``: ~0 on a
    quiet machine, ~1 when another process keeps one CPU busy. None where /proc/stat is
    missing. Multi-threaded BLAS is very sensitive to this: when another process holds one
    of the two CPUs, every BLAS call waits for a scheduler time slice.
    """

    @staticmethod
    def _busy():
        try:
            with open("/proc/stat") as f:
                v = [int(t) for t in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal ...
        return (sum(v[:3]) + sum(v[5:8])) / os.sysconf("SC_CLK_TCK")

    def __enter__(self):
        self.b0, self.c0, self.t0 = self._busy(), time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc):
        b1, c1, t1 = self._busy(), time.process_time(), time.perf_counter()
        self.cpus = (None if self.b0 is None or b1 is None else
                     max(0.0, ((b1 - self.b0) - (c1 - self.c0)) / max(t1 - self.t0, 1e-9)))


def interleaved_medians(series, repeat, seed, *, warm_up=False, self_timed=(), samples=None, settle=0.0):
    """Time each callable of ``series`` (name -> f) ``repeat`` times, in a new shuffled order
    each round so that a drift of the machine's load falls on all of them alike; the median
    seconds per name. ``warm_up``: one untimed call of each first (caches, allocations).
    ``self_timed``: names whose callable returns the seconds to count itself (the part of its
    call that is measured, e.g. without building what it works on). ``samples``: a dict that
    gets every name's list of times. ``settle``: seconds to wait before each timed call, so that
    no call pays for the previous one's threads still spinning (onnxruntime's workers spin for
    tens of milliseconds after a run, and a calibration right after one took 35% longer)."""
    if warm_up:
        for f in series.values():
            f()
    times = {k: [] for k in series}
    rng = random.Random(seed)
    for _ in range(repeat):
        order = list(series)
        rng.shuffle(order)
        for k in order:
            if settle:
                time.sleep(settle)
            t0 = time.perf_counter()
            got = series[k]()
            times[k].append(float(got) if k in self_timed else time.perf_counter() - t0)
    if samples is not None:
        samples.update(times)
    return {k: statistics.median(v) for k, v in times.items()}


def median_us(fn, calls):
    """The median wall time of ``fn()`` in microseconds over ``calls`` calls, after one call to
    warm it (``time.perf_counter_ns``)."""
    fn()
    ts = []
    for _ in range(calls):
        t0 = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t0)
    return statistics.median(ts) / 1e3
