"""sparse_cluster emulator: the compiled direct convolution (hlsnn/native/int_conv.c,
conv_accumulate's "direct" method) gives the bits of the dense and pair paths, in every vector
variant (portable, AVX2, AVX-512), over random shapes and densities, int8 extremes, operands
up to its int32 bound and beyond it (where conv_accumulate takes the dense path), split
between threads or not; with HLSNN_NATIVE=0 "direct" is the dense path."""
import numpy as np
import pytest

from hlsnn import native
from hlsnn.engines.sparse_cluster import emulator as em

from conftest import stable_seed

needs_cc = pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")

LIMITS = (0, 1, 2)       # the portable loops, at most AVX2, the best (int_conv.c's `limit`)


def reference(xp, w):
    """Rule 1 in int64 (exact for any operands whose sums fit int64)."""
    k = w.shape[2]
    win = np.lib.stride_tricks.sliding_window_view(np.asarray(xp, np.int64), (k, k), axis=(1, 2))
    return np.einsum("chwyx,zcyx->zhw", win, np.asarray(w, np.int64))


def draw(rng, shape, density, lo=-128, hi=127):
    return np.where(rng.random(shape) < density, rng.integers(lo, hi + 1, shape), 0).astype(np.int64)


@pytest.fixture
def fresh_native():
    native.forget()
    yield
    native.forget()


@needs_cc
@pytest.mark.parametrize("seed", range(12))
def test_direct_equals_dense_and_pairs_on_random_layers(seed):
    rng = np.random.default_rng(stable_seed("direct", seed))
    lib = em._direct_lib()
    for _ in range(4):
        c, z, k = int(rng.integers(1, 40)), int(rng.integers(1, 40)), int(rng.integers(1, 6))
        hp, wp = int(rng.integers(k, k + 25)), int(rng.integers(k, k + 25))
        density = float(rng.choice([0.0, 0.05, 0.5, 1.0]))
        xp, w = draw(rng, (c, hp, wp), density), draw(rng, (z, c, k, k), max(density, 0.3))
        assert em.direct_fits(xp, w)
        ref = em._dense(xp, w)
        np.testing.assert_array_equal(ref, reference(xp, w))
        np.testing.assert_array_equal(em._scatter(xp, w), ref)
        for limit in LIMITS:
            got = em._direct(xp, w, lib, limit)
            assert got.dtype == np.int64 and got.shape == ref.shape
            np.testing.assert_array_equal(got, ref)
        np.testing.assert_array_equal(em.conv_accumulate(xp, w, method="direct"), ref)


@needs_cc
@pytest.mark.parametrize("fill", [(-128, -128), (127, -128), (-128, 127), "mixed"])
def test_int8_extremes(fill):
    rng = np.random.default_rng(stable_seed("direct-extreme", str(fill)))
    c, hp, wp, z, k = 64, 11, 13, 20, 5
    if fill == "mixed":
        xp = rng.choice([-128, 127], (c, hp, wp)).astype(np.int64)
        w = rng.choice([-128, 127], (z, c, k, k)).astype(np.int64)
    else:
        xp, w = np.full((c, hp, wp), fill[0], np.int64), np.full((z, c, k, k), fill[1], np.int64)
    ref = reference(xp, w)
    for limit in LIMITS:
        np.testing.assert_array_equal(em._direct(xp, w, em._direct_lib(), limit), ref)


@needs_cc
@pytest.mark.parametrize("sign", [1, -1])
def test_at_the_int32_bound(sign):
    """max|x| * max_z sum|w[z]| = 2**31 - 1: the largest operands direct_fits accepts, every
    partial sum one step from wrapping; one more is refused."""
    c, k = 7, 3
    wsum = 2 * c * k * k                              # every |w| = 2
    xmax = (2 ** 31 - 1) // wsum
    xp = np.full((c, 6, 5), sign * xmax, np.int64)
    xp[0, 0, 0] = -sign * xmax
    w = np.full((3, c, k, k), 2, np.int64)
    w[1] = -2
    w[2, :, 1, 1] = 0                                 # a smaller sum for one channel
    assert em.direct_fits(xp, w)
    ref = reference(xp, w)
    for limit in LIMITS:
        np.testing.assert_array_equal(em._direct(xp, w, em._direct_lib(), limit), ref)
    np.testing.assert_array_equal(em.conv_accumulate(xp, w, method="direct"), ref)
    xp[0, 0, 0] = sign * (2 ** 31 // wsum + 1)
    assert not em.direct_fits(xp, w)


@needs_cc
@pytest.mark.parametrize("case", ["sums", "x", "w", "int64 min"])
def test_beyond_the_bound_direct_is_the_dense_path(monkeypatch, case):
    """Operands whose int32 sums could wrap, or that are not int32: never the compiled direct
    convolution; the dense path's (exact) result. c k^2 > 1024 so that the dense path sums in
    float64, exact here."""
    rng = np.random.default_rng(stable_seed("beyond", case))
    c, k = 120, 3
    xp, w = draw(rng, (c, 6, 7), 1.0, -(1 << 17), 1 << 17), draw(rng, (4, c, k, k), 1.0, -128, 127)
    if case == "x":
        xp[0, 0, 0] = 1 << 31
    elif case == "w":
        w[0, 0, 0, 0], xp[...] = -(1 << 31), xp // (1 << 16)
    elif case == "int64 min":
        xp //= 1 << 17
        xp[1, 2, 3] = np.iinfo(np.int64).min          # |x| not representable in int64
    assert not em.direct_fits(xp, w)
    if case == "int64 min":           # no exact path for it (the dense path's float sums overflow)
        return
    called = []
    monkeypatch.setattr(em, "_direct", lambda *a: called.append(1))
    got = em.conv_accumulate(xp, w, method="direct")
    assert not called
    np.testing.assert_array_equal(got, reference(xp, w))


@needs_cc
def test_threads_split_the_pixels(monkeypatch):
    """Pixel ranges of any size (blocks of 8 cut anywhere) give the bits of one range."""
    rng = np.random.default_rng(stable_seed("direct-threads"))
    xp, w = draw(rng, (9, 23, 21), 0.6), draw(rng, (17, 9, 3, 3), 0.8)
    ref = reference(xp, w)
    for threads in ("1", "3", "8"):
        monkeypatch.setenv("HLSNN_NATIVE_THREADS", threads)
        monkeypatch.setattr(em, "DIRECT_MIN_MACS", 1)
        for limit in LIMITS:
            np.testing.assert_array_equal(em._direct(xp, w, em._direct_lib(), limit), ref)


@needs_cc
def test_non_contiguous_int8_and_empty_operands():
    rng = np.random.default_rng(stable_seed("direct-views"))
    xp, w = draw(rng, (4, 12, 14), 0.5), draw(rng, (3, 4, 3, 3), 0.7)
    xv = np.asfortranarray(xp)[:, ::-1, :]
    wv = w.astype(np.int8).transpose(1, 0, 2, 3).copy().transpose(1, 0, 2, 3)
    ref = reference(xv, w)
    np.testing.assert_array_equal(em.conv_accumulate(xv, wv, method="direct"), ref)
    np.testing.assert_array_equal(em.conv_accumulate(xv.astype(np.int8), wv, method="direct"), ref)
    empty = em._direct(np.zeros((2, 2, 5), np.int64), np.zeros((3, 2, 3, 3), np.int64), em._direct_lib())
    assert empty.shape == (3, 0, 3)


def test_without_the_compiled_helper_direct_is_dense(monkeypatch, fresh_native):
    rng = np.random.default_rng(stable_seed("direct-off"))
    xp, w = draw(rng, (5, 14, 13), 0.7), draw(rng, (6, 5, 3, 3), 1.0)
    monkeypatch.setenv("HLSNN_NATIVE", "0")
    native.forget()
    assert em._direct_lib() is None
    called = []
    monkeypatch.setattr(em, "_direct", lambda *a: called.append(1))
    np.testing.assert_array_equal(em.conv_accumulate(xp, w, method="direct"), reference(xp, w))
    np.testing.assert_array_equal(em.conv_accumulate(xp, w), reference(xp, w))
    assert not called


@pytest.mark.parametrize("hp", [1, 2])
def test_a_map_smaller_than_the_kernel_is_the_dense_paths_error(hp):
    from hlsnn.errors import InputError
    xp, w = np.ones((2, hp, 5), np.int64), np.ones((3, 2, 3, 3), np.int64)
    for method in ("direct", "auto", "dense"):
        with pytest.raises(InputError, match="does not fit"):
            em.conv_accumulate(xp, w, method=method)
