"""bfp_systolic: resident weights (``Kernel.load_weights``; protocol flags 4 keep and 5 resident).

The kernel's weight store is static. A call with the keep flag leaves its tiles side by side
(tile t at step t * ceil(K/2)); a resident call reads them instead of streaming weights. Without
keep, tiles ping-pong between [0, kp) and [kp, 2 kp). The emulator target models the store
(``emulate_stream(state=...)``), so emu and csim must agree on every call of a sequence.
Expected values come from ordinary (streamed) calls, which the rest of the suite checks
against independent references."""
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from conftest import record_calls as record, stream_path as stream
from hlsnn.engines.bfp_systolic import emulate, protocol
from hlsnn.errors import InputError

CONFIGS = Path(__file__).parent / "configs"
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim)]
KEEP, RESIDENT = protocol.FLAG_KEEP, protocol.FLAG_RESIDENT


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("config, weight_beats", [
    # rows 4, 16-bit lanes on a 64-bit stream (4 lanes): N = 6 is 2 tiles, K = 20 is 10 steps of
    # 2 * 4 mantissas = 2 beats each; per-row exponents add 1 beat per tile: 2 * (1 + 10 * 2);
    # the resident call's bias is the keep call's, so its segment [b_exp, b[0..5]] (2 beats)
    # stays on chip too
    ("t16_row", 42 + 2),
    # a tensor-wide weight exponent travels in the head, resident or not: 2 * 10 * 2
    ("t16_stats", 40 + 2),
])
def test_loaded_weights_stream_once_then_stay(target, config, weight_beats):
    rng = np.random.default_rng(1)
    with hlsnn.Accelerator(CONFIGS / f"{config}.yaml", target, **stream(target)) as acc, \
            hlsnn.Accelerator(CONFIGS / f"{config}.yaml", "emu") as ref:
        w, w2 = rng.normal(size=(6, 20)), rng.normal(size=(6, 20))
        b = rng.normal(size=6)
        xs = [rng.normal(size=(5, 20)) for _ in range(4)]
        calls = record(acc)
        acc.load_weights(w)
        assert acc.kernel.resident is None                    # nothing on chip before the first call
        y = [acc.gemm(xs[0], w, bias=b), acc.gemm(xs[1], w, bias=b, relu=True)]
        assert acc.kernel.resident == (6, 20)
        y.append(acc.gemm(xs[2], w2, bias=b))                  # other weights: streamed, the store overwritten
        assert acc.kernel.resident is None
        y.append(acc.gemm(xs[3], w, bias=b))                   # the loaded ones again: keep, streamed once more
        assert [f & (KEEP | RESIDENT) for f, _ in calls] == [KEEP, RESIDENT, 0, KEEP]
        assert [bool(f & protocol.FLAG_BIAS_KEPT) for f, _ in calls] == [False, True, False, False]
        assert calls[0][1] - calls[1][1] == weight_beats
        for yi, xi, wi, relu in zip(y, xs, [w, w, w2, w], [False, True, False, False]):
            np.testing.assert_array_equal(yi, ref.gemm(xi, wi, bias=b, relu=relu))


@pytest.mark.csim
def test_the_weight_store_is_the_same_on_emu_and_csim():
    """Raw calls: a streamed GEMM of two tiles without keep leaves tile 0 at step 0 of the
    store; a resident one-tile call then computes with that tile (and the row exponents the
    first call wrote). The emulator's store and the C++'s agree, and the result is that of a
    streamed call with tile 0's weights."""
    outs = {}
    for target in ("emu", "csim"):
        with hlsnn.Accelerator(CONFIGS / "t16_row.yaml", target, **stream(target)) as acc:
            p = acc.config.params
            rng = np.random.default_rng(3)                    # the same data on both targets
            xm, xe = rng.integers(-2000, 2000, (3, 10)), rng.integers(-4, 4, 3)
            wm, we = rng.integers(-2000, 2000, (8, 10)), rng.integers(-4, 4, 8)
            acc.target.run(protocol.pack_input(p, xm, xe, wm, we), [3, 8, 10, 0, 3],
                           protocol.n_output_beats(p, 3, 8))
            out, regs_out = acc.target.run(protocol.pack_input(p, xm, xe, wm[:4], we[:4], resident=True),
                                           [3, 4, 10, RESIDENT, 3], protocol.n_output_beats(p, 3, 4))
            outs[target] = (*protocol.unpack_output(p, out, 3, 4), int(regs_out[2]))
    for a, b in zip(outs["emu"], outs["csim"]):
        np.testing.assert_array_equal(a, b)
    ym, ye, sat, *_ = emulate(p, xm, xe, wm[:4], we[:4])
    np.testing.assert_array_equal(outs["csim"][0], ym)
    np.testing.assert_array_equal(outs["csim"][1], ye)
    assert outs["csim"][2] == sat


def test_weights_that_do_not_fit_the_store_are_refused():
    with hlsnn.Accelerator(CONFIGS / "t16_row.yaml", "emu") as acc:
        # 64 rows are 16 tiles of 4; K = 256 is 128 steps: 2048 > w_depth 256 (two tiles of max_k)
        with pytest.raises(InputError, match=r"16 tiles x 128 steps = 2048 steps.*w_depth = 256"):
            acc.load_weights(np.ones((64, 256)))
        assert acc.kernel.resident is None


@pytest.mark.parametrize("target", TARGETS)
def test_a_resident_layer_streams_only_its_activations(target):
    """A resident call whose bias is the keep call's streams neither weights nor bias
    (FLAG_BIAS_KEPT: the samples and nothing else); one with another bias streams the bias
    (and then keeps that one); the results are those of streamed calls."""
    with hlsnn.Accelerator(CONFIGS / "t16_row.yaml", target, **stream(target)) as acc, \
            hlsnn.Accelerator(CONFIGS / "t16_row.yaml", "emu") as ref:
        p = acc.config.params
        rng = np.random.default_rng(8)
        w, b, b2 = rng.normal(size=(9, 14)), rng.normal(size=9), rng.normal(size=9)
        xs = [rng.normal(size=(2, 14)) for _ in range(4)]
        calls = record(acc)
        acc.load_weights(w)
        y = [acc.gemm(xs[0], w, bias=b), acc.gemm(xs[1], w, bias=b, relu=True),
             acc.gemm(xs[2], w, bias=b2), acc.gemm(xs[3], w, bias=b2)]
        kept = [bool(f & protocol.FLAG_BIAS_KEPT) for f, _ in calls]
        assert kept == [False, True, False, True]
        samples_only = protocol.n_input_beats(p, 2, 9, 14, False, resident=True)
        assert [beats for _, beats in calls][1] == samples_only and calls[3][1] == samples_only
        assert calls[2][1] == protocol.n_input_beats(p, 2, 9, 14, True, resident=True)
        for yi, xi, bi, relu in zip(y, xs, [b, b, b2, b2], [False, True, False, False]):
            np.testing.assert_array_equal(yi, ref.gemm(xi, w, bias=bi, relu=relu))


@pytest.mark.csim
def test_the_emulators_store_follows_the_kernels_ring():
    """Raw calls: a streamed GEMM of three tiles without keep leaves them in the ring's first
    three slots (t16_row: w_depth 256 steps, K = 10 is 5 steps: 51 slots), so a resident call of
    the same N reads all three, on emu as in the C++ (a ping-pong model would have put tile 2
    over tile 0)."""
    outs = {}
    for target in ("emu", "csim"):
        with hlsnn.Accelerator(CONFIGS / "t16_row.yaml", target, **stream(target)) as acc:
            p = acc.config.params
            rng = np.random.default_rng(4)
            xm, xe = rng.integers(-2000, 2000, (2, 10)), rng.integers(-4, 4, 2)
            wm, we = rng.integers(-2000, 2000, (12, 10)), rng.integers(-4, 4, 12)
            acc.target.run(protocol.pack_input(p, xm, xe, wm, we), [2, 12, 10, 0, 3], protocol.n_output_beats(p, 2, 12))
            out, _ = acc.target.run(protocol.pack_input(p, xm, xe, wm, we, resident=True), [2, 12, 10, RESIDENT, 3],
                                    protocol.n_output_beats(p, 2, 12))
            outs[target] = protocol.unpack_output(p, out, 2, 12)
    ym, ye, *_ = emulate(p, xm, xe, wm, we)
    for got in outs.values():
        np.testing.assert_array_equal(got[0], ym)
        np.testing.assert_array_equal(got[1], ye)


@pytest.mark.parametrize("target", ["emu", pytest.param("csim", marks=pytest.mark.csim),
                                    pytest.param("sim", marks=pytest.mark.csim)])
@pytest.mark.parametrize("config, batch, k, n", [
    # 48 samples a call (the stores): 48, 48, 4 (slow: the emu's stream path takes ~15 s on 100 samples)
    pytest.param("t16_row", 100, 20, 6, marks=pytest.mark.slow),
    ("t16_gemv", 21, 64, 8),     # 10 a call: 10, 10, 1 (the last one resident and in GEMV mode)
])
def test_a_split_gemm_streams_its_weights_once(target, config, batch, k, n):
    """A batch larger than one call holds (protocol.samples_per_call) with weights that fit the
    store side by side: the first call keeps them, the others are resident and stream only
    their samples (the bias too stays on chip); the result is the emulator's on the whole batch
    in one call (the emu target's arrays), and the store holds weights nobody loaded, so a
    later GEMM streams again. With load_weights the loaded weights' flags rule."""
    rng = np.random.default_rng(5)
    with hlsnn.Accelerator(CONFIGS / f"{config}.yaml", target, **stream(target)) as acc, \
            hlsnn.Accelerator(CONFIGS / f"{config}.yaml", "emu") as ref:
        p = acc.config.params
        per = protocol.samples_per_call(p, k, n)
        sizes = [min(per, batch - a) for a in range(0, batch, per)]
        assert len(sizes) >= 3 and protocol.resident_fits(p, n, k)
        x, w, b = rng.normal(size=(batch, k)), rng.normal(size=(n, k)), rng.normal(size=n)
        calls = record(acc)
        y = acc.gemm(x, w, bias=b, relu=True)
        np.testing.assert_array_equal(y, ref.gemm(x, w, bias=b, relu=True))
        assert [f & (KEEP | RESIDENT) for f, _ in calls] == [KEEP] + [RESIDENT] * (len(sizes) - 1)
        assert [bool(f & protocol.FLAG_BIAS_KEPT) for f, _ in calls] == [False] + [True] * (len(sizes) - 1)
        assert [beats for _, beats in calls[1:]] == [
            protocol.n_input_beats(p, s, n, k, True, resident=True, bias_kept=True) for s in sizes[1:]]
        assert acc.kernel.resident is None
        del calls[:]
        acc.gemm(x[:per], w)                                   # one call: streamed, no flag
        assert [f & (KEEP | RESIDENT) for f, _ in calls] == [0]
        if target == "csim":                                   # the cycle model splits alike
            from hlsnn.perf.closed_form import gemm_cycles
            acc.gemm(x, w)
            assert acc.kernel.last_cycles.cycles == gemm_cycles(acc.config, batch, k, n).cycles
        del calls[:]
        acc.load_weights(w)
        np.testing.assert_array_equal(acc.gemm(x, w, bias=b, relu=True), y)
        assert [f & (KEEP | RESIDENT) for f, _ in calls] == [KEEP] + [RESIDENT] * (len(sizes) - 1)
        assert acc.kernel.resident == (n, k)


@pytest.mark.slow     # t16_gemv's C-simulation library (conftest.SLOW_CSIM_CONFIGS) for one test
@pytest.mark.csim
def test_a_resident_call_of_several_groups_reads_its_samples_in_the_array_loop():
    """With GEMV mode in the config, a resident call of more than one group (and not in GEMV
    mode) reads its samples in the array loop (no ReadSampleBeats), the groups one after
    another, and a group's first step waits until X_GAP = 4 iterations after the iteration that
    read its last beat. t16_gemv (rows 4, cols 5, 4 lanes of 16 bits), N = 8, K = 64: a sample is
    68 / 4 = 17 beats, a group of 5 samples 85; T = 2 tiles of S = max(32, min_steps 11) = 32
    steps. Group 0's last beat is read in iteration 84, its first step issues in 88 and its 64
    steps run to 151; group 1's last beat is read in 169, its first step issues in 173 (21 more
    waits) and its steps end in 236; 4 + 5 - 1 = 8 iterations drain the array: 245 iterations,
    88 + 21 = 109 of them waiting for samples. The results are the emulator's."""
    rng = np.random.default_rng(8)
    with hlsnn.Accelerator(CONFIGS / "t16_gemv.yaml", "csim") as acc, \
            hlsnn.Accelerator(CONFIGS / "t16_gemv.yaml", "emu") as ref:
        x, w, b = rng.normal(size=(10, 64)), rng.normal(size=(8, 64)), rng.normal(size=8)
        acc.load_weights(w)
        acc.gemm(x, w, bias=b)                                 # keep: the samples before the loop
        assert "ReadSampleBeats" in acc.kernel.last_cycles.counts
        y = acc.gemm(x, w, bias=b, relu=True)                  # resident, 2 groups
        counts = acc.kernel.last_cycles.counts
        assert "ReadSampleBeats" not in counts and "WeightWait" not in counts
        assert counts["Steps"] == (245, 1) and counts["SampleWait"] == (109, 109)
        np.testing.assert_array_equal(y, ref.gemm(x, w, bias=b, relu=True))
