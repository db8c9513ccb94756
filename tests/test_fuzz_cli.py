"""Fuzzing the CLI and the config schema (issue 17): whatever the arguments or the YAML, hlsnn
ends with an exit status in {0, 1, 2, 3}, never an uncaught exception (a traceback), and writes
nothing outside build/, overlays/ and the --out it was given. Runs in-process (fast) in a scratch
folder; commands that would compile C++ are left to the other tests. The examples are
derandomized, so CI runs the same ones every time (run with a fresh seed locally to explore:
``pytest tests/test_fuzz_cli.py --hypothesis-seed=N``)."""
import os
import string
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hlsnn.cli import main
from conftest import ROOT

SHIPPED = sorted((ROOT / "configs" / "accel").glob("*.yaml"))
FUZZ = settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                         HealthCheck.too_slow])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**40, 2**40), st.floats(allow_nan=True),
                    st.text(string.printable, max_size=12))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(string.ascii_letters + "_", min_size=1, max_size=8), inner, max_size=3), max_leaves=6)


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    monkeypatch.setenv("HLSNN_PROGRESS", "0")
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(3, 8)))
    np.save(tmp_path / "w.npy", np.random.default_rng(1).normal(size=(5, 8)))
    return tmp_path


def _files(root):
    return {p for p in root.rglob("*")}


#: what a command writes by default in the current folder when no --out is given (the others go under build/)
DEFAULT_OUTPUTS = ("*_quant.png",)


def _call(args, scratch, out=None):
    """Run ``hlsnn ARGS`` in a fresh folder under ``scratch`` (with x.npy and w.npy)."""
    import shutil
    here = scratch / f"ex{next(_counter)}"
    here.mkdir()
    for f in ("x.npy", "w.npy"):
        shutil.copy(scratch / f, here / f)
    before = _files(here)
    old = os.getcwd()
    os.chdir(here)
    try:
        try:
            code = main(args)
        except SystemExit as exc:                   # argparse: --help, or a usage error
            code = exc.code
    finally:
        os.chdir(old)
    assert code in (0, 1, 2, 3), (args, code)
    allowed = [scratch / "build", here / "build", here / "overlays"] + \
        ([Path(os.path.abspath(here / out))] if out else [])
    new = [p for p in _files(here) - before
           if not any(p == a or a in p.parents for a in allowed)
           and not (out is None and p.parent == here and any(p.match(g) for g in DEFAULT_OUTPUTS))]
    assert not new, (args, new)
    return code


_counter = __import__("itertools").count()


@FUZZ
@given(base=st.sampled_from(SHIPPED), edits=st.lists(st.tuples(st.text(string.ascii_letters + "_.", min_size=1,
                                                                         max_size=14), values), max_size=3),
       drop=st.lists(st.sampled_from(["name", "board", "engine", "clock_mhz"]), max_size=2))
def test_config_schema_fuzz(scratch, base, edits, drop):
    raw = yaml.safe_load(base.read_text())
    engine = raw["engine"]
    for key, value in edits:
        if "." in key:                                   # into the engine's section
            raw.setdefault(engine, {})[key.split(".")[-1] or "x"] = value
        else:
            raw[key] = value
    for key in drop:
        raw.pop(key, None)
    path = scratch / "fuzz.yaml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    _call(["info", str(path)], scratch)
    _call(["info", str(path), "--json"], scratch)


#: options and a few values each, good and bad (the bad ones are what issue 17 sent)
OPTIONS = {
    "--seed": ["-1", "0", "7"], "--cases": ["-2", "0", "1"], "--n": ["-3", "0", "3"], "--repeat": ["0", "1"],
    "--out": ["o.png", "o.html", "sub/o.png", "x.npy", "/proc/x.png"], "--target": ["emu", "nope"],
    "--output": ["o.npy", "o.png", "/proc/x.npy", "sub/o.npy"],
    "--input": ["x.npy", "w.npy", "missing.npy", ""], "--weights": ["w.npy", "x.npy", "missing.npy"],
    "--vary": ["rows=1,2", "cols=0", "nope=1", "rows"], "--bits": ["99", "8", "-1"], "--delta": ["9", "0"],
    "--axis": ["none", "0", "5"], "--board": ["kv260", "mars", "../x"], "--jobs": ["-4", "0", "1"],
    "--mode": ["pot", "twohot", "nope"], "--gemm": ["1,8,4", "0,8,4", "x"], "--conv": ["2,5,5,2,3", "1,1,1,1,9"],
    "--density": ["2", "0.5", "-1"], "--test-samples": ["0", "-5", "3"], "--padding": ["same", "valid", "x"],
}
FLAGS = ["--json", "--dry-run", "--no-csim", "--no-plot", "--resident"]
COMMANDS = [["info", "bfp16_pynq-z2"], ["info", "sparse8_pynq-z2"], ["run", "bfp16_pynq-z2", "--target", "emu"],
            ["run", "shift8_pynq-z2", "--target", "emu"], ["plot-quant", "w.npy"],
            ["sweep", "bfp16_pynq-z2", "--no-csim", "--no-plot"], ["build", "bfp16_pynq-z2", "--dry-run"],
            ["render", "shift8_pynq-z2"], ["perf", "nope"], ["deploy", "nope.yaml"]]
argument = st.one_of(st.sampled_from(sorted(OPTIONS)).flatmap(lambda k: st.sampled_from(OPTIONS[k]).map(
    lambda v: [k, v])), st.sampled_from(FLAGS).map(lambda f: [f]))


@pytest.mark.parametrize("cmd", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(extra=st.lists(argument, min_size=1, max_size=4))
def test_cli_argument_fuzz(scratch, cmd, extra):
    args = cmd + [a for pair in extra for a in pair]
    out = None
    for flag in ("--out", "--output"):
        if flag in args and args.index(flag) + 1 < len(args):
            out = args[args.index(flag) + 1]
    if cmd[0] == "run" and "--input" not in args:
        args += ["--input", "x.npy"]
    _call(args, scratch, out)
