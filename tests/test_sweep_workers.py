"""Sweep workers end with their parent (issue 33): after ``kill -9`` of ``hlsnn sweep --jobs 2``
its workers blocked for good (still alive 46 minutes later). The parent here is the real
``run_sweep`` with its per-variant C-simulation replaced by a worker that records its process
id and then waits, as a long compile would."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import ROOT, test_config


def _gone(pid):
    """The process has ended (a zombie that nobody reaps counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except OSError:
        return True


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sweep_workers_exit_when_the_parent_is_killed(tmp_path):
    pids = tmp_path / "pids"
    pids.mkdir()
    code = textwrap.dedent(f"""
        import os, time
        from hlsnn import sweep
        def stuck(data, source, seed, n_random):
            open(os.path.join({str(pids)!r}, str(os.getpid())), "w").close()
            time.sleep(600)
        sweep._csim_one = stuck
        sweep._check_csim_tools = lambda: None
        sweep.run_sweep({str(test_config("t2_tiny"))!r}, ["rows=1,2"], jobs=2)
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"))
    parent = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE)
    workers = []
    try:
        deadline = time.time() + 60
        while len(workers) < 2:
            assert parent.poll() is None, parent.stderr.read().decode()[-2000:]
            assert time.time() < deadline, "the workers never started"
            time.sleep(0.05)
            workers = [int(p.name) for p in pids.iterdir()]
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.time() + 5
        while not all(_gone(w) for w in workers) and time.time() < deadline:
            time.sleep(0.05)
        assert all(_gone(w) for w in workers), "sweep workers outlived their parent"
    finally:
        for w in workers:
            if not _gone(w):
                os.kill(w, signal.SIGKILL)
