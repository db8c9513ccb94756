"""Loop counts of ``bfp_systolic`` and ``shift_mac`` calls in closed form, without C-simulation.

The two serial engines' loop counts depend only on the call's shape and flags (never on the
data), so they can be written down from the loop nests of their templates (the engine
pages, :mod:`.bfp_systolic` and :mod:`.shift_mac`). The tests check these against the
C-simulation's counters on random shapes; the deploy report and large shapes use them where
running the C-simulation would take too long. ``sparse_cluster`` skips zeros, so its counts
depend on the data: they come from the C-simulation (``hlsnn perf``) only.
"""
from __future__ import annotations

from ..errors import InputError
from .model import KernelCycles


def _c(a, b):
    return -(-a // b)


def bfp_call_counts(p, batch, k, n, *, bias=False, stats_method=False, stats_out=False):
    """``{label: (iterations, entries)}`` of one ``bfp_systolic`` call (``n <= max_n``)."""
    from ..engines.bfp_systolic.spec import context_step_beats
    rows, cols, sb = p["rows"], p["cols"], context_step_beats(p)
    s, t, g = _c(k, 2), _c(batch, cols), _c(n, rows)
    per_row = p["weight_exponent"] == "row"
    c = {"Top": (1, 1), "BatchTiles": (t, 1), "ReadSamples": (batch, t), "ReadSampleK": (batch * 2 * s, batch),
         "NTiles": (t * g, t), "WeightSteps": (t * g * s * sb, t * g), "PostRows": (t * g * rows, t * g),
         "OutSamples": (batch, t), "ScanMax": (batch * n, batch), "WriteMantissas": (batch * n, batch)}
    if bias:
        c["ReadBias"] = (n, 1)
    if per_row:
        c["ReadWeightExp"] = (t * g * rows, t * g)
    if stats_method and not per_row:
        c["StatSums"] = (batch * n, batch)   # every sample with a non-zero output
    if stats_out:
        bins = p["acc_bits"]
        lanes = 32 // _lane(p)
        c["StatsBins"] = (bins, 1)
        c["StatsLanes"] = (bins * lanes, bins)
    return c


def _lane(p):
    from ..engines.bfp_systolic.spec import lane_bits
    return lane_bits(p)


def shift_call_counts(p, batch, k, n, *, mode="twohot", conv=None):
    """``{label: (iterations, entries)}`` of one ``shift_mac`` call (``n <= max_n``).

    GEMM: ``batch`` samples of ``k``. Convolution: ``conv = (c, h, w, ksize, pad)``, the map
    on chip; ``batch`` is then the output pixels and ``k = c * ksize**2``.
    """
    from .shift_mac import _step_beats
    rows, cols, sb = p["rows"], p["cols"], _step_beats(p)
    tn = 2 * rows if mode == "pot" else rows
    t, g = _c(batch, cols), _c(n, tn)
    c = {"Top": (1, 1), "BatchTiles": (t, 1), "LoadSamples": (batch, t), "NTiles": (t * g, t),
         "ReadParams": (t * g * tn, t * g), "WeightSteps": (t * g * k * sb, t * g),
         "PostRows": (t * g * rows, t * g), "OutSamples": (batch, t), "WriteOutputs": (batch * n, batch)}
    if conv is None:
        c["ReadSample"] = (batch * k, batch)
    else:
        ch, h, w, _, pad = conv
        c.update({"AreaRows": (h, 1), "AreaChannels": (ch, 1), "ReadFmap": (ch * h * w, 1),
                  "Gather": (batch * k, batch)})
        if pad:
            c["PadRow"] = (pad, 1)
    return c


def gemm_cycles(cfg, batch, k, n, *, mode=None) -> KernelCycles:
    """Modelled cycles of a float GEMM (``Kernel.gemm``) on ``cfg``, no bias, with the calls
    the transparent tiling makes on a target without a transfer limit (N in chunks of
    ``max_n``), from the closed-form counts."""
    from . import call_cycles
    p = cfg.params
    if k > p["max_k"]:
        raise InputError(f"K = {k} exceeds max_k = {p['max_k']} of {cfg.name}")
    kc = KernelCycles()
    for a in range(0, n, p["max_n"]):
        m = min(p["max_n"], n - a)
        if cfg.engine == "bfp_systolic":
            counts = bfp_call_counts(p, batch, k, m, stats_method=p["output_exponent"] == "stats")
            beats = _bfp_beats(p, batch, m, k)
        elif cfg.engine == "shift_mac":
            counts = shift_call_counts(p, batch, k, m, mode=mode or p["default_mode"])
            beats = _shift_beats(p, batch, m, k, mode or p["default_mode"])
        else:
            raise InputError(f"{cfg.name}: closed-form counts exist for bfp_systolic and shift_mac only")
        kc.add(call_cycles(cfg, counts), counts)
        kc.beats_in += beats[0]
        kc.beats_out += beats[1]
    return kc


#: the GEMM ``hlsnn sweep`` models for every variant (issue 13's reference shape)
REFERENCE_GEMM = (64, 512, 512)


def reference_gemm(cfg, shape=REFERENCE_GEMM):
    """The cycle model of one float GEMM of ``shape`` (B, K, N) on ``cfg``: ``{shape, cycles,
    utilization, bound}`` (utilization of the default mode's peak), or None for engines whose
    counts depend on the data (``sparse_cluster``) or a K beyond ``max_k``."""
    from . import PAGES
    if cfg.engine not in ("bfp_systolic", "shift_mac") or shape[1] > cfg.params["max_k"]:
        return None
    kc = gemm_cycles(cfg, *shape)
    b, k, n = shape
    peak = PAGES[cfg.engine].peak_macs_per_cycle(cfg.params)
    return {"shape": "x".join(map(str, shape)), "cycles": int(kc.cycles),
            "utilization": b * k * n / (kc.cycles * peak), "bound": kc.bound}


def conv_cycles(cfg, c, h, w, z, ksize, pad, *, mode=None) -> KernelCycles:
    """Modelled cycles of a ``shift_mac`` convolution that fits one call (map within
    ``max_fmap``/``max_hw``, ``z <= max_n``), from the closed-form counts."""
    from . import call_cycles
    p = cfg.params
    if cfg.engine != "shift_mac":
        raise InputError(f"{cfg.name}: closed-form convolution counts exist for shift_mac only")
    if c * h * w > p["max_fmap"] or max(h, w) > p["max_hw"] or z > p["max_n"] or c * ksize ** 2 > p["max_k"]:
        raise InputError(f"{cfg.name}: a {c}x{h}x{w} -> {z} convolution takes several calls; use hlsnn perf")
    oh, ow = h + 2 * pad - ksize + 1, w + 2 * pad - ksize + 1
    mode = mode or p["default_mode"]
    counts = shift_call_counts(p, oh * ow, c * ksize ** 2, z, mode=mode, conv=(c, h, w, ksize, pad))
    kc = KernelCycles().add(call_cycles(cfg, counts), counts)
    from ..engines.shift_mac import protocol
    kc.beats_in = protocol.n_input_beats(p, batch=oh * ow, n=z, k=c * ksize ** 2, mode=mode, fmap_size=c * h * w)
    kc.beats_out = protocol.n_output_beats(p, oh * ow, z)
    return kc


def _bfp_beats(p, batch, n, k):
    from ..engines.bfp_systolic import protocol
    return protocol.n_input_beats(p, batch, n, k, False), protocol.n_output_beats(p, batch, n)


def _shift_beats(p, batch, n, k, mode):
    from ..engines.shift_mac import protocol
    return protocol.n_input_beats(p, batch=batch, n=n, k=k, mode=mode), protocol.n_output_beats(p, batch, n)


__all__ = ["bfp_call_counts", "shift_call_counts", "gemm_cycles", "conv_cycles", "reference_gemm"]
