"""Deploy-time pruning in the shape the board-sized ``sparse_cluster`` network kernel skips
(a ``sparse`` format's ``prune_shape: kernel``; numpy, no torch).

The board-sized kernel (``net_shape: board``, :mod:`hlsnn.engines.sparse_cluster.netsize`)
runs a block of ``P`` output channels as a list of steps; in each step every one of its ``B``
channel banks reads ``S`` taps (one input channel at one kernel position) that some lane of the
block needs. A tap costs nothing only when all ``P`` lanes' weights there are zero, and a block
takes as many steps as its busiest bank needs. Magnitude pruning (``prune_shape: weight``, the
default) scatters zeros that almost never empty a whole column of a block, so the kernel's
steps hardly drop; this rule zeroes whole columns instead: per block of ``P`` output channels
and per bank, the bank's :func:`keep` columns of the largest L2 norm over the block's rows are
kept, the others zeroed in every row of the block (ties by position): the shape of
:func:`hlsnn.train.prune.kernel_mask` (what ``hlsnn.train`` prunes in while training).

After training there is no fine-tuning to recover what the zeros lose, so at calibration
(:meth:`hlsnn.deploy.run.runner.Deployment.calibrate`, :func:`apply`) each such layer, in network
order, is pruned on the calibration images instead of by its weights alone:

* the columns are ranked by ``sum over the block's rows of w**2 * mean(x**2)``, ``x`` the
  column's input on the calibration images (a weight times the energy of what it multiplies:
  the activation-aware score of Sun et al., "A Simple and Effective Pruning Approach for LLMs"
  (Wanda), 2023, per column of a block here);
* the kept weights of the block and its biases are refitted by least squares (ridge
  ``1e-4`` of the mean diagonal) so that the layer's outputs on its input *in the pruned float
  network* (the layers before already pruned and refitted) match the float network's outputs of
  the layer (the layer-wise reconstruction of OBC / SparseGPT, Frantar and Alistarh 2022/2023,
  in closed form for whole columns), on at most :data:`ROWS` output positions (seeded).

Only float weights and biases change, before quantization, exactly as an imported model's would:
the kernels, the emulator, csim and the board compute the same bits for them as for any
weights. A depthwise conv (one input channel a group, :func:`refit_depthwise`) is different:
the kernel reads each lane's taps in a bank of its own (its channel's), so a block's steps are
the most taps any lane keeps, whichever they are; each channel keeps its own :func:`keep`
positions of the largest ``w**2`` times its input's energy there and refits them and its bias
on its own input. Another grouped conv is only masked (no refit). The executor masks again
(:func:`prune_kernel`, by the weights' L2 norm): on refitted weights the zero columns rank
last, so the mask keeps the same weights.
"""
from __future__ import annotations

import copy

import numpy as np

from ...errors import InputError

#: output positions (im2col rows) at most per layer in the refit (a seeded sample of them)
ROWS = 16384
#: the ridge of the refit, relative to the mean diagonal of the kept columns' Gram matrix
RIDGE = 1e-4


def keep(n, sparsity, sub):
    """The columns a bank of ``n`` keeps at ``sparsity``: ``k = round((1 - sparsity) * n)``
    (halves to even) rounded down to a multiple of ``sub``, at least ``sub``, at most ``n``
    (:func:`hlsnn.train.prune.kernel_keep`'s rule: a step reads ``sub`` of a bank's columns)."""
    k = int(round((1.0 - float(sparsity)) * n))
    return min(int(n), max(int(sub), k - k % int(sub)))


def banks(shape, n_banks, unfold=False):
    """The bank of every column ``(c, ky, kx)`` of weights of ``shape`` (Z, C, kh, kw): channel
    ``c`` in bank ``c mod B``; with ``unfold`` (the stem whose taps the kernel's image load unfolds
    into banks, :func:`hlsnn.engines.network.kernel.unfold_of`) ``c + C * kx``. (C, kh, kw) ints."""
    _, c, kh, kw = shape
    ch = np.broadcast_to(np.arange(c).reshape(c, 1, 1), (c, kh, kw))
    if unfold:
        return ch + c * np.broadcast_to(np.arange(kw).reshape(1, 1, kw), (c, kh, kw))
    return ch % int(n_banks)


def mask(w, sparsity, lanes, n_banks, sub, unfold=False, depthwise=False):
    """A 0/1 float mask of ``w``'s shape (a conv's (Z, C, kh, kw), a dense layer's (Z, C)): per block
    of ``lanes`` output channels and per bank, the bank's :func:`keep` columns of the largest L2
    norm over the block's rows kept in every row of the block, the others zeroed (ties by
    position: the stable order of the descending norms). ``depthwise`` (weights (C, 1, kh, kw),
    one channel a group): every row keeps its own :func:`keep` of its ``kh*kw`` positions, the
    largest magnitudes (each lane's taps are a bank of their own in the kernel)."""
    return scored_mask(w, sparsity, lanes, n_banks, sub, unfold, depthwise=depthwise)


def scored_mask(w, sparsity, lanes, n_banks, sub, unfold=False, energy=None, depthwise=False):
    """:func:`mask` with the columns ranked by ``sum over the block's rows of w**2 * energy``
    (``energy``: one factor per column ``(c, ky, kx)``, the mean square of its input; None: 1;
    ``depthwise``: one factor per weight, (C, kh*kw), each row ranked alone)."""
    w = np.asarray(w, np.float64)
    if not 0.0 <= float(sparsity) < 1.0:
        raise InputError(f"prune {sparsity!r}: a fraction in [0, 1)")
    if depthwise:
        w2 = w.reshape(w.shape[0], -1)
        score = w2 ** 2 * (1.0 if energy is None else np.asarray(energy, np.float64).reshape(w2.shape))
        k = keep(w2.shape[1], sparsity, sub)
        out = np.zeros_like(w2)
        np.put_along_axis(out, np.argsort(-score, axis=1, kind="stable")[:, :k], 1.0, axis=1)
        return out.reshape(w.shape)
    w4 = w.reshape(w.shape[0], w.shape[1], *(w.shape[2:] if w.ndim == 4 else (1, 1)))
    bank = banks(w4.shape, n_banks, unfold).reshape(-1)
    e = np.ones(bank.size) if energy is None else np.asarray(energy, np.float64).reshape(-1)
    out = np.zeros_like(w4)
    for z0 in range(0, w4.shape[0], int(lanes)):
        score = (w4[z0:z0 + lanes] ** 2).sum(0).reshape(-1) * e
        kept = np.zeros(score.shape, bool)
        for b in np.unique(bank):
            cols = np.flatnonzero(bank == b)
            k = keep(len(cols), sparsity, sub)
            kept[cols[np.argsort(-score[cols], kind="stable")[:k]]] = True
        out[z0:z0 + lanes] = kept.reshape(w4.shape[1:])
    return out.reshape(w.shape)


def shape_of(params):
    """``(P, B, S)`` of a ``sparse_cluster`` accel config's parameters sized to the board
    (``net_shape: board``), or None for another kernel."""
    from ...engines.sparse_cluster.network.kernel import sized
    sz = sized(params)
    return (sz["net_lanes"], sz["net_banks"], sz["net_sub"]) if sz else None


def is_stem(layer, net, n_banks):
    """Whether ``layer`` is the stem whose taps the network kernel's image load unfolds (its
    banks then count ``c + C * kx``): the one conv reading the network's input, groups 1,
    ``kw > 1``, ``C * kw`` within the banks (:func:`hlsnn.engines.network.kernel.unfold_of`)."""
    if layer.kind != "conv" or net is None:
        return False
    readers = [la for la in net.layers if net.input in la.inputs]
    g = layer.geom
    w = np.shape(layer.w)
    return (len(readers) == 1 and readers[0] is layer and getattr(g, "group", 1) == 1 and len(w) == 4
            and w[3] > 1 and w[1] * w[3] <= n_banks)


def prune_kernel(layer, fraction, params, net=None):
    """``layer.w`` with :func:`mask` applied at ``fraction`` in the kernel shape of the accel
    config ``params`` (a ``sparse`` format's ``prune_shape: kernel``); an :class:`InputError`
    when the config is not the board-sized network kernel."""
    pbs = shape_of(params)
    if pbs is None:
        raise InputError("prune_shape: kernel needs the board-sized sparse_cluster network kernel (an accel config "
                         "with net_shape: board, e.g. sparse8net_pynq-z2); this format's accel has none: use "
                         "prune_shape: weight")
    w = np.asarray(layer.w, np.float64)
    if not fraction:
        return w
    return w * mask(w, fraction, *pbs, unfold=is_stem(layer, net, pbs[1]), depthwise=_depthwise(layer))


def _kernel_layers(net, assignment, formats):
    """The engine layers of ``net`` whose format prunes in the kernel's shape, in network order."""
    out = []
    for la in net.engine_layers():
        f = formats[assignment.format_of(la.name)]
        if f.type == "sparse" and getattr(f, "prune_shape", "weight") == "kernel" and f.prune:
            out.append((la, f))
    return out


def _rows(layer, x, rng_rows):
    """The layer's input as rows of its GEMM (a conv's im2col patches, a dense layer's vectors),
    the rows ``rng_rows`` picks (a callable of the row count)."""
    from ...engines import convgeom as conv
    if layer.kind == "dense":
        r = x.reshape(x.shape[0], -1)
    else:
        r, _ = conv.im2col(x, layer.geom)
    return r[rng_rows(len(r))]


def _both_rows(layer, x_p, x_f):
    """The layer's input rows (:func:`_rows`) of ``x_p`` and of ``x_f`` at the same positions: all
    of them, or :data:`ROWS` drawn once (seed 0) where there are more."""
    picked = []

    def pick(n):
        if not picked:
            picked.append(np.sort(np.random.default_rng(0).permutation(n)[:ROWS]) if n > ROWS else np.arange(n))
        return picked[0]
    return _rows(layer, x_p, pick), _rows(layer, x_f, pick)


def refit_layer(layer, x_p, x_f, sparsity, pbs, unfold):
    """``(w, b)``: ``layer`` pruned in the kernel's shape ``pbs = (P, B, S)`` at ``sparsity``, its
    columns ranked by weight times input energy and its kept weights and biases refitted by least
    squares (module docstring) from ``x_p`` (its input in the pruned float network) to the float
    layer's outputs on ``x_f`` (its input in the float network), both (N, ...) of the same images."""
    w = np.asarray(layer.w, np.float64)
    z = w.shape[0]
    b = np.zeros(z) if layer.b is None else np.asarray(layer.b, np.float64)
    rp, rf = _both_rows(layer, x_p, x_f)
    w2 = w.reshape(z, -1)
    energy = (rp ** 2).mean(0)
    m = scored_mask(w, sparsity, *pbs, unfold=unfold, energy=energy).reshape(z, -1)
    y = rf @ w2.T + b                                    # the float layer's outputs (before ReLU)
    new_w, new_b = np.zeros_like(w2), b.copy()
    lanes = pbs[0]
    for z0 in range(0, z, lanes):
        cols = np.flatnonzero(m[z0])
        a = np.concatenate([rp[:, cols], np.ones((len(rp), 1))], axis=1)
        g = a.T @ a
        g[np.diag_indices_from(g)] += RIDGE * max(float(np.mean(np.diag(g))), 1e-12)
        beta = np.linalg.solve(g, a.T @ y[:, z0:z0 + lanes])
        new_w[z0:z0 + lanes, cols] = beta[:-1].T
        new_b[z0:z0 + lanes] = beta[-1]
    return new_w.reshape(w.shape), new_b


def refit_depthwise(layer, x_p, x_f, sparsity, pbs):
    """:func:`refit_layer` of a depthwise conv (weights (C, 1, kh, kw), one channel a group): each
    channel keeps its :func:`keep` kernel positions of the largest ``w**2 * mean(x**2)`` (``x`` its
    own input channel at that position; :func:`mask`'s ``depthwise`` shape), and its kept weights
    and its bias are refitted by least squares from its input in the pruned float network to the
    float layer's output."""
    w = np.asarray(layer.w, np.float64)
    z = w.shape[0]
    t = int(np.prod(w.shape[1:]))
    b = np.zeros(z) if layer.b is None else np.asarray(layer.b, np.float64)
    rp, rf = (r.reshape(-1, z, t) for r in _both_rows(layer, x_p, x_f))
    w2 = w.reshape(z, t)
    m = scored_mask(w2, sparsity, *pbs, energy=(rp ** 2).mean(0), depthwise=True)
    new_w, new_b = np.zeros_like(w2), b.copy()
    for c in range(z):
        cols = np.flatnonzero(m[c])
        a = np.concatenate([rp[:, c, cols], np.ones((len(rp), 1))], axis=1)
        g = a.T @ a
        g[np.diag_indices_from(g)] += RIDGE * max(float(np.mean(np.diag(g))), 1e-12)
        beta = np.linalg.solve(g, a.T @ (rf[:, c] @ w2[c] + b[c]))
        new_w[c, cols], new_b[c] = beta[:-1], beta[-1]
    return new_w.reshape(w.shape), new_b


def _depthwise(layer):
    w = np.shape(layer.w)
    return layer.kind == "conv" and len(w) == 4 and w[1] == 1 and layer.group == w[0] > 1


def apply(net, x_cal, assignment, formats, accelerators):
    """The network with every layer of a ``prune_shape: kernel`` format pruned and refitted on
    ``x_cal`` (module docstring), in network order: a new :class:`~hlsnn.deploy.importer.graph.Network`
    sharing the unchanged layers, or ``net`` itself when no format prunes so. Returns
    ``(network, names of the layers changed)``."""
    from ..run.hostops import float_layer, float_tensors
    todo = dict((la.name, f) for la, f in _kernel_layers(net, assignment, formats))
    if not todo:
        return net, []
    x = np.asarray(x_cal, np.float64)
    env_f = float_tensors(net, x)
    env = {net.input: x}                                 # the pruned float network, one pass
    new = copy.copy(net)
    new.layers = []
    for la in net.layers:
        ins = [env[i] for i in la.inputs]
        f = todo.get(la.name)
        if f is not None:
            params = accelerators[f.accel].config.params
            pbs = shape_of(params)
            la = copy.copy(la)
            if pbs is not None and _depthwise(la):
                la.w, la.b = refit_depthwise(la, ins[0], env_f[la.inputs[0]], f.prune, pbs)
            elif pbs is None or la.kind == "conv" and la.group != 1:      # the error; grouped: masked only
                la.w = prune_kernel(la, f.prune, params, net)
            else:
                la.w, la.b = refit_layer(la, ins[0], env_f[la.inputs[0]], f.prune, pbs, is_stem(la, net, pbs[1]))
        new.layers.append(la)
        env[la.output] = float_layer(la, ins)
    return new, list(todo)
