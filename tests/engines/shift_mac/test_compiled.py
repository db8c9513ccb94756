"""shift_mac's compiled passes (``engines/shift_mac/compiled.py``, ``native/shift_quant.c``) give
the bits of their numpy originals on seeded random and adversarial inputs (rounding ties, zeros
and -0.0, saturation, tiny and huge scales, every shift mode, both shipped configs), split over
one or several threads; and the float GEMM gives the same bits with the compiled helpers on,
off (``HLSNN_NATIVE=0``) and without a compiler."""
import numpy as np
import pytest

import hlsnn
from conftest import accel_config, stable_seed
from hlsnn import native
from hlsnn.engines.shift_mac import compiled, floatgemm
from hlsnn.engines.shift_mac.emulator import requantize
from hlsnn.formats import shift, shift_codes

CONFIGS = ["shift8_pynq-z2", "shift8_zcu104"]
needs_cc = pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")


def bits(a):
    a = np.asarray(a)
    assert a.dtype == np.float64
    return a.view(np.int64)


@pytest.fixture(params=[("1", 1), ("3", 1), ("1", 0)], ids=["1-thread", "3-threads", "portable"])
def so(request, monkeypatch):
    """The library, with the rows split over 1 or 3 threads (tiny parts and chunks, so that
    small arrays are split too); "portable": without the AVX2 versions of the loops (the code
    that runs on other machines), where the CPU has them."""
    threads, isa = request.param
    monkeypatch.setenv("HLSNN_NATIVE_THREADS", threads)
    monkeypatch.setattr(compiled, "MIN_ELEMS", 1)
    monkeypatch.setattr(compiled, "MIN_ELEMS_CHEAP", 1)
    monkeypatch.setattr(compiled, "CHUNK_ELEMS", 1)        # the threads take one row at a time
    lib = compiled.lib()
    if lib is None:
        pytest.skip("no compiled helper")
    lib.hlsnn_shift_isa(isa)
    yield lib
    lib.hlsnn_shift_isa(1)                                # back to the CPU's best


@needs_cc
def test_extremes(so):
    rng = np.random.default_rng(1)
    for shape in [(1, 1), (3, 7), (17, 33), (64, 9)]:
        x = rng.normal(size=shape) * 10.0 ** rng.integers(-300, 300)
        assert compiled.extremes(so, x) == (float(x.max()), float(x.min()))
        assert compiled.extremes(so, x[:, :-1] if shape[1] > 1 else x) is not None
    for shape in [(5, 16), (3, 40), (2, 1003)]:           # the vector loops, NaN and infinities in any lane
        x = rng.normal(size=shape)
        assert compiled.extremes(so, x) == (float(x.max()), float(x.min()))
        for pos in (0, 5, shape[1] - 1):
            for bad in (np.nan, np.inf, -np.inf):
                y = x.copy()
                y[-1, pos] = bad
                assert all(np.isnan(compiled.extremes(so, y)))
    x = rng.normal(size=(9, 11))
    v = x[2:7, 1:9]                                       # a strided view, read in place
    assert compiled.rows_view(v) is v and compiled.extremes(so, v) == (float(v.max()), float(v.min()))
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[5, 10] = bad
        assert all(np.isnan(compiled.extremes(so, y)))


def _act_reference(x, fx):
    out = np.empty((x.shape[0], x.shape[1] + 1))
    np.ldexp(x, fx, out=out[:, :-1])
    np.rint(out[:, :-1], out=out[:, :-1])
    out[:, -1] = 1.0
    return out


@needs_cc
def test_activations(so):
    rng = np.random.default_rng(2)
    for fx in (-1022, -900, -40, -3, 0, 2, 7, 60, 900, 1022):
        x = rng.integers(-600, 600, size=(13, 21)) / 2.0          # halves: ties to even
        x[0, :5] = [0.0, -0.0, 0.5, -0.5, -0.25]
        x[1] = rng.normal(size=21) * 1e-310                       # subnormals
        x[2] = rng.normal(size=21) * 2.0 ** 60                    # beyond 2**52 after the scale
        with np.errstate(over="ignore", under="ignore"):
            x = np.ldexp(x, -fx)                          # (beyond the float64 range: 0, below)
            x[~np.isfinite(x)] = 0.0
            ref = _act_reference(x, fx)
        out = np.full((13, 22), np.nan)
        compiled.activations(so, x, fx, out)
        np.testing.assert_array_equal(bits(out), bits(ref))


@needs_cc
@pytest.mark.parametrize("mode,eb,delta", [("pot", 4, 0), ("twohot", 4, 0), ("twohot", 4, 7), ("twohot", 2, 3),
                                           ("pot", 1, 0), ("twohot", 5, 7), ("twohot", 1, 0), ("pot", 5, 0),
                                           ("twohot", 3, 5)])
def test_weights(so, mode, eb, delta):
    rng = np.random.default_rng(stable_seed(mode, eb, delta))
    tab = shift_codes.table(mode, eb, delta)
    n, k = 40, 37
    w = rng.normal(size=(n, k)) * np.exp(rng.uniform(-30, 30, size=(n, 1)))
    w[0] = 0.0                                            # an all-zero row
    w[1, ::2] = -1e-300                                   # zero codes of negative weights
    w[1, 1] = -0.0
    w[2] *= 1e-310                                        # subnormal rows: F beyond 1023 (ldexp)
    w[3] = np.ldexp(rng.choice(tab.buckets.thresholds, k) * rng.choice([-1, 1], k), -5)   # ties
    w[3, 0] = tab.max_mag * 2.0 ** -5                     # the row's amax: F = 5
    w[4] = np.nextafter(w[3], np.inf)                     # just beyond the ties
    w[5] = np.nextafter(w[3], -np.inf)
    w[6] = rng.normal(size=k) * 1e300                     # huge: F far below 0
    w[6, :5] = [1e-20, -1e-25, 3e-300, 2.0 ** -60, -5e-324]  # |w| * 2**F subnormal or zero
    w[7, :] = 5e-324                                      # the smallest subnormal
    w[8] = np.ldexp(rng.choice(tab.mags, k), rng.integers(-3, 3))                     # exact levels
    ref = np.full((n, k + 3), np.nan)
    F_ref = shift._quantize_values_into(mode, w, eb, delta, ref[:, 1:k + 1])
    out = np.full((n, k + 3), np.nan)
    F = compiled.weights(so, mode, w, eb, delta, out[:, 1:k + 1])
    np.testing.assert_array_equal(F, F_ref)
    np.testing.assert_array_equal(bits(out), bits(ref))
    w[10, 3] = np.nan
    assert compiled.weights(so, mode, w, eb, delta, out[:, 1:k + 1]) is None
    w[10, 3], w[11, 0] = 0.0, -np.inf
    assert compiled.weights(so, mode, w, eb, delta, out[:, 1:k + 1]) is None


@needs_cc
@pytest.mark.parametrize("mode,eb,delta", [("pot", eb, 0) for eb in range(1, 6)]
                         + [("twohot", 4, d) for d in range(8)]
                         + [("twohot", eb, d) for eb in (1, 2, 3, 5) for d in (0, 1, 7)])
def test_weights_long_rows(so, mode, eb, delta):
    """Rows long enough for the vector loops (with a tail), values in every bucket of the
    format (dense ones too), at, beside and between the thresholds, and the levels."""
    rng = np.random.default_rng(stable_seed("long", mode, eb, delta))
    tab = shift_codes.table(mode, eb, delta)
    thr = tab.buckets.thresholds
    n, k = 24, 1001
    w = rng.normal(size=(n, k)) * 2.0 ** rng.integers(-20, 20, size=(n, 1))
    w[:, 0] = tab.max_mag                                 # amax: F = 0, v = |w|
    t = rng.choice(thr, size=(6, k - 1))
    w[0:6, 1:] = t * rng.choice([-1.0, 1.0], size=t.shape)
    w[1, 1:] = np.nextafter(w[1, 1:], np.inf)
    w[2, 1:] = np.nextafter(w[2, 1:], -np.inf)
    w[3, 1:] = rng.uniform(0, tab.max_mag, size=k - 1)  # every binade's buckets
    w[4, 1:] = np.exp(rng.uniform(-3, np.log(tab.max_mag), size=k - 1)) * rng.choice([-1.0, 1.0], size=k - 1)
    w[5, 1:] = rng.choice(tab.mags, size=k - 1) * rng.choice([-1.0, 1.0], size=k - 1)
    w[6, 1:] = rng.choice([0.0, -0.0, 0.25, 0.5, -0.5, 0.75, 5e-324, -1e-310], size=k - 1)
    for i, j in enumerate(range(7, 13)):                  # the thresholds' neighbours, 1 to 4 ulps off
        w[j, 1:] = np.nextafter(t[i % 6], np.inf if i % 2 else -np.inf) + (i // 2) * np.spacing(t[i % 6])
    ref = np.full((n, k), np.nan)
    F_ref = shift._quantize_values_into(mode, w, eb, delta, ref)
    out = np.full((n, k), np.nan)
    F = compiled.weights(so, mode, w, eb, delta, out)
    np.testing.assert_array_equal(F, F_ref)
    np.testing.assert_array_equal(bits(out), bits(ref))


@needs_cc
def test_inputs_reads_x_and_w_at_once(so):
    rng = np.random.default_rng(5)
    for shape_x, n in (((1, 6), 1), ((40, 6), 3), ((2, 6), 50), ((9, 6), 0)):
        x, w = rng.normal(size=shape_x), rng.normal(size=(n, 6)) * 3.0
        ref = np.empty((n, 6))
        F_ref = shift._quantize_values_into("twohot", w, 4, 2, ref)
        out = np.empty((n, 6))
        seen = []
        xf = np.full((shape_x[0], 7), np.nan)
        ext, F, fx = compiled.inputs(so, x, "twohot", w, 4, 2, out,
                                     act=(lambda hi, lo: seen.append((hi, lo)) or 5, xf))
        assert ext == (float(x.max()), float(x.min())) == seen[0] and fx == 5
        np.testing.assert_array_equal(bits(xf), bits(_act_reference(x, 5)))
        np.testing.assert_array_equal(F, F_ref)
        np.testing.assert_array_equal(bits(out), bits(ref))
        assert compiled.inputs(so, x, "twohot", w, 4, 2, out, act=(lambda hi, lo: None, xf))[2] is None
        x[0, 0] = np.nan
        ext, F, fx = compiled.inputs(so, x, "twohot", w, 4, 2, out, act=(lambda hi, lo: 1 / 0, xf))
        assert np.isnan(ext).all() and (F is not None) and fx is None      # (frac is not called)


@needs_cc
def test_col_extremes(so):
    rng = np.random.default_rng(3)
    for shape in [(1, 5), (2, 1), (37, 29), (7, 13), (8, 3), (10, 40)]:     # blocks of four rows and the rest
        v = np.rint(rng.normal(size=shape) * 2.0 ** 40)
        cmax, cmin = compiled.col_extremes(so, v)
        np.testing.assert_array_equal(cmax, v.max(axis=0))
        np.testing.assert_array_equal(cmin, v.min(axis=0))


def _params(name, rounding, signed):
    p = dict(hlsnn.load_config(accel_config(name)).params)
    p["rounding"], p["act_signed"] = rounding, signed
    return p


@needs_cc
@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
@pytest.mark.parametrize("signed", [True, False])
def test_requantize(so, name, rounding, signed):
    p = _params(name, rounding, signed)
    A = p["acc_bits"]
    rng = np.random.default_rng(stable_seed(name, rounding, signed))
    batch, n = 23, 19
    shifts = rng.integers(-3, 30, size=n)
    shifts[:3] = [0, 1, 127]
    v = np.rint(rng.normal(size=(batch, n)) * np.ldexp(1.0, shifts + 6))
    half = np.ldexp(1.0, shifts - 1)                      # ties of every rounding: (2m + 1) * 2**(shift - 1)
    v[0] = (2 * rng.integers(-200, 200, size=n) + 1) * half
    v[0, shifts < 1] = 3.0
    v[1] = 0.0
    v[2] = np.ldexp(rng.choice([-1.0, 1.0], n), A + 1)    # beyond the accumulator: its clamp acts
    v[3] = -v[2]
    v[4] = np.ldexp(1.0, shifts + p["act_bits"])          # at and beyond the output range
    v[5] = -v[4] - 1
    for relu in (False, True):
        for k, max_bias in ((8, 0), (1 << 20, 0), (4, 1 << (A - 1))):   # the accumulator clamp off / on
            for fy in (-900, 0, 5, 900):
                ref_v = v.copy()
                if relu:
                    np.maximum(ref_v, 0, out=ref_v)
                scale = np.ldexp(1.0, -shifts)
                ref_v *= scale
                y_ref, sat_ref = requantize(p, ref_v, shifts, scale, k=k, delta=3, max_bias=max_bias,
                                            dequantize=fy)
                before = v.copy()
                y, sat = compiled.requantize(so, p, v, shifts, k=k, delta=3, max_bias=max_bias, relu=relu, fy=fy)
                np.testing.assert_array_equal(bits(y), bits(y_ref))
                assert sat == sat_ref
                np.testing.assert_array_equal(bits(v), bits(before))       # v is left as it was


def _gemm_cases(p, rng):
    """Float GEMM operands: random, with ties, zeros, huge and tiny scales, saturating biases."""
    for case in range(14):
        b, k, n = int(rng.integers(1, 30)), int(rng.integers(1, 70)), int(rng.integers(1, 50))
        x = rng.normal(size=(b, k)) * 4.0 ** rng.integers(-3, 3)
        w = rng.normal(size=(n, k)) * 2.0 ** rng.integers(-6, 6, size=(n, 1))
        if case % 3 == 0:
            w[0] = 0.0
            x[-1] = 0.0
        if case % 4 == 1:
            x = np.round(x * 8) / 8                      # ties in the activation rounding
        if case == 5:
            x *= 1e-300
            w *= 1e280
        if case == 6:
            x *= 1e250
            w *= 1e-290
        if case == 7:
            x[:, 0] = -0.0
            w[:, -1] = -0.0
        if not p["act_signed"]:
            x = np.abs(x)
        bias = rng.normal(size=n) * 4.0 ** rng.integers(-2, 3) if case % 2 else None
        if case == 9:
            bias = np.full(n, -3e3)                      # most outputs saturate
        yield x, w, bias, case


@pytest.mark.parametrize("name", CONFIGS)
@pytest.mark.parametrize("mode", ["twohot", "pot", "pot_sum"])
@pytest.mark.parametrize("rounding", [None, "nearest_even", "nearest_away", "truncate"])
def test_float_gemm_same_bits_with_and_without_the_compiled_helpers(name, mode, rounding, monkeypatch):
    cfg = hlsnn.load_config(accel_config(name))
    if rounding is not None:
        cfg.params["rounding"] = rounding
    acc = hlsnn.Accelerator(cfg, "emu")
    p = acc.kernel.p
    monkeypatch.setattr(compiled, "MIN_ELEMS", 64)
    monkeypatch.setattr(compiled, "MIN_ELEMS_CHEAP", 64)
    monkeypatch.setattr(compiled, "CHUNK_ELEMS", 16)
    monkeypatch.setenv("HLSNN_NATIVE_THREADS", "2")
    fast = []                                             # the float GEMM's results, None: it fell back
    real = floatgemm.gemm_arrays
    monkeypatch.setattr(floatgemm, "gemm_arrays", lambda *a: fast.append(real(*a)) or fast[-1])
    rng = np.random.default_rng(stable_seed(name, mode, rounding))
    ran = 0
    for x, w, bias, case in _gemm_cases(p, rng):
        kw = dict(bias=bias, relu=bool(case % 3 == 1), stats=bool(case % 5 == 4), mode=mode,
                  delta=int(rng.integers(0, p["max_delta"] + 1)) if mode == "twohot" else 0)
        results = []
        for setting in ("1", "0"):
            monkeypatch.setenv("HLSNN_NATIVE", setting)
            native.forget()
            try:
                results.append((acc.gemm(x, w, **kw), acc.kernel.last_sat_count, acc.kernel.last_stats))
            except hlsnn.errors.InputError as exc:
                results.append(str(exc))
        native.forget()
        if isinstance(results[0], str) or isinstance(results[1], str):
            assert results[0] == results[1]
            continue
        (y1, s1, h1), (y0, s0, h0) = results
        np.testing.assert_array_equal(bits(y1), bits(y0))
        assert s1 == s0
        assert (h1 is None and h0 is None) or np.array_equal(h1, h0)
        ran += 1
    assert ran >= 8 and sum(y is not None for y in fast) >= 12   # both settings ran the float GEMM


def test_without_a_compiler_the_numpy_path_runs(monkeypatch):
    monkeypatch.setattr(native, "c_compiler", lambda: None)
    native.forget()
    try:
        assert compiled.lib() is None
        acc = hlsnn.Accelerator(hlsnn.load_config(accel_config("shift8_pynq-z2")), "emu")
        rng = np.random.default_rng(4)
        x, w = rng.normal(size=(5, 8)), rng.normal(size=(3, 8))
        y = acc.gemm(x, w)
        slow = hlsnn.Accelerator(hlsnn.load_config(accel_config("shift8_pynq-z2")), "emu",
                                 max_transfer_bytes=1 << 50).gemm(x, w)
        np.testing.assert_array_equal(bits(y), bits(slow))
    finally:
        native.forget()


@needs_cc
def test_non_finite_operands_raise_as_the_numpy_path(monkeypatch):
    acc = hlsnn.Accelerator(hlsnn.load_config(accel_config("shift8_pynq-z2")), "emu")
    assert compiled.lib() is not None
    x, w = np.ones((3, 4)), np.ones((5, 4))
    for name, a in (("x", x), ("w", w)):
        a[1, 2] = np.nan
        with pytest.raises(hlsnn.errors.InputError, match=rf"^{name}: has 1 non-finite value\(s\).*index \(1, 2\)"):
            acc.gemm(x, w)
        a[1, 2] = 1.0
    x[0, 0] = w[0, 0] = np.inf                          # w is checked first
    with pytest.raises(hlsnn.errors.InputError, match="^w: has 1 non-finite"):
        acc.gemm(x, w)
    assert floatgemm.applies(acc.kernel)
