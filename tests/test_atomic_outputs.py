"""Outputs are written atomically (issue 33, finding 9): on a full disk, ``run --output``,
plot-quant, report and sweep said so but left a 0-byte file under the requested name. Every
output now goes through :mod:`hlsnn.files` (a temporary in the same folder, then a rename),
which also gives it the umask's permissions. The full disk is a file-size limit
(``RLIMIT_FSIZE``) on a subprocess: its writes fail with EFBIG as they would with ENOSPC."""
import errno
import os
import resource
import signal
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
from hlsnn import files
from hlsnn.errors import InputError


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "a.txt"
    out.write_text("old\n")
    with pytest.raises(OSError):
        with files.atomic_path(out) as tmp:
            tmp.write_text("half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


def test_a_written_file_has_the_umask_permissions(tmp_path):
    old = os.umask(0o027)
    try:
        files.write_atomic(tmp_path / "b.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o640


def test_a_figure_that_fails_to_save_leaves_no_file(tmp_path):
    from hlsnn.plots import save_figure

    class DiskFull:
        def savefig(self, path, **kw):
            with open(path, "wb") as f:
                f.write(b"\x89PNG")
            raise OSError(errno.ENOSPC, "No space left on device")
    out = tmp_path / "q.png"
    with pytest.raises(InputError, match="No space left"):
        save_figure(DiskFull(), out, 80)
    assert list(tmp_path.iterdir()) == []


def test_stale_temporaries_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f".lib.so.tmp-{dead.pid}-abc.so"
    mine = tmp_path / f".lib.so.tmp-{os.getpid()}-abc.so"
    other = tmp_path / "keep.so"
    for p in (stale, mine, other):
        p.write_bytes(b"")
    assert files.remove_stale(tmp_path) == [stale]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([mine.name, other.name])


def _disk_full():
    resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))   # any file beyond 64 bytes: EFBIG
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _hlsnn(*args, cwd):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), HLSNN_NATIVE="0", MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "hlsnn.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, preexec_fn=_disk_full, timeout=120)


@pytest.mark.slow
def test_run_output_on_a_full_disk_leaves_no_file(tmp_path):
    np.save(tmp_path / "x.npy", np.random.default_rng(0).normal(size=(4, 16)))
    res = _hlsnn("run", "bfp16_pynq-z2", "--target", "emu", "--input", "x.npy", "--n", "8", "--output", "y.npy",
                 cwd=tmp_path)
    assert res.returncode != 0 and "y.npy" in res.stderr, res.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.npy"]


@pytest.mark.slow
def test_plot_quant_on_a_full_disk_leaves_no_file(tmp_path):
    pytest.importorskip("matplotlib")
    np.save(tmp_path / "w.npy", np.random.default_rng(0).normal(size=(4, 4)))
    res = _hlsnn("plot-quant", "w.npy", "--out", "q.png", cwd=tmp_path)
    assert res.returncode != 0 and "q.png" in res.stderr, res.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.npy"]


def test_an_error_about_the_temporary_names_the_file_asked_for(tmp_path):
    """os.replace onto a folder fails about the hidden temporary; the error names the target."""
    from hlsnn.files import write_atomic
    target = tmp_path / "out.json"
    (target / "inside").mkdir(parents=True)
    with pytest.raises(OSError) as info:
        write_atomic(target, "{}")
    assert info.value.filename == str(target) and info.value.filename2 is None
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]      # no temporary left
