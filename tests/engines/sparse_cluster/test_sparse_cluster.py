"""sparse_cluster: outputs equal an independent dense cross-correlation (scipy) at densities
0/10/50/100 %, odd sizes, tile seams and several channels; the worked examples of SPECS.md
T3.4, T3.5 and T4.2-T4.6; csim == emulator; clear errors."""
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import correlate2d

import hlsnn
from hlsnn.engines.sparse_cluster import conv_accumulate
from hlsnn.primitives import shift_round_sat

from conftest import ROOT

CONFIGS = Path(__file__).parent / "configs"
SHIPPED = [ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml", ROOT / "configs" / "accel" / "sparse20_zcu104.yaml"]
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]


def ref_acc(x, w, padding):
    """Dense integer cross-correlation with scipy, channel by channel (independent of hlsnn)."""
    z, c, k, _ = w.shape
    pad = (k - 1) // 2 if padding == "same" else 0
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad)))
    return np.stack([sum(correlate2d(xp[ci], w[zi, ci], mode="valid") for ci in range(c)) for zi in range(z)])


def sparse(rng, shape, density):
    return np.where(rng.random(shape) < density, rng.integers(-128, 128, shape), 0).astype(np.int8)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("density", [0.0, 0.1, 0.5, 1.0])
@pytest.mark.parametrize("padding", ["same", "valid"])
def test_raw_accumulators_equal_dense_reference(target, density, padding):
    rng = np.random.default_rng(int(density * 100) + (padding == "same"))
    with hlsnn.Accelerator(CONFIGS / "sp_small.yaml", target) as acc:
        x = sparse(rng, (3, 13, 11), density)          # odd sizes; 5x4 tiles -> seams everywhere
        w = sparse(rng, (5, 3, 3, 3), density)         # 5 output channels in groups of 2
        y = acc.conv2d(x, w, padding=padding, requantize=False)
        np.testing.assert_array_equal(y, ref_acc(x.astype(np.int64), w.astype(np.int64), padding))
        assert len(acc.kernel.last_plan.rounds) > 1


@pytest.mark.parametrize("target", TARGETS)
def test_requantized_output_with_bias_relu_and_pool(target):
    rng = np.random.default_rng(4)
    with hlsnn.Accelerator(SHIPPED[0], target) as acc:
        x, w = sparse(rng, (4, 20, 18), 0.3), sparse(rng, (10, 4, 3, 3), 0.6)
        bias = rng.integers(-5000, 5000, 10)
        y = acc.conv2d(x, w, bias=bias, padding="same", relu=True, pool=True, shift=7)
        t = np.maximum(ref_acc(x.astype(np.int64), w.astype(np.int64), "same") + bias[:, None, None], 0)
        t = t.reshape(10, 10, 2, 9, 2).max(axis=(2, 4))
        expect, _ = shift_round_sat(t, 7, 8, "nearest_even")
        np.testing.assert_array_equal(y, expect)


def test_T3_4_local_full_correlation():
    """Fig. 18: sub-map [[3, 9], [6, -5]] and kernel [[-6, 6], [-9, 3]]: the full correlation
    (the sub-map padded by k-1 = 1) is [[9, 0, -81], [36, -33, -9], [36, -66, 30]]."""
    with hlsnn.Accelerator(CONFIGS / "sp_one.yaml", "emu") as acc:
        x = np.pad(np.array([[3, 9], [6, -5]]), 1)[None].astype(np.int8)
        w = np.array([[[[-6, 6], [-9, 3]]]], np.int8)
        y = acc.conv2d(x, w, padding="valid", requantize=False)
    assert y[0].tolist() == [[9, 0, -81], [36, -33, -9], [36, -66, 30]]


@pytest.mark.parametrize("target", TARGETS)
def test_T3_5_products_on_one_result_index_are_merged(target):
    """Fig. 19e: 9 * (-6) and -9 * 6 land on result index (5, 2); they sum to -108."""
    x = np.zeros((1, 8, 8), np.int8)
    x[0, 5, 2], x[0, 5, 3] = 9, -9
    w = np.array([[[[-6, 6], [-9, 3]]]], np.int8)
    with hlsnn.Accelerator(CONFIGS / "sp_small.yaml", target) as acc:
        y = acc.conv2d(x, w, padding="valid", requantize=False)
    assert y[0, 5, 2] == -108


@pytest.mark.parametrize("target", TARGETS)
def test_T4_2_zero_slice_and_single_coefficient(target):
    rng = np.random.default_rng(6)
    x = sparse(rng, (2, 9, 10), 0.7)
    with hlsnn.Accelerator(CONFIGS / "sp_small.yaml", target) as acc:
        w = np.zeros((3, 2, 3, 3), np.int8)
        assert (acc.conv2d(x, w, padding="valid", requantize=False) == 0).all()
        w[1, 1, 2, 0] = -7                                    # one coefficient at ky = 2, kx = 0
        y = acc.conv2d(x, w, padding="valid", requantize=False)
    assert (y[[0, 2]] == 0).all()
    np.testing.assert_array_equal(y[1], -7 * x[1, 2:2 + 7, 0:0 + 8].astype(np.int64))


def test_T4_3_multiplies_follow_the_nonzeros():
    """Zero inputs and zero coefficients are never multiplied: the non-zero pairs are the
    product count, and the result is unchanged whatever the densities."""
    rng = np.random.default_rng(7)
    for dx, dw in ((0.0, 1.0), (0.5, 0.9), (0.9, 0.1), (1.0, 1.0)):
        x = sparse(rng, (3, 10, 10), dx).astype(np.int64)
        w = sparse(rng, (4, 3, 3, 3), dw).astype(np.int64)
        a = conv_accumulate(np.pad(x, ((0, 0), (1, 1), (1, 1))), w, method="sparse")
        np.testing.assert_array_equal(a, ref_acc(x, w, "same"))


@pytest.mark.parametrize("target", TARGETS)
def test_T4_4_kernels_together_equal_kernels_apart(target):
    rng = np.random.default_rng(9)
    x, w = sparse(rng, (2, 11, 9), 0.5), sparse(rng, (4, 2, 3, 3), 0.5)
    with hlsnn.Accelerator(CONFIGS / "sp_small.yaml", target) as acc:
        together = acc.conv2d(x, w, requantize=False)
        apart = np.concatenate([acc.conv2d(x, w[z:z + 1], requantize=False) for z in range(4)])
    np.testing.assert_array_equal(together, apart)


@pytest.mark.parametrize("target", TARGETS)
def test_T4_6_tile_seams_large_map_many_rounds(target):
    rng = np.random.default_rng(10)
    x, w = sparse(rng, (2, 37, 29), 0.4), sparse(rng, (3, 2, 5, 5), 0.5)
    with hlsnn.Accelerator(CONFIGS / "sp_small.yaml", target) as acc:
        y = acc.conv2d(x, w, padding="same", requantize=False)
        assert len(acc.kernel.last_plan.rounds) >= 4
    np.testing.assert_array_equal(y, ref_acc(x.astype(np.int64), w.astype(np.int64), "same"))


def test_float_conv_is_close_to_float_reference():
    rng = np.random.default_rng(11)
    x = np.maximum(rng.normal(size=(3, 16, 16)), 0)
    w = rng.normal(size=(6, 3, 3, 3)) * (rng.random((6, 3, 3, 3)) < 0.5)
    with hlsnn.Accelerator(SHIPPED[0], "emu") as acc:
        y = acc.conv2d(x, w, padding="same")
        yr = acc.conv2d(x, w, padding="same", requantize=False)
    ref = ref_acc(x, w, "same")
    assert np.corrcoef(y.ravel(), ref.ravel())[0, 1] > 0.99
    assert np.abs(yr - ref).max() <= 0.03 * np.abs(ref).max()


def test_partition_balances_the_units():
    """An input whose non-zeros sit in one corner: the plan's jobs (the best partition's cells,
    the slowest cut into row bands, dealt by time) finish sooner and are better spread over the
    units than the equal split's, by the cycle model's unit times."""
    from hlsnn.measure.sparse_work import work_model
    x = np.zeros((1, 32, 32), np.int8)
    x[0, :8, :8] = 1
    w = np.ones((1, 1, 3, 3), np.int8)
    r = work_model(hlsnn.load_config(SHIPPED[0]), x, w)
    eq = r["equal_split"]
    assert r["makespan"] < eq["makespan"] and r["imbalance"] < eq["imbalance"]
    with hlsnn.Accelerator(SHIPPED[0], "emu") as acc:      # the kernel runs that plan
        y = acc.conv2d(x, w, requantize=False)
    ref = np.zeros((32, 32))
    xp = np.pad(x[0].astype(float), 1)
    for ky in range(3):
        for kx in range(3):
            ref += xp[ky:ky + 32, kx:kx + 32]
    assert np.array_equal(np.asarray(y)[0], ref)


@pytest.mark.csim
@pytest.mark.parametrize("path", SHIPPED + sorted(CONFIGS.glob("*.yaml")), ids=lambda p: p.stem)
def test_csim_equals_emulator(path):
    from hlsnn.compare import compare
    rep = compare(hlsnn.load_config(path), "csim", seed=31, n_random=5)
    assert rep["mismatches"] == 0, rep["first_mismatch"]
    assert rep["register_mismatches"] == []


@pytest.mark.parametrize("call, match", [
    (lambda a: a.conv2d(np.ones((2, 5, 5), np.int8), np.ones((1, 3, 3, 3), np.int8)), "matching C"),
    (lambda a: a.conv2d(np.ones((1, 5, 5), np.int8), np.ones((1, 1, 2, 2), np.int8), padding="same"), "odd"),
    (lambda a: a.conv2d(np.ones((1, 5, 5), np.int16) * 300, np.ones((1, 1, 3, 3), np.int8)), "int8"),
    (lambda a: a.conv2d(np.ones((1, 5, 5), np.int8), np.ones((1, 1, 7, 7), np.int8)), "max_ksize"),
    (lambda a: a.conv2d(np.ones((1, 2, 2), np.int8), np.ones((1, 1, 3, 3), np.int8), padding="valid"), "does not fit"),
    (lambda a: a.conv2d(np.ones((1, 5, 5), np.int8), np.ones((1, 1, 3, 3), np.int8), padding="full"), "padding"),
])
def test_bad_calls_are_clear_errors(call, match):
    with hlsnn.Accelerator(SHIPPED[0], "emu") as acc:
        with pytest.raises(hlsnn.InputError, match=match):
            call(acc)


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
def test_float_postprocess_equals_integer_transcription(rounding):
    from hlsnn.engines.sparse_cluster.emulator import postprocess, postprocess_reference
    rng = np.random.default_rng(12)
    acc = np.concatenate([rng.integers(-(1 << 30), 1 << 30, (3, 9, 8)),
                          rng.integers(-600, 600, (3, 9, 8)), (np.arange(216).reshape(3, 9, 8) - 108) * 2 + 1])
    bias = rng.integers(-1000, 1000, 9)
    for shift in (rng.integers(-3, 25, 9), np.full(9, 1), np.zeros(9, int)):
        for relu in (False, True):
            for pool in (False, True):
                got = postprocess(acc, bias, shift, relu=relu, pool=pool, rounding=rounding)
                ref = postprocess_reference(acc, bias, shift, relu=relu, pool=pool, rounding=rounding)
                np.testing.assert_array_equal(got[0], ref[0])
                assert got[1] == ref[1]


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
def test_postprocess_stats_raw_and_zero_bias_equal_a_plain_transcription(rounding):
    """postprocess with stats, raw and a scalar bias of 0 (no copy of the accumulators) against
    the rules written out with plain numpy and the integer primitives; the input is never changed."""
    from hlsnn.engines.sparse_cluster.emulator import postprocess
    from hlsnn.primitives import msb_histogram, shift_round_sat
    rng = np.random.default_rng(5)
    for z, h, w in ((4, 7, 9), (3, 8, 8), (1, 1, 3)):
        acc = rng.integers(-(1 << 20), 1 << 20, (z, h, w)) >> rng.integers(0, 20, (z, h, w))
        keep = acc.copy()
        for bias in (0, rng.integers(-500, 500, z), np.zeros(z, np.int64)):
            shift = rng.integers(-2, 22, z)
            for relu in (False, True):
                for pool in (False, True):
                    t = acc + np.asarray(bias).reshape(-1, 1, 1)
                    t = np.maximum(t, 0) if relu else t
                    if pool:
                        hh, ww = h // 2 * 2, w // 2 * 2
                        t = np.max([t[:, i:hh:2, j:ww:2] for i in (0, 1) for j in (0, 1)], axis=0)
                    y, sat = shift_round_sat(t, shift.reshape(-1, 1, 1), 8, rounding)
                    for raw in (False, True):
                        out, s, hist = postprocess(acc, bias, shift, relu=relu, pool=pool, raw=raw,
                                                   rounding=rounding, stats=True)
                        np.testing.assert_array_equal(out, t if raw else y)
                        assert s == (0 if raw else int(sat.sum()))
                        np.testing.assert_array_equal(hist, msb_histogram(t, 32))
                        out2, s2 = postprocess(acc, bias, shift, relu=relu, pool=pool, raw=raw, rounding=rounding)
                        np.testing.assert_array_equal(out2, out)
                        assert out2.dtype == np.int64 and s2 == s
                    np.testing.assert_array_equal(acc, keep)


def test_dense_accumulators_equal_the_pair_sums():
    """conv_accumulate's dense path (GEMM, then one transposing cast) against the numpy pair
    path, on int8 maps and weights of several shapes (float32 and float64 GEMMs)."""
    from hlsnn.engines.sparse_cluster.emulator import conv_accumulate
    rng = np.random.default_rng(9)
    for c, z, k, hp, wp in ((3, 5, 3, 9, 11), (70, 4, 5, 8, 7), (1, 1, 1, 1, 4), (2, 6, 3, 3, 3)):
        xp = rng.integers(-128, 128, (c, hp, wp)) * (rng.random((c, hp, wp)) < 0.6)
        w = rng.integers(-128, 128, (z, c, k, k))
        got = conv_accumulate(xp, w, method="dense")
        ref = conv_accumulate(xp, w, method="sparse")
        assert got.dtype == np.int64 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, ref)
