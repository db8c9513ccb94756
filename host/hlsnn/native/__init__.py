"""Compiled helpers of the emulators: small C files in this folder, built on first use with the
system C compiler and loaded with :mod:`ctypes`.

The emulators are numpy code, and numpy code is their specification. A few inner loops that
numpy cannot run at memory speed (a scatter of non-zero pairs, a per-element table search)
have a C twin here. Each twin is held bit-equal to its numpy original by property tests, and
every caller falls back to the numpy path when :func:`load` returns None:

* ``HLSNN_NATIVE=0`` (or ``off``/``no``/``false``) turns the compiled helpers off;
* no C compiler (``$CC``, else ``cc``, ``gcc``) on PATH;
* the compile failed (a one-line notice on stderr, once per process; the log is kept beside
  the cache).

Cache: ``$HLSNN_NATIVE_CACHE``, else ``$XDG_CACHE_HOME/hlsnn/native``, else
``~/.cache/hlsnn/native`` (the emulators run from any directory, so the cache is not the
working directory's ``build/``). A library is named after a hash of its source, the compiler
command and the machine, compiled to a temporary name and renamed into place, with a
``.sha256`` beside it: an interrupted compile never leaves a corrupt entry, two processes
compiling at once never see each other's half-written file, and a damaged cached library is
rebuilt instead of loaded (loading it could crash the process).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .. import cachefile

SOURCE_DIR = Path(__file__).resolve().parent

#: C flags of every helper: no -march=native, so that a cache shared between machines of one
#: architecture stays valid (the machine type is part of the cache key).
C_FLAGS = ("-std=c99", "-O3", "-fPIC", "-shared", "-Wall", "-Wextra")

_lock = threading.Lock()
_loaded: dict = {}
_noticed: set = set()


def enabled() -> bool:
    """False when ``HLSNN_NATIVE`` turns the compiled helpers off."""
    return os.environ.get("HLSNN_NATIVE", "1").strip().lower() not in ("0", "off", "no", "false")


def c_compiler():
    """The C compiler to use, or None when there is none on PATH."""
    for cc in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc"]:
        if shutil.which(cc):
            return cc
    return None


def cache_dir() -> Path:
    if os.environ.get("HLSNN_NATIVE_CACHE"):
        return Path(os.environ["HLSNN_NATIVE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hlsnn" / "native"


def library_path(name: str, cc: str) -> Path:
    """Where the cached library of helper ``name`` built by ``cc`` lives (may not exist yet)."""
    source = (SOURCE_DIR / f"{name}.c").read_bytes()
    key = hashlib.sha256(source + "\n".join((cc,) + C_FLAGS + (platform.machine(), sys.platform)).encode())
    return cache_dir() / f"lib{name}_{key.hexdigest()[:16]}.so"


def load(name: str):
    """The loaded library of ``<name>.c`` (compiled on first use), or None when the compiled
    helpers are off, there is no compiler or the compile failed. The caller sets the argument
    types of the functions it uses."""
    if not enabled():
        return None
    with _lock:
        if name in _loaded:
            return _loaded[name]
        lib = None
        cc = c_compiler()
        if cc is not None:
            try:
                lib = ctypes.CDLL(str(_build(name, cc)))
            except (OSError, subprocess.SubprocessError) as exc:
                _notice(name, f"the compiled helper '{name}' is unavailable ({exc}); using the numpy path")
        _loaded[name] = lib
        return lib


def forget():
    """Drop the loaded libraries, so that the next :func:`load` looks again (tests)."""
    with _lock:
        _loaded.clear()


def _notice(name, text):
    if name not in _noticed:
        _noticed.add(name)
        print(f"hlsnn: note: {text}", file=sys.stderr, flush=True)


def _build(name: str, cc: str) -> Path:
    lib = library_path(name, cc)
    if lib.is_file() and cachefile.checksum_ok(lib):
        return lib
    with cachefile.build_lock(lib):          # another process building it: wait, then reuse it
        if lib.is_file() and cachefile.checksum_ok(lib):
            return lib
        return _compile(name, cc, lib)


def _compile(name: str, cc: str, lib: Path) -> Path:
    fd, tmp = tempfile.mkstemp(dir=lib.parent, prefix=".tmp-", suffix=".so")
    os.close(fd)
    argv = [cc, *C_FLAGS, str(SOURCE_DIR / f"{name}.c"), "-o", tmp]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            log = lib.parent / f"{name}-compile-error.log"
            log.write_text(" ".join(argv) + "\n\n" + proc.stderr)
            raise OSError(f"{cc} failed; see {log}")
        digest = cachefile.sha256(Path(tmp))
        os.replace(tmp, lib)
        cachefile.write_atomic(cachefile.checksum_path(lib), digest + "\n")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return lib
