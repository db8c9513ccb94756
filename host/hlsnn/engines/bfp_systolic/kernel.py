"""Accelerator-facing operations of ``bfp_systolic``: GEMM on floats or on BFP tensors, over
any target, through the stream protocol."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ..instrument import instrument
from ...formats import bfp
from ...formats._validate import as_float_array, as_float_input
from .. import tiling
from ..convgeom import Patches
from . import compiled, protocol
from ..common import exact_matmul as _exact_matmul
from ..common import workspace as _workspace
from .emulator import (RollingState, _to_float_checked, emulate, emulate_floats, emulate_stream, emulate_values,
                       gemm_dtype, values_fit_float32, weight_rows, zero_row_exponent,
                       zero_weight_row_exponents)
from .spec import MAGIC, k_limit, lane_bits


@instrument
class Kernel:
    """GEMM ``y = relu(x @ w.T + bias)`` on a ``bfp_systolic`` accelerator.

    Number formats (all from the config section ``p``): ``x`` gets one shared exponent per
    sample (row, along K), ``w`` one per output row (``weight_exponent: row``) or one for the
    tensor, the bias one for the vector; mantissas are ``mantissa_bits`` wide, exponents
    ``exponent_bits``, and float inputs are quantized with the config's ``rounding``. The
    output is a BFP tensor with one exponent per sample.

    ``stats=True`` sets the ``FLAG_STATS_OUT`` bit (not to be confused with ``method="stats"``,
    the output-exponent rule): the statistics unit returns the MSB histogram of the aligned
    wide accumulators (``protocol`` docstring; bins relative to each output's product
    exponent), left in :attr:`last_stats` (int64, ``protocol.stats_bins(p)`` counters); after a
    call without it, :attr:`last_stats` is None.

    After every operation on the ``csim`` or ``sim`` target, :attr:`last_cycles` holds the
    modelled cycles of its kernel calls (:class:`hlsnn.perf.model.KernelCycles`; None elsewhere).

    **Calls.** One kernel call holds at most ``protocol.samples_per_call(p, K, N)`` samples
    (the activation and result stores); a larger batch is split into calls, which stream the
    weights once where they fit the store (*keep*, then *resident*: below), else once each.

    **The rolling method** (``method="rolling"``, emulator rule 5) predicts each sample's
    exponent from the samples before it. Every operation (one :meth:`gemm` or :meth:`gemm_bfp`)
    starts with an empty buffer (its first kernel call sets the clear flag), and the buffer
    carries over between the calls of the operation, so the result does not depend on how the
    batch is split into calls. It does depend on the order of the samples: N chunks of the
    float :meth:`gemm` each run over the whole batch, one after another.

    **Long K.** K up to ``spec.k_limit(p)`` (the longest whose sum fits the accumulator
    exactly); a K beyond ``max_k`` runs in passes inside one call, with the partial sums on
    chip (``protocol`` docstring, *K passes*), so the result is the same as one pass would give.

    **Resident weights** (:meth:`load_weights`). Weights whose tiles fit the weight store side
    by side (``ceil(N / rows) * ceil(K / 2) <= w_depth``) can stay on chip: after
    ``load_weights(w)`` the first call with them streams them with the *keep* flag, every later
    one streams none (*resident*). Any other call's weights overwrite the store, and the next
    call with the loaded weights streams them again with *keep*.
    """

    OPERATIONS = ("gemm", "gemm_bfp", "gemm_rows")
    #: the emulator keeps the kernel's weight store between calls (``state``, per target)
    EMULATOR_STATE = True

    def __init__(self, cfg, target):
        self.cfg, self.p, self.target = cfg, cfg.params, target
        self.last_sat_count = 0
        self.last_id = None
        self.last_stats = None
        p = self.p
        # fixed per config, looked up once rather than per call
        self._beat = p["stream_bits"] // 8
        self._n_stats = protocol.n_stats_beats(p)
        self._m_range = bfp.mantissa_range(p["mantissa_bits"])
        self._e_range = bfp.exponent_range(p["exponent_bits"])
        # a lane as wide as the mantissa cannot hold an out-of-range one
        self._check_mantissas = lane_bits(p) > p["mantissa_bits"]
        self._loaded = None        # (wm, we) that load_weights asked to keep on chip
        self._on_chip = None       # the same, once a call has put them there
        self._bias_on_chip = None  # (bm, be) of the last call that streamed a bias
        self._roll = RollingState(p["rolling_len"])   # the rolling buffer, for the emu target's arrays
        self._roll_fresh = False   # the next call starts an operation: it empties the rolling buffer

    # ------------------------------------------------------------------ resident weights
    def load_weights(self, w):
        """Keep the weights ``w`` on chip: the next call with them streams them once, later
        calls stream only the activations (class docstring, *Resident weights*).

        ``w``: float weights (N, K), quantized as :meth:`gemm` quantizes them (so that float
        GEMMs with the same ``w`` find them resident), or a BFPTensor as :meth:`gemm_bfp`
        takes it. Raises :class:`InputError` when they do not fit: ``N <= max_n``,
        ``K <= k_limit`` and ``ceil(N / rows) * ceil(K / 2) <= w_depth``. Returns the kernel."""
        p = self.p
        if not isinstance(w, bfp.BFPTensor):
            w = self.quantize_weights(w)
        _, _, wm, we, _, _ = self._check_bfp(bfp.quantize(np.zeros((1, w.shape[1])), p["mantissa_bits"], axis=-1,
                                                          exponent_bits=p["exponent_bits"]), w, None)
        n, k = wm.shape
        if not protocol.resident_fits(p, n, k):
            steps = -(-n // p["rows"]) * ((k + 1) // 2)
            raise InputError(f"weights of N = {n}, K = {k} take {-(-n // p['rows'])} tiles x {(k + 1) // 2} steps = "
                             f"{steps} steps; config {self.cfg.name} keeps at most w_depth = {p['w_depth']} on chip")
        self._loaded = (np.array(wm, np.int64), np.array(we, np.int64))
        return self

    def unload_weights(self):
        """Forget the loaded weights: every call streams its weights again."""
        self._loaded = self._on_chip = None
        return self

    @property
    def resident(self):
        """``(N, K)`` of the weights on chip for resident calls, or None."""
        return None if self._on_chip is None else self._on_chip[0].shape

    @staticmethod
    def _same(held, wm, we):
        return held is not None and held[0].shape == wm.shape and np.array_equal(held[0], wm) \
            and np.array_equal(held[1], we)

    def _weight_flags(self, wm, we):
        """The keep / resident flags of a call with these weights (class docstring)."""
        if self._same(self._on_chip, wm, we):
            return protocol.FLAG_RESIDENT
        if self._same(self._loaded, wm, we):
            return protocol.FLAG_KEEP
        return 0

    def quantize_weights(self, w):
        """Float weights (N, K) to the kernel's weight format, as :meth:`quantize_operands` does (one
        exponent per row: an all-zero row gets the emulator's rule 0w, :func:`~.emulator.weight_rows`)."""
        p = self.p
        waxis = -1 if p["weight_exponent"] == "row" else None
        return weight_rows(bfp.quantize(self._float2d("w", w), p["mantissa_bits"], axis=waxis,
                                        exponent_bits=p["exponent_bits"], rounding=p["rounding"]))

    # ------------------------------------------------------------------ floats
    def quantize_operands(self, x, w, bias=None):
        """Quantize float operands to the kernel's formats: ``(xq, wq, bq)``.

        An all-zero sample's exponent is free (its mantissas are 0): it gets the emulator's
        rule 0, ``clamp(be - max(we), emin, emax)``, a value of the layer alone, so that its
        outputs are exactly the bias and do not depend on the other samples
        (:meth:`quantize_activations`).
        """
        wq = self.quantize_weights(w)
        bq = None if bias is None else self._quantize_bias(bias, wq.shape[0])
        return self.quantize_activations(x, wq, bq), wq, bq

    def _quantize_bias(self, bias, n):
        """Float bias (N,) to a BFPTensor with one exponent, as :meth:`quantize_operands` does."""
        p = self.p
        b = as_float_input(bias, "bias")
        if b.shape != (n,):
            raise InputError(f"bias must have one value per output (N = {n}), got shape {b.shape}")
        return bfp.quantize(b, p["mantissa_bits"], axis=None, exponent_bits=p["exponent_bits"],
                            rounding=p["rounding"])

    def quantize_activations(self, x, wq=None, bq=None):
        """Float activations ``x`` (batch, K) to a BFPTensor with one exponent per sample,
        all-zero samples given the emulator's rule 0 exponent (:func:`~.emulator.zero_row_exponent`
        of ``wq``'s and ``bq``'s exponents; without ``wq`` the quantizer's, which no output
        reads without a bias)."""
        p = self.p
        xq = bfp.quantize(self._float2d("x", x), p["mantissa_bits"], axis=-1, exponent_bits=p["exponent_bits"],
                          rounding=p["rounding"])
        zero = ~xq.mantissas.any(axis=1)
        if not zero.any() or wq is None:
            return xq
        xe = np.asarray(xq.exponents).reshape(-1, 1).copy()
        xe[zero] = zero_row_exponent(wq.exponents, None if bq is None else bq.exponents, p["exponent_bits"])
        return bfp.BFPTensor.from_parts(xq.mantissas, xe, p["mantissa_bits"], exponent_bits=p["exponent_bits"],
                                        axis=1, block_size=None)

    def gemm(self, x, w, bias=None, relu=False, *, method=None, stats_k=None, stats=False):
        """Float GEMM: ``x`` (batch, K), ``w`` (N, K), ``bias`` (N,) -> float64 (batch, N).

        The result is exactly the dequantized output of :meth:`gemm_bfp` on the quantized
        operands when N <= ``max_n`` and one sample with all N weight rows fits one DMA
        transfer. Otherwise N is tiled: the operands are quantized once, as a whole, then the
        outputs are computed in chunks of ``max_n`` outputs, or of fewer (whole multiples of
        the array's ``rows``) when the weights of ``max_n`` outputs exceed one transfer; each
        chunk's outputs get their own per-sample exponents, so the result equals the
        concatenation of the chunks' :meth:`gemm_bfp` results (the same on every target), not
        one ``gemm_bfp`` over all N.
        """
        if getattr(self.target, "arrays", False) and self._loaded is None \
                and tiling.transfer_limit(self.target) is None:
            y = self._gemm_arrays(x, w, bias, relu, method, stats_k, stats)
            if y is not None:
                return y
        xq, wq, bq = self.quantize_operands(x, w, bias)
        n, k = wq.shape
        step = self._n_per_call(n, k, bias is not None, stats)
        self._roll_fresh = True
        if step >= n:
            return self.gemm_bfp(xq, wq, bq, relu=relu, method=method, stats_k=stats_k, stats=stats).dequantize()
        xm, xe, wm, we, bm, be = self._check_bfp(xq, wq, bq, wide_n=True)
        regs = self._regs(method, stats_k, relu, bm is not None, stats)
        parts, tally = [], tiling.Tally()
        for a, b in tiling.chunks(n, step):
            ym, ye, sat, hist = self._run(xm, xe, wm[a:b], we[a:b], None if bm is None else bm[a:b], be, regs, stats)
            tally.count(sat, hist)
            parts.append(self._tensor(ym, ye).dequantize())
        tally.store(self)
        return np.concatenate(parts, axis=1)

    def _gemm_arrays(self, x, w, bias, relu, method, stats_k, stats):
        """The float :meth:`gemm` on the ``emu`` target's arrays (no transfer limit, no
        loaded weights) as one emulator call, or None when it is not that simple (the general
        path then runs, and raises its errors). Same bits and kernel state afterwards as the
        general path: the operands are quantized straight into the float arrays the emulator's
        GEMM reads (:func:`~.emulator.emulate_values` where no bias, statistics or stats rule
        needs the integer accumulators, else :func:`~.emulator.emulate_floats`)."""
        p = self.p
        m, e, rounding = p["mantissa_bits"], p["exponent_bits"], p["rounding"]
        # the general path's checks in its order (w, bias, x); the finiteness of w and x shows
        # in their plans' row extremes (else None: the general path raises the error)
        w = as_float_array(w, "w")
        if w.ndim != 2:
            return None
        wplan = bfp._row_plan(w, m, e, rounding, whole=p["weight_exponent"] == "tensor")
        if not wplan.finite:
            return None
        bq = None if bias is None else self._quantize_bias(bias, w.shape[0])
        x = as_float_array(x, "x")
        if x.ndim != 2:
            return None
        (batch, k), (n, kw) = x.shape, w.shape
        ft = gemm_dtype(p, k)
        if ft is None or kw != k or not 1 <= k <= k_limit(p) or not 1 <= n <= p["max_n"] or batch < 1:
            return None
        xplan = bfp._row_plan(x, m, e, rounding)
        if not xplan.finite:
            return None
        xe, we = xplan.exponents.astype(np.int64), wplan.exponents.astype(np.int64)
        if p["weight_exponent"] == "row":           # rule 0w: a dead row's exponent (quantize_weights)
            we = zero_weight_row_exponents(wplan.nonzero, we)
        nonzero = xplan.nonzero
        if not nonzero.all():       # all-zero samples: rule 0's exponent (quantize_activations)
            xe[~nonzero] = zero_row_exponent(we, None if bq is None else bq.exponents, e)
        bm, be = (None, 0) if bq is None else (bq.mantissas, int(np.asarray(bq.exponents).reshape(-1)[0]))
        flags, k_sigma = self._regs(method, stats_k, relu, bm is not None, stats)
        # the GEMM on the dequantized operands yields the values (emulator.emulate_values), where
        # no bias, statistics or stats rule needs the integer accumulators
        values = bm is None and not stats and not flags & protocol.FLAG_STATS \
            and (ft == np.float64 or values_fit_float32(p, xe, we, k))
        wf = bfp._encode_rows_into(w, wplan, m, rounding, _workspace("gemm_w", (n, k), ft), values=values)
        xf = bfp._encode_rows_into(x, xplan, m, rounding, _workspace("gemm_x", (batch, k), ft), values=values)
        # one call, as _call and _emulate_arrays make it: the operation empties the rolling buffer
        self._roll_fresh = False
        if flags & protocol.FLAG_ROLLING:
            self._roll.clear()
        self._on_chip = None
        rolling = self._roll if flags & protocol.FLAG_ROLLING else None
        if values:
            y, _, sat = emulate_values(p, xf, wf, relu=bool(relu), stats_k=k_sigma & 15, rolling=rolling)
            hist = []
        else:
            y, _, sat, *hist = emulate_floats(p, xf, xe, wf, we, bm, be, relu=bool(relu),
                                              use_stats=bool(flags & protocol.FLAG_STATS), stats_k=k_sigma & 15,
                                              stats_out=stats, dequantize=True, rolling=rolling)
        self.last_id = (MAGIC, self.cfg.hash32)
        self.last_sat_count, self.last_stats = sat, (hist[0] if stats else None)
        return y

    def gemm_rows(self, x, w, bias=None, relu=False):
        """Float activations ``x`` (batch, K) on quantized weights: ``gemm_bfp(
        quantize_activations(x), w, bias, relu=relu).dequantize()`` (``w`` and ``bias``
        BFPTensors as :meth:`gemm_bfp` takes them; the config's output-exponent method), with
        the same bits and kernel state afterwards (saturation count, weights on chip, rolling
        buffer). :attr:`last_x_nonzero` counts the non-zero input mantissas. ``x`` may be a
        convolution's patches (``convgeom.Patches``), gathered only where needed.

        On the ``emu`` target's arrays (no transfer limit, a deterministic rounding, K within
        :func:`~.emulator.gemm_dtype`'s bounds, finite ``x``) the activations are quantized
        straight into the float array of one :func:`~.emulator.emulate_floats` call, by the
        compiled helpers where they apply (:meth:`_fused`, :meth:`_conv_rows_blocked`)."""
        p = self.p
        m, e, rounding = p["mantissa_bits"], p["exponent_bits"], p["rounding"]
        fast = getattr(self.target, "arrays", False) and tiling.transfer_limit(self.target) is None \
            and rounding != "stochastic"
        done, acc = None, None
        if isinstance(x, Patches):   # a convolution's im2col rows, not built yet
            if fast and x.shape[0] >= 1 and gemm_dtype(p, x.shape[1]) is not None:
                ft = gemm_dtype(p, x.shape[1])
                xa = x
                blocked = self._fused(w, bias, ft, x.shape, lambda wm, out: compiled.conv_gemm(
                    xa.x, xa.geom, *xa.out_hw, m, e, rounding, wm, out)) or self._conv_rows_blocked(x, w, bias, ft)
                if blocked is not None:
                    done, acc, wf_blocked = blocked[:3], blocked[3], blocked[4]
                    xf = None
                else:
                    xf = _workspace("rows_x", x.shape, ft)
                    done = compiled.quantize_conv_rows(x.x, x.geom, *x.out_hw, m, e, rounding, xf)
            if done is None:
                x = x.rows()
        if fast and done is None:
            xa = as_float_array(x, "x")
            ft = gemm_dtype(p, xa.shape[1]) if xa.ndim == 2 and xa.shape[0] >= 1 else None
            fused = None if ft is None else self._fused(
                w, bias, ft, xa.shape, lambda wm, out: compiled.rows_gemm(xa, m, e, rounding, wm, out))
            if fused is not None:    # quantization and the sums in one pass (compiled.py)
                done, acc, wf_blocked, xf = fused[:3], fused[3], fused[4], None
            elif ft is not None:     # the compiled twin (compiled.py), else numpy's two steps
                xf = _workspace("rows_x", xa.shape, ft)
                done = compiled.quantize_rows(xa, m, e, rounding, xf)
            plan = bfp._row_plan(xa, m, e, rounding) if ft is not None and done is None else None
            fast = done is not None or (plan is not None and plan.finite)
        if not fast:
            xq = self.quantize_activations(x, w, bias)
            self.last_x_nonzero = int(np.count_nonzero(xq.mantissas))
            return self.gemm_bfp(xq, w, bias, relu=relu).dequantize()
        # gemm_bfp's checks of w and bias (against a one-sample stand-in for x)
        one = bfp.BFPTensor._trusted(np.zeros((1, xa.shape[1]), np.int64), np.zeros((1, 1), np.int32), m, e, 1, None)
        _, _, wm, we, bm, be = self._check_bfp(one, w, bias)
        # quantize_activations: one exponent per sample; an all-zero sample (every mantissa 0)
        # takes the emulator's rule 0 exponent (the layer's: batch-free)
        if done is not None:
            xe, nonzero, self.last_x_nonzero = done
        else:
            xe, nonzero = plan.exponents.astype(np.int64), plan.nonzero
            xf = bfp._encode_rows_into(xa, plan, m, rounding, _workspace("rows_x", xa.shape, ft))
            self.last_x_nonzero = int(np.count_nonzero(xf))
        if not nonzero.all():
            xe[~nonzero] = zero_row_exponent(we, None if bm is None else be, e)
        wf = _to_float_checked(np.asarray(wm), _workspace("rows_w", np.shape(wm), ft), m) if acc is None else \
            wf_blocked
        # gemm_bfp -> _run -> _call -> _emulate_arrays, their state in their order
        flags, k_sigma = self._regs(None, None, relu, bm is not None, False)
        if flags & protocol.FLAG_ROLLING:            # the operation's first (and only) call
            self._roll.clear()
        self._roll_fresh = False
        self._on_chip = self._loaded if self._weight_flags(wm, we) else None
        y, ye, sat = emulate_floats(p, xf, xe, wf, np.asarray(we, np.int64), bm, be, relu=bool(relu),
                                    use_stats=bool(flags & protocol.FLAG_STATS), stats_k=k_sigma & 15,
                                    dequantize=True, rolling=self._roll if flags & protocol.FLAG_ROLLING else None,
                                    acc=acc)
        lo, hi = self._e_range
        if ye.size and (ye.min() < lo or ye.max() > hi):         # as _tensor checks the output
            self._out_of_range("exponent", ye, lo, hi)
        self.last_id = (MAGIC, self.cfg.hash32)
        self.last_sat_count, self.last_stats = sat, None
        return y

    #: rows of im2col patches per block of :meth:`_conv_rows_blocked` (whole images, at least one)
    ROWS_BLOCK = 8192
    #: :meth:`_conv_rows_blocked` runs for more rows than this only (a calibration batch)
    BLOCKED_ABOVE = 1 << 16

    def _fused(self, w, bias, ft, shape, run):
        """:meth:`_conv_rows_blocked`'s results from one of the compiled fused passes
        (``compiled.conv_gemm``, ``compiled.rows_gemm``; ``run(wm, acc)`` calls it): the
        activations quantized and multiplied by the weights' mantissas in one C pass, in int32 or
        float64 (``compiled.sums_kind``: the same integers as the float GEMM's, every sum being
        exact). ``shape``: the activations' (rows, K). None where it does not apply (the compiled
        helpers off, weights or bias that :meth:`_check_bfp` refuses, neither bound met, or
        activations the compiled quantizer leaves to numpy)."""
        m = self.p["mantissa_bits"]
        wm = None if compiled.lib() is None else self._weights_or_none(w, bias, shape[1])
        if wm is None or compiled.sums_kind(wm, m, ft) is None:
            return None
        wf = _to_float_checked(wm, _workspace("rows_w", np.shape(wm), ft), m)
        acc = _workspace("acc", (shape[0], wf.shape[0]), ft)
        got = run(wm, acc)
        return None if got is None else (*got, acc, wf)

    def _weights_or_none(self, w, bias, k):
        """The weights' mantissas where :meth:`_check_bfp` takes ``w`` and ``bias`` for K = ``k``, else None."""
        p = self.p
        one = bfp.BFPTensor._trusted(np.zeros((1, k), np.int64), np.zeros((1, 1), np.int32), p["mantissa_bits"],
                                     p["exponent_bits"], 1, None)
        try:
            return np.asarray(self._check_bfp(one, w, bias)[2])
        except InputError:
            return None

    def _conv_rows_blocked(self, x, w, bias, ft):
        """:meth:`gemm_rows`' quantization of a convolution's patches (``compiled.quantize_conv_rows``)
        and its exact sums ``xf @ wf.T``, a block of whole images at a time (about
        :attr:`ROWS_BLOCK` rows, multiplied while in the caches): ``(exponents, nonzero,
        non-zero count, sums, weights)``, the same as quantizing every row first and then
        multiplying. None when this does not apply (the compiled helpers off, weights or bias
        that :meth:`_check_bfp` refuses, or a block the compiled quantizer leaves to numpy): the
        caller then runs the whole-array steps, which raise their errors in their order."""
        p = self.p
        b = x.x.shape[0]
        oh, ow = x.out_hw
        per = max(1, self.ROWS_BLOCK // max(1, oh * ow))          # images per block
        if b <= per or x.shape[0] <= self.BLOCKED_ABOVE or compiled.lib() is None:
            return None
        m, e, rounding = p["mantissa_bits"], p["exponent_bits"], p["rounding"]
        wm = self._weights_or_none(w, bias, x.shape[1])
        if wm is None:
            return None
        wf = _to_float_checked(wm, _workspace("rows_w", np.shape(wm), ft), m)
        rows, n = x.shape[0], wf.shape[0]
        xe, nonzero = np.empty(rows, np.int64), np.empty(rows, bool)
        acc = np.empty((rows, n), ft)
        blk = _workspace("rows_xb", (per * oh * ow, x.shape[1]), ft)
        nnz = 0
        for b0 in range(0, b, per):
            b1 = min(b, b0 + per)
            r0, r1 = b0 * oh * ow, b1 * oh * ow
            xb = blk[:r1 - r0]
            got = compiled.quantize_conv_rows(x.x[b0:b1], x.geom, oh, ow, m, e, rounding, xb)
            if got is None:
                return None
            xe[r0:r1], nonzero[r0:r1] = got[0], got[1]
            nnz += got[2]
            _exact_matmul(xb, wf.T, acc[r0:r1])
        return xe, nonzero, nnz, acc, wf

    def _n_per_call(self, n, k, has_bias, stats):
        """Outputs per call of the float :meth:`gemm`: ``max_n``, or the largest multiple of
        ``rows`` whose one-sample call fits one transfer (:func:`engines.tiling.outputs_per_call`)."""
        p = self.p
        step, limit = min(n, p["max_n"]), tiling.transfer_limit(self.target)
        if limit is None or k > k_limit(p):
            return step
        return tiling.outputs_per_call(step, p["rows"],
                                       lambda m: max(self._transfer_bytes(1, m, k, has_bias, stats)) <= limit)

    def _transfer_bytes(self, batch, n, k, has_bias, stats):
        """Bytes of one call's input and output transfers (the latter with the statistics segment)."""
        p = self.p
        return (protocol.n_input_beats(p, batch, n, k, has_bias) * self._beat,
                (protocol.n_output_beats(p, batch, n) + (self._n_stats if stats else 0)) * self._beat)

    # ------------------------------------------------------------------ BFP
    def gemm_bfp(self, x, w, bias=None, relu=False, *, method=None, stats_k=None, stats=False):
        """GEMM on BFP tensors; returns a BFPTensor (batch, N) with one exponent per row.

        ``method`` is ``"max"`` or ``"stats"`` (default: the config's ``output_exponent``);
        ``stats_k`` the k of mean + k*sigma (default: the config's). ``stats``: read the
        statistics segment into :attr:`last_stats`.

        Tiling (``engines.tiling``): a batch whose input or output stream exceeds one DMA
        transfer of the target is split into row chunks; every sample is computed
        independently, so the result is the same as one call, and the histograms of the
        calls are merged (saturating, as the counters do). N must be at most ``max_n``
        here: one output exponent per sample spans all N (the float :meth:`gemm` tiles N).
        """
        xm, xe, wm, we, bm, be = self._check_bfp(x, w, bias)
        regs = self._regs(method, stats_k, relu, bm is not None, stats)
        self._roll_fresh = True
        ym, ye, self.last_sat_count, self.last_stats = self._run(xm, xe, wm, we, bm, be, regs, stats)
        return self._tensor(ym, ye)

    def _tensor(self, ym, ye):
        """The result tensor of the fields :func:`protocol.unpack_output` returned (new arrays,
        taken over without from_parts' copies); only the checks the lane widths leave open are
        made: every exponent, and the mantissas when their lane is wider than the field."""
        p = self.p
        lo, hi = self._e_range
        e = ye.tolist()              # one exponent per sample: plain Python beats two cold numpy reductions
        if min(e) < lo or max(e) > hi:
            self._out_of_range("exponent", ye, lo, hi)
        if self._check_mantissas:
            lo, hi = self._m_range
            if ym.min() < lo or ym.max() > hi:
                self._out_of_range("mantissa", ym, lo, hi)
        return bfp.BFPTensor._trusted(ym, ye.astype(np.int32).reshape(-1, 1), p["mantissa_bits"],
                                      p["exponent_bits"], 1, None)

    def _out_of_range(self, what, a, lo, hi):
        bad = a[(a < lo) | (a > hi)]
        raise InputError(f"the kernel returned an output {what} of {int(bad[0])}, outside the config's "
                         f"[{lo}, {hi}] ({bad.size} such values): the overlay or library does not run config "
                         f"{self.cfg.name}'s kernel, or the output stream was corrupted")

    def _regs(self, method, stats_k, relu, has_bias, stats):
        """The control registers after ``batch, n, k`` (flags, k_sigma), arguments checked."""
        p = self.p
        method = method or p["output_exponent"]
        if method not in ("max", "stats", "rolling"):
            raise InputError(f"method = {method!r}: must be 'max', 'stats' or 'rolling'")
        if method == "stats" and p["weight_exponent"] != "tensor":
            raise InputError("method = 'stats' needs a config with weight_exponent: tensor")
        k_sigma = p["stats_k"] if stats_k is None else int(stats_k)
        if not 0 <= k_sigma <= 15:
            raise InputError(f"stats_k = {stats_k!r}: must be an integer in [0, 15]")
        return [protocol.flags(relu, has_bias, method, stats), k_sigma]

    def _run(self, xm, xe, wm, we, bm, be, regs, stats):
        """One GEMM of at most ``max_n`` outputs, split over the batch so every call fits one
        DMA transfer: ``(ym, ye, saturation count, histogram or None)``."""
        p, beat = self.p, self._beat
        batch, k = xm.shape
        n = wm.shape[0]
        has_bias = bm is not None
        n_stats = self._n_stats if stats else 0
        limit = tiling.transfer_limit(self.target)
        cap = protocol.samples_per_call(p, k, n)
        n_in = protocol.n_input_beats(p, batch, n, k, has_bias)
        n_out = protocol.n_output_beats(p, batch, n)
        # The emu target's arrays are not limited by the stores: every sample is computed on
        # its own and the rolling buffer carries over between calls, so one call gives what
        # the calls of the split would (a transfer limit, if set, still splits them)
        if (batch <= cap or getattr(self.target, "arrays", False)) \
                and (limit is None or max(n_in, n_out + n_stats) * beat <= limit):  # the common case
            return self._call(xm, xe, wm, we, bm, be, regs, stats, n_in, n_out)
        rows = tiling.rows_per_call(
            min(batch, cap), lambda b: self._transfer_bytes(b, n, k, has_bias, stats)[0],
            lambda b: self._transfer_bytes(b, n, k, has_bias, stats)[1], limit,
            what=f"{self.cfg.name} GEMM with N = {n}, K = {k}")
        yms, yes, tally = [], [], tiling.Tally()
        parts = list(tiling.chunks(batch, rows))
        # the calls of a split stream the weights once when they fit the store side by side
        # (protocol.streams_weights_once): the first keeps them, the others find them resident,
        # unless load_weights already decides (its flags); the store then holds weights nobody
        # loaded, so a later operation streams its weights again
        once = not self._weight_flags(wm, we) and protocol.streams_weights_once(p, n, k, len(parts))
        for i, (a, b) in enumerate(parts):
            wflags = (protocol.FLAG_KEEP if i == 0 else protocol.FLAG_RESIDENT) if once else None
            ym, ye, sat, hist = self._call(xm[a:b], xe[a:b], wm, we, bm, be, regs, stats,
                                           protocol.n_input_beats(p, b - a, n, k, has_bias),
                                           protocol.n_output_beats(p, b - a, n), wflags=wflags)
            yms.append(ym)
            yes.append(ye)
            tally.count(sat, hist)
        if once:
            self._on_chip = None
        return np.concatenate(yms), np.concatenate(yes), tally.sat, tally.stats

    def _call(self, xm, xe, wm, we, bm, be, regs, stats, n_in, n_out, wflags=None):
        """One kernel call of ``n_in`` input and ``n_out`` output beats (statistics segment
        not counted): pack (into the target's DMA input buffer where it has one), run on the
        target, check the ID registers, unpack. ``wflags``: the keep / resident flags of a call
        of a split that streams its weights once (:meth:`_run`); None: those of
        :meth:`_weight_flags`."""
        p = self.p
        batch, k = xm.shape
        n = wm.shape[0]
        split = wflags is not None
        if not split:
            wflags = self._weight_flags(wm, we)
        if regs[0] & protocol.FLAG_ROLLING and self._roll_fresh:
            regs = [regs[0] | protocol.FLAG_ROLL_CLEAR, regs[1]]   # the operation's first call
        self._roll_fresh = False
        # the weight store now holds these weights (keep), still holds them (resident), or not
        on_chip = ((wm, we) if split else self._loaded) if wflags else None
        if getattr(self.target, "arrays", False):
            self._on_chip = on_chip
            return self._emulate_arrays(xm, xe, wm, we, bm, be, regs, stats)
        resident = bool(wflags & protocol.FLAG_RESIDENT)
        # a resident call whose bias is the one on chip streams only its activations
        bias_kept = resident and bm is not None and self._bias_on_chip is not None \
            and np.array_equal(self._bias_on_chip[0], bm) and self._bias_on_chip[1] == int(be)
        if resident:
            n_in = protocol.n_input_beats(p, batch, n, k, bm is not None, resident=True, bias_kept=bias_kept)
        stage = getattr(self.target, "input_buffer", None)
        beats = protocol.pack_input(p, xm, xe, wm, we, bm, be, resident=resident, bias_kept=bias_kept,
                                    out=None if stage is None else stage(n_in * self._beat))
        regs_in = [batch, n, k, regs[0] | wflags | (protocol.FLAG_BIAS_KEPT if bias_kept else 0), regs[1]]
        self._on_chip = None                    # a failed call leaves the stores unknown
        kept_bias, self._bias_on_chip = self._bias_on_chip, None
        out, regs_out = self.target.run(beats, regs_in, n_out + (self._n_stats if stats else 0))
        self._on_chip = on_chip
        self._bias_on_chip = kept_bias if bm is None or bias_kept else (np.array(bm, np.int64), int(be))
        magic, hash32, sat = (int(r) for r in regs_out)
        if magic != MAGIC or hash32 != self.cfg.hash32:
            raise InputError(f"kernel ID register reads magic 0x{magic:08x} hash 0x{hash32:08x}; config "
                             f"{self.cfg.name} expects 0x{MAGIC:08x} 0x{self.cfg.hash32:08x}")
        self.last_id = (magic, hash32)
        hist = protocol.unpack_stats(p, out[n_out:]) if stats else None
        # new arrays (astype copies): nothing aliases the target's buffer, which the next call reuses
        ym, ye = protocol.unpack_output(p, out[:n_out], batch, n)
        return ym, ye, sat, hist

    def _emulate_arrays(self, xm, xe, wm, we, bm, be, regs, stats):
        """The ``emu`` target's call: the emulator on the operand arrays, with the registers'
        meaning, and no beats packed or unpacked. It equals :meth:`emulate_stream` on the
        packed call (``EmuTarget(arrays=False)``), which is what csim and sim are compared with;
        ``tests/engines/test_emu_arrays.py`` holds the two equal."""
        flags, k_sigma = (int(r) for r in regs)
        if flags & protocol.FLAG_ROLL_CLEAR:
            self._roll.clear()
        ym, ye, sat, *hist = emulate(self.p, xm, xe, wm, we, bm, be, relu=bool(flags & protocol.FLAG_RELU),
                                     use_stats=bool(flags & protocol.FLAG_STATS), stats_k=k_sigma & 15,
                                     stats_out=stats, rolling=self._roll if flags & protocol.FLAG_ROLLING else None)
        self.last_id = (MAGIC, self.cfg.hash32)
        return ym, ye, sat, (hist[0] if stats else None)

    # ------------------------------------------------------------------ emulator target
    #: the emulator behind the stream interface (:func:`hlsnn.engines.bfp_systolic.emulator.emulate_stream`)
    emulate_stream = staticmethod(emulate_stream)

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _float2d(name, a):
        a = as_float_input(a, name)                # real and finite, named in the error
        if a.ndim != 2:
            raise InputError(f"{name} must be 2-D, got shape {a.shape}")
        return a

    def _check_bfp(self, x, w, bias, wide_n=False):
        p = self.p
        m, e = p["mantissa_bits"], p["exponent_bits"]
        for name, t in (("x", x), ("w", w)) + ((("bias", bias),) if bias is not None else ()):
            if not isinstance(t, bfp.BFPTensor):
                raise InputError(f"{name} must be a BFPTensor (hlsnn.formats.bfp.quantize), got {type(t).__name__}")
            if t.mantissa_bits != m or t.exponent_bits != e:
                raise InputError(f"{name} has {t.mantissa_bits}-bit mantissas and {t.exponent_bits}-bit exponents; "
                                 f"config {self.cfg.name} needs {m} and {e}")
        if x.mantissas.ndim != 2 or w.mantissas.ndim != 2:
            raise InputError(f"x and w must be 2-D, got shapes {x.shape} and {w.shape}")
        batch, k = x.shape
        n, kw = w.shape
        if kw != k:
            raise InputError(f"x is (batch={batch}, K={k}) but w is (N={n}, K={kw}): K must agree")
        if not 1 <= k <= k_limit(p):
            raise InputError(f"K = {k}: must be in [1, k_limit = {k_limit(p)}] for config {self.cfg.name} (K beyond "
                             f"max_k = {p['max_k']} runs in passes; k_limit is the longest K whose sum fits "
                             f"acc_bits = {p['acc_bits']} exactly)")
        if n < 1 or (n > p["max_n"] and not wide_n):
            raise InputError(f"N = {n}: must be in [1, max_n = {p['max_n']}] for config {self.cfg.name} "
                             f"(gemm_bfp gives every sample one output exponent over all N; the float gemm tiles "
                             f"larger N)")
        if batch < 1:
            raise InputError("batch must be at least 1")
        xe = np.asarray(x.exponents)
        if xe.shape != (batch, 1):
            raise InputError(f"x needs one exponent per sample (exponents of shape ({batch}, 1), "
                             f"quantize with axis=-1, block_size=None); got {xe.shape}")
        we = np.asarray(w.exponents)
        if p["weight_exponent"] == "row":
            if we.shape != (n, 1):
                raise InputError(f"w needs one exponent per row (shape ({n}, 1)); got {we.shape}")
            we = we.reshape(-1)
        else:
            if we.size != 1:
                raise InputError(f"w needs one exponent for the tensor (weight_exponent: tensor); got {we.shape}")
            we = np.full(n, int(we.reshape(-1)[0]))
        bm, be = None, 0
        if bias is not None:
            if bias.shape != (n,) or np.asarray(bias.exponents).size != 1:
                raise InputError(f"bias must be a BFPTensor of shape ({n},) with one exponent; got {bias.shape}")
            bm, be = bias.mantissas, int(np.asarray(bias.exponents).reshape(-1)[0])
        return x.mantissas, xe.reshape(-1), w.mantissas, we, bm, be
