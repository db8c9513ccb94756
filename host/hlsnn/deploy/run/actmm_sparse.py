"""Attention's ``MatMul`` of two activations on the ``sparse_cluster`` engine: fixed8.

The rule is the host's (:class:`hlsnn.deploy.run.samplewise.ActMatMul`): each sample's operands
are 8-bit signed integers at the radix point its values need (``host_radix``, the deployment's
rounding), and the product is the exact integer sum times ``2**-(f_a + f_b)``. The engine
computes the integer sums: ``sparse_cluster`` multiplies int8 activations by int8 weights that
come with each call, so the right operand ``B`` (K, S) is the call's weights and the left one
``A`` (T, K) its map: a 1 x 1 convolution of ``K`` input channels over ``T`` positions into ``S``
output channels, in the kernel's raw mode (``FLAG_RAW``: the exact int32 sums, no bias, no
ReLU, no shift; :meth:`Kernel.channel_sums`, which splits a ``K`` beyond ``max_in_channels``
into raw calls added in int64, as the deploy runner's K tiling does). The sums of int8 products
over ``K <= max_in_channels`` fit int32 with room to spare, so the result is the host rule's,
bit for bit, on every target (emu: the engine's emulator, csim, sim).

**Calls.** ``g`` GEMMs share one convolution, block-diagonal in the channels: the map has
``g*K`` channels over ``g*T`` positions (a 1 x ``g*T`` row; the kernel tiles a row beyond
``max_hw``), GEMM ``j``'s activations in channels ``[j*K, (j+1)*K)`` at positions
``[j*T, (j+1)*T)`` and zeros elsewhere, the weights ``(g*S, g*K)`` hold ``B_j``ᵀ at block
``(j, j)``. Every sum of block ``(j, j)`` is GEMM ``j``'s own (the other products are by
zero), and the zero-skipping engine skips the zero activations. ``g = min(max_in_channels //
K, max_out_channels // S)`` (at least 1): one call's channels in and out.
"""
from __future__ import annotations

import numpy as np

from ..quantize.quant import host_radix, to_fixed


def packs(p, k, s) -> int:
    """GEMMs of (T, K) by (K, S) per convolution on ``sparse_cluster`` (module docstring)."""
    if k > p["max_in_channels"]:
        return 1
    return max(1, min(p["max_in_channels"] // k, p["max_out_channels"] // s))


class SparseActMatMul:
    """The product of a ``MatMulAct`` layer (:class:`hlsnn.deploy.run.samplewise.ActMatMul`'s
    ``engine``) on the ``sparse_cluster`` kernel of executor ``ex`` (module docstring). Since it
    was made or :meth:`reset`: :attr:`gemms` and :attr:`calls` (the kernel's ``last_calls`` of
    each convolution); :attr:`maps`: the int8 map and weights of each convolution of the last
    product (for :meth:`kernel_cycles`: the zero-skipping engine's cycles depend on the data)."""

    name = "sparse_cluster"
    BITS = 8

    def __init__(self, ex, rounding):
        self.p, self.kern, self.rounding = ex.p, ex.acc.kernel, rounding
        self.reset()

    def reset(self):
        self.gemms = self.calls = 0
        self.maps = []

    def _ints(self, v):
        """Each sample's operand as int8 at its own radix point: (integers, radix per sample)."""
        f = np.array([host_radix(s, self.BITS, True) for s in v], np.int64)
        q = np.stack([to_fixed(s, int(fs), self.BITS, True, self.rounding) for s, fs in zip(v, f)])
        return q.astype(np.int64), f

    def matmul(self, xa, xb):
        ia, fa = self._ints(xa)
        ib, fb = self._ints(xb)
        lead = np.broadcast_shapes(ia.shape[:-2], ib.shape[:-2])
        (t, k), s = ia.shape[-2:], ib.shape[-1]
        a = np.broadcast_to(ia, lead + (t, k)).reshape(-1, t, k)
        w = np.swapaxes(np.broadcast_to(ib, lead + (k, s)).reshape(-1, k, s), 1, 2)     # (G, S, K): Bᵀ
        n_g = a.shape[0]
        sums = np.empty((n_g, t, s), np.int64)
        self.maps = []
        g = packs(self.p, k, s)
        kern = self.kern
        for i0 in range(0, n_g, g):
            gi = min(g, n_g - i0)
            x4 = np.zeros((gi * k, 1, gi * t), np.int64)
            w4 = np.zeros((gi * s, gi * k, 1, 1), np.int64)
            for j in range(gi):
                x4[j * k:(j + 1) * k, 0, j * t:(j + 1) * t] = a[i0 + j].T
                w4[j * s:(j + 1) * s, j * k:(j + 1) * k, 0, 0] = w[i0 + j]
            y = kern.channel_sums(x4, w4, padding="valid", batch=False)          # (g*S, 1, g*T)
            self.calls += kern.last_calls
            self.maps.append((x4, w4))
            for j in range(gi):
                sums[i0 + j] = y[j * s:(j + 1) * s, 0, j * t:(j + 1) * t].T
        self.gemms += n_g
        scale = -(fa + fb).reshape((-1,) + (1,) * (len(lead) + 1))            # per sample
        return np.ldexp(sums.reshape(lead + (t, s)).astype(np.float64), scale.astype(np.int32))

    def kernel_cycles(self, cfg):
        """The modelled :class:`~hlsnn.perf.model.KernelCycles` of the last product's
        convolutions (:attr:`maps`), run again on a counting target (as
        :mod:`hlsnn.measure.layers` does)."""
        from ...engines import ENGINES
        from ...measure.counting import CountingTarget
        from ...measure.layers import _merge
        from ...perf.model import KernelCycles
        kern = ENGINES["sparse_cluster"].Kernel(cfg, CountingTarget(cfg, ENGINES["sparse_cluster"]))
        kc = KernelCycles()
        for x4, w4 in self.maps:
            kern.channel_sums(x4, w4, padding="valid", batch=False)
            _merge(kc, kern.last_cycles)
        return kc
