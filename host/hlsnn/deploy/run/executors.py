"""The executors of :class:`~hlsnn.deploy.run.runner.Deployment`: one engine layer in one number
format on one accelerator (:class:`ShiftExec` for ``twohot``/``pot``, :class:`SparseExec` for
``fixed``/``sparse``, :class:`BfpExec` for ``bfp``; :data:`EXECS` by format type), each with its
:class:`LayerStats`. The rules they follow are :mod:`hlsnn.deploy.run.runner`'s."""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...engines import convgeom as conv
from ...engines.bfp_systolic.emulator import weight_rows as bfp_weight_rows
from ...engines.bfp_systolic.spec import k_limit as bfp_k_limit
from ...engines.shift_mac.spec import raw_bits as shift_raw_bits
from ...engines.common import times_pow2
from ...engines.stream import merge_stats
from ...engines.tiling import chunks
from ...perf.closed_form import shift_k_chunks
from ...errors import InputError
from ...formats import bfp as bfpfmt
from ...formats import fixed
from ...primitives import msb_histogram
from ...formats import shift as sfmt
from . import blocks, groups
from ..quantize import catradix, kprune, radix_lse, shift_fit, shift_netfit, twoin, twoterm
from ..quantize import update as updates
from ..quantize.quant import CHANNEL_FRAC_LIMIT, Act, host_radix, prune, to_fixed, weight_fracs


def _add_histogram(total, hist, up):
    """``total`` plus ``hist`` moved up by ``up`` bins (a longer array when needed), the
    counters saturating at ``2**32 - 1`` as the kernels' do."""
    h = np.concatenate([np.zeros(up, np.int64), np.asarray(hist, np.int64)])
    if total is None:
        return h
    size = max(len(total), len(h))
    return merge_stats(np.pad(total, (0, size - len(total))), np.pad(h, (0, size - len(h))))


@dataclass
class LayerStats:
    """What a layer did in the last run (for the report)."""
    f_in: int = None
    f_out: int = None
    f_w: int = None
    weight_sparsity: float = 0.0
    input_density: float = 1.0
    lo_density: float = None   # input_terms 2: the second term's (hlsnn.deploy.quantize.twoin), else None
    sat_count: int = 0
    histogram: list = field(default_factory=list)
    calls: int = 0
    update: dict = None        # E5: the choice and the modelled times (hlsnn.deploy.quantize.update.choose)


class _Exec:
    """One engine layer in one format on one accelerator."""

    #: the kernel can stream out its wide results (a raw mode), so E4 can run on it
    WIDE_OUT = False

    def __init__(self, layer, fmt, acc, deploy):
        self.layer, self.fmt, self.acc, self.deploy = layer, fmt, acc, deploy
        self.n_out = layer.w.shape[0]        # output channels (N of a dense layer, Z of a conv)
        self.p = acc.config.params
        self.stats = LayerStats()
        self.f_x = None          # input radix when the input needs converting (calibrated)
        self.f_out = None        # output radix (calibrated)
        self.in_shape = None     # shape of the last input batch
        self.update_times = self.update_choice = self.update_ran = None     # E5 (hlsnn.deploy.quantize.update)

    @property
    def wide_bits(self):
        """Bits of one wide result as the kernel's raw mode streams it (E4's modelled transfer,
        :func:`hlsnn.deploy.quantize.update.modelled_times`): 32, ``sparse_cluster``'s int32."""
        return 32

    def _limit_k(self, k, limit, what, why="K cannot be tiled without changing the numerics"):
        if k > limit:
            raise InputError(f"layer {self.layer.name}: reduction length {k} exceeds {what} = {limit} of "
                             f"{self.acc.config.name}; {why}")

    def _input_ints(self, act, bits, signed, calibrate):
        """The input as integers in ``(bits, signed)``: passed through when it already is in
        that format, else converted at the calibrated (or, dynamically, current) radix."""
        self.in_shape = act.values.shape
        if act.fmt is not None and act.fmt[1:] == (bits, signed):
            return act.ints(), act.fmt[0]
        if calibrate or self.f_x is None or self.deploy.dynamic:
            self.f_x = host_radix(act.values, bits, signed, self.deploy.overflow_ratio)
            if radix_lse.wanted(self):                 # radix: lse (hlsnn.deploy.quantize.radix_lse)
                f_msb = self.f_x
                self.f_x = radix_lse.input_radix(act.values, f_msb, bits, signed, self.deploy.rounding)
                self.f_x = catradix.tied(self, self.f_x, f_msb)      # a Concat of the graph input
        if not signed and (act.values < 0).any():
            raise InputError(f"layer {self.layer.name}: negative inputs, but {self.acc.config.name} has unsigned "
                             f"activations")
        return to_fixed(act.values, self.f_x, bits, signed, self.deploy.rounding), self.f_x

    def _bias(self, f_in, bits):
        """The bias in accumulator units (radix ``f_in``), checked against the kernel's
        signed ``bits + 1``-bit bias field."""
        b_fit = getattr(self, "b_fit", None)          # shift_fit's corrected bias, when it ran
        b = np.rint(np.ldexp(self.layer.b if b_fit is None else b_fit, f_in))
        if np.abs(b).max(initial=0) >= 1 << bits:
            raise InputError(f"layer {self.layer.name}: the bias does not fit (-2^{bits}, 2^{bits}) at radix {f_in}")
        return b.astype(np.int64)

    def _collect(self, hist, stats):
        """After each kernel call: count it and merge its statistics (saturating, as the
        kernel's own counters do)."""
        self.stats.calls += 1
        return merge_stats(hist, self.acc.kernel.last_stats) if stats else hist

    def _two_pass(self, call, f_in, bits, signed, calibrate):
        """The preceding operation (statistics on; when calibrating, in dynamic mode, or the
        first time: :meth:`preceding`), DETERMINE on the kernel's histogram, then the main
        operation with the output shifts; with the deployment's ``update="e5"``, E2 or E4
        instead (:func:`hlsnn.deploy.quantize.update.run`). ``call(stats, shift, chans, images=None,
        raw=False) -> (outputs, hist, sat, n_outputs)``: ``shift`` an int or one per output
        channel, ``chans`` None (every output channel) or the indices of the channels to
        compute, ``images`` None (the whole batch) or a bool mask of the images to compute,
        ``raw`` (kernels with ``WIDE_OUT``) the wide results instead of the outputs."""
        f_vec = np.asarray(f_in, np.int64).reshape(-1)
        redo = calibrate or self.f_out is None or self.deploy.dynamic
        if redo and self.deploy.update == "e5":
            out, sat = updates.run(self, call, f_in, f_vec, bits, signed, calibrate)
        else:
            if redo:
                with updates.phase(self, "preceding"):
                    self.preceding(call, f_vec, bits, signed)
            with updates.phase(self, "main"):
                out, _, sat, _ = call(False, self.shift_for(f_in, f_vec), None)
        self.stats.f_out, self.stats.sat_count = self.f_out, sat
        return out

    def shift_for(self, f_in, f_vec):
        """The output shift(s) ``f_in - F_out``: an int, or one per output channel."""
        return f_in - self.f_out if np.ndim(f_in) == 0 else f_vec - self.f_out

    def preceding(self, call, f_vec, bits, signed, images=None, raw=False):
        """The preceding operation on ``images`` (None: all) and DETERMINE: sets ``F_out``;
        with ``raw``, returns the wide results (images first, every output channel).

        ``f_vec`` (one value, or one per output channel with per-channel weight scales) is
        the radix of the wide results. The output radix ``F_out`` is shared by the layer, so the
        statistics must be in one unit: the preceding operation runs once per group of
        channels of equal ``f_in`` (one group with one weight scale per tensor), and each
        group's histogram moves up by ``ref - f_in`` bins, ``ref`` the finest ``f_in``, before
        the histograms add (saturating, as the kernels' counters do): a bin is then the MSB
        position at radix ``ref`` (exactly, for every value but -1, which has no MSB at its
        own radix and is counted nowhere). DETERMINE runs on the sum at ``ref``, and channel z gets the
        output shift ``f_in[z] - F_out``. ``F_out`` is clamped so that every shift is within
        63 of zero."""
        groups = np.unique(f_vec)
        parts, stored = [], None
        lse = radix_lse.wanted_out(self) and self.WIDE_OUT and len(groups) == 1 and images is None
        kept = self.kept_stats() and not raw and images is None
        clip = self.clip_stats() if not raw and images is None else None
        raw_in = raw or lse or kept or clip is not None     # radix: lse reads the wide results (hlsnn.deploy.quantize.radix_lse)
        extra = {} if images is None and not raw_in else {"images": images, "raw": raw_in}
        for g in groups:
            chans = None if len(groups) == 1 else np.flatnonzero(f_vec == g)     # f_vec: one per channel
            out, h, _, m = call(True, 0, chans, **extra)
            if kept:                          # strided_stats: kept (SparseExec.kept_stats)
                out = self.kept_outputs(out)
                h, m = msb_histogram(out, 32 if h is None else len(h)), out.size
            if clip is not None:              # clip_stats: clipped (_Exec.clip_stats): stored only for lse
                out = clipped_wide(out, int(g), clip)
                h = msb_histogram(out, 32 if h is None else len(h))
            if raw_in:
                if stored is None:
                    stored = np.empty((out.shape[0], self.n_out) + out.shape[2:], np.int64)
                stored[:, slice(None) if chans is None else chans] = out
            parts.append((g, h, m))
        self.determine_groups(f_vec, parts, bits, signed)
        if lse:
            self.f_out = radix_lse.refine(stored, int(groups[0]), self.f_out, bits, signed, self.deploy.rounding)
        if clip is not None:
            self.clip_saturation_free = clip_saturation_free(clip, self.f_out, bits, signed)
        return stored if raw else None

    #: with ``clip_stats: clipped``: whether the calibrated radix's range holds the Clip's bounds
    #: (:func:`clip_saturation_free`); None where the option does not apply to the layer
    clip_saturation_free = None

    def clip_stats(self):
        """``clip_stats: clipped`` (static calibration, E1): the bounds ``(lo, hi)`` (floats, None
        for an open side) of the ``Clip`` that is the only reader of this layer's output
        (:func:`clip_reader`), whose results DETERMINE then reads clipped at those bounds
        (:func:`clipped_wide`, the wide results at their radix): a value beyond a bound leaves
        the Clip as the bound whatever its conversion gave, as long as the conversion does not
        saturate inside the bounds. None (the layer's own results, the default ``off``) otherwise.
        The rule: in a static deployment, a conversion whose result goes only into a clip takes
        its radix from the statistics of the values clipped. It loses nothing to saturation when
        the chosen radix's range holds the bounds (:func:`clip_saturation_free`, set on
        :attr:`clip_saturation_free`): a value above ``hi`` then saturates to at least ``hi``
        (or converts to at least ``hi``, ``hi`` being a value of the format as the Clip on the
        host requires to keep the format), and the Clip makes it ``hi``, as it would have made the
        unsaturated conversion; likewise below ``lo``. With ``overflow_ratio`` 0 that holds
        wherever the option changes the radix (the calibration reached a bound, so DETERMINE's
        radix holds it), and DETERMINE with ``overflow_ratio > 0`` may saturate clipped values as
        it may any. The kernels are unchanged: the radix is a constant of the program."""
        dep = self.deploy
        if getattr(dep, "clip_stats", "off") != "clipped" or dep.dynamic or not self.WIDE_OUT:
            return None
        return clip_reader(dep.net, self.layer.output)

    def kept_stats(self):
        """Whether DETERMINE reads the statistics of the outputs the layer keeps rather than
        those the kernel computes (the deployment's ``strided_stats="kept"``;
        :meth:`SparseExec.kept_stats`)."""
        return False

    def determine_groups(self, f_vec, parts, bits, signed):
        """DETERMINE on the statistics of the groups of channels of equal ``f_in``
        (:meth:`preceding`'s rule): ``parts`` holds ``(f_in, histogram, count)`` per group; each
        histogram moves up by ``ref - f_in`` bins and they add (saturating), then ``F_out`` is
        chosen at ``ref`` with the previous one as ``f_prev``. Sets :attr:`f_out` and the
        layer's ``stats.histogram``."""
        ref, lo = int(f_vec.max()), int(f_vec.min())
        hist, n = None, 0
        for g, h, m in parts:
            hist, n = _add_histogram(hist, h, ref - int(g)), n + m
        st = fixed.Stats.from_histogram(hist, n)
        self.f_out = fixed.determine(st, ref, bits, overflow_ratio=self.deploy.overflow_ratio, signed=signed,
                                     f_prev=self.f_out, f_min=ref - 63, f_max=lo + 63)
        self.stats.histogram = hist.tolist()


class ShiftExec(_Exec):
    """two-hot / power-of-two weights on ``shift_mac`` (GEMM; conv as GEMM on host im2col).

    **K tiling.** A layer whose K (dense K, conv ``C*kh*kw``) exceeds ``max_k`` runs through
    the kernel's own K tiling (``Kernel.gemm_int``, ``shift_mac.tiles``): raw calls
    (``FLAG_RAW``: the exact accumulators of a chunk of K) added on the host in int64, then
    the kernel's output rules on the total (``shift_mac.emulator.output_rule``: bias, ReLU,
    the statistics unit's histogram, the output shift with rounding and saturation). A layer
    that fits one call gets the same bits either way (tested; :attr:`k_step` forces the
    chunks).

    **Wide results** (E4 of ``--radix-update e5``): ``gemm_int(..., raw=True)``, the kernel's
    raw mode: per output the accumulator plus bias, saturated to ``acc_bits``, after ReLU
    (``emulator.output_rule``'s rule 5), streamed as ``spec.raw_bits`` (32 or 64) bits, with
    the same statistics histogram as the requantizing call (K-tiled layers: the host's sum
    through the same rule)."""

    WIDE_OUT = True           # FLAG_RAW: the accumulators plus bias and ReLU (Kernel.gemm_int(raw=True))

    def __init__(self, layer, fmt, acc, deploy):
        super().__init__(layer, fmt, acc, deploy)
        p = self.p
        self.gp = groups.pack_of(layer, acc, fmt.type)
        w2 = groups.gemm_weight(layer, self.gp)
        self.k_step = None       # K columns per raw call; None: as the kernel chooses (one call when K fits)
        self.mode = "twohot" if fmt.type == "twohot" else "pot"
        axis = 0 if fmt.weight_scale == "channel" else None          # one scale per output row, or one

        self.max_code = p.get("max_code") if self.mode == "twohot" else None   # the config's code limit

        def quantize(ax):
            if self.mode == "twohot":
                return sfmt.quantize_twohot(w2, p["exp_bits"], delta=fmt.delta, axis=ax, max_code=self.max_code)
            return sfmt.quantize_pot(w2, p["exp_bits"], axis=ax)
        self.wq = quantize(axis)
        if axis is not None:
            # rows more than CHANNEL_FRAC_LIMIT bits finer than the tensor keep the tensor's scale
            whole = quantize(None)
            f_t = int(np.asarray(whole.scale_exponent).reshape(-1)[0])
            f_r = np.asarray(self.wq.scale_exponent, np.int64).reshape(-1)
            over = (f_r > f_t + CHANNEL_FRAC_LIMIT)[:, None]
            t = self.wq
            self.wq = sfmt.ShiftTensor.from_codes(
                t.mode, t.exp_bits, *(np.where(over, getattr(whole, a), getattr(t, a)) for a in
                                      ("e1", "e2", "s1", "s2", "zero")),
                np.where(over[:, 0], f_t, f_r).reshape(t.scale_exponent.shape), delta=t.delta, axis=0)
        self.terms = getattr(fmt, "weight_terms", 1)         # 2: [Q1 | Q2] per row (hlsnn.deploy.quantize.twoterm)
        if self.terms == 2:
            self.wq = twoterm.nearest(self.wq, w2)
        f_w = np.asarray(self.wq.scale_exponent, np.int64).reshape(-1)
        self.f_w = int(f_w[0]) if axis is None else f_w
        self.stats.f_w = self.f_w if axis is None else f_w.tolist()
        self.stats.weight_sparsity = float(np.mean(self.wq.zero))
        self.bits, self.signed = p["act_bits"], p["act_signed"]
        if not self.signed and not layer.relu:
            raise InputError(f"layer {layer.name} has no ReLU, so its outputs can be negative, but "
                             f"{acc.config.name} has unsigned activations: use a signed shift_mac config")
        n = w2.shape[0]
        tn = 2 * p["rows"] if self.mode == "pot" else p["rows"]
        self.step = max(tn, p["max_n"] // tn * tn)
        self.groups = layer.group // self.gp if layer.kind == "conv" else 1
        self.zg = n // self.groups                      # outputs per pack of groups: one GEMM per pack
        self.n_chunks = None

    @property
    def n_chunks(self):
        """:meth:`_parts` of every output, made when first needed after :attr:`wq` was set
        (``None`` marks it stale: a calibration's refit sets new codes, and a compiled run
        never asks for it)."""
        if self._n_chunks is None:
            self._n_chunks = self._parts(np.arange(self.n_out))
        return self._n_chunks

    @n_chunks.setter
    def n_chunks(self, value):
        self._n_chunks = value

    @property
    def wide_bits(self):
        """``spec.raw_bits``: the raw lanes are int32 when ``acc_bits <= 32``, else int64."""
        return shift_raw_bits(self.p)

    def _parts(self, chans):
        """``(a, b, weight rows)`` per GEMM of the outputs ``chans``: chunks of ``step``
        outputs within one group."""
        return [(a, b, self._rows(chans[a:b])) for a, b in groups.group_parts(chans, self.zg, self.step)]

    def _rows(self, idx):
        """The weight rows ``idx`` (a slice or an index array) as a ShiftTensor of their own."""
        t = self.wq
        f = t.scale_exponent if t.axis is None else np.asarray(t.scale_exponent)[idx]
        return sfmt.ShiftTensor.from_codes(t.mode, t.exp_bits, t.e1[idx], t.e2[idx], t.s1[idx], t.s2[idx],
                                           t.zero[idx], f, delta=t.delta, axis=t.axis)

    def run(self, act, calibrate):
        layer, p = self.layer, self.p
        xi, fx = self._input_ints(act, self.bits, self.signed, calibrate)
        fit = getattr(self.fmt, "weight_fit", "nearest")
        if calibrate and fit in ("output", "network"):         # codes and bias for the output
            tgt = shift_netfit.target(self, xi, fx) if fit == "network" else None    # the float network's
            (twoterm if self.terms == 2 else shift_fit).refit(self, xi, fx, tgt)
        if layer.kind == "conv":
            rows, (oh, ow) = conv.im2col(xi, layer.geom)
        else:
            rows = xi.reshape(xi.shape[0], -1)
        if self.terms == 2:                      # each row twice: K doubled (hlsnn.deploy.quantize.twoterm rule 2)
            rows = twoterm.rows(rows, self.groups)
        f_in = fx + self.f_w
        bias = self._bias(f_in, 31)
        kern = self.acc.kernel
        bsz = max(1, min(p["max_batch"], 1 << 16))
        kg = rows.shape[1] // self.groups                # K of one group's GEMM
        k_calls = len(shift_k_chunks(p, kg, self.k_step))

        def call(stats, shift, chans, images=None, raw=False):
            """(outputs images first: (B, N) or (B, Z, H', W'), hist, sat, n); ``raw``: the
            wide results (``gemm_int(raw=True)``: accumulators plus bias and ReLU)."""
            sel = np.arange(self.n_out) if chans is None else chans
            parts = self.n_chunks if chans is None else self._parts(chans)
            shifts = np.broadcast_to(np.asarray(shift, np.int64), (self.n_out,))
            rws = rows if images is None else rows.reshape(xi.shape[0], -1, rows.shape[1])[images].reshape(
                -1, rows.shape[1])
            out = np.empty((rws.shape[0], len(sel)), np.int64)
            hist, sat = None, 0
            for a, b, wq in parts:
                idx = sel[a:b]
                j = int(idx[0]) // self.zg
                rj = rws if self.groups == 1 else np.ascontiguousarray(rws[:, j * kg:(j + 1) * kg])
                _keep_on_chip(kern, wq, mode=self.mode)
                for r0, r1 in chunks(rws.shape[0], bsz):
                    out[r0:r1, a:b] = kern.gemm_int(rj[r0:r1], wq, mode=self.mode, bias=bias[idx],
                                                    shift=shifts[idx], relu=layer.relu, stats=stats,
                                                    k_step=self.k_step, raw=raw)
                    sat += kern.last_sat_count
                    hist = self._collect(hist, stats)
                    self.stats.calls += k_calls - 1          # the raw calls of a K-tiled gemm_int
            if layer.kind == "conv":                          # im2col rows -> images first, NCHW
                out = out.reshape(-1, oh, ow, len(sel)).transpose(0, 3, 1, 2)
            return out, hist, sat, out.size

        if getattr(self.deploy, "collect_stats", True):      # the rows' density (conv: counted on the map)
            nnz = conv.patch_nonzeros(xi, layer.geom) if layer.kind == "conv" else np.count_nonzero(rows)
            self.stats.input_density = nnz / max(rows.size, 1)
        out = self._two_pass(call, f_in, self.bits, self.signed, calibrate)
        self.stats.f_in = fx
        return Act(times_pow2(out, -self.f_out), (self.f_out, self.bits, self.signed))


def _keep_on_chip(kern, wq, **options):
    """Resident weights for the calls of one chunk of a layer: where they fit the weight store,
    the first call streams them with the keep flag and the later ones (a batch over several
    calls, the second pass) stream only the activations (and, on bfp_systolic, no bias); on a
    board the store is reloaded only when the layer changes (the kernel compares the weights
    with those on chip). Weights that do not fit stream with every call, as before."""
    try:
        kern.load_weights(wq, **options)
    except InputError:
        kern.unload_weights()


def clip_reader(net, tensor):
    """``(lo, hi)`` (floats, None for an open side) of the host ``Clip`` that is the only reader
    of ``tensor`` in ``net`` (the tensor not the network's output, the Clip with an upper or a
    lower bound); None otherwise (another reader sees the unclipped values)."""
    if net is None or tensor == net.output:
        return None
    readers = [la for la in net.layers if tensor in la.inputs]
    if len(readers) != 1 or readers[0].kind != "host" or readers[0].op != "Clip":
        return None
    a = readers[0].attrs
    lo, hi = a.get("lo"), a.get("hi")
    return None if lo is None and hi is None else (lo, hi)


def clipped_wide(v, f, clip):
    """The wide integers ``v`` (radix ``f``) clipped at ``clip = (lo, hi)``: at ``ceil(lo * 2**f)``
    and ``floor(hi * 2**f)``, the bounds' integers at that radix (the same MSB as the bound's
    value from 1 up)."""
    lo, hi = clip
    lo_i = None if lo is None else int(math.ceil(math.ldexp(lo, f)))
    hi_i = None if hi is None else int(math.floor(math.ldexp(hi, f)))
    return np.clip(np.asarray(v, np.int64), lo_i, hi_i)


def clip_saturation_free(clip, f_out, bits, signed):
    """Whether ``bits``-bit outputs at radix ``f_out`` hold the Clip's bounds ``clip``: the
    largest value ``(2**(bits-1) - 1) * 2**-f_out`` (unsigned: ``2**bits - 1``) at least ``hi``,
    the smallest at most ``lo``; then saturate-then-clip equals clip-then-convert
    (:meth:`_Exec.clip_stats`)."""
    lo, hi = clip
    top = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
    bottom = -(1 << (bits - 1)) if signed else 0
    return bool((hi is None or math.ldexp(top, -f_out) >= hi) and (lo is None or math.ldexp(bottom, -f_out) <= lo))


class SparseExec(_Exec):
    """int8 weights (optionally pruned) on the zero-skipping ``sparse_cluster``: convolution
    on batches of images laid out as one grid map, a job per image
    (``Kernel.conv2d_batch_int``); dense layers as a 1x1 convolution over a (K, 1, batch) map.
    A convolution other than a stride-1 square one with "same" or "valid" padding runs as the
    stride-1 "valid" convolution of :func:`conv.as_stride1` on the host-padded input, its
    output sampled by the stride.

    **K tiling.** A layer of more input channels than ``max_in_channels`` runs in chunks of
    at most ``max_in_channels`` channels, each a raw call (``FLAG_RAW``: the int32 sums, no
    bias, no ReLU); the host adds the chunks' sums exactly (int64), then applies the kernel's
    own output rules to the total (``sparse_cluster.emulator.postprocess``: bias, ReLU, the
    statistics unit's histogram, the output shift with rounding and saturation). A layer
    whose channels fit one call gets the same bits either way (tested).

    **Big kernels.** A kernel whose stride-1 square form exceeds ``max_ksize`` is split into
    blocks of taps of at most ``max_ksize`` rows and columns (:func:`hlsnn.engines.convgeom.kernel_blocks`); each
    block is a raw convolution of the padded input shifted by the block's offset, and the
    blocks' exact sums add on the host (int64) before the kernel's output rules act on the
    total (the statistics unit then sees only the outputs the layer keeps)."""

    BITS = 8
    WIDE_OUT = True           # FLAG_RAW: the int32 accumulators plus bias and ReLU

    def __init__(self, layer, fmt, acc, deploy):
        super().__init__(layer, fmt, acc, deploy)
        p = self.p
        w = (kprune.prune_kernel(layer, fmt.prune, p, deploy.net) if getattr(fmt, "prune_shape", "weight") == "kernel"
             else prune(layer.w, fmt.prune))
        if layer.kind == "dense":
            w = w.reshape(w.shape[0], w.shape[1], 1, 1)
        # a net_bits 4 kernel (engines.sparse_cluster.lowbit): the finest radix whose codes fit -7..7
        self.f_w = weight_fracs(w, {"channel": True, "auto": "auto"}.get(fmt.weight_scale, False),
                                7 if p.get("net_bits") == 4 else 127)
        per_channel = np.ndim(self.f_w) > 0                # an int, or one per output channel
        scale = np.asarray(self.f_w).reshape(-1, 1, 1, 1) if per_channel else self.f_w
        wq = np.clip(np.rint(np.ldexp(w, scale)), -128, 127).astype(np.int64)
        self.stats.weight_sparsity = float(np.mean(wq == 0))      # of the layer's own weights
        self.general = layer.kind == "conv" and layer.geom.simple_pad is None
        self.w_taps = wq                                         # the layer's own int8 taps (Z, C/g, kh, kw)
        if self.general:                                         # zero taps: groups, dilation, shape
            wq, self.pads1, _ = conv.as_stride1(wq, layer.geom)
        self.wq = wq
        # K tiling (class docstring): channels per raw call, or None when one call takes them all
        self.k_step = p["max_in_channels"] if wq.shape[1] > p["max_in_channels"] else None
        # a kernel beyond max_ksize: blocks of taps, each a raw convolution (class docstring)
        self.blocks = conv.kernel_blocks(layer.geom, p["max_ksize"]) if wq.shape[2] > p["max_ksize"] else None
        self.stats.f_w = self.f_w.tolist() if per_channel else self.f_w
        # input_terms: 2, a host-quantized input of an output conv in two int8 terms (hlsnn.deploy.quantize.twoin)
        self.in_terms = twoin.terms(layer, fmt, deploy)
        self.two = None           # whether it does, decided when it calibrates (twoin.applies)

    def run(self, act, calibrate):
        layer, p = self.layer, self.p
        xi, fx = self._input_ints(act, self.BITS, True, calibrate)
        self.in_hw = xi.shape[2:] if xi.ndim == 4 else None
        if calibrate or self.two is None:
            self.two = twoin.applies(self, act, xi, fx)
        lo = twoin.residual(self, act, xi, fx) if self.two else None      # None: one term
        f_in = fx + self.f_w + (0 if lo is None else twoin.SHIFT)
        bias = self._bias(f_in, 30)
        kern = self.acc.kernel
        dense = layer.kind == "dense"
        if dense:
            xs = xi.reshape(xi.shape[0], -1)
            padding, op = "valid", kern.conv2d_int

            def maps_of(x2):          # a 1x1 convolution over (K, 1, images)
                return [x2[a:b].T[:, None, :] for a, b in chunks(x2.shape[0], p["max_hw"])]
        else:
            xs = xi
            if self.general:
                xs, padding = conv.pad_nchw(xi, self.pads1), "valid"
            else:
                padding = "same" if layer.geom.simple_pad else "valid"
            op = kern.conv2d_batch_int
            per = kern.batch_capacity(xs.shape[2], xs.shape[3], self.wq.shape[2], padding)

            def maps_of(x4):
                return [x4[a:b] for a, b in chunks(x4.shape[0], max(1, per))]

        def call(stats, shift, chans, images=None, raw=False):
            """(outputs images first: (B, Z) or (B, Z, H', W'), hist, sat, n); ``raw``: the
            wide results (the kernel's ``FLAG_RAW``: accumulators plus bias and ReLU)."""
            shifts = np.broadcast_to(np.asarray(shift, np.int64), (self.n_out,))
            w, bz = (self.wq, bias) if chans is None else (self.wq[chans], bias[chans])
            shifts = shifts if chans is None else shifts[chans]
            flag = {"requantize": not raw} if dense else {"raw": raw}
            outs, hist, sat = [], None, 0
            for fmap in maps_of(xs if images is None else xs[images]):
                parts = []
                for a, b in chunks(w.shape[0], p["max_out_channels"]):
                    if self.k_step is None:
                        parts.append(op(fmap, w[a:b], bias=bz[a:b], shift=shifts[a:b], padding=padding,
                                        relu=layer.relu, stats=stats, **(flag if raw else {})))
                        sat += kern.last_sat_count
                        hist = self._collect(hist, stats)
                        continue
                    y, s, h = self._k_tiled(fmap, w[a:b], bz[a:b], shifts[a:b], padding, stats, raw)
                    parts.append(y)
                    sat = (sat + s) % (1 << 32)
                    hist = merge_stats(hist, h) if stats else hist
                o = np.concatenate(parts, axis=0 if dense else 1)
                # C order: a host Softmax after it sums in the order the network path does
                outs.append(np.ascontiguousarray(o[:, 0, :].T) if dense else o)
            out = np.concatenate(outs, axis=0)
            return out, hist, sat, out.size

        if self.blocks is not None:
            call = blocks.block_call(self, xi, bias)
        if lo is not None:
            call = twoin.call(self, xi, lo, bias)
        if getattr(self.deploy, "collect_stats", True):
            self.stats.input_density = np.count_nonzero(xi) / max(xi.size, 1)
            self.stats.lo_density = None if lo is None else np.count_nonzero(lo) / max(lo.size, 1)
        out = self._two_pass(call, f_in, self.BITS, True, calibrate)
        self.stats.f_in = fx
        if self.general and self.blocks is None and lo is None:
            out = conv.stride1_output(out, layer.geom, xi.shape[2], xi.shape[3])
        return Act(times_pow2(out, -self.f_out), (self.f_out, self.BITS, True))

    def kept_stats(self):
        """``strided_stats: kept`` (static calibration, E1): a convolution that runs as its
        stride-1 form (:func:`conv.as_stride1`) calibrates its output radix on the outputs the
        layer keeps, ``[::sh, ::sw]`` of the stride-1 results (:func:`conv.stride1_output`):
        the preceding operation returns its wide results (``FLAG_RAW``) and the host counts
        the kept ones' MSB histogram (:func:`hlsnn.primitives.msb_histogram`, the statistics
        unit's rule; count: the kept outputs). DETERMINE (and ``radix: lse``) then act on that.
        The kernels are unchanged: the main operation still computes every stride-1 output,
        whose dropped values are discarded whatever they saturate to (``sat_count`` counts
        them, as with ``all``). With ``all`` (default), the statistics unit's histogram of
        every stride-1 result, as the kernel computes. Applies where the run samples the
        stride-1 outputs (not a kernel in blocks of taps, nor a two-term input, whose
        statistics are of the kept outputs already); for a stride of 1 the two are the same."""
        g = self.layer.geom if self.layer.kind == "conv" else None
        return (getattr(self.deploy, "strided_stats", "all") == "kept" and self.general and self.blocks is None
                and not self.two and not self.deploy.dynamic and (g.sh, g.sw) != (1, 1))

    def kept_outputs(self, out):
        """The outputs the layer keeps of the stride-1 results ``out`` (images first)."""
        return conv.stride1_output(out, self.layer.geom, *self.in_hw)

    def _k_tiled(self, fmap, w, bias, shift, padding, stats, raw=False):
        """``(outputs, saturation count, histogram or None)`` of a K-tiled chunk of outputs
        (weights ``w``, one ``shift`` per output channel): the raw sums of every channel
        (``Kernel.channel_sums``), then the output rules (``raw``: bias and ReLU only, the
        wide results)."""
        from ...engines.sparse_cluster.emulator import postprocess
        dense = self.layer.kind == "dense"
        z = w.shape[0]
        total = self.acc.kernel.channel_sums(fmap, w, padding=padding, batch=not dense, step=self.k_step)
        self.stats.calls += -(-w.shape[1] // self.k_step)
        z3 = total if dense else total.transpose(1, 0, 2, 3).reshape(z, -1, total.shape[3])  # (Z, H, W)
        res = postprocess(z3, bias, np.asarray(shift, np.int64), relu=self.layer.relu,
                          rounding=self.p["rounding"], stats=stats, raw=raw)
        y = res[0] if dense else res[0].reshape(z, total.shape[0], total.shape[2],
                                                total.shape[3]).transpose(1, 0, 2, 3)
        return y, res[1], (res[2] if stats else None)


class BfpExec(_Exec):
    """Block floating point on ``bfp_systolic``: GEMM (conv on host im2col); the input gets
    one exponent per sample (per patch for conv), the output is returned dequantized. A
    grouped (depthwise) convolution runs as one GEMM per pack of groups (``gp`` groups,
    :func:`hlsnn.measure.layers.group_pack`), over the pack's input channels (one exponent per
    patch of those channels)."""

    def __init__(self, layer, fmt, acc, deploy):
        super().__init__(layer, fmt, acc, deploy)
        p = self.p
        self.gp = groups.pack_of(layer, acc, "bfp")
        w2 = groups.gemm_weight(layer, self.gp)
        self._limit_k(w2.shape[1], bfp_k_limit(p), "k_limit",
                      "the longest K whose sum fits the accumulator (acc_bits) exactly")
        self.m, self.e, self.rnd = p["mantissa_bits"], p["exponent_bits"], p["rounding"]
        waxis = -1 if p["weight_exponent"] == "row" else None
        self.chunks = []
        self.groups = layer.group // self.gp if layer.kind == "conv" else 1
        self.zg = w2.shape[0] // self.groups            # outputs per pack of groups: one GEMM per pack
        for a, b in groups.group_parts(np.arange(w2.shape[0]), self.zg, p["max_n"]):
            wq = bfp_weight_rows(bfpfmt.quantize(w2[a:b], self.m, axis=waxis, exponent_bits=self.e,
                                                 rounding=self.rnd))      # rule 0w: a dead row's exponent
            bq = bfpfmt.quantize(layer.b[a:b], self.m, axis=None, exponent_bits=self.e, rounding=self.rnd)
            self.chunks.append((a, b, wq, bq))
        self.stats.weight_sparsity = float(np.mean(np.concatenate([c[2].mantissas.reshape(-1)
                                                                   for c in self.chunks]) == 0))

    def run(self, act, calibrate):
        layer = self.layer
        x = act.values
        self.in_shape = x.shape
        if layer.kind == "conv" and self.groups == 1:     # the kernel may gather the rows itself
            rows = conv.Patches(x, layer.geom)
            oh, ow = rows.out_hw
        elif layer.kind == "conv":
            rows, (oh, ow) = conv.im2col(x, layer.geom)
        else:
            rows = x.reshape(x.shape[0], -1)
        # all-zero samples get a free exponent that keeps the bias alignment in range (Kernel docstring)
        kern = self.acc.kernel
        kg = rows.shape[1] // self.groups
        # each group's GEMM quantizes its own rows (one exponent per sample of the group's
        # channels): Kernel.gemm_rows, the activations' quantization and gemm_bfp in one
        # one chunk of every output: its result (a new array) is the layer's, without a copy
        whole = len(self.chunks) == 1
        out = None if whole else np.empty((rows.shape[0], layer.w.shape[0]))
        sat, density, xj = 0, {}, {}
        for a, b, wq, bq in self.chunks:
            j = a // self.zg
            if j not in xj:
                xj = {j: rows if self.groups == 1 else np.ascontiguousarray(rows[:, j * kg:(j + 1) * kg])}
            _keep_on_chip(kern, wq)
            y = kern.gemm_rows(xj[j], wq, bq, relu=layer.relu)
            if whole:
                out = np.asarray(y, np.float64)
            else:
                out[:, a:b] = y
            density.setdefault(j, kern.last_x_nonzero / (xj[j].shape[0] * xj[j].shape[1]))
            sat += kern.last_sat_count
            self.stats.calls += 1
        self.stats.sat_count = sat
        if getattr(self.deploy, "collect_stats", True):
            self.stats.input_density = float(np.mean([density[j] for j in range(self.groups)]))
        if layer.kind == "conv":
            out = out.reshape(x.shape[0], oh, ow, -1).transpose(0, 3, 1, 2)
        return Act(out, None)

    @staticmethod
    def run_network(deploy, x, calibrate=False):
        """:meth:`Deployment.run` of ``x`` (not ``keep``) through :mod:`hlsnn.deploy.run.bfpfast`
        when every engine layer is a BFP layer it can run (the layer path's bits and statistics,
        its per-call host work done once per layer), else None. A BFP layer has nothing to
        calibrate: the calibration pass is the layer path's pass over the whole batch at once,
        after which the deployment is calibrated (as ``Deployment._run`` leaves it; not with
        ``update="e5"``). Made once per deployment; :attr:`Deployment.fast` off keeps the layer
        path."""
        if not deploy.fast or deploy.dynamic or not (deploy.calibrated or calibrate) \
                or (calibrate and deploy.update == "e5"):
            return None
        net = getattr(deploy, "_bfpnet", None)
        if net is None:
            from . import bfpfast as netbfpfast
            net = deploy._bfpnet = netbfpfast.build(deploy, BfpExec) or False
        y = net.run(x, whole=calibrate) if net else None
        if y is not None and calibrate:
            deploy._fastnet, deploy.calibrated = None, True
        return y


EXECS = {"bfp": BfpExec, "twohot": ShiftExec, "pot": ShiftExec, "fixed": SparseExec, "sparse": SparseExec}
