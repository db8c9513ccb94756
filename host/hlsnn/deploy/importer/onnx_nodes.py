"""Node-level pieces of the ONNX import (:func:`hlsnn.deploy.importer.onnx_import.load_onnx`): the rewrites of a
node into the layers the engines run (a MatMul's rows, a 1-D map as a 2-D one, a ConvTranspose as a
convolution) and, for a node no rule covers, the reason in words."""
from __future__ import annotations

import numpy as np

from ...errors import ModelError, printable


def _zipmap_unsupported(a):
    """Why a ``ZipMap`` cannot be read as its input tensor, or None: only integer class labels
    0, 1, ..., n-1 make column j of the probabilities the probability of class j."""
    labels = a.get("classlabels_int64s")
    if labels is None:
        return ("ZipMap with string class labels (export the probabilities as a tensor: skl2onnx's "
                "options={id(model): {'zipmap': False}}, or name ZipMap's input with `output:`)")
    if list(labels) != list(range(len(labels))):
        return (f"ZipMap with class labels {list(labels)[:6]}{'...' if len(labels) > 6 else ''}: only 0..n-1 "
                "(export the probabilities as a tensor: skl2onnx's options={id(model): {'zipmap': False}})")
    return None


def _matmul_rows(shape, k):
    """How a ``MatMul`` by a constant ``(K, N)`` matrix reads its input of inferred ``shape``:
    None for a (batch, K) matrix (a dense layer), the leading dimensions between the batch and
    K (``-1`` for an unknown one) for a tensor of rank > 2, whose every row of K it multiplies
    (a ``Linear`` on each token of an (N, T, F) tensor), or why it is unsupported."""
    if shape is None:
        return ("the input's rank is unknown (shape inference found none): a MatMul multiplies every row of its "
                "input's last axis, so hlsnn needs the rank to know the rows")
    if len(shape) < 2:
        return f"an input of rank {len(shape)}: the first axis is the batch, so the input needs rank 2 or more"
    if shape[-1] is not None and shape[-1] != k:
        return f"the input's last axis has {shape[-1]} values, the weight {k} rows"
    if len(shape) == 2:
        return None
    lead = tuple(-1 if d is None else int(d) for d in shape[1:-1])
    if lead.count(-1) > 1:
        return f"input of shape {tuple(shape)}: more than one unknown dimension between the batch and the rows"
    return lead


def _shapes(model):
    """Tensor shapes (tuples, None for an unknown dimension) by name, from onnx's shape
    inference where it succeeds, else as the file declares them (the rules that need a rank or
    a size read them here)."""
    from . import graphindex
    return graphindex.shapes(model, declared=True)


def _conv_transpose(w, a, shape):
    """A 2-D ``ConvTranspose`` as the convolution of its zero-stuffed input, exactly (the same
    products, and products by the stuffed zeros): ``(weight (Z, C/g, kh, kw), strides (1, 1)
    after stuffing, pads, dilations, group)``, or why it is unsupported.

    ONNX: ``y[co, iy*s - top + ky*d, ...] += x[ci, iy, ...] * W[ci, co, ky, kx]`` with ``W``
    of shape ``(C, Z/g, kh, kw)``. The input with ``s - 1`` zeros between its pixels
    (``ZeroStuff``), padded by ``d*(k-1) - top`` before and ``d*(k-1) - bottom +
    output_padding`` after, convolved at stride 1 and dilation ``d`` with the weight flipped in
    both axes and its input and output channels swapped per group, gives ``y``."""
    if w.ndim != 4:
        return f"only 1-D and 2-D transposed convolution (weight of rank {w.ndim})"
    if _s(a.get("auto_pad", "NOTSET")) not in ("NOTSET", "VALID"):
        return f"auto_pad {a['auto_pad']!r}: give explicit pads"
    if a.get("output_shape") is not None:
        return "output_shape: give pads and output_padding instead"
    g = int(a.get("group", 1))
    c, zg, kh, kw = w.shape
    if g < 1 or c % g:
        return f"group = {g}: the {c} input channels must split into {g} groups"
    st = tuple(int(v) for v in a.get("strides", [1, 1]))
    dil = tuple(int(v) for v in a.get("dilations", [1, 1]))
    pads = [int(v) for v in a.get("pads", [0, 0, 0, 0])]
    op_ = [int(v) for v in a.get("output_padding", [0, 0])]
    if len(st) != 2 or len(dil) != 2 or len(pads) != 4 or len(op_) != 2 or min(st + dil) < 1 or min(pads + op_) < 0:
        return f"strides {list(st)}, dilations {list(dil)}, pads {pads}, output_padding {op_}: 2, 2, 4, 2 integers"
    if any(o >= max(s, d) for o, s, d in zip(op_, st, dil)):
        return f"output_padding {op_}: each must be smaller than the stride or the dilation"
    full = [dil[0] * (kh - 1) - pads[0], dil[1] * (kw - 1) - pads[1],
            dil[0] * (kh - 1) - pads[2] + op_[0], dil[1] * (kw - 1) - pads[3] + op_[1]]
    if min(full) < 0:
        return f"pads {pads}: more than the kernel's reach (dilation * (k - 1)), a crop: not supported"
    cg = c // g
    wc = w.reshape(g, cg, zg, kh, kw).transpose(0, 2, 1, 3, 4)[..., ::-1, ::-1].reshape(g * zg, cg, kh, kw)
    return np.ascontiguousarray(wc, np.float64), st, tuple(full), dil, g


def _one_d_as_2d(w, a, shape):
    """A 1-D ``ConvTranspose``'s weight, attributes and input shape as those of the ``(k, 1)``
    2-D one on the ``(N, C, L, 1)`` map (the second spatial axis of length 1, its kernel 1,
    stride 1, no padding)."""
    a = dict(a)
    for key, extra in (("strides", 1), ("dilations", 1), ("output_padding", 0), ("kernel_shape", 1)):
        if key in a:
            a[key] = list(a[key]) + [extra]
    if "pads" in a:
        a["pads"] = [a["pads"][0], 0, a["pads"][-1], 0] if len(a["pads"]) == 2 else list(a["pads"]) + [0, 0]
    return w[..., None], a, None if shape is None else tuple(shape) + (1,)


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _explicit_pads(a, shape, kernel):
    """A ``Conv``'s attributes with ``auto_pad`` SAME_UPPER / SAME_LOWER (TorchScript's
    ``padding='same'``) as the explicit ``pads`` ONNX defines for it: per spatial axis the output
    ``ceil(in / stride)`` needs ``total = max(0, (out - 1) * stride + (k - 1) * dilation + 1 - in)``
    pads, ``total // 2`` at the start and the rest at the end (SAME_UPPER) or the other way round
    (SAME_LOWER). VALID is no padding. The attributes unchanged without ``auto_pad``; why the
    pads cannot be known (the input's spatial shape is unknown) as a string."""
    how = _s(a.get("auto_pad", "NOTSET"))
    if how == "NOTSET":
        return a
    a = {k: v for k, v in a.items() if k != "auto_pad"}
    n = len(kernel)
    if how == "VALID":
        return dict(a, pads=[0] * (2 * n))
    if how not in ("SAME_UPPER", "SAME_LOWER"):
        return f"auto_pad {how!r}: NOTSET, VALID, SAME_UPPER or SAME_LOWER"
    spatial = None if shape is None or len(shape) != n + 2 else shape[2:]
    if spatial is None or None in spatial:
        return f"auto_pad {how!r} on an input of unknown spatial shape {shape}: give explicit pads"
    strides = [int(v) for v in a.get("strides", [1] * n)]
    dil = [int(v) for v in a.get("dilations", [1] * n)]
    if len(strides) != n or len(dil) != n:
        return f"strides {strides}, dilations {dil}: {n} integers each"
    begin, end = [], []
    for i, k, st, d in zip(spatial, kernel, strides, dil):
        total = max(0, (-(-int(i) // st) - 1) * st + (int(k) - 1) * d + 1 - int(i))
        lo = total // 2 if how == "SAME_UPPER" else total - total // 2
        begin.append(lo)
        end.append(total - lo)
    return dict(a, pads=begin + end)


def _conv1d_unsupported(a):
    for key, n in (("strides", 1), ("dilations", 1), ("pads", 2)):
        v = list(a.get(key, [1] * n if key != "pads" else [0] * n))
        if len(v) != n:
            return f"{key} {v}: a 1-D convolution takes {n} integer(s)"
    return None


def _conv_unsupported(w, a):
    if w.ndim != 4:
        return f"only 2-D convolution is supported (weight of rank {w.ndim})"
    g = a.get("group", 1)
    if g < 1 or w.shape[0] % g:
        return f"group = {g}: the {w.shape[0]} output channels must split into {g} groups"
    for key, n in (("strides", 2), ("dilations", 2), ("pads", 4)):
        v = list(a.get(key, [1] * n if key != "pads" else [0] * n))
        if len(v) != n or any(int(x) < (0 if key == "pads" else 1) for x in v):
            return f"{key} {v}: must be {n} integers, at least {0 if key == 'pads' else 1}"
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
        return f"auto_pad {a['auto_pad']!r}: give explicit pads"
    return None


def _host_unsupported(op, a, node, consts):
    if op in ("MaxPool", "AveragePool") and len(list(a.get("kernel_shape", []))) == 1:
        ks, pads = list(a["kernel_shape"]), list(a.get("pads", [0, 0]))
        if len(pads) != 2 or any(int(p) < 0 or int(p) >= ks[0] for p in pads):
            return f"pads {pads}: a 1-D pool takes 2, each at least 0 and smaller than the kernel {ks}"
        if any(d != 1 for d in a.get("dilations", [1])):
            return "dilated pooling is not supported"
        if len(list(a.get("strides", [1]))) != 1 or any(int(s) < 1 for s in a.get("strides", [1])):
            return f"strides {list(a.get('strides'))}: a 1-D pool takes one, at least 1"
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
            return f"auto_pad {a['auto_pad']!r}: give explicit pads"
        if op == "MaxPool" and len(node.output) > 1 and node.output[1]:
            return "the Indices output of MaxPool is not supported"
        return None
    if op in ("MaxPool", "AveragePool"):
        ks = list(a.get("kernel_shape", []))
        if len(ks) != 2:
            return f"kernel_shape {ks}: only 1-D and 2-D pooling"
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"VALID", "VALID"):
            return f"auto_pad {a['auto_pad']!r}: give explicit pads"
        if len(list(a.get("pads", [0, 0, 0, 0]))) != 4 or any(int(p) < 0 for p in a.get("pads", [])):
            return f"pads {list(a.get('pads'))}: must be 4 integers, at least 0"
        if any(int(p) >= k for p, k in zip(a.get("pads", [0, 0, 0, 0]), ks + ks)):
            return f"pads {list(a.get('pads'))}: each must be smaller than the kernel {ks}"
        if any(d != 1 for d in a.get("dilations", [1, 1])):
            return "dilated pooling is not supported"
        if op == "MaxPool" and len(node.output) > 1 and node.output[1]:
            return "the Indices output of MaxPool is not supported"
    if op == "Reshape" and node.input[1] not in consts:
        return "the shape input must be a constant"
    if op == "BatchNormalization" and not all(i in consts for i in node.input[1:5]):
        return "scale, bias, mean and var must be constants"
    if op == "Flatten" and a.get("axis", 1) != 1:
        return (f"axis = {a['axis']}: only axis 1 (the batch stays the first dimension; axis {a['axis']} would "
                "merge samples)")
    if op in ("MaxPool", "AveragePool") and any(int(s) < 1 for s in a.get("strides", [1, 1])):
        return f"strides {list(a['strides'])}: must be at least 1"
    if op == "Softmax" and int(a.get("axis", -1)) == 0:
        return "axis = 0: over the batch; only over the axes after it"
    return None


def _dims(vi):
    t = vi.type.tensor_type
    return tuple(d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim)


def _check_layer_names(path, layers):
    """A clear error where two layers would have one name or one output: a name the file holds
    that the importer also makes (``{layer}/map``, ``{layer}/stuffed``, ...) would otherwise wire one
    layer's output into another's place."""
    names, outs = set(), set()
    for la in layers:
        for what, v, seen in (("layer", la.name, names), ("tensor", la.output, outs)):
            if v in seen:
                raise ModelError(f"{printable(path)}: the importer's {what} name {v!r} is also a name in the file; "
                                 f"rename that node or tensor in the file")
            seen.add(v)
