"""What Vitis HLS's pragmas and storage mean to :mod:`hlsnn.perf.schedule`: the ports of each storage
type and their II (UG1448 "Resource Constraints"), the bank of a ``block`` partition (UG1399 "pragma HLS
array_partition") and what a ``DEPENDENCE`` pragma says of a read-after-write (UG1399 "pragma HLS
dependence")."""
from __future__ import annotations

import math

#: per storage kind, ``(mode, ports)``: ``shared`` ports each read or write, ``split`` one read and one
#: write port, ``2p`` one read-or-write port and one read port (UG1448 "Resource Constraints"); an
#: array with no storage declared: two, Vitis picks a dual-port RAM
PORTS = {"ram_1p": ("shared", 1), "kram1p": ("shared", 1), "ram_s2p": ("split", 1), "krams2p": ("split", 1),
         "ram_t2p": ("shared", 2), "ram_2p": ("2p", 2), "kramt2p": ("shared", 2), "default": ("shared", 2),
         "rom_1p": ("shared", 1), "rom_2p": ("shared", 2), "rom_np": ("shared", 2),
         "stream": ("split", 1), "m_axi": ("split", 1)}


def port_ii(kind, r, w):
    """The II ``r`` reads and ``w`` writes of one bank of storage ``kind`` need in one iteration."""
    mode, n = PORTS.get(kind, PORTS["default"])
    if mode == "split":
        return max(r, w)
    if mode == "2p":
        return max(w, math.ceil((r + w) / n))
    return math.ceil((r + w) / n)


def block_bank(i, factor, size):
    """The bank of element ``i`` of a dimension of ``size`` elements in ``factor`` blocks (UG1399
    "pragma HLS array_partition": consecutive blocks of ``size // factor`` elements, the last
    holding the rest); ``*`` (any bank) when the size is unknown."""
    if not size:
        return "*"
    return min(i // max(1, size // factor), factor - 1)


def raw_pragma(p):
    """What the DEPENDENCE pragma ``p`` says of its variable's read-after-write (UG1399 "pragma HLS
    dependence"): ``(type, effect)`` with ``type`` ``inter`` (the default) or ``intra`` (within one
    iteration) and ``effect`` ``"false"`` (removed; the default when neither true nor false is given)
    or the ``distance`` of a true one (``1`` when none is given); None when the pragma speaks only of
    a WAR or WAW."""
    kv, flags = p.kv, p.flags
    typ = kv.get("type", "").lower() or ("intra" if "intra" in flags else "inter")
    direction = kv.get("direction", "").lower() or next((d for d in ("raw", "war", "waw") if d in flags), "raw")
    if direction != "raw":
        return None
    dependent = (kv.get("dependent") or kv.get("inter") or kv.get("intra") or "").lower() \
        or ("true" if "true" in flags else "false" if "false" in flags else "")
    distance = kv.get("distance")
    if dependent == "true" or (not dependent and distance):   # a distance speaks of a true dependence
        try:
            return typ, max(1, int(distance or 1))
        except ValueError:
            return typ, 1
    return typ, "false"
