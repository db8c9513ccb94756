"""bfp_systolic: K beyond ``max_k`` in passes, with the partial sums on chip (issue 14, "K beyond
one pass").

A call of K > max_k streams, pass after pass, its slice of the samples and of the weight tiles
(``protocol`` docstring, *K passes*); the kernel adds each pass's sums to the partial sums in
its result store. The emulator's rule 1 says the passes change nothing: the sum is exact up to
``spec.k_limit``. The expected values here come from ``emulate_reference``, which sums the
whole K at once in int64 and knows nothing of passes, and from a stream layout written out by
hand."""
from pathlib import Path

import numpy as np
import pytest

import hlsnn
from conftest import ROOT, record_calls as record, stream_path as stream
from hlsnn.engines.bfp_systolic import protocol
from hlsnn.engines.bfp_systolic.emulator import emulate_reference
from hlsnn.engines.bfp_systolic.spec import k_limit, lanes, pass_k, passes
from hlsnn.formats import bfp

CONFIGS = Path(__file__).parent / "configs"
TARGETS = ["emu", pytest.param("csim", marks=pytest.mark.csim), pytest.param("sim", marks=pytest.mark.csim)]
KEEP, RESIDENT = protocol.FLAG_KEEP, protocol.FLAG_RESIDENT


def _params(name):
    return hlsnn.load_config(CONFIGS / f"{name}.yaml").params


@pytest.mark.parametrize("config, want", [
    # (2**(A-1) - 1) >> (2M - 2): t16_row A = 40, M = 16; t2_tiny A = 8, M = 2;
    # bfp8_zcu104 A = 32, M = 8; bfp12 A = 36, M = 12
    ("t16_row", (2 ** 39 - 1) // 2 ** 30), ("t2_tiny", 127 // 4), ("bfp8_zcu104", (2 ** 31 - 1) // 2 ** 14),
    ("bfp12_ultra96v2-stats", (2 ** 35 - 1) // 2 ** 22),
])
def test_k_limit_is_the_longest_exact_sum(config, want):
    path = CONFIGS / f"{config}.yaml" if config.startswith("t") else ROOT / "configs" / "accel" / f"{config}.yaml"
    p = hlsnn.load_config(path).params
    A, M = p["acc_bits"], p["mantissa_bits"]
    assert k_limit(p) == want
    # the worst case (every mantissa -2**(M-1)) of k_limit products fits A signed bits; one more does not
    assert want * 4 ** (M - 1) <= 2 ** (A - 1) - 1 < (want + 1) * 4 ** (M - 1)


def test_passes_cover_k_in_whole_beats():
    p = _params("t16_row")                    # max_k 256, 4 lanes a beat
    assert passes(p, 256) == [(0, 256)]
    assert passes(p, 257) == [(0, 256), (256, 1)]
    for k in (300, 511, 512 + 3):
        qs = passes(p, k)
        assert [k0 for k0, _ in qs] == list(range(0, k, pass_k(p)))
        assert sum(kq for _, kq in qs) == k and all(kq == pass_k(p) for _, kq in qs[:-1])
    # max_k not a multiple of the lanes: a full pass is the whole beats below it
    q = dict(p, max_k=255)
    assert pass_k(q) == 252 and passes(q, 255) == [(0, 255)] and passes(q, 256) == [(0, 252), (252, 4)]


def test_stream_of_k_passes_written_by_hand():
    # t2_tiny: rows 1, 8-bit lanes on a 32-bit stream (4 lanes), row exponents, max_k 16.
    # K = 19 is a pass of 16 and one of 3; batch 1, N = 1, no bias. Per pass: the sample
    # [x[k0..], x_exp] padded to whole beats, the tile's exponent beat, then ceil(Kq/2) steps
    # of [w[2s], w[2s+1]] padded to a beat.
    p = _params("t2_tiny")
    x = np.array([[1, -1, 0, 1, -2, 1, 1, 0, -1, -1, 1, 0, 1, 1, -2, 0, 1, -1, 1]])
    w = np.array([[0, 1, -1, 1, 1, -2, 0, 0, 1, 1, -1, 0, 1, -1, 1, 1, -2, 1, 1]])
    xe, we = np.array([2]), np.array([-3])
    lanes_ = []
    lanes_ += list(x[0, :16]) + [2, 0, 0, 0]                      # pass 0: 16 mantissas, exponent: 5 beats
    lanes_ += [-3, 0, 0, 0]                                       # tile 0's row exponent
    for s in range(8):
        lanes_ += [w[0, 2 * s], w[0, 2 * s + 1], 0, 0]
    lanes_ += [1, -1, 1, 2]                                       # pass 1: x[16..18], exponent
    lanes_ += [-3, 0, 0, 0]
    lanes_ += [-2, 1, 0, 0, 1, 0, 0, 0]                           # w[16], w[17]; w[18], pad
    want = np.array(lanes_, np.int8).view(np.uint8).reshape(-1, 4)
    got = protocol.pack_input(p, x, xe, w, we)
    np.testing.assert_array_equal(got, want)
    assert protocol.n_input_beats(p, 1, 1, 19, False) == len(want) == 18
    back = protocol.unpack_input(p, got, 1, 1, 19, False)
    for a, b in zip(back[:4], (x, xe, w, we)):
        np.testing.assert_array_equal(a, b)
    # resident: the samples of both passes, no weights
    res = protocol.pack_input(p, x, xe, w, we, resident=True)
    np.testing.assert_array_equal(res, np.concatenate([want[:5], want[14:15]]))


def _tensors(p, xm, xe, wm, we):
    M, E = p["mantissa_bits"], p["exponent_bits"]
    row = p["weight_exponent"] == "row"
    xq = bfp.BFPTensor.from_parts(xm, np.asarray(xe).reshape(-1, 1), M, exponent_bits=E, axis=1, block_size=None)
    wq = bfp.BFPTensor.from_parts(wm, np.asarray(we).reshape(-1, 1) if row else np.array([[int(we[0])]]), M,
                                  exponent_bits=E, axis=1 if row else None, block_size=None)
    return xq, wq


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("config", ["t16_row", "t4_truncate", "t9_wide"])
def test_k_passes_equal_the_whole_sum(target, config):
    """Random operands over ragged passes (three; two on t16_row, whose k_limit is 511), and the accumulator's edge: K = k_limit with
    every mantissa -2**(M-1), whose sum is the largest the accumulator must hold exactly."""
    path = CONFIGS / f"{config}.yaml"
    with hlsnn.Accelerator(path, target) as acc:
        p = acc.config.params
        M = p["mantissa_bits"]
        lo, hi = -(1 << (M - 1)), (1 << (M - 1)) - 1
        rng = np.random.default_rng(7)
        kl = k_limit(p)
        k = min(kl, 2 * pass_k(p) + lanes(p) + 1)
        assert len(passes(p, k)) == (2 if config == "t16_row" else 3)
        b, n = p["cols"] + 2, p["rows"] + 1
        xm, wm = rng.integers(lo, hi + 1, (b, k)), rng.integers(lo, hi + 1, (n, k))
        xe, we = rng.integers(-3, 3, b), rng.integers(-3, 3, n)
        if p["weight_exponent"] == "tensor":
            we[:] = we[0]
        bq = bfp.BFPTensor.from_parts(rng.integers(lo, hi + 1, n), np.array([-1]), M,
                                      exponent_bits=p["exponent_bits"], axis=None, block_size=None)
        method = p["output_exponent"]
        y = acc.gemm_bfp(*_tensors(p, xm, xe, wm, we), bq, relu=True)
        ym, ye, sat = emulate_reference(p, xm, xe, wm, we, bq.mantissas, -1, relu=True,
                                        use_stats=method == "stats", stats_k=p["stats_k"])
        np.testing.assert_array_equal(y.mantissas, ym)
        np.testing.assert_array_equal(np.asarray(y.exponents).reshape(-1), ye)
        assert acc.kernel.last_sat_count == sat
        # the edge: K = k_limit products of (-2**(M-1))**2
        xm, wm = np.full((2, kl), lo), np.full((3, kl), lo)
        y = acc.gemm_bfp(*_tensors(p, xm, np.zeros(2, int), wm, np.zeros(3, int)))
        ym, ye, _ = emulate_reference(p, xm, np.zeros(2, int), wm, np.zeros(3, int), use_stats=method == "stats",
                                      stats_k=p["stats_k"])
        np.testing.assert_array_equal(y.mantissas, ym)
        np.testing.assert_array_equal(np.asarray(y.exponents).reshape(-1), ye)
        # the sum, kl * 2**(2M-2), is positive and exact: its leading one sets the exponent
        # (within the exponent field's range)
        emax = 2 ** (p["exponent_bits"] - 1) - 1
        assert ye[0] == min(int(kl * 4 ** (M - 1)).bit_length() - 1 - (M - 2), emax) and (ym > 0).all()


@pytest.mark.parametrize("target", ["emu", pytest.param("csim", marks=pytest.mark.csim)])
def test_resident_weights_over_k_passes(target):
    # t16_row: N = 4 is one tile; K = 300 is a pass of 256 (128 steps) and one of 44 (22
    # steps): 150 steps kept side by side in the store of 256. Streamed weights: per pass one
    # exponent beat and 2 beats a step: (1 + 128 * 2) + (1 + 22 * 2) = 302 beats; the bias
    # [b_exp, b[0..3]] (2 beats of 4 lanes) stays on chip too.
    rng = np.random.default_rng(5)
    with hlsnn.Accelerator(CONFIGS / "t16_row.yaml", target, **stream(target)) as acc, \
            hlsnn.Accelerator(CONFIGS / "t16_row.yaml", "emu") as ref:
        w, b = rng.normal(size=(4, 300)), rng.normal(size=4)
        xs = [rng.normal(size=(5, 300)) for _ in range(3)]
        calls = record(acc)
        acc.load_weights(w)
        y = [acc.gemm(x, w, bias=b) for x in xs]
        assert [f & (KEEP | RESIDENT) for f, _ in calls] == [KEEP, RESIDENT, RESIDENT]
        assert calls[0][1] - calls[1][1] == 302 + 2
        for yi, xi in zip(y, xs):
            np.testing.assert_array_equal(yi, ref.gemm(xi, w, bias=b))
        with pytest.raises(hlsnn.InputError, match="w_depth = 256"):
            acc.load_weights(rng.normal(size=(8, 300)))        # 2 tiles x 150 steps = 300 > 256


def test_k_beyond_the_limit_is_a_clear_error():
    with hlsnn.Accelerator(CONFIGS / "t16_row.yaml", "emu") as acc:
        with pytest.raises(hlsnn.InputError, match=r"K = 512: must be in \[1, k_limit = 511\].*acc_bits = 40"):
            acc.gemm(np.ones((2, 512)), np.ones((3, 512)))


def test_deploy_runs_a_layer_longer_than_max_k(tmp_path):
    """A dense layer of K = 1100 on bfp16_pynq-z2 (max_k 1024) deploys (it was refused), and its
    output is the float layer's to BFP16 precision."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from hlsnn.deploy.config import load_deploy_config
    from hlsnn.deploy.reports.evaluate import open_accelerators
    from hlsnn.deploy.importer.onnx_import import load_onnx
    from hlsnn.deploy.run.runner import Deployment
    k, n = 1100, 12
    rng = np.random.default_rng(0)
    w, bias = rng.normal(0, 0.05, (k, n)).astype(np.float32), rng.normal(0, 0.1, n).astype(np.float32)
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["y"], name="fc")], "d",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])],
                          initializer=[numpy_helper.from_array(w, "w"), numpy_helper.from_array(bias, "b")])
    model = tmp_path / "long.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]), str(model))
    cfgp = tmp_path / "m.yaml"
    cfgp.write_text(f"name: t\nmodel: {model}\nformats: {{b16: {{type: bfp, accel: "
                    f"{ROOT}/configs/accel/bfp16_pynq-z2.yaml}}}}\n")
    cfg = load_deploy_config(cfgp)
    x = rng.uniform(-1, 1, (7, k))
    accs = open_accelerators(cfg, "emu")
    try:
        dep = Deployment(load_onnx(model), cfg.assignments["b16"], cfg.formats, accs)
        dep.calibrate(x)
        got = dep.run(x)
    finally:
        for a in accs.values():
            a.close()
    want = x @ w.astype(np.float64) + bias
    # 16-bit mantissas: each output within a few units of 2**-14 of its sample's largest output
    scale = np.abs(want).max(axis=1, keepdims=True)
    assert np.abs(got - want).max() <= (scale * 2.0 ** -12).max()


@pytest.mark.slow   # compiles a kernel with a planted bug (a g++ run of its own)
@pytest.mark.csim
def test_a_kernel_that_drops_the_partial_sums_fails_compare(tmp_path):
    """The K-pass cases can fail: a kernel that forgets the passes before the last mismatches
    on them, and only on them."""
    from conftest import planted_csim
    from hlsnn import codegen
    from hlsnn.compare import compare
    cfg = hlsnn.load_config(CONFIGS / "t16_row.yaml")
    r = codegen.render(cfg, tmp_path / "hls")
    tgt = planted_csim(cfg, r, "bfp_systolic.cpp", "if (k.partial && valid) v += yr[c][nb];", "")
    rep = compare(cfg, "csim", seed=0, n_random=2, target_obj=tgt)
    bad = {c["case"] for c in rep["results"] if c["mismatches"]}
    assert bad == {"max_magnitude_k_passes", "k_passes"}
