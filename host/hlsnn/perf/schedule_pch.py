"""A precompiled header for the schedule's libclang parse (:mod:`hlsnn.perf.schedule`).

Every derived schedule parses one rendered kernel with the C-simulation's headers: the C++ standard
library and the ap_types headers (``ap_private.h``'s templates), which are most of a parse's time
and the same for every kernel. They are parsed once into a precompiled header (PCH) that every
parse then loads (``-include-pch``), with the function bodies of those headers skipped
(``PARSE_SKIP_FUNCTION_BODIES``): the analysis reads only the rendered folder's own code, never a
body of ``ap_int``'s operators, and without those bodies the templates a kernel instantiates
cost a fraction of the time (a parse 1.9 -> 0.5 CPU-seconds, bfp8_zcu104's kernel).

The PCH lives beside the derived schedules (``$XDG_CACHE_HOME/hlsnn/schedule``), named by a hash of
the libclang library, the parse's flags and the headers' list; it is written atomically under a
lock (:func:`hlsnn.cachefile.build_lock`), so the processes of a test run build it once. A parse
with the PCH that reports an error (a header changed since the PCH was built, or a kernel that
needs a skipped body, e.g. a ``constexpr`` function of a header in a constant expression) is
parsed again without it: the PCH makes a parse faster, never different
(``tests/perf/test_schedule_pch.py`` compares the rows of both).
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

#: the system headers of the rendered kernels (``#include <...>`` of hls/ and the network kernels);
#: a kernel including one not listed parses it as before, only slower
HEADERS = ("stdint.h", "stdio.h", "stdlib.h", "string.h", "setjmp.h", "cassert", "algorithm", "string", "sstream",
           "vector", "deque", "mutex", "thread", "condition_variable", "chrono", "ap_int.h", "ap_fixed.h",
           "hls_stream.h")

_MEMO = {}


def _base_args(args):
    """The flags of ``args`` that the PCH must share with each parse (not the folder's ``-I``)."""
    return [a for a in args if not a.startswith("-I")]


def pch_args(ci, args) -> list:
    """``["-include-pch", <file>]`` for a parse with flags ``args``, building the PCH on first use;
    ``[]`` when it cannot be built (the parse then reads the headers itself)."""
    if os.environ.get("HLSNN_SCHEDULE_PCH", "1").strip().lower() in ("0", "off", "no", "false"):
        return []
    base = _base_args(args)
    try:                                     # the library itself: its path, size and time
        lib = ci.conf.lib._name
        st = os.stat(lib)
        version = (lib, st.st_size, st.st_mtime_ns)
    except Exception:                        # noqa: BLE001 - bindings without the attribute: the module
        version = getattr(ci, "__file__", "")
    text = "".join(f"#include <{h}>\n" for h in HEADERS)
    key = hashlib.sha256(repr((version, base, text)).encode()).hexdigest()[:16]
    if key in _MEMO:
        return _MEMO[key]
    pch = cache_dir() / f"headers_{key}.pch"
    try:
        if not pch.is_file():
            from ..cachefile import build_lock
            with build_lock(pch):
                if not pch.is_file():
                    _build(ci, pch, base, text)
        _MEMO[key] = ["-include-pch", str(pch)]
    except Exception:                        # noqa: BLE001 - no PCH: the parse reads the headers itself
        _MEMO[key] = []
    return _MEMO[key]


def _build(ci, pch: Path, base, text):
    """Write the PCH ``pch`` of the headers' list ``text`` (kept beside it as ``<pch>.h``: a PCH
    names the header it was built from, and a parse checks that it is still there)."""
    import tempfile
    from ..files import write_atomic
    pch.parent.mkdir(parents=True, exist_ok=True)
    hdr = pch.with_name(pch.name + ".h")
    if not hdr.is_file() or hdr.read_text() != text:
        write_atomic(hdr, text)
    args = ["c++-header" if a == "c++" else a for a in base]
    tu = ci.Index.create().parse(str(hdr), args=args, options=ci.TranslationUnit.PARSE_SKIP_FUNCTION_BODIES)
    if any(d.severity >= 3 for d in tu.diagnostics):
        raise RuntimeError("the headers do not parse")
    fd, tmp = tempfile.mkstemp(dir=pch.parent, prefix=".pch-", suffix=".pch")
    os.close(fd)
    try:
        tu.save(tmp)
        os.replace(tmp, pch)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def parse(ci, path, args):
    """The translation unit of ``path`` parsed with ``args``: with the PCH when it is there and the
    parse with it reports no error, else without it."""
    extra = pch_args(ci, args)
    if extra:
        try:
            tu = ci.Index.create().parse(str(path), args=list(args) + extra)
            errs = [d.spelling for d in tu.diagnostics if d.severity >= 3]
        except ci.TranslationUnitLoadError as e:
            errs = [str(e)]
        if not errs:
            return tu
        if any(w in e for e in errs for w in ("precompiled", "PCH", "AST file", "modified", "Error parsing")):
            _discard(extra[1])               # stale or unreadable: built again by the next process
    return ci.Index.create().parse(str(path), args=list(args))


def _discard(pch):
    for k, v in list(_MEMO.items()):
        if v and v[1] == pch:
            _MEMO[k] = []                    # this process parses without it from now on
    try:
        os.unlink(pch)
    except OSError:
        pass


def cache_dir():
    """The derived schedules, by a hash of the kernel's sources: in the user's cache
    (``$XDG_CACHE_HOME/hlsnn/schedule``, as the native helpers), never in the build folder, which
    a model or a sweep that renders nothing must leave untouched."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hlsnn" / "schedule"


def load_or_derive(f, derive):
    """The rows cached in ``f`` (JSON), else ``derive()``'s, written there atomically; under a
    lock beside ``f``, so that another process deriving the same kernel (a test worker) waits for
    its rows instead of deriving them again. An unwritable cache derives without the lock."""
    import contextlib
    import json
    from ..cachefile import build_lock
    from ..files import write_atomic

    def cached():
        try:
            return json.loads(f.read_text())
        except (OSError, ValueError):               # none yet, or a torn file: derive again
            return None
    rows = cached()
    if rows is not None:
        return rows
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(build_lock(f))
        except OSError:                             # an unwritable cache: derive without the lock
            pass
        rows = cached()                             # written while this process waited
        if rows is None:
            rows = derive()
            try:
                f.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(f, json.dumps(rows))
            except OSError:
                pass
        return rows
