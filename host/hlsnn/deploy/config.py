"""Deployment configs (``configs/models/*.yaml``): a model, its data, the number formats to
try and which layer runs in which format.

::

    name: digits_cnn
    model: digits_cnn.onnx              # relative to this file
    data: digits                        # scikit-learn's bundled digits, or a .npz file
    calibration: {samples: 128, overflow_ratio: 0.0, mode: static}   # optional: update: e5, update_by,
                                                                     # percent, strided_stats
    formats:                            # optional; default: DEFAULT_FORMATS
      bfp8:   {type: bfp, accel: ../accel/bfp8_zcu104.yaml}
      twohot: {type: twohot, accel: ../accel/shift8_pynq-z2.yaml, delta: 0}
    assignments:                        # optional; default: one per format, all layers on it
      mixed: {default: twohot, layers: {fc: bfp8}}

Format types and the engine that runs them:

* ``bfp``: block floating point on ``bfp_systolic`` (the accel config fixes the mantissa
  width; activations get one exponent per sample, conv layers run as GEMM on host im2col).
* ``twohot`` / ``pot``: two-hot (with ``delta``) or power-of-two weights on ``shift_mac``;
  one power-of-two weight scale per tensor, or per output channel with
  ``weight_scale: channel``; activations in the accel config's fixed-point format. The codes
  are chosen on the calibration images for the layer's output (``weight_fit: output``:
  :mod:`hlsnn.deploy.quantize.shift_fit`), for the float network's output of the layer
  (``weight_fit: network``: :mod:`hlsnn.deploy.quantize.shift_netfit`), or each weight's nearest
  (``weight_fit: nearest``); by default (``weight_fit: auto``, ``radix: auto``) the deployment
  calibrates with each of ``output``/``network`` and radix ``lse``/``msb`` and keeps the pair
  whose outputs on the calibration images are nearest the float model's
  (:mod:`hlsnn.deploy.quantize.shift_auto`).
* ``fixed``: int8 weights and activations (dynamic fixed point) on ``sparse_cluster``; the
  weight scale per tensor, per output channel (``weight_scale: channel``), or by default
  (``auto``) per output channel only in a layer with a channel 3 bits or more below the
  tensor's scale; activation radix points by least squared error by default (``radix: auto``,
  :mod:`hlsnn.deploy.quantize.radix_lse`). In a regression deployment the ``auto`` fields of the
  ``fixed`` and ``sparse`` formats resolve otherwise (:mod:`hlsnn.deploy.quantize.task_formats`).
* ``sparse``: as ``fixed`` with the smallest ``prune`` fraction of each layer's weights (by
  magnitude) set to zero, so the zero-skipping engine skips them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..config import Field, check_section, is_config_name, load_config, read_yaml, unknown_key
from ..errors import ConfigError, InputError, printable
from ..paths import CONFIGS_DIR
from ..primitives import ROUNDING_CODES

FORMAT_ENGINES = {"bfp": "bfp_systolic", "twohot": "shift_mac", "pot": "shift_mac", "fixed": "sparse_cluster",
                  "sparse": "sparse_cluster"}

FORMAT_FIELDS = {
    "type": Field("choice", "number format", choices=tuple(FORMAT_ENGINES)),
    "accel": Field("str", "accelerator config whose engine runs the format: a path relative to this file, or "
                          "the name of a shipped or HLSNN_CONFIG_PATH config (bfp16_pynq-z2)"),
    "delta": Field("int", "two-hot: extra shift of the first term", default=0, lo=0, hi=7),
    "prune": Field("float", "sparse: fraction of each layer's weights set to zero (smallest magnitudes)",
                   default=0.0, lo=0.0, hi=0.99),
    "prune_shape": Field("choice", "sparse: which weights prune sets to zero. weight: each layer's smallest "
                         "magnitudes, wherever they are; kernel: whole columns (one input channel at one tap) per "
                         "block of output lanes, the same count in every channel bank, the shape the board-sized "
                         "network kernel (net_shape: board) skips, so its steps drop with the sparsity "
                         "(hlsnn.deploy.quantize.kprune)", default="weight", choices=("weight", "kernel")),
    "weight_scale": Field("choice", "twohot, pot, fixed, sparse: one power-of-two weight scale per tensor, or one "
                          "per output channel; auto: per output channel in a layer where some channel's scale would "
                          "be 3 bits or more finer than the tensor's (hlsnn.deploy.quantize.quant.weight_fracs), for fixed and for sparse "
                          "with prune_shape: kernel; "
                          "tensor for the other types; a regression deployment's fixed and sparse formats: channel "
                          "(hlsnn.deploy.quantize.task_formats)", default="auto", choices=("auto", "tensor", "channel")),
    "weight_fit": Field("choice", "twohot, pot: codes chosen for the layer's output on the calibration images "
                        "(error feedback and bias correction, hlsnn.deploy.quantize.shift_fit), for the float network's output "
                        "of the layer (network: the error of the layers before taken back, hlsnn.deploy.quantize.shift_netfit), "
                        "or each weight's nearest code; auto: output or network, the one whose outputs on the calibration images "
                        "are nearest the float model's, chosen with radix (hlsnn.deploy.quantize.shift_auto). bfp, fixed, sparse: "
                        "output (the weights as quantized) or network (the layers giving the network's output refitted "
                        "to the float network's output on the calibration images, hlsnn.deploy.quantize.outfit); auto: network "
                        "in a regression deployment (hlsnn.deploy.quantize.task_formats), else output", default="auto",
                        choices=("auto", "output", "network", "nearest")),
    "weight_terms": Field("int", "twohot, pot: shift codes per weight; 2: a second code for each weight's rounding "
                          "error at the same scale, both summed in the layer's one accumulator (K doubled: "
                          "hlsnn.deploy.quantize.twoterm; such a deployment runs layer by layer, not in the network mode)",
                          default=1, lo=1, hi=2),
    "input_terms": Field("choice", "fixed, sparse: the int8 terms a conv giving the network's output takes its input "
                         "in where the host quantizes it (a host op's float output): 1, or 2 (the residual 7 bits finer, "
                         "a second raw pass of the kernel, the sums added exactly on the host: hlsnn.deploy.quantize.twoin; "
                         "that layer then runs layer by layer, unless it reads a residual Add or a linear Resize "
                         "of one: network rule two_term_input); auto: 2 in a regression "
                         "deployment (hlsnn.deploy.quantize.task_formats), else 1", default="auto", choices=("auto", 1, 2)),
    "radix": Field("choice", "fixed, sparse, twohot, pot: each activation radix point chosen by DETERMINE (msb: "
                   "the largest value fits) or as DETERMINE's or up to 3 bits finer, of least squared error on the calibration images "
                   "(lse: hlsnn.deploy.quantize.radix_lse), or lse then each moved one bit at a time while the network output's error "
                   "on the calibration images drops (search: hlsnn.deploy.quantize.radix_search); auto: lse for fixed, msb for sparse, "
                   "for twohot and pot the one whose outputs on the calibration images are nearest the float model's, chosen "
                   "with weight_fit (hlsnn.deploy.quantize.shift_auto); a regression deployment's fixed and sparse formats: search "
                   "(hlsnn.deploy.quantize.task_formats)",
                   default="auto", choices=("auto", "msb", "lse", "search")),
    "equalize": Field("choice", "fixed, sparse: channels: each conv -> ReLU -> conv chain's channels scaled by "
                      "powers of two, half of their range gap moved into the weights, exactly in float "
                      "(hlsnn.deploy.quantize.chain_equalize); none: as imported; auto: channels for a regression "
                      "deployment's fixed and sparse formats, else none (hlsnn.deploy.quantize.task_formats)", default="auto",
                      choices=("auto", "none", "channels")),
    "bias_correction": Field("choice", "empirical: each layer's bias moved so that its outputs have the float "
                             "network's per-channel mean on the calibration images, layer by layer "
                             "(hlsnn.deploy.quantize.biascorr; calibrates layer by layer); none: the imported bias; "
                             "auto: empirical for bfp in a network with a grouped or depthwise conv, and for a "
                             "regression deployment's fixed and sparse formats (hlsnn.deploy.quantize.task_formats), else none",
                             default="auto", choices=("auto", "none", "empirical")),
}

_ACCEL = CONFIGS_DIR / "accel"
#: Formats used when a deployment config has no ``formats`` section.
DEFAULT_FORMATS = {
    "bfp8": {"type": "bfp", "accel": str(_ACCEL / "bfp8_zcu104.yaml")},
    "twohot": {"type": "twohot", "accel": str(_ACCEL / "shift8_pynq-z2.yaml")},
    "pot": {"type": "pot", "accel": str(_ACCEL / "shift8_pynq-z2.yaml")},
    "fixed8": {"type": "fixed", "accel": str(_ACCEL / "sparse8_pynq-z2.yaml")},
    "sparse50": {"type": "sparse", "accel": str(_ACCEL / "sparse8_pynq-z2.yaml"), "prune": 0.5},
    "sparse80": {"type": "sparse", "accel": str(_ACCEL / "sparse8_pynq-z2.yaml"), "prune": 0.8},
}

FIELDS = {
    "name": Field("ident", "deployment name"),
    "model": Field("str", "ONNX model file (relative to this file)"),
    "output": Field("str", "the model output to deploy, for a model with several (e.g. skl2onnx's "
                    "probabilities beside its label)", default=""),
    "data": Field("str", "'digits' (scikit-learn's bundled digits), 'digits32' (the same as 32x32x3 images) or "
                  "an .npz with x_train, y_train, x_test, y_test (relative to this file)", default="digits"),
    "layout": Field("choice", "input layout of the data: flat (N, features), nchw (N, C, H, W), ncl (N, C, L), "
                    "ntf (N, T, F); auto: the model input's rank (4: nchw, 3: ncl, else flat)", default="auto",
                    choices=("auto", "flat", "nchw", "ncl", "ntf")),
    "task": Field("choice", "classification (accuracy against integer labels) or regression (MSE, MAE and the "
                  "error relative to the float model's outputs, against float targets y_* or, without them, the "
                  "float model's outputs); auto: classification when the data have integer labels",
                  default="auto", choices=("auto", "classification", "regression")),
    "targets": Field("choice", "regression targets: data (the data's float y_*, else the float model's outputs) or "
                     "inputs (the inputs themselves: an autoencoder)", default="data", choices=("data", "inputs")),
    "calibration": Field("section", "how radix points are chosen (source 002)", default=None, fields={
        "samples": Field("int", "calibration images, taken from the training split", default=128, lo=1,
                         hi=1 << 20),
        "overflow_ratio": Field("float", "allowed fraction of saturating values (0: the maximum decides)",
                                default=0.0, lo=0.0, hi=0.5),
        "mode": Field("choice", "static: radix points fixed at calibration; dynamic: every batch runs a "
                      "preceding operation with statistics, then the main operation", default="static",
                      choices=("static", "dynamic")),
        "strided_stats": Field("choice", "static mode, sparse_cluster: the outputs a strided convolution's output "
                               "radix is calibrated on. all: every result of its stride-1 form (what the statistics "
                               "unit sees); kept: only the outputs the stride keeps (the calibrated radix is a "
                               "constant, so the kernel is unchanged; hlsnn.train.prepare follows the same rule)",
                               default="all", choices=("all", "kept")),
        "clip_stats": Field("choice", "static mode: the values a fixed-point layer's output radix is calibrated on "
                            "when its output goes only into a Clip (ReLU6). off: the layer's results; clipped: "
                            "the results clipped at the Clip's bounds (nothing above the bound survives the clip, "
                            "so saturating there loses nothing; the radix is a constant, the kernels are unchanged; "
                            "hlsnn.train.prepare follows the same rule)", default="off", choices=("off", "clipped")),
        "update": Field("choice", "how fixed-point layers update their output radix points: e1: a preceding "
                        "operation on every image, then the main operation; e5: per layer the faster (by the "
                        "cycle model) of E2 (two operations, the preceding one on a sample) and E4 (the sample's "
                        "wide results saved and converted, the main operation on the rest)", default="e1",
                        choices=("e1", "e5")),
        "update_by": Field("choice", "e5: choose per layer, or per operation type (conv, dense)", default="layer",
                           choices=("layer", "op_type")),
        "percent": Field("float", "e5: percentage of each batch's images in the sample of E2 and E4",
                         default=20.0, lo=1.0, hi=100.0),
    }),
    "rounding": Field("choice", "rounding of host-side activation requantization", default="nearest_away",
                      choices=tuple(ROUNDING_CODES)),
    "test_samples": Field("int", "test images evaluated (0: the whole test split)", default=0, lo=0, hi=1 << 24),
    "validation": Field("int", "the last N training images were held out of the model's training: hlsnn "
                        "autotune's validation split (0: the model saw every training image; autotune then "
                        "validates on those beyond the calibration images)", default=0, lo=0, hi=1 << 24),
}
#: free-form sections, validated by load_deploy_config: named formats and assignments
SECTIONS = ("formats", "assignments")


@dataclass
class FormatSpec:
    name: str
    type: str
    accel: str
    delta: int = 0
    prune: float = 0.0
    weight_scale: str = "tensor"
    weight_fit: str = "output"
    bias_correction: str = "auto"
    weight_terms: int = 1
    radix: str = "msb"
    equalize: str = "none"
    auto: tuple = ()            # the fields the config left ``auto`` (hlsnn.deploy.quantize.task_formats resolves them by task)
    input_terms: int = 1        # fixed, sparse: 2, an output conv's host-quantized input in two terms (deploy.quantize.twoin)
    prune_shape: str = "weight"  # sparse: the smallest magnitudes, or whole kernel columns (deploy.quantize.kprune)

    @property
    def engine(self):
        return FORMAT_ENGINES[self.type]


@dataclass
class Assignment:
    name: str
    default: str
    layers: dict

    def format_of(self, layer_name):
        return self.layers.get(layer_name, self.default)

    def formats(self):
        """The names of the formats this assignment uses (its default and its per-layer ones)."""
        return {self.default, *self.layers.values()}


@dataclass
class DeployConfig:
    path: str
    name: str
    model: str
    data: str
    layout: str
    calibration: dict
    rounding: str
    test_samples: int
    formats: dict
    assignments: dict
    output: str = None          # the model output to deploy when it has several (``output:``)
    task: str = "auto"          # classification, regression or auto (inferred from the labels)
    targets: str = "data"       # regression targets: the data's y_* (or float outputs), or the inputs
    validation: int = 0         # the last N training images, held out of training (hlsnn autotune's split)


def _rel(base, p):
    q = Path(p)
    return str(q if q.is_absolute() else (base / q))


def _not_an_accel_config(path, raw):
    """An accelerator config where a deployment config belongs (``hlsnn deploy bfp16_pynq-z2``, a new
    user's mistake) is an error saying so, not "no such config file" or "board: unknown key".
    ``raw`` None: before reading, a missing path that names a shipped or user accelerator config."""
    from ..config import find_config, is_config_name
    accel = None
    if raw is None and not path.exists() and "configs/models/" in path.as_posix():
        raise ConfigError(path, None, None, "no such config file; the example deployment configs (configs/models) come "
                          "with a checkout of the repository, not with the installed package: run from a checkout, "
                          "or write your own (docs/tutorials/deploy-pytorch.md)")
    if raw is None:
        if not path.exists() and is_config_name(path):
            try:
                accel = find_config(path)
            except ConfigError:
                return
    elif isinstance(raw, dict) and "engine" in raw and "model" not in raw:
        accel = path
    if accel is not None:
        where = "" if accel == path else f" ({accel})"
        raise ConfigError(path, None, None, f"is an accelerator config{where} (engine:, board:), not a deployment "
                          "config; hlsnn deploy and compile take one with model:, data:, formats: and assignments: "
                          "(docs/configs.md), whose formats name accelerator configs like this one")


def load_deploy_config(path) -> DeployConfig:
    """Read and validate a deployment config; every error names the file and the key."""
    path = Path(path)
    _not_an_accel_config(path, None)
    raw = read_yaml(path)
    _not_an_accel_config(path, raw)
    data = _check(path, raw)
    base = path.resolve().parent
    fm_raw = data["formats"] if data["formats"] is not None else DEFAULT_FORMATS
    if not isinstance(fm_raw, dict) or not fm_raw:
        raise ConfigError(path, "formats", fm_raw, "must be a non-empty mapping of format names to "
                          "{type, accel, delta, prune, prune_shape, weight_scale, weight_fit, weight_terms, bias_correction, "
                          "input_terms, radix, equalize}")
    formats = {}
    for name, spec in fm_raw.items():
        _check_name(path, "formats", name)
        s = check_section(path, f"formats.{name}", spec, FORMAT_FIELDS)
        auto = tuple(k for k in ("radix", "weight_scale", "bias_correction", "equalize") if s[k] == "auto")
        if s["weight_fit"] == "auto" and s["type"] not in ("twohot", "pot"):
            auto += ("weight_fit",)         # a regression deployment's: network (task_formats)
        if s["input_terms"] == "auto":
            s["input_terms"] = 1
            if s["type"] in ("fixed", "sparse"):
                auto += ("input_terms",)    # a regression deployment's: 2 (task_formats)
        if s["type"] not in ("fixed", "sparse") and s["input_terms"] != 1:
            raise ConfigError(path, f"formats.{name}.input_terms", s["input_terms"],
                              "only the fixed-point formats of sparse_cluster (fixed, sparse) take an input in two "
                              "terms; leave it out")
        if s["equalize"] == "auto":
            s["equalize"] = "none"          # a regression deployment's fixed/sparse: channels (task_formats)
        if s["weight_scale"] == "auto" and s["type"] != "fixed" and not (s["type"] == "sparse"
                                                                          and s["prune_shape"] == "kernel"):
            s["weight_scale"] = "tensor"
        if s["type"] != "sparse" and s["prune"]:
            raise ConfigError(path, f"formats.{name}.prune", s["prune"], "only format type 'sparse' prunes")
        if s["type"] != "sparse" and s["prune_shape"] != "weight":
            raise ConfigError(path, f"formats.{name}.prune_shape", s["prune_shape"],
                              "only format type 'sparse' prunes; leave it out")
        if s["type"] == "bfp" and s["weight_scale"] != "tensor":
            raise ConfigError(path, f"formats.{name}.weight_scale", s["weight_scale"],
                              "a bfp format's weight exponents are set by its accel config (weight_exponent: row "
                              "gives one per output row)")
        if s["type"] != "twohot" and s["delta"]:
            raise ConfigError(path, f"formats.{name}.delta", s["delta"], "only format type 'twohot' has a delta")
        if s["weight_fit"] == "auto" and s["type"] not in ("twohot", "pot"):
            s["weight_fit"] = "output"
        if s["type"] not in ("twohot", "pot") and s["weight_fit"] not in ("output", "network"):
            raise ConfigError(path, f"formats.{name}.weight_fit", s["weight_fit"],
                              "only the shift formats (twohot, pot) choose their codes; a bfp, fixed or sparse "
                              "format takes output (the weights as quantized) or network (the output layer "
                              "refitted to the float network, hlsnn.deploy.quantize.outfit)")
        if s["type"] not in ("twohot", "pot") and s["weight_terms"] != 1:
            raise ConfigError(path, f"formats.{name}.weight_terms", s["weight_terms"],
                              "only the shift formats (twohot, pot) have a second code per weight; leave it out")
        if s["radix"] == "auto":
            # fixed: lse; twohot, pot: chosen per model at calibration (hlsnn.deploy.quantize.shift_auto)
            s["radix"] = "lse" if s["type"] == "fixed" else "auto" if s["type"] in ("twohot", "pot") else "msb"
        if s["type"] not in ("fixed", "sparse", "twohot", "pot") and s["radix"] != "msb":
            raise ConfigError(path, f"formats.{name}.radix", s["radix"],
                              "only the fixed-point formats of sparse_cluster (fixed, sparse) and the shift formats "
                              "(twohot, pot) choose radix points by least squared error; leave it out")
        if s["type"] not in ("fixed", "sparse") and s["equalize"] != "none":
            raise ConfigError(path, f"formats.{name}.equalize", s["equalize"],
                              "only the fixed-point formats of sparse_cluster (fixed, sparse) equalize chains; "
                              "leave it out")
        accel = s["accel"]
        if data["formats"] is not None and not (is_config_name(accel) and not (base / accel).exists()):
            accel = _rel(base, accel)       # a path relative to this file; a bare name is looked up
        cfg = load_config(accel, check_fit=False)
        if cfg.engine != FORMAT_ENGINES[s["type"]]:
            raise ConfigError(path, f"formats.{name}.accel", s["accel"],
                              f"format type {s['type']!r} runs on engine {FORMAT_ENGINES[s['type']]}, but this "
                              f"config's engine is {cfg.engine}")
        formats[str(name)] = FormatSpec(str(name), s["type"], accel, s["delta"], s["prune"], s["weight_scale"],
                                     s["weight_fit"], s["bias_correction"], s["weight_terms"], s["radix"],
                                     s["equalize"], auto, s["input_terms"], s["prune_shape"])
    as_raw = data["assignments"]
    assignments = {}
    if as_raw is None:
        assignments = {n: Assignment(n, n, {}) for n in formats}
    else:
        if not isinstance(as_raw, dict) or not as_raw:
            raise ConfigError(path, "assignments", as_raw, "must be a non-empty mapping of names to "
                              "{default: FORMAT, layers: {LAYER: FORMAT}}")
        for name, a in as_raw.items():
            _check_name(path, "assignments", name)
            if not isinstance(a, dict) or set(a) - {"default", "layers"} or "default" not in a:
                raise ConfigError(path, f"assignments.{name}", a, "must be a mapping {default: FORMAT, "
                                  "layers: {LAYER: FORMAT}} (layers optional)")
            layers = a.get("layers") or {}
            if not isinstance(layers, dict):
                raise ConfigError(path, f"assignments.{name}.layers", layers, "must be a mapping of layer names "
                                  "to format names")
            for k in layers:                 # layer names as the importer takes them: printable (a newline
                if not _printable_label(k):  # forged lines of the "no engine layer named" error)
                    raise ConfigError(path, f"assignments.{name}.layers", k, "a layer name must be printable text "
                                      "of 1..256 characters (no newline or control character), as in the model")
            for key, fmt in [("default", a["default"])] + [(f"layers.{k}", v) for k, v in layers.items()]:
                if not isinstance(fmt, str) or fmt not in formats:
                    raise ConfigError(path, f"assignments.{name}.{key}", fmt,
                                      "must name a format: " + ", ".join(formats))
            assignments[str(name)] = Assignment(str(name), a["default"], {str(k): v for k, v in layers.items()})
    model = _rel(base, data["model"])
    dat = data["data"] if data["data"] in ("digits", "digits32") else _rel(base, data["data"])
    return DeployConfig(str(path), data["name"], model, dat, data["layout"], data["calibration"],
                        data["rounding"], data["test_samples"], formats, assignments, data["output"] or None,
                        data["task"], data["targets"], data["validation"])


#: The two calibration rules of a static radix that only a static calibration with update e1 may
#: change (the radix is then a constant of the program, the kernels unchanged): key, the statistics
#: unit's own rule (the default; the only one in dynamic mode and with E2/E4), the other rule, and
#: what the statistics unit does that the other rule departs from. Deployment, deployment_kwargs,
#: the config check and hlsnn.train.prepare all read it.
STATIC_RULES = (("strided_stats", "all", "kept", "sees every stride-1 result"),
                ("clip_stats", "off", "clipped", "chooses from the layer's results"))


def deployment_kwargs(cfg: DeployConfig, *, update=None, update_by=None, host_bits=None) -> dict:
    """The keyword arguments of :class:`~hlsnn.deploy.run.runner.Deployment` that ``cfg`` fixes: its
    ``calibration`` section (filled with the defaults by :func:`load_deploy_config`) and
    ``rounding``; the one rule of ``hlsnn deploy``, :func:`~hlsnn.deploy.reports.evaluate.open_deployment`,
    ``hlsnn compile`` and hlsnn.train's ``deployed``. ``update`` / ``update_by``: the command
    line's ``--radix-update`` / ``--radix-update-by`` over the config's (None: the config's);
    ``host_bits``: the quantized host mode's bits (None: float host layers), a command-line
    option too. ``samples`` is not an argument: the caller takes that many calibration images.
    ``strided_stats: kept`` or ``clip_stats: clipped`` with an ``update`` other than e1 is an
    :class:`InputError` (the config's own pair is refused when it is read)."""
    cal = cfg.calibration
    for key, plain, other, unit in STATIC_RULES:
        if cal[key] == other and update not in (None, "e1"):
            raise InputError(f"radix update {update!r} with calibration.{key}: {other} in {printable(cfg.path)}: "
                             f"{other} "
                             f"applies to update e1 only (with E2/E4 the statistics unit {unit}); use update e1 "
                             f"or {key}: {plain}")
    return dict(overflow_ratio=cal["overflow_ratio"], rounding=cfg.rounding, dynamic=cal["mode"] == "dynamic",
                host_bits=host_bits, update=update or cal["update"], update_by=update_by or cal["update_by"],
                update_percent=cal["percent"], strided_stats=cal["strided_stats"],
                clip_stats=cal["clip_stats"])


_NAME = __import__("re").compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,63}")


def _printable_label(name) -> bool:
    from ..errors import InputError
    from ..names import check_label
    if isinstance(name, int) and not isinstance(name, bool):
        name = str(name)             # YAML reads a layer named 3 as an int; str(k) names it below
    try:
        check_label("layer", name)
    except InputError:
        return False
    return True


def _check_name(path, section, name):
    """Format and assignment names head table rows and JSON keys: letters, digits, ``_ . + -``, at
    most 64 (a newline in a name forged rows of the deploy table)."""
    if isinstance(name, bool) or not isinstance(name, (str, int)) or not _NAME.fullmatch(str(name)):
        raise ConfigError(path, f"{section}", name, "names must be 1-64 letters, digits, '_', '.', '+' or '-' "
                          "(starting with a letter, digit or '_')")


def _check(path, raw):
    """check_section with two free-form keys (formats, assignments) validated afterwards."""
    if not isinstance(raw, dict):
        raise ConfigError(path, "(top level)", raw, "must be a mapping of keys to values")
    free = {k: raw[k] for k in SECTIONS if k in raw}
    rest = {k: v for k, v in raw.items() if k not in free}
    unknown = [k for k in rest if k not in FIELDS]
    if unknown:
        raise unknown_key(path, str(unknown[0]), raw[unknown[0]], list(FIELDS) + list(SECTIONS))
    out = check_section(path, "", rest, FIELDS)
    if out["calibration"] is None:
        out["calibration"] = check_section(path, "calibration", {}, FIELDS["calibration"].fields)
    cal = out["calibration"]
    for key, plain, other, unit in STATIC_RULES:
        if cal[key] == other and (cal["mode"] == "dynamic" or cal["update"] != "e1"):
            raise ConfigError(path, f"calibration.{key}", other,
                              "applies to static calibration with update: e1 only (mode: static); in dynamic mode "
                              f"and with e5 the statistics unit {unit}; allowed here: {plain}")
    out["formats"] = free.get("formats")
    out["assignments"] = free.get("assignments")
    return out
