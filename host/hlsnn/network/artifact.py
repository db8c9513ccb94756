"""The compiled model container (``NAME.hlsnn``): one uncompressed ``.npz`` (a zip of ``.npy``
arrays, read with ``allow_pickle=False``, so nothing in it is code).

* ``__program__``: the layer program, UTF-8 JSON as a uint8 array (:data:`FORMAT`,
  :data:`VERSION`; its keys are documented in ``docs/compiled-format.md``);
* every other key is one array a layer's state names (``<layer>/<field>``), integers in
  the engine's codes (two-hot/power-of-two fields, int8 weights, BFP mantissas and
  exponents), the float biases, and the self-check inputs and outputs (``check/...``).

This module needs only numpy and the standard library: a board reads the file with it.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..errors import HlsnnError, InputError, excerpt, printable

FORMAT = "hlsnn-compiled-model"
VERSION = 1
PROGRAM_KEY = "__program__"


#: The program key that holds the arrays' checksum (:func:`checksum`), checked on load.
CHECKSUM_KEY = "arrays_sha256"
#: Bounds of the container a reader accepts (a zip's declared sizes, checked before reading).
MAX_BYTES = 1 << 31
MAX_ENTRIES = 100_000
MAX_PROGRAM_BYTES = 64 << 20


def checksum(arrays):
    """SHA-256 (hex) over every array's name, dtype, shape and bytes, in name order: what a
    compiled model records under :data:`CHECKSUM_KEY` and :func:`read` checks."""
    import hashlib
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(json.dumps([k, a.dtype.str, list(a.shape)]).encode("utf-8") + b"\0")
        h.update(a.tobytes())
    return h.hexdigest()


def write(path, program, arrays):
    """Write ``program`` (a JSON-able dict) and ``arrays`` (name -> ndarray) to ``path``,
    atomically (a temporary file in the same folder, flushed to disk, then renamed over
    ``path``: a killed process or a full disk leaves the old file or none, never half of one)."""
    from ..files import write_npz
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    bad = [k for k, v in arrays.items() if v.dtype.kind not in "biuf"]
    if bad:
        raise InputError(f"compiled model: arrays {bad} are not numbers (only int, uint, bool and float are stored)")
    program = dict(program, format=FORMAT, version=VERSION)
    program[CHECKSUM_KEY] = checksum(arrays)
    blob = np.frombuffer(json.dumps(program, sort_keys=True, indent=1).encode("utf-8"), np.uint8)
    path = Path(path)
    write_npz(path, {PROGRAM_KEY: blob, **arrays}, fsync=True)
    return path


def _load(p, path):
    """The arrays of the container at ``p``, or :class:`InputError` (one line) for anything that
    is not a sound, bounded zip of ``.npy`` arrays without pickles."""
    import zipfile
    try:
        if not zipfile.is_zipfile(p):
            raise InputError(f"{printable(path)}: not a compiled model (not a zip container: truncated, damaged, or "
                             f"another kind of file)")
        with zipfile.ZipFile(p) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_ENTRIES or sum(i.file_size for i in infos) > MAX_BYTES:
                raise InputError(f"{printable(path)}: not a compiled model ({len(infos)} entries declaring "
                                 f"{sum(i.file_size for i in infos):,} bytes; at most {MAX_ENTRIES:,} and "
                                 f"{MAX_BYTES:,})")
        z = np.load(p, allow_pickle=False)
        if not hasattr(z, "files"):
            raise InputError(f"{printable(path)}: not a compiled model (one .npy array, not an .npz container)")
        with z:
            return {k: z[k] for k in z.files}
    except InputError:
        raise
    except Exception as exc:                 # BadZipFile, zlib.error, a bad .npy header, a CRC error ...
        msg = (str(exc).strip().splitlines() or [""])[0][:160]
        raise InputError(f"{printable(path)}: not a compiled model (a damaged container: {type(exc).__name__}"
                         f"{': ' + msg if msg else ''})") from None


def read(path, *, validate=True):
    """``(program, arrays)`` of a compiled model, or :class:`InputError` naming what is wrong.
    The container, the arrays' checksum and the whole program
    (:func:`hlsnn.network.schema.validate`) are checked before anything else reads them;
    ``validate=False`` skips the program's check (tests of the checks behind it only)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{printable(path)}: no such compiled model (make one with `hlsnn compile MODEL.yaml "
                         f"--assignment A -o NAME.hlsnn`)")
    arrays = _load(p, path)
    blob = arrays.pop(PROGRAM_KEY, None)
    if blob is None:
        raise InputError(f"{printable(path)}: not a compiled model (no {PROGRAM_KEY} entry)")
    if blob.dtype != np.uint8 or blob.ndim != 1 or blob.size > MAX_PROGRAM_BYTES:
        raise InputError(f"{printable(path)}: not a compiled model ({PROGRAM_KEY} is not UTF-8 bytes of at most "
                         f"{MAX_PROGRAM_BYTES:,})")
    try:
        program = json.loads(blob.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{printable(path)}: the layer program is not valid JSON ({exc})") from None
    except RecursionError:
        raise InputError(f"{printable(path)}: the layer program is nested too deeply to be a compiled "
                         "model's") from None
    fmt = program.get("format") if isinstance(program, dict) else None
    if fmt != FORMAT:
        raise InputError(f"{printable(path)}: not a compiled model (format {excerpt(fmt, 60)}, expected {FORMAT!r})")
    if program.get("version") != VERSION:
        raise InputError(f"{printable(path)}: compiled model version {excerpt(program.get('version'), 40)}; this "
                         f"hlsnn reads version {VERSION}: recompile it with `hlsnn compile`")
    from ..deploy.lower.programrev import REVISION     # the optional fields this hlsnn knows (no imports)
    rev = program.get("revision", 1)
    if isinstance(rev, int) and not isinstance(rev, bool) and rev > REVISION:
        raise InputError(f"{printable(path)}: compiled by a newer hlsnn ({excerpt(program.get('hlsnn'), 40)}, "
                         "program revision "
                         f"{rev}; this one reads up to revision {REVISION}): load it with that hlsnn or recompile it "
                         f"with this one (`hlsnn compile`)")
    want = program.get(CHECKSUM_KEY)
    if not isinstance(want, str):
        raise InputError(f"{printable(path)}: the compiled model records no checksum of its arrays ({CHECKSUM_KEY}); "
                         f"it was written by an older hlsnn or edited: recompile it with `hlsnn compile`")
    if checksum(arrays) != want:
        raise InputError(f"{printable(path)}: the compiled model's arrays do not match their checksum "
                         f"({CHECKSUM_KEY}): the "
                         f"file is damaged or was edited; recompile it with `hlsnn compile`")
    if validate:
        from .schema import validate as check
        check(program, arrays, str(path))
    return program, arrays


#: What hlsnn's own code raises when it fails (a bug): under :class:`as_internal_error`, one of these
#: that is no :class:`~hlsnn.errors.HlsnnError` becomes an :class:`~hlsnn.errors.InternalError`
DAMAGE = (TypeError, ValueError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError)


class as_internal_error:
    """Within it, an exception of :data:`DAMAGE` that is no :class:`~hlsnn.errors.HlsnnError`
    becomes one :class:`~hlsnn.errors.InternalError` naming the compiled model ``path`` and
    saying that this is a bug of hlsnn (the original chained as its ``__cause__``). Used where a
    compiled model is loaded, run, modelled (``hlsnn perf``, ``report``) or built (``hlsnn build
    NAME.hlsnn``): by then :func:`read` has checked the whole program against
    :mod:`hlsnn.network.schema` (every field, every host op's attributes by its table, each host
    op run once on its input's shape), so a hostile or damaged file was refused there, by field,
    and what fails after it is hlsnn's fault, not the file's. As a decorator, the guarded
    function's first argument is the path."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if kind is None or issubclass(kind, HlsnnError) or not issubclass(kind, DAMAGE):
            return False
        from ..errors import InternalError
        why = " ".join(str(exc).split())[:160] or kind.__name__
        raise InternalError(f"{printable(self.path)}: internal error, a bug of hlsnn ({kind.__name__}: {why}): the "
                            f"compiled model passed every check of its format (hlsnn.network.schema), so this is "
                            f"hlsnn's fault, not the file's; please report it with the file") from exc

    @staticmethod
    def guard(fn):
        import functools

        @functools.wraps(fn)
        def wrapped(path, *args, **kwargs):
            with as_internal_error(path):
                return fn(path, *args, **kwargs)
        return wrapped
