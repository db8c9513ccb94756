"""An ``AveragePool`` whose padding is not counted (``count_include_pad = 0``, PyTorch's
``AvgPool2d(..., count_include_pad=False)``) in the network mode of the integer engines
(issue 52; and on BFP pairs, below): rule 11u, an extension of :mod:`.linpool` rule 11 with :mod:`.mean` rule 13.

Layer by layer (:mod:`hlsnn.deploy.run.pooling`) each window's mean is its exact sum over the
taps inside the map divided, in float64, by their count ``c`` (a border window counts fewer:
9, 6 and 4 for a 3x3 window padded by 1). With ``L`` the least common multiple of the op's
counts, ``s / c = (s * L / c) / L``: the window's sum times the integer ``k = L / c`` (its
position's) is a sum over ``L`` values, and rule 13 (or, ``L`` a power of two, rule 11's
shift) of ``n = L`` gives the exact quotient rounded once. The proof of rule 13 holds as it is:
the exact value is the same rational ``t``, the layer path divides the same exact sum once
in float64 (one correctly rounded division, relative error ``2**-53``), and :func:`plan
<hlsnn.engines.network.pools.mean.plan>` checks its inequality for the scaled sums' bound ``L *
2**(b-1)`` (a window's ``|s| <= c * 2**(b-1)``).

The kernels count the inside taps of each window in the pool loop (one counter) and multiply
the sum by ``kPoolScale[c]`` (a ROM of ``L / c`` by count, one per kernel: every such pool of a
program shares one ``L``, else refused by name) at the window's last tap, before the division.
``ceil_mode`` and dilation stay refused by name.

On BFP pairs (``bfp_systolic``) the scaled sum is the pair ``(s * L / c, e0 - a)`` of a mean
over ``L = 2**a * d``: :mod:`hlsnn.engines.bfp_systolic.network.anymean` rule 6b (the reading
conv divides by ``d``); its bound is rule 11's element (``2**25`` on the scaled magnitudes).
"""
from __future__ import annotations

from math import lcm

import numpy as np


def counts(f):
    """The (OH, OW) counts of the taps inside the map of each window of the pool ``f``."""
    t, l, _, _ = f["pads"]
    ys = np.arange(f["oh"]) * f["sh"] - t
    xs = np.arange(f["ow"]) * f["sw"] - l
    ch = np.clip(np.minimum(ys + f["kh"], f["h"]) - np.maximum(ys, 0), 0, None)
    cw = np.clip(np.minimum(xs + f["kw"], f["w"]) - np.maximum(xs, 0), 0, None)
    return ch[:, None] * cw[None, :]


def fields(f):
    """The pool's fields of rule 11u: ``n = L`` (with :func:`hlsnn.engines.network.pools.mean.count_fields`'s
    ``p``) and ``uncounted = L``; :class:`ValueError` for a window with no tap inside."""
    from .mean import count_fields
    c = counts(f)
    if (c == 0).any():
        raise ValueError("a window with no tap inside the map")
    big_l = lcm(*sorted({int(v) for v in c.reshape(-1)}))
    return dict(count_fields(big_l), uncounted=big_l)


def scale(f):
    """The (OH, OW) multipliers ``L / c`` of the windows (rule 11u)."""
    return f["uncounted"] // counts(f)


def rom(net):
    """The kernels' ``kPoolScale`` ROM (``L / c`` at index ``c``, 0 where no window counts ``c``)
    and its entries' width, or None without such a pool; :class:`InputError` for two ``L``."""
    from ....errors import InputError
    ops = [op for op in net.ops if op.kind == "avgpool" and op.f.get("uncounted")]
    if not ops:
        return None
    ls = sorted({op.f["uncounted"] for op in ops})
    if len(ls) > 1:
        raise InputError(f"network kernel: AveragePools with uncounted padding over counts with least common "
                         f"multiples {ls}; the kernel holds one table of L / count (rule 11u of "
                         f"hlsnn.engines.network.pools.uncounted)")
    big_l = ls[0]
    most = max(op.f["kh"] * op.f["kw"] for op in ops)
    table = [big_l // c if c and big_l % c == 0 else 0 for c in range(most + 1)]
    return dict(pool_scale=table, pool_scale_bits=big_l.bit_length() + 1, pool_count_bits=most.bit_length() + 1)
