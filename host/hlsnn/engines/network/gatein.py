"""A gate of a gate's product (rule gate_in): a gate ``Mul`` (rule channel_gate, or bfp_gate on BFP pairs;
:mod:`hlsnn.engines.network.gate`) one of whose operands is itself the float output of a gate
``Mul`` (through the moves :data:`MOVES`). Squeeze-excite then a spatial gate, ``h = x * s;
h * sigmoid(conv(h))``, is a product of three codes: wider than the integer kernels' gate product
of two ``b``-bit codes, and than bfp's 26-bit element.

**Rule gate_in.** Such an operand's exact float64 values ``v`` are converted to ``b``-bit signed
codes at the radix ``F_g`` that DETERMINE picks on the calibration images
(:func:`hlsnn.deploy.quantize.quant.host_radix`; ``dynamic``: every batch):

* integer formats (``b`` the codes' width of the product's operands): ``q = to_fixed(v, F_g, b)``,
  exact while the product's radix ``Fa + Fb <= max(F_g + 24, 0)`` (rule channel_gate's requantization
  ``shift_round_sat(p, Fa + Fb - F_g, b, rounding)`` gives the same bits; refused by name
  otherwise);
* BFP (``b = M``, the mantissa bits): rule bfp_table's codes of the exact pairs, ``q =
  shift_round_sat(m, -(e + F_g), b, rounding)``, the element ``(q, -F_g)``.

The gate then multiplies those codes by the other operand under rule channel_gate (bfp_gate).
``F_g`` is the compiled program's host-layer field ``gate_in`` (``{"f_in": [F or None, F or
None]}``, one entry per operand). The layer path (:mod:`hlsnn.deploy.run.gatecodes`) does exactly
that; the integer network modes materialize the pending inner gate at ``F_g`` (a second ``gate``
op where an engine layer read it at another radix); the bfp network mode writes the inner gate's
pairs as codes by a rule bfp_table table of the identity (``T[q - lo] = q``, ``F_o = F_g``: the
``Lut`` loop). No new kernel loop.

**Rule gate_in_sum** (integer engines): a residual ``Add``, a ``GlobalAveragePool`` or an
``AveragePool`` one of whose operands is a gate's product (a GLU block's ``x + a * sigmoid(b)``)
takes that operand as rule gate_in's codes at its calibrated ``F_g`` (field ``gate_in``, ``[F_g,
None]`` for a pool; then :mod:`.linpool`'s rule avg_pool, avg_pool_uncounted or mean_divide on the
codes). The network modes materialize the gate at ``F_g`` and run rule residual_add's Add (or the
pool) on integers. Without ``gate_in`` the gate of a pending gate is refused by name."""
from __future__ import annotations

import numpy as np

#: host ops between the inner gate and the outer one that keep rule gate_in (they move values only)
MOVES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")


def radices(j):
    """Rule gate_in's ``[F or None, F or None]`` of host layer ``j`` (its field ``gate_in``), or None."""
    g = j.get("gate_in")
    return None if g is None else list(g["f_in"])


def lower_operands(j, w, steps, why, op_cls):
    """The integer network modes: ``j`` with each operand of rule gate_in replaced by the inner pending
    gate materialized at its ``F_g`` (a ``gate`` op; the one an engine layer made already where it
    has that radix). ``j`` itself where it has no ``gate_in``."""
    fs = radices(j)
    if fs is None:
        return j
    from . import gate
    ins = list(j["inputs"])
    for k, f_g in enumerate(fs):
        if f_g is None:
            continue
        st = w.state.get(ins[k])
        if st is None or st[0] != "gate":
            raise why(j, f"operand {ins[k]} has a code radix (gate_in, rule gate_in) but is not a pending gate's "
                         f"product here")
        g = st[1]
        base = g["name"] + "_q"
        if base in w.shapes and w.state[base][1] == int(f_g):      # an engine layer read it at F_g already
            ins[k] = base
            continue
        base = g["name"] + "_codes"
        if base not in w.shapes:
            consumer = dict(name=j["name"], op=j["op"], kind="host", f_x=int(f_g))
            fp = g["fa"] + g["fb"]
            if fp > max(int(f_g) + 24, 0):
                raise why(j, f"rule gate_in: the product at radix {fp} to codes at {f_g} is not exact in the layer "
                             f"path's conversion")
            gate.materialize(consumer, ins[k], st, w.state, w.shapes, w.ops, w.aliases, steps.rounding, why,
                             op_cls, out=base)
        ins[k] = base
    return dict(j, inputs=ins)


def lower_pending(j, w, steps, why, op_cls):
    """Rule gate_in_sum: host layer ``j`` (an ``Add`` or ``GlobalAveragePool`` with ``gate_in``) with its
    gate operands as codes (:func:`lower_operands`), its field ``gate_in`` taken; ``j`` itself
    otherwise (a ``Mul``'s rule gate_in and a channel reduce's rule channel_reduce take theirs where they run)."""
    if "gate_in" not in j or j["op"] not in ("Add", "GlobalAveragePool", "AveragePool") or steps.bits is None:
        return j
    return {k: v for k, v in lower_operands(j, w, steps, why, op_cls).items() if k != "gate_in"}


def bfp_operands(j, w, steps, why, op_cls):
    """The bfp network mode: ``j`` with each operand of rule gate_in replaced by its codes, a lut op of
    rule bfp_table's identity table at ``F_g`` on the inner gate's pairs. ``j`` itself without ``gate_in``."""
    fs = radices(j)
    if fs is None:
        return j
    from .program import _chw
    ins = list(j["inputs"])
    bits = int(steps.p["mantissa_bits"])
    for k, f_g in enumerate(fs):
        if f_g is None:
            continue
        src = w.aliases.get(ins[k], ins[k])
        made = next((o for o in reversed(w.ops) if o.out == src), None)
        if made is None or made.kind != "gate":
            raise why(j, f"operand {ins[k]} has a code radix (gate_in, rule gate_in) but is not a gate's product here")
        out = made.name + "_codes"
        if out not in w.shapes:
            c, h, w_ = _chw(w.shapes[src])
            lo = -(1 << (bits - 1))
            w.ops.append(op_cls("lut", out, [src], out, dict(c=c, hw=h * w_, lo=lo, table=identity(bits),
                                                            f_in=int(f_g), f_out=int(f_g), bits=bits, fn="Identity",
                                                            rounding=steps.table_rounding)))
            w.state[out], w.shapes[out] = ("q", None), w.shapes[src]
        ins[k] = out
    return dict(j, inputs=ins)


def identity(bits):
    """Rule unary_table's table of the identity on ``bits``-bit codes: ``T[q - lo] = q`` (radix kept)."""
    return np.arange(-(1 << (bits - 1)), 1 << (bits - 1), dtype=np.int64)
