"""hlsnn.native: the emulators' compiled helpers are built once, cached safely, and turned off
(the numpy path) when there is no compiler, when HLSNN_NATIVE=0, or when the compile fails."""
import ctypes

import pytest

from conftest import PROBE
from hlsnn import native



def _call(lib, a):
    lib.hlsnn_probe.restype = ctypes.c_int
    lib.hlsnn_probe.argtypes = [ctypes.c_int]
    return lib.hlsnn_probe(a)


@pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")
def test_builds_once_and_reuses_the_cache(probe, tmp_path):
    lib = native.load("probe")
    assert lib is not None and _call(lib, 4) == 13
    built = sorted((tmp_path / "cache").glob("libprobe_*.so"))
    assert len(built) == 1 and built[0].with_name(built[0].name + ".json").is_file()
    stamp = built[0].stat().st_mtime_ns
    native.forget()
    assert _call(native.load("probe"), 5) == 16
    assert built[0].stat().st_mtime_ns == stamp          # loaded from the cache, not rebuilt


@pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")
def test_a_damaged_cached_library_is_rebuilt_not_loaded(probe, tmp_path):
    native.load("probe")
    lib_path = next((tmp_path / "cache").glob("libprobe_*.so"))
    lib_path.unlink()                                     # (a new file: this process maps the old one)
    lib_path.write_bytes(b"\0" * 64)                      # truncated / zeroed
    native.forget()
    assert _call(native.load("probe"), 1) == 4
    assert lib_path.stat().st_size > 64


@pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")
def test_a_changed_source_is_a_new_cache_entry(probe, tmp_path):
    native.load("probe")
    (probe / "probe.c").write_text(PROBE.replace("3 * a", "5 * a"))
    native.forget()
    assert _call(native.load("probe"), 2) == 11
    assert len(list((tmp_path / "cache").glob("libprobe_*.so"))) == 2


def test_switched_off_by_the_environment(probe, monkeypatch):
    monkeypatch.setenv("HLSNN_NATIVE", "0")
    assert native.load("probe") is None


def test_no_compiler_means_the_numpy_path(probe, monkeypatch):
    monkeypatch.setattr(native, "c_compiler", lambda: None)
    assert native.load("probe") is None


@pytest.mark.skipif(native.c_compiler() is None, reason="no C compiler")
def test_a_failing_compile_is_a_notice_and_the_numpy_path(probe, tmp_path, capsys):
    (probe / "probe.c").write_text("this is not C\n")
    assert native.load("probe") is None
    err = capsys.readouterr().err
    assert "probe" in err and "numpy path" in err
    assert list((tmp_path / "cache").glob("probe-compile-error.log"))
    assert not list((tmp_path / "cache").glob(".tmp-*"))  # no half-written library left behind
