"""An output conv's input in two int8 terms on the network path (rule two_term_input of the
network mode): ``input_terms: 2`` (:mod:`hlsnn.deploy.quantize.twoin`) of a conv reading rule linear_wide's
resized wide sum (:mod:`.linwide`), k_ae_lin's last conv in ``fixed8`` on ``sparse_cluster``.

Layer by layer the conv takes its host-quantized input ``x`` in two terms (twoin step 1):
``hi = to_fixed(x, F_x)``, ``lo = to_fixed(x - hi * 2**-F_x, F_x + 7)`` (8 bits each, the
deployment's rounding), convolves each (raw sums) and adds ``acc = acc_hi * 2**7 + acc_lo``
exactly before the output rule at ``F_in = F_x + 7 + F_w`` (twoin steps 2, 3). Here ``x`` is rule
linear_wide's float64 resize of the exact sum ``s``, ``t * 2**-(Fm + 2)`` exactly (``t`` rule linear_wide's
integers, ``s`` at radix ``Fm``), so with ``sh = Fm + 2 - F_x >= 0``:

Rule two_term_input: **Both terms from the wide sum, one conv summing both.**

     * The ``linwide`` op with ``terms`` 2 (its field ``lo`` = ``Cp``, ``C`` rounded up to a
       multiple of the kernel's channel banks) writes one map of ``Cp + C`` channels: channel
       ``c < C`` is ``hi = shift_round_sat(t, sh, 8, rounding)`` (rule linear_wide's output), channels
       ``C .. Cp - 1`` are 0, channel ``Cp + c`` is ``lo = shift_round_sat(t - (hi << sh), sh - 7,
       8, rounding)`` (a negative shift is a left shift, saturated). This is twoin's ``lo``
       exactly: ``x - hi * 2**-F_x = (t - hi * 2**sh) * 2**-(Fm + 2)`` is an integer below
       ``2**53`` times a power of two (exact in float64), and ``to_fixed`` of it at ``F_x + 7`` is
       that shift of the integer (the rounding and the saturation of rule linear_wide's ``hi``; where
       ``hi`` saturates the residual is large and ``lo`` saturates as the layer path's does).
     * The conv with ``terms`` 2 (its ``c`` = ``C``, ``lo`` = ``Cp``, one group, the layer's
       taps ``w``): ``acc = (conv(hi, w) << 7) + conv(lo, w)`` over channels ``0 .. C - 1`` and
       ``Cp .. Cp + C - 1`` of its input, exact; ``bias = rint(b * 2**(F_x + 7 + F_w))``,
       ``shift = F_x + 7 + F_w - F_out``; then rule conv_output's output rule (:func:`conv_ints`).

     * **A plain pending Add** (``Relu(Add)`` of two tensors, no pool, no division: s_unet_res's
       last block) read by such a conv: layer by layer ``x`` is the exact float64 sum ``s * 2**-Fm``
       (``s = (qa << sa) + (qb << sb)``, ``max(s, 0)`` with the ``Relu``: rule residual_add), so with ``sh =
       Fm - F_x >= 0`` the same identity holds: rule residual_add's ``add`` op with ``terms`` 2 (``lo`` =
       ``Cp``, :func:`materialize_add`) writes ``hi = shift_round_sat(s, sh, 8, rounding)`` (rule
       residual_add's one-term output, bit for bit) at channel ``c`` and ``lo = shift_round_sat(s - (hi <<
       sh), sh - 7, 8, rounding)`` at ``Cp + c``, 0 between (:func:`terms_map`); the conv is the
       one above.

     Refused by name: ``input_terms: 2`` on a conv whose input is neither (every other
     host-quantized input: twoin's layer path only), a grouped conv, ``sh < 0``, an engine
     other than ``sparse_cluster``.

The sparse kernel (``has_lintwo``) runs ``LinWide`` with descriptor ``wide`` 2 twice over the
channel blocks, ``hi`` then ``lo`` (outputs from channel ``Cp`` on): ``2 ceil(C / Q) * 2L``
iterations. The conv's steps per block are ``w``'s schedule on the ``hi`` channels, then on the
``lo`` channels (:func:`split_codes`); a 1-bit ROM per step (``kShl``) marks a block's first
``lo`` step, where each lane's accumulator is shifted left by 7 before the step adds (the sum is
sized for ``129 * 128 * sum |w| + |bias|``); logic: :func:`logic`. The ``add`` op with ``terms``
2 (``has_addtwo``) runs the ``Add`` loop twice the same way, the second pass reading its operands
at ``i - n_iter / 2`` and writing ``lo`` at ``i`` (the board-sized kernel then keeps the
one-pixel ``Add`` loop, no ``AddPairs``).
"""
from __future__ import annotations

import numpy as np

#: bits between the two terms' radix points (:data:`hlsnn.deploy.quantize.twoin.SHIFT`, the same: tested)
SHIFT = 7

#: rule two_term_input's op field on ``linwide`` and ``conv``
TERMS = "terms"


def takes(j):
    """Whether engine layer ``j`` (a compiled entry) takes its input in two terms."""
    return j.get("in_terms", 1) == 2


def check_input(j, st, steps, why):
    """Rule two_term_input's refusals for engine layer ``j`` taking two terms, its input's state ``st``
    (nothing for a layer of one term)."""
    if not takes(j):
        return
    if steps.engine != "sparse_cluster":
        raise why(j, f"it takes its input in {j['in_terms']} int8 terms (input_terms: {j['in_terms']}), which the "
                     f"{steps.engine} network kernel does not sum; it runs layer by layer")
    if not (st is not None and st[0] == "addmv" and "lin" in st[1] or plain_add(st)):
        raise why(j, f"it takes its input in {j['in_terms']} int8 terms (input_terms: {j['in_terms']}); the network "
                     "kernel sums two terms only of a residual Add's exact sum, as it is or linearly resized (rule "
                     "two_term_input); it runs layer by layer (input_terms: 1 runs in the network mode)")
    if j["kind"] != "conv" or j["geom"]["group"] != 1:
        raise why(j, "two input terms (rule two_term_input) of a grouped conv or a dense layer: only a conv of one group")


def plain_add(st):
    """Whether state ``st`` is a plain pending Add of two tensors (no pool, division or mixed
    map): the second source of rule two_term_input."""
    return st is not None and st[0] == "add" and st[1]["p"] is None and len(st[1]["ins"]) == 2 \
        and not st[1].get("split") and (st[1].get("n") or 1) == 1


def banks(steps):
    """The channel banks of the engine's network kernel (``lo`` starts at a multiple of them)."""
    return int(steps.rules.banks(steps.p))


def materialize(j, a, w, steps, why, op_cls):
    """Engine layer ``j`` reads rule linear_wide's resize ``a`` in two terms: the chained sum, then the
    ``linwide`` op with ``terms`` 2 (module rule two_term_input) as ``NAME_q2`` (state ``("q", F_x)``,
    shape ``(Cp + C, ...)``); its name returned."""
    from .joins.chain import materialize_sum
    lin = a["lin"]
    base = lin["name"] + "_q2"
    f_x = j["f_x"]
    if base in w.shapes:
        if w.state[base][1] != f_x:
            raise why(j, f"two consumers of {lin['name']} requantize it to different radix points")
        return base
    add = a["add"]
    fm = max(add["fa"], add["fb"])
    if f_x is None or fm + 2 > max(f_x + 24, 0):
        raise why(j, f"the requantization of a resized sum from radix {fm + 2} to {f_x} is not exact in today's "
                     "host rule")
    sh = fm + 2 - f_x
    if sh < 0:
        raise why(j, f"two input terms (rule two_term_input) of a resized sum at radix {fm + 2}, finer than the conv's {f_x}: "
                     "the residual needs the sum's radix at least as fine")
    s = materialize_sum(steps, j, add, w, w.shapes[add["ins"][0]])
    bits = [op.f["out_bits"] for op in w.ops if op.out == s][0]
    c, pc = lin["c"], banks(steps)
    cp = -(-c // pc) * pc
    f = dict(c=c, l=lin["l"], fy=lin["fy"], fx=lin["fx"], shift=sh, rounding=steps.rounding, in_bits=bits,
             terms=2, lo=cp)
    w.ops.append(op_cls("linwide", lin["name"] + "/two", [s], base, f))
    w.shapes[base] = (cp + c, 2 * lin["l"], 1) if lin["fy"] == 2 else (cp + c, 1, 2 * lin["l"])
    w.state[base] = ("q", f_x)
    return base


def materialize_add(j, a, w, steps, why, op_cls):
    """Engine layer ``j`` reads the plain pending Add ``a`` in two terms: rule residual_add's ``add`` op
    with ``terms`` 2 as ``NAME_q2`` (state ``("q", F_x)``, shape ``(Cp + C, ...)``); its name."""
    base = a["name"] + "_q2"
    f_x = j["f_x"]
    if base in w.shapes:
        if w.state[base][1] != f_x:
            raise why(j, f"two consumers of {a['name']} requantize it to different radix points")
        return base
    fm = max(a["fa"], a["fb"])
    if f_x is None or fm > max(f_x + 24, 0):
        raise why(j, f"the requantization from radix {fm} to {f_x} is not exact in today's host rule")
    sh = fm - f_x
    if sh < 0:
        raise why(j, f"two input terms (rule two_term_input) of a sum at radix {fm}, finer than the conv's {f_x}: the "
                     "residual needs the sum's radix at least as fine")
    shape = w.shapes[a["ins"][0]]
    c, pc = shape[0], banks(steps)
    cp = -(-c // pc) * pc
    f = dict(c=c, hw=int(np.prod(shape[1:])), sa=fm - a["fa"], sb=fm - a["fb"], relu=a["relu"], gap=False,
             shift=sh, rounding=steps.rounding, single=False, terms=2, lo=cp)
    w.ops.append(op_cls("add", a["name"] + "/two", list(a["ins"]), base, f))
    w.shapes[base] = (cp + c,) + tuple(shape[1:])
    w.state[base] = ("q", f_x)
    return base


def _maker(src, w):
    return [o for o in w.ops if o.out == src][0]


def conv_input(src, st, w):
    """The conv's ``(C, H, W)`` (the hi channels of its two-term input ``src``) and the state it
    reads at: ``F_x + 7`` (its bias and shift at the finer radix)."""
    from .program import _chw
    _, h, wd = _chw(w.shapes[src])
    return (_maker(src, w).f["c"], h, wd), ("q", st[1] + SHIFT)


def mark(conv, j, src, w):
    """Where ``j`` takes two terms: its conv op's fields ``terms`` 2 and ``lo`` (its input's)."""
    if takes(j):
        conv.f.update(terms=2, lo=int(_maker(src, w).f["lo"]))


def two_terms(t, sh, bits, rounding):
    """``(hi, lo)`` of rule two_term_input from ``t`` (int64), the shift ``sh >= 0``."""
    from ...primitives import shift_round_sat
    hi = shift_round_sat(t, sh, bits, rounding)[0]
    lo = shift_round_sat(t - (hi << sh), sh - SHIFT, bits, rounding)[0]
    return hi, lo


def terms_map(f, t, bits):
    """Rule two_term_input's map of both terms: (B, Cp + C, N) int64 from the exact integers ``t`` (B, C, N)
    of op fields ``f`` (``hi`` at channel c, ``lo`` at ``Cp + c``, 0 between)."""
    hi, lo = two_terms(t, f["shift"], bits, f["rounding"])
    out = np.zeros((t.shape[0], f["lo"] + f["c"], t.shape[-1]), np.int64)
    out[:, :f["c"]] = hi
    out[:, f["lo"]:] = lo
    return out


def run_lin(op, t, b, bits):
    """Rule two_term_input's ``linwide`` output: (B, Cp + C, 2L) int64 from rule linear_wide's ``t`` (B, C, 2L)."""
    return terms_map(op.f, t, bits)


def conv_acc(x, f, acc_fn):
    """Rule two_term_input's accumulators of a batch ``x`` (B, Cp + C, H, W): ``(acc(hi) << 7) + acc(lo)``,
    ``acc_fn`` rule conv_output's (:func:`hlsnn.deploy.lower.program.conv_acc`)."""
    c, lo = f["c"], f["lo"]
    return (acc_fn(x[:, :c], f) << SHIFT) + acc_fn(x[:, lo:lo + c], f)


def check_op(op, ints, bad):
    """The program checks of rule two_term_input's fields on a ``conv`` or ``linwide`` op."""
    f = op.f
    if f.get(TERMS, 1) == 1:
        return
    if f.get(TERMS) != 2:
        raise bad(op, f"terms = {f.get(TERMS)!r}, not 1 or 2")
    ints(op, f, ("lo",), f["c"], 1 << 16)
    if op.kind == "conv" and f["group"] != 1:
        raise bad(op, "two input terms of a grouped conv")
    if op.kind == "add" and (f.get("gap") or f.get("single") or "div" in f or "split" in f or f.get("out_bits")):
        raise bad(op, "two terms of an Add with a pool, a division, a mixed map or a chained sum")
    if op.kind in ("linwide", "add") and not 0 <= f["shift"] <= 62:
        raise bad(op, f"two terms with shift {f['shift']} (0..62)")


def used(net):
    """Whether ``net`` has a rule two_term_input op (the kernel renders its lines only then)."""
    return any(op.f.get(TERMS, 1) == 2 for op in getattr(net, "ops", ()))


def add_used(net):
    """Whether ``net`` has rule two_term_input's ``add`` op (the kernel renders its ``Add`` lines only then)."""
    return any(op.kind == "add" and op.f.get(TERMS, 1) == 2 for op in getattr(net, "ops", ()))


def add_descriptor(op, f, d, pc, bits, net):
    """Rule two_term_input's ``add`` op descriptor (after rule residual_add's, its sum of ``bits``): ``wide`` 2, the
    loop twice; the bits of ``s - (hi << shift)`` returned. Refused in a program whose Adds
    divide (rule mean_divide's ``Add`` lines have no ``lo`` pass)."""
    from ...errors import InputError
    if any("div" in o.f and o.kind != "avgpool" for o in net.ops):
        raise InputError(f"network kernel: {op.name}: two terms of an Add in a program whose Adds divide (rule mean_divide)")
    if f["lo"] % pc:
        raise InputError(f"network kernel: {op.name}: two terms at channel {f['lo']}, not a multiple of the "
                         f"kernel's {pc} channel banks")
    if d["dual"] != 0:
        raise InputError(f"network kernel: {op.name}: two terms of a sum that the shortcut buffer keeps")
    d.update(n_iter=2 * d["n_iter"], wide=2)
    bits = max(bits, f["shift"] + 8) + 1                  # |hi << shift| <= 2**(shift + 7)
    if bits > 62:
        raise InputError(f"network kernel: {op.name}: the two terms' residual needs {bits} bits (at most 62)")
    return bits


def split_codes(codes, f):
    """The conv's weights ``codes`` (Z, C, kh, kw) as two weights over its ``Cp + C`` input
    channels: ``w`` on the hi channels (zeros on the others), and ``w`` on the lo channels."""
    z, c, kh, kw = codes.shape
    hi = np.zeros((z, f["lo"] + c, kh, kw), np.int64)
    lo = np.zeros_like(hi)
    hi[:, :c] = codes
    lo[:, f["lo"]:] = codes
    return hi, lo


def logic(net, tables):
    """``{"lintwo": (LUT, FF)}`` when the program has rule two_term_input ops, else ``{}``: per lane the
    accumulator's shift mux (``sb``); per bank the residual's subtract, its shift of ``hi``
    and the second rounding shifter with its clamp (``wb + wb + shifter_luts(wb, 31) + wb +
    16``), once for each op kind making two terms (``linwide``, ``add``); the ``kShl`` ROM (64
    steps a LUT) and each kind's pass flag (8)."""
    from ...resources import shifter_luts
    if not used(net):
        return {}
    pz, pc, sb, wb = tables["pz"], tables["pc"], tables["sum_bits"], tables["add_bits"]
    ns = len(tables["steps"])
    makers = len({op.kind for op in net.ops if op.kind != "conv" and op.f.get(TERMS, 1) == 2})  # linwide, add
    return {"lintwo": (pz * sb + makers * pc * (3 * wb + shifter_luts(wb, 31) + 16) + -(-ns // 64) + 8 * makers, 8)}
