"""Build caches are keyed by what they were built from and checked against it (issue 33,
findings 3, 4 and 9):

* a csim library is compiled from the sources its key hashes, never from a project folder
  that another config of the same name rewrote meanwhile (the poisoned cache: a library built
  from rows-4 sources under the rows-8 hash, "the kernel left input beats unread" forever);
* a foreign library, or an empty one from a broken compiler, is rebuilt or refused, not loaded
  as ``undefined symbol`` on every run; temporaries of a killed compile are removed;
* build folders come from the config's validated name (a file named ``...yaml`` has the stem
  ``..``), and an empty ``HLSNN_BUILD`` does not mean the working folder.
"""
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, accel_config, test_config
from hlsnn import native

needs_cc = pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")



def _resign(lib: Path):
    """Make the checksum beside ``lib`` match its (replaced) content, whatever form it takes:
    an attacker's or a confused tool's view of a valid entry."""
    import hashlib
    digest = hashlib.sha256(lib.read_bytes()).hexdigest()
    for side in lib.parent.glob(lib.name + ".*"):
        if side.suffix == ".sha256":
            side.write_text(digest + "\n")
        elif side.suffix == ".json":
            data = json.loads(side.read_text())
            data["sha256"] = digest
            side.write_text(json.dumps(data))


def _probe_call(lib, a):
    import ctypes
    lib.hlsnn_probe.restype = ctypes.c_int
    lib.hlsnn_probe.argtypes = [ctypes.c_int]
    return lib.hlsnn_probe(a)


@needs_cc
def test_a_foreign_native_library_with_a_matching_checksum_is_rebuilt(probe, tmp_path, capsys):
    assert _probe_call(native.load("probe"), 2) == 7
    lib = next((tmp_path / "cache").glob("libprobe_*.so"))
    other = tmp_path / "other.c"
    other.write_text("int something_else(void) { return 1; }\n")
    subprocess.run([native.c_compiler(), "-shared", "-fPIC", str(other), "-o", str(tmp_path / "other.so")], check=True)
    lib.unlink()                                 # a new file (this process maps the old one)
    lib.write_bytes((tmp_path / "other.so").read_bytes())
    _resign(lib)
    native.forget()
    assert _probe_call(native.load("probe"), 3) == 10       # rebuilt, not "undefined symbol"
    assert "rebuilding" in capsys.readouterr().err
    native.forget()
    assert _probe_call(native.load("probe"), 4) == 13       # and the rebuilt entry is good


@needs_cc
def test_an_empty_library_from_a_bad_compiler_is_not_cached(probe, tmp_path, monkeypatch, capsys):
    cc = tmp_path / "emptycc"
    cc.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\nexit 0\n')
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    assert native.load("probe") is None
    assert "no shared library" in capsys.readouterr().err
    assert not native.library_path("probe", str(cc)).exists()       # nothing cached under that key
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.endswith(".so")]


@needs_cc
def test_a_killed_compile_leaves_no_temporaries(probe, tmp_path, monkeypatch):
    slow = tmp_path / "slowcc"
    slow.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && : > "$2"; shift; done\nexec sleep 60\n')
    slow.chmod(0o755)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), CC=str(slow), HLSNN_NATIVE_CACHE=str(tmp_path / "cache"))
    code = f"import hlsnn.native as n; n.SOURCE_DIR = __import__('pathlib').Path({str(probe)!r}); n.load('probe')"
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, start_new_session=True)
    try:
        deadline = time.time() + 30
        while not [p for p in (tmp_path / "cache").glob(".*") if p.name.endswith(".so")]:
            assert time.time() < deadline and proc.poll() is None, "the compile never started"
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)                  # the process and its compiler
        proc.wait()
    assert [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]    # what kill -9 left
    assert _probe_call(native.load("probe"), 1) == 4                                # the next compile ...
    assert not [p for p in (tmp_path / "cache").iterdir() if p.name.startswith(".")]   # ... cleans up


# ------------------------------------------------------------------------ csim: the poisoned cache

def _two_of_one_name(tmp_path):
    """Two configs with the same name and file stem, different arrays (a/net.yaml rows 8,
    b/net.yaml rows 4)."""
    raw = yaml.safe_load(test_config("t2_tiny").read_text())
    out = []
    for sub, rows in (("a", 8), ("b", 4)):
        d = tmp_path / sub
        d.mkdir()
        data = {**raw, "name": "net", raw["engine"]: {**raw[raw["engine"]], "rows": rows}}
        (d / "net.yaml").write_text(yaml.safe_dump(data))
        out.append(d / "net.yaml")
    return out


def test_csim_compiles_the_sources_it_hashed_not_the_shared_folder(tmp_path, monkeypatch):
    """A renders, B (same name) renders into the same folder, A compiles: A's library must be
    built from A's sources (on main it was built from B's, under A's hash)."""
    from hlsnn import codegen, compiling, csim
    from hlsnn.config import load_config
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    pa, pb = _two_of_one_name(tmp_path)
    ca, cb = load_config(pa), load_config(pb)
    ra = codegen.render(ca)
    rb = codegen.render(cb)
    assert ra.dir == rb.dir                         # one project folder: build/net/hls
    seen = {}

    def fake_compiler(argv, *a, **kw):              # record what g++ would read, and fail
        srcs = [Path(a) for a in argv if a.endswith(".cpp")]
        seen["cpp"] = {p.name: p.read_text() for p in srcs}
        seen["config"] = next(Path(a[2:]) for a in argv if a.startswith("-I") and not a.endswith("include")) \
            .joinpath("bfp_systolic_config.h").read_text()
        return subprocess.CompletedProcess(argv, 1, "", "error: stop here")
    monkeypatch.setattr(compiling, "run", fake_compiler)     # csim runs g++ through compiling.run
    with pytest.raises(Exception):
        csim.compile_library(ra)
    want = dict(ra.sources)
    assert seen["cpp"]["bfp_systolic.cpp"] == want["bfp_systolic.cpp"].decode()
    assert seen["config"] == want["bfp_systolic_config.h"].decode() != dict(rb.sources)["bfp_systolic_config.h"].decode()
    assert csim.library_path(ra) != csim.library_path(rb)


def test_a_cache_entry_is_used_only_for_what_it_was_built_from(tmp_path, monkeypatch):
    """An entry under A's key whose manifest names other sources is not used."""
    from hlsnn import cachefile, codegen, compiling, csim
    from hlsnn.config import load_config
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    ca = load_config(_two_of_one_name(tmp_path)[0])
    ra = codegen.render(ca)
    lib = csim.library_path(ra)
    lib.parent.mkdir(parents=True)
    lib.write_bytes(b"\x7fELF something else")
    built = csim._built_from(ra, (), "0" * 64)           # built from other sources
    cachefile.write_manifest(lib, built, cachefile.sha256(lib))
    assert not cachefile.entry_ok(lib, csim._built_from(ra, (), ra.sha))
    calls = []
    monkeypatch.setattr(compiling, "run",
                        lambda argv, *a, **kw: calls.append(argv) or subprocess.CompletedProcess(argv, 1, "", "error: x"))
    with pytest.raises(Exception):
        csim.compile_library(ra)
    assert calls, "the entry was taken from the cache"


def test_a_project_folder_rewritten_since_is_refused(tmp_path):
    """A rendered project read back from its folder (no kept sources) whose files no longer
    hash to its sha is an error naming the folder, not a library of unknown sources."""
    import hlsnn
    from hlsnn import codegen, csim
    from hlsnn.config import load_config
    ra = codegen.render(load_config(test_config("t2_tiny")), tmp_path / "hls")
    bare = replace(ra, sources=None)
    (ra.dir / "bfp_systolic.cpp").write_text("// changed\n")
    with pytest.raises(hlsnn.CsimError, match="no longer holds the sources"):
        csim.compile_library(bare)


def test_rendered_files_respect_the_umask(tmp_path):
    from hlsnn import codegen
    from hlsnn.config import load_config
    old = os.umask(0o022)
    try:
        r = codegen.render(load_config(test_config("t2_tiny")), tmp_path / "hls")
    finally:
        os.umask(old)
    assert (r.dir / "bfp_systolic.cpp").stat().st_mode & 0o777 == 0o644


# ------------------------------------------------------------------------ build folders

def test_a_config_named_dot_dot_dot_yaml_builds_under_build(tmp_path, monkeypatch):
    from hlsnn import codegen
    from hlsnn.config import load_config
    from hlsnn.paths import build_dir, build_root
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))
    cfgs = tmp_path / "cfgs"
    cfgs.mkdir()
    (cfgs / "...yaml").write_text(accel_config("bfp16_pynq-z2").read_text())
    cfg = load_config(cfgs / "...yaml")
    assert build_dir(cfg) == build_root() / "bfp16_pynq_z2"
    assert codegen.project_dir(cfg) == build_root() / "bfp16_pynq_z2" / "hls"
    from hlsnn.build.flow import Build
    assert Build(cfg, out=str(tmp_path / "ov"), dry_run=True).root == (tmp_path / "build" / "bfp16_pynq_z2")


@pytest.mark.parametrize("stem", ["..", ".", "...", "a/b", "", "x\\y", ".hidden"])
def test_a_build_folder_name_that_could_escape_is_refused(stem):
    import hlsnn
    from hlsnn.config import load_config
    from hlsnn.paths import build_dir
    cfg = replace(load_config(accel_config("bfp16_pynq-z2")), stem=stem, name=stem or "..")
    with pytest.raises(hlsnn.errors.InputError, match="cannot name a build folder"):
        build_dir(cfg)


@pytest.mark.slow
def test_hlsnn_render_of_dot_dot_dot_yaml_writes_only_under_build(tmp_path):
    cfgs = tmp_path / "cfgs"
    cfgs.mkdir()
    (cfgs / "...yaml").write_text(accel_config("bfp16_pynq-z2").read_text())
    env = {k: v for k, v in os.environ.items() if k != "HLSNN_BUILD"}
    env["PYTHONPATH"] = str(ROOT / "host")
    res = subprocess.run([sys.executable, "-m", "hlsnn.cli", "render", "cfgs/...yaml"], cwd=tmp_path, env=env,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build", "cfgs"]
    assert (tmp_path / "build" / "bfp16_pynq_z2" / "hls").is_dir()


def test_an_empty_hlsnn_build_is_the_default_build_folder(monkeypatch):
    from hlsnn.paths import build_root
    for value in ("", "  "):
        monkeypatch.setenv("HLSNN_BUILD", value)
        assert build_root() == Path("build")


def test_hlsnn_build_deletes_nothing_outside_its_build_folder(tmp_path, monkeypatch):
    """hlsnn build of ...yaml (fake tools) deleted ./vivado/out/important.txt on main."""
    from hlsnn.build import flow as flow_mod
    from hlsnn.config import load_config
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HLSNN_BUILD", raising=False)
    (tmp_path / "vivado" / "out").mkdir(parents=True)
    (tmp_path / "vivado" / "out" / "important.txt").write_text("keep me\n")
    cfgs = tmp_path / "cfgs"
    cfgs.mkdir()
    (cfgs / "...yaml").write_text(accel_config("bfp16_pynq-z2").read_text())
    f = flow_mod.Build(load_config(cfgs / "...yaml"), out="overlays", dry_run=True)
    assert tmp_path.resolve() / "build" in f.vivado_dir.resolve().parents    # (main: ./vivado)
    assert (tmp_path / "vivado" / "out" / "important.txt").is_file()




@pytest.mark.slow
@pytest.mark.csim
def test_two_configs_of_one_name_compiled_at_once_both_run(tmp_path):
    """The reported race: a/net.yaml (rows 8) and b/net.yaml (rows 4) C-simulated by two
    processes at the same moment, then each again: every run bit-exact against the emulator
    (on main, one library held the other's kernel: "stream protocol error" from then on)."""
    pa, pb = _two_of_one_name(tmp_path)
    code = ("import sys, numpy as np, hlsnn\n"
            "x, w = np.random.default_rng(1).normal(size=(3, 8)), np.random.default_rng(2).normal(size=(5, 8))\n"
            "with hlsnn.Accelerator(sys.argv[1], 'csim') as c, hlsnn.Accelerator(sys.argv[1], 'emu') as e:\n"
            "    assert np.array_equal(c.gemm(x, w), e.gemm(x, w))\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), HLSNN_BUILD=str(tmp_path / "build"))
    for _ in range(2):                     # the first round compiles, the second reads the cache
        procs = [subprocess.Popen([sys.executable, "-c", code, str(p)], env=env, stderr=subprocess.PIPE, text=True)
                 for p in (pa, pb)]
        errs = [p.communicate(timeout=600)[1] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], [e[-1500:] for e in errs]
