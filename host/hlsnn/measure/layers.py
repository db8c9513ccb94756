"""Modelled cycles of one deployed layer: the kernel calls the deploy runner
(:mod:`hlsnn.deploy.run.runner`) makes for it, costed by the engine's cycle model.

The calls are those of the runner's main pass (the output shift known, no statistics), for a
batch of ``batch`` images:

``bfp_systolic`` (``BfpExec``)
    conv layers as a GEMM on host im2col rows; one ``gemm_bfp`` with the bias per chunk of
    ``max_n`` outputs. Where the chunk's weights fit the weight store the runner keeps them on
    chip: its first call streams them (keep), the later calls of the batch only the samples
    (resident, the bias kept). Loop counts depend on the shape only (:mod:`hlsnn.perf.closed_form`).
``shift_mac`` (``ShiftExec``)
    conv layers as a GEMM on host im2col rows; ``gemm_int`` with the bias per chunk of outputs
    (whole weight tiles up to ``max_n``, kept on chip as for ``bfp_systolic`` where they fit)
    and of at most ``max_batch`` rows, in the layer's mode
    (``pot``: dual PoT); a K above ``max_k`` as the kernel's raw calls, one per chunk of K
    (:func:`hlsnn.perf.closed_form.shift_k_chunks`). Shape only (:mod:`hlsnn.perf.closed_form`).
grouped (depthwise) conv layers on either GEMM engine
    one GEMM per pack of ``gp`` groups (:func:`group_pack`: the fastest by this model;
    ``gp = 1`` is one GEMM per group), as the runner calls them.
``sparse_cluster`` (``SparseExec``)
    conv layers through ``conv2d_batch_int`` (as many images per call as the grid holds; a
    strided, dilated, grouped or asymmetrically padded one as the runner runs it, the stride-1
    convolution of :func:`hlsnn.engines.convgeom.as_stride1` on the host-padded input, a
    kernel beyond ``max_ksize`` as the runner's blocks of taps (:mod:`hlsnn.deploy.run.blocks`); more
    input channels than ``max_in_channels`` as the runner's raw calls, one per chunk),
    dense layers as a 1x1 convolution over a ``(K, 1, batch)`` map; per chunk of
    ``max_out_channels``. The counts depend on which inputs and weights are zero: they come
    from the replica of the kernel's loops (:class:`.counting.CountingTarget`) run on ``x``
    and ``w`` when given, else on a seeded synthetic layer of the same shape with the given
    weight sparsity and input density (zeros placed independently at random). A conv taking
    its input in two int8 terms (``input_terms``, :mod:`hlsnn.deploy.quantize.twoin`) runs as the
    runner's raw sums of each term (:func:`hlsnn.deploy.run.blocks.raw_sums`: the stride-1
    convolution of the padded input, the whole kernel one block, or the blocks of taps beyond
    ``max_ksize``): two passes, the second on the residual ``lo`` codes (``lo_density``).
"""
from __future__ import annotations

import numpy as np

from ..engines import convgeom
from ..errors import InputError
from ..perf.model import KernelCycles


def gemm_shape(layer, in_hw):
    """A layer's GEMM per sample: ``(positions, k, n, chw)``, the output pixels (1 for dense),
    the reduction length (K, or C*kh*kw over every input channel), the outputs, and a conv's
    input map ``(C, H, W)`` (None for dense); ``in_hw`` a conv's input height and width."""
    if layer.kind == "dense":
        n, k = layer.w.shape
        return 1, int(k), int(n), None
    z, cg, kh, kw = layer.w.shape
    c = cg * layer.group
    if in_hw is None:
        raise InputError(f"layer {layer.name}: a conv layer needs its input height and width (in_hw)")
    h, w = in_hw
    oh, ow = layer.geom.out_hw(h, w)
    # the GEMM view of the whole layer (K over every input channel); the GEMM engines run one
    # GEMM per group, of K / group and N / group (layer_kernel_cycles)
    return oh * ow, c * kh * kw, int(z), (c, h, w)


def _chunks(n, step):
    return [(a, min(n, a + step)) for a in range(0, n, step)]


def layer_kernel_cycles(layer, cfg, batch=1, *, fmt_type=None, in_hw=None, weight_sparsity=0.0,
                        input_density=1.0, x=None, w=None, seed=0, input_terms=1, lo_density=None) -> KernelCycles:
    """The :class:`~.model.KernelCycles` of the runner's calls for one layer (module docstring).
    ``input_terms``: 2 for a ``sparse_cluster`` conv that takes its input in two terms (the
    layer's ``SparseExec.two``), ``lo_density`` the second term's density (default
    ``input_density``)."""
    from ..perf.calls import call_cycles
    from ..perf.closed_form import bfp_call_counts, shift_call_counts
    p = cfg.params
    positions, k, n, conv = gemm_shape(layer, in_hw)
    m = batch * positions
    kc = KernelCycles()
    groups = layer.group if conv is not None and cfg.engine != "sparse_cluster" else 1
    if groups > 1:                        # one GEMM per pack of groups (the runner's calls), each alike
        gp = group_pack(layer, cfg, fmt_type=fmt_type, in_hw=in_hw)
        one = layer_kernel_cycles(_GroupView(layer, gp), cfg, batch, fmt_type=fmt_type, in_hw=in_hw)
        for _ in range(groups // gp):
            _merge(kc, one)
        return kc
    if cfg.engine == "bfp_systolic":
        from ..engines.bfp_systolic.protocol import resident_fits
        from ..perf.closed_form import bfp_gemm_calls
        for a in range(0, n, p["max_n"]):                           # N by max_n
            outs = min(p["max_n"], n - a)
            on_chip = resident_fits(p, outs, k)                     # the runner keeps the chunk on chip
            for i, (rows, _) in enumerate(bfp_gemm_calls(p, m, k, outs)):   # the batch by the stores
                keep, resident = on_chip and i == 0, on_chip and i > 0
                counts = bfp_call_counts(p, rows, k, outs, bias=not resident, keep=keep, resident=resident,
                                         stats_method=p["output_exponent"] == "stats",
                                         rolling=p["output_exponent"] == "rolling")
                kc.add(call_cycles(cfg, counts), counts)
        return kc
    if cfg.engine == "shift_mac":
        mode = "pot" if fmt_type == "pot" else "twohot"
        tn = 2 * p["rows"] if mode == "pot" else p["rows"]
        step = max(tn, p["max_n"] // tn * tn)
        from ..engines.shift_mac.protocol import n_tiles
        from ..perf.closed_form import shift_gemm_calls, shift_k_chunks
        for a, b in _chunks(n, step):
            # the runner keeps the chunk on chip where it fits: its first call streams it
            on_chip = b - a <= p["max_n"] and k <= p["max_k"] and n_tiles(p, b - a, mode) * k <= p["w_depth"]
            first = True
            for r0, r1 in _chunks(m, max(1, min(p["max_batch"], 1 << 16))):
                for kq, raw in shift_k_chunks(p, k):                                 # K tiling: raw calls
                    for rows, outs in shift_gemm_calls(p, r1 - r0, kq, b - a, mode=mode):   # the activation store
                        counts = shift_call_counts(p, rows, kq, outs, mode=mode, raw=raw,
                                                   resident=on_chip and not first)
                        kc.add(call_cycles(cfg, counts), counts)
                        first = False
        return kc
    if cfg.engine == "sparse_cluster":
        two = None if input_terms == 1 or conv is None else input_density if lo_density is None else lo_density
        return _sparse(layer, cfg, batch, conv, k, n, weight_sparsity, input_density, x, w, seed, two)
    raise InputError(f"no cycle model for engine {cfg.engine!r}")


def _sparse(layer, cfg, batch, conv, k, n, weight_sparsity, input_density, x, w, seed, two=None):
    """:func:`layer_kernel_cycles` on ``sparse_cluster``; ``two``: None for one input term, else
    the second term's input density."""
    from ..engines import ENGINES
    from .counting import CountingTarget
    p = cfg.params
    rng = np.random.default_rng(seed)
    wshape = (n,) + (layer.w.shape[1:] if conv else (k, 1, 1))
    if w is None:
        w = rng.integers(1, 128, wshape) * rng.choice([-1, 1], wshape) * (rng.random(wshape) >= weight_sparsity)
    w = np.asarray(w, np.int64).reshape(wshape)
    xshape = (batch,) + (conv[:3] if conv else (k,))
    if x is None:
        x = rng.integers(1, 128, xshape) * rng.choice([-1, 1], xshape) * (rng.random(xshape) < input_density)
    x = np.asarray(x, np.int64).reshape(xshape)
    general = conv is not None and layer.geom.simple_pad is None
    kern = ENGINES["sparse_cluster"].Kernel(cfg, CountingTarget(cfg, ENGINES["sparse_cluster"]))
    big = conv is not None and (convgeom.as_stride1(w[:1, :1], layer.geom)[2] if general else w.shape[2]) \
        > p["max_ksize"]
    if big or two is not None:
        # the runner's raw sums (hlsnn.deploy.run.blocks.raw_sums): per term, per block of taps
        # (beyond max_ksize: a 'same' 7x7 too, CBAM's spatial conv on a max_ksize-5 config; else
        # the whole kernel) a raw convolution of the shifted input
        from ..engines.convgeom import kernel_blocks
        g = layer.geom
        kc = KernelCycles()
        terms = [x]
        if two is not None:            # the residual's codes (hlsnn.deploy.quantize.twoin): a second pass
            terms.append(rng.integers(1, 128, xshape) * rng.choice([-1, 1], xshape) * (rng.random(xshape) < two))
        for xt in terms:
            xp = convgeom.pad_nchw(xt, g.pads)
            for i0, th, j0, tw in kernel_blocks(g, p["max_ksize"]) if big else [(0, g.kh, 0, g.kw)]:
                sub = convgeom.ConvGeom(th, tw, g.sh, g.sw, (0, 0, 0, 0), g.dh, g.dw, g.group)
                w1, pads1, _ = convgeom.as_stride1(w[:, :, i0:i0 + th, j0:j0 + tw], sub)
                kern.channel_sums(convgeom.pad_nchw(xp[:, :, i0 * g.dh:, j0 * g.dw:], pads1), w1, padding="valid")
                _merge(kc, kern.last_cycles)
        return kc
    if general:                      # the runner's stride-1 convolution on the host-padded input
        w, pads, _ = convgeom.as_stride1(w, layer.geom)
        x = convgeom.pad_nchw(x, pads)
    bias = np.zeros(n, np.int64)
    if conv is None:
        maps = [x[a:b].T[:, None, :] for a, b in _chunks(batch, p["max_hw"])]
        padding, op = "valid", kern.conv2d_int
    else:
        padding = "valid" if general else ("same" if layer.geom.simple_pad else "valid")
        op = kern.conv2d_batch_int
        per = kern.batch_capacity(x.shape[2], x.shape[3], w.shape[2], padding)
        maps = [x[a:b] for a, b in _chunks(batch, max(1, per))]
    kc = KernelCycles()
    for fmap in maps:
        for a, b in _chunks(n, p["max_out_channels"]):
            if w.shape[1] > p["max_in_channels"]:    # the runner's K tiling: raw calls, summed on the host
                kern.channel_sums(fmap, w[a:b], padding=padding, batch=conv is not None)
            else:
                op(fmap, w[a:b], bias=bias[a:b], shift=0, padding=padding, relu=layer.relu)
            _merge(kc, kern.last_cycles)
    return kc


def group_pack(layer, cfg, *, fmt_type=None, in_hw=None):
    """Groups per GEMM of a grouped conv layer on a GEMM engine: the divisor ``gp`` of the
    layer's groups whose ``group / gp`` GEMMs (each over ``gp`` groups, block-diagonal within
    the pack) the cycle model finds fastest, the smallest on a tie. One GEMM per group
    (``gp = 1``) does only the layer's MACs but pays each call's fixed phases; a depthwise
    layer's one-output GEMMs then cost more than a pack that fills the array's outputs."""
    g = layer.group
    best = None
    for gp in (d for d in range(1, g + 1) if g % d == 0):
        one = layer_kernel_cycles(_GroupView(layer, gp), cfg, 1, fmt_type=fmt_type, in_hw=in_hw)
        t = one.cycles * (g // gp)
        if best is None or t < best[0]:
            best = (t, gp)
    return best[1]


class _GroupView:
    """``gp`` groups of a grouped conv layer as one ungrouped layer (the block-diagonal weight of
    the pack), for the cost of one GEMM of the runner."""

    def __init__(self, layer, gp=1):
        g = layer.group
        self.kind, self.relu, self.name = "conv", layer.relu, layer.name
        self.group = 1
        self.w = convgeom.dense_weight(layer.w[:layer.w.shape[0] // g * gp], gp)
        self.geom = convgeom.ConvGeom(*(getattr(layer.geom, f) for f in ("kh", "kw", "sh", "sw", "pads", "dh",
                                                                            "dw")), 1)


def _merge(kc, one):
    for call in one.per_call:
        kc.add(call, {})
    for key, (i, e) in one.counts.items():
        i0, e0 = kc.counts.get(key, (0, 0))
        kc.counts[key] = (i0 + i, e0 + e)
    kc.beats_in += one.beats_in
    kc.beats_out += one.beats_out


def input_terms(ex) -> dict:
    """The :func:`layer_kernel_cycles` keywords of a deployed layer ``ex`` (an executor of
    :mod:`hlsnn.deploy.run.executors`) that takes its input in two terms (``ex.two``, decided when it
    calibrates: :func:`hlsnn.deploy.quantize.twoin.applies`), with its last run's ``lo`` density;
    ``{}`` for one term."""
    if not getattr(ex, "two", None):
        return {}
    return {"input_terms": 2, "lo_density": ex.stats.lo_density}


def layer_cycles(layer, cfg, batch=1, **kw) -> dict:
    """:func:`layer_kernel_cycles` as the deploy report's row: ``cycles``, ``us`` (at the
    config's clock), ``bound``, the cycles of the ``compute``, ``stream_in`` (every input
    stream phase), ``stream_out`` and ``serial`` (the other serial phases, DATAFLOW fill
    included) phases, ``calls`` and the GEMM view ``m, k, n``."""
    kc = layer_kernel_cycles(layer, cfg, batch, **kw)
    positions, k, n, _ = gemm_shape(layer, kw.get("in_hw"))
    ph = kc.phases
    s_in = sum(v for key, v in ph.items() if key.startswith("input stream"))
    s_out = sum(v for key, v in ph.items() if key.startswith("output stream"))
    comp = ph.get("compute", 0)
    return {"compute": comp, "stream_in": s_in, "stream_out": s_out,
            "serial": int(kc.cycles) - comp - s_in - s_out, "cycles": int(kc.cycles), "bound": kc.bound,
            "us": kc.cycles / cfg.clock_mhz, "calls": kc.calls, "m": batch * positions, "k": k, "n": n}
