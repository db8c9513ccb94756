"""A pixel unshuffle (space to depth) read only by convolutions, folded into them as a strided conv.

A pre-pass of the importer (:func:`rewrite`, called by :func:`hlsnn.deploy.importer.onnx_import.load_onnx`
after :mod:`hlsnn.deploy.rewrite.subneg`; a model without the pattern passes unchanged). ``nn.PixelUnshuffle(r)``
(FFDNet's input, sub-pixel U-Nets' downsampling) is written by both of torch's exporters as
``Reshape`` to ``(N, C, H/r, r, W/r, r)``, ``Transpose`` ``[0, 1, 3, 5, 2, 4]``, ``Reshape`` to ``(N,
C r^2, H/r, W/r)``: a move across channels and pixels that the network mode has no rule for (the
model ran layer by layer). ONNX's ``SpaceToDepth`` (blocksize ``r``) is the same move with the
channel order ``(i r + j) C + c`` instead of ``c r^2 + i r + j``.

A convolution (kernel ``k``, stride ``s``, pads ``p``, group 1, dilation 1) of the unshuffled tensor
``u[c r^2 + i r + j, h, w] = x[c, h r + i, w r + j]`` reads ``x`` at rows ``(h s + dy - p) r + i``:
it is the convolution of ``x`` with kernel ``k r``, stride ``s r``, pads ``p r`` and the weight
``W'[o, c, dy r + i, dx r + j] = W[o, c r^2 + i r + j, dy, dx]`` (zero padding of ``u`` is zero
padding of ``x``, as ``0 <= i < r``). The same products of the same values, summed in another
order: the same tensor up to float rounding (tested against onnxruntime on files torch wrote),
and in the quantized formats the same weight codes and input values (a BFP patch holds the same
values). Each conv that reads the unshuffled tensor is rewritten so; the move is then read by no
one and dropped with the nodes nothing needs. Anything else (another reader, a grouped or
dilated conv, ``auto_pad``, shapes not constant) is left as it is.
"""
from __future__ import annotations

import numpy as np

from ..importer import graphindex
from ..importer.graphindex import attr as _attr


def _ints(consts, name):
    v = consts.get(name)
    return None if v is None else [int(t) for t in np.asarray(v).reshape(-1)]


def _unshuffle(node, producer, consts):
    """``(x, r, C, order)`` when ``node``'s output is a pixel unshuffle of ``x`` (``order`` "crd":
    channel ``c r^2 + i r + j``; "dcr": ``(i r + j) C + c``), else None (``C`` None: unknown)."""
    if node.op_type == "SpaceToDepth":
        r = int(_attr(node, "blocksize", 0))
        return (node.input[0], r, None, "dcr") if r >= 2 else None
    if node.op_type != "Reshape" or len(node.input) < 2:
        return None
    tr = producer.get(node.input[0])
    if tr is None or tr.op_type != "Transpose" or list(_attr(tr, "perm", [])) != [0, 1, 3, 5, 2, 4]:
        return None
    first = producer.get(tr.input[0])
    if first is None or first.op_type != "Reshape" or len(first.input) < 2:
        return None
    t6, t4 = _ints(consts, first.input[1]), _ints(consts, node.input[1])
    if t6 is None or t4 is None or len(t6) != 6 or len(t4) != 4:
        return None
    c, hr, r, wr, r2 = t6[1:]
    if r != r2 or r < 2 or min(c, hr, wr) < 1 or t4[1:] != [c * r * r, hr, wr]:
        return None
    return first.input[0], r, c, "crd"


def _weight(w, r, order):
    """``W (O, C r^2, k, k)`` of a conv on the unshuffled tensor as ``W' (O, C, k r, k r)``."""
    o, cr2, kh, kw = w.shape
    c = cr2 // (r * r)
    if order == "crd":
        w6 = w.reshape(o, c, r, r, kh, kw)                  # (o, c, i, j, dy, dx)
    else:
        w6 = w.reshape(o, r, r, c, kh, kw).transpose(0, 3, 1, 2, 4, 5)
    return np.ascontiguousarray(w6.transpose(0, 1, 4, 2, 5, 3).reshape(o, c, kh * r, kw * r))


def _foldable(conv, consts, r):
    if conv is None or conv.op_type != "Conv" or len(conv.input) < 2 or conv.input[1] not in consts:
        return False
    w = np.asarray(consts[conv.input[1]])
    return (w.ndim == 4 and w.shape[1] % (r * r) == 0 and int(_attr(conv, "group", 1)) == 1
            and all(int(d) == 1 for d in _attr(conv, "dilations", [1, 1]))
            and _attr(conv, "auto_pad", b"NOTSET") in (b"NOTSET", "NOTSET"))


def rewrite(model):
    """``model`` with each such unshuffle folded into its convs (a copy), or ``model`` itself."""
    g = model.graph
    if not any(n.op_type in ("Transpose", "SpaceToDepth") for n in g.node):
        return model
    from onnx import helper, numpy_helper
    consts, producer, readers, outputs = graphindex.index(g)
    plan = []
    for k, n in enumerate(g.node):
        found = _unshuffle(n, producer, consts)
        if found is None or n.output[0] in outputs:
            continue
        x, r, c, order = found
        convs = readers.get(n.output[0], [])
        if convs and all(_foldable(cv, consts, r) and cv.input[0] == n.output[0] and cv.input[1] != n.output[0]
                         and (c is None or np.asarray(consts[cv.input[1]]).shape[1] == c * r * r) for cv in convs):
            plan.append((n.output[0], x, r, order))
    if not plan:
        return model
    m, fresh = graphindex.copy_fresh(model)
    g = m.graph
    for out, x, r, order in plan:
        for conv in [n for n in g.node if n.op_type == "Conv" and n.input[0] == out]:
            w = _weight(np.asarray(consts[conv.input[1]]), r, order)
            new = fresh(conv.input[1] + f"__unshuffle{r}")
            g.initializer.append(numpy_helper.from_array(w, new))
            kh, kw = w.shape[2:]
            strides = [int(s) * r for s in _attr(conv, "strides", [1, 1])]
            pads = [int(p) * r for p in _attr(conv, "pads", [0, 0, 0, 0])]
            keep = [a for a in conv.attribute if a.name not in ("kernel_shape", "strides", "pads")]
            del conv.attribute[:]
            conv.attribute.extend(keep + [helper.make_attribute("kernel_shape", [kh, kw]),
                                          helper.make_attribute("strides", strides),
                                          helper.make_attribute("pads", pads)])
            conv.input[0], conv.input[1] = x, new
    return m
