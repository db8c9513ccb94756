"""The host layers after the logits in the network mode (rule 5 of :mod:`hlsnn.deploy.program`),
as the functions :func:`hlsnn.deploy.program.finish` applies to the dequantized output.

A ``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze``, ``Identity`` or ``Dropout`` there
(:data:`hlsnn.engines.network.program.ALIAS_OPS`; the 1-D autoencoders' ``Reshape`` back to
``(N, C, L)``) changes no value: on the dequantized output, a fresh C-contiguous float64 array
(the C host path's and numpy's), :func:`hlsnn.deploy.hostops.run` returns a view of it, no byte
copied. A run of such ops is applied as one ``reshape`` to the shape it ends in (found once, by
running the ops on zeros of a batch of 1 and of 2: folded only where the per-image shape is the
same for both), not op by op, so the host pays one numpy call for it, not an op's dispatch:
:mod:`hlsnn.network.latency` charges these ops nothing (no op cost, no bytes). Other host ops
(a ``Softmax``) run as :func:`hostops.run` runs them.

An op there may also read the model's float input (a residual denoiser's ``x + net(x)``, or ``x -
net(x)`` as :mod:`hlsnn.deploy.subneg` imports it): it reads the float input as the layer path's
host op does (:meth:`hlsnn.deploy.runner.Deployment.run`: the caller's values in float64), passed
to :func:`hlsnn.deploy.program.finish` as ``x``. :func:`check` refuses any other tensor there (the
network mode then declines the model, and it runs layer by layer)."""
from __future__ import annotations

import numpy as np


def is_view(op):
    """Whether a host op after the logits is a view of its input (module docstring)."""
    from ..engines.network.program import ALIAS_OPS
    return op in ALIAS_OPS


def check(host_after, program, why):
    """Raise ``why(j, ...)`` for a host op ``j`` after the logits that reads a tensor other than the
    op before's output (the last engine layer's, first) or the model's input (module docstring)."""
    prev, inp = program["output"]["engine_tensor"], program["input"]["name"]
    for j in host_after:
        ins = list(j.get("inputs", ()))
        if len(ins) > 1 and (any(i not in (prev, inp) for i in ins) or prev not in ins):
            other = next((i for i in ins if i not in (prev, inp)), prev)
            raise why(j, f"after the last engine layer it reads {other}, neither the output of the layer "
                         f"before ({prev}) nor the model's input")
        prev = j.get("output", prev)


def _reads_input(net, j):
    return len(j.get("inputs", ())) > 1 and net.input["name"] in j["inputs"]


def stubs(net):
    """``[fn]``: the functions ``fn(y, x)`` that take the dequantized output ``y`` (B, ...) through
    ``net``'s host layers after the logits, a run of views folded into one ``reshape`` (``x``: the
    float input, read by an op that reads the model's input, else unused)."""
    from . import hostops
    from .layers import _host_layer
    ys = [np.zeros((b,) + tuple(net.output["shape"])) for b in (1, 2)]
    steps = []
    for j in net.host_after:
        st = _host_layer(j, {})
        if _reads_input(net, j):                  # x + net(x): the float input as the layer path reads it
            steps.append(("input", (st, [i == net.input["name"] for i in j["inputs"]])))
            xs = [np.zeros((b,) + tuple(net.input["shape"])) for b in (1, 2)]
            ys = [hostops.run(st, [xb if k else y for k in steps[-1][1][1]]) for xb, y in zip(xs, ys)]
            continue
        ys = [hostops.run(st, [y]) for y in ys]
        s1, s2 = ys[0].shape, ys[1].shape
        if is_view(j["op"]) and s1[:1] == (1,) and s2[:1] == (2,) and s1[1:] == s2[1:]:
            if steps and steps[-1][0] == "view":
                steps.pop()
            steps.append(("view", tuple(s1[1:])))
        else:
            steps.append(("op", st))
    return [(lambda y, x=None, s=a: y.reshape((len(y),) + s)) if k == "view" else
            (lambda y, x=None, st=a: hostops.run(st, [y])) if k == "op" else
            (lambda y, x=None, st=a[0], which=a[1]: hostops.run(st, [_float_input(net, x, len(y)) if w else y
                                                                for w in which])) for k, a in steps]


def host_stubs(net):
    """:func:`stubs` of ``net``, made once per network and kept on it (``net._host_stubs``)."""
    made = getattr(net, "_host_stubs", None)
    if made is None:
        made = net._host_stubs = stubs(net)
    return made


def _float_input(net, x, b):
    from ..errors import InputError
    if x is None:
        raise InputError(f"network {net.name}: a host op after the logits reads the model's float input "
                         f"{net.input['name']}; pass it to finish (x=)")
    return np.asarray(x, np.float64).reshape((b,) + tuple(net.input["shape"]))
