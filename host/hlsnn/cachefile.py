"""Files of a build cache (the csim libraries, the emulators' compiled helpers): written
atomically, and checked against the SHA-256 recorded beside them when they were made, so that
a damaged entry is rebuilt instead of loaded."""
from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: no lock; the rename still keeps entries whole)
    fcntl = None


def checksum_path(path: Path) -> Path:
    """Where the checksum of a cached file lives: ``<name>.sha256`` beside it."""
    return path.parent / (path.name + ".sha256")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def checksum_ok(path: Path) -> bool:
    """The cached file matches the checksum written when it was made."""
    try:
        return checksum_path(path).read_text().strip() == sha256(path)
    except OSError:
        return False


def write_atomic(path: Path, text: str):
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename: a
    reader sees the old file or the whole new one, never a part."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=path.suffix)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


@contextlib.contextmanager
def build_lock(path: Path):
    """Hold an exclusive lock on ``<name>.lock`` beside the cache entry ``path`` while it is
    checked and built: a second process that needs the same entry waits for the first one's
    build and then finds it in the cache, instead of building it a second time (test workers
    that start on the same kernel, parallel sweeps). A lock, not a guard of correctness: entries
    are written atomically either way. The lock goes with the process (``flock``), so a killed
    build leaves nothing to clean up; without ``fcntl`` (Windows) nothing is locked."""
    if fcntl is None:
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(path.parent / (path.name + ".lock")), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)                    # releases the lock
