"""The bfp_systolic hazards of issue 30, planted back, fail the strict C-simulation; the shipped
gaps leave the distances the pipeline needs.

The required distances are hardware facts stated in spec.py (W_DEPTH: the loader's write
completes in stage 2 of Steps; POST_DEPTH: a post's write in stage 6), independent of the
scheduling gaps under test (W_GAP, POST_GAP). Planting sets a gap back to its old value, renders
and compiles the kernel afresh (slow), and runs a call whose schedule reaches the short
distance: the strict run must stop with an error naming the array."""
from pathlib import Path

import numpy as np
import pytest

from hlsnn.engines.bfp_systolic import spec
from hlsnn.errors import StrictCsimError

CONFIGS = Path(__file__).parent / "configs"
pytestmark = [pytest.mark.csim, pytest.mark.strict_csim]


def test_gaps_cover_the_required_distances():
    # the scheduling gaps against the pipeline's stages: a step is read W_GAP iterations after
    # its write, a sample's running state POST_GAP + 1 after its post (min_steps = rows + POST_GAP)
    assert spec.W_GAP >= spec.W_DEPTH == 3
    assert spec.POST_GAP + 1 >= spec.POST_DEPTH == 7
    assert spec.RAW_REQUIRED["wstore"] == spec.W_DEPTH and spec.RAW_REQUIRED["run_lop"] == spec.POST_DEPTH


def _gemm(b, k, n, seed=0):
    """Runs one GEMM on t16_row's strict C-simulation; its read-after-write records."""
    from hlsnn.runtime import Accelerator
    rng = np.random.default_rng(seed)
    with Accelerator(CONFIGS / "t16_row.yaml", target="csim") as acc:
        acc.gemm(rng.normal(size=(b, k)), rng.normal(size=(n, k)))
        return {r["array"]: r for r in acc.target.lib.last_strict["raw"]}


@pytest.mark.slow
@pytest.mark.parametrize("what, patch, shape, names", [
    # the old issue rule: a step computes the iteration after its write (distance 1)
    ("wstore", {"W_GAP": 1}, (5, 7, 6), "wstore"),
    # the old post gap: one group, three tiles of a short K: the next tile reads a sample's
    # running state POST_GAP + 1 = 4 iterations after the last post wrote it
    ("run_*", {"POST_GAP": 3}, (2, 7, 12), "run_"),
    # the same gap, two groups of one tile: the output beats of group 0 (they stream during
    # Steps) read its exponents POST_GAP + 1 = 4 iterations after the last post wrote them
    ("o_exp", {"POST_GAP": 3}, (5, 7, 6), r"'o_exp\[0\]'"),
])
def test_planted_hazard_fails_the_strict_csim(monkeypatch, what, patch, shape, names):
    for k, v in patch.items():
        monkeypatch.setattr(spec, k, v)
    with pytest.raises(StrictCsimError, match=names):
        _gemm(*shape)


@pytest.mark.slow
def test_shipped_gaps_pass_the_planted_shapes():
    """The same shapes with the shipped gaps: the strict run passes, and its read-after-write
    records show the distances the gaps give (4 for the weight store, 8 for the running state
    and the output exponents). The output's copy of the weight exponents is read only once a
    group is complete: t16_row's 2 tiles of 4 rows, 9 beats each (1 exponent beat), tile 1's
    exponents (rows 4-5) written in iteration 9, and sample 0's output beats in 55 (rows 0-2)
    and 56 (rows 3-5, the first read of tile 1's) (the hand count of
    tests/perf/test_cycle_model.py): 47 apart."""
    g = _gemm(5, 7, 6)
    w, o, e = g["wstore"], g["o_exp"], g["wexp_o"]
    r = _gemm(2, 7, 12)["run_lop"]
    assert (w["min_distance"], w["required"]) == (spec.W_GAP, spec.W_DEPTH)
    assert (r["min_distance"], r["required"]) == (spec.POST_GAP + 1, spec.POST_DEPTH)
    assert (o["min_distance"], o["required"]) == (spec.POST_GAP + 1, spec.POST_DEPTH)
    assert e["required"] == spec.RAW_DISTANCE["wexp"] and e["min_distance"] >= spec.POST_DEPTH


def _gemv(k, n, seed=0):
    """Runs one resident batch-1 call (GEMV mode) on t16_gemv's strict C-simulation (4 lanes of
    16 bits: a word holds 2 steps, and the 4 columns take 4 steps an iteration, so the first
    tile reads each iteration's last word as soon as the gap lets it); its read-after-write
    records."""
    from hlsnn.runtime import Accelerator
    rng = np.random.default_rng(seed)
    with Accelerator(CONFIGS / "t16_gemv.yaml", target="csim") as acc:
        x, w = rng.normal(size=(1, k)), rng.normal(size=(n, k))
        acc.load_weights(w)
        acc.gemm(x, w)
        acc.gemm(x, w)
        assert "GemvSteps" in acc.kernel.last_cycles.counts
        return {r["array"]: r for r in acc.target.lib.last_strict["raw"]}


@pytest.mark.slow
def test_planted_sample_gap_fails_the_strict_csim(monkeypatch):
    """GEMV mode's first tile reads a sample word the iteration after the beat that wrote it (the
    rule before the gap, X_GAP 1): the strict run stops naming the activation store. Iteration 0
    needs words 0 and 1 (steps 0-3), written in iterations 0 and 1, and runs in iteration 2: the
    first checked read (column 0's, word 0) is 2 iterations after its write, column 2's of word 1
    would be 1; both short of the 3 the write stage needs."""
    monkeypatch.setattr(spec, "X_GAP", 1)
    with pytest.raises(StrictCsimError, match=r"array 'xstore\[\d\]': word \d+ read [12] iteration\(s\) after "
                                              r"its write in loop GemvSteps; the pipeline needs 3"):
        _gemv(64, 8)


@pytest.mark.slow
def test_shipped_sample_gap_passes():
    """The same call with the shipped gap: the first tile's reads come X_GAP = 4 iterations after
    the words' writes (the closest: each iteration's last word), against the X_DEPTH = 3 the
    store's write stage needs; GEMV mode never reads the sample exponents it writes."""
    assert spec.X_GAP >= spec.X_DEPTH == 3 and spec.RAW_REQUIRED["xstore"] == spec.X_DEPTH
    g = _gemv(64, 8)
    assert (g["xstore"]["min_distance"], g["xstore"]["required"]) == (spec.X_GAP, spec.X_DEPTH)
    assert g["xexp"]["min_distance"] is None and g["xexp"]["required"] == spec.RAW_DISTANCE["xexp"]


@pytest.mark.slow   # compiles a kernel with the hazard planted back
def test_a_run_time_bank_index_in_gemv_posting_fails_the_strict_csim(tmp_path):
    """GEMV posting reads each weight-exponent bank once, at a constant bank index (bank-major).
    Planted back, the old form reads wexp[(n0 + r) mod lanes] for each of the kGemvPost rows r:
    a site per row whose bank is a run-time value, so each bank gets five read sites (the four
    rows' and the bank-major read's) against its one read port (II = 5), and the strict run
    stops naming the loop and the bank as soon as a bank has reached a second site."""
    import hlsnn
    from conftest import planted_csim
    from hlsnn import codegen
    cfg = hlsnn.load_config(CONFIGS / "t16_gemv.yaml")
    rendered = codegen.render(cfg, tmp_path / "hls")
    target = planted_csim(cfg, rendered, "bfp_systolic.cpp", "(Cfg::kWeightExponentPerRow ? we[nb] : w_tensor_exp)",
                          "(Cfg::kWeightExponentPerRow ? HLSNN_LOAD_AT(wexp[nb], w0 + (nb < b0 ? 1 : 0), r)"
                          " : w_tensor_exp)")
    from hlsnn.compare import compare
    with pytest.raises(StrictCsimError, match=r"loop GemvSteps: bank 'wexp\[\d\]' has [2-5] read site\(s\) and "
                                              r"0 write site\(s\), more than its ports"):
        compare(cfg, "csim", seed=0, n_random=0, target_obj=target)     # its resident cases run GEMV mode
