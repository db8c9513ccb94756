import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BFP_TEST_CONFIGS = ROOT / "tests" / "engines" / "bfp_systolic" / "configs"


def pytest_configure(config):
    # Rendered projects and csim libraries of the test session go to one temporary folder
    # (shared by all tests, so each kernel compiles once per session), never to ./build.
    if "HLSNN_BUILD" not in os.environ:
        import tempfile
        os.environ["HLSNN_BUILD"] = tempfile.mkdtemp(prefix="hlsnn-test-build-")
    # The emulators' compiled helpers (hlsnn.native) likewise build into the session's folder.
    if "HLSNN_NATIVE_CACHE" not in os.environ:
        os.environ["HLSNN_NATIVE_CACHE"] = os.path.join(os.environ["HLSNN_BUILD"], "native")


@pytest.fixture(scope="session")
def root():
    return ROOT


def stable_seed(*key) -> int:
    """A seed from ``key`` that is the same in every process: ``hash()`` of a str (and, before
    Python 3.12, of None) changes from one interpreter to the next, which made seeded tests
    draw different cases on every run."""
    import zlib
    return zlib.crc32(repr(key).encode())


def stream_path(target):
    """Accelerator options that put the emu target on its stream path (``arrays=False``), the
    path whose calls the resident-weight tests count; none for other targets."""
    return {"arrays": False} if target == "emu" else {}


def record_calls(acc):
    """Wrap ``acc.target.run``: returns a list that gets (flags register, input beats) per call."""
    import numpy as np
    calls, run = [], acc.target.run

    def counted(beats, regs_in, n_out_beats):
        calls.append((int(regs_in[3]), np.asarray(beats).shape[0]))
        return run(beats, regs_in, n_out_beats)

    acc.target.run = counted
    return calls


def accel_config(name):
    return ROOT / "configs" / "accel" / f"{name}.yaml"


def test_config(name):
    return BFP_TEST_CONFIGS / f"{name}.yaml"


test_config.__test__ = False


def planted_csim(cfg, rendered, filename, old, new):
    """A csim target on a copy of the rendered kernel with one planted bug: ``old`` (which
    must occur exactly once in ``filename``) replaced by ``new``. For checks that a
    comparison can fail."""
    import hashlib
    from dataclasses import replace
    from hlsnn.engines import ENGINES
    from hlsnn.runtime.targets import CsimTarget
    src = rendered.dir / filename
    text = src.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {src}"
    src.write_text(text.replace(old, new))
    broken = replace(rendered, sha=hashlib.sha256(src.read_bytes()).hexdigest())
    return CsimTarget(cfg, ENGINES[cfg.engine], rendered=broken)


# Issue 30: the strict C-simulation (docs/strict-csim.md) stops bfp_systolic runs on hazards
# that are known and being fixed in the kernel (branch bfp-hw): a weight-store read one
# iteration after the loader's write, the running output-exponent state and the result store
# read back closer than the post pipeline allows. A test that fails with exactly such a
# StrictCsimError is reported as xfail (strict=False: once the kernel is fixed it passes);
# any other failure, strict or not, stays a failure.
KNOWN_BFP_HAZARDS = ("array 'wstore", "array 'run_lop", "array 'run_any", "array 'run_mag", "array 'ybuf")


_HAZARD = None


def _known_bfp_hazard(rep, excinfo):
    """The known-hazard message in the failure: in the exception chain (StrictCsimError), or in
    the failure text and captured output (a CLI run in process or a subprocess whose output the
    assertion shows)."""
    global _HAZARD
    import re
    if _HAZARD is None:
        _HAZARD = re.compile(r"strict C-simulation of libbfp_systolic_\w+\.so: ("
                             + "|".join(re.escape(h) for h in KNOWN_BFP_HAZARDS) + r")[^\n]*")
    texts = []
    exc, seen = (excinfo.value if excinfo is not None else None), set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts.append(str(exc))
        exc = exc.__cause__ or exc.__context__
    texts.append(str(rep.longrepr))
    texts.extend(content for _, content in rep.sections)
    for text in texts:
        m = _HAZARD.search(text)
        if m:
            return m.group(0)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and call.when == "call":
        why = _known_bfp_hazard(rep, call.excinfo)
        if why is not None:
            rep.outcome = "skipped"
            rep.wasxfail = ("issue 30: known bfp_systolic hazard under the strict C-simulation (fixed on branch "
                            "bfp-hw): " + why.split(".so: ", 1)[-1][:200])
