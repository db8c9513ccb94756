"""``torch.where(h > 0, h, a * h)``, a leaky ReLU written by hand, as one ``LeakyRelu`` (``alpha =
a``): the import gives a ``Compare`` (``Greater`` than 0), a ``Scale`` by ``a`` and a selecting
``Where`` (:mod:`hlsnn.deploy.run.maskfill`), which the network mode has no rule for (a ``Compare``
there), so such a model ran layer by layer. The ``LeakyRelu`` has a table there (rule 9) and an
epilogue on the engines that fuse one.

Exact: where ``h > 0`` both give ``h``; elsewhere the ``Where`` gives ``a * h`` (float64, as
:mod:`hlsnn.deploy.run.hostops` computes the ``Scale``) and ``LeakyRelu`` ``alpha * h`` with ``alpha``
the same float64 value (at ``h = 0`` both 0). Folded: ``Greater`` or ``GreaterOrEqual`` than 0
with the ``Where``'s X ``h`` and Y ``a * h``, or ``Less`` / ``LessOrEqual`` than 0 with X ``a * h``
and Y ``h``; the ``Compare`` and the ``Scale`` read only by the ``Where``, every tensor of one
shape (no broadcast), ``a`` one scalar."""
from __future__ import annotations

import numpy as np

from ..importer.graph import Layer

#: the comparisons with 0 whose true branch is ``h`` (else the scaled one)
KEEP_IF_TRUE = {"Greater": True, "GreaterOrEqual": True, "Less": False, "LessOrEqual": False}


def _scalar(v):
    a = np.asarray(v, np.float64)
    return float(a.reshape(-1)[0]) if a.size == 1 and np.isfinite(a).all() else None


def fold(layers, output):
    """``layers`` with every hand-written leaky ReLU (module docstring) as one ``LeakyRelu`` layer,
    named after its ``Where``, where the ``Where`` stood."""
    produced = {la.output: la for la in layers}
    readers = {}
    for la in layers:
        for t in la.inputs:
            readers.setdefault(t, []).append(la)
    drop, put = set(), {}
    for w in layers:
        a = w.attrs or {}
        if w.kind != "host" or w.op != "SwCompute" or a.get("fn") != "Where" or len(w.inputs) != 3:
            continue
        if [tuple(o) if not isinstance(o, tuple) else o for o in a.get("operands", ())] != [("x", 1), ("x", 2)] \
                or not isinstance(a.get("cond"), (int, np.integer)) or int(a["cond"]) != 0 \
                or any(np.asarray(m).any() for m in a.get("neginf", ())) \
                or len({tuple(s) for s in a.get("in_shapes", ())} | {tuple(a.get("out_shape", ()))}) != 1:
            continue
        cmp_, x, y = (produced.get(t) for t in w.inputs)
        if cmp_ is None or cmp_.op != "Compare" or cmp_.attrs.get("fn") not in KEEP_IF_TRUE \
                or cmp_.attrs.get("c") != 0.0 or len(cmp_.inputs) != 1:
            continue
        h = cmp_.inputs[0]
        keep, scaled = (w.inputs[1], y) if KEEP_IF_TRUE[cmp_.attrs["fn"]] else (w.inputs[2], x)
        if keep != h or scaled is None or scaled.op != "Scale" or scaled.inputs != [h] \
                or scaled.attrs.get("divide") or _scalar(scaled.attrs.get("c")) is None:
            continue
        if any(t == output or len(readers.get(t, ())) != 1 for t in (cmp_.output, scaled.output)):
            continue
        put[w.name] = Layer(w.name, "host", [h], w.output, op="LeakyRelu",
                            attrs={"alpha": _scalar(scaled.attrs["c"])})
        drop.update((cmp_.name, scaled.name))
    return [put.get(la.name, la) for la in layers if la.name not in drop]
