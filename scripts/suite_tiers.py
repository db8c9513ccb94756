"""Split the quick suite into the README's five-minute check and the rest (``heavy``), by measured CPU.

The quick suite (``-m "not slow"``) takes 10-13 minutes on a 2-core machine three times slower
than the one it was sized on (docs/development.md). The README's command must take under five.
This script reads a profile of a cold quick run (one TSV per xdist worker: node id, own CPU-s,
child CPU-s, wall-s; ``tests/cpuprof.py``, ``CPUPROF_DIR``) and lists in ``tests/heavy.txt``
the most expensive tests, most expensive first, until what is left costs at most ``--budget``
CPU-seconds. ``tests/conftest.py`` marks the listed tests ``heavy``; a test not listed (a new one)
stays in the check. CI runs both parts on every run (``.ci/run``), so nothing is left unrun.

    CPUPROF_DIR=DIR XDG_CACHE_HOME=$(mktemp -d) python -m pytest -n 2 -m "not slow" -p cpuprof -p no:cacheprovider
    python scripts/suite_tiers.py DIR --budget 420 > tests/heavy.txt

A test's CPU includes the compiles and the per-process caches it was the first to need, so a
split moves part of the cost to the next test that needs them: profile the check alone
(``-m "not slow and not heavy"``) and extend the list with ``--keep tests/heavy.txt`` until the
check's wall time is under five minutes (docs/development.md has the rounds and figures).
"""
from __future__ import annotations

import argparse
import collections
import datetime
import glob
import os
import sys


def read_profile(folder):
    """``({node id: CPU-s}, collection CPU-s per worker)`` from the TSVs in ``folder``."""
    cost, coll = collections.Counter(), []
    files = sorted(glob.glob(os.path.join(folder, "*.tsv")))
    if not files:
        raise SystemExit(f"suite_tiers: no *.tsv in {folder!r}: run the profiled quick suite first (module docstring)")
    for f in files:
        with open(f) as fh:
            for line in fh:
                parts = line.rstrip("\n").split("\t")
                if len(parts) != 4:
                    raise SystemExit(f"suite_tiers: {f}: a line without 4 tab-separated fields: {line[:80]!r}")
                nid, own, child, _ = parts
                if nid == "<collection>":
                    coll.append(float(own) + float(child))
                elif not nid.startswith("<"):
                    cost[nid] += float(own) + float(child)
    return cost, coll


def split(cost, budget):
    """The node ids to mark heavy: the most expensive first, until the rest costs <= ``budget``."""
    left = sum(cost.values())
    heavy = []
    for nid, c in sorted(cost.items(), key=lambda kv: (-kv[1], kv[0])):
        if left <= budget:
            break
        heavy.append(nid)
        left -= c
    return heavy, left


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("profile", help="the folder of per-worker TSVs (CPUPROF_DIR)")
    ap.add_argument("--budget", type=float, default=420.0,
                    help="CPU-seconds the check may cost (default 420: 2 cores x 5 minutes, less collection and slack)")
    ap.add_argument("--keep", metavar="HEAVY_TXT",
                    help="a heavy list to extend: PROFILE is then a run of the check alone (-m 'not slow and "
                         "not heavy'), whose tests pay the compiles the listed ones used to")
    a = ap.parse_args(argv)
    if a.budget <= 0:
        raise SystemExit(f"suite_tiers: --budget must be > 0 CPU-seconds, got {a.budget}")
    kept = []
    if a.keep:
        try:
            with open(a.keep) as fh:
                kept = [line.strip() for line in fh if line.strip() and not line.startswith("#")]
        except OSError as e:
            raise SystemExit(f"suite_tiers: --keep {a.keep!r}: {e.strerror}")
    cost, coll = read_profile(a.profile)
    heavy, left = split(cost, a.budget)
    total = sum(cost.values())
    if kept:
        print(f"# extends {len(kept)} tests of {a.keep} (profile of the check alone below).")
        heavy = sorted(set(heavy) | set(kept))
    print(f"# tests/heavy.txt: the quick tests the README's five-minute check leaves to CI's second part,")
    print(f"# written by `python scripts/suite_tiers.py PROFILE --budget {a.budget:g}` on "
          f"{datetime.date.today().isoformat()}.")
    print(f"# profile: {len(cost)} tests, {total:.0f} CPU-s (collection {sum(coll):.0f} CPU-s over "
          f"{len(coll)} workers); heavy: {len(set(heavy) - set(kept))} {'more ' if kept else ''}tests, "
          f"{total - left:.0f} CPU-s; the check: "
          f"{len(cost) - len(set(heavy) - set(kept))} tests, {left:.0f} CPU-s.")
    for nid in sorted(heavy):
        print(nid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
