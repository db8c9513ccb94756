"""Tests of config validation (hlsnn.config) and of how the CLI reports config errors.

The contract: loading a config validates everything before anything is rendered; each
problem is ONE one-line :class:`hlsnn.errors.ConfigError` (a ValueError) naming the file,
the key (a dotted path such as ``bfp_systolic.rows``), the bad value and what is allowed;
``hlsnn info|render CONFIG`` prints ``hlsnn: error: <message>`` on stderr as a single line,
without a traceback, and exits with status 2.

Configs are written into ``tmp_path`` as mutated copies of the shipped
``configs/accel/bfp16_pynq-z2.yaml``; boards are found by name in the repository's
``configs/boards`` or, for custom boards, in ``tmp_path/boards`` next to ``tmp_path/accel``.
"""
import copy
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hlsnn.engines import ENGINES

from hlsnn import codegen
from hlsnn.config import load_board, load_config
from hlsnn.engines.bfp_systolic import spec
from hlsnn.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent
ACCEL_CONFIGS = sorted((ROOT / "configs" / "accel").glob("*.yaml"))
BOARD_FILES = sorted((ROOT / "configs" / "boards").glob("*.yaml"))
BASE_CONFIG = ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml"
BASE_BOARD = ROOT / "configs" / "boards" / "pynq-z2.yaml"
DELETE = object()


@pytest.fixture(autouse=True)
def _no_extra_board_dirs(monkeypatch):
    # $HLSNN_BOARDS would add board directories ahead of the ones these tests control.
    monkeypatch.delenv("HLSNN_BOARDS", raising=False)


# ------------------------------------------------------------------------------- helpers

def base():
    """The shipped bfp16_pynq-z2 config as a fresh dict."""
    return yaml.safe_load(BASE_CONFIG.read_text())


# the rolling method's prediction: 8 squares (rolling_len 8), n*S2 (7x27: 2 DSPs), S1^2 (1), k*sd (4x32: 2)
ROLLING_DSP = 8 + 2 + 1 + 2


def base_board():
    return yaml.safe_load(BASE_BOARD.read_text())


def mutate(data, dotted, value):
    """Set (or with DELETE remove) ``dotted`` (e.g. ``bfp_systolic.rows``) in a copy of ``data``."""
    data = copy.deepcopy(data)
    *parents, last = dotted.split(".")
    d = data
    for k in parents:
        d = d[k]
    if value is DELETE:
        del d[last]
    else:
        d[last] = value
    return data


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def cfg_file(tmp_path, dotted=None, value=None, name="x.yaml"):
    data = base() if dotted is None else mutate(base(), dotted, value)
    return write(tmp_path / name, data)


def check_message(exc, filename, key, *allowed, value=DELETE):
    """The message is one line and names the file, the key, the bad value and what is allowed."""
    msg = str(exc)
    assert isinstance(exc, ValueError)
    assert "\n" not in msg and "\r" not in msg, msg
    assert filename in msg, msg
    if key is not None:
        assert exc.key == key, msg
        assert f"{key} = " in msg, msg
    if value is not DELETE:
        assert repr(value) in msg, msg
    for fragment in allowed:
        assert fragment in msg, msg
    return msg


def expect_error(path, key, *allowed, value=DELETE):
    with pytest.raises(ConfigError) as ei:
        load_config(path)
    return check_message(ei.value, Path(path).name, key, *allowed, value=value)


def expect_board_error(path, key, *allowed, value=DELETE):
    with pytest.raises(ConfigError) as ei:
        load_board(path)
    return check_message(ei.value, Path(path).name, key, *allowed, value=value)


def custom_board(tmp_path, name="tiny-board", **changes):
    """Write tmp_path/boards/<name>.yaml (pynq-z2 with ``changes`` as dotted-key=value)."""
    data = base_board()
    data["name"] = name
    for dotted, v in changes.items():
        data = mutate(data, dotted.replace("__", "."), v)
    return write(tmp_path / "boards" / f"{name}.yaml", data)


def accel_on(tmp_path, board, name="x.yaml", **changes):
    """Write tmp_path/accel/<name> using ``board``, so that tmp_path/boards is searched."""
    data = mutate(base(), "board", board)
    for dotted, v in changes.items():
        data = mutate(data, dotted.replace("__", "."), v)
    return write(tmp_path / "accel" / name, data)


# ------------------------------------------------------------------------ shipped files

def test_config_error_is_a_value_error():
    assert issubclass(ConfigError, ValueError)


@pytest.mark.parametrize("path", ACCEL_CONFIGS, ids=lambda p: p.stem)
def test_shipped_accel_config_loads(path):
    raw = yaml.safe_load(path.read_text())
    cfg = load_config(path)
    assert cfg.name == raw["name"]
    assert cfg.engine == raw["engine"]
    eng = ENGINES[cfg.engine]
    assert cfg.board.name == raw["board"]
    assert cfg.stem == raw["name"]          # the build folder: build/<name> (hlsnn.paths.build_dir)
    for key, value in raw[cfg.engine].items():
        assert cfg.params[key] == value
    keys = set(eng.SCHEMA)
    if cfg.engine == "sparse_cluster" and "net_shape" not in raw[cfg.engine]:
        keys -= {"net_shape", "net_sub", "net_lanes", "net_banks", "net_pack"}   # only with net_shape: board
    if cfg.engine == "sparse_cluster" and raw[cfg.engine].get("net_bits") != 4:
        keys -= {"net_bits"}                        # kept only at 4 (issue 82): the 8-bit configs' hashes stay
    if cfg.engine == "sparse_cluster" and not raw[cfg.engine].get("net_wlut"):
        keys -= {"net_wlut"}                        # kept only when given: the other configs' hashes stay
    if cfg.engine == "shift_mac" and "net_shape" not in raw[cfg.engine]:
        keys -= {"net_shape"}                                                     # only with net_shape: board
    if cfg.engine == "shift_mac":
        keys -= {k for k in ("max_code", "net_dsp") if not raw[cfg.engine].get(k)}    # only when given
    if cfg.engine == "bfp_systolic" and "net_shape" not in raw[cfg.engine]:     # only with net_shape: board
        keys -= {"net_shape", "net_lanes", "net_banks", "net_pack", "net_add", "net_maps"}
    if cfg.engine == "bfp_systolic" and not cfg.params.get("net_slots"):
        keys -= {"net_slots"}                       # kept only when on (.network.slots): the other configs' hashes stay
    assert set(cfg.params) == keys
    for res, used in cfg.estimates["resources"].items():
        # the shift-MAC engine uses no DSPs by design, and only sparse_cluster binds buffers to
        # URAM (where the board has it); everything else is used and fits
        unused = (res == "dsp" and cfg.engine == "shift_mac") or res == "uram"
        assert (0 < used or unused) and used <= cfg.board.resources[res]


def test_accel_configs_are_shipped():
    assert len(ACCEL_CONFIGS) >= 3 and len(BOARD_FILES) >= 4


@pytest.mark.parametrize("path", BOARD_FILES, ids=lambda p: p.stem)
def test_shipped_board_loads(path):
    by_path = load_board(path)
    by_name = load_board(path.stem)
    assert by_path == by_name
    assert by_path.name == path.stem
    assert by_path.ps in ("zynq7", "zynqmp")
    assert set(by_path.resources) == {"dsp", "bram36", "uram", "lut", "ff"}


def test_defaults_are_filled(tmp_path):
    cfg = load_config(cfg_file(tmp_path, "bfp_systolic.exponent_bits", DELETE))
    assert cfg.params["exponent_bits"] == spec.SCHEMA["exponent_bits"].default
    assert cfg.params["stats_k"] == 3
    assert cfg.params["stream_bits"] == cfg.board.dma["stream_bits"] == 64   # board-derived default
    assert cfg.clock_mhz == cfg.board.clock_mhz == 100.0


def test_load_from_dict():
    cfg = load_config(base())
    assert cfg.name == "bfp16_pynq_z2"
    with pytest.raises(ConfigError) as ei:
        load_config(mutate(base(), "bfp_systolic.rows", 0))
    check_message(ei.value, "<dict>", "bfp_systolic.rows", "an integer in [1, 64]", value=0)


# ------------------------------------------------------------------- keys: unknown/missing

def test_unknown_top_level_key(tmp_path):
    p = cfg_file(tmp_path, "colour", "red")
    expect_error(p, "colour", "unknown key", "allowed keys: name, board, engine, clock_mhz, bfp_systolic",
                 value="red")


def test_misspelled_engine_section(tmp_path):
    data = base()
    data["bfp_sytolic"] = data.pop("bfp_systolic")
    expect_error(write(tmp_path / "x.yaml", data), "bfp_sytolic", "unknown key", "bfp_systolic")


def test_unknown_key_in_engine_section(tmp_path):
    p = cfg_file(tmp_path, "bfp_systolic.colums", 4)
    msg = expect_error(p, "bfp_systolic.colums", "unknown key", "allowed keys:", value=4)
    for key in spec.SCHEMA:
        assert key in msg


@pytest.mark.parametrize("dotted, fragment", [
    ("bfp_systolic.rows", "an integer in [1, 64]"),
    ("bfp_systolic.cols", "an integer in [1, 64]"),
    ("bfp_systolic.mantissa_bits", "an integer in [2, 16]"),
    ("name", "a C identifier"),
    ("board", "a string"),
    ("bfp_systolic", "a mapping with keys rows, cols"),
])
def test_missing_required_key(tmp_path, dotted, fragment):
    expect_error(cfg_file(tmp_path, dotted, DELETE), dotted, "required key is missing", fragment,
                 value="<missing>")


def test_missing_engine(tmp_path):
    expect_error(cfg_file(tmp_path, "engine", DELETE), "engine", "must be one of 'bfp_systolic'",
                 value="<missing>")


def test_empty_engine_section(tmp_path):
    # "bfp_systolic:" with nothing under it is an empty section: the first required key is missing.
    expect_error(cfg_file(tmp_path, "bfp_systolic", None), "bfp_systolic.rows", "required key is missing")


# --------------------------------------------------------------------------------- types

@pytest.mark.parametrize("dotted, value, fragment", [
    ("bfp_systolic.rows", "16", "an integer in [1, 64]"),
    ("bfp_systolic.rows", 16.0, "an integer in [1, 64]"),
    ("bfp_systolic.rows", 16.5, "an integer in [1, 64]"),
    ("bfp_systolic.rows", True, "an integer in [1, 64]"),       # bool is not an int here
    ("bfp_systolic.mantissa_bits", False, "an integer in [2, 16]"),
    ("bfp_systolic.max_k", [1024], "an integer in [1, 65536]"),
    ("bfp_systolic.rows", None, "an integer in [1, 64]"),
    ("bfp_systolic", [1, 2], "must be a mapping"),
    ("bfp_systolic", "rows=16", "must be a mapping"),
    ("clock_mhz", "fast", "a number in [10, 800]"),
    ("clock_mhz", True, "a number in [10, 800]"),
    ("clock_mhz", float("nan"), "a number in [10, 800]"),
    ("name", 123, "a C identifier"),
    ("board", ["pynq-z2"], "a string"),
    ("bfp_systolic.rounding", 0, "one of 'nearest_even', 'nearest_away', 'truncate'"),
])
def test_wrong_type(tmp_path, dotted, value, fragment):
    p = cfg_file(tmp_path, dotted, value)
    expect_error(p, dotted, fragment, value=value)


def test_bool_from_yaml_text_is_not_an_int(tmp_path):
    text = BASE_CONFIG.read_text().replace("rows: 8 ", "rows: yes ")
    assert "rows: yes" in text
    p = tmp_path / "x.yaml"
    p.write_text(text)
    expect_error(p, "bfp_systolic.rows", "an integer in [1, 64]", value=True)


def test_engine_not_a_string(tmp_path):
    # An unhashable value used to escape as TypeError (a traceback in the CLI).
    expect_error(cfg_file(tmp_path, "engine", ["bfp_systolic"]), "engine", "must be one of 'bfp_systolic'",
                 value=["bfp_systolic"])


# ------------------------------------------------------------------------------- ranges

@pytest.mark.parametrize("key, value, lo, hi", [
    ("rows", 0, 1, 64), ("rows", 65, 1, 64), ("rows", -1, 1, 64),
    ("cols", 0, 1, 64), ("cols", 65, 1, 64),
    ("mantissa_bits", 1, 2, 16), ("mantissa_bits", 17, 2, 16),
    ("exponent_bits", 2, 3, 8), ("exponent_bits", 9, 3, 8),
    ("acc_bits", 7, 8, 48), ("acc_bits", 49, 8, 48),
    ("max_k", 0, 1, 65536), ("max_k", 65537, 1, 65536),
    ("max_n", 0, 1, 8192), ("max_n", 8193, 1, 8192),
    ("max_batch", 0, 1, 1 << 24), ("max_batch", (1 << 24) + 1, 1, 1 << 24),
    ("stats_k", -1, 0, 15), ("stats_k", 16, 0, 15),
    ("rows", 10 ** 30, 1, 64),
])
def test_int_out_of_range(tmp_path, key, value, lo, hi):
    p = cfg_file(tmp_path, f"bfp_systolic.{key}", value)
    expect_error(p, f"bfp_systolic.{key}", f"an integer in [{lo}, {hi}]", value=value)


@pytest.mark.parametrize("value", [5, 9.99, 800.5, 1e9, float("inf"), -100])
def test_clock_out_of_range(tmp_path, value):
    expect_error(cfg_file(tmp_path, "clock_mhz", value), "clock_mhz", "a number in [10, 800]")


@pytest.mark.parametrize("dotted, value", [
    ("bfp_systolic.rows", 1), ("bfp_systolic.cols", 1), ("bfp_systolic.mantissa_bits", 2),
    ("bfp_systolic.exponent_bits", 3), ("bfp_systolic.max_k", 1), ("bfp_systolic.max_n", 8192),
    ("bfp_systolic.max_batch", 1 << 24), ("bfp_systolic.stats_k", 15), ("bfp_systolic.stream_bits", 512),
    ("bfp_systolic.stream_bits", 32), ("clock_mhz", 10), ("clock_mhz", 800), ("clock_mhz", 142.857),
])
def test_boundary_values_are_accepted(tmp_path, dotted, value):
    data = mutate(base(), dotted, value)
    # The stores then hold one sample per column, not their default groups, which would not
    # fit pynq-z2's 140 BRAM36 (max_n 8192: 384 for the result store; a 512-bit stream: 32
    # lanes, 128 result banks; a 32-bit stream: 16 groups).
    if dotted == "bfp_systolic.max_n":                  # on 4 columns
        data["bfp_systolic"].update(y_depth=8192, cols=4)
    if dotted == "bfp_systolic.stream_bits":   # and at 512 bits, 256 results of max_n (LUTRAM)
        data["bfp_systolic"].update(x_depth=1024 * 16 // value, max_n=256, y_depth=256)
    cfg = load_config(write(tmp_path / "x.yaml", data))
    got = cfg.clock_mhz if dotted == "clock_mhz" else cfg.params[dotted.split(".")[1]]
    assert got == value


@pytest.mark.parametrize("value", [48, 96, 100, 33, 384])
def test_stream_bits_must_be_power_of_two(tmp_path, value):
    p = cfg_file(tmp_path, "bfp_systolic.stream_bits", value)
    expect_error(p, "bfp_systolic.stream_bits", "a power of two", "[32, 512]", value=value)


@pytest.mark.parametrize("value", [16, 1024])
def test_stream_bits_range(tmp_path, value):
    expect_error(cfg_file(tmp_path, "bfp_systolic.stream_bits", value), "bfp_systolic.stream_bits",
                 "an integer in [32, 512]", value=value)


# ------------------------------------------------------------------------------ choices

@pytest.mark.parametrize("key, value, allowed", [
    ("rounding", "stochastic", "one of 'nearest_even', 'nearest_away', 'truncate'"),
    ("rounding", "nearest", "one of 'nearest_even', 'nearest_away', 'truncate'"),
    ("rounding", "Nearest_Even", "'nearest_even'"),
    ("weight_exponent", "col", "one of 'row', 'tensor'"),
    ("weight_exponent", "", "one of 'row', 'tensor'"),
    ("output_exponent", "mean", "one of 'max', 'stats'"),
])
def test_bad_choice(tmp_path, key, value, allowed):
    expect_error(cfg_file(tmp_path, f"bfp_systolic.{key}", value), f"bfp_systolic.{key}", allowed, value=value)


# --------------------------------------------------------------------------- identifiers

@pytest.mark.parametrize("value", [
    "9abc", "a-b", "has space", "class", "int", "namespace", "x" * 65, "", "a.b", "caf\u00e9",
    'x"; system("rm -rf /"); //', "x\ny", "ok\n", "x;y", "$(rm)", "a/b",
])
def test_name_must_be_a_c_identifier(tmp_path, value):
    p = cfg_file(tmp_path, "name", value)
    expect_error(p, "name", "a C identifier", "[A-Za-z_][A-Za-z0-9_]*", value=value)


def test_name_length_limit_is_stated(tmp_path):
    expect_error(cfg_file(tmp_path, "name", "n" * 65), "name", "at most 64 characters")


@pytest.mark.parametrize("value", ["x" * 64, "_ok", "A1", "bfp16_pynq_z2", "Class"])
def test_good_names(tmp_path, value):
    assert load_config(cfg_file(tmp_path, "name", value)).name == value


# --------------------------------------------------------------------------- engine/board

def test_unknown_engine(tmp_path):
    expect_error(cfg_file(tmp_path, "engine", "gemm"), "engine", "must be one of", "'bfp_systolic'",
                 value="gemm")


def test_unknown_board(tmp_path):
    msg = expect_error(cfg_file(tmp_path, "board", "pynq-z3"), "board", "unknown board", "known boards:",
                       value="pynq-z3")
    for b in BOARD_FILES:
        assert b.stem in msg


@pytest.mark.parametrize("value", ["../boards/pynq-z2", "pynq z2", "", "-x", "a;b", "pynq-z2\n"])
def test_board_name_with_bad_characters(tmp_path, value):
    expect_error(cfg_file(tmp_path, "board", value), "board", "must be a board name", value=value)


def test_custom_board_next_to_config_dir(tmp_path):
    bp = custom_board(tmp_path, "tiny-board", resources__dsp=500, clock_mhz=125)
    cfg = load_config(accel_on(tmp_path, "tiny-board"))
    assert cfg.board.name == "tiny-board"
    assert Path(cfg.board.path) == bp
    assert cfg.board.resources["dsp"] == 500
    assert cfg.clock_mhz == 125.0          # the board's default clock
    # The repository's boards are still found from that directory.
    assert load_config(accel_on(tmp_path, "zcu104", name="y.yaml")).board.name == "zcu104"


def test_config_dir_boards_shadow_repository_boards(tmp_path):
    custom_board(tmp_path, "pynq-z2", resources__dsp=1000, resources__bram36=400)
    cfg = load_config(accel_on(tmp_path, "pynq-z2", bfp_systolic__rows=32, bfp_systolic__cols=8))
    assert cfg.board.resources["dsp"] == 1000
    assert Path(cfg.board.path).is_relative_to(tmp_path)


def test_unknown_board_lists_config_dir_boards(tmp_path):
    custom_board(tmp_path, "tiny-board")
    msg = expect_error(accel_on(tmp_path, "nope"), "board", "known boards:", value="nope")
    assert "tiny-board" in msg and "pynq-z2" in msg


def test_board_name_must_match_file_name(tmp_path):
    data = base_board()
    data["name"] = "pynq-z2"
    bp = write(tmp_path / "boards" / "other.yaml", data)
    with pytest.raises(ConfigError) as ei:
        load_config(accel_on(tmp_path, "other"))
    check_message(ei.value, "other.yaml", "name", "must equal the file name 'other'", value="pynq-z2")
    assert ei.value.source == str(bp)       # the board file is the one that is wrong
    expect_board_error(bp, "name", "must equal the file name 'other'")


@pytest.mark.parametrize("dotted, value, fragment", [
    ("resources.dsp", 0, "an integer in [1, 100000]"),
    ("resources.lut", "many", "an integer in [1, 10000000]"),
    ("resources.dsp", True, "an integer in [1, 100000]"),
    ("resources.uram", -1, "an integer in [0, 100000]"),
    ("resources.gpu", 1, "allowed keys: dsp, bram36, uram, lut, ff"),
    ("resources", [220], "must be a mapping"),
    ("dma.stream_bits", 96, "a power of two"),
    ("dma.address_bits", 16, "an integer in [32, 64]"),
    ("ps", "zynq9", "one of 'zynq7', 'zynqmp'"),
    ("clock_mhz", 0, "a number in [10, 800]"),
    ("colour", "red", "allowed keys: name, part, board_part, ps, clock_mhz, resources, power_w, ps_config, dma"),
    ("part", DELETE, "required key is missing"),
    ("resources.dsp", DELETE, "required key is missing"),
])
def test_bad_board_file(tmp_path, dotted, value, fragment):
    data = mutate(base_board(), dotted, value)
    data["name"] = "bad-board"
    bp = write(tmp_path / "boards" / "bad-board.yaml", data)
    expect_board_error(bp, dotted, fragment)
    # Through a config, the message names the board file too.
    with pytest.raises(ConfigError) as ei:
        load_config(accel_on(tmp_path, "bad-board"))
    check_message(ei.value, "bad-board.yaml", dotted, fragment)


def test_board_file_that_is_a_list(tmp_path):
    bp = tmp_path / "boards" / "lst.yaml"
    bp.parent.mkdir()
    bp.write_text("- name: lst\n- part: xc7z020clg400-1\n")
    expect_board_error(bp, "(top level)", "must be a mapping")


def test_board_stream_width_limits_kernel_stream(tmp_path):
    custom_board(tmp_path, "narrow", dma__stream_bits=32)
    # (on 4 columns: 16 lanes make 11 x 16 result banks, more block RAM than the board has)
    cfg = load_config(accel_on(tmp_path, "narrow", bfp_systolic__stream_bits=256, bfp_systolic__cols=4))
    assert cfg.params["stream_bits"] == 256
    expect_error(accel_on(tmp_path, "narrow", bfp_systolic__stream_bits=512), "bfp_systolic.stream_bits",
                 "at most 8x the board DMA width (32)", value=512)


# ------------------------------------------------------------------------- file problems

def test_yaml_syntax_error_has_line_number(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: x\nboard: pynq-z2\nengine: bfp_systolic\nbfp_systolic:\n  rows: 16\n   cols: 4\n")
    msg = expect_error(p, None, "not valid YAML", "line 6")
    assert re.search(r"line \d+, column \d+", msg)


def test_yaml_unclosed_bracket(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: x\nboard: [pynq-z2\nengine: bfp_systolic\n")
    expect_error(p, None, "not valid YAML", "line ")


def test_yaml_python_tags_are_refused(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text('name: !!python/object/apply:os.system ["true"]\n')
    expect_error(p, None, "not valid YAML", "line 1")


def test_yaml_control_character(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("name: a\x07b\n")
    expect_error(p, None, "not valid YAML", "unacceptable character #x0007")


def test_file_not_utf8(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_bytes(b"name: \xff\xfe\n")
    expect_error(p, None, "cannot be read as UTF-8")


def test_missing_file(tmp_path):
    p = tmp_path / "does_not_exist.yaml"
    msg = expect_error(p, None, "no such config file")
    assert str(p) in msg


def test_directory_instead_of_file(tmp_path):
    d = tmp_path / "dir.yaml"
    d.mkdir()
    expect_error(d, None, "is a folder, not a config file")


@pytest.mark.parametrize("text", ["- name: x\n- board: pynq-z2\n", "just a string\n", "42\n", "", "# nothing\n"])
def test_not_a_mapping(tmp_path, text):
    p = tmp_path / "x.yaml"
    p.write_text(text)
    expect_error(p, None, "must be a YAML mapping", "name, board, engine")


# ------------------------------------------------------------------------ cross-field rules

@pytest.mark.parametrize("mantissa_bits, max_k, acc_bits, need", [
    (16, 1024, 40, 41),        # 2*16 - 1 + 10
    (16, 65536, 46, 47),       # 2*16 - 1 + 16
    (8, 1, 14, 15),            # log2(1) = 0
    (8, 1000, 24, 25),         # ceil(log2(1000)) = 10
    (12, 4096, 34, 35),        # 2*12 - 1 + 12
])
def test_acc_bits_too_small(tmp_path, mantissa_bits, max_k, acc_bits, need):
    data = base()
    data["bfp_systolic"].update(mantissa_bits=mantissa_bits, max_k=max_k, acc_bits=acc_bits, rows=4, cols=2)
    p = write(tmp_path / "x.yaml", data)
    expect_error(p, "bfp_systolic.acc_bits", "must be at least 2*mantissa_bits - 1 + ceil(log2(max_k))",
                 f"= {need}", f"max_k = {max_k}", value=acc_bits)
    data["bfp_systolic"]["acc_bits"] = need                       # the minimum is enough
    if max_k <= 4096:
        assert load_config(write(tmp_path / "ok.yaml", data)).params["acc_bits"] == need
    else:
        # ... for the accumulator; K = 65536 on chip (two weight tiles of 32,768 steps) then
        # exceeds the board's block RAM, a different rule with its own message
        with pytest.raises(ConfigError) as ei:
            load_config(write(tmp_path / "ok.yaml", data))
        assert ei.value.key == "bfp_systolic" and "BRAM36" in str(ei.value) and "wstore" in str(ei.value)


def test_stats_needs_tensor_weight_exponent(tmp_path):
    p = cfg_file(tmp_path, "bfp_systolic.output_exponent", "stats")     # base has weight_exponent: row
    expect_error(p, "bfp_systolic.output_exponent", "weight_exponent: tensor", value="stats")
    data = mutate(base(), "bfp_systolic.output_exponent", "stats")
    data["bfp_systolic"]["weight_exponent"] = "tensor"
    assert load_config(write(tmp_path / "ok.yaml", data)).params["output_exponent"] == "stats"


def test_dsp_exceeds_board(tmp_path):
    data = base()
    data["bfp_systolic"].update(rows=64, cols=64)
    msg = expect_error(write(tmp_path / "x.yaml", data), "bfp_systolic", "DSP", "board pynq-z2 has 220")
    assert f"needs about {64 * 64 * 2 + ROLLING_DSP} DSP" in msg   # two per tile (per-row exponents: no statistics unit)
    assert "'rows': 64" in msg and "'cols': 64" in msg


def test_bram_exceeds_board(tmp_path):
    data = base()
    data["bfp_systolic"].update(rows=8, cols=8, max_k=65536)
    msg = expect_error(write(tmp_path / "x.yaml", data), "bfp_systolic", "BRAM36", "board pynq-z2 has 140")
    assert re.search(r"needs about \d+ BRAM36", msg)


def test_same_array_fits_a_bigger_board(tmp_path):
    data = base()
    data["bfp_systolic"].update(rows=32, cols=16)
    p = write(tmp_path / "x.yaml", data)
    expect_error(p, "bfp_systolic", "DSP", "board pynq-z2 has 220")
    data["board"] = "zcu104"
    # stores of two groups of samples (the default of 8 would take 313 BRAM36 of the 312)
    data["bfp_systolic"].update(x_depth=2 * 1024 // 8, y_depth=2 * 1024)
    cfg = load_config(write(tmp_path / "y.yaml", data))
    assert cfg.estimates["resources"]["dsp"] == 32 * 16 * 2 + ROLLING_DSP <= 1728


# ---------------------------------------------------------------------------------- hash

def test_same_content_same_hash(tmp_path):
    data = base()
    a = load_config(write(tmp_path / "a" / "one.yaml", data))
    b = load_config(write(tmp_path / "b" / "two.yaml", data))
    assert a.sha == b.sha and a.hash32 == b.hash32
    # Key order, comments and explicit defaults do not matter: the hash covers the filled-in content.
    c_path = tmp_path / "c.yaml"
    c_path.write_text("# a comment\n" + yaml.safe_dump(data, sort_keys=True))
    assert load_config(c_path).sha == a.sha
    explicit = mutate(data, "bfp_systolic.stats_k", 3)
    explicit["clock_mhz"] = 100
    explicit["bfp_systolic"]["stream_bits"] = 64
    assert load_config(write(tmp_path / "d.yaml", explicit)).sha == a.sha
    assert load_config(data).sha == a.sha


def test_shipped_config_hashes_differ():
    shas = {load_config(p).sha for p in ACCEL_CONFIGS}
    assert len(shas) == len(ACCEL_CONFIGS)


def test_hash32_is_low_32_bits_of_sha():
    for p in ACCEL_CONFIGS:
        cfg = load_config(p)
        assert re.fullmatch(r"[0-9a-f]{64}", cfg.sha)
        assert cfg.hash32 == int(cfg.sha, 16) & 0xFFFFFFFF
        assert 0 <= cfg.hash32 < 1 << 32


@pytest.mark.parametrize("dotted, value", [
    ("name", "other_name"), ("board", "ultra96v2"), ("clock_mhz", 125),
    ("bfp_systolic.rows", 4), ("bfp_systolic.cols", 2), ("bfp_systolic.mantissa_bits", 15),
    ("bfp_systolic.exponent_bits", 7), ("bfp_systolic.acc_bits", 47), ("bfp_systolic.max_k", 512),
    ("bfp_systolic.max_n", 512), ("bfp_systolic.max_batch", 1000), ("bfp_systolic.weight_exponent", "tensor"),
    ("bfp_systolic.rounding", "truncate"), ("bfp_systolic.stats_k", 2), ("bfp_systolic.stream_bits", 128),
])
def test_any_change_changes_hash(tmp_path, dotted, value):
    ref = load_config(cfg_file(tmp_path, name="ref.yaml"))
    cfg = load_config(cfg_file(tmp_path, dotted, value, name="changed.yaml"))
    assert cfg.sha != ref.sha
    assert cfg.hash32 != ref.hash32


def test_board_content_is_part_of_hash(tmp_path):
    custom_board(tmp_path, "pynq-z2")                   # identical copy: same hash as the repo board
    ref = load_config(BASE_CONFIG)
    assert load_config(accel_on(tmp_path, "pynq-z2")).sha == ref.sha
    custom_board(tmp_path, "pynq-z2", part="xc7z020clg484-1")
    assert load_config(accel_on(tmp_path, "pynq-z2", name="y.yaml")).sha != ref.sha


# ------------------------------------------------------------------------ injection safety

@pytest.mark.parametrize("value", ['x"; system("rm -rf /"); //', "x\ny", "a]; exec rm -rf /; #", "x */ int y; /*"])
def test_injected_name_is_rejected_before_rendering(tmp_path, value):
    p = cfg_file(tmp_path, "name", value)
    out = tmp_path / "out"
    expect_error(p, "name", "a C identifier", value=value)
    assert not out.exists()
    # The CLI renders nothing either.
    r = subprocess.run([sys.executable, "-m", "hlsnn.cli", "render", str(p), "--out", str(out)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2
    assert_one_line_error(r.stderr)
    assert not out.exists()


@pytest.mark.parametrize("field, value", [
    ("part", "xc7z020clg400-1; exec rm -rf /"),
    ("part", "[exec rm -rf /]"),
    ("part", "$env(HOME)"),
    ("part", 'xc7z020"clg400-1'),
    ("part", "xc7z020clg400-1\nexec rm -rf /"),
    ("part", "xc7z020clg400-1\n"),
    ("part", "xc7z020 clg400-1"),
    ("part", "{xc7z020}"),
    ("part", ""),
    ("part", 7020),
    ("board_part", "tul.com.tw:pynq-z2:part0:1.0]"),
    ("dma.hp_port", "S_AXI_HP0; exec"),
])
def test_board_strings_that_would_break_tcl_are_rejected(tmp_path, field, value):
    data = mutate(base_board(), field, value)
    data["name"] = "evil"
    bp = write(tmp_path / "boards" / "evil.yaml", data)
    expect_board_error(bp, field, "letters, digits and _ . : -", value=value)
    out = tmp_path / "out"
    with pytest.raises(ConfigError):
        codegen.render(load_config(accel_on(tmp_path, "evil")), out)
    assert not out.exists()


def test_empty_board_part_and_hp_port_are_allowed(tmp_path):
    custom_board(tmp_path, "bare", board_part="", dma__hp_port="")
    cfg = load_config(accel_on(tmp_path, "bare"))
    assert cfg.board.board_part == "" and cfg.board.dma["hp_port"] == ""


def _set_part_lines(tcl: str):
    return [line for line in tcl.splitlines() if line.startswith("set_part")]


def test_custom_part_reaches_tcl_once(tmp_path):
    part = "xc7z020clg484-2"
    custom_board(tmp_path, "myboard", part=part)
    cfg = load_config(accel_on(tmp_path, "myboard"))
    assert cfg.board.part == part
    r = codegen.render(cfg, tmp_path / "out")
    tcl = (r.dir / "run_hls.tcl").read_text()
    assert tcl.count(part) == 1
    assert _set_part_lines(tcl) == [f"set_part {part}"]


@pytest.mark.parametrize("path", ACCEL_CONFIGS, ids=lambda p: p.stem)
def test_shipped_part_and_name_in_tcl(tmp_path, path):
    cfg = load_config(path)
    r = codegen.render(cfg, tmp_path / "out")
    tcl = (r.dir / "run_hls.tcl").read_text()
    assert tcl.count(cfg.board.part) == 1
    assert _set_part_lines(tcl) == [f"set_part {cfg.board.part}"]
    assert f"-ipname {cfg.name}\n" in tcl
    written = json.loads((r.dir / "config.json").read_text())
    assert written["sha256"] == cfg.sha


# ----------------------------------------------------------------------------------- CLI

def assert_one_line_error(stderr):
    assert "Traceback" not in stderr
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("hlsnn: error: "), stderr
    assert stderr.endswith("\n")
    return lines[0]


def run_cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "hlsnn.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "HLSNN_BUILD": str(Path(cwd) / "build")})


@pytest.mark.parametrize("case", ["range", "unknown_key", "yaml", "board", "missing", "stochastic"])
def test_cli_info_bad_config(tmp_path, case):
    if case == "range":
        p, fragments = cfg_file(tmp_path, "bfp_systolic.rows", 0), ["bfp_systolic.rows = 0", "[1, 64]"]
    elif case == "unknown_key":
        p, fragments = cfg_file(tmp_path, "bfp_systolic.colums", 4), ["bfp_systolic.colums", "allowed keys"]
    elif case == "yaml":
        p = tmp_path / "x.yaml"
        p.write_text("name: x\nboard: [pynq-z2\nengine: bfp_systolic\n")
        fragments = ["not valid YAML", "line "]
    elif case == "board":
        p, fragments = cfg_file(tmp_path, "board", "pynq-z3"), ["board = 'pynq-z3'", "known boards:"]
    elif case == "missing":
        p, fragments = tmp_path / "x.yaml", ["no such config file"]
    else:
        p, fragments = cfg_file(tmp_path, "bfp_systolic.rounding", "stochastic"), ["'nearest_even'"]
    r = run_cli("info", p, cwd=tmp_path)
    assert r.returncode == 2, r
    line = assert_one_line_error(r.stderr)
    assert "x.yaml" in line
    for f in fragments:
        assert f in line
    assert r.stdout == ""
    # The message is exactly the ConfigError's.
    with pytest.raises(ConfigError) as ei:
        load_config(p)
    assert line == f"hlsnn: error: {ei.value}"


def test_cli_render_bad_config_renders_nothing(tmp_path):
    p = cfg_file(tmp_path, "bfp_systolic.acc_bits", 49)
    out = tmp_path / "out"
    r = run_cli("render", p, "--out", out, cwd=tmp_path)
    assert r.returncode == 2
    line = assert_one_line_error(r.stderr)
    assert "bfp_systolic.acc_bits = 49" in line and "[8, 48]" in line
    assert not out.exists() and not (tmp_path / "build").exists()


def test_cli_info_good_config(tmp_path):
    r = run_cli("info", BASE_CONFIG, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""
    cfg = load_config(BASE_CONFIG)
    assert "bfp16_pynq_z2: engine bfp_systolic on pynq-z2 (xc7z020clg400-1) at 100 MHz" in r.stdout
    assert "estimated resources" in r.stdout
    assert f"0x{cfg.hash32:08x}" in r.stdout
    for res, used in cfg.estimates["resources"].items():
        assert re.search(rf"{res}\s+{used}\s+of\s+{cfg.board.resources[res]}\b", r.stdout), r.stdout
    dsp_line = [line for line in r.stdout.splitlines() if line.strip().startswith("dsp")]
    assert dsp_line and "189 of" in re.sub(r"\s+", " ", dsp_line[0])      # 8*11 tiles * 2 + ROLLING_DSP
    assert "buffers the kernel declares" in r.stdout and re.search(r"\bxstore\s+bfp_systolic_top\s+array\s+11\b", r.stdout)


def test_cli_main_in_process(tmp_path, capsys):
    from hlsnn.cli import main
    assert main(["info", "--json", str(BASE_CONFIG)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["sha256"] == load_config(BASE_CONFIG).sha
    assert out["estimates"]["resources"]["dsp"] == 176 + ROLLING_DSP
    assert {b["name"] for b in out["estimates"]["buffers"]} >= {"xstore", "ybuf", "wstore", "bias", "wexp", "acc"}
    p = cfg_file(tmp_path, "name", "class")
    assert main(["info", str(p)]) == 2
    err = capsys.readouterr().err
    line = assert_one_line_error(err)
    assert "x.yaml" in line and "name = 'class'" in line and "C identifier" in line


def test_board_ps_config_is_validated_and_rendered(tmp_path):
    """Explicit PS settings: keys must be PCW_*/PSU__* property names and values TCL-safe
    tokens; they reach bd.tcl as CONFIG.<key> <value>."""
    import hlsnn.build
    from hlsnn import codegen
    base = yaml.safe_load((ROOT / "configs" / "boards" / "zcu104.yaml").read_text())
    boards = tmp_path / "boards"
    boards.mkdir()
    for bad, match in (({"rm -rf": "1"}, "PCW_"), ({"PSU__X": "a  b"}, "letters, digits"), ({"PSU__X": "{x}"}, "letters"),
                       ({"PSU__X": "[exec ls]"}, "letters, digits"), (["PSU__X"], "mapping")):
        (boards / "zcu104.yaml").write_text(yaml.safe_dump({**base, "ps_config": bad}))
        with pytest.raises(ConfigError, match=match):
            load_board(boards / "zcu104.yaml")
    (boards / "zcu104.yaml").write_text(yaml.safe_dump({**base, "ps_config": {"PSU__FOO__BAR": 7}}))
    assert load_board(boards / "zcu104.yaml").ps_config == {"PSU__FOO__BAR": "7"}
    (tmp_path / "accel").mkdir()
    raw = yaml.safe_load((ROOT / "configs" / "accel" / "bfp8_zcu104.yaml").read_text())
    (tmp_path / "accel" / "c.yaml").write_text(yaml.safe_dump(raw))
    cfg = load_config(tmp_path / "accel" / "c.yaml")
    out = codegen.render_extra(cfg, "bd.tcl.j2", tmp_path / "bd.tcl", hlsnn.build.bd_context(cfg))
    assert "CONFIG.PSU__FOO__BAR {7}" in out.read_text()


def test_config_imports_no_engine_and_the_registry_has_them_all():
    """Imports flow one way (issue 19): config.py reads the engine registry, which every engine
    package fills when imported; it imports neither engines nor the runtime."""
    import ast
    from hlsnn import config, engine_registry
    from hlsnn.engines import ENGINES
    tree = ast.parse(open(config.__file__).read())
    mods = {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    mods |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not [m for m in mods if m.split(".")[0] in ("engines", "runtime", "deploy", "hlsnn")], mods
    specs = engine_registry.engines()
    assert list(specs) == list(ENGINES)
    for name, eng in ENGINES.items():
        assert specs[name].schema is eng.SCHEMA and specs[name].validate is eng.validate
        assert specs[name].estimate is eng.estimate


def test_an_unknown_key_names_the_closest_allowed_ones_and_not_its_whole_value(tmp_path):
    """A misspelt key gets "did you mean" with the allowed key it is closest to; the value of a
    misspelt section is named by its size, not dumped and truncated (the key is what is wrong)."""
    raw = yaml.safe_load((ROOT / "configs" / "accel" / "bfp8_zcu104.yaml").read_text())
    raw["bfp_systolic"]["rowz"] = raw["bfp_systolic"].pop("rows")
    with pytest.raises(ConfigError, match=r"bfp_systolic.rowz = 48: unknown key; did you mean 'rows'\? allowed keys: "):
        load_config(raw)
    raw = yaml.safe_load((ROOT / "configs" / "accel" / "bfp8_zcu104.yaml").read_text())
    raw["bfp_sistolic"] = raw.pop("bfp_systolic")
    with pytest.raises(ConfigError, match=r"bfp_sistolic = <a mapping of \d+ keys>: unknown key; did you mean "
                                          r"'bfp_systolic'\?"):
        load_config(raw)
    raw["zzz"] = 1
    del raw["bfp_sistolic"]
    with pytest.raises(ConfigError, match=r"zzz = 1: unknown key; allowed keys: "):  # nothing close: no guess
        load_config(raw)


def test_a_deployment_config_with_assignment_for_assignments_says_so(tmp_path):
    from hlsnn.deploy.config import load_deploy_config
    raw = yaml.safe_load((ROOT / "configs" / "models" / "digits_cnn.yaml").read_text())
    raw["assignment"] = raw.pop("assignments")
    p = tmp_path / "dep.yaml"
    p.write_text(yaml.safe_dump(raw))
    with pytest.raises(ConfigError, match=r"assignment = <a mapping of \d+ keys?>: unknown key; did you mean "
                                          r"'assignments'\?"):
        load_deploy_config(p)
