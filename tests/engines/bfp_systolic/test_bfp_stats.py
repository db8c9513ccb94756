"""bfp_systolic's statistics unit (source 002, ``FLAG_STATS_OUT``): the MSB histogram of the
aligned wide accumulators (after bias and ReLU, in accumulator units) equals ``msb_histogram``
of an independent numpy int64 GEMM, is the same on csim and the emulator (16-bit and 8-bit
lanes), leaves the stream unchanged when off, and a planted bug is caught."""

import numpy as np
import pytest

import hlsnn
from hlsnn import codegen
from hlsnn.compare import compare
from hlsnn.engines import ENGINES
from hlsnn.engines.bfp_systolic import protocol
from hlsnn.engines.bfp_systolic.cases import make_cases, run_case
from hlsnn.formats import bfp
from hlsnn.primitives import msb_histogram
from hlsnn.runtime.targets import CsimTarget, EmuTarget

from conftest import ROOT, planted_csim, test_config

BFP8 = ROOT / "configs" / "accel" / "bfp8_zcu104.yaml"         # 8-bit lanes: four per counter
BFP16 = ROOT / "configs" / "accel" / "bfp16_pynq-z2.yaml"
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", [BFP8, BFP16, test_config("t4_truncate")], ids=lambda p: p.stem)
@pytest.mark.parametrize("relu", [False, True])
def test_histogram_equals_msb_histogram_of_independent_wide_values(target, path, relu):
    rng = np.random.default_rng(3 + relu)
    with hlsnn.Accelerator(path, target) as acc:
        p = acc.config.params
        M, E = p["mantissa_bits"], p["exponent_bits"]
        C, R = p["cols"], p["rows"]
        b, n, k = 2 * C + 1, min(2 * R + 1, p["max_n"]), min(13, p["max_k"])     # ragged tiles
        lo, hi = -(1 << (M - 1)), 1 << (M - 1)
        xm, wm, bm = rng.integers(lo, hi, (b, k)), rng.integers(lo, hi, (n, k)), rng.integers(lo, hi, n)
        xe = rng.integers(-2, 1, b)                       # per-sample exponents: e3 = xe (we = 0)
        be = 1                                            # bias aligned by an exact left shift of 1..3
        per_row = p["weight_exponent"] == "row"
        x = bfp.BFPTensor.from_parts(xm, xe.reshape(-1, 1), M, exponent_bits=E, axis=1)
        w = bfp.BFPTensor.from_parts(wm, np.zeros((n, 1) if per_row else (1, 1), int), M, exponent_bits=E,
                                     axis=1 if per_row else None)
        bias = bfp.BFPTensor.from_parts(bm, [be], M, exponent_bits=E, axis=None)
        y = acc.gemm_bfp(x, w, bias, relu=relu, stats=True)
        wide = xm.astype(np.int64) @ wm.astype(np.int64).T + bm[None, :] * (1 << (be - xe))[:, None]
        lim = 1 << (p["acc_bits"] - 1)
        wide = np.clip(wide, -lim, lim - 1)
        if relu:
            wide = np.maximum(wide, 0)
        assert acc.kernel.last_stats.shape == (protocol.stats_bins(p),) == (p["acc_bits"],)
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_histogram(wide, p["acc_bits"]))
        assert acc.kernel.last_stats.sum() == np.count_nonzero((wide != 0) & (wide != -1))
        y0 = acc.gemm_bfp(x, w, bias, relu=relu)
        np.testing.assert_array_equal(y0.mantissas, y.mantissas)
        assert acc.kernel.last_stats is None


@pytest.mark.csim
@pytest.mark.parametrize("path", [BFP8, BFP16, ROOT / "configs" / "accel" / "bfp12_ultra96v2-stats.yaml",
                                  test_config("t2_tiny")], ids=lambda p: p.stem)
def test_csim_histogram_equals_emulator_on_seeded_float_calls(path):
    rng = np.random.default_rng(8)
    with hlsnn.Accelerator(path, "csim") as c, hlsnn.Accelerator(path, "emu") as e:
        n, k = min(11, c.config.params["max_n"]), min(15, c.config.params["max_k"])
        for relu in (False, True):
            x, w, b = rng.normal(size=(7, k)) * 10, rng.normal(size=(n, k)), rng.normal(size=n)
            np.testing.assert_array_equal(c.gemm(x, w, b, relu=relu, stats=True), e.gemm(x, w, b, relu=relu, stats=True))
            np.testing.assert_array_equal(c.kernel.last_stats, e.kernel.last_stats)
            assert e.kernel.last_stats.sum() > 0


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("path", [BFP8, BFP16], ids=lambda p: p.stem)
def test_flag_off_stream_is_unchanged_and_flag_on_appends_one_segment(target, path):
    cfg = hlsnn.load_config(path)
    p = cfg.params
    tgt = EmuTarget(cfg, ENGINES["bfp_systolic"]) if target == "emu" else CsimTarget(cfg, ENGINES["bfp_systolic"])
    case = [c for c in make_cases(cfg, seed=3, n_random=0) if c.name == "stats_out_relu"][0]
    b, n, _ = case.shape
    beats = protocol.pack_input(p, case.xm, case.xe, case.wm, case.we, case.bm, case.be)
    on, regs_on = tgt.run(beats, case.regs(), protocol.n_output_beats(p, b, n, stats=True))
    case.stats_out = False
    off, regs_off = tgt.run(beats, case.regs(), protocol.n_output_beats(p, b, n))
    assert on.shape[0] == off.shape[0] + protocol.n_stats_beats(p)
    np.testing.assert_array_equal(on[:off.shape[0]], off)
    np.testing.assert_array_equal(regs_on, regs_off)
    lb = 8 if p["mantissa_bits"] <= 8 else 16
    assert protocol.n_stats_beats(p) == -(-p["acc_bits"] * 32 // p["stream_bits"])
    h = protocol.unpack_stats(p, on)
    lanes = on[off.shape[0]:].reshape(-1).view(f"<u{lb // 8}").astype(np.int64)
    assert lanes[0] == h[0] & ((1 << lb) - 1)                # low part first


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
def test_planted_stats_bug_is_reported_as_mismatch(tmp_path):
    """Count the padding columns of a ragged batch tile too: only the histogram changes."""
    cfg = hlsnn.load_config(test_config("t16_row"))
    r = codegen.render(cfg, tmp_path / "hls")
    tgt = planted_csim(cfg, r, "bfp_systolic.cpp", "counted[c] = valid && k.last;", "counted[c] = k.last;")
    case = [c for c in make_cases(cfg, seed=0, n_random=0) if c.name == "stats_out"][0]
    res = run_case(cfg, tgt, case)
    assert res["mismatches"] > 0 and res["first"]["index"][0] == "stats"
    rep = compare(cfg, "csim", seed=0, n_random=0, target_obj=tgt)
    assert rep["mismatches"] > 0 and rep["first_mismatch"]["case"].startswith("stats_out")
