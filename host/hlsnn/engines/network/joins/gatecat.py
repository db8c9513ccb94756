"""A gate's product read by a skip ``Concat`` in the integer network mode (rule gate_concat:
d_unet_silu, a U-Net with ``nn.SiLU`` everywhere: ``a = silu(conv(x))`` is read by the encoder's
``MaxPool2d`` and by the decoder's ``torch.cat([a, up(silu(..))], 1)``).

A SiLU is rule channel_gate's gate ``Mul``, pending until its engine consumer requantizes the
product to its ``F_x`` (:func:`hlsnn.engines.network.gate.materialize`); layer by layer the
engine layer after the concat quantizes the float products with ``to_fixed`` at its ``F_x``. So:

Rule gate_concat: **a concat part that is a pending gate** (also through a max pool or a move of
    it, rule gate_pool of :mod:`.gatepool`) is the gate requantized to the ``F_x`` of the engine
    layers that read the concat (all at one radix point, else refused by name): rule
    channel_gate's gate op at that ``F_x`` (the one the gate's other consumers materialized at
    the same ``F_x``, a second gate op ``NAME_cat`` otherwise), then rule channel_concat's concat
    of the parts. The gate op is placed right after its operands' (or its first
    materialization's) op, where they are live; the concat's part made first waits in the
    shortcut buffer, which the gate loop writes (:mod:`.gatesc`).

On ``bfp_systolic`` the gate's pairs are exact and the concat moves them (netbfp bfp_gate, rule
channel_concat): nothing is pending there."""
from __future__ import annotations

import numpy as np

#: host ops a tensor passes unchanged on its way to an engine layer (rule gate_concat looks through them)
THROUGH = ("Concat", "Flatten", "Reshape", "Identity", "Squeeze", "Unsqueeze")


def engine_readers(program, t):
    """The layers that read tensor ``t``, a ``Concat`` (or an alias) among them replaced by the
    layers that read its output, recursively: engine layers, or host layers that are not
    :data:`THROUGH`."""
    out = []
    for k in program["layers"]:
        if t not in k.get("inputs", ()):
            continue
        if k["kind"] == "host" and k["op"] in THROUGH:
            out.extend(engine_readers(program, k["output"]))
        else:
            out.append(k)
    return out


def one_radix(readers):
    """The one ``F_x`` at which ``readers`` (all engine layers) read, else None."""
    radix = {None if k["kind"] == "host" or k.get("f_x") is None or np.ndim(k["f_x"]) else int(k["f_x"])
             for k in readers}
    return None if not readers or None in radix or len(radix) != 1 else radix.pop()


def _early(w, g, make):
    """``make()`` appends the gate op of the pending gate ``g``; move it to right after the last op
    that makes one of its operands (or the gate's first materialization, ``NAME_q``): the concat
    reads its earlier-made part from the shortcut buffer, which the gate loop writes
    (:mod:`.gatesc`) and a move's loop does not, and the operands are live there anyway."""
    n = len(w.ops)
    make()
    new = w.ops[n:]
    del w.ops[n:]
    made = set(g["ins"]) | {g["name"] + "_q"}
    at = max([i + 1 for i, op in enumerate(w.ops) if op.out in made], default=len(w.ops))
    w.ops[at:at] = new


def lower_host(j, program, w, steps, why, op_cls):
    """Rule gate_concat: a ``Concat`` with a part in state ``gate`` (integer engines): each such part
    materialized at the concat's consumers' ``F_x``, then :func:`.move.lower_host` on the
    materialized parts. True if it was lowered here."""
    if j["op"] != "Concat" or steps.bits is None:
        return False
    sts = [w.state.get(t) for t in j["inputs"]]
    if not any(s is not None and s[0] == "gate" for s in sts):
        return False
    from .. import gate as netgate, move as netmove
    readers = engine_readers(program, j["output"])
    f_x = one_radix(readers)
    if f_x is None:
        raise why(j, "a Concat of a gate's product (a SiLU's x * sigmoid(x)) read by engine layers at one radix "
                     "point only (rule gate_concat)")
    consumer = dict(readers[0], f_x=f_x)
    ins = []
    for t, s in zip(j["inputs"], sts):
        if s is None or s[0] != "gate":
            ins.append(t)
            continue
        g = s[1]
        base = g["name"] + "_q"
        if base in w.shapes and w.state[base][1] != f_x:        # made at another radix for another reader
            base = g["name"] + "_cat"
        if base not in w.shapes:
            _early(w, g, lambda: netgate.materialize(consumer, t, s, w.state, w.shapes, w.ops, w.aliases,
                                                     steps.rounding, why, op_cls,
                                                     out=base if base.endswith("_cat") else None))
        ins.append(base)
    return netmove.lower_host(dict(j, inputs=ins), w.state, w.shapes, w.ops, why, op_cls)
