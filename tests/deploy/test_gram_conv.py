"""The exact int8 Gram of a convolution's im2col rows (hlsnn.deploy.quantize.shift_fit._grams through
native/gram.c): the stride-1 shifted autocorrelation (hlsnn_gram_conv_s1_i8) and the im2col rows
(hlsnn_gram_conv_i8) both equal the float64 ``r.T @ r`` and ``r.mean(axis=0)`` bit for bit, on
many geometries, with its VNNI and its portable loops."""
import numpy as np
import pytest

from hlsnn import native
from hlsnn.deploy.quantize import shift_fit
from hlsnn.deploy.importer.graph import Layer
from hlsnn.engines import convgeom
from compiled_fixtures import assert_grams_are_the_products

pytestmark = pytest.mark.skipif("native.load('gram') is None", reason="the compiled helpers are off")

# (channels, groups, (h, w), (kh, kw), strides, pads (top, left, bottom, right), dilations, batch)
GEOMETRIES = [
    (16, 1, (8, 8), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 5),
    (20, 1, (7, 9), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3),
    (9, 1, (5, 6), (3, 2), (1, 1), (1, 0, 2, 1), (1, 1), 4),
    (33, 1, (6, 11), (5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 2),
    (8, 1, (12, 5), (10, 4), (1, 1), (4, 1, 5, 2), (1, 1), 3),       # the DS-CNN stem's kernel
    (1, 1, (20, 10), (10, 4), (2, 2), (4, 1, 5, 2), (1, 1), 6),      # ... and its stride and channel
    (16, 1, (9, 9), (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 3),
    (12, 1, (9, 10), (3, 3), (1, 1), (0, 2, 1, 2), (2, 1), 2),
    (24, 2, (9, 9), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3),
    (32, 2, (6, 6), (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 2),
    (12, 12, (7, 7), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),      # depthwise
    (12, 1, (1, 1), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 7),
    (70, 1, (4, 3), (1, 7), (1, 1), (0, 3, 0, 3), (1, 1), 2),
    (70, 1, (3, 3), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 2),
    (17, 1, (5, 5), (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 3),
    (16, 1, (11, 11), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 3),
    (10, 1, (9, 8), (3, 3), (2, 1), (1, 1, 1, 1), (1, 1), 3),
    (3, 1, (10, 10), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 4),
    (8, 1, (6, 7), (5, 5), (1, 1), (0, 0, 0, 0), (1, 1), 3),        # valid: no pads
    (8, 1, (4, 4), (5, 5), (1, 1), (4, 4, 4, 4), (1, 1), 3),        # pads wider than the map
    (40, 1, (32, 32), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    (16, 1, (32, 32), (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 130),   # past one int32 chunk of images
]


def _layer(c, g, k, s, pads, d, rng):
    return Layer("l", "conv", ["x"], "y", w=rng.normal(size=(g, c // g) + k), b=np.zeros(g), pads=pads,
                 strides=s, dilations=d, group=g)


def _check(layer, x):
    rows = convgeom.im2col(np.asarray(x, np.float64), layer.geom)[0]
    assert_grams_are_the_products(shift_fit._grams(layer, x), rows, layer.group)


def _values(rng, shape, kind):
    if kind == "full":                               # the whole int8 range
        return rng.integers(-128, 128, shape)
    if kind == "relu":                               # about half zeros, the rest 0..127
        return rng.integers(0, 128, shape) * (rng.random(shape) < 0.5)
    if kind == "extreme":                            # -128 and 127 only: the largest int32 sums
        return np.where(rng.random(shape) < 0.5, -128, 127)
    x = rng.integers(-128, 128, shape)               # some all-zero images
    x[::2] = 0
    return x


@pytest.mark.parametrize("path", ["auto", "rows"])
@pytest.mark.parametrize("isa", [0, 1])
@pytest.mark.parametrize("case", range(len(GEOMETRIES)))
def test_the_conv_gram_is_the_float64_product(case, isa, path, monkeypatch):
    """Every geometry, by the path _grams chooses (the autocorrelation for stride 1) and by the
    im2col rows (the autocorrelation's scratch limit below any)."""
    monkeypatch.setattr(shift_fit, "GRAM_ISA", isa)
    if path == "rows":
        monkeypatch.setattr(shift_fit, "_GRAM_S1_MAX_SCRATCH", -1)
    c, g, (h, w), k, s, pads, d, b = GEOMETRIES[case]
    rng = np.random.default_rng(case)
    layer = _layer(c, g, k, s, pads, d, rng)
    kind = "extreme" if b > 100 else ["full", "relu", "extreme", "zeros"][case % 4]
    if b > 100 and isa == 0:
        b = 20                                       # the portable loops are slow; the chunks are VNNI's
    x = _values(rng, (b, c, h, w), kind)
    if case % 3 == 0:                                # the calibration's layout: an NHWC int32 map, viewed NCHW
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1), np.int32).transpose(0, 3, 1, 2)
    _check(layer, x)


@pytest.mark.parametrize("isa", [0, 1])
@pytest.mark.parametrize("seed", range(12))
def test_random_stride1_geometries(seed, isa, monkeypatch):
    """Random stride-1 geometries (the cells of hlsnn_gram_conv_s1_i8 differ with every
    kernel, pad and dilation)."""
    monkeypatch.setattr(shift_fit, "GRAM_ISA", isa)
    rng = np.random.default_rng(100 + seed)
    kh, kw = int(rng.integers(1, 6)), int(rng.integers(1, 6))
    dh, dw = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    pads = tuple(int(v) for v in rng.integers(0, 4, 4))
    h = int(rng.integers(max(1, dh * (kh - 1) + 1 - pads[0] - pads[2]), 14))
    w = int(rng.integers(max(1, dw * (kw - 1) + 1 - pads[1] - pads[3]), 14))
    g = int(rng.choice([1, 1, 2]))
    c = g * int(rng.integers(8, 40))
    layer = _layer(c, g, (kh, kw), (1, 1), pads, (dh, dw), rng)
    x = _values(rng, (int(rng.integers(1, 9)), c, h, w), ["full", "relu", "extreme"][seed % 3])
    _check(layer, x)


@pytest.mark.parametrize("isa", [0, 1])
def test_a_stride1_3x3_conv_takes_the_autocorrelation(isa, monkeypatch):
    """The shifted autocorrelation runs (no silent fall back to the im2col rows) for a stride-1
    3x3 convolution, and gives the rows' Gram."""
    monkeypatch.setattr(shift_fit, "GRAM_ISA", isa)
    calls = []
    direct = shift_fit._grams_conv_s1

    def spy(*a):
        out = direct(*a)
        calls.append(out is not None)
        return out
    monkeypatch.setattr(shift_fit, "_grams_conv_s1", spy)
    rng = np.random.default_rng(7)
    layer = _layer(16, 1, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), rng)
    _check(layer, _values(rng, (6, 16, 10, 10), "full"))
    assert calls == [True]
    calls.clear()
    _check(_layer(16, 1, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), rng), _values(rng, (6, 16, 10, 10), "full"))
    assert calls == [False]                            # stride 2: the rows
    calls.clear()
    _check(_layer(4, 2, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), rng), _values(rng, (6, 4, 10, 10), "full"))
    assert calls == [True]                             # grouped: the autocorrelation, per group
