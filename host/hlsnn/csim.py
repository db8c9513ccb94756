"""C-simulation: compile the rendered kernel with g++ against Xilinx's ap_types headers and
call its real top function from Python through the C ABI bridge (ctypes).

* Headers: ``$XILINX_HLS/include`` when set (and it holds ``ap_int.h``), else the copy of
  Xilinx's Apache-2.0 ap_types that the ``hls4ml`` wheel ships (``pip install hlsnn[csim]``).
  ``include_dirs`` puts extra folders first on the search path, e.g. a model of a Vitis HLS
  release's ``ap_axi_sdata.h`` (``tests/header_models/``), which ``hlsnn/axis.h`` then uses.
* Flags: :data:`CXX_FLAGS` (``-O2``; ``$HLSNN_CSIM_OPT`` chooses another optimization level,
  see :func:`cxx_flags`).
* Cache: the shared library is named after a hash of the rendered sources, the compiler
  command and the header folder, under ``build/<stem>/csim/``; a rebuild happens only when
  one of them changes. Libraries are compiled to a temporary name and renamed into place, so
  an interrupted compile never leaves a corrupt cache entry, and two processes compiling the
  same kernel never see each other's half-written file; a lock beside the entry
  (:func:`hlsnn.cachefile.build_lock`) makes the second one wait for the first one's library
  instead of compiling it again. Each library has a ``.sha256`` beside
  it; a cached library whose checksum does not match (truncated, zeroed, replaced) is never
  loaded, which would crash the process with SIGBUS or SIGSEGV: it is rebuilt, with a
  one-line notice.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from . import cachefile
from .errors import CompileError, CsimError, InputError, MissingDependency

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
    return tuple(opt if f == "-O2" else f for f in CXX_FLAGS)


# the cache's file helpers (kept under these names: tests and callers use them)
_checksum_path, _sha256, _checksum_ok, _write_atomic = (cachefile.checksum_path, cachefile.sha256,
                                                        cachefile.checksum_ok, cachefile.write_atomic)


STATUS_BITS = {
    1: "fewer output beats than expected",
    2: "the last output beat did not carry TLAST",
    4: "TLAST arrived before the last output beat",
    8: "more output beats than expected",
    16: "the kernel left input beats unread",
    32: "the kernel read more input beats than were sent",
}
ASSERT_FAILED = 64  # a C-simulation assert of the kernel failed (hlsnn_last_assert has the message)


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


def library_path(rendered, include_dirs=()) -> Path:
    """Where the cached shared library of a rendered kernel lives (may not exist yet)."""
    cmd = " ".join((compiler(),) + cxx_flags() + tuple(f"-I{Path(d).resolve()}" for d in include_dirs))
    key = hashlib.sha256(f"{rendered.sha}\n{cmd}\n{ap_types_dir()}".encode()).hexdigest()[:16]
    return rendered.dir.parent / "csim" / f"lib{rendered.config.engine}_{key}.so"


def compile_library(rendered, *, verbose=False, include_dirs=(), progress=False) -> Path:
    """Compile (or reuse from the cache) the csim library of a rendered kernel.
    ``include_dirs``: extra header folders searched first (they are part of the cache key);
    ``progress``: show the compile's elapsed time on stderr (:mod:`hlsnn.progress`)."""
    lib = library_path(rendered, include_dirs)
    if lib.is_file() and _checksum_ok(lib):
        return lib
    with cachefile.build_lock(lib):          # another process building it: wait, then reuse it
        return _compile_locked(rendered, lib, verbose, include_dirs, progress)


def _compile_locked(rendered, lib, verbose, include_dirs, progress) -> Path:
    if lib.is_file():
        if _checksum_ok(lib):
            return lib
        print(f"hlsnn: note: the cached C-simulation library {lib} does not match its checksum (damaged or "
              f"replaced); rebuilding it", file=sys.stderr, flush=True)
    eng = rendered.engine
    sources = [str(rendered.dir / s) for s in eng.KERNEL_SOURCES] + [str(rendered.dir / "bridge.cpp")]
    fd, tmp = tempfile.mkstemp(dir=lib.parent, prefix=".tmp-", suffix=".so")
    os.close(fd)
    argv = [compiler(), *cxx_flags(), *include_args(rendered, include_dirs), *sources, "-o", tmp]
    t0 = time.time()
    if verbose:
        print(f"csim: compiling {rendered.dir} ...", flush=True)
    try:
        from .progress import ticker
        with ticker(f"g++ {rendered.dir.parent.name}", show=progress):
            proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode != 0:
            log = lib.parent / "compile-error.log"
            log.write_text(" ".join(argv) + "\n\n" + proc.stderr)
            raise CompileError(argv, proc.stderr, rendered.dir / eng.KERNEL_SOURCES[0], log)
        _write_atomic(_checksum_path(lib), _sha256(Path(tmp)) + "\n")
        os.replace(tmp, lib)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    if verbose:
        print(f"csim: compiled {lib.name} in {time.time() - t0:.1f} s", flush=True)
    return lib


class CsimLibrary:
    """A loaded csim library: ``run(beats, regs_in, n_out_beats) -> (beats_out, regs_out)``."""

    def __init__(self, path: Path, n_regs_in: int, n_regs_out: int):
        self.path = Path(path)
        self._lib = ctypes.CDLL(str(self.path))
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

    def _read_counts(self):
        """The loop counters the last run left in the library (names are registered on first
        use and cached here, since they never change within a loaded library)."""
        if not self._has_counters:
            self.last_counts = None
            return
        n = int(self._lib.hlsnn_counter_count())
        while len(self._counter_names) < n:
            self._counter_names.append(self._lib.hlsnn_counter_name(len(self._counter_names)).decode())
        iters = np.zeros(max(n, 1), dtype=np.uint64)
        entries = np.zeros(max(n, 1), dtype=np.uint64)
        n = int(self._lib.hlsnn_counter_values(iters.ctypes.data, entries.ctypes.data, n))
        self.last_counts = {name: (int(i), int(e)) for name, i, e in
                            zip(self._counter_names[:n], iters.tolist(), entries.tolist()) if i}

    def _check_assert(self, status):
        """A kernel assert that failed in C-simulation: an error that names it (the process lives)."""
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
        status = self._lib.hlsnn_run(beats.ctypes.data, beats.shape[0], out.ctypes.data, n_out_beats,
                                     rin.ctypes.data, rout.ctypes.data)
        self._read_counts()
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
        status = self._lib.hlsnn_run_stream(beats.ctypes.data, beats.shape[0], out.ctypes.data, cap_beats,
                                            rin.ctypes.data, rout.ctypes.data, ctypes.byref(n_out), ctypes.byref(last))
        self._read_counts()
        self._check_assert(status)
        return out[:n_out.value], rout, (None if last.value < 0 else int(last.value)), int(status)
