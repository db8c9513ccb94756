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
