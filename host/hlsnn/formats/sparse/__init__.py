"""Sparse formats: compressed kernels, compressed sub-feature-maps and the sparsity-balanced
partitioner of the sparse accelerators.

This package is the reference for the compressed kernel stream of the zero-coefficient-skipping
convolution engine (SPECS section 5, seed 004), and for the compressed sub-feature-maps and
the sparsity-balanced partitioning of the sparse tensor accelerator (SPECS section 4, seed
003, Alg 3-A/3-B/3-C). The rules below are the specification that the emulators, the
generated C++ and the tests all follow. The code is in :mod:`.compress` (the compressed
formats) and :mod:`.partition` (the partitioner and its result types); every public name is
re-exported here.

Compressed kernels (:func:`compress_kernel`, :class:`SparseKernel`)
    A kernel tensor ``w`` of shape ``(Z, C, KH, KW)`` (``Z`` kernels = output channels,
    ``C`` input channels indexed by ``kz``, kernel row ``ky``, kernel column ``kx``; usually
    ``KH = KW = k``) becomes one entry ``(coef, z, kz, ky, kx)`` per NON-ZERO coefficient.
    Zero coefficients get no entry (claims 4-6 of the source). The entries are five 1-D int64
    arrays of one length ``nnz``, ordered **kz-major, then by z, then ky, then kx**, i.e.
    strictly increasing in ``(kz, z, ky, kx)``. This is the stream the engine consumes: one
    input image ``kz`` at a time, every kernel ``z`` of that image in turn, each kernel
    row-major. Decompression is lossless: ``decompress()`` returns ``w`` as int64.
    :meth:`SparseKernel.entries` returns the entries of one input channel as arrays, and
    :meth:`SparseKernel.coefficients` yields them one at a time, like the source's kernel
    decompressor that "decompresses one coefficient at a time" (it is for tests and
    documentation, not for speed).

Compressed sub-feature-maps (:func:`compress_map`, :class:`SparseMap`)
    The value buffer + index buffer of source 003 in COO form (decision A3.9). A 2-D map
    ``(H, W)`` or 3-D map ``(C, H, W)`` of integers becomes one entry ``(value, chan, row,
    col)`` per non-zero value, with LOCAL coordinates (``chan`` is 0 for a 2-D map). The
    entries are ordered by channel, then row-major within the channel (strictly increasing
    in ``(chan, row, col)``). ``origin = (row, col)`` is the position of the sub-map's
    top-left pixel in the full feature map (the source's "index value"), so a local
    ``(row, col)`` sits at ``(origin[0] + row, origin[1] + col)`` in the full map.
    Decompression is lossless.

Partitioning (:func:`partition`, :class:`Partition`)
    Non-zeros
        A 2-D map ``(H, W)`` has weight 1 at every pixel whose value is ``!= 0``. A 3-D map
        ``(C, H, W)`` has at each pixel the number of its non-zero channels. The count
        ``nz`` of a rectangle is the sum of its weights, and its non-zero fraction is
        ``nz_pct = nz / (C * area)`` (``C = 1`` for a 2-D map), a number in ``[0, 1]``. All
        counts come from 2-D prefix sums (:func:`numpy.cumsum`).
    Topology (Alg 3-A)
        ``units`` rectangles in a guillotine grid: ``gr`` row bands, each cut independently
        into ``gc`` cells, ``gr * gc = units``. By default ``(gr, gc)`` is the factor pair
        with ``gr <= gc`` closest to square (``units = 6 -> 2 x 3``, a prime ``p -> 1 x p``);
        ``grid=(gr, gc)`` overrides it. Every rectangle is non-empty, so ``H >= gr`` and
        ``W >= gc`` are required. A rectangle is half-open ``(row0, row1, col0, col1)``.
        :attr:`Partition.rects` lists them band by band, left to right, and they tile the
        map exactly. A partition is fully described by its cuts: :attr:`Partition.row_cuts`
        ``(0 = r_0 < r_1 < ... < r_gr = H)`` and, per band, :attr:`Partition.col_cuts`
        ``(0 = c_0 < ... < c_gc = W)``.
    Metric (Alg 3-B)
        ``spread = max(nz_pct) - min(nz_pct)``. A partition is ``"balanced"`` when
        ``spread <= threshold + 2 * tol`` and ``"best_effort"`` otherwise, where the
        rounding tolerance is ``tol = max(1e-9, 1e-13 * H * W)`` (1e-9 up to 10**4 pixels,
        1.05e-7 at 1024 x 1024). A unit only multiplies non-zeros, so its ``work`` is
        its ``nz``, and ``imbalance = max(work) / mean(work)`` (1.0 when every ``nz`` is 0).
    Equal split (Alg 3-A step 2)
        Band ``i`` is rows ``[floor(i * H / gr), floor((i + 1) * H / gr))``, and in every band
        cell ``j`` is columns ``[floor(j * W / gc), floor((j + 1) * W / gc))``. The remainders
        are thus spread over the bands and cells. :attr:`Partition.equal_split` keeps its
        summary (a :class:`Split`) so that reports can show before / after.
    Search (Alg 3-B, deterministic, no randomness)
        Moving one boundary by one row or column at a time (the source's mechanism) stalls
        in local minima far from balanced partitions, so the search is global instead:

        1. Fast path: if the equal split is balanced, it is returned as is.
        2. Candidate cut positions: along a dimension of length ``n <= 96`` every position
           ``0 ... n``; for ``n > 96`` every ``s``-th position ``0, s, 2s, ...`` with
           ``s = ceil(n / 96)``, plus ``n`` (:data:`MAX_CANDIDATES`).
        3. Window test: is there a partition whose cuts are candidates and whose fractions
           all lie in a window ``[lo, hi]``? A dynamic program over the row cuts, band
           index by band index, keeps the reachable band starts; a band ``(r0, r1)`` is
           *usable* when its columns can be cut into exactly ``gc`` cells with fractions in
           the window. That is a second dynamic program over the column cuts, with the
           band's column prefix sums ``P``. Cell ``(c0, c1)`` is admissible iff
           ``flo(c0) <= flo(c1)`` and ``fhi(c0) >= fhi(c1)`` for
           ``f(c) = P(c) - a * C * h * c`` (``a = lo``, resp. ``hi``; ``h`` the band
           height). So one more cell is a 2-D dominance query: a running maximum (minimum)
           over the positions sorted by ``flo``, vectorized over all bands of one step.
           ``gc // 2`` cells are reached forward from column 0 and the others backward
           from column W. Bands whose own fraction is outside the window are pruned (a
           band's fraction is the area-weighted mean of its cells'). The cuts of a hit
           are the lexicographically smallest: the row cuts first, then each band's column
           cuts, smallest positions first. The window is widened by ``tol / 2`` on both
           sides against rounding.
        4. Balanced search (``T = threshold``, ``d`` the fraction of the whole map). The
           smallest fraction ``m`` of any partition with ``spread <= T`` lies in
           ``[d - T, d]``, since ``d`` is an area-weighted mean of the cell fractions.
           Branch and bound over that interval: for an interval ``[a, b]`` of ``m``, test
           the relaxed window ``[a, b + T]``. A miss discards the interval; a hit whose
           spread is ``<= T`` is the answer; any other hit splits the interval in halves
           (lower half first) until it is narrower than ``tol``, where every hit has
           ``spread <= T + 2 * tol``.

           Guarantee: if a partition of the ``gr x gc`` topology with ``spread <= T`` has
           all its cuts on candidate positions, a balanced partition is returned. The one
           exception is a branch and bound that runs out of its budget of 64 window tests,
           which only happens when many intervals hold partitions with spreads just above
           ``T``. For maps up to 96 x 96 every position is a candidate, so the guarantee
           holds at pixel resolution.
        5. Best effort, when step 4 finds nothing. With coarser candidates (``n <= 64``:
           all positions, else every ``ceil(n / 64)``-th), step 4 is repeated with
           thresholds ``T' = 2 T, 4 T, ...`` (starting from ``2**-10`` when ``T = 0``, up
           to 1) and 16 window tests each. After the first hit, it bisects (6 steps)
           between the last missed ``T'`` and the smallest spread found so far. The best
           hit and the equal split are then each polished at pixel resolution by coordinate
           descent. Every cut in turn moves to the position between its neighbouring cuts
           that minimizes the spread (an exhaustive, vectorized line search, taken only
           on a strict improvement). This repeats until no cut moves (at most 64 sweeps).
           Of the equal split, the polished hit and the polished equal split, the one
           with the smallest spread wins, the earlier one on ties. So the result is NEVER
           worse than the equal split, and it is the equal split itself when nothing
           better was found. Its status is ``"balanced"`` if polishing reached the
           threshold.
    Halo (Alg 3-A step 3, decision A3.3)
        Balancing is done on the cores. :attr:`Partition.halo_rects` extends each core by
        ``halo`` rows and columns on every side, clipped to the map. With ``halo = k - 1``
        a unit can work on its sub-map independently.
    Time folding (Alg 3-C)
        With ``max_tile = (th, tw)``, each unit's core is split into sub-rectangles of at
        most ``th x tw``: row blocks starting at ``row0, row0 + th, ...`` and column blocks
        starting at ``col0, col0 + tw, ...``, listed row-major. They cover the core exactly
        (a 2048 x 2048 core with ``max_tile=(1024, 1024)`` gives four 1024 x 1024 folds,
        T3.7). ``max_tile=None`` gives one fold per unit, the core itself.

Inputs
    Integer arrays are converted like the other formats (integer-valued floats and bools are
    accepted; values must fit int64). ``partition`` takes any real or complex numeric map.
    Anything else raises :class:`hlsnn.errors.InputError` (a :class:`ValueError`) with a
    one-line message naming the parameter, the value and what is allowed.

Examples
--------
>>> import numpy as np
>>> from hlsnn.formats import sparse
>>> w = np.zeros((2, 2, 3, 3), dtype=int)       # (Z, C, k, k)
>>> w[0, 1, 0, 2], w[1, 0, 2, 1], w[0, 0, 1, 1] = 5, -3, 7
>>> sk = sparse.compress_kernel(w)
>>> sk.coef, sk.kz, sk.z, sk.ky, sk.kx         # kz-major, then z, ky, kx
(array([ 7, -3,  5]), array([0, 0, 1]), array([0, 1, 0]), array([1, 2, 0]), array([1, 1, 2]))
>>> list(sk.coefficients(0))                  # (coef, z, ky, kx), one at a time
[(7, 0, 1, 1), (-3, 1, 2, 1)]
>>> bool((sk.decompress() == w).all()), sk.nnz, sk.nnz_per_channel()
(True, 3, array([2, 1]))

A sub-map at (row, col) = (4, 8) of a larger map, as value and index buffers:

>>> sm = sparse.compress_map([[0, 3, 0], [-1, 0, 2]], origin=(4, 8))
>>> sm.values, sm.rows, sm.cols, sm.origin
(array([ 3, -1,  2]), array([0, 1, 1]), array([1, 0, 2]), (4, 8))

Partitioning a 6 x 8 map with two dense columns on the left and one on the right into two
units: the equal split has fractions 0.5 and 0.25, moving the cut to column 5 balances
them to within 0.1.

>>> fmap = np.zeros((6, 8), dtype=int)
>>> fmap[:, :2] = fmap[:, 7] = 1
>>> p = sparse.partition(fmap, 2, threshold=0.1)
>>> p.rects, p.nz.tolist(), p.nz_pct.round(3).tolist(), p.status
([(0, 6, 0, 5), (0, 6, 5, 8)], [12, 6], [0.4, 0.333], 'balanced')
>>> p.equal_split.rects, p.equal_split.nz_pct.tolist()
([(0, 6, 0, 4), (0, 6, 4, 8)], [0.5, 0.25])
>>> p = sparse.partition(fmap, 4, grid=(4, 1), halo=1)
>>> p.rects[1], p.halo_rects[1], p.status
((1, 3, 0, 8), (0, 4, 0, 8), 'balanced')
"""
from .compress import SparseKernel, SparseMap, compress_kernel, compress_map
from .partition import (MAX_CANDIDATES, STATUSES, Partition, Split, default_grid, equal_cuts,
                        partition)

__all__ = ["STATUSES", "MAX_CANDIDATES", "SparseKernel", "SparseMap", "Split", "Partition",
           "compress_kernel", "compress_map", "partition", "default_grid", "equal_cuts"]
