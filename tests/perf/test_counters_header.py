"""hls/include/hlsnn/counters.h: counters exist in C-simulation only; under __SYNTHESIS__ the
macros vanish and the table is not even declared."""
import shutil
import subprocess

import pytest

from conftest import ROOT

pytestmark = pytest.mark.csim
INCLUDE = ROOT / "hls" / "include"

USE = """#include "hlsnn/counters.h"
int Kernel(int n) {
  int s = 0;
Loop:
  for (int i = 0; i < n; ++i) {
    HLSNN_ITER(Loop, i == 0);
    s += i;
  }
  HLSNN_MARK(Region);
  return s;
}
"""


def _compile(tmp_path, text, *defines):
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not on PATH")
    src = tmp_path / "t.cpp"
    src.write_text(text)
    return subprocess.run([cxx, "-std=c++14", "-fsyntax-only", f"-I{INCLUDE}", *defines, str(src)],
                          capture_output=True, text=True)


def test_macros_compile_away_under_synthesis(tmp_path):
    assert _compile(tmp_path, USE, "-D__SYNTHESIS__").returncode == 0
    probe = USE + "int Probe() { return hlsnn::Counters().n; }\n"
    assert _compile(tmp_path, probe).returncode == 0                     # C-simulation: the table exists
    r = _compile(tmp_path, probe, "-D__SYNTHESIS__")
    assert r.returncode != 0 and "Counters" in r.stderr                   # synthesis: no table at all


LIB = """#include "hlsnn/counters.h"
template <int N>
inline void Tick() {
  HLSNN_ITER(Tick, true);
}
#pragma GCC visibility push(default)
extern "C" {
int Run(int mark) {
  if (mark) HLSNN_MARK(OnlyInA);
  Tick<1>();
  return 0;
}
int Count() { return hlsnn::Counters().n; }
const char *Name(int i) { return hlsnn::Counters().names[i]; }
unsigned long long Iters(int i) { return hlsnn::Counters().iters[i]; }
}
#pragma GCC visibility pop
"""


def _libraries(tmp_path, flags):
    import ctypes
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("g++ not on PATH")
    tmp_path.mkdir()
    (tmp_path / "lib.cpp").write_text(LIB)
    libs = []
    for name in ("a", "b"):
        so = tmp_path / f"lib{name}.so"
        subprocess.run([cxx, *flags, f"-I{INCLUDE}", str(tmp_path / "lib.cpp"), "-o", str(so)], check=True)
        lib = ctypes.CDLL(str(so))                       # RTLD_LOCAL, as csim.py loads kernels
        lib.Name.restype = ctypes.c_char_p
        lib.Iters.restype = ctypes.c_ulonglong
        libs.append(lib)
    a, b = libs
    a.Run(1)
    a.Run(1)                   # a: OnlyInA in slot 0, Tick in slot 1
    b.Run(0)                   # b: Tick only
    return ({a.Name(i).decode(): a.Iters(i) for i in range(a.Count())},
            {b.Name(i).decode(): b.Iters(i) for i in range(b.Count())})


def test_each_library_keeps_its_own_counter_table(tmp_path):
    """Two kernels in one process (the test suite, a sweep, a deploy over formats) count into
    their own tables: with g++'s default, the inline functions' statics (the table, the slot a
    call site caches) are STB_GNU_UNIQUE and shared process-wide, so b found a's table and
    a's cached slot (shift8_zcu104's LineTail was counted under sparse's DataUnit5)."""
    from hlsnn.csim import CXX_FLAGS
    flags = [f for f in CXX_FLAGS if not f.startswith("-Wl,--wrap")]
    assert _libraries(tmp_path / "ok", flags) == ({"OnlyInA": 2, "Tick": 2}, {"Tick": 1})
    # the check can fail: without -fvisibility=hidden the tables are one
    shared = [f for f in flags if f != "-fvisibility=hidden"]
    assert _libraries(tmp_path / "shared", shared)[1] != {"Tick": 1}
