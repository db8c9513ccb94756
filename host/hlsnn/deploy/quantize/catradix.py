"""One radix for the graph input where a Concat reads it (``radix: lse``,
:mod:`hlsnn.deploy.quantize.radix_lse`): the conv that reads ``Concat([..., x, ...])`` of the graph input
``x`` converts the float concat at the first engine layer's input radix ``F_in`` when ``F_in`` is
one of the radix points its own least-squared-error rule weighs (DETERMINE's ``F`` of the concat
to ``DEPTH`` bits finer), instead of its own choice. Rule input_concat of the network kernels
(:mod:`hlsnn.engines.network.joins.catinput`) moves the input's integers ``to_fixed(x, F_in)`` into the
concat, exact only when the reader converts at ``F_in``. Outside that window (the other
parts reach far beyond the input's range: ``F_in`` would saturate them, or spend bits the
values do not need) the reader keeps its own radix and the network mode refuses it by name.

The compiled calibration (:mod:`hlsnn.deploy.quantize.calibrate`) does not replicate a Concat (it
leaves it to the layer path), so this is the one place the rule runs.
"""
from __future__ import annotations

from . import radix_lse

#: host ops that pass a tensor through unchanged (a view of it)
VIEWS = ("Flatten", "Reshape", "Identity", "Dropout", "Squeeze", "Unsqueeze")


def _source(net, t, producers):
    """``t`` followed back through views to the tensor they show."""
    seen = 0
    while t in producers and producers[t].kind == "host" and producers[t].op in VIEWS and seen < len(net.layers):
        t, seen = producers[t].inputs[0], seen + 1
    return t


def first_exec(ex):
    """The executor of the first engine layer of ``ex``'s network when it reads the graph input
    (through views) and ``ex`` reads a Concat of the graph input (through views), else None."""
    dep = ex.deploy
    net = getattr(dep, "net", None)
    if net is None or not net.engine_layers():
        return None
    producers = {la.output: la for la in net.layers}
    first = net.engine_layers()[0]
    if first is ex.layer or _source(net, first.inputs[0], producers) != net.input:
        return None
    cat = producers.get(_source(net, ex.layer.inputs[0], producers))
    if cat is None or cat.kind != "host" or cat.op != "Concat":
        return None
    if not any(_source(net, t, producers) == net.input for t in cat.inputs):
        return None
    return dep.execs.get(first.name)


def tied(ex, f_x, f_msb):
    """The input radix of executor ``ex`` (module docstring): the first layer's ``F_in`` when
    ``ex`` (``radix: lse``) reads a Concat of the graph input and ``F_in`` lies in
    ``[f_msb, f_msb + DEPTH]``, else ``f_x`` (its own choice)."""
    if not radix_lse.wanted(ex):
        return f_x
    first = first_exec(ex)
    f_in = None if first is None else first.f_x
    if f_in is not None and int(f_msb) <= int(f_in) <= int(f_msb) + radix_lse.DEPTH:
        return int(f_in)
    return f_x
