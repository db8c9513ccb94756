"""Rules attn_gather, add_const, act_matmul and int_softmax, **attention in integers**: the host
ops of an attention block between engine layers (``nn.MultiheadAttention`` as both PyTorch
exporters write it, the position embedding before it) as integer rules on fixed-point codes, so
that an encoder classifier lowers to one network program. The layer path
(:func:`hlsnn.deploy.run.attnrun.layer_run`) runs these rules where they apply
(:func:`hlsnn.deploy.run.attnrun.applies`: a network with a ``MatMulAct`` whose engine layers are
all on ``sparse_cluster`` (fixed8) or ``shift_mac`` (two-hot), program revision :data:`REVISION`
on), and the network mode runs them as the ops below, so both give the same bits. Every tensor here
is ``b``-bit signed codes ``q`` at a radix ``F`` (value ``q * 2**-F``), held per image in the ONNX
tensor's own element order (the batch axis, of size 1 in the file, removed).

Rule attn_gather: **gather** (a data move): ``y.flat[i] = q.flat[idx[i]]``, radix unchanged; ``idx`` is the
    ``SwMove`` chain's own ``Transpose``/``Reshape``/``Squeeze``/``Unsqueeze``/``Gather``/``Slice``
    applied to the element numbers (:func:`move_index`: an address pattern made when lowering),
    consecutive moves composed into one pattern, an identity pattern no op at all. The head split
    (``(T, 3E)`` to ``3 x (H, T, E/H)``) and merge are such moves. Exact: the layer path's
    ``SwMove`` moves values only. class_token: a ``Concat`` of the tensor with constants (a ViT's class
    token) is a gather whose pattern also takes constant codes: each constant written at the
    tensor's radix ``F`` as :func:`hlsnn.deploy.quantize.quant.to_fixed` writes it (:func:`const_codes`:
    ``rint`` at ``max(F + 24, 0)``, then ``shift_round_sat`` with the deployment's rounding), on
    the layer path too; its error is that rounding, half a unit at ``F``.
Rule add_const: **addc**, a per-element constant (a position embedding ``x + P``, ``AddConst``): with
    ``G = max(F_o + 24, 0)`` (``>= F``, checked) and the constant written at radix ``G`` once (``C =
    rint(c * 2**G)``, float64, half to even; ``|C| < 2**50`` checked), ``y = shift_round_sat((q
    << (G - F)) + C, G - F_o, b, rounding)``. ``F_o`` is the output's radix, DETERMINE on the
    float sums when calibrating (the program's host-layer field ``codes``). This is
    :func:`hlsnn.deploy.quantize.quant.to_fixed` of the float64 sum ``q 2**-F + c`` at ``F_o`` (which
    writes it at radix ``G`` by ``rint`` first: ``rint(q 2**(G-F) + c 2**G) = (q << (G-F)) +
    rint(c 2**G)``), so it adds no error to that conversion (tested against ``to_fixed``).
Rule act_matmul: **actmm**, a ``MatMul`` of two activations (``Q Kᵀ``, ``P V`` per head, broadcast over the
    leading axes as ONNX's ``MatMul``): ``acc = sum_k a[.., t, k] b[.., k, s]`` exact (int64),
    ``y = shift_round_sat(acc, Fa + Fb - F_o, b, rounding)``, ``F_o`` DETERMINE on the exact
    products' values when calibrating (field ``codes``). Error: half a unit at ``F_o`` (and what
    DETERMINE's overflow ratio lets saturate).
Rule int_softmax: **softmax** over the last axis (the keys) of scores ``q`` at radix ``F``, into codes at the
    fixed radix ``Fp = b - 1`` (probabilities in ``[0, 1]``; 1 saturates to ``1 - 2**-Fp``):

    1. ``m = max q``; ``d = m - q`` (``0 <= d < 2**b``, exact: softmax is shift-invariant);
    2. ``e = EXP[d]`` from the op's table ``EXP[d] = rint(2**E exp(-d 2**-F))`` (``E`` =
       :data:`EXP_BITS`; float64 once, when lowering; ``e`` of the max is ``2**E``);
    3. ``S = sum e`` (``2**E <= S <= n 2**E``, ``n`` the keys);
    4. ``r = floor(2**K / S)`` (``K`` = :data:`RECIP_BITS`: one division per row);
    5. ``y = min((e r + 2**(K - Fp - 1)) >> (K - Fp), 2**Fp - 1)`` (round half up).

    Error against ``softmax(q 2**-F)`` per value: the table's rounding ``2**-(E+1)`` relative
    per term (so at most ``2**-E`` relative on ``e / S``), the reciprocal's floor ``S 2**-K``
    relative (``<= n 2**(E-K)``), step 5's half unit ``2**-(Fp+1)``, and the saturation of a
    probability above ``1 - 2**-(Fp+1)``: within ``2**-Fp`` in all (tested against numpy's
    float softmax).

A residual ``Add`` of two code tensors in such a network is rule residual_add's add op at once
(rule residual_codes): the exact sum converted to codes at its calibrated radix (field ``codes``,
DETERMINE on the sums) for every reader, as ``to_fixed`` of the float64 sum (exact while ``max(Fa,
Fb) <= F_o + 24``, checked). LayerNormalization (rule layer_norm, :mod:`.layernorm`) ends in
codes too (rule layer_norm_codes): step 5's conversion to a calibrated radix ``F_o`` (field
``codes``) for every reader, so that a residual ``Add`` of it is rule layer_norm_sum's sum of
codes; a token mean of codes is rule rows_transpose's transpose then rule residual_add's global
pool. GELU (``UnaryChain``) and the ``Scale`` of q and k are rule unary_table's tables of codes.

The ``sparse_cluster`` and ``shift_mac`` network kernels run these ops in their loops
(:mod:`.attnkernel`). On BFP pairs the same ops are the rules of
:mod:`hlsnn.engines.bfp_systolic.network.attnpairs` (rules add_const, int_softmax and
layer_norm_codes on the pairs' codes, bfp_scale, bfp_layer_norm), run in the ``bfp_systolic``
kernel's own loops (:mod:`hlsnn.engines.bfp_systolic.network.attnkern`); a kernel without loops
for an op refuses it by name (:func:`refuse_kernel`).
"""
from __future__ import annotations

import math

import numpy as np

#: the compiled program's revision from which the layer path runs rules attn_gather, add_const, act_matmul, int_softmax and layer_norm_codes
#: (:data:`hlsnn.deploy.lower.programrev.ATTENTION`; before: float64 on the host)
REVISION = 7
#: the op kinds of this module
KINDS = ("gather", "addc", "actmm", "softmax")
#: the engines whose network kernel has loops for them (:mod:`.attnkernel`: the plain sparse_cluster
#: kernel, shift_mac's)
KERNEL_KINDS = {"sparse_cluster": KINDS, "shift_mac": KINDS}
#: rule int_softmax's exponential table's fraction bits (entries up to 2**EXP_BITS)
EXP_BITS = 16
#: rule int_softmax's reciprocal's bits (r = floor(2**RECIP_BITS / S))
RECIP_BITS = 40
#: the widest codes these rules take
MAX_BITS = 12


# ---- the rules (the specification) -------------------------------------------------------------

def move_index(attrs):
    """Rule attn_gather's pattern of one ``SwMove`` (``attrs``: its ``fn``, ``in_shapes``, ``out_shape``
    and the move's own fields, as :func:`hlsnn.deploy.run.samplewise.run` reads them): ``idx``
    (int64, the output's elements) with ``y.flat[i] = q.flat[idx[i]]`` per image, the move run on
    the element numbers of one sample (the file's shapes, batch axis included), or None for a
    move it does not know."""
    s_in, s_out = (tuple(int(d) for d in v) for v in (attrs["in_shapes"][0], attrs["out_shape"]))
    x = np.arange(int(np.prod(s_in)), dtype=np.int64).reshape(s_in)
    fn = attrs["fn"]
    if fn == "Transpose":
        y = x.transpose([int(p) for p in attrs["perm"]])
    elif fn == "Gather":
        ax = int(attrs["axis"])
        y = np.take(x, np.asarray(attrs["indices"], np.int64), axis=ax % x.ndim if -x.ndim <= ax < x.ndim else 99)
    elif fn in ("Slice", "Split"):
        y = x
        for ax, idx in attrs["takes"]:
            y = np.take(y, np.asarray(idx, np.int64), axis=int(ax))
    elif fn in ("Reshape", "Flatten", "Squeeze", "Unsqueeze"):
        y = x.reshape(s_out)
    else:
        return None
    return y.reshape(-1) if y.size == int(np.prod(s_out)) else None


def gather(q, idx, consts=()):
    """Rule attn_gather on ``(B, n)`` codes: ``(B, len(idx))``; an index ``n + k`` takes constant code
    ``consts[k]`` (rule class_token)."""
    q = np.asarray(q, np.int64).reshape(len(q), -1)
    if len(consts):
        q = np.concatenate([q, np.broadcast_to(np.asarray(consts, np.int64), (len(q), len(consts)))], axis=1)
    return q[:, idx]


def const_codes(c, f, bits, rounding):
    """Rule class_token's constant codes: ``c`` written at radix ``g = max(f + 24, 0)`` by ``rint``
    (float64, half to even), then ``shift_round_sat`` to ``bits`` at ``f`` with ``rounding``: the
    integers :func:`hlsnn.deploy.quantize.quant.to_fixed` gives (its reference's steps)."""
    from ....primitives import shift_round_sat
    g = max(int(f) + 24, 0)
    w = np.rint(np.ldexp(np.asarray(c, np.float64), g)).astype(np.int64)
    return shift_round_sat(w, g - int(f), bits, rounding)[0]


def concat_index(attrs, f, bits, rounding):
    """Rule class_token, a ``Concat`` of one tensor with constants (a class token) as a gather: ``(idx,
    consts)`` per image (the constants as codes at the tensor's radix ``f``, :func:`const_codes`),
    or None for another concat (two tensors)."""
    s_in = tuple(int(d) for d in attrs["in_shapes"][0])
    n = int(np.prod(s_in))
    parts, consts = [], []
    for kind, v in attrs["operands"]:
        if kind == "x":
            if int(v) != 0:
                return None
            parts.append(np.arange(n, dtype=np.int64).reshape(s_in))
        else:
            c = np.asarray(v, np.float64)
            parts.append(n + len(consts) + np.arange(c.size, dtype=np.int64).reshape(c.shape))
            consts += const_codes(c, f, bits, rounding).reshape(-1).tolist()
    try:
        y = np.concatenate(parts, axis=int(attrs["axis"]))
    except ValueError:
        return None
    return y.reshape(-1), np.asarray(consts, np.int64)


def const_image(c, shape):
    """``AddConst``'s constant ``c`` broadcast to one image of per-image ``shape`` as the layer
    path adds it (to the held ``(N, *shape)`` tensor), or None where it does not broadcast."""
    try:
        return (np.zeros((1,) + tuple(shape)) + np.asarray(c, np.float64))[0] if np.ndim(c) <= len(shape) + 1 \
            else None
    except ValueError:
        return None


def addc_plan(c, f_in, f_out):
    """Rule add_const's constants: ``{g, cq}`` (``cq`` the constant at radix ``G``, int64), or a
    string saying why not."""
    g = max(int(f_out) + 24, 0)
    if g < int(f_in):
        return f"an input radix {f_in} finer than the sum's {g}"
    cq = np.rint(np.ldexp(np.asarray(c, np.float64), g))
    if not np.isfinite(cq).all() or np.abs(cq).max(initial=0) >= 2.0 ** 50:
        return f"a constant up to {np.abs(np.asarray(c)).max():.3g}: beyond 2**50 at radix {g}"
    return dict(g=g, cq=cq.astype(np.int64))


def addc(q, cq, f_in, g, f_out, bits, rounding):
    """Rule add_const on codes ``q`` (B, ...) with the constant ``cq`` (broadcast to one image)."""
    from ....primitives import shift_round_sat
    s = (np.asarray(q, np.int64) << (g - f_in)) + np.asarray(cq, np.int64)
    return shift_round_sat(s, g - f_out, bits, rounding)[0]


def actmm_acc(a, b):
    """Rule act_matmul's exact sums of codes ``a`` (..., T, K) by ``b`` (..., K, S), broadcast (int64)."""
    return np.matmul(np.asarray(a, np.int64), np.asarray(b, np.int64))


def actmm(a, b, shift, bits, rounding):
    """Rule act_matmul: the exact sums requantized by ``shift`` (``Fa + Fb - F_o``)."""
    from ....primitives import shift_round_sat
    return shift_round_sat(actmm_acc(a, b), shift, bits, rounding)[0]


def exp_table(f, bits):
    """Rule int_softmax's ``EXP``: ``rint(2**E exp(-d 2**-f))`` for ``d`` in ``0 .. 2**bits - 1`` (int64)."""
    d = np.arange(1 << int(bits), dtype=np.float64)
    return np.rint(np.ldexp(np.exp(-np.ldexp(d, -int(f))), EXP_BITS)).astype(np.int64)


def softmax(q, table, bits):
    """Rule int_softmax on codes ``q`` (..., n) over the last axis: codes (..., n) at radix ``bits - 1``."""
    q = np.asarray(q, np.int64)
    fp = int(bits) - 1
    d = q.max(axis=-1, keepdims=True) - q
    e = np.asarray(table, np.int64)[np.minimum(d, len(table) - 1)]
    s = e.sum(axis=-1, keepdims=True)
    r = (1 << RECIP_BITS) // s
    y = (e * r + (1 << (RECIP_BITS - fp - 1))) >> (RECIP_BITS - fp)
    return np.minimum(y, (1 << fp) - 1)


def last_axis(a):
    """The op's ``axis`` is the last of its input's (the keys of the scores)."""
    r = len(a["in_shapes"][0])
    return int(a["axis"]) % r == r - 1


# ---- the network mode ---------------------------------------------------------------------------

def _per_image(shape):
    """A file shape (batch axis of 1 first where normal) as the network mode's per-image shape:
    its axes of size 1 dropped (at least one axis)."""
    s = tuple(int(d) for d in shape)
    s = s[1:] if s[:1] == (1,) else s
    return tuple(d for d in s if d != 1) or (1,)


def lower_host(j, program, w, steps, why, op_cls):
    """Lower host layer ``j`` when it is one of rules attn_gather, add_const, act_matmul, int_softmax or layer_norm_codes (a compiled program with the
    ``codes`` field where they need a radix), or a consumer of a rule's output that needs it
    shaped (a ``MapToRows`` back to ``(T, 1, F)``, a token mean); True if it was."""
    op, a = j["op"], j.get("attrs") or {}
    state, shapes = w.state, w.shapes
    ins = list(j["inputs"])
    sts = [state.get(i) for i in ins]
    if int(program.get("revision", 1)) < REVISION or not any(lj.get("op") == "MatMulAct" for lj in program["layers"]):
        return False
    if getattr(steps, "engine", "") == "bfp_systolic" or steps.bits is None:
        return False                                  # BFP pairs: no rule here yet (layer by layer)
    if any(s is None or s[0] != "q" for s in sts):
        if op == "LayerNormalization" and "codes" in j:
            return _lnorm_codes(j, program, w, steps, why, op_cls)
        return False
    f = sts[0][1]
    bits = steps.bits
    if op in ("Reshape", "Flatten") and w.aliases.get(ins[0], ins[0]) in w.__dict__.get("gathers", {}):
        return _reshaped_gather(j, program, w)                          # a gather's output read as reshaped
    if op == "Add" and "codes" in j and len(ins) == 2:                   # rule residual_codes: a residual sum as codes
        from ..program import _chw
        if _chw(shapes[ins[0]]) != _chw(shapes[ins[1]]):
            return False
        fo = int(j["codes"]["f_out"])
        base = steps.materialize_add(dict(j, f_x=fo), dict(ins=ins, fa=sts[0][1], fb=sts[1][1], relu=False, p=None,
                                                            name=j["name"]), w)
        w.aliases[j["output"]] = base
        state[j["output"]], shapes[j["output"]] = ("q", fo), shapes[base]
        return True
    if op == "SwCompute" and a.get("fn") == "Concat" and len(ins) == 1:     # rule class_token: a class token
        got = concat_index(a, f, bits, steps.rounding)
        if got is None:
            return False
        idx, consts = got
        w.ops.append(op_cls("gather", j["name"], [ins[0]], j["output"], dict(n=len(idx), idx=idx, consts=consts)))
        w.state[j["output"]], w.shapes[j["output"]] = ("q", f), _per_image(a["out_shape"])
        return True
    if op == "SwMove":
        idx = move_index(a)
        if idx is None:
            return False
        src = ins[0]
        prev = w.__dict__.setdefault("gathers", {}).get(w.aliases.get(src, src))
        if prev is not None and not len(prev[2]):
            base, idx = prev[0], prev[1][idx]
            _drop_unread(program, w, w.aliases.get(src, src))
        else:
            base = w.aliases.get(src, src)
        w.state[j["output"]], w.shapes[j["output"]] = ("q", f), _per_image(a["out_shape"])
        if len(idx) == int(np.prod(shapes[base])) and (idx == np.arange(len(idx))).all():
            w.aliases[j["output"]] = base                                  # an identity pattern: no op
            return True
        w.ops.append(op_cls("gather", j["name"], [base], j["output"], dict(n=len(idx), idx=idx)))
        w.gathers[j["output"]] = (base, idx, ())
        return True
    if op == "MapToRows" and len(a.get("lead", ())) > 1 and all(d == 1 for d in a["lead"][1:]):
        return False if _rows_back(j, w, why, op_cls) is None else True
    if op == "AddConst" and "codes" in j:
        fo = int(j["codes"]["f_out"])
        shape = tuple(shapes[ins[0]])
        c = const_image(a["c"], shape)
        p = "a constant that does not broadcast to one image" if c is None else addc_plan(c.reshape(-1), f, fo)
        if isinstance(p, str):
            raise why(j, p)
        w.ops.append(op_cls("addc", j["name"], [ins[0]], j["output"],
                            dict(n=int(np.prod(shape)), f_in=int(f), g=p["g"], f_out=fo, cq=p["cq"].reshape(-1),
                                 rounding=steps.rounding)))
        state[j["output"]], shapes[j["output"]] = ("q", fo), shape
        return True
    if op == "MatMulAct" and "codes" in j and len(ins) == 2:
        fo = int(j["codes"]["f_out"])
        sa, sb = (tuple(int(d) for d in s) for s in a["in_shapes"])
        w.ops.append(op_cls("actmm", j["name"], ins, j["output"],
                            dict(sa=sa, sb=sb, so=tuple(int(d) for d in a["out_shape"]),
                                 shift=int(f + sts[1][1] - fo), rounding=steps.rounding)))
        state[j["output"]], shapes[j["output"]] = ("q", fo), _per_image(a["out_shape"])
        return True
    if op == "SwCompute" and a.get("fn") == "Softmax" and last_axis(a):
        shape = _per_image(a["out_shape"])
        n = int(a["in_shapes"][0][-1])
        w.ops.append(op_cls("softmax", j["name"], [ins[0]], j["output"],
                            dict(rows=int(np.prod(shape)) // n, n=n, table=exp_table(f, bits))))
        state[j["output"]], shapes[j["output"]] = ("q", bits - 1), shape
        return True
    if op == "LayerNormalization" and "codes" in j:
        return _lnorm_codes(j, program, w, steps, why, op_cls)
    if op == "SwCompute" and a.get("fn") == "ReduceMean" and list(a.get("axes", ())) == [1] \
            and len(a["in_shapes"][0]) == 3 and int(a["in_shapes"][0][0]) == 1 and not a.get("keepdims"):
        return _token_mean(j, w, op_cls)
    return False


def _reshaped_gather(j, program, w):
    """A ``Reshape`` or ``Flatten`` (an alias) of a gather's output that nothing else reads: the
    gather writes its output in the reshaped per-image shape instead (the same element order, so
    the same pattern; its readers see the layout they expect, e.g. the ``(T, E)`` rows of a
    merged head that a ``RowsToMap`` takes). False where another layer reads the gather's output."""
    src = w.aliases.get(j["inputs"][0], j["inputs"][0])
    if sum(src in la["inputs"] for la in program["layers"]) != 1:
        return False
    full = (1,) + tuple(int(d) for d in w.shapes[src])
    a = j.get("attrs") or {}
    try:
        if j["op"] == "Reshape":
            t = [full[i] if int(v) == 0 else int(v) for i, v in enumerate(a["shape"])]
            new = np.zeros(full).reshape(t).shape[1:]
        else:
            ax = int(a.get("axis", 1))
            new = (int(np.prod(full[1:ax], dtype=np.int64)) if ax > 1 else 1, int(np.prod(full[max(ax, 1):])))
            new = new[1:] if new[0] == 1 else new
    except (KeyError, ValueError, TypeError):
        return False
    w.shapes[src] = tuple(int(d) for d in new)
    w.state[j["output"]], w.shapes[j["output"]] = w.state[src], w.shapes[src]
    w.aliases[j["output"]] = src
    return True


def _drop_unread(program, w, t):
    """Remove the gather op making ``t`` once every layer reading ``t`` is a move (each composes its
    own pattern from ``t``'s source instead)."""
    if all(la.get("op") == "SwMove" for la in program["layers"] if t in la["inputs"]):
        w.ops[:] = [op for op in w.ops if not (op.kind == "gather" and op.out == t)]


def _rows_back(j, w, why, op_cls):
    """A ``MapToRows`` back to ``(T, 1, F)`` rows (the sequence-first layout of an attention
    block): :mod:`.transpose`'s rule rows_transpose with the axes of 1 dropped."""
    from . import transpose
    jj = dict(j, attrs=dict(j["attrs"], lead=[int(j["attrs"]["lead"][0])]))
    ok = transpose.lower_host(jj, w.state, w.shapes, w.aliases, w.kernel_in, w.ops, why, op_cls,
                              lambda s: s is not None and s[0] == "q")
    return ok or None


def _lnorm_codes(j, program, w, steps, why, op_cls):
    """Rule layer_norm_codes: rule layer_norm (or layer_norm_sum, of a pending residual ``Add``) over the features of ``(T, F)``
    rows of codes: rule rows_transpose's transpose to the ``F x T x 1`` map, the ``lnorm`` op ending at the
    calibrated radix, rule rows_transpose's transpose back to rows."""
    from . import layernorm
    src = j["inputs"][0]
    st = w.state.get(src)
    if st is not None and st[0] == "add":
        src = layernorm._sum_codes(j, st, program, w, steps, why)
        st = w.state[src]
    if st is None or st[0] != "q" or len(w.shapes[src]) != 2:
        return False
    t_, f_ = (int(d) for d in w.shapes[src])
    m = j["name"] + "/map"
    w.ops.append(op_cls("transpose", m, [src], m + "_t", dict(r=t_, s=f_)))
    w.state[m + "_t"], w.shapes[m + "_t"] = st, (f_, t_, 1)
    w.state[m + "_last"], w.shapes[m + "_last"] = ("lnorm_in", dict(src=m + "_t")), (t_, f_)
    jj = {k: v for k, v in j.items() if k != "lnorm_in"}
    if not layernorm.lower_host(dict(jj, inputs=[m + "_last"]), program, w, steps, why):
        return False
    g = dict(w.state[j["output"]][1], last=False)
    layernorm.materialize(dict(j, f_x=int(j["codes"]["f_out"])), j["output"], ("lnorm", g), w.state, w.shapes,
                          w.ops, w.aliases, steps.rounding, why, op_cls)
    t = g["name"] + "_q"
    w.ops.append(op_cls("transpose", j["name"] + "/rows", [t], j["output"], dict(r=f_, s=t_)))
    w.state[j["output"]], w.shapes[j["output"]] = w.state[t], (t_, f_)
    return True


def _token_mean(j, w, op_cls):
    """The mean over the tokens of ``(T, F)`` rows of codes: rule rows_transpose's transpose to the ``F x T x 1``
    map, then rule residual_add's global pool of its ``T`` pixels (pending until its consumer's ``F_x``)."""
    from ..pools.mean import count_fields
    src = j["inputs"][0]
    t_, f_ = (int(d) for d in j["attrs"]["in_shapes"][0][1:])
    if tuple(w.shapes[src]) != (t_, f_):
        return False
    t = j["name"] + "_map"
    w.ops.append(op_cls("transpose", j["name"] + "/map", [src], t, dict(r=t_, s=f_)))
    w.state[t], w.shapes[t] = w.state[src], (f_, t_, 1)
    fq = w.state[src][1]
    w.state[j["output"]] = ("add", dict(ins=[t], fa=fq, fb=fq, relu=False, name=j["name"], **count_fields(t_)))
    w.shapes[j["output"]] = (f_,)
    return True


def run(op, get, b, bits):
    """Rules attn_gather, add_const, act_matmul and int_softmax on a batch of ``b`` images: the output codes (int64, images first)."""
    f = op.f
    x = np.asarray(get(op.ins[0]), np.int64).reshape(b, -1)
    if op.kind == "gather":
        return gather(x, f["idx"], f.get("consts", ()))
    if op.kind == "addc":
        return addc(x, f["cq"][None, :], f["f_in"], f["g"], f["f_out"], bits, f["rounding"])
    if op.kind == "actmm":
        y = np.asarray(get(op.ins[1]), np.int64).reshape(b, -1)
        sa, sb = f["sa"], f["sb"]
        r = max(len(sa), len(sb))
        xa = x.reshape((b,) + (1,) * (r - len(sa)) + tuple(sa))
        xb = y.reshape((b,) + (1,) * (r - len(sb)) + tuple(sb))
        return actmm(xa, xb, f["shift"], bits, f["rounding"]).reshape(b, -1)
    return softmax(x.reshape(b, f["rows"], f["n"]), f["table"], bits).reshape(b, -1)


def check_op(op, ints, bad):
    """:func:`hlsnn.deploy.lower.program.check_ops` for rules attn_gather, add_const, act_matmul and int_softmax."""
    f = op.f
    if op.kind == "gather":
        ints(op, f, ("n",), 1, 1 << 24)
        if np.shape(f["idx"]) != (f["n"],) or np.asarray(f["idx"]).min(initial=0) < 0:
            raise bad(op, f"an index pattern of shape {np.shape(f['idx'])}: {f['n']} non-negative indices")
        if len(f.get("consts", ())) and np.abs(f["consts"]).max() > 1 << 15:
            raise bad(op, "constant codes beyond 16 bits")
    elif op.kind == "addc":
        ints(op, f, ("n",), 1, 1 << 24)
        ints(op, f, ("g",), 0, 64)
        if np.shape(f["cq"]) != (f["n"],) or np.abs(f["cq"]).max(initial=0) >= 1 << 50:
            raise bad(op, f"a constant of shape {np.shape(f['cq'])}: {f['n']} values below 2**50")
    elif op.kind == "actmm":
        ints(op, f, ("shift",), -62, 62)
        if np.shape(f["sa"])[0] < 2 or np.shape(f["sb"])[0] < 2 or f["sa"][-1] != f["sb"][-2]:
            raise bad(op, f"operands of shapes {f['sa']} and {f['sb']}: (.., T, K) by (.., K, S)")
    else:
        ints(op, f, ("rows", "n"), 1, 1 << 16)
        if np.shape(f["table"])[0] < 2 or np.asarray(f["table"]).max(initial=0) > 1 << EXP_BITS:
            raise bad(op, f"an exponential table of {np.shape(f['table'])} entries up to 2**{EXP_BITS}")


def refuse_kernel(net):
    """:class:`InputError` naming the first op of rules attn_gather, add_const, act_matmul and int_softmax in ``net`` (or of their forms on BFP
    pairs, bfp_attn_gather to bfp_softmax, bfp_scale and bfp_layer_norm of :mod:`hlsnn.engines.bfp_systolic.network.attnpairs`) that its network
    kernel has no loop for, so on csim, sim and pynq the network runs layer by layer."""
    from ....errors import InputError
    for op in net.ops:
        if net.engine == "bfp_systolic" and (op.f.get("pairs") or op.kind in ("plnorm", "pscale")):
            continue                                  # the bfp kernel's loops on pairs (bfp_systolic.network.attnkern)
        if op.kind in KINDS + ("plnorm", "pscale") and op.kind not in KERNEL_KINDS.get(net.engine, ()):
            rule = "15b" if op.kind == "plnorm" else "16s" if op.kind == "pscale" else f"{16 + KINDS.index(op.kind)}{'b' if op.f.get('pairs') else ''}"
            from ..rules import by_code
            raise InputError(f"network kernel: op {op.name} ({op.kind}, attention's rule "
                             f"{by_code(rule)[0].name}) runs in the emu network mode only so far; the "
                             f"{net.engine} network kernel's C++ has no loop for it, so on csim, sim and pynq this "
                             f"network runs layer by layer")


def softmax_error_bound(n, bits):
    """Rule int_softmax's stated bound on ``|y 2**-Fp - softmax|`` per value (module docstring)."""
    fp = int(bits) - 1
    return 2.0 ** -fp + 2.0 ** -EXP_BITS + n * 2.0 ** (EXP_BITS - RECIP_BITS) + math.ldexp(1, -60)
