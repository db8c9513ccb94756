"""The last check of a lowered network program before C: :func:`check_ops`, the
step :func:`hlsnn.deploy.lower.program.lower` ends with (importable from there as before), behind
:mod:`hlsnn.network.schema`. Each op module of :mod:`hlsnn.engines.network` checks its own
op kinds (their ``check_op``); this module checks the conv, pool and add fields every engine
shares and dispatches the rest."""
from __future__ import annotations

import numpy as np

from ...errors import InputError


def check_ops(net):
    """``net`` if every op's fields are values the network kernels and the C helpers
    (``native/netint.c``) handle, else :class:`InputError` naming the op: positive sizes and
    kernels, strides >= 1, pads >= 0, output maps as the fields' own arithmetic gives them, weight
    tables of the shape the op indexes, and shifts C defines (operand shifts 0..31, output shifts
    within +-62)."""
    def bad(op, what):
        return InputError(f"network program: op {op.name} ({op.kind}): {what}; the compiled model is damaged, "
                          f"compile it again")

    def ints(op, f, keys, lo, hi):
        for k in keys:
            v = f.get(k)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
                raise bad(op, f"{k} = {v!r}, not an integer in {lo}..{hi}")

    for op in net.ops:
        f = op.f
        if op.kind in ("conv", "maxpool", "avgpool"):
            ints(op, f, ("c", "h", "w", "oh", "ow", "kh", "kw"), 1, 1 << 16)
            ints(op, f, ("sh", "sw"), 1, 64)
            pads = tuple(f.get("pads", ()))
            if len(pads) != 4 or any(not isinstance(v, (int, np.integer)) or not 0 <= v <= 64 for v in pads):
                raise bad(op, f"pads {pads}: four integers in 0..64")
            oh = (f["h"] + pads[0] + pads[2] - f["kh"]) // f["sh"] + 1
            ow = (f["w"] + pads[1] + pads[3] - f["kw"]) // f["sw"] + 1
            if (oh, ow) != (f["oh"], f["ow"]):
                raise bad(op, f"an output of {f['oh']}x{f['ow']}, but its input, kernel, pads and strides give "
                              f"{oh}x{ow}")
        if op.kind == "conv":
            ints(op, f, ("z", "group"), 1, 1 << 16)
            g = f["group"]
            if f["c"] % g or f["z"] % g:
                raise bad(op, f"{g} groups for {f['c']} input and {f['z']} output channels")
            codes = f.get("codes")
            if codes is not None and tuple(np.shape(codes)) != (f["z"], f["c"] // g, f["kh"], f["kw"]):
                raise bad(op, f"weights of shape {np.shape(codes)}, not {(f['z'], f['c'] // g, f['kh'], f['kw'])}")
            from ...engines.network.lintwo import check_op as two       # rule two_term_input's fields
            two(op, ints, bad)
            if "bias" in f and np.shape(f["bias"]) != (f["z"],):
                raise bad(op, f"{np.size(f['bias'])} biases for {f['z']} outputs")
            if "shift" in f:
                sh = np.asarray(f["shift"]).reshape(-1)
                if sh.size not in (1, f["z"]) or (sh.size and np.abs(sh).max() > 62):
                    raise bad(op, f"output shifts {sh.min(initial=0)}..{sh.max(initial=0)} (within +-62, one or "
                                  f"one per output)")
        elif op.kind in ("upsample", "zerostuff", "pad", "concat"):
            from ...engines.network.move import check_op
            check_op(op, ints, bad)
        elif op.kind == "transpose":
            from ...engines.network.tokens.transpose import check_op
            check_op(op, ints, bad)
        elif op.kind == "avgpool":
            from ...engines.network.pools.linpool import check_op
            check_op(op, ints, bad)
        elif op.kind == "linwide":
            from ...engines.network.joins.linwide import check_op
            check_op(op, ints, bad)
        elif op.kind in ("lut", "gate"):
            from ...engines.network.gate import check_op
            check_op(op, ints, bad)
        elif op.kind in ("gather", "addc", "actmm", "softmax"):     # attention's rules attn_gather, add_const, act_matmul and int_softmax
            from ...engines.network.tokens.attention import check_op
            check_op(op, ints, bad)
        elif op.kind in ("plnorm", "pscale"):            # rules bfp_layer_norm, bfp_scale on BFP pairs
            from ...engines.bfp_systolic.network.attnpairs import check_op
            check_op(op, ints, bad)
        elif op.kind == "lnorm":
            from ...engines.network.tokens.layernorm import check_op
            check_op(op, ints, bad)
        elif op.kind == "add":
            ints(op, f, ("c", "hw"), 1, 1 << 26)
            for k in ("sa", "sb"):
                if k in f:
                    ints(op, f, (k,), 0, 31)
            if "shift" in f:
                ints(op, f, ("shift",), -62, 62)
        if "split" in op.f:                              # rule mixed_concat: a pool or gate of a mixed map (.catmix)
            from ...engines.network.joins.catmix import check_op as check_split
            check_split(op, ints, bad)
        if "div" in op.f:                                # rule mean_divide's division (engines.network.pools.mean)
            ints(op, f["div"], ("pre",), 0, 31)
            ints(op, f["div"], ("dl",), 1, 95)
            ints(op, f["div"], ("dm", "doff"), 0, (1 << 31) - 1)
    return net
