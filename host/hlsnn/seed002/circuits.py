"""Several kernel instances of one accel config, driven as one accelerator: a
:class:`CircuitGroup` stands where a deployment expects an :class:`~hlsnn.Accelerator`.

Rules
    * Every circuit of a :class:`~hlsnn.seed002.layout.Layout` is its own kernel instance (of
      the config, or for a low-capability circuit of :func:`scaled`'s narrower config), an
      :class:`~hlsnn.Accelerator` of it on the target. On ``sim`` the circuits of one board are
      the instances of one overlay on one simulated PYNQ board (:func:`sim_board`: a block
      design with a kernel and an AXI DMA per instance, ``dma``/``<name>``, ``dma_1``/
      ``<name>_1`` ...), each instance served by its own copy of the C-simulation library and
      driven through its own DMA by pynq's drivers. A board served by a Dask worker
      (:mod:`hlsnn.seed002.boards`) is the same in that worker's process.
    * The deployment's executors call the group's ``kernel`` (:class:`SplitKernel`) as they
      call one kernel. A call made inside ``hlsnn.deploy.quantize.update.phase(layer, ph)`` goes to the
      circuits the layout gives ``ph``: its items (rows of a GEMM, images of a batch of maps,
      columns of a 1x1 map) are cut into one contiguous part per circuit
      (``numpy.array_split``), the parts run at once (one thread per circuit; on ``sim`` the
      simulated boards of one process take turns at pynq's one active device, so only the
      workers of a cluster compute at the same time), and the outputs are put back in order.
      Saturation counts add (saturating at ``2**32 - 1``), statistics histograms add
      (``merge_stats``): the kernels' counters are sums over items, so the group's call gives
      the bits one kernel gives for the whole call.
    * ``load_weights`` is refused (the weights stream with every call): the circuits of a
      phase change from call to call.
    * Every part's modelled cycles (``Kernel.last_cycles``: the C-simulation's loop counts on
      ``csim`` and ``sim``, None on ``emu``) are recorded with the layer, the phase and the
      circuit in :attr:`CircuitGroup.records`, from which :mod:`hlsnn.seed002.timeline` draws
      the measured timeline.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..blockdesign.hwh import instance_names
from ..deploy.quantize import update as updates
from ..engines.stream import merge_stats
from ..engines.tiling import add_u32
from ..errors import InputError


#: the parameter that sets an engine's compute width: a circuit of capability ``c < 1`` is an
#: instance of the config with ``c`` times as many (:func:`scaled`)
WIDTH = {"sparse_cluster": "units", "shift_mac": "cols"}


def scaled(config, capability):
    """The config of a circuit of ``capability``: ``config`` itself at 1, else the same config
    with its compute width (:data:`WIDTH`: ``sparse_cluster`` units, ``shift_mac`` columns)
    times ``capability`` (at least 1) and the name ``<name>_c<width>``. Its other limits are
    the config's, so it computes the same calls, bit for bit, more slowly."""
    if capability >= 1:
        return config
    key = WIDTH.get(config.engine)
    if key is None:
        raise InputError(f"a low-capability circuit of {config.engine}: only {', '.join(WIDTH)} configs scale "
                         f"(their {', '.join(WIDTH.values())})")
    v = max(1, int(round(config.params[key] * capability)))
    name = f"{config.name}_c{v}"
    return dataclasses.replace(config, name=name, stem=name, params={**config.params, key: v})


def run_call(acc, method, args, kwargs):
    """``acc.kernel.<method>(*args, **kwargs)`` under the accelerator's lock: ``(outputs,
    saturation count, statistics or None, modelled cycles or None)``."""
    with acc.lock:
        kern = acc.kernel
        out = getattr(kern, method)(*args, **kwargs)
        cyc = getattr(kern, "last_cycles", None)
        return (out, int(getattr(kern, "last_sat_count", 0) or 0),
                getattr(kern, "last_stats", None) if kwargs.get("stats") else None,
                None if cyc is None else int(cyc.cycles))


def sim_board(config, instances, **options):
    """One simulated PYNQ board whose overlay holds ``instances`` kernel instances of
    ``config`` (:class:`hlsnn.runtime.sim_target.SimBoard`)."""
    from ..engines import ENGINES
    from ..runtime.sim_target import SimBoard
    return SimBoard(config, ENGINES[config.engine], instances, **options)


class LocalCircuit:
    """A circuit in this process: its own :class:`~hlsnn.Accelerator` (on ``sim``, instance
    ``instance`` of the board's overlay, ``board``)."""

    def __init__(self, circuit, config, target, board=None, instance=0, **target_options):
        from ..runtime import Accelerator
        if board is not None:
            target_options = dict(target_options, board=board, instance=instance)
        self.circuit, self.acc = circuit, Accelerator(config, target, **target_options)

    def call(self, method, args, kwargs):
        return run_call(self.acc, method, args, kwargs)

    def close(self):
        self.acc.close()


class _Target:
    """What a deployment reads of a group's target: its name (never ``emu``, so the deployment
    runs layer by layer through the group)."""
    def __init__(self, inner):
        self.name, self.inner = "circuits", inner


def _split_axis(method, x, w, kw):
    """The axis of ``x`` whose items the circuits share, or None (the call runs whole on the
    phase's first circuit)."""
    if method in ("gemm_int", "conv2d_batch_int"):
        return 0
    if method == "channel_sums" and kw.get("batch", True):
        return 0
    one_by_one = np.ndim(w) == 4 and np.shape(w)[2:] == (1, 1) and kw.get("padding") == "valid"
    if method in ("conv2d_int", "channel_sums") and one_by_one and not kw.get("pool"):
        return 2                              # a dense layer as a 1x1 convolution over (K, 1, images)
    return None


class SplitKernel:
    """The kernel of a :class:`CircuitGroup` (module docstring, *Rules*)."""

    SPLIT = ("gemm_int", "conv2d_int", "conv2d_batch_int", "channel_sums")

    def __init__(self, group):
        self.group = group
        self.last_sat_count, self.last_stats, self.last_cycles, self.last_calls = 0, None, None, 0

    def load_weights(self, *args, **kw):
        raise InputError("a circuit group streams the weights with every call (its circuits change per phase)")

    def unload_weights(self):
        return None

    def __getattr__(self, name):
        if name in SplitKernel.SPLIT:
            return lambda x, w, *args, **kw: self._split(name, x, w, args, kw)
        return getattr(self.group.shadow.kernel, name)     # batch_capacity, p, cfg: the config's

    def _split(self, method, x, w, args, kw):
        where = updates.current_phase() or (None, None)
        circuits = self.group.serving(where[1])
        axis = _split_axis(method, x, w, kw)
        x = np.asarray(x)
        if axis is None or len(circuits) == 1:
            parts = [(circuits[0], x)]
        else:
            cuts = [p for p in np.array_split(np.arange(x.shape[axis]), len(circuits)) if len(p)]
            parts = [(c, np.take(x, idx, axis=axis)) for c, idx in zip(circuits, cuts)]
        t0 = time.perf_counter()

        def one(part):
            c, xp = part
            s = time.perf_counter()
            res = c.call(method, (xp, w) + tuple(args), kw)
            return res, s - t0, time.perf_counter() - t0

        done = list(self.group.pool.map(one, parts)) if len(parts) > 1 else [one(parts[0])]
        outs = [r[0][0] for r in done]
        out = outs[0] if len(outs) == 1 else np.concatenate(outs, axis=axis)
        sat, stats = 0, None
        for (c, xp), ((_, s, h, cyc), start, end) in zip(parts, done):
            sat = add_u32(sat, s)
            stats = merge_stats(stats, h) if h is not None else stats
            self.group.record(where[0], where[1], c.circuit.name, cyc, xp.shape[axis or 0], end - start)
        self.last_sat_count, self.last_stats, self.last_calls = sat, stats, len(parts)
        return out


class CircuitGroup:
    """The circuits of a layout, each a kernel instance of ``config`` (module docstring).

    ``config``: an accel config (path, name or :class:`~hlsnn.config.Config`); ``target``:
    ``emu``, ``csim`` or ``sim``; ``boards``: None (every circuit in this process) or
    :class:`hlsnn.seed002.boards.Boards` (a Dask client: each board's circuits in one worker)."""

    def __init__(self, config, layout, target="emu", *, boards=None, **target_options):
        from ..runtime import Accelerator
        self.layout, self.records, self._lock = layout, [], threading.Lock()
        self.shadow = Accelerator(config, "emu")             # the config's attributes (no calls)
        self.config, self.engine = self.shadow.config, self.shadow.engine
        self.circuits, self.sim_boards = {}, []
        self.placement = {}         # circuit -> (board, the kernel instance's IP name in its overlay)
        on = {}
        for c in layout.circuits:
            on.setdefault(c.board, []).append(c)
        try:
            for board, cs in on.items():
                if len({c.capability for c in cs}) != 1:
                    raise InputError(f"board {board}: its circuits have capabilities "
                                     f"{sorted({c.capability for c in cs})}: one board holds one config")
                cfg = scaled(self.config, cs[0].capability)
                sb = sim_board(cfg, len(cs)) if target == "sim" and boards is None else None
                if sb is not None:
                    self.sim_boards.append(sb)
                for i, c in enumerate(cs):
                    self.placement[c.name] = (board, instance_names(cfg, i)[1])
                    self.circuits[c.name] = (
                        boards.circuit(c, cfg, target, instance=i, instances=len(cs), **target_options) if boards
                        else LocalCircuit(c, cfg, target, board=sb, instance=i, **target_options))
        except BaseException:
            self.close()
            raise
        self.target = _Target(target)
        self.kernel = SplitKernel(self)
        self.pool = ThreadPoolExecutor(max_workers=len(self.circuits), thread_name_prefix="hlsnn-circuit")
        self.lock = threading.RLock()

    def serving(self, phase):
        """The circuit objects of ``phase`` (layout order)."""
        return [self.circuits[c.name] for c in self.layout.of(phase)]

    def record(self, layer, phase, circuit, cycles, items, wall_s):
        with self._lock:
            self.records.append({"layer": layer, "phase": phase, "circuit": circuit, "cycles": cycles,
                                 "items": int(items), "wall_s": float(wall_s)})

    def close(self):
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.shutdown(wait=True)
        for c in getattr(self, "circuits", {}).values():
            c.close()
        for sb in getattr(self, "sim_boards", ()):
            sb.close()
        self.shadow.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
