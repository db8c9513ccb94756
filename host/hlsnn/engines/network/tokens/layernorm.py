"""Rule layer_norm, **LayerNormalization over the channels of each position in integers**: a
``LayerNormalization`` between engine layers whose input is one fixed-point tensor (an engine
layer's output: ``b``-bit codes ``q`` at radix ``F``) and which normalizes its last axis only:
the features of an ``(N, K)`` vector (``Linear -> LayerNorm -> Linear``), or the channels of a
``C x H x W`` map (ConvNeXt's ``LayerNorm`` over channels, which ONNX writes as ``Transpose`` to
channels-last, ``LayerNormalization(axis=-1)``, ``Transpose`` back; a ``C x L`` map alike). The
layer path (:meth:`hlsnn.deploy.run.runner.Deployment.run`) runs this rule where the op's input is a
fixed-point tensor and an engine layer follows, and the network mode runs it as op ``lnorm``, so
both give the same bits. It is an integer rule, not float64's: its error against the float
definition is stated below and measured in ``tests/deploy/test_network_layernorm.py``.

For each position (``C`` codes ``q_c``), all integers, exact unless a rounding is named:

1. ``S1 = sum q_c``, ``S2 = sum q_c**2``; ``d_c = C q_c - S1`` (``C`` times the deviation from
   the mean) and ``V = C S2 - S1**2`` (``C**2`` times the variance), both in code units.
2. ``Vt = V + E`` with ``E = rint(C**2 * eps * 4**F)`` (float64, half to even: epsilon in code
   units; the op's only float step, made once when the rule is planned).
3. The reciprocal square root by a table: ``s = max(0, ceil((bitlen(Vt) - T) / 2))``, ``m = Vt
   >> 2 s`` (truncated, ``m < 2**T``), ``r = RS[m]`` with ``RS[m] = round(2**R / sqrt(m))`` (exact
   integer rounding, half up; ``RS[0] = 0``: every ``d_c`` is 0 there), ``T`` = :data:`T_BITS`,
   ``R`` = :data:`R_BITS`. So ``d_c * r * 2**-(R + s)`` is ``(x_c - mean) / sqrt(var + eps)``.
4. The scale and bias as fixed point: ``G_c = rint(gamma_c * 2**Fg)`` (signed
   :data:`G_BITS` bits, ``Fg`` the largest radix at which every ``|G_c|`` fits), ``B_c =
   rint(beta_c * 2**(Fg + R))`` (half to even); ``p_c = G_c * d_c * r + (B_c << s)`` at radix
   ``Fg + R + s``.
5. ``y_c = shift_round_sat(p_c, Fg + R + s - K, Y, rounding)``: the normalized value's
   :data:`Y_BITS`-bit codes at radix ``K`` (``K`` from the bound ``max|gamma| sqrt(C) + max|beta|``,
   so no value saturates), with the deployment's rounding. The layer path's value is ``y_c *
   2**-K`` (exact in float64), which the next engine layer converts at its calibrated ``F_x``
   (:func:`hlsnn.deploy.quantize.quant.to_fixed`); the network mode's op ends with that conversion as
   ``shift_round_sat(y_c, K - F_x, b, rounding)``, the same bits while ``K <= F_x + 24``
   (checked; ``to_fixed`` writes the value exactly at radix ``F_x + 24`` first).

Error against the float definition (``T = 10``, ``R = 16``), per value, with ``n`` the exact
normalized value: step 3's truncation of ``Vt`` to ``T`` bits and the table's rounding change
``1/sqrt(Vt)`` by at most ``2**-(T-1)`` relative (0.2 %), and ``E``'s rounding by at most ``0.25 /
Vt`` (a variance of a few codes: up to 0.5 % there), so ``|gamma n|`` is off by that share; the
scale's rounding adds ``|n| 2**-(Fg+1)``, the bias's ``2**-(Fg+R+1)``, step 5 half a unit at
radix ``K`` (tested against float64 on random codes). Zero variance with ``eps`` below a code's
resolution (``E = 0``) gives ``beta`` (float gives NaN for ``eps = 0``).

**Rule layer_norm_sum, a norm of a residual sum** (a post-norm block ``LayerNorm(x + f(x))``; a ``Relu``
after the ``Add`` and, for a map, the Transposes to channels-last and back allowed; from program
revision :data:`REVISION_SUM`): the ``Add``'s operands are ``b``-bit codes ``qa``, ``qb`` at radix
points ``Fa``, ``Fb``, their sum ``s = (qa << (Fm - Fa)) + (qb << (Fm - Fb))`` exact at ``Fm =
max(Fa, Fb)`` (``max(s, 0)`` with the ``Relu``). It is converted to ``b``-bit codes ``q =
shift_round_sat(s, Fm - F, b, rounding)`` at a radix ``F`` chosen when calibrating (DETERMINE on the
sum's values, :func:`hlsnn.deploy.quantize.quant.host_radix`, the radix an engine layer reading the sum
would choose; the program's host-layer field ``lnorm_in``), which is netmode rule residual_add's add op for a
consumer at ``F_x = F`` and the layer path's ``to_fixed(s 2**-Fm, F, b)``; then steps 1-5 on ``q`` at
radix ``F``. The layer path's part is :mod:`hlsnn.deploy.run.lnsum`. The conversion adds the sum's
rounding to ``b`` bits (and any saturation DETERMINE's overflow ratio allows) to the error above.
"""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

#: the reciprocal square root table's index bits (2**T_BITS entries)
T_BITS = 10
#: its entries' fraction bits (entries up to 2**R_BITS, R_BITS + 1 bits unsigned)
R_BITS = 16
#: the scale codes' signed bits
G_BITS = 16
#: the normalized value's signed bits at radix K (step 5)
Y_BITS = 24
#: the most channels a position normalizes (the kernels' bounds)
MAX_C = 4096
#: the widest input codes
MAX_BITS = 12
#: the compiled program's revision from which its layer path runs this rule
#: (:data:`hlsnn.deploy.lower.programrev.LAYERNORM`; an older program ran the norm in float64)
REVISION = 5
#: the revision from which its layer path runs rule layer_norm_sum, a norm of a residual sum
#: (:data:`hlsnn.deploy.lower.programrev.LAYERNORM_SUM`; an older program ran that norm in float64)
REVISION_SUM = 6
#: the op kind of this module
KINDS = ("lnorm",)
#: the engines whose network kernel has the loop (``network.cpp.j2``'s ``LayerNorm``)
KERNEL_KINDS = {"sparse_cluster": ("lnorm",), "shift_mac": ("lnorm",)}
#: the engines whose kernel builds the squares and ``C q`` in LUTs (``BIND_OP impl = fabric``:
#: the sparse kernel's DSPs are its convs'); the others take a DSP each (shift_mac's convs use none)
FABRIC = ("sparse_cluster",)


@lru_cache(maxsize=1)
def rsqrt_table():
    """``RS``: ``round(2**R / sqrt(m))`` for ``m`` in ``0 .. 2**T - 1`` (``RS[0] = 0``), exact:
    ``k = isqrt(4**R // m)`` is the floor, and ``k + 1`` where ``4**(R+1) >= m (2k + 1)**2``."""
    t = np.zeros(1 << T_BITS, np.int64)
    for m in range(1, 1 << T_BITS):
        k = math.isqrt((1 << (2 * R_BITS)) // m)
        if 1 << (2 * R_BITS + 2) >= m * (2 * k + 1) ** 2:
            k += 1
        t[m] = k
    return t


def plan(c, f_in, bits, eps, scale=None, bias=None):
    """Rule layer_norm's constants for ``c`` channels of ``bits``-bit codes at radix ``f_in``: ``{c, e,
    fg, k, g, b, smax, pbits}`` (module docstring; ``pbits`` the signed bits of ``p_c``), or a
    string saying why not."""
    c = int(c)
    if not 2 <= c <= MAX_C:
        return f"a LayerNormalization over {c} channels: 2..{MAX_C}"
    if not 2 <= int(bits) <= MAX_BITS:
        return f"a LayerNormalization of {bits}-bit codes: 2..{MAX_BITS}"
    gamma = np.ones(c) if scale is None else np.broadcast_to(np.asarray(scale, np.float64).reshape(-1), (c,))
    beta = np.zeros(c) if bias is None else np.broadcast_to(np.asarray(bias, np.float64).reshape(-1), (c,))
    if not (np.isfinite(gamma).all() and np.isfinite(beta).all() and math.isfinite(eps) and eps >= 0):
        return "a scale, bias or epsilon that is not finite"
    gmax = float(np.abs(gamma).max())
    fg = G_BITS - 2 - (math.floor(math.log2(gmax)) if gmax > 0 else 0)
    while np.abs(np.rint(np.ldexp(gamma, fg))).max() > (1 << (G_BITS - 1)) - 1:
        fg -= 1
    g = np.rint(np.ldexp(gamma, fg)).astype(np.int64)
    b = np.rint(np.ldexp(beta, fg + R_BITS))
    if np.abs(b).max() >= 2.0 ** 44:
        return f"a bias up to {np.abs(beta).max():.3g} at the scale's radix {fg + R_BITS}: at most 2**44 codes"
    e = float(np.rint(eps * c * c * 2.0 ** (2 * int(f_in))))
    vmax = c * c * (1 << (2 * (int(bits) - 1))) + e
    if vmax >= 2.0 ** 52:
        return f"an epsilon of {e:.3g} codes: the variance term beyond 2**52"
    smax = max(0, -(-(int(vmax).bit_length() - T_BITS) // 2))
    # |d_c r| <= 2 sqrt(C) 2**(R + s) (|d_c| <= sqrt(C V), r <= 2**R / sqrt(m) + 1/2), so the
    # normalized value is below 2 sqrt(C) max|gamma| + max|beta|
    bound = (2 * math.sqrt(c) * (1 << (G_BITS - 1))) * 2.0 ** (R_BITS + smax) + float(np.abs(b).max()) * 2.0 ** smax
    pbits = math.ceil(math.log2(bound + 1)) + 1
    if pbits > 62:
        return f"a normalized product of {pbits} bits: at most 62"
    ybound = 1.01 * gmax * math.sqrt(c - 1) + float(np.abs(beta).max()) + 2.0 ** -8
    k = min(Y_BITS - 2 - math.ceil(math.log2(ybound)), fg + R_BITS)
    return dict(c=c, e=int(e), fg=int(fg), k=int(k), g=g, b=b.astype(np.int64), smax=int(smax), pbits=int(pbits))


def normalized(q, p, rounding):
    """Steps 1-5 on integers ``q`` (..., C), channels last: the codes ``y`` (..., C) at radix
    ``p["k"]`` (int64)."""
    from ....primitives import shift_round_sat
    q = np.asarray(q, np.int64)
    c = p["c"]
    s1 = q.sum(axis=-1, keepdims=True)
    s2 = (q * q).sum(axis=-1, keepdims=True)
    d = c * q - s1
    vt = c * s2 - s1 * s1 + p["e"]
    nb = np.frexp(vt.astype(np.float64))[1]          # bit length (exact: vt < 2**52)
    s = np.maximum(0, (nb - T_BITS + 1) // 2)
    m = vt >> (2 * s)
    r = rsqrt_table()[m]
    pv = np.asarray(p["g"], np.int64) * d * r + (np.asarray(p["b"], np.int64) << s)
    return shift_round_sat(pv, p["fg"] + R_BITS + s - p["k"], Y_BITS, rounding)[0]


def applies(layer, act):
    """The layer path runs rule layer_norm for host ``layer`` on the :class:`~hlsnn.deploy.quantize.quant.Act`
    ``act``: a ``LayerNormalization`` over the last axis only of a signed fixed-point tensor."""
    if layer.op != "LayerNormalization" or act.fmt is None or not act.fmt[2]:
        return False
    nd = np.ndim(act.values)
    a = layer.attrs
    return nd >= 2 and int(a["axis"]) % nd == nd - 1 and isinstance(
        plan(np.shape(act.values)[-1], act.fmt[0], act.fmt[1], a["epsilon"], a.get("scale"), a.get("bias")), dict)


def host_run(layer, act, rounding):
    """Rule layer_norm in the layer path: ``y * 2**-K`` (float64, exact; no fixed-point format: the next
    engine layer converts it at its calibrated radix)."""
    a = layer.attrs
    f, bits, _ = act.fmt
    p = plan(np.shape(act.values)[-1], f, bits, a["epsilon"], a.get("scale"), a.get("bias"))
    return np.ldexp(normalized(act.ints(), p, rounding).astype(np.float64), -p["k"])


def _perm_to_last(perm, rank):
    return list(perm) == [0] + list(range(2, rank)) + [1]


def _perm_from_last(perm, rank):
    return list(perm) == [0, rank - 1] + list(range(1, rank - 1))


def _readers(program, t):
    return [j for j in program["layers"] if t in j["inputs"]]


def lower_host(j, program, w, steps, why):
    """Lower host layer ``j`` when it is rule layer_norm's (a pending ``("lnorm", {...})`` until its
    engine consumer, :func:`materialize`) or a ``Transpose`` around it (channels to last and
    back: ``SwMove``); True if it was."""
    op, state, shapes = j["op"], w.state, w.shapes
    src = j["inputs"][0]
    st = state.get(src)
    if op == "SwMove" and (j.get("attrs") or {}).get("fn") == "Transpose" and st is not None:
        perm = list(j["attrs"].get("perm", ()))
        rank = len(perm)
        if st[0] in ("q", "add") and rank >= 3 and _perm_to_last(perm, rank):
            rd = _readers(program, j["output"])
            if len(rd) == 1 and rd[0]["kind"] == "host" and rd[0]["op"] == "LayerNormalization":
                if st[0] == "add":                                      # rule layer_norm_sum: the sum's codes first
                    src = _sum_codes(rd[0], st, program, w, steps, why)
                state[j["output"]] = ("lnorm_in", dict(src=src))        # channels last, read by the norm only
                shapes[j["output"]] = tuple(shapes[src][1:]) + (shapes[src][0],)
                return True
        if st[0] == "lnorm" and st[1]["last"] and _perm_from_last(perm, rank):
            state[j["output"]] = ("lnorm", dict(st[1], last=False))
            shapes[j["output"]] = shapes[st[1]["ins"][0]]
            return True
        return False
    if op == "Relu" and st is not None and st[0] == "lnorm" and not st[1].get("relu"):
        state[j["output"]], shapes[j["output"]] = ("lnorm", dict(st[1], relu=True)), shapes[src]
        return True
    if op != "LayerNormalization":
        return False
    if int(program.get("revision", 1)) < REVISION:     # its layer path ran the norm in float64
        raise why(j, f"a program of revision {program.get('revision', 1)} ran this LayerNormalization in float64 "
                     f"(rule layer_norm from revision {REVISION}); recompile the model for one kernel start")
    a = j["attrs"]
    if st is not None and st[0] == "add":                  # rule layer_norm_sum: a residual sum, converted to codes first
        src = _sum_codes(j, st, program, w, steps, why)
        st = state[src]
    if st is None or st[0] not in ("q", "lnorm_in"):
        raise why(j, "a LayerNormalization of an integer tensor computed on the fabric or of a residual Add's sum "
                     "(not of a pending pool or gate)")
    last = st[0] == "lnorm_in"
    base = st[1]["src"] if last else src
    if w.state[base][1] is None or getattr(steps, "engine", "") == "bfp_systolic":
        raise why(j, "a LayerNormalization of BFP pairs: rule layer_norm takes fixed-point codes (fixed8, two-hot)")
    shape = tuple(shapes[base])
    rank = len(shapes[src]) + 1
    if int(a["axis"]) % rank != rank - 1 or (not last and len(shape) != 1):
        raise why(j, "a LayerNormalization over the channels of each position is supported: the features of an "
                     "(N, K) vector, or a map's channels between Transposes to channels-last and back")
    from ..program import _chw
    c, h, w_ = _chw(shape)
    p = plan(c, w.state[base][1], steps.bits, a["epsilon"], a.get("scale"), a.get("bias"))
    if isinstance(p, str):
        raise why(j, p)
    state[j["output"]] = ("lnorm", dict(ins=[base], name=j["name"], hw=h * w_, last=last, plan=p))
    shapes[j["output"]] = shapes[src]
    return True


def _sum_codes(j, st, program, w, steps, why):
    """Rule layer_norm_sum: the pending residual Add ``st`` that LayerNorm ``j`` reads (directly or through
    its Transpose to channels-last), as codes at the radix its layer path calibrated (``j``'s
    ``lnorm_in``): netmode rule residual_add's add op, as for an engine layer with that ``F_x``. Its tensor."""
    if int(program.get("revision", 1)) < REVISION_SUM:
        raise why(j, f"a program of revision {program.get('revision', 1)} ran this LayerNormalization of a residual "
                     f"sum in float64 (rule layer_norm_sum from revision {REVISION_SUM}); recompile the model for one kernel "
                     f"start")
    if st[1].get("p") is not None or "lnorm_in" not in j:
        raise why(j, "a LayerNormalization of a pending pool, or of a residual sum its layer path ran in float64 "
                     "(no engine layer after it, or no rule layer_norm for its codes)")
    if getattr(steps, "engine", "") == "bfp_systolic" or steps.bits is None:
        raise why(j, "a LayerNormalization of BFP pairs: rule layer_norm takes fixed-point codes (fixed8, two-hot)")
    return steps.materialize_add(dict(j, f_x=int(j["lnorm_in"]["f_in"])), st[1], w)


def materialize(j, src, st, state, shapes, ops, aliases, rounding, why, op_cls):
    """An engine layer ``j`` reads the pending norm ``st``: the ``lnorm`` op ending with the
    conversion to ``j``'s ``F_x`` (step 5), as the tensor ``NAME_q``."""
    g = st[1]
    if g["last"]:
        raise why(j, "an engine layer reading a LayerNormalization's channels-last output (no Transpose back)")
    p, f_x = g["plan"], j["f_x"]
    if f_x is None or np.ndim(f_x) or p["k"] > f_x + 24:
        raise why(j, f"the conversion from radix {p['k']} to {f_x} is not exact in today's host rule")
    t = g["name"] + "_q"
    ops.append(op_cls("lnorm", g["name"], list(g["ins"]), t,
                      dict(c=p["c"], hw=g["hw"], e=p["e"], fg=p["fg"], k=p["k"], g=p["g"], b=p["b"],
                           smax=p["smax"], pbits=p["pbits"], shift=int(p["k"] - f_x), rounding=rounding,
                           relu=bool(g.get("relu")))))
    shapes[t], state[t] = shapes[g["ins"][0]], ("q", f_x)


def run_last(q, f, bits):
    """Op ``lnorm`` (fields ``f``) on codes ``q`` (..., C), channels last: the consumer's
    ``bits``-bit codes (step 5's conversion; then the fused ``Relu``, ``max(y, 0)``, exact:
    the conversion is monotone and keeps 0)."""
    from ....primitives import shift_round_sat
    y = shift_round_sat(normalized(q, f, f["rounding"]), f["shift"], bits, f["rounding"])[0]
    return np.maximum(y, 0) if f.get("relu") else y


def run(op, get, b, bits):
    """Rule layer_norm on a batch of ``b`` images: ``(B, C, HW)`` codes in, the consumer's codes out."""
    f = op.f
    q = np.asarray(get(op.ins[0]), np.int64).reshape(b, f["c"], f["hw"]).transpose(0, 2, 1)
    return run_last(q, f, bits).transpose(0, 2, 1)


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops` for ``lnorm``."""
    f = op.f
    ints(op, f, ("c",), 2, MAX_C)
    ints(op, f, ("hw",), 1, 1 << 26)
    ints(op, f, ("k",), -64, Y_BITS)
    ints(op, f, ("shift",), -62, 62)
    ints(op, f, ("fg",), -64, 64)
    ints(op, f, ("smax",), 0, 32)
    ints(op, f, ("e",), 0, 1 << 52)
    g, bb = np.asarray(f.get("g", ())), np.asarray(f.get("b", ()))
    if g.shape != (f["c"],) or bb.shape != (f["c"],) or np.abs(g).max() >= 1 << (G_BITS - 1) \
            or np.abs(bb).max() >= 1 << 44:
        raise bad(op, f"scale codes {g.shape} / bias codes {bb.shape} for {f['c']} channels: one each, "
                      f"|scale| < 2**{G_BITS - 1}, |bias| < 2**44")


def refuse_kernel(net):
    """:class:`InputError` naming the first ``lnorm`` op of ``net`` when its engine's network
    kernel has no loop for it."""
    from ....errors import InputError
    for op in net.ops:
        if op.kind in KINDS and op.kind not in KERNEL_KINDS.get(net.engine, ()):
            raise InputError(f"network kernel: op {op.name} (lnorm, a LayerNormalization) runs in the emu network "
                             f"mode only on {net.engine}; its network kernel's C++ has no loop for it yet (the "
                             f"sparse_cluster kernel has), so on csim, sim and pynq this network runs layer by layer")


# ---- the network kernel (sparse_cluster's ``LayerNorm`` loop nest, hls/engines/sparse_cluster/network.cpp.j2)

#: the pipeline depths of the kernel's two loops, each paid once an op (both loops run over every
#: (position, channel block)): the sums loop's (act read 1, the square 3, the kPc-input adder
#: trees 3) and the statistics in it (``C S2`` and ``S1**2``, a DSP product each, 3; the
#: subtraction and ``E``'s add 1; the leading one and the shift 2; the table read 1), the output
#: loop's (the act and statistics reads 1, ``C q`` 3, the products ``G d`` and ``(G d) r`` 3 each,
#: the bias add 1, the two roundings 2, the store 1)
SUM_DEPTH, STAT_DEPTH, OUT_DEPTH = 7, 7, 14
#: the kernel's loop counters: (sums, outputs), each iterated ``H W ceil(C / Q)`` times per op
LOOPS = ("NetLnSum", "NetLnOut")
#: the op code of ``lnorm`` in the kernels' descriptor table
OP_CODE = 8


def roms(net, pc):
    """The scale and bias ROMs ``kLnG``, ``kLnB`` of the ``lnorm`` ops: ``(pc, words)`` int64
    each, bank ``j`` holding channel ``k pc + j``'s code at word ``rom + k`` (zeros past the last
    channel; one zero word when there is none), each op's first word in its field ``rom``."""
    g, b = [], []
    for op in net.ops:
        if op.kind != "lnorm":
            continue
        c = op.f["c"]
        nb = -(-c // pc)
        op.f["rom"] = sum(x.shape[1] for x in g)
        for src, dst in ((op.f["g"], g), (op.f["b"], b)):
            a = np.zeros(nb * pc, np.int64)
            a[:c] = np.asarray(src, np.int64)
            dst.append(a.reshape(nb, pc).T)
    if not g:
        z = np.zeros((pc, 1), np.int64)
        return z, z
    return np.concatenate(g, axis=1), np.concatenate(b, axis=1)


def descriptor(op, f, d, place, name, pc):
    """Fill the kernel descriptor ``d`` of an ``lnorm`` op: ``hw`` positions, ``zb`` channel
    blocks, ``cg`` channels, ``woff`` its first ROM word (:func:`roms`), ``sa`` = ``Fg + R -
    K`` (step 5's shift is ``sa + s``), ``sb`` = ``E``, ``shift`` the conversion to the consumer
    (``K - F_x``), ``relu``; ``n_iter`` the iterations of each of its two loops. Returns 0 (no
    residual sum bits)."""
    from ....errors import InputError
    src = place[name(op.ins[0])][0]
    if src is None:
        raise InputError(f"network kernel: {op.name}: its input is not in an activation buffer")
    if f["e"] >= 1 << 31:
        raise InputError(f"network kernel: {op.name}: an epsilon term of {f['e']} codes beyond 2**31")
    nb = -(-f["c"] // pc)
    d.update(src=src, hw=f["hw"], zb=nb, cg=f["c"], woff=f["rom"], sa=f["fg"] + R_BITS - f["k"], sb=f["e"],
             shift=f["shift"], relu=int(bool(f.get("relu"))), n_iter=nb * f["hw"])
    return 0


def _bits(v):
    """Signed bits holding ``|x| <= v``."""
    return int(v).bit_length() + 1


def sh_bits(v_bits):
    """Unsigned bits of the half shift ``s`` of a ``v_bits``-bit ``Vt``: ``s <= (v_bits - T) / 2``."""
    return max(1, (max(0, v_bits - T_BITS) // 2).bit_length())


def widths(net, a_bits=8, pc=1):
    """The template fields of the ``LayerNorm`` loops: ``has_lnorm`` and, with it, the signed
    widths of ``S1``, ``S2``, ``d``, ``Vt`` (``C S2`` and ``S1**2`` too), ``G d`` and ``p``
    (the module docstring's bounds over the program's ``lnorm`` ops), the tripcounts and the
    table constants."""
    ops = [op for op in net.ops if op.kind == "lnorm"]
    if not ops:
        return dict(has_lnorm=False)
    cmax = max(op.f["c"] for op in ops)
    emax = max(op.f["e"] for op in ops)
    half = 1 << (a_bits - 1)
    d_bits = _bits(cmax * 2 * half)
    return dict(has_lnorm=True, ln_fabric=net.engine in FABRIC, ln_s1_bits=_bits(cmax * half), ln_s2_bits=_bits(cmax * half * half),
                ln_d_bits=d_bits, ln_v_bits=_bits(cmax * cmax * half * half + emax), ln_gd_bits=G_BITS + d_bits,
                ln_p_bits=max(op.f["pbits"] for op in ops), ln_t_bits=T_BITS, ln_r_bits=R_BITS + 1, ln_y_bits=Y_BITS,
                ln_c_bits=_bits(cmax), max_ln_hw=max(op.f["hw"] for op in ops),
                ln_sh_bits=sh_bits(_bits(cmax * cmax * half * half + emax)),
                max_ln_iter=max(-(-op.f["c"] // pc) * op.f["hw"] for op in ops),
                rsqrt=[int(v) for v in rsqrt_table()])


def multipliers(net, tables):
    """The ``LayerNorm`` loops' DSP products as :class:`hlsnn.resources.Multiplier` rows (none
    without an ``lnorm`` op): per bank ``G * d`` and ``(G d) * r`` (output loop), and where the
    engine is not in :data:`FABRIC` the square ``q * q`` (sums loop) and ``C * q``; ``C * S2``
    and ``S1 * S1`` (the sums loop's statistics, one each). In a :data:`FABRIC` kernel the squares and ``C q`` are LUT-built:
    :func:`logic`."""
    from ....resources import Multiplier
    a = net.input["bits"]
    w = widths(net, a, tables["pc"])
    if not w["has_lnorm"]:
        return []
    pc = tables["pc"]
    small = [] if w["ln_fabric"] else [
        Multiplier("q*q", "LnSums", a, a, count=pc, note="a LayerNorm's squares, one a bank"),
        Multiplier("C*q", "LnOut", w["ln_c_bits"], a, count=pc, note="a LayerNorm's C q, one a bank")]
    return small + [
        Multiplier("G*d", "LnOut", G_BITS, w["ln_d_bits"], count=pc, note="a LayerNorm's scale, one a bank"),
        Multiplier("Gd*r", "LnOut", w["ln_gd_bits"], R_BITS + 2, count=pc,
                   note="a LayerNorm's reciprocal square root, one a bank"),
        Multiplier("C*S2", "LnSums", w["ln_c_bits"], w["ln_s2_bits"], count=1, note="a LayerNorm's variance"),
        Multiplier("S1*S1", "LnSums", w["ln_s1_bits"], w["ln_s1_bits"], count=1, note="a LayerNorm's variance")]


def logic(net, tables):
    """``{"lnorm": (LUT, FF)}`` of the ``LayerNorm`` loops outside their DSPs and ROMs (``{}``
    without an ``lnorm`` op), from the rendered widths with the LUT rules of
    :func:`hlsnn.engines.shift_mac.spec.shifter_luts` (a LUT per adder bit; a LUT-built ``a x
    b`` product ``(a + 1) b``): per bank the square (8 x 8) and ``C q`` products, the sums' adders
    (``S1``, ``S2``), ``d``'s subtraction, the bias's left shift by ``s``, ``p``'s adder, the two
    rounding shifters and their increments, the ReLU and clamp (the two products only in a
    :data:`FABRIC` kernel); once (the sums loop's statistics) ``Vt``'s subtract
    and add, its leading one and its right shift by ``2 s``; a register per stage's value."""
    from ....resources import shifter_luts
    a = net.input["bits"]
    w = widths(net, a, tables["pc"])
    if not w["has_lnorm"]:
        return {}
    pc, pb, vb, yb = tables["pc"], w["ln_p_bits"], w["ln_v_bits"], w["ln_y_bits"]
    smax = max(op.f["smax"] for op in net.ops if op.kind == "lnorm")
    bank = (((a + 1) * a + (w["ln_c_bits"] + 1) * a if w["ln_fabric"] else 0) + w["ln_s1_bits"] + w["ln_s2_bits"] + w["ln_d_bits"]
            + shifter_luts(pb, smax) + pb + shifter_luts(pb, 63) + pb + shifter_luts(yb, 31) + yb + 2 * a)
    pos = 2 * vb + vb + shifter_luts(vb, 2 * smax)
    return {"lnorm": (pc * bank + pos, pc * (w["ln_d_bits"] + w["ln_gd_bits"] + 2 * pb + yb + a) + 3 * vb)}


def buffers(net, tables):
    """The ``LayerNorm`` loops' arrays as :class:`hlsnn.resources.Buffer` rows (none without an
    ``lnorm`` op): the scale and bias codes a ROM per bank (:func:`roms`), the table, and the
    statistics a position (``S1``, ``s``, ``r``: written by the sums loop, read by the output loop)."""
    from ....resources import Buffer
    if not any(op.kind == "lnorm" for op in net.ops):
        return []
    pc, words = tables["pc"], tables["ln_g"].shape[1]
    w = widths(net, net.input["bits"], pc)
    hw = w["max_ln_hw"]
    return [Buffer("kLnG", "net_top", "array", G_BITS, (pc, words), partition=((1, "complete"),), static=True,
                   note="a LayerNorm's scale codes, a ROM per bank"),
            Buffer("kLnB", "net_top", "array", 64, (pc, words), partition=((1, "complete"),), static=True,
                   note="a LayerNorm's bias codes, a ROM per bank"),
            Buffer("kRsqrt", "net_top", "array", 32, (1 << T_BITS,), static=True,
                   note="the reciprocal square root table (rule layer_norm)"),
            Buffer("ln_s1", "LayerNorm", "array", w["ln_s1_bits"], (hw,), note="a LayerNorm's S1 a position"),
            Buffer("ln_sh", "LayerNorm", "array", w["ln_sh_bits"], (hw,), note="a LayerNorm's half shift a position"),
            Buffer("ln_r", "LayerNorm", "array", w["ln_r_bits"], (hw,),
                   note="a LayerNorm's reciprocal square root a position")]


def cycles(r, ii=None):
    """A ``lnorm`` descriptor row's cycles per image (``r``: its fields by name): its two loops'
    ``H W ceil(C/Q)`` iterations each at their derived II, plus :data:`SUM_DEPTH` +
    :data:`STAT_DEPTH` (the sums loop's) and :data:`OUT_DEPTH` (the output loop's), once."""
    g = (ii or {}).get
    return r["zb"] * r["hw"] * (g(LOOPS[0], 1) + g(LOOPS[1], 1)) + SUM_DEPTH + STAT_DEPTH + OUT_DEPTH
