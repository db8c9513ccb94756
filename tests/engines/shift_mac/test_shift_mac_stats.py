"""shift_mac's statistics unit (source 002, ``FLAG_STATS_OUT``): the MSB histogram of the wide
results (accumulator + bias, after ReLU) is the same on csim and on the emulator, equals
``msb_histogram`` of wide values computed independently with numpy int64, leaves the output
stream unchanged when off, and a planted counting bug is caught."""
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from hlsnn import codegen
from hlsnn.compare import compare
from hlsnn.engines import ENGINES
from hlsnn.engines.shift_mac import protocol
from hlsnn.engines.shift_mac.cases import make_cases, run_case
from hlsnn.formats import shift as sfmt
from hlsnn.primitives import msb_histogram
from hlsnn.runtime.targets import CsimTarget, EmuTarget

from conftest import ROOT, planted_csim

CONFIGS = Path(__file__).parent / "configs"
SHIPPED = ROOT / "configs" / "accel" / "shift8_pynq-z2.yaml"
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]


def _operands(rng, p, b, n, k):
    signed = p["act_signed"]
    lo, hi = (-(1 << (p["act_bits"] - 1)), 1 << (p["act_bits"] - 1)) if signed else (0, 1 << p["act_bits"])
    return rng.integers(lo, hi, (b, k)), rng.normal(size=(n, k)), rng.integers(-3000, 3000, n)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("mode", ["twohot", "pot", "pot_sum"])
@pytest.mark.parametrize("relu", [False, True])
def test_histogram_equals_msb_histogram_of_independent_wide_values(target, mode, relu):
    rng = np.random.default_rng(21)
    with hlsnn.Accelerator(CONFIGS / "s_tiny.yaml", target) as acc:
        p = acc.config.params
        b, n, k = 2 * p["cols"] + 1, 2 * p["rows"] + 1, 11        # ragged: padding neurons and samples
        x, w, bias = _operands(rng, p, b, n, k)
        if mode == "twohot":
            wq = sfmt.quantize_twohot(w, p["exp_bits"], delta=min(1, p["max_delta"]), axis=0)
            cv = wq.code_values()
        elif mode == "pot":
            wq = sfmt.quantize_pot(w, p["exp_bits"], axis=0)
            cv = wq.code_values()
        else:
            wq = acc.kernel._quantize_weights(w, "pot_sum", 0)
            cv = wq[0].code_values() + wq[1].code_values()
        y = acc.gemm_int(x, wq, mode=mode, bias=bias, shift=5, relu=relu, stats=True)
        wide = x.astype(np.int64) @ cv.astype(np.int64).T + bias[None, :]
        if relu:
            wide = np.maximum(wide, 0)
        assert acc.kernel.last_stats.dtype == np.int64
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_histogram(wide, p["acc_bits"]))
        assert acc.kernel.last_stats.sum() == np.count_nonzero((wide != 0) & (wide != -1))
        # the outputs do not depend on the flag, and a call without it leaves no histogram
        np.testing.assert_array_equal(acc.gemm_int(x, wq, mode=mode, bias=bias, shift=5, relu=relu), y)
        assert acc.kernel.last_stats is None


@pytest.mark.parametrize("target", TARGETS)
def test_conv_histogram_counts_every_output_pixel(target):
    rng = np.random.default_rng(4)
    with hlsnn.Accelerator(CONFIGS / "s_unsigned.yaml", target) as acc:
        p = acc.config.params
        x = rng.integers(0, 1 << p["act_bits"], (2, 6, 5))
        wq = sfmt.quantize_twohot(rng.normal(size=(3, 2, 3, 3)), p["exp_bits"], delta=2, axis=0)
        bias = np.array([-500, 0, 700])
        acc.conv2d_int(x, wq, padding="same", shift=6, bias=bias, stats=True)
        xp = np.pad(x, ((0, 0), (1, 1), (1, 1)))
        cv = wq.code_values()
        wide = np.zeros((3, 6, 5), np.int64) + bias[:, None, None]
        for ky in range(3):
            for kx in range(3):
                wide += np.einsum("zc,chw->zhw", cv[:, :, ky, kx], xp[:, ky:ky + 6, kx:kx + 5])
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_histogram(wide, p["acc_bits"]))


@pytest.mark.csim
@pytest.mark.parametrize("path", [SHIPPED, ROOT / "configs" / "accel" / "shift8_zcu104.yaml",
                                  CONFIGS / "s_wide.yaml"], ids=lambda p: p.stem)
def test_csim_histogram_equals_emulator_on_seeded_float_calls(path):
    rng = np.random.default_rng(9)
    with hlsnn.Accelerator(path, "csim") as c, hlsnn.Accelerator(path, "emu") as e:
        signed = c.config.params["act_signed"]
        x = rng.normal(size=(9, 40)) if signed else np.abs(rng.normal(size=(9, 40)))
        w = rng.normal(size=(21, 40))
        for mode in ("twohot", "pot", "pot_sum"):
            for relu in (False, True):
                np.testing.assert_array_equal(c.gemm(x, w, relu=relu, mode=mode, stats=True),
                                              e.gemm(x, w, relu=relu, mode=mode, stats=True))
                np.testing.assert_array_equal(c.kernel.last_stats, e.kernel.last_stats)
                assert e.kernel.last_stats.sum() > 0
        if not c.config.params["conv"]:
            return
        xc = rng.normal(size=(2, 7, 6)) if signed else np.abs(rng.normal(size=(2, 7, 6)))
        wc = rng.normal(size=(4, 2, 3, 3))
        c.conv2d(xc, wc, stats=True)
        e.conv2d(xc, wc, stats=True)
        np.testing.assert_array_equal(c.kernel.last_stats, e.kernel.last_stats)


@pytest.mark.parametrize("target", TARGETS)
def test_flag_off_stream_is_unchanged_and_flag_on_appends_one_segment(target):
    cfg = hlsnn.load_config(SHIPPED)
    p = cfg.params
    tgt = EmuTarget(cfg, ENGINES["shift_mac"]) if target == "emu" else CsimTarget(cfg, ENGINES["shift_mac"])
    case = [c for c in make_cases(cfg, seed=3, n_random=0) if c.name == "stats_pot_relu"][0]
    b = case.rows_x().shape[0]
    from hlsnn.engines.shift_mac.cases import _pack
    beats = _pack(p, case)
    on, regs_on = tgt.run(beats, case.regs_in(), protocol.n_output_beats(p, b, case.n, stats=True))
    case.stats = False
    off, regs_off = tgt.run(beats, case.regs_in(), protocol.n_output_beats(p, b, case.n))
    assert off.shape[0] == protocol.n_output_beats(p, b, case.n)
    assert on.shape[0] == off.shape[0] + protocol.n_stats_beats(p)
    np.testing.assert_array_equal(on[:off.shape[0]], off)
    np.testing.assert_array_equal(regs_on, regs_off)
    assert protocol.n_stats_beats(p) == -(-2 * p["acc_bits"] * 16 // p["stream_bits"])


def test_stats_segment_round_trip_and_lanes_low_half_first():
    p = hlsnn.load_config(SHIPPED).params
    h = np.arange(p["acc_bits"], dtype=np.int64) * 0x10001 + (1 << 32) - 1 - p["acc_bits"] * 0x10001
    beats = protocol.pack_stats(p, h)
    assert beats.shape[0] == protocol.n_stats_beats(p)
    np.testing.assert_array_equal(protocol.unpack_stats(p, beats), h)
    lanes = beats.reshape(-1).view("<u2")
    assert lanes[0] == h[0] & 0xFFFF and lanes[1] == h[0] >> 16


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
def test_planted_stats_bug_is_reported_as_mismatch(tmp_path):
    """Count the padding samples of a ragged tile too: only the histogram changes."""
    cfg = hlsnn.load_config(SHIPPED)
    r = codegen.render(cfg, tmp_path / "hls")
    tgt = planted_csim(cfg, r, "shift_mac.cpp", "valid[q] = n_ok && c < cb;", "valid[q] = n_ok;")
    case = [c for c in make_cases(cfg, seed=0, n_random=0) if c.name == "stats_twohot"][0]
    res = run_case(cfg, tgt, case)
    assert res["mismatches"] > 0 and res["first"]["index"][0] == "stats"
    assert res["first"]["got"]["raw"].startswith("0x")
    rep = compare(cfg, "csim", seed=0, n_random=0, target_obj=tgt)
    assert rep["mismatches"] > 0 and rep["first_mismatch"]["case"].startswith("stats_")
