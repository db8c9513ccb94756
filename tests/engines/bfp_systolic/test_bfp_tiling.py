"""Transparent tiling of bfp_systolic GEMMs (engines.tiling): batch rows split to the DMA
transfer limit give the very result of one call; N beyond max_n is split in the float gemm
into chunks with their own output exponents; every target agrees bit for bit on the tiled
path."""
import numpy as np
import pytest

import hlsnn
from hlsnn.engines.bfp_systolic import protocol
from hlsnn.errors import InputError
from hlsnn.formats import bfp

from conftest import test_config


def _operands(rng, batch, n, k, scale=1.0):
    x = rng.normal(0, scale, (batch, k))
    x[3] = 0.0                                       # an all-zero sample among the chunks
    return x, rng.normal(0, 0.5, (n, k)), rng.normal(0, 0.3, n)


def _bytes(p, batch, n, k, stats=False):
    beat = p["stream_bits"] // 8
    return (protocol.n_input_beats(p, batch, n, k, True) * beat,
            protocol.n_output_beats(p, batch, n, stats=stats) * beat)


class Counting:
    """Wraps a target, recording every call's transfer sizes."""

    def __init__(self, target):
        self.target, self.calls = target, []
        self.max_transfer_bytes = target.max_transfer_bytes

    def run(self, beats, regs_in, n_out_beats):
        out, regs = self.target.run(beats, regs_in, n_out_beats)
        self.calls.append((np.asarray(beats).nbytes, out.nbytes, int(regs_in[0])))
        return out, regs


@pytest.mark.parametrize("name", ["t4_truncate", "t16_row", "t2_tiny"])
def test_batch_tiled_to_the_transfer_limit_equals_one_call(name):
    rng = np.random.default_rng(7)
    whole = hlsnn.Accelerator(test_config(name))
    p = whole.config.params
    n, k, batch = min(p["max_n"], 7), min(p["max_k"], 16), 23
    x, w, b = _operands(rng, batch, n, k)
    limit = max(_bytes(p, 5, n, k, stats=True))      # 5 rows fit, 6 do not (or fewer)
    tiled = hlsnn.Accelerator(test_config(name), max_transfer_bytes=limit)
    tiled.kernel.target = spy = Counting(tiled.target)
    xq, wq, bq = whole.kernel.quantize_operands(x, w, b)
    ref = whole.gemm_bfp(xq, wq, bq, relu=True, stats=True)
    got = tiled.gemm_bfp(xq, wq, bq, relu=True, stats=True)
    assert len(spy.calls) > 1
    assert all(i <= limit and o <= limit for i, o, _ in spy.calls)
    assert sum(rows for *_, rows in spy.calls) == batch
    np.testing.assert_array_equal(got.mantissas, ref.mantissas)
    np.testing.assert_array_equal(got.exponents, ref.exponents)
    np.testing.assert_array_equal(tiled.kernel.last_stats, whole.kernel.last_stats)
    assert tiled.kernel.last_sat_count == whole.kernel.last_sat_count


def test_float_gemm_tiles_n_beyond_max_n_into_chunks_with_their_own_exponents():
    rng = np.random.default_rng(3)
    acc = hlsnn.Accelerator(test_config("t16_row"))          # max_n = 64, per-row weight exponents
    p = acc.config.params
    n, k, batch = 150, 40, 9
    x, w, b = _operands(rng, batch, n, k)
    y = acc.gemm(x, w, b, relu=False, stats=True)
    assert y.shape == (batch, n)
    # independent reference: float64 numpy; 16-bit mantissas keep the error tiny
    ref = x @ w.T + b
    assert np.abs(y - ref).max() <= 1e-3 * np.abs(ref).max()
    # the rule: the concatenation of gemm_bfp on chunks of max_n of the whole-quantized operands
    xq, wq, bq = acc.kernel.quantize_operands(x, w, b)
    hist = None
    for a, c in [(0, 64), (64, 128), (128, 150)]:
        wc = bfp.BFPTensor.from_parts(wq.mantissas[a:c], wq.exponents[a:c], p["mantissa_bits"],
                                      exponent_bits=p["exponent_bits"], axis=1)
        bc = bfp.BFPTensor.from_parts(bq.mantissas[a:c], bq.exponents, p["mantissa_bits"],
                                      exponent_bits=p["exponent_bits"], axis=None)
        part = acc.gemm_bfp(xq, wc, bc, stats=True)
        np.testing.assert_array_equal(y[:, a:c], part.dequantize())
        hist = acc.kernel.last_stats if hist is None else hist + acc.kernel.last_stats
    y2 = acc.gemm(x, w, b, stats=True)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(acc.kernel.last_stats, hist)


def test_gemm_bfp_over_max_n_is_a_clear_error():
    acc = hlsnn.Accelerator(test_config("t2_tiny"))          # max_n = 8
    xq, wq, _ = acc.kernel.quantize_operands(np.ones((2, 4)), np.ones((9, 4)))
    with pytest.raises(InputError, match=r"N = 9: must be in \[1, max_n = 8\].*float gemm tiles"):
        acc.gemm_bfp(xq, wq)


def test_a_row_that_cannot_fit_one_transfer_names_both_sizes():
    acc = hlsnn.Accelerator(test_config("t16_row"), max_transfer_bytes=256)
    x, w, b = _operands(np.random.default_rng(0), 4, 64, 200)
    with pytest.raises(InputError, match=r"even one row needs a \d+-byte input.*256-byte limit"):
        acc.gemm(x, w, b)


@pytest.mark.parametrize("value", [0, -5, 2.5, "1k", True])
def test_max_transfer_bytes_must_be_a_positive_integer(value):
    with pytest.raises(InputError, match="max_transfer_bytes"):
        hlsnn.Accelerator(test_config("t2_tiny"), max_transfer_bytes=value)


# slow: t4_truncate's library (SLOW_CSIM_CONFIGS) for one test; the host's tiling runs on csim and
# sim in the quick suite through the other engines (test_shift_mac_tiling.py::test_tiled_calls_agree_bit_for_bit_on_emu_csim_and_sim,
# test_sparse_cluster_tiling.py) and on emu here; truncation on csim through t9_wide's testbench
@pytest.mark.slow
@pytest.mark.parametrize("target", ["csim", "sim"])
def test_tiled_calls_agree_bit_for_bit_on_every_target(target):
    rng = np.random.default_rng(11)
    cfg = test_config("t4_truncate")                          # max_n = 40, stats output exponents
    x, w, b = _operands(rng, 17, 90, 24)
    p = hlsnn.load_config(cfg).params
    limit = max(_bytes(p, 4, 40, 24, stats=True))
    with hlsnn.Accelerator(cfg, max_transfer_bytes=limit) as emu, \
            hlsnn.Accelerator(cfg, target, max_transfer_bytes=limit) as other:
        assert other.target.max_transfer_bytes == limit
        ye = emu.gemm(x, w, b, relu=True, stats=True)
        yo = other.gemm(x, w, b, relu=True, stats=True)
        np.testing.assert_array_equal(yo, ye)
        np.testing.assert_array_equal(other.kernel.last_stats, emu.kernel.last_stats)
        assert other.kernel.last_sat_count == emu.kernel.last_sat_count


def test_sim_target_limit_is_the_dma_length_register():
    cfg = test_config("t2_tiny")
    with hlsnn.Accelerator(cfg, "sim") as acc:
        assert acc.target.max_transfer_bytes == (1 << acc.target.length_width) - 1
    with hlsnn.Accelerator(cfg, "sim", max_transfer_bytes=100) as acc:
        assert acc.target.max_transfer_bytes == 100


@pytest.mark.parametrize("zero_rows", [[1, 3], [0, 1, 2, 3, 4]])
def test_all_zero_samples_still_get_the_bias(zero_rows):
    # regression: the quantizer's floor exponent for an all-zero sample made the bias
    # alignment saturate, so such a sample's outputs came out as 0 instead of the bias
    rng = np.random.default_rng(5)
    x, w, b = _operands(rng, 5, 20, 12)
    x[zero_rows] = 0.0
    for name in ("t16_row", "t16_stats"):
        acc = hlsnn.Accelerator(test_config(name))
        y = acc.gemm(x, w, b)
        ref = x @ w.T + b                                  # independent float64 reference
        assert np.abs(y - ref).max() <= 2e-3 * np.abs(ref).max(), name


def test_weights_beyond_one_transfer_shrink_the_n_chunks_in_whole_tiles():
    rng = np.random.default_rng(9)
    cfg = test_config("t16_row")                              # rows = 4, max_n = 64
    x, w, b = _operands(rng, 6, 64, 100)
    p = hlsnn.load_config(cfg).params
    limit = _bytes(p, 1, 24, 100)[0] + 8                      # 24 outputs of weights fit, 28 do not
    acc = hlsnn.Accelerator(cfg, max_transfer_bytes=limit)
    acc.kernel.target = spy = Counting(acc.target)
    y = acc.gemm(x, w, b)
    assert all(i <= limit and o <= limit for i, o, _ in spy.calls)
    # the rule: chunks of 24 outputs (the largest multiple of rows = 4 that fits), each a gemm_bfp
    xq, wq, bq = acc.kernel.quantize_operands(x, w, b)
    unlimited = hlsnn.Accelerator(cfg)
    for a in range(0, 64, 24):
        c = min(a + 24, 64)
        wc = bfp.BFPTensor.from_parts(wq.mantissas[a:c], wq.exponents[a:c], p["mantissa_bits"],
                                      exponent_bits=p["exponent_bits"], axis=1)
        bc = bfp.BFPTensor.from_parts(bq.mantissas[a:c], bq.exponents, p["mantissa_bits"],
                                      exponent_bits=p["exponent_bits"], axis=None)
        np.testing.assert_array_equal(y[:, a:c], unlimited.gemm_bfp(xq, wc, bc).dequantize())
    ref = x @ w.T + b                                         # independent float64 reference
    assert np.abs(y - ref).max() <= 2e-3 * np.abs(ref).max()


def test_emulator_of_an_accelerator_tiles_like_its_target():
    acc = hlsnn.Accelerator(test_config("t16_row"), max_transfer_bytes=3000)
    ref = acc.emulator()
    assert ref.target_name == "emu" and ref.target.max_transfer_bytes == 3000 and ref.config is acc.config
    x, w, b = _operands(np.random.default_rng(2), 8, 64, 100)
    np.testing.assert_array_equal(acc.gemm(x, w, b), ref.gemm(x, w, b))
    assert not np.array_equal(acc.gemm(x, w, b), hlsnn.Accelerator(test_config("t16_row")).gemm(x, w, b))
