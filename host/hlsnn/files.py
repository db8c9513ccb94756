"""Writing files so that nobody ever sees half of one.

Every file hlsnn writes under a name a user or another process reads (rendered sources, cache
entries and their manifests, reports, plots, ``run --output``, sweep tables) goes through
:func:`atomic_path` or :func:`write_atomic`: the content is written to a temporary file in the
same folder, then renamed over the requested name with :func:`os.replace`. A reader sees the old
file or the whole new one; a full disk, a read-only folder or a killed process leaves the old
file (or none), never a 0-byte or truncated one under the requested name. The new file gets the
permissions an ordinary ``open()`` would give it (``0o666`` less the umask), not the ``0o600``
of :func:`tempfile.mkstemp`.

Temporaries are named ``.<name>.tmp-<pid>-<random>`` so that :func:`remove_stale` can tell
the ones of a process that died (``kill -9`` during a compile) from those still being written.
"""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import tempfile
import time
from pathlib import Path


def umask() -> int:
    """The process's umask: from ``/proc/self/status`` on Linux (reading it there changes
    nothing, which matters with other threads creating files), else by setting and restoring it."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def tmp_prefix(name: str) -> str:
    """The prefix of a temporary of ``name`` made by this process."""
    return f".{name}.tmp-{os.getpid()}-"


@contextlib.contextmanager
def atomic_path(path, *, mode=None):
    """A temporary path in ``path``'s folder (same suffix, so that writers that go by it, such
    as matplotlib's ``savefig``, pick the same format) to write the file at; on a normal exit it
    replaces ``path``, on an exception it is removed and ``path`` is left as it was.
    ``mode``: the file's permission bits (default ``0o666`` less the umask)."""
    path = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=tmp_prefix(path.name), suffix=path.suffix)
        os.close(fd)
        yield Path(tmp)
        os.chmod(tmp, (0o666 & ~umask()) if mode is None else mode)
        os.replace(tmp, path)
    except OSError as exc:
        named = _named_for(exc, path, tmp)
        if named is exc:
            raise
        raise named from exc
    finally:
        if tmp is not None and os.path.lexists(tmp):
            os.unlink(tmp)


#: Errors of writing data itself, which the system reports without a file name.
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


def _named_for(exc: OSError, path: Path, tmp) -> OSError:
    """``exc`` as the user should read it: an error about the hidden temporary (or a full disk
    while writing it) names ``path``, the file that was asked for. Errors about other files
    (a source read inside the ``with`` block) are left as they are."""
    about_tmp = exc.filename is not None and tmp is not None and os.fsdecode(exc.filename) == os.fsdecode(tmp)
    about_tmp = about_tmp or (exc.filename is None and exc.errno in _WRITE_ERRNOS)
    about_tmp = about_tmp or (tmp is None and exc.filename is not None)     # mkstemp itself
    if not about_tmp:
        return exc
    return OSError(exc.errno, exc.strerror, str(path))


def write_atomic(path, data, *, mode=None):
    """Write ``data`` (str: UTF-8 text, or bytes) to ``path`` through :func:`atomic_path`."""
    with atomic_path(path, mode=mode) as tmp:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)


def write_npz(path, arrays, *, fsync=False, mode=None):
    """``arrays`` (name -> ndarray) at ``path`` as an uncompressed ``.npz`` (the entries
    ``np.savez`` writes, read by ``np.load``; no pickles), through :func:`atomic_path`; with
    ``fsync`` flushed to disk before the rename. ``np.savez`` leaves its ``ZipFile`` open when a
    write fails (a full disk): collected after the file was closed, it printed a traceback
    (``ValueError: seek of closed file``) after hlsnn's one error line. Here every zip object is
    closed by its ``with`` block, whatever fails."""
    import zipfile

    import numpy as np
    with atomic_path(path, mode=mode) as tmp:
        with open(tmp, "wb") as fh:
            with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
                for name, a in arrays.items():
                    with zf.open(f"{name}.npy", "w", force_zip64=True) as f:
                        np.lib.format.write_array(f, np.asanyarray(a), allow_pickle=False)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())


_TMP = re.compile(r"^\..*\.tmp-(\d+)-[^/]*$")
#: Temporaries of hlsnn before they named their process (``.tmp-XXXXXXXX.so``): removed when
#: older than an hour (no compile takes that long).
_OLD_TMP = re.compile(r"^\.tmp-[A-Za-z0-9_]{8}\.so$")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (this process included)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:          # it exists, but belongs to someone else
        return True
    return True


def remove_stale(folder, *, max_age_s=24 * 3600.0) -> list:
    """Remove the temporaries (:func:`tmp_prefix`; files or folders) in ``folder`` left by
    processes that no longer run, or older than ``max_age_s`` (a process id may have been
    reused). Returns what was removed; errors (a read-only folder) are ignored."""
    import shutil
    removed = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:
        return removed
    now = time.time()
    for p in entries:
        m = _TMP.match(p.name)
        if not m and not _OLD_TMP.match(p.name):
            continue
        try:
            age = now - p.lstat().st_mtime
        except OSError:
            continue
        if m:
            stale = int(m.group(1)) != os.getpid() and (age > max_age_s or not pid_alive(int(m.group(1))))
        else:
            stale = age > 3600.0
        if stale:
            try:
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink()
                removed.append(p)
            except OSError:
                pass
    return removed


def sources_digest(sources) -> str:
    """The hash of a rendered project: over ``(name, bytes)`` pairs, in name order."""
    digest = hashlib.sha256()
    for name, data in sorted(sources):
        digest.update(name.encode() + b"\0" + data + b"\0")
    return digest.hexdigest()
