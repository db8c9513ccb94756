"""The C-simulation's precompiled header of the ap_types headers (hlsnn.csim.pch): built once per
flags and reused, loaded by g++ (-Winvalid-pch says nothing), and a broken PCH or one that cannot
be built means the plain compile, never a failure."""
import os
import shutil
import subprocess

import pytest

from hlsnn import csim
from hlsnn.csim import pch as csim_pch

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

SRC = "#include <ap_int.h>\n#include <ap_fixed.h>\nint f(int x) { ap_int<12> a = x; ap_fixed<10, 4> b = a; return (a * 3 + b).to_int(); }\n"


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    return tmp_path_factory.mktemp("pch")               # one PCH cache for the module: each PCH built once


@pytest.fixture
def cache(shared, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(shared / "cache"))
    monkeypatch.delenv("HLSNN_CSIM_PCH", raising=False)
    monkeypatch.setattr(csim_pch, "_MEMO", {})
    return shared


def _compile(tmp_path, extra, flags):
    src = tmp_path / "k.cpp"
    src.write_text(SRC)
    argv = ["g++", *extra, *flags, "-Winvalid-pch", "-H", f"-isystem{csim.ap_types_dir()}", str(src), "-o", str(tmp_path / "k.so")]
    return subprocess.run(argv, capture_output=True, text=True)


def test_built_once_and_loaded_by_gxx(cache, monkeypatch):
    flags = list(csim._flags(False))
    extra = csim_pch.pch_args("g++", flags, csim.ap_types_dir())
    assert extra[0] == "-include" and os.path.isfile(extra[1] + ".gch")
    gch = extra[1] + ".gch"
    mtime = os.stat(gch).st_mtime_ns
    monkeypatch.setattr(csim_pch, "_MEMO", {})          # a second process: finds it, does not build it
    calls = []
    real = csim_pch._build
    monkeypatch.setattr(csim_pch, "_build", lambda *a: calls.append(a) or real(*a))
    assert csim_pch.pch_args("g++", flags, csim.ap_types_dir()) == extra
    assert calls == [] and os.stat(gch).st_mtime_ns == mtime
    proc = _compile(cache, extra, flags)                 # -H: "! <gch>" when g++ loads the PCH
    assert proc.returncode == 0 and f"! {gch}" in proc.stderr and "not used because" not in proc.stderr
    # the strict and the sanitizer builds' flags reach the PCH: a PCH of their own
    strict = csim_pch.pch_args("g++", list(csim._flags(True)), csim.ap_types_dir())
    assert strict and strict != extra
    # warning and link flags do not: the network kernel's -Wno-unused-label shares the PCH
    assert csim_pch.pch_args("g++", flags + ["-Wno-unused-label"], csim.ap_types_dir()) == extra


def test_a_broken_pch_is_ignored_by_the_compile(cache, tmp_path):
    flags = list(csim._flags(False))
    extra = csim_pch.pch_args("g++", flags, csim.ap_types_dir())
    broken = tmp_path / csim_pch.NAME                    # a copy of the header beside a broken .gch
    shutil.copy(extra[1], broken)
    (tmp_path / (csim_pch.NAME + ".gch")).write_bytes(b"not a precompiled header")
    extra = ["-include", str(broken)]
    proc = _compile(tmp_path, extra, flags)
    assert proc.returncode == 0, proc.stderr
    assert "! " + extra[1] + ".gch" not in proc.stderr and "ap_int.h" in proc.stderr    # read the headers


def test_a_pch_that_cannot_be_built_means_the_plain_compile(cache):
    bad = list(csim._flags(False)) + ["-fno-such-option-for-the-pch"]
    assert csim_pch.pch_args("g++", bad, csim.ap_types_dir()) == []
    assert not (csim_pch.cache_dir() / csim_pch.key("g++", bad, csim.ap_types_dir()) / (csim_pch.NAME + ".gch")).exists()


def test_off_for_other_compilers_and_on_request(cache, monkeypatch):
    assert csim_pch.pch_args("clang++", list(csim._flags(False)), csim.ap_types_dir()) == []
    monkeypatch.setenv("HLSNN_CSIM_PCH", "0")
    assert csim_pch.pch_args("g++", list(csim._flags(False)), csim.ap_types_dir()) == []


def test_a_compile_failing_on_the_pch_is_made_again_without_it(cache):
    extra = csim_pch.pch_args("g++", list(csim._flags(False)), csim.ap_types_dir())
    failed = subprocess.CompletedProcess([], 1, "", f"error: {extra[1]}.gch: not a valid precompiled header")
    other = subprocess.CompletedProcess([], 1, "", "k.cpp:3: error: 'x' was not declared")
    assert not csim_pch.retry_without(extra, other)
    # an error in the kernel, with a warning whose include chain names the PCH's header (g++'s
    # real output): the kernel's error, no retry, the PCH kept
    chained = subprocess.CompletedProcess([], 1, "", f"In file included from {extra[1]}:3:\n"
                                          "hls_stream.h:210:20: warning: may be used uninitialized\n"
                                          "k.cpp:3:5: error: 'no_such_variable' was not declared in this scope")
    assert not csim_pch.retry_without(extra, chained)
    assert os.path.exists(extra[1] + ".gch")
    assert csim_pch.retry_without(extra, failed)
    assert not os.path.exists(extra[1] + ".gch")
    assert csim_pch.pch_args("g++", list(csim._flags(False)), csim.ap_types_dir()) == []   # off in this process
