"""A max pool of the float input that an engine layer also reads, in every engine's network mode
(rule input_max_pool: InceptionTime's branch ``conv1x1(MaxPool1d(3, 1, 1)(x))`` beside its
bottleneck ``conv1x1(x)``). A host prefix op (:mod:`hlsnn.deploy.lower.netprefix`) cannot serve
both: the kernel has one input.

* **Integer engines.** ``to_fixed`` (rule input_quantize of :mod:`hlsnn.deploy.lower.program`) is
  monotone non-decreasing, so the max of the quantized values is the quantized max, and the
  padding (``-inf``) never wins. The pool of the kernel's input integers (rule max_pool, the
  input's radix ``F``) gives the layer path's bits when every engine layer reading the pool
  (through data moves only) reads at ``F_x = F`` (rule input_quantize's check). Stochastic
  rounding (not monotone) is refused.
* **bfp_systolic.** The input elements are the float32 values themselves; the max pool picks the
  element of the largest value (rule bfp_pool).

A pool of the float input that nothing else reads stays a prefix op."""
from __future__ import annotations

from ..program import ALIAS_OPS

#: the deployment roundings under which ``to_fixed`` is monotone (all but ``stochastic``)
MONOTONE = ("nearest_even", "nearest_away", "truncate")


def _views(program, t):
    """``t`` and every tensor a chain of data moves (:data:`ALIAS_OPS`) makes of it."""
    seen, todo = {t}, [t]
    while todo:
        s = todo.pop()
        for la in program["layers"]:
            if la["kind"] == "host" and la["op"] in ALIAS_OPS and s in la["inputs"] and la["output"] not in seen:
                seen.add(la["output"])
                todo.append(la["output"])
    return seen


def _readers(program, t):
    """The layers that read ``t`` or a view of it (:func:`_views`), data moves excepted."""
    views = _views(program, t)
    return [la for la in program["layers"] if any(i in views for i in la["inputs"])
            and not (la["kind"] == "host" and la["op"] in ALIAS_OPS)]


def lower_host(j, program, w, steps, why, op_cls, fields):
    """Host layer ``j`` as rule input_max_pool lowers it (module docstring; appending its maxpool op to
    ``w.ops``): True, or False when it is not a ``MaxPool`` of the float input that another layer
    reads too. ``fields``: :func:`hlsnn.deploy.lower.poolfields.maxpool_fields`."""
    if j["op"] != "MaxPool":
        return False
    src = j["inputs"][0]
    st = w.state.get(src)
    if st is None or st[0] != "input":
        return False
    root = w.aliases.get(src, src)
    if not [la for la in _readers(program, root) if la is not j]:
        return False                         # the pool alone reads the input: a prefix op (netprefix)
    readers = _readers(program, j["output"])
    if not readers or any(la["kind"] == "host" for la in readers):
        raise why(j, "a max pool of the float input that another layer reads too is lowered when only engine "
                     "layers read the pool (through data moves)")
    if steps.bits is None:                   # bfp_systolic: the input's pairs, picked (rule bfp_pool)
        steps.read_input(j, src, st, w)
    else:
        if program["rounding"] not in MONOTONE:
            raise why(j, f"a max pool of the float input under {program['rounding']} rounding (not monotone)")
        f_x = {la["f_x"] for la in readers}
        if len(f_x) != 1 or None in f_x:
            raise why(j, f"the engine layers reading this max pool of the float input read it at radixes "
                         f"{sorted(f_x, key=str)}; rule input_max_pool needs one, the float input's")
        steps.read_input(dict(j, f_x=f_x.pop()), j["output"], st, w)   # rule input_quantize's check: the input's F_x
    f = fields(j, w.shapes[src])
    w.ops.append(op_cls("maxpool", j["name"], [src], j["output"], f))
    w.state[j["output"]] = ("q", None if steps.bits is None else w.state[j["output"]][1])
    w.shapes[j["output"]] = (f["c"], f["oh"]) if len(w.shapes[src]) == 2 else (f["c"], f["oh"], f["ow"])
    return True
