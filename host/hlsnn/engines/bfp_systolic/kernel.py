"""Accelerator-facing operations of ``bfp_systolic``: GEMM on floats or on BFP tensors, over
any target, through the stream protocol."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...formats import bfp
from . import protocol
from .emulator import emulate
from .spec import MAGIC


def _flags(relu, has_bias, use_stats, stats_out=False):
    return ((protocol.FLAG_RELU if relu else 0) | (protocol.FLAG_BIAS if has_bias else 0)
            | (protocol.FLAG_STATS if use_stats else 0) | (protocol.FLAG_STATS_OUT if stats_out else 0))


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
    """

    OPERATIONS = ("gemm", "gemm_bfp")

    def __init__(self, cfg, target):
        self.cfg, self.p, self.target = cfg, cfg.params, target
        self.last_sat_count = 0
        self.last_id = None
        self.last_stats = None

    # ------------------------------------------------------------------ floats
    def quantize_operands(self, x, w, bias=None):
        """Quantize float operands to the kernel's formats: ``(xq, wq, bq)``."""
        p = self.p
        qround = p["rounding"]
        x = self._float2d("x", x)
        w = self._float2d("w", w)
        xq = bfp.quantize(x, p["mantissa_bits"], axis=-1, exponent_bits=p["exponent_bits"], rounding=qround)
        waxis = -1 if p["weight_exponent"] == "row" else None
        wq = bfp.quantize(w, p["mantissa_bits"], axis=waxis, exponent_bits=p["exponent_bits"], rounding=qround)
        bq = None
        if bias is not None:
            b = np.asarray(bias, dtype=np.float64)
            if b.ndim != 1:
                raise InputError(f"bias must be 1-D (N,), got shape {b.shape}")
            bq = bfp.quantize(b, p["mantissa_bits"], axis=None, exponent_bits=p["exponent_bits"],
                              rounding=qround)
        return xq, wq, bq

    def gemm(self, x, w, bias=None, relu=False, *, method=None, stats_k=None, stats=False):
        """Float GEMM: ``x`` (batch, K), ``w`` (N, K), ``bias`` (N,) -> float64 (batch, N).

        The result is exactly the dequantized output of :meth:`gemm_bfp` on the quantized
        operands.
        """
        xq, wq, bq = self.quantize_operands(x, w, bias)
        return self.gemm_bfp(xq, wq, bq, relu=relu, method=method, stats_k=stats_k, stats=stats).dequantize()

    # ------------------------------------------------------------------ BFP
    def gemm_bfp(self, x, w, bias=None, relu=False, *, method=None, stats_k=None, stats=False):
        """GEMM on BFP tensors; returns a BFPTensor (batch, N) with one exponent per row.

        ``method`` is ``"max"`` or ``"stats"`` (default: the config's ``output_exponent``);
        ``stats_k`` the k of mean + k*sigma (default: the config's). ``stats``: read the
        statistics segment into :attr:`last_stats`.
        """
        p = self.p
        xm, xe, wm, we, bm, be = self._check_bfp(x, w, bias)
        method = method or p["output_exponent"]
        if method not in ("max", "stats"):
            raise InputError(f"method = {method!r}: must be 'max' or 'stats'")
        if method == "stats" and p["weight_exponent"] != "tensor":
            raise InputError("method = 'stats' needs a config with weight_exponent: tensor")
        k_sigma = p["stats_k"] if stats_k is None else int(stats_k)
        if not 0 <= k_sigma <= 15:
            raise InputError(f"stats_k = {stats_k!r}: must be an integer in [0, 15]")
        batch, k = xm.shape
        n = wm.shape[0]
        regs = [batch, n, k, _flags(relu, bm is not None, method == "stats", stats), k_sigma]
        beats = protocol.pack_input(p, xm, xe, wm, we, bm, be)
        out, regs_out = self.target.run(beats, regs, protocol.n_output_beats(p, batch, n, stats=stats))
        magic, hash32, sat = (int(r) for r in regs_out)
        if magic != MAGIC or hash32 != self.cfg.hash32:
            raise InputError(f"kernel ID register reads magic 0x{magic:08x} hash 0x{hash32:08x}; config "
                             f"{self.cfg.name} expects 0x{MAGIC:08x} 0x{self.cfg.hash32:08x}")
        self.last_sat_count, self.last_id = sat, (magic, hash32)
        self.last_stats = protocol.unpack_stats(p, out) if stats else None
        ym, ye = protocol.unpack_output(p, out[:protocol.n_output_beats(p, batch, n)], batch, n)
        return bfp.BFPTensor.from_parts(ym, ye.reshape(-1, 1), p["mantissa_bits"],
                                        exponent_bits=p["exponent_bits"], axis=1, block_size=None)

    # ------------------------------------------------------------------ emulator target
    @staticmethod
    def emulate_stream(cfg, beats, regs_in):
        """The emulator behind the stream interface: decode beats, emulate, encode beats."""
        p = cfg.params
        batch, n, k, flags, k_sigma = (int(r) for r in regs_in)
        xm, xe, wm, we, bm, be = protocol.unpack_input(p, beats, batch, n, k, bool(flags & protocol.FLAG_BIAS))
        stats_out = bool(flags & protocol.FLAG_STATS_OUT)
        ym, ye, sat, *hist = emulate(p, xm, xe, wm, we, bm, be, relu=bool(flags & protocol.FLAG_RELU),
                                     use_stats=bool(flags & protocol.FLAG_STATS), stats_k=k_sigma & 15,
                                     stats_out=stats_out)
        out = protocol.pack_output(p, ym, ye)
        if stats_out:
            out = np.concatenate([out, protocol.pack_stats(p, hist[0])])
        return out, np.array([MAGIC, cfg.hash32, sat], dtype=np.uint32)

    # ------------------------------------------------------------------ checks
    @staticmethod
    def _float2d(name, a):
        a = np.asarray(a, dtype=np.float64)
        if a.ndim != 2:
            raise InputError(f"{name} must be 2-D, got shape {a.shape}")
        return a

    def _check_bfp(self, x, w, bias):
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
        if not 1 <= k <= p["max_k"]:
            raise InputError(f"K = {k}: must be in [1, max_k = {p['max_k']}] for config {self.cfg.name}")
        if not 1 <= n <= p["max_n"]:
            raise InputError(f"N = {n}: must be in [1, max_n = {p['max_n']}] for config {self.cfg.name}")
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
