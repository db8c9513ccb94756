"""Bit-exact emulator of the ``sparse_cluster`` kernel — the specification of its arithmetic.

The C++ kernel (``hls/engines/sparse_cluster/kernel.cpp.j2``) follows these rules; C-simulation
and the board must agree on every output bit.

1. **Convolution** (stride 1, cross-correlation, sources 003/004). With the input zero-padded
   to ``xp`` (C, Hp, Wp) and weights ``w`` (Z, C, k, k), int8 both:
   ``acc[z, oy, ox] = sum_{c, ky, kx} w[z, c, ky, kx] * xp[c, oy + ky, ox + kx]`` for
   ``0 <= oy < Hp - k + 1``, ``0 <= ox < Wp - k + 1`` — exact in int32 (the config bounds
   ``C * k^2 * 2^14`` so it cannot overflow). A unit computes it for its output rectangle
   from its tile's non-zero inputs and the non-zero coefficients only (zero products are
   never formed; integer sums do not depend on their order).
2. **Bias**: ``t = acc + bias[z]`` (int32 bias in accumulator units).
3. **ReLU** (optional): ``t = max(t, 0)``.
4. **2x2 max pooling** (optional, stride 2): ``t'[z, i, j] = max t[z, 2i:2i+2, 2j:2j+2]``; an odd
   last row or column is dropped.
5. **Output**: raw mode returns ``t`` (int32); otherwise
   ``y = shift_round_sat(t, shift[z], 8)`` (int8), and ``sat_count`` counts saturated outputs.
6. **Statistics unit** (source 002; only with ``stats=True``, the ``FLAG_STATS_OUT`` bit):
   ``hist = msb_histogram(t, 32)`` over ``t`` of rules 2-4 (in raw mode, the raw outputs),
   one count per real output.
"""
from __future__ import annotations

import ctypes

import numpy as np

from ... import native
from ...native import parallel
from ...primitives import ROUNDING_CODES, msb_histogram, shift_round_sat
from ..common import exact_matmul, round_into
from ..convgeom import ConvGeom, im2col

#: Methods of :func:`conv_accumulate`.
METHODS = ("auto", "dense", "sparse", "native", "direct")


def _dense(xp, w):
    """acc by im2col + GEMM (exact: float32 while every sum stays below 2**24)."""
    z, c, k, _ = w.shape
    ft = np.float32 if c * k * k * (1 << 14) <= (1 << 24) else np.float64
    cols, (oh, ow) = im2col(np.asarray(xp)[None], ConvGeom(k, k), dtype=ft)    # (H'*W', C*k*k)
    acc = exact_matmul(cols, w.reshape(z, -1).astype(ft).T, np.empty((cols.shape[0], z), ft))
    np.rint(acc, out=acc)
    return np.ascontiguousarray(acc.T, dtype=np.int64).reshape(z, oh, ow)     # one pass: transpose and cast


def _scatter(xp, w):
    """acc by pairing only non-zero inputs with non-zero coefficients (cost ~ their product):
    every pair adds ``coef * value`` at ``(z, y - ky, x - kx)`` (source 003's result index)."""
    z, c, k, _ = w.shape
    _, hp, wp = xp.shape
    oh, ow = hp - k + 1, wp - k + 1
    wb = wp + k - 1                      # a bordered buffer so that every pair lands inside it
    size = (hp + k - 1) * wb
    idx_parts, val_parts = [], []
    zz, cc, yy, xx = np.nonzero(w)
    coef = w[zz, cc, yy, xx].astype(np.float64)
    a_w = zz * size + (k - 1 - yy) * wb + (k - 1 - xx)
    order = np.argsort(cc, kind="stable")
    cc, a_w, coef = cc[order], a_w[order], coef[order]
    wstart = np.searchsorted(cc, np.arange(c + 1))
    for ch in range(c):
        a, b = wstart[ch], wstart[ch + 1]
        if a == b:
            continue
        ys, xs = np.nonzero(xp[ch])
        if ys.size == 0:
            continue
        v = xp[ch][ys, xs].astype(np.float64)
        idx_parts.append((a_w[a:b, None] + (ys * wb + xs)[None, :]).reshape(-1))
        val_parts.append((coef[a:b, None] * v[None, :]).reshape(-1))
    if not idx_parts:
        return np.zeros((z, oh, ow), np.int64)
    buf = np.bincount(np.concatenate(idx_parts), weights=np.concatenate(val_parts), minlength=z * size)
    buf = buf.reshape(z, hp + k - 1, wb)[:, k - 1:k - 1 + oh, k - 1:k - 1 + ow]
    return np.rint(buf).astype(np.int64)


def _native_lib():
    """The compiled pair path (``hlsnn/native/sparse_conv.c``), or None: the numpy path."""
    lib = native.load("sparse_conv")
    if lib is not None and not getattr(lib, "_hlsnn_typed", False):
        f = lib.hlsnn_sparse_conv
        f.restype = ctypes.c_int
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        f.argtypes = [ptr, i64, i64, i64, ptr, i64, i64, ptr]
        g = lib.hlsnn_pair_count
        g.restype = i64
        g.argtypes = [ptr, i64, i64, ptr, i64, i64]
        lib._hlsnn_typed = True
    return lib


def _native_pairs(xp, w):
    """:func:`_scatter`'s sum formed by its compiled twin (same pairs, int64, bit-equal), or
    None when the compiled helper is unavailable (``HLSNN_NATIVE=0``, no C compiler, a failed
    compile), the output is empty or memory is short: the caller then takes the numpy path."""
    z, c, k, _ = w.shape
    _, hp, wp = xp.shape
    oh, ow = hp - k + 1, wp - k + 1
    if oh <= 0 or ow <= 0:
        return None
    lib = _native_lib()
    if lib is None:
        return None
    xp = np.ascontiguousarray(xp, np.int64)
    w = np.ascontiguousarray(w, np.int64)
    acc = np.empty((z, oh, ow), np.int64)
    if lib.hlsnn_sparse_conv(xp.ctypes, c, hp, wp, w.ctypes, z, k, acc.ctypes) != 0:
        return None
    return acc


def _pair_count(xp, w, lib):
    """The number of non-zero pairs the pair path forms: over input channels, (non-zeros of
    the channel's inputs) x (its non-zero coefficients); counted in one compiled pass when
    ``lib`` is loaded (numpy's ``count_nonzero`` over an axis takes about twice as long)."""
    z, c, k, _ = w.shape
    if c == 0 or z == 0:
        return 0
    if lib is None:
        nnz_w = np.count_nonzero(w.reshape(z, c, -1), axis=(0, 2))
        nnz_x = np.count_nonzero(xp.reshape(c, -1), axis=1)
        return int((nnz_w * nnz_x).sum())
    xp = np.ascontiguousarray(xp, np.int64)
    w = np.ascontiguousarray(w, np.int64)
    pairs = int(lib.hlsnn_pair_count(xp.ctypes, c, xp[0].size, w.ctypes, z, k * k))
    return pairs if pairs >= 0 else _pair_count(xp, w, None)


def _direct_lib():
    """The compiled direct convolution (``hlsnn/native/int_conv.c``), or None."""
    lib = native.load("int_conv")
    if lib is not None and not getattr(lib, "_hlsnn_typed", False):
        f = lib.hlsnn_int_conv
        f.restype = None
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        f.argtypes = [ptr, i64, i64, i64, ptr, i64, i64, i64, i64, ptr, ctypes.c_int]
        lib._hlsnn_typed = True
    return lib


def direct_fits(xp, w):
    """True when every int32 partial sum of rule 1 is exact: ``max|xp| < 2**31`` and
    ``max|xp| * max_z sum|w[z]| < 2**31`` (the bound of ``int_conv.c``)."""
    if xp.size == 0 or w.size == 0:
        return True
    xmax = max(-int(xp.min()), int(xp.max()))
    wmax = max(-int(w.min()), int(w.max()))
    if xmax >= 1 << 31 or wmax >= 1 << 31:
        return False
    wsum = int(np.abs(w).reshape(w.shape[0], -1).sum(axis=1).max())
    return xmax * wsum < 1 << 31


#: Multiply-adds per thread of :func:`_direct` at least (smaller layers run in one thread).
DIRECT_MIN_MACS = 1 << 22


def _direct(xp, w, lib, limit=2):
    """Rule 1 by the compiled direct convolution (``int_conv.c``), int32 sums written as int64;
    the caller checks :func:`direct_fits`. The output pixels are split between threads
    (:mod:`hlsnn.native.parallel`). ``limit`` caps the vector unit (0 the portable loops, 1 at
    most AVX2, 2 the best; the tests run all three)."""
    z, c, k, _ = w.shape
    _, hp, wp = xp.shape
    oh, ow = hp - k + 1, wp - k + 1
    zs = -(-z // 16) * 16
    wz = np.zeros((zs, c, k, k), np.int32)
    wz[:z] = w
    wb = np.ascontiguousarray(wz.reshape(zs // 16, 16, c, k, k).transpose(0, 2, 3, 4, 1))
    xp = np.ascontiguousarray(xp, np.int64)
    acc = np.empty((z, oh, ow), np.int64)
    if acc.size == 0:
        return acc
    macs = max(1, c * k * k * zs)
    parallel.run(lambda q0, q1: lib.hlsnn_int_conv(xp.ctypes, c, hp, wp, wb.ctypes, z, k, q0, q1, acc.ctypes,
                                                   limit),
                 parallel.parts(oh * ow, max(8, DIRECT_MIN_MACS // macs)))
    return acc


# The cost model of method="auto", measured on the benchmark layer (benchmarks/bench_sparse.py,
# 64->64 channels, 56x56, 3x3; 2 shared cores): a dense MAC costs ~0.05-0.08 ns (BLAS, im2col
# included); a non-zero pair ~20 ns in numpy (a scatter via bincount) and 0.75-0.9 ns in the
# compiled twin, which also gathers every input once and clears and copies the output planes
# (~2 ns per padded input entry of this layer). The compiled pair path measured faster than
# the dense one below density 0.27-0.34 (pairs/MAC 0.075-0.11, 2 shared cores, another process
# busy); the model switches at pairs/MAC ~0.075 (density ~0.27), leaning towards dense. The
# compiled direct convolution measured 0.016-0.03 ns per MAC (output channels rounded up to
# 16) on the same machine, 2-4x faster than the dense path on ResNet-8's layers and on the
# benchmark layer; it is taken whenever it is compiled and its int32 sums are exact
# (:func:`direct_fits`), unless the compiled pair path is cheaper still (very sparse inputs).
DENSE_MAC_NS = 0.08
DIRECT_MAC_NS = 0.02
NUMPY_PAIR_NS = 20.0
NATIVE_PAIR_NS = 1.0
NATIVE_SCAN_NS = 2.0


def conv_accumulate(xp, w, *, method="auto"):
    """Rule 1: exact int64 accumulators ``(Z, Hp-k+1, Wp-k+1)`` of padded input ``xp`` and
    weights ``w``. ``method``:

    * ``"dense"``: im2col + GEMM;
    * ``"sparse"``: the non-zero pairs only, in numpy (:func:`_scatter`, the specification of
      the pair path);
    * ``"native"``: the same pairs summed by the compiled twin (``hlsnn/native/sparse_conv.c``);
      the numpy pair path when the compiled helpers are unavailable (``HLSNN_NATIVE=0``, no C
      compiler), with the same bits;
    * ``"direct"``: every multiply-add in int32 by the compiled direct convolution
      (``hlsnn/native/int_conv.c``) when its sums are exact (:func:`direct_fits`); else, or
      when the compiled helpers are unavailable, the dense path, with the same bits;
    * ``"auto"``: the cheapest by a cost model: pairs of non-zeros vs dense MACs (the direct
      convolution's when it applies, else the dense path's), the pair path compiled when
      available, else numpy.

    Every method gives the same integers (tested)."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, METHODS))}; got {method!r}")
    xp = np.asarray(xp, np.int64)
    w = np.asarray(w, np.int64)
    z, c, k, _ = w.shape
    fits = xp.ndim == 3 and xp.shape[1] >= k and xp.shape[2] >= k      # else the dense path's error
    direct = _direct_lib() if method in ("auto", "direct") and fits else None
    if direct is not None and not direct_fits(xp, w):
        direct = None
    if method == "auto":
        lib = _native_lib()
        pairs = float(_pair_count(xp, w, lib))
        out_px = (xp.shape[1] - k + 1) * (xp.shape[2] - k + 1)
        if direct is not None:
            dense_ns = DIRECT_MAC_NS * (-(-z // 16) * 16) * c * k * k * out_px
        else:
            dense_ns = DENSE_MAC_NS * z * c * k * k * out_px
        if lib is not None and pairs * NATIVE_PAIR_NS + xp.size * NATIVE_SCAN_NS < dense_ns:
            method = "native"
        elif pairs * NUMPY_PAIR_NS < dense_ns:
            method = "sparse"
        else:
            method = "direct" if direct is not None else "dense"
    if method == "native":
        acc = _native_pairs(xp, w)
        return acc if acc is not None else _scatter(xp, w)
    if method == "direct" and direct is not None:
        return _direct(xp, w, direct)
    return _scatter(xp, w) if method == "sparse" else _dense(xp, w)


def _bias_relu_pool(acc, bias, relu, pool, own_acc=False):
    """Rules 2-4: bias, ReLU, 2x2 max pooling (an odd last row or column is dropped). A
    scalar bias of 0 adds nothing: without ReLU and pooling, the result is then ``acc`` itself
    (as int64), not a copy. ``own_acc``: ``acc`` is the caller's own array, which bias and
    ReLU may overwrite (when it is int64 and the bias does not broadcast it larger)."""
    t = np.asarray(acc, np.int64)
    own = own_acc and t is acc           # t may be written in place
    if not (np.ndim(bias) == 0 and bias == 0):
        b = np.asarray(bias, np.int64).reshape(-1, 1, 1)
        if own and np.broadcast_shapes(t.shape, b.shape) == t.shape:
            t += b
        else:
            t, own = t + b, True
    if relu:
        t = np.maximum(t, 0, out=t if own else None)
    if pool:
        z, h, w = t.shape
        t = t[:, :h // 2 * 2, :w // 2 * 2].reshape(z, h // 2, 2, w // 2, 2).max(axis=(2, 4))
    return t


#: Outputs below this many take postprocess's numpy path (a compiled call costs microseconds).
POST_COMPILED_MIN = 4096
#: Values per thread of :func:`_post_compiled` at least.
POST_MIN_PER_THREAD = 1 << 18


def _post_compiled(t, shift, rounding):
    """Rule 5 of :func:`postprocess` (``(y, sat_count)``) by its compiled twin
    (``hlsnn/native/sparse_post.c``: integer ``shift_round_sat``, equal to the float64 path
    while ``|t| < 2**53``), channels split between threads; None when the twin is unavailable,
    ``t`` is not (Z, H, W) with one shift or one per channel, is small, the rounding is not
    one of :data:`~hlsnn.primitives.ROUNDING_CODES` or ``t`` holds a value the twin leaves to
    the float path."""
    if t.ndim != 3 or t.size < POST_COMPILED_MIN or rounding not in ROUNDING_CODES:
        return None
    z = t.shape[0]
    sh = np.asarray(shift, np.int64).reshape(-1)
    if sh.size not in (1, z):
        return None
    lib = native.load("sparse_post")
    if lib is None:
        return None
    f = lib.hlsnn_sparse_post
    if not getattr(lib, "_hlsnn_typed", False):
        f.restype = ctypes.c_int64
        i64, ptr = ctypes.c_int64, ctypes.c_void_p
        f.argtypes = [ptr, i64, ptr, ctypes.c_int, i64, i64, ptr]
        lib._hlsnn_typed = True
    t = np.ascontiguousarray(t, np.int64)
    sh = np.ascontiguousarray(np.broadcast_to(sh, (z,)))
    out = np.empty(t.shape, np.int64)
    hw = t[0].size
    mode = ROUNDING_CODES[rounding]
    sats = parallel.run(lambda z0, z1: f(t.ctypes, hw, sh.ctypes, mode, z0, z1, out.ctypes),
                        parallel.parts(z, max(1, POST_MIN_PER_THREAD // max(hw, 1))))
    if min(sats) < 0:
        return None
    return out, sum(sats) % (1 << 32)


def postprocess(acc, bias, shift, *, relu=False, pool=False, raw=False, rounding="nearest_even", stats=False,
                own_acc=False):
    """Rules 2-5 on accumulators ``(Z, H, W)``: returns ``(out, sat_count)``, and with
    ``stats`` also rule 6's histogram: ``(out, sat_count, hist)``. In raw mode with a scalar
    bias of 0, no ReLU and no pooling, ``out`` may be ``acc`` itself (as int64); with
    ``own_acc`` (``acc`` is the caller's, to be overwritten: an int64 array that
    :func:`conv_accumulate` returned), bias and ReLU work in place on it."""
    t = _bias_relu_pool(acc, bias, relu, pool, own_acc)
    if stats:
        out, sat = postprocess(t, 0, shift, raw=raw, rounding=rounding)
        return out, sat, msb_histogram(t, 32)
    if raw:
        return t, 0
    done = _post_compiled(t, shift, rounding)
    if done is not None:
        return done
    # rule 5 in float64 (exact: |t| < 2**31 is converted exactly and the scale is a power of
    # two); the integer transcription is postprocess_reference(), tested equal
    a = np.multiply(t, np.ldexp(1.0, -np.asarray(shift, np.int64)).reshape(-1, 1, 1), dtype=np.float64)
    round_into(a, rounding, a)
    sat = 0
    if a.size and (a.max() > 127 or a.min() < -128):     # rounding is exact: count and clamp only then
        sat = int(np.count_nonzero(a > 127)) + int(np.count_nonzero(a < -128))
        np.clip(a, -128, 127, out=a)
    return a.astype(np.int64), sat % (1 << 32)


def postprocess_reference(acc, bias, shift, *, relu=False, pool=False, raw=False, rounding="nearest_even"):
    """Rules 2-5 transcribed with the integer primitive ``shift_round_sat``; equal to
    :func:`postprocess` bit for bit (tested)."""
    t = _bias_relu_pool(acc, bias, relu, pool)
    if raw:
        return t, 0
    y, sat = shift_round_sat(t, np.asarray(shift, np.int64).reshape(-1, 1, 1), 8, rounding)
    return y, int(sat.sum()) % (1 << 32)


def emulate(p, xp, w, bias, shift, *, relu=False, pool=False, raw=False, method="auto", stats=False):
    """The whole layer on a padded input ``xp`` (C, Hp, Wp): ``(out, sat_count)``, out
    (Z, H', W') (pooled if ``pool``) as int8 values, or int32 in raw mode; with ``stats``
    ``(out, sat_count, hist)``, ``hist`` the (32,) int64 counters of rule 6."""
    acc = conv_accumulate(xp, w, method=method)
    return postprocess(acc, bias, shift, relu=relu, pool=pool, raw=raw, rounding=p["rounding"], stats=stats,
                       own_acc=True)
