"""shift_mac: transparent tiling (``Kernel`` docstring, *Tiling*; ``engines.tiling``).

Every tiled result is checked against two independent expectations: the same operation as
one call on a copy of the config with larger maxima (``dataclasses.replace``; the emulator
target of that copy reports the copy's own ID hash), and a plain numpy integer reference
written from the emulator's rules (direct sums of code values, rule 5 requantization, rule 6
histogram) that never calls the kernel, the protocol or the emulator. Transfer limits come
from ``max_transfer_bytes=`` on the target; every call a tiled operation makes is recorded
and checked against the limit."""
import dataclasses
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hlsnn
from hlsnn.engines import tiling
from hlsnn.primitives import msb_histogram, shift_round_sat

from conftest import accel_config

CONFIGS = Path(__file__).parent / "configs"
MODES = ["twohot", "pot", "pot_sum"]


def load(name):
    return hlsnn.load_config(CONFIGS / f"{name}.yaml")


def roomy(cfg, **extra):
    """``cfg`` with maxima large enough that nothing in these tests needs tiling."""
    return dataclasses.replace(cfg, params={**cfg.params, "max_n": 1 << 13, "max_hw": 1 << 12, "x_depth": 1 << 22,
                                            "w_depth": 1 << 20, "line_depth": 1 << 20, **extra})


def in_bytes(beats):
    return np.asarray(beats).nbytes


def record(acc):
    """Wrap ``acc.target.run``; returns a list of (input bytes, output bytes) per call. On emu
    the stream path is taken (``arrays = False``), so that every call's beats are seen."""
    calls, run, nb = [], acc.target.run, acc.config.params["stream_bits"] // 8
    acc.target.arrays = False

    def counted(beats, regs_in, n_out_beats):
        calls.append((in_bytes(beats), n_out_beats * nb))
        return run(beats, regs_in, n_out_beats)

    acc.target.run = counted
    return calls


# ---------------------------------------------------------------- independent reference

def codes_of(weights):
    """Integer code values (N, ...) of shift weights, or of a ``pot_sum`` pair (summed)."""
    if isinstance(weights, tuple):
        return weights[0].code_values() + weights[1].code_values()
    return weights.code_values()


def requantize(p, acc, bias, shift, relu):
    """Emulator rules 5 and 6 on exact accumulators ``acc`` (..., N): (y, sat_count, hist)."""
    A, B = p["acc_bits"], p["act_bits"]
    v = np.clip(acc + bias, -(1 << (A - 1)), (1 << (A - 1)) - 1)
    if relu:
        v = np.maximum(v, 0)
    if p["act_signed"]:
        y, sat = shift_round_sat(v, shift, B, p["rounding"])
    else:
        y1, sat = shift_round_sat(v, shift, B + 1, p["rounding"])
        y = np.clip(y1, 0, (1 << B) - 1)
        sat = sat | (y != y1)
    return y, int(np.count_nonzero(sat)), msb_histogram(v, A)


def ref_gemm(p, x, weights, bias, shift, relu):
    acc = np.asarray(x, np.int64) @ codes_of(weights).T
    return requantize(p, acc, np.asarray(bias, np.int64)[None, :], np.asarray(shift, np.int64), relu)


def ref_conv(p, x, weights, bias, shift, relu, pad):
    """Direct convolution: a sum over kernel offsets of code values times shifted map views."""
    cv = codes_of(weights)
    z, c, k, _ = cv.shape
    xp = np.pad(np.asarray(x, np.int64), ((0, 0), (pad, pad), (pad, pad)))
    oh, ow = xp.shape[1] - k + 1, xp.shape[2] - k + 1
    acc = np.zeros((z, oh, ow), np.int64)
    for ky in range(k):
        for kx in range(k):
            acc += np.einsum("zc,chw->zhw", cv[:, :, ky, kx], xp[:, ky:ky + oh, kx:kx + ow])
    sh = np.broadcast_to(np.asarray(shift, np.int64), (z,))[:, None, None]
    return requantize(p, acc, np.asarray(bias, np.int64)[:, None, None], sh, relu)


def activations(p, rng, shape):
    B = p["act_bits"]
    lo, hi = (-(1 << (B - 1)), 1 << (B - 1)) if p["act_signed"] else (0, 1 << B)
    return rng.integers(lo, hi, shape)


def weights_for(kernel, rng, shape, mode):
    """Shift weights of ``shape`` (N, ...) for ``mode`` (a pair for pot_sum), with zeros."""
    w = rng.normal(size=shape) * (rng.random(shape) < 0.8)
    delta = min(1, kernel.p["max_delta"]) if mode == "twohot" else 0
    return kernel._quantize_weights(w, mode, delta)


def spread_shift(p, x, weights):
    """An output shift that spreads the results over the output range (not an expected value)."""
    big = int(np.abs(np.asarray(x, np.int64)).max(initial=1)) * int(np.abs(codes_of(weights)).sum(axis=tuple(
        range(1, codes_of(weights).ndim))).max(initial=1))
    return max(0, big.bit_length() - p["act_bits"] + 1)


# ---------------------------------------------------------------- GEMM

@pytest.mark.parametrize("mode", MODES)
def test_gemm_int_split_over_n_and_batch_equals_untiled_and_reference(mode):
    """N = 101 > max_n = 40 and a 300-byte transfer limit: neuron chunks of whole weight tiles
    and batch rows per call; outputs, saturation count and histogram equal one call's."""
    cfg, rng = load("s_unsigned"), np.random.default_rng(1)
    with hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=300) as acc, hlsnn.Accelerator(roomy(cfg)) as one:
        p = acc.config.params
        x, wq = activations(p, rng, (23, 9)), weights_for(acc.kernel, rng, (101, 9), mode)
        bias = rng.integers(-3000, 3000, 101)
        shift = spread_shift(p, x, wq) - 1                      # some outputs saturate
        calls = record(acc)
        y = acc.gemm_int(x, wq, mode=mode, bias=bias, shift=shift, relu=False, stats=True)
        y1 = one.gemm_int(x, wq, mode=mode, bias=bias, shift=shift, relu=False, stats=True)
        ry, rsat, rhist = ref_gemm(p, x, wq, bias, shift, relu=False)
        np.testing.assert_array_equal(y, y1)
        np.testing.assert_array_equal(y, ry)
        assert acc.kernel.last_sat_count == one.kernel.last_sat_count == rsat > 0
        np.testing.assert_array_equal(acc.kernel.last_stats, one.kernel.last_stats)
        np.testing.assert_array_equal(acc.kernel.last_stats, rhist)
        assert len(calls) > 3 and max(max(c) for c in calls) <= 300


@pytest.mark.parametrize("mode", ["twohot", "pot"])
def test_max_n_below_one_weight_tile_repacks_each_chunk(mode):
    """max_n = 4 is smaller than a dual-PoT weight tile (6 neurons on 3 rows): chunks of 4
    neurons are re-packed from the weights; in two-hot mode (3-neuron tiles) chunks are
    whole tiles, row slices of the register matrix."""
    cfg, rng = roomy(load("s_unsigned"), max_n=4, max_hw=16), np.random.default_rng(2)
    with hlsnn.Accelerator(cfg, "emu") as acc:
        p = acc.config.params
        x, wq = activations(p, rng, (5, 7)), weights_for(acc.kernel, rng, (11, 7), mode)
        bias, shift = rng.integers(-300, 300, 11), rng.integers(0, 5, 11)
        calls = record(acc)
        y = acc.gemm_int(x, wq, mode=mode, bias=bias, shift=shift, relu=True)
        np.testing.assert_array_equal(y, ref_gemm(p, x, wq, bias, shift, relu=True)[0])
        assert len(calls) == (4 if mode == "twohot" else 3)    # chunks of one 3-neuron tile / of 4 re-packed


def test_one_call_when_nothing_needs_tiling():
    """The fast path: an operation within the maxima and the limit is exactly one call."""
    rng = np.random.default_rng(3)
    with hlsnn.Accelerator(accel_config("shift8_pynq-z2"), "emu", max_transfer_bytes=1 << 20) as acc:
        p = acc.config.params
        x, wq = activations(p, rng, (8, 30)), weights_for(acc.kernel, rng, (20, 30), "twohot")
        calls = record(acc)
        acc.gemm_int(x, wq, shift=6)
        acc.conv2d_int(activations(p, rng, (2, 9, 9)), weights_for(acc.kernel, rng, (4, 2, 3, 3), "pot"), shift=4)
        assert len(calls) == 2


# ---------------------------------------------------------------- convolution

@pytest.mark.parametrize("padding", ["same", "valid"])
@pytest.mark.parametrize("mode, limit", [("twohot", None), ("pot", 400), ("pot_sum", None)])
def test_conv2d_int_spatial_tiles_equal_untiled_and_reference(mode, limit, padding):
    """A (2, 21, 19) map above max_hw = 16, Z = 45 > max_n = 40 (and a transfer limit): host
    padding, halo tiles run "valid", stitched bit for bit."""
    cfg, rng = load("s_unsigned"), np.random.default_rng(4)
    with hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=limit) as acc, hlsnn.Accelerator(roomy(cfg)) as one:
        p = acc.config.params
        x, wq = activations(p, rng, (2, 21, 19)), weights_for(acc.kernel, rng, (45, 2, 3, 3), mode)
        bias = rng.integers(-2000, 2000, 45)
        shift = spread_shift(p, x, wq) - 1
        calls = record(acc)
        kw = dict(padding=padding, mode=mode, bias=bias, shift=shift, relu=True, stats=True)
        y, y1 = acc.conv2d_int(x, wq, **kw), one.conv2d_int(x, wq, **kw)
        ry, rsat, rhist = ref_conv(p, x, wq, bias, shift, True, 1 if padding == "same" else 0)
        assert y.shape == ry.shape == ((45, 21, 19) if padding == "same" else (45, 19, 17))
        np.testing.assert_array_equal(y, y1)
        np.testing.assert_array_equal(y, ry)
        assert acc.kernel.last_sat_count == one.kernel.last_sat_count == rsat
        np.testing.assert_array_equal(acc.kernel.last_stats, one.kernel.last_stats)
        np.testing.assert_array_equal(acc.kernel.last_stats, rhist)
        assert len(calls) >= 4 and (limit is None or max(max(c) for c in calls) <= limit)


def test_float_gemm_and_conv2d_tiled_equal_untiled():
    """The float operations go through the tiled integer ones: the same floats bit for bit
    (the output scale is calibrated once over all outputs, before any split)."""
    cfg, rng = load("s_unsigned"), np.random.default_rng(5)
    with hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=512) as acc, hlsnn.Accelerator(roomy(cfg)) as one:
        x, w, b = np.abs(rng.normal(size=(13, 20))), rng.normal(size=(70, 20)), rng.normal(size=70)
        np.testing.assert_array_equal(acc.gemm(x, w, bias=b, relu=True), one.gemm(x, w, bias=b, relu=True))
        xc, wc = np.abs(rng.normal(size=(3, 18, 20))), rng.normal(size=(6, 3, 3, 3))
        np.testing.assert_array_equal(acc.conv2d(xc, wc, mode="pot"), one.conv2d(xc, wc, mode="pot"))


# ---------------------------------------------------------------- counters

def test_stats_of_tiled_calls_merge_to_the_untiled_histogram():
    """Shipped config, batch split by a 4 KiB transfer limit: merged histogram == one call's."""
    rng = np.random.default_rng(6)
    path = accel_config("shift8_pynq-z2")
    with hlsnn.Accelerator(path, "emu", max_transfer_bytes=4096) as acc, hlsnn.Accelerator(path, "emu") as one:
        p = acc.config.params
        x, wq = activations(p, rng, (200, 48)), weights_for(acc.kernel, rng, (40, 48), "twohot")
        calls = record(acc)
        acc.gemm_int(x, wq, shift=7, relu=True, stats=True)
        one.gemm_int(x, wq, shift=7, relu=True, stats=True)
        assert len(calls) > 2
        assert acc.kernel.last_stats.sum() > 0
        np.testing.assert_array_equal(acc.kernel.last_stats, one.kernel.last_stats)


def test_saturation_counts_are_summed_saturating_at_u32():
    """Each call's 32-bit sat_count is added saturating at 2**32 - 1, like the register."""
    rng = np.random.default_rng(7)
    with hlsnn.Accelerator(load("s_unsigned"), "emu", max_transfer_bytes=150) as acc:
        p = acc.config.params
        run = acc.target.run
        acc.target.arrays = False              # the stream path: every call goes through run

        def near_full(beats, regs_in, n_out_beats):
            out, regs = run(beats, regs_in, n_out_beats)
            regs = regs.copy()
            regs[2] = tiling.U32_MAX - 10
            return out, regs

        acc.target.run = near_full
        acc.gemm_int(activations(p, rng, (9, 5)), weights_for(acc.kernel, rng, (4, 5), "twohot"))
        assert acc.kernel.last_sat_count == tiling.U32_MAX
        acc.target.run = run
        acc.gemm_int(activations(p, rng, (1, 5)), weights_for(acc.kernel, rng, (4, 5), "twohot"), shift=-20)
        assert acc.kernel.last_sat_count == 4                   # one call: its own count again
        assert acc.kernel.last_stats is None


# ---------------------------------------------------------------- random shapes

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mode=st.sampled_from(MODES), batch=st.integers(1, 9), n=st.integers(1, 23), k=st.integers(1, 9),
       c=st.integers(1, 2), h=st.integers(1, 13), w=st.integers(1, 13), ks=st.sampled_from([1, 3]),
       same=st.booleans(), limit=st.none() | st.integers(400, 3000), seed=st.integers(0, 2 ** 16))
def test_random_shapes_tiled_equal_reference(mode, batch, n, k, c, h, w, ks, same, limit, seed):
    """The narrowest config (max_n 9, max_hw 8, 64-bit beats) on random shapes
    and transfer limits: GEMM and convolution equal the reference."""
    rng = np.random.default_rng(seed)
    with hlsnn.Accelerator(load("s_tiny"), "emu", max_transfer_bytes=limit) as acc:
        p = acc.config.params
        x, wq = activations(p, rng, (batch, k)), weights_for(acc.kernel, rng, (n, k), mode)
        bias, shift = rng.integers(-20, 20, n), rng.integers(0, 3, n)
        calls = record(acc)
        y = acc.gemm_int(x, wq, mode=mode, bias=bias, shift=shift, stats=True)
        ry, rsat, rhist = ref_gemm(p, x, wq, bias, shift, relu=False)
        np.testing.assert_array_equal(y, ry)
        assert acc.kernel.last_sat_count == rsat
        np.testing.assert_array_equal(acc.kernel.last_stats, rhist)
        pad = (ks - 1) // 2 if same else 0
        if min(h, w) + 2 * pad >= ks:
            xc, wc = activations(p, rng, (c, h, w)), weights_for(acc.kernel, rng, (n, c, ks, ks), mode)
            yc = acc.conv2d_int(xc, wc, padding="same" if same else "valid", mode=mode, bias=bias, shift=shift)
            np.testing.assert_array_equal(yc, ref_conv(p, xc, wc, bias, shift, False, pad)[0])
        assert limit is None or max(max(cl) for cl in calls) <= limit


# ---------------------------------------------------------------- errors

def test_k_above_max_k_runs_as_raw_calls():
    """K above max_k is no longer an error (issue 16): raw calls over chunks of K, summed on the
    host, then the output rules (test_shift_mac_ktile.py has the full checks); here against this
    file's reference and together with N and transfer tiling."""
    with hlsnn.Accelerator(load("s_unsigned"), "emu", max_transfer_bytes=1200) as acc:   # max_k = 128
        p = acc.config.params
        rng = np.random.default_rng(8)
        x, wq = activations(p, rng, (2, 130)), weights_for(acc.kernel, rng, (45, 130), "twohot")
        bias, shift = rng.integers(-99, 99, 45), spread_shift(p, x, wq) - 1
        calls = record(acc)
        y = acc.gemm_int(x, wq, mode="twohot", bias=bias, shift=shift, stats=True)
        ry, rsat, rhist = ref_gemm(p, x, wq, bias, shift, relu=False)
        np.testing.assert_array_equal(y, ry)
        assert acc.kernel.last_sat_count == rsat
        np.testing.assert_array_equal(acc.kernel.last_stats, rhist)
        assert len(calls) > 2 and max(max(c) for c in calls) <= 1200
        xc, wc = activations(p, rng, (15, 6, 6)), weights_for(acc.kernel, rng, (2, 15, 3, 3), "pot")
        yc = acc.conv2d_int(xc, wc, mode="pot", bias=[3, -3], shift=4, relu=True)     # C*k*k = 135
        np.testing.assert_array_equal(yc, ref_conv(p, xc, wc, [3, -3], 4, True, 1)[0])
        assert acc.gemm(np.ones((2, 200)), np.ones((3, 200)), relu=True).shape == (2, 3)


def test_a_single_row_that_cannot_fit_the_transfer_limit_is_a_clear_error():
    """One row with one weight tile (K = 100: 100 register beats) needs more than 256 bytes."""
    rng = np.random.default_rng(9)
    with hlsnn.Accelerator(load("s_unsigned"), "emu", max_transfer_bytes=256) as acc:
        p = acc.config.params
        with pytest.raises(hlsnn.InputError, match=r"even one row needs a \d+-byte input .* 256-byte limit"):
            acc.gemm_int(activations(p, rng, (4, 100)), weights_for(acc.kernel, rng, (5, 100), "twohot"))
        with pytest.raises(hlsnn.InputError, match=r"conv2d_int .*even one row .* 256-byte limit"):
            acc.conv2d_int(activations(p, rng, (12, 9, 9)), weights_for(acc.kernel, rng, (5, 12, 3, 3), "twohot"))
    small = roomy(load("s_unsigned"), line_depth=3, max_hw=16)
    with hlsnn.Accelerator(small, "emu") as acc:
        p = acc.config.params
        # 4 rows (ksize + 1) of 1 channel of 3 pixels over 4 banks (max(cols 2, 4 byte lanes of
        # a 32-bit beat)): 4 x 1 = 4 words per bank
        with pytest.raises(hlsnn.InputError, match=r"1x3x3 input window of one output pixel does not fit one call: "
                                                   r"4 input rows .* take 4 words .* above line_depth = 3"):
            acc.conv2d_int(activations(p, rng, (1, 5, 5)), weights_for(acc.kernel, rng, (2, 1, 3, 3), "twohot"))


def test_run_registers_is_one_call_and_points_to_the_tiled_operations():
    rng = np.random.default_rng(10)
    with hlsnn.Accelerator(load("s_unsigned"), "emu", max_transfer_bytes=256) as acc:
        p = acc.config.params
        regs, _, mode, delta = acc.kernel.registers(weights_for(acc.kernel, rng, (41, 4), "twohot"))
        with pytest.raises(hlsnn.InputError, match="max_n = 40.*gemm_int / conv2d_int split"):
            acc.run_registers(activations(p, rng, (2, 4)), regs, n=41, mode=mode, delta=delta)
        regs, _, mode, delta = acc.kernel.registers(weights_for(acc.kernel, rng, (3, 4), "twohot"))
        with pytest.raises(hlsnn.InputError, match="at most 256 bytes per transfer.*gemm_int / conv2d_int split"):
            acc.run_registers(activations(p, rng, (60, 4)), regs, n=3, mode=mode, delta=delta)
        with pytest.raises(hlsnn.InputError, match="exceeds max_hw = 16 for one kernel call.*conv2d_int tiles"):
            acc.run_registers(regs=regs[:, :1], n=3, mode=mode, delta=delta, fmap=activations(p, rng, (1, 4, 17)),
                              ksize=1)


# ---------------------------------------------------------------- every target

@pytest.mark.csim
def test_tiled_calls_agree_bit_for_bit_on_emu_csim_and_sim():
    """One tiled GEMM (N and batch split) and one tiled convolution (Z split, halo tiles) give
    the same outputs, saturation count and histogram on emu, csim and the simulated board."""
    cfg, rng = load("s_unsigned"), np.random.default_rng(11)
    p = cfg.params
    x, xc = activations(p, rng, (9, 12)), activations(p, rng, (2, 18, 17))
    targets = ["emu", "csim"] + (["sim"] if importlib.util.find_spec("pynq") else [])
    results = {}
    for t in targets:
        with hlsnn.Accelerator(cfg, t, max_transfer_bytes=400) as acc:
            wq = weights_for(acc.kernel, np.random.default_rng(12), (50, 12), "pot")
            wc = weights_for(acc.kernel, np.random.default_rng(13), (42, 2, 3, 3), "twohot")
            calls = record(acc)
            y = acc.gemm_int(x, wq, mode="pot", bias=np.arange(50) * 7, shift=3, stats=True)
            g = (acc.kernel.last_sat_count, acc.kernel.last_stats)
            yc = acc.conv2d_int(xc, wc, padding="same", shift=spread_shift(p, xc, wc) - 1, relu=True, stats=True)
            results[t] = (y, g, yc, acc.kernel.last_sat_count, acc.kernel.last_stats, len(calls))
            assert max(max(c) for c in calls) <= 400
    e = results["emu"]
    np.testing.assert_array_equal(e[0], ref_gemm(p, x, wq, np.arange(50) * 7, 3, False)[0])
    for t in targets[1:]:
        r = results[t]
        np.testing.assert_array_equal(r[0], e[0], err_msg=t)
        np.testing.assert_array_equal(r[2], e[2], err_msg=t)
        assert r[1][0] == e[1][0] and r[3] == e[3] and r[5] == e[5], t
        np.testing.assert_array_equal(r[1][1], e[1][1], err_msg=t)
        np.testing.assert_array_equal(r[4], e[4], err_msg=t)
