"""Kernels beyond an engine's ``max_ksize``: blocks of taps whose raw partial sums
add exactly on the host, so that no shipped config refuses a layer for its kernel size."""
from __future__ import annotations

import numpy as np

from ...engines import convgeom as conv


def block_call(ex, xi, bias):
    """The ``call`` of :class:`~hlsnn.deploy.run.executors.SparseExec` ``ex`` (see ``_Exec._two_pass``)
    for a kernel beyond ``max_ksize``: for each block of taps (:func:`hlsnn.engines.convgeom.kernel_blocks`) the raw sums (``Kernel.channel_sums``) of
    the block's stride-1 convolution on the padded input shifted by the block's offset,
    sampled by the stride; the blocks' sums add exactly (int64), and the kernel's output
    rules (``emulator.postprocess``) act on the total, as for the K tiling."""
    g = ex.layer.geom
    oh, ow = g.out_hw(xi.shape[2], xi.shape[3])
    return summed_call(ex, lambda w, images: raw_sums(ex, xi if images is None else xi[images], w, ex.blocks),
                       bias, oh, ow)


def summed_call(ex, sums, bias, oh, ow):
    """A ``call`` of :class:`~hlsnn.deploy.run.executors.SparseExec` ``ex`` whose raw int64 sums
    ``sums(w, images)`` (the weights of the chosen channels on the chosen images; ``images``
    None: all) the host adds: the kernel's output rules (``emulator.postprocess``: bias, shift,
    ReLU, rounding, the statistics) act on the total, an ``(oh, ow)`` map per channel. Kernels
    beyond ``max_ksize`` (:func:`block_call`) and two input terms
    (:func:`hlsnn.deploy.quantize.twoin.call`) sum this way."""
    from ...engines.sparse_cluster.emulator import postprocess

    def call(stats, shift, chans, images=None, raw=False):
        w = ex.w_taps if chans is None else ex.w_taps[chans]
        total = sums(w, images)
        b, z = total.shape[:2]
        shifts = np.broadcast_to(np.asarray(shift, np.int64), (ex.n_out,))
        bz, shifts = (bias, shifts) if chans is None else (bias[chans], shifts[chans])
        res = postprocess(total.transpose(1, 0, 2, 3).reshape(z, b * oh, ow), bz, shifts, relu=ex.layer.relu,
                          rounding=ex.p["rounding"], stats=stats, raw=raw)
        y = res[0].reshape(z, b, oh, ow).transpose(1, 0, 2, 3)
        return y, (res[2] if stats else None), res[1], y.size
    return call


def raw_sums(ex, xi, w, blocks):
    """The exact sums (B, Z, H', W') int64 of the convolution of ``ex``'s layer (its geometry) of
    the int codes ``xi`` (B, C, H, W, unpadded) with taps ``w`` (Z, C/g, kh, kw): for each block
    of taps ``(i0, th, j0, tw)`` of ``blocks`` the raw sums (``Kernel.channel_sums``) of the
    block's stride-1 convolution on the padded input shifted by the block's offset, sampled by
    the stride, added in int64 (the calls counted in ``ex.stats.calls``)."""
    g = ex.layer.geom
    kern = ex.acc.kernel
    oh, ow = g.out_hw(xi.shape[2], xi.shape[3])
    x = conv.pad_nchw(xi, g.pads)
    total = None
    for i0, th, j0, tw in blocks:
        sub = conv.ConvGeom(th, tw, g.sh, g.sw, (0, 0, 0, 0), g.dh, g.dw, g.group)
        w1, pads1, _ = conv.as_stride1(w[:, :, i0:i0 + th, j0:j0 + tw], sub)
        xs = conv.pad_nchw(x[:, :, i0 * g.dh:, j0 * g.dw:], pads1)
        part = kern.channel_sums(xs, w1, padding="valid", batch=True, step=ex.k_step)
        ex.stats.calls += kern.last_calls
        part = part[:, :, ::g.sh, ::g.sw][:, :, :oh, :ow]
        total = part if total is None else total + part
    return total
