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
command and the machine, compiled to a temporary name and renamed into place, with a manifest
beside it (:mod:`hlsnn.cachefile`: what it was built from and its checksum): an interrupted
compile never leaves a corrupt entry (and its temporaries are removed by the next compile),
two processes compiling at once never see each other's half-written file, and a damaged,
foreign or empty cached library (one that lacks the helper's functions) is rebuilt instead of
loaded or used.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from .. import cachefile, files

SOURCE_DIR = Path(__file__).resolve().parent

#: C flags of every helper: no -march=native, so that a cache shared between machines of one
#: architecture stays valid (the machine type is part of the cache key). ``-fno-fast-math``
#: comes after ``CC``'s own flags, so ``-ffast-math`` or ``-Ofast`` in ``CC`` cannot change the
#: bits of rule input_quantize or fold the non-finite test ``v - v == 0`` to true.
C_FLAGS = ("-std=c99", "-O3", "-fno-fast-math", "-fPIC", "-shared", "-Wall", "-Wextra")

#: Added by ``HLSNN_NATIVE_SANITIZE=1`` (CI's sanitizer run, ``.ci/sanitize``): AddressSanitizer
#: and UBSan, an undefined operation aborting the process. The flags are part of the cache key,
#: so these libraries never replace the ordinary ones; Python itself is not instrumented, so the
#: run preloads libasan (``LD_PRELOAD=$(cc -print-file-name=libasan.so)``).
SANITIZE_FLAGS = ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                  "-fno-sanitize-recover=undefined")


def flags() -> tuple:
    """The C flags of a helper's build: :data:`C_FLAGS`, plus :data:`SANITIZE_FLAGS` under
    ``HLSNN_NATIVE_SANITIZE=1``."""
    on = os.environ.get("HLSNN_NATIVE_SANITIZE", "").strip().lower() in ("1", "on", "yes", "true")
    return C_FLAGS + SANITIZE_FLAGS if on else C_FLAGS


_lock = threading.Lock()
_loaded: dict = {}
_noticed: set = set()


def enabled() -> bool:
    """False when ``HLSNN_NATIVE`` turns the compiled helpers off."""
    return os.environ.get("HLSNN_NATIVE", "1").strip().lower() not in ("0", "off", "no", "false")


def c_compiler():
    """The C compiler command to use (a string; ``CC`` may carry flags, as for make), or None when
    ``CC`` is unset and neither ``cc`` nor ``gcc`` is on PATH. A ``CC`` that names no program on
    PATH is an error (it fell back to ``cc`` in silence)."""
    cc = os.environ.get("CC", "").strip()
    if cc:
        import shlex
        from ..errors import MissingDependency
        try:
            words = shlex.split(cc)
        except ValueError:
            words = []
        if not words or shutil.which(words[0]) is None:
            raise MissingDependency(f"CC = {cc!r}: no such compiler on PATH; set CC to a C compiler (flags may "
                                    "follow it), unset it to use cc, or set HLSNN_NATIVE=0 for the numpy path")
        return cc
    for cc in ("cc", "gcc"):
        if shutil.which(cc):
            return cc
    return None


def cache_dir() -> Path:
    if os.environ.get("HLSNN_NATIVE_CACHE"):
        return Path(os.environ["HLSNN_NATIVE_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hlsnn" / "native"


def _built_from(name: str, cc: str) -> dict:
    """What a helper's library is built from (its cache key and manifest)."""
    source = (SOURCE_DIR / f"{name}.c").read_bytes()
    return {"source_sha256": hashlib.sha256(source).hexdigest(), "command": " ".join((cc,) + flags()),
            "machine": f"{platform.machine()} {sys.platform}"}


def exported(name: str) -> list:
    """The functions ``<name>.c`` exports (its non-static ``hlsnn_*`` definitions): a library
    that lacks one is not this helper's, whatever its manifest says."""
    src = (SOURCE_DIR / f"{name}.c").read_text()
    return re.findall(r"^(?!static\b)[A-Za-z_][\w \t*]*?\b(hlsnn_\w+)\s*\(", src, re.M)


def library_path(name: str, cc: str) -> Path:
    """Where the cached library of helper ``name`` built by ``cc`` lives (may not exist yet)."""
    key = hashlib.sha256(json.dumps(_built_from(name, cc), sort_keys=True).encode())
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
                lib = _build_and_load(name, cc)
            except (OSError, subprocess.SubprocessError) as exc:
                _notice(name, f"the compiled helper '{name}' built with CC={cc!r} is unavailable ({exc}); "
                              "using the numpy path (set CC to a working C compiler, or HLSNN_NATIVE=0)")
        _loaded[name] = lib
        return lib


def forget():
    """Drop the loaded libraries, so that the next :func:`load` looks again (tests)."""
    with _lock:
        _loaded.clear()
        _noticed.clear()


def _notice(name, text):
    if name not in _noticed:
        _noticed.add(name)
        print(f"hlsnn: note: {text}", file=sys.stderr, flush=True)


def _missing(lib, name):
    return [f for f in exported(name) if not hasattr(lib, f)]


def _build_and_load(name: str, cc: str):
    """The helper's library from the cache when its manifest names the same source, compiler
    and machine, its checksum matches and it exports the helper's functions; else compiled
    afresh (to a temporary, loaded and checked there, then renamed into place)."""
    lib = library_path(name, cc)
    built_from = _built_from(name, cc)
    so = _cached(name, lib, built_from, quiet=True)
    if so is not None:
        return so
    with cachefile.build_lock(lib):          # another process building it: wait, then reuse it
        so = _cached(name, lib, built_from)
        return so if so is not None else _compile(name, cc, lib, built_from)


def _cached(name, lib, built_from, quiet=False):
    """The cached helper loaded, when its manifest and exports check out; else None."""
    if not cachefile.entry_ok(lib, built_from):
        return None
    try:
        so = ctypes.CDLL(str(lib))
        why = ("it lacks " + ", ".join(_missing(so, name))) if _missing(so, name) else ""
    except OSError as exc:
        so, why = None, " ".join(str(exc).split())
    if so is not None and not why:
        return so
    if not quiet:
        _notice(name + ".cache", f"the cached helper {lib} is not the library of {name}.c ({why}); rebuilding it")
    return None


def _compile(name: str, cc: str, lib: Path, built_from: dict):
    lib.parent.mkdir(parents=True, exist_ok=True)
    files.remove_stale(lib.parent)             # temporaries of compiles that were killed
    fd, tmp = tempfile.mkstemp(dir=lib.parent, prefix=files.tmp_prefix(lib.name), suffix=".so")
    os.close(fd)
    import shlex
    from .. import compiling
    argv = [*shlex.split(cc), *flags(), str(SOURCE_DIR / f"{name}.c"), "-o", tmp]
    try:
        proc = compiling.run(argv, f"the emulator's C helper '{name}' (first use)")
        if proc.returncode != 0:
            log = lib.parent / f"{name}-compile-error.log"
            files.write_atomic(log, " ".join(argv) + "\n\n" + proc.stderr)
            raise OSError(f"{cc} failed; see {log}")
        with open(tmp, "rb") as f:
            if f.read(4) != b"\x7fELF":
                raise OSError(f"{cc} reported success but wrote no shared library ({os.path.getsize(tmp)} bytes); "
                              f"check CC")
        so = ctypes.CDLL(tmp)                  # a new file: never the handle of a foreign library above
        missing = _missing(so, name)
        if missing:
            raise OSError(f"{cc} built a library without {', '.join(missing)}")
        digest = cachefile.sha256(Path(tmp))
        os.chmod(tmp, 0o755 & ~files.umask())
        os.replace(tmp, lib)
        cachefile.write_manifest(lib, built_from, digest)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return so
