"""hlsnn.cachefile.build_lock: a second builder of the same cache entry waits for the first."""
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
