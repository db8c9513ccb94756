"""Typed errors. Each also inherits a builtin so existing ``except`` clauses keep working.

Messages say what was expected, what was found and what to change. User mistakes (a bad
config, a bad array) raise these and the CLI prints them as one line, never a traceback.
"""


class HlsnnError(Exception):
    """Base class of every error hlsnn raises on purpose."""


def excerpt(value, limit: int = 120) -> str:
    """``repr(value)`` bounded to about ``limit`` characters, also for huge or deeply nested
    values (reprlib cuts long lists, strings and nesting before anything is expanded)."""
    import reprlib
    r = reprlib.Repr()
    r.maxlevel, r.maxlist, r.maxtuple, r.maxdict, r.maxset = 3, 6, 6, 6, 6
    r.maxstring, r.maxother, r.maxlong = limit, limit, 40
    s = r.repr(value)
    return s if len(s) <= limit else s[:limit - 3] + "..."


def printable(text) -> str:
    """``text`` as it is when every character is printable, else its ``repr`` (a file name with a
    newline or a terminal escape in it stays on the error's one line, visibly)."""
    import unicodedata
    s = str(text)
    if any(unicodedata.category(c)[0] in "CZ" and c != " " for c in s):
        return repr(s)
    return s


class ConfigError(HlsnnError, ValueError):
    """A config file is wrong: names the file, the key, the bad value (a bounded excerpt) and
    what is allowed."""

    def __init__(self, source, key, value, allowed):
        self.source, self.key, self.value, self.allowed = str(source), key, value, allowed
        where = f"{printable(self.source)}: " if self.source else ""
        keypart = f"{key} = {excerpt(value)}: " if key else ""
        super().__init__(f"{where}{keypart}{allowed}")


class InputError(HlsnnError, ValueError):
    """An array handed to the library has the wrong shape, dtype or range."""


class InternalError(HlsnnError, RuntimeError):
    """A bug of hlsnn, met while it handled input that passed every check of its format (a
    compiled model that passed :mod:`hlsnn.network.schema`): the message says so and names the
    input, the original error is chained as ``__cause__`` for the bug report."""


class ModelError(InputError):
    """An ONNX model cannot be imported or evaluated: names the node or initializer at fault and
    what is wrong (also every failure of onnx's reference evaluator, the float reference)."""


class CompileError(HlsnnError, RuntimeError):
    """g++ failed on rendered C++: carries the command and the compiler's message."""

    def __init__(self, argv, stderr, source_path, log_path=None):
        self.argv, self.stderr, self.source_path, self.log_path = list(argv), stderr, source_path, log_path
        lines = stderr.strip().splitlines()
        first = next((i for i, line in enumerate(lines) if "error" in line), 0)
        start = max(0, first - 2)
        excerpt = "\n".join(lines[start:start + 20])
        more = f"\n  full compiler output: {log_path}" if log_path else ""
        super().__init__(f"C-simulation compile failed for {source_path}\n  command: {' '.join(map(str, argv))}\n"
                         f"{excerpt}{more}")


class CsimError(HlsnnError, RuntimeError):
    """The C-simulated kernel reported a protocol error (missing TLAST, leftover words...)."""


class StrictCsimError(CsimError):
    """The strict C-simulation stopped on a hardware rule: a FIFO deadlock, an empty
    read or leftover beats, a read-after-write closer than the pipeline allows, a bank with more
    accesses than ports. The message names the FIFO, array or loop."""


class MissingDependency(HlsnnError, ImportError):
    """An optional package or tool is missing; the message says how to install it."""


class UnsupportedModelError(HlsnnError, ValueError):
    """An ONNX model has nodes hlsnn cannot run: lists every one (name, op type, reason)."""

    def __init__(self, path, nodes, host_fallback=False):
        self.path, self.nodes = path, list(nodes)
        lines = "\n".join(f"  {name} ({op}): {why}" for name, op, why in self.nodes)
        how = ("not even --host-fallback runs them (the reason says why)" if host_fallback or all(
            "--host-fallback cannot" in why for _, _, why in self.nodes) else
               "--host-fallback runs each of them on the host in float32 with onnx's reference implementation "
               "(not on the FPGA)")
        super().__init__(f"{path}: {len(self.nodes)} unsupported node(s), which no accelerator or host rule of "
                         f"hlsnn runs; {how}:\n{lines}")


#: errno values that are the environment's doing, not a bug: reported as one line naming the path
FILESYSTEM_ERRNOS = {"EROFS": "the file system is read-only", "ENOSPC": "no space left on the device",
                     "EDQUOT": "disk quota exceeded", "EACCES": "permission denied", "EPERM": "operation not permitted",
                     "ENAMETOOLONG": "file name too long", "EMFILE": "too many open files",
                     "ENOTDIR": "a parent in the path is not a folder", "EISDIR": "it is a folder",
                     "EFBIG": "file too large", "EIO": "input/output error", "ENOENT": "no such file or folder"}


def _open_file_of(tb):
    """The file a failed ``write``/``flush`` was writing (ENOSPC carries no file name): the open
    file object, or else a path, among the locals of the innermost frame that has one."""
    import io
    import os
    frames = []
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        local = frame.f_locals
        files = [v.name for v in local.values() if isinstance(v, io.IOBase) and isinstance(getattr(v, "name", None), str)]
        if files:
            return files[:1]
        named = [local[k] for k in ("path", "dst", "target", "out", "filename", "tmp", "self")
                 if isinstance(local.get(k), os.PathLike)]
        if named:
            return [os.fspath(named[0])]
    return []


def filesystem_message(exc):
    """A one-line message for an OSError of the file system (read-only, full, no permission...)
    naming the path, or None for anything else (those stay tracebacks: they are bugs)."""
    import errno
    import os
    name = errno.errorcode.get(exc.errno or -1)
    if name not in FILESYSTEM_ERRNOS:
        return None
    paths = [p for p in (exc.filename, exc.filename2) if p is not None] or _open_file_of(exc.__traceback__)
    full = [os.path.abspath(os.fsdecode(p)) if isinstance(p, (bytes, str)) else str(p) for p in paths]
    where = " -> ".join(full) or "(the system did not say which file)"
    if full and all(_scratch(p) for p in full):
        return f"cannot write or read {where}: {FILESYSTEM_ERRNOS[name]} ({name}); choose another folder for " \
               "hlsnn's temporary files (TMPDIR) or free space"
    return f"cannot write or read {where}: {FILESYSTEM_ERRNOS[name]} ({name}); choose another folder " \
           "(HLSNN_BUILD for build output, --out for reports) or free space"


#: The prefixes of hlsnn's own temporary folders in ``$TMPDIR`` (``tempfile.TemporaryDirectory``):
#: the schedule's rendered kernels, a deployment's compiled model, a cluster task's folders.
SCRATCH_PREFIXES = ("hlsnn-sched-", "hlsnn-deploy-", "hlsnn-e2e-", "hlsnn-task-", "hlsnn-render-")


def _scratch(path: str) -> bool:
    """True for a path inside one of hlsnn's own temporary folders (:data:`SCRATCH_PREFIXES`),
    which TMPDIR moves, not HLSNN_BUILD or --out."""
    import os
    import tempfile
    rel = os.path.relpath(path, os.path.abspath(tempfile.gettempdir()))
    top, sep, _ = rel.partition(os.sep)
    return bool(sep) and top.startswith(SCRATCH_PREFIXES)


def seconds(what, value) -> float:
    """``value`` as a positive, finite number of seconds, else an :class:`InputError` naming ``what``
    (a target's ``timeout=``: the caller's option, checked before any hardware is touched)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = float("nan")
    if not 0 < v < float("inf"):
        raise InputError(f"{what} = {excerpt(value, 40)}: must be a positive number of seconds")
    return v
