"""The search behind :func:`hlsnn.formats.sparse.partition`: candidate cut positions, the
window test and its branch and bound (:class:`Searcher`), and the polish by coordinate descent
(:func:`polish`). The algorithm is described in :mod:`hlsnn.formats.sparse.partition`.
"""
from __future__ import annotations

from typing import Optional, Tuple

import numpy as np

__all__ = ["Eval", "Searcher", "polish"]

#: Coordinate-descent sweeps of :func:`polish` at most.
_POLISH_SWEEPS = 64


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


class Eval:
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


class Searcher:
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

    def find(self, d: float, T: float, budget: int) -> Optional["Eval"]:
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
            ev = Eval(self.S, self.depth, *found)
            if ev.spread <= T + 2 * self.tol:
                return ev
            if b - a > self.tol:
                mid = 0.5 * (a + b)
                stack += [(mid, b), (a, mid)]
        return None


# --------------------------------------------------------------------------- polishing

def polish(S: np.ndarray, depth: int, rcuts: np.ndarray, ccuts: np.ndarray):
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

    ev = Eval(S, depth, rcuts, ccuts)
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
