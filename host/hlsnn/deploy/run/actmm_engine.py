"""Attention's ``MatMul`` of two activations on the ``bfp_systolic`` engine.

A ``MatMulAct`` layer (:mod:`hlsnn.deploy.run.samplewise`) in a ``bfp`` deployment multiplies its
operands on the accelerator of the nearest engine layer, through the executor path of the
engine's other GEMMs (:meth:`Kernel.gemm_bfp`, so on emu the engine's emulator, on csim the
layer kernel's C-simulation, on sim the simulated board through the real host code). Its
operands are lifted to ``(N, ..., T, K)`` and ``(N, ..., K, S)`` and broadcast over the axes
before the last two: ``G`` small GEMMs (one per sample and head).

**The rule** (the emulator is the specification; each GEMM is one ``gemm_bfp`` operation of
the engine, no bias, no ReLU):

1. the left operand ``A`` (T, K) is the call's activations: one shared exponent per row of
   ``A`` (a sample of the call), ``mantissa_bits`` mantissas rounded by the config's
   ``rounding`` (:meth:`Kernel.quantize_activations`);
2. the right operand ``B`` (K, S) is the call's weights, quantized at run time as the engine
   quantizes a layer's weights (:meth:`Kernel.quantize_weights` of ``B``ᵀ): with
   ``weight_exponent: row`` one exponent per column of ``B``; with ``tensor`` one for each
   GEMM's ``B``;
3. the products are exact (emulator rule 1) and each row of the result gets one output
   exponent chosen over its ``S`` results by the config's ``output_exponent`` rule and
   ``mantissa_bits`` mantissas (emulator rules 5-6): the engine's BFP output, dequantized.
   ``S`` beyond ``max_n`` runs in chunks of ``max_n`` columns, each with its own output
   exponent per row (as the float :meth:`Kernel.gemm` tiles N).

Rule 3 rounds the output to the engine's BFP: the engine has no mode that streams its wide
accumulators.

**Calls.** The weights stream with each call (a run-time operand is never resident, so the
call does not set the keep flag; a layer's resident weights are streamed again by its next
call). With ``weight_exponent: row`` and ``output_exponent: max``, ``g`` GEMMs share one call
as a block-diagonal GEMM: the activations ``(g*T, g*K)`` hold ``A_j`` at block ``(j, j)``, the
weights ``(g*S, g*K)`` hold ``B_j``ᵀ at block ``(j, j)``, zeros elsewhere. A row's exponent, a
weight row's exponent and every non-zero accumulator are those of ``A_j``'s GEMM alone, the
zero results of the other blocks change no row's max-rule exponent, and an all-zero row's
results are zero in any exponent, so every block ``(j, j)`` of the result has the bits of
``A_j @ B_j`` called alone (tested against one call per GEMM). ``g`` is the largest whose call
is one kernel call: ``g*K <= max_k`` (one pass), ``g*S <= max_n``, ``g*T`` samples within
``protocol.samples_per_call`` and, on a target with a transfer limit, one DMA transfer each
way. The block-diagonal call multiplies ``g`` times the products it needs; at attention's
sizes a kernel start costs far more than these products (``hlsnn perf``'s ``call_us``).
Other configs make one call per GEMM.
"""
from __future__ import annotations

import numpy as np

from ...engines import tiling
from ...engines.bfp_systolic import protocol
from ...perf.closed_form import bfp_call_counts, bfp_gemm_call_flags


def packs(p, t, k, s, target=None) -> int:
    """GEMMs of (T, K) by (K, S) per kernel call of config section ``p`` (module docstring)."""
    if p["weight_exponent"] != "row" or p["output_exponent"] != "max" or k > p["max_k"] or s > p["max_n"]:
        return 1
    limit, beat = tiling.transfer_limit(target), p["stream_bits"] // 8

    def fits(g):
        if g * k > p["max_k"] or g * s > p["max_n"] or protocol.samples_per_call(p, g * k, g * s) < g * t:
            return False
        return limit is None or max(protocol.n_input_beats(p, g * t, g * s, g * k, False),
                                    protocol.n_output_beats(p, g * t, g * s)) * beat <= limit
    hi = max(1, min(p["max_k"] // k, p["max_n"] // s))
    return max(1, tiling.largest(hi, fits))


class EngineActMatMul:
    """The product of a ``MatMulAct`` layer (:class:`hlsnn.deploy.run.samplewise.ActMatMul`'s
    ``engine``) on the ``bfp_systolic`` kernel of executor ``ex`` (module docstring). Since it
    was made or :meth:`reset`: :attr:`gemms` (the GEMMs it computed), :attr:`calls` (kernel
    calls, counted by the protocol's split: :func:`hlsnn.perf.closed_form.bfp_gemm_call_flags`),
    :attr:`shapes` (calls per ``(samples, outputs, K, keep, resident)``) and :attr:`sat_count`."""

    name = "bfp_systolic"

    def __init__(self, ex):
        self.p, self.kern = ex.p, ex.acc.kernel
        self.reset()

    def reset(self):
        self.gemms = self.calls = self.sat_count = 0
        self.shapes = {}

    def matmul(self, xa, xb):
        lead = np.broadcast_shapes(xa.shape[:-2], xb.shape[:-2])
        (t, k), s = xa.shape[-2:], xb.shape[-1]
        a = np.broadcast_to(xa, lead + (t, k)).reshape(-1, t, k)
        w = np.swapaxes(np.broadcast_to(xb, lead + (k, s)).reshape(-1, k, s), 1, 2)     # (G, S, K): Bᵀ
        n_g = a.shape[0]
        out = np.empty((n_g, t, s))
        p, kern = self.p, self.kern
        g = packs(p, t, k, s, getattr(kern, "target", None))
        self.gemms += n_g
        for i0 in range(0, n_g, g):
            gi = min(g, n_g - i0)
            if gi == 1:
                x, wt = a[i0], w[i0]
            else:                                  # block-diagonal (module docstring)
                x, wt = np.zeros((gi * t, gi * k)), np.zeros((gi * s, gi * k))
                for j in range(gi):
                    x[j * t:(j + 1) * t, j * k:(j + 1) * k] = a[i0 + j]
                    wt[j * s:(j + 1) * s, j * k:(j + 1) * k] = w[i0 + j]
            xq = kern.quantize_activations(x)
            for c0, c1 in tiling.chunks(wt.shape[0], p["max_n"]):     # S beyond max_n (gi == 1 only)
                y = kern.gemm_bfp(xq, kern.quantize_weights(wt[c0:c1])).dequantize()
                self.sat_count += kern.last_sat_count
                calls = bfp_gemm_call_flags(p, x.shape[0], x.shape[1], c1 - c0)
                self.calls += len(calls)
                for rows, n, keep, resident in calls:
                    key = (rows, n, x.shape[1], keep, resident)
                    self.shapes[key] = self.shapes.get(key, 0) + 1
                if gi == 1:
                    out[i0, :, c0:c1] = y
                else:
                    for j in range(gi):
                        out[i0 + j] = y[j * t:(j + 1) * t, j * s:(j + 1) * s]
        return out.reshape(lead + (t, s))

    def kernel_cycles(self, cfg):
        """The modelled :class:`~hlsnn.perf.model.KernelCycles` of the calls counted (:attr:`shapes`)."""
        from ...perf.calls import call_cycles
        from ...perf.model import KernelCycles
        kc = KernelCycles()
        p = cfg.params
        for (rows, n, k, keep, resident), times in self.shapes.items():
            counts = bfp_call_counts(p, rows, k, n, stats_method=p["output_exponent"] == "stats",
                                     rolling=p["output_exponent"] == "rolling", keep=keep, resident=resident)
            one = call_cycles(cfg, counts)
            for _ in range(times):
                kc.add(one, counts)
        return kc


def report(actmm) -> dict:
    """Where each ``MatMulAct`` of a deployment ran (``actmm``: :attr:`Deployment.actmm`), for
    the deploy report: ``{layer: {"on": engine or "host", "gemms", "kernel_calls"}}`` (the
    counts since the last :meth:`EngineActMatMul.reset`)."""
    return {ln: ({"on": q.engine.name, "gemms": q.engine.gemms, "kernel_calls": q.engine.calls}
                 if getattr(q, "engine", None) else {"on": "host", "gemms": None, "kernel_calls": 0})
            for ln, q in actmm.items()}
