"""shift_mac emulator: the compiled int32 GEMM (hlsnn/native/int_conv.c, hlsnn_int_gemm) gives
the float64 GEMM's values, (x @ m.T + bias) * 2**-shift, in every vector variant and split
between threads, over random shapes, multipliers up to the int32 bound; beyond it (or with
a bias whose float sum could round) it declines and the float GEMM runs; emulate gives the
same bits with and without the compiled helpers."""
import numpy as np
import pytest

import hlsnn
from conftest import accel_config, stable_seed
from hlsnn import native
from hlsnn.engines.shift_mac import emulator as em

needs_cc = pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")

LIMITS = (0, 1, 2)


def float_gemm(x, m, bias, scale):
    n, k = m.shape
    mm = np.zeros((n, k + 1))
    mm[:, :k] = m
    out = np.empty((x.shape[0], n))
    em._float_gemm(x, mm, n, k, np.broadcast_to(bias, (n,)), np.broadcast_to(scale, (n,)), out)
    return out


def operands(rng):
    b, k, n = (int(v) for v in rng.integers(1, 50, 3))
    x = rng.integers(-128, 128, (b, k))
    m = (rng.integers(-16, 17, (n, k)) << rng.integers(0, 10, (n, k))).astype(np.float64)
    bias = rng.integers(-(1 << 40), 1 << 40, n) >> rng.integers(0, 40, n)
    scale = np.ldexp(1.0, -rng.integers(-10, 60, n))
    return x, m, bias, scale


@needs_cc
@pytest.mark.parametrize("seed", range(10))
def test_int_gemm_equals_the_float_gemm(seed, monkeypatch):
    rng = np.random.default_rng(stable_seed("int_gemm", seed))
    monkeypatch.setattr(em, "INT_GEMM_MIN_MACS", 1)            # several threads even for small GEMMs
    monkeypatch.setenv("HLSNN_NATIVE_THREADS", str(1 + seed % 3))
    for _ in range(10):
        x, m, bias, scale = operands(rng)
        if rng.random() < 0.3:
            bias, scale = bias[:1], scale[:1]                  # one value for every output
        ref = float_gemm(x, m, bias, scale)
        for limit in LIMITS:
            out = np.full_like(ref, np.nan)
            assert em._int_gemm(x, m, bias, scale, out, limit)
            np.testing.assert_array_equal(out.view(np.int64), ref.view(np.int64))


@needs_cc
def test_the_bounds():
    """max|x| * max sum|m| = 2**31 - 1 runs in int32; one more, |x| >= 2**31 or |bias| >= 2**52
    declines (the caller runs the float GEMM)."""
    k = 9
    x = np.full((5, k), -((2 ** 31 - 1) // (3 * k)), np.int64)
    x[1] *= -1
    m = np.full((4, k), 3.0)
    m[2] = -3
    bias, scale = np.array([0, 1, -(1 << 51), (1 << 52) - 1]), np.ldexp(1.0, -np.arange(4))
    ref = float_gemm(x, m, bias, scale)
    for limit in LIMITS:
        out = np.empty_like(ref)
        assert em._int_gemm(x, m, bias, scale, out, limit)
        np.testing.assert_array_equal(out, ref)
    out = np.zeros_like(ref)
    m2 = m.copy()
    m2[0, 0] = 4.0
    assert not em._int_gemm(x, m2, bias, scale, out)
    assert not em._int_gemm(np.full((2, k), 1 << 31), m[:, :k] * 0, bias, scale, out[:2])
    assert not em._int_gemm(x, m, np.array([0, 0, 0, 1 << 52]), scale, out)
    assert not em._int_gemm(x, m, np.array([np.iinfo(np.int64).min] * 4), scale, out)
    assert (out == 0).all()


@pytest.mark.parametrize("mode", ["twohot", "pot", "pot_sum"])
def test_emulate_same_bits_with_and_without_the_compiled_helpers(mode, monkeypatch):
    cfg = hlsnn.load_config(accel_config("shift8_pynq-z2"))
    p = cfg.params
    rng = np.random.default_rng(stable_seed("int_gemm_emulate", mode))
    for _ in range(6):
        b, k, rows = (int(v) for v in rng.integers(1, 40, 3))
        n = 2 * rows if mode == "pot" else rows
        x = rng.integers(-(1 << (p["act_bits"] - 1)), 1 << (p["act_bits"] - 1), (b, k))
        regs = rng.integers(0, 1 << 16, (rows, k)).astype(np.uint16)
        bias, shift = rng.integers(-5000, 5000, n), rng.integers(0, 20, n)
        kw = dict(n=n, mode=mode, delta=int(rng.integers(0, p["max_delta"] + 1)) if mode == "twohot" else 0,
                  relu=bool(rng.random() < 0.5), stats=True)
        res = []
        for setting in ("1", "0"):
            monkeypatch.setenv("HLSNN_NATIVE", setting)
            native.forget()
            res.append(em.emulate(p, x, regs, bias, shift, **kw))
        native.forget()
        ref = em.emulate_reference(p, x, regs, bias, shift, **kw)
        for a, b_, c in zip(res[0], res[1], ref):
            np.testing.assert_array_equal(a, b_)
            np.testing.assert_array_equal(a, c)
