"""hlsnn.cachefile.build_lock: a second builder of the same cache entry waits for the first; the
csim optimization level (HLSNN_CSIM_OPT)."""
import threading
import time

import pytest

from hlsnn import cachefile

pytestmark = pytest.mark.skipif(cachefile.fcntl is None, reason="no fcntl: nothing is locked")


def test_a_second_builder_waits_for_the_first(tmp_path):
    entry = tmp_path / "csim" / "libx.so"
    events = []
    inside = threading.Event()

    def first():
        with cachefile.build_lock(entry):
            events.append("first in")
            inside.set()
            time.sleep(0.3)
            entry.write_text("built")
            events.append("first out")

    def second():
        inside.wait()
        with cachefile.build_lock(entry):
            events.append(f"second in, entry {'exists' if entry.exists() else 'missing'}")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert events == ["first in", "first out", "second in, entry exists"]
    assert (tmp_path / "csim" / "libx.so.lock").is_file()


def test_the_lock_is_released_on_error(tmp_path):
    entry = tmp_path / "liby.so"
    with pytest.raises(RuntimeError):
        with cachefile.build_lock(entry):
            raise RuntimeError("compile failed")
    done = []

    def grab():
        with cachefile.build_lock(entry):
            done.append(True)

    t = threading.Thread(target=grab)
    t.start()
    t.join(5)
    assert done == [True]


def test_the_csim_optimization_level(monkeypatch):
    from hlsnn import csim
    from hlsnn.errors import InputError
    monkeypatch.setenv("HLSNN_CSIM_OPT", "-O2")
    assert csim.cxx_flags() == csim.CXX_FLAGS
    monkeypatch.setenv("HLSNN_CSIM_OPT", "-O1")
    assert "-O1" in csim.cxx_flags() and "-O2" not in csim.cxx_flags()
    monkeypatch.setenv("HLSNN_CSIM_OPT", "-O9; rm -rf /")
    with pytest.raises(InputError, match="HLSNN_CSIM_OPT = .*must be one of -O0, -O1"):
        csim.cxx_flags()
