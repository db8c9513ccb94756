"""hlsnn.runtime.pynq_compat: pynq imports where setuptools no longer ships pkg_resources
(setuptools >= 81), and the stand-in offers what pynq uses. `.ci/wheel` runs the simulated board
with the newest setuptools for real; these tests hide pkg_resources in a subprocess."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import ROOT

pytest.importorskip("pynq")

# A meta-path finder that makes `import pkg_resources` fail, as on setuptools >= 81.
HIDE = textwrap.dedent("""
    import sys
    class _NoPkgResources:
        def find_spec(self, name, path=None, target=None):
            if name == "pkg_resources" or name.startswith("pkg_resources."):
                raise ModuleNotFoundError("No module named 'pkg_resources'", name=name)
            return None
    sys.meta_path.insert(0, _NoPkgResources())
""")


def _run(code):
    return subprocess.run([sys.executable, "-c", HIDE + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120,
                          env={"PYTHONPATH": str(ROOT / "host"), "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                               # the session's build folder and csim flags (tests/conftest.py): the
                               # library the other tests compiled, not a private -O2 build of it
                               **{k: v for k, v in os.environ.items() if k.startswith("HLSNN_")}})


def test_pynq_itself_fails_without_pkg_resources():
    # the failure the stand-in exists for: without it, `import pynq` dies (pynqutils imports it)
    r = _run("import pynq")
    assert r.returncode != 0 and "pkg_resources" in r.stderr


def test_simulated_board_runs_with_the_stand_in():
    r = _run("""
        import numpy as np
        import hlsnn
        acc = hlsnn.Accelerator("configs/accel/bfp16_pynq-z2.yaml", "sim")
        x, w = np.random.default_rng(0).normal(size=(3, 16)), np.random.default_rng(1).normal(size=(8, 16))
        y = acc.gemm(x, w)
        ref = acc.emulator().gemm(x, w)
        assert np.array_equal(y, ref)
        print("STAND_IN", sys.modules["pkg_resources"].HLSNN_STAND_IN)
    """)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "STAND_IN True" in r.stdout


def test_stand_in_offers_what_pynq_uses():
    from hlsnn.runtime import pynq_compat
    mod = pynq_compat._stand_in()
    scripts = [ep.name for ep in mod.iter_entry_points("console_scripts")]
    assert "hlsnn" in scripts                                             # our own entry point
    assert [ep.name for ep in mod.iter_entry_points("console_scripts", "hlsnn")] == ["hlsnn"]
    assert (ROOT / "host" / "hlsnn" / "paths.py").samefile(mod.resource_filename("hlsnn", "paths.py"))
    assert mod.cleanup_resources(force=True) == []
    provider = mod.NullProvider(pynq_compat)
    assert provider.module_path.endswith("runtime")


def test_real_pkg_resources_is_left_alone():
    real = pytest.importorskip("pkg_resources")
    if getattr(real, "HLSNN_STAND_IN", False):      # tests/conftest.py put the stand-in in place
        pytest.skip("setuptools >= 81: no real pkg_resources here")
    from hlsnn.runtime import pynq_compat
    assert pynq_compat.ensure_pkg_resources() is False
    assert not getattr(sys.modules["pkg_resources"], "HLSNN_STAND_IN", False)
