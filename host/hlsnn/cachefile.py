"""Files of a build cache (the csim libraries, the emulators' compiled helpers): written
atomically, and checked against the SHA-256 recorded beside them when they were made, so that
a damaged entry is rebuilt instead of loaded."""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


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
