"""Empirical bias correction (a format's ``bias_correction: empirical``): each engine layer's
bias is moved so that its pre-activation outputs have, per output channel, the mean the float
network's have on the calibration images.

Why: every quantized step (8-bit activations at one radix per tensor, two-hot codes, the
tables of Hardswish / Hardsigmoid on integers, a BFP layer's per-sample output mantissas)
leaves an error whose mean over the images is not zero; each layer passes the mean error of
the layers before it on, and the errors add up along the network. The correction is the
empirical form of M. Nagel, M. van Baalen, T. Blankevoort, M. Welling, "Data-Free Quantization
Through Weight Equalization and Bias Correction", ICCV 2019, section 4.2, applied in order
(each layer corrected with the layers before it already quantized and corrected):

    b'[z] = b[z] + mean(W x_f)[z] - mean(W x_q)[z]    (+ mean((W - Q) x_q)[z], the weights' own error)

over the calibration images and, for a convolution, every output position (a linear layer's
mean is the weights times the mean input patch, padding included), with ``x_f`` the layer's
input in the float64 network (:func:`hlsnn.deploy.run.hostops.float_tensors`) and ``x_q`` the
input the quantized network gives it. The weights' own term is added where the format has it
in closed form: ``fixed`` / ``sparse`` (``Q`` the int8 weights at their scale); a shift format
with ``weight_fit: output`` adds it when it re-chooses its codes
(:mod:`hlsnn.deploy.quantize.shift_fit`, on the corrected bias); ``bfp`` (8-bit mantissas per weight
row: a small term) goes without it.

Only the float bias changes (it is quantized into the kernel's bias field as every bias is),
so the kernels, the emulator, csim and the board compute the same bits for it as for any
other bias. The calibration then runs layer by layer (the specification path,
:meth:`hlsnn.deploy.run.runner.Deployment._run`; a network of BFP layers through
:mod:`hlsnn.deploy.run.bfpfast` with the same bits, :func:`_bfp_pass`), each layer's executor
built again on its corrected copy before it calibrates (the imported network is not changed; its other
deployments keep their biases). The float side is one float64 pass per network and calibration
batch (:func:`float_means`: only each engine layer's mean input image is kept), and every mean
of the formula is the layer applied to a mean input image (the layer is linear), so the
correction costs one float pass and one quantized pass.

``bias_correction: auto``, the default, is :func:`policy`: ``empirical`` for ``bfp`` formats in
a network with a grouped or depthwise convolution, ``none`` otherwise.
"""
from __future__ import annotations

import copy

import numpy as np

from ...engines import convgeom as conv
from ..importer.trained import trained_file

#: The choices of a format's ``bias_correction``: ``auto`` (the default) is :func:`policy`'s.
MODES = ("auto", "none", "empirical")


def policy(fmt_type, net):
    """What ``bias_correction: auto`` means for a format of type ``fmt_type`` in the imported
    network ``net``: ``empirical`` for ``bfp`` formats in a network with a grouped or depthwise
    convolution (an engine conv of ``group > 1``: few weights per output, whose BFP output
    error has a mean the layers after it carry along), else ``none`` (``docs/history/deploy-models.md``,
    bias correction, has the figures).
    A model exported by :func:`hlsnn.train.export` (its ``<model>.hlsnn-train.json`` beside it)
    gets ``none``: its biases were trained with the engine's quantizer in the loop, and what
    was trained is what deploys."""
    if fmt_type != "bfp" or trained_export(net):
        return "none"
    grouped = any(la.kind == "conv" and int(getattr(la, "group", 1)) > 1 for la in net.engine_layers())
    return "empirical" if grouped else "none"


def trained_export(net):
    """Whether ``net`` was imported from a file :func:`hlsnn.train.export` wrote (its sidecar
    ``<file>.hlsnn-train.json`` exists beside it)."""
    return trained_file(getattr(net, "path", None))



def wanted(dep):
    """True where one of ``dep``'s engine layers has a format whose ``bias_correction`` is (or,
    ``auto``, resolves to) ``empirical``."""
    return any(_mode(dep, layer) == "empirical" for layer in dep.net.engine_layers())


def _mode(dep, layer):
    fmt = dep.formats[dep.assignment.format_of(layer.name)]
    mode = getattr(fmt, "bias_correction", "auto")
    return policy(fmt.type, dep.net) if mode == "auto" else mode


def calibrate(dep, x_cal):
    """Calibrate ``dep`` on ``x_cal`` (float64) layer by layer with the corrected biases
    (module docstring): the float network's mean inputs are computed once per network and
    calibration batch (:func:`float_means`), then the layer path's calibrating pass asks
    :func:`correct` before each engine layer."""
    dep._bias_ref = float_means(dep.net, x_cal)
    try:
        if not _bfp_pass(dep, x_cal):
            dep._run(x_cal, True, False)
    finally:
        dep._bias_ref = None
    dep._fastnet = None
    dep._bfpnet = None                      # hlsnn.deploy.run.bfpfast's copy of the executors, made again


def _bfp_pass(dep, x):
    """The calibrating pass of a network of BFP layers through :mod:`hlsnn.deploy.run.bfpfast` (as
    :meth:`~hlsnn.deploy.run.executors.BfpExec.run_network` calibrates: the whole batch as one
    slice, the layer path's bits), each layer corrected (:func:`correct`) on its input just
    before it runs. False where bfpfast does not run the network (the layer path then does)."""
    from types import SimpleNamespace

    from ..run import bfpfast
    from ..run.executors import BfpExec
    if not dep.fast or dep.dynamic or dep.update == "e5" or not x.shape[0]:
        return False
    net = bfpfast.build(dep, BfpExec)
    if not net:
        return False

    def before(layer, xin):
        correct(dep, layer, SimpleNamespace(values=xin))
        ly = net.layers[layer.name] = bfpfast._Layer(dep.execs[layer.name])
        return ly
    net.before = before
    got = net._run(x, x.shape[0])
    if got is None:                         # a NaN or an infinity: the layer path
        return False
    net._finish(x, *got)
    dep.calibrated = True
    return True


#: images per slice of the float pass (:func:`float_means`): a slice's im2col rows stay in cache
FLOAT_CHUNK = 16
#: calibration batches whose float means a network keeps (:func:`float_means`)
FLOAT_KEEP = 4


def float_means(net, x):
    """``{engine layer name: the mean over the images of its input in the float64 network}``
    (one image's shape, batch axis kept), from :func:`hlsnn.deploy.run.hostops.float_tensors` run
    on slices of :data:`FLOAT_CHUNK` images (each image's tensors do not depend on the others).
    Kept on ``net`` (for its layers) for the last :data:`FLOAT_KEEP` batches it saw: the
    deployments of one config calibrate one imported network on one batch, and its float pass
    is the same for all of them."""
    x = np.ascontiguousarray(x, np.float64)
    key = (id(net.layers), x.shape, hash(x.tobytes()))
    kept = net.__dict__.setdefault("_hlsnn_float_means", {})
    got = kept.get(key)
    if got is not None and got[0] is net.layers:       # a copy with other layers (equalize): not its
        return got[1]
    ins = {layer.name: layer.inputs[0] for layer in net.engine_layers()}
    sums = {}
    for i0 in range(0, x.shape[0], FLOAT_CHUNK):
        env = _float_tensors(net, x[i0:i0 + FLOAT_CHUNK])
        for name, t in ins.items():
            s = env[t].sum(axis=0, keepdims=True)
            sums[name] = s if name not in sums else sums[name] + s
    means = {name: s / x.shape[0] for name, s in sums.items()}
    while len(kept) >= FLOAT_KEEP:
        kept.pop(next(iter(kept)))
    kept[key] = (net.layers, means)
    return means


def _float_tensors(net, x):
    """:func:`hlsnn.deploy.run.hostops.float_tensors` with a grouped convolution computed group by
    group (:func:`grouped_conv`) instead of on its block-diagonal dense weight: the same sums
    in another order (a depthwise layer's dense weight is ``C`` times the work)."""
    from ..run import hostops
    env = {net.input: np.asarray(x, np.float64)}
    for layer in net.layers:
        ins = [env[i] for i in layer.inputs]
        if layer.kind == "host":
            y = hostops.run(layer, ins)
        elif layer.kind == "dense":
            y = ins[0].reshape(ins[0].shape[0], -1) @ layer.w.T + layer.b
        elif layer.geom.group > 1:
            y = grouped_conv(ins[0], layer.w, layer.b, layer.geom)
        else:
            y = conv.conv_float(ins[0], layer.w, layer.b, layer.geom)
        env[layer.output] = np.maximum(y, 0) if layer.relu else y
    return env


def grouped_conv(x, w, b, g):
    """A grouped convolution (``g.group > 1``) in float64, tap by tap: ``x`` (B, C, H, W), ``w``
    (Z, C/group, kh, kw); :func:`hlsnn.engines.convgeom.conv_float`'s result, summed in another
    order."""
    x = np.asarray(x, np.float64)
    bsz, _, h, wd = x.shape
    z, cg = w.shape[:2]
    grp, zg = g.group, z // g.group
    oh, ow = conv._out_hw_checked(g, h, wd)
    xp = conv.pad_nchw(x, g.pads).reshape(bsz, grp, cg, h + g.pads[0] + g.pads[2], wd + g.pads[1] + g.pads[3])
    wr = np.asarray(w, np.float64).reshape(grp, zg, cg, g.kh, g.kw)
    y = np.zeros((bsz, grp, zg, oh, ow))
    for i in range(g.kh):
        for j in range(g.kw):
            r0, c0 = i * g.dh, j * g.dw
            xs = xp[:, :, :, r0:r0 + g.sh * (oh - 1) + 1:g.sh, c0:c0 + g.sw * (ow - 1) + 1:g.sw]
            if cg == 1 and zg == 1:                          # depthwise: one weight a channel
                y += xs * wr[:, :, :, i, j].reshape(1, grp, 1, 1, 1)
            else:
                y += np.einsum("bgchw,gzc->bgzhw", xs, wr[:, :, :, i, j])
    return y.reshape(bsz, z, oh, ow) + np.asarray(b, np.float64).reshape(1, z, 1, 1)


def _mean_out(layer, m):
    """Per output channel, the mean over output positions of the layer's weights (no bias)
    applied to ``m``, one mean input image (float64): by linearity, the mean over the
    images whose mean ``m`` is of the weights applied to each."""
    m = np.asarray(m, np.float64)
    if layer.kind == "dense":
        return m.reshape(-1) @ layer.w.T
    return conv.conv_float(m, layer.w, np.zeros(layer.w.shape[0]), layer.geom).mean(axis=(0, 2, 3))


def corrected_bias(layer, x_float, x_quant, w_quant=None):
    """The bias of the module docstring's formula: ``layer.b`` plus the mean of ``W x_float -
    W x_quant`` per output, plus ``mean((W - w_quant) x_quant)`` where ``w_quant`` (the
    quantized weights in float, ``layer.w``'s shape) is given."""
    return _corrected(layer, np.asarray(x_float, np.float64).mean(axis=0, keepdims=True),
                      np.asarray(x_quant, np.float64).mean(axis=0, keepdims=True), w_quant)


def _corrected(layer, m_float, m_quant, w_quant=None):
    """:func:`corrected_bias` from the mean input images ``m_float`` and ``m_quant``."""
    b = np.asarray(layer.b, np.float64) + _mean_out(layer, m_float) - _mean_out(layer, m_quant)
    if w_quant is not None:
        q = copy.copy(layer)
        q.w = np.asarray(layer.w, np.float64) - np.asarray(w_quant, np.float64).reshape(layer.w.shape)
        b = b + _mean_out(q, m_quant)
    return b


def correct(dep, layer, act):
    """Before ``layer`` (of ``dep.net``) calibrates on its quantized input ``act``: where its
    format asks for it, its executor is built again on a copy of the layer with the corrected
    bias (from the float network's input to it, ``dep._bias_ref``)."""
    if _mode(dep, layer) != "empirical":
        return
    from ..run.executors import EXECS, BfpExec
    fmt = dep.formats[dep.assignment.format_of(layer.name)]
    ex = dep.execs[layer.name]
    w_quant = None
    if fmt.type in ("fixed", "sparse"):                 # int8 taps at their scale(s): the weights' own term
        f = np.asarray(ex.f_w, np.int64)
        w_quant = np.ldexp(np.asarray(ex.w_taps, np.float64),
                           -(f.reshape(-1, 1, 1, 1) if f.ndim else f)).reshape(layer.w.shape)
    new = copy.copy(layer)
    new.b = _corrected(layer, dep._bias_ref[layer.name], act.values.mean(axis=0, keepdims=True), w_quant)
    if type(ex) is BfpExec and ex.layer.w is layer.w:
        dep.execs[layer.name] = bfp_rebuilt(ex, new)
    else:
        dep.execs[layer.name] = EXECS[fmt.type](new, fmt, ex.acc, dep)


def bfp_rebuilt(ex, layer):
    """The :class:`~hlsnn.deploy.run.executors.BfpExec` its constructor makes of ``layer`` (``ex``'s
    layer with another bias), made from ``ex``: the weights' quantization, group packs and
    layout kept, the bias quantized again (as the constructor does, per chunk), the state
    and statistics fresh (the constructor's: ``weight_sparsity`` of the weights)."""
    from ...formats import bfp as bfpfmt
    from ..run.executors import LayerStats
    new = copy.copy(ex)
    new.layer = layer
    new.stats = LayerStats()
    new.stats.weight_sparsity = ex.stats.weight_sparsity
    new.f_x = new.f_out = new.in_shape = None
    new.update_times = new.update_choice = new.update_ran = None
    new.chunks = [(a, b, wq, bfpfmt.quantize(layer.b[a:b], new.m, axis=None, exponent_bits=new.e, rounding=new.rnd))
                  for a, b, wq, _ in ex.chunks]
    return new
