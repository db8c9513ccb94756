"""shift_mac K tiling (issue 16): the raw output mode (``FLAG_RAW``, emulator rule 7) and a
reduction length K above ``max_k`` run as raw calls over chunks of K, summed on the host in
int64, then the output rules (``emulator.output_rule``) on the total (``shift_mac.tiles``).

The expectations: the raw mode of the C-simulation equals the emulator's; a K that fits one
call gives the same bits, saturation count and histogram through the chunked path (a
property); a K above ``max_k`` equals ``emulate`` on the whole K and an independent numpy
reference (integer code values, an exact integer matmul, and the documented output rule with
the rounding written out here by hand, never calling the kernel, the protocol, the
emulator or the primitives)."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hlsnn
from hlsnn.engines.shift_mac import protocol
from hlsnn.engines.shift_mac.emulator import emulate, im2col
from hlsnn.engines.shift_mac.kernel import _flatten
from hlsnn.engines.shift_mac.tiles import transfer_bytes

from conftest import ROOT

CONFIGS = Path(__file__).parent / "configs"
SHIFT_PYNQ = ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml"      # signed, nearest_even, max_k 1024
SHIFT_ZCU = ROOT / "configs" / "accel" / "shift8_zcu104.yaml"        # unsigned, nearest_away, max_k 2048
MODES = ["twohot", "pot", "pot_sum"]
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]


def cfg_path(name):
    return CONFIGS / f"{name}.yaml"


# ---------------------------------------------------------------- independent reference

def codes_of(weights):
    """Integer code values (N, ...) of shift weights, or of a ``pot_sum`` pair (both, apart)."""
    if isinstance(weights, tuple):
        return weights[0].code_values(), weights[1].code_values()
    return weights.code_values(), None


def round_shift(v, s, rounding):
    """``v / 2**s`` rounded (``s >= 0``), by integer arithmetic."""
    v = np.asarray(v, object)            # Python integers: no width to overflow
    s = np.broadcast_to(np.asarray(s), v.shape)
    out = np.empty(v.shape, object)
    for i, (a, sh) in enumerate(zip(v.reshape(-1), s.reshape(-1))):
        sh = int(sh)
        q, r = a >> sh, a - ((a >> sh) << sh)          # floor and remainder in [0, 2**sh)
        if sh and rounding != "truncate":
            half = 1 << (sh - 1)
            tie = "even" if rounding == "nearest_even" else "away"
            up = r > half or (r == half and ((q & 1) if tie == "even" else a > 0))
            q += int(bool(up))
        out.reshape(-1)[i] = q
    return out


def reference(p, x, weights, bias, shift, *, mode, relu):
    """The documented rule on exact integers: ``acc = x @ codes.T`` (summed PoT: the two
    accumulators saturated to ``acc_bits`` after their sum, rule 4), ``v = sat_A(acc + bias)``,
    ReLU, ``y = round(v / 2**shift)`` saturated to the activation range.
    Returns ``(y, sat_count, v)``."""
    A, B = p["acc_bits"], p["act_bits"]
    lo_a, hi_a = -(1 << (A - 1)), (1 << (A - 1)) - 1
    c1, c2 = codes_of(weights)
    xo = np.asarray(x, np.int64).astype(object)
    acc = xo @ c1.astype(object).T
    if c2 is not None:
        acc = np.clip(acc + xo @ c2.astype(object).T, lo_a, hi_a)
    v = np.clip(acc + np.asarray(bias, np.int64).astype(object)[None, :], lo_a, hi_a)
    if relu:
        v = np.maximum(v, 0)
    r = round_shift(v, np.broadcast_to(np.asarray(shift), v.shape[1:])[None, :].repeat(v.shape[0], 0), p["rounding"])
    lo, hi = (-(1 << (B - 1)), (1 << (B - 1)) - 1) if p["act_signed"] else (0, (1 << B) - 1)
    y = np.clip(r, lo, hi)
    return y.astype(np.int64), int(np.count_nonzero(y != r)), v


def msb_hist(v, bins):
    """The statistics unit's counters, by hand: the MSB position of |v| (of ~v when negative)."""
    h = np.zeros(bins, np.int64)
    for a in np.asarray(v, object).reshape(-1):
        u = int(a) if a >= 0 else ~int(a)
        if u:
            h[u.bit_length() - 1] += 1
    return h


def activations(p, rng, shape, extreme=False):
    B = p["act_bits"]
    lo, hi = (-(1 << (B - 1)), (1 << (B - 1)) - 1) if p["act_signed"] else (0, (1 << B) - 1)
    if extreme:
        return np.full(shape, lo if p["act_signed"] else hi)
    return rng.integers(lo, hi + 1, shape)


def weights_for(kernel, rng, shape, mode):
    w = rng.normal(size=shape) * (rng.random(shape) < 0.8)
    delta = kernel.p["max_delta"] if mode == "twohot" else 0
    return kernel._quantize_weights(w, mode, delta)


def spread(p, rng, x, weights):
    """Output shifts that spread the results over the output range (not expected values)."""
    c1, c2 = codes_of(weights)
    c = c1 if c2 is None else c1 + c2
    big = int(np.abs(np.asarray(x, np.int64) @ c.T).max(initial=1))
    return np.maximum(0, big.bit_length() - p["act_bits"] + rng.integers(-2, 2, c.shape[0]))


def regs_of(kernel, weights, mode):
    ref = weights[0] if isinstance(weights, tuple) else weights
    if len(ref.shape) == 4:
        weights = tuple(_flatten(t) for t in weights) if isinstance(weights, tuple) else _flatten(weights)
    regs, _, md, delta = kernel.registers(weights, mode)
    return regs, md, delta


# ---------------------------------------------------------------- the raw mode

@pytest.mark.csim
@pytest.mark.parametrize("name", ["s_tiny", "s_unit", "s_unsigned", "s_wide"])
def test_raw_mode_csim_equals_emulator(name):
    """One raw call (``run_registers(raw=True)``) on csim and on the emulator: the wide values
    (32- or 64-bit lanes), a zero saturation count and the same histogram; the beats are
    ``raw_bits / 16`` times the requantized call's."""
    rng = np.random.default_rng(5)
    with hlsnn.Accelerator(cfg_path(name), "csim") as c, hlsnn.Accelerator(cfg_path(name), "emu") as e:
        p = c.config.params
        for mode in MODES:
            n, k, b = min(p["max_n"], 2 * p["rows"] + 1), min(p["max_k"], 23), p["cols"] + 2
            x, wq = activations(p, rng, (b, k)), weights_for(c.kernel, rng, (n, k), mode)
            regs, md, delta = regs_of(c.kernel, wq, mode)
            bias = rng.integers(-50, 50, n)
            kw = dict(n=n, mode=md, delta=delta, bias=bias, relu=mode == "pot", stats=True, raw=True)
            yc = c.kernel.run_registers(x, regs, **kw)
            ye = e.kernel.run_registers(x, regs, **kw)
            np.testing.assert_array_equal(yc, ye)
            assert c.kernel.last_sat_count == 0
            np.testing.assert_array_equal(c.kernel.last_stats, e.kernel.last_stats)
            ey, esat, eh = emulate(p, x, regs, bias, np.zeros(n, int), n=n, mode=md, delta=delta, relu=mode == "pot", stats=True,
                                   raw=True)
            np.testing.assert_array_equal(yc, ey)
    assert protocol.n_output_beats(p, b, n, raw=True) == protocol.raw_factor(p) * protocol.n_output_beats(p, b, n)


def test_raw_value_is_the_wide_value_of_rule_5():
    """Raw mode returns ``v`` (bias, saturation to acc_bits, ReLU), the value the statistics unit
    counts: requantizing it with the output rule gives the normal mode's outputs."""
    from hlsnn.engines.shift_mac.emulator import output_rule
    rng = np.random.default_rng(3)
    cfg = hlsnn.load_config(cfg_path("s_unsigned"))
    p = cfg.params
    with hlsnn.Accelerator(cfg, "emu") as acc:
        for mode in MODES:
            x, wq = activations(p, rng, (7, 50)), weights_for(acc.kernel, rng, (9, 50), mode)
            regs, md, delta = regs_of(acc.kernel, wq, mode)
            bias, shift = rng.integers(-(1 << 20), 1 << 20, 9), rng.integers(0, 9, 9)
            v = acc.kernel.run_registers(x, regs, n=9, mode=md, delta=delta, bias=bias, relu=True, raw=True)
            y = acc.kernel.run_registers(x, regs, n=9, mode=md, delta=delta, bias=bias, shift=shift, relu=True)
            sat = acc.kernel.last_sat_count
            ry, rsat = output_rule(p, v, np.zeros(9, np.int64), shift)
            np.testing.assert_array_equal(ry, y)
            assert rsat == sat
            ref_y, ref_sat, ref_v = reference(p, x, wq, bias, shift, mode=md, relu=True)
            np.testing.assert_array_equal(v, ref_v.astype(np.int64))
            np.testing.assert_array_equal(y, ref_y)


RAW_TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim),
               pytest.param("sim", marks=[pytest.mark.csim, pytest.mark.skipif(
                   importlib.util.find_spec("pynq") is None, reason="the simulated board needs pynq")])]


@pytest.mark.parametrize("target", RAW_TARGETS)
@pytest.mark.parametrize("name", ["s_unsigned", "s_wide"])
def test_raw_gemm_int_is_the_output_rule_without_the_shift(target, name):
    """``gemm_int(..., raw=True)`` (the deploy runner's E4): the wide values ``v`` of rule 5
    (bias, saturation to acc_bits, ReLU; no shift) as ``output_rule(..., raw=True)`` and
    ``emulate_reference`` give them and the independent reference computes them, through one
    call, through N and batch tiling (a small transfer limit) and through K tiling
    (``k_step``); a zero saturation count, and the histogram the requantizing call's statistics
    unit gives (the wide values' MSBs at the input radix). s_unsigned has 32-bit raw lanes
    (acc_bits 28) and a convolution stage, s_wide 64-bit ones (acc_bits 62)."""
    from hlsnn.engines.shift_mac.emulator import emulate_reference, output_rule
    rng = np.random.default_rng(31)
    cfg = hlsnn.load_config(cfg_path(name))
    p = cfg.params
    k, n, b = min(p["max_k"], 40), p["rows"] * 2 + 3, p["cols"] * 3 + 1
    # a transfer limit that takes two samples of one weight tile's outputs: N and the batch split
    limit = max(max(transfer_bytes(p, batch=2, n=protocol.tile_neurons(p, m), k=k, mode=m, stats=True, raw=True))
                for m in MODES)
    with hlsnn.Accelerator(cfg, target) as acc, hlsnn.Accelerator(cfg, target, max_transfer_bytes=limit) as small:
        run, calls = small.kernel.run_registers, []
        small.kernel.run_registers = lambda *a, **kw: calls.append(kw.get("raw")) or run(*a, **kw)
        for mode in MODES:
            x, wq = activations(p, rng, (b, k)), weights_for(acc.kernel, rng, (n, k), mode)
            bias = rng.integers(-(1 << 12), 1 << 12, n)
            relu = mode != "pot_sum"
            ry, _, rv = reference(p, x, wq, bias, np.zeros(n, np.int64), mode=mode, relu=relu)
            regs, md, delta = regs_of(acc.kernel, wq, mode)
            c1, c2 = codes_of(wq)
            exact = x.astype(np.int64) @ c1.T + (0 if c2 is None else x.astype(np.int64) @ c2.T)
            rule, _ = output_rule(p, exact if mode != "pot_sum" else np.clip(
                exact, -(1 << (p["acc_bits"] - 1)), (1 << (p["acc_bits"] - 1)) - 1), bias, 0, relu=relu, raw=True)
            np.testing.assert_array_equal(rule, rv.astype(np.int64))
            er = emulate_reference(p, x, regs, bias, np.zeros(n, np.int64), n=n, mode=md, delta=delta, relu=relu,
                                   raw=True)[0]
            np.testing.assert_array_equal(er, rule)
            acc.gemm_int(x, wq, mode=mode, bias=bias, shift=3, relu=relu, stats=True)
            want_hist = acc.kernel.last_stats                 # the requantizing call's statistics
            np.testing.assert_array_equal(want_hist, msb_hist(rv, p["acc_bits"]))
            for kern, k_step in ((acc, None), (small, None), (acc, 13)):
                v = kern.gemm_int(x, wq, mode=mode, bias=bias, shift=3, relu=relu, stats=True, k_step=k_step,
                                  raw=True)
                assert v.dtype == np.int64
                np.testing.assert_array_equal(v, rule, err_msg=f"{mode} k_step={k_step}")
                assert kern.kernel.last_sat_count == 0
                np.testing.assert_array_equal(kern.kernel.last_stats, want_hist)
            assert len(calls) > 2 and all(calls)                # the tiled raw GEMM: raw calls
            calls.clear()
        if p["conv"]:
            xc, wc = activations(p, rng, (3, 6, 7)), weights_for(acc.kernel, rng, (5, 3, 3, 3), "twohot")
            bc = rng.integers(-99, 99, 5)
            rows, (oh, ow) = im2col(xc, 3, 1)
            _, _, rv = reference(p, rows, _flatten(wc), bc, np.zeros(5, np.int64), mode="twohot", relu=True)
            for kern, k_step in ((acc, None), (small, None), (acc, 9)):
                vc = kern.conv2d_int(xc, wc, mode="twohot", bias=bc, shift=2, relu=True, stats=True, k_step=k_step,
                                     raw=True)
                np.testing.assert_array_equal(vc, rv.astype(np.int64).T.reshape(5, oh, ow))
                np.testing.assert_array_equal(kern.kernel.last_stats, msb_hist(rv, p["acc_bits"]))
            assert len(calls) > 1 and all(calls)


# ---------------------------------------------------------------- chunked == one call (property)

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2 ** 32 - 1), name=st.sampled_from(["s_tiny", "s_unit", "s_unsigned", "s_wide"]),
       mode=st.sampled_from(MODES), relu=st.booleans(), stats=st.booleans(), data=st.data())
def test_chunked_path_equals_one_call(seed, name, mode, relu, stats, data):
    """A GEMM whose K fits one call, forced through raw calls over chunks of ``k_step`` columns,
    gives the same outputs, saturation count and histogram as the one call."""
    rng = np.random.default_rng(seed)
    with hlsnn.Accelerator(cfg_path(name), "emu") as acc:
        p = acc.config.params
        k = data.draw(st.integers(1, p["max_k"]))
        step = data.draw(st.integers(1, k))
        b, n = data.draw(st.integers(1, 3 * p["cols"] + 1)), data.draw(st.integers(1, 2 * p["rows"] + 3))
        x, wq = activations(p, rng, (b, k)), weights_for(acc.kernel, rng, (n, k), mode)
        bias = rng.integers(-(1 << min(20, p["acc_bits"] - 3)), 1 << min(20, p["acc_bits"] - 3), n)
        shift = rng.integers(-2, p["act_bits"] + 6, n)
        kw = dict(mode=mode, bias=bias, shift=shift, relu=relu, stats=stats)
        y1 = acc.gemm_int(x, wq, **kw)
        sat1, h1 = acc.kernel.last_sat_count, acc.kernel.last_stats
        y2 = acc.gemm_int(x, wq, k_step=step, **kw)
        np.testing.assert_array_equal(y1, y2)
        assert acc.kernel.last_sat_count == sat1
        if stats:
            np.testing.assert_array_equal(acc.kernel.last_stats, h1)
        else:
            assert acc.kernel.last_stats is None


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode", MODES)
def test_chunked_gemm_and_conv_equal_one_call(target, mode):
    """The same on each target, GEMM and convolution (channel chunks), with statistics."""
    rng = np.random.default_rng(11)
    with hlsnn.Accelerator(cfg_path("s_unsigned"), target) as acc:
        p = acc.config.params
        x, wq = activations(p, rng, (5, 100)), weights_for(acc.kernel, rng, (7, 100), mode)
        bias, shift = rng.integers(-500, 500, 7), rng.integers(0, 8, 7)
        kw = dict(mode=mode, bias=bias, shift=shift, relu=True, stats=True)
        y1, s1, h1 = acc.gemm_int(x, wq, **kw), acc.kernel.last_sat_count, acc.kernel.last_stats
        y2 = acc.gemm_int(x, wq, k_step=33, **kw)                       # 33 + 33 + 33 + 1
        np.testing.assert_array_equal(y1, y2)
        assert acc.kernel.last_sat_count == s1
        np.testing.assert_array_equal(acc.kernel.last_stats, h1)
        xc, wc = activations(p, rng, (6, 5, 7)), weights_for(acc.kernel, rng, (4, 6, 3, 3), mode)
        bc, sc = rng.integers(-50, 50, 4), rng.integers(0, 6, 4)
        kc = dict(mode=mode, bias=bc, shift=sc, relu=False, stats=True, padding="same")
        c1, cs1, ch1 = acc.conv2d_int(xc, wc, **kc), acc.kernel.last_sat_count, acc.kernel.last_stats
        c2 = acc.conv2d_int(xc, wc, k_step=18, **kc)                   # 2 channels per raw call
        np.testing.assert_array_equal(c1, c2)
        assert acc.kernel.last_sat_count == cs1
        np.testing.assert_array_equal(acc.kernel.last_stats, ch1)


# ---------------------------------------------------------------- K above max_k

@pytest.mark.parametrize("path, mode", [(SHIFT_PYNQ, "twohot"), (SHIFT_PYNQ, "pot_sum"), (SHIFT_ZCU, "pot")])
def test_k_above_max_k_on_shipped_configs_equals_reference(path, mode):
    """K = 2.5 x max_k on a shipped config: three raw calls; the outputs, saturation count and
    histogram equal the independent reference and ``emulate`` on the whole K."""
    rng = np.random.default_rng(21)
    with hlsnn.Accelerator(path, "emu") as acc:
        p = acc.config.params
        k, n, b = p["max_k"] * 5 // 2, p["rows"] + 3, p["cols"] + 1
        x, wq = activations(p, rng, (b, k)), weights_for(acc.kernel, rng, (n, k), mode)
        bias = rng.integers(-(1 << 16), 1 << 16, n)
        shift = spread(p, rng, x, wq)
        calls = []
        run = acc.kernel.run_registers
        acc.kernel.run_registers = lambda *a, **kw: calls.append(kw.get("raw")) or run(*a, **kw)
        y = acc.gemm_int(x, wq, mode=mode, bias=bias, shift=shift, relu=mode == "pot", stats=True)
        assert calls == [True, True, True]
        ry, rsat, rv = reference(p, x, wq, bias, shift, mode=mode, relu=mode == "pot")
        np.testing.assert_array_equal(y, ry)
        assert acc.kernel.last_sat_count == rsat
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_hist(rv, p["acc_bits"]))
        regs, md, delta = regs_of(acc.kernel, wq, mode)
        ey, esat, eh = emulate(p, x, regs, bias, shift, n=n, mode=md, delta=delta, relu=mode == "pot", stats=True)
        np.testing.assert_array_equal(y, ey)
        assert esat == rsat


@pytest.mark.csim
def test_k_above_max_k_on_csim_equals_reference():
    """The shipped PYNQ-Z2 config on csim: K = 1100 > max_k = 1024 (issue 16's dense layer size)."""
    rng = np.random.default_rng(22)
    with hlsnn.Accelerator(SHIFT_PYNQ, "csim") as acc:
        p = acc.config.params
        x, wq = activations(p, rng, (9, 1100)), weights_for(acc.kernel, rng, (20, 1100), "twohot")
        bias, shift = rng.integers(-3000, 3000, 20), spread(p, rng, x, wq)
        y = acc.gemm_int(x, wq, mode="twohot", bias=bias, shift=shift, stats=True)
        ry, rsat, rv = reference(p, x, wq, bias, shift, mode="twohot", relu=False)
        np.testing.assert_array_equal(y, ry)
        assert acc.kernel.last_sat_count == rsat
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_hist(rv, p["acc_bits"]))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode", MODES)
def test_sums_beyond_the_accumulator_saturate_as_one_call_would(target, mode):
    """s_unsigned (acc_bits 28, max_k 128): K = 20000 of the largest activations times equal
    positive weights exceeds the accumulator range; the total saturates at acc_bits (summed
    PoT: its adder first, so a negative bias then pulls it below the top), as the emulator and
    the reference say. Also a convolution beyond max_k (C*k*k = 180)."""
    rng = np.random.default_rng(23)
    with hlsnn.Accelerator(cfg_path("s_unsigned"), target) as acc:
        p = acc.config.params
        k, n = 20000, 4
        x = activations(p, rng, (3, k), extreme=True)
        wq = acc.kernel._quantize_weights(np.ones((n, k)), mode, p["max_delta"] if mode == "twohot" else 0)
        c1, c2 = codes_of(wq)
        assert int((x[:1].astype(object) @ (c1 if c2 is None else c1 + c2).astype(object).T).min()) \
            > 1 << (p["acc_bits"] - 1)                                  # beyond the accumulator
        bias, shift = np.array([-(1 << 20), 0, 1 << 20, 5]), np.array([20, 21, 22, 23])
        y = acc.gemm_int(x, wq, mode=mode, bias=bias, shift=shift, stats=True)
        ry, rsat, rv = reference(p, x, wq, bias, shift, mode=mode, relu=False)
        np.testing.assert_array_equal(y, ry)
        assert acc.kernel.last_sat_count == rsat
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_hist(rv, p["acc_bits"]))
        regs, md, delta = regs_of(acc.kernel, wq, mode)
        np.testing.assert_array_equal(y, emulate(p, x, regs, bias, shift, n=n, mode=md, delta=delta)[0])
        # a convolution of 20 channels of 3x3 (K = 180 > 128): channel chunks
        xc, wc = activations(p, rng, (20, 5, 6)), weights_for(acc.kernel, rng, (3, 20, 3, 3), mode)
        bc, sc = rng.integers(-99, 99, 3), rng.integers(4, 9, 3)
        yc = acc.conv2d_int(xc, wc, mode=mode, bias=bc, shift=sc, relu=True, stats=True)
        rows, (oh, ow) = im2col(xc, 3, 1)
        flat = tuple(_flatten(t) for t in wc) if isinstance(wc, tuple) else _flatten(wc)
        ry, rsat, rv = reference(p, rows, flat, bc, sc, mode=mode, relu=True)
        np.testing.assert_array_equal(yc, ry.T.reshape(3, oh, ow))
        assert acc.kernel.last_sat_count == rsat
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_hist(rv, p["acc_bits"]))


def test_float_gemm_beyond_max_k_is_close_to_float():
    """The float operation goes through the same path (it was an error before issue 16)."""
    rng = np.random.default_rng(24)
    with hlsnn.Accelerator(cfg_path("s_unsigned"), "emu") as acc:
        x, w = rng.uniform(0, 1, (4, 300)), rng.normal(size=(5, 300))
        y = acc.gemm(x, w, mode="twohot", relu=True)          # unsigned outputs
        ref = np.maximum(x @ w.T, 0)
        assert np.abs(y - ref).max() <= 0.1 * np.abs(ref).max()


def test_bounds_and_bad_steps_are_clear_errors():
    """The host's int64 sum bounds K (s_wide: 16-bit activations, shifts to 31, delta 7: 54-bit
    products, so K up to 512); a k_step outside [1, max_k] (conv: whole channels) is an error."""
    from hlsnn.engines.shift_mac.spec import product_bits
    from hlsnn.engines.shift_mac.tiles import check_k_sum
    cfg = hlsnn.load_config(cfg_path("s_wide"))
    assert product_bits(cfg.params) == 15 + 31 + 7 + 1
    check_k_sum(cfg, 512, "gemm_int", "K")
    rng = np.random.default_rng(25)
    with hlsnn.Accelerator(cfg, "emu") as acc:
        p = acc.config.params
        with pytest.raises(hlsnn.InputError, match=r"int64 sum of 513 products .* K up to 512"):
            acc.gemm_int(activations(p, rng, (2, 513)), weights_for(acc.kernel, rng, (3, 513), "pot"))
        wq = weights_for(acc.kernel, rng, (3, 100), "pot")
        assert acc.gemm_int(activations(p, rng, (2, 100)), wq).shape == (2, 3)
        with pytest.raises(hlsnn.InputError, match=r"k_step = 65: must be in \[1, max_k = 64\]"):
            acc.gemm_int(activations(p, rng, (2, 100)), wq, k_step=65)
    with hlsnn.Accelerator(cfg_path("s_unsigned"), "emu") as acc:
        p = acc.config.params
        wc = weights_for(acc.kernel, rng, (2, 4, 3, 3), "pot")
        with pytest.raises(hlsnn.InputError, match=r"k_step = 8: must be in \[k\*k = 9, max_k = 128\]"):
            acc.conv2d_int(activations(p, rng, (4, 5, 5)), wc, k_step=8)
