"""Rule 4q: a low-bit activation's clamp after a residual Add (issue 82), on ``sparse_cluster``'s
network kernel. A QONNX ``Quant`` of b <= 8 bits after an ``Add`` (Brevitas' ``QuantReLU`` on a
residual sum, or after the global pool of one) comes in as ``Clip`` to the file's range
(:mod:`hlsnn.deploy.importer.qimport`); on a pending Add (:mod:`hlsnn.deploy.lower.program` rule 4, with its ReLU
and global pool) it becomes the Add's output clamp: the sum requantized to the consumer's radix
``F_x`` (round, int8 saturation) and then clamped to the ``Clip``'s bounds at ``F_x``, which must be
values of that format (as rule 2's conv clamp: rounding the exact sum and then clamping equals
clamping and then rounding for integer bounds, the ``Quant``'s order). The kernel's Add loops apply
it (``d.clo``, ``d.chi``); the emulator's :func:`hlsnn.deploy.lower.program.add_ints` too.

Taken only where every reader of the clamped tensor is an engine layer (through aliases such as
``Reshape``; a chained Add, a move or a table of it would not see the clamp) and on ``sparse_cluster``
(the other engines' Add loops have no clamp); otherwise the walk's other rules see the ``Clip`` as
before (a table of a pending Add, :mod:`.tablein`), or name it. A ``Relu`` after the global pool of a
ReLU'd sum is the identity (a mean of values >= 0) and is taken too.
"""
from __future__ import annotations

from ..program import ALIAS_OPS


def _engine_readers(t, layers):
    """Every reader of tensor ``t`` is an engine layer (through alias host ops)."""
    readers = [j for j in layers if t in j["inputs"]]
    return bool(readers) and all(j["kind"] != "host" or (j["op"] in ALIAS_OPS and _engine_readers(j["output"], layers))
                                 for j in readers)


def lower_host(j, st, w, steps, why) -> bool:
    """Take a ``Clip`` (or an identity ``Relu``) of a pending Add ``st`` (module docstring)."""
    if st is None or st[0] != "add" or j["op"] not in ("Clip", "Relu"):
        return False
    a = st[1]
    if j["op"] == "Relu":                                 # after the pool of a ReLU'd sum: the identity
        if a.get("p") is None or not a.get("relu") or "clip" in a:
            return False
    else:                                                 # else the other rules (a table of it, 9) may take it
        if steps.engine != "sparse_cluster" or "table_in" in j or not _engine_readers(j["output"], w.layers):
            return False                                  # table_in: the layer path runs it as rule 9e's table
        at = j["attrs"]
        lo, hi = a.get("clip", (None, None))
        lo = at.get("lo") if lo is None else (lo if at.get("lo") is None else max(lo, at["lo"]))
        hi = at.get("hi") if hi is None else (hi if at.get("hi") is None else min(hi, at["hi"]))
        a = dict(a, clip=(lo, hi), name=j["name"])        # its own tensor: NAME_q of the clamped sum
    w.state[j["output"]], w.shapes[j["output"]] = ("add", a), w.shapes[j["inputs"][0]]
    return True


def fields(j, a, bits, why, clamp) -> dict:
    """The add op's ``clip`` (integers at the consumer's ``F_x``) of a clamped pending Add ``a``
    (``clamp``: :func:`hlsnn.deploy.lower.program._clamp`, rule 2's)."""
    if "clip" not in a:
        return {}
    lo, hi = a["clip"]
    return {"clip": clamp(dict(j, attrs={"lo": lo, "hi": hi}), j["f_x"], bits, None, lambda what: why(j, what))}
