"""Compilers that misbehave (issue 33, findings 5 and 8): a compiler that never returns is
stopped after HLSNN_COMPILE_TIMEOUT with a word while waiting and a message naming the bound; a
CC that names no compiler is an error, not a silent fall-back to cc; a compiler that writes an
empty or garbage library gets a message that says so."""
import stat
import time

import pytest

from hlsnn import compiling, native
from hlsnn.errors import CsimError, MissingDependency


@pytest.fixture
def probe(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.c").write_text("int hlsnn_probe(int a) { return 3 * a + 1; }\n")
    monkeypatch.setattr(native, "SOURCE_DIR", src)
    monkeypatch.setattr(native, "_noticed", set())
    monkeypatch.setenv("HLSNN_NATIVE_CACHE", str(tmp_path / "cache"))
    native.forget()
    yield src
    native.forget()


def _script(tmp_path, name, body):
    p = tmp_path / name
    p.write_text("#!/bin/sh\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)
    return p


def test_a_compiler_that_never_returns_is_stopped_with_a_word(probe, tmp_path, monkeypatch, capsys):
    cc = _script(tmp_path, "hang-cc", "exec sleep 60\n")
    monkeypatch.setenv("CC", str(cc))
    monkeypatch.setenv("HLSNN_COMPILE_TIMEOUT", "1.5")
    monkeypatch.setattr(compiling, "WORD_AFTER", 0.3)
    t0 = time.monotonic()
    assert native.load("probe") is None                    # the numpy path, after the bound
    assert time.monotonic() - t0 < 10
    err = capsys.readouterr().err
    assert "hlsnn: compiling the emulator's C helper 'probe'" in err and "waiting at most 1.5 s" in err
    assert "did not finish within 1.5 s" in err and "HLSNN_COMPILE_TIMEOUT" in err
    assert not list((tmp_path / "cache").glob(".tmp-*"))


def test_run_raises_compile_timeout_naming_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("HLSNN_COMPILE_TIMEOUT", "0.5")
    with pytest.raises(compiling.CompileTimeout, match=r"did not finish within 0.5 s.*HLSNN_COMPILE_TIMEOUT"):
        compiling.run(["sleep", "30"], "a test")
    monkeypatch.setenv("HLSNN_COMPILE_TIMEOUT", "soon")
    with pytest.raises(Exception, match="HLSNN_COMPILE_TIMEOUT = 'soon': must be a positive number"):
        compiling.run(["true"], "a test")


@pytest.mark.parametrize("cc", ["/no/such/cc", "nonexistent-cc-hlsnn", "'unbalanced"])
def test_a_cc_that_names_no_compiler_is_an_error_not_cc(probe, monkeypatch, cc):
    monkeypatch.setenv("CC", cc)
    with pytest.raises(MissingDependency, match="no such compiler on PATH"):
        native.load("probe")


def test_cc_with_flags_is_used_as_given_not_replaced_by_cc(probe, monkeypatch):
    if native.shutil.which("gcc") is None:
        pytest.skip("no gcc")
    monkeypatch.setenv("CC", "gcc -m32")
    assert native.c_compiler() == "gcc -m32"
    assert native.library_path("probe", "gcc -m32") != native.library_path("probe", "cc")


@pytest.mark.parametrize("body", ['for a; do out=$a; done; : > "$out"\n',
                                  'for a; do out=$a; done; echo garbage > "$out"\n'], ids=["empty", "garbage"])
def test_a_compiler_that_writes_no_library_is_named(probe, tmp_path, monkeypatch, capsys, body):
    monkeypatch.setenv("CC", str(_script(tmp_path, "bad-cc", body)))
    assert native.load("probe") is None
    err = capsys.readouterr().err
    assert "compiled helper 'probe' built with CC=" in err and "bad-cc" in err and "numpy path" in err


def test_an_empty_csim_library_is_a_csim_error(tmp_path):
    from hlsnn.csim import CsimLibrary
    (tmp_path / "libx.so").write_bytes(b"")
    with pytest.raises(CsimError, match=r"libx.so does not load .*check CXX"):
        CsimLibrary(tmp_path / "libx.so", 5, 3)
