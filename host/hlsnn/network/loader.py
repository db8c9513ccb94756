"""A compiled network, loaded: ``net = hlsnn.load("digits_cnn.hlsnn", target="sim"); y = net(x)``.

What a board needs is numpy, pynq (on ``target="pynq"``) and this package: no onnx, no
scikit-learn, no PyYAML, no data set, no calibration. The loader

* rebuilds each accelerator config from the JSON the file holds and checks its SHA-256
  against the one recorded at compile time; on ``pynq`` (or with ``overlays=``) the overlay's
  own config must have that hash, else :class:`~hlsnn.errors.InputError` says which overlay
  differs and how;
* rebuilds every engine layer from its stored codes and radix points
  (:func:`hlsnn.deploy.lower.layers.restore`) and runs the network with the deployment runner's
  own code (:class:`hlsnn.deploy.run.runner.Deployment`, static radix points), so a compiled
  network gives the bits its deployment gave when it was compiled, on every target;
* with ``self_check=True`` (the default) runs the stored input/output pairs and raises
  :class:`~hlsnn.errors.HlsnnError` on the first differing bit of the last engine layer's
  output (the logits before a host Softmax; the network's float output is compared to 1e-12
  relative, since a host ``exp`` may differ in its last bit between CPUs).
"""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..errors import HlsnnError, InputError, excerpt, printable
from . import artifact
from ..deploy.lower import program as netmode
from ..deploy.lower import netprefix
from ..deploy.lower.layers import DeployStub, _host_layer, restore
from ..deploy.lower import programrev
from .board import is_network_overlay

TARGETS = ("emu", "csim", "sim", "pynq")
#: targets with the network path (hlsnn.deploy.lower.program on emu, the network kernel's
#: C-simulation on csim, on the simulated board through pynq on sim, and on a board's
#: network overlay through pynq on pynq: hlsnn.network.board)
NETWORK_TARGETS = ("emu", "csim", "sim", "pynq")
#: The most input values one ``run`` takes (a batch of B images of n values: B * n), on every
#: target: 128 Mi, what the PYNQ-Z2's contiguous memory (its CMA pool, 128 MiB) holds at one
#: byte per value, the least a kernel's input buffer takes for a value. A larger batch is
#: refused before anything is allocated; split it into runs of at most this many values.
MAX_RUN_VALUES = 128 << 20


def _c_host(net):
    """True when the C host path (:mod:`hlsnn.network.nethost`) runs ``net``'s starts."""
    from . import nethost
    return nethost.covers(net) and nethost.available()


class _NetStub:
    def __init__(self, name, inp, out, layers):
        self.name, self.input, self.output, self.layers = name, inp, out, layers

    def engine_layers(self):
        return [la for la in self.layers if la.kind in ("dense", "conv")]


def config_of(entry, source):
    """The accelerator Config a program's ``accels`` entry describes, its hash checked."""
    from ..config import config_from_data
    cfg = config_from_data({k: v for k, v in entry["config"].items() if k != "board"}, entry["config"]["board"],
                           source=source)
    cfg = replace(cfg, stem=entry.get("stem") or cfg.name)
    if cfg.sha != entry["sha"]:
        raise InputError(f"{source}: accel config {cfg.name} hashes to {cfg.sha[:12]}, but the file records "
                         f"{entry['sha'][:12]}: the compiled model is damaged; compile it again")
    return cfg


def overlay_config(overlay):
    """The config of an ``overlays`` entry: an overlay folder's (its manifest's, or its ``.bit``'s)
    or that of a config (a name, a YAML path, a dict, a Config) as ``Accelerator`` reads it."""
    import os
    if isinstance(overlay, (str, os.PathLike)) and (Path(overlay).is_dir() or str(overlay).endswith(".bit")):
        from ..runtime.pynq_target import config_from_manifest, overlay_files, read_manifest
        return config_from_manifest(read_manifest(overlay_files(overlay)[2]))
    from ..runtime import Accelerator
    return Accelerator(overlay, "emu").config


def kernel_class(net):
    """The network kernel's class (C-simulation) for a lowered network's engine, or None;
    :class:`InputError` for an op no kernel has a loop for (:func:`hlsnn.engines.network.move.refuse_kernel`)."""
    from ..engines.network.move import refuse_kernel
    refuse_kernel(net)
    if net.engine == "shift_mac":
        from ..engines.network.kernel import NetKernel
        return NetKernel
    if net.engine == "sparse_cluster":
        from ..engines.sparse_cluster.network import kernel as sparsekernel
        return getattr(sparsekernel, "SparseNetKernel", None)
    if net.engine == "bfp_systolic":
        from ..engines.bfp_systolic.network.kernel import BfpNetKernel
        return BfpNetKernel
    return None


def kernel_network(program, arrays):
    """``(net, cls)``: a compiled model's lowered network and its network kernel's class, or
    :class:`InputError` saying why the network kernels do not run it (what :func:`netmode.lower`
    refuses, an engine without a network kernel, what the kernel's own tables refuse)."""
    net = netmode.lower(program, arrays)
    cls = kernel_class(net)
    if cls is None:
        raise InputError(f"engine {net.engine} has no network kernel yet")
    if hasattr(cls, "check"):
        cls.check(net)
    return net, cls


class CompiledNet:
    """A compiled model on a target: ``net(x)`` runs a batch (float input, the model's layout)
    and returns the network's output (float64). :meth:`close` (or ``with``) releases the
    accelerators. ``net.program`` is the layer program, ``net.last_host_s`` the host time of
    the last call with the kernels' wall time subtracted where the target reports it."""

    def __init__(self, path, target="emu", *, overlays=None, self_check=True, network=None, **target_options):
        self.path = str(path)
        with artifact.as_internal_error(self.path):
            self._init(path, target, overlays, self_check, network, target_options)

    def _init(self, path, target, overlays, self_check, network, target_options):
        from ..runtime import Accelerator
        from ..deploy.run import samplewise
        from ..deploy.run.runner import Deployment
        if target not in TARGETS:
            raise InputError(f"target = {target!r}: must be one of {', '.join(TARGETS)}")
        if network not in (None, True, False):
            raise InputError(f"network = {network!r}: must be None (where it runs), True or False")
        if target in ("sim", "pynq") and "timeout" in target_options:    # before any kernel is compiled
            from ..errors import seconds
            seconds("timeout", target_options["timeout"])
        self.path = str(path)
        self.program, arrays = artifact.read(path)
        prog = self.program
        self.target = target
        # the network path (one kernel start per batch): the network mode on emu, the network
        # kernel on csim; elsewhere, and for networks it cannot run, layer by layer
        self.network, self._kernel, self.last_kernel_starts = None, None, 0
        self._fast = None                    # the emu network mode compiled (netfast), made on first use
        self._c_ok = None                    # whether the C host path runs the starts (_c_host), on first use
        self._c_run = None                   # the C host path's fixed facts for run's fast path (_c_setup)
        self._network_auto = network is None
        from collections.abc import Mapping
        if overlays is not None and not isinstance(overlays, Mapping):  # the caller's, not the model's, mistake
            raise InputError(f"overlays = {excerpt(overlays, 40)}: must be a dict {{accelerator: overlay folder}}")
        overlays = dict(overlays or {})
        unknown = set(overlays) - set(prog["accels"])
        if unknown:
            raise InputError(f"overlays: {', '.join(sorted(unknown))} is not an accelerator of {printable(path)}; it "
                             f"uses {', '.join(prog['accels'])}")
        if network is not False:
            if network and target not in NETWORK_TARGETS:
                raise InputError(f"network=True: the network kernel runs on {', '.join(NETWORK_TARGETS)} so far, "
                                 f"not on {target}")
            # overlay folders on sim or pynq: the network path runs on network overlays (and
            # network=True refuses a layer kernel's folder by name); layer folders run layer by layer
            use = target in NETWORK_TARGETS and (network or target not in ("sim", "pynq") or not overlays
                                                 or all(is_network_overlay(f) for f in overlays.values()))
            try:
                self.network = netmode.lower(prog, arrays) if use else None
                if self.network is not None and target != "emu":
                    cls = kernel_class(self.network)
                    if cls is None:
                        raise InputError(f"network kernel: engine {self.network.engine} has a network mode (emu) "
                                         f"but no network kernel yet, so not on {target}")
                    if hasattr(cls, "check"):        # what the kernel refuses (its tables), before building it
                        cls.check(self.network)
                if self.network is not None and target == "pynq" and self.network.accel not in overlays:
                    raise InputError(f"network=True on pynq: give overlays={{{self.network.accel!r}: the network "
                                     f"overlay folder}} (hlsnn run: --overlay {self.network.accel}=FOLDER; "
                                     f"docs/network-host.md, 'The network overlay')")
            except InputError:
                self.network = None
                if network:
                    raise
        self._target_options = dict(target_options)
        if self.network is not None:
            target, target_options = "emu", {}      # the accelerators only check the configs' hashes
        if target == "pynq" and set(overlays) != set(prog["accels"]):
            opts = " ".join(f"--overlay {a}=FOLDER" for a in prog["accels"])
            raise InputError(f"target pynq: give overlays={{name: overlay folder}} for every accelerator of "
                             f"{printable(path)}: "
                             f"{', '.join(prog['accels'])} (hlsnn run: {opts}; a network overlay, "
                             f"overlays/<config>_net, runs the model in one start)")
        self.accs = {}
        try:
            for key, entry in prog["accels"].items():
                cfg = config_of(entry, self.path)
                ov = overlays.get(key)
                # the overlay's config (a layer overlay's from its manifest), its hash compared before its
                # target is built (sim compiles the kernel's library); with the network path the accelerators
                # run on emu and a network overlay's hash is checked by the network kernel's board (netboard)
                on_net = ov is not None and self.network is not None
                got = cfg if ov is None or on_net and is_network_overlay(ov) else overlay_config(ov)
                if got.sha != cfg.sha:
                    raise InputError(
                        f"overlay {ov}: its config {got.name} has hash "
                        f"{got.sha[:12]}, but {Path(self.path).name} was compiled for {cfg.name} with hash "
                        f"{cfg.sha[:12]}; build the overlay from the same config, or compile the model again "
                        f"against this overlay's config")
                try:
                    self.accs[key] = Accelerator(cfg if ov is None or on_net else ov, target, **target_options)
                except artifact.DAMAGE as exc:       # the caller's target options (timeout="x"), not the model
                    if isinstance(exc, HlsnnError):
                        raise
                    raise InputError(f"target {target} with options {excerpt(target_options, 80)}: "
                                     f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}") from exc
            dstub = DeployStub(prog["rounding"], prog["overflow_ratio"])
            layers, execs = [], {}
            for j in prog["layers"]:
                if j["kind"] == "host":
                    layers.append(_host_layer(j, arrays))
                    continue
                pre = j["name"] + "/"            # ONNX names may hold slashes themselves ("/0/Conv")
                sub = {k[len(pre):]: v for k, v in arrays.items() if k.startswith(pre)}
                ex = restore(j, sub, self.accs[j["accel"]], dstub)
                execs[j["name"]] = ex
                layers.append(ex.layer)
            dep = Deployment.__new__(Deployment)
            dep.net = _NetStub(prog["name"], prog["input"]["name"], prog["output"]["name"], layers)
            dep.overflow_ratio, dep.rounding, dep.dynamic = prog["overflow_ratio"], prog["rounding"], False
            dep.update, dep.host, dep.execs, dep.calibrated = "e1", {}, execs, True
            dep.bfp_radix = {j["name"]: j["bfp_table"]["f_in"] for j in prog["layers"] if "bfp_table" in j}
            dep.bfp_bits = {j["name"]: int(j["bfp_table"]["bits"]) for j in prog["layers"]     # its code bits (netbfp 9g)
                            if "bits" in j.get("bfp_table", {})}
            dep.table_radix = {j["name"]: j["table"]["f_out"] for j in prog["layers"] if "table" in j}
            dep.code_radix = {j["name"]: j["codes"]["f_out"] for j in prog["layers"] if "codes" in j}
            dep.pair_in = {j["name"]: j["pair_in"]["f_in"] for j in prog["layers"] if "pair_in" in j}
            dep.table_in = {j["name"]: j["table_in"]["f_in"] for j in prog["layers"] if "table_in" in j}
            dep.lnorm_radix = {j["name"]: j["lnorm_in"]["f_in"] for j in prog["layers"] if "lnorm_in" in j}
            dep.gate_in = {j["name"]: list(j["gate_in"]["f_in"]) for j in prog["layers"] if "gate_in" in j}
            dep.origin = {"revision": programrev.of(prog), "hlsnn": prog.get("hlsnn"), "model": prog["model"],
                          "assignment": prog["assignment"]}           # an older writer's missing fields, by name
            fmt_of = {j["name"]: j["format"] for j in prog["layers"] if j["kind"] != "host"}
            dep.actmm = samplewise.quantizers_of(layers, execs, fmt_of.get)     # attention's MatMuls
            dep.fast = False                     # network=False: layer by layer, as asked
            self._dep = dep
            if self.network is not None and self.target != "emu":
                self._kernel = self._network_kernel(overlays.get(self.network.accel))
                self._c_run = self._c_setup()
            self.check = {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith("check/")}
            self.last_host_s = None
            if self_check:
                self.self_check()
        except BaseException:
            self.close()
            raise

    def _network_kernel(self, overlay):
        """The network kernel on the target: its C-simulation (csim), on the simulated board
        through pynq (sim: the prepared network overlay, or ``overlay``), on a board through
        pynq (pynq: the network overlay folder ``overlay``)."""
        opts = self._target_options
        cfg = config_of(self.program["accels"][self.network.accel], self.path)
        if overlay is not None:                  # refused before a C-simulation is built for it
            from .board import check_overlay
            check_overlay(overlay, cfg, self.network)
        if self.target == "pynq":
            from .board import NetBoard
            return NetBoard(overlay, cfg, self.network, **{k: opts[k] for k in ("device", "timeout", "download",
                                                                                "cacheable") if k in opts})
        kernel = kernel_class(self.network)(self.network)
        if self.target == "csim":
            return kernel
        from .simboard import NetSimBoard
        return NetSimBoard(kernel, cfg, strict_cache=opts.get("strict_cache", True), overlay=overlay,
                           **{k: opts[k] for k in ("timeout", "cacheable") if k in opts})

    @property
    def input_shape(self):
        return tuple(self.program["input"]["shape"])

    def _c_path(self):
        """True when :meth:`run` makes its start through the C host path (sim/pynq: the kernel's
        ``run_image``), which takes float32, float64 and uint8 images as stored."""
        if self.network is None or self._kernel is None or not hasattr(self._kernel, "run_image"):
            return False
        if self._c_ok is None:               # once: it depends on the lowered network only
            self._c_ok = _c_host(self.network)
        return self._c_ok

    def _check_input(self, x, stored=False):
        """``x`` checked (real numbers, the model's shape, a batch of at most :data:`MAX_RUN_VALUES`
        values, finite) as float64, or with
        ``stored`` (the C host path, :meth:`_c_path`) a float32 or uint8 batch as it is: the C
        call's rule input_quantize on those values gives the bits it gives on their float64 values
        (:mod:`hlsnn.network.nethost`), without a float64 copy (``bfp_systolic``: float32 only)."""
        try:
            x = np.asarray(x)
        except ValueError as exc:             # a ragged nested list: the caller's input, not the model
            raise InputError(f"input: not an array of one shape ({' '.join(str(exc).split())[:100]}); give a "
                             f"batch of shape (B,) + {self.input_shape}") from None
        if x.dtype.kind not in "biuf":
            raise InputError(f"input: dtype {x.dtype}: must be real numbers")
        want = self.input_shape
        if x.shape[1:] != want:
            if x.shape == want:
                raise InputError(f"input: shape {x.shape} is one sample; give a batch of shape (B,) + {want}")
            raise InputError(f"input: shape {x.shape}: the model takes a batch of shape (B,) + {want}")
        if x.shape[0] == 0:
            raise InputError(f"input: an empty batch (shape {x.shape}); give at least one sample")
        if x.size > MAX_RUN_VALUES:
            _too_big(x.shape)
        keep = stored and (x.dtype == np.float32 or x.dtype == np.uint8 and self.network.engine != "bfp_systolic")
        if not keep:
            x = np.asarray(x, np.float64)
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            raise InputError(f"input: {int((~np.isfinite(x)).sum())} non-finite value(s) (NaN or Inf)")
        return x

    def _c_setup(self):
        """What :meth:`run`'s fast path (:meth:`_run_c`) needs, fixed for the loaded network:
        ``(dtypes kept, the image's shape, whether the C call counts the non-finite values
        itself, whether there is a prefix, the output's shape, the host layers after it run
        here, whether the C call applies the Softmax after the logits)``, or
        None when the starts do not go through the C host path (:meth:`_c_path`)."""
        if not self._c_path():
            return None
        n = self.network
        words = n.engine == "bfp_systolic"
        keep = (np.dtype(np.float32), np.dtype(np.float64)) + (() if words else (np.dtype(np.uint8),))
        before = bool(getattr(n, "host_before", None))
        # without a prefix (whose ops would change the values first), the C call counts the
        # non-finite values of the image as stored, in the same pass as rule input_quantize (with words: in its
        # pass that writes them as float32 words, a bad value not written), and run raises the same
        # InputError the check raises (nethost.CHost._finish): the check's own pass is not made
        counts = not before
        # a Softmax after the logits over each image's vector: applied by the C call (nethost.softmax_rule)
        from .nethost import softmax_rule
        fold = softmax_rule(n)
        from ..deploy.lower.netafter import host_stubs      # as netmode.finish runs them, made once per network
        after = () if fold else tuple(host_stubs(n))
        return keep, self.input_shape, counts, before, tuple(n.output["shape"]), after, fold

    def run(self, x, *, keep=False):
        """``y`` (the network's output), or with ``keep`` ``(y, tensors)``: every tensor by name.
        ``last_host_s`` counts the input's check too (it is the host's, on every call)."""
        t0 = time.perf_counter()      # the guard's cost is the host's too
        with artifact.as_internal_error(self.path):
            return self._run(x, keep, t0)

    def _run(self, x, keep, t0):
        if self._c_run is not None and not keep:
            return self._run_c(x, t0)
        x = self._check_input(x, stored=self._c_path())
        if self.network is not None:
            try:
                return self._run_network(x, keep, t0)
            except InputError as e:
                # a batch the network mode cannot run exactly (hlsnn.engines.bfp_systolic.network.lower.NotExact):
                # with network=None on emu it runs layer by layer, as a network without one does
                if not (getattr(e, "not_exact", False) and self._network_auto and self.target == "emu"):
                    raise
        self.last_kernel_starts = None
        t_kernel = self._kernel_wall()
        res = self._dep.run(x, keep=keep)
        dt = time.perf_counter() - t0
        self.last_host_s = max(0.0, dt - (self._kernel_wall() - t_kernel))
        return res

    def _run_c(self, x, t0):
        """:meth:`run` on the C host path without ``keep``: the bits of :meth:`_run_network`
        with less Python per start. An ndarray of a dtype the C call takes as stored and of the
        model's shape is checked by its dtype, shape and (unless the C call counts them,
        :meth:`_c_setup`) finiteness only; any other input goes through :meth:`_check_input`,
        which converts it or raises its error. The output integers are not copied out (the C call
        dequantized them), the output's shape and the host layers after it were found once; a
        Softmax over each image's output vector is applied by the C call
        (:func:`hlsnn.network.nethost.softmax_rule`, the bits of the numpy Softmax)."""
        kept, want, counts, before, out_shape, after, fold = self._c_run
        if x.__class__ is not np.ndarray or x.dtype not in kept or x.shape[1:] != want or not x.shape[0] \
                or x.size > MAX_RUN_VALUES or not counts and x.dtype.kind == "f" and not np.isfinite(x).all():
            x = self._check_input(x, stored=True)
        k, n = self._kernel, self.network
        y = k.run_image(netprefix.run(n, x) if before else x, ints=False, softmax=fold)[1]
        y = y.reshape((len(x),) + out_shape)
        for f in after:
            y = f(y, x)
        self.last_kernel_starts = 1
        self.last_host_s = max(0.0, time.perf_counter() - t0 - k.last_kernel_s)
        return y

    def _run_network(self, x, keep, t0=None):
        """The network path: the input quantized on the host (netmode rule input_quantize), the network in
        one kernel start (csim) or the network mode (emu), the output dequantized (rule net_output).
        ``t0``: when the call began (before the input's check)."""
        n = self.network
        t0 = time.perf_counter() if t0 is None else t0
        if self._c_path():
            # sim/pynq: rule input_quantize, the start, the poll and the read-back in one C call (nethost),
            # after the host ops on the float input (hlsnn.deploy.lower.netprefix)
            # its values dequantized in C (the same bits as netmode.dequantize): not again here
            q, yv = self._kernel.run_image(netprefix.run(n, x))
            q = tuple(a.reshape((len(x),) + tuple(n.output["shape"])) for a in q) if isinstance(q, tuple) \
                else q.reshape((len(x),) + tuple(n.output["shape"]))
            yv = yv.reshape((len(x),) + tuple(n.output["shape"]))
            self.last_kernel_starts, kernel_s = 1, self._kernel.last_kernel_s
            xq = None
        else:
            xq, yv = netmode.quantize_input(n, x), None
        t1 = time.perf_counter()
        if xq is None:
            pass
        elif self._kernel is not None:
            q = self._kernel.run(xq)
            q = tuple(a.reshape((len(x),) + tuple(n.output["shape"])) for a in q) if isinstance(q, tuple) \
                else q.reshape((len(x),) + tuple(n.output["shape"]))
            self.last_kernel_starts, kernel_s = 1, self._kernel.last_kernel_s
        else:
            if self._fast is None:              # the network mode compiled (netfast), else numpy
                from ..deploy.run import fast as netfast
                self._fast = netfast.build(n) or False
            q = self._fast.run(xq)[0] if self._fast else netmode.run_ints(n, xq)
            self.last_kernel_starts = 0
            kernel_s = time.perf_counter() - t1
        y = netmode.finish(n, q, yv, x=x)
        t3 = time.perf_counter()
        self.last_host_s = max(0.0, (t3 - t0) - kernel_s)
        if not keep:
            return y
        return y, {self.program["input"]["name"]: np.asarray(x, np.float64),
                   n.output["tensor"]: netmode.dequantize(n, q) if yv is None else yv.copy(),
                   n.output["name"]: y}

    def __call__(self, x):
        return self.run(x)

    def logits(self, x):
        """The last engine layer's output (the bits the self-check compares)."""
        _, env = self.run(x, keep=True)
        return env[self.program["output"]["engine_tensor"]]

    def _kernel_wall(self):
        """Seconds the targets spent in their transfers and kernels so far (sim/pynq: the DMA
        waits; emu/csim report none, so the whole call counts as host time)."""
        tot = 0.0
        for acc in self.accs.values():
            tot += float(getattr(acc.target, "total_transfer_s", 0.0) or 0.0)
        return tot

    def self_check(self):
        """Run the stored pairs; raise :class:`HlsnnError` at the first differing bit."""
        if "x" not in self.check:
            return 0
        try:
            y, env = self.run(self.check["x"], keep=True)
        except InputError as e:
            if not (getattr(e, "not_exact", False) and self.network is not None):
                raise
            return self._self_check_by_image(self.check["x"])
        ref_l, got_l = self.check["logits"], env[self.program["output"]["engine_tensor"]]
        bad = np.flatnonzero(np.asarray(got_l).reshape(-1).view(np.uint64) != ref_l.reshape(-1).view(np.uint64))
        if bad.size:
            i = int(bad[0])
            raise HlsnnError(f"{printable(self.path)}: self-check failed on {self.target_name}: {bad.size} of "
                             f"{ref_l.size} "
                             f"outputs of layer {self.program['output']['engine_layer']} differ from the emulator's "
                             f"at compile time; first at flat index {i}: expected {float(ref_l.reshape(-1)[i])!r}, "
                             f"got {float(np.asarray(got_l).reshape(-1)[i])!r}")
        if not np.allclose(y, self.check["y"], rtol=1e-12, atol=1e-300):
            raise HlsnnError(f"{printable(self.path)}: self-check failed on {self.target_name}: the network output "
                             f"differs from the compile-time output by more than 1e-12 relative")
        return len(self.check["x"])

    def _self_check_by_image(self, x):
        """The stored batch is one the network mode cannot run exactly (a bfp sum beyond its
        bound, :class:`~hlsnn.engines.bfp_systolic.network.lower.NotExact`): the stored pairs
        check the layer path (emu), and the network path is checked against it image by image."""
        _, env = self._dep.run(x, keep=True)
        ref_l, got_l = self.check["logits"], np.asarray(env[self.program["output"]["engine_tensor"]])
        if got_l.reshape(-1).view(np.uint64).tolist() != ref_l.reshape(-1).view(np.uint64).tolist():
            raise HlsnnError(f"{printable(self.path)}: self-check failed: the layer path's outputs differ from the "
                             f"emulator's at compile time")
        for i in range(len(x)):
            got, want = self._run_network(x[i:i + 1], False), self._dep.run(x[i:i + 1])
            if not np.array_equal(got, want):
                raise HlsnnError(f"{printable(self.path)}: self-check failed on {self.target_name}: image {i} of the "
                                 f"stored pairs differs from the layer path's bits")
        return len(x)

    @property
    def target_name(self):
        if self.network is not None:
            return self.target
        return next(iter(self.accs.values())).target.name if self.accs else "?"

    def close(self):
        if getattr(self, "_kernel", None) is not None and hasattr(self._kernel, "close"):
            self._kernel.close()
        for acc in self.accs.values():
            acc.close()
        self.accs = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _too_big(shape):
    """:class:`InputError` for a batch of more than :data:`MAX_RUN_VALUES` values."""
    n = int(np.prod(shape[1:], dtype=np.int64))
    raise InputError(f"input: a batch of {shape[0]:,} images of {n:,} values ({shape[0] * n:,} values); one run "
                     f"takes at most {MAX_RUN_VALUES:,} (128 MiB at one byte a value, the PYNQ-Z2's contiguous "
                     f"memory): give at most {max(1, MAX_RUN_VALUES // max(n, 1)):,} images a run")


def load(path, target="emu", *, overlays=None, self_check=True, network=None, **target_options):
    """Load a compiled model (``hlsnn compile``) onto ``target`` and return a callable
    :class:`CompiledNet`: ``y = net(x)``. ``overlays``: ``{accelerator: overlay folder}``
    (needed on ``pynq``; elsewhere an overlay folder or config to run instead of the stored
    config, refused unless its hash is the stored one). ``self_check``: run the stored
    input/output pairs first. ``network``: None runs the network path where it exists (a
    network on one ``shift_mac``, ``sparse_cluster`` or ``bfp_systolic`` accelerator that
    :func:`hlsnn.deploy.lower.program.lower` accepts: one kernel start per batch on ``emu``, ``csim``,
    ``sim``, and on ``pynq`` when ``overlays`` names network overlays), True requires it, False
    runs layer by layer."""
    return CompiledNet(path, target, overlays=overlays, self_check=self_check, network=network, **target_options)
