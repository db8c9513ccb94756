"""Clip (ReLU6) on BFP pairs (issue 52, rule bfp_clip of hlsnn.engines.bfp_systolic.network.gate): the
depthwise + SE variant v_dw_a of tests/data/torch/beyond in bfp8, refused at its first unfused
Clip before, runs as one network program with the layer path's bits.

References: the clip computed on the exact values with Python's Fraction (independent of the
module's float comparison), and the layer-by-layer compiled network on the emulator."""
import sys
from fractions import Fraction

import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from conftest import ROOT  # noqa: E402
from hlsnn.engines.bfp_systolic.network import gate as bfpgate  # noqa: E402

sys.path.insert(0, str(ROOT / "tests" / "deploy"))
from test_torch_beyond import _data, compile_beyond  # noqa: E402


@pytest.mark.parametrize("lo, hi, pair", [(0.0, 6.0, (3, 1)), (None, 6.0, (3, 1)), (0.0, 0.75, (3, -2)),
                                          (0.0, 1.0, (1, 0)), (0.0, 40.0, (5, 3))])
def test_clip_on_pairs_is_the_exact_clip(lo, hi, pair):
    assert bfpgate.clip_pair(lo, hi) == pair
    rng = np.random.default_rng(7)
    m = rng.integers(-200, 200, 4000)
    e = rng.integers(-12, 6, 4000)
    m[:6], e[:6] = [3, 6, 12, 0, -3, 1], [1, 0, -1, 5, 1, 0]           # hi itself in three spellings, zero
    ym, ye = bfpgate.clip_pairs(m, e, *pair, lo is not None)
    h = Fraction(pair[0]) * Fraction(2) ** pair[1]
    for a, b, c, d in zip(m, e, ym, ye):
        x = Fraction(int(a)) * Fraction(2) ** int(b)
        want = min(x if lo is None else max(x, Fraction(0)), h)
        assert Fraction(int(c)) * Fraction(2) ** int(d) == want
        assert lo is None or c != 0 or d == 0                          # a clipped zero is (0, 0)


def test_clip_without_a_rule_is_refused():
    assert bfpgate.clip_pair(-1.0, 6.0) is None                      # lo must be 0 or absent
    assert bfpgate.clip_pair(0.0, 0.0) is None and bfpgate.clip_pair(0.0, None) is None
    assert bfpgate.clip_pair(0.0, float((1 << 25) + 1)) is None      # beyond the kernel's element
    assert bfpgate.clip_pair(0.0, 2.0 ** 600) is None                # beyond a 10-bit exponent


@pytest.fixture(scope="module")
def dw(tmp_path_factory):
    return compile_beyond(tmp_path_factory, "netbfpclip", ["v_dw_a_ts17"], formats=("bfp8",))


def test_dw_a_bfp8_runs_as_one_network_program_with_the_layer_paths_bits(dw):
    """Before: refused at /12/Clip (no rule for a Clip on pairs). Now one program (two Clip ops on
    the Lut loop), equal to the layer path image by image and in a batch of 24 (whose SE's
    second Gemm has all-zero inputs for some images: rule bfp_conv's exponent is the layer's, so no
    image's bits depend on the batch)."""
    path = dw["v_dw_a_ts17", "bfp8"]
    x = _data("v_dw_a_ts17").x_test[:24]
    layers = hlsnn.load(path, "emu", network=False)
    net = hlsnn.load(path, "emu", network=True)
    clips = [op for op in net.network.ops if op.kind == "lut" and op.f["fn"] == "Clip"]
    assert [tuple(op.f["clip"]) for op in clips] == [(3, 1), (3, 1)]
    whole = layers(x)
    np.testing.assert_array_equal(net(x).view(np.uint64), whole.view(np.uint64))
    for i in range(len(x)):
        np.testing.assert_array_equal(net(x[i:i + 1]), whole[i:i + 1])
        np.testing.assert_array_equal(layers(x[i:i + 1]), whole[i:i + 1])


@pytest.mark.csim
@pytest.mark.slow      # a kernel build; the quick test above covers the rule on emu
def test_dw_a_bfp8_runs_in_one_start_of_the_network_kernel(dw):
    """The Lut loop's Clip mode in C-simulation: one start per image, the layer path's bits."""
    path = dw["v_dw_a_ts17", "bfp8"]
    x = _data("v_dw_a_ts17").x_test[:3]
    board = hlsnn.load(path, "csim", network=True)
    layers = hlsnn.load(path, "emu", network=False)
    for i in range(len(x)):
        np.testing.assert_array_equal(board(x[i:i + 1]), layers(x[i:i + 1]))
        assert board.last_kernel_starts == 1
