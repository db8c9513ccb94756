"""The network mode: a compiled ``shift_mac`` or ``sparse_cluster`` network as one integer
program, the specification of the network kernels (``hls/engines/<engine>/network.cpp.j2``,
one kernel start per batch). A ``bfp_systolic`` network's program is on (mantissa, exponent)
pairs instead of radix points (:mod:`hlsnn.engines.bfp_systolic.network.lower`, reached through
:func:`engine_rules`): :func:`lower` walks its layers as every engine's (:func:`walk`) with that
engine's steps plugged in, and :func:`quantize_input`, :func:`run_ints`, :func:`dequantize` and
:func:`finish` dispatch to its rules.

The rules below are the engines' common ones; an engine's weight values and output rule come
from its layer rules (:func:`engine_rules`: :class:`ShiftRules` for ``shift_mac``, as rule conv_output
states them, and :class:`hlsnn.engines.sparse_cluster.network.lower.SparseRules` for ``sparse_cluster``: int8
taps, ``t = acc + bias`` exact, ReLU, ``shift_round_sat`` to 8 bits; that module's docstring).

:func:`lower` turns a compiled model's layer program into a list of integer ops on on-chip
tensors; :func:`run_ints` runs them in numpy, integers only. The host does two things: it
quantizes the float input once, and dequantizes the logits (plus a final host layer such as
``Softmax``). Everything between runs on the fabric. The rules, every one an integer rule
(``q`` a tensor's integers, ``F`` its radix point: value ``q * 2**-F``):

Rule input_quantize: **Input.** ``q = to_fixed(x, F_x, B, signed, rounding)`` of :mod:`hlsnn.deploy.run.runner`
   (the deployment's ``rounding``), at the first engine layer's calibrated ``F_x``, on the host;
   a second layer reading the input at that ``F_x`` reads the same integers (at another: refused).
   input_view: a first conv reading the input through a view (``x.unsqueeze(1)`` of a flat input) makes
   that view the kernel's input shape (:mod:`hlsnn.engines.network.inview`).
Rule conv_output: **conv** (dense is a conv whose kernel covers its input map: a ``C x H x W`` map flattened
   in NCHW order, or ``K x 1 x 1``; the weight ``(Z, C*H*W)`` is ``(Z, C, H, W)``). With the weight
   codes' integer values ``c`` (:meth:`hlsnn.formats.shift.ShiftTensor.code_values`: shift-add
   multipliers ``+-(2**ea +- 2**eb)``), the input zero-padded by ``pads`` (top, left, bottom,
   right), ``groups`` as such, strides ``(sh, sw)``:
   ``acc[z, y, x] = sum over (ci, ky, kx) of q[g*Cg + ci, y*sh + ky - top, x*sw + kx - left] *
   c[z, ci, ky, kx]``, exact (int64; ``g = z // (Z / groups)``): a depthwise conv (``groups = C =
   Z``) reads one input channel per output. A compiled model stores a grouped ``shift_mac``
   layer's codes as the layer path runs it, ``gp`` groups packed into one block-diagonal GEMM
   (:func:`hlsnn.deploy.run.groups.gemm_weight`); :meth:`ShiftRules.weights` takes each output's own
   ``(C/groups, kh, kw)`` codes back (checked: the packed weight's other codes are zero).
   A dilated conv is this conv with its kernel's holes filled with zero codes
   (:func:`hlsnn.deploy.lower.dilate.dilate`: extent ``d*(k-1)+1``, pads unchanged; exact).
   Then the engine's output rule
   (:func:`hlsnn.engines.shift_mac.emulator.output_rule`, emulator rule 5: ``v = saturate_A(acc
   + bias)``, ReLU, ``shift_round_sat(v, shift, B)`` with the *config's* rounding), with
   ``bias = rint(b * 2**(F_in + F_w))`` (round half to even; an error unless ``|bias| <
   2**31``) and ``shift = F_in + F_w - F_out``, per output channel with per-channel weight
   scales. ``F_in`` is the input's radix. The output has radix ``F_out``. A ``Clip`` (ReLU6)
   whose only input is a conv's output, and that conv's only reader (or reads it through
   aliases and transposes, each tensor on the way read once), is that conv's output clamp:
   ``y = min(max(y, lo), hi)`` with ``lo = ceil(lo_f * 2**F_out)``, ``hi = floor(hi_f *
   2**F_out)`` within the activation range (no clamp: the range itself). The layer path's
   float ``np.clip`` gives the same values exactly when the bounds are values of the output's
   format or lie beyond its range (:func:`hlsnn.deploy.run.hostops.out_format`, the condition under
   which the deployment keeps the format); :func:`lower` refuses other bounds.
Rule max_pool: **maxpool**: the largest ``q`` of each window (padding never wins); ``ceil_mode`` is more
   padding at the bottom and right (the last windows' overhang). Radix and format unchanged.
   input_max_pool: a max pool of the float input that another layer reads too is this rule on the input's
   integers (:mod:`hlsnn.engines.network.pools.inputpool`).
   ``Flatten``, ``Reshape`` and ``Identity`` change no integer (a conv reads its own input's
   view, an ``Unsqueeze``'s ``C x 1 x W``; a dense layer the flattened map). Host ops on the float input
   before any engine layer reads it run on the host before rule input_quantize (:mod:`hlsnn.deploy.lower.netprefix`);
   a ``ReduceMean`` over a whole length or token axis is rule residual_add's global pool
   (:mod:`hlsnn.engines.network.pools.reduce`).
Rule residual_add: **add** (a residual ``Add``, with the ``Relu`` and ``GlobalAveragePool`` that follow it
   fused, and the requantization to the consuming engine layer's format): both inputs are
   integer tensors at radixes ``Fa``, ``Fb``; with ``Fm = max(Fa, Fb)``,
   ``s = (qa << (Fm - Fa)) + (qb << (Fm - Fb))``; ReLU: ``s = max(s, 0)``; the global pool
   sums ``s`` over the ``H*W = 2**p`` pixels of each channel (radix ``Fm + p``); then
   ``q = shift_round_sat(s, Fm [+ p] - F_x, B, rounding)`` with the deployment's rounding
   (signed activations). ``F_x`` is the consumer's calibrated input radix. A
   ``GlobalAveragePool`` of one tensor (a conv's output, as in DS-CNN and MobileNet) is this
   rule with no ``qb`` (``s = qa``, ``Fm = Fa``, no ReLU). chained_add: an operand that is itself an
   Add's sum (a ResNet's chained blocks) is that sum exactly, not requantized
   (:mod:`hlsnn.engines.network.joins.chain`).
Rule net_output: **Output.** The last engine layer's integers ``q`` are the logits; the host returns
   ``q * 2**-F_out`` and runs the host layers after it (a final ``Softmax``) in float64.

Rule residual_add is today's host glue, which works in float64 (:mod:`hlsnn.deploy.run.hostops`), written
as an integer rule. It gives the same bits because every float value there is exact: the sum
of two 8-bit values at radixes a few bits apart, a mean over a power-of-two pixel count, and
``to_fixed`` first writes the value exactly at radix ``F_x + 24`` (:func:`lower` checks
``Fm + p <= max(F_x + 24, 0)`` and refuses otherwise).

The other rules (data moves, tables, gates, pools, means, joins, attention) are written in their
modules of :mod:`hlsnn.engines.network`; each rule by name, with its op, function, kernel loops and
tests: :mod:`hlsnn.engines.network.rules` (``docs/network-rules.md``). :func:`lower` refuses any
host op without a rule between engine layers, a format other than ``twohot``/``pot`` on
``shift_mac`` or ``fixed``/``sparse`` on ``sparse_cluster``, dilated pools, unsigned activations,
and a ``Clip`` that is not a conv's output clamp (above). Those networks run layer by layer.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ...engine_registry import network_part
from ...errors import InputError
from ...engines.network import lintwo
from ...engines.network.joins import addclip
from ...engines.network.tokens import attention
from ...engines.network.program import ALIAS_OPS, NetProgram, Op, _chw, _why, materialized, pool_attrs_2d
from ...primitives import shift_round_sat
from .dilate import dilate
from ..run.hostops import alias_shape
from .netafter import host_stubs
from .netcheck import check_ops
from .poolfields import global_max_fields, maxpool_fields


def lower(program, arrays):
    """The :class:`NetProgram` of a compiled model's ``program`` and ``arrays`` (as
    :func:`hlsnn.network.artifact.read` returns them), or :class:`InputError` naming the
    layer the network kernel cannot run and why (module docstring). One walk of the layers for
    every engine (:func:`walk`), with the engine's steps plugged in: :class:`IntegerSteps` (radix
    points, rules input_quantize, conv_output, max_pool, residual_add and net_output) unless its layer rules bring their own (``bfp_systolic``'s pairs)."""
    accels = program["accels"]
    if len(accels) != 1:
        raise InputError(f"network kernel: {program['name']} uses {len(accels)} accelerators; the network kernel "
                         f"runs a network on one")
    (acc_name, acc), = accels.items()
    rules = engine_rules(acc["engine"], acc_name)
    for j in program["layers"]:
        if j.get("terms", 1) not in getattr(rules, "terms", (1,)):      # hlsnn.deploy.quantize.twoterm rule 3
            raise InputError(f"network kernel: layer {j['name']} has {j['terms']} shift codes per weight "
                             f"(weight_terms: {j['terms']}), which the {acc['engine']} network kernel does not sum; "
                             f"it runs layer by layer (weight_terms: 1 runs in the network mode)")
        if j.get("in_terms", 1) != 1 and acc["engine"] != "sparse_cluster":  # hlsnn.deploy.quantize.twoin (sparse: two_term_input)
            raise InputError(f"network kernel: layer {j['name']} takes its input in {j['in_terms']} int8 terms "
                             f"(input_terms: {j['in_terms']}), which the network kernel does not sum; it runs "
                             f"layer by layer (input_terms: 1 runs in the network mode)")
    steps = getattr(rules, "steps", IntegerSteps)(program, arrays, rules, acc_name)
    from ...engines.network.joins.catsplit import split           # a concat of k > 2 parts: k - 1 of two (concat_chain)
    return check_ops(split(walk(program, arrays, steps)))


def walk(program, arrays, steps):
    """The walk of a compiled model's layers into a :class:`NetProgram`: the host ops every
    engine's network mode shares (aliases, MaxPool, a residual Add with the Relu and global pool
    fused after it, the data moves of :mod:`hlsnn.engines.network.move`) here, and the steps that
    differ by engine from ``steps``: its own host ops first (``host``), the first read of the
    float input (``read_input``), a pending Add materialized for a consumer (``materialize_add``),
    an engine layer's op (``conv``) and the program (``finish``). A tensor's state:
    ``("input",)`` the float input, ``("q", F)`` integers at radix ``F`` (``F`` None: pairs of
    their own exponents), ``("add", {...})`` a pending add, ``("cat", {...})`` a pending concat."""
    inp = program["input"]
    w = SimpleNamespace(state={inp["name"]: ("input",)}, shapes={inp["name"]: tuple(inp["shape"])}, aliases={},
                        ops=[], made_by={}, out_name=program["output"]["engine_tensor"], kernel_in=inp["name"],
                        layers=program["layers"])
    from . import netprefix as prefix
    state, shapes, aliases, ops, out_name = w.state, w.shapes, w.aliases, w.ops, w.out_name
    after = set(program["output"].get("host_after", []))       # a chain of them too (Reshape, Unsqueeze)
    for j in program["layers"]:
        if j["kind"] == "host":
            if "gate_in" in j and j["op"] != "Mul":               # rule gate_in_sum: a sum or pool of a gate's codes
                from ...engines.network.gatein import lower_pending
                j = lower_pending(j, w, steps, _why, Op)
            src = j["inputs"][0]
            st = state.get(src)
            op = j["op"]
            if j["name"] in after:
                continue                                          # host layers after the logits
            if st is None:
                raise _why(j, f"input {src} is not computed on the fabric")
            if j["output"] == program["output"]["name"] or src == out_name:
                continue                                          # host layers after the logits
            from ...engines.network.pools import inputpool         # a max pool of the float input read twice: input_max_pool
            if inputpool.lower_host(j, program, w, steps, _why, Op, maxpool_fields):
                continue
            if prefix.take(j, w, arrays, _why):                   # on the float input, before the kernel
                continue
            if attention.lower_host(j, program, w, steps, _why, Op):   # attention's rules attn_gather, add_const, act_matmul, int_softmax, layer_norm_codes
                continue
            if steps.host(j, st, w):                              # the engine's own
                continue
            if op in ALIAS_OPS:
                state[j["output"]], shapes[j["output"]] = st, alias_shape(j, shapes[src])
                if st[0] != "add":
                    aliases[j["output"]] = aliases.get(src, src)
                continue
            from ...engines.network.pools.gatepool import lower as gate_pool     # a max pool of a gate (SiLU): gate_pool
            if gate_pool(j, program, w, steps, _why, Op, lambda jj, sh: maxpool_fields(jj, sh)
                         if jj["op"] == "MaxPool" else global_max_fields(sh)):
                continue
            if op == "GlobalMaxPool" and st[0] == "q" or op in ("MaxPool", "GlobalMaxPool") and st[0] == "avgp":
                f = maxpool_fields(j, shapes[src]) if op == "MaxPool" else global_max_fields(shapes[src])
                if st[0] == "q":
                    ops.append(Op("maxpool", j["name"], [src], j["output"], f))
                    state[j["output"]] = st
                else:       # a max of a pending mean: to_fixed is monotone, the max of its quantized values (linpool)
                    state[j["output"]] = ("avgp", dict(st[1], then=st[1].get("then", []) + [dict(f, name=j["name"])]))
                shapes[j["output"]] = (f["c"], f["oh"]) if len(shapes[src]) == 2 else (f["c"], f["oh"], f["ow"])
                continue
            if op == "MaxPool" and st[0] == "q":
                f = maxpool_fields(j, shapes[src])
                ops.append(Op("maxpool", j["name"], [src], j["output"], f))
                state[j["output"]] = st
                shapes[j["output"]] = (f["c"], f["oh"]) if len(shapes[src]) == 2 else (f["c"], f["oh"], f["ow"])
                continue
            if op == "Add":
                ins = list(j["inputs"])
                sts = [state.get(i) for i in ins]
                for k, s in enumerate(sts):       # a ResNet's chained blocks: an operand is a pending Add's sum
                    if s is not None and s[0] == "add" and s[1]["p"] is None \
                            and _chw(shapes[ins[0]]) == _chw(shapes[ins[1]]):
                        from ...engines.network.joins.chain import materialize_sum
                        ins[k] = materialize_sum(steps, j, s[1], w, shapes[ins[k]])
                        sts[k] = state[ins[k]]
                if any(s is None or s[0] != "q" for s in sts) or \
                        _chw(shapes[j["inputs"][0]]) != _chw(shapes[j["inputs"][1]]):
                    raise _why(j, "an Add of two fabric tensors of one shape is supported")
                state[j["output"]] = ("add", dict(ins=ins, fa=sts[0][1], fb=sts[1][1], relu=False, p=None,
                                                  name=j["name"]))
                shapes[j["output"]] = shapes[j["inputs"][0]]
                continue
            if op == "Relu" and st[0] == "add" and st[1]["p"] is None:
                state[j["output"]], shapes[j["output"]] = ("add", dict(st[1], relu=True)), shapes[src]
                continue
            from ...engines.network import gate as netgate, move as netmove, tablein
            from ...engines.network.joins import addcat, addmove, catinput, catmix, gatecat, maxlate
            from ...engines.network.pools import linpool, reduce
            from ...engines.network.tokens import layernorm, pick, transpose
            if layernorm.lower_host(j, program, w, steps, _why) or addclip.lower_host(j, st, w, steps, _why):  # 15, add_clip
                continue
            op = linpool.global_op(j, st, shapes[src])                    # a window over the map of an Add: avg_pool_global
            if op == "GlobalAveragePool" and (st[0] == "q" or st[0] == "add" and st[1]["p"] is None):
                c, h, w_ = _chw(shapes[src])
                n = h * w_
                a = st[1] if st[0] == "add" else dict(ins=[steps.pool_source(src, w)], fa=st[1], fb=st[1],
                                                      relu=False, name=j["name"])
                from ...engines.network.pools.mean import count_fields
                state[j["output"]] = ("add", dict(a, **count_fields(n)))   # p, or rule mean_divide's division
                shapes[j["output"]] = (c, 1, 1)
                continue
            if catmix.lower_host(j, op, w, steps, _why, Op):                # a pool or gate of a pending concat: mixed_concat
                continue
            if reduce.lower_host(j, program, w, steps, _why):               # ReduceMean as a global pool
                continue
            if addmove.lower_host(j, w, steps, _why, Op):              # a move or resize of a pending Add: add_upsample, add_resize_pairs
                continue
            if gatecat.lower_host(j, program, w, steps, _why, Op) or \
                    addcat.lower_host(j, program, w, steps, _why, Op):     # a Concat of a pending gate, Add: gate_concat, add_concat
                continue
            if pick.lower_host(j, program, w, steps, _why, Op):        # x[:, :, k]: a one-step reflect crop (step_pick)
                continue
            if netmove.lower_host(j, state, shapes, ops, _why, Op, catinput.part_state(j, w, steps, _why)):  # 6-8i
                continue
            if transpose.lower_host(j, state, shapes, aliases, w.kernel_in, ops, _why, Op,   # RowsToMap, MapToRows
                                    lambda s: s is not None and s[0] in ("q", "input")):
                continue
            if tablein.lower_host(j, w, steps, _why, Op):                 # a table of a pending Add, gate, pool
                continue
            if op == "Mul" and "gate_in" in j:                         # a gate of a gate's product (rule gate_in)
                from ...engines.network.gatein import lower_operands
                j = lower_operands(j, w, steps, _why, Op)
            if netgate.lower_host(j, state, shapes, ops, steps.bits, steps.rounding, _why, Op):   # tables, gate Mul
                continue
            if linpool.lower_host(j, state, shapes, ops, steps.bits, _why, Op):      # AveragePool, bilinear x2
                continue
            if maxlate.lower_host(j, program, w, steps, _why, Op, (maxpool_fields, global_max_fields)):  # Add, gate
                continue
            raise _why(j, "no integer rule for this host op here")
        # an engine layer
        if j["engine"] != steps.engine or j["format"] not in steps.formats:
            raise _why(j, f"format {j['format']} on {j['engine']}")
        src = j["inputs"][0]
        st = state.get(src)
        if st is None:
            raise _why(j, f"input {src} is not computed on the fabric")
        lintwo.check_input(j, st, steps, _why)        # input_terms: 2 of a resized wide sum (rule two_term_input)
        if st[0] == "input":
            st = steps.read_input(j, src, st, w)
        elif st[0] in ("cat", "gate", "avgp", "add", "addmv", "lnorm"):
            # a pending op (a Concat of parts at different radix points, a channel gate, a pool,
            # an Add) materialized once for its consumers (an integer one requantized to their F_x)
            if st[0] == "add":                      # input_terms: 2, rule two_term_input (engines.network.lintwo)
                base = lintwo.materialize_add(j, st[1], w, steps, _why, Op) if lintwo.takes(j) else \
                    steps.materialize_add(j, st[1], w)
            elif st[0] == "addmv":                  # an Upsample of a pending Add (rule add_upsample)
                from ...engines.network.joins import addmove
                base = addmove.materialize(j, st, w, steps, _why, Op)
            else:
                base = st[1]["name"] + "_q"
                if not materialized(j, st[1]["name"], state, shapes, _why):
                    from ...engines.network import gate as netgate, move as netmove
                    from ...engines.network.tokens import layernorm
                    from ...engines.network.pools import linpool
                    make = {"cat": netmove.materialize, "gate": netgate.materialize,
                            "avgp": linpool.materialize, "lnorm": layernorm.materialize}[st[0]]
                    make(j, src, st, state, shapes, ops, aliases, steps.rounding, _why, Op)
            aliases[src] = base
            src = base
            st = state[base]
        own = shapes.get(j["inputs"][0], ())     # a conv reads its own view (an Unsqueeze's C x 1 x W), a dense
        c, h, w_ = _chw(own if j["kind"] == "conv" and len(own) == 3 else shapes[aliases.get(src, src)]) # layer the map
        from ...engines.network import inview          # rule input_view: the input as its first conv's view
        if lintwo.takes(j):                           # the hi channels, bias and shift 7 bits finer (two_term_input)
            (c, h, w_), st = lintwo.conv_input(src, st, w)
        elif j["kind"] == "conv" and len(own) == 3 and _chw(shapes[aliases.get(src, src)])[0] != c \
                and not inview.take(j, src, own, w, program):
            raise _why(j, f"a conv reading its input as {c} channel(s) where the kernel's buffer holds "
                          f"{_chw(shapes[aliases.get(src, src)])[0]} (a flat vector as one channel: x.unsqueeze(1) "
                          "into a Conv1d)")
        if j["kind"] == "dense":                 # a conv whose kernel covers the (flattened) map
            geom = dict(kh=h, kw=w_, strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=1)
        else:
            geom = j["geom"]
        conv, state[j["output"]] = steps.conv(j, src, st, (c, h, w_), geom, w)
        lintwo.mark(conv, j, src, w)
        ops.append(conv)
        shapes[j["output"]] = (conv.f["z"], conv.f["oh"], conv.f["ow"]) if j["kind"] == "conv" else (conv.f["z"],)
        w.made_by[j["output"]] = conv
    host_after = [j for j in program["layers"] if j["kind"] == "host" and j["name"] in
                  program["output"].get("host_after", [])]
    from .netafter import check as check_after       # what they read: the output's chain or the float input
    check_after(host_after, program, _why)
    from ...engines.network import inview
    return inview.attach(prefix.attach(steps.finish(program, host_after, w), w, program), w)


class IntegerSteps:
    """The steps of :func:`walk` for the engines whose activations are integers at a radix point
    (``shift_mac``, ``sparse_cluster``: rules input_quantize, conv_output, max_pool, residual_add and net_output above), their weights and output rule from the
    engine's layer ``rules``."""

    def __init__(self, program, arrays, rules, acc_name):
        acc = program["accels"][acc_name]
        self.rules, self.engine, self.formats, self.arrays = rules, rules.engine, rules.formats, arrays
        self.acc_name = acc_name
        self.p = acc["config"][acc["engine"]]
        self.bits, self.rounding = rules.activations(self.p, acc_name), program["rounding"]
        self.quant = None
        self.readers = {}                                  # tensor -> how many layers read it
        self.moved_from = {}                               # an alias's or transpose's output -> its input
        for j in program["layers"]:
            for t in j["inputs"]:
                self.readers[t] = self.readers.get(t, 0) + 1
            if j["kind"] == "host" and j["op"] in ALIAS_OPS + ("RowsToMap", "MapToRows"):
                self.moved_from[j["output"]] = j["inputs"][0]

    def pool_source(self, src, w):
        """The tensor a global pool of one tensor reads."""
        return src

    def host(self, j, st, w):
        """A ``Clip`` in the output stage of the conv whose only reader it is (rule conv_output)."""
        if j["op"] != "Clip" or st[0] != "q":
            return False
        src = j["inputs"][0]
        conv, t = None, src
        while self.readers.get(t, 0) == 1 and t != w.out_name:    # back through aliases and transposes,
            conv = w.made_by.get(t)                               # each read once, to the conv
            if conv is not None or t not in self.moved_from:
                break
            t = self.moved_from[t]
        if conv is None:
            raise _why(j, "a Clip runs in the output stage of the conv whose only reader it is")
        conv.f["clip"] = _clamp(j, st[1], self.bits, conv.f.get("clip"), lambda what: _why(j, what))
        w.state[j["output"]], w.shapes[j["output"]] = st, w.shapes[src]
        w.aliases[j["output"]] = w.aliases.get(src, src)
        return True

    def read_input(self, j, src, st, w):
        """Rule input_quantize: the input quantized at the first engine layer's ``F_x`` (a second reader at that ``F_x``, too)."""
        if self.quant is not None and j["f_x"] != self.quant:
            raise _why(j, f"a second layer reads the float input at radix {j['f_x']}, the first at {self.quant}")
        self.quant = j["f_x"]
        w.state[src] = ("q", j["f_x"])
        return w.state[src]

    def materialize_add(self, j, a, w):
        """Rule residual_add's add op for the consumer ``j`` (requantized to its ``F_x``; once per Add): its
        tensor ``NAME_q``."""
        base = a["name"] + "_q"
        if materialized(j, a["name"], w.state, w.shapes, _why):
            return base
        f_x = j["f_x"]
        fm = max(a["fa"], a["fb"]) + (a["p"] or 0)
        n, div = a.get("n") or 1, None
        if n & (n - 1) and f_x is not None:             # rule mean_divide: a mean over a count not a power of two
            from ...engines.network.pools import mean
            amax = n << (self.bits - 1)
            div = mean.plan(n, fm, f_x, sum(amax << (fm - f) for f in (a["fa"], a["fb"])[:2 if a.get("split") else
                                                                                        len(a["ins"])]))
            if isinstance(div, str):
                raise _why(j, div)
            div, shift = div
        elif f_x is None or fm > max(f_x + 24, 0):
            raise _why(j, f"the requantization from radix {fm} to {f_x} is not exact in today's host rule")
        else:
            shift = fm - f_x
        c = w.shapes[a["ins"][0]][0]
        hw = int(np.prod(w.shapes[a["ins"][0]][1:]))
        w.ops.append(Op("add", a["name"], list(a["ins"]), base,
                        dict(c=c, hw=hw, sa=fm - (a["p"] or 0) - a["fa"], sb=fm - (a["p"] or 0) - a["fb"],
                             relu=a["relu"], gap=a["p"] is not None, shift=shift, rounding=self.rounding,
                             single=len(a["ins"]) == 1, **({"div": div} if div else {}), **addclip.fields(
                                 j, a, self.bits, _why, _clamp), **({"split": a["split"]} if a.get("split") else {}))))
        w.shapes[base] = (c, 1, 1) if a["p"] is not None else w.shapes[a["ins"][0]]
        w.state[base] = ("q", f_x)
        return base

    def conv(self, j, src, st, chw, geom, w):
        """Rule conv_output: the conv op of engine layer ``j`` and its output's state."""
        rules, arrays, bits = self.rules, self.arrays, self.bits
        f_in = st[1]
        c, h, w_ = chw
        codes, extra = rules.weights(j, arrays, (c, h, w_), lambda what: _why(j, what))
        codes, extra = dilate(codes, extra, *geom["dilations"])     # the holes as zero weights
        z, cg, kh, kw = codes.shape
        g = geom["group"]
        if cg * g != c:
            raise _why(j, f"weights {codes.shape} for an input of {c} channels")
        f_w = np.broadcast_to(np.asarray(j["f_w"], np.int64).reshape(-1), (z,))
        f_acc = f_in + f_w
        bias = np.rint(np.ldexp(arrays[f"{j['name']}/b"], f_acc))
        if np.abs(bias).max(initial=0) >= 1 << rules.bias_bits:
            raise _why(j, f"the bias does not fit (-2^{rules.bias_bits}, 2^{rules.bias_bits}) at radix "
                          f"{f_acc.tolist()}")
        sh, sw = geom["strides"]
        pads = tuple(geom["pads"])
        oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w_ + pads[1] + pads[3] - kw) // sw + 1
        return Op("conv", j["name"], [src], j["output"],
                  dict(c=c, h=h, w=w_, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pads, group=g,
                       clip=(-(1 << (bits - 1)), (1 << (bits - 1)) - 1),       # a Clip after it narrows it
                       codes=codes.astype(np.int64), bias=bias.astype(np.int64), shift=f_acc - j["f_out"],
                       relu=bool(j["relu"]), dense=j["kind"] == "dense", engine=rules.engine, **extra)), \
            ("q", j["f_out"])

    def finish(self, program, host_after, w):
        """The program: rule input_quantize's input (checked against the compiled quantization), rule net_output's output."""
        out_name, state = w.out_name, w.state
        if out_name not in state or state[out_name][0] != "q":
            raise InputError(f"network kernel: the output {out_name} is not an engine layer's integers")
        inp, quant, bits = program["input"], self.quant, self.bits
        q = inp["quantization"]
        if q.get("type") != "fixed" or quant != q["frac_bits"] or q["bits"] != bits or not q["signed"]:
            raise InputError(f"network kernel: input quantization {q} does not match the first layer's format")
        return NetProgram(program["name"], w.ops, w.shapes, dict(name=inp["name"], shape=tuple(inp["shape"]),
                                                                 f=quant, bits=bits, signed=True,
                                                                 rounding=self.rounding),
                          dict(tensor=out_name, f=state[out_name][1], name=program["output"]["name"],
                               shape=w.shapes[out_name]),
                          host_after, dict(self.p), self.acc_name, w.aliases,
                          self.rules.engine)


def _clamp(j, f, bits, prev, why):
    """The integer clamp ``(lo, hi)`` of a ``Clip`` host layer ``j`` on signed ``bits``-bit
    integers at radix ``f`` (rule conv_output's output clamp), within ``prev`` (an earlier clamp of the
    same output); ``why`` the error when a bound is not a value of that format (the Clip
    would then change the format: :func:`hlsnn.deploy.run.hostops.out_format`)."""
    from types import SimpleNamespace
    from ..run import hostops
    a = j["attrs"]
    if hostops.out_format(SimpleNamespace(op="Clip", attrs=a), [(f, bits, True)]) is None:
        raise why(f"bounds {a.get('lo')}, {a.get('hi')} are not values of the input's format (radix {f})")
    lo, hi = prev or (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    if a.get("lo") is not None:
        lo = max(lo, min(int(math.ceil(math.ldexp(a["lo"], f))), hi))
    if a.get("hi") is not None:
        hi = min(hi, max(int(math.floor(math.ldexp(a["hi"], f))), lo))
    return lo, hi


def engine_rules(engine, acc_name=None):
    """The layer rules of ``engine``, its network part's ``RULES``
    (``engines/<engine>/network/lower.py``: ``shift_mac``'s
    :class:`~hlsnn.engines.shift_mac.network.lower.ShiftRules`, ``sparse_cluster``'s
    :class:`~hlsnn.engines.sparse_cluster.network.lower.SparseRules`, ``bfp_systolic``'s
    :class:`~hlsnn.engines.bfp_systolic.network.lower.BfpRules`, whose ``steps`` take BFP pairs
    between ops instead of radix points into :func:`walk`); :class:`InputError` for an engine
    without."""
    try:
        return network_part(engine, "lower").RULES
    except (InputError, ModuleNotFoundError):
        raise InputError(f"network kernel: engine {engine}{' of ' + acc_name if acc_name else ''}: only shift_mac, "
                         f"sparse_cluster and bfp_systolic have a network mode so far") from None


def quantize_input(net, x):
    """Rule input_quantize: the float batch ``x`` as the input's integers (int64): exactly
    :func:`hlsnn.deploy.quantize.quant.to_fixed` (the value written at radix ``g = max(F + 24, 0)``
    with ``rint``, then rounded to radix ``F`` and saturated), else by ``to_fixed`` itself.

    The fast path, for signed inputs rounded to nearest (even or away), in float64: ``w =
    rint(x * 2**g)`` is ``to_fixed``'s wide integer while ``|w| < 2**52`` (checked); ``y = w *
    2**-(g - F)`` is exact (a power-of-two scale of an integer, far from the subnormals), and
    clipped to ``[lo - 1, hi + 1]`` it needs at most ``B + 1 + (g - F)`` significant bits, so
    ``y +- 0.5`` is exact while that is at most 52 (checked): rounding half away from zero is
    ``trunc(y + copysign(0.5, y))``, half to even is ``rint(y)``; then the clip to ``[lo,
    hi]``. Every step is exact, so the bits are ``to_fixed``'s (tested).

    A ``bfp_systolic`` network: :func:`hlsnn.engines.bfp_systolic.network.lower.quantize_input` (its rule bfp_input)."""
    from . import netprefix as prefix
    x = prefix.run(net, x)                     # host ops on the float input before the kernel
    if net.engine == "bfp_systolic":
        bfp_input = network_part(net.engine, "lower").quantize_input
        return bfp_input(net, x)
    from ..quantize.quant import to_fixed
    i = net.input
    f, bits, rounding = i["f"], i["bits"], i["rounding"]
    s = (g := max(f + 24, 0)) - f
    v = np.multiply(x, 2.0 ** g, dtype=np.float64)         # exact: a power of two
    np.rint(v, out=v)
    lo, hi = i.get("clip") or (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)     # the input Quant's clamp (netprefix)
    if (not i["signed"] or rounding not in ("nearest_away", "nearest_even") or bits + 1 + s > 52
            or not (np.abs(v).max(initial=0.0) < 2.0 ** 52)):
        q = to_fixed(np.asarray(x, np.float64), f, bits, i["signed"], rounding)
        return np.clip(q, lo, hi) if i.get("clip") else q
    np.multiply(v, 2.0 ** -s, out=v)
    np.clip(v, lo - 1, hi + 1, out=v)
    if rounding == "nearest_away":
        v += np.copysign(0.5, v)
        np.trunc(v, out=v)
    else:
        np.rint(v, out=v)
    np.clip(v, lo, hi, out=v)
    return v.astype(np.int64)


def _pad(x, pads, value):
    t, l, b, r = pads
    return np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def conv_acc(x, f):
    """Rule conv_output's exact accumulators of a batch ``x`` (B, C, H, W) of integers: (B, OH, OW, Z)
    int64."""
    xp = _pad(np.asarray(x, np.int64), f["pads"], 0)
    z, g = f["z"], f["group"]
    cg, zg = f["c"] // g, z // g
    win = np.lib.stride_tricks.sliding_window_view(xp, (f["kh"], f["kw"]), axis=(2, 3))
    win = win[:, :, ::f["sh"], ::f["sw"]][:, :, :f["oh"], :f["ow"]]          # (B, C, OH, OW, kh, kw)
    acc = np.empty((x.shape[0], f["oh"], f["ow"], z), np.int64)
    # |x| <= 2**(B-1), |c| < 2**(ea+1): the sums are exact in float64 below 2**53 (else int64)
    bound = int(np.abs(x).max(initial=0)) * int(np.abs(f["codes"]).max(initial=0)) * f["kh"] * f["kw"] * cg
    dt = np.float64 if bound < 1 << 53 else np.int64
    for j in range(g):
        rows = win[:, j * cg:(j + 1) * cg].transpose(0, 2, 3, 1, 4, 5).reshape(-1, cg * f["kh"] * f["kw"])
        wj = f["codes"][j * zg:(j + 1) * zg].reshape(zg, -1)
        acc[..., j * zg:(j + 1) * zg] = (rows.astype(dt) @ wj.T.astype(dt)).astype(np.int64).reshape(
            x.shape[0], f["oh"], f["ow"], zg)
    return acc


def conv_ints(x, f, p):
    """Rule conv_output on a batch ``x`` (B, C, H, W) of integers: (B, Z, OH, OW) int64 (rule two_term_input: ``lintwo``)."""
    a2 = (conv_acc(x, f) if f.get("terms", 1) == 1 else lintwo.conv_acc(x, f, conv_acc)).reshape(-1, f["z"])
    y = engine_rules(f.get("engine", "shift_mac")).output(p, a2, f["bias"], f["shift"], f["relu"])
    if f.get("clip") is not None:
        y = np.clip(y, *f["clip"])
    return y.reshape(x.shape[0], f["oh"], f["ow"], f["z"]).transpose(0, 3, 1, 2)


def maxpool_ints(x, f):
    """Rule max_pool on (B, C, H, W) integers."""
    lo = np.iinfo(np.int64).min
    xp = _pad(np.asarray(x, np.int64), f["pads"], lo)
    win = np.lib.stride_tricks.sliding_window_view(xp, (f["kh"], f["kw"]), axis=(2, 3))
    return win[:, :, ::f["sh"], ::f["sw"]][:, :, :f["oh"], :f["ow"]].max(axis=(-2, -1))


def add_ints(a, b, f, bits):
    """Rule residual_add on (B, C, HW) integers: (B, C, HW), or (B, C, 1) with the global pool; ``b``
    None for the global pool of one tensor."""
    if "split" in f:                     # rule mixed_concat: a pre-shift per channel range (engines.network.joins.catmix)
        from ...engines.network.joins.catmix import shifts_by_channel
        s = np.asarray(a, np.int64) << shifts_by_channel(f, np.shape(a)[1])[None, :, None]
    else:
        s = np.asarray(a, np.int64) << f["sa"]
    if b is not None:
        s = s + (np.asarray(b, np.int64) << f["sb"])
    if f["relu"]:
        s = np.maximum(s, 0)
    if f["gap"]:
        s = s.sum(axis=2, keepdims=True)
    if "div" in f:                       # rule mean_divide
        from ...engines.network.pools.mean import divide
        s = divide(s, f["div"])
    if f.get("terms", 1) == 2:          # rule two_term_input: hi and lo of the exact sum (engines.network.lintwo)
        return lintwo.terms_map(f, s, bits)
    y, _ = shift_round_sat(s, f["shift"], bits, f["rounding"])
    return y if f.get("clip") is None else np.clip(y, *f["clip"])    # rule add_clip (engines.network.joins.addclip)


#: the op kinds :func:`run_move` runs: data moves (rules nearest_upsample, zero_stuff, channel_concat, edge_pad), a transpose, an average pool
#: (rules avg_pool, bilinear_x2), a linear resize of a wide sum (rule linear_wide), attention's rules attn_gather, add_const, act_matmul and int_softmax
MOVE_KINDS = ("upsample", "zerostuff", "pad", "concat", "transpose", "avgpool", "linwide") + attention.KINDS


def run_move(net, op, get, b):
    """An op of :data:`MOVE_KINDS` on a batch of ``b`` images: its output integers (int64).
    ``get(tensor)`` returns a tensor's integers, images first, each image's values in the
    tensor's own (C, H, W) order (in any shape: the rules reshape them). The compiled path
    (:mod:`hlsnn.deploy.run.fast`) runs these ops through this function too."""
    if op.kind == "transpose":
        from ...engines.network.tokens.transpose import run
        return run(op, get, b)
    if op.kind in attention.KINDS:                 # attention's rules attn_gather, add_const, act_matmul and int_softmax
        return attention.run(op, get, b, net.input["bits"])
    if op.kind == "avgpool":
        from ...engines.network.pools import linpool
        return linpool.run(op, get, b, net.input["bits"])
    if op.kind == "linwide":                     # rule linear_wide: a linear resize of an Add's exact sum
        from ...engines.network.joins import linwide
        return linwide.run(op, get, b, net.input["bits"])
    from ...engines.network.move import run
    return run(op, get, b, net.input["bits"])


def run_ints(net, xq, *, keep=False):
    """Run the ops on a batch of input integers ``xq`` (B, ...): the output tensor's integers
    (B, ...) int64; with ``keep``, ``(out, {tensor: integers})``. A ``bfp_systolic`` network
    runs :func:`hlsnn.engines.bfp_systolic.network.lower.run` on ``(mantissas, exponents)`` pairs instead."""
    if net.engine == "bfp_systolic":
        run = network_part(net.engine, "lower").run
        return run(net, xq, keep=keep)
    b = xq.shape[0]
    env = {net.input["name"]: np.asarray(xq, np.int64)}

    def get(name):
        name = net.aliases.get(name, name)
        return env[name]
    for op in net.ops:
        f = op.f
        x = get(op.ins[0])
        if op.kind == "conv":
            y = conv_ints(x.reshape(b, f["c"] + f.get("lo", 0), f["h"], f["w"]), f, net.params)  # lo: two_term_input
            env[op.out] = y.reshape(b, -1) if f["dense"] else y
        elif op.kind == "maxpool":
            env[op.out] = maxpool_ints(x.reshape(b, f["c"], f["h"], f["w"]), f)
        elif op.kind in MOVE_KINDS:
            env[op.out] = run_move(net, op, get, b)
        elif op.kind in ("lut", "gate"):
            from ...engines.network import gate as netgate
            env[op.out] = netgate.run(op, get, b, net.input["bits"])
        elif op.kind == "lnorm":                  # rule layer_norm (hlsnn.engines.network.tokens.layernorm)
            from ...engines.network.tokens import layernorm
            env[op.out] = layernorm.run(op, get, b, net.input["bits"]).reshape((b,) + net.shapes[op.out])
        else:
            y = add_ints(x.reshape(b, f["c"], f["hw"]),
                         get(op.ins[1]).reshape(b, f["c"], f["hw"]) if len(op.ins) > 1 else None, f,
                         f.get("out_bits") or net.input["bits"])          # out_bits: a chained Add's exact sum
            env[op.out] = y.reshape((b,) + net.shapes[op.out])
    out = get(net.output["tensor"]).reshape((b,) + tuple(net.output["shape"]))
    return (out, env) if keep else out


def dequantize(net, q):
    """The output integers as float64: ``q * 2**-F_out``, or a ``bfp_systolic`` network's
    ``(m, e)`` pairs as ``m * 2**e`` (exact)."""
    if net.engine == "bfp_systolic":
        pairs = network_part(net.engine, "lower").dequantize
        return pairs(q)
    return np.ldexp(np.asarray(q, np.float64), -net.output["f"])


def finish(net, q, values=None, x=None):
    """Rule net_output: the network's float output from the output integers ``q``. ``values``: their
    dequantized values when the caller has them already (the C host path dequantizes in C,
    :mod:`hlsnn.network.nethost`, the same bits as :func:`dequantize`); then ``q`` is not read.
    ``x``: the float input, for a host op after the logits that reads it (``x + net(x)``,
    :mod:`hlsnn.deploy.lower.netafter`)."""
    y = dequantize(net, q) if values is None else values
    for run in host_stubs(net):       # the host layers after the logits, made once per program (netafter)
        y = run(y, x)
    return y
