"""The C-simulation cache is verified: a damaged cached library (truncated, zeroed in the middle,
empty, garbage) or one without its manifest is rebuilt with a one-line notice instead of crashing the process (SIGBUS,
SIGSEGV) or failing with "invalid ELF header"; two processes compiling the same kernel at once
both end with a good library."""
import json
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, test_config

pytestmark = [pytest.mark.csim, pytest.mark.slow]


def _render(tmp_path):
    from hlsnn import codegen
    from hlsnn.config import load_config
    cfg = load_config(test_config("t2_tiny"))
    return cfg, codegen.render(cfg, tmp_path / "t2" / "hls")


def _gemm_ok(cfg, rendered):
    from hlsnn.engines import ENGINES
    from hlsnn.engines.bfp_systolic.kernel import Kernel
    from hlsnn.runtime.targets import CsimTarget, EmuTarget
    x, w = np.random.default_rng(1).normal(size=(3, 8)), np.random.default_rng(2).normal(size=(5, 8))
    got = Kernel(cfg, CsimTarget(cfg, ENGINES[cfg.engine], rendered=rendered)).gemm(x, w)
    want = Kernel(cfg, EmuTarget(cfg, ENGINES[cfg.engine])).gemm(x, w)
    np.testing.assert_array_equal(got, want)


DAMAGE = {
    "truncated": lambda b: b[:len(b) // 3],
    "zeroed in the middle": lambda b: b[:len(b) // 3] + bytes(len(b) // 3) + b[2 * (len(b) // 3):],
    "empty": lambda b: b"",
    "garbage": lambda b: b"\x7fELF not really" * 64,
}


def test_damaged_cache_entries_are_rebuilt(tmp_path, capfd):
    from hlsnn import csim
    cfg, rendered = _render(tmp_path)
    lib = csim.compile_library(rendered)
    good = lib.read_bytes()
    assert json.loads((lib.parent / (lib.name + ".json")).read_text())["sha256"]
    for what, damage in DAMAGE.items():
        lib.write_bytes(damage(good))
        capfd.readouterr()
        assert csim.compile_library(rendered) == lib
        err = capfd.readouterr().err
        assert "does not match its manifest" in err and "rebuilding" in err, what
        assert lib.read_bytes() != damage(good), what
    _gemm_ok(cfg, rendered)                                   # the rebuilt library runs, bit-exact
    capfd.readouterr()
    csim.compile_library(rendered)
    assert "manifest" not in capfd.readouterr().err           # a good entry is reused silently


def test_missing_manifest_means_rebuild(tmp_path, capfd):
    from hlsnn import csim
    _, rendered = _render(tmp_path)
    lib = csim.compile_library(rendered)
    (lib.parent / (lib.name + ".json")).unlink()
    csim.compile_library(rendered)
    assert "rebuilding" in capfd.readouterr().err
    assert (lib.parent / (lib.name + ".json")).is_file()


def test_two_processes_compile_the_same_kernel(tmp_path):
    _, rendered = _render(tmp_path)
    code = ("import sys; sys.path.insert(0, %r); from pathlib import Path; from hlsnn import codegen, csim; "
            "from hlsnn.config import load_config; cfg = load_config(%r); "
            "r = codegen.render(cfg, Path(%r)); print(csim.compile_library(r))"
            % (str(ROOT / "host"), str(test_config("t2_tiny")), str(rendered.dir)))
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-1500:] for o in outs]
    from hlsnn import csim
    lib = csim.library_path(rendered)
    assert {o[0].strip() for o in outs} == {str(lib)}
    from hlsnn import cachefile
    assert cachefile.entry_ok(lib, csim._built_from(rendered, (), rendered.sha))
    assert not [p for p in lib.parent.iterdir() if p.name.startswith(".")]   # no temporary left behind
