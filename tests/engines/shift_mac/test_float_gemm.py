"""The emu target's float GEMM of shift_mac (``floatgemm.gemm_arrays``: one GEMM on the code
values, the calibration read from its wide values) equals the general path (quantize, a float64
calibration product, ``gemm_int`` through the registers; forced here by a transfer limit no call
reaches) bit for bit, including the sign of zeros, with the same saturation count and
histogram; and ``shift._quantize_values_into`` equals ``code_values()`` of the quantizer."""
import numpy as np
import pytest

import hlsnn
from conftest import accel_config, stable_seed
from hlsnn.engines.shift_mac import floatgemm
from hlsnn.formats import shift

NO_LIMIT = 1 << 50
CONFIGS = ["shift8_pynq-z2", "shift8_zcu104"]


def bits(a):
    a = np.asarray(a)
    assert a.dtype == np.float64
    return a.view(np.int64)


def pair(name, **kw):
    cfg = hlsnn.load_config(accel_config(name))
    return cfg, hlsnn.Accelerator(cfg, "emu", **kw), hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=NO_LIMIT, **kw)


def check(fast, slow, x, w, **kw):
    try:
        y_slow = slow.gemm(x, w, **kw)
    except hlsnn.errors.InputError as exc:          # the fast path falls back and raises the same
        with pytest.raises(type(exc), match=str(exc)[:40]):
            fast.gemm(x, w, **kw)
        return None
    y_fast = fast.gemm(x, w, **kw)
    np.testing.assert_array_equal(bits(y_fast), bits(y_slow))
    assert fast.kernel.last_sat_count == slow.kernel.last_sat_count
    if kw.get("stats"):
        np.testing.assert_array_equal(fast.kernel.last_stats, slow.kernel.last_stats)
    else:
        assert fast.kernel.last_stats is None and slow.kernel.last_stats is None
    return y_fast


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("mode", ["twohot", "pot", "pot_sum"])
def test_float_gemm_equals_general_path(name, mode, monkeypatch):
    cfg, fast, slow = pair(name)
    taken = []
    real = floatgemm.gemm_arrays
    monkeypatch.setattr(floatgemm, "gemm_arrays", lambda *a: taken.append(real(*a)) or taken[-1])
    p = cfg.params
    rng = np.random.default_rng(stable_seed(name, mode))
    for case in range(10):
        b, k, n = int(rng.integers(1, 40)), int(rng.integers(1, 90)), int(rng.integers(1, 70))
        x = rng.normal(size=(b, k)) * 4.0 ** rng.integers(-3, 3)
        w = rng.normal(size=(n, k)) * 2.0 ** rng.integers(-6, 6, size=(n, 1))
        if case % 3 == 0:
            w[0] = 0.0                                   # an all-zero weight row
            x[-1] = 0.0
        if case % 4 == 1:
            x = np.round(x * 8) / 8                      # ties in the activation rounding
        if not p["act_signed"]:
            x = np.abs(x)
        bias = rng.normal(size=n) * 4.0 ** rng.integers(-2, 3) if case % 2 else None
        kw = dict(relu=bool(case % 3 == 1), stats=bool(case % 2 == 0), mode=mode,
                  delta=int(rng.integers(0, p["max_delta"] + 1)) if mode == "twohot" else 0)
        check(fast, slow, x, w, bias=bias, **kw)
    assert sum(y is not None for y in taken) >= 7       # the fast path ran (and was compared)


# shift8_zcu104's split (a batch above its 64K-word activation store, N above 2048: 8x the work of
# shift8_pynq-z2's) in the slow suite (CI); its unsigned activations are checked in the quick
# suite by test_float_gemm_falls_back_and_raises_as_the_general_path and the seeded test above
@pytest.mark.parametrize("name", [CONFIGS[0], pytest.param(CONFIGS[1], marks=pytest.mark.slow)])
def test_float_gemm_splits_nothing_yet_matches_the_split(name):
    # a batch above the activation store and N above max_n: the general path splits both
    cfg, fast, slow = pair(name)
    p = cfg.params
    rng = np.random.default_rng(11)
    k = 40
    x = rng.normal(size=(p["x_depth"] // 2 + 50, k))
    w = rng.normal(size=(p["max_n"] + 24, k))
    if not p["act_signed"]:
        x = np.abs(x)
    check(fast, slow, x, w, stats=True)


def test_float_gemm_falls_back_and_raises_as_the_general_path():
    cfg, fast, _ = pair("shift8_zcu104")         # unsigned activations
    rng = np.random.default_rng(2)
    assert floatgemm.gemm_arrays(fast.kernel, -np.ones((2, 3)), np.ones((4, 3)), None, False, "pot", 0, False) is None
    with pytest.raises(hlsnn.errors.InputError, match="negative"):
        fast.gemm(-np.ones((2, 3)), np.ones((4, 3)))
    # K beyond max_k: the general path runs it as raw calls over chunks of K; the float GEMM
    # gives the same bits
    k = cfg.params["max_k"] + 1
    slow = pair("shift8_zcu104")[2]
    for mode in ("pot", "pot_sum"):
        assert check(fast, slow, np.abs(rng.normal(size=(3, k))), rng.normal(size=(4, k)), mode=mode) is not None
    with pytest.raises(hlsnn.errors.InputError, match="bias"):
        fast.gemm(np.ones((2, 3)), rng.normal(size=(4, 3)), bias=np.ones(5))
    # a huge bias leaves the fast path; the general path's check speaks
    assert floatgemm.gemm_arrays(fast.kernel, np.ones((2, 3)), np.ones((4, 3)), np.full(4, 1e12), False, "pot", 0,
                                 False) is None
    # loaded weights: the general path (resident registers)
    w = rng.normal(size=(8, 16))
    fast.kernel.load_weights(w)
    assert not floatgemm.applies(fast.kernel)
    ref = hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=NO_LIMIT).gemm(np.abs(rng.normal(size=(3, 16))), w)
    assert ref.shape == (3, 8)


@pytest.mark.parametrize("mode,eb,delta", [("pot", 4, 0), ("twohot", 4, 0), ("twohot", 4, 7), ("twohot", 2, 3),
                                           ("pot", 1, 0), ("twohot", 5, 7)])
def test_quantize_values_into_equals_code_values(mode, eb, delta):
    rng = np.random.default_rng(stable_seed(mode, eb, delta))
    w = rng.normal(size=(50, 70)) * np.exp(rng.uniform(-20, 20, size=(50, 1)))
    w[0] = 0.0
    w[1, ::2] = -1e-300                              # zero codes of negative weights
    w[2] *= 1e-310
    q = shift._quantize(mode, w, eb, delta, 0)
    ws = np.full((50, 71), np.nan)
    F = shift._quantize_values_into(mode, w, eb, delta, ws[:, :70])
    np.testing.assert_array_equal(F, q.scale_exponent)
    np.testing.assert_array_equal(bits(ws[:, :70]), bits(q.code_values().astype(np.float64)))
    assert np.isnan(ws[:, 70]).all()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_float_gemm_refuses_non_finite_operands_as_the_general_path(bad):
    _, fast, _ = pair("shift8_pynq-z2")
    x, w = np.ones((3, 4)), np.ones((5, 4))
    for name, a in (("x", x), ("w", w)):
        a[1, 2] = bad
        with pytest.raises(hlsnn.errors.InputError, match=rf"^{name}: has 1 non-finite value\(s\).*index \(1, 2\)"):
            fast.gemm(x, w)
        a[1, 2] = 1.0
    x[0, 0] = w[0, 0] = bad                              # w is checked first
    with pytest.raises(hlsnn.errors.InputError, match="^w: has 1 non-finite"):
        fast.gemm(x, w)
    with pytest.raises(hlsnn.errors.InputError, match="^w: has 1 non-finite"):
        shift.quantize_twohot(w, 4, axis=0)


@pytest.mark.parametrize("setting", ["1", "0"])
def test_a_bias_beyond_the_field_at_the_calls_scale_is_refused_not_cast(setting, monkeypatch):
    """Tiny activations get a huge scale (2^f with f near 1000), so a bias of 1 is 2^1000 accumulator units:
    far beyond the 32-bit bias field. Both paths (float GEMM helper on or off) refuse it by name, and no
    inf is cast to int64 on the way (RuntimeWarnings are errors here)."""
    monkeypatch.setenv("HLSNN_NATIVE", setting)
    acc = hlsnn.Accelerator(hlsnn.load_config(accel_config("shift8_pynq-z2")), "emu")
    rng = np.random.default_rng(3)
    x, w = rng.normal(size=(4, 32)) * 1e-300, rng.normal(size=(8, 32))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        with pytest.raises(hlsnn.errors.InputError, match="bias values must fit 32 signed bits"):
            acc.gemm(x, w, bias=np.ones(8), mode="twohot")
        y = acc.gemm(x, w, bias=np.zeros(8), mode="twohot")      # a zero bias fits at any scale
    assert np.isfinite(y).all()
