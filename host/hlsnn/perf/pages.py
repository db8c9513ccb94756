"""The cycle model's pages by engine (:data:`PAGES`): :mod:`~hlsnn.perf.bfp_systolic`, :mod:`~hlsnn.perf.shift_mac`,
:mod:`~hlsnn.perf.sparse_cluster`."""
from __future__ import annotations

from . import bfp_systolic, shift_mac, sparse_cluster

PAGES = {m.NAME: m for m in (bfp_systolic, shift_mac, sparse_cluster)}


def page(engine):
    return PAGES[engine]
