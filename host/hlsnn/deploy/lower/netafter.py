"""The host layers after the logits in the network mode (rule 5 of :mod:`hlsnn.deploy.lower.program`),
as the functions :func:`hlsnn.deploy.lower.program.finish` applies to the dequantized output.

A ``Reshape``, ``Flatten``, ``Squeeze``, ``Unsqueeze``, ``Identity`` or ``Dropout`` there
(:data:`hlsnn.engines.network.program.ALIAS_OPS`; the 1-D autoencoders' ``Reshape`` back to
``(N, C, L)``) changes no value: on the dequantized output, a fresh C-contiguous float64 array
(the C host path's and numpy's), :func:`hlsnn.deploy.run.hostops.run` returns a view of it, no byte
copied. A run of such ops is applied as one ``reshape`` to the shape it ends in (found once, by
running the ops on zeros of a batch of 1 and of 2: folded only where the per-image shape is the
same for both), not op by op, so the host pays one numpy call for it, not an op's dispatch:
:mod:`hlsnn.network.latency` charges these ops nothing (no op cost, no bytes). Other host ops
(a ``Softmax``) run as :func:`hostops.run` runs them.

An op there may also read the model's float input (a residual denoiser's ``x + net(x)``, or ``x -
net(x)`` as :mod:`hlsnn.deploy.rewrite.subneg` imports it): it reads the float input as the layer path's
host op does (:meth:`hlsnn.deploy.run.runner.Deployment.run`: the caller's values in float64), passed
to :func:`hlsnn.deploy.lower.program.finish` as ``x``.

The ops there need not be a chain: an op may read any tensor made after the kernel (the last
engine layer's output, an earlier host op's output) or the model's float input, e.g. a binary
classifier's head ``cat(1 - p, p)`` (scikit-learn's ``predict_proba`` as skl2onnx writes it:
``p = Sigmoid(logit)``, then ``1 - p``, then ``Concat`` of both). Such a small DAG is evaluated
in the layers' order on a dict of the tensors by name (:func:`stubs`' one step), each op as
:func:`hostops.run` runs it on the layer path, so its bits are the layer path's; the network's
output is the model's output tensor. :func:`check` refuses a tensor that is none of these (the
network mode then declines the model, and it runs layer by layer)."""
from __future__ import annotations

import numpy as np


def is_view(op):
    """Whether a host op after the logits is a view of its input (module docstring)."""
    from ...engines.network.program import ALIAS_OPS
    return op in ALIAS_OPS


def check(host_after, program, why):
    """Raise ``why(j, ...)`` for a host op ``j`` after the logits that reads a tensor other than the
    last engine layer's output, an earlier host op's output or the model's input, or when the ops
    do not end in the model's output (module docstring)."""
    made, inp = {program["output"]["engine_tensor"]}, program["input"]["name"]
    for j in host_after:
        other = next((i for i in j.get("inputs", ()) if i not in made and i != inp), None)
        if other is not None:
            raise why(j, f"after the last engine layer it reads {other}, neither a tensor made after the "
                         f"kernel ({', '.join(sorted(made))}) nor the model's input")
        made.add(j.get("output"))
    out = program["output"].get("name")
    if host_after and out is not None and host_after[-1].get("output") != out:
        raise why(host_after[-1], f"the host ops after the kernel end in {host_after[-1].get('output')}, "
                                  f"not the model's output {out}")


def is_chain(net):
    """Whether ``net``'s host ops after the logits are a chain: no op reads a tensor made after the
    kernel (the kernel's output, an earlier op's output) other than the op before's output (the
    kernel's, for the first op); an op of two or more inputs may read the model's input too."""
    made, prev = set(), net.output.get("tensor")
    for j in net.host_after:
        if any(i in made for i in j.get("inputs", ())):
            return False
        made.add(prev)
        prev = j.get("output")
    return True


def _source(net):
    """The model's input (``name``, per-image ``shape``): ``net.source``, which differs from
    ``net.input`` (the kernel's) where host ops run before the kernel (:mod:`.netprefix`)."""
    return getattr(net, "source", None) or net.input


def _reads_input(net, j):
    return len(j.get("inputs", ())) > 1 and _source(net)["name"] in j["inputs"]


def stubs(net):
    """``[fn]``: the functions ``fn(y, x)`` that take the dequantized output ``y`` (B, ...) through
    ``net``'s host layers after the logits, a run of views folded into one ``reshape`` (``x``: the
    float input, read by an op that reads the model's input, else unused)."""
    from ..run import hostops
    from .layers import _host_layer
    if not is_chain(net):                         # a small DAG (module docstring): one step
        return [_dag(net, [(_host_layer(j, {}), list(j["inputs"]), j["output"]) for j in net.host_after])]
    ys = [np.zeros((b,) + tuple(net.output["shape"])) for b in (1, 2)]
    steps = []
    for j in net.host_after:
        st = _host_layer(j, {})
        if _reads_input(net, j):                  # x + net(x): the float input as the layer path reads it
            steps.append(("input", (st, [i == _source(net)["name"] for i in j["inputs"]])))
            xs = [np.zeros((b,) + tuple(_source(net)["shape"])) for b in (1, 2)]
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
    from ...errors import InputError
    if x is None:
        raise InputError(f"network {net.name}: a host op after the logits reads the model's float input "
                         f"{_source(net)['name']}; pass it to finish (x=)")
    return np.asarray(x, np.float64).reshape((b,) + tuple(_source(net)["shape"]))


def _dag(net, ops):
    """The function ``fn(y, x)`` that runs the host ops after the logits ``ops`` (``(layer, input
    names, output name)`` in the layers' order) on the tensors by name: the kernel's output ``y``,
    the float input ``x`` where an op reads it; the last op's output is the network's."""
    from ..run import hostops
    inp = _source(net)["name"]
    reads_x = any(inp in ins for _, ins, _ in ops)

    def run(y, x=None):
        env = {net.output["tensor"]: y}
        if reads_x:
            env[inp] = _float_input(net, x, len(y))
        for st, ins, out in ops:
            env[out] = hostops.run(st, [env[i] for i in ins])
        return env[ops[-1][2]]
    return run
