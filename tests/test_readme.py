"""The examples of the README and of the documentation (``docs/**/*.md``) run as written from a
checkout (issues 18 and 34).

Every fenced block of those files is taken apart:

* ```python blocks run, each on its own, in a fresh interpreter in a scratch folder that sees
  the repository's ``benchmarks/``, ``configs/``, ``docs/``, ``overlays/``, ``scripts/`` and ``tests/`` (lines marked
  ``# board only`` are left out: they need a PYNQ board);
* shell blocks run line by line in the same kind of folder. ``$ cmd`` lines are commands and the
  lines after them up to the next ``$`` are output that must appear; in a block without ``$``
  every line is a command, and a block with a here-document (``<<``) runs whole. Left out:
  ``# board only`` lines, installs (``pip install``), the test suite itself (``python -m
  pytest``) and the documentation build (``python -m sphinx``: ``tests/test_docs_build.py``).
  ``hlsnn build`` may exit 3, as documented, where the Xilinx tools are absent.
* Blocks marked ```text (a layout tree, a diagram, code that needs other packages) and MyST
  directives (```{toctree}, the generated references) are not commands.

A block that compiles C++, runs a target other than the emulator, or a whole model is marked
``slow`` (CI runs it); the others stay in the quick suite.
"""
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = [pytest.mark.csim]
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("**/*.md"))
BOARD = "# board only"
# what makes a block slow: a compile (csim, sim, build), a whole model, a sweep or a benchmark
SLOW = re.compile(r"csim|\bsim\b|\"sim\"|hlsnn (build|deploy|report|sweep|perf|run|compare|autotune)|build_bitstream|"
                  r"deploy\(|bench|train_|hls/|Accelerator\(.*\"(csim|sim|pynq)\"")


def blocks(path):
    """``(line number, language, lines)`` of every fenced block of ``path``."""
    out, lang, start, body = [], None, 0, None
    for no, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            if body is None:
                lang, start, body = line[3:].strip(), no, []
            else:
                out.append((start, lang, body))
                body = None
        elif body is not None:
            body.append(line)
    return out


def _is_tree(lines):
    return all(not ln.strip() or re.match(r"^[\w./<>-]+/\s", ln) or ln.startswith(" ") for ln in lines)


def shell_steps(lines):
    """``[(command, [expected output lines])]`` of a shell block."""
    if any("<<" in ln for ln in lines):
        return [("\n".join(ln for ln in lines if BOARD not in ln), [])]
    if any(ln.startswith("$ ") for ln in lines):
        steps = []
        for ln in lines:
            if ln.startswith("$ "):
                steps.append((ln[2:], []))
            elif steps and ln.strip():
                steps[-1][1].append(ln)
        return steps
    return [(ln, []) for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]


def _skip(cmd):
    c = cmd.strip()
    return (BOARD in c or c.startswith("pip install") or "python -m pytest" in c or "python -m sphinx" in c)


def _cases():
    out = []
    for path in [README] + DOCS:
        rel = path.relative_to(ROOT)
        for no, lang, body in blocks(path):
            if lang == "python" or (lang in ("", "sh", "bash") and not _is_tree(body)):
                slow = bool(SLOW.search("\n".join(ln for ln in body if BOARD not in ln)))
                marks = [pytest.mark.slow] if slow else []
                out.append(pytest.param(str(rel), no, lang, body, marks=marks, id=f"{rel}:{no}"))
    return out


CASES = _cases()


def _scratch(tmp_path):
    for name in ("benchmarks", "configs", "docs", "host", "overlays", "scripts", "tests"):   # `PYTHONPATH=host` in a block
        os.symlink(ROOT / name, tmp_path / name)
    # a checkout's build/ (the session's HLSNN_BUILD is elsewhere, so `--out build/...` finds it made)
    (tmp_path / "build").mkdir()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), MPLBACKEND="Agg")
    env.pop("HLSNN_CSIM_FAST", None)     # the blocks run as a user types them: the strict library
    return env


def test_the_readme_and_docs_have_examples():
    langs = [p.values[2] for p in CASES]
    assert langs.count("python") >= 6 and len(CASES) >= 15
    assert any(p.values[0] == "README.md" for p in CASES)


def test_the_readme_is_a_front_page():
    """At most about 200 lines, the exact test command .ci/run calls, and links into the docs
    that resolve."""
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    assert 'python -m pytest -n auto -m "not slow and not heavy"' in text
    assert 'python -m pytest -n auto -m "not slow and not heavy"' in (ROOT / ".ci" / "run").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", text)
    assert len(links) >= 10
    for link in links:
        assert (ROOT / link).is_file(), link


@pytest.mark.parametrize("rel,no,lang,body", CASES)
def test_block_runs_as_written(rel, no, lang, body, tmp_path):
    env = _scratch(tmp_path)
    if lang == "python":
        code = "\n".join(ln for ln in body if BOARD not in ln)
        r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=600)
        assert r.returncode == 0, f"{rel}:{no}: python block failed\n{r.stderr[-3000:]}"
        return
    for cmd, expected in shell_steps(body):
        # `pip install ... && hlsnn csim ...`: the install is left out, the rest runs
        cmd = " && ".join(part.strip() for part in cmd.split("&&") if not _skip(part))
        if not cmd:
            continue
        argv0 = shlex.split(cmd, comments=True)[:2] if "<<" not in cmd else []
        r = subprocess.run(cmd, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
                           executable="/bin/bash")
        allowed = (0, 3) if argv0 == ["hlsnn", "build"] else (0,)
        if expected and expected[0].startswith("hlsnn: error:"):
            allowed = (2,)
        assert r.returncode in allowed, f"{rel}:{no}: `{cmd}` exited {r.returncode}\n{r.stderr[-3000:]}"
        for line in expected:
            assert line in r.stdout + r.stderr, f"{rel}:{no}: `{cmd}` did not print {line!r}"


def _build_paths(cmd):
    """``(written, read)``: the ``build/...`` paths a command writes (a redirection, ``np.save``,
    ``-o``/``--out``/``--output``) and the others it names."""
    written = re.findall(r"(?:>\s*|np\.save\(['\"]|(?:-o|--out|--output)[ =])(build/[\w./-]+)", cmd)
    read = [p for p in re.findall(r"(?<![\w/.>-])(build/[\w./-]+)", cmd) if p not in written]
    return written, read


def test_blocks_make_the_build_files_they_read():
    """A fresh checkout has no ``build/`` (git ignores it) and each block runs on its own (a
    reader starts at any of them; :func:`test_block_runs_as_written` runs each in a folder of
    its own): every ``build/...`` file a shell block reads is made earlier in the block, and a
    redirection or ``np.save`` into ``build/`` comes after a ``mkdir -p build`` or after an
    ``hlsnn`` command that made it (``-o build/...``)."""
    bad = []
    for path in [README] + DOCS:
        for no, lang, body in blocks(path):
            if lang not in ("", "sh", "bash") or _is_tree(body):
                continue
            made, folder = set(), False
            for line in body:
                cmd = line.strip()[2:] if line.strip().startswith("$ ") else line.strip()
                if not cmd or cmd.startswith("#") or _skip(cmd):
                    continue
                folder = folder or bool(re.search(r"mkdir -p build\b", cmd))
                written, read = _build_paths(cmd)
                bad += [f"{path.name}:{no}: reads {p}, which no earlier line of the block makes" for p in read
                        if p not in made and not any(p.startswith(m + "/") for m in made)]
                by_hlsnn = all(re.search(r"(?:-o|--out|--output)[ =]" + re.escape(w), cmd) for w in written)
                if written and not folder and not by_hlsnn:
                    bad.append(f"{path.name}:{no}: writes {written[0]} before anything makes build/ (mkdir -p build)")
                made |= set(written)
                folder = folder or bool(written)
    assert not bad, "\n".join(bad)
