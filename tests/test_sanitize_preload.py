"""The sanitizer run (``.ci/sanitize``) and C++ exceptions of the libraries Python loads (issue 84).

Under ``LD_PRELOAD=libasan.so`` alone, onnx's first C++ exception (its checker on a bad model)
aborted the interpreter: ``AddressSanitizer: CHECK failed ... real___cxa_throw`` (ASan's
``__cxa_throw`` interceptor found no libstdc++ when it resolved the real one). ``.ci/sanitize``
now preloads libstdc++ after libasan, both found with the compilers' ``-print-file-name``.

``test_onnx_throws_and_is_caught`` runs inside the sanitizer run (it is the first file of its
quick selection): with the old preload that process aborts and the run fails. The other test
shows the two preloads in child interpreters, so an ordinary run checks the script too."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / ".ci" / "sanitize"

#: a model onnx's checker refuses by throwing a C++ exception (turned into ValidationError)
BAD_MODEL = """
import onnx
from onnx import TensorProto, helper
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
m = helper.make_model(helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "g", [x], [y]))
try:
    onnx.checker.check_model(m, full_check=True)
except onnx.checker.ValidationError as exc:
    print("refused:", str(exc).splitlines()[0])
"""


def test_onnx_throws_and_is_caught():
    """In this process (under ``.ci/sanitize``: its preload): onnx's checker throws in C++ and
    the exception reaches Python as a ValidationError."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    m = helper.make_model(helper.make_graph([helper.make_node("NoSuchOp", ["x"], ["y"])], "g", [x], [y]))
    with pytest.raises(onnx.checker.ValidationError, match="No Op registered for NoSuchOp"):
        onnx.checker.check_model(m, full_check=True)


def _print_file_name(compiler, lib):
    exe = shutil.which(compiler)
    if exe is None:
        return None
    p = subprocess.run([exe, f"-print-file-name={lib}"], capture_output=True, text=True).stdout.strip()
    return p if os.path.isabs(p) and os.path.exists(p) else None


def _child(preload):
    env = dict(os.environ, LD_PRELOAD=preload, ASAN_OPTIONS="detect_leaks=0")
    return subprocess.run([sys.executable, "-c", BAD_MODEL], capture_output=True, text=True, env=env, timeout=300)


def test_the_sanitize_script_preloads_libstdcxx_after_libasan():
    """The script's preload is libasan then libstdc++, each from ``-print-file-name``; with it
    onnx's exception reaches Python, with libasan alone the child aborts (the bug)."""
    pytest.importorskip("onnx")
    text = SCRIPT.read_text()
    assert '-print-file-name=libasan.so' in text and '-print-file-name=libstdc++.so' in text
    assert 'PRELOAD="$ASAN_LIB $STDCXX_LIB"' in text and 'LD_PRELOAD="$PRELOAD" python -m pytest' in text
    assert "tests/test_sanitize_preload.py" in text
    asan = _print_file_name(os.environ.get("CC", "cc"), "libasan.so")
    stdcxx = _print_file_name(os.environ.get("CXX", "g++"), "libstdc++.so")
    if asan is None or stdcxx is None:
        pytest.skip("no libasan or libstdc++.so from the compilers")
    good = _child(f"{asan} {stdcxx}")
    assert good.returncode == 0 and good.stdout.startswith("refused: No Op registered"), good.stderr[-2000:]
    bad = _child(asan)
    assert bad.returncode != 0 and "real___cxa_throw" in bad.stderr, bad.stderr[-2000:]
