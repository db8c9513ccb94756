"""The emu target's array path (``EmuTarget(arrays=True)``, the default) equals its stream path
(``arrays=False``: pack -> ``Kernel.emulate_stream`` -> unpack, the protocol that csim, sim and
the board use) bit for bit, on the operations users call: outputs, dtypes, saturation counts,
statistics histograms and output exponents, including tiled calls."""
import numpy as np
import pytest

import hlsnn
from conftest import accel_config, stable_seed

MB = 1 << 20


def _pair(cfg, **kw):
    return hlsnn.Accelerator(cfg, "emu", **kw), hlsnn.Accelerator(cfg, "emu", arrays=False, **kw)


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, tuple):
        for u, v in zip(a, b):
            _same(u, v)
    elif hasattr(a, "mantissas"):
        _same(a.mantissas, b.mantissas)
        _same(a.exponents, b.exponents)
    else:
        a, b = np.asarray(a), np.asarray(b)
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


def _kernel_state(acc):
    k = acc.kernel
    return (getattr(k, "last_sat_count", None), None if getattr(k, "last_stats", None) is None
            else np.asarray(k.last_stats))


@pytest.mark.parametrize("cfg", ["bfp16_pynq-z2", "bfp8_zcu104", "bfp12_ultra96v2-stats"])
# 8192 bytes: the calls still split (by samples, and in whole weight tiles), and one weight tile of
# K < 90 fits (bfp8_zcu104's 48 rows: 45 steps x 96 bytes + 3 exponent beats = 4,368 bytes)
@pytest.mark.parametrize("limit", [None, 8192])
def test_bfp_arrays_equal_stream(cfg, limit):
    fast, slow = _pair(accel_config(cfg), max_transfer_bytes=limit)
    assert fast.target.arrays and not slow.target.arrays
    rng = np.random.default_rng(stable_seed(cfg, limit))
    for case in range(6):
        b, k, n = rng.integers(1, 40), rng.integers(1, 90), rng.integers(1, 70)
        x, w = rng.normal(size=(b, k)) * 4.0 ** rng.integers(-3, 3), rng.normal(size=(n, k))
        if case == 0:
            x[0] = 0.0                                                   # an all-zero sample
        bias = rng.normal(size=n) if case % 2 else None
        kw = dict(relu=bool(case % 3 == 0), stats=bool(case % 2 == 0))
        if "stats" in cfg:
            kw["method"] = "stats" if case % 2 else "max"
        _same(fast.gemm(x, w, bias=bias, **kw), slow.gemm(x, w, bias=bias, **kw))
        assert _kernel_state(fast)[0] == _kernel_state(slow)[0]
        if kw["stats"]:
            _same(_kernel_state(fast)[1], _kernel_state(slow)[1])


@pytest.mark.parametrize("mode", ["twohot", "pot", "pot_sum"])
@pytest.mark.parametrize("limit", [None, 8192])
def test_shift_arrays_equal_stream(mode, limit):
    fast, slow = _pair(accel_config("shift8_pynq-z2"), max_transfer_bytes=limit)
    rng = np.random.default_rng(7 + len(mode) + (limit or 0))
    for case in range(4):
        b, k, n = rng.integers(1, 30), rng.integers(1, 60), rng.integers(1, 50)
        x, w = rng.normal(size=(b, k)), rng.normal(size=(n, k))
        bias = rng.normal(size=n) if case % 2 else None
        kw = dict(relu=bool(case % 2 == 0), mode=mode, stats=bool(case % 3 == 0), delta=case % 2)
        _same(fast.gemm(x, w, bias=bias, **kw), slow.gemm(x, w, bias=bias, **kw))
        assert _kernel_state(fast)[0] == _kernel_state(slow)[0]
        if kw["stats"]:
            _same(_kernel_state(fast)[1], _kernel_state(slow)[1])
    img, ker = rng.normal(size=(3, 11, 9)), rng.normal(size=(4, 3, 3, 3))
    for padding in ("same", "valid"):
        _same(fast.conv2d(img, ker, padding=padding, mode=mode, relu=True),
              slow.conv2d(img, ker, padding=padding, mode=mode, relu=True))
        assert _kernel_state(fast)[0] == _kernel_state(slow)[0]


@pytest.mark.parametrize("limit", [None, 1 << 14])
def test_sparse_arrays_equal_stream(limit):
    """sparse_cluster: a batch laid out as cells of one map (gaps between the cells that no job
    covers), one map with pooling, raw sums, statistics, and calls split by a transfer limit."""
    fast, slow = _pair(accel_config("sparse8_pynq-z2"), max_transfer_bytes=limit)
    rng = np.random.default_rng(11 + (limit or 0))

    def ints(shape, density):
        return np.where(rng.random(shape) < density, rng.integers(-128, 128, shape), 0)

    for case in range(4 if limit is None else 2):
        b, c, z, k = rng.integers(1, 8), rng.integers(1, 7), rng.integers(1, 36), (1, 3, 5)[case % 3]
        x, w = ints((b, c, 9 + case, 7 + 2 * case), 0.2 + 0.15 * case), ints((z, c, k, k), 0.6)
        bias, shift = rng.integers(-3000, 3000, z), rng.integers(0, 12, z)
        kw = dict(bias=bias, padding=("same", "valid")[case % 2], relu=bool(case % 2), stats=case != 2)
        for raw in (False, True):
            _same(fast.kernel.conv2d_batch_int(x, w, shift=shift, raw=raw, **kw),
                  slow.kernel.conv2d_batch_int(x, w, shift=shift, raw=raw, **kw))
            assert _kernel_state(fast)[0] == _kernel_state(slow)[0]
            assert fast.kernel.last_calls == slow.kernel.last_calls
            if kw["stats"]:
                _same(_kernel_state(fast)[1], _kernel_state(slow)[1])
        for pool, req in ((True, True), (False, False), (True, False)):
            _same(fast.kernel.conv2d_int(x[0], w, shift=shift, pool=pool, requantize=req, **kw),
                  slow.kernel.conv2d_int(x[0], w, shift=shift, pool=pool, requantize=req, **kw))
            assert _kernel_state(fast)[0] == _kernel_state(slow)[0]
            if kw["stats"]:
                _same(_kernel_state(fast)[1], _kernel_state(slow)[1])


@pytest.mark.parametrize("mode", ["twohot", "pot"])
def test_shift_arrays_batch_beyond_the_store(mode):
    """A batch above the activation store: the stream path splits it into calls, the array path
    runs it in one emulator call; the outputs, saturation counts and histograms agree (also
    through K tiling's raw calls)."""
    from hlsnn.engines.shift_mac.tiles import samples_per_call
    cfg = accel_config("shift8_pynq-z2")
    fast, slow = _pair(cfg)
    rng = np.random.default_rng(len(mode))
    k, n = 700, 24
    b = samples_per_call(fast.kernel.p, k) * 2 + 5
    x = rng.integers(-128, 128, (b, k))
    from hlsnn.formats import shift as sfmt
    w = (sfmt.quantize_twohot if mode == "twohot" else sfmt.quantize_pot)(rng.normal(size=(n, k)),
                                                                          fast.kernel.p["exp_bits"])
    bias, shift = rng.integers(-5000, 5000, n), rng.integers(6, 14, n)
    for kw in (dict(stats=True, relu=True), dict(stats=True, raw=True), dict(k_step=300, stats=True)):
        _same(fast.kernel.gemm_int(x, w, mode=mode, bias=bias, shift=shift, **kw),
              slow.kernel.gemm_int(x, w, mode=mode, bias=bias, shift=shift, **kw))
        assert _kernel_state(fast)[0] == _kernel_state(slow)[0]
        _same(_kernel_state(fast)[1], _kernel_state(slow)[1])


def _rolling_bfp8():
    import yaml
    d = yaml.safe_load(open(accel_config("bfp8_zcu104")))
    d["name"] = "bfp8_rolling"
    d["bfp_systolic"]["output_exponent"] = "rolling"
    return d


@pytest.mark.parametrize("cfg", ["bfp16_pynq-z2", "bfp8_zcu104", "bfp12_ultra96v2-stats", "rolling"])
@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
def test_bfp_gemm_rows_equal_stream(cfg, fused, monkeypatch):
    """Kernel.gemm_rows (float activations on quantized weights, as the deploy runner calls it):
    the array path (with the compiled quantization + GEMM pass, ``compiled.rows_gemm``, and
    without it: quantize_rows and the float GEMM) equals the stream path's quantize_activations +
    gemm_bfp, in the outputs, the saturation count, the non-zero count and the weights left on
    chip (a second call with the same loaded weights runs resident)."""
    if not fused:
        from hlsnn.engines.bfp_systolic import compiled
        monkeypatch.setattr(compiled, "rows_gemm", lambda *a, **k: None)
    cfg = _rolling_bfp8() if cfg == "rolling" else accel_config(cfg)
    fast, slow = _pair(cfg)
    p = fast.kernel.p
    rng = np.random.default_rng(5)
    for case in range(4):
        b, k, n = rng.integers(1, 60), rng.integers(1, 90), rng.integers(1, min(70, p["max_n"]))
        x = rng.normal(size=(b, k)) * 4.0 ** rng.integers(-3, 3)
        if case == 1:
            x[: b // 2 + 1] = 0.0                                   # all-zero samples
        if case == 2:
            x[:] = 0.0                                              # every sample zero
        if case == 3:
            x[-1] = 1e-30                                           # a sample whose mantissas all round to 0
            x[0] *= 1e6                                             # outputs that saturate
        wq = fast.kernel.quantize_weights(rng.normal(size=(n, k)))
        bq = fast.kernel._quantize_bias(rng.normal(size=n), n) if case % 2 else None
        for acc in (fast, slow):
            acc.kernel.load_weights(wq)
        for scale in (2.0 ** 12, 1.0):       # the rolling buffer of the first call is emptied by the second
            ys = [acc.kernel.gemm_rows(x * scale, wq, bq, relu=bool(case % 3 == 0)) for acc in (fast, slow)]
            _same(*ys)
            assert fast.kernel.last_sat_count == slow.kernel.last_sat_count
            assert fast.kernel.last_x_nonzero == slow.kernel.last_x_nonzero
            assert fast.kernel.resident == slow.kernel.resident is not None


@pytest.mark.parametrize("cfg", ["bfp16_pynq-z2", "bfp8_zcu104", "bfp12_ultra96v2-stats", "rolling"])
@pytest.mark.parametrize("rows_block", [1, 40, 1 << 30])
@pytest.mark.parametrize("path", ["fused", "blocked", "numpy"])
def test_bfp_gemm_rows_conv_patches_in_blocks_equal_stream(cfg, rows_block, path, monkeypatch):
    """Kernel.gemm_rows on a convolution's patches (``convgeom.Patches``: the compiled gather,
    quantization and int32 GEMM in one pass where the int32 bound holds (``fused``); the
    compiled gather and, with more images than one block, the quantization and the GEMM's sums
    a block of images at a time (``blocked``: the fused pass off); the compiled helpers off,
    ``HLSNN_NATIVE=0`` (``numpy``)) equals the stream path's quantize_activations + gemm_bfp
    on numpy's im2col rows: outputs, saturation and non-zero counts; strides, pads, dilation,
    rectangular kernels, K not a multiple of anything, all-zero images and patches."""
    from hlsnn import native
    from hlsnn.engines import convgeom as cg
    from hlsnn.engines.bfp_systolic import compiled
    from hlsnn.engines.bfp_systolic.kernel import Kernel
    if path == "blocked":
        monkeypatch.setattr(compiled, "conv_gemm", lambda *a, **k: None)
    elif path == "numpy":
        monkeypatch.setenv("HLSNN_NATIVE", "0")           # native.load checks it on every call
        assert native.load("bfp_rows") is None
    monkeypatch.setattr(Kernel, "ROWS_BLOCK", rows_block)
    monkeypatch.setattr(Kernel, "BLOCKED_ABOVE", 0)
    fast, slow = _pair(_rolling_bfp8() if cfg == "rolling" else accel_config(cfg))
    rng = np.random.default_rng(41)
    geoms = [cg.ConvGeom(3, 3, 1, 1, (1, 1, 1, 1)), cg.ConvGeom(3, 3, 2, 2, (1, 1, 1, 1)),
             cg.ConvGeom(1, 1, 2, 2), cg.ConvGeom(2, 3, 1, 2, (0, 1, 1, 0), 2, 1), cg.ConvGeom(5, 5, 1, 1)]
    for i, g in enumerate(geoms):
        b, c = int(rng.integers(2, 7)), int(rng.integers(1, 6))
        x = np.maximum(rng.normal(size=(b, c, 9, 8)), 0) * 4.0 ** int(rng.integers(-3, 3))
        x[1] = 0.0                                                    # an all-zero image
        if i == 4:
            x[0] *= 1e6                                               # outputs that saturate
        rows, _ = cg.im2col(x, g)
        n = int(rng.integers(1, 20))
        wq = fast.kernel.quantize_weights(rng.normal(size=(n, rows.shape[1])))
        bq = fast.kernel._quantize_bias(rng.normal(size=n), n) if i % 2 else None
        for relu in (False, True):
            y = fast.kernel.gemm_rows(cg.Patches(x, g), wq, bq, relu=relu)
            sat, nnz = fast.kernel.last_sat_count, fast.kernel.last_x_nonzero
            ref = slow.kernel.gemm_rows(rows, wq, bq, relu=relu)
            _same(y, ref)
            assert sat == slow.kernel.last_sat_count and nnz == slow.kernel.last_x_nonzero
