"""The house rules of host/hlsnn (issue 46), read from the source (nothing is imported but the
engine list): no import cycle among hlsnn's modules, no module over 700 lines, every engine
package with the same parts for the same ideas (its network mode included), and the folders'
imports in one direction."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "host" / "hlsnn"
MAX_LINES = 700
#: a folder (a room) of hlsnn holds at most this many modules besides its __init__, and lines (issue 80)
MAX_FOLDER_MODULES, MAX_FOLDER_LINES = 26, 5000
#: the parts every engine package has (``engines/<engine>/``), the network mode's included
ENGINE_PARTS = ("__init__.py", "spec.py", "protocol.py", "emulator.py", "kernel.py", "cases.py",
                "network/__init__.py", "network/lower.py", "network/kernel.py", "network/perf.py")
#: top-level folders and files of hlsnn, from the bottom up: a room may import only rooms before
#: it (or itself). Single-file rooms not named here are the base (errors, paths, config, ...).
ORDER = ("formats", "plots", "csim", "engines", "codegen", "blockdesign", "perf", "runtime", "measure", "compare",
         "deploy", "network", "evaluation", "build", "train", "variant", "cluster", "seed002", "sweep", "commands", "cli")
#: the imports that still run back up, as room pairs: none since issue 46 (the deployment's
#: integer program lives in deploy/, ``hlsnn deploy`` and its report in evaluation/). The test fails
#: on any upward import not named here, and on a pair named here that is gone: the set only shrinks.
KNOWN_UP: set = set()


def _modules():
    mods = {}
    for p in sorted(PKG.rglob("*.py")):
        rel = p.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            mods[".".join(parts[:-1])] = (p, True)
        else:
            mods[".".join(parts)] = (p, False)
    return mods


def _imports(mods):
    """``{module: {imported hlsnn module: first line}}``, function-level imports included."""
    out = {}
    for m, (p, is_pkg) in mods.items():
        base = m.split(".") if is_pkg else m.split(".")[:-1]
        edges = {}
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            targets = []
            if isinstance(node, ast.Import):
                for a in node.names:
                    parts = a.name.split(".")
                    while parts and ".".join(parts) not in mods:
                        parts.pop()
                    if parts and parts[0] == "hlsnn":
                        targets.append(".".join(parts))
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    mod = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if not mod.startswith("hlsnn"):
                    continue
                for a in node.names:
                    full = f"{mod}.{a.name}"
                    targets.append(full if full in mods else mod)
            for t in targets:
                if t in mods and t != m:
                    edges.setdefault(t, node.lineno)
        out[m] = edges
    return out


def _cycles(nodes, edges):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = n[0]
        n[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = n[0]
                    n[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    comps.append(sorted(comp))
    return comps


def test_no_import_cycle_among_hlsnn_modules():
    mods = _modules()
    edges = _imports(mods)
    cycles = _cycles(sorted(mods), edges)
    lines = []
    for comp in cycles:
        inside = set(comp)
        lines.append(f"{len(comp)} modules import each other: " + ", ".join(
            f"{a} -> {b} (line {edges[a][b]})" for a in comp for b in sorted(edges[a]) if b in inside))
    assert not cycles, "\n".join(lines)


def test_no_module_over_700_lines():
    long = {str(p.relative_to(PKG.parent)): n for p in PKG.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines (split them by idea): {long}"


def test_no_folder_over_26_modules_or_5000_lines():
    big = {}
    for d in [PKG, *(p for p in PKG.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        mods = [p for p in d.glob("*.py") if p.name != "__init__.py"]
        lines = sum(len(p.read_text().splitlines()) for p in d.glob("*.py"))
        if len(mods) > MAX_FOLDER_MODULES or lines > MAX_FOLDER_LINES:
            big[str(d.relative_to(PKG.parent))] = (len(mods), lines)
    assert not big, f"folders over {MAX_FOLDER_MODULES} modules or {MAX_FOLDER_LINES} lines (split them by stage or idea): {big}"


def _room(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _upward(imports):
    """``(imports that run back up, as "a -> b", the room pairs they make)`` of ``{module:
    {imported module: line}}``: a room imports only the rooms below it in :data:`ORDER` (the
    single files not named there are the base, below all)."""
    rank = {r: i + 1 for i, r in enumerate(ORDER)}
    up, pairs = [], set()
    for a, bs in imports.items():
        ra = _room(a)
        for b in bs:
            rb = _room(b)
            if ra and rb and ra != rb and rank.get(rb, 0) > rank.get(ra, 0):
                pairs.add((ra, rb))
                if (ra, rb) not in KNOWN_UP:
                    up.append(f"{a} -> {b}")
    return sorted(up), pairs


def test_folders_import_in_one_direction():
    """A room (a top-level folder or file of hlsnn) imports only the rooms below it in
    :data:`ORDER` (the single files not named there are the base, below all)."""
    up, pairs = _upward(_imports(_modules()))
    assert not up, "imports that run back up:\n" + "\n".join(up)
    assert not KNOWN_UP - pairs, f"gone (strike them from KNOWN_UP): {sorted(KNOWN_UP - pairs)}"


def test_every_engine_has_the_same_parts():
    from hlsnn.engines import ENGINES
    missing = {e: [part for part in ENGINE_PARTS if not (PKG / "engines" / e / part).is_file()] for e in ENGINES}
    assert not any(missing.values()), f"engine packages without a part every engine has: {missing}"


def test_the_rules_catch_what_they_forbid():
    """The checks above fail on a cycle and on a back-up import (a planted pair)."""
    assert _cycles(["a", "b", "c"], {"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]
    assert _cycles(["a", "b"], {"a": {"b"}}) == []
    assert _room("hlsnn.engines.bfp_systolic.spec") == "engines" and _room("hlsnn") is None
    # deploy below network: the runner importing the loader runs back up; the loader importing
    # the runner, and any room importing a base file, do not
    up, pairs = _upward({"hlsnn.deploy.run.runner": {"hlsnn.network.loader": 1, "hlsnn.errors": 2},
                         "hlsnn.network.loader": {"hlsnn.deploy.run.runner": 3}})
    assert up == ["hlsnn.deploy.run.runner -> hlsnn.network.loader"] and pairs == {("deploy", "network")}


@pytest.mark.parametrize("engine", ["bfp_systolic", "shift_mac", "sparse_cluster"])
def test_network_part_finds_the_engines_network_mode(engine):
    from hlsnn.engine_registry import network_part
    for part in ("lower", "kernel", "perf"):
        assert network_part(engine, part).__name__ == f"hlsnn.engines.{engine}.network.{part}"
    assert network_part(engine, "lower").RULES.engine == engine
