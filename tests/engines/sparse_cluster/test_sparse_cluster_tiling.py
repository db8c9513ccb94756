"""sparse_cluster: transparent tiling (``Kernel`` docstring, *Tiling*; ``engines.tiling``).

Every tiled result is checked against two independent expectations: the same operation as one
call on a copy of the config with larger maxima (``dataclasses.replace``), and a plain integer
reference (scipy ``correlate2d`` per channel pair, bias, ReLU, 2x2 max pooling, the rounding
shift of ``primitives.shift_round_sat``, ``msb_histogram``) that never calls the kernel, the
protocol or the emulator. Transfer limits come from ``max_transfer_bytes=`` on the target; every
call a tiled operation makes is recorded and checked against the limit."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.signal import correlate2d

import hlsnn
from hlsnn.engines.sparse_cluster import protocol
from hlsnn.engines.sparse_cluster.kernel import _Traffic
from hlsnn.formats import sparse as sfmt
from hlsnn.primitives import msb_histogram, shift_round_sat

from conftest import accel_config

CONFIGS = Path(__file__).parent / "configs"


def load(name):
    return hlsnn.load_config(CONFIGS / f"{name}.yaml")


def roomy(cfg):
    """``cfg`` with maxima large enough that nothing in these tests needs tiling."""
    return dataclasses.replace(cfg, params={**cfg.params, "max_hw": 4096, "max_out_channels": 4096})


def narrow(cfg, **params):
    return dataclasses.replace(cfg, params={**cfg.params, **params})


def record(acc):
    """Wrap ``acc.target.run``; returns the list of (input bytes, output bytes) per call. On emu
    the stream path is taken (``arrays = False``), so that every call's beats are seen."""
    calls, run, nb = [], acc.target.run, acc.config.params["stream_bits"] // 8
    acc.target.arrays = False

    def counted(beats, regs_in, n_out_beats):
        calls.append((np.asarray(beats).nbytes, n_out_beats * nb))
        return run(beats, regs_in, n_out_beats)

    acc.target.run = counted
    return calls


def within(calls, limit):
    assert calls and max(max(c) for c in calls) <= limit, max(max(c) for c in calls)


def sparse(rng, shape, density):
    return np.where(rng.random(shape) < density, rng.integers(-128, 128, shape), 0).astype(np.int8)


# ---------------------------------------------------------------- independent reference

def wide(x, w, bias, padding, relu=False, pool=False):
    """int64 values after bias, ReLU and 2x2 pooling, from scipy's correlation."""
    z, c, k, _ = w.shape
    pad = (k - 1) // 2 if padding == "same" else 0
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad)))
    t = np.stack([sum(correlate2d(xp[ci], w[zi, ci].astype(np.int64), mode="valid") for ci in range(c))
                  for zi in range(z)]) + np.asarray(bias, np.int64).reshape(-1, 1, 1)
    if relu:
        t = np.maximum(t, 0)
    if pool:
        zz, h, ww = t.shape
        t = t[:, :h // 2 * 2, :ww // 2 * 2].reshape(zz, h // 2, 2, ww // 2, 2).max(axis=(2, 4))
    return t


def reference(cfg, x, w, bias, shift, padding, relu=False, pool=False, raw=False):
    """(outputs, saturated outputs, histogram) of the layer."""
    t = wide(x, w, bias, padding, relu, pool)
    if raw:
        return t, 0, msb_histogram(t, 32)
    y, sat = shift_round_sat(t, np.broadcast_to(np.asarray(shift), (w.shape[0],)).reshape(-1, 1, 1), 8,
                             cfg.params["rounding"])
    return y, int(np.sum(sat)), msb_histogram(t, 32)


def run_both(cfg, call, **target_options):
    """``call(acc)`` on ``cfg`` (tiled: recorded) and on its roomy copy (one call):
    ((y, sat, hist, calls, records), (y, sat, hist))."""
    with hlsnn.Accelerator(cfg, "emu", **target_options) as acc:
        rec = record(acc)
        y = call(acc)
        k = acc.kernel
        tiled = (y, k.last_sat_count, k.last_stats, k.last_calls, rec)
    with hlsnn.Accelerator(roomy(cfg), "emu") as one:
        y1 = call(one)
        assert one.kernel.last_calls == 1
        return tiled, (y1, one.kernel.last_sat_count, one.kernel.last_stats)


def assert_same(tiled, one, ref=None):
    y, sat, hist = tiled[:3]
    np.testing.assert_array_equal(y, one[0])
    assert sat == one[1]
    np.testing.assert_array_equal(hist, one[2])
    if ref is not None:
        np.testing.assert_array_equal(y, ref[0])
        assert sat == ref[1]
        np.testing.assert_array_equal(hist, ref[2])


# ---------------------------------------------------------------- output channels

@pytest.mark.parametrize("raw", [False, True])
def test_output_channels_beyond_max_out_channels_are_split(raw):
    cfg = load("sp_small")                              # max_out_channels 16, passes of max_z = 2
    rng = np.random.default_rng(1)
    x, w = sparse(rng, (3, 11, 9), 0.5), sparse(rng, (37, 3, 3, 3), 0.6)
    bias = rng.integers(-3000, 3000, 37)
    tiled, one = run_both(cfg, lambda a: a.kernel.conv2d_int(x, w, bias=bias, shift=6, relu=True, requantize=not raw,
                                                             stats=True))
    assert tiled[3] == 3                                # 16 + 16 + 5 channels
    assert_same(tiled, one, reference(cfg, x, w, bias, 6, "same", relu=True, raw=raw))
    assert tiled[1] > 0 or raw                          # saturation counts were summed


# ---------------------------------------------------------------- maps larger than max_hw

@pytest.mark.parametrize("padding, k, pool, relu", [("same", 3, False, False), ("valid", 5, False, True),
                                                    ("same", 5, True, True), ("valid", 3, True, False)])
def test_map_larger_than_max_hw_is_cut_into_tiles_with_halo(padding, k, pool, relu):
    cfg = narrow(load("sp_small"), max_hw=16)
    rng = np.random.default_rng(2 + k + pool)
    x, w = sparse(rng, (2, 37, 27), 0.4), sparse(rng, (3, 2, k, k), 0.6)
    bias = rng.integers(-2000, 2000, 3)
    tiled, one = run_both(cfg, lambda a: a.conv2d(x, w, bias=bias, padding=padding, relu=relu, pool=pool, shift=8,
                                                  stats=True))
    assert tiled[3] >= 6
    assert_same(tiled, one, reference(cfg, x, w, bias, 8, padding, relu, pool))


def test_a_tall_narrow_map_is_cut_into_bands():
    cfg = narrow(load("sp_small"), max_hw=20)
    rng = np.random.default_rng(3)
    x, w = sparse(rng, (1, 61, 7), 0.5), sparse(rng, (2, 1, 3, 3), 0.8)
    tiled, one = run_both(cfg, lambda a: a.conv2d(x, w, requantize=False))
    assert tiled[3] == 4                                # 61 rows in bands of 18 outputs, one band wide
    np.testing.assert_array_equal(tiled[0], wide(x, w, 0, "same"))


# ---------------------------------------------------------------- the DMA's transfer limit

@pytest.mark.parametrize("limit", [3000, 700, 320])
@pytest.mark.parametrize("pool, raw", [(False, True), (True, False)])
def test_transfer_limit_splits_channels_then_the_map(limit, pool, raw):
    cfg = load("sp_small")
    rng = np.random.default_rng(4)
    x, w = sparse(rng, (3, 23, 19), 0.5), sparse(rng, (5, 3, 3, 3), 0.6)
    bias = rng.integers(-2000, 2000, 5)
    tiled, one = run_both(cfg, lambda a: a.conv2d(x, w, bias=bias, pool=pool, relu=True, requantize=not raw, shift=7,
                                                  stats=True), max_transfer_bytes=limit)
    within(tiled[4], limit)
    assert tiled[3] == len(tiled[4]) > 1
    assert_same(tiled, one, reference(cfg, x, w, bias, 7, "same", True, pool, raw))


def test_an_operation_that_fits_is_one_call_also_with_a_limit():
    cfg = load("sp_small")
    rng = np.random.default_rng(5)
    x, w = sparse(rng, (2, 9, 8), 0.5), sparse(rng, (3, 2, 3, 3), 0.5)
    with hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=1 << 20) as acc:
        rec = record(acc)
        y = acc.conv2d(x, w, requantize=False)
    assert len(rec) == 1 and acc.kernel.last_calls == 1 and acc.kernel.last_plan.xp.shape == (2, 11, 10)
    np.testing.assert_array_equal(y, wide(x, w, 0, "same"))


@pytest.mark.parametrize("flags, stats", [(0, False), (protocol.FLAG_RAW, True), (protocol.FLAG_POOL, True)])
def test_predicted_transfer_bytes_equal_the_packed_stream(flags, stats):
    """The byte counts that choose the calls are those of the stream the call sends."""
    cfg = load("sp_small")
    p, rng = cfg.params, np.random.default_rng(6)
    kern = hlsnn.Accelerator(cfg, "emu").kernel
    for density in (0.0, 0.3, 1.0):
        x, w = sparse(rng, (3, 17, 14), density), sparse(rng, (7, 3, 3, 3), 0.5)
        plan = kern.plan(x.astype(np.int64), 3, "same", bool(flags & protocol.FLAG_POOL))
        traffic = _Traffic(p, w, flags, stats)
        for za, zb in ((0, 7), (0, 2), (1, 6), (3, 4)):
            beats = protocol.pack_input(p, fmap_padded=plan.xp, coefs=sfmt.compress_kernel(w[za:zb]),
                                        rounds=plan.rounds, bias=np.zeros(zb - za, np.int64),
                                        shift=np.zeros(zb - za, np.int64), ksize=3)
            n_out = protocol.n_output_beats(p, plan.rounds, zb - za, flags, stats=stats)
            assert traffic.bytes(za, zb, *kern._plan_traffic(plan, 1)) == (beats.nbytes, n_out * p["stream_bits"] // 8)


# ---------------------------------------------------------------- batches

def test_batch_larger_than_one_grid_is_split():
    cfg = load("sp_small")
    rng = np.random.default_rng(7)
    x, w = sparse(rng, (45, 2, 12, 10), 0.5), sparse(rng, (3, 2, 3, 3), 0.6)
    bias = rng.integers(-500, 500, 3)
    with hlsnn.Accelerator(cfg) as acc:
        assert acc.kernel.batch_capacity(12, 10, 3) == 20
    tiled, one = run_both(cfg, lambda a: a.kernel.conv2d_batch_int(x, w, bias=bias, shift=5, relu=True, stats=True))
    assert tiled[3] == 3
    assert_same(tiled, one)
    refs = [reference(cfg, xi, w, bias, 5, "same", relu=True) for xi in x]
    np.testing.assert_array_equal(tiled[0], np.stack([r[0] for r in refs]))
    np.testing.assert_array_equal(tiled[2], sum(r[2] for r in refs))


@pytest.mark.parametrize("limit", [4000, 1500])
def test_batch_is_split_to_the_transfer_limit(limit):
    cfg = load("sp_small")
    rng = np.random.default_rng(8)
    x, w = sparse(rng, (9, 2, 9, 8), 0.5), sparse(rng, (21, 2, 3, 3), 0.5)     # Z > max_out_channels too
    tiled, one = run_both(cfg, lambda a: a.kernel.conv2d_batch_int(x, w, shift=6, stats=True),
                          max_transfer_bytes=limit)
    within(tiled[4], limit)
    assert_same(tiled, one)
    np.testing.assert_array_equal(tiled[0], np.stack([reference(cfg, xi, w, 0, 6, "same")[0] for xi in x]))


def test_batch_image_larger_than_max_hw_is_tiled_like_a_map():
    cfg = narrow(load("sp_small"), max_hw=16)
    rng = np.random.default_rng(9)
    x, w = sparse(rng, (2, 2, 20, 17), 0.5), sparse(rng, (3, 2, 3, 3), 0.6)
    with hlsnn.Accelerator(cfg) as acc:
        assert acc.kernel.batch_capacity(20, 17, 3) == 0
    tiled, one = run_both(cfg, lambda a: a.kernel.conv2d_batch_int(x, w, shift=6, stats=True))
    assert tiled[3] > 2
    assert_same(tiled, one)
    np.testing.assert_array_equal(tiled[0], np.stack([reference(cfg, xi, w, 0, 6, "same")[0] for xi in x]))


# ---------------------------------------------------------------- float path

def test_float_conv_calibrates_once_over_the_whole_tensor():
    cfg = narrow(load("sp_small"), max_hw=12)
    rng = np.random.default_rng(10)
    x = np.maximum(rng.normal(size=(2, 30, 26)), 0) * np.linspace(0.1, 3, 26)     # the largest values in one tile
    w = rng.normal(size=(19, 2, 3, 3)) * (rng.random((19, 2, 3, 3)) < 0.6)
    tiled, one = run_both(cfg, lambda a: (a.conv2d(x, w, padding="same", relu=True), a.kernel.last_shift),
                          max_transfer_bytes=2000)
    assert tiled[3] > 4
    np.testing.assert_array_equal(tiled[0][0], one[0][0])
    np.testing.assert_array_equal(tiled[0][1], one[0][1])


# ---------------------------------------------------------------- errors

def test_too_many_input_channels_is_a_clear_error():
    with hlsnn.Accelerator(load("sp_small")) as acc:
        with pytest.raises(hlsnn.InputError, match=r"C = 9 input channels exceed max_in_channels = 8: .* not split"):
            acc.conv2d(np.ones((9, 6, 6), np.int8), np.ones((2, 9, 3, 3), np.int8))
        with pytest.raises(hlsnn.InputError, match="max_in_channels"):
            acc.kernel.conv2d_batch_int(np.ones((2, 9, 6, 6), np.int8), np.ones((2, 9, 3, 3), np.int8))


def test_a_tile_that_cannot_fit_one_transfer_is_a_clear_error():
    x, w = np.ones((4, 9, 9), np.int8), np.ones((3, 4, 5, 5), np.int8)
    with hlsnn.Accelerator(load("sp_small"), "emu", max_transfer_bytes=300) as acc:
        with pytest.raises(hlsnn.InputError, match=r"even one 1x1 output tile of one output channel needs a \d+-byte "
                                                   r"input .* 300-byte limit"):
            acc.conv2d(x, w)
        with pytest.raises(hlsnn.InputError, match="even one 2x2 output tile"):
            acc.conv2d(x, w, pool=True)
        with pytest.raises(hlsnn.InputError, match="even one 1x1 output tile"):
            acc.kernel.conv2d_batch_int(x[None], w)


# ---------------------------------------------------------------- a property

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 16), h=st.integers(3, 30), wd=st.integers(3, 30), k=st.sampled_from([1, 3, 5]),
       padding=st.sampled_from(["same", "valid"]), pool=st.booleans(), z=st.integers(1, 20),
       max_hw=st.integers(6, 20), limit=st.sampled_from([None, 400, 900, 5000]))
def test_any_tiling_equals_the_reference(seed, h, wd, k, padding, pool, z, max_hw, limit):
    pad = (k - 1) // 2 if padding == "same" else 0
    if min(h, wd) + 2 * pad - k + 1 < (2 if pool else 1) or max_hw < k + (1 if pool else 0):
        return
    rng = np.random.default_rng(seed)
    cfg = narrow(load("sp_small"), max_hw=max_hw)
    x, w = sparse(rng, (2, h, wd), rng.random()), sparse(rng, (z, 2, k, k), rng.random())
    with hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=limit) as acc:
        rec = record(acc)
        try:
            y = acc.conv2d(x, w, padding=padding, pool=pool, requantize=False, stats=True)
        except hlsnn.InputError as e:       # only a limit too small for one output may refuse
            assert limit is not None and "even one" in str(e)
            return
        if limit is not None:
            within(rec, limit)
        t = wide(x, w, 0, padding, pool=pool)
        np.testing.assert_array_equal(y, t)
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_histogram(t, 32))


# ---------------------------------------------------------------- csim and sim

@pytest.mark.csim
def test_csim_tiled_equals_emu_bit_for_bit():
    cfg = load("sp_small")
    rng = np.random.default_rng(11)
    x, w = sparse(rng, (3, 19, 15), 0.5), sparse(rng, (5, 3, 3, 3), 0.6)
    bias = rng.integers(-3000, 3000, 5)
    got = []
    for target in ("csim", "emu"):
        with hlsnn.Accelerator(cfg, target, max_transfer_bytes=700) as acc:
            rec = record(acc)
            y = acc.conv2d(x, w, bias=bias, relu=True, pool=True, shift=4, stats=True)
            within(rec, 700)
            got.append((y, acc.kernel.last_sat_count, acc.kernel.last_stats, len(rec)))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_array_equal(got[0][2], got[1][2])
    assert got[0][1] == got[1][1] and got[0][3] == got[1][3] > 1
    np.testing.assert_array_equal(got[0][0], reference(cfg, x, w, bias, 4, "same", True, True)[0])


@pytest.mark.csim
def test_sim_tiled_equals_emu_bit_for_bit():
    pytest.importorskip("pynq")
    cfg = hlsnn.load_config(accel_config("sparse8_pynq-z2"))
    rng = np.random.default_rng(12)
    x, w = sparse(rng, (3, 21, 19), 0.4), sparse(rng, (11, 3, 3, 3), 0.5)
    got = []
    for target in ("sim", "emu"):
        with hlsnn.Accelerator(cfg, target, max_transfer_bytes=1500) as acc:
            rec = record(acc)
            y = acc.conv2d(x, w, requantize=False, stats=True)
            within(rec, 1500)
            got.append((y, acc.kernel.last_stats, len(rec)))
    np.testing.assert_array_equal(got[0][0], got[1][0])
    np.testing.assert_array_equal(got[0][1], got[1][1])
    assert got[0][2] == got[1][2] > 1
    np.testing.assert_array_equal(got[0][0], wide(x, w, 0, "same"))
