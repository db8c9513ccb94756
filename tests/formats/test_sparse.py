"""Tests of hlsnn.formats.sparse.

Expected values never come from the code under test. They are worked by hand (T4.5), built
element by element with Python loops (entry lists), recomputed by brute force (rectangle
counts summed straight from the map, coverage painted into a counter array, every guillotine
partition of a small map enumerated with itertools), or planted: maps built around a known
balanced partition with exact per-cell counts.
"""
import itertools
import json
import time

import numpy as np
import pytest

from conftest import stable_seed
from hlsnn.errors import InputError
from hlsnn.formats import sparse
from hlsnn.formats.sparse import (Partition, SparseKernel, SparseMap, compress_kernel,
                                  compress_map, default_grid, partition)

DENSITIES = (0.0, 0.1, 0.5, 1.0)
KERNEL_SHAPES = [(1, 1, 1, 1), (3, 2, 3, 3), (2, 5, 1, 1), (4, 3, 5, 5), (1, 7, 2, 3)]
MAP_SHAPES = [(1, 1), (5, 7), (13, 4), (0, 3), (2, 9, 11), (3, 1, 6), (4, 0, 2)]


def random_ints(rng, shape, density):
    """Non-zero values in [-128, 127] \\ {0} at the given density, zeros elsewhere."""
    vals = rng.integers(1, 128, size=shape) * rng.choice([-1, 1], size=shape)
    return np.where(rng.random(shape) < density, vals, 0).astype(np.int64)


# ------------------------------------------------------------------ independent references

def ref_rect_count(fmap, rect):
    """Non-zeros of a rectangle, summed straight from the map (over channels for 3-D)."""
    r0, r1, c0, c1 = rect
    return int(np.count_nonzero(np.asarray(fmap)[..., r0:r1, c0:c1]))


def ref_pcts(fmap, rects):
    f = np.asarray(fmap)
    depth = f.shape[0] if f.ndim == 3 else 1
    return [ref_rect_count(f, r) / (1.0 * depth * (r[1] - r[0]) * (r[3] - r[2])) for r in rects]


def ref_spread(fmap, rects):
    p = ref_pcts(fmap, rects)
    return max(p) - min(p)


def rects_from_cuts(rcuts, ccuts):
    return [(rcuts[b], rcuts[b + 1], cc[j], cc[j + 1])
            for b, cc in enumerate(ccuts) for j in range(len(cc) - 1)]


def ref_equal_rects(H, W, gr, gc):
    """Equal split by the documented rule floor(i * n / parts), with Python ints."""
    rc = [i * H // gr for i in range(gr + 1)]
    cc = [j * W // gc for j in range(gc + 1)]
    return rects_from_cuts(rc, [cc] * gr)


def paint(shape, rects):
    """How many rectangles cover each pixel."""
    cover = np.zeros(shape, dtype=np.int64)
    for r0, r1, c0, c1 in rects:
        cover[r0:r1, c0:c1] += 1
    return cover


def brute_min_spread(fmap, gr, gc):
    """Smallest spread over EVERY gr x gc guillotine partition (tiny maps only)."""
    f = np.asarray(fmap) != 0
    H, W = f.shape
    S = np.zeros((H + 1, W + 1), dtype=np.int64)
    S[1:, 1:] = f.cumsum(0).cumsum(1)
    S = S.tolist()
    colopts = [(0,) + c + (W,) for c in itertools.combinations(range(1, W), gc - 1)]
    best = None
    for rc in itertools.combinations(range(1, H), gr - 1):
        rcuts = (0,) + rc + (H,)
        per_band = []
        for r0, r1 in zip(rcuts, rcuts[1:]):
            opts = []
            for cuts in colopts:
                p = [(S[r1][c1] - S[r0][c1] - S[r1][c0] + S[r0][c0]) / (1.0 * (r1 - r0) * (c1 - c0))
                     for c0, c1 in zip(cuts, cuts[1:])]
                opts.append((min(p), max(p)))
            per_band.append(opts)
        for combo in itertools.product(*per_band):
            s = max(c[1] for c in combo) - min(c[0] for c in combo)
            best = s if best is None else min(best, s)
    return best


def greedy_one_step(fmap, gr, gc, T, max_moves=10_000):
    """The naive baseline: from the equal split, move ONE boundary by ONE row/column while
    that lowers the spread (best move first); stop when no single move helps."""
    f = np.asarray(fmap) != 0
    H, W = f.shape
    rc = [i * H // gr for i in range(gr + 1)]
    cc = [[j * W // gc for j in range(gc + 1)] for _ in range(gr)]
    cur = ref_spread(f, rects_from_cuts(rc, cc))
    for _ in range(max_moves):
        if cur <= T:
            break
        best = None
        for t in range(1, gr):
            for step in (-1, 1):
                new = rc[t] + step
                if rc[t - 1] < new < rc[t + 1]:
                    rc2 = rc[:t] + [new] + rc[t + 1:]
                    s = ref_spread(f, rects_from_cuts(rc2, cc))
                    if best is None or s < best[0]:
                        best = (s, rc2, cc)
        for b in range(gr):
            for j in range(1, gc):
                for step in (-1, 1):
                    new = cc[b][j] + step
                    if cc[b][j - 1] < new < cc[b][j + 1]:
                        cc2 = [list(row) for row in cc]
                        cc2[b][j] = new
                        s = ref_spread(f, rects_from_cuts(rc, cc2))
                        if best is None or s < best[0]:
                            best = (s, rc, cc2)
        if best is None or best[0] >= cur:
            break
        cur, rc, cc = best
    return cur


def planted_map(H, W, rcuts, ccuts, frac, seed):
    """A 0/1 map in which every cell of the given partition holds exactly
    round(frac * area) non-zeros, clustered toward a random corner of the cell (so that
    other partitions, the equal split in particular, see very uneven fractions)."""
    rng = np.random.default_rng(seed)
    f = np.zeros((H, W), dtype=np.int64)
    for r0, r1, c0, c1 in rects_from_cuts(rcuts, ccuts):
        h, w = r1 - r0, c1 - c0
        k = int(round(frac * h * w))
        cy, cx = rng.integers(0, 2, size=2) * np.array([h - 1, w - 1])
        yy, xx = np.mgrid[0:h, 0:w]
        score = np.abs(yy - cy) / h + np.abs(xx - cx) / w + 0.05 * rng.random((h, w))
        flat = np.zeros(h * w, dtype=np.int64)
        flat[np.argsort(score, axis=None, kind="stable")[:k]] = 1
        f[r0:r1, c0:c1] = flat.reshape(h, w)
    return f


# (H, W, rcuts, ccuts per band, seed): cut positions far from the equal split
PLANTED = [
    (48, 64, [0, 13, 48], [[0, 50, 64], [0, 11, 64]], 1),           # units 4 (2 x 2)
    (48, 64, [0, 37, 48], [[0, 9, 64], [0, 55, 64]], 7),            # units 4 (2 x 2)
    (40, 60, [0, 40], [[0, 9, 60]], 2),                             # units 2 (1 x 2)
    (30, 72, [0, 30], [[0, 7, 58, 72]], 3),                         # units 3 (1 x 3)
    (64, 64, [0, 50, 64], [[0, 8, 20, 64], [0, 45, 57, 64]], 4),    # units 6 (2 x 3)
    (60, 80, [0, 9, 60], [[0, 5, 61, 70, 80], [0, 30, 36, 71, 80]], 5),   # units 8 (2 x 4)
]


def check_partition(p, fmap, units, threshold=0.03):
    """Every documented property, recomputed independently."""
    f = np.asarray(fmap)
    H, W = f.shape[-2:]
    gr, gc = p.grid
    assert gr * gc == units == len(p.rects) == p.units
    assert p.shape == (H, W)
    # exact tiling, non-empty rectangles
    assert np.array_equal(paint((H, W), p.rects), np.ones((H, W), dtype=np.int64))
    assert all(r1 > r0 and c1 > c0 for r0, r1, c0, c1 in p.rects)
    # band by band, left to right; a band shares its rows; cuts describe the rects
    for b in range(gr):
        band = p.rects[b * gc:(b + 1) * gc]
        assert {(r[0], r[1]) for r in band} == {(p.row_cuts[b], p.row_cuts[b + 1])}
        assert [r[2] for r in band] == list(p.col_cuts[b][:-1])
        assert [r[3] for r in band] == list(p.col_cuts[b][1:])
    assert p.rects == rects_from_cuts(list(p.row_cuts), [list(c) for c in p.col_cuts])
    # counts and metrics
    counts = [ref_rect_count(f, r) for r in p.rects]
    assert p.nz.tolist() == counts and p.work.tolist() == counts
    pcts = ref_pcts(f, p.rects)
    np.testing.assert_allclose(p.nz_pct, pcts, rtol=0, atol=1e-15)
    assert p.spread == pytest.approx(max(pcts) - min(pcts), abs=1e-15)
    mean = sum(counts) / len(counts)
    assert p.imbalance == pytest.approx(max(counts) / mean if mean else 1.0, rel=1e-12)
    assert p.status in sparse.STATUSES
    assert (p.status == "balanced") == (p.spread <= threshold + 1e-6)
    # the equal split, recomputed from the documented rule
    eq = ref_equal_rects(H, W, gr, gc)
    assert p.equal_split.rects == eq
    assert p.equal_split.nz.tolist() == [ref_rect_count(f, r) for r in eq]
    assert p.equal_split.spread == pytest.approx(ref_spread(f, eq), abs=1e-15)
    # never worse than the equal split
    assert p.spread <= p.equal_split.spread + 1e-15


# ------------------------------------------------------------------ compressed kernels

@pytest.mark.parametrize("shape", KERNEL_SHAPES)
@pytest.mark.parametrize("density", DENSITIES)
def test_kernel_round_trip_and_order(shape, density):
    rng = np.random.default_rng(stable_seed(shape, density))
    w = random_ints(rng, shape, density)
    sk = compress_kernel(w)
    Z, C, KH, KW = shape
    # reference entry stream, element by element in the documented order
    ref = [(int(w[z, kz, ky, kx]), z, kz, ky, kx)
           for kz in range(C) for z in range(Z) for ky in range(KH) for kx in range(KW)
           if w[z, kz, ky, kx] != 0]
    got = list(zip(sk.coef.tolist(), sk.z.tolist(), sk.kz.tolist(), sk.ky.tolist(),
                   sk.kx.tolist()))
    assert got == ref
    keys = [(kz, z, ky, kx) for _, z, kz, ky, kx in got]
    assert keys == sorted(set(keys))                     # strictly increasing
    assert sk.nnz == len(ref) == int(np.count_nonzero(w))
    assert sk.shape == shape
    assert sk.density == pytest.approx(len(ref) / w.size)
    for arr in (sk.coef, sk.z, sk.kz, sk.ky, sk.kx):
        assert arr.dtype == np.int64 and arr.ndim == 1 and not arr.flags.writeable
    dense = sk.decompress()
    assert dense.dtype == np.int64 and np.array_equal(dense, w)
    assert sk.nnz_per_channel().tolist() == [int(np.count_nonzero(w[:, c])) for c in range(C)]
    for kz in range(C):
        ref_kz = [(c, z, ky, kx) for c, z, k, ky, kx in ref if k == kz]
        assert list(sk.coefficients(kz)) == ref_kz
        coef, z, ky, kx = sk.entries(kz)
        assert list(zip(coef.tolist(), z.tolist(), ky.tolist(), kx.tolist())) == ref_kz


def test_kernel_t45_entry_stream_by_hand():
    """SPECS T4.5: dense -> entries (coef, kx, ky) with zeros dropped -> dense."""
    w = np.zeros((2, 1, 3, 3), dtype=np.int64)
    w[0, 0] = [[0, 4, 0], [0, 0, 0], [-2, 0, 9]]
    w[1, 0] = [[0, 0, 0], [7, 0, 0], [0, 0, 0]]
    sk = compress_kernel(w)
    # by hand: kernel 0 row-major (0,1)=4, (2,0)=-2, (2,2)=9; then kernel 1 (1,0)=7
    assert list(sk.coefficients(0)) == [(4, 0, 0, 1), (-2, 0, 2, 0), (9, 0, 2, 2), (7, 1, 1, 0)]
    assert sk.nnz == 4 and sk.density == 4 / 18
    assert np.array_equal(sk.decompress(), w)


def test_kernel_coefficients_is_lazy_one_at_a_time():
    sk = compress_kernel([[[[0, 3], [5, 0]]]])
    it = sk.coefficients(0)
    assert next(it) == (3, 0, 0, 1)
    assert next(it) == (5, 0, 1, 0)
    with pytest.raises(StopIteration):
        next(it)
    assert all(type(v) is int for v in next(iter(sk.coefficients(0))))


def test_kernel_from_entries_validates():
    sk = SparseKernel([5, -1], [0, 1], [0, 0], [1, 0], [0, 1], (2, 1, 2, 2))
    assert sk.decompress()[1, 0, 0, 1] == -1
    with pytest.raises(InputError, match="zero"):
        SparseKernel([0], [0], [0], [0], [0], (1, 1, 1, 1))
    with pytest.raises(InputError, match="strictly increasing"):
        SparseKernel([1, 2], [0, 0], [1, 0], [0, 0], [0, 0], (1, 2, 1, 1))    # kz not sorted
    with pytest.raises(InputError, match="strictly increasing"):
        SparseKernel([1, 2], [0, 0], [0, 0], [0, 0], [0, 0], (1, 1, 1, 1))    # duplicate
    with pytest.raises(InputError, match="ky"):
        SparseKernel([1], [0], [0], [3], [0], (1, 1, 3, 3))
    with pytest.raises(InputError, match="length"):
        SparseKernel([1, 2], [0], [0, 0], [0, 0], [0, 1], (1, 1, 1, 2))
    with pytest.raises(InputError, match="shape"):
        SparseKernel([1], [0], [0], [0], [0], (1, 1, 1))


@pytest.mark.parametrize("bad", [np.zeros((2, 2, 3)), np.zeros((1, 0, 3, 3)),
                                 [[[[0.5]]]], [[[["a"]]]]])
def test_compress_kernel_errors(bad):
    with pytest.raises(InputError, match="^w"):
        compress_kernel(bad)


def test_kernel_channel_out_of_range():
    sk = compress_kernel(np.ones((1, 2, 1, 1), dtype=int))
    for kz in (-1, 2, 1.0):
        with pytest.raises(InputError, match="kz"):
            sk.entries(kz)
        with pytest.raises(InputError, match="kz"):
            sk.coefficients(kz)                 # raised at the call, not at next()


# ------------------------------------------------------------------ compressed maps

@pytest.mark.parametrize("shape", MAP_SHAPES)
@pytest.mark.parametrize("density", DENSITIES)
def test_map_round_trip_and_order(shape, density):
    rng = np.random.default_rng(stable_seed(shape, density, "map"))
    f = random_ints(rng, shape, density)
    sm = compress_map(f, origin=(3, 11))
    f3 = f if f.ndim == 3 else f[None]
    ref = [(int(f3[c, r, k]), c, r, k) for c in range(f3.shape[0]) for r in range(f3.shape[1])
           for k in range(f3.shape[2]) if f3[c, r, k] != 0]
    got = list(zip(sm.values.tolist(), sm.chan.tolist(), sm.rows.tolist(), sm.cols.tolist()))
    assert got == ref
    keys = [g[1:] for g in got]
    assert keys == sorted(set(keys))
    assert sm.origin == (3, 11) and sm.shape == shape and sm.nnz == len(ref)
    for arr in (sm.values, sm.rows, sm.cols, sm.chan):
        assert arr.dtype == np.int64 and not arr.flags.writeable
    dense = sm.decompress()
    assert dense.dtype == np.int64 and np.array_equal(dense, f)
    assert sm.nnz_per_channel().tolist() == [int(np.count_nonzero(f3[c]))
                                             for c in range(f3.shape[0])]


def test_map_origin_places_the_submap():
    full = np.random.default_rng(0).integers(-3, 4, size=(20, 30))
    r0, r1, c0, c1 = 4, 13, 7, 22
    sm = compress_map(full[r0:r1, c0:c1], origin=(r0, c0))
    rows, cols = sm.rows + sm.origin[0], sm.cols + sm.origin[1]
    assert np.array_equal(full[rows, cols], sm.values)
    assert np.count_nonzero(full[r0:r1, c0:c1]) == sm.nnz


@pytest.mark.parametrize("bad, origin, match", [
    (np.zeros(5), (0, 0), "^fmap"), (np.zeros((1, 2, 3, 4)), (0, 0), "^fmap"),
    ([[0.25]], (0, 0), "^fmap"), ([[1]], (-1, 0), "^origin"), ([[1]], (0,), "^origin"),
])
def test_compress_map_errors(bad, origin, match):
    with pytest.raises(InputError, match=match):
        compress_map(bad, origin=origin)


def test_map_from_entries_validates():
    assert SparseMap([2], [1], [0], [0], (2, 2)).decompress().tolist() == [[0, 0], [2, 0]]
    with pytest.raises(InputError, match="strictly increasing"):
        SparseMap([1, 2], [1, 0], [0, 0], [0, 0], (2, 2))
    with pytest.raises(InputError, match="cols"):
        SparseMap([1], [0], [2], [0], (2, 2))


# ------------------------------------------------------------------ partition: properties

def test_default_grid_is_the_squarest_factor_pair():
    for u in range(1, 101):
        pairs = [(a, u // a) for a in range(1, u + 1) if u % a == 0 and a <= u // a]
        assert default_grid(u) == min(pairs, key=lambda p: p[1] - p[0])
    assert default_grid(7) == (1, 7) and default_grid(12) == (3, 4)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("units", [1, 2, 3, 4, 5, 6, 8, 12, 16])
def test_partition_properties_random(seed, units):
    rng = np.random.default_rng(1000 * seed + units)
    H, W = rng.integers(16, 70, size=2)
    density = [0.02, 0.1, 0.3, 0.6, 0.9, 0.5][seed]
    f = (rng.random((H, W)) < density).astype(np.int64)
    if seed % 2:                                      # a dense blob: equal split unbalanced
        f[:H // 3, W // 2:] = rng.random((H // 3, W - W // 2)) < 0.95
    p = partition(f, units)
    check_partition(p, f, units)
    assert p.grid == default_grid(units)
    q = partition(f, units)
    assert q.rects == p.rects and q.spread == p.spread and q.status == p.status


def test_partition_accepts_any_numeric_map():
    rng = np.random.default_rng(3)
    f = rng.normal(size=(20, 24)) * (rng.random((20, 24)) < 0.3)
    for arr in (f, f.astype(np.float32), f != 0, (f * 1j)):
        p = partition(arr, 4)
        check_partition(p, f != 0, 4)


def test_partition_fast_path_returns_the_equal_split():
    f = np.zeros((20, 20), dtype=int)
    f[::2, ::2] = 1                                   # perfectly uniform
    p = partition(f, 4)
    assert p.rects == ref_equal_rects(20, 20, 2, 2) and p.spread == 0.0
    assert p.status == "balanced" and p.imbalance == 1.0


def test_all_zero_map():
    p = partition(np.zeros((9, 9)), 3)
    assert p.status == "balanced" and p.spread == 0.0 and p.imbalance == 1.0
    assert p.nz.tolist() == [0, 0, 0]


def test_3d_map_counts_over_channels():
    rng = np.random.default_rng(11)
    f = (rng.random((3, 30, 40)) < 0.2).astype(np.int64)
    f[:, :10, :10] = 1
    p = partition(f, 4)
    check_partition(p, f, 4)
    for r, n, pct in zip(p.rects, p.nz, p.nz_pct):
        area = (r[1] - r[0]) * (r[3] - r[2])
        assert n == sum(np.count_nonzero(f[c, r[0]:r[1], r[2]:r[3]]) for c in range(3))
        assert pct == n / (3 * area)
    one = partition(f[:1], 4)
    two = partition(f[0], 4)
    assert one.rects == two.rects and one.nz.tolist() == two.nz.tolist()


def test_grid_override():
    f = (np.random.default_rng(5).random((30, 30)) < 0.2).astype(int)
    p = partition(f, 6, grid=(3, 2))
    assert p.grid == (3, 2)
    check_partition(p, f, 6)
    p = partition(f, 6, grid=[6, 1])
    assert p.grid == (6, 1) and all(r[2:] == (0, 30) for r in p.rects)


# ------------------------------------------------------------------ partition: exactness

SMALL = [(6, 7, (2, 2)), (5, 9, (1, 3)), (9, 4, (3, 1)), (6, 8, (2, 3)), (8, 8, (2, 2)),
         (7, 10, (1, 4))]


@pytest.mark.parametrize("trial", range(24))
def test_small_maps_against_brute_force(trial):
    """Every guillotine partition is enumerated: at T = the smallest spread that exists the
    search must say balanced, just below it best_effort, and never beat the optimum."""
    rng = np.random.default_rng(trial)
    H, W, (gr, gc) = SMALL[trial % len(SMALL)]
    f = (rng.random((H, W)) < rng.uniform(0.1, 0.7)).astype(np.int64)
    if trial % 3 == 0:
        f[:H // 2, :W // 2] = rng.random((H // 2, W // 2)) < 0.9
    best = brute_min_spread(f, gr, gc)
    units = gr * gc
    p = partition(f, units, grid=(gr, gc), threshold=best)
    check_partition(p, f, units, threshold=best)
    assert p.status == "balanced" and p.spread <= best + 1e-9
    if best > 1e-6:
        q = partition(f, units, grid=(gr, gc), threshold=best - 1e-6)
        assert q.status == "best_effort"
        assert q.spread >= best - 1e-12               # nothing beats the optimum
        assert q.spread <= q.equal_split.spread


@pytest.mark.parametrize("case", PLANTED, ids=lambda c: f"{c[0]}x{c[1]}-u{(len(c[2]) - 1) * (len(c[3][0]) - 1)}")
def test_planted_balanced_partition_is_found(case):
    H, W, rcuts, ccuts, seed = case
    f = planted_map(H, W, rcuts, ccuts, 0.3, seed)
    gr, gc = len(rcuts) - 1, len(ccuts[0]) - 1
    units = gr * gc
    planted = rects_from_cuts(rcuts, ccuts)
    # the construction: every planted cell is at 0.3 up to rounding of its count ...
    assert ref_spread(f, planted) <= 0.025
    # ... while the equal split is far from balanced
    assert ref_spread(f, ref_equal_rects(H, W, gr, gc)) > 0.2
    p = partition(f, units, grid=(gr, gc))
    check_partition(p, f, units)
    assert p.status == "balanced" and p.spread <= 0.03


def test_planted_maps_defeat_the_one_step_greedy():
    """The planted maps really discriminate: moving one boundary by one row/column at a
    time stalls above the threshold on (at least) one of them."""
    stalled = []
    for H, W, rcuts, ccuts, seed in PLANTED[:4]:
        f = planted_map(H, W, rcuts, ccuts, 0.3, seed)
        gr, gc = len(rcuts) - 1, len(ccuts[0]) - 1
        s = greedy_one_step(f, gr, gc, 0.03)
        stalled.append(s > 0.03)
        assert partition(f, gr * gc, grid=(gr, gc)).status == "balanced"
    assert any(stalled), stalled


def test_infeasible_single_dense_pixel():
    # 6 x 6 in 2 x 2: the pixel's cell is at most 5 x 5, so its fraction is >= 1/25 = 0.04
    # while some other cell has none: no partition reaches 0.03.
    f = np.zeros((6, 6), dtype=int)
    f[2, 4] = 1
    best = brute_min_spread(f, 2, 2)
    assert best == pytest.approx(1 / 25)
    p = partition(f, 4)
    check_partition(p, f, 4)
    assert p.status == "best_effort" and p.spread >= best - 1e-12
    assert p.spread <= p.equal_split.spread
    assert p.spread == pytest.approx(best)             # here the optimum is reached
    assert json.loads(json.dumps(p.summary()))["status"] == "best_effort"
    big = np.zeros((16, 16), dtype=int)
    big[5, 9] = 1
    q = partition(big, 4, threshold=0.001)             # 1/225 > 0.001 at best
    check_partition(q, big, 4, threshold=0.001)
    assert q.status == "best_effort" and q.spread <= q.equal_split.spread


def test_best_effort_never_worse_than_equal_split():
    rng = np.random.default_rng(8)
    for trial in range(6):
        f = np.zeros((40, 50), dtype=int)
        y, x = rng.integers(0, 30, size=2)
        f[y:y + 10, x:x + 12] = 1                      # one dense block: infeasible
        for units in (4, 6, 9):
            p = partition(f, units, threshold=0.01)
            check_partition(p, f, units, threshold=0.01)
            assert p.spread <= p.equal_split.spread


def test_threshold_zero_and_one():
    f = np.zeros((12, 12), dtype=int)
    f[:, :4] = f[:, 10:] = 1       # by hand: 4 / c == 2 / (12 - c) only at the cut c = 8
    p = partition(f, 2, threshold=0.0)
    assert p.status == "balanced" and p.spread == 0.0
    assert p.rects == [(0, 12, 0, 8), (0, 12, 8, 12)]
    check_partition(p, f, 2, threshold=0.0)
    f[0, 0] = 7
    assert partition(f, 4, threshold=1.0).rects == ref_equal_rects(12, 12, 2, 2)


# ------------------------------------------------------------------ halo, folds, summary

@pytest.mark.parametrize("halo", [0, 1, 2, 5])
def test_halo_rects(halo):
    rng = np.random.default_rng(halo)
    f = (rng.random((25, 31)) < 0.15).astype(int)
    f[:8, :8] = 1
    p = partition(f, 6, halo=halo)
    assert p.halo == halo and len(p.halo_rects) == len(p.rects)
    for (r0, r1, c0, c1), hr in zip(p.rects, p.halo_rects):
        assert hr == (max(0, r0 - halo), min(25, r1 + halo), max(0, c0 - halo), min(31, c1 + halo))
        assert hr[0] <= r0 and hr[1] >= r1 and hr[2] <= c0 and hr[3] >= c1
    if halo == 0:
        assert p.halo_rects == p.rects
    # the cores are what was balanced: same as without a halo
    assert p.rects == partition(f, 6).rects


@pytest.mark.parametrize("max_tile", [(1, 1), (3, 5), (7, 4), (100, 100), (10, 1)])
def test_folds_cover_each_core(max_tile):
    f = (np.random.default_rng(2).random((23, 29)) < 0.3).astype(int)
    p = partition(f, 4, max_tile=max_tile)
    th, tw = max_tile
    for core, folds in zip(p.rects, p.folds):
        r0, r1, c0, c1 = core
        cover = paint((23, 29), folds)
        assert cover[r0:r1, c0:c1].min() == 1 and cover.sum() == (r1 - r0) * (c1 - c0)
        assert all(b - a <= th and d - c <= tw and b > a and d > c for a, b, c, d in folds)
        assert folds == sorted(folds, key=lambda t: (t[0], t[2]))          # row-major
        assert len(folds) == -(-(r1 - r0) // th) * -(-(c1 - c0) // tw)
    assert partition(f, 4).folds == [[r] for r in p.rects]


def test_t37_time_folding_2048():
    """SPECS T3.7: a 2048 x 2048 input with max 1024 x 1024 -> four 1024 x 1024 maps."""
    f = np.zeros((2048, 2048), dtype=np.uint8)
    p = partition(f, 1, max_tile=(1024, 1024))
    assert p.rects == [(0, 2048, 0, 2048)]
    assert p.folds == [[(0, 1024, 0, 1024), (0, 1024, 1024, 2048),
                        (1024, 2048, 0, 1024), (1024, 2048, 1024, 2048)]]
    f[::97, ::89] = 1
    q = partition(f, 4, max_tile=(512, 512))
    assert all(len(folds) == 4 for folds in q.folds)


def test_summary():
    f = np.zeros((10, 10), dtype=int)
    f[:3, :3] = 1
    p = partition(f, 2)
    s = json.loads(json.dumps(p.summary()))
    assert s["rects"] == [list(r) for r in p.rects]
    assert s["nz"] == p.nz.tolist() and s["nz_pct"] == p.nz_pct.tolist()
    assert s["spread"] == p.spread and s["imbalance"] == p.imbalance and s["status"] == p.status
    assert s["equal_spread"] == p.equal_split.spread
    assert s["equal_imbalance"] == p.equal_split.imbalance
    assert isinstance(p, Partition)


# ------------------------------------------------------------------ partition: errors

@pytest.mark.parametrize("kwargs, match", [
    (dict(fmap=np.zeros((8, 8)), units=0), "^units"),
    (dict(fmap=np.zeros((8, 8)), units=2.0), "^units"),
    (dict(fmap=np.zeros((8, 8)), units=True), "^units"),
    (dict(fmap=np.zeros(8), units=2), "^fmap"),
    (dict(fmap=np.zeros((2, 2, 2, 2)), units=2), "^fmap"),
    (dict(fmap=np.array([["a", "b"]]), units=1), "^fmap"),
    (dict(fmap=np.zeros((0, 4, 4)), units=1), "^fmap"),
    (dict(fmap=np.zeros((8, 8)), units=2, threshold=-0.01), "^threshold"),
    (dict(fmap=np.zeros((8, 8)), units=2, threshold=1.5), "^threshold"),
    (dict(fmap=np.zeros((8, 8)), units=2, threshold=float("nan")), "^threshold"),
    (dict(fmap=np.zeros((8, 8)), units=2, threshold="0.1"), "^threshold"),
    (dict(fmap=np.zeros((1, 8)), units=4), "^fmap"),                # H = 1 < gr = 2
    (dict(fmap=np.zeros((8, 2)), units=3), "^fmap"),                # W = 2 < gc = 3
    (dict(fmap=np.zeros((8, 8)), units=4, grid=(3, 2)), "^grid"),
    (dict(fmap=np.zeros((8, 8)), units=4, grid=(4,)), "^grid"),
    (dict(fmap=np.zeros((8, 8)), units=2, halo=-1), "^halo"),
    (dict(fmap=np.zeros((8, 8)), units=2, max_tile=(0, 4)), "^max_tile"),
    (dict(fmap=np.zeros((8, 8)), units=2, max_tile=4), "^max_tile"),
])
def test_partition_errors(kwargs, match):
    with pytest.raises(InputError, match=match) as exc:
        partition(**kwargs)
    assert "\n" not in str(exc.value)


# ------------------------------------------------------------------ smoke: 1024 x 1024

def blob_map(n, seed, blobs=5, background=0.02):
    rng = np.random.default_rng(seed)
    m = rng.random((n, n)) < background
    yy, xx = np.ogrid[0:n, 0:n]
    for _ in range(blobs):
        cy, cx = rng.integers(0, n, size=2)
        r = rng.integers(n // 20, n // 6)
        m |= ((yy - cy) ** 2 + (xx - cx) ** 2 < r * r) & (rng.random((n, n)) < 0.8)
    return m.astype(np.uint8)


def test_smoke_1024_timing(capsys):
    maps = [("random 0.1", (np.random.default_rng(0).random((1024, 1024)) < 0.1)),
            ("blobs", blob_map(1024, 0)), ("blobs", blob_map(1024, 2, blobs=2))]
    lines = []
    for name, f in maps:
        for units in (4, 16):
            t0 = time.perf_counter()
            p = partition(f, units)
            dt = time.perf_counter() - t0
            assert np.array_equal(paint(f.shape, p.rects), np.ones(f.shape, dtype=np.int64))
            assert p.spread <= p.equal_split.spread
            lines.append(f"1024x1024 {name:10s} units={units:2d}: {dt * 1e3:7.1f} ms  "
                         f"{p.status:11s} spread {p.spread:.4f} (equal split "
                         f"{p.equal_split.spread:.4f}), imbalance {p.imbalance:.2f}")
    with capsys.disabled():
        print("\n" + "\n".join(lines))
