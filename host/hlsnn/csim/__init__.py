"""C-simulation: compile the rendered kernel with g++ against Xilinx's ap_types headers and
call its real top function from Python through the C ABI bridge (ctypes).

* Headers: ``$XILINX_HLS/include`` when set (and it holds ``ap_int.h``), else the copy of
  Xilinx's Apache-2.0 ap_types that the ``hls4ml`` wheel ships (``pip install hlsnn[csim]``).
  ``include_dirs`` puts extra folders first on the search path, e.g. a model of a Vitis HLS
  release's ``ap_axi_sdata.h`` (``tests/header_models/``), which ``hlsnn/axis.h`` then uses.
* Flags: :data:`CXX_FLAGS` (``-O2``; ``$HLSNN_CSIM_OPT`` chooses another optimization level,
  see :func:`cxx_flags`).
* Cache: the shared library is named after a hash of the rendered sources, the compiler
  command and the header folder, under ``build/<name>/csim/``; a rebuild happens only when
  one of them changes. The compile reads a private snapshot of the sources the key hashes
  (never the shared project folder, which another config of the same name may be rewriting),
  writes a temporary name and renames it into place; a lock beside the entry
  (:func:`hlsnn.cachefile.build_lock`) makes a second process wait for the first one's
  library. A cached library whose manifest (:mod:`hlsnn.cachefile`) is missing, names other
  sources or does not match the file is never loaded: it is rebuilt, with a one-line notice.
* Instances: each :class:`CsimLibrary` loads its own copy of the library, so the kernel's
  static state (weight store, counters) belongs to one instance, i.e. one Accelerator; calls
  on one instance are serialized by its lock (``docs/threads-and-safety.md``).
* Strict mode (``hlsnn/strict.h``): the default library is compiled with
  ``-DHLSNN_STRICT_CSIM -pthread`` (its own cache entry): internal FIFOs bounded at their
  STREAM depth, DATAFLOW processes as threads with deadlock detection, read-after-write
  distances and bank ports checked. A violation raises :class:`StrictCsimError` naming the FIFO,
  array or loop. ``strict=False`` (``--fast``, or ``HLSNN_CSIM_FAST=1`` in the environment)
  builds the plain sequential library.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from .. import cachefile, files
from ..errors import CompileError, CsimError, InputError, MissingDependency, StrictCsimError, printable

# -Wl,--wrap=__assert_fail: the kernel's failing asserts call the bridge's __wrap___assert_fail
# (which turns them into an error status), not libc's (which aborts the Python process). The
# redirection is made when the library is linked, so it binds nothing else differently.
# -fvisibility=hidden: the statics of inline functions (the loop-counter table, the slots the
# counting macros cache, the assert trap) would otherwise be STB_GNU_UNIQUE symbols, which the
# dynamic loader binds once per process across every library loaded, RTLD_LOCAL or not: two
# kernels in one Python process shared one counter table, and a slot cached by one library
# named another library's loop. The bridge exports its C ABI with default visibility.
CXX_FLAGS = ("-std=c++14", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-Wl,--wrap=__assert_fail", "-Wall",
             "-Wno-unused-variable", "-Wno-unused-but-set-variable", "-Wno-unknown-pragmas")

#: Optimization levels ``$HLSNN_CSIM_OPT`` may choose instead of CXX_FLAGS's ``-O2`` (the test suite
#: compiles its many kernels at ``-O1``: about a quarter less compile time, the same bits).
CSIM_OPT_LEVELS = ("-O0", "-O1", "-O2", "-O3", "-Os", "-Og")


def cxx_flags() -> tuple:
    """:data:`CXX_FLAGS` with the optimization level of ``$HLSNN_CSIM_OPT`` (default ``-O2``)."""
    opt = os.environ.get("HLSNN_CSIM_OPT", "-O2")
    if opt not in CSIM_OPT_LEVELS:
        raise InputError(f"HLSNN_CSIM_OPT = {opt!r}: must be one of {', '.join(CSIM_OPT_LEVELS)}")
    flags = tuple(opt if f == "-O2" else f for f in CXX_FLAGS)
    if os.environ.get("HLSNN_CSIM_SANITIZE", "").strip().lower() in ("1", "on", "yes", "true"):
        flags += SANITIZE_FLAGS          # part of every library's cache key: never the ordinary build's
    return flags


#: Added by ``HLSNN_CSIM_SANITIZE=1`` (CI's ``.ci/sanitize``): the C-simulation under
#: AddressSanitizer and UBSan, an undefined operation aborting the process (Python preloads
#: libasan, as for the emulator's helpers: :data:`hlsnn.native.SANITIZE_FLAGS`). Without
#: ``shift-base``: the ap_types headers (``ap_private.h``) left-shift negative values, which
#: C++20 defines and g++ compiles as such in every mode; shift amounts out of range stay checked.
SANITIZE_FLAGS = ("-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize=shift-base",
                  "-fno-sanitize-recover=undefined")


# the strict C-simulation's compile flags (hlsnn/strict.h): a library variant of its own
STRICT_FLAGS = ("-DHLSNN_STRICT_CSIM", "-pthread")

_strict_default = [os.environ.get("HLSNN_CSIM_FAST", "") in ("", "0")]


def strict_default() -> bool:
    """Whether C-simulation libraries are strict unless a caller says otherwise: True, except
    after :func:`set_strict_default` (False) or with ``HLSNN_CSIM_FAST=1`` in the environment."""
    return _strict_default[0]


def set_strict_default(strict: bool) -> None:
    """Make the strict (True) or the fast (False) library the default of this process (the CLI's
    ``--fast``)."""
    _strict_default[0] = bool(strict)


def _flags(strict) -> tuple:
    return cxx_flags() + (STRICT_FLAGS if (strict_default() if strict is None else strict) else ())



STATUS_BITS = {
    1: "fewer output beats than expected",
    2: "the last output beat did not carry TLAST",
    4: "TLAST arrived before the last output beat",
    8: "more output beats than expected",
    16: "the kernel left input beats unread",
    32: "the kernel read more input beats than were sent",
}
ASSERT_FAILED = 64  # a C-simulation assert of the kernel failed (hlsnn_last_assert has the message)
STRICT_FAILED = 128  # the strict C-simulation stopped on a rule (hlsnn_last_assert has the message)


def ap_types_dir() -> Path:
    """The folder holding ``ap_int.h`` and ``hls_stream.h`` for g++."""
    xilinx = os.environ.get("XILINX_HLS")
    if xilinx and (Path(xilinx) / "include" / "ap_int.h").is_file():
        return Path(xilinx) / "include"
    spec = importlib.util.find_spec("hls4ml")
    if spec is not None and spec.submodule_search_locations:
        d = Path(list(spec.submodule_search_locations)[0]) / "templates" / "vivado" / "ap_types"
        if (d / "ap_int.h").is_file():
            return d
    raise MissingDependency(
        "C-simulation needs Xilinx's ap_types headers: `pip install \"hlsnn[csim]\"` (the hls4ml "
        "package ships them) or set XILINX_HLS to a Vitis HLS installation")


def compiler() -> str:
    cxx = os.environ.get("CXX", "g++")
    if shutil.which(cxx) is None:
        raise MissingDependency(f"C-simulation needs a C++ compiler: '{cxx}' is not on PATH "
                                "(apt-get install g++, or set CXX)")
    return cxx


def include_args(rendered, include_dirs=()) -> list:
    """The ``-I``/``-isystem`` arguments of a csim compile: ``include_dirs`` first, then the
    rendered project's folders, then the ap_types headers."""
    return ([f"-I{Path(d)}" for d in include_dirs]
            + [f"-I{rendered.dir / 'include'}", f"-I{rendered.dir}", f"-isystem{ap_types_dir()}"])


def _rendered_sources(rendered):
    """The files of a rendered project exactly as they were rendered: ``(files, digest)``,
    ``files`` a list of ``(name, bytes)``. The contents :func:`hlsnn.codegen.render` kept are
    used when they still hash to ``rendered.sha``; else the folder's files when they do (a
    project copied or edited on purpose, with its hash recomputed). When neither does, the
    folder was rewritten since (another process rendered a different config of the same name
    into it): an error, never a library built from someone else's sources."""
    from ..files import sources_digest
    kept = getattr(rendered, "sources", None)
    if kept is not None and sources_digest(kept) == rendered.sha:
        return list(kept), rendered.sha
    try:
        found = [(f, (rendered.dir / f).read_bytes()) for f in rendered.files]
    except OSError as exc:
        raise CsimError(f"C-simulation of {rendered.config.name}: cannot read the rendered project "
                        f"{printable(rendered.dir)} "
                        f"({exc.strerror or exc}); render it again") from None
    if sources_digest(found) != rendered.sha:
        raise CsimError(f"C-simulation of {rendered.config.name}: {printable(rendered.dir)} no longer holds the "
                        "sources rendered "
                        f"for it (changed since, e.g. another config named {rendered.config.name!r} rendered into "
                        f"it); render it again")
    return found, rendered.sha


def _built_from(rendered, include_dirs, digest, strict=None) -> dict:
    """What a csim library is built from, as its cache key and manifest record it."""
    cmd = " ".join((compiler(),) + _flags(strict) + tuple(f"-I{Path(d).resolve()}" for d in include_dirs))
    return {"sources_sha256": digest, "command": cmd, "ap_types": str(ap_types_dir())}


def _key(built_from: dict) -> str:
    return hashlib.sha256(json.dumps(built_from, sort_keys=True).encode()).hexdigest()[:16]


def library_path(rendered, include_dirs=(), strict=None) -> Path:
    """Where the cached shared library of a rendered kernel lives (may not exist yet):
    ``<csim folder>/lib<engine>_<key>.so``, the key a hash of the rendered sources, the
    compiler command (strict or not: ``strict``, None for :func:`strict_default`) and the
    header folder."""
    _, digest = _rendered_sources(rendered)
    key = _key(_built_from(rendered, include_dirs, digest, strict))
    return rendered.dir.parent / "csim" / f"lib{rendered.config.engine}_{key}.so"


def compile_library(rendered, *, verbose=False, include_dirs=(), progress=False, strict=None) -> Path:
    """Compile (or reuse from the cache) the csim library of a rendered kernel.
    ``include_dirs``: extra header folders searched first (they are part of the cache key);
    ``progress``: show the compile's elapsed time on stderr (:mod:`hlsnn.progress`);
    ``strict``: the strict C-simulation (None: :func:`strict_default`).

    The compile reads a private snapshot of the rendered sources (the bytes the cache key
    hashes), never the shared project folder, which another process may be rewriting; the
    library is then renamed into place and its manifest written (:mod:`hlsnn.cachefile`)."""
    sources, digest = _rendered_sources(rendered)
    built_from = _built_from(rendered, include_dirs, digest, strict)
    lib = library_path(rendered, include_dirs, strict)
    if cachefile.entry_ok(lib, built_from):
        return lib
    with cachefile.build_lock(lib):          # another process building it: wait, then reuse it
        return _compile_locked(rendered, lib, built_from, sources, verbose, include_dirs, progress, strict)


def _compile_locked(rendered, lib, built_from, sources, verbose, include_dirs, progress, strict) -> Path:
    if cachefile.entry_ok(lib, built_from):     # built by the process that held the lock before
        return lib
    if lib.is_file():
        print(f"hlsnn: note: the cached C-simulation library {lib} does not match its manifest (damaged, replaced "
              f"or built from other sources); rebuilding it", file=sys.stderr, flush=True)
    lib.parent.mkdir(parents=True, exist_ok=True)
    files.remove_stale(lib.parent)             # temporaries of compiles that were killed
    eng = rendered.engine
    snap = tmp = None
    t0 = time.time()
    if verbose:
        print(f"csim: compiling {rendered.dir} ...", flush=True)
    try:        # the temporaries made inside: an interrupt (Ctrl-C, SIGTERM) between them leaves none
        snap = Path(tempfile.mkdtemp(dir=lib.parent, prefix=files.tmp_prefix("src")))
        fd, tmp = tempfile.mkstemp(dir=lib.parent, prefix=files.tmp_prefix(lib.name), suffix=".so")
        os.close(fd)
        for name, data in sources:
            (snap / name).parent.mkdir(parents=True, exist_ok=True)
            (snap / name).write_bytes(data)
        snapshot = replace(rendered, dir=snap)
        from .. import compiling
        from . import pch as csim_pch
        pch = csim_pch.pch_args(compiler(), _flags(strict), ap_types_dir())   # faster, never different
        argv = [compiler(), *_flags(strict), *include_args(snapshot, include_dirs),
                *[str(snap / s) for s in eng.KERNEL_SOURCES], str(snap / "bridge.cpp"), "-o", tmp]
        from ..progress import ticker
        with ticker(f"g++ {rendered.dir.parent.name}", show=progress):
            proc = compiling.run(argv[:1] + pch + argv[1:], f"the C-simulation of {rendered.dir.parent.name}")
            if csim_pch.retry_without(pch, proc):
                proc = compiling.run(argv, f"the C-simulation of {rendered.dir.parent.name}")
        shown = [a.replace(str(snap), str(rendered.dir)) for a in argv]
        if proc.returncode != 0:
            stderr = proc.stderr.replace(str(snap), str(rendered.dir))
            log = lib.parent / "compile-error.log"
            files.write_atomic(log, " ".join(shown) + "\n\n" + stderr)
            raise CompileError(shown, stderr, rendered.dir / eng.KERNEL_SOURCES[0], log)
        with open(tmp, "rb") as f:
            head = f.read(4)
        if head != b"\x7fELF":
            raise CompileError(shown, f"error: the compiler reported success but wrote no shared library to {tmp} "
                                      f"({os.path.getsize(tmp)} bytes, not an ELF file): check CXX",
                               rendered.dir / eng.KERNEL_SOURCES[0])
        digest_so = cachefile.sha256(Path(tmp))
        os.chmod(tmp, 0o755 & ~files.umask())
        os.replace(tmp, lib)
        cachefile.write_manifest(lib, built_from, digest_so)
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if snap is not None:
            shutil.rmtree(snap, ignore_errors=True)
    if verbose:
        print(f"csim: compiled {lib.name} in {time.time() - t0:.1f} s", flush=True)
    return lib


#: Libraries loaded without a private copy (the folder and the temporary folder were not
#: writable): a second instance of one of them would share its state, so it is refused.
_SHARED_LOADS: set = set()
_SHARED_LOCK = threading.Lock()


def require_symbols(lib, path, names):
    """:class:`CsimError` naming the compiler unless the loaded library ``lib`` (from ``path``)
    exports every function in ``names`` (a compiler may write an empty or foreign library)."""
    missing = [n for n in names if not hasattr(lib, n)]
    if missing:
        raise CsimError(f"C-simulation library {printable(path)} lacks {', '.join(missing)}: the C++ compiler "
                        f"{compiler()!r} "
                        f"(CXX) reported success but did not build the kernel; check CXX, delete {printable(path)} "
                        f"and run again")


def _load_private(path: Path):
    """``ctypes.CDLL`` of a private copy of the library at ``path``, so that each loaded
    instance has its own static state (the kernel's weight store, the loop counters, the
    assert trap): the dynamic loader returns the already loaded object for a path or a file
    (device and inode) it has loaded before, so two instances need two files. The copy is
    checked against the library's manifest while it is written, and unlinked right after it is
    loaded (the mapping stays)."""
    for attempt in range(20):           # another process may be between its rename and its manifest
        data = path.read_bytes()
        man = cachefile.read_manifest(path)
        if man is None or man.get("sha256") == cachefile.sha256_bytes(data):
            break
        time.sleep(0.05)
    else:
        raise CsimError(f"C-simulation library {printable(path)} does not match its manifest (replaced while it was "
                        f"loaded?); run again")
    files.remove_stale(path.parent)            # copies left by processes killed while loading
    for folder in (path.parent, Path(tempfile.gettempdir())):
        try:
            fd, copy = tempfile.mkstemp(dir=folder, prefix=files.tmp_prefix(path.name), suffix=".so")
        except OSError:
            continue
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            return ctypes.CDLL(copy)
        except OSError:
            continue            # e.g. a temporary folder mounted noexec
        finally:
            os.unlink(copy)
    with _SHARED_LOCK:
        if str(path.resolve()) in _SHARED_LOADS:
            raise CsimError(f"C-simulation library {printable(path)}: no writable folder for a private copy "
                            f"({printable(path.parent)} and "
                            f"{printable(tempfile.gettempdir())} are not), and it is loaded already; a second "
                            f"instance would share the first one's kernel state. Set HLSNN_BUILD to a writable folder")
        _SHARED_LOADS.add(str(path.resolve()))
    return ctypes.CDLL(str(path))


class CsimLibrary:
    """A loaded csim library: ``run(beats, regs_in, n_out_beats) -> (beats_out, regs_out)``.

    Each instance loads its own copy of the library (:func:`_load_private`): two instances of
    one kernel (two Accelerators of one config) never share the kernel's static state. Calls on
    one instance are serialized by its lock (the kernel's state and the counters it leaves are
    per instance, not per thread)."""

    def __init__(self, path: Path, n_regs_in: int, n_regs_out: int):
        self.path = Path(path)
        self._lock = threading.RLock()
        try:
            self._lib = _load_private(self.path)
        except OSError as exc:      # an empty or foreign file where the compiler's library should be
            raise CsimError(f"C-simulation library {printable(self.path)} does not load ({exc}): the compiler did "
                            "not write a "
                            f"shared library this Python can load; check CXX, delete the file and run again") from None
        require_symbols(self._lib, self.path, ("hlsnn_run", "hlsnn_run_stream", "hlsnn_stream_bits"))
        self._lib.hlsnn_run.restype = ctypes.c_int
        self._lib.hlsnn_run.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64,
                                        ctypes.c_void_p, ctypes.c_void_p]
        self._lib.hlsnn_run_stream.restype = ctypes.c_int
        self._lib.hlsnn_run_stream.argtypes = [ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_uint64,
                                               ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        self.stream_bits = int(self._lib.hlsnn_stream_bits())
        self._has_assert_trap = hasattr(self._lib, "hlsnn_last_assert")
        if self._has_assert_trap:
            self._lib.hlsnn_last_assert.restype = ctypes.c_char_p
        self.n_regs_in, self.n_regs_out = n_regs_in, n_regs_out
        self._has_counters = hasattr(self._lib, "hlsnn_counter_count")
        if self._has_counters:
            self._lib.hlsnn_counter_name.restype = ctypes.c_char_p
            self._lib.hlsnn_counter_name.argtypes = [ctypes.c_int]
            self._lib.hlsnn_counter_values.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        self._counter_names = []
        #: loop counters of the last run (``hlsnn/counters.h``): ``{label: (iterations, entries)}``
        #: for every counter the kernel reached; None for a library built without counters
        self.last_counts = None
        #: a strict library (``hlsnn/strict.h``): the records of the last run, and of every run
        #: so far merged (:func:`merge_strict`); None for a fast library
        self.strict = hasattr(self._lib, "hlsnn_strict_report")
        if self.strict:
            self._lib.hlsnn_strict_report.restype = ctypes.c_char_p
        self.last_strict = None
        self.strict_totals = None

    def _read_counts(self):
        """The loop counters the last run left in the library (names are registered on first
        use and cached here, since they never change within a loaded library)."""
        if not self._has_counters:
            self.last_counts = None
            return
        n = int(self._lib.hlsnn_counter_count())
        check_counter_table(self._lib, self.path)
        while len(self._counter_names) < n:
            self._counter_names.append(self._lib.hlsnn_counter_name(len(self._counter_names)).decode())
        iters = np.zeros(max(n, 1), dtype=np.uint64)
        entries = np.zeros(max(n, 1), dtype=np.uint64)
        n = int(self._lib.hlsnn_counter_values(iters.ctypes, entries.ctypes, n))
        self.last_counts = {name: (int(i), int(e)) for name, i, e in
                            zip(self._counter_names[:n], iters.tolist(), entries.tolist()) if i}

    def _read_strict(self):
        if not self.strict:
            return
        self.last_strict = json.loads(self._lib.hlsnn_strict_report().decode())
        self.strict_totals = merge_strict(self.strict_totals, self.last_strict)

    def _check_assert(self, status):
        """A kernel assert that failed in C-simulation, or a rule of the strict C-simulation: an
        error that names it (the process lives)."""
        if status & STRICT_FAILED and self._has_assert_trap:
            msg = (self._lib.hlsnn_last_assert() or b"").decode(errors="replace")
            raise StrictCsimError(f"strict C-simulation of {self.path.name}: {msg} (hlsnn csim --fast skips "
                                  f"these checks)")
        if status & ASSERT_FAILED and self._has_assert_trap:
            msg = (self._lib.hlsnn_last_assert() or b"").decode(errors="replace")
            raise CsimError(f"C-simulation of {self.path.name}: the kernel stopped on a failed check ({msg}); "
                            f"the registers or the input stream do not fit this kernel's config (a wrong "
                            f"register map or overlay?)")

    def run(self, beats: np.ndarray, regs_in, n_out_beats: int):
        nbytes = self.stream_bits // 8
        beats = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1, nbytes)
        out = np.zeros((n_out_beats, nbytes), dtype=np.uint8)
        rin = np.ascontiguousarray(np.asarray(regs_in, dtype=np.uint32))
        rout = np.zeros(self.n_regs_out, dtype=np.uint32)
        if rin.size != self.n_regs_in:
            raise ValueError(f"expected {self.n_regs_in} register values, got {rin.size}")
        with self._lock:
            status = self._lib.hlsnn_run(beats.ctypes, beats.shape[0], out.ctypes, n_out_beats,
                                         rin.ctypes, rout.ctypes)
            self._read_counts()
            self._read_strict()
            self._check_assert(status)
        if status:
            why = "; ".join(msg for bit, msg in STATUS_BITS.items() if status & bit)
            raise CsimError(f"C-simulation of {self.path.name}: stream protocol error ({why}); "
                            f"sent {beats.shape[0]} beats, expected {n_out_beats} back")
        return out, rout

    def run_stream(self, beats: np.ndarray, regs_in, cap_beats: int):
        """Run the kernel on ``beats`` and return what it wrote, as a simulated device sees
        it: ``(beats_out, regs_out, last_index, status)`` with ``last_index`` the first beat
        carrying TLAST (None when none did) and ``status`` the input-side protocol bits (16:
        input left unread, 32: the kernel read past the input)."""
        nbytes = self.stream_bits // 8
        beats = np.ascontiguousarray(beats, dtype=np.uint8).reshape(-1, nbytes)
        out = np.empty((cap_beats, nbytes), dtype=np.uint8)     # only the written beats are returned
        rin = np.ascontiguousarray(np.asarray(regs_in, dtype=np.uint32))
        rout = np.zeros(self.n_regs_out, dtype=np.uint32)
        n_out = ctypes.c_uint64(0)
        last = ctypes.c_int64(-1)
        with self._lock:
            status = self._lib.hlsnn_run_stream(beats.ctypes, beats.shape[0], out.ctypes, cap_beats,
                                                rin.ctypes, rout.ctypes, ctypes.byref(n_out), ctypes.byref(last))
            self._read_counts()
            self._read_strict()
            self._check_assert(status)
        return out[:n_out.value], rout, (None if last.value < 0 else int(last.value)), int(status)


def check_counter_table(lib, path):
    """:class:`CsimError` when the loaded library ``lib`` reports that a loop counter found its
    table full (``hlsnn_counter_full``, hlsnn/csim_counters.h): the counts would be incomplete,
    and the cycles modelled from them wrong (a library built before the check: not asked)."""
    if hasattr(lib, "hlsnn_counter_full") and lib.hlsnn_counter_full():
        raise CsimError(f"C-simulation library {printable(path)}: the kernel has more loop counters than the "
                        f"table has slots (kMaxCounters in hls/include/hlsnn/csim_counters.h), so its cycle counts "
                        f"would be incomplete; raise kMaxCounters and run again")


def merge_strict(total, rep):
    """Two strict reports merged: a FIFO's largest peak, an array's smallest distance seen, a
    bank's most sites, a loop's operators (each list keeps its first-seen order)."""
    if total is None:
        return {k: [dict(r) for r in v] for k, v in rep.items()}
    keys = {"fifos": ("name",), "raw": ("array",), "banks": ("loop", "array", "bank"), "operators": ("loop",)}
    for kind, key in keys.items():
        index = {tuple(r[k] for k in key): r for r in total[kind]}
        for r in rep.get(kind, []):
            old = index.get(tuple(r[k] for k in key))
            if old is None:
                total[kind].append(dict(r))
                index[tuple(r[k] for k in key)] = total[kind][-1]
            elif kind == "fifos":
                old["peak"] = max(old["peak"], r["peak"])
            elif kind == "raw":
                seen = [d for d in (old["min_distance"], r["min_distance"]) if d is not None]
                old["min_distance"] = min(seen) if seen else None
            elif kind == "banks":
                for f in ("sites", "reads", "writes"):
                    old[f] = max(old[f], r[f])
    return total
