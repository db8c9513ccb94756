"""The registry of the network mode's integer rules (:mod:`hlsnn.engines.network.rules`) holds
true: every emulator function it names imports, every kernel loop it names is a loop label of
that engine's network templates, every test it names is a test function of that file, the
names are unique snake_case, and the docstrings of ``host/hlsnn`` name network rules by those
names (a code of before, ``rule 10c``, only where a module's own numbered list means it)."""
from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from hlsnn.engines.network import rules

ROOT = Path(__file__).resolve().parents[2]
HOST = ROOT / "host" / "hlsnn"

#: modules whose docstrings number rules of their own (a layer kernel's emulator, a fit's
#: steps): a ``rule N`` there is that list's, not the network mode's; {path: their numbers}
LOCAL_LISTS = {
    "engines/shift_mac/emulator.py": "1 2 3 4 5 6 7", "engines/shift_mac/floatgemm.py": "1 2 5",
    "engines/shift_mac/kernel.py": "5 7", "engines/shift_mac/tiles.py": "3 4 5 7",
    "engines/shift_mac/spec.py": "1", "engines/shift_mac/protocol.py": "5",
    "engines/sparse_cluster/emulator.py": "1 2 3 4 5 6", "engines/sparse_cluster/kernel.py": "1",
    "engines/sparse_cluster/protocol.py": "2", "engines/bfp_systolic/emulator.py": "0 0w 1 2 3 4 5 6 7",
    "engines/bfp_systolic/kernel.py": "0 0w 5", "engines/bfp_systolic/protocol.py": "1 5",
    "engines/bfp_systolic/spec.py": "1", "deploy/quantize/twoterm.py": "1 2 3 4",
    "deploy/quantize/radix_search.py": "1 2 3", "deploy/quantize/calibrate.py": "1 2 3 4",
    "deploy/quantize/update.py": "5", "deploy/run/executors.py": "0w 2 5",
    "deploy/run/bfpfast.py": "0", "deploy/run/actmm_engine.py": "1 2 3 5",
    "engines/bfp_systolic/compiled.py": "3",
    "train/bfpgemm.py": "0 0w", "native/bfp_rows.c": "0 2", "native/shift_quant.c": "5",
    "native/sparse_post.c": "5", "native/sparse_conv.c": "1", "native/int_conv.c": "1",
    "native/netint.c": "0 1", "deploy/run/runner.py": "0",
}
#: a mention of a rule by its code: ``rule 10c``, ``rules 9e and 10c``, ``rules 16-19``
CODE = re.compile(r"\b[Rr]ules?[ -](\d{1,2}[a-z]{0,3})(?![\w])")
#: a mention by name: ``rule gate_in``, ``rules table_in and gate_in``
NAME = re.compile(r"\b[Rr]ules?[ -]``?([a-z][a-z0-9]*(?:_[a-z0-9]+)+)")
#: the local lists' own words before the code (``emulator rule 5``, ``twoterm rule 2``)
LOCAL_WORDS = re.compile(r"emulator|twoterm|radix_search|twoin|engine's|module docstring")


def _templates(engine):
    root = ROOT / "hls" / "engines"
    files = sorted((root / engine).glob("network*.j2"))
    if engine != "bfp_systolic":              # the integer kernels include shift_mac's shared loops
        files += sorted((root / "shift_mac").glob("network_*.j2"))
    return "\n".join(f.read_text() for f in files)


def _labels(engine):
    return set(re.findall(r"^\s*([A-Z][A-Za-z0-9_]*):\s*$", _templates(engine), re.M))


def _sources():
    for path in sorted(HOST.rglob("*")):
        if path.suffix in (".py", ".c"):
            yield path.relative_to(HOST).as_posix(), path.read_text()


def test_names_are_unique_snake_case_and_codes_unique_per_scope():
    names = [r.name for r in rules.RULES]
    assert len(names) == len(set(names))
    assert all(re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)+", n) for n in names), names
    assert {r.scope for r in rules.RULES} == {"netmode", "netmove", "netbfp"}
    coded = [(r.scope, r.code) for r in rules.RULES if r.code]
    assert len(coded) == len(set(coded))


@pytest.mark.parametrize("rule", rules.RULES, ids=lambda r: r.name)
def test_the_emulator_function_imports_and_its_docstrings_name_the_rule(rule):
    for path in (rule.emulator, *rule.extra.values()):
        assert callable(rules.resolve(path)), path
    fn = rules.resolve(rule.emulator)
    module = sys.modules[fn.__module__]
    assert re.search(rf"\b{rule.name}\b", (fn.__doc__ or "") + (module.__doc__ or "")), \
        f"{rule.emulator}: neither its docstring nor its module's states rule {rule.name}"


@pytest.mark.parametrize("engine", rules.ENGINES)
def test_every_kernel_loop_is_a_label_of_its_engines_templates(engine):
    labels = _labels(engine)
    assert labels, engine
    missing = {r.name: loop for r in rules.RULES for loop in rules.loops(r, engine) if loop not in labels}
    assert not missing, f"{engine}: loops not in hls/engines/{engine}/network*.j2: {missing}"
    assert all(set(r.kernels) <= set(rules.ENGINES) and r.kernels for r in rules.RULES)


def test_every_test_node_id_is_a_test_function_of_its_file():
    missing = []
    for r in rules.RULES:
        assert r.tests, f"{r.name} has no test"
        for node in r.tests:
            file, func = node.split("::")
            tree = ast.parse((ROOT / file).read_text())
            if func not in {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}:
                missing.append((r.name, node))
    assert not missing


def test_a_rule_named_in_the_sources_is_in_the_registry():
    unknown = [(path, m.group(1)) for path, text in _sources() for m in NAME.finditer(text)
               if m.group(1) not in rules.BY_NAME]
    assert not unknown, unknown


def test_every_rule_code_in_the_sources_is_a_local_lists():
    """A ``rule N`` left in ``host/hlsnn`` is the number of a module's own list (its emulator's,
    a fit's steps), said so by the file or the words before it; a network rule goes by its name
    (``/work/wt/tools/rename_rules.py`` rewrites codes of before to names)."""
    left = []
    for path, text in _sources():
        for m in CODE.finditer(text):
            line = text[text.rfind("\n", 0, m.start()) + 1:m.start()]
            if m.group(1) in LOCAL_LISTS.get(path, "").split() or LOCAL_WORDS.search(line[-60:]):
                continue
            left.append(f"{path}: {m.group(0)}")
    assert not left, left


def test_the_docs_table_has_a_row_per_rule_and_every_engine_column():
    rows = rules.table_rows()
    assert len(rows) == len(rules.RULES) and all(len(r) == 4 + len(rules.ENGINES) for r in rows)
    assert [r[1] for r in rows] == [r.name for r in rules.RULES]
    assert [r.name for r in rules.by_code("9")] == ["rows_transpose", "unary_table", "bfp_output"]
