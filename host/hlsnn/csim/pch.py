"""A g++ precompiled header (PCH) of the ap_types headers for the C-simulation compiles
(:mod:`hlsnn.csim`, the network kernels' :func:`hlsnn.engines.network.kernel.build`).

Parsing ``ap_int.h``, ``ap_fixed.h`` and ``hls_stream.h`` is about 0.9 CPU-seconds of every
translation unit g++ compiles for a C-simulation (a network kernel 2.7 -> 1.6 CPU-s with the PCH).
They are compiled once into ``<dir>/hlsnn_ap.h.gch`` beside the header ``<dir>/hlsnn_ap.h`` that
includes them, and each compile gets ``-include <dir>/hlsnn_ap.h``: g++ loads the ``.gch`` when it
is valid for the compile and otherwise reads the header itself (silently), so the PCH makes a
compile faster, never different. The kernels define no macro before they include those headers.

* ``<dir>`` is ``$XDG_CACHE_HOME/hlsnn/csim_pch/<key>``, the key a hash of the compiler (its path,
  size, time and ``--version``), the flags that reach the PCH (the compile's, without warning
  and link flags: the strict build's ``-DHLSNN_STRICT_CSIM -pthread`` and the sanitizer's flags
  each get a PCH of their own), the ap_types folder and the contents of its headers.
* It is built under a lock (:func:`hlsnn.cachefile.build_lock`) into a temporary name and renamed
  into place, so the test workers build it once.
* Only for g++ (``$CXX`` unset or naming g++); ``HLSNN_CSIM_PCH=0`` turns it off. A PCH that
  cannot be built means the plain compile (:func:`pch_args` returns ``[]``); a compile with the
  PCH whose error line names the PCH is made again without it (:func:`retry_without`; an error in
  the kernel is not retried, though its warnings' include chains name the header).
* The csim libraries' cache keys do not include the PCH: the library's code is the same.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path

#: what the PCH holds (every kernel includes the first two, the bridges and strict.h the third)
HEADERS = ("ap_int.h", "ap_fixed.h", "hls_stream.h")
NAME = "hlsnn_ap.h"

_MEMO: dict = {}


def enabled(compiler: str) -> bool:
    if os.environ.get("HLSNN_CSIM_PCH", "1").strip().lower() in ("0", "off", "no", "false"):
        return False
    base = os.path.basename(compiler)
    return "g++" in base and "clang" not in base


def pch_flags(flags) -> list:
    """The compile flags that reach the PCH: not the link flags nor the warning flags."""
    return [f for f in flags if f != "-shared" and not f.startswith("-W")]


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hlsnn" / "csim_pch"


def _compiler_id(compiler: str) -> str:
    import shutil
    path = shutil.which(compiler) or compiler
    real = os.path.realpath(path)
    st = os.stat(real)
    ver = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=60).stdout
    return repr((real, st.st_size, st.st_mtime_ns, ver))


def _headers_digest(ap_dir: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(Path(ap_dir).rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(ap_dir)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def key(compiler: str, flags, ap_dir) -> str:
    memo = ("id", compiler, str(ap_dir))
    if memo not in _MEMO:
        _MEMO[memo] = (_compiler_id(compiler), _headers_digest(Path(ap_dir)))
    cid, hdrs = _MEMO[memo]
    text = repr((cid, pch_flags(flags), str(Path(ap_dir).resolve()), hdrs, HEADERS))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def pch_args(compiler: str, flags, ap_dir) -> list:
    """``["-include", <dir>/hlsnn_ap.h]`` for a compile with ``compiler`` and ``flags`` against the
    ap_types folder ``ap_dir``, building the PCH on first use; ``[]`` when it is off or cannot be
    built (the compile then reads the headers itself, as without it)."""
    if not enabled(compiler):
        return []
    try:
        k = key(compiler, flags, ap_dir)
    except Exception:                        # noqa: BLE001 - no PCH: the plain compile
        return []
    if k in _MEMO:
        return _MEMO[k]
    d = cache_dir() / k
    hdr, gch = d / NAME, d / (NAME + ".gch")
    try:
        if not (gch.is_file() and hdr.is_file()):
            from ..cachefile import build_lock
            d.mkdir(parents=True, exist_ok=True)
            with build_lock(gch):
                if not (gch.is_file() and hdr.is_file()):
                    _build(compiler, flags, ap_dir, hdr, gch)
        _MEMO[k] = ["-include", str(hdr)]
    except Exception:                        # noqa: BLE001 - no PCH: the plain compile
        _MEMO[k] = []
    return _MEMO[k]


def _build(compiler, flags, ap_dir, hdr: Path, gch: Path):
    from ..files import write_atomic
    text = "".join(f"#include <{h}>\n" for h in HEADERS)
    if not hdr.is_file() or hdr.read_text() != text:
        write_atomic(hdr, text)
    fd, tmp = tempfile.mkstemp(dir=gch.parent, prefix=".gch-", suffix=".gch")
    os.close(fd)
    try:
        argv = [compiler, *pch_flags(flags), f"-isystem{ap_dir}", "-x", "c++-header", str(hdr), "-o", tmp]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or os.path.getsize(tmp) == 0:
            raise RuntimeError(f"the PCH did not build: {proc.stderr[:500]}")
        os.replace(tmp, gch)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def retry_without(extra, proc) -> bool:
    """Whether a failed compile made with the PCH arguments ``extra`` should be made again
    without them (its error names the PCH); the PCH is then discarded (built again next time)."""
    if not extra or proc.returncode == 0:
        return False
    # Only an error line naming the PCH: an error in the kernel's own code comes with warnings
    # whose include chains ("In file included from .../hlsnn_ap.h") name the header too, and
    # retrying those compiled the failing kernel twice and discarded a good PCH.
    errors = [line for line in (proc.stderr or "").splitlines() if "error" in line]
    if not any(w in line for line in errors for w in (".gch", "precompiled", "PCH", NAME)):
        return False
    for k, v in list(_MEMO.items()):
        if v == extra:
            _MEMO[k] = []
    try:
        os.unlink(extra[1] + ".gch")
    except OSError:
        pass
    return True
