"""Kernels beyond ``max_ksize`` on sparse_cluster (issue 32): the layer runs as blocks of taps,
each a raw convolution, whose exact sums add on the host before the kernel's output rules.
The properties that hold it: a kernel that fits one call gives the same bits, statistics and
saturation count when forced through the blocks; and a 10x4 stride-2 stem (the DS-CNN's) on
sparse8_pynq-z2 (max_ksize 5) equals the integer convolution written out here in numpy."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from conftest import ROOT  # noqa: E402
from hlsnn.deploy.config import Assignment, FormatSpec  # noqa: E402
from hlsnn.deploy.importer.graph import Layer, Network  # noqa: E402
from hlsnn.engines.convgeom import kernel_blocks  # noqa: E402
from hlsnn.deploy.run.runner import Deployment  # noqa: E402
from hlsnn.engines.convgeom import ConvGeom  # noqa: E402
from hlsnn.runtime import Accelerator  # noqa: E402

SPARSE8 = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"     # max_ksize 5


def _net(kh, kw, stride, pads, cin=3, cout=4, seed=0, relu=True):
    rng = np.random.default_rng(seed)
    layer = Layer("l", "conv", ["x"], "y", w=rng.normal(0, 0.2, (cout, cin, kh, kw)), b=rng.normal(0, 0.1, cout),
                  relu=relu, pads=pads, strides=(stride, stride))
    return Network(name="n", path="", input="x", input_shape=(None, cin, 12, 10), output="y", layers=[layer])


def _x(cin=3, seed=1, n=3):
    rng = np.random.default_rng(seed)
    return rng.uniform(0, 1, (n, cin, 12, 10)) * (rng.random((n, cin, 12, 10)) < 0.7)


def _run(net, x, blocks=None):
    acc = Accelerator(SPARSE8, "emu")
    try:
        dep = Deployment(net, Assignment("a", "f", {}), {"f": FormatSpec("f", "fixed", "a")}, {"a": acc})
        ex = dep.execs["l"]
        if blocks is not None:
            ex.blocks = kernel_blocks(net.layers[0].geom, blocks)
        dep.calibrate(x)
        return dep.run(x), ex
    finally:
        acc.close()


def test_kernel_blocks_cover_every_tap_once():
    for kh, kw, d, k in ((10, 4, 1, 5), (7, 7, 1, 3), (5, 3, 2, 5), (1, 9, 1, 4)):
        cover = np.zeros((kh, kw), int)
        for i0, th, j0, tw in kernel_blocks(ConvGeom(kh, kw, dh=d, dw=d), k):
            assert d * (th - 1) + 1 <= k and d * (tw - 1) + 1 <= k
            cover[i0:i0 + th, j0:j0 + tw] += 1
        assert (cover == 1).all()


@pytest.mark.parametrize("relu", [True, False])
def test_blocks_equal_one_call(relu):
    net = _net(3, 2, 1, (1, 0, 1, 2), relu=relu)           # fits max_ksize: one call, or forced into 2x2 blocks
    x = _x()
    y1, e1 = _run(net, x)
    y2, e2 = _run(net, x, blocks=2)
    np.testing.assert_array_equal(y1, y2)
    assert (e1.stats.f_out, e1.stats.sat_count, e1.stats.histogram) == \
        (e2.stats.f_out, e2.stats.sat_count, e2.stats.histogram)


def test_ten_by_four_stride_two_stem_equals_numpy():
    net = _net(10, 4, 2, (4, 1, 5, 2))
    x = _x()
    y, ex = _run(net, x)
    assert ex.blocks is not None and len(ex.blocks) == 2
    # the integer convolution, in numpy: int8 inputs at the exec's radix, int8 weights, int bias
    layer = net.layers[0]
    xi = np.rint(np.ldexp(x, ex.f_x)).clip(-128, 127)
    wi = np.rint(np.ldexp(layer.w, ex.f_w)).clip(-128, 127)
    f_in = ex.f_x + ex.f_w
    xp = np.pad(xi, ((0, 0), (0, 0), (4, 5), (1, 2)))
    oh, ow = (12 + 9 - 10) // 2 + 1, (10 + 3 - 4) // 2 + 1
    acc = np.zeros((3, 4, oh, ow))
    for i in range(10):
        for j in range(4):
            acc += np.einsum("bchw,zc->bzhw", xp[:, :, i:i + 2 * oh:2, j:j + 2 * ow:2], wi[:, :, i, j])
    acc += np.rint(np.ldexp(layer.b, f_in)).reshape(1, -1, 1, 1)
    acc = np.maximum(acc, 0)
    q = acc * 2.0 ** -(f_in - ex.f_out)
    fl = np.floor(q)
    q = np.where(q - fl == 0.5, fl + (fl % 2), np.rint(q))          # round half to even (the config's)
    assert ex.p["rounding"] == "nearest_even"
    np.testing.assert_array_equal(y, np.ldexp(np.clip(q, -128, 127), -ex.f_out))
