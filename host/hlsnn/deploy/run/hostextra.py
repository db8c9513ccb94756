"""Host ops beyond :mod:`hlsnn.deploy.run.hostops`'s core: what PyTorch models also write, each
computed on the host in float64 as ONNX defines it (the next engine layer requantizes the result,
as after a ``Sigmoid``):

* ``ResizeLinear``: ``Resize`` with ``mode`` linear (``nn.Upsample(mode='bilinear')``,
  ``F.interpolate(..., mode='bilinear' or 'linear')``) on the spatial axes, by constant scales or
  sizes, with the coordinate transformations ``half_pixel``, ``pytorch_half_pixel``,
  ``align_corners`` and ``asymmetric``: per axis an (out x in) matrix of the two neighbours'
  weights (ONNX's linear interpolation is separable), applied axis after axis. ``mode`` cubic
  (``nn.Upsample(mode='bicubic')``, ``cubic_coeff_a``, ``exclude_outside``) is the same op with
  the four neighbours' Keys weights per axis (:func:`_cubic_matrix`; some negative: the result
  can leave the input's range, and no network-mode rule takes it, so it runs layer by layer).
  Antialiased resizes, ``tf_crop_and_resize`` and resizing N or C are refused by name.
* ``LeakyRelu`` (``alpha``), ``Elu`` (``alpha``) and ``PRelu`` (``nn.PReLU``: a constant slope
  that broadcasts within a sample, never over the batch): elementwise.
* ``DepthToSpace`` (``nn.PixelShuffle``: mode CRD; DCR too): moves values.
* ``InstanceNormalization`` (``nn.InstanceNorm*``, and ``nn.GroupNorm``, which both exporters write
  as a ``Reshape`` to (N, G, -1), this op, a ``Reshape`` back and the affine ``Mul``/``Add``):
  each sample's channel normalized over the axes after it, constant scale and bias.
* ``ReduceAxes``: ``ReduceMean`` / ``ReduceMax`` over axes after the batch that are not a
  global pool's (``x.mean(1)``, the mean over the tokens of an (N, T, F) tensor), and
  ``ReduceSum`` over axes after the batch (``x.sum(1)``).
* ``LogSoftmax`` on the last axis (a classifier's ``nn.LogSoftmax(dim=1)``: the arg max of
  its output is the logits').
"""
from __future__ import annotations

import numpy as np

#: op types of the ONNX nodes :func:`rule` takes
OPS = ("LeakyRelu", "Elu", "LogSoftmax", "PRelu", "DepthToSpace", "InstanceNormalization")
#: host ops :func:`run` computes
HOST_OPS = OPS + ("ResizeLinear", "ReduceAxes")
_COORDS = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def rule(node, a, shapes, consts=None):
    """``(host op, attrs, inputs)`` for ``node`` (op type in :data:`OPS`), or why not."""
    op, x = node.op_type, node.input[0]
    if op == "PRelu":
        if len(node.input) < 2 or node.input[1] not in (consts or {}):
            return "the slope must be a constant"
        slope = np.asarray(consts[node.input[1]], np.float64)
        shape = shapes.get(x)
        if shape is not None and slope.ndim >= len(shape) and slope.shape[slope.ndim - len(shape)] != 1:
            return f"slope of shape {slope.shape} for a tensor of shape {tuple(shape)}: it would broadcast over the batch"
        return op, {"slope": slope}, [x]
    if op == "InstanceNormalization":
        if any(len(node.input) <= i or node.input[i] not in (consts or {}) for i in (1, 2)):
            return "scale and bias must be constants"
        return op, {"epsilon": float(a.get("epsilon", 1e-5)), "scale": np.asarray(consts[node.input[1]], np.float64),
                    "bias": np.asarray(consts[node.input[2]], np.float64)}, [x]
    if op == "DepthToSpace":
        mode = _s(a.get("mode", "DCR"))
        if mode not in ("DCR", "CRD"):
            return f"mode {mode!r}: DCR or CRD"
        return op, {"blocksize": int(a["blocksize"]), "mode": mode}, [x]
    if op == "LeakyRelu":
        return op, {"alpha": float(a.get("alpha", 0.01))}, [x]
    if op == "Elu":
        return op, {"alpha": float(a.get("alpha", 1.0))}, [x]
    rank = len(shapes[x]) if x in shapes else None
    axis = int(a.get("axis", -1))
    if rank is None or axis % rank != rank - 1 or rank != 2:
        return f"axis = {axis}: only the last axis of a (batch, classes) tensor"
    return op, {}, [x]


def reduce_axes(op, axes, keepdims, rank):
    """``("ReduceAxes", attrs)`` for a ``ReduceMean``/``ReduceMax``/``ReduceSum`` over ``axes`` (none the
    batch's) of a tensor of rank ``rank``, or why not."""
    if rank is None:
        return f"{op} over axes {list(axes)} of a tensor of unknown rank"
    axes = sorted({int(v) % rank for v in axes})
    if 0 in axes:
        return f"{op} over axes {axes}: over the batch axis (0); only over the axes after it"
    return "ReduceAxes", {"fn": op, "axes": axes, "keepdims": keepdims}


def resize_linear(node, a, scales, sizes, shape, mode="linear"):
    """A linear (or, with ``mode`` ``"cubic"``, cubic) ``Resize`` as ``("ResizeLinear", attrs)``:
    per spatial axis the (n_out, n_in) matrix of its weights (:func:`_axis_matrix`,
    :func:`_cubic_matrix`), which the host applies axis by axis; or why not (a string).
    ``scales`` / ``sizes``: the constant inputs (None when absent); ``shape``: the input's static
    shape (the batch may be None)."""
    coord = _s(a.get("coordinate_transformation_mode", "half_pixel"))
    if coord not in _COORDS:
        return f"coordinate_transformation_mode {coord!r} with mode {mode!r}: {', '.join(_COORDS)}"
    if int(a.get("antialias", 0)):
        return f"antialias = 1: only plain {mode} interpolation"
    if a.get("axes") is not None:
        return "Resize with axes is not supported"
    if shape is None or len(shape) < 3 or None in shape[1:]:
        return f"a {mode} Resize of an input of unknown shape {shape}"
    r = len(shape)
    if scales is not None and np.size(scales):
        sc = np.asarray(scales, np.float64).reshape(-1)
        if len(sc) != r or sc[0] != 1 or sc[1] != 1 or (sc[2:] <= 0).any():
            return f"scales {sc.tolist()}: positive factors on the spatial axes only (1 on N and C)"
        out = [int(np.floor(i * s)) for i, s in zip(shape[2:], sc[2:])]
        sc = sc[2:].tolist()
    elif sizes is not None and np.size(sizes):
        sz = np.asarray(sizes).reshape(-1).astype(np.int64)
        if len(sz) != r or sz[1] != shape[1] or (shape[0] is not None and sz[0] != shape[0]) \
                or (shape[0] is None and sz[0] != 1) or (sz[2:] < 1).any():
            return f"sizes {sz.tolist()}: sizes of the spatial axes only (N and C kept)"
        out = [int(v) for v in sz[2:]]
        sc = [o / i for o, i in zip(out, shape[2:])]
    else:
        return "neither scales nor sizes given"
    if mode == "cubic":
        ca, excl = float(a.get("cubic_coeff_a", -0.75)), int(a.get("exclude_outside", 0))
        mats = [_cubic_matrix(int(i), o, s, coord, ca, excl) for i, o, s in zip(shape[2:], out, sc)]
        return "ResizeLinear", {"mats": mats, "mode": "cubic"}
    mats = [_axis_matrix(int(i), o, s, coord) for i, o, s in zip(shape[2:], out, sc)]
    return "ResizeLinear", {"mats": mats}


def _source(n_in, n_out, scale, coord):
    """Each output position's source coordinate on the input axis (ONNX's coordinate transforms)."""
    o = np.arange(n_out, dtype=np.float64)
    if coord == "align_corners":
        return o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    if coord == "asymmetric":
        return o / scale
    if coord == "pytorch_half_pixel" and n_out <= 1:
        return np.zeros(n_out)
    return (o + 0.5) / scale - 0.5


def _cubic_matrix(n_in, n_out, scale, coord, a=-0.75, exclude_outside=0):
    """The (n_out, n_in) weights of ONNX's cubic interpolation along one axis (``nn.Upsample(mode=
    'bicubic')``: Keys' kernel with ``a`` = -0.75): output ``o`` at source coordinate ``x`` (not
    clipped), ``k = floor(x)``, ``r = x - k``, reads ``k - 1 .. k + 2`` with the weights
    ``W(1 + r), W(r), W(1 - r), W(2 - r)``, ``W(t) = (a + 2)|t|^3 - (a + 3)|t|^2 + 1`` for
    ``|t| <= 1`` and ``a|t|^3 - 5a|t|^2 + 8a|t| - 4a`` for ``1 < |t| < 2``; positions outside
    the axis read its edge (their weights add to the edge's), or with ``exclude_outside`` get
    weight 0, the others scaled to sum 1 (onnxruntime's and torch's values,
    tests/deploy/test_torch_seventh.py)."""
    def w(t):
        t = np.abs(t)
        return np.where(t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1,
                        np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0))
    x = _source(n_in, n_out, scale, coord)
    k = np.floor(x).astype(np.int64)
    r = x - k
    m = np.zeros((n_out, n_in))
    rows = np.arange(n_out)
    taps = [(k - 1, w(1 + r)), (k, w(r)), (k + 1, w(1 - r)), (k + 2, w(2 - r))]
    if exclude_outside:
        inside = [(i >= 0) & (i < n_in) for i, _ in taps]
        total = sum(np.where(ok, c, 0.0) for ok, (_, c) in zip(inside, taps))
        taps = [(i, np.where(ok, c / total, 0.0)) for ok, (i, c) in zip(inside, taps)]
    for i, c in taps:
        np.add.at(m, (rows, np.clip(i, 0, n_in - 1)), c)
    return m


def _axis_matrix(n_in, n_out, scale, coord):
    """The (n_out, n_in) weights of ONNX's linear interpolation along one axis."""
    o = np.arange(n_out, dtype=np.float64)
    if coord == "align_corners":
        x = o * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    elif coord == "asymmetric":
        x = o / scale
    elif coord == "pytorch_half_pixel" and n_out <= 1:
        x = np.zeros(n_out)
    else:
        x = (o + 0.5) / scale - 0.5
    x = np.clip(x, 0, n_in - 1)
    x0 = np.floor(x).astype(np.int64)
    x1 = np.minimum(x0 + 1, n_in - 1)
    w = x - x0
    m = np.zeros((n_out, n_in))
    np.add.at(m, (np.arange(n_out), x0), 1 - w)
    np.add.at(m, (np.arange(n_out), x1), w)
    return m


def run(layer, inputs):
    op, a, x = layer.op, layer.attrs, inputs[0]
    if op == "ResizeLinear":
        from ...engines.network.pools.cornerresize import exact_run
        y = exact_run(a["mats"], x)                 # W / d weights: the exact sum, one division (rule box_resize)
        if y is not None:
            return y
        for ax, m in enumerate(a["mats"]):
            x = np.moveaxis(np.tensordot(np.asarray(m, np.float64), np.moveaxis(x, ax + 2, 0), axes=1), 0, ax + 2)
        return x
    if op == "ReduceAxes":
        red = {"ReduceMean": np.mean, "ReduceMax": np.max, "ReduceSum": np.sum}[a["fn"]]
        return red(x, axis=tuple(int(v) for v in a["axes"]), keepdims=bool(a["keepdims"]))
    if op == "InstanceNormalization":
        axes = tuple(range(2, x.ndim))
        mean = x.mean(axis=axes, keepdims=True)
        y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + a["epsilon"])
        shape = (1, -1) + (1,) * (x.ndim - 2)
        return y * np.asarray(a["scale"], np.float64).reshape(shape) + np.asarray(a["bias"], np.float64).reshape(shape)
    if op == "PRelu":
        return np.where(x >= 0, x, x * np.asarray(a["slope"], np.float64))
    if op == "DepthToSpace":
        n, c, h, w = x.shape
        b = int(a["blocksize"])
        if a["mode"] == "DCR":
            y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
        else:
            y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
        return y.reshape(n, c // (b * b), h * b, w * b)
    if op == "LeakyRelu":
        return np.where(x >= 0, x, a["alpha"] * x)
    if op == "Elu":
        return np.where(x >= 0, x, a["alpha"] * np.expm1(np.minimum(x, 0)))
    if op == "LogSoftmax":
        z = x - x.max(axis=-1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))
    raise ValueError(op)
