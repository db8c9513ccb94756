"""Loop counts of ``bfp_systolic`` and ``shift_mac`` calls in closed form, without C-simulation.

The two serial engines' loop counts depend only on the call's shape and flags (never on the
data), so they can be written down from the loop nests of their templates (the engine
pages, :mod:`hlsnn.perf.bfp_systolic` and :mod:`hlsnn.perf.shift_mac`). The tests check these against the
C-simulation's counters on random shapes; the deploy report and large shapes use them where
running the C-simulation would take too long. ``sparse_cluster`` skips zeros, so its counts
depend on the data: they come from the C-simulation (``hlsnn perf``) only.
"""
from __future__ import annotations

from ..errors import InputError
from .model import KernelCycles


def _c(a, b):
    return -(-a // b)


def bfp_call_counts(p, batch, k, n, *, bias=False, stats_method=False, stats_out=False, keep=False,
                    resident=False, rolling=False):
    """``{label: (iterations, entries)}`` of one ``bfp_systolic`` call (``n <= max_n``, ``batch``
    at most ``protocol.samples_per_call``): the loops of the engine page :mod:`hlsnn.perf.bfp_systolic`,
    summed over the call's passes of K (``spec.passes``)."""
    from ..engines.bfp_systolic.spec import gemv_applies, gemv_cols, lanes, passes, samples_in_loop
    from .bfp_systolic import gemv_iterations, steps_iterations
    L = lanes(p)
    qs = passes(p, k)
    stats_used = stats_method and p["weight_exponent"] != "row" and not rolling
    overlap = not rolling and not stats_used and len(qs) == 1   # the kernel's `overlap`
    its = waits = sample_beats = out_beats = 0
    gemv = resident and gemv_applies(p, batch, k)                       # the kernel's `gemv`
    xin = samples_in_loop(p, batch, k, resident)                       # the kernel's `xin`
    for q, (_, kq) in enumerate(qs):
        if not gemv:
            i, w, o = steps_iterations(p, batch, kq, n, keep=keep, resident=resident,
                                       out_on=overlap and q == len(qs) - 1, xin=xin)
            its, waits, out_beats = its + i, waits + w, out_beats + o
        sample_beats += batch * _c(kq + 1, L)
    Q = len(qs)
    nbo = _c(n + 1, L)
    ob = out_beats // nbo                     # samples the array loop streamed whole
    c = {"Top": (1, 1), "Geometry": (1, 1), "Passes": (Q, 1)}
    if gemv:                                  # the samples, one after another, stream in during GemvSteps
        its, waits = gemv_iterations(p, k, n)
        c["GemvSamples"] = (batch, 1)
        c["GemvSteps"] = (batch * its, batch)
        waits *= batch
    else:
        if not xin:                           # (xin: the samples stream in during Steps)
            c["ReadSampleBeats"] = (sample_beats, Q)
        c["Steps"] = (its, Q)
        if gemv_cols(p) > 1:                  # the samples' loop around Steps runs once a pass
            c["GemvSamples"] = (Q, Q)
    if ob < batch:
        c["OutSamples"] = (batch - ob, 1)
        c["WriteBeats"] = (batch * nbo - out_beats, batch - ob)
    if out_beats:
        c["OutOverlap"] = (out_beats, out_beats)
    if waits:
        c["SampleWait" if gemv or xin else "WeightWait"] = (waits, waits)
    if bias:
        c["ReadBias"] = (nbo, 1)
    if rolling:
        c["RollPredict"] = (batch, batch)             # every sample
    elif stats_used:
        c["StatSums"] = (batch * -(-n // L), batch)   # every sample with a non-zero output: a beat a cycle
    if stats_out:
        bins = p["acc_bits"]
        lanes32 = 32 // _lane(p)
        c["StatsBins"] = (bins, 1)
        c["StatsLanes"] = (bins * lanes32, bins)
    return c


def _lane(p):
    from ..engines.bfp_systolic.spec import lane_bits
    return lane_bits(p)


def shift_call_counts(p, batch, k, n, *, mode="twohot", conv=None, resident=False, stats=False, raw=False):
    """``{label: (iterations, entries)}`` of one ``shift_mac`` call (``n <= max_n``; the loop
    nests of the engine page :mod:`hlsnn.perf.shift_mac`).

    GEMM: ``batch`` samples of ``k``. Convolution: ``conv = (c, h, w, ksize, pad)``, the map
    streamed row by row; ``batch`` is then the output pixels and ``k = c * ksize**2``.
    ``resident``: the weights are on chip (none streamed); ``stats``: the statistics segment;
    ``raw``: the raw output mode (``DrainRows`` writes ``raw_bits / 16`` beats per beat).
    """
    from ..engines.shift_mac.spec import LANE_BITS, lanes, lb_banks, raw_bits, step_beats, x_lanes
    rows, cols, sb, L, XL = p["rows"], p["cols"], step_beats(p), lanes(p), x_lanes(p)
    tn = 2 * rows if mode == "pot" else rows
    t = _c(n, tn)
    pb = _c(4 * n, L)
    col_beats = _c(cols, L)
    ri = rows * col_beats * (2 if mode == "pot" else 1) * (raw_bits(p) // LANE_BITS if raw else 1)
    c = {"Load": (1, 1), "Compute": (1, 1), "Drain": (1, 1), "DataflowRegion": (1, 1),
         "ReadParams": (pb, 1), "DrainParams": (pb, 1)}
    if not resident:
        c["ReadTiles"] = (t, 1)
        c["ReadSteps"] = (t * k * sb, t)
    if conv is None:
        kb = _c(k, XL)
        chunks, g = 1, _c(batch, cols)
        c.update({"ReadSamples": (batch, 1), "ReadSampleBeats": (batch * kb, batch),
                  "LoadSamples": (batch, 1), "LoadSampleBeats": (batch * kb, batch)})
    else:
        ch, h, w, ks, pad = conv
        oh, ow = h + 2 * pad - ks + 1, w + 2 * pad - ks + 1
        chunks, g = oh, _c(ow, cols)
        rb = ch * _c(w, XL)                              # beats of one input row (all channels)
        c.update({"RowBeatsSum": (ch, 1), "ReadRows": (h, 1), "ReadRowBeats": (h * rb, h),
                  "WidthWords": (_c(w, lb_banks(p)), 1), "SlotWords": (ch, 1), "SlotSpan": (ks, 1)})
        if pad:
            c["PadShift"] = (pad, 1)
        if not resident:
            c["LoadTiles"] = (t, 1)
            c["LoadSteps"] = (t * k, t)
        pro = min(ks - pad, h)                           # rows before the first output row
        if pro > 0:
            c["LinePrologue"] = (pro, 1)
            c["PrologueBeats"] = (pro * rb, pro)
        loading = min(oh, max(0, h + pad - ks))          # output rows that load an input row
        per_row = t * g * max(k, rows)                   # steps of one output row
        if loading and rb > per_row:
            c["LineTail"] = (loading * (rb - per_row), loading)
    steps = max(k, rows)                                 # a group's steps: K, at least one per unit row
    c.update({"Chunks": (chunks, 1), "Tiles": (chunks * t, chunks), "Groups": (chunks * t * g, chunks * t),
              "Steps": (chunks * t * g * steps, chunks * t * g), "PushTail": (rows, 1),
              "DrainChunks": (chunks, 1), "DrainTiles": (chunks * t, chunks),
              "DrainGroups": (chunks * t * g, chunks * t), "DrainRows": (chunks * t * g * ri, chunks * t * g)})
    if stats:
        bins = p["acc_bits"]
        c["StatsBins"] = (bins, 1)
        c["StatsLanes"] = (bins * 2, bins)
    return c


def bfp_gemm_calls(p, batch, k, n):
    """``[(samples, outputs), ...]``: the calls ``Kernel.gemm`` makes on a target without a
    transfer limit: N in chunks of ``max_n``, each over the batch in calls of as many samples
    as the activation and result stores hold (``protocol.samples_per_call``)."""
    from ..engines.bfp_systolic.protocol import samples_per_call
    out = []
    for a in range(0, n, p["max_n"]):
        m = min(p["max_n"], n - a)
        per = max(1, samples_per_call(p, k, m))
        out += [(min(per, batch - r0), m) for r0 in range(0, batch, per)]
    return out


def bfp_gemm_call_flags(p, batch, k, n):
    """``[(samples, outputs, keep, resident), ...]``: :func:`bfp_gemm_calls` with the weight
    flags ``Kernel.gemm`` gives them: the calls of an N chunk stream its weights once when there
    are several and the tiles fit the store side by side (``protocol.streams_weights_once``):
    the first keeps them, the others are resident."""
    from ..engines.bfp_systolic.protocol import streams_weights_once
    out = []
    for a in range(0, n, p["max_n"]):
        calls = bfp_gemm_calls(p, batch, k, min(p["max_n"], n - a))
        once = streams_weights_once(p, calls[0][1], k, len(calls))
        out += [(b, m, once and i == 0, once and i > 0) for i, (b, m) in enumerate(calls)]
    return out


def shift_gemm_calls(p, batch, k, n, *, mode="twohot"):
    """``[(samples, outputs), ...]``: the calls ``Kernel.gemm_int`` makes for a GEMM on a target
    without a transfer limit: N in chunks of ``max_n`` (whole tiles), each over the batch in
    calls of as many samples as the activation store holds."""
    from ..engines.shift_mac.tiles import samples_per_call
    tn = 2 * p["rows"] if mode == "pot" else p["rows"]
    step = p["max_n"] if p["max_n"] < tn else p["max_n"] // tn * tn
    per = max(1, samples_per_call(p, k))
    return [(min(per, batch - r0), min(step, n - a)) for a in range(0, n, step) for r0 in range(0, batch, per)]


def shift_k_chunks(p, k, k_step=None):
    """``[(K of the call, raw), ...]``: the chunks of K that ``Kernel.gemm_int`` runs: one
    requantizing call of ``k`` when it fits ``max_k`` (and no ``k_step``), else raw calls over
    ``shift_mac.tiles.k_chunks``."""
    from ..engines.shift_mac.tiles import k_chunks
    if k <= p["max_k"] and k_step is None:
        return [(k, False)]
    return [(k1 - k0, True) for k0, k1 in k_chunks(p, k, k_step)]


def gemm_cycles(cfg, batch, k, n, *, mode=None) -> KernelCycles:
    """Modelled cycles of a float GEMM (``Kernel.gemm``) on ``cfg``, no bias, with the calls
    the transparent tiling makes on a target without a transfer limit (N in chunks of
    ``max_n``; ``shift_mac`` also splits the batch by its activation store,
    :func:`shift_gemm_calls`, and K above ``max_k`` into raw calls, :func:`shift_k_chunks`),
    from the closed-form counts."""
    from .calls import call_cycles
    p = cfg.params
    limit = _k_limit(cfg)
    if k > limit:
        raise InputError(f"K = {k} exceeds {'k_limit' if cfg.engine == 'bfp_systolic' else 'the K-tiled sum bound'} "
                         f"= {limit} of {cfg.name}")
    kc = KernelCycles()
    if cfg.engine not in ("bfp_systolic", "shift_mac"):
        raise InputError(f"{cfg.name}: closed-form counts exist for bfp_systolic and shift_mac only")
    if cfg.engine == "bfp_systolic":
        for b, m, keep, resident in bfp_gemm_call_flags(p, batch, k, n):
            counts = bfp_call_counts(p, b, k, m, stats_method=p["output_exponent"] == "stats",
                                     rolling=p["output_exponent"] == "rolling", keep=keep, resident=resident)
            beats = _bfp_beats(p, b, m, k, resident=resident)
            kc.add(call_cycles(cfg, counts), counts)
            kc.beats_in += beats[0]
            kc.beats_out += beats[1]
    if cfg.engine == "shift_mac":
        md = mode or p["default_mode"]
        for kq, raw in shift_k_chunks(p, k):
            for b, m in shift_gemm_calls(p, batch, kq, n, mode=md):
                counts = shift_call_counts(p, b, kq, m, mode=md, raw=raw)
                kc.add(call_cycles(cfg, counts), counts)
                beats = _shift_beats(p, b, m, kq, md, raw)
                kc.beats_in += beats[0]
                kc.beats_out += beats[1]
    return kc


#: the GEMM ``hlsnn sweep`` models for every variant (the reference shape)
REFERENCE_GEMM = (64, 512, 512)


def reference_gemm(cfg, shape=REFERENCE_GEMM):
    """The cycle model of one float GEMM of ``shape`` (B, K, N) on ``cfg``: ``{shape, cycles,
    utilization, bound}`` (utilization of the default mode's peak), or None for engines whose
    counts depend on the data (``sparse_cluster``) or a K beyond what the config takes."""
    from .pages import PAGES
    if cfg.engine not in ("bfp_systolic", "shift_mac") or shape[1] > _k_limit(cfg):
        return None
    kc = gemm_cycles(cfg, *shape)
    b, k, n = shape
    peak = PAGES[cfg.engine].peak_macs_per_cycle(cfg.params)
    return {"shape": "x".join(map(str, shape)), "cycles": int(kc.cycles),
            "utilization": b * k * n / (kc.cycles * peak), "bound": kc.bound}


def conv_cycles(cfg, c, h, w, z, ksize, pad, *, mode=None, resident=False) -> KernelCycles:
    """Modelled cycles of a ``shift_mac`` convolution that fits one call (the line buffer,
    ``max_hw``, the weight store, ``z <= max_n``), from the closed-form counts; ``resident``:
    the weights are on chip already."""
    from .calls import call_cycles
    from ..engines.shift_mac import protocol
    from ..engines.shift_mac.tiles import conv_call_limits
    p = cfg.params
    if cfg.engine != "shift_mac":
        raise InputError(f"{cfg.name}: closed-form convolution counts exist for shift_mac only")
    mode = mode or p["default_mode"]
    k = c * ksize ** 2
    if z > p["max_n"] or k > p["max_k"] or conv_call_limits(p, c, h, w, ksize, z, k, mode):
        raise InputError(f"{cfg.name}: a {c}x{h}x{w} -> {z} convolution takes several calls; use hlsnn perf")
    oh, ow = h + 2 * pad - ksize + 1, w + 2 * pad - ksize + 1
    counts = shift_call_counts(p, oh * ow, k, z, mode=mode, conv=(c, h, w, ksize, pad), resident=resident)
    kc = KernelCycles().add(call_cycles(cfg, counts), counts)
    kc.beats_in = protocol.n_input_beats(p, batch=oh * ow, n=z, k=k, mode=mode, fmap_shape=(c, h, w),
                                         resident=resident)
    kc.beats_out = protocol.n_output_beats(p, oh * ow, z, row=ow)
    return kc


def _k_limit(cfg):
    """The longest K a GEMM of ``cfg`` takes: ``bfp_systolic`` runs K in passes up to its
    ``k_limit``; ``shift_mac`` runs K above ``max_k`` as raw calls, up to the int64 bound of
    the host's sum (``shift_mac.tiles.check_k_sum``)."""
    if cfg.engine == "bfp_systolic":
        from ..engines.bfp_systolic.spec import k_limit
        return k_limit(cfg.params)
    from ..engines.shift_mac.spec import k_tiled_limit
    return k_tiled_limit(cfg.params)


def _bfp_beats(p, batch, n, k, resident=False):
    from ..engines.bfp_systolic import protocol
    return protocol.n_input_beats(p, batch, n, k, False, resident=resident), protocol.n_output_beats(p, batch, n)


def _shift_beats(p, batch, n, k, mode, raw=False):
    from ..engines.shift_mac import protocol
    return (protocol.n_input_beats(p, batch=batch, n=n, k=k, mode=mode),
            protocol.n_output_beats(p, batch, n, raw=raw))


__all__ = ["bfp_call_counts", "bfp_gemm_calls", "bfp_gemm_call_flags", "shift_call_counts", "shift_gemm_calls", "shift_k_chunks",
           "gemm_cycles", "conv_cycles", "reference_gemm"]
