"""sparse_cluster emulator: the compiled pair path (hlsnn/native/sparse_conv.c) gives the bits
of the numpy pair path (_scatter, its specification) and of the dense path, over densities,
odd shapes, both paddings, even and odd kernels, extreme int8 values and empty channels; with
HLSNN_NATIVE=0 or no compiler every method is the numpy code, with the same bits; method="auto"
takes the compiled path at low density."""
import numpy as np
import pytest

from hlsnn import native
from hlsnn.engines.sparse_cluster import emulator as em
from hlsnn.engines.tiling import conv_pad, pad_map

from conftest import stable_seed

needs_cc = pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")

DENSITIES = [0.0, 0.003, 0.1, 0.5, 1.0]
# (C, H, W, Z, k, padding): odd and even sizes, k from 1 to 5, 'same' and 'valid'
SHAPES = [(3, 13, 11, 5, 3, "same"), (3, 13, 11, 5, 3, "valid"), (1, 1, 1, 1, 1, "valid"),
          (2, 7, 4, 3, 5, "same"), (4, 6, 9, 2, 2, "valid"), (5, 5, 5, 7, 5, "valid"),
          (6, 17, 3, 4, 1, "same"), (2, 2, 31, 3, 3, "same")]


def layer(rng, shape, density):
    c, h, wd, z, k, padding = shape

    def draw(s):
        return np.where(rng.random(s) < density, rng.integers(-128, 128, s), 0).astype(np.int64)
    return pad_map(draw((c, h, wd)), conv_pad(padding, k)), draw((z, c, k, k))


def all_methods(xp, w):
    """The dense path, the numpy pair path and the compiled pair path (asserted compiled)."""
    got = em._native_pairs(xp, w)
    assert got is not None
    return em._dense(xp, w), em._scatter(xp, w), got


@pytest.fixture
def fresh_native():
    native.forget()
    yield
    native.forget()


@needs_cc
@pytest.mark.parametrize("density", DENSITIES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_compiled_pairs_equal_numpy_pairs_and_dense(shape, density):
    rng = np.random.default_rng(stable_seed("native", shape, density))
    xp, w = layer(rng, shape, density)
    dense, pairs, compiled = all_methods(xp, w)
    assert compiled.dtype == np.int64 and compiled.shape == dense.shape
    np.testing.assert_array_equal(pairs, dense)
    np.testing.assert_array_equal(compiled, dense)
    np.testing.assert_array_equal(em.conv_accumulate(xp, w, method="native"), dense)
    np.testing.assert_array_equal(em.conv_accumulate(xp, w), dense)


@needs_cc
@pytest.mark.parametrize("fill", [(-128, -128), (127, -128), (-128, 127), "mixed"])
def test_extreme_int8_values(fill):
    """Full density at the ends of int8: the largest sums the config allows (C k^2 2^14)."""
    rng = np.random.default_rng(stable_seed("extreme", str(fill)))
    c, h, wd, z, k = 16, 9, 10, 3, 5
    if fill == "mixed":
        xp = rng.choice([-128, 127], (c, h, wd)).astype(np.int64)
        w = rng.choice([-128, 127], (z, c, k, k)).astype(np.int64)
    else:
        xp, w = np.full((c, h, wd), fill[0], np.int64), np.full((z, c, k, k), fill[1], np.int64)
    dense, pairs, compiled = all_methods(xp, w)
    np.testing.assert_array_equal(compiled, dense)
    np.testing.assert_array_equal(compiled, pairs)
    if fill != "mixed":
        assert (compiled == fill[0] * fill[1] * c * k * k).all()


@needs_cc
def test_empty_channels():
    """Input channels with no non-zero, weight slices with none, an output channel with none."""
    rng = np.random.default_rng(stable_seed("empty"))
    xp, w = layer(rng, (6, 11, 12, 5, 3, "same"), 0.4)
    xp[[0, 3]] = 0
    w[:, [1, 4]] = 0
    w[2] = 0
    dense, pairs, compiled = all_methods(xp, w)
    np.testing.assert_array_equal(compiled, dense)
    np.testing.assert_array_equal(compiled, pairs)
    assert (compiled[2] == 0).all()
    all_zero = all_methods(np.zeros_like(xp), w)
    assert all((a == 0).all() for a in all_zero)


@needs_cc
def test_a_large_map_counts_before_it_gathers():
    """Above 2^22 padded inputs the compiled path counts the non-zeros before gathering them."""
    rng = np.random.default_rng(stable_seed("large"))
    xp = np.zeros((2, 1500, 1500), np.int64)
    ys, xs = rng.integers(0, 1500, (2, 3000))
    xp[0, ys, xs] = rng.integers(-128, 128, 3000)
    xp[1, -1, -1] = -128
    w = rng.integers(-128, 128, (2, 2, 3, 3))
    np.testing.assert_array_equal(em._native_pairs(xp, w), em._scatter(xp, w))


@needs_cc
@pytest.mark.parametrize("density", DENSITIES)
def test_the_compiled_pair_count_is_numpys(density):
    rng = np.random.default_rng(stable_seed("count", density))
    lib = em._native_lib()
    for shape in SHAPES:
        xp, w = layer(rng, shape, density)
        w[:, :1] = 0                                                   # a channel it skips
        assert em._pair_count(xp, w, lib) == em._pair_count(xp, w, None)
    assert em._pair_count(np.zeros((0, 4, 4), np.int64), np.zeros((2, 0, 3, 3), np.int64), lib) == 0


@needs_cc
def test_non_contiguous_and_int8_operands():
    rng = np.random.default_rng(stable_seed("views"))
    xp, w = layer(rng, (4, 12, 14, 3, 3, "valid"), 0.3)
    xv = np.asfortranarray(xp)[:, ::-1, :]                       # neither C- nor F-contiguous
    wv = w.astype(np.int8).transpose(1, 0, 2, 3).copy().transpose(1, 0, 2, 3)
    ref = em._dense(np.ascontiguousarray(xv), w)
    np.testing.assert_array_equal(em.conv_accumulate(xv, wv, method="native"), ref)
    np.testing.assert_array_equal(em.conv_accumulate(xv.astype(np.int8), wv, method="native"), ref)


@needs_cc
def test_emulate_gives_the_same_layer_by_every_method():
    rng = np.random.default_rng(stable_seed("emulate"))
    xp, w = layer(rng, (5, 15, 13, 6, 3, "same"), 0.2)
    bias, shift = rng.integers(-2000, 2000, 6), rng.integers(0, 12, 6)
    p = {"rounding": "nearest_even"}
    for kw in ({"relu": True, "pool": True}, {"raw": True}, {"stats": True}):
        ref = em.emulate(p, xp, w, bias, shift, method="dense", **kw)
        for method in ("sparse", "native", "auto"):
            got = em.emulate(p, xp, w, bias, shift, method=method, **kw)
            for a, b in zip(got, ref):
                np.testing.assert_array_equal(a, b)


def _spy(monkeypatch):
    """Record which path conv_accumulate takes."""
    seen = []
    for name in ("_dense", "_scatter", "_native_pairs", "_direct"):
        f = getattr(em, name)
        monkeypatch.setattr(em, name, lambda *a, f=f, name=name: (seen.append(name), f(*a))[1])
    return seen


@needs_cc
def test_auto_takes_the_compiled_path_at_low_density_and_direct_at_full(monkeypatch, fresh_native):
    """Low density: the compiled pair path; full density: the compiled direct convolution, or
    the dense path when its int32 sums would not be exact."""
    seen = _spy(monkeypatch)
    rng = np.random.default_rng(stable_seed("auto"))
    lo = layer(rng, (16, 30, 30, 16, 3, "same"), 0.03)
    hi = layer(rng, (16, 30, 30, 16, 3, "same"), 1.0)
    em.conv_accumulate(*lo)
    assert seen == ["_native_pairs"]
    seen.clear()
    em.conv_accumulate(*hi)
    assert seen == ["_direct"]
    seen.clear()
    big = np.full((4, 12, 12), 1 << 20, np.int64), np.full((2, 4, 3, 3), 1 << 10, np.int64)
    em.conv_accumulate(*big)
    assert seen == ["_dense"]


@pytest.mark.parametrize("off", ["env", "no compiler"])
def test_without_the_compiled_helper_every_method_is_numpy(monkeypatch, fresh_native, off):
    """HLSNN_NATIVE=0 or no C compiler: "native" is the numpy pair path, "auto" chooses between
    the numpy paths by the numpy cost model, and the bits are the same."""
    rng = np.random.default_rng(stable_seed("off", off))
    xp, w = layer(rng, (8, 20, 20, 8, 3, "same"), 0.05)
    ref = em._dense(xp, w)
    compiled = em.conv_accumulate(xp, w, method="native") if native.c_compiler() else None
    if off == "env":
        monkeypatch.setenv("HLSNN_NATIVE", "0")
    else:
        monkeypatch.setattr(native, "c_compiler", lambda: None)
    native.forget()
    assert em._native_lib() is None and em._native_pairs(xp, w) is None
    seen = _spy(monkeypatch)
    got = em.conv_accumulate(xp, w, method="native")
    assert seen == ["_native_pairs", "_scatter"]
    np.testing.assert_array_equal(got, ref)
    if compiled is not None:
        np.testing.assert_array_equal(got, compiled)
    seen.clear()
    np.testing.assert_array_equal(em.conv_accumulate(xp, w), ref)
    assert "_native_pairs" not in seen and seen[-1] in ("_scatter", "_dense")


def test_an_unknown_method_is_an_error():
    with pytest.raises(ValueError, match="method"):
        em.conv_accumulate(np.zeros((1, 3, 3), np.int64), np.zeros((1, 1, 3, 3), np.int64), method="fast")
