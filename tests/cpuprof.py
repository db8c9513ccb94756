"""A pytest plugin: each test's CPU (own + child processes, setup + call + teardown) and the
collection's, one TSV per xdist worker in ``$CPUPROF_DIR`` (nothing without it): the profile
``scripts/suite_tiers.py`` splits the quick suite by (``-p cpuprof``, with ``tests`` on the path)."""
import os, resource, time
import pytest

_rows = []

def _cpu():
    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    a = _cpu(); w = time.perf_counter()
    yield
    b = _cpu()
    _rows.append((item.nodeid, b[0] - a[0], b[1] - a[1], time.perf_counter() - w))

_coll = {}
@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    a = _cpu(); w = time.perf_counter()
    yield
    b = _cpu()
    _coll["c"] = (b[0] - a[0], b[1] - a[1], time.perf_counter() - w)

def pytest_sessionfinish(session):
    out = os.environ.get("CPUPROF_DIR")
    if not out:
        return
    wid = os.environ.get("PYTEST_XDIST_WORKER", "main")
    tot = _cpu()
    with open(os.path.join(out, f"{wid}.tsv"), "w") as f:
        if "c" in _coll:
            f.write("<collection>\t%.3f\t%.3f\t%.3f\n" % _coll["c"])
        f.write("<total>\t%.3f\t%.3f\t0\n" % tot)
        for r in _rows:
            f.write("%s\t%.3f\t%.3f\t%.3f\n" % r)
