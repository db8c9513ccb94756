"""The cycle model's pages by engine (:data:`PAGES`): :mod:`.bfp_systolic`, :mod:`.shift_mac`,
:mod:`.sparse_cluster`."""
from __future__ import annotations

from . import bfp_systolic, shift_mac, sparse_cluster

PAGES = {m.NAME: m for m in (bfp_systolic, shift_mac, sparse_cluster)}


def page(engine):
    return PAGES[engine]
