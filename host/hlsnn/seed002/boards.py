"""Boards on a Dask cluster (E7, E9: the source's accelerators 51, 52 and 56 are separate
cards): :class:`Boards` gives every board of a layout one worker of a ``distributed`` cluster
(round robin over the workers, in the scheduler's order), and each of its circuits is a
:class:`RemoteCircuit`, an :class:`~hlsnn.Accelerator` that lives in that worker's process
(:func:`board_call` opens it on first use and keeps it until :func:`close_board`); on ``sim``
the circuits of a board are the kernel instances of one simulated board's overlay there.

What travels: a call's inputs (the activations of the circuit's part, the weights, and the
output shift, which carries the radix point the determining board chose) go to the worker;
its outputs come back (the wide results of a preceding operation in raw mode, the saved
full-precision results of E8/E9, or the converted outputs), with the saturation count, the
statistics histogram and the modelled cycles. The controller (this process) runs DETERMINE and
the host layers between the engine layers.

Workers need hlsnn installed (and for ``csim``/``sim`` g++ and the ap_types headers, as for
``hlsnn sweep --cluster``); the accel config travels as its parsed dict. A ``LocalCluster``
serves in tests; users give a scheduler address (``--cluster tcp://HOST:PORT``). dask is
imported only here (``pip install "hlsnn[cluster]"``).
"""
from __future__ import annotations

import threading

#: the Accelerators of the boards this (worker) process serves: (board, circuit, sha, target) -> acc
_OPEN: dict = {}
#: their simulated boards (``sim``): (board, sha) -> SimBoard
_SIM_BOARDS: dict = {}
_OPEN_LOCK = threading.Lock()


def _accelerator(board, circuit, cfg, target, options, instance, instances):
    from ..runtime import Accelerator
    from .circuits import sim_board
    key = (board, circuit, cfg.sha, target)
    with _OPEN_LOCK:
        if key not in _OPEN:
            if target == "sim":
                if (board, cfg.sha) not in _SIM_BOARDS:
                    _SIM_BOARDS[(board, cfg.sha)] = sim_board(cfg, instances)
                options = dict(options, board=_SIM_BOARDS[(board, cfg.sha)], instance=instance)
            _OPEN[key] = Accelerator(cfg, target, **options)
        return _OPEN[key]


def board_call(board, circuit, cfg, target, options, instance, instances, method, args, kwargs):
    """In a worker: one kernel operation of ``circuit`` (kernel instance ``instance`` of the
    ``instances`` of ``board``'s overlay; :func:`hlsnn.seed002.circuits.run_call`'s tuple), plus
    the worker's process id."""
    import os
    from .circuits import run_call
    acc = _accelerator(board, circuit, cfg, target, options, instance, instances)
    return run_call(acc, method, args, kwargs) + (os.getpid(),)


def close_board(board):
    """In a worker: close the Accelerators of ``board`` and its simulated board; returns how many."""
    with _OPEN_LOCK:
        keys = [k for k in _OPEN if k[0] == board]
        for k in keys:
            _OPEN.pop(k).close()
        for k in [k for k in _SIM_BOARDS if k[0] == board]:
            _SIM_BOARDS.pop(k).close()
    return len(keys)


class RemoteCircuit:
    """A circuit on a board that a Dask worker serves."""

    def __init__(self, boards, circuit, config, target, instance=0, instances=1, **options):
        self.boards, self.circuit, self.target, self.options = boards, circuit, target, options
        self.instance, self.instances = instance, instances
        self.cfg = config                      # a Config pickles whole (its board included)
        self.worker = boards.worker_of(circuit.board)
        self.pids = set()

    def call(self, method, args, kwargs):
        fut = self.boards.client.submit(board_call, self.circuit.board, self.circuit.name, self.cfg, self.target,
                                        self.options, self.instance, self.instances, method, args, kwargs,
                                        workers=[self.worker], allow_other_workers=False, pure=False)
        *res, pid = fut.result()
        self.pids.add(pid)
        return tuple(res)

    def close(self):
        self.boards.client.submit(close_board, self.circuit.board, workers=[self.worker], pure=False).result()


class Boards:
    """Boards on the workers of a Dask cluster: ``cluster`` is a scheduler address
    (``tcp://HOST:PORT``, checked and connected as ``hlsnn sweep --cluster`` does) or a
    ``distributed.Client``."""

    def __init__(self, cluster):
        from .. import cluster as clu
        if isinstance(cluster, str):
            self.client, self._own = clu.connect(clu.check_address(cluster)), True
        else:
            self.client, self._own = cluster, False
        self.workers = sorted(self.client.scheduler_info()["workers"])
        if not self.workers:
            from ..errors import HlsnnError
            raise HlsnnError("the Dask cluster has no workers: start at least one (dask worker ADDRESS)")
        self.assigned = {}

    def worker_of(self, board):
        if board not in self.assigned:
            self.assigned[board] = self.workers[len(self.assigned) % len(self.workers)]
        return self.assigned[board]

    def circuit(self, circuit, config, target, instance=0, instances=1, **options):
        return RemoteCircuit(self, circuit, config, target, instance, instances, **options)

    def close(self):
        if self._own:
            self.client.close()
