"""A pixel shuffle (``DepthToSpace``) inside a network as a transposed convolution of 0/1 weights.

A pre-pass of the importer (:func:`rewrite`, called by :func:`hlsnn.deploy.importer.onnx_import.load_onnx`
after :mod:`hlsnn.deploy.rewrite.unshuffle`; a model without the pattern passes unchanged).
``nn.PixelShuffle(r)`` (sub-pixel U-Nets' upsampling) is exported by both of torch's exporters as
``DepthToSpace`` (mode CRD): ``y[c, h r + i, w r + j] = x[c r^2 + i r + j, h, w]`` (mode DCR:
``x[(i r + j) C + c, h, w]``). As a host op it moves values across channels and pixels, which the
network mode has no rule for: the model ran layer by layer.

The same move is the ``ConvTranspose`` of ``x`` with kernel ``r``, stride ``r``, no pads, no bias
and the weight ``W[k, c, i, j] = 1`` where ``k`` is the channel above, else 0: ONNX's
``y[c, h r + i, w r + j] = sum_k x[k, h, w] W[k, c, i, j]`` (kernel = stride: the windows do not
overlap, so each output is one product ``x * 1``). The importer lowers it as every transposed
convolution (a ``ZeroStuff`` host op and a conv), which the network mode runs; a ``Relu`` that
reads the shuffle then fuses into that conv as usual (``relu(D2S(x)) = D2S(relu(x))``).

Quantized, the products are exact (the weight 1 is a code in every format: a BFP mantissa, the
two-hot term ``2^0``, a fixed-point weight at the layer's radix), so the conv's output is the input's
values, requantized at the conv's own output format (the layer's calibrated radix or block): the
one change to the deployed numbers against the host move, which kept the input's codes.

Rewritten: each ``DepthToSpace`` (blocksize ``r >= 2``, mode CRD or DCR) whose input is the output
of a ``Conv`` with a constant weight (its output channels give ``C r^2``) and whose output is not a
graph output (a shuffle at the end of a model stays a host op after the kernel, as before).
Anything else is left as it is.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr


def weight(cr2, r, mode):
    """The 0/1 ``ConvTranspose`` weight ``(C r^2, C, r, r)`` of a ``DepthToSpace`` of ``cr2`` channels."""
    c = cr2 // (r * r)
    w = np.zeros((cr2, c, r, r), np.float32)
    for ch in range(c):
        for i in range(r):
            for j in range(r):
                k = ch * r * r + i * r + j if mode == "CRD" else (i * r + j) * c + ch
                w[k, ch, i, j] = 1.0
    return w


def _plan(g):
    consts, producer, _readers, outputs = graphindex.index(g)
    plan = []
    for n in g.node:
        if n.op_type != "DepthToSpace" or n.output[0] in outputs:
            continue
        r = int(_attr(n, "blocksize", 0))
        mode = _attr(n, "mode", b"DCR")
        mode = mode.decode() if isinstance(mode, bytes) else str(mode)
        conv = producer.get(n.input[0])
        if r < 2 or mode not in ("CRD", "DCR") or conv is None or conv.op_type != "Conv" or len(conv.input) < 2:
            continue
        w = consts.get(conv.input[1])
        if w is None or np.asarray(w).ndim != 4 or np.asarray(w).shape[0] % (r * r):
            continue
        plan.append((n, r, mode, int(np.asarray(w).shape[0])))
    return plan


def rewrite(model):
    """``model`` with each such ``DepthToSpace`` as a 0/1 ``ConvTranspose`` (a copy), or ``model`` itself."""
    if not any(n.op_type == "DepthToSpace" for n in model.graph.node):
        return model
    if not _plan(model.graph):
        return model
    from onnx import helper, numpy_helper
    m, fresh = graphindex.copy_fresh(model)
    g = m.graph
    for n, r, mode, cr2 in _plan(g):
        new = fresh(f"{n.name or n.output[0]}/shuffle_w")
        g.initializer.append(numpy_helper.from_array(weight(cr2, r, mode), new))
        n.op_type = "ConvTranspose"
        n.input.append(new)
        del n.attribute[:]
        n.attribute.extend([helper.make_attribute("kernel_shape", [r, r]), helper.make_attribute("strides", [r, r]),
                            helper.make_attribute("pads", [0, 0, 0, 0])])
    return m
