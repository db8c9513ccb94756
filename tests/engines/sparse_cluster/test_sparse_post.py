"""sparse_cluster emulator: rule 5's compiled twin (hlsnn/native/sparse_post.c) gives the bits
of postprocess's float64 path and of postprocess_reference (integer shift_round_sat): every
rounding mode, shifts from -63 to 63, one shift or one per channel, values at the int8 edges,
ties, saturation, up to |t| < 2**53 (beyond it the float path runs), several threads; with
HLSNN_NATIVE=0 the float path runs."""
import numpy as np
import pytest

from hlsnn import native
from hlsnn.engines.sparse_cluster import emulator as em

from conftest import stable_seed

needs_cc = pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")

ROUNDINGS = ("nearest_even", "nearest_away", "truncate")


def float_path(t, shift, rounding, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(em, "_post_compiled", lambda *a: None)
        return em.postprocess(t, 0, shift, rounding=rounding)


def values(rng, shape, mag):
    t = rng.integers(-mag, mag + 1, shape)
    ties = rng.random(shape) < 0.2                     # exact halves and near-halves after the shift
    t[ties] = (rng.integers(-300, 300, int(ties.sum())) * 2 + 1) << rng.integers(0, 8, int(ties.sum()))
    t.reshape(-1)[:4] = [0, -1, mag, -mag]
    return t


@needs_cc
@pytest.mark.parametrize("rounding", ROUNDINGS)
@pytest.mark.parametrize("seed", range(4))
def test_compiled_rule5_equals_the_float_path_and_the_reference(rounding, seed, monkeypatch):
    rng = np.random.default_rng(stable_seed("post", rounding, seed))
    monkeypatch.setattr(em, "POST_MIN_PER_THREAD", 1)          # threads even on small maps
    monkeypatch.setenv("HLSNN_NATIVE_THREADS", str(1 + seed))
    for mag in (127, 1 << 12, (1 << 31) - 1, (1 << 53) - 1):
        z = int(rng.integers(1, 9))
        t = values(rng, (z, int(rng.integers(70, 100)), int(rng.integers(60, 90))), mag)     # >= 4096 values
        for shift in (rng.integers(-63, 64, z), rng.integers(-3, 12, z), int(rng.integers(-9, 40)),
                      np.array([int(rng.integers(0, 20))])):
            got = em._post_compiled(t, shift, rounding)
            assert got is not None
            ref = float_path(t, shift, rounding, monkeypatch)
            np.testing.assert_array_equal(got[0], ref[0])
            assert got[0].dtype == np.int64 and got[1] == ref[1]
            if mag < 1 << 31:
                want = em.postprocess_reference(t, 0, shift, rounding=rounding)
                np.testing.assert_array_equal(got[0], want[0])
                assert got[1] == want[1]
            np.testing.assert_array_equal(em.postprocess(t, 0, shift, rounding=rounding)[0], ref[0])


@needs_cc
def test_beyond_2_to_53_the_float_path_runs(monkeypatch):
    t = np.zeros((2, 80, 80), np.int64)
    t[1, 5, 5] = 1 << 53
    assert em._post_compiled(t, 3, "nearest_even") is None
    t[1, 5, 5] = -(1 << 53)
    assert em._post_compiled(t, 3, "nearest_even") is None
    t[1, 5, 5] = (1 << 53) - 1
    assert em._post_compiled(t, 3, "nearest_even") is not None


def test_small_odd_or_unavailable_cases_take_the_float_path(monkeypatch):
    rng = np.random.default_rng(stable_seed("post-off"))
    t = rng.integers(-5000, 5000, (3, 50, 50))
    assert em._post_compiled(t[:, :10, :10], 4, "nearest_even") is None        # small
    assert em._post_compiled(t.reshape(3, -1), 4, "nearest_even") is None       # not (Z, H, W)
    assert em._post_compiled(t, np.array([1, 2]), "nearest_even") is None       # 2 shifts, 3 channels
    ref = float_path(t, 4, "nearest_away", monkeypatch)
    monkeypatch.setenv("HLSNN_NATIVE", "0")
    native.forget()
    try:
        assert em._post_compiled(t, 4, "nearest_away") is None
        got = em.postprocess(t, 0, 4, rounding="nearest_away")
    finally:
        native.forget()
    np.testing.assert_array_equal(got[0], ref[0])
    assert got[1] == ref[1]


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("pool", [False, True])
@pytest.mark.parametrize("bias", ["channels", "one", "zero"])
def test_own_acc_gives_the_same_results_and_only_it_writes_acc(relu, pool, bias):
    rng = np.random.default_rng(stable_seed("own", relu, pool, bias))
    acc = rng.integers(-(1 << 20), 1 << 20, (5, 33, 34))
    b = {"channels": rng.integers(-5000, 5000, 5), "one": np.array([77]), "zero": 0}[bias]
    keep = acc.copy()
    for raw, stats in ((True, False), (False, True)):
        ref = em.postprocess(acc, b, 6, relu=relu, pool=pool, raw=raw, stats=stats)
        np.testing.assert_array_equal(acc, keep)                     # not written without own_acc
        mine = acc.copy()
        got = em.postprocess(mine, b, 6, relu=relu, pool=pool, raw=raw, stats=stats, own_acc=True)
        for a, r in zip(got, ref):
            np.testing.assert_array_equal(a, r)
    one = acc[:1].copy()                                             # a bias that broadcasts it larger
    got = em.postprocess(one, np.arange(3), 0, raw=True, own_acc=True)[0]
    assert got.shape == (3, 33, 34)
    np.testing.assert_array_equal(one, acc[:1])
