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
Window test (:meth:`.search.Searcher.search`)
    Is there a partition with every fraction in a window ``[lo, hi]``, its cuts on candidate
    positions (along a dimension of length ``n <= 96`` every position, else every
    ``ceil(n / 96)``-th)? A DP over the band cuts: for band index 0, 1, ..., the row cuts
    where that band can start, reached through *usable* bands. A band is usable when its own
    fraction is in the window and its columns can be cut into ``gc`` cells in the window
    (:func:`.search._bands_ok`: a second DP, over the column cuts, where one more cell is a running
    maximum or minimum over the positions sorted by ``P - lo * C * h * x``; ``gc // 2`` cells
    forward from column 0, the rest backward from ``W``). A hit walks back to the smallest
    row cuts, then each band's smallest column cuts (:func:`.search._band_cuts`).
Branch and bound (:meth:`.search.Searcher.find`)
    The smallest fraction ``m`` of a partition with ``spread <= T`` lies in ``[d - T, d]``
    (``d`` the fraction of the whole map). An interval ``[a, b]`` of ``m`` is tested with the
    window ``[a, b + T]``: a miss drops it, a hit with ``spread <= T`` is the answer, any other
    hit splits it in halves (lower half first) while it is wider than ``tol``; at most 64
    window tests.
Best effort and polish (:func:`_best_effort`, :func:`.search.polish`)
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

from .search import Eval, Searcher, polish

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


def _tolerance(H: int, W: int) -> float:
    """Rounding tolerance of the fraction comparisons: it stays well above the float64
    noise of counts up to ``C * H * W`` (see :func:`.search._bands_ok`)."""
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


# --------------------------------------------------------------------------- partition

def _split_of(ev: Eval) -> Split:
    """The :class:`Split` summary of an evaluated cut set (read-only arrays)."""
    nz, pct = ev.nz.copy(), ev.pct.copy()
    nz.setflags(write=False)
    pct.setflags(write=False)
    return Split([tuple(r) for r in ev.R.tolist()], nz, pct, ev.spread, ev.imbalance)


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
        cands.append(polish(S, depth, found.rcuts, found.ccuts))
    cands.append(polish(S, depth, rc_eq, cc_eq))
    evals = [Eval(S, depth, r, c) for r, c in cands]
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
    eq = Eval(S, depth, rc_eq, cc_eq)
    tol = _tolerance(H, W)
    if balance not in ("fraction", "work"):
        raise InputError(f"balance = {balance!r}: must be 'fraction' or 'work'")
    if balance == "work":
        wk = Eval(S, depth, *_work_cuts(S, gr, gc))
        res = wk if wk.imbalance < eq.imbalance else eq
    elif eq.spread <= T + 2 * tol:
        res = eq
    else:
        d = float(S[-1, -1]) / (depth * H * W)
        searcher = Searcher(S, depth, gr, gc, tol, MAX_CANDIDATES)
        res = searcher.find(d, T, _BUDGET)
        if res is None:
            coarse = Searcher(S, depth, gr, gc, tol, _BEST_EFFORT_CANDIDATES)
            res = _best_effort(S, depth, coarse, d, T, rc_eq, cc_eq)
    split = _split_of(res)
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
        folds=[_folds(r, max_tile) for r in rects], equal_split=_split_of(eq))
