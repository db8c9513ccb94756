"""Convolution geometry of a deployed ``conv`` layer (:mod:`hlsnn.deploy`): ONNX ``Conv`` with any stride, explicit
(asymmetric) padding, dilation, rectangular kernels and groups, and how each engine runs it.

ONNX semantics (the operator's definition): the input ``(B, C, H, W)`` is zero-padded by
``pads = (top, left, bottom, right)``; a weight ``(Z, C/g, kh, kw)`` of ``g`` groups maps
input channels ``[j*C/g, (j+1)*C/g)`` to output channels ``[j*Z/g, (j+1)*Z/g)``; output
``(y, x)`` reads the padded input at ``(y*sh + i*dh, x*sw + j*dw)`` for kernel tap ``(i, j)``;
``oh = (H + top + bottom - dh*(kh-1) - 1) // sh + 1`` (and ``ow`` likewise).

How the engines run it, exactly (no approximation beyond each engine's own arithmetic):

* **GEMM engines** (``bfp_systolic``, ``shift_mac``): host im2col (:func:`im2col`) with the
  stride, dilation and padding, and one GEMM per group: the im2col columns of the group's
  input channels (contiguous, channel-major) against the group's ``(Z/g, C/g*kh*kw)``
  weight, so a depthwise layer costs its own MACs (no block-diagonal zeros).
* **Convolving engine** (``sparse_cluster``): a stride-1 convolution of a square kernel, with
  "same" or "valid" padding, runs natively. Anything else becomes such a convolution
  (:func:`as_stride1`): the groups' block-diagonal weight, the dilation as zero taps, a
  rectangular kernel padded with zero taps to a square one (the input padded on the bottom and
  right to match), the padding applied on the host (then "valid"), and a stride taken by
  keeping every ``sh``-th row and ``sw``-th column of the stride-1 output. Zero weights cost
  the sparse engine nothing, but the stride does: the kernel computes ``sh * sw`` times the
  outputs the layer keeps, and its statistics unit and saturation counter see all of them
  (the output radix is chosen from their histogram).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ConvGeom:
    """Kernel size, stride, pads (top, left, bottom, right), dilation and groups."""

    kh: int
    kw: int
    sh: int = 1
    sw: int = 1
    pads: tuple = (0, 0, 0, 0)
    dh: int = 1
    dw: int = 1
    group: int = 1

    def out_hw(self, h, w):
        """The output height and width for an input of ``h x w``."""
        t, l, b, r = self.pads
        oh = (h + t + b - self.dh * (self.kh - 1) - 1) // self.sh + 1
        ow = (w + l + r - self.dw * (self.kw - 1) - 1) // self.sw + 1
        return oh, ow

    @property
    def simple_pad(self):
        """The symmetric pad of a stride-1, undilated, ungrouped square convolution with "same"
        (``(k-1)/2``, odd ``k``) or "valid" (0) padding, the form every engine convolves
        natively; None for any other convolution."""
        p = self.pads[0]
        if (self.kh != self.kw or (self.sh, self.sw, self.dh, self.dw, self.group) != (1, 1, 1, 1, 1)
                or len(set(self.pads)) != 1 or p not in (0, (self.kh - 1) // 2) or (p and self.kh % 2 == 0)):
            return None
        return p

    def describe(self):
        parts = [f"{self.kh}x{self.kw}"]
        if (self.sh, self.sw) != (1, 1):
            parts.append(f"stride {self.sh}x{self.sw}" if self.sh != self.sw else f"stride {self.sh}")
        if len(set(self.pads)) == 1:
            parts.append(f"pad {self.pads[0]}")
        else:
            parts.append("pads {}".format(",".join(map(str, self.pads))))
        if (self.dh, self.dw) != (1, 1):
            parts.append(f"dilation {self.dh}x{self.dw}")
        if self.group != 1:
            parts.append(f"groups {self.group}")
        return " ".join(parts)


def _out_hw_checked(g: ConvGeom, h, w):
    oh, ow = g.out_hw(h, w)
    if oh < 1 or ow < 1:
        from ..errors import InputError
        raise InputError(f"a {g.describe()} convolution does not fit a {h}x{w} map: the (dilated) kernel is larger "
                         "than the padded map")
    return oh, ow


class Patches:
    """The im2col rows of ``x`` (B, C, H, W) for ``g``, not built yet: a kernel that can gather
    them itself (``bfp_systolic``'s compiled quantizer) reads ``x``; :meth:`rows` builds them."""

    def __init__(self, x, g: ConvGeom):
        self.x, self.geom = x, g
        b, c, h, w = x.shape
        self.out_hw = _out_hw_checked(g, h, w)
        self.shape = (b * self.out_hw[0] * self.out_hw[1], c * g.kh * g.kw)

    def rows(self):
        return im2col(self.x, self.geom)[0]


def patch_nonzeros(x, g: ConvGeom) -> int:
    """``np.count_nonzero(im2col(x, g)[0])`` without building the rows (:func:`patch_count` of
    ``x``'s non-zeros per pixel). An exact integer count."""
    return patch_count(np.count_nonzero(x, axis=(0, 1)), g)


def patch_count(nz, g: ConvGeom) -> int:
    """The non-zero entries of the im2col rows of a map whose pixel ``(y, x)`` holds ``nz[y, x]``
    non-zero values (over images and channels): each input element appears in ``cy[y] * cx[x]``
    rows, ``cy[y]`` the number of (output row, kernel row) pairs that read input row ``y``
    (``oy * sh + ky * dh - top == y``), ``cx`` likewise for columns (padding reads no element)."""
    h, w = np.shape(nz)
    oh, ow = _out_hw_checked(g, h, w)

    def reads(n_in, n_out, k, s, d, before):
        cnt = np.zeros(n_in, np.int64)
        for i in range(k):
            pos = np.arange(n_out, dtype=np.int64) * s + i * d - before
            pos = pos[(pos >= 0) & (pos < n_in)]
            np.add.at(cnt, pos, 1)
        return cnt
    cy = reads(h, oh, g.kh, g.sh, g.dh, g.pads[0])
    cx = reads(w, ow, g.kw, g.sw, g.dw, g.pads[1])
    return int(cy @ np.asarray(nz, np.int64) @ cx)


def pad_nchw(x, pads):
    """``x`` (B, C, H, W) zero-padded by ``pads`` (top, left, bottom, right)."""
    t, l, b, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))


def im2col(x, g: ConvGeom, dtype=None):
    """(B, C, H, W) -> (B*oh*ow, C*kh*kw) patches, channel-major then kernel row, column (the
    order of a (Z, C, kh, kw) weight flattened), and (oh, ow); ``dtype``: the rows' type
    (default ``x``'s), as ``astype`` would cast them."""
    b, c, h, w = x.shape
    oh, ow = _out_hw_checked(g, h, w)
    dt = x.dtype if dtype is None else np.dtype(dtype)
    if (dt == x.dtype and x.dtype in (np.float64, np.int64)
            or x.dtype == np.int64 and dt in (np.float32, np.float64)) and x.size >= _NATIVE_MIN:
        out = _im2col_native(x, g, oh, ow, dt)
        if out is not None:
            return out, (oh, ow)
    xp = pad_nchw(x, g.pads)
    eh, ew = g.dh * (g.kh - 1) + 1, g.dw * (g.kw - 1) + 1            # the dilated kernel's extent
    v = np.lib.stride_tricks.sliding_window_view(xp, (eh, ew), axis=(2, 3))   # B C H' W' eh ew
    v = v[:, :, ::g.sh, ::g.sw, ::g.dh, ::g.dw][:, :, :oh, :ow]
    return np.ascontiguousarray(v.transpose(0, 2, 3, 1, 4, 5), dtype=dt).reshape(b * oh * ow, c * g.kh * g.kw), (oh, ow)


#: inputs with fewer elements take the numpy path (a compiled call costs a few microseconds)
_NATIVE_MIN = 4096
#: (input type, row type) -> the helper's function
_FUNCTIONS = {("float64", "float64"): "hlsnn_im2col_u64", ("int64", "int64"): "hlsnn_im2col_u64",
              ("int64", "float32"): "hlsnn_im2col_i64_f32", ("int64", "float64"): "hlsnn_im2col_i64_f64"}


def _im2col_native(x, g: ConvGeom, oh, ow, dt):
    """:func:`im2col` of a float64 or int64 ``x`` (rows of ``x``'s type, or of int64 as float32
    or float64) by the compiled helper ``im2col.c`` (the images split between threads), or None
    when the compiled helpers are off (:func:`hlsnn.native.load`)."""
    import ctypes
    from .. import native
    from ..native import parallel
    lib = native.load("im2col")
    if lib is None:
        return None
    if not getattr(lib, "_hlsnn_typed", False):       # a library loaded afresh (native.forget) is untyped
        for name in set(_FUNCTIONS.values()):
            fn = getattr(lib, name)
            fn.restype = None
            fn.argtypes = [ctypes.c_void_p] + [ctypes.c_int64] * 15 + [ctypes.c_void_p]
        lib._hlsnn_typed = True
    fn = getattr(lib, _FUNCTIONS[(x.dtype.name, dt.name)])
    x = np.ascontiguousarray(x)
    b, c, h, w = x.shape
    out = np.empty((b * oh * ow, c * g.kh * g.kw), dt)
    top, left = g.pads[0], g.pads[1]

    def part(r0, r1):                  # output lines b * oh + y
        fn(x.ctypes, c, h, w, g.kh, g.kw, g.sh, g.sw, top, left, g.dh, g.dw, oh, ow, r0, r1, out.ctypes)
    parallel.run(part, parallel.parts(b * oh, max(1, (1 << 16) // max(1, out.shape[1] * ow))))
    return out


def dense_weight(w, group):
    """A grouped weight (Z, C/g, kh, kw) as the (Z, C, kh, kw) weight of all input channels,
    zero outside each group's block (the weight itself when ``group == 1``)."""
    if group == 1:
        return w
    z, cg = w.shape[:2]
    zg = z // group
    full = np.zeros((z, cg * group) + w.shape[2:], dtype=w.dtype)
    for j in range(group):
        full[j * zg:(j + 1) * zg, j * cg:(j + 1) * cg] = w[j * zg:(j + 1) * zg]
    return full


def conv_float(x, w, b, g: ConvGeom):
    """The convolution in float64 (the reference the deployment is held to)."""
    rows, (oh, ow) = im2col(x, g)
    wd = dense_weight(w, g.group)
    y = rows @ wd.reshape(wd.shape[0], -1).T + b
    return y.reshape(x.shape[0], oh, ow, -1).transpose(0, 3, 1, 2)


def as_stride1(w, g: ConvGeom):
    """The stride-1 square convolution that computes ``g`` (module docstring): ``(w1, pads1,
    k1)`` with ``w1`` (Z, C, k1, k1) whose zero taps stand for the groups, the dilation and a
    rectangular kernel, and the input pads ``(top, left, bottom, right)`` to apply on the host
    before a "valid" convolution; its output, sampled ``[::sh, ::sw][:oh, :ow]``, is the layer's."""
    wd = dense_weight(w, g.group)
    eh, ew = g.dh * (g.kh - 1) + 1, g.dw * (g.kw - 1) + 1
    k1 = max(eh, ew)
    w1 = np.zeros(wd.shape[:2] + (k1, k1), dtype=wd.dtype)
    w1[:, :, :eh:g.dh, :ew:g.dw] = wd
    t, l, bo, r = g.pads
    # the zero taps past the kernel's extent read k1 - eh more rows (k1 - ew more columns)
    return w1, (t, l, bo + k1 - eh, r + k1 - ew), k1


def stride1_output(y, g: ConvGeom, h, w):
    """Keep the outputs of the layer from the stride-1 "valid" convolution's ``y`` (B, Z, H', W')."""
    oh, ow = g.out_hw(h, w)
    return y[:, :, ::g.sh, ::g.sw][:, :, :oh, :ow]


def spread(a, sh, sw, fill=0):
    """``a`` (..., h, w) with ``sh - 1`` rows and ``sw - 1`` columns of ``fill`` between its entries:
    (..., sh*(h-1)+1, sw*(w-1)+1). A transposed convolution's zero-stuffed input (``fill`` 0) and a
    dilated convolution's kernel with its holes filled (:mod:`hlsnn.deploy.lower.dilate`)."""
    a = np.asarray(a)
    h, w = a.shape[-2:]
    out = np.full(a.shape[:-2] + (sh * (h - 1) + 1, sw * (w - 1) + 1), fill, a.dtype)
    out[..., ::sh, ::sw] = a
    return out


def kernel_blocks(g, max_ksize):
    """Blocks of taps ``(i0, th, j0, tw)`` that cover a ``g.kh x g.kw`` kernel, each of a
    dilated extent of at most ``max_ksize`` (``dh*(th-1)+1 <= max_ksize``): row blocks of
    ``th`` taps times column blocks of ``tw``, the last of each shorter."""
    th = (max_ksize - 1) // g.dh + 1
    tw = (max_ksize - 1) // g.dw + 1
    return [(i0, min(th, g.kh - i0), j0, min(tw, g.kw - j0))
            for i0 in range(0, g.kh, th) for j0 in range(0, g.kw, tw)]
