"""The emu target's float GEMM (``Kernel._gemm_arrays``: quantized straight into the GEMM's
float arrays, dequantized by the emulator) equals the general path (quantize to BFPTensors,
``gemm_bfp``, dequantize; forced here by a transfer limit no call reaches) bit for bit,
including the sign of zeros, with the same kernel state; and its quantizer
(``bfp._quantize_rows_into``) equals ``bfp.quantize``."""
import numpy as np
import pytest

import hlsnn
from conftest import accel_config, stable_seed, test_config
from hlsnn.engines.bfp_systolic import kernel as kernel_module
from hlsnn.engines.bfp_systolic.spec import k_limit
from hlsnn.formats import bfp

NO_LIMIT = 1 << 50        # a transfer limit no call reaches: the general path, one call
CONFIGS = [accel_config("bfp16_pynq-z2"), accel_config("bfp8_zcu104"), accel_config("bfp12_ultra96v2-stats")] + \
    sorted(test_config("x").parent.glob("*.yaml"))


def bits(a):
    a = np.asarray(a)
    assert a.dtype == np.float64
    return a.view(np.int64)


def operands(rng, b, k, n, case):
    x = rng.normal(size=(b, k)) * 4.0 ** rng.integers(-3, 3)
    w = rng.normal(size=(n, k)) * 2.0 ** rng.integers(-4, 4, size=(n, 1))
    if case % 4 == 0:
        x[0] = 0.0                                    # an all-zero sample
    if case % 4 == 1:
        x[:] = 0.0                                    # all samples zero
    if case % 4 == 2:
        x[-1] *= 1e-45                                # a sample that quantizes to zeros
        w[0] *= 1e40                                  # a weight row at the top exponent
        x[:, 0] = -1e-300
    if case % 5 == 0:
        w[:, ::3] = np.round(w[:, ::3] * 64) / 64     # ties under the rounding
    return x, w


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.stem)
def test_fast_gemm_equals_general_path(path, monkeypatch):
    cfg = hlsnn.load_config(path)
    p = cfg.params
    fast, slow = hlsnn.Accelerator(cfg, "emu"), hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=NO_LIMIT)
    rng = np.random.default_rng(stable_seed(path.stem, "fast"))
    methods = ["max", "rolling"] + (["stats"] if p["weight_exponent"] == "tensor" else [])
    ran = {"values": 0, "floats": 0}
    for name in ran:                     # both emulator paths of the fast gemm run below
        real = getattr(kernel_module, f"emulate_{name}")
        def counted(*a, _real=real, _name=name, **k):
            ran[_name] += 1
            return _real(*a, **k)
        monkeypatch.setattr(kernel_module, f"emulate_{name}", counted)
    for case in range(16):
        b = int(rng.integers(1, 40))
        k = int(rng.integers(1, min(90, k_limit(p)) + 1))
        n = int(rng.integers(1, min(70, p["max_n"]) + 1))
        x, w = operands(rng, b, k, n, case)
        bias = rng.normal(size=n) * 8.0 ** rng.integers(-2, 3) if case % 3 == 1 else None
        kw = dict(relu=bool(case % 5 == 0), stats=bool(case % 4 == 0), method=methods[case % len(methods)])
        y_fast, y_slow = fast.gemm(x, w, bias=bias, **kw), slow.gemm(x, w, bias=bias, **kw)
        np.testing.assert_array_equal(bits(y_fast), bits(y_slow))
        assert fast.kernel.last_sat_count == slow.kernel.last_sat_count
        assert fast.kernel.last_id == slow.kernel.last_id
        if kw["stats"]:
            np.testing.assert_array_equal(fast.kernel.last_stats, slow.kernel.last_stats)
        else:
            assert fast.kernel.last_stats is None and slow.kernel.last_stats is None
    assert ran["values"] >= 3 and ran["floats"] >= 3, ran


def test_fast_gemm_saturates_and_rolls_like_the_general_path():
    cfg = hlsnn.load_config(accel_config("bfp8_zcu104"))
    fast, slow = hlsnn.Accelerator(cfg, "emu"), hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=NO_LIMIT)
    rng = np.random.default_rng(5)
    x, w = rng.normal(size=(64, 300)), rng.normal(size=(200, 300))
    x[::5] *= 2.0 ** 100                            # outputs beyond the top exponent: saturated
    w[:7] *= 2.0 ** 60
    for method in ("max", "rolling", "rolling"):    # the rolling buffer is emptied per operation
        np.testing.assert_array_equal(bits(fast.gemm(x, w, method=method)), bits(slow.gemm(x, w, method=method)))
        assert fast.kernel.last_sat_count == slow.kernel.last_sat_count > 0
        assert fast.kernel._roll.u == slow.kernel._roll.u

def test_general_path_still_runs_where_the_fast_one_does_not():
    cfg = hlsnn.load_config(accel_config("bfp16_pynq-z2"))
    acc = hlsnn.Accelerator(cfg, "emu")
    rng = np.random.default_rng(3)
    with pytest.raises(hlsnn.errors.InputError, match="K must agree"):
        acc.gemm(rng.normal(size=(2, 5)), rng.normal(size=(3, 6)))
    w = rng.normal(size=(cfg.params["max_n"] + 8, 16))      # N above max_n: tiled, in the general path
    x = rng.normal(size=(3, 16))
    ref = hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=NO_LIMIT).gemm(x, w)
    np.testing.assert_array_equal(bits(acc.gemm(x, w)), bits(ref))
    acc.kernel.load_weights(w[:16])                          # loaded weights: the general path
    y = acc.gemm(x, w[:16])
    assert acc.kernel.resident == (16, 16)
    ref = hlsnn.Accelerator(cfg, "emu", max_transfer_bytes=NO_LIMIT).gemm(x, w[:16])
    np.testing.assert_array_equal(bits(y), bits(ref))


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
@pytest.mark.parametrize("m,e", [(16, 8), (8, 8), (12, 5), (4, 3), (25, 8)])
@pytest.mark.parametrize("whole", [False, True])
def test_quantize_rows_into_equals_quantize(rounding, m, e, whole):
    rng = np.random.default_rng(stable_seed(rounding, m, e, whole))
    a = rng.normal(size=(70, 33)) * np.exp(rng.uniform(-40, 40, size=(70, 1)))
    a[0] = 0.0
    a[1] = -0.0
    a[2, :] = -1e-300                                # tiny negatives: truncate gives -1
    a[3] *= 1e250                                    # saturates at the top exponent
    a[4] = np.ldexp(np.round(rng.normal(size=33) * 2 ** (m - 1)) + 0.5, -(m - 2))   # ties
    a[5] = 5e-324
    a[6, ::2] = np.nextafter(2.0 ** (m - 1) - 0.5, np.inf)   # rounds up to the top: saturates
    ft = np.float32 if m <= 12 else np.float64
    out = np.full(a.shape, np.nan, ft)
    exps, nonzero = bfp._quantize_rows_into(a, m, e, rounding, out, whole=whole, block_elems=100)
    ref = bfp.quantize(a, m, axis=None if whole else -1, exponent_bits=e, rounding=rounding)
    np.testing.assert_array_equal(out, ref.mantissas)
    np.testing.assert_array_equal(exps, np.broadcast_to(ref.exponents, (70, 1)).ravel())
    np.testing.assert_array_equal(nonzero, ref.mantissas.any(axis=1))
    if m <= 25 and e <= 8:              # the dequantized values, in float64
        plan = bfp._row_plan(a, m, e, rounding, whole)
        vals = bfp._encode_rows_into(a, plan, m, rounding, np.full(a.shape, np.nan), values=True, block_elems=100)
        np.testing.assert_array_equal(bits(vals), bits(ref.dequantize()))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_fast_gemm_refuses_non_finite_operands_as_the_general_path(bad):
    cfg = hlsnn.load_config(accel_config("bfp8_zcu104"))
    acc = hlsnn.Accelerator(cfg, "emu")
    x, w = np.ones((3, 4)), np.ones((5, 4))
    for name, a in (("x", x), ("w", w)):
        a[1, 2] = bad
        with pytest.raises(hlsnn.errors.InputError, match=rf"^{name}: has 1 non-finite value\(s\).*index \(1, 2\)"):
            acc.gemm(x, w)
        if name == "w":                                  # w's error comes before the bias's
            with pytest.raises(hlsnn.errors.InputError, match="^w: has 1 non-finite"):
                acc.gemm(x, w, bias=np.full(5, np.nan))
        a[1, 2] = 1.0
    with pytest.raises(hlsnn.errors.InputError, match="^bias: has 1 non-finite"):
        acc.gemm(x, w, bias=np.array([1.0, np.nan, 0, 0, 0]))
