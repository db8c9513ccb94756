"""sparse_cluster's statistics unit (source 002, ``FLAG_STATS_OUT``): the MSB histogram of the
int32 values after bias, ReLU and pooling (raw mode: the raw outputs) equals ``msb_histogram``
of an independent scipy/numpy int64 computation, is the same on csim and the emulator (the
units' histograms merged), leaves the stream unchanged when off, and a planted bug is caught."""
from pathlib import Path

import numpy as np
import pytest
from scipy.signal import correlate2d

import hlsnn
from hlsnn import codegen
from hlsnn.compare import compare
from hlsnn.engines import ENGINES
from hlsnn.engines.sparse_cluster import protocol
from hlsnn.engines.sparse_cluster.cases import _prepare, make_cases, run_case
from hlsnn.primitives import msb_histogram
from hlsnn.runtime.targets import CsimTarget, EmuTarget

from conftest import ROOT, planted_csim

CONFIGS = Path(__file__).parent / "configs"
SHIPPED = ROOT / "configs" / "accel" / "sparse8_pynq-z2.yaml"
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]


def sparse(rng, shape, density):
    return np.where(rng.random(shape) < density, rng.integers(-128, 128, shape), 0).astype(np.int8)


def wide_ref(x, w, bias, padding, relu, pool):
    z, c, k, _ = w.shape
    pad = (k - 1) // 2 if padding == "same" else 0
    xp = np.pad(x.astype(np.int64), ((0, 0), (pad, pad), (pad, pad)))
    t = np.stack([sum(correlate2d(xp[ci], w[zi, ci].astype(np.int64), mode="valid") for ci in range(c))
                  for zi in range(z)]) + bias[:, None, None]
    if relu:
        t = np.maximum(t, 0)
    if pool:
        zz, h, ww = t.shape
        t = t[:, :h // 2 * 2, :ww // 2 * 2].reshape(zz, h // 2, 2, ww // 2, 2).max(axis=(2, 4))
    return t


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("relu, pool, raw", [(False, False, False), (True, False, False), (False, True, False),
                                             (True, True, True), (False, False, True)])
def test_histogram_equals_msb_histogram_of_independent_wide_values(target, relu, pool, raw):
    rng = np.random.default_rng(11 + 2 * relu + 4 * pool + raw)
    with hlsnn.Accelerator(CONFIGS / "sp_small.yaml", target) as acc:
        x, w = sparse(rng, (3, 13, 11), 0.5), sparse(rng, (5, 3, 3, 3), 0.5)   # seams, folds, 2 groups
        bias = rng.integers(-4000, 4000, 5)
        y = acc.conv2d(x, w, bias=bias, padding="same", relu=relu, pool=pool, requantize=not raw, shift=9,
                       stats=True)
        t = wide_ref(x, w, bias, "same", relu, pool)
        assert (t < -1).any() != relu
        np.testing.assert_array_equal(acc.kernel.last_stats, msb_histogram(t, 32))
        assert acc.kernel.last_stats.sum() == np.count_nonzero((t != 0) & (t != -1))
        y0 = acc.conv2d(x, w, bias=bias, padding="same", relu=relu, pool=pool, requantize=not raw, shift=9)
        np.testing.assert_array_equal(y0, y)
        assert acc.kernel.last_stats is None


@pytest.mark.csim
@pytest.mark.parametrize("path", [SHIPPED, ROOT / "configs" / "accel" / "sparse20_zcu104.yaml",
                                  CONFIGS / "sp_one.yaml"], ids=lambda p: p.stem)
def test_csim_histogram_equals_emulator_on_seeded_calls(path):
    rng = np.random.default_rng(5)
    with hlsnn.Accelerator(path, "csim") as c, hlsnn.Accelerator(path, "emu") as e:
        for i in range(4):
            x, w = sparse(rng, (2, 15, 12), 0.3 + 0.2 * i), sparse(rng, (3, 2, 3, 3), 0.6)
            kw = dict(bias=rng.integers(-3000, 3000, 3), relu=bool(i % 2), pool=i >= 2, stats=True)
            np.testing.assert_array_equal(c.conv2d(x, w, **kw), e.conv2d(x, w, **kw))
            np.testing.assert_array_equal(c.kernel.last_stats, e.kernel.last_stats)
            assert e.kernel.last_stats.sum() > 0
        xf, wf = rng.normal(size=(2, 9, 9)), rng.normal(size=(4, 2, 3, 3))
        np.testing.assert_array_equal(c.conv2d(xf, wf, stats=True), e.conv2d(xf, wf, stats=True))
        np.testing.assert_array_equal(c.kernel.last_stats, e.kernel.last_stats)


@pytest.mark.parametrize("target", TARGETS)
def test_flag_off_stream_is_unchanged_and_flag_on_appends_one_segment(target):
    cfg = hlsnn.load_config(SHIPPED)
    p = cfg.params
    tgt = EmuTarget(cfg, ENGINES["sparse_cluster"]) if target == "emu" else CsimTarget(cfg, ENGINES["sparse_cluster"])
    case = [c for c in make_cases(cfg, seed=3, n_random=0) if c.name == "stats_relu"][0]
    plan, beats, regs = _prepare(cfg, case)
    z = case.w.shape[0]
    on, regs_on = tgt.run(beats, regs, protocol.n_output_beats(p, plan.rounds, z, case.flags))
    case.stats = False
    _, _, regs_off_in = _prepare(cfg, case)
    off, regs_off = tgt.run(beats, regs_off_in, protocol.n_output_beats(p, plan.rounds, z, case.flags))
    assert on.shape[0] == off.shape[0] + protocol.n_stats_beats(p) == \
        protocol.n_output_beats(p, plan.rounds, z, case.flags, stats=True)
    np.testing.assert_array_equal(on[:off.shape[0]], off)
    np.testing.assert_array_equal(regs_on, regs_off)


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
def test_planted_stats_bug_is_reported_as_mismatch(tmp_path):
    """Count before ReLU instead of after: only the histogram of ReLU cases changes."""
    cfg = hlsnn.load_config(SHIPPED)
    r = codegen.render(cfg, tmp_path / "hls")
    good = "  if (relu && t < 0) t = 0;\n  if (stats) hlsnn::MsbHistogramAdd1<Cfg::kStatsBins, 32>(hist, t);\n"
    bad = "  if (stats) hlsnn::MsbHistogramAdd1<Cfg::kStatsBins, 32>(hist, t);\n  if (relu && t < 0) t = 0;\n"
    tgt = planted_csim(cfg, r, "sparse_cluster.cpp", good, bad)
    case = [c for c in make_cases(cfg, seed=0, n_random=0) if c.name == "stats_relu"][0]
    res = run_case(cfg, tgt, case)
    assert res["mismatches"] > 0 and res["first"]["index"][0] == "stats"
    rep = compare(cfg, "csim", seed=0, n_random=0, target_obj=tgt)
    assert rep["first_mismatch"]["case"] == "stats_relu"
