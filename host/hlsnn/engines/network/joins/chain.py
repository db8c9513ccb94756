"""A residual Add whose operand is another Add's sum (a ResNet's chained blocks: block 2's identity
shortcut is block 1's ``Relu(Add)``), in every engine's network mode (rule chained_add of
:mod:`hlsnn.deploy.lower.program`).

Layer by layer block 1's exact float64 sum ``s1 = relu(a + b)`` reaches block 2's ``Add`` as it
is, while block 2's first conv reads it requantized (rule residual_add). So the network mode
keeps ``s1`` twice: requantized for the conv (``NAME_q``) and exact for the second Add
(``NAME_sum``).

* **Integer engines**: ``NAME_sum`` is rule residual_add's add op with no requantization, ``s1 =
  (qa << sa) + (qb << sb)`` (``max(s1, 0)`` with the fused ``Relu``) at radix ``Fm = max(Fa,
  Fb)``, kept in ``out_bits = max(Ba + sa, Bb + sb) + 1`` bits (``Ba``, ``Bb`` the operands'
  widths: ``B``, or a chained sum's own ``out_bits``), exact. The kernels keep it in the shortcut
  buffer, whose words are then ``out_bits`` wide (``kScBits``); the second Add reads it as its
  shortcut at radix ``Fm``. The op is placed right after ``NAME_q`` (so it writes its sum where
  that shortcut was: :mod:`.skips`); without a ``NAME_q`` (a WaveNet's running skip sum), right
  after its last operand is made (:func:`_earliest`).
* **bfp_systolic**: rule bfp_add's sum is exact already; the one ``NAME_sum`` pairs serve the
  conv and the second Add alike, placed as the integer engines' without ``NAME_q``.

Neither the compiled emu fast path (:mod:`hlsnn.deploy.run.fast`) nor the fast calibration has a
wide sum: such a network runs the numpy network mode on ``emu`` and calibrates layer by layer."""
from __future__ import annotations

import numpy as np

#: the widest chained sum the kernels keep (an operand shift of at most 31 keeps it far below)
MAX_OUT_BITS = 48


def operand_bits(ops, t, bits):
    """The width of tensor ``t`` among ``ops``: a chained sum's ``out_bits``, else ``bits``."""
    for op in ops:
        if op.out == t:
            return op.f.get("out_bits") or bits
    return bits


def materialize_sum(steps, j, a, w, shape):
    """The exact sum of the pending Add ``a`` as a tensor the Add layer ``j`` reads (module
    docstring); ``shape`` its per-image shape."""
    if steps.bits is None:                              # bfp_systolic: the pairs are exact
        made = a["name"] + "_sum" in w.shapes
        base = steps.materialize_add(j, a, w)
        if not made:                                    # its add op, just appended: as early as it can run
            w.ops.insert(_earliest(w, a["ins"]), w.ops.pop())
        return base
    from ..program import Op, _why
    base = a["name"] + "_sum"
    if base in w.shapes:
        return base
    fa, fb = a["fa"], a["fb"]
    if fa is None or fb is None:
        raise _why(j, "a chained Add of tensors without a radix point")
    fm = max(fa, fb)
    sa, sb = fm - fa, fm - fb
    ba, bb = (operand_bits(w.ops, t, steps.bits) for t in a["ins"])
    out_bits = max(ba + sa, bb + sb) + 1
    if sa > 31 or sb > 31 or out_bits > MAX_OUT_BITS:
        raise _why(j, f"the chained sum of {a['name']} needs {out_bits} bits (at most {MAX_OUT_BITS})")
    c = shape[0]
    hw = int(np.prod(shape[1:])) if len(shape) > 1 else 1
    op = Op("add", a["name"] + "/sum", list(a["ins"]), base,
            dict(c=int(c), hw=hw, sa=sa, sb=sb, relu=a["relu"], gap=False, shift=0, rounding=steps.rounding,
                 single=False, out_bits=out_bits, radix=fm))
    at = [i for i, o in enumerate(w.ops) if o.out == a["name"] + "_q"]
    w.ops.insert(at[0] + 1 if at else _earliest(w, a["ins"]), op)
    w.shapes[base], w.state[base] = tuple(shape), ("q", fm)
    return base


def _earliest(w, ins):
    """The first position in the walk ``w``'s ops after every op that makes one of the tensors
    ``ins`` (0 where they are all the input): where a chained sum that no conv reads is made, so
    that its operands are freed as early as they can be."""
    made = {w.aliases.get(t, t) for t in ins}
    return max([i + 1 for i, o in enumerate(w.ops) if o.out in made] + [0])


def wide_bits(net):
    """``{tensor: out_bits}`` of a network's chained sums (the kernels' wide shortcut words)."""
    return {op.out: op.f["out_bits"] for op in net.ops if op.kind == "add" and op.f.get("out_bits")}


def check_place(net, place, name):
    """A chained sum lives in the shortcut buffer alone and only residual Adds (or rule linear_wide's
    resize, :mod:`.linwide`) read it (:func:`.kernel.allocate`'s ``place``); :class:`InputError`
    naming the tensor otherwise."""
    from ....errors import InputError
    wide = wide_bits(net)
    for t in wide:
        readers = [op for op in net.ops if t in [name(i) for i in op.ins]]
        if place[t][0] is not None or any(op.kind not in ("add", "linwide") or op.f.get("short") != t
                                          for op in readers):     # linwide: rule linear_wide (.linwide)
            raise InputError(f"network kernel: the chained sum {t} ({wide[t]} bits) is read other than as a "
                             f"residual Add's shortcut; this network runs layer by layer")


def sc_add(net, place):
    """Whether an Add of ``net`` writes the shortcut buffer (a chained sum, or bfp's sum that a
    later Add reads): the kernels then declare ``sc``'s read-after-write distance and the Add
    loop's ``DEPENDENCE variable = sc inter false`` (each iteration writes the word it read)."""
    return any(op.kind == "add" and place[net.aliases.get(op.out, op.out)][1] for op in net.ops)
