"""Run an imported network layer by layer on accelerators, in the number format each layer
is assigned, with activations requantized between layers at calibrated radix points.

The rules (the specification every target follows; the host code is the same on all):

* **Activations** between layers are float64 arrays that hold exactly the values the
  hardware produced. Each carries its fixed-point format ``(F, bits, signed)`` when it is one
  (the output of a ``twohot``/``pot``/``fixed``/``sparse`` layer, or a host op that only
  moves values: MaxPool, Flatten, Reshape, Relu; or a unary elementwise op of one, such as
  HardSwish, Sigmoid, Tanh, Gelu or a scalar Scale, which runs as a table of its codes,
  :mod:`hlsnn.engines.network.gate` rule unary_table, :mod:`hlsnn.engines.network.tables`), else
  ``None`` (a BFP layer's output, an average, a sum, a product, the input image).
* **Into a fixed-point layer** (``shift_mac``: the accel config's ``act_bits``/``act_signed``;
  ``sparse_cluster``: int8): a tensor already in that format passes as its integers;
  anything else is converted (:func:`hlsnn.formats.fixed.convert`, the deployment's
  ``rounding``) at a radix point chosen by DETERMINE (source 002) from the statistics of
  the values themselves (:func:`host_radix`).
* **Weights** are quantized once per format and layer: two-hot / power-of-two codes with one
  scale per tensor (``F_w``), or int8 with one power-of-two scale per tensor after magnitude
  pruning (``fixed``/``sparse``); with ``weight_scale: channel`` one ``F_w`` per output
  channel, at most :data:`CHANNEL_FRAC_LIMIT` bits finer than the tensor's, and per-channel
  output shifts (both kernels take one per output; ``_Exec.preceding`` says how the one
  output radix is chosen). The bias becomes an integer in accumulator units,
  ``round(b * 2**(F_x + F_w))``. Shift formats with ``weight_fit: output`` (the default)
  re-choose their codes and bias when calibrating, on the calibration inputs
  (:mod:`hlsnn.deploy.quantize.shift_fit`); the scale exponents stay. A format with
  ``bias_correction: empirical`` (or ``auto``, the default, where
  :func:`hlsnn.deploy.quantize.biascorr.policy` says so: bfp in a network with a grouped conv) moves
  each layer's float bias to the float network's mean output per channel first
  (:mod:`hlsnn.deploy.quantize.biascorr`).
* **Output radix point** of a fixed-point layer: the *preceding operation* runs the layer
  with the engine's statistics unit on (the MSB histogram of the wide results, read back
  from the kernel), DETERMINE picks ``F_out`` (``overflow_ratio`` of the deployment) and the
  *main operation* runs with the output shift ``F_x + F_w - F_out``. In ``static`` mode this
  happens once, on the calibration images, and the radix points stay fixed; in ``dynamic``
  mode every batch does it (source 002's E1). With ``update="e5"`` each layer instead runs
  E2 or E4 on a sample of the images, whichever the cycle model says is faster
  (:mod:`hlsnn.deploy.quantize.update`). A strided convolution on ``sparse_cluster`` runs as its
  stride-1 form, so its statistics cover every stride-1 result; with ``strided_stats="kept"``
  (static mode, ``update="e1"`` only) its calibrated ``F_out`` is DETERMINE's on the
  outputs the stride keeps instead (:meth:`hlsnn.deploy.run.executors.SparseExec.kept_stats`).
  With ``clip_stats="clipped"`` (static, ``update="e1"`` only) a fixed-point layer whose output
  goes only into a ``Clip`` (ReLU6) takes its calibrated ``F_out`` from its results clipped at
  the Clip's bounds (:meth:`hlsnn.deploy.run.executors._Exec.clip_stats`).
* **BFP layers** quantize their input per sample (``mantissa_bits`` of the accel config;
  an all-zero sample gets the layer's exponent ``clamp(be - max we)``, the engine emulator's
  rule 0, so that its output is exactly the bias whatever shares its batch) and return the dequantized BFP
  output; convolutions run as GEMM on host im2col (one sample per patch).
* **One program on emu**: a calibrated network of ``shift_mac`` or ``sparse_cluster`` layers
  on one accelerator runs, not calibrating, as the network mode's integer program compiled
  (:mod:`hlsnn.deploy.run.fast`; the rules of :mod:`hlsnn.deploy.lower.program`, which give
  these rules' bits): :meth:`Deployment.fast_network`.
* **Tiling**: outputs (N or Z) are split into chunks of the kernel's maximum and the batch
  into chunks the kernel accepts. ``bfp_systolic`` runs a K beyond ``max_k`` in passes inside
  the kernel, with exact partial sums on chip, up to its ``k_limit`` (a longer K is an error
  naming the layer and the limit). ``shift_mac`` and ``sparse_cluster`` run a K beyond
  ``max_k`` / ``max_in_channels`` as raw calls (the kernel's exact sums over a chunk of K),
  added on the host in int64, where the kernel's own output rules act on the total
  (``ShiftExec``, ``SparseExec``): the same bits as one call that could hold the whole K.
"""
from __future__ import annotations

import time

import numpy as np

from ...engines import convgeom as conv
from ...engines.network import gate as netgate
from ...engines.network.tokens import layernorm
from . import gatecodes, tablecodes as tablein
from ...errors import InputError
from ..quantize import biascorr, radix_lse, radix_search, shift_auto, shift_netfit
from . import hostops, samplewise
from ..quantize import update as updates
from ..config import STATIC_RULES
from . import attnrun, lnsum
from ..lower.programrev import LAYERNORM, LAYERNORM_SUM
from .executors import EXECS, BfpExec, ShiftExec
from .hostquant import HostQuant, check_host_bits
from ..quantize.quant import Act


class Deployment:
    """A network with every engine layer bound to a format and an accelerator on a target.

    ``accelerators`` maps accel config paths to open :class:`~hlsnn.Accelerator` objects
    (shared between deployments on one target; the caller closes them). ``update``
    (``"e1"`` or ``"e5"``), ``update_by`` (``"layer"`` or ``"op_type"``) and ``update_percent``:
    how the fixed-point layers update their radix points (:mod:`hlsnn.deploy.quantize.update`).
    """

    #: the layers' input densities for the report (a pass over each layer's input; a compiled
    #: network, :mod:`hlsnn.network`, turns it off)
    collect_stats = True

    def __init__(self, net, assignment, formats, accelerators, *, overflow_ratio=0.0, rounding="nearest_away",
                 dynamic=False, host_bits=None, update="e1", update_by="layer", update_percent=updates.DEFAULT_PERCENT,
                 strided_stats="all", clip_stats="off", qmap=None, recalibrate=False):
        self.net, self.assignment, self.formats = net, assignment, formats
        # a quantized file's own quantization (hlsnn.deploy.importer.qimport.layer_mapping): after every
        # calibration the layers it maps exactly take the file's radix points (for_assignment), the
        # record in :attr:`imported`; recalibrate keeps the calibrated ones (reported as such)
        self.qmap, self.recalibrate, self.imported = dict(qmap or {}), bool(recalibrate), None
        rules = {"strided_stats": strided_stats, "clip_stats": clip_stats}
        for key, plain, other, unit in STATIC_RULES:
            if rules[key] not in (plain, other):
                raise InputError(f"{key} {rules[key]!r}: one of {plain}, {other}")
            if rules[key] == other and (dynamic or update != "e1"):
                raise InputError(f"{key} {other!r} applies to static calibration with update e1 only; in dynamic "
                                 f"mode (and E2/E4) the statistics unit {unit}: use {plain!r}")
        self.clip_stats, self.strided_stats = clip_stats, strided_stats
        self.overflow_ratio, self.rounding, self.dynamic = overflow_ratio, rounding, dynamic
        self.update, self.update_by, self.update_percent = updates.check(update, update_by, update_percent)
        if host_bits is not None:
            check_host_bits(host_bits)
        # the quantized host mode: host layers that compute (not only move values) in fixed point
        self.host = {layer.name: HostQuant(layer, host_bits, self) for layer in net.layers
                     if host_bits is not None and layer.kind == "host" and layer.op not in hostops.EXACT}
        self.execs, self._accelerators = {}, accelerators
        for layer in net.engine_layers():
            fmt = formats[assignment.format_of(layer.name)]
            self.execs[layer.name] = EXECS[fmt.type](layer, fmt, accelerators[fmt.accel], self)
        # a MatMul of two computed tensors: both quantized at run time, multiplied in integers
        self.actmm = samplewise.quantizers(net, assignment, formats, self.execs)
        unknown = set(assignment.layers) - set(self.execs)
        if unknown:
            raise InputError(f"assignment {assignment.name}: no engine layer named {', '.join(sorted(unknown))}; "
                             f"engine layers: {', '.join(self.execs)}")
        self.calibrated = False
        self._fastnet = None     # the calibrated network as one integer program (:meth:`fast_network`)

    #: run a calibrated network on the emu target as one integer program where it lowers to
    #: one (:meth:`fast_network`), a network of BFP layers through :mod:`hlsnn.deploy.run.bfpfast`
    #: (:meth:`BfpExec.run_network`); False keeps the layer-by-layer path
    fast = True

    #: images per pass of :meth:`run` (not calibrating): a batch goes through the network in
    #: slices of this many, so that a layer's im2col rows and outputs stay in the CPU's caches
    chunk = 32

    def run(self, x, *, calibrate=False, keep=False):
        """Run the network on ``x`` (float input batch). ``calibrate`` re-chooses every radix
        point from this batch (the preceding operations). ``keep`` returns every tensor.

        Not calibrating (and not ``dynamic``), every image's outputs depend on that image
        alone (each radix point and weight is fixed; a BFP exponent is per sample), so on the
        ``emu`` target a batch runs in slices of :attr:`chunk` images with the same bits (a BFP
        layer's all-zero sample takes the layer's exponent, not its call's); the
        layers' statistics are then those of the whole batch (saturations add, input densities
        are weighted by images; ``calls`` counts the calls made). A ``bfp`` layer whose config
        predicts exponents with the ``rolling`` method carries state from sample to sample: it
        runs whole. Other targets take the batch in one piece, as a board would.

        On ``emu``, a calibrated network that lowers to the integer network mode runs as one
        compiled program (:meth:`fast_network`), and a network of BFP layers (calibrating too)
        through :mod:`hlsnn.deploy.run.bfpfast` (:meth:`BfpExec.run_network`), with the same
        bits and statistics."""
        if not calibrate and not self.calibrated and not self.dynamic:
            raise InputError("calibrate first: run(x_cal, calibrate=True)")
        x = self._input(x)
        n = x.shape[0] if x.ndim else 0
        if calibrate and not n:
            raise InputError("calibrating takes at least one image: the radix points come from the images' "
                             "statistics")
        if not keep and n:
            y = BfpExec.run_network(self, x, calibrate)
            if y is not None:
                return y
        if not calibrate and not keep and n:
            fast = self.fast_network()
            if fast is not None:
                return self._run_fast(fast, x)
        if (calibrate or self.dynamic or n <= self.chunk
                or any(ex.acc.target.name != "emu" or ex.p.get("output_exponent") == "rolling"
                       for ex in self.execs.values())):
            return self._run(x, calibrate, keep)
        parts, sat, dens = [], {k: 0 for k in self.execs}, {k: 0.0 for k in self.execs}
        for i0 in range(0, n, self.chunk):
            xs = x[i0:i0 + self.chunk]
            parts.append(self._run(xs, False, keep))
            for k, ex in self.execs.items():
                sat[k] += ex.stats.sat_count
                dens[k] += ex.stats.input_density * len(xs)
        for k, ex in self.execs.items():
            ex.stats.sat_count, ex.stats.input_density = sat[k], dens[k] / n
            if ex.in_shape is not None:
                ex.in_shape = (n,) + tuple(ex.in_shape[1:])
        if not keep:
            return np.concatenate(parts)
        return (np.concatenate([p[0] for p in parts]),
                {k: np.concatenate([p[1][k] for p in parts]) for k in parts[0][1]})

    def _input(self, x):
        """``x`` as float64, or :class:`InputError` when its per-image size is not the network's."""
        x = np.asarray(x, np.float64)
        want = tuple(getattr(self.net, "input_shape", None) or ())[1:]
        if want and all(isinstance(d, int) for d in want) and (
                x.ndim < 2 or int(np.prod(x.shape[1:])) != int(np.prod(want))):
            raise InputError(f"input of shape {x.shape}: {self.net.name} takes (batch,) + {want} "
                             f"({int(np.prod(want))} values per image)")
        return x

    def fast_network(self):
        """The calibrated network as one integer program on the ``emu`` target
        (:mod:`hlsnn.deploy.run.fast`: :mod:`hlsnn.deploy.lower.program`'s rules, the bits of the
        layer-by-layer path, compiled), or None where it runs layer by layer: :attr:`fast`
        off, ``dynamic`` radix points, another target, quantized host layers, the compiled
        helpers off (``HLSNN_NATIVE=0``), or a network the network mode refuses (a
        ``bfp_systolic`` layer, mixed accelerators, an op without an integer rule:
        :func:`hlsnn.deploy.lower.program.lower`). Made once per calibration."""
        if not (self.fast and self.calibrated):
            return None
        if getattr(self, "_fastnet", None) is None:
            self._fastnet = False
            from . import fast as netfast
            try:
                net = self._lowered()
                fn = None if net is None else netfast.build(net)
            except InputError:
                fn = None
            self._fastnet = fn if fn is not None else False
        return self._fastnet or None

    def _lowered(self, any_target=False):
        """The deployment as a network-mode program (:func:`hlsnn.deploy.lower.program.lower` of
        its compiled layer program), None where it has not one accelerator (on ``emu``, unless
        ``any_target``) of an engine :mod:`hlsnn.deploy.run.fast` runs, or :class:`InputError`
        where netmode refuses it. Reads the layers' radix points as they are."""
        from types import SimpleNamespace
        from . import fast as netfast
        from ..lower import program as netmode
        from ..lower.layers import program_of
        if self.dynamic or self.host or getattr(self, "actmm", None) \
                or (not any_target and any(ex.acc.target.name != "emu" for ex in self.execs.values())) \
                or not all(isinstance(d, int) for d in self.net.input_shape[1:]):
            return None
        accs = {fmt.accel: self.execs[la.name].acc for la in self.net.engine_layers()
                for fmt in [self.formats[self.assignment.format_of(la.name)]]}
        if len({id(a) for a in accs.values()}) != 1 or next(iter(accs.values())).config.engine not in netfast.RULES:
            return None
        cfg = SimpleNamespace(name=self.net.name, formats=self.formats, rounding=self.rounding,
                              assignments={self.assignment.name: self.assignment},
                              calibration={"overflow_ratio": self.overflow_ratio, "update": self.update})
        program, arrays = program_of(self, self.net, cfg, self.assignment.name, accs, x_cal=0)
        net = netmode.lower(program, arrays)
        return None if net.host_before else net      # host ops on the float input: the layer path calibrates

    def _run_fast(self, fn, x):
        """:meth:`run` through :meth:`fast_network`; the layers' ``sat_count`` and
        ``input_density`` as the layer path counts them (``calls``: none made)."""
        from ..lower import program as netmode
        q, sat, nz = fn.run(x.reshape((len(x),) + tuple(fn.net.input["shape"])), floats=True)    # rule input_quantize in C
        n = x.shape[0]
        for ln, ex in self.execs.items():
            f = fn.convs[ln].f
            ex.stats.sat_count = int(sat[ln])
            if ex.in_shape is not None:
                ex.in_shape = (n,) + tuple(ex.in_shape[1:])
            if not self.collect_stats:
                continue
            if isinstance(ex, ShiftExec) and not f["dense"]:       # non-zeros of the im2col rows
                k = f["c"] * f["kh"] * f["kw"]
                ex.stats.input_density = conv.patch_count(nz[ln].reshape(f["h"], f["w"]), ex.layer.geom) / max(
                    n * f["oh"] * f["ow"] * k, 1)
            else:                                                  # of the input
                ex.stats.input_density = int(nz[ln].sum()) / max(n * f["c"] * f["h"] * f["w"], 1)
        return netmode.finish(fn.net, q, x=x)

    def _run(self, x, calibrate, keep):
        if calibrate:
            self._fastnet = None             # a new calibration: a new program
            shift_netfit.prepare(self, x)    # weight_fit: network's float inputs, unless calibrate() made them
        env = {self.net.input: Act(x, None)}
        last = self.net.layers.index(self.net.engine_layers()[-1]) if self.net.engine_layers() else -1
        luts = self.bfp_luts()
        for k, layer in enumerate(self.net.layers):
            ins = [env[i] for i in layer.inputs]
            if layer.kind == "host" and k < last and \
                    (y := attnrun.layer_run(self, layer, ins, calibrate, env)) is not None:
                env[layer.output] = y                 # attention's rules class_token, add_const, act_matmul, int_softmax, residual_codes, layer_norm_codes (deploy.run.attnrun)
            elif layer.name in getattr(self, "actmm", ()):
                env[layer.output] = Act(self.actmm[layer.name].run([a.values for a in ins]), None)
            elif layer.name in self.host:
                env[layer.output] = self.host[layer.name].run(ins, calibrate)
            elif layer.name in luts:                   # a table of a BFP layer's output (netbfp rule bfp_table)
                env[layer.output] = Act(*self._bfp_lut(layer, ins[0], luts[layer.name], calibrate))
            elif layer.kind == "host" and k < last and (bits := tablein.code_bits(self.net, layer, env)):   # table_in
                env[layer.output] = Act(*tablein.run(self, layer, ins[0], bits, calibrate))
            elif layer.kind == "host" and k < last and (bits := gatecodes.operand_bits(self, layer, env, BfpExec)):
                env[layer.output] = Act(*gatecodes.run(self, layer, ins, bits, calibrate, BfpExec))   # rule gate_in
            elif layer.kind == "host" and k < last and (bits := lnsum.sum_bits(self.net, layer, env)) \
                    and (getattr(self, "origin", None) or {}).get("revision", LAYERNORM_SUM) >= LAYERNORM_SUM \
                    and (y := lnsum.sum_run(self, layer, ins[0], bits, calibrate)) is not None:   # layer_norm_sum: a residual sum
                env[layer.output] = Act(y, None)
            elif layer.kind == "host" and k < last and layernorm.applies(layer, ins[0]) \
                    and (getattr(self, "origin", None) or {}).get("revision", LAYERNORM) >= LAYERNORM:   # rule layer_norm
                env[layer.output] = Act(layernorm.host_run(layer, ins[0], self.rounding), None)
            elif layer.kind == "host" and k < last and netgate.applies(layer.op, ins[0].fmt, layer.attrs,
                                                                             np.ndim(ins[0].values)):   # a table on integers (9, channel_table)
                env[layer.output] = Act(*netgate.host_run(layer, ins[0], self.rounding,
                                                          self._table_radix(layer, ins[0], calibrate)))
            elif layer.kind == "host":
                out = hostops.run(layer, [a.values for a in ins])
                env[layer.output] = Act(out, hostops.out_format(layer, [a.fmt for a in ins]))
            else:
                if calibrate and getattr(self, "_bias_ref", None) is not None:     # hlsnn.deploy.quantize.biascorr
                    biascorr.correct(self, layer, ins[0])
                env[layer.output] = self.execs[layer.name].run(ins[0], calibrate)
        if calibrate:
            self.calibrated = True
            if self.update == "e5" and not getattr(self, "update_force", None):   # (hlsnn.seed002 forces one)
                updates.choose(self.execs, self.update_by)      # after iteration A (Alg 2-E)
        y = env[self.net.output].values
        return (y, {k: a.values for k, a in env.items()}) if keep else y

    def _table_radix(self, layer, act, calibrate):
        """Rule unary_table's output radix ``F_o`` of table ``layer`` on ``act``: DETERMINE (signed ``b``
        bits) on the op's float64 values, the radix the next engine layer chose for them before
        tables ran there; chosen when calibrating (every batch when ``dynamic``), kept in
        :attr:`table_radix`. None (the largest radix where every entry fits) for the ops of
        ``MAX_FIT`` of :mod:`hlsnn.engines.network.gate`, but for a ``HardSwish`` of a two-hot
        layer's output whose format takes ``radix: lse`` (:meth:`_lse_table`): there DETERMINE's
        radix or up to 3 bits finer, the least squared error on the op's values
        (:func:`hlsnn.deploy.quantize.radix_lse.input_radix`), as that layer chose its own output radix."""
        radix = self.__dict__.setdefault("table_radix", {})
        if not calibrate and not self.dynamic:               # the calibrated radix (a loaded program's too)
            if layer.name in radix or layer.op in netgate.MAX_FIT:
                return radix.get(layer.name)
            from ..lower.programrev import older
            why = older(getattr(self, "origin", None), "table of a PRelu per channel") \
                if not netgate.is_table(layer.op, layer.attrs) else None
            raise InputError(f"layer {layer.name}: no calibrated output radix for its table (rule unary_table)"
                             + (f": {why}" if why else ""))
        lse = self._lse_table(layer)
        if layer.op in netgate.MAX_FIT and not lse:      # the tables of before: the radix where every entry fits
            radix.pop(layer.name, None)                  # (not one an earlier format's calibration left: shift_auto)
            return None
        from ..quantize.quant import host_radix        # DETERMINE on the op's float64 values: the next layer's radix before
        v, b = hostops.run(layer, [act.values]), int(act.fmt[1])
        radix[layer.name] = int(host_radix(v, b, True, self.overflow_ratio))
        if lse:
            radix[layer.name] = int(radix_lse.input_radix(v, radix[layer.name], b, True, self.rounding))
        return radix[layer.name]

    def _lse_table(self, layer):
        """True for a ``HardSwish`` table whose input is the output of a ``twohot`` layer with
        ``radix: lse`` (:mod:`hlsnn.deploy.quantize.radix_lse`): its output radix is chosen by least
        squared error, not kept where every entry fits. HardSwish is unbounded above and near
        zero below, so the radix where every entry of the input's range fits spends its codes on
        values the calibration rarely reaches. Sigmoid and HardSigmoid, bounded gates, keep it; so
        does a ``pot`` or ``fixed`` layer's HardSwish (a calibrated radix lost accuracy there)."""
        if layer.op != "HardSwish":
            return False
        src = next((la for la in self.net.layers if la.output == layer.inputs[0]), None)
        fmt = getattr(self.execs.get(src.name), "fmt", None) if src is not None else None
        return fmt is not None and fmt.type == "twohot" and getattr(fmt, "radix", "msb") in ("lse", "search")

    def bfp_luts(self):
        """``{host layer: code bits}`` run by rule bfp_table (:mod:`hlsnn.engines.bfp_systolic.network.gate`):
        tables of BFP layers' outputs with an engine layer after them."""
        from ...engines.bfp_systolic.network.gate import host_layers
        out = host_layers(self.net.layers, self.execs, BfpExec)
        out.update((k, b) for k, b in getattr(self, "bfp_bits", {}).items() if k in out)   # a loaded program's (bfp_wide_codes)
        return out

    def _bfp_lut(self, layer, act, bits, calibrate):
        """Rule bfp_table of host ``layer`` on ``act``: its code radix chosen by DETERMINE when
        calibrating (every batch when ``dynamic``), kept in :attr:`bfp_radix`."""
        from ...engines.bfp_systolic.network.gate import EXACT, host_run, tabled
        from ..quantize.quant import host_radix
        if layer.op in EXACT and not tabled(layer, self.net.layers):    # rule bfp_hardswish: exact on the pairs, no radix
            return host_run(layer, act.values, None, bits, self.rounding)
        radix = self.__dict__.setdefault("bfp_radix", {})
        if calibrate or self.dynamic or layer.name not in radix:
            if not calibrate and not self.dynamic:
                raise InputError(f"layer {layer.name}: no calibrated code radix for its table (rule bfp_table)")
            radix[layer.name] = host_radix(act.values, bits, True, self.overflow_ratio)
        return host_run(layer, act.values, radix[layer.name], bits, self.rounding)

    def calibrate(self, x_cal):
        """Choose every radix point from ``x_cal`` (:meth:`run` with ``calibrate``): on ``emu``,
        where the network lowers to the integer network mode, as compiled integer ops that
        set the same state (:mod:`hlsnn.deploy.quantize.calibrate`); where a layer's format has
        ``bias_correction: empirical`` (or ``auto`` resolving to it), layer by layer with the corrected biases
        (:mod:`hlsnn.deploy.quantize.biascorr`). A shift format's ``radix: auto`` / ``weight_fit: auto``
        calibrates once per candidate and keeps the one nearest the float model on ``x_cal``
        (:mod:`hlsnn.deploy.quantize.shift_auto`, :attr:`shift_choice`). A ``sparse`` format with
        ``prune_shape: kernel`` prunes and refits its layers' float weights on ``x_cal`` first
        (:mod:`hlsnn.deploy.quantize.kprune`). Returns the seconds it took."""
        t = time.perf_counter()
        from ..quantize import chain_equalize, equalize
        x_cal = self._input(x_cal)
        net, scales = equalize.balance(self.net, x_cal, self.assignment, self.formats)
        if scales:                           # skip Concats of two scales, balanced (exact in float)
            self.net, self.balanced = net, scales
            for layer in net.engine_layers():
                if layer.name in scales:
                    fmt = self.formats[self.assignment.format_of(layer.name)]
                    self.execs[layer.name] = EXECS[fmt.type](layer, fmt, self._accelerators[fmt.accel], self)
        net, chains = chain_equalize.apply(self.net, x_cal, self.assignment, self.formats)
        if chains:                           # equalize: channels, conv -> ReLU -> conv (exact in float)
            self.net, self.chain_scales = net, chains
            for layer in net.engine_layers():
                if self.execs[layer.name].layer is not layer:
                    fmt = self.formats[self.assignment.format_of(layer.name)]
                    self.execs[layer.name] = EXECS[fmt.type](layer, fmt, self._accelerators[fmt.accel], self)
        from ..quantize import kprune
        net, pruned = kprune.apply(self.net, x_cal, self.assignment, self.formats, self._accelerators)
        if pruned:                           # prune_shape: kernel, pruned and refitted on x_cal (float weights)
            self.net, self.kernel_pruned = net, pruned
            for name in pruned:
                layer = net.layer(name)
                fmt = self.formats[self.assignment.format_of(name)]
                self.execs[name] = EXECS[fmt.type](layer, fmt, self._accelerators[fmt.accel], self)
        if shift_auto.wanted(self):          # a shift format's radix, weight_fit: auto, by fidelity to float
            shift_auto.choose(self, x_cal, self._calibrate_once)
        else:
            self._calibrate_once(x_cal)
        if self.qmap:                        # a quantized file: its radix points where they map exactly
            from ..importer import qimport
            self.imported = qimport.for_assignment(self.qmap, self, self.recalibrate)
        return time.perf_counter() - t

    #: ``"classification"`` or ``"regression"`` where the caller knows it (``hlsnn deploy``,
    #: ``hlsnn compile``): how a shift format's ``auto`` fields score a candidate (:mod:`hlsnn.deploy.quantize.shift_auto`)
    task = None

    #: the calibration images' integer labels where the caller has them (``hlsnn deploy``, ``hlsnn
    #: compile``: the data set's ``y_train``): a classifier's shift ``auto`` fields are chosen by
    #: them first (:mod:`hlsnn.deploy.quantize.shift_auto`)
    cal_labels = None

    def _calibrate_once(self, x_cal):
        from ..quantize import calibrate as netcal
        shift_netfit.prepare(self, x_cal)    # weight_fit: network's float inputs (one float pass)
        try:
            if biascorr.wanted(self):        # bias_correction: empirical (or auto), layer by layer
                biascorr.calibrate(self, x_cal)
            elif not netcal.calibrate(self, x_cal):
                self.run(x_cal, calibrate=True)
            if radix_search.wanted(self):  # radix: search, end to end on the calibration images
                self.radix_search = radix_search.refine(self, x_cal)
            from ..quantize import outfit
            if outfit.wanted(self):        # bfp/fixed/sparse weight_fit: network, the output layer refitted
                self.output_fit = outfit.refit(self, x_cal)
        finally:
            self._netfit = None              # the float inputs are not needed after the calibration


def float_forward(net, x):
    """The imported network in float64 (dense/conv in numpy): checks the importer's algebra
    (folding, fusion) against onnx's evaluation; deployment accuracy never uses it."""
    from .hostops import float_tensors
    return float_tensors(net, x)[net.output]
