"""A channel ``Concat`` one of whose parts is the graph input (issue 52: a 1-D autoencoder's
``torch.cat([decoded, x])``, a skip from the input), in every engine's network mode: rule 8i of
:mod:`.move`, whose docstring states it. The part is the kernel's input (the tensor rule 1 of
:mod:`hlsnn.deploy.lower.program` quantizes, or the last op of a host prefix,
:mod:`hlsnn.deploy.lower.netprefix`), read through aliases; the image load writes it to the shortcut
buffer as well as an activation buffer (``kInDual``, :func:`.kernel.allocate`: the input is the
concat's earlier-made operand), so the kernels' ``Concat`` loop moves it as any other part.

Integers (``shift_mac``, ``sparse_cluster``): the part holds ``to_fixed(x, F_in)`` from rule 1,
where the layer path's consumer computes ``to_fixed(x, F_x)`` of the float input; the two are
the same integers when ``F_x == F_in`` (same bits, sign and rounding), and :func:`check_radix`
refuses the concat by name otherwise. A concat that reads the input before any engine layer
has quantized it is refused too (``F_in`` is not known yet). BFP pairs (``bfp_systolic``): the
input's exact float32 pairs (netbfp rule 1); the consumer's rule 3 forms its patches from the
exact values, as the layer path forms them from the float concat.
"""
from __future__ import annotations

from ..program import _chw


def part_state(j, w, steps, why):
    """``state(t)``: the state a part ``t`` of Concat ``j`` in state ``("input",)`` takes (rule
    8i): ``("q", F_in)`` on integers, ``("q", None)`` on BFP pairs; :class:`InputError` for a
    float tensor that is not the kernel's input, or an input no engine layer quantized yet."""
    kin = w.aliases.get(w.kernel_in, w.kernel_in)

    def state(t):
        if w.aliases.get(t, t) != kin:
            raise why(j, f"a Concat of the float tensor {t}, which is not the kernel's input")
        (c, h, w_), (ci, hi, wi) = _chw(w.shapes[t]), _chw(w.shapes[kin])
        if c != ci or h * w_ != hi * wi:             # the image load's banks hold the input's channels
            raise why(j, f"a Concat of the graph input viewed as {c} channels of {h}x{w_} (the kernel loads it as "
                         f"{ci} channels of {hi}x{wi})")
        if steps.bits is None:                  # BFP pairs: the input as it is (netbfp rule 1)
            return ("q", None)
        if steps.quant is None:
            raise why(j, "a Concat that reads the graph input before an engine layer quantizes it (rule 8i: "
                         "its radix is the first engine layer's)")
        return ("q", steps.quant)
    return state


def check_radix(j, c, fs, f_x, why):
    """Rule 8i for the pending concat ``c`` (parts at radix ``fs``) read by engine layer ``j``
    at ``f_x``: each graph-input part must be at ``f_x`` already."""
    for i in c.get("graph_in", ()):
        if fs[i] != f_x:
            raise why(j, f"a Concat of the graph input {c['ins'][i]} (quantized at radix {fs[i]} for the first "
                         f"layer) read at radix {f_x}: the layer path rounds the float input once at {f_x}, "
                         f"requantizing it rounds twice (rule 8i: exact only at one radix)")
