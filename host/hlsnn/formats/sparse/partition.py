"""The sparsity-balanced partitioner of the sparse accelerators (source 003, Alg 3-A/3-B/3-C):
:func:`partition` and its result types :class:`Split` and :class:`Partition`.

This is the algorithm in short; the full rules (topology, metric, tolerance, inputs, the
search's guarantee) are in the package docstring, :mod:`hlsnn.formats.sparse`.

What is partitioned
    A 2-D ``(H, W)`` or 3-D ``(C, H, W)`` feature map, each pixel weighted by its number of
    non-zero channels, into ``units = gr * gc`` rectangles: ``gr`` row bands, each cut on its
    own into ``gc`` cells. A partition is its cuts: ``gr + 1`` row cuts and, per band,
    ``gc + 1`` column cuts. Every count comes from one 2-D prefix sum ``S``.
Objective
    A cell's non-zero fraction is ``nz / (C * area)``; ``spread = max - min`` of the fractions
    should be at most ``threshold`` (``T``), up to a rounding tolerance ``tol``. An equal split
    that meets it is returned as is. (``balance="work"`` searches nothing: equal-count quantile
    cuts if their ``imbalance = max(nz) / mean(nz)`` is below the equal split's, else the
    equal split.)
Window test (:meth:`_Searcher.search`)
    Is there a partition with every fraction in a window ``[lo, hi]``, its cuts on candidate
    positions (along a dimension of length ``n <= 96`` every position, else every
    ``ceil(n / 96)``-th)? A DP over the band cuts: for band index 0, 1, ..., the row cuts
    where that band can start, reached through *usable* bands. A band is usable when its own
    fraction is in the window and its columns can be cut into ``gc`` cells in the window
    (:func:`_bands_ok`: a second DP, over the column cuts, where one more cell is a running
    maximum or minimum over the positions sorted by ``P - lo * C * h * x``; ``gc // 2`` cells
    forward from column 0, the rest backward from ``W``). A hit walks back to the smallest
    row cuts, then each band's smallest column cuts (:func:`_band_cuts`).
Branch and bound (:meth:`_Searcher.find`)
    The smallest fraction ``m`` of a partition with ``spread <= T`` lies in ``[d - T, d]``
    (``d`` the fraction of the whole map). An interval ``[a, b]`` of ``m`` is tested with the
    window ``[a, b + T]``: a miss drops it, a hit with ``spread <= T`` is the answer, any other
    hit splits it in halves (lower half first) while it is wider than ``tol``; at most 64
    window tests.
Best effort and polish (:func:`_best_effort`, :func:`_polish`)
    When that finds nothing: on coarser candidates (64 per dimension), thresholds ``2t, 4t,
    ...`` up to 1 (``t = max(T, 2**-10)``, 16 tests each) until one is met, then up to 6
    bisection steps between the last missed threshold and the best spread found. The hit (if
    any) and the equal split are each polished: coordinate descent at pixel resolution, every
    cut in turn moved to the position between its neighbours that gives the smallest spread
    (strict improvements only), until no cut moves (at most 64 sweeps). Of the equal split,
    the polished hit and the polished equal split the smallest spread wins (the earlier on
    ties), so the result is never worse than the equal split.
The result (:class:`Partition`)
    The cuts and the core rectangles (band by band, left to right) with their ``nz``,
    ``nz_pct``, ``spread`` and ``imbalance``; ``status`` (``"balanced"`` when
    ``spread <= T + 2 * tol``, or for ``"work"`` ``imbalance - 1 <= T + 2 * tol``, else
    ``"best_effort"``); ``halo_rects`` (cores grown by ``halo``, clipped to the map); the time
    ``folds`` (each core cut into tiles of at most ``max_tile``); and ``equal_split``, the same
    summary (a :class:`Split`) of the equal split.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from hlsnn.errors import InputError

__all__ = ["STATUSES", "MAX_CANDIDATES", "Split", "Partition", "partition", "default_grid",
           "equal_cuts"]

#: The possible values of :attr:`Partition.status`.
STATUSES = ("balanced", "best_effort")

#: A dimension up to this length is searched at every position; longer ones every
#: ``ceil(n / MAX_CANDIDATES)``-th position.
MAX_CANDIDATES = 96

_BEST_EFFORT_CANDIDATES = 64   # candidate positions per dimension in best-effort mode
_BUDGET = 64                   # window searches of the balanced search
_BUDGET_BEST_EFFORT = 16       # ... per threshold tried in best-effort mode
_BISECT_STEPS = 6
_POLISH_SWEEPS = 64


def _tolerance(H: int, W: int) -> float:
    """Rounding tolerance of the fraction comparisons: it stays well above the float64
    noise of counts up to ``C * H * W`` (see :func:`_bands_ok`)."""
    return max(1e-9, 1e-13 * H * W)


# --------------------------------------------------------------------------- validation

from .._validate import check_int_range as _check_int_range  # noqa: E402
from .compress import _check_pair  # noqa: E402


def _check_threshold(value) -> float:
    ok = (isinstance(value, (int, float, np.integer, np.floating))
          and not isinstance(value, (bool, np.bool_)))
    if not ok or not (0.0 <= float(value) <= 1.0):
        raise InputError(f"threshold = {value!r}: must be a number in [0, 1] (a fraction: "
                         f"0.03 = 3 percentage points)")
    return float(value)


# --------------------------------------------------------------------------- partition types

@dataclass(frozen=True, eq=False)
class Split:
    """Summary of one partition of a map: rectangles, counts and balance.

    Attributes
    ----------
    rects : list of tuple of int
        Half-open ``(row0, row1, col0, col1)`` rectangles, band by band, left to right.
    nz : numpy.ndarray of int64
        Non-zero count of each rectangle (read-only).
    nz_pct : numpy.ndarray of float64
        Non-zero fraction ``nz / (C * area)`` of each rectangle (read-only).
    spread : float
        ``max(nz_pct) - min(nz_pct)``.
    imbalance : float
        ``max(nz) / mean(nz)``; 1.0 when every ``nz`` is 0.
    """

    rects: List[Tuple[int, int, int, int]]
    nz: np.ndarray
    nz_pct: np.ndarray
    spread: float
    imbalance: float


@dataclass(frozen=True, eq=False)
class Partition:
    """A sparsity-balanced partition of a feature map into ``units`` rectangles.

    Returned by :func:`partition`; see the package docstring for every rule.

    Attributes
    ----------
    shape : tuple of int
        ``(H, W)`` of the partitioned map.
    grid : tuple of int
        ``(gr, gc)``: row bands and cells per band.
    row_cuts : tuple of int
        ``(0, r_1, ..., H)``: the ``gr + 1`` band boundaries.
    col_cuts : tuple of tuple of int
        Per band, ``(0, c_1, ..., W)``: its ``gc + 1`` cell boundaries.
    rects : list of tuple of int
        The ``units`` core rectangles, half-open ``(row0, row1, col0, col1)``, band by band,
        left to right; they tile the map exactly.
    nz : numpy.ndarray of int64
        Non-zero count per rectangle (for a 3-D map: over all channels).
    nz_pct : numpy.ndarray of float64
        Non-zero fraction ``nz / (C * area)`` per rectangle.
    spread : float
        ``max(nz_pct) - min(nz_pct)``.
    imbalance : float
        ``max(work) / mean(work)``; 1.0 when every count is 0.
    status : str
        ``"balanced"`` (``spread <= threshold``) or ``"best_effort"``.
    threshold : float
        The requested maximum spread.
    halo : int
        The halo width of :attr:`halo_rects`.
    halo_rects : list of tuple of int
        Each core extended by ``halo`` on every side, clipped to the map.
    folds : list of list of tuple of int
        Per unit, the time-folded sub-rectangles of its core (row-major); one fold, the core,
        when ``max_tile`` is None.
    equal_split : Split
        The equal split of the same topology (the "before" of a report).
    """

    shape: Tuple[int, int]
    grid: Tuple[int, int]
    row_cuts: Tuple[int, ...]
    col_cuts: Tuple[Tuple[int, ...], ...]
    rects: List[Tuple[int, int, int, int]]
    nz: np.ndarray
    nz_pct: np.ndarray
    spread: float
    imbalance: float
    status: str
    threshold: float
    halo: int
    halo_rects: List[Tuple[int, int, int, int]]
    folds: List[List[Tuple[int, int, int, int]]]
    equal_split: Split

    @property
    def units(self) -> int:
        """Number of rectangles (compute units)."""
        return len(self.rects)

    @property
    def work(self) -> np.ndarray:
        """Work per unit: its non-zero count (a unit multiplies only non-zeros)."""
        return self.nz

    def summary(self) -> dict:
        """A plain-Python dict for reports (JSON-serializable).

        Returns
        -------
        dict
            ``rects``, ``nz``, ``nz_pct``, ``spread``, ``imbalance``, ``status``,
            ``threshold``, ``grid``, and ``equal_spread`` / ``equal_imbalance`` of the
            equal split.
        """
        return {
            "rects": [list(r) for r in self.rects],
            "nz": self.nz.tolist(),
            "nz_pct": self.nz_pct.tolist(),
            "spread": self.spread,
            "imbalance": self.imbalance,
            "status": self.status,
            "threshold": self.threshold,
            "grid": list(self.grid),
            "equal_spread": self.equal_split.spread,
            "equal_imbalance": self.equal_split.imbalance,
        }


# --------------------------------------------------------------------------- geometry helpers

def default_grid(units: int) -> Tuple[int, int]:
    """The default topology ``(gr, gc)``: the factor pair of ``units`` with ``gr <= gc``
    closest to square.

    Parameters
    ----------
    units : int
        Number of rectangles, ``>= 1``.

    Returns
    -------
    tuple of int
        ``(gr, gc)`` with ``gr * gc == units``.

    Raises
    ------
    InputError
        ``units`` not an int ``>= 1``.

    Examples
    --------
    >>> default_grid(4), default_grid(6), default_grid(7), default_grid(16)
    ((2, 2), (2, 3), (1, 7), (4, 4))
    """
    u = _check_int_range("units", units, 1, None)
    divisors = np.arange(1, math.isqrt(u) + 1)
    gr = int(divisors[u % divisors == 0].max())
    return gr, u // gr


def equal_cuts(n: int, parts: int) -> np.ndarray:
    """Boundaries of ``parts`` near-equal pieces of ``n``: ``floor(i * n / parts)``.

    Examples
    --------
    >>> equal_cuts(10, 3)
    array([ 0,  3,  6, 10])
    """
    return (np.arange(parts + 1, dtype=np.int64) * n) // parts


def _candidates(n: int, most: int) -> np.ndarray:
    """Candidate cut positions along a dimension of length n (see the module docstring)."""
    if n <= most:
        return np.arange(n + 1, dtype=np.int64)
    step = -(-n // most)
    return np.append(np.arange(0, n, step, dtype=np.int64), np.int64(n))


def _rects_array(rcuts: np.ndarray, ccuts: np.ndarray) -> np.ndarray:
    """(units, 4) array of (r0, r1, c0, c1), band by band, left to right."""
    gr, gc1 = ccuts.shape
    r0 = np.repeat(rcuts[:-1], gc1 - 1)
    r1 = np.repeat(rcuts[1:], gc1 - 1)
    return np.stack([r0, r1, ccuts[:, :-1].ravel(), ccuts[:, 1:].ravel()], axis=1)


def _rect_counts(S: np.ndarray, R: np.ndarray) -> np.ndarray:
    r0, r1, c0, c1 = R.T
    return S[r1, c1] - S[r0, c1] - S[r1, c0] + S[r0, c0]


class _Eval:
    """Counts, fractions and spread of a cut set."""

    def __init__(self, S: np.ndarray, depth: int, rcuts: np.ndarray, ccuts: np.ndarray):
        self.rcuts, self.ccuts = rcuts, ccuts
        self.R = _rects_array(rcuts, ccuts)
        self.nz = _rect_counts(S, self.R).astype(np.int64)
        area = (self.R[:, 1] - self.R[:, 0]) * (self.R[:, 3] - self.R[:, 2])
        self.pct = self.nz / (float(depth) * area)
        self.spread = float(self.pct.max() - self.pct.min())
        mean = self.nz.mean()
        self.imbalance = float(self.nz.max() / mean) if mean > 0 else 1.0

    def split(self) -> Split:
        nz, pct = self.nz.copy(), self.pct.copy()
        nz.setflags(write=False)
        pct.setflags(write=False)
        return Split([tuple(r) for r in self.R.tolist()], nz, pct, self.spread, self.imbalance)


# --------------------------------------------------------------------------- window search

# The column reachability works on (positions, bands) arrays: the running extrema then run
# along axis 0, one vector operation per position for the whole batch.

def _forward(R: np.ndarray, fhi_s: np.ndarray, order: np.ndarray) -> np.ndarray:
    """One more cell, forward: ``out[j1, b] = any_{j0 in R[:, b]} cell (j0, j1) admissible``.

    ``order`` (flat indices) sorts each column ``b`` by ``flo`` (stable, so ties keep the
    position order) and ``fhi_s`` is ``fhi`` in that order. A cell (j0, j1) is admissible
    iff ``flo[j0] <= flo[j1]`` and ``fhi[j0] >= fhi[j1]`` (``j0 < j1`` follows, see
    :func:`_bands_ok`), i.e. iff j0 comes before j1 in the order and ``fhi[j0] >= fhi[j1]``:
    an exclusive running maximum.
    """
    v = np.where(R.ravel()[order].reshape(R.shape), fhi_s, -np.inf)
    best = np.empty_like(v)
    best[0] = -np.inf
    np.maximum.accumulate(v[:-1], axis=0, out=best[1:])
    out = np.empty(R.size, dtype=bool)
    out[order] = (best >= fhi_s).ravel()
    return out.reshape(R.shape)


def _backward(R: np.ndarray, fhi_s: np.ndarray, order: np.ndarray) -> np.ndarray:
    """One more cell, backward: ``out[j0, b] = any_{j1 in R[:, b]} cell (j0, j1) admissible``
    (an exclusive running minimum from the end of the order)."""
    v = np.where(R.ravel()[order].reshape(R.shape), fhi_s, np.inf)
    best = np.empty_like(v)
    best[-1] = np.inf
    best[:-1] = np.minimum.accumulate(v[:0:-1], axis=0)[::-1]
    out = np.empty(R.size, dtype=bool)
    out[order] = (best <= fhi_s).ravel()
    return out.reshape(R.shape)


def _admissible(P: np.ndarray, h: np.ndarray, x: np.ndarray, a_lo: float, a_hi: float):
    """``flo, fhi, order, fhi_s`` of bands with column prefix counts ``P`` (n, m) and heights
    ``h`` (m,); see :func:`_bands_ok`. ``order`` holds flat indices into an (n, m) array."""
    hx = x[:, None] * h[None, :]
    flo = P - a_lo * hx
    fhi = P - a_hi * hx
    n, m = P.shape
    order = (np.argsort(flo, axis=0, kind="stable") * m + np.arange(m)).ravel()
    return flo, fhi, order, fhi.ravel()[order].reshape(n, m)


def _bands_ok(P: np.ndarray, h: np.ndarray, x: np.ndarray, a_lo: float, a_hi: float,
              gc: int) -> np.ndarray:
    """For each band ``b`` (column prefix counts ``P[:, b]`` at the candidate columns x,
    height ``h[b]``): can it be cut into exactly gc cells whose fractions lie in the window?

    A cell (j0, j1) is admissible iff ``a_lo * h * dx <= dP <= a_hi * h * dx``, i.e. iff
    ``flo[j1] >= flo[j0]`` and ``fhi[j1] <= fhi[j0]`` with ``f = P - a * h * x``. As
    ``flo - fhi = (a_hi - a_lo) * h * x`` grows with x, these two already imply
    ``j0 < j1`` (the tolerance keeps ``a_hi - a_lo`` well above the rounding noise), so
    one step of the reachability is a 2-D dominance query: a running extremum over the
    positions sorted by ``flo`` (O(n log n) per band instead of an n x n matrix). The
    reachable sets meet in the middle: ``gc // 2`` cells forward from position 0 and the
    rest backward from the last position.
    """
    flo, fhi, order, fhi_s = _admissible(P, h, x, a_lo, a_hi)
    fwd = (flo >= flo[:1]) & (fhi <= fhi[:1])          # one cell from position 0
    fwd[0] = False
    if gc == 1:
        return fwd[-1]
    bwd = (flo[-1:] >= flo) & (fhi[-1:] <= fhi)        # one cell to the last position
    bwd[-1] = False
    for _ in range(gc // 2 - 1):
        fwd = _forward(fwd, fhi_s, order)
    for _ in range(gc - gc // 2 - 1):
        bwd = _backward(bwd, fhi_s, order)
    return (fwd & bwd).any(axis=0)


def _band_cuts(P: np.ndarray, h: float, x: np.ndarray, a_lo: float, a_hi: float,
               gc: int) -> np.ndarray:
    """The lexicographically smallest gc-cell cut (indices into x) of one usable band."""
    flo, fhi, order, fhi_s = _admissible(P[:, None], np.array([h]), x, a_lo, a_hi)
    flo, fhi = flo[:, 0], fhi[:, 0]
    n = x.size
    back = [np.zeros((n, 1), dtype=bool)]            # back[k]: end reachable in k cells
    back[0][-1] = True
    for _ in range(gc - 1):
        back.append(_backward(back[-1], fhi_s, order))
    pos = np.arange(n)
    cuts = [0]
    for step in range(1, gc):
        c = cuts[-1]
        row = (flo >= flo[c]) & (fhi <= fhi[c]) & (pos > c) & back[gc - step][:, 0]
        cuts.append(int(np.argmax(row)))
    cuts.append(n - 1)
    return np.asarray(cuts, dtype=np.int64)


class _Searcher:
    """The window search of the module docstring on fixed candidate positions."""

    def __init__(self, S: np.ndarray, depth: int, gr: int, gc: int, tol: float, most: int):
        H, W = S.shape[0] - 1, S.shape[1] - 1
        self.S, self.gr, self.gc, self.depth, self.tol = S, gr, gc, depth, tol
        self.rc, self.cc = _candidates(H, most), _candidates(W, most)
        self.x = self.cc.astype(np.float64)
        # prefix counts at the candidate (column, row) positions, float64 (exact)
        self.ScT = np.ascontiguousarray(S[np.ix_(self.rc, self.cc)].T, dtype=np.float64)
        nR = self.rc.size
        i0, i1 = np.nonzero(np.triu(np.ones((nR, nR), dtype=bool), 1))
        self.pairs = (i0, i1)

    def _usable(self, i0: np.ndarray, i1: np.ndarray, a_lo: float, a_hi: float) -> np.ndarray:
        h = (self.rc[i1] - self.rc[i0]).astype(np.float64)
        n = self.ScT[-1, i1] - self.ScT[-1, i0]
        area = h * self.x[-1]
        out = (n >= a_lo * area) & (n <= a_hi * area)          # the band is in the window
        keep = np.flatnonzero(out)
        if keep.size:
            k0, k1 = i0[keep], i1[keep]
            out[keep] = _bands_ok(self.ScT[:, k1] - self.ScT[:, k0], h[keep], self.x,
                                  a_lo, a_hi, self.gc)
        return out

    def search(self, lo: float, hi: float) -> Optional[Tuple[np.ndarray, np.ndarray]]:
        """Smallest cuts (pixel positions) with every fraction in [lo, hi], or None."""
        gr, gc = self.gr, self.gc
        a_lo, a_hi = (lo - self.tol / 2) * self.depth, (hi + self.tol / 2) * self.depth
        nR, end = self.rc.size, self.rc.size - 1
        U = np.zeros((nR, nR), dtype=bool)           # usable bands, not ending at H
        done = np.zeros(nR, dtype=bool)
        front = [np.zeros(nR, dtype=bool)]
        front[0][0] = True
        pi0, pi1 = self.pairs
        for level in range(gr - 1):
            new = front[level] & ~done
            if new.any():
                sel = new[pi0] & (pi1 < end)          # rows are reused at later levels
                i0, i1 = pi0[sel], pi1[sel]
                U[i0, i1] = self._usable(i0, i1, a_lo, a_hi)
                done |= new
            front.append(U[front[level]].any(axis=0))
        final = np.zeros(nR, dtype=bool)
        last = np.flatnonzero(front[gr - 1])
        if last.size:
            final[last] = self._usable(last, np.full(last.size, end), a_lo, a_hi)
        if not final.any():
            return None
        good = [None] * gr                             # band starts that can finish
        good[gr - 1] = final
        for level in range(gr - 2, -1, -1):
            good[level] = front[level] & U[:, good[level + 1]].any(axis=1)
        ridx = [0]
        for level in range(gr - 1):
            ridx.append(int(np.argmax(U[ridx[-1]] & good[level + 1])))
        ridx.append(end)
        cidx = np.empty((gr, gc + 1), dtype=np.int64)
        for b in range(gr):
            i0, i1 = ridx[b], ridx[b + 1]
            cidx[b] = _band_cuts(self.ScT[:, i1] - self.ScT[:, i0],
                                 float(self.rc[i1] - self.rc[i0]),
                                 self.x, a_lo, a_hi, gc)
        return self.rc[np.asarray(ridx)], self.cc[cidx]

    def find(self, d: float, T: float, budget: int) -> Optional["_Eval"]:
        """A partition with spread <= T (up to the tolerance), or None.

        Branch and bound over the interval ``[a, b]`` that holds the smallest fraction of
        a wanted partition: every cell then lies in the relaxed window ``[a, b + T]``. A
        failing window prunes the interval; a window whose smallest-cut partition has a
        spread above T splits it in halves (lower half first) until it is narrower than
        the tolerance. At most ``budget`` window searches.
        """
        stack = [(max(0.0, d - T), min(d, 1.0))]
        calls = 0
        while stack and calls < budget:
            a, b = stack.pop()
            calls += 1
            found = self.search(a, min(1.0, b + T))
            if found is None:
                continue
            ev = _Eval(self.S, self.depth, *found)
            if ev.spread <= T + 2 * self.tol:
                return ev
            if b - a > self.tol:
                mid = 0.5 * (a + b)
                stack += [(mid, b), (a, mid)]
        return None


# --------------------------------------------------------------------------- polishing

def _polish(S: np.ndarray, depth: int, rcuts: np.ndarray, ccuts: np.ndarray):
    """Coordinate descent at pixel resolution: each cut moves to the position between its
    neighbours with the smallest spread (strict improvement only) until nothing moves."""
    rcuts, ccuts = rcuts.copy(), ccuts.copy()
    gr, gc = ccuts.shape[0], ccuts.shape[1] - 1
    dep = float(depth)

    def band_pct(r0, r1, cuts):
        """Fractions of a band's cells for every row pair (arrays r0, r1 broadcast)."""
        cnt = np.diff(S[r1[:, None], cuts[None, :]] - S[r0[:, None], cuts[None, :]], axis=1)
        area = (r1 - r0)[:, None] * np.diff(cuts)[None, :]
        return cnt / (dep * area)

    ev = _Eval(S, depth, rcuts, ccuts)
    pct = ev.pct.reshape(gr, gc)
    best = ev.spread
    for _ in range(_POLISH_SWEEPS):
        moved = False
        for t in range(1, gr):                     # row cut between bands t-1 and t
            xs = np.arange(rcuts[t - 1] + 1, rcuts[t + 1], dtype=np.int64)
            if xs.size < 2:
                continue
            up = band_pct(np.full(xs.size, rcuts[t - 1]), xs, ccuts[t - 1])
            dn = band_pct(xs, np.full(xs.size, rcuts[t + 1]), ccuts[t])
            other = np.delete(pct, [t - 1, t], axis=0)
            hi = np.maximum(up.max(axis=1), dn.max(axis=1))
            lo = np.minimum(up.min(axis=1), dn.min(axis=1))
            if other.size:
                hi, lo = np.maximum(hi, other.max()), np.minimum(lo, other.min())
            k = int(np.argmin(hi - lo))
            if hi[k] - lo[k] < best - 1e-15:
                rcuts[t] = xs[k]
                pct[t - 1], pct[t] = up[k], dn[k]
                best, moved = float(hi[k] - lo[k]), True
        for b in range(gr):
            r0, r1 = rcuts[b], rcuts[b + 1]
            colsum = S[r1] - S[r0]
            for j in range(1, gc):                 # column cut between cells j-1 and j
                c0, c2 = ccuts[b, j - 1], ccuts[b, j + 1]
                xs = np.arange(c0 + 1, c2, dtype=np.int64)
                if xs.size < 2:
                    continue
                h = float(r1 - r0)
                left = (colsum[xs] - colsum[c0]) / (dep * h * (xs - c0))
                right = (colsum[c2] - colsum[xs]) / (dep * h * (c2 - xs))
                mask = np.ones((gr, gc), dtype=bool)
                mask[b, j - 1:j + 1] = False
                other = pct[mask]
                hi, lo = np.maximum(left, right), np.minimum(left, right)
                if other.size:
                    hi, lo = np.maximum(hi, other.max()), np.minimum(lo, other.min())
                k = int(np.argmin(hi - lo))
                if hi[k] - lo[k] < best - 1e-15:
                    ccuts[b, j] = xs[k]
                    pct[b, j - 1], pct[b, j] = left[k], right[k]
                    best, moved = float(hi[k] - lo[k]), True
        if not moved:
            break
    return rcuts, ccuts


# --------------------------------------------------------------------------- partition

def _count_map(fmap) -> Tuple[np.ndarray, int]:
    """Per-pixel non-zero weights (H, W) int64 and the channel depth C."""
    try:
        arr = np.asarray(fmap)
    except (TypeError, ValueError) as exc:
        raise InputError(f"fmap: cannot convert to a numeric array ({exc})") from None
    if arr.dtype.kind not in "biufc":
        raise InputError(f"fmap: has dtype {arr.dtype}: must be numeric")
    if arr.ndim == 2:
        return (arr != 0).astype(np.int64), 1
    if arr.ndim == 3:
        if arr.shape[0] < 1:
            raise InputError(f"fmap: has shape {arr.shape}: a 3-D map (C, H, W) needs C >= 1")
        return np.count_nonzero(arr, axis=0).astype(np.int64), arr.shape[0]
    raise InputError(f"fmap: has shape {arr.shape}: must be 2-D (H, W) or 3-D (C, H, W)")


def _folds(rect, max_tile) -> List[Tuple[int, int, int, int]]:
    r0, r1, c0, c1 = rect
    if max_tile is None:
        return [rect]
    th, tw = max_tile
    rs = np.append(np.arange(r0, r1, th), r1)
    cs = np.append(np.arange(c0, c1, tw), c1)
    R0, C0 = np.meshgrid(rs[:-1], cs[:-1], indexing="ij")
    R1, C1 = np.meshgrid(rs[1:], cs[1:], indexing="ij")
    return [tuple(v) for v in np.stack([R0, R1, C0, C1], -1).reshape(-1, 4).tolist()]


def _best_effort(S, depth, searcher, d, T, rc_eq, cc_eq):
    """Escalating search + bisection on the threshold, then polishing (module docstring)."""
    found, fail_T = None, T
    t = max(T, 2.0 ** -10)
    while found is None and t < 1.0:
        t = min(1.0, 2.0 * t)
        found = searcher.find(d, t, _BUDGET_BEST_EFFORT)
        if found is None:
            fail_T = t
    cands = [(rc_eq, cc_eq)]
    if found is not None:
        lo_T = fail_T
        for _ in range(_BISECT_STEPS):
            if found.spread - lo_T <= 1e-4:
                break
            mid = 0.5 * (lo_T + found.spread)
            f = searcher.find(d, mid, _BUDGET_BEST_EFFORT)
            if f is None:
                lo_T = mid
            else:
                found = f
        cands.append(_polish(S, depth, found.rcuts, found.ccuts))
    cands.append(_polish(S, depth, rc_eq, cc_eq))
    evals = [_Eval(S, depth, r, c) for r, c in cands]
    k = min(range(len(evals)), key=lambda i: (evals[i].spread, i))
    return evals[k]


def _quantile_cuts(cum: np.ndarray, parts: int) -> np.ndarray:
    """Cuts ``0 = c_0 < c_1 < ... < c_parts = n`` of a cumulative count ``cum`` (length n+1)
    nearest to equal shares of the total, every part non-empty."""
    n = cum.size - 1
    total = float(cum[-1])
    cuts = np.zeros(parts + 1, dtype=np.int64)
    cuts[-1] = n
    if total == 0:
        return equal_cuts(n, parts)
    for i in range(1, parts):
        t = total * i / parts
        j = int(np.searchsorted(cum, t))
        if j > 0 and abs(cum[j - 1] - t) <= abs(cum[min(j, n)] - t):
            j -= 1
        cuts[i] = min(max(j, cuts[i - 1] + 1), n - (parts - i))
    return cuts


def _work_cuts(S: np.ndarray, gr: int, gc: int):
    """SPECS [C] BALANCE_BY=NZ_COUNT: row bands of equal non-zero counts, then equal-count
    column cuts per band (1-D prefix sums)."""
    rcuts = _quantile_cuts(S[:, -1], gr)
    ccuts = np.stack([_quantile_cuts(S[rcuts[b + 1]] - S[rcuts[b]], gc) for b in range(gr)])
    return rcuts, ccuts


def partition(fmap, units: int, *, threshold: float = 0.03, halo: int = 0,
              max_tile: Optional[Sequence[int]] = None,
              grid: Optional[Sequence[int]] = None, balance: str = "fraction") -> Partition:
    """Partition a feature map into ``units`` rectangles with balanced non-zero fractions.

    Alg 3-A (equal split), 3-B (rebalancing to a threshold) and 3-C (time folding) of
    source 003; the full rules (topology, metric, search and its guarantee, best effort)
    are in the package docstring.

    Parameters
    ----------
    fmap : array_like
        2-D ``(H, W)`` or 3-D ``(C, H, W)`` numeric map; a value is non-zero when ``!= 0``.
        For a 3-D map a pixel weighs its number of non-zero channels.
    units : int
        Number of rectangles (compute units), ``>= 1``.
    threshold : float, default 0.03
        Maximum allowed difference of two rectangles' non-zero fractions, in ``[0, 1]``.
    halo : int, default 0
        Halo width of :attr:`Partition.halo_rects`, ``>= 0`` (``k - 1`` for a k x k kernel).
    max_tile : pair of int, optional
        ``(th, tw)``, each ``>= 1``: the largest sub-map a unit holds (time folding).
    grid : pair of int, optional
        ``(gr, gc)`` with ``gr * gc == units``; default :func:`default_grid`.
    balance : {"fraction", "work"}, default "fraction"
        ``"fraction"``: source 003 Alg 3-B, balance the non-zero fractions (the search above).
        ``"work"``: balance the non-zero counts (a unit's time follows its count): row bands
        of equal counts, then equal-count column cuts per band (prefix-sum quantiles); the
        equal split is kept when it has the lower imbalance. ``status`` is then
        ``"balanced"`` when ``imbalance - 1 <= threshold``.

    Returns
    -------
    Partition
        The cores, their counts and balance, halo rectangles, folds and the equal split.

    Raises
    ------
    InputError
        A bad parameter, a map that is not 2-D or 3-D, or ``H < gr`` / ``W < gc``.

    Examples
    --------
    >>> import numpy as np
    >>> fmap = np.zeros((6, 6), dtype=int)
    >>> fmap[0] = 1                     # one dense row on top: no balanced split exists
    >>> p = partition(fmap, 2, grid=(2, 1), threshold=0.0)
    >>> p.rects, p.nz_pct.tolist(), p.status           # the smallest spread: 1/5 - 0
    ([(0, 5, 0, 6), (5, 6, 0, 6)], [0.2, 0.0], 'best_effort')
    >>> p.spread <= p.equal_split.spread
    True
    >>> p = partition(np.ones((4, 8)), 2, max_tile=(4, 3))
    >>> p.folds[0]
    [(0, 4, 0, 3), (0, 4, 3, 4)]
    """
    counts, depth = _count_map(fmap)
    u = _check_int_range("units", units, 1, None)
    T = _check_threshold(threshold)
    halo = _check_int_range("halo", halo, 0, None)
    if max_tile is not None:
        max_tile = _check_pair("max_tile", max_tile, 1)
    if grid is None:
        gr, gc = default_grid(u)
    else:
        gr, gc = _check_pair("grid", grid, 1)
        if gr * gc != u:
            raise InputError(f"grid = {tuple(grid)!r}: must multiply to units = {u}")
    H, W = counts.shape
    if H < gr or W < gc:
        raise InputError(f"fmap: has (H, W) = {(H, W)}: must be at least the grid (gr, gc) = "
                         f"{(gr, gc)} so that every rectangle is non-empty")
    S = np.zeros((H + 1, W + 1), dtype=np.int64)
    np.cumsum(np.cumsum(counts, axis=0), axis=1, out=S[1:, 1:])

    rc_eq = equal_cuts(H, gr)
    cc_eq = np.tile(equal_cuts(W, gc), (gr, 1))
    eq = _Eval(S, depth, rc_eq, cc_eq)
    tol = _tolerance(H, W)
    if balance not in ("fraction", "work"):
        raise InputError(f"balance = {balance!r}: must be 'fraction' or 'work'")
    if balance == "work":
        wk = _Eval(S, depth, *_work_cuts(S, gr, gc))
        res = wk if wk.split().imbalance < eq.split().imbalance else eq
    elif eq.spread <= T + 2 * tol:
        res = eq
    else:
        d = float(S[-1, -1]) / (depth * H * W)
        searcher = _Searcher(S, depth, gr, gc, tol, MAX_CANDIDATES)
        res = searcher.find(d, T, _BUDGET)
        if res is None:
            coarse = _Searcher(S, depth, gr, gc, tol, _BEST_EFFORT_CANDIDATES)
            res = _best_effort(S, depth, coarse, d, T, rc_eq, cc_eq)
    split = res.split()
    rects = split.rects
    halo_rects = [(max(r0 - halo, 0), min(r1 + halo, H), max(c0 - halo, 0), min(c1 + halo, W))
                  for r0, r1, c0, c1 in rects]
    return Partition(
        shape=(H, W), grid=(gr, gc),
        row_cuts=tuple(int(v) for v in res.rcuts),
        col_cuts=tuple(tuple(int(v) for v in row) for row in res.ccuts),
        rects=rects, nz=split.nz, nz_pct=split.nz_pct, spread=split.spread,
        imbalance=split.imbalance,
        status=("balanced" if (split.imbalance - 1 <= T + 2 * tol if balance == "work"
                                else split.spread <= T + 2 * tol) else "best_effort"),
        threshold=T, halo=halo, halo_rects=halo_rects,
        folds=[_folds(r, max_tile) for r in rects], equal_split=eq.split())
