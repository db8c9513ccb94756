"""Loading and validating accelerator and board configs.

Everything in a YAML file is checked here, before anything is rendered: unknown and missing
keys, types, ranges, C identifiers, cross-field rules of the engine, and whether the
estimated resources fit the board. Each failure is one :class:`~hlsnn.errors.ConfigError`
naming the file, the key, the bad value and what is allowed.

An accelerator config looks like::

    name: bfp16_pynq_z2          # C identifier: IP and overlay name
    board: pynq-z2               # configs/boards/<board>.yaml
    engine: bfp_systolic         # one of hlsnn.engines.ENGINES
    clock_mhz: 100               # optional, default: the board's
    bfp_systolic:                # the engine's own section (see the engine's SCHEMA)
      rows: 16
      ...
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping, Optional

from .engine_registry import engines as registered_engines
from .errors import ConfigError, excerpt
from .paths import board_dirs

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_BOARD_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_TOKEN = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")  # part numbers, ports: safe unquoted in TCL
_PS_KEY = re.compile(r"^(PCW|PSU)_[A-Za-z0-9_]+$")           # processing-system CONFIG.* property names
_PS_VALUE = re.compile(r"^[A-Za-z0-9_.:-]+( [A-Za-z0-9_.:-]+)*$")  # braced in TCL: no $ [ ] { } " \
#: Accelerator names that cannot be the kernel's IP name: the block design's other cells
#: (hls/tcl/bd.tcl.j2) and the attributes of pynq 4.0's Overlay (and Bitstream), which
#: ``getattr(overlay, name)`` returns instead of the IP's driver
RESERVED_NAMES = frozenset(
    "ps dma binfile_name bit_data bitfile_name clock_dict device download dtbo firmware_path free gen_cache "
    "gpio_dict hierarchy_dict ignore_version insert_dtbo interrupt_controllers interrupt_pins ip_dict is_loaded "
    "load_ip_data mem_dict parser partial pr_dict pr_download remove_dtbo reset systemgraph timestamp xsa "
    "xsa_filepath _ip_map _register_drivers _deepcopy_dict_from".split())

_CPP_KEYWORDS = frozenset(
    "alignas alignof and asm auto bool break case catch char class const constexpr continue "
    "default delete do double else enum explicit export extern false float for friend goto if "
    "inline int long mutable namespace new noexcept not nullptr operator or private protected "
    "public register return short signed sizeof static struct switch template this throw true "
    "try typedef typename union unsigned using virtual void volatile while xor".split())
REQUIRED = object()


@dataclass(frozen=True)
class Field:
    """One key of a config section.

    ``kind`` is one of ``int``, ``float``, ``bool``, ``str``, ``ident`` (a C identifier),
    ``token`` (letters, digits, ``_ . : -``; empty only if that is the default), ``choice``
    (one of ``choices``) or ``section`` (a nested mapping checked by ``fields``).
    """

    kind: str
    doc: str = ""
    default: Any = REQUIRED
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()
    fields: Mapping[str, "Field"] | None = None
    pow2: bool = False

    def allowed(self) -> str:
        if self.kind == "int":
            s = f"an integer in [{self.lo}, {self.hi}]"
            return s + ", a power of two" if self.pow2 else s
        if self.kind == "float":
            return f"a number in [{self.lo}, {self.hi}]"
        if self.kind == "bool":
            return "true or false"
        if self.kind == "ident":
            return "a C identifier ([A-Za-z_][A-Za-z0-9_]*, at most 64 characters, not a C++ keyword)"
        if self.kind == "token":
            return ("a string of letters, digits and _ . : - (no spaces, quotes or brackets)"
                    + (", or empty" if self.default == "" else ""))
        if self.kind == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        if self.kind == "tokenmap":
            return ("a mapping of processing-system properties (PCW_* or PSU__*) to values made of "
                    "letters, digits and _ . : - (single spaces between words allowed)")
        if self.kind == "section":
            return "a mapping with keys " + ", ".join(self.fields or {})
        return "a string"


def unknown_key(source, path: str, value: Any, allowed) -> ConfigError:
    """The error of an unknown key at ``path``: the closest allowed keys first ("did you mean"), then
    all of them; a mapping or list value is named by its size, not dumped (it is the key that is wrong)."""
    import difflib
    key = path.rsplit(".", 1)[-1]
    allowed = [str(a) for a in allowed]
    close = difflib.get_close_matches(key, allowed, n=2, cutoff=0.6)
    if isinstance(value, Mapping):
        value = _Shown(f"<a mapping of {len(value)} key{'s' * (len(value) != 1)}>")
    elif isinstance(value, (list, tuple)):
        value = _Shown(f"<a list of {len(value)} item{'s' * (len(value) != 1)}>")
    hint = f"did you mean {' or '.join(repr(c) for c in close)}? " if close else ""
    return ConfigError(source, path, value, f"unknown key; {hint}allowed keys: " + ", ".join(allowed))


class _Shown(str):
    """A value shown as it is written (not quoted) in an error message."""

    def __repr__(self):
        return str(self)


def check_section(source, prefix: str, data: Any, fields: Mapping[str, Field]) -> dict:
    """Validate ``data`` against ``fields``; return a new dict with defaults filled in."""
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(source, prefix or "(top level)", data, "must be a mapping of keys to values")
    unknown = [k for k in data if k not in fields]
    if unknown:
        raise unknown_key(source, _join(prefix, str(unknown[0])), data[unknown[0]], fields)
    out = {}
    for key, f in fields.items():
        path = _join(prefix, key)
        if key not in data:
            if f.default is REQUIRED:
                raise ConfigError(source, path, "<missing>", f"required key is missing; expected {f.allowed()}"
                                  + (f" ({f.doc})" if f.doc else ""))
            out[key] = f.default
            continue
        out[key] = _check_value(source, path, data[key], f)
    return out


def _join(prefix, key):
    return f"{prefix}.{key}" if prefix else key


def _check_value(source, path, v, f: Field):
    bad = lambda: ConfigError(source, path, v, "must be " + f.allowed())  # noqa: E731
    if f.kind == "int":
        if isinstance(v, bool) or not isinstance(v, int):
            raise bad()
        if (f.lo is not None and v < f.lo) or (f.hi is not None and v > f.hi):
            raise bad()
        if f.pow2 and v & (v - 1):
            raise bad()
        return v
    if f.kind == "float":
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            raise bad()
        if (f.lo is not None and v < f.lo) or (f.hi is not None and v > f.hi):
            raise bad()
        return float(v)
    if f.kind == "bool":
        if not isinstance(v, bool):
            raise bad()
        return v
    if f.kind == "ident":
        if not isinstance(v, str) or not _IDENT.fullmatch(v) or v in _CPP_KEYWORDS or len(v) > 64:
            raise bad()
        return v
    if f.kind == "token":
        if not isinstance(v, str) or not (_TOKEN.fullmatch(v) or (v == "" and f.default == "")):
            raise bad()
        return v
    if f.kind == "choice":
        if v not in f.choices:
            raise bad()
        return v
    if f.kind == "tokenmap":
        if v is None:
            return {}
        if not isinstance(v, Mapping):
            raise bad()
        out = {}
        for k, val in v.items():
            sval = str(val) if isinstance(val, (int, float)) and not isinstance(val, bool) else val
            if not isinstance(k, str) or not _PS_KEY.fullmatch(k) or not isinstance(sval, str) or not _PS_VALUE.fullmatch(sval):
                raise ConfigError(source, f"{path}.{k}", val, "must be " + f.allowed())
            out[k] = sval
        return out
    if f.kind == "section":
        return check_section(source, path, v, f.fields)
    if not isinstance(v, str):
        raise bad()
    if "\x00" in v:                         # a path with it stops os.stat with a ValueError
        raise ConfigError(source, path, v, "holds a NUL character; a name or path cannot")
    return v


def config_search_path() -> list:
    """Folders where an accelerator config is looked up by name: those of ``HLSNN_CONFIG_PATH``
    (``os.pathsep``-separated, in order), then the shipped ``configs/accel``."""
    import os
    from .paths import CONFIGS_DIR
    dirs = [Path(d) for d in os.environ.get("HLSNN_CONFIG_PATH", "").split(os.pathsep) if d]
    return dirs + [CONFIGS_DIR / "accel"]


def is_config_name(value) -> bool:
    """A bare config name (``bfp16_pynq-z2`` or ``bfp16_pynq-z2.yaml``): no folder in it."""
    s = str(value)
    return bool(s) and "/" not in s and "\\" not in s and s not in (".", "..")


def find_config(name_or_path) -> Path:
    """An accelerator config given by path, or by the name of a user or shipped config.

    A path that exists is taken as it is. Otherwise a bare name (no folder: ``bfp16_pynq-z2``,
    with or without ``.yaml``) is looked up in :func:`config_search_path`, first match wins; a
    name found nowhere is an error listing the known names. A missing path with folders whose
    file name is a known config's (``configs/accel/bfp16_pynq-z2.yaml`` outside a checkout) is an
    error naming that config; anything else is returned unchanged, so that the caller's "no such
    config file" names it.
    """
    p = Path(name_or_path)
    if p.exists():
        return p
    stem = p.name[:-5] if p.name.endswith(".yaml") else p.name
    found = next((d / f"{stem}.yaml" for d in config_search_path() if (d / f"{stem}.yaml").is_file()), None)
    if not is_config_name(name_or_path):
        if found is not None and p.suffix == ".yaml":   # a checkout's configs/accel/X.yaml, from an installed wheel
            raise ConfigError(p, None, None, f"no such config file; a config of that name is installed ({found}): "
                              f"give its name alone, {stem}")
        other = _other_spelling(p)
        if other is not None:
            raise ConfigError(p, None, None, f"no such config file; did you mean {other}? (build/ and overlays/ "
                              f"name a config's folders with '_' where its name may have '-')")
        return p
    if found is not None:
        return found
    names = sorted({f.stem for d in config_search_path() if d.is_dir() for f in d.glob("*.yaml")})
    alike = [n for n in names if n.replace("-", "_") == stem.replace("-", "_")]
    if len(alike) == 1:                  # bfp16_pynq_z2 (an overlay's or build folder's name) is bfp16_pynq-z2
        return find_config(alike[0])
    import difflib
    close = difflib.get_close_matches(stem, names, n=3, cutoff=0.6)
    raise ConfigError(p, None, None, "no such config file, and no config of that name in "
                      + ", ".join(str(d) for d in config_search_path()) + " (HLSNN_CONFIG_PATH, then the shipped "
                      "ones); " + (f"did you mean {' or '.join(close)}? " if close else "")
                      + "known names: " + ", ".join(names))


def _other_spelling(p: Path):
    """The existing file whose name is ``p``'s with '-' and '_' taken as one (None: none, or several)."""
    if not p.parent.is_dir():
        return None
    key = p.name.replace("-", "_")
    alike = [f for f in p.parent.iterdir() if f.name.replace("-", "_") == key and f.is_file()]
    return alike[0] if len(alike) == 1 else None


def _strict_loader():
    """:class:`StrictLoader`, made on first use: PyYAML is imported only when YAML is read, so
    that a board that runs a compiled model (:mod:`hlsnn.network`) needs no PyYAML."""
    global StrictLoader
    if StrictLoader is not None:
        return StrictLoader
    import yaml

    class StrictLoader(yaml.SafeLoader):
        """PyYAML's SafeLoader without aliases and without duplicate keys.

        A config has no use for aliases (``*name``), and nested ones expand exponentially (nine
        levels of ``&a [*a, *a, ...]`` are gigabytes once expanded); a repeated key would silently
        let the last one win. Both are errors naming the line."""

        def compose_node(self, parent, index):
            if self.check_event(yaml.AliasEvent):
                raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed in hlsnn files",
                                                  self.peek_event().start_mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node, deep=False):
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: SafeLoader reports it itself
                    dup = False
                if dup:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {excerpt(key, 40)}",
                                                            key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    return StrictLoader


#: PyYAML's SafeLoader without aliases and duplicate keys (:func:`_strict_loader`; None until first used)
StrictLoader = None


#: text -> its parse, for :func:`safe_yaml` (a process reads the same few board and accel files
#: again and again: a test run parsed ~900 of them per 600 tests, 2-8 ms each in pure Python)
_PARSED: dict = {}


def safe_yaml(text: str) -> Any:
    """Parse YAML text with :class:`StrictLoader` (no aliases, no duplicate keys). A text parsed
    before gives a deep copy of its first parse (an error is raised again on every call)."""
    import copy
    if text not in _PARSED:
        import yaml
        value = yaml.load(text, Loader=_strict_loader())  # noqa: S506 - StrictLoader is a SafeLoader
        if len(_PARSED) >= 512:
            _PARSED.clear()
        _PARSED[text] = value
    return copy.deepcopy(_PARSED[text])


def read_yaml(path) -> Any:
    """Parse a YAML file; syntax errors and missing files become ConfigError."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(p, None, None, "is a folder, not a config file (give the path of a .yaml file)")
    if not p.is_file():
        raise ConfigError(p, None, None, "no such config file")
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(p, None, None, "cannot be read as UTF-8 text: " + " ".join(str(exc).split())) from None
    import yaml
    try:
        return safe_yaml(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or exc
        if isinstance(exc, yaml.reader.ReaderError):  # no mark; its str() spans two lines
            problem = f"unacceptable character #x{exc.character:04x} at position {exc.position}: {exc.reason}"
        raise ConfigError(p, None, None, f"not valid YAML{where}: " + " ".join(str(problem).split())) from None


# ---------------------------------------------------------------------------------------------
# Boards

BOARD_FIELDS = {
    "name": Field("str", "board name, the same as the file name"),
    "part": Field("token", "FPGA part number, e.g. xc7z020clg400-1"),
    "board_part": Field("token", "Vivado board part, or empty", default=""),
    "ps": Field("choice", "processing system family", choices=("zynq7", "zynqmp")),
    "clock_mhz": Field("float", "default PL clock", lo=10, hi=800),
    "resources": Field("section", "what the PL has", fields={
        "dsp": Field("int", lo=1, hi=100000),
        "bram36": Field("int", lo=1, hi=100000),
        "uram": Field("int", lo=0, hi=100000, default=0),
        "lut": Field("int", lo=1, hi=10_000_000),
        "ff": Field("int", lo=1, hi=20_000_000),
    }),
    "power_w": Field("float", "typical whole-board power in watts while it runs a kernel (hlsnn perf's energy "
                     "estimate: power x time; the file's comment gives its source)", default=None, lo=0.01, hi=1000),
    "ps_config": Field("tokenmap", "explicit PS settings applied after the board preset (CONFIG.<key> <value>), "
                       "e.g. for a board without Vivado board files", default=None),
    "dma": Field("section", "AXI DMA and the PS port it uses", fields={
        "stream_bits": Field("int", "AXI-Stream data width of the DMA", lo=32, hi=512, pow2=True),
        "address_bits": Field("int", "DMA address width", lo=32, hi=64),
        "hp_port": Field("token", "PS slave port the DMA masters", default=""),
    }),
}


@dataclass(frozen=True)
class Board:
    name: str
    part: str
    board_part: str
    ps: str
    clock_mhz: float
    resources: Mapping[str, int]
    dma: Mapping[str, Any]
    ps_config: Mapping[str, str]
    path: str
    #: typical whole-board power (W) for ``hlsnn perf``'s energy estimate; None: not known. Not
    #: part of :meth:`as_dict` (nor of a config's hash): a modelling figure, not the hardware.
    power_w: Optional[float] = None

    def as_dict(self):
        return {k: (dict(v) if isinstance(v, Mapping) else v)
                for k, v in self.__dict__.items() if k not in ("path", "power_w")}


def load_board(name_or_path, *, source="", config_path=None) -> Board:
    """Find and validate a board by name (``configs/boards/<name>.yaml``) or path."""
    candidate = Path(str(name_or_path))
    if candidate.suffix in (".yaml", ".yml") and candidate.is_file():
        path = candidate
    else:
        name = str(name_or_path)
        if candidate.suffix in (".yaml", ".yml") and not _BOARD_NAME.fullmatch(name):
            raise ConfigError(source, "board", name_or_path, "no such board file (give a board name such as "
                              "'pynq-z2', or the path of a board YAML like configs/boards/pynq-z2.yaml)")
        if not _BOARD_NAME.fullmatch(name):
            raise ConfigError(source, "board", name_or_path, "must be a board name such as 'pynq-z2'")
        found = [d / f"{name}.yaml" for d in board_dirs(config_path) if (d / f"{name}.yaml").is_file()]
        if not found:
            known = sorted({p.stem for d in board_dirs(config_path) if d.is_dir() for p in d.glob("*.yaml")})
            raise ConfigError(source, "board", name, "unknown board; known boards: " + ", ".join(known))
        path = found[0]
    data = check_section(path, "", read_yaml(path), BOARD_FIELDS)
    if not _BOARD_NAME.fullmatch(data["name"]):
        # the name reaches bd.tcl and the hardware handoff: a newline there would be a TCL line
        raise ConfigError(path, "name", data["name"], "must be a board name: letters, digits, _ . - (not starting "
                          "with _ . -), the same as the file name; rename the file and its name, e.g. 'my-board'")
    if data["name"] != path.stem:
        raise ConfigError(path, "name", data["name"], f"must equal the file name '{path.stem}'")
    return Board(path=str(path), **data)


# ---------------------------------------------------------------------------------------------
# Accelerator configs

@dataclass(frozen=True)
class Config:
    """A validated accelerator config. ``params`` is the engine's section with defaults filled."""

    name: str
    engine: str
    board: Board
    clock_mhz: float
    params: Mapping[str, Any]
    path: str = ""
    #: the name of the config's build folder, ``build/<stem>/`` (:func:`hlsnn.paths.build_dir`):
    #: its ``name`` (a C identifier), never the file's stem, which can be ``..`` (``...yaml``)
    stem: str = ""
    estimates: Mapping[str, Any] = field(default_factory=dict)
    #: SHA-256 of the canonical JSON of :meth:`as_dict` (hex), set when the config is made.
    sha: str = field(init=False, repr=False, compare=False)

    def as_dict(self) -> dict:
        """The canonical content (what the config hash covers)."""
        return {"name": self.name, "engine": self.engine, "board": self.board.as_dict(),
                "clock_mhz": self.clock_mhz, self.engine: dict(self.params)}

    def __post_init__(self):
        # The hash is computed once: a config is immutable, and every kernel call checks it
        # against the ID register.
        blob = json.dumps(self.as_dict(), sort_keys=True, separators=(",", ":")).encode()
        object.__setattr__(self, "sha", hashlib.sha256(blob).hexdigest())

    @property
    def hash32(self) -> int:
        """The low 32 bits of :attr:`sha`, as the kernel's ID register reports it."""
        return int(self.sha[-8:], 16)


TOP_FIELDS_BASE = {
    "name": Field("ident", "IP and overlay name"),
    "board": Field("str", "board name (configs/boards/<board>.yaml)"),
    "engine": Field("str", "engine name"),
    "clock_mhz": Field("float", "PL clock; default: the board's", default=None, lo=10, hi=800),
}


def load_config(path_or_dict, *, source=None, check_fit=True) -> Config:
    """Load and validate an accelerator config from a YAML path (or an already parsed dict).

    ``check_fit=False`` skips only the check that the estimated resources fit the board.

    Raises
    ------
    ConfigError
        On the first problem found, naming file, key, value and what is allowed.
    """
    if isinstance(path_or_dict, Mapping):
        raw, path = path_or_dict, None
        source = source or "<dict>"
    else:
        path = find_config(path_or_dict)       # a path, or the name of a user or shipped config
        source = source or str(path)
        if path.suffix.lower() == ".onnx" and path.is_file():
            raise ConfigError(path, None, None, "is an ONNX model, not an accelerator config: give it to hlsnn through "
                              "a deployment config (configs/models/*.yaml), then `hlsnn deploy MODEL.yaml`, or "
                              "`hlsnn compile MODEL.yaml --assignment A -o build/NAME.hlsnn` and run or perf "
                              "build/NAME.hlsnn")
        raw = read_yaml(path)
        if isinstance(raw, Mapping) and "engine" not in raw and "model" in raw:
            raise ConfigError(path, None, None, "is a deployment config (a model and its formats), not an accelerator "
                              "config: `hlsnn deploy` takes it as it is; to run or time it in one kernel start, "
                              f"compile it first: hlsnn compile {path} --assignment A -o build/NAME.hlsnn, then "
                              "hlsnn run / hlsnn perf build/NAME.hlsnn")
    return _config_from_raw(raw, source, path, check_fit)


def config_from_data(config: Mapping, board: Mapping, *, source: str) -> "Config":
    """A Config from data that carries its board as data, not as a name: an overlay manifest
    (``<name>.json``). The same schema and rules as :func:`load_config` (C identifiers for
    names, the engine's ranges, a board name like a file stem), so nothing from a manifest
    reaches a path, TCL or C++ unvalidated."""
    if not isinstance(board, Mapping):
        raise ConfigError(source, "config.board", board, "must be a mapping (the board's fields)")
    bdata = check_section(source, "config.board.", {k: v for k, v in board.items()
                                                    if not (k == "ps_config" and v is None)}, BOARD_FIELDS)
    if not isinstance(bdata["name"], str) or not _BOARD_NAME.fullmatch(bdata["name"]):
        raise ConfigError(source, "config.board.name", bdata["name"], "must be a board name such as 'pynq-z2'")
    if not isinstance(config, Mapping):
        raise ConfigError(source, "config", config, "must be a mapping with keys name, engine, clock_mhz, ...")
    raw = {k: v for k, v in config.items() if k != "board"}
    raw["board"] = bdata["name"]
    return _config_from_raw(raw, source, None, False, board=Board(path="", **bdata))


def engine_of(raw, source):
    """``(name, registered engine)`` of the config ``raw``; :class:`ConfigError` unless it is a
    mapping whose ``engine`` is one of the engines the engine packages registered."""
    engines = registered_engines()          # filled by the engine packages (hlsnn.engine_registry)
    if not isinstance(raw, Mapping):
        raise ConfigError(source, None, None, "must be a YAML mapping with keys name, board, engine, ...")
    engine = raw.get("engine")
    if not isinstance(engine, str) or engine not in engines:
        raise ConfigError(source, "engine", engine if "engine" in raw else "<missing>",
                          "must be one of " + ", ".join(repr(e) for e in engines))
    return engine, engines[engine]


def _config_from_raw(raw, source, path, check_fit, board=None) -> "Config":
    engine, eng = engine_of(raw, source)
    fields = dict(TOP_FIELDS_BASE)
    fields[engine] = Field("section", f"{engine} parameters", fields=eng.schema)
    data = check_section(source, "", raw, fields)
    if data["name"] in RESERVED_NAMES:
        raise ConfigError(source, "name", data["name"], "is reserved: the name is the kernel's IP in the block design "
                          "and pynq's attribute for it, and the block design's cells (ps, dma) and pynq Overlay's own "
                          "attributes (reset, download, ip_dict, ...) take these names; choose another, e.g. "
                          f"'{data['name']}_accel'")
    if board is None:
        board = load_board(data["board"], source=source, config_path=path)
    clock = data["clock_mhz"] if data["clock_mhz"] is not None else board.clock_mhz
    params = eng.validate(dict(data[engine]), board, source)
    cfg = Config(name=data["name"], engine=engine, board=board, clock_mhz=clock, params=params,
                 path=str(path) if path else "", stem=data["name"])
    est = eng.estimate(cfg)
    for res, used in est["resources"].items():
        avail = board.resources.get(res, 0)
        if check_fit and used > avail:
            raise ConfigError(source, engine, _summary(params),
                              f"needs about {used} {res.upper()} but board {board.name} has {avail}; "
                              f"reduce the array or buffer sizes ({est['notes'].get(res, '')})")
    return replace(cfg, estimates=est)


def _summary(params):
    keys = [k for k in ("rows", "cols", "mantissa_bits", "max_k", "max_n") if k in params]
    return {k: params[k] for k in keys}
