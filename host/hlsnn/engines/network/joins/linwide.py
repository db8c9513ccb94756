"""A linear x2 resize of a pending residual ``Add``'s exact sum on the integer engines (rule
linear_wide of the network mode): a 1-D autoencoder's ``F.interpolate(relu(d2(..) + a),
scale_factor=2, mode='linear')`` on ``shift_mac`` and ``sparse_cluster``.

Layer by layer the host's ``ResizeLinear`` reads rule residual_add's exact float64 sum ``s`` (at
radix ``Fm = max(Fa, Fb)``); the engine layer after it quantizes the resized values with
``to_fixed`` at its ``F_x``. Rounding ``s`` first would round twice, so:

Rule linear_wide: **the sum kept wide, resized, requantized once.** ``s`` is :mod:`.chain`'s
     exact sum ``NAME_sum`` (``out_bits`` bits, the shortcut buffer's wide words), and the resize
     along the one doubled axis of length ``L`` (the other of extent 1; ONNX's ``half_pixel``
     linear x2, neighbours clamped at the borders, :func:`.linpool.half_pixel_x2`) is, at radix
     ``Fm + 2``::

         t[c, 2i]     = s[c, max(i - 1, 0)] + 3 s[c, i]
         t[c, 2i + 1] = 3 s[c, i] + s[c, min(i + 1, L - 1)]

     (the float64 resize times 4, exact). The consumer reads ``shift_round_sat(t, Fm + 2 - F_x,
     B, rounding)``, which is what its ``to_fixed`` does to the float64 resize (exact while ``Fm +
     2 <= max(F_x + 24, 0)``, checked; one consumer radix). Refused by name: a resize of two
     axes, or of one whose other axis is longer than 1, a pending Add moved first, a sum the
     48-bit shortcut word does not hold.

The kernels (``has_linwide``) run it in their ``LinWide`` loop, dispatched from the pool op code
with the descriptor's ``wide`` set: ``kPc`` channels at a time, one output a cycle, each bank
reading one wide ``sc`` word on a row's first output and on every odd one and writing one
activation word; so ``ceil(C / Q) * 2L`` iterations (``NetPool`` in ``hlsnn perf``), logic
:func:`logic`. An output conv reading the resize in two int8 terms gets both from one op with
``terms`` 2 (rule two_term_input, :mod:`.lintwo`: descriptor ``wide`` 2, two passes)."""
from __future__ import annotations

import numpy as np

from ..program import _chw, materialized

#: the op kind (the pool op code, descriptor ``wide`` 1)
KIND = "linwide"


def lower_host(j, w, st, steps, why):
    """Rule linear_wide for a ``ResizeLinear`` host layer ``j`` of the pending Add ``st`` (integer
    engines): hold it pending (state ``("addmv", {..., "lin": ...})``, as :mod:`.addmove`'s
    moves) until an engine layer reads it (:func:`materialize`). True when lowered; raises
    ``why`` naming what has no rule."""
    from ..pools.linpool import resize_factors
    src = j["inputs"][0]
    if st[0] != "add":
        raise why(j, "a ResizeLinear of an Upsample of a pending Add's exact sum has no integer rule in this "
                     "engine's network kernel (rule linear_wide resizes the sum itself)")
    a = st[1]
    if a["fa"] is None or a["fb"] is None or len(a["ins"]) != 2:
        raise why(j, "a ResizeLinear of a pending Add without two operands at radix points")
    c, h, wd = _chw(w.shapes[src])
    fy, fx = resize_factors(j, w.shapes[src], why)
    if (fy, fx) not in ((2, 1), (1, 2)) or (fy == 2 and wd != 1) or (fx == 2 and h != 1):
        raise why(j, f"a ResizeLinear by ({fy}, {fx}) of a {c}x{h}x{wd} pending Add's exact sum: rule linear_wide resizes "
                     f"one axis of a C x L map (the other of extent 1)")
    n = h * wd
    lin = dict(name=j["name"], c=c, l=n, fy=fy, fx=fx)
    w.state[j["output"]] = ("addmv", dict(add=a, moves=[], lin=lin, name=j["name"]))
    w.shapes[j["output"]] = (c, 2 * n) if len(w.shapes[src]) == 2 else (c, h * fy, wd * fx)
    return True


def materialize(j, a, w, steps, why, op_cls):
    """Engine layer ``j`` reads the resized pending Add ``a`` (the state's dict): :mod:`.chain`'s
    exact sum ``NAME_sum``, then this rule's op requantized to ``j``'s ``F_x``, as ``NAME_q``
    (state ``("q", F_x)``), its name returned."""
    from .chain import materialize_sum
    from .. import lintwo
    if lintwo.takes(j):                     # rule two_term_input: the two terms of an input_terms: 2 conv
        return lintwo.materialize(j, a, w, steps, why, op_cls)
    lin = a["lin"]
    base = lin["name"] + "_q"
    if materialized(j, lin["name"], w.state, w.shapes, why):
        return base
    add = a["add"]
    f_x = j["f_x"]
    fm = max(add["fa"], add["fb"])
    if f_x is None or fm + 2 > max(f_x + 24, 0):
        raise why(j, f"the requantization of a resized sum from radix {fm + 2} to {f_x} is not exact in today's "
                     "host rule")
    s = materialize_sum(steps, j, add, w, w.shapes[add["ins"][0]])
    bits = [op.f["out_bits"] for op in w.ops if op.out == s][0]
    f = dict(c=lin["c"], l=lin["l"], fy=lin["fy"], fx=lin["fx"], shift=fm + 2 - f_x, rounding=steps.rounding,
             in_bits=bits)
    w.ops.append(op_cls(KIND, lin["name"], [s], base, f))
    w.shapes[base] = (lin["c"], 2 * lin["l"], 1) if lin["fy"] == 2 else (lin["c"], 1, 2 * lin["l"])
    w.state[base] = ("q", f_x)
    return base


def resize4(s):
    """Four times the half-pixel linear x2 resize of ``s`` (..., L) int64 along its last axis,
    exact (module rule linear_wide's ``t``)."""
    s = np.asarray(s, np.int64)
    prev = np.concatenate([s[..., :1], s[..., :-1]], axis=-1)
    nxt = np.concatenate([s[..., 1:], s[..., -1:]], axis=-1)
    t = np.empty(s.shape[:-1] + (2 * s.shape[-1],), np.int64)
    t[..., 0::2] = prev + 3 * s
    t[..., 1::2] = 3 * s + nxt
    return t


def run(op, get, b, bits):
    """Rule linear_wide on a batch of ``b`` images: (B, C, 2L) int64 at the consumer's radix."""
    from ....primitives import shift_round_sat
    f = op.f
    x = np.asarray(get(op.ins[0]), np.int64).reshape(b, f["c"], f["l"])
    if f.get("terms", 1) == 2:                  # rule two_term_input (.lintwo): hi and lo of one map
        from ..lintwo import run_lin
        return run_lin(op, resize4(x), b, bits)
    return shift_round_sat(resize4(x), f["shift"], bits, f["rounding"])[0]


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops` for rule linear_wide's op."""
    f = op.f
    ints(op, f, ("c", "l"), 1, 1 << 16)
    ints(op, f, ("shift",), -62, 62)
    ints(op, f, ("in_bits",), 2, 48)
    if (f.get("fy"), f.get("fx")) not in ((2, 1), (1, 2)):
        raise bad(op, f"factors ({f.get('fy')}, {f.get('fx')}): one axis doubled")
    from ..lintwo import check_op as two
    two(op, ints, bad)


def descriptor(op, f, d, pc):
    """The ``LinWide`` loop's descriptor (the pool op code with ``wide`` 1): ``h`` the input
    length ``L``, ``ow`` the output row ``2L``, ``hw`` the input words per channel block;
    returns the bits its sum ``t`` needs (the sum's ``in_bits`` and 2, and a guard bit).
    Rule two_term_input's two terms (:mod:`.lintwo`): ``wide`` 2, the loop twice (``hi``, then ``lo`` at
    ``Cp``), and the bits of ``t - (hi << shift)`` too."""
    from ....errors import InputError
    n = f["l"]
    two = f.get("terms", 1) == 2
    if two and f["lo"] % pc:
        raise InputError(f"network kernel: {op.name}: two terms at channel {f['lo']}, not a multiple of the "
                         f"kernel's {pc} channel banks")
    d.update(src=0, h=n, w=1, oh=1, ow=2 * n, hw=n, ohw=2 * n, n_iter=(1 + two) * -(-f["c"] // pc) * 2 * n,
             shift=f["shift"], wide=2 if two else 1)
    if not two:
        return f["in_bits"] + 3
    bits = max(f["in_bits"] + 3, f["shift"] + 8) + 1       # |hi << shift| <= 2**(shift + 7)
    if bits > 62:
        raise InputError(f"network kernel: {op.name}: the two terms' residual needs {bits} bits (at most 62)")
    return bits


def used(net):
    """Whether ``net`` has a rule linear_wide op (the kernels render ``LinWide`` only then)."""
    return any(op.kind == KIND for op in getattr(net, "ops", ()))


def logic(net, pc, a, wb):
    """``{"linwide": (LUT, FF)}`` of the ``LinWide`` loop when the program has one, else ``{}``:
    per bank the two taps' selects and the ``3 q + x`` adders (``4 wb``), the requantization
    (``shifter_luts(wb, 31)``, its increment and clamp, ``wb + 2a``); the two registers
    ``s[i - 1]``, ``s[i]`` (``2 wb``) and the row counters (``48``, once)."""
    from ....resources import shifter_luts
    if not used(net):
        return {}
    return {"linwide": (pc * (4 * wb + shifter_luts(wb, 31) + wb + 2 * a) + 48, pc * 2 * wb + 48)}
