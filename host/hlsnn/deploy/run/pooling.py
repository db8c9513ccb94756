"""Max and average pooling of a float (N, C, H, W) or (N, C, L) tensor as the ONNX operators define
them (ceil mode, pads, dilations): the host op (:mod:`.hostops`) and the float reference
(:mod:`.reference`) both run it."""
from __future__ import annotations

import numpy as np
from ...errors import InputError


def _pool(x, a, op):
    """ONNX MaxPool / AveragePool (2-D): ``pads`` (top, left, bottom, right) and ``ceil_mode``.

    The output size is ``floor`` (or, with ``ceil_mode``, ``ceil``) of ``(H + top + bottom -
    kh) / sh`` plus one, less one where the last window would start beyond the input and its
    top/left padding (as PyTorch and onnx's reference do). Padding never wins a max (it is
    -inf). An average counts the padding's zeros when ``count_include_pad`` is 1 and not
    otherwise; cells a ``ceil_mode`` window reaches beyond the bottom/right padding never count.
    """
    if len(a["kernel_shape"]) == 1 and x.ndim == 3:      # a 1-D pool: the (k, 1) pool of an (N, C, L, 1) map
        p = list(a.get("pads", [0, 0]))
        a = dict(a, kernel_shape=[a["kernel_shape"][0], 1], strides=[list(a.get("strides", [1]))[0], 1],
                 pads=[p[0], 0, p[1], 0])
        return _pool(x[..., None], a, op)[..., 0]
    kh, kw = a["kernel_shape"]
    sh, sw = a.get("strides", [1, 1])
    t, l, b, r = a.get("pads", [0, 0, 0, 0])
    if x.ndim != 4:
        raise InputError(f"pooling needs an NCHW tensor, got shape {x.shape}")
    n, c, h, w = x.shape

    def size(length, k, s, lo, hi):
        span = length + lo + hi - k
        o = (-(-span // s) if a.get("ceil_mode", 0) else span // s) + 1
        if a.get("ceil_mode", 0) and (o - 1) * s >= length + lo:
            o -= 1                                  # the last window starts in the bottom padding
        return o

    oh, ow = size(h, kh, sh, t, b), size(w, kw, sw, l, r)
    if oh < 1 or ow < 1:
        raise InputError(f"a {kh}x{kw} pool does not fit a {h}x{w} map")
    # the region the windows read: the padded input, plus the ceil_mode overhang
    eh, ew = (oh - 1) * sh + kh, (ow - 1) * sw + kw
    over_h, over_w = max(0, eh - (h + t + b)), max(0, ew - (w + l + r))
    if op == "MaxPool":
        xp = np.pad(x, ((0, 0), (0, 0), (t, b + over_h), (l, r + over_w)), constant_values=-np.inf)
        v = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw][:, :, :oh, :ow]
        return v.max(axis=(-2, -1))
    pad_value = 0.0 if a.get("count_include_pad", 0) else np.nan
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=pad_value)
    xp = np.pad(xp, ((0, 0), (0, 0), (0, over_h), (0, over_w)), constant_values=np.nan)
    v = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(2, 3))[:, :, ::sh, ::sw][:, :, :oh, :ow]
    counted = (~np.isnan(v)).sum(axis=(-2, -1))
    return np.nansum(v, axis=(-2, -1)) / counted
