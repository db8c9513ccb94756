"""A kernel `assert` that fails in C-simulation becomes a CsimError naming it; the Python process
survives (before, glibc's __assert_fail aborted it with SIGABRT), and the library keeps working."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

pytestmark = pytest.mark.csim

CODE = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import numpy as np
    import hlsnn
    from conftest import planted_csim, test_config
    from hlsnn import codegen
    from hlsnn.engines.bfp_systolic.kernel import Kernel
    from hlsnn.errors import CsimError
    from pathlib import Path
    cfg = hlsnn.load_config(test_config("t2_tiny"))
    rendered = codegen.render(cfg, Path({out!r}))
    target = planted_csim(cfg, rendered, "bfp_systolic.cpp", 'assert(batch >= 1 && "batch must be >= 1");',
                          'assert((batch < 2 || batch > 1000) && "planted: batch of 2 to 1000");')
    k = Kernel(cfg, target)
    x, w = np.ones((2, 4)), np.ones((3, 4))     # one call of 2 samples (t2_tiny's stores hold 2)
    try:
        k.gemm(x, w)
    except CsimError as exc:
        print("CAUGHT", exc)
    y = k.gemm(np.ones((1, 4)), w)          # the same library, a call that passes the check
    print("AFTER", y.tolist())
""")


@pytest.mark.parametrize("mode", [
    # the fast library's copy is slow-only (its own -O1 compile, ~12 CPU-s): the assert trap is
    # the same bridge code in both, and the strict copy (asserts inside the DATAFLOW threads)
    # is the harder case, kept in the quick suite
    pytest.param("fast", marks=pytest.mark.slow),
    "strict",
])
def test_failed_kernel_assert_is_an_error_and_the_process_survives(tmp_path, mode):
    code = CODE.format(tests=str(ROOT / "tests"), out=str(tmp_path / "hls"))
    env = {"PYTHONPATH": str(ROOT / "host"), "PATH": "/usr/bin:/bin", "HLSNN_BUILD": str(tmp_path / "build"),
           "HLSNN_CSIM_OPT": os.environ.get("HLSNN_CSIM_OPT", "-O2")}     # the session's level (conftest.py)
    if mode == "fast":
        env["HLSNN_CSIM_FAST"] = "1"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       cwd=ROOT, env=env)
    assert r.returncode == 0, (r.returncode, r.stderr[-2000:])     # -6 would be SIGABRT
    assert "CAUGHT" in r.stdout and "planted: batch of 2 to 1000" in r.stdout and "bfp_systolic.cpp" in r.stdout
    assert "AFTER [[4.0, 4.0, 4.0]]" in r.stdout
