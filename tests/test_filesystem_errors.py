"""A read-only working folder and a full disk (issue 33, finding 8): every command ends with one
line ``hlsnn: error: cannot write or read <path>: ...`` and exit 2, never a traceback. The CLI maps
OSError of the file system (EROFS, ENOSPC, EACCES, ...) to that line in one place
(:func:`hlsnn.cli.filesystem_message`); these tests make the file system fail on purpose (root
ignores chmod, so the read-only folder is simulated: every create under it raises EROFS)."""
import builtins
import errno
import io
import os
from pathlib import Path

import pytest

from hlsnn.cli import filesystem_message, main


@pytest.fixture
def read_only_cwd(tmp_path, monkeypatch):
    """The working folder (and build/ under it) is read-only: creating anything there raises EROFS."""
    here = tmp_path / "ro"
    here.mkdir()
    import numpy as np
    np.save(here / "x.npy", np.ones((2, 16)))
    monkeypatch.chdir(here)
    monkeypatch.delenv("HLSNN_BUILD", raising=False)
    monkeypatch.setenv("HLSNN_PROGRESS", "0")
    root = str(here)

    def inside(p):
        try:
            return os.path.abspath(os.fsdecode(p)).startswith(root)
        except TypeError:                           # a file descriptor
            return False

    def refuse(p):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(p))

    real_mkdir, real_open, real_bopen = os.mkdir, os.open, builtins.open

    def mkdir(p, *a, **k):
        return refuse(p) if inside(p) else real_mkdir(p, *a, **k)

    def osopen(p, flags, *a, **k):
        return refuse(p) if inside(p) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) else \
            real_open(p, flags, *a, **k)

    def bopen(p, mode="r", *a, **k):
        return refuse(p) if inside(p) and any(c in mode for c in "wax+") else real_bopen(p, mode, *a, **k)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(os, "open", osopen)
    monkeypatch.setattr(builtins, "open", bopen)
    monkeypatch.setattr(io, "open", bopen)
    return here


COMMANDS = [["render", "bfp8_zcu104"], ["csim", "shift8_pynq-z2"], ["build", "bfp8_zcu104", "--dry-run"],
            ["perf", "shift8_pynq-z2", "--gemm", "2,16,8"], pytest.param(["compare", "bfp8_zcu104", "--target", "sim"], marks=pytest.mark.slow),
            ["run", "shift8_pynq-z2", "--target", "csim", "--input", "x.npy"],
            pytest.param(["deploy", str(Path(__file__).resolve().parents[1] / "configs/models/digits_mlp.yaml"),
                          "--target", "csim", "--assignment", "twohot", "--test-samples", "5"], marks=pytest.mark.slow)]


@pytest.mark.parametrize("cmd", COMMANDS, ids=lambda c: " ".join(c)[:40])
def test_read_only_working_folder_is_one_line(read_only_cwd, capsys, cmd):
    code = main(cmd)
    err = capsys.readouterr().err
    if code == 0:                                   # nothing to write there: fine
        return
    assert code == 2, err
    lines = err.strip().splitlines()
    assert lines[-1].startswith("hlsnn: error: cannot write or read ") and str(read_only_cwd) in lines[-1], err
    assert "read-only" in lines[-1] and "Traceback" not in err


def test_full_disk_during_render_names_the_file(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HLSNN_BUILD", str(tmp_path / "build"))

    class Full:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *a):
            self.f.close()

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))   # as write(2) reports it: no file name

    # every file render writes goes through hlsnn.files.write_atomic (its open() of the temporary)
    from hlsnn import files
    monkeypatch.setattr(files, "open", lambda *a, **k: Full(builtins.open(*a, **k)), raising=False)
    assert main(["render", "bfp8_zcu104"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("hlsnn: error: cannot write or read ") and "no space left" in err, err
    assert str(tmp_path / "build" / "bfp8_zcu104") in err and len(err.splitlines()) == 1
    # the file that was asked for, not the hidden temporary beside it
    assert ".tmp-" not in err, err
    named = err.split("cannot write or read ", 1)[1].split(":", 1)[0]
    assert not Path(named).name.startswith("."), err


def test_other_os_errors_stay_bugs():
    assert filesystem_message(OSError(errno.EINVAL, "x")) is None
    assert "p.txt" in filesystem_message(OSError(errno.EACCES, "Permission denied", "p.txt"))


def test_a_full_disk_in_hlsnns_temporary_folders_names_tmpdir(tmp_path):
    """The schedule renders kernels into $TMPDIR/hlsnn-sched-*: a full disk there is moved by
    TMPDIR, not by HLSNN_BUILD or --out (what the line said, issue 84). A user's own file in the
    temporary folder keeps the build/output advice."""
    import tempfile
    scratch = os.path.join(tempfile.gettempdir(), "hlsnn-sched-abc", "hls", "network.cpp")
    msg = filesystem_message(OSError(errno.EFBIG, "File too large", scratch))
    assert msg == f"cannot write or read {scratch}: file too large (EFBIG); choose another folder for hlsnn's " \
                  f"temporary files (TMPDIR) or free space"
    for own in (os.path.join(tempfile.gettempdir(), "x.hlsnn"), str(tmp_path / "x.hlsnn"),
                os.path.join(tempfile.gettempdir(), "hlsnn-sched-out.hlsnn"),
                os.path.join(tempfile.gettempdir(), "hlsnn-test-build-x", "bfp8", "hls", "a.cpp")):
        assert "(HLSNN_BUILD for build output, --out for reports)" in \
            filesystem_message(OSError(errno.EFBIG, "File too large", own)), own
