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


def _python_on_a_full_disk(script, cwd, limit=4096):
    """``script`` in a child Python whose files may not grow past ``limit`` bytes (EFBIG)."""
    def full():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    env = dict(os.environ, PYTHONPATH=str(ROOT / "host"), HLSNN_NATIVE="0")
    return subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          preexec_fn=full, timeout=120)


def test_a_compiled_model_on_a_full_disk_is_one_line_and_no_file(tmp_path):
    """The compiled-model writer (hlsnn.network.artifact.write, what `hlsnn compile -o` calls) on a
    full disk: np.savez left its ZipFile open, whose __del__ then printed 'ValueError: seek of
    closed file' after the error line (issue 84). Now the error is the CLI's one line and the
    interpreter prints nothing more, even after a collection; no file, no temporary is left."""
    script = (
        "import gc, sys\n"
        "import numpy as np\n"
        "from hlsnn.cli import filesystem_message\n"
        "from hlsnn.network import artifact\n"
        "try:\n"
        "    artifact.write('x.hlsnn', {'layers': []}, {'w': np.arange(20000, dtype=np.int32)})\n"
        "except OSError as exc:\n"
        "    print('hlsnn: error:', filesystem_message(exc), file=sys.stderr)\n"
        "gc.collect()\n")
    res = _python_on_a_full_disk(script, tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        f"hlsnn: error: cannot write or read {tmp_path / 'x.hlsnn'}: file too large (EFBIG); choose another folder "
        f"(HLSNN_BUILD for build output, --out for reports) or free space"], res.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


def test_write_npz_is_what_np_load_reads(tmp_path):
    a = {"x": np.arange(12, dtype=np.int16).reshape(3, 4), "y": np.array([1.5, -2.0]), "z": np.zeros(0, bool)}
    files.write_npz(tmp_path / "a.npz", a)
    with np.load(tmp_path / "a.npz", allow_pickle=False) as z:
        assert sorted(z.files) == ["x", "y", "z"]
        for k, v in a.items():
            assert z[k].dtype == v.dtype and z[k].shape == v.shape and (z[k] == v).all()


@pytest.mark.slow
def test_hlsnn_compile_on_a_full_disk_is_one_line(tmp_path):
    res = _hlsnn("compile", ROOT / "configs/models/digits_mlp.yaml", "--assignment", "fixed8", "-o", "x.hlsnn",
                 cwd=tmp_path)
    assert res.returncode == 2, res.stderr[-2000:]
    assert res.stderr.strip().splitlines() == [
        f"hlsnn: error: cannot write or read {tmp_path / 'x.hlsnn'}: file too large (EFBIG); choose another folder "
        f"(HLSNN_BUILD for build output, --out for reports) or free space"], res.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_deploy_on_a_full_disk_names_the_disk_not_an_internal_error(tmp_path):
    """`hlsnn deploy` keeps going when one assignment fails; a full disk (its network kernel's
    sources written for the latency model) was reported as 'internal error, OSError'."""
    res = _hlsnn("deploy", ROOT / "configs/models/digits_mlp.yaml", "--assignment", "fixed8", "--test-samples", "5",
                 cwd=tmp_path)
    line = next(x for x in res.stdout.splitlines() if x.lstrip().startswith("fixed8"))
    assert "FAILED: cannot write or read " in line and "file too large (EFBIG)" in line, res.stdout[-2000:]
    assert "hlsnn-sched-" in line and "(TMPDIR)" in line, line         # its scratch folder: TMPDIR moves it
    assert "internal error" not in res.stdout and "Traceback" not in res.stderr, res.stderr[-2000:]
