"""The schedule of a network kernel (every pipelined loop's II, :mod:`hlsnn.perf.schedule`) from its rendered
C++ (``engines/<engine>/network/kernel.py``) and its engine's depth constants
(``engines/<engine>/network/perf.py``)."""
from __future__ import annotations

from pathlib import Path

from ..perf.schedule import source_schedule


#: the network kernels' depth constants per loop counter (the recurrence of a carried dependence)
def _net_depths(engine):
    from ..engines.bfp_systolic.network import perf as bfpperf
    from ..engines.network import perf as netperf
    from ..engines.shift_mac.network import perf as shiftperf
    from ..engines.sparse_cluster.network import perf as sparseperf
    if engine == "bfp_systolic":
        return {"ConvMac": bfpperf.MAC_DEPTH, "ConvExp": bfpperf.EXP_DEPTH, "NetPool": bfpperf.POOL_DEPTH,
                "NetAdd": bfpperf.ADD_DEPTH, "NetMove": netperf.MOVE_DEPTH, "NetConcat": netperf.MOVE_DEPTH,
                "NetTranspose": netperf.MOVE_DEPTH}
    conv = sparseperf.CONV_DEPTH if engine == "sparse_cluster" else shiftperf.CONV_DEPTH
    return {"NetMac": conv, "NetPool": netperf.POOL_DEPTH, "NetAdd": netperf.ADD_DEPTH, "NetMove": netperf.MOVE_DEPTH,
            "NetConcat": netperf.ADD_DEPTH, "NetTranspose": netperf.MOVE_DEPTH, "NetLut": netperf.LUT_DEPTH,
            "NetGate": netperf.ADD_DEPTH}


_NET_MEMO = {}


def network_schedule(net, cfg) -> list:
    """The schedule of the network kernel of the lowered network ``net`` (its accelerator's
    config ``cfg`` gives the clock and the PS family)."""
    import tempfile
    if net.engine == "bfp_systolic":
        from ..engines.bfp_systolic.network.kernel import render
    elif net.engine == "sparse_cluster":
        from ..engines.sparse_cluster.network.kernel import render
    else:
        from ..engines.shift_mac.network.kernel import render
    with tempfile.TemporaryDirectory(prefix="hlsnn-sched-") as tmp:
        _files, sha, _t = render(net, tmp)
        key = (sha, cfg.clock_mhz, cfg.board.ps)
        if key not in _NET_MEMO:
            _NET_MEMO[key] = tuple(source_schedule(Path(tmp) / "network.cpp", name=f"network ({net.engine})",
                                                   depths=_net_depths(net.engine), clock_mhz=cfg.clock_mhz,
                                                   ps=cfg.board.ps))
    return [dict(r) for r in _NET_MEMO[key]]
