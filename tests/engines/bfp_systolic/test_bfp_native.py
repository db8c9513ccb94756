"""bfp_systolic's compiled passes (``engines/bfp_systolic/compiled.py``, ``native/bfp_rows.c``)
give the bits of their numpy originals (``bfp._row_plan`` + ``bfp._encode_rows_into``, and
``emulator.emulate_floats``' epilogue) on seeded random and adversarial inputs: rounding ties,
zero rows, -0.0, saturating rows, huge and tiny scales, every deterministic rounding mode,
float32 and float64 outputs, convolution geometries with padding, stride, dilation and
rectangular kernels on NCHW and channels-last batches, one and several threads; the SIMD
clones give the portable code's bits; the fused convolution + int32 GEMM (``conv_gemm``) gives
the exact integer sums on every kernel variant, at its int32 bound and not beyond; and NaN or
infinity sends the caller to the numpy path."""
import ctypes
import subprocess

import numpy as np
import pytest

from hlsnn import native
from hlsnn.engines import convgeom as cg
from hlsnn.engines.bfp_systolic import compiled
from hlsnn.engines.bfp_systolic import emulator as em
from hlsnn.formats import bfp

needs_cc = pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")
MODES = ["nearest_even", "nearest_away", "truncate"]


def same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    u = {4: np.uint32, 8: np.uint64}[a.itemsize]
    return np.array_equal(a.view(u), b.view(u))


@pytest.fixture(params=["1", "3"], ids=["1-thread", "3-threads"])
def threads(request, monkeypatch):
    monkeypatch.setenv("HLSNN_NATIVE_THREADS", request.param)
    monkeypatch.setattr(compiled, "MIN_ELEMS", 1)
    if compiled.lib() is None:
        pytest.skip("no compiled helper")


def row_cases(rng, k):
    scale = np.exp2(rng.integers(-30, 30, size=(40, 1)))
    x = rng.normal(size=(40, k)) * scale
    yield x
    ties = np.round(rng.normal(size=(40, k)) * 64) / 2          # many exact halves after scaling
    yield ties
    z = ties.copy()
    z[::3] = 0.0
    z[1::5] = -0.0
    yield z                                                     # all-zero rows, -0.0
    yield -np.abs(ties) * 1e-300                                # underflow to (-)0 when scaled
    yield x / scale * 1e300                                     # huge values, exponents clamp at emax
    if k:
        s = ties.copy()
        s[:, 0] = np.abs(s).max(axis=1) * 1.9999                # rounds up past the range: saturates
        yield s


@needs_cc
@pytest.mark.parametrize("m,eb", [(2, 4), (8, 8), (16, 8), (25, 10)])
def test_quantize_rows_equals_numpy(threads, m, eb):
    rng = np.random.default_rng(m * 100 + eb)
    for k in (0, 1, 3, 27, 144, 577):
        for x in row_cases(rng, k):
            for rnd in MODES:
                for dt in (np.float32, np.float64):
                    plan = bfp._row_plan(x, m, eb, rnd)
                    ref = bfp._encode_rows_into(x, plan, m, rnd, np.empty(x.shape, dt))
                    out = np.empty(x.shape, dt)
                    e, nz, nnz = compiled.quantize_rows(x, m, eb, rnd, out)
                    assert np.array_equal(e, plan.exponents) and np.array_equal(nz, plan.nonzero)
                    assert same(out, ref), (m, eb, rnd, k)
                    assert nnz == np.count_nonzero(ref)


GEOMS = [cg.ConvGeom(3, 3, 1, 1, (1, 1, 1, 1)), cg.ConvGeom(3, 3, 2, 2, (1, 1, 1, 1)), cg.ConvGeom(1, 1, 2, 2),
         cg.ConvGeom(10, 4, 2, 2, (4, 1, 5, 2)), cg.ConvGeom(3, 2, 1, 2, (0, 3, 2, 1), 2, 3),
         cg.ConvGeom(5, 5, 1, 1, (2, 2, 2, 2))]


@needs_cc
@pytest.mark.parametrize("g", GEOMS, ids=[g.describe() for g in GEOMS])
def test_conv_rows_equal_numpy_im2col(threads, g):
    rng = np.random.default_rng(7)
    for layout in ("nchw", "channels-last view"):
        x = np.round(rng.normal(size=(3, 5, 20, 13)) * 16) / 4
        x[:, :, 3:7] = 0.0                                       # all-zero patches
        x[0, 1, 10, 5] = 1e6                                     # one large value: others round to 0
        if layout != "nchw":
            x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
        rows, (oh, ow) = cg.im2col(np.ascontiguousarray(x), g)
        for rnd in MODES:
            for dt in (np.float32, np.float64):
                plan = bfp._row_plan(rows, 8, 8, rnd)
                ref = bfp._encode_rows_into(rows, plan, 8, rnd, np.empty(rows.shape, dt))
                out = np.empty(rows.shape, dt)
                e, nz, nnz = compiled.quantize_conv_rows(x, g, oh, ow, 8, 8, rnd, out)
                assert np.array_equal(e, plan.exponents) and np.array_equal(nz, plan.nonzero)
                assert same(out, ref), (layout, rnd)
                assert nnz == np.count_nonzero(ref)


@needs_cc
def test_non_finite_and_unsupported_take_the_numpy_path(threads):
    x = np.ones((4, 6))
    for bad in (np.nan, np.inf, -np.inf):
        y = x.copy()
        y[2, 3] = bad
        assert compiled.quantize_rows(y, 8, 8, "nearest_even", np.empty(y.shape)) is None
        x4 = np.ones((2, 3, 5, 5))
        x4[1, 2, 4, 4] = bad
        assert compiled.quantize_conv_rows(x4, GEOMS[0], 5, 5, 8, 8, "nearest_even", np.empty((50, 27))) is None
    assert compiled.quantize_rows(x, 8, 8, "stochastic", np.empty(x.shape)) is None
    assert compiled.quantize_rows(x, 8, 11, "nearest_even", np.empty(x.shape)) is None     # |e| may pass 1000
    grouped = cg.ConvGeom(3, 3, 1, 1, (1, 1, 1, 1), group=3)
    assert compiled.quantize_conv_rows(np.ones((1, 3, 4, 4)), grouped, 4, 4, 8, 8, "nearest_even",
                                       np.empty((16, 27))) is None


def _epilogue_pair(p, acc, xe, we, bm, be, relu, monkeypatch):
    """emulate_floats' outputs with the compiled epilogue, and with the numpy one."""
    xf, wf = acc
    got = em.emulate_floats(p, xf, xe, wf, we, bm, be, relu=relu, dequantize=True)
    with monkeypatch.context() as mp:
        mp.setattr(compiled, "epilogue", lambda *a, **k: None)
        ref = em.emulate_floats(p, xf, xe, wf, we, bm, be, relu=relu, dequantize=True)
    return got, ref


@needs_cc
@pytest.mark.parametrize("rnd", MODES)
def test_epilogue_equals_numpy(threads, rnd, monkeypatch):
    rng = np.random.default_rng(11)
    saturated = 0
    for M, A in [(4, 20), (8, 32), (16, 40)]:
        p = dict(mantissa_bits=M, acc_bits=A, exponent_bits=8, rounding=rnd, weight_exponent="row", stats_k=3)
        for K in (1, 9, 144):
            ft = em.gemm_dtype(p, K)
            lo, hi = -(1 << (M - 1)), (1 << (M - 1)) - 1
            xf = rng.integers(lo, hi + 1, size=(37, K)).astype(ft)
            xf[::5] = 0
            wf = rng.integers(lo, hi + 1, size=(19, K)).astype(ft)
            xe = rng.integers(-20, 10, size=37).astype(np.int64)
            we = rng.integers(-10, 5, size=19).astype(np.int64)
            for relu in (False, True):
                for bm in (None, rng.integers(lo, hi + 1, size=19)):
                    for be in (-15, 0, 40):                      # be = 40: the bias saturates the accumulator
                        got, ref = _epilogue_pair(p, (xf, wf), xe, we, bm, be, relu, monkeypatch)
                        assert same(got[0], ref[0]) and np.array_equal(got[1], ref[1]) and got[2] == ref[2]
                        saturated += ref[2]
    # the saturating branch ran (truncation never rounds the largest magnitude up past the range)
    assert saturated > 0 or rnd == "truncate"


@needs_cc
def test_simd_clones_equal_portable_code(tmp_path):
    """The library as loaded (GCC picks the AVX-512F or AVX2 clones on a CPU with them) and the same source
    built with -DHLSNN_PORTABLE (no clones) give the same bits."""
    if compiled.lib() is None:
        pytest.skip("the compiled helpers are off (HLSNN_NATIVE)")
    cc = native.c_compiler()
    so = tmp_path / "portable.so"
    subprocess.run([*cc.split(), *native.C_FLAGS, "-DHLSNN_PORTABLE", str(native.SOURCE_DIR / "bfp_rows.c"),
                    "-o", str(so)], check=True, capture_output=True)
    portable = ctypes.CDLL(str(so))
    portable.hlsnn_bfp_rows.restype = ctypes.c_int64
    portable.hlsnn_bfp_rows.argtypes = compiled.lib().hlsnn_bfp_rows.argtypes
    rng = np.random.default_rng(3)
    for x in row_cases(rng, 37):
        for mode, rnd in enumerate(MODES):
            for dt in (np.float32, np.float64):
                a, b = np.empty(x.shape, dt), np.empty(x.shape, dt)
                ea, eb_ = np.empty(40, np.int64), np.empty(40, np.int64)
                na, nb = np.empty(40, np.uint8), np.empty(40, np.uint8)
                ra = compiled.lib().hlsnn_bfp_rows(x.ctypes, 40, 37, 37, 8, -128, 127, mode, a.ctypes,
                                                   int(dt == np.float32), 37, ea.ctypes, na.ctypes)
                rb = portable.hlsnn_bfp_rows(x.ctypes, 40, 37, 37, 8, -128, 127, mode, b.ctypes,
                                             int(dt == np.float32), 37, eb_.ctypes, nb.ctypes)
                assert ra == rb and same(a, b) and np.array_equal(ea, eb_) and np.array_equal(na, nb)


@needs_cc
@pytest.mark.parametrize("g", GEOMS, ids=[g.describe() for g in GEOMS])
def test_native_im2col_equals_numpy(g, monkeypatch):
    monkeypatch.setenv("HLSNN_NATIVE_THREADS", "3")
    rng = np.random.default_rng(2)
    for dt, row_dt in [(np.float64, None), (np.int64, None), (np.int64, np.float32), (np.int64, np.float64)]:
        for b in (7, 1):                                         # lines split between threads within one image
            x = (rng.normal(size=(b, 5, 20, 13)) * 100).astype(dt)
            got, ohw = cg.im2col(x, g, dtype=row_dt)
            monkeypatch.setattr(cg, "_NATIVE_MIN", 1 << 62)
            ref, ohw2 = cg.im2col(x, g, dtype=row_dt)
            monkeypatch.undo()
            assert ohw == ohw2 and same(got, ref)


def _conv_gemm_reference(x, g, m, eb, rnd, wm):
    """quantize_conv_rows' exponents, non-zero flags and count, and the exact integer sums of
    its mantissas with ``wm`` (int64 numpy)."""
    rows, (oh, ow) = cg.im2col(np.ascontiguousarray(x), g)
    plan = bfp._row_plan(rows, m, eb, rnd)
    xm = bfp._encode_rows_into(rows, plan, m, rnd, np.empty(rows.shape)).astype(np.int64)
    return (oh, ow), plan.exponents, plan.nonzero, int(np.count_nonzero(xm)), xm @ wm.T


@needs_cc
@pytest.mark.parametrize("g", GEOMS, ids=[g.describe() for g in GEOMS])
def test_conv_gemm_equals_quantize_then_integer_matmul(threads, g):
    """The fused gather + quantize + GEMM (int32 sums, or float64 beyond the int32 bound) gives
    quantize_conv_rows' exponents and counts and the exact sums, on every kernel variant, both
    accumulator types (float32 only with int32 sums), NCHW and channels-last
    batches, every rounding mode; ties, zero patches, a value that rounds the others to 0."""
    rng = np.random.default_rng(17)
    for layout in ("nchw", "channels-last view"):
        for m in (4, 8, 12, 16):                 # 16: beyond the int32 bound, float64 sums
            x = np.round(rng.normal(size=(3, 5, 20, 13)) * 16) / 4
            x[:, :, 3:7] = 0.0
            x[0, 1, 10, 5] = 1e6
            x[1, 2, 2, 2] = -0.0
            if layout != "nchw":
                x = np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
            n = int(rng.integers(1, 40))
            k = 5 * g.kh * g.kw
            wm = rng.integers(-(1 << (m - 1)), 1 << (m - 1), size=(n, k))
            wm[0] = 0
            for rnd in MODES:
                (oh, ow), e_ref, nz_ref, nnz_ref, acc_ref = _conv_gemm_reference(x, g, m, 8, rnd, wm)
                for dt in (np.float32, np.float64):
                    for isa in compiled.ISAS:
                        acc = np.empty(acc_ref.shape, dt)
                        got = compiled.conv_gemm(x, g, oh, ow, m, 8, rnd, wm, acc, isa=isa)
                        if compiled.sums_kind(wm, m, dt) is None:
                            assert got is None and m == 16 and dt == np.float32
                            continue
                        e, nz, nnz = got
                        assert np.array_equal(e, e_ref) and np.array_equal(nz, nz_ref) and nnz == nnz_ref
                        assert np.array_equal(acc, acc_ref.astype(dt)), (layout, m, rnd, isa)


@needs_cc
@pytest.mark.parametrize("isa", list(compiled.ISAS))
def test_conv_gemm_int32_and_float64_bounds(threads, isa):
    """At the int32 bound (2**(m-1) * max_n sum_k |wm| = 2**31 - 2**15) the int32 sums are exact,
    the extreme mantissa -2**(m-1) included; one step beyond it the sums are formed in float64
    (exact below 2**53; a float32 accumulator is declined: None, the caller keeps its GEMM), and at
    2**53 conv_gemm declines."""
    g, m = cg.ConvGeom(1, 2), 16
    x = np.full((2, 1, 3, 5), -np.nextafter(2.0, 0.0))            # every mantissa rounds to -2**15
    x[1, 0, 1] = 0.0
    wm = np.array([[-32768, -32767], [5, -3]])
    assert compiled.int32_exact(wm, m) and compiled.sums_kind(wm, m, np.float32) == "int32"
    (oh, ow), e_ref, nz_ref, nnz_ref, acc_ref = _conv_gemm_reference(x, g, m, 8, "nearest_even", wm)
    assert acc_ref.max() == (1 << 31) - (1 << 15)
    acc = np.empty(acc_ref.shape)
    e, nz, nnz = compiled.conv_gemm(x, g, oh, ow, m, 8, "nearest_even", wm, acc, isa=isa)
    assert np.array_equal(acc, acc_ref) and np.array_equal(e, e_ref) and nnz == nnz_ref
    over = np.array([[-32768, -32768], [5, -3]])
    assert not compiled.int32_exact(over, m) and compiled.sums_kind(over, m, np.float64) == "float64"
    *_, acc_ref = _conv_gemm_reference(x, g, m, 8, "nearest_even", over)
    assert acc_ref.max() == 1 << 31
    assert compiled.conv_gemm(x, g, oh, ow, m, 8, "nearest_even", over, np.empty(acc_ref.shape, np.float32),
                              isa=isa) is None
    acc = np.empty(acc_ref.shape)
    assert compiled.conv_gemm(x, g, oh, ow, m, 8, "nearest_even", over, acc, isa=isa) is not None
    assert np.array_equal(acc, acc_ref)
    # 25-bit mantissas: sum_bound = 2**24 * k * 2**24 is below 2**53 for k = 31 channels, not for 32
    m = 25
    for c in (31, 32):
        x = np.full((1, c, 2, 2), -np.nextafter(2.0, 0.0))       # mantissas -2**24
        w = np.full((3, c), -(1 << 24))
        acc = np.empty((4, 3))
        got = compiled.conv_gemm(x, cg.ConvGeom(1, 1), 2, 2, m, 8, "nearest_even", w, acc, isa=isa)
        if c == 31:
            assert compiled.sums_kind(w, m, np.float64) == "float64"
            assert np.array_equal(acc, np.full((4, 3), float(31 << 48)))
        else:
            assert compiled.sums_kind(w, m, np.float64) is None and got is None


@needs_cc
def test_conv_gemm_non_finite_and_unsupported_decline(threads):
    wm = np.ones((4, 27), np.int64)
    for bad in (np.nan, np.inf, -np.inf):
        for c in (3, 11):                        # 11 channels: a full AVX-512 step and a tail
            wc = np.ones((4, c * 9), np.int64)
            for pos in ((1, c - 1, 4, 4), (0, 0, 2, 3)):
                x4 = np.ones((2, c, 5, 5))
                x4[pos] = bad
                last = np.ascontiguousarray(x4.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)
                for xx in (x4, last):
                    for isa in compiled.ISAS:
                        assert compiled.conv_gemm(xx, GEOMS[0], 5, 5, 8, 8, "nearest_even", wc, np.empty((50, 4)),
                                                  isa=isa) is None
    x4 = np.ones((2, 3, 5, 5))
    x4[0, 0, 1, 1] = np.nan                      # a pixel that no window of a stride-2 1x1 convolution reads
    for xx in (x4, np.ascontiguousarray(x4.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2)):
        acc = np.empty((18, 4))
        assert compiled.conv_gemm(xx, GEOMS[2], 3, 3, 8, 8, "nearest_even", np.ones((4, 3), np.int64), acc) is not None
        assert np.array_equal(acc, np.full((18, 4), 3 * 64.0))
    x4 = np.ones((2, 3, 5, 5))
    assert compiled.conv_gemm(x4, GEOMS[0], 5, 5, 8, 8, "stochastic", wm, np.empty((50, 4))) is None
    assert compiled.conv_gemm(x4, GEOMS[0], 5, 5, 8, 8, "nearest_even", wm[:, :26], np.empty((50, 4))) is None
    assert compiled.conv_gemm(x4, GEOMS[0], 5, 5, 8, 8, "nearest_even", wm, np.empty((50, 4), np.int32)) is None


@needs_cc
def test_conv_gemm_portable_build_equals_loaded(tmp_path):
    """bfp_rows.c built with -DHLSNN_PORTABLE (no x86 kernels, no clones) gives the loaded
    library's sums and exponents."""
    if compiled.lib() is None:
        pytest.skip("the compiled helpers are off (HLSNN_NATIVE)")
    cc = native.c_compiler()
    so = tmp_path / "portable.so"
    subprocess.run([*cc.split(), *native.C_FLAGS, "-DHLSNN_PORTABLE", str(native.SOURCE_DIR / "bfp_rows.c"),
                    "-o", str(so)], check=True, capture_output=True)
    portable = ctypes.CDLL(str(so))
    portable.hlsnn_bfp_conv_gemm.restype = ctypes.c_int64
    portable.hlsnn_bfp_conv_gemm.argtypes = compiled.lib().hlsnn_bfp_conv_gemm.argtypes
    rng = np.random.default_rng(5)
    x = np.round(rng.normal(size=(2, 7, 9, 6)) * 64) / 8
    g = GEOMS[3]
    wm = rng.integers(-128, 128, size=(21, 7 * g.kh * g.kw))
    oh, ow = g.out_hw(9, 6)
    for rnd in MODES:
        acc = np.empty((2 * oh * ow, 21))
        ref = compiled.conv_gemm(x, g, oh, ow, 8, 8, rnd, wm, acc)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(compiled, "lib", lambda: portable)
            acc2 = np.empty_like(acc)
            got = compiled.conv_gemm(x, g, oh, ow, 8, 8, rnd, wm, acc2)
        assert same(acc, acc2) and np.array_equal(ref[0], got[0]) and np.array_equal(ref[1], got[1])
        assert ref[2] == got[2]


@needs_cc
@pytest.mark.parametrize("isa", list(compiled.ISAS))
def test_conv_gemm_wide_mantissas_with_small_weights(threads, isa):
    """Mantissas wider than 16 bits (no int16 kernel: AVX-512BW falls back to AVX-512F) with
    weights small enough for the int32 bound still give the exact sums."""
    rng = np.random.default_rng(23)
    g, m = GEOMS[1], 20
    x = rng.normal(size=(2, 3, 11, 9)) * 1e3
    wm = rng.integers(-3, 4, size=(18, 27))
    assert compiled.int32_exact(wm, m)
    for rnd in MODES:
        (oh, ow), e_ref, nz_ref, nnz_ref, acc_ref = _conv_gemm_reference(x, g, m, 8, rnd, wm)
        acc = np.empty(acc_ref.shape)
        e, nz, nnz = compiled.conv_gemm(x, g, oh, ow, m, 8, rnd, wm, acc, isa=isa)
        assert np.array_equal(acc, acc_ref) and np.array_equal(e, e_ref) and nnz == nnz_ref


@needs_cc
@pytest.mark.parametrize("isa", list(compiled.ISAS))
def test_conv_gemm_weights_beyond_their_mantissa_range(threads, isa):
    """conv_gemm's promise rests on the bound alone, not on the weights being m-bit mantissas:
    weights beyond int16 (no int16 kernel then) and beyond int32 (float64 sums) stay exact."""
    rng = np.random.default_rng(29)
    g = GEOMS[0]
    x = rng.normal(size=(2, 2, 6, 5))
    for m, lim in ((8, 40000), (4, 1 << 40)):
        wm = rng.integers(-lim, lim, size=(5, 18))
        kind = compiled.sums_kind(wm, m, np.float64)
        assert kind == ("int32" if lim == 40000 else "float64")
        (oh, ow), e_ref, _, nnz_ref, acc_ref = _conv_gemm_reference(x, g, m, 8, "nearest_away", wm)
        acc = np.empty(acc_ref.shape)
        e, _, nnz = compiled.conv_gemm(x, g, oh, ow, m, 8, "nearest_away", wm, acc, isa=isa)
        assert np.array_equal(acc, acc_ref) and np.array_equal(e, e_ref) and nnz == nnz_ref


@needs_cc
@pytest.mark.parametrize("m,eb", [(4, 4), (8, 8), (16, 8)])
def test_rows_gemm_equals_quantize_rows_then_integer_matmul(threads, m, eb):
    """The fused quantization + GEMM of matrix rows gives quantize_rows' exponents and counts and
    the exact sums (int32, or float64 beyond the int32 bound) on every kernel variant, the
    adversarial rows of row_cases (ties, zero rows, -0.0, underflow, huge values, saturation), row
    counts that are and are not multiples of the tile; NaN or infinity declines."""
    rng = np.random.default_rng(m * 10 + eb)
    for k in (1, 3, 27, 144):
        for x in row_cases(rng, k):
            x = x[:int(rng.integers(1, 41))]
            wm = rng.integers(-(1 << (m - 1)), 1 << (m - 1), size=(int(rng.integers(1, 40)), k))
            for rnd in MODES:
                plan = bfp._row_plan(x, m, eb, rnd)
                xm = bfp._encode_rows_into(x, plan, m, rnd, np.empty(x.shape)).astype(np.int64)
                ref = xm @ wm.T
                for dt in (np.float32, np.float64):
                    for isa in compiled.ISAS:
                        acc = np.empty(ref.shape, dt)
                        got = compiled.rows_gemm(x, m, eb, rnd, wm, acc, isa=isa)
                        if compiled.sums_kind(wm, m, dt) is None:
                            assert got is None and dt == np.float32
                            continue
                        e, nz, nnz = got
                        assert np.array_equal(e, plan.exponents) and np.array_equal(nz, plan.nonzero)
                        assert nnz == np.count_nonzero(xm) and np.array_equal(acc, ref.astype(dt)), (k, rnd, isa)
    y = rng.normal(size=(9, 5))
    y[4, 2] = np.nan
    assert compiled.rows_gemm(y, m, eb, "nearest_even", np.ones((3, 5), np.int64), np.empty((9, 3))) is None
    assert compiled.rows_gemm(y[:4], m, eb, "stochastic", np.ones((3, 5), np.int64), np.empty((4, 3))) is None
