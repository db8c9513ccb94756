"""The generated C++ against the ``ap_axi_sdata.h`` of each Vitis HLS release, and the
``__SYNTHESIS__`` rule.

* ``tests/header_models/`` holds two models of ``ap_axi_sdata.h`` (2020.2-2022.2 and 2023.1+),
  written from UG1399 and the released headers' documented behaviour (provenance in each file).
  Every shipped config's kernel (and a test config's dsp_packing), C ABI bridge and testbench
  must compile against both and against the fallback of ``hls/include/hlsnn/axis.h``; one config per engine is also built
  through the normal csim path under each model and must stay bit-exact with the emulator.
* The side-channel writes that broke 2023.1 (``beat.user = 0``) are planted back to show the
  2023 model (and the fallback) refuse them while the 2022 model accepts them, as the real
  releases do.
* Code only C-simulation sees follows the rule in ``tests/synthesis_guards.py``, and the kernel
  with every sim-only block stripped gives the same outputs as the emulator.

All compiles of this module run two at a time (the machine has 2 cores).
"""
import hashlib
import os
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import hlsnn
from hlsnn import codegen, csim
from hlsnn.compare import compare
from hlsnn.engines import ENGINES
from hlsnn.runtime.targets import CsimTarget

import synthesis_guards as guards
from conftest import ROOT

pytestmark = [pytest.mark.csim, pytest.mark.slow]   # every shipped config under every header model: minutes

MODELS_DIR = ROOT / "tests" / "header_models"
MODELS = {"vitis2022": MODELS_DIR / "vitis_hls_2020.2_to_2022.2",
          "vitis2023": MODELS_DIR / "vitis_hls_2023.1_and_later"}
TARGETS = ("fallback",) + tuple(MODELS)       # fallback: the open-source ap_types, no ap_axi_sdata.h
SHIPPED = sorted((ROOT / "configs" / "accel").glob("*.yaml")) + [
    # and the code only a test config renders: bfp_systolic's dsp_packing (with GEMV mode)
    ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t8_packed_gemv.yaml"]
RUN_CONFIGS = {  # the smallest config of each engine: built and run under each model
    "bfp_systolic": ROOT / "tests" / "engines" / "bfp_systolic" / "configs" / "t2_tiny.yaml",
    "shift_mac": ROOT / "tests" / "engines" / "shift_mac" / "configs" / "s_tiny.yaml",
    "sparse_cluster": ROOT / "tests" / "engines" / "sparse_cluster" / "configs" / "sp_one.yaml",
}
HARNESS_FILES = {"bridge.cpp", "tb.cpp", "hlsnn_harness.h"}   # never synthesized: not stripped
SYNTAX = ("-std=c++14", "-fsyntax-only", "-Wall", "-Wno-unknown-pragmas", "-Wno-unused-label",
          "-Wno-unused-variable", "-Wno-unused-but-set-variable")
JOBS = max(1, min(2, os.cpu_count() or 1))

# The beat of Emit before the fix (issue 12): what 2023.1 refuses.
OLD_EMIT = """AxisWord<W> beat;
    beat.data = word;
    beat.keep = -1;
    beat.strb = -1;
    beat.user = 0;
    beat.id = 0;
    beat.dest = 0;
    beat.last = last;
    s.write(beat);"""
NEW_EMIT = "s.write(MakeBeat<W>(word, last));"


def include_dirs(target):
    return [MODELS[target]] if target in MODELS else []


def syntax_check(rendered_dir: Path, target: str, sources, include=None):
    """``g++ -fsyntax-only`` of one translation unit that includes ``sources`` (templates are
    instantiated, so every beat the kernel writes is checked)."""
    tu = rendered_dir / f"syntax_{target}.cpp"
    tu.write_text("".join(f'#include "{s}"\n' for s in sources))
    inc = Path(include) if include else rendered_dir / "include"
    argv = [csim.compiler(), *SYNTAX, *[f"-I{d}" for d in include_dirs(target)], f"-I{inc}",
            f"-I{rendered_dir}", f"-isystem{csim.ap_types_dir()}", str(tu)]
    return subprocess.run(argv, capture_output=True, text=True)


def pool_map(fn, items):
    with ThreadPoolExecutor(JOBS) as pool:
        return dict(zip(items, pool.map(fn, items)))


def copy_rendered(rendered, dest: Path, edit=None):
    """A copy of a rendered project whose files are passed through ``edit(name, text)``,
    with the content hash recomputed (the csim cache key)."""
    shutil.copytree(rendered.dir, dest)
    digest = hashlib.sha256()
    for f in sorted(rendered.files):
        path = dest / f
        if edit is not None and path.suffix in (".h", ".cpp"):
            path.write_text(edit(f, path.read_text()))
        digest.update(f.encode() + b"\0" + path.read_bytes() + b"\0")
    return codegen.RenderedKernel(rendered.config, dest, rendered.files, digest.hexdigest())


def strip_kernel(rendered):
    """``edit`` for :func:`copy_rendered`: what Vitis HLS compiles of our kernel-side files,
    sim-only blocks removed. The harness and headers the kernel includes only from sim-only
    blocks (C-sim state the harness reads, e.g. csim_flags.h) stay as they are."""
    texts = {f: (rendered.dir / f).read_text() for f in rendered.files if f.endswith((".h", ".cpp"))}
    keep = HARNESS_FILES | guards.sim_only_headers(texts)

    def edit(name, text):
        return text if Path(name).name in keep else guards.strip_sim_only(text, name)
    return edit


# ----------------------------------------------------------------------------- the models

PROBE = r"""
#include <type_traits>
#include "hlsnn/axis.h"
template <typename T, typename = void> struct HasKeepAll : std::false_type {};
template <typename T> struct HasKeepAll<T, decltype(std::declval<T &>().keep_all())> : std::true_type {};
template <typename T, typename = void> struct UserTakesInt : std::false_type {};
template <typename T>
struct UserTakesInt<T, decltype(void(std::declval<T &>().user = 0))> : std::true_type {};
typedef ap_axiu<32, 0, 0, 0> W32;
static_assert(std::is_same<hlsnn::AxisWord<32>, W32>::value, "AxisWord is ap_axiu<W,0,0,0>");
static_assert(std::is_same<decltype(W32::data), ap_uint<32> >::value, "data");
static_assert(std::is_same<decltype(W32::keep), ap_uint<4> >::value, "keep: one bit per byte");
static_assert(std::is_same<decltype(W32::strb), ap_uint<4> >::value, "strb: one bit per byte");
static_assert(std::is_same<decltype(W32::last), ap_uint<1> >::value, "last");
static_assert(std::is_same<decltype(ap_axiu<128, 0, 0, 0>::keep), ap_uint<16> >::value, "128 bits: 16 bytes");
static_assert(std::is_same<decltype(ap_axiu<24, 0, 0, 0>::keep), ap_uint<sizeof(ap_uint<24>)> >::value,
              "g++ does not deduce the released size_t specialisation: 24 bits keep their storage size");
static_assert(std::is_same<decltype(ap_axiu<32, 2, 3, 5>::user), ap_uint<2> >::value, "WUser");
static_assert(std::is_same<decltype(ap_axiu<32, 2, 3, 5>::id), ap_uint<3> >::value, "WId");
static_assert(std::is_same<decltype(ap_axiu<32, 2, 3, 5>::dest), ap_uint<5> >::value, "WDest");
%(release)s
int main() {
  hlsnn::AxisWord<32> b = hlsnn::MakeBeat<32>(0x12345678u, true);
  if (b.data != 0x12345678u || b.keep != 0xF || b.strb != 0xF || b.last != 1) return 10;
%(runtime)s
  return 0;
}
"""
RELEASE = {
    # UG1399 2021.1: ap_axiu<WData,WUser,WId,WDest> = hls::axis<ap_uint<WData>,WUser,WId,WDest>;
    # released header: a zero width is widened to ap_uint<1>; no accessors on hls::axis.
    "vitis2022": (r"""
static_assert(std::is_same<W32, hls::axis<ap_uint<32>, 0, 0, 0> >::value, "alias of the 4-parameter axis");
static_assert(std::is_same<decltype(W32::user), ap_uint<1> >::value, "zero width widened to 1 bit");
static_assert(std::is_same<decltype(W32::id), ap_uint<1> >::value, "zero width widened to 1 bit");
static_assert(UserTakesInt<W32>::value, "beat.user = 0 compiles up to 2022.2");
static_assert(!HasKeepAll<W32>::value, "no keep_all() on ap_axiu before 2023.1");
static_assert(HasKeepAll<qdma_axis<32, 0, 0, 0> >::value, "keep_all() on qdma_axis");
""", ""),
    # UG1399 2023.2: the 6-parameter axis with KEEP|LAST|STRB enabled by default; released
    # header: flags DATA=1 DEST=2 ID=4 KEEP=8 LAST=16 STRB=32 USER=64, disabled signals are
    # axis_disabled_signal, a get_* of a disabled signal throws in C-simulation.
    "vitis2023": (r"""
static_assert(AXIS_ENABLE_DATA == 1 && AXIS_ENABLE_DEST == 2 && AXIS_ENABLE_ID == 4 && AXIS_ENABLE_KEEP == 8 &&
              AXIS_ENABLE_LAST == 16 && AXIS_ENABLE_STRB == 32 && AXIS_ENABLE_USER == 64, "flag values");
static_assert(std::is_same<W32, hls::axis<ap_uint<32>, 0, 0, 0, 8 | 16 | 32, false> >::value,
              "alias of axis<ap_uint<W>,0,0,0,KEEP|LAST|STRB,false>");
static_assert(std::is_same<decltype(W32::user), hls::axis_disabled_signal>::value, "user disabled");
static_assert(std::is_same<decltype(W32::id), hls::axis_disabled_signal>::value, "id disabled");
static_assert(std::is_same<decltype(W32::dest), hls::axis_disabled_signal>::value, "dest disabled");
static_assert(std::is_empty<hls::axis_disabled_signal>::value, "an empty struct");
static_assert(!UserTakesInt<W32>::value, "beat.user = 0 does not compile from 2023.1");
static_assert(HasKeepAll<W32>::value, "keep_all()");
static_assert(std::is_same<decltype(ap_axiu<32, 0, 0, 0, 16>::keep), hls::axis_disabled_signal>::value,
              "LAST only: keep disabled");
""", r"""
  W32 k;
  k.keep = 0;
  k.keep_all();
  if (k.keep != 0xF) return 11;
  k.set_data(5);
  k.set_last(1);
  if (k.get_data() != 5 || k.get_last() != 1) return 12;
  try { (void)k.get_user(); return 13; } catch (const std::runtime_error &) {}
"""),
}


@pytest.mark.parametrize("model", MODELS)
def test_model_has_the_documented_interface_and_axis_h_uses_it(model, tmp_path):
    """The model's types are what UG1399 and the released header say, and hlsnn/axis.h picks
    the model up (AxisWord is the model's type, not the fallback)."""
    src = tmp_path / "probe.cpp"
    src.write_text(PROBE % {"release": RELEASE[model][0], "runtime": RELEASE[model][1]})
    exe = tmp_path / "probe"
    argv = [csim.compiler(), "-std=c++14", "-O0", f"-I{MODELS[model]}", f"-I{ROOT / 'hls' / 'include'}",
            f"-isystem{csim.ap_types_dir()}", str(src), "-o", str(exe)]
    proc = subprocess.run(argv, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = subprocess.run([str(exe)], capture_output=True, text=True)
    assert run.returncode == 0, f"probe failed with code {run.returncode}"


# ------------------------------------------------------------- every shipped config compiles

@pytest.fixture(scope="module")
def shipped(tmp_path_factory):
    base = tmp_path_factory.mktemp("shipped")
    return {p.stem: codegen.render(hlsnn.load_config(p), base / p.stem) for p in SHIPPED}


@pytest.fixture(scope="module")
def shipped_syntax(shipped):
    def check(key):
        stem, target = key
        r = shipped[stem]
        return syntax_check(r.dir, target, [r.engine.KERNEL_SOURCES[0], "bridge.cpp", "tb.cpp"])
    return pool_map(check, [(s, t) for s in shipped for t in TARGETS])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("stem", [p.stem for p in SHIPPED])
def test_shipped_config_compiles(stem, target, shipped_syntax):
    """Kernel, C ABI bridge and testbench of every shipped config, in one translation unit."""
    proc = shipped_syntax[(stem, target)]
    assert proc.returncode == 0, f"{stem} against {target}:\n{proc.stderr[-3000:]}"


# ------------------------------------------------- the issue-12 bug, planted back, is caught

PLANTS = {
    # name: (file under include/hlsnn, old, new, {target: compiles?})
    "beat.user = 0 (the code before the fix)": (
        "stream_io.h", NEW_EMIT, OLD_EMIT, {"fallback": False, "vitis2022": True, "vitis2023": False}),
    "keep_all() (2023.1+ only)": (
        "axis.h", "beat.keep = -1;", "beat.keep_all();", {"fallback": False, "vitis2022": False, "vitis2023": True}),
    "pristine": ("axis.h", "", "", {"fallback": True, "vitis2022": True, "vitis2023": True}),
}
LANE_PROBE = """#include "hlsnn/stream_io.h"
void Probe(hls::stream<hlsnn::AxisWord<64> > &s) {
  hlsnn::LaneWriter<64, 8> w;
  w.Start();
  w.Put(s, 1);
  w.Flush(s, true);
}
"""


@pytest.fixture(scope="module")
def planted_syntax(tmp_path_factory):
    base = tmp_path_factory.mktemp("planted")
    dirs = {}
    for i, (name, (fname, old, new, _)) in enumerate(PLANTS.items()):
        d = base / f"p{i}"
        shutil.copytree(ROOT / "hls" / "include", d / "include")
        path = d / "include" / "hlsnn" / fname
        text = path.read_text()
        if old:
            assert text.count(old) == 1, f"{old!r} not found once in {fname}: update the plant"
            path.write_text(text.replace(old, new))
        (d / "probe.cpp").write_text(LANE_PROBE)
        dirs[name] = d
    return pool_map(lambda key: syntax_check(dirs[key[0]], key[1], ["probe.cpp"]),
                    [(n, t) for n in PLANTS for t in TARGETS])


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("plant", PLANTS)
def test_side_channel_code_compiles_only_where_the_release_accepts_it(plant, target, planted_syntax):
    proc = planted_syntax[(plant, target)]
    expected = PLANTS[plant][3][target]
    assert (proc.returncode == 0) == expected, (
        f"{plant} against {target}: expected {'success' if expected else 'a compile error'}\n{proc.stderr[-2000:]}")
    if plant.startswith("beat.user") and not expected:
        assert "user" in proc.stderr


# --------------------------------------------------- csim under each model; stripped kernels

@pytest.fixture(scope="module")
def libraries(tmp_path_factory):
    """Every library this module runs, compiled two at a time: (engine, variant) -> target
    arguments, variant in the models, ``stripped`` and ``planted``."""
    base = tmp_path_factory.mktemp("libs")
    jobs = {}
    for engine, path in RUN_CONFIGS.items():
        cfg = hlsnn.load_config(path)
        r = codegen.render(cfg, base / engine / "hls")
        for model in MODELS:
            jobs[(engine, model)] = (cfg, r, include_dirs(model))
        jobs[(engine, "stripped")] = (cfg, copy_rendered(r, base / engine / "stripped", strip_kernel(r)), [])
    cfg, r, _ = jobs[("bfp_systolic", "vitis2023")]

    def plant(name, text):  # a sim-only block that changes every output beat
        if name != "include/hlsnn/stream_io.h":
            return text
        assert text.count(NEW_EMIT) == 1
        return text.replace(NEW_EMIT, "\n#ifndef __SYNTHESIS__\n    word ^= 1;\n#endif\n    " + NEW_EMIT)
    jobs[("bfp_systolic", "planted")] = (cfg, copy_rendered(r, base / "planted", plant), [])
    pool_map(lambda k: csim.compile_library(jobs[k][1], include_dirs=jobs[k][2], strict=_strict(jobs[k][1])),
             list(jobs))
    return jobs


def _strict(rendered):
    """The stripped kernel is what Vitis HLS compiles: no sim-only code, so none of the strict
    C-simulation's wrappers either (its FIFOs are plain hls::stream); it runs on the fast library."""
    return rendered.dir.name != "stripped"


def run_compare(job):
    cfg, rendered, inc = job
    was = csim.strict_default()
    csim.set_strict_default(_strict(rendered))
    try:
        tgt = CsimTarget(cfg, ENGINES[cfg.engine], rendered=rendered, include_dirs=inc)
        return compare(cfg, target_obj=tgt, seed=12, n_random=2)
    finally:
        csim.set_strict_default(was)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("engine", RUN_CONFIGS)
def test_csim_under_each_model_is_bit_exact(engine, model, libraries):
    rep = run_compare(libraries[(engine, model)])
    assert rep["cases"] >= 3
    assert rep["mismatches"] == 0, rep["first_mismatch"]
    assert rep["register_mismatches"] == []


def _hls_sources():
    # the C ABI bridges (a network kernel's network_bridge.cpp.j2 as hls/harness/) are never synthesized
    files = [p for p in sorted((ROOT / "hls" / "engines").glob("*/*.j2")) if not p.name.endswith("bridge.cpp.j2")] \
        + sorted((ROOT / "hls" / "include").rglob("*.h"))
    return {str(p.relative_to(ROOT)): p.read_text() for p in files}


def test_sim_only_blocks_hold_only_checks_and_counters():
    """The rule of tests/synthesis_guards.py over every kernel template and header in hls/
    (the harness is never synthesized and is not checked)."""
    files = _hls_sources()
    assert any(guards.split(t, p)[1] for p, t in files.items()), "no sim-only block found: is the scan broken?"
    assert guards.violations(files) == []


BREACHES = {
    "write a kernel variable": ("word = 0;", "writes 'word'"),
    "write a stream": ("s.write(MakeBeat<W>(0, true));", "call to 'write'"),
    "read a stream": ("(void)s.read();", "call to 'read'"),
    "call a kernel stage": ("Emit(s, true);", "call to 'Emit'"),
    "return early": ("if (s.empty()) return ap_uint<W>(0);", "'return'"),
    "member of a kernel struct": ("lane += 1;", "writes 'lane'"),
}
ALLOWED = ["++csim_beats_read;", "hlsnn::CsimCounters().beats_in[0] += 2;", "csim_total = csim_total + 1;",
           "assert(W > 0);", "for (int i = 0; i < 2; ++i) assert(i < W);"]


def _with_block(files, body):
    """stream_io.h with ``body`` added to ReadBeat's sim-only block, and a sim-only counter."""
    key = "hls/include/hlsnn/stream_io.h"
    text = files[key]
    anchor = "  if (s.empty()) CsimUnderflow() = true;\n"
    assert text.count(anchor) == 1
    text = text.replace(anchor, anchor + "  " + body + "\n")
    text = text.replace("namespace hlsnn {\n", "namespace hlsnn {\n#ifndef __SYNTHESIS__\n"
                        "static long csim_beats_read = 0, csim_total = 0;\n#endif\n", 1)
    return {**files, key: text}


@pytest.mark.parametrize("breach", BREACHES)
def test_rule_refuses_behaviour_changing_sim_only_code(breach):
    code, message = BREACHES[breach]
    found = guards.violations(_with_block(_hls_sources(), code))
    assert any(message in v for v in found), found


def test_rule_accepts_counters_and_refuses_tool_only_code():
    files = _hls_sources()
    for code in ALLOWED:
        assert guards.violations(_with_block(files, code)) == [], code
    key = "hls/include/hlsnn/stream_io.h"
    tool_only = files[key].replace("  if (s.empty()) CsimUnderflow() = true;\n",
                                   "  if (s.empty()) CsimUnderflow() = true;\n#else\n  s.read();\n")
    assert any("code only Vitis HLS compiles" in v for v in guards.violations({**files, key: tool_only}))


@pytest.mark.parametrize("engine", RUN_CONFIGS)
def test_stripped_kernel_gives_the_same_outputs(engine, libraries):
    """The kernel as Vitis HLS compiles it (every sim-only block removed) against the emulator,
    which the unstripped kernel matches bit for bit (test_csim_under_each_model_is_bit_exact)."""
    cfg, stripped, _ = libraries[(engine, "stripped")]
    kernel = (stripped.dir / ENGINES[cfg.engine].KERNEL_SOURCES[0]).read_text()
    assert "__SYNTHESIS__" not in kernel and "assert(" not in kernel     # the blocks are gone
    rep = run_compare(libraries[(engine, "stripped")])
    assert rep["mismatches"] == 0, rep["first_mismatch"]
    assert rep["register_mismatches"] == []


def test_stripped_comparison_catches_a_behaviour_changing_block(libraries):
    """A planted sim-only block that flips a bit of every output beat: the rule names it, and
    the kernel with it differs from the emulator while the stripped kernel (above) does not."""
    cfg, planted, _ = libraries[("bfp_systolic", "planted")]
    text = (planted.dir / "include" / "hlsnn" / "stream_io.h").read_text()
    assert any("writes 'word'" in v for v in guards.violations({"stream_io.h": text}))
    assert run_compare(libraries[("bfp_systolic", "planted")])["mismatches"] > 0
