"""Accelerator-facing operations of ``shift_mac``: GEMM and 2-D convolution with PoT or
two-hot weights, on floats or on integer activations and shift codes."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ..instrument import instrument
from ...formats import shift as sfmt
from ...formats._validate import as_float_input, as_int_input
from .. import tiling
from . import floatgemm, protocol, tiles
from .emulator import emulate, im2col
from ..common import largest_frac as _largest_frac
from .spec import MAGIC, MODES


@instrument
class Kernel:
    """GEMM and convolution on a ``shift_mac`` accelerator.

    Modes: ``"twohot"`` (one two-hot weight per register, one product per unit and cycle),
    ``"pot"`` (two power-of-two weights of two neurons per register: two products per cycle),
    ``"pot_sum"`` (two power-of-two weights of the same neuron, summed: equal to two-hot
    with delta = 0). Integer activations are ``act_bits`` wide, signed or unsigned per the
    config; the output is requantized to the same format.

    ``stats=True`` on an operation sets the ``FLAG_STATS_OUT`` bit: the kernel's statistics unit
    then returns the MSB histogram of the wide values it requantized (``protocol`` docstring),
    left in :attr:`last_stats` (int64, ``protocol.stats_bins(p)`` counters); after a call
    without it, :attr:`last_stats` is None.

    **Tiling** (``engines.tiling``). :meth:`gemm_int` and :meth:`conv2d_int` (and the float
    :meth:`gemm` and :meth:`conv2d`, which go through them) take operands of any size; an
    operation one kernel call cannot take is split into calls whose results are, bit for bit,
    those of a single call on a kernel with larger maxima (every output is an exact integer
    computed from its own row/window, weights, bias and shift):

    * outputs: N (conv: Z) above ``max_n`` is cut into chunks of at most ``max_n`` neurons, in
      whole weight tiles (``protocol.tile_neurons``: ``rows``, ``2*rows`` in dual PoT mode;
      when ``max_n`` is smaller than a tile, chunks of ``max_n``); each call gets its chunk's
      register rows, bias and shift, and the results are concatenated;
    * transfers: every call's input and output stream fits ``tiling.transfer_limit(target)``
      bytes (beats x ``stream_bits/8``). GEMM splits the batch rows
      (``tiling.rows_per_call``); if even one row with a chunk's weights does not fit, the
      chunk shrinks by whole weight tiles first; a single row with a single weight tile
      that does not fit is an :class:`InputError`;
    * GEMM batches whose activations exceed the on-chip store (``ceil(B/cols) x ceil(K/lanes)
      x lanes`` above ``x_depth``) are split into calls of whole sample groups;
    * convolutions whose weights exceed the weight store (``tiles x C*k*k`` above
      ``w_depth``) are cut into chunks of whole weight tiles; feature maps wider than the line
      buffer holds (``(k + 1) x C x ceil(W / banks)`` above ``line_depth``), higher or wider
      than ``max_hw``, or whose call exceeds the transfer limit: the map is padded on the host
      once (zeros, exactly the kernel's padding) and cut into tiles of ``th x tw`` output
      pixels; a tile reads the ``(th+k-1) x (tw+k-1)`` window of the padded map (a ``k-1``
      halo) and runs with ``pad = 0`` ("valid"); the tile shape is the one that needs the
      fewest calls, then the fewest input bytes;
    * the reduction length K (GEMM K, conv ``C*k*k``) above ``max_k`` runs as raw calls
      (``FLAG_RAW``) over chunks of K, each tiled as above, whose exact sums the host adds
      before the kernel's output rules: ``emulate`` on the whole K, bit for bit
      (``shift_mac.tiles``, *K tiling*). ``k_step`` forces chunks of that many columns (a
      convolution: whole channels) for any K;
    * :attr:`last_sat_count` is the sum of the calls' counts, saturating at ``2**32-1``
      (``tiling.add_u32``); :attr:`last_stats` the calls' histograms merged with
      ``engines.stream.merge_stats`` — equal to one call's while no counter saturates.

    An operation that fits is exactly one call, without extra copies. :meth:`run_registers`
    is always one call: beyond the maxima or the transfer limit it raises. The tiled paths
    are in ``shift_mac.tiles``.

    After every operation on the ``csim`` or ``sim`` target, :attr:`last_cycles` holds the
    modelled cycles of its kernel calls (:class:`hlsnn.perf.model.KernelCycles`; None elsewhere).

    **Resident weights** (:meth:`load_weights`). Weights whose tiles fit the weight store
    (``tiles x K <= w_depth``, ``N <= max_n``) can stay on chip: after ``load_weights(w)`` the
    first call with these weights streams them once with the *keep* flag, and every later
    call with the same registers streams none (*resident* flag): it costs the parameters and
    the activations only. Any other call's weights replace them on chip (the kernel reuses
    the store), and the next call with the loaded weights streams them again with *keep*.
    """

    OPERATIONS = ("gemm", "gemm_int", "conv2d", "conv2d_int", "run_registers")
    #: the emulator keeps the kernel's weight store between calls (``state``, per target)
    EMULATOR_STATE = True

    def __init__(self, cfg, target):
        self.cfg, self.p, self.target = cfg, cfg.params, target
        self.last_sat_count = 0
        self.last_stats = None
        self._loaded = None        # (n, k, mode, regs) that load_weights asked to keep on chip
        self._on_chip = None       # the same, once a call has put them there

    # ------------------------------------------------------------------ resident weights
    def load_weights(self, weights, mode=None, *, delta=0):
        """Keep ``weights`` on chip: the next call with them streams them once, later calls
        stream only the parameters and activations (class docstring, *Resident weights*).

        ``weights``: shift codes (a 2-D (N, K) or 4-D (Z, C, k, k) ShiftTensor, or a
        ``pot_sum`` pair), or float weights of either shape, quantized as :meth:`gemm` /
        :meth:`conv2d` quantize them (``mode``, default the config's; ``delta`` for two-hot),
        so that those float operations find them resident. Raises :class:`InputError` when
        they do not fit one call: ``N <= max_n`` and ``tiles x K <= w_depth``
        (``protocol.n_tiles``). Returns the kernel."""
        if not isinstance(weights, (tuple, sfmt.ShiftTensor)):
            w = np.asarray(weights, np.float64)
            if w.ndim not in (2, 4):
                raise InputError(f"weights must be (N, K) or (Z, C, k, k), got shape {w.shape}")
            mode = mode or self.p["default_mode"]
            weights = self._quantize_weights(w, mode, delta)
        ref = weights[0] if isinstance(weights, tuple) else weights
        if isinstance(ref, sfmt.ShiftTensor) and len(ref.shape) == 4:
            weights = tuple(_flatten(t) for t in weights) if isinstance(weights, tuple) else _flatten(weights)
        regs, _, mode, _ = self.registers(weights, mode)
        n = (weights[0] if isinstance(weights, tuple) else weights).shape[0]
        k = regs.shape[1]
        self._check_resident(n, k, mode)
        self._loaded = (n, k, mode, np.array(regs, copy=True))
        return self

    def unload_weights(self):
        """Forget the loaded weights: every call streams its weights again."""
        self._loaded = self._on_chip = None
        return self

    @property
    def resident(self):
        """``(N, K, mode)`` of the weights on chip for resident calls, or None."""
        return None if self._on_chip is None else self._on_chip[:3]

    def _check_resident(self, n, k, mode):
        p = self.p
        steps = protocol.n_tiles(p, n, mode) * k
        if n > p["max_n"] or k > p["max_k"] or steps > p["w_depth"]:
            raise InputError(f"weights of N = {n}, K = {k} in mode {mode} take {protocol.n_tiles(p, n, mode)} tiles x "
                             f"{k} = {steps} steps; config {self.cfg.name} keeps at most w_depth = {p['w_depth']} "
                             f"steps on chip (and N <= max_n = {p['max_n']}, K <= max_k = {p['max_k']})")

    @staticmethod
    def _same(held, n, k, mode, regs):
        return (held is not None and held[:3] == (n, k, mode) and held[3].shape == regs.shape
                and np.array_equal(held[3], regs))

    def _weight_flags(self, n, k, mode, regs):
        """``(flags, resident)`` for a call with these registers (class docstring)."""
        if self._same(self._on_chip, n, k, mode, regs):
            return protocol.FLAG_RESIDENT, True
        if self._same(self._loaded, n, k, mode, regs):
            return protocol.FLAG_KEEP, False
        return 0, False

    # ------------------------------------------------------------------ registers
    def registers(self, weights, mode=None):
        """Register matrix ``(rows, K)`` and per-neuron scale exponents ``F (N,)`` for 2-D
        weights: a two-hot ShiftTensor, a PoT ShiftTensor (dual mode), or a pair of PoT
        ShiftTensors of equal scale (summed mode)."""
        p = self.p
        if isinstance(weights, tuple):
            a, b = weights
            mode = mode or "pot_sum"
            if mode != "pot_sum" or a.mode != "pot" or b.mode != "pot" or a.shape != b.shape:
                raise InputError("a pair of weights means mode 'pot_sum': two PoT ShiftTensors of one shape")
            if not np.array_equal(*np.broadcast_arrays(a.scale_exponent, b.scale_exponent)):
                raise InputError("the two PoT weight tensors of 'pot_sum' must share their scale exponents")
            ref = a
        else:
            if not isinstance(weights, sfmt.ShiftTensor):
                raise InputError(f"weights must be a ShiftTensor (hlsnn.formats.shift), got {type(weights).__name__}")
            mode = mode or ("twohot" if weights.mode == "twohot" else "pot")
            want = "twohot" if mode == "twohot" else "pot"
            if weights.mode != want or mode == "pot_sum":
                raise InputError(f"mode {mode!r} needs {'a pair of PoT' if mode == 'pot_sum' else want} weights, "
                                 f"got a {weights.mode} ShiftTensor")
            ref = weights
        if ref.exp_bits != p["exp_bits"]:
            raise InputError(f"weights have exp_bits = {ref.exp_bits}; config {self.cfg.name} has {p['exp_bits']}")
        if len(ref.shape) != 2:
            raise InputError(f"weights must be 2-D (N, K) here, got shape {ref.shape}")
        n, k = ref.shape
        F = np.broadcast_to(np.asarray(ref.scale_exponent, np.int64), ref.shape)
        if not (F == F[:, :1]).all():
            raise InputError("weights need one scale exponent per output row (quantize with axis=0) or one per tensor")
        F = F[:, 0].copy()
        rows = protocol.register_rows(p, n, mode)
        cfg_bit = 0 if mode == "twohot" else 1
        fields = np.zeros((7, rows, k), np.int64)     # e1 s1 z1 e2 s2 z2 cfg
        fields[2] = fields[5] = 1                     # padding rows: both terms zero
        fields[6] = cfg_bit
        if mode == "twohot":
            fields[0, :n], fields[1, :n], fields[2, :n] = ref.e1, ref.s1, ref.zero
            fields[3, :n], fields[4, :n], fields[5, :n] = ref.e2, ref.s2, 0
        elif mode == "pot":
            e, s, z = (np.zeros((2 * rows, k), np.int64) for _ in range(3))
            z[:] = 1
            e[:n], s[:n], z[:n] = ref.e1, ref.s1, ref.zero
            fields[0], fields[1], fields[2] = e[0::2], s[0::2], z[0::2]      # neuron 2u: shifter 1
            fields[3], fields[4], fields[5] = e[1::2], s[1::2], z[1::2]      # neuron 2u+1: shifter 2
        else:
            fields[0, :n], fields[1, :n], fields[2, :n] = a.e1, a.s1, a.zero
            fields[3, :n], fields[4, :n], fields[5, :n] = b.e1, b.s1, b.zero
        regs = protocol.pack_registers(p, *fields)
        return regs, F, mode, (ref.delta if mode == "twohot" else 0)

    # ------------------------------------------------------------------ lowest level
    def run_registers(self, x=None, regs=None, *, n, mode, delta=0, bias=None, shift=0, relu=False,
                      fmap=None, ksize=None, pad=0, stats=False, raw=False, _rows=False):
        """Run raw register lanes (``protocol.pack_registers``) on integer activations ``x``
        (batch, K), or on a feature map ``fmap`` (cin, H, W) with ``ksize``/``pad``.
        ``stats``: also read the statistics segment into :attr:`last_stats`. ``raw``: the raw
        output mode (``FLAG_RAW``): returns the wide values (emulator rule 7: accumulator plus
        bias, after ReLU, ``acc_bits`` wide) instead of requantized outputs; ``shift`` unused.
        ``_rows`` (``tiles.gemm_int`` on the ``emu`` target's arrays without a transfer limit
        only): ``x`` is an int64 array its caller checked, and a batch of any size runs as one
        emulator call; every sample is computed on its own, so this equals the calls the
        activation store would split it into (outputs, the saturation count modulo ``2**32``,
        the histogram saturating at ``2**32 - 1``; ``tests/engines/test_emu_arrays.py``).

        Exactly one kernel call, never tiled: N above ``max_n``, a batch above the activation
        store, a map beyond the line buffer or ``max_hw``, convolution weights beyond the weight
        store, or a transfer above ``tiling.transfer_limit(target)`` is an :class:`InputError`
        (:meth:`gemm_int` / :meth:`conv2d_int` split such operations)."""
        p = self.p
        regs = np.asarray(regs)
        bias = np.zeros(n, np.int64) if bias is None else np.asarray(bias, np.int64).reshape(-1)
        shift = np.broadcast_to(np.asarray(shift, np.int64), (n,)).copy()
        if bias.shape != (n,):
            raise InputError(f"bias must have N = {n} values, got {bias.shape}")
        if not 1 <= n <= p["max_n"]:
            raise InputError(f"N = {n}: must be in [1, max_n = {p['max_n']}] for one kernel call (run_registers); "
                             f"gemm_int / conv2d_int split larger N")
        if not 0 <= int(delta) <= p["max_delta"]:
            raise InputError(f"delta = {delta}: must be in [0, max_delta = {p['max_delta']}]")
        if mode not in MODES:
            raise InputError(f"mode = {mode!r}: must be one of {', '.join(MODES)}")
        row = None
        flags = (protocol.FLAG_RELU if relu else 0) | (protocol.FLAG_STATS_OUT if stats else 0)
        flags |= protocol.FLAG_RAW if raw else 0
        if fmap is not None:
            if not p["conv"]:
                raise InputError(f"config {self.cfg.name} has no convolution stage (conv: false)")
            fmap = as_int_input(fmap, "fmap")
            if fmap.ndim != 3:
                raise InputError(f"fmap must be (C, H, W), got shape {fmap.shape}")
            cin, h, w = fmap.shape
            if ksize is None or not 1 <= ksize <= p["max_ksize"] or not 0 <= pad < ksize:
                raise InputError(f"ksize = {ksize}, pad = {pad}: need 1 <= ksize <= {p['max_ksize']}, 0 <= pad < ksize")
            oh, ow = h + 2 * pad - ksize + 1, w + 2 * pad - ksize + 1
            if oh < 1 or ow < 1:
                raise InputError(f"a {ksize}x{ksize} kernel with pad {pad} does not fit a {h}x{w} map")
            batch, k, row = oh * ow, cin * ksize * ksize, ow
            why = tiles.conv_call_limits(p, cin, h, w, ksize, n, k, mode)
            if why:
                raise InputError(f"feature map {fmap.shape} with {ksize}x{ksize} kernels: {why} for one kernel call "
                                 f"(run_registers); conv2d_int tiles larger maps")
            regs_in = [batch, n, k, flags | protocol.FLAG_CONV, MODES[mode], delta, cin, h, w, ksize, pad]
        else:
            x = x if _rows else as_int_input(x)
            if x.ndim != 2:
                raise InputError(f"x must be 2-D (batch, K), got shape {x.shape}")
            batch, k = x.shape
            regs_in = [batch, n, k, flags, MODES[mode], delta, 0, 0, 0, 0, 0]
            if batch < 1:
                raise InputError("x has no samples (batch = 0)")
        if not 1 <= k <= p["max_k"]:
            raise InputError(f"K = {k}: must be in [1, max_k = {p['max_k']}] for config {self.cfg.name}")
        if regs.shape != (protocol.register_rows(p, n, mode), k):
            raise InputError(f"register matrix shape {regs.shape}: N = {n} in mode {mode} with K = {k} needs "
                             f"{(protocol.register_rows(p, n, mode), k)}")
        if fmap is None and batch > tiles.samples_per_call(p, k) and not _rows:
            raise InputError(f"batch = {batch} samples of K = {k} exceed the on-chip activation store of one call "
                             f"({tiles.samples_per_call(p, k)} samples: x_depth = {p['x_depth']}); gemm_int splits "
                             f"larger batches")
        wflags, resident = self._weight_flags(n, k, mode, regs)
        regs_in[3] |= wflags
        limit = tiling.transfer_limit(self.target)
        if limit is not None:
            nin, nout = tiles.transfer_bytes(p, batch=batch, n=n, k=k, mode=mode, stats=stats, resident=resident,
                                             fmap_shape=None if fmap is None else fmap.shape, row=row, raw=raw)
            if max(nin, nout) > limit:
                raise InputError(f"this call needs a {nin}-byte input and a {nout}-byte output transfer; the target "
                                 f"takes at most {limit} bytes per transfer (max_transfer_bytes / the DMA's length "
                                 f"register): run_registers is one kernel call, gemm_int / conv2d_int split the "
                                 f"operation")
        protocol.check_fields(p, regs=regs, n=n, mode=mode, bias=bias, shift=shift, x=x, fmap=fmap)
        if getattr(self.target, "arrays", False):
            # the emu target: the emulator on the arrays, no beats packed or unpacked (equal to
            # emulate_stream on the packed call: tests/engines/test_emu_arrays.py)
            xs = im2col(fmap, ksize, pad)[0] if fmap is not None else x
            y, sat, *hist = emulate(p, xs, regs, bias, shift, n=n, mode=mode, delta=int(delta), relu=bool(relu),
                                    stats=bool(stats), raw=bool(raw))
            self.last_sat_count = int(sat)
            self.last_stats = hist[0] if stats else None
            self._on_chip = self._loaded if (wflags & (protocol.FLAG_KEEP | protocol.FLAG_RESIDENT)) else None
            return y
        beats = protocol.pack_input(p, regs=regs, bias=bias, shift=shift, n=n, mode=mode, x=x, fmap=fmap,
                                    batch=batch, resident=resident)
        nb = protocol.n_output_beats(p, batch, n, row=row, raw=raw)
        out, regs_out = self.target.run(beats, regs_in, nb + (protocol.n_stats_beats(p) if stats else 0))
        # the weight store now holds these weights (keep), still holds them (resident), or not
        self._on_chip = self._loaded if (wflags & (protocol.FLAG_KEEP | protocol.FLAG_RESIDENT)) else None
        magic, hash32, sat = (int(r) for r in regs_out)
        if magic != MAGIC or hash32 != self.cfg.hash32:
            raise InputError(f"kernel ID register reads magic 0x{magic:08x} hash 0x{hash32:08x}; config "
                             f"{self.cfg.name} expects 0x{MAGIC:08x} 0x{self.cfg.hash32:08x}")
        self.last_sat_count = sat
        self.last_stats = protocol.unpack_stats(p, out) if stats else None
        return protocol.unpack_output(p, out[:nb], batch, n, mode, row, raw=raw)

    # ------------------------------------------------------------------ integer level
    def gemm_int(self, x, weights, *, mode=None, bias=None, shift=0, relu=False, stats=False, k_step=None,
                 raw=False):
        """``x`` (batch, K) integer activations; ``weights`` (N, K) shift codes; ``bias`` in
        accumulator units; ``shift`` the output right shift(s). Returns int64 (batch, N).
        ``stats``: the MSB histogram of the wide results into :attr:`last_stats`.

        ``raw``: the wide results instead of the outputs (the raw mode, ``FLAG_RAW``): per
        output ``v`` of emulator rule 5, the accumulator plus bias saturated to ``acc_bits``,
        after ReLU, with no output shift (``shift`` is unused); :attr:`last_sat_count` is 0 and
        :attr:`last_stats` (with ``stats``) the same histogram as the requantizing call's, the
        statistics of ``v`` at the input radix. Equal to ``emulator.output_rule(..., raw=True)``
        on the accumulators on every target and through every tiling (a K-tiled call applies
        the rule to the host's int64 sum, as for the outputs).

        Any N, batch and K: N above ``max_n`` and calls above the transfer limit are split, K
        above ``max_k`` (or any K, with ``k_step``) runs as raw calls over chunks of K (class
        docstring, *Tiling*)."""
        regs, _, mode, delta = self.registers(weights, mode)
        n = weights[0].shape[0] if isinstance(weights, tuple) else weights.shape[0]
        x = as_int_input(x, copy=False)          # only read: the calls copy it into the emulator's floats
        if x.ndim != 2:
            raise InputError(f"x must be 2-D (batch, K), got shape {x.shape}")
        batch, k = x.shape
        kw = dict(mode=mode, delta=delta, relu=relu, stats=stats, raw=bool(raw))
        limit = tiling.transfer_limit(self.target)
        if k > self.p["max_k"] or k_step is not None:
            return tiles.gemm_int_k(self, x, weights, regs, n, bias, shift, limit, k_step=k_step, **kw)
        if n <= self.p["max_n"] and batch <= tiles.samples_per_call(self.p, k) and (limit is None or max(
                tiles.transfer_bytes(self.p, batch=batch, n=n, k=k, mode=mode, stats=stats, raw=raw)) <= limit):
            return self.run_registers(x, regs, n=n, bias=bias, shift=shift, **kw,     # one call (x checked above)
                                      _rows=bool(getattr(self.target, "arrays", False)) and limit is None)
        return tiles.gemm_int(self, x, weights, regs, n, bias, shift, limit, **kw)

    def conv2d_int(self, x, weights, *, padding="same", mode=None, bias=None, shift=0, relu=False, stats=False,
                   k_step=None, raw=False):
        """``x`` (C, H, W) integers; ``weights`` (Z, C, k, k) shift codes (or a pair for
        ``pot_sum``). Stride 1. Returns int64 (Z, H', W'). ``stats``: the MSB histogram of the
        wide results (all Z x H' x W') into :attr:`last_stats`; ``raw``: the wide results, as
        in :meth:`gemm_int`.

        Any Z, map size and C: Z above ``max_n`` or the weight store, maps beyond the line buffer or
        ``max_hw`` and calls above the transfer limit are split (class docstring, *Tiling*: host padding, tiles
        with a ``k-1`` halo run "valid"); ``C*k*k`` above ``max_k`` (or any, with ``k_step``: at
        most that many of the K = C*k*k columns per call, whole channels) runs as raw calls over
        chunks of input channels."""
        p = self.p
        ref = weights[0] if isinstance(weights, tuple) else weights
        if not all(isinstance(t, sfmt.ShiftTensor) for t in (weights if isinstance(weights, tuple) else (weights,))):
            raise InputError(f"weights must be a ShiftTensor (hlsnn.formats.shift), or a pair of them for "
                             f"'pot_sum', got {type(ref).__name__}")
        if len(ref.shape) != 4 or ref.shape[2] != ref.shape[3] or 0 in ref.shape:
            raise InputError(f"conv weights must be (Z, C, k, k) with Z, C, k >= 1, got {ref.shape}")
        z, c, ks, _ = ref.shape
        x = as_int_input(x)
        if x.ndim != 3 or x.shape[0] != c:
            raise InputError(f"x must be (C={c}, H, W), got {x.shape}")
        pad = tiling.conv_pad(padding, ks)
        flat = tuple(_flatten(t) for t in weights) if isinstance(weights, tuple) else _flatten(weights)
        regs, _, mode, delta = self.registers(flat, mode)
        _, h, w = x.shape
        oh, ow = h + 2 * pad - ks + 1, w + 2 * pad - ks + 1
        kw = dict(mode=mode, delta=delta, relu=relu, stats=stats, raw=bool(raw))
        limit = tiling.transfer_limit(self.target)
        if p["conv"] and oh >= 1 and ow >= 1 and (c * ks * ks > p["max_k"] or k_step is not None):
            return tiles.conv2d_int_k(self, x, flat, regs, pad, ks, bias, shift, limit, k_step=k_step, **kw)
        if not p["conv"] or oh < 1 or ow < 1 or (
                z <= p["max_n"] and tiles.tile_fits(p, c, h, w, ks, pad, z, mode, stats, limit, raw)):
            y = self.run_registers(regs=regs, n=z, bias=bias, shift=shift, fmap=x, ksize=ks, pad=pad, **kw)
            return y.T.reshape(z, oh, ow)                               # one call (or its error)
        return tiles.conv2d_int(self, x, flat, regs, pad, ks, bias, shift, limit, **kw)

    # ------------------------------------------------------------------ floats
    def _quantize_weights(self, w, mode, delta):
        p = self.p
        if mode == "twohot":
            return sfmt.quantize_twohot(w, p["exp_bits"], delta=delta, axis=0)
        if mode == "pot":
            return sfmt.quantize_pot(w, p["exp_bits"], axis=0)
        # pot_sum: a two-hot code at delta 0 is exactly a sum of two PoT codes (equivalence)
        t = sfmt.quantize_twohot(w, p["exp_bits"], delta=0, axis=0)
        zero = t.zero
        a = sfmt.ShiftTensor.from_codes("pot", t.exp_bits, t.e1, np.zeros_like(t.e1), t.s2, np.zeros_like(t.s2),
                                        zero, t.scale_exponent, axis=0)
        b = sfmt.ShiftTensor.from_codes("pot", t.exp_bits, t.e2, np.zeros_like(t.e2), t.s2 ^ t.s1,
                                        np.zeros_like(t.s2), zero, t.scale_exponent, axis=0)
        return a, b

    def _act(self, x, name="x"):
        """Float activations -> (integers, F) with the largest F that fits ``act_bits``."""
        p = self.p
        if np.size(x) == 0:
            raise InputError(f"{name}: is empty (shape {np.shape(x)}): the batch and K must be at least 1")
        x = np.asarray(x, np.float64)
        if not np.isfinite(x).all():
            raise InputError(f"{name} contains NaN or Inf")
        if p["act_signed"]:
            limit, lo = (1 << (p["act_bits"] - 1)) - 1, -(1 << (p["act_bits"] - 1))
        else:
            if (x < 0).any():
                raise InputError(f"{name} has negative values but config {self.cfg.name} has unsigned activations")
            limit, lo = (1 << p["act_bits"]) - 1, 0
        f = _largest_frac(float(np.abs(x).max()) if x.size else 0.0, limit)
        return np.clip(np.rint(np.ldexp(x, f)), lo, limit).astype(np.int64), f

    def _out_frac(self, yref):
        p = self.p
        limit = (1 << (p["act_bits"] - 1)) - 1 if p["act_signed"] else (1 << p["act_bits"]) - 1
        amax = float(np.abs(yref).max()) if p["act_signed"] else float(np.maximum(yref, 0).max())
        return _largest_frac(amax, limit)

    def _float_run(self, xi, fx, wq, bias, relu, rows_of, run):
        """Shared float path: calibrate the output scale on the quantized operands, run."""
        ref = wq[0] if isinstance(wq, tuple) else wq
        deq = (wq[0].dequantize() + wq[1].dequantize()) if isinstance(wq, tuple) else wq.dequantize()
        n = ref.shape[0]
        fw = np.broadcast_to(np.asarray(ref.scale_exponent, np.int64).reshape(n, -1)[:, 0], (n,))
        b = np.zeros(n) if bias is None else as_float_input(bias, "bias").reshape(-1)
        if b.shape != (n,):
            raise InputError(f"bias must have {n} values, got {b.shape}")
        b_scaled = np.rint(np.ldexp(b, fx + fw))
        blim = protocol.bias_bits(self.p) - 1          # the bias field check_fields holds it to
        if not (np.abs(b_scaled) < (1 << blim)).all():  # also inf: never a cast of an inf to int64
            raise InputError(f"bias values must fit {blim + 1} signed bits in accumulator units: at this "
                             f"call's scale 2^{-int(np.max(fx + fw))} (activations 2^{-int(fx)}) the largest "
                             f"bias {float(np.abs(b).max()):g} is {float(np.abs(b_scaled).max()):g} units")
        b_int = b_scaled.astype(np.int64)
        yref = np.ldexp(rows_of(xi).astype(np.float64), -fx) @ deq.reshape(n, -1).T + np.ldexp(b_int, -(fx + fw))
        if relu:
            yref = np.maximum(yref, 0)
        fy = self._out_frac(yref)
        return np.ldexp(run(b_int, fx + fw - fy).astype(np.float64), -fy)

    def gemm(self, x, w, bias=None, relu=False, mode=None, *, delta=0, stats=False):
        """Float GEMM ``relu(x @ w.T + bias)``: ``x`` (batch, K) and ``w`` (N, K) floats.

        Activations get the largest power-of-two scale that fits ``act_bits``; weights are
        quantized per output row (``mode``: two-hot with ``delta``, PoT, or PoT pairs summed);
        the bias is rounded to accumulator units; the output scale is calibrated on the
        quantized operands (the values the kernel sees) so the largest output fits
        ``act_bits``. Returns float64 (batch, N). ``stats``: as in :meth:`gemm_int` (the
        histogram is of the wide integers, in accumulator units).
        """
        mode = mode or self.p["default_mode"]
        if floatgemm.applies(self):         # the emu target: one GEMM, the same bits (floatgemm docstring)
            y = floatgemm.gemm_arrays(self, x, w, bias, relu, mode, delta, stats)
            if y is not None:
                return y
        w = as_float_input(w, "w")
        if w.ndim != 2:
            raise InputError(f"w must be 2-D (N, K), got shape {w.shape}")
        xi, fx = self._act(as_float_input(x, "x"))
        if xi.ndim != 2 or xi.shape[1] != w.shape[1]:
            raise InputError(f"x must be (batch, K={w.shape[1]}), got {xi.shape}")
        wq = self._quantize_weights(w, mode, delta)
        return self._float_run(xi, fx, wq, bias, relu, lambda a: a,
                               lambda b_int, sh: self.gemm_int(xi, wq, mode=mode, bias=b_int, shift=sh, relu=relu,
                                                               stats=stats))

    def conv2d(self, x, w, bias=None, padding="same", relu=False, mode=None, *, delta=0, stats=False):
        """Float 2-D convolution (stride 1): ``x`` (C, H, W), ``w`` (Z, C, k, k) -> (Z, H', W').
        ``stats``: as in :meth:`conv2d_int`."""
        mode = mode or self.p["default_mode"]
        w = as_float_input(w, "w")
        if w.ndim != 4 or 0 in w.shape or w.shape[2] != w.shape[3]:
            raise InputError(f"w must be (Z, C, k, k) with Z, C, k >= 1, got shape {w.shape}")
        xi, fx = self._act(as_float_input(x, "x"))
        pad = tiling.conv_pad(padding, w.shape[2])
        if xi.ndim != 3 or xi.shape[0] != w.shape[1]:
            raise InputError(f"x must be (C={w.shape[1]}, H, W), got {xi.shape}")
        if min(xi.shape[1], xi.shape[2]) + 2 * pad < w.shape[2]:
            raise InputError(f"a {w.shape[2]}x{w.shape[3]} kernel with pad {pad} does not fit a "
                             f"{xi.shape[1]}x{xi.shape[2]} map")
        wq = self._quantize_weights(w, mode, delta)
        y = self._float_run(xi, fx, wq, bias, relu, lambda a: im2col(a, w.shape[2], pad)[0],
                            lambda b_int, sh: self.conv2d_int(xi, wq, padding=padding, mode=mode, bias=b_int,
                                                              shift=sh, relu=relu, stats=stats
                                                              ).reshape(w.shape[0], -1).T)
        oh, ow = xi.shape[1] + 2 * pad - w.shape[2] + 1, xi.shape[2] + 2 * pad - w.shape[2] + 1
        return y.T.reshape(w.shape[0], oh, ow)

    # ------------------------------------------------------------------ emulator target
    @staticmethod
    def emulate_stream(cfg, beats, regs_in, state=None):
        """One kernel call on the emulator. ``state`` (a dict the target keeps between calls)
        holds the kernel's weight store (``wstore``: ``w_depth`` steps of ``rows`` register
        lanes, zero at first, as the kernel's static array): written as the kernel writes it
        (a GEMM's tiles all at step 0, or side by side with the keep flag; a convolution's side
        by side), read by resident calls."""
        p = cfg.params
        state = {} if state is None else state
        batch, n, k, flags, _, delta, cin, h, w, ks, pad = (int(r) for r in regs_in)
        mode = {v: m for m, v in MODES.items()}.get(int(regs_in[4]))
        conv = bool(flags & protocol.FLAG_CONV) and p["conv"]
        store = state.get("wstore")
        if store is None:
            store = state["wstore"] = np.zeros((p["w_depth"], p["rows"]), np.uint16)
        nt = protocol.n_tiles(p, n, mode) if mode else 0
        held = None
        if flags & protocol.FLAG_RESIDENT and mode:
            held = store[:nt * k].reshape(nt, k, p["rows"]).transpose(0, 2, 1).reshape(nt * p["rows"], k)
        d = protocol.unpack_input(p, beats, regs_in, resident_regs=held)
        if not flags & protocol.FLAG_RESIDENT:
            steps = d["regs"].reshape(nt, p["rows"], k).transpose(0, 2, 1)        # (tiles, K, rows)
            if conv or flags & protocol.FLAG_KEEP:
                store[:nt * k] = steps.reshape(nt * k, p["rows"])
            else:
                store[:k] = steps[-1]
        x = im2col(d["fmap"], ks, pad)[0] if "fmap" in d else d["x"]
        stats = bool(flags & protocol.FLAG_STATS_OUT)
        raw = bool(flags & protocol.FLAG_RAW)
        y, sat, *hist = emulate(p, x, d["regs"], d["bias"], d["shift"], n=n, mode=d["mode"], delta=delta,
                                relu=bool(flags & protocol.FLAG_RELU), stats=stats, raw=raw)
        out = protocol.pack_output(p, y, d["mode"], row=(w + 2 * pad - ks + 1) if "fmap" in d else None, raw=raw)
        if stats:
            out = np.concatenate([out, protocol.pack_stats(p, hist[0])])
        return out, np.array([MAGIC, cfg.hash32, sat], dtype=np.uint32)


def _flatten(t):
    """A (Z, C, k, k) ShiftTensor as (Z, C*k*k), keeping per-row scale exponents."""
    z = t.shape[0]
    se = np.broadcast_to(np.asarray(t.scale_exponent), t.shape).reshape(z, -1)[:, :1]
    return sfmt.ShiftTensor.from_codes(t.mode, t.exp_bits, t.e1.reshape(z, -1), t.e2.reshape(z, -1),
                                       t.s1.reshape(z, -1), t.s2.reshape(z, -1), t.zero.reshape(z, -1),
                                       se, delta=t.delta, axis=0)
