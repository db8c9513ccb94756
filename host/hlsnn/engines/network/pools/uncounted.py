"""An ``AveragePool`` whose padding is not counted (``count_include_pad = 0``) in the network mode:
rule avg_pool_uncounted, an extension of :mod:`.linpool` rule avg_pool with :mod:`.mean` rule
mean_divide.

Layer by layer (:mod:`hlsnn.deploy.run.pooling`) each window's exact sum over its taps inside the
map is divided in float64 by their count ``c`` (9, 6 and 4 for a 3x3 window padded by 1). With
``L`` the least common multiple of the op's counts, ``s / c = (s * L / c) / L``: the sum times the
integer ``k = L / c`` is a sum over ``L`` values, and rule mean_divide (or, ``L`` a power of two,
rule avg_pool's shift) of ``n = L`` gives the exact quotient rounded once; :func:`plan
<hlsnn.engines.network.pools.mean.plan>` checks its inequality for the scaled sums' bound ``L *
2**(b-1)``.

The kernels count each window's inside taps in the pool loop and multiply the sum by
``kPoolScale[c]`` (a ROM of ``L / c``; every such pool of a program shares one ``L``, else refused
by name) at the window's last tap. ``ceil_mode`` and dilation are refused by name. On BFP pairs the
scaled sum is the pair ``(s * L / c, e0 - a)`` of a mean over ``L = 2**a * d``
(:mod:`hlsnn.engines.bfp_systolic.network.anymean` rule bfp_mean), bound by rule avg_pool's element."""
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
    """The pool's fields of rule avg_pool_uncounted: ``n = L`` (with :func:`hlsnn.engines.network.pools.mean.count_fields`'s
    ``p``) and ``uncounted = L``; :class:`ValueError` for a window with no tap inside."""
    from .mean import count_fields
    c = counts(f)
    if (c == 0).any():
        raise ValueError("a window with no tap inside the map")
    big_l = lcm(*sorted({int(v) for v in c.reshape(-1)}))
    return dict(count_fields(big_l), uncounted=big_l)


def scale(f):
    """The (OH, OW) multipliers ``L / c`` of the windows (rule avg_pool_uncounted)."""
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
                         f"multiples {ls}; the kernel holds one table of L / count (rule avg_pool_uncounted of "
                         f"hlsnn.engines.network.pools.uncounted)")
    big_l = ls[0]
    most = max(op.f["kh"] * op.f["kw"] for op in ops)
    table = [big_l // c if c and big_l % c == 0 else 0 for c in range(most + 1)]
    return dict(pool_scale=table, pool_scale_bits=big_l.bit_length() + 1, pool_count_bits=most.bit_length() + 1)
