"""``prepare``: wrap the ``Conv2d`` / ``Linear`` layers of a torch model with the fake
quantization of the format a deployment config assigns them (:mod:`hlsnn.train.quant`)."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
import torch.nn.functional as Fn

from ..config import load_config
from ..deploy.config import STATIC_RULES, DeployConfig, load_deploy_config
from ..errors import InputError, printable
from .quant import BfpWeight, FixedAct, FixedWeight, ShiftWeight, bfp_fake, fixed_fake, tag


class _QMixin:
    """What a quantized layer adds to its torch layer: ``fmt`` (the format's type), the weight
    quantizer ``wq``, the input quantizer ``aq`` (fixed-point engines) and the BFP input rule."""

    #: the layer whose output is the network's (set by :func:`prepare`: the last quantized layer)
    _network_output = False
    #: ``all``: a strided sparse_cluster conv's radix from every stride-1 result; ``kept``: from
    #: the outputs the stride keeps (set by :func:`prepare`; :meth:`QConv2d._stride1_results`)
    strided_stats = "all"
    #: ``clipped``: a layer whose output only a ``ReLU6`` reads takes its radix from its results
    #: clipped at 6, the deployment's ``calibration: clip_stats: clipped`` (set by :func:`prepare`)
    clip_stats = "off"
    #: a ``ReLU6`` reads this layer's output (set by :func:`_fuse_relu`)
    relu6_after = False

    def _setup(self, spec, params, overflow_ratio, rounding="nearest_away"):
        self.fmt, self.params, self.spec_name = spec.type, dict(params), spec.name
        self.accel = spec.accel     # the accel config as the deploy config names it (hlsnn.train.export's sidecar)
        self.aq = self.oq = None
        self.relu = False
        self.bfp_in = None
        if spec.type in ("pot", "twohot"):
            self.wq = ShiftWeight(self.weight, spec.type, params["exp_bits"], spec.delta,
                                  per_channel=spec.weight_scale == "channel",
                                  max_code=params.get("max_code") if spec.type == "twohot" else None)
            bits, signed = params["act_bits"], params.get("act_signed", True)
            lse = rounding if getattr(spec, "radix", "msb") in ("lse", "search") else None     # as fixed's, below
            self.aq = FixedAct(bits, signed, overflow_ratio, rounding, lse=lse)
            self.oq = FixedAct(bits, signed, overflow_ratio, params.get("rounding", "nearest_even"), lse=lse)
        elif spec.type in ("fixed", "sparse"):
            self.wq = FixedWeight(per_channel={"channel": True, "auto": "auto"}.get(spec.weight_scale, False))
            bits = params.get("act_bits", 8) if spec.type == "fixed" else 8
            signed = params.get("act_signed", True) if spec.type == "fixed" else True
            lse = rounding if getattr(spec, "radix", "msb") in ("lse", "search") else None     # the host's rounding
            self.aq = FixedAct(bits, signed, overflow_ratio, rounding, lse=lse)
            self.oq = FixedAct(bits, signed, overflow_ratio, params.get("rounding", "nearest_even"), lse=lse)
        elif spec.type == "bfp":
            self.wq = BfpWeight(params["mantissa_bits"], params.get("exponent_bits", 8),
                                per_row=params.get("weight_exponent", "row") == "row")
            self.bfp_in = (params["mantissa_bits"], params.get("exponent_bits", 8))
        else:
            raise InputError(f"format type {spec.type!r}: one of twohot, pot, fixed, sparse, bfp")
        self.register_buffer("prune_mask", None)

    def quantized_weight(self):
        w = self.weight if self.prune_mask is None else self.weight * self.prune_mask
        return self.wq(w)

    #: images per call of a BFP layer in eval mode: ``hlsnn.deploy.run.runner.Deployment.chunk``, the
    #: slices the deployment runs a batch in (an all-zero row's exponent is its call's largest)
    bfp_chunk = 32

    def _bfp_rows(self, rows, w2, images):
        """The ``bfp_systolic`` GEMM of ``rows`` (``images`` images' rows, in order) on ``w2``
        (:func:`hlsnn.train.bfpgemm.bfp_gemm`), in eval mode a call per :attr:`bfp_chunk` images."""
        from .bfpgemm import bfp_gemm
        m, e = self.bfp_in
        kw = dict(rounding=self.params.get("rounding", "nearest_even"), relu=self.relu,
                  max_n=self.params.get("max_n"))
        if self.training or images <= self.bfp_chunk:
            return bfp_gemm(rows, w2, self.bias, m, e, **kw)
        per = rows.shape[0] // images * self.bfp_chunk
        return torch.cat([bfp_gemm(rows[a:a + per], w2, self.bias, m, e, **kw)
                          for a in range(0, rows.shape[0], per)])

    def _quant_input(self, x):
        if self.aq is not None:
            return self.aq(x)
        if self.bfp_in is not None:       # one exponent per sample
            return bfp_fake(x.reshape(x.shape[0], -1), *self.bfp_in, dim=-1).reshape(x.shape)
        return x

    def _quant_bias(self):
        if self.bias is None or self.aq is None or self.aq.last_f is None:
            return self.bias
        fw = self._weight_frac()
        return fixed_fake(self.bias, self.aq.last_f + fw, 32, True)

    def _finish(self, y, stats_of=None):
        """The engine's output stage: the fused ReLU, then the requantization to the
        activation format at the radix DETERMINE picks from this batch's results (``stats_of``:
        the results the engine's statistics unit sees, when they are more than ``y``)."""
        if self.relu:
            y = torch.relu(y)
            stats_of = None if stats_of is None else torch.relu(stats_of)
        if self.oq is None:
            return y
        if self.clip_stats == "clipped" and self.relu6_after:     # hlsnn.deploy.run.executors._Exec.clip_stats
            stats_of = (y if stats_of is None else stats_of).clamp(0.0, 6.0)
        lse = True
        if self.oq.lse is not None:       # radix_lse.wanted_out: one weight radix, not the network's output
            fw = self._weight_frac()
            fw = np.asarray(fw.detach().cpu().numpy() if torch.is_tensor(fw) else fw).reshape(-1)
            lse = not self._network_output and len(set(fw.tolist())) == 1
        y = self.oq(y, stats_of, lse)
        return tag(y, (self.oq.last_f, self.oq.bits, self.oq.signed))

    def _weight_frac(self):
        """The weights' radix: an int, or (per-channel shift scales) one per output channel,
        as the deployed bias is aligned to each channel's accumulator radix."""
        if isinstance(self.wq, ShiftWeight):
            return self._shift_frac()
        w = self.weight if self.prune_mask is None else self.weight * self.prune_mask
        return self.wq.fracs(w)


    def _shift_frac(self):
        """The scale exponent the deploy finds for the trained codes (``ShiftExec``): the largest
        ``F`` at which the largest quantized weight (of the tensor, or of each row) fits the top
        magnitude, which can be above the learned one when no weight reaches the top; a row more
        than ``CHANNEL_FRAC_LIMIT`` bits finer than the tensor takes the tensor's."""
        import numpy as np
        from ..deploy.quantize.quant import CHANNEL_FRAC_LIMIT
        from .quant import _deploy_scale_exponent
        w = self.quantized_weight().detach().double().abs().reshape(self.weight.shape[0], -1)
        f_t = int(_deploy_scale_exponent(float(w.max()), self.wq.max_mag))
        if not self.wq.per_channel:
            return f_t
        f_r = _deploy_scale_exponent(w.amax(1).cpu().numpy(), self.wq.max_mag)
        f_r = np.where((f_r > f_t + CHANNEL_FRAC_LIMIT) | (w.amax(1).cpu().numpy() == 0), f_t, f_r)
        return torch.tensor(f_r, dtype=torch.float64)


class QConv2d(_QMixin, nn.Conv2d):
    def forward(self, x):
        if self.bfp_in is not None:
            return self._bfp_patches(x)
        x = self._quant_input(x)
        w, b = self.quantized_weight(), self._quant_bias()
        return self._finish(self._conv_forward(x, w, b), self._stride1_results(x, w, b))

    def _stride1_results(self, x, w, b):
        """``sparse_cluster`` (formats fixed, sparse) runs a convolution other than a stride-1
        square one with symmetric "same"/"valid" padding as the stride-1 "valid" convolution
        of a square ``k1 x k1`` kernel on the padded input, the output sampled by the stride
        (``hlsnn.engines.convgeom.as_stride1``): its statistics unit, and so DETERMINE, sees
        every stride-1 result. Those results (None where the statistics are of the kept
        outputs: another format, the native form, a kernel beyond ``max_ksize``, which runs
        in blocks of taps, or :attr:`strided_stats` ``kept``, the deployment's
        ``calibration: strided_stats: kept``, where the static radix is DETERMINE's on the
        outputs the stride keeps: ``hlsnn.deploy.run.executors.SparseExec.kept_stats``)."""
        if self.fmt not in ("fixed", "sparse") or self.oq is None or isinstance(self.padding, str) \
                or self.strided_stats == "kept":
            return None
        (kh, kw), (sh, sw), (dh, dw) = self.kernel_size, self.stride, self.dilation
        (ph, pw) = self.padding
        eh, ew = dh * (kh - 1) + 1, dw * (kw - 1) + 1
        k1 = max(eh, ew)
        native = kh == kw and (sh, sw, dh, dw, self.groups) == (1, 1, 1, 1, 1) and ph == pw and \
            ph in (0, (kh - 1) // 2) and not (ph and kh % 2 == 0)
        if native or k1 > int(self.params.get("max_ksize", k1)):
            return None
        with torch.no_grad():
            xp = Fn.pad(x.detach(), (pw, pw + k1 - ew, ph, ph + k1 - eh))
            y1 = Fn.conv2d(xp, w.detach(), None if b is None else b.detach(), 1, 0, self.dilation, self.groups)
        return y1[:, :, :xp.shape[2] - k1 + 1, :xp.shape[3] - k1 + 1]


    def _bfp_patches(self, x):
        """BFP: the im2col patches are the GEMM's rows (one exponent each), as ``bfp_systolic``
        runs a conv; a grouped conv as one GEMM over the block-diagonal weight of its groups
        (the runner's pack of every group)."""
        if self.padding_mode != "zeros" or isinstance(self.padding, str):
            raise InputError("a bfp conv: zero padding given as numbers only")
        b, _, h, w_ = x.shape
        cols = Fn.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)     # (B, C*kh*kw, L)
        w = self.quantized_weight()
        g, zg = self.groups, self.out_channels // self.groups
        w2 = w.reshape(self.out_channels, -1) if g == 1 else \
            torch.block_diag(*[w[j * zg:(j + 1) * zg].reshape(zg, -1) for j in range(g)])
        rows = cols.transpose(1, 2).reshape(-1, cols.shape[1])
        y = self._bfp_rows(rows, w2, b)
        oh = (h + 2 * self.padding[0] - self.dilation[0] * (self.kernel_size[0] - 1) - 1) // self.stride[0] + 1
        ow = (w_ + 2 * self.padding[1] - self.dilation[1] * (self.kernel_size[1] - 1) - 1) // self.stride[1] + 1
        return y.reshape(b, oh * ow, self.out_channels).transpose(1, 2).reshape(b, self.out_channels, oh, ow)


class QLinear(_QMixin, nn.Linear):
    def forward(self, x):
        if self.bfp_in is not None:
            return self._bfp_rows(x.reshape(x.shape[0], -1), self.quantized_weight(), x.shape[0])
        x = self._quant_input(x)
        return self._finish(Fn.linear(x, self.quantized_weight(), self._quant_bias()))


def _copy(cls, m):
    if isinstance(m, nn.Conv2d):
        q = cls(m.in_channels, m.out_channels, m.kernel_size, m.stride, m.padding, m.dilation, m.groups,
                m.bias is not None, m.padding_mode)
    else:
        q = cls(m.in_features, m.out_features, m.bias is not None)
    q.load_state_dict(m.state_dict())
    return q


def fold_batchnorm(model):
    """Fold every ``BatchNorm2d`` that directly follows a ``Conv2d`` in an ``nn.Sequential`` into
    the convolution (eval statistics), in place, as the ONNX import folds it: the weights then
    quantized are the ones the engine runs. Returns the model.

    After pruning, call :func:`hlsnn.train.fold_constant_channels` next: a BatchNorm whose conv
    reads only channels pruned away entirely (constants) has no variance, and folding it gives
    weights of hundreds that cancel in float and not in int8."""
    from torch.nn.utils.fusion import fuse_conv_bn_eval
    for mod in list(model.modules()):
        if not isinstance(mod, nn.Sequential):
            continue
        keys = list(mod._modules)
        for a, b in zip(keys, keys[1:]):
            c, bn = mod._modules[a], mod._modules[b]
            if isinstance(c, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d):
                mod._modules[a] = fuse_conv_bn_eval(c.eval(), bn.eval())
                mod._modules[b] = nn.Identity()
    return model


def prepare(model, deploy_config, assignment=None, *, layers=None, overflow_ratio=None, strided_stats=None,
            clip_stats=None):
    """Replace, in place, each ``Conv2d`` / ``Linear`` of ``model`` by its quantized twin
    (:class:`QConv2d` / :class:`QLinear`) in the format the ``assignment`` (a name of the
    config's assignments or an :class:`~hlsnn.deploy.config.Assignment`; default the config's
    first) gives it. ``deploy_config``: a :class:`DeployConfig` or the path of one. ``layers``
    maps torch module names (``model.named_modules()``) to format names, over the assignment's
    per-layer entries and default. ``overflow_ratio`` (None: the config's ``calibration:
    overflow_ratio``, as the deployment takes it): DETERMINE's allowed fraction of saturating
    values. ``strided_stats`` (``all`` or ``kept``; None: the config's
    ``calibration: strided_stats``): which results of a strided ``sparse_cluster`` convolution
    its output radix is chosen from (:meth:`QConv2d._stride1_results`), the deployment's rule.
    ``clip_stats`` (``off`` or ``clipped``; None: the config's ``calibration: clip_stats``): with
    ``clipped``, a layer followed by a ``ReLU6`` (:func:`_fuse_relu`) takes its output radix from
    its results clipped at 6 (``hlsnn.deploy.run.executors._Exec.clip_stats``). Returns the model."""
    cfg = deploy_config if isinstance(deploy_config, DeployConfig) else load_deploy_config(deploy_config)
    if overflow_ratio is None:
        overflow_ratio = cfg.calibration["overflow_ratio"]
    from .checks import OVERFLOW_RATIO
    OVERFLOW_RATIO.check("overflow_ratio", overflow_ratio)
    rules = {"strided_stats": strided_stats, "clip_stats": clip_stats}
    for key, plain, other, _ in STATIC_RULES:
        if rules[key] is None:
            rules[key] = cfg.calibration[key]
        if rules[key] not in (plain, other):
            raise InputError(f"{key} {rules[key]!r}: one of {plain}, {other}")
    strided_stats, clip_stats = rules["strided_stats"], rules["clip_stats"]
    if assignment is None:
        assignment = next(iter(cfg.assignments.values()))
    elif isinstance(assignment, str):
        if assignment not in cfg.assignments:
            raise InputError(f"assignment {assignment!r}: not in {printable(cfg.path)} (its assignments: "
                             f"{', '.join(sorted(cfg.assignments))})")
        assignment = cfg.assignments[assignment]
    layers = dict(layers or {})
    known = {n for n, m in model.named_modules() if isinstance(m, (nn.Conv2d, nn.Linear))}
    unknown = sorted(str(k) for k in layers if k not in known)
    if unknown:
        raise InputError(f"layers: {', '.join(unknown)} is not a Conv2d / Linear of the model (its: "
                         f"{', '.join(sorted(known)) or 'none'})")
    params = {}
    for parent_name, parent in list(model.named_modules()):
        for child_name, m in list(parent._modules.items()):
            if not isinstance(m, (nn.Conv2d, nn.Linear)) or isinstance(m, _QMixin):
                continue
            full = f"{parent_name}.{child_name}" if parent_name else child_name
            fmt_name = layers.get(full, assignment.format_of(full))
            if fmt_name not in cfg.formats:
                raise InputError(f"layer {full}: format {fmt_name!r} is not one of {', '.join(sorted(cfg.formats))}")
            spec = cfg.formats[fmt_name]
            if spec.accel not in params:
                params[spec.accel] = load_config(spec.accel, check_fit=False).params
            q = _copy(QConv2d if isinstance(m, nn.Conv2d) else QLinear, m)
            q._setup(spec, params[spec.accel], overflow_ratio, cfg.rounding)
            q.strided_stats, q.clip_stats = strided_stats, clip_stats
            parent._modules[child_name] = q
    _fuse_relu(model)
    qs = quantized_layers(model)
    for i, (_, q) in enumerate(qs):   # the last one's output is the network's (radix: lse keeps DETERMINE's there)
        q._network_output = i == len(qs) - 1
    for m in model.modules():
        if type(m) in _MOVERS and not getattr(m, "_hlsnn_hooked", False):
            m.register_forward_hook(_keeps_format)
            m._hlsnn_hooked = True
    return model


def _keeps_format(module, inputs, out):
    """Forward hook of the modules that only move values (``Flatten``, ``MaxPool2d``, ``ReLU``,
    ``Identity``; ``ReLU6`` when 6 is a value of the format or beyond its range): the output
    keeps the input's fixed-point format, as ``hlsnn.deploy.run.hostops.out_format`` keeps it."""
    fmt = getattr(inputs[0], "_hlsnn_fmt", None) if inputs else None
    if fmt is None or out is inputs[0]:
        return None
    if isinstance(module, nn.ReLU6):
        f, bits, signed = fmt
        hi = (1 << (bits - 1)) - 1 if signed else (1 << bits) - 1
        v = 6.0 * 2.0 ** f
        if not (v == int(v) and v <= hi) and not v > hi:
            return None
    return tag(out, fmt)


_MOVERS = (nn.Flatten, nn.MaxPool2d, nn.ReLU, nn.ReLU6, nn.Identity)


def _fuse_relu(model):
    """A ``ReLU`` right after a quantized layer in an ``nn.Sequential`` (``Identity`` between
    them allowed: a folded BatchNorm) runs inside the layer, before its output requantization,
    as the engine fuses it; the ``ReLU`` module becomes ``Identity``. A ``ReLU6`` there: its
    ReLU is fused the same way (as the ONNX import fuses a ``Clip``'s), the module stays."""
    for mod in list(model.modules()):
        if not isinstance(mod, nn.Sequential):
            continue
        keys = list(mod._modules)
        for i, k in enumerate(keys):
            q = mod._modules[k]
            if not isinstance(q, _QMixin):
                continue
            j = i + 1
            while j < len(keys) and isinstance(mod._modules[keys[j]], nn.Identity):
                j += 1
            if j < len(keys) and type(mod._modules[keys[j]]) is nn.ReLU:
                q.relu = True
                mod._modules[keys[j]] = nn.Identity()
            elif j < len(keys) and type(mod._modules[keys[j]]) is nn.ReLU6:
                q.relu = True           # the import fuses a Clip's ReLU; the clip at 6 stays on the host
                q.relu6_after = True


@torch.no_grad()
def calibrate(model, x_cal, *, in_training=False):
    """Freeze the radix points of a static deployment: run ``x_cal`` and keep each fixed-point
    activation's radix (DETERMINE on the calibration batch, as ``hlsnn deploy``'s static mode
    does); eval mode then uses them. ``calibrate(model, None)`` unfreezes (current statistics).

    ``in_training``: training mode uses the frozen radixes too (static-radix quantization-aware
    training: every batch of the fine-tuning is converted at the radixes the static deployment
    will run with, not at each batch's own; calibrate again, e.g. every epoch, to follow the
    weights). The model runs ``x_cal`` in ``x_cal``'s dtype (a float32 model is converted and
    back, exactly): calibrate in float64, as the deployment computes, whatever the model trains in.
    Give the deployment the same images (its config's ``calibration: samples`` their number)."""
    from .quant import FixedAct
    acts = [m for m in model.modules() if isinstance(m, FixedAct)]
    for a in acts:
        a.frozen, a.frozen_in_training, a.calibrated_on = None, False, None
    if x_cal is None:
        return model
    if not torch.is_tensor(x_cal) or x_cal.ndim < 1 or x_cal.shape[0] < 1 or not x_cal.is_floating_point():
        raise InputError(f"x_cal: a float tensor of at least one image (batch first), or None; got "
                         f"{type(x_cal).__name__}{tuple(x_cal.shape) if torch.is_tensor(x_cal) else ''}")
    if not bool(torch.isfinite(x_cal).all()):
        raise InputError(f"x_cal: {int((~torch.isfinite(x_cal)).sum())} value(s) NaN or infinite; calibration "
                         "images are finite")
    was = model.training
    p = next(model.parameters(), None)
    dtype = None if p is None or p.dtype == x_cal.dtype else p.dtype
    if dtype is not None:
        model.to(x_cal.dtype)
    model.eval()
    model(x_cal)
    for a in acts:
        a.frozen, a.frozen_in_training = a.last_f, bool(in_training)
        a.calibrated_on = int(x_cal.shape[0])     # the images (the deploy config's calibration: samples)
    model.train(was)
    if dtype is not None:
        model.to(dtype)
    return model


def quantized_layers(model):
    """``(name, layer)`` of the prepared model's quantized layers."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, _QMixin)]
