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
(a ``Softmax``) run as :func:`hostops.run` runs them."""
from __future__ import annotations

import numpy as np


def is_view(op):
    """Whether a host op after the logits is a view of its input (module docstring)."""
    from ..engines.network.program import ALIAS_OPS
    return op in ALIAS_OPS


def stubs(net):
    """``[fn]``: the functions that take the dequantized output ``y`` (B, ...) through ``net``'s
    host layers after the logits, a run of views folded into one ``reshape``."""
    from . import hostops
    from .layers import _host_layer
    ys = [np.zeros((b,) + tuple(net.output["shape"])) for b in (1, 2)]
    steps = []
    for j in net.host_after:
        st = _host_layer(j, {})
        ys = [hostops.run(st, [y]) for y in ys]
        s1, s2 = ys[0].shape, ys[1].shape
        if is_view(j["op"]) and s1[:1] == (1,) and s2[:1] == (2,) and s1[1:] == s2[1:]:
            if steps and steps[-1][0] == "view":
                steps.pop()
            steps.append(("view", tuple(s1[1:])))
        else:
            steps.append(("op", st))
    return [(lambda y, s=a: y.reshape((len(y),) + s)) if k == "view" else
            (lambda y, st=a: hostops.run(st, [y])) for k, a in steps]
