"""A channel ``Concat`` one of whose parts is the graph input (a 1-D autoencoder's
``torch.cat([decoded, x])``), in every engine's network mode: rule input_concat of :mod:`.move`.
The part is the kernel's input (rule input_quantize's tensor of
:mod:`hlsnn.deploy.lower.program`, or a host prefix's last op,
:mod:`hlsnn.deploy.lower.netprefix`); the image load writes it to the shortcut buffer too
(``kInDual``, :func:`.kernel.allocate`), so the ``Concat`` loop moves it as any other part.

Integers: the part holds ``to_fixed(x, F_in)``; the layer path's consumer computes
``to_fixed(x, F_x)``, the same integers when ``F_x == F_in`` (:func:`check_radix` refuses the
concat by name otherwise, and one read before any engine layer quantized the input). BFP pairs:
the input's exact float32 pairs (netbfp rule bfp_input), from which rule bfp_conv forms its
patches as the layer path does from the float concat."""
from __future__ import annotations

from ..program import _chw


def part_state(j, w, steps, why):
    """``state(t)``: the state a part ``t`` of Concat ``j`` in state ``("input",)`` takes (rule
    input_concat): ``("q", F_in)`` on integers, ``("q", None)`` on BFP pairs; :class:`InputError` for a
    float tensor that is not the kernel's input, or an input no engine layer quantized yet."""
    kin = w.aliases.get(w.kernel_in, w.kernel_in)

    def state(t):
        if w.aliases.get(t, t) != kin:
            raise why(j, f"a Concat of the float tensor {t}, which is not the kernel's input")
        (c, h, w_), (ci, hi, wi) = _chw(w.shapes[t]), _chw(w.shapes[kin])
        if c != ci or h * w_ != hi * wi:             # the image load's banks hold the input's channels
            raise why(j, f"a Concat of the graph input viewed as {c} channels of {h}x{w_} (the kernel loads it as "
                         f"{ci} channels of {hi}x{wi})")
        if steps.bits is None:                  # BFP pairs: the input as it is (netbfp rule bfp_input)
            return ("q", None)
        if steps.quant is None:
            raise why(j, "a Concat that reads the graph input before an engine layer quantizes it (rule input_concat: "
                         "its radix is the first engine layer's)")
        return ("q", steps.quant)
    return state


def check_radix(j, c, fs, f_x, why):
    """Rule input_concat for the pending concat ``c`` (parts at radix ``fs``) read by engine layer ``j``
    at ``f_x``: each graph-input part must be at ``f_x`` already."""
    for i in c.get("graph_in", ()):
        if fs[i] != f_x:
            raise why(j, f"a Concat of the graph input {c['ins'][i]} (quantized at radix {fs[i]} for the first "
                         f"layer) read at radix {f_x}: the layer path rounds the float input once at {f_x}, "
                         f"requantizing it rounds twice (rule input_concat: exact only at one radix)")
