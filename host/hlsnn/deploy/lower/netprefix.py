"""Host ops on the float input before the network kernel starts: a model whose first
ops act on the float input before any engine layer reads it (an input ``BatchNormalization``
or ``LayerNormalization``, a ``Transpose`` of an (N, T, F) input to channels) runs them on the
host, in float64, with the code the layer path runs them with (:func:`hlsnn.deploy.run.hostops.run`
on the :func:`hlsnn.deploy.lower.layers._host_layer` of each), and then quantizes their output for
the kernel (rule input_quantize of :mod:`hlsnn.deploy.lower.program`, or the ``bfp_systolic`` network mode's).
The layer path computes the same float64 tensor and its first engine layer converts it with
the same rule, so both give the same bits, in one kernel start.

The *prefix* is every host op (the aliases among them) from the input up to the tensor the
first engine layer reads: each of its ops reads float tensors of the prefix only (the model's
input or earlier prefix ops' outputs: a small DAG, such as a per-sample standardization ``(x -
x.mean()) / (x.std() + eps)``, whose ops read ``x`` three times), and no op of the network mode
has been lowered before it. Its last op's output is the kernel's input (``net.input``: that
tensor's name and per-image shape); ``net.source`` names the model's input, and
``net.host_before`` holds the prefix's ops. A float tensor of the prefix stays readable by later
prefix ops while a later layer reads it (its state is dropped from the walk after its last
reader); the network's ops may read only the kernel's input among them (:func:`attach` refuses
another by name). An op of two computed tensors (attention's ``MatMulAct``) is not a prefix op.

A ``bfp_systolic`` kernel reads float32 words and forms its first layer's patches from them
(its rule bfp_input): the prefix's float64 output goes in as it is when it is exact in float32 (a
``Transpose`` of a float32 input); otherwise, where each element of the kernel's input lies in
one patch of the first layer (a dense layer: one patch per image; a 1x1 conv of stride 1, no
padding: one patch per pixel), the host forms those patches itself with rule bfp_conv on the float64
values (:func:`bfp_patches`) and writes their ``(m, e)`` values, which are exact in float32; the
kernel's rule bfp_conv on them gives the same patches again (a rounded patch's largest mantissa
keeps its leading bit at ``M - 2``, so its exponent is unchanged). Else the batch is
:class:`~hlsnn.engines.bfp_systolic.network.lower.NotExact` (``network=None`` on emu runs it
layer by layer).
"""
from __future__ import annotations

import numpy as np

from ...engines.network.program import ALIAS_OPS

#: host ops a prefix does not take: those of two computed tensors (attention's, quantized at
#: run time by the layer path) and the moves the network mode lowers on the input itself
NOT_PREFIX = ("MatMulAct", "MatMul", "RowsToMap", "MapToRows")


def take(j, w, arrays, why):
    """Whether host layer ``j`` is a prefix op (module docstring): then record it in the walk
    ``w`` (its output the kernel's input so far) and return True."""
    if j["op"] in ALIAS_OPS or j["op"] in NOT_PREFIX:
        return False
    sts = [w.state.get(i) for i in j["inputs"]]
    if not sts or any(s is None or s[0] != "input" for s in sts):
        return False
    if w.ops or any(s[0] == "q" for s in w.state.values()):
        raise why(j, "a host op on the float input after an engine layer read it")
    from ..run import hostops
    from .layers import _host_layer
    stub = _host_layer(j, arrays)
    ins = [(w.aliases.get(i, i), tuple(w.shapes[i])) for i in j["inputs"]]
    try:
        y = hostops.run(stub, [np.zeros((1,) + s) for _, s in ins])
    except Exception as e:                       # noqa: BLE001 (a host op the prefix cannot shape)
        raise why(j, f"a host op on the float input whose output shape is unknown ({type(e).__name__})") from None
    w.prefix = getattr(w, "prefix", [])
    w.prefix.append(dict(name=j["name"], op=j["op"], ins=ins, out=j["output"], stub=stub))
    at = next(k for k, la in enumerate(w.layers) if la["name"] == j["name"])
    later = {i for la in w.layers[at + 1:] for i in la.get("inputs", ())}
    for t in [t for t, s in w.state.items() if s[0] == "input" and t not in later]:
        del w.state[t]                           # a float tensor no later layer reads
    w.state[j["output"]], w.shapes[j["output"]] = ("input",), tuple(int(d) for d in y.shape[1:])
    w.kernel_in, w.kernel_in_shape = j["output"], w.shapes[j["output"]]
    return True


def attach(net, w, program):
    """``net`` with the prefix of the walk ``w``: the kernel's input its last op's output."""
    pre = getattr(w, "prefix", None)
    inp = program["input"]
    net.source = dict(name=inp["name"], shape=tuple(int(d) for d in inp["shape"]))
    net.host_before = list(pre or [])
    if pre:
        made = {e["out"] for e in pre} | {inp["name"]}
        for op in net.ops:                       # the kernel reads one float tensor: the last prefix op's
            other = [i for i in op.ins if w.aliases.get(i, i) in made and w.aliases.get(i, i) != w.kernel_in]
            if other:
                from ...errors import InputError
                raise InputError(f"network kernel: layer {op.name} ({op.kind}): it reads {other[0]}, a float "
                                 f"tensor of the host ops before the kernel other than the kernel's input "
                                 f"{w.kernel_in}; this network runs layer by layer (hlsnn.load(..., network=False))")
        net.input = dict(net.input, name=w.kernel_in, shape=w.kernel_in_shape)
        net.input["patches"] = _patches(net) if net.engine == "bfp_systolic" else None
        _fold_clip(net)
    return net


def _fold_clip(net):
    """A prefix of one ``Clip`` of the model's input (a low-bit input ``Quant``, :mod:`.qimport`)
    whose bounds are values of the kernel's input format (``b`` bits at radix ``F``) is the input's
    clamp on ``sparse_cluster`` (``net.input["clip"]``, integers): :func:`hlsnn.deploy.lower.program.quantize_input`
    clamps the quantized codes to it and the kernel's image load does the same (``InClip``), no host
    op. The same bits: rounding is monotone and the bounds are integers at ``F``, so quantizing the
    clipped value equals clamping the quantized one."""
    pre = net.host_before
    if net.engine != "sparse_cluster" or len(pre) != 1 or pre[0]["op"] != "Clip" or \
            pre[0]["ins"][0][0] != net.source["name"]:
        return
    a = getattr(pre[0]["stub"], "attrs", None) or {}
    f, bits = net.input["f"], net.input["bits"]
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    q = [None if a.get(k) is None else np.ldexp(float(a[k]), f) for k in ("lo", "hi")]
    if any(v is not None and (not np.isfinite(v) or v != np.rint(v)) for v in q):
        return
    clip = (lo if q[0] is None else int(min(max(q[0], lo), hi)), hi if q[1] is None else int(min(max(q[1], lo), hi)))
    if clip[0] > clip[1]:
        return
    net.host_before = []
    net.input["clip"] = clip


def _readers(net, t):
    al = net.aliases
    return [op for op in net.ops if any(al.get(i, i) == t for i in op.ins)]


def _one_by_one(f):
    return (not f["dense"] and f["kh"] == f["kw"] == 1 and f["sh"] == f["sw"] == 1 and not any(f["pads"])
            and f.get("packs", 1) == 1)


def _patches(net):
    """How the first layer of a ``bfp_systolic`` network groups its input into patches, where each
    input element lies in one (module docstring): ``"image"`` (a dense layer), ``"rows"`` (a 1x1
    conv after the transpose of (R, S) rows: each row a patch), ``"pixels"`` (a 1x1 conv: each
    pixel's channels a patch); None otherwise."""
    first = _readers(net, net.input["name"])
    if len(first) != 1:
        return None
    op = first[0]
    if op.kind == "conv":
        return "image" if op.f["dense"] else "pixels" if _one_by_one(op.f) else None
    if op.kind == "transpose":
        nxt = _readers(net, op.out)
        if len(nxt) == 1 and nxt[0].kind == "conv" and _one_by_one(nxt[0].f):
            return "rows"
    return None


def bfp_patches(net, x):
    """The float kernel input ``x`` (B, ...) of a ``bfp_systolic`` network as its first layer's
    patches quantized by rule bfp_conv (:mod:`hlsnn.engines.bfp_systolic.network.lower`) on the float64
    values: the values ``xm * 2**xe``, exact in float32; ``x`` itself where it is exact in float32
    already, or the patches are not a partition of the input (then the kernel's rule bfp_input refuses it
    as not exact).

    Rule bfp_conv on float64 values directly, the same bits as on their exact ``(m, e)`` decoding
    (``|m| < 2**53``, :func:`~hlsnn.engines.bfp_systolic.network.lower._round_patches`; tested
    against it): a nonzero value's leading one is at ``frexp``'s exponent less one, and ``v *
    2**-xe`` is the same dyadic value as ``m * 2**(e - xe)``, which ``ldexp`` gives exactly (or
    rounds alike where it leaves float64's range)."""
    from ...engines.bfp_systolic.network.lower import NotExact, patch_exponent
    from ...engines.common import round_into
    how = net.input.get("patches")
    x = np.asarray(x, np.float64)
    if how is None or (np.isfinite(x).all() and np.array_equal(x.astype(np.float32).astype(np.float64), x)):
        return x
    b = len(x)
    if how == "image":
        v = x.reshape(b, 1, -1)
    elif how == "rows":
        v = x.reshape(b, int(x.shape[1]), -1)
    else:
        v = x.reshape(b, int(x.shape[1]), -1).transpose(0, 2, 1)
    p = net.params
    _, ex = np.frexp(v)
    none = np.iinfo(np.int64).min
    lop = np.where(v != 0, ex.astype(np.int64) - 1, none).max(axis=2, keepdims=True)
    nonzero = lop != none
    xe = np.where(nonzero, patch_exponent(lop, p), 0)
    with np.errstate(over="ignore"):
        xm = np.ldexp(v, -xe)
    round_into(xm, p["rounding"], xm)
    half = 1 << (p["mantissa_bits"] - 1)
    np.clip(xm, -half, half - 1, out=xm)
    y = np.ldexp(xm, xe)
    if ((xm != 0).any(axis=2, keepdims=True) != nonzero).any() \
            or not np.array_equal(y.astype(np.float32).astype(np.float64), y):
        raise NotExact("network kernel (bfp): a patch of the host ops' output has no float32 value after its "
                       "rounding; run it with hlsnn.load(..., network=False)")
    if how == "pixels":
        y = y.transpose(0, 2, 1)
    return np.ascontiguousarray(y).reshape(x.shape)


def run(net, x):
    """The prefix of ``net`` on the float batch ``x`` (the model's input, float64): the kernel's
    float input, (B,) + ``net.input["shape"]``; ``x`` itself for a network without a prefix."""
    pre = getattr(net, "host_before", None)
    if not pre:
        return x
    from ..run import hostops
    b = len(x)
    src = net.source
    env = {src["name"]: np.asarray(x, np.float64).reshape((b,) + tuple(src["shape"]))}
    for e in pre:
        env[e["out"]] = hostops.run(e["stub"], [env[p].reshape((b,) + s) for p, s in e["ins"]])
    y = np.asarray(env[net.input["name"]], np.float64).reshape((b,) + tuple(net.input["shape"]))
    return bfp_patches(net, y) if net.engine == "bfp_systolic" else y


def layers(net):
    """The prefix's host ops (not its aliases) as ``(name, op)``: :func:`hlsnn.network.latency`
    counts each as a host op before the kernel start."""
    return [(e["name"], e["op"]) for e in getattr(net, "host_before", None) or []]
