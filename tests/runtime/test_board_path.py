"""The run-time path a board uses needs numpy, PyYAML and (for target 'pynq') pynq only, on
Python 3.8 or newer: importing hlsnn and running the emulator, ``hlsnn compare`` and the pynq
target module must not import Jinja2, hls4ml or pynq itself (pynq is imported lazily, when a
pynq/sim target is made), and the modules that path loads must be Python 3.8 code."""
import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

HOST = ROOT / "host"

# Prints {"heavy": [...], "files": [...]}: the optional packages imported and the hlsnn modules
# loaded by the board's run-time path (the files the Python 3.8 checks below look at).
CODE = r"""
import json, sys, numpy as np
import hlsnn, hlsnn.cli
from hlsnn.compare import compare
from hlsnn.runtime import pynq_target, targets   # the board path
for cfg in ("bfp16_pynq-z2", "shift8_pynq-z2", "sparse8_pynq-z2"):
    acc = hlsnn.Accelerator(f"configs/accel/{cfg}.yaml", "emu")
    if cfg.startswith("sparse"):
        acc.conv2d(np.ones((1, 6, 6), np.int8), np.ones((2, 1, 3, 3), np.int8))
    else:
        acc.gemm(np.ones((2, 8)), np.ones((3, 8)))
    compare(acc.config, "emu", n_random=1)     # what `hlsnn compare/run --target pynq` checks against
hlsnn.cli.build_parser()
heavy = [m for m in ("jinja2", "hls4ml", "pynq") if m in sys.modules]
files = sorted({m.__file__ for n, m in list(sys.modules.items())
                if (n == "hlsnn" or n.startswith("hlsnn.")) and getattr(m, "__file__", None)})
print(json.dumps({"heavy": heavy, "files": files}))
sys.exit(1 if heavy else 0)
"""

#: board-path modules the small run above may not load (operations too small to be tiled)
ALSO_ON_BOARD = ["hlsnn/engines/tiling.py"]

#: builtin types that became subscriptable (``list[int]``) only in Python 3.9 (PEP 585)
PEP585 = {"list", "dict", "tuple", "set", "frozenset", "type"}


def _run_board_path(python=sys.executable):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(HOST), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([python, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def board_path():
    res = _run_board_path()
    assert res.returncode == 0, res.stdout + res.stderr
    info = json.loads(res.stdout.strip().splitlines()[-1])
    files = {Path(f).resolve() for f in info["files"]} | {(HOST / f).resolve() for f in ALSO_ON_BOARD}
    assert all(HOST in f.parents for f in files), f"hlsnn was not imported from {HOST}: {sorted(files)}"
    return info["heavy"], sorted(files)


def test_board_path_imports_no_jinja_hls4ml_or_pynq(board_path):
    heavy, files = board_path
    assert heavy == []
    assert any(f.name == "pynq_target.py" for f in files)


def _py38_problems(path):
    """Python >= 3.9 syntax in ``path``: anything ``ast`` rejects at feature_version 3.8 (match,
    parenthesized context managers, ...), ``X | Y`` and ``list[int]`` annotations in a module
    that evaluates its annotations (no ``from __future__ import annotations``), builtin
    generics subscripted at run time and ``isinstance(x, A | B)``."""
    src = path.read_text()
    try:
        tree = ast.parse(src, str(path), feature_version=(3, 8))
    except SyntaxError as exc:
        return [f"{path.name}:{exc.lineno}: not Python 3.8 syntax: {exc.msg}"]
    lazy = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
               for n in tree.body)
    annotations = set()
    for node in ast.walk(tree):
        for ann in (getattr(node, "annotation", None), getattr(node, "returns", None)):
            if ann is not None:
                annotations.update(id(n) for n in ast.walk(ann))
    problems = []
    for node in ast.walk(tree):
        in_ann = id(node) in annotations
        if in_ann and lazy:
            continue
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in PEP585:
            problems.append(f"{path.name}:{node.lineno}: {node.value.id}[...] needs Python 3.9")
        if in_ann and isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            problems.append(f"{path.name}:{node.lineno}: an evaluated `X | Y` annotation needs Python 3.10")
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("isinstance", "issubclass")
                and len(node.args) == 2 and isinstance(node.args[1], ast.BinOp) and isinstance(node.args[1].op, ast.BitOr)):
            problems.append(f"{path.name}:{node.lineno}: {node.func.id}(x, A | B) needs Python 3.10")
    return problems


def test_board_path_is_python38_syntax(board_path):
    _, files = board_path
    problems = [p for f in files for p in _py38_problems(f)]
    assert not problems, "\n".join(problems)


def test_board_path_uses_no_newer_stdlib_per_vermin(board_path):
    """vermin (a dev dependency) knows which stdlib names and builtin behaviours need which
    Python: ``str.removeprefix``, ``functools.cache``, ``zip(strict=)``, ``dict | dict``,
    ``math.lcm``, ... Not its annotation checks: it flags ``X | Y`` annotations even under
    ``from __future__ import annotations``, where Python 3.8 never evaluates them (the ast check
    above covers annotations)."""
    pytest.importorskip("vermin")
    _, files = board_path
    argv = ["vermin", "-t=3.8-", "--no-tips", "--violations", "--processes=1",
            *map(str, files)]
    res = subprocess.run([sys.executable, "-c", f"import sys; sys.argv = {argv!r}; from vermin import main; "
                          "sys.exit(main())"], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.skipif(not os.environ.get("HLSNN_PYTHON38"),
                    reason="set HLSNN_PYTHON38 to a Python 3.8 with numpy and PyYAML to run the board path on it")
def test_board_path_runs_on_python38():
    python = os.environ["HLSNN_PYTHON38"]
    version = subprocess.run([python, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True,
                             text=True, timeout=60).stdout.strip()
    assert version == "(3, 8)", f"HLSNN_PYTHON38={python} is Python {version}"
    res = _run_board_path(python)
    assert res.returncode == 0, res.stdout + res.stderr
