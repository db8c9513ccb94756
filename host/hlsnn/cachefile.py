"""Files of a build cache (the csim libraries, the emulators' compiled helpers).

A cached library ``lib<x>_<key>.so`` has a manifest beside it, ``lib<x>_<key>.so.json``, written
(atomically, :mod:`hlsnn.files`) only after the library was built and checked. It records what
the library was built from (``built_from``: the hash of the exact sources compiled, the compiler
command, the header folder) and the SHA-256 of the library itself. A cached library is used
only when its manifest exists, names the same ``built_from`` as the caller's and its checksum
matches the file: a damaged, replaced, foreign or half-written entry is rebuilt, never loaded
(loading it could crash the process with SIGBUS or SIGSEGV). The key in the file name is only
where to look; the manifest is what is trusted.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path

from .files import write_atomic  # noqa: F401 - re-exported: callers write cache files with it

try:
    import fcntl
except ImportError:  # pragma: no cover  (Windows: no lock; the rename still keeps entries whole)
    fcntl = None


def manifest_path(path: Path) -> Path:
    """Where the manifest of a cached file lives: ``<name>.json`` beside it."""
    path = Path(path)
    return path.parent / (path.name + ".json")


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_manifest(path: Path, built_from: dict, digest: str):
    """Record that ``path`` (whose SHA-256 is ``digest``) was built from ``built_from``."""
    write_atomic(manifest_path(path), json.dumps({"sha256": digest, "built_from": built_from}, indent=1,
                                                 sort_keys=True) + "\n")


def read_manifest(path: Path):
    """The manifest of ``path`` as a dict, or None when it is missing or unreadable."""
    try:
        data = json.loads(manifest_path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def entry_ok(path: Path, built_from: dict) -> bool:
    """The cached file exists, its manifest says it was built from ``built_from``, and it
    matches the checksum recorded when it was made."""
    data = read_manifest(path)
    if data is None or data.get("built_from") != built_from:
        return False
    try:
        return data.get("sha256") == sha256(path)
    except OSError:
        return False


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
