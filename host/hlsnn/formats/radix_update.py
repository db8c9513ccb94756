"""Source 002's ways of updating the radix point: the N% sample and the embodiments E1-E5,
with the fig. 15 cost model (SPECS section 3.3, Alg 2-D and 2-E). They build on the rules
of :mod:`hlsnn.formats.fixed` (ACQUIRE, DETERMINE, CONVERT), the specification every target
follows.

N% sampling (SELECT, Alg 2-D) -> :func:`sample_run`, :func:`sample_mask`
    An "operation data item" is one output element (SPECS A2.6). Along one axis, runs of
    ``a`` consecutive items start every ``b`` items (item ``i`` is kept iff
    ``i % b < a``); the mask is the same for every index of the other axes. ``a/b`` is
    ``Fraction(percent / 100).limit_denominator(64)``, the nearest fraction with ``b <= 64``
    (within ``1/128`` of ``percent/100``); if that is 0 (``percent`` below about 0.78) the
    sample is ``1/64`` instead, so it is never empty. With an explicit run length
    ``run = a``, ``b = max(a, round(100 * a / percent))``. Along an axis of length ``L`` the
    kept count ``c`` satisfies ``L*a/b <= c < L*a/b + a`` (never fewer than N%).

Embodiments (SPECS 3.3) -> :func:`run_e1` ... :func:`run_e4`, :class:`Result`
    ``op(mask)`` returns the wide results of ALL output items as an integer array of the
    output shape; ``mask`` is None (compute everything) or a bool array of that shape, and
    then only the True items are "computed": the other entries are never read and may hold
    anything. The runners count the computed items in :attr:`Result.items_computed`. For a
    deterministic ``op``, E1 and E3 give bit-identical results, and so do E2 and E4 for the
    same sample (and E2 at 100% equals E1). :func:`cost_model` is the fig. 15 timing model.
    E5 (Alg 2-E) -> :func:`select_e5`, :func:`run_e5`: per layer (or per operation type), the
    faster of E2 and E4 by their times, E2 on a tie.

Inputs
    Anything out of range raises :class:`hlsnn.errors.InputError` (a :class:`ValueError`)
    with a one-line message naming the parameter, the value and what is allowed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Callable, NamedTuple, Optional, Tuple

import numpy as np

from hlsnn.errors import InputError

from ._validate import check_axis as _check_axis
from ._validate import check_int_range as _check_int_range
from ._validate import is_int as _is_int
from .fixed import (MAX_BINS, MAX_PERIOD, Stats, _check_bins, _check_int, _check_real, _check_rounding,
                    _determine_args, _wide, acquire, convert, determine)

__all__ = ["Result", "Costs", "Choice", "sample_run", "sample_mask", "run_e1", "run_e2", "run_e3", "run_e4",
           "run_e5", "cost_model", "select_e5"]


# --------------------------------------------------------------------------- N% sampling

def sample_run(percent, run: Optional[int] = None) -> Tuple[int, int]:
    """Run length ``a`` and period ``b`` of the N% sample (Alg 2-D; rule in the module docstring).

    Examples
    --------
    >>> sample_run(12.5), sample_run(20), sample_run(100), sample_run(0.5), sample_run(12.5, run=3)
    ((1, 8), (1, 5), (1, 1), (1, 64), (3, 24))
    """
    p = _check_real("percent", percent, 0.0, 100.0, lo_open=True, hi_open=False)
    if run is None:
        q = Fraction(p / 100).limit_denominator(MAX_PERIOD)
        if q == 0:
            q = Fraction(1, MAX_PERIOD)
        return q.numerator, q.denominator
    a = _check_int_range("run", run, 1, None)
    return a, max(a, round(100 * a / p))


def sample_mask(shape, percent, *, axis: int = -1, run: Optional[int] = None) -> np.ndarray:
    """Equal-interval N% selection of output items (Alg 2-D): True for the sampled items.

    Item ``i`` along ``axis`` is kept iff ``i % b < a`` with ``(a, b) = sample_run(percent,
    run)``; other axes are not subsampled.

    Examples
    --------
    >>> sample_mask((2, 10), 25, axis=1).astype(int)
    array([[1, 0, 0, 0, 1, 0, 0, 0, 1, 0],
           [1, 0, 0, 0, 1, 0, 0, 0, 1, 0]])
    """
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    if not dims or not all(_is_int(d) and d >= 0 for d in dims):
        raise InputError(f"shape = {shape!r}: must be a tuple of one or more ints >= 0")
    shape = tuple(int(d) for d in dims)
    ax = _check_axis(axis, len(shape))
    a, b = sample_run(percent, run)
    line = (np.arange(shape[ax]) % b) < a
    view = [1] * len(shape)
    view[ax] = shape[ax]
    return np.broadcast_to(line.reshape(view), shape).copy()


# --------------------------------------------------------------------------- embodiments

@dataclass(frozen=True, eq=False)
class Result:
    """What an embodiment runner returns: a dataclass, not a tuple (read ``r.out``,
    ``r.f_out``, ``r.stats``, ...).

    Attributes
    ----------
    out : np.ndarray of int64
        The converted outputs (output shape).
    f_out : int
        Their fractional bits.
    stats : Stats
        The statistics the point was chosen from (all items, or the sample).
    items_computed : int
        Output items the op computed in total (True mask items; the full size for ``None``).
    op_calls : int
        Number of times ``op`` was called.
    sat : np.ndarray of bool
        Saturation flags of ``out``.
    """
    out: np.ndarray
    f_out: int
    stats: Stats
    items_computed: int
    op_calls: int
    sat: np.ndarray = field(repr=False)


class _Runner:
    """Calls ``op``, checks its results and counts the computed items."""

    def __init__(self, op: Callable, shape=None):
        if not callable(op):
            raise InputError(f"op = {op!r}: must be callable as op(mask) -> wide int results")
        self.op, self.shape, self.items, self.calls = op, shape, 0, 0

    def __call__(self, mask) -> np.ndarray:
        r = self.op(mask)
        shape = np.shape(r)
        if self.shape is not None and shape != self.shape:
            raise InputError(f"op result: has shape {shape}: must be the output shape {self.shape}")
        r = _wide("op result", r, mask)
        self.shape = r.shape
        self.items += r.size if mask is None else int(np.count_nonzero(mask))
        self.calls += 1
        return r


def _prepare(f_in, bits, signed, rounding, bins, kw):
    unknown = set(kw) - {"overflow_ratio", "f_prev", "f_min", "f_max"}
    if unknown:
        raise InputError(f"{', '.join(sorted(unknown))}: unknown keyword(s): the runners take "
                         f"signed, rounding, bins, overflow_ratio, f_prev, f_min, f_max")
    _check_int("f_in", f_in)
    _determine_args(bits, kw.get("overflow_ratio", 0.0), signed, kw.get("f_prev"),
                    kw.get("f_min", -64), kw.get("f_max", 64))
    _check_rounding(rounding)
    _check_bins(bins)


def _result(runner, wide, stats, f_in, bits, signed, rounding, kw) -> Result:
    f_out = determine(stats, f_in, bits, signed=signed, **kw)
    out, sat = convert(wide, f_in, f_out, bits, rounding=rounding, signed=signed)
    return Result(out, f_out, stats, runner.items, runner.calls, sat)


def run_e1(op: Callable, f_in: int, bits: int, *, signed: bool = True,
           rounding: str = "nearest_away", bins: int = MAX_BINS, **kw) -> Result:
    """E1, two operations on all data: preceding op -> stats -> point; the main op computes
    everything again and is converted. ``kw``: :func:`determine`'s ``overflow_ratio``,
    ``f_prev``, ``f_min``, ``f_max``; ``signed`` goes to both DETERMINE and CONVERT."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    runner = _Runner(op)
    stats = acquire(runner(None), bins)
    return _result(runner, runner(None), stats, f_in, bits, signed, rounding, kw)


def run_e2(op: Callable, f_in: int, bits: int, percent, *, shape, axis: int = -1,
           run: Optional[int] = None, signed: bool = True, rounding: str = "nearest_away",
           bins: int = MAX_BINS, **kw) -> Result:
    """E2, two operations with N% statistics: the preceding op computes only the
    ``sample_mask(shape, percent, axis=axis, run=run)`` items, the point comes from their
    statistics, the main op computes everything. ``shape`` is the op's output shape."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    sample = sample_mask(shape, percent, axis=axis, run=run)
    runner = _Runner(op, sample.shape)
    stats = acquire(runner(sample)[sample], bins)
    return _result(runner, runner(None), stats, f_in, bits, signed, rounding, kw)


def run_e3(op: Callable, f_in: int, bits: int, *, signed: bool = True,
           rounding: str = "nearest_away", bins: int = MAX_BINS, **kw) -> Result:
    """E3, result saving: one operation on all data; the stored wide results give the
    statistics and are then converted (no recomputation)."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    runner = _Runner(op)
    wide = runner(None)
    return _result(runner, wide, acquire(wide, bins), f_in, bits, signed, rounding, kw)


def run_e4(op: Callable, f_in: int, bits: int, percent, *, shape, axis: int = -1,
           run: Optional[int] = None, signed: bool = True, rounding: str = "nearest_away",
           bins: int = MAX_BINS, **kw) -> Result:
    """E4, hybrid: the op computes the sample (as in :func:`run_e2`) and its wide results are
    stored; their statistics give the point; the op then computes the remaining items
    (``mask = ~sample``, skipped when nothing remains) and both parts are converted."""
    _prepare(f_in, bits, signed, rounding, bins, kw)
    sample = sample_mask(shape, percent, axis=axis, run=run)
    runner = _Runner(op, sample.shape)
    stored = runner(sample)
    stats = acquire(stored[sample], bins)
    wide = stored if sample.all() else np.where(sample, stored, runner(~sample))
    return _result(runner, wide, stats, f_in, bits, signed, rounding, kw)


# --------------------------------------------------------------------------- cost model

class Costs(NamedTuple):
    """Per-layer times of fig. 15 (#0 ... #4, indexable in that order)."""
    prev: float     #: #0: point from the previous iteration's statistics
    e1: float       #: #1: full preceding op + main op
    e2: float       #: #2: N% preceding op + main op
    e3: float       #: #3: result saving (wide results stored and re-read)
    e4: float       #: #4: N% saved + (100-N)% computed at the new point


def cost_model(t_prev: float, t_pre: float, t_store: float, percent: float) -> Costs:
    """The fig. 15 timing model (SPECS T2.1), times in any one unit.

    ``t_prev`` is a layer's time with the previous iteration's statistics (= the main op),
    ``t_pre`` the preceding op on all data, ``t_store`` the time of E3 (which transfers the
    wide results), ``N = percent / 100``::

        #0 = t_prev, #1 = t_pre + t_prev, #2 = N*t_pre + t_prev,
        #3 = t_store, #4 = N*t_store + (1 - N)*t_prev

    Examples
    --------
    >>> [round(t, 2) for t in cost_model(2.1, 2.0, 15.7, 12.5)]
    [2.1, 4.1, 2.35, 15.7, 3.8]
    """
    t0, tp, ts = (_check_real(name, t, 0.0, math.inf, lo_open=False, hi_open=True)
                  for name, t in (("t_prev", t_prev), ("t_pre", t_pre), ("t_store", t_store)))
    n = _check_real("percent", percent, 0.0, 100.0, lo_open=True, hi_open=False) / 100
    return Costs(t0, tp + t0, n * tp + t0, ts, n * ts + (1 - n) * t0)


# --------------------------------------------------------------------------- E5

class Choice(NamedTuple):
    """E5's decision for one layer: ``method`` (``"e2"`` or ``"e4"``) and the two mean times
    it compared (the layer's own, or its operation type's)."""
    method: str
    e2: float
    e4: float


def _mean_time(name, key, t) -> float:
    v = np.asarray(t, dtype=object).reshape(-1)
    if v.size == 0:
        raise InputError(f"{name}[{key!r}]: has no times: give one time or one per iteration 1..A")
    vals = [_check_real(f"{name}[{key!r}]", x, 0.0, math.inf, lo_open=False, hi_open=True) for x in v]
    return math.fsum(vals) / len(vals)


def select_e5(t_e2, t_e4, groups=None) -> dict:
    """E5's selection (Alg 2-E): the faster way of updating the radix point, per layer or
    per operation type. Returns ``{layer: Choice}``.

    Rules
        * ``t_e2[L]`` / ``t_e4[L]``: the times of E2 (update by two operations, N%
          statistics) and E4 (update by saving results) at layer ``L``: one number, or one per
          iteration ``1..A`` (numbers >= 0, finite). Both mappings have the same layers.
        * A layer's time of a method is the mean over its iterations (the source records the
          elapsed times until iteration A and averages them per layer).
        * Per layer (``groups`` None): ``method = "e4"`` iff ``mean(t_e4) < mean(t_e2)``,
          else ``"e2"``: a tie goes to E2, which stores no wide results (the source leaves
          ties open).
        * Per operation type (the modification; ``groups`` maps every layer to its type,
          e.g. ``"conv"``): a type's time of a method is the mean of its layers' means, the
          same rule decides, and every layer of the type gets the type's :class:`Choice`.
        * From iteration A+1 on, a layer runs the chosen method (:func:`run_e5`).

    Notes
    -----
    Fig. 17 of the source shows every layer choosing E2 per layer while the convolutions
    choose E4 per type. Under this rule that cannot come from one set of times (a mean of
    layers that each have ``e2 < e4`` keeps ``e2 < e4``), and the figure's times are not in
    the text, so that example is not reproduced.

    Examples
    --------
    >>> c = select_e5({"conv1": [2.4, 2.3], "bn1": 1.0}, {"conv1": [1.9, 2.1], "bn1": 1.0})
    >>> c["conv1"].method, c["conv1"].e4, c["bn1"].method
    ('e4', 2.0, 'e2')
    >>> select_e5({"a": 3, "b": 1}, {"a": 1, "b": 2}, groups={"a": "conv", "b": "conv"})["b"]
    Choice(method='e4', e2=2.0, e4=1.5)
    """
    if not isinstance(t_e2, dict) or not isinstance(t_e4, dict) or set(t_e2) != set(t_e4) or not t_e2:
        raise InputError(f"t_e2, t_e4: layers {sorted(map(str, t_e2 or {}))} and {sorted(map(str, t_e4 or {}))}: "
                         f"must be two non-empty mappings of the same layers to times")
    m2 = {k: _mean_time("t_e2", k, v) for k, v in t_e2.items()}
    m4 = {k: _mean_time("t_e4", k, v) for k, v in t_e4.items()}
    if groups is None:
        keys = {k: k for k in m2}
    else:
        missing = [k for k in m2 if k not in groups] if isinstance(groups, dict) else list(m2)
        if missing:
            raise InputError(f"groups: has no operation type for layer(s) {', '.join(map(str, missing))}: "
                             f"must map every layer to its type")
        keys = {k: groups[k] for k in m2}
    choices = {}
    for g in dict.fromkeys(keys.values()):
        members = [k for k in m2 if keys[k] == g]
        e2 = math.fsum(m2[k] for k in members) / len(members)
        e4 = math.fsum(m4[k] for k in members) / len(members)
        choices[g] = Choice("e4" if e4 < e2 else "e2", e2, e4)
    return {k: choices[keys[k]] for k in m2}


def run_e5(op: Callable, f_in: int, bits: int, percent, *, shape, t_prev: float, t_pre: float,
           t_store: float, axis: int = -1, run: Optional[int] = None, signed: bool = True,
           rounding: str = "nearest_away", bins: int = MAX_BINS, **kw) -> Tuple[Choice, Result]:
    """E5 at one layer after iteration A: :func:`cost_model` gives the times of E2 (#2) and
    E4 (#4) from ``t_prev``, ``t_pre``, ``t_store`` and ``N = percent / 100``;
    :func:`select_e5` picks the faster (E2 on a tie), and that runner (:func:`run_e2` or
    :func:`run_e4`, same arguments) runs. Returns ``(Choice, Result)``; the result is the
    chosen runner's bit for bit, and for one sample E2's equals E4's: the choice changes the
    time, never the bits.

    Examples
    --------
    Fig. 15 (SPECS T2.1): transfer-bound, so E2 (2.35) beats E4 (3.8).

    >>> import numpy as np
    >>> wide = np.array([[1000, -700, 30, 5]] * 8)
    >>> choice, r = run_e5(lambda mask: wide, 8, 8, 12.5, shape=wide.shape, axis=0,
    ...                    t_prev=2.1, t_pre=2.0, t_store=15.7)
    >>> choice.method, round(choice.e2, 2), round(choice.e4, 2), r.f_out, r.out[0].tolist()
    ('e2', 2.35, 3.8, 5, [125, -88, 4, 1])
    """
    costs = cost_model(t_prev, t_pre, t_store, percent)
    choice = select_e5({0: costs.e2}, {0: costs.e4})[0]
    runner = run_e2 if choice.method == "e2" else run_e4
    return choice, runner(op, f_in, bits, percent, shape=shape, axis=axis, run=run, signed=signed,
                          rounding=rounding, bins=bins, **kw)
