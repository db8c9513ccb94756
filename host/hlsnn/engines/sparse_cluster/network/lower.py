"""The network mode's ``sparse_cluster`` layers (:mod:`hlsnn.deploy.lower.program`, rule 2 with
this engine's weights and output rule); the specification of the ``sparse_cluster`` network
kernel (:mod:`hlsnn.engines.sparse_cluster.network.kernel`).

A ``fixed`` or ``sparse`` layer (int8 weights, one power-of-two scale per tensor or per
output channel, magnitude pruning for ``sparse``) on ``sparse_cluster``, with ``q`` its int8
input at radix ``F_in``:

* **Weights** ``w[z, ci, ky, kx]``: the layer's own int8 taps (Z, C/g, kh, kw) as calibration
  quantized them. A compiled model stores them as the engine runs them layer by layer
  (:class:`hlsnn.deploy.run.executors.SparseExec`): a convolution other than a stride-1 square one
  with "same" or "valid" padding as its stride-1 form (:func:`hlsnn.engines.convgeom.as_stride1`:
  the groups' block-diagonal weight, a rectangular kernel padded with zero taps), a kernel
  split into blocks with its own taps beside (``w_taps``), a dense layer as (Z, K, 1, 1).
  :func:`taps` takes the layer's taps back out of these (exactly: the other entries are the
  zeros the rewrite put there, checked), so the network mode convolves with the layer's own
  geometry (stride, padding and groups as such) and forms only the outputs the layer keeps.
  Integer sums do not depend on their order or on the zero products left out, so this gives
  the bits of the stride-1 convolution sampled by the stride.
* **Accumulator**: ``acc[z, y, x] = sum q[...] * w[...]`` over the window (netmode rule 2),
  exact (int64; the kernel sizes its sum from the weights: :mod:`hlsnn.engines.sparse_cluster.network.kernel`).
* **Output** (the engine's emulator rules 2, 3 and 5, :func:`hlsnn.engines.sparse_cluster.emulator.postprocess`):
  ``t = acc + bias[z]`` exact (no saturation: the layer-by-layer path adds K-tiled and
  block sums in int64 before this rule), ReLU ``t = max(t, 0)``, then ``y =
  shift_round_sat(t, shift[z], 8, rounding)`` with the *accel config's* rounding, ``shift =
  F_in + F_w - F_out``; ``bias = rint(b * 2**(F_in + F_w))``, an error unless ``|bias| <
  2**30`` (the deployment's own check). The engine's 2x2 pooling flag is not used by a
  deployment: a ``MaxPool`` is netmode rule 3.
* **Activations** are int8 (signed) throughout: the input's rule 1 and the residual Add's
  requantization (netmode rule 4) saturate to 8 bits.
"""
from __future__ import annotations

import numpy as np

from ....primitives import shift_round_sat


def taps(j, arrays, chw, why):
    """The layer's own int8 taps (Z, C/g, kh, kw) as int64 (a dense layer: (Z, C, H, W) of
    its flattened input map ``chw``) from a compiled entry ``j`` and its arrays (module
    docstring); ``why(text)`` makes the error for a form it cannot take apart."""
    name = j["name"]
    wq = np.asarray(arrays[f"{name}/wq"], np.int64)
    z = j["w_shape"][0]
    if j["kind"] == "dense":
        return wq.reshape((z,) + tuple(chw))
    shape = tuple(j["w_shape"])
    if j.get("blocks") is not None:                      # the layer's own taps are stored beside
        return np.asarray(arrays[f"{name}/w_taps"], np.int64).reshape(shape)
    if not j.get("general"):
        return wq.reshape(shape)
    g = j["geom"]
    kh, kw, group = g["kh"], g["kw"], g["group"]
    dh, dw = g["dilations"]
    eh, ew = dh * (kh - 1) + 1, dw * (kw - 1) + 1
    cg, zg = shape[1], z // group
    dense = np.zeros_like(wq)
    dense[:, :, :eh:dh, :ew:dw] = wq[:, :, :eh:dh, :ew:dw]
    w = np.empty(shape, np.int64)
    block = np.zeros_like(wq)
    for k in range(group):
        w[k * zg:(k + 1) * zg] = dense[k * zg:(k + 1) * zg, k * cg:(k + 1) * cg, :eh:dh, :ew:dw]
        block[k * zg:(k + 1) * zg, k * cg:(k + 1) * cg] = dense[k * zg:(k + 1) * zg, k * cg:(k + 1) * cg]
    if not np.array_equal(block, wq):
        raise why("its stride-1 weight has non-zero entries outside the layer's taps")
    return w


def output_rule(p, acc, bias, shift, relu):
    """The engine's output rule on accumulators ``acc`` (N, Z): ``bias`` and ``shift`` (Z,);
    (N, Z) int64 (module docstring)."""
    t = np.asarray(acc, np.int64) + np.asarray(bias, np.int64).reshape(1, -1)
    if relu:
        t = np.maximum(t, 0)
    s = np.broadcast_to(np.asarray(shift, np.int64).reshape(-1), (t.shape[1],))[None, :]
    return shift_round_sat(t, s, 8, p["rounding"])[0]


class SparseRules:
    """``sparse_cluster``'s layer rules for :func:`hlsnn.deploy.lower.program.lower` (module
    docstring)."""
    engine = "sparse_cluster"
    formats = ("fixed", "sparse")
    bias_bits = 30

    @staticmethod
    def activations(p, acc_name):
        return 8

    @staticmethod
    def banks(p):
        """The network kernel's channel banks ``Q`` (``shape(p)[1]`` of
        :mod:`hlsnn.engines.sparse_cluster.network.kernel`: ``net_banks`` board-sized, else
        ``max_z``): rule 12t's ``lo`` term starts at a multiple of them."""
        return int(p["net_banks"]) if "net_sub" in p else int(p["max_z"])

    @staticmethod
    def weights(j, arrays, chw, why):
        return taps(j, arrays, chw, why), {}

    @staticmethod
    def output(p, acc, bias, shift, relu):
        return output_rule(p, acc, bias, shift, relu)


#: the rules :func:`hlsnn.deploy.lower.program.engine_rules` finds (:func:`hlsnn.engine_registry.network_part`)
RULES = SparseRules
