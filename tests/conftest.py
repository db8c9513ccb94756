import contextlib
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BFP_TEST_CONFIGS = ROOT / "tests" / "engines" / "bfp_systolic" / "configs"


# The build folder this process made for the run (None when $HLSNN_BUILD was given, or in an xdist
# worker, which inherits the controller's). Removed after a run that passed (up to ~100 MB a quick
# run, in /tmp); kept after a failure, for its compile-error.log and rendered sources, and with
# HLSNN_KEEP_BUILD=1.
_CREATED_BUILD = None


def pytest_configure(config):
    # Rendered projects and csim libraries of the test session go to one temporary folder
    # (shared by all tests, so each kernel compiles once per session), never to ./build.
    global _CREATED_BUILD
    if "HLSNN_BUILD" not in os.environ:
        import tempfile
        os.environ["HLSNN_BUILD"] = _CREATED_BUILD = tempfile.mkdtemp(prefix="hlsnn-test-build-")
    # The suite compiles about 25 kernels: at -O1 (same bits, a quarter less g++ time than the
    # users' -O2, which the wheel check, the README's quick start and HLSNN_CSIM_OPT=-O2 run).
    os.environ.setdefault("HLSNN_CSIM_OPT", "-O1")
    # The test run's C-simulation library is the fast one (plain, sequential: the strict one,
    # hlsnn/strict.h, costs 20-40 % more g++ time and more run time); the strict rules are
    # checked by the tests marked ``strict_csim`` (one config per engine in the quick suite,
    # every config and every planted hazard in the slow one: tests/strict/). HLSNN_CSIM_FAST=0
    # in the environment runs every test on the strict library instead.
    os.environ.setdefault("HLSNN_CSIM_FAST", "1")
    from hlsnn import csim
    csim.set_strict_default(os.environ["HLSNN_CSIM_FAST"] in ("", "0"))
    # The emulators' compiled helpers (hlsnn.native) likewise build into the session's folder.
    if "HLSNN_NATIVE_CACHE" not in os.environ:
        os.environ["HLSNN_NATIVE_CACHE"] = os.path.join(os.environ["HLSNN_BUILD"], "native")
    # pynq 3.0-4.0 import pkg_resources, which setuptools >= 81 no longer ships: hlsnn puts its
    # stand-in in place before it imports pynq (hlsnn.runtime.pynq_compat); tests that import
    # pynq themselves (test_notebook's importorskip, test_simdevice) need it first too, or a
    # failed import leaves a half-initialized pynq behind for the next test module.
    from hlsnn.runtime.pynq_compat import ensure_pkg_resources
    ensure_pkg_resources()


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """Python's cyclic garbage collector, off while the tests are collected, then run once and
    the survivors frozen (:func:`gc.freeze`): collecting imports torch, onnx, scipy, sklearn and
    all of hlsnn (``--doctest-modules``), about half a million objects that live as long as the
    worker, and every full collection walked all of them again (25 full collections, ~3.5 of
    the ~10 CPU-s a worker spends collecting; more during the tests). Frozen objects are only
    skipped by the collector: garbage made later is collected as before, and what collecting
    left as garbage is collected here before the freeze."""
    import gc
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The same after a module's last test (its module fixtures torn down): one collection, then
    what survives (session fixtures, caches, modules the tests imported) is frozen, so later full
    collections no longer walk it (a whole run's workers ended with 600,000+ such objects and spent
    11-14 CPU-s each in full collections; on 883 tests of 13 modules 51 -> 48 CPU-s, the same RSS)."""
    yield
    if nextitem is None or getattr(nextitem, "path", None) != getattr(item, "path", None):   # doctests too
        import gc
        gc.collect()
        gc.freeze()


class _StrictCsim:
    """While active: the strict C-simulation library is this process's default, and
    ``HLSNN_CSIM_FAST=0`` tells the subprocesses a test starts (the CLI) the same."""

    def __enter__(self):
        from hlsnn import csim
        self.was = csim.strict_default(), os.environ.get("HLSNN_CSIM_FAST")
        csim.set_strict_default(True)
        os.environ["HLSNN_CSIM_FAST"] = "0"

    def __exit__(self, *exc):
        from hlsnn import csim
        csim.set_strict_default(self.was[0])
        if self.was[1] is None:
            os.environ.pop("HLSNN_CSIM_FAST", None)
        else:
            os.environ["HLSNN_CSIM_FAST"] = self.was[1]


@pytest.fixture(autouse=True, scope="module")
def _strict_csim_module(request):
    """A module marked ``strict_csim`` (``pytestmark``) gets the strict library from its first
    fixture on, module-scoped ones included (they are set up before function-scoped fixtures)."""
    if request.node.get_closest_marker("strict_csim") is None:
        yield
        return
    with _StrictCsim():
        yield


@pytest.fixture(autouse=True, scope="module")
def _synthetic_nets_past_the_fit_budget(request):
    """``hlsnn.network.build.compile_model`` (:func:`hlsnn.network.fit.check_network`) refuses a network kernel over 90% of its board. The suite's
    synthetic nets (a pool of every kind, branches, gates, ...) are there to hold a kernel to the layer
    path's bits, not to a board, and a few are over the PYNQ-Z2's budget: in-process compiles take
    ``allow_overfit`` here, except in a module marked ``fit_budget`` (the refusal's own tests and every
    shipped model's assignments; subprocesses, the README's and the docs' commands, always meet the budget)."""
    if request.node.get_closest_marker("fit_budget") is not None:
        yield
        return
    from hlsnn.network import fit
    real = fit.check_network
    fit.check_network = lambda *a, **kw: real(*a, **{**kw, "allow_overfit": True})
    try:
        yield
    finally:
        fit.check_network = real


@pytest.fixture(autouse=True)
def _strict_csim(request):
    """A test marked ``strict_csim`` runs on the strict C-simulation library (the suite's
    default is the fast one: :func:`pytest_configure`)."""
    if request.node.get_closest_marker("strict_csim") is None:
        yield
        return
    with _StrictCsim():
        yield


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


def checked_raw(report):
    """A strict C-simulation report's checked read-after-write distances ``{array: required}``
    (``HLSNN_MEM`` with a distance), after checking that no read came within its array's
    distance of its write (the run would have stopped; this says which arrays are checked)."""
    raw = report["raw"]
    assert all(r["min_distance"] is None or r["min_distance"] >= r["required"] for r in raw), raw
    return {r["array"]: r["required"] for r in raw}


def planted_csim(cfg, rendered, filename, old, new):
    """A csim target on a copy of the rendered kernel with one planted bug: ``old`` (which
    must occur exactly once in ``filename``) replaced by ``new``. For checks that a
    comparison can fail."""
    from hlsnn.codegen import reread
    from hlsnn.engines import ENGINES
    from hlsnn.runtime.targets import CsimTarget
    src = rendered.dir / filename
    text = src.read_text()
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {src}"
    src.write_text(text.replace(old, new))
    broken = reread(rendered)
    return CsimTarget(cfg, ENGINES[cfg.engine], rendered=broken)




def slow_cases(names, slow):
    """``names`` as parameters, those in ``slow`` marked ``slow`` (CI runs them: .ci/run): for a
    check repeated on near-identical cases (the same model from another exporter), the quick
    suite keeps the others. Names not in ``slow`` (new ones too) stay quick."""
    missing = set(slow) - set(names)
    assert not missing, f"slow_cases: {sorted(missing)} are not among the parameters"
    return [pytest.param(n, marks=pytest.mark.slow) if n in slow else n for n in names]


#: a C helper of one function, for the tests of the native helpers' cache (fixture ``probe``)
PROBE = "int hlsnn_probe(int a) { return 3 * a + 1; }\n"


@pytest.fixture
def probe(tmp_path, monkeypatch):
    """A helper source folder holding ``probe.c`` (:data:`PROBE`) in place of hlsnn's own, with
    a cache of its own: hlsnn.native builds and loads it like a shipped helper."""
    from hlsnn import native
    src = tmp_path / "src"
    src.mkdir()
    (src / "probe.c").write_text(PROBE)
    monkeypatch.setattr(native, "SOURCE_DIR", src)
    monkeypatch.setenv("HLSNN_NATIVE_CACHE", str(tmp_path / "cache"))
    native.forget()
    yield src
    native.forget()


#: Test configs that exist for one feature each (GEMV, packing, truncation, wide words,
#: statistics, unsigned activations, U = 2, one unit) and the larger shipped configs whose
#: engine a smaller config already compiles in the quick suite. Their C-simulation cases run in
#: the slow suite (CI runs it): each is a library of its own, 10-25 CPU-seconds of g++ for a
#: few calls, and the quick suite is bounded by compiles. Their emulator cases stay quick; every
#: feature keeps one quick csim case through the configs left out of this set (t2_tiny,
#: bfp16_pynq-z2 and bfp8_zcu104 with GEMV mode, t8_packed_gemv with packing, s_tiny,
#: shift8_pynq-z2, sp_small, sparse8_pynq-z2).
SLOW_CSIM_CONFIGS = ("t16_gemv", "t8_gemv_tensor", "t8_packed]", "t8_packed-", "t7_packed_e1", "t16_row",
                     "t4_truncate", "t9_wide", "t16_stats", "s_wide", "s_unsigned", "sp_u2", "sp_one",
                     "bfp12_ultra96v2", "bfp8_ultra96v2", "bfp8_pynq-z2", "shift8_zcu104", "sparse20_zcu104",
                     "shift10_pynq-z2")


def _runs_csim(item):
    name = item.nodeid.split("::", 1)[-1]
    params = name.partition("[")[2]
    if item.get_closest_marker("csim") is not None:
        return "emu" not in params.replace("emulator", "").split("-")
    return "csim" in params.split("-") or "sim" in params.split("-") or "csim" in name.partition("[")[0]


#: Model-family files whose every pattern is tested on both exports: the torch.export (dynamo)
#: case is slow (CI's slow stage runs it; each dynamo export costs 1-5 CPU-s), the TorchScript
#: case of the same test stays quick. Their csim and refusal cases follow the same split.
SLOW_DYNAMO_FILES = ("test_torch_fifth.py", "test_network_maxlate.py", "test_repeat_upsample.py",
                     "test_pixel_unshuffle.py", "test_residual_sub.py", "test_torch_fourth.py",
                     "test_torch_variants.py", "test_torch_beyond.py", "test_torch_fresh.py")


@contextlib.contextmanager
def first_pair():
    """While active, a shift format's ``radix: auto`` / ``weight_fit: auto`` (hlsnn.deploy.quantize.shift_auto)
    tries only its first candidate pair (the likeliest choice) instead of every pair: one
    calibration and one scoring run per deployment instead of four or five. For the tests whose
    subject is another rule (the network path's bits, a target's bits), not the choice or a
    default's accuracy: the choice keeps its own tests (tests/deploy/test_shift_auto.py,
    test_netcal.py's shipped models, test_shift_fit.py ...) and the defaults' accuracy theirs
    (test_deploy.py, test_torch_*.py, test_qimport.py)."""
    from hlsnn.deploy.quantize import shift_auto
    candidates = shift_auto.candidates
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(shift_auto, "candidates", lambda formats: candidates(formats)[:1])
        yield


#: Network-path modules (the network program's and kernel's bits against the layer path's) whose
#: two-hot deployments take :func:`first_pair`: the pair's choice is not their subject.
#: (Not test_network_catinput.py: its refusal of a skip at another radix needs the radix the
#: choice gives.)
FIRST_PAIR_FILES = ("test_network_tables2.py", "test_network_mean_any.py", "test_network_mulmap.py",
                    "test_network_act10.py", "test_network_bfp.py", "test_network_branches.py",
                    "test_network_branches2.py", "test_network_cbam.py",
                    "test_network_cornerresize.py", "test_network_depthwise.py", "test_network_dilation.py",
                    "test_network_gate.py", "test_network_gatepool.py", "test_network_glu.py",
                    "test_network_kernel.py", "test_network_linpool.py", "test_network_maxlate.py",
                    "test_network_move.py", "test_network_overlay.py", "test_network_pad.py",
                    "test_network_pick.py", "test_network_pool_gate.py", "test_network_prefix.py",
                    "test_network_skips.py", "test_network_tablein.py", "test_network_tc_a.py",
                    "test_network_transpose.py", "test_network_uncounted.py", "test_network_views_after.py")


@pytest.fixture(autouse=True, scope="module")
def _first_pair_module(request):
    """:func:`first_pair` for the modules of :data:`FIRST_PAIR_FILES`, from their first
    module-scoped fixture on (autouse fixtures are set up before the others of their scope)."""
    if request.node.path.name not in FIRST_PAIR_FILES:
        yield
        return
    with first_pair():
        yield


#: Cases of a parametrized test whose other cases stay quick and check the same rule (another
#: model of a family, another format's kernel of a network rule that lowers to ops every engine
#: has, another board of the same fit): slow, so CI's slow stage runs them. Chosen by their CPU
#: cost in a cold quick run (session 26: 573 CPU-s, 4:57 on two idle cores); the cheapest case
#: of each test stays quick. Keys are ``file::test``, values the parameter ids moved.
SLOW_REPEAT_CASES = {
    "test_torch_variants.py::test_variant_classifier_within_one_point_in_every_format": ("v_tc_a_ts17", "v_enc_cls_ts17"),
    "test_torch_variants.py::test_variant_unet_within_three_percent": ("v_unet_mix_ts17", "v_unet_ct3_ts17"),
    "test_torch_fresh.py::test_fresh_classifiers_within_one_point_in_bfp8_and_two_hot": ("v_f_mbv3_dl_ts17",),
    "test_torch_beyond.py::test_classifier_deploys_within_one_point_in_every_format": ("kws1d_ts17", "tcresnet_ts17"),
    "test_torch_exports.py::test_bfp8_and_twohot_within_one_point_of_float": ("lenet_ts17", "strided_ts13_nofold",
                                                                            "mlp_dynamo", "skl_mlp_zipmap"),
    "test_network_bfp.py::test_network_kernel_one_start_bit_exact": ("resnet8_digits32-bfp16-2",),
    "test_network_transpose.py::test_network_kernel_transpose_is_bit_exact_on_csim_in_one_start": ("bfp8", "twohot",
                                                                                                "sized"),
    "test_network_branches.py::test_the_branches_pass_the_strict_csim_in_one_start": ("bfp8", "twohot"),
    "test_strict_bit_exact.py::test_strict_csim_equals_the_emulator": ("sp_small",),
    "test_netcal.py::test_shipped_models_calibrate_as_the_layer_path": ("mobilenet_relu6_ts17.yaml", "dscnn_dynamo.yaml"),
    "test_qimport.py::test_other_scales_are_approximated_within_one_point": ("mlp_u8", "cnn_pc", "res_pc"),
    "test_network_mean_any.py::test_network_kernel_csim_has_the_layer_paths_bits_in_one_start": ("res7-twohot",),
    "test_network_pad.py::test_reflect_and_edge_pads_in_one_start_on_csim_and_the_board": ("bfp8", "twohot"),
    "test_network_move.py::test_network_kernel_moves_are_bit_exact_on_csim_in_one_start": ("upsample-twohot",
                                                                                        "zerostuff-twohot",
                                                                                        "zerostuff-sized"),
    "test_network_sized.py::test_resnet8_within_each_board": ("kv260", "aup-zu3"),
    "test_network_tablein.py::test_fresh_family_models_run_in_one_start_with_the_layer_paths_bits": (
        "v_f_mbv3_dl_ts17", "v_f_mbv3_dl_dynamo"),
    # session 28 (hquick): the same rule on another draw (seed 0 stays quick; 7 and 8 were slow already)
    "test_radix_search.py::test_layer_path_search_keeps_the_radix_points_static": ("1",),
}


def _heavy_ids():
    """The node ids of ``tests/heavy.txt`` (``scripts/suite_tiers.py``): the quick tests that cost
    the most CPU in a cold profiled run, which the README's five-minute check leaves to CI."""
    path = ROOT / "tests" / "heavy.txt"
    if not path.exists():
        return frozenset()
    return frozenset(line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#"))


#: :func:`_heavy_ids`, read once
HEAVY = _heavy_ids()


def _stale_heavy(config, items):
    """The ids of ``tests/heavy.txt`` whose file this session collected but not the id itself (a test
    renamed, or a documentation block whose line moved: ``test_readme``'s ids carry the line), which
    would otherwise run in the five-minute check unnoticed; None where the session was asked for
    single tests (an argument with ``::``), so that not every id of a file was collected."""
    if any("::" in str(a) for a in config.args):
        return None
    ids = {item.nodeid for item in items}
    files = {n.split("::", 1)[0] for n in ids}
    return sorted(h for h in HEAVY if h.split("::", 1)[0] in files and h not in ids)


def pytest_collection_modifyitems(config, items):
    config.hlsnn_stale_heavy = _stale_heavy(config, items)       # tests/test_suite_tiers.py reads it
    for item in items:
        if item.nodeid in HEAVY:
            item.add_marker(pytest.mark.heavy)
        head, _, params = item.nodeid.rsplit("/", 1)[-1].partition("[")
        if params.rstrip("]") in SLOW_REPEAT_CASES.get(head, ()) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
            item.user_properties.append(("slow_reason", "a repeat of a quick case's rule (SLOW_REPEAT_CASES)"))
            continue
        params = item.nodeid.partition("[")[2]
        if item.nodeid.split("::", 1)[0].rsplit("/", 1)[-1] in SLOW_DYNAMO_FILES \
                and any(p == "dynamo" or p.endswith("_dynamo") for p in params.rstrip("]").split("-")) \
                and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
            item.user_properties.append(("slow_reason", "the dynamo export of a family file (SLOW_DYNAMO_FILES)"))
            continue
        if params and any(c in "[" + params if c.endswith(("]", "-")) else c in params for c in SLOW_CSIM_CONFIGS) \
                and _runs_csim(item) and item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.slow)
            item.user_properties.append(("slow_reason", "csim of a feature config (SLOW_CSIM_CONFIGS)"))
    for item in items:
        # a RuntimeWarning (an overflow, an inf cast to an integer, a NaN compared) fails a quick test: such a
        # value must be an error of hlsnn's or not happen, never a warning in the log (the README's check)
        if item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.filterwarnings("error::RuntimeWarning"))


@pytest.hookimpl(optionalhook=True)         # an xdist hook: no error where xdist is not installed
def pytest_xdist_make_scheduler(config, log):
    """``-n`` (the README's ``-n auto``): the tests of one module go to one worker (xdist's
    ``loadscope``) instead of one by one, so a module-scoped fixture (a compiled model, a
    calibrated deployment, a csim target) is set up once a run rather than once a worker.
    An explicit ``--dist`` other than ``load`` is left alone; without xdist (CI's pynq 3 venv)
    pytest does not call it (``optionalhook``)."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling
    return LoadScopeScheduling(config, log)


def pytest_sessionfinish(session, exitstatus):
    # Only the process that made the folder removes it (the controller, after its workers ended).
    if _CREATED_BUILD is None or hasattr(session.config, "workerinput"):
        return
    if exitstatus in (0, 5) and os.environ.get("HLSNN_KEEP_BUILD", "") in ("", "0"):
        import shutil
        shutil.rmtree(_CREATED_BUILD, ignore_errors=True)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if _CREATED_BUILD is not None and os.path.isdir(_CREATED_BUILD):
        terminalreporter.write_line(f"hlsnn: the run's build folder is kept: {_CREATED_BUILD}")
