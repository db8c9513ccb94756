"""The network mode of a compiled bfp_systolic model (bfp16, bfp8; issue 31): the BFP rules of
``hlsnn.engines.bfp_systolic.network.lower`` on (mantissa, exponent) pairs.

References: the layer-by-layer compiled network on the emulator (the deployment's own code:
float64 activations, im2col rows quantized by the compiled quantizer, the fast GEMM), the BFP
quantizer of ``hlsnn.formats.bfp`` on float values, and float64 arithmetic where it is exact."""
import numpy as np
import pytest

pytest.importorskip("onnx")
import hlsnn  # noqa: E402
from hlsnn.network import artifact  # noqa: E402
from hlsnn.deploy.lower import program as netmode  # noqa: E402
from hlsnn.engines.bfp_systolic.network import lower as netbfp  # noqa: E402
from hlsnn.deploy import datasets  # noqa: E402
from hlsnn.engines.bfp_systolic.emulator import emulate_reference  # noqa: E402
from hlsnn.errors import InputError  # noqa: E402

from conftest import checked_raw  # noqa: E402
from hlsnn.formats import bfp as bfpfmt  # noqa: E402

CAL = 16


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    from compiled_fixtures import compiled_models
    return compiled_models(tmp_path_factory, "netbfp", calibration_samples=CAL, check_samples=2)


def _x(model, n):
    return datasets.load("digits32" if model == "resnet8_digits32" else "digits", layout="nchw").x_test[:n]


def _same(path, x):
    """The network mode against the layer-by-layer emulator: the logits' bits, the output, and
    every engine layer's output tensor (its pairs dequantized) on the way."""
    with hlsnn.load(path, "emu", network=False) as ref:
        y_ref, env_ref = ref.run(x, keep=True)
    with hlsnn.load(path, "emu", network=True) as net:        # the self-check passes too
        y, env = net.run(x, keep=True)
        assert net.last_kernel_starts == 0 and net.network.engine == "bfp_systolic"
        _, pairs = netmode.run_ints(net.network, netmode.quantize_input(net.network, x), keep=True)
    lt = net.program["output"]["engine_tensor"]
    np.testing.assert_array_equal(env[lt].view(np.uint64), env_ref[lt].view(np.uint64))
    np.testing.assert_array_equal(y, y_ref)
    convs = [op for op in net.network.ops if op.kind == "conv"]
    for op in convs:
        got = netbfp.dequantize(pairs[op.out]).reshape(env_ref[op.out].shape)
        np.testing.assert_array_equal(got.view(np.uint64), env_ref[op.out].view(np.uint64), err_msg=op.name)
    return net


@pytest.mark.parametrize("assignment", ["bfp16", "bfp8"])
def test_network_mode_equals_the_layer_by_layer_emulator(compiled, assignment):
    net = _same(compiled("digits_cnn", assignment), _x("digits_cnn", 40))
    assert [op.kind for op in net.network.ops] == ["conv", "maxpool", "conv", "maxpool", "conv"]


@pytest.mark.parametrize("assignment", ["bfp16", pytest.param("bfp8", marks=pytest.mark.slow)])
def test_resnet8_network_mode_equals_the_layer_by_layer_emulator(compiled, assignment):
    """3x3 and 1x1 stride-2 convolutions, residual Adds with ReLU, the global pool, the dense
    classifier; the Softmax on the host."""
    net = _same(compiled("resnet8_digits32", assignment), _x("resnet8_digits32", 6))
    kinds = [op.kind for op in net.network.ops]
    assert kinds.count("conv") == 10 and kinds.count("add") == 3
    assert [j["op"] for j in net.network.host_after] == ["Softmax"]


def test_float32_words_decode_to_their_values():
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(200) * 2.0 ** rng.integers(-130, 100, 200), [0.0, -0.0, 1.0, -2.5],
                        np.float32([1e-45, -3e-40, 3.4e38])]).astype(np.float32)
    m, e = netbfp.decode_float32(x.view(np.uint32))
    assert np.abs(m).max() < 1 << 24
    np.testing.assert_array_equal(np.ldexp(m.astype(np.float64), e), x.astype(np.float64))


def _pairs(rng, shape, span):
    """Random pairs: 12-bit mantissas (a quarter zero) at per-element exponents within ``span``."""
    m = rng.integers(-(1 << 11), 1 << 11, shape) * (rng.random(shape) > 0.25)
    return m.astype(np.int64), rng.integers(-span, span + 1, shape).astype(np.int64)


@pytest.mark.parametrize("mbits,rounding", [(8, "nearest_even"), (16, "nearest_away"), (8, "truncate")])
def test_conv_rule_against_the_bfp_quantizer(mbits, rounding):
    """Rules bfp_conv and bfp_gemm on pairs of mixed exponents (stride (2, 1), asymmetric padding, two output
    chunks, all-zero patches) against: the float values' im2col rows quantized by
    ``formats.bfp.quantize`` (one exponent per row), an all-zero row given the exponent that
    aligns the chunk's bias with no right shift (``be - max we``, in range here), and the
    engine's rules transcribed literally (``emulate_reference``)."""
    rng = np.random.default_rng(7)
    p = dict(mantissa_bits=mbits, exponent_bits=8, acc_bits=48 if mbits == 16 else 32, rounding=rounding,
             weight_exponent="row", output_exponent="max", rolling_len=4, underflow_bits=4)
    b, c, h, w, z, kh, kw = 2, 3, 6, 5, 6, 3, 2
    pads, (sh, sw) = (1, 0, 2, 1), (2, 1)
    oh, ow = (h + pads[0] + pads[2] - kh) // sh + 1, (w + pads[1] + pads[3] - kw) // sw + 1
    m, e = _pairs(rng, (b, c, h, w), 6)
    m[:, :, :3, :3] = 0                                          # some all-zero patches
    lo, hi = -(1 << (mbits - 1)), (1 << (mbits - 1)) - 1
    chunks = []
    for r0, r1 in [(0, 4), (4, 6)]:
        chunks.append(dict(rows=(r0, r1), wm=rng.integers(lo, hi + 1, (r1 - r0, c, kh, kw)),
                           we=rng.integers(-12, -6, r1 - r0), bm=rng.integers(lo, hi + 1, r1 - r0), be=-4))
    f = dict(c=c, h=h, w=w, z=z, oh=oh, ow=ow, kh=kh, kw=kw, sh=sh, sw=sw, pads=pads, group=1, chunks=chunks,
             relu=True, dense=False)
    gm, ge = netbfp.conv_pairs((m, e), f, p)
    # the reference: float rows, the BFP quantizer, the fast emulator
    v = np.pad(np.ldexp(m.astype(np.float64), e), ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    for i in range(b):
        rows = np.array([v[i, :, y * sh:y * sh + kh, x * sw:x * sw + kw].reshape(-1)
                         for y in range(oh) for x in range(ow)])
        q = bfpfmt.quantize(rows, mbits, axis=-1, exponent_bits=8, rounding=rounding)
        zero = ~q.mantissas.any(axis=1)
        assert zero.any() and not zero.all()
        for ch in chunks:
            r0, r1 = ch["rows"]
            xe = np.asarray(q.exponents, np.int64).reshape(-1).copy()
            xe[zero] = ch["be"] - max(ch["we"])
            ym, ye, _ = emulate_reference(p, q.mantissas, xe, ch["wm"].reshape(r1 - r0, -1), ch["we"], ch["bm"],
                                          ch["be"], relu=True)
            np.testing.assert_array_equal(gm[i, r0:r1].reshape(r1 - r0, -1), ym.T)
            np.testing.assert_array_equal(ge[i, r0:r1].reshape(r1 - r0, -1), np.broadcast_to(ye, (r1 - r0, ye.size)))


@pytest.mark.parametrize("relu,gap", [(False, False), (True, False), (True, True), (False, True)])
def test_add_rule_equals_float64(relu, gap):
    """Rules bfp_add and bfp_global_pool against the host's float64 glue (exact in these ranges; 16 = 2**4 pixels)."""
    rng = np.random.default_rng(3)
    span = 20 if gap else 6                  # a sum (not pooled) must fit the kernel's 26-bit mantissa
    a, b = _pairs(rng, (3, 4, 16), span), _pairs(rng, (3, 4, 16), span)
    fa, fb = netbfp.dequantize(a), netbfp.dequantize(b)
    want = fa + fb
    if relu:
        want = np.maximum(want, 0)
    if gap:
        want = want.mean(axis=2, keepdims=True)
    got = netbfp.add_pairs(a, b, dict(relu=relu, gap=gap, p=4), "add")
    np.testing.assert_array_equal(netbfp.dequantize(got), want)


def test_add_refuses_a_sum_the_float_path_rounds_or_the_kernel_cannot_hold():
    a = (np.array([[[3]]]), np.array([[[60]]]))
    b = (np.array([[[1]]]), np.array([[[0]]]))
    assert netbfp.dequantize(a) + netbfp.dequantize(b) == netbfp.dequantize(a)       # float64 drops the 1
    with pytest.raises(netbfp.NotExact, match="pool: a sum spans more than 53 bits, so the layer-by-layer float64"):
        netbfp.add_pairs(a, b, dict(relu=False, gap=True, p=0), "pool")
    a = (np.array([[[3]]]), np.array([[[24]]]))                       # 3 * 2**24 + 1: 26 bits
    with pytest.raises(netbfp.NotExact, match="add: a sum spans more than 25 bits, so the network kernel keeps"):
        netbfp.add_pairs(a, b, dict(relu=False, gap=False, p=0), "add")
    a = (np.array([[[1]]]), np.array([[[24]]]))                       # 2**24 + 1: 25 bits, exact
    assert netbfp.dequantize(netbfp.add_pairs(a, b, dict(relu=False, gap=False, p=0), "add")) == 2.0 ** 24 + 1


def test_maxpool_rule_picks_the_largest_value():
    rng = np.random.default_rng(4)
    x = _pairs(rng, (2, 3, 5, 6), 8)
    f = dict(kh=2, kw=3, sh=2, sw=2, pads=(0, 1, 1, 0), oh=3, ow=3)
    m, e = netbfp.maxpool_pairs(x, f)
    v = np.pad(netbfp.dequantize(x), ((0, 0), (0, 0), (0, 1), (1, 0)), constant_values=-np.inf)
    want = np.array([[[[v[i, c, y * 2:y * 2 + 2, xx * 2:xx * 2 + 3].max() for xx in range(3)] for y in range(3)]
                      for c in range(3)] for i in range(2)])
    np.testing.assert_array_equal(netbfp.dequantize((m, e)), want)


def test_an_all_zero_patch_gives_the_bias_in_any_batch():
    """Rule bfp_conv, worked by hand: an all-zero patch's exponent is the layer's, ``be - max we =
    -10 - 0``, so the bias alignment is a left shift by ``max we - we`` (0, 3): acc = (77, -5 <<
    3 = -40) at e3 = (-10, -13); the max rule's leading one is max(6 - 10, 5 - 13) = -4, e4 =
    -4 - 6 = -10, and the mantissas at e4 are (77, -40 >> 3 = -5): exactly the bias (77, -5) *
    2**-10. Image 1 (large values everywhere) sharing the batch changes nothing of image 0's, as
    it did when the free exponent was the batch's largest."""
    p = dict(mantissa_bits=8, exponent_bits=8, acc_bits=32, rounding="nearest_even", weight_exponent="row",
             output_exponent="max")
    m = np.zeros((2, 1, 3, 3), np.int64)
    e = np.zeros((2, 1, 3, 3), np.int64)
    m[0, 0, 2, 2], e[0, 0, 2, 2] = 100, -20                 # image 0: a small value, eight zero patches
    m[1], e[1] = 100, 10                                    # image 1: large values everywhere
    f = dict(c=1, h=3, w=3, z=2, oh=3, ow=3, kh=1, kw=1, sh=1, sw=1, pads=(0, 0, 0, 0), group=1, relu=False,
             dense=False, chunks=[dict(rows=(0, 2), wm=np.ones((2, 1, 1, 1), np.int64), we=np.array([0, -3]),
                                       bm=np.array([77, -5]), be=-10)])
    both = netbfp.conv_pairs((m, e), f, p)
    alone = [netbfp.conv_pairs((m[i:i + 1], e[i:i + 1]), f, p) for i in range(2)]
    for k in range(2):
        np.testing.assert_array_equal(both[k], np.concatenate([a[k] for a in alone]))
    ym, ye = both[0][0].reshape(2, -1), both[1][0].reshape(2, -1)
    zero = np.arange(9) != 8
    np.testing.assert_array_equal(ym[:, zero], [[77] * 8, [-5] * 8])
    np.testing.assert_array_equal(ye[:, zero], -10)
    np.testing.assert_array_equal(netbfp.dequantize((ym[:, zero], ye[:, zero])),
                                  np.array([[77.0 / 1024] * 8, [-5.0 / 1024] * 8]))


def test_lower_refuses_what_it_cannot_run(compiled):
    prog, arrays = artifact.read(compiled("digits_cnn", "bfp8"))
    (name, acc), = prog["accels"].items()

    def with_param(**kw):
        a = dict(acc, config=dict(acc["config"], bfp_systolic=dict(acc["config"]["bfp_systolic"], **kw)))
        return dict(prog, accels={name: a})
    for rule in ("rolling", "stats"):
        with pytest.raises(InputError, match=f"by the {rule} rule; the network mode has the max rule only"):
            netmode.lower(with_param(output_exponent=rule), arrays)
    with pytest.raises(InputError, match="rounds stochastically"):
        netmode.lower(with_param(rounding="stochastic"), arrays)
    # a grouped conv runs as the layer path's GEMMs (one per pack of groups); weights that are not
    # one pack's each are refused by name
    grouped = dict(prog, layers=[dict(j, geom=dict(j["geom"], group=2), gp=1, groups=2) if j.get("name") == "conv2"
                                 else j for j in prog["layers"]])
    with pytest.raises(InputError, match=r"layer conv2 \(conv\): weights .* for 2 pack\(s\) of patches.*network=False"):
        netmode.lower(grouped, arrays)
    bad = dict(prog, layers=[dict(j, op="LogSoftmax") if j.get("op") == "MaxPool" else j for j in prog["layers"]])
    with pytest.raises(InputError, match="no integer rule for this host op"):
        netmode.lower(bad, arrays)
    with pytest.raises(InputError, match="uses 2 accelerators"):
        netmode.lower(*artifact.read(compiled("digits_cnn", "twohot+bfp8")))


def test_an_input_not_exact_in_float32(compiled):
    """network=True refuses it; network=None on emu runs that batch layer by layer."""
    path = compiled("digits_cnn", "bfp16")
    x = _x("digits_cnn", 3).astype(np.float64) + 2.0 ** -40        # not a float32 value
    with hlsnn.load(path, "emu", network=True) as net, pytest.raises(netbfp.NotExact, match="exact in float32"):
        net(x)
    with hlsnn.load(path, "emu", network=False) as ref, hlsnn.load(path, "emu") as net:
        assert net.network is not None
        np.testing.assert_array_equal(net(x), ref(x))
        assert net.last_kernel_starts is None


# ------------------------------------------------------------------ the bfp network kernel

@pytest.mark.csim
@pytest.mark.strict_csim           # the kernel is born under the strict rules: it runs on the strict library
# digits_cnn in bfp16 in the slow suite (CI): the same network on the same kernel as its bfp8
# case, 16-bit mantissas by resnet8_digits32's bfp16 case (a strict library of its own each)
@pytest.mark.parametrize("model,assignment,n", [pytest.param("digits_cnn", "bfp16", 5, marks=pytest.mark.slow),
                                                ("digits_cnn", "bfp8", 5), ("resnet8_digits32", "bfp16", 2),
                                                pytest.param("resnet8_digits32", "bfp8", 2, marks=pytest.mark.slow)])
def test_network_kernel_one_start_bit_exact(compiled, model, assignment, n):
    """The strict C-simulation of the bfp network kernel: one call for the batch, the
    layer-by-layer emulator's bits; every bank within its ports; the cycle model's iteration
    counts are the kernel's loop counters."""
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    path = compiled(model, assignment)
    x = _x(model, n)
    with hlsnn.load(path, "emu", network=False) as ref:
        want, y_ref = ref.logits(x), ref(x)
    with hlsnn.load(path, "csim", network=True) as net:      # the self-check runs on the kernel too
        got, y = net.logits(x), net(x)
        assert net.last_kernel_starts == 1 and net.network.engine == "bfp_systolic"
        k = net._kernel
        from hlsnn.engines.bfp_systolic.network.kernel import pool_odd
        odd = {"gap": 16} if pool_odd(net.network) else {}       # AddPoolOdd reads and writes gap (issue 83)
        assert k.strict and checked_raw(k.strict_report) == {"act": 16, "tz": 16, "e3z": 16, **odd}
        assert all(b["sites"] <= b["ports"] for b in k.strict_report["banks"])
        assert k.strict_report["operators"] == [{"loop": "ConvMac", "mul": 128, "div": 0, "dsp": 128}]
        assert k.counters["NetLoad"] == (n * int(np.prod(net.input_shape)), n)
        assert {nm: it for nm, (it, _) in k.counters.items()} == {
            nm: n * v for nm, v in bfpperf.iterations(net.network, k.tables).items()}
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))
    np.testing.assert_array_equal(y, y_ref)


def test_kernel_words_round_trip():
    """The host's packing of the input (float32 words, two per 64-bit word) and unpacking of
    the output elements (54-bit mantissa, 10-bit exponent, both signed)."""
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, 5)) * 2.0 ** rng.integers(-140, 120, (2, 5))).astype(np.float32)
    words = bfpkernel.pack_input(netbfp.decode_float32(x.view(np.uint32)))
    assert words.shape == (2, 3)
    np.testing.assert_array_equal(words.view(np.uint32)[:, :5], x.view(np.uint32))
    m = np.array([[0, 1, -1, (1 << 53) - 1, -(1 << 53)]])
    e = np.array([[0, -512, 511, -3, 7]])
    w = (m.astype(np.uint64) & np.uint64((1 << 54) - 1)) | ((e.astype(np.uint64) & np.uint64(0x3FF)) << np.uint64(54))
    gm, ge = bfpkernel.unpack_output(w)
    np.testing.assert_array_equal(gm, m)
    np.testing.assert_array_equal(ge, e)


def test_perf_of_the_bfp_network_path(compiled, capsys):
    """One kernel start per batch; the totals are the rows' sums; a conv's cycles are the
    static schedule's (hand count: digits_cnn conv1, 8x8 pixels, one input channel whose 3
    columns of taps are unfolded into 3 banks, so 3 taps (ky), 8 outputs in one block: the
    exponent pass, two taps a cycle, 64 * 2, the multiply pass 64 * 3 + 15 + 1 (a pixel's writes
    start 16 iterations after its last product, beside the next pixels' products, the last
    one's after them); fc: one pixel, a 16x2x2 map (one channel block, 2x2 taps), 10 outputs in
    two blocks: 2, then 2 * 4 + 15 + 2)."""
    import json
    from hlsnn.cli import main
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    assert main(["perf", str(compiled("digits_cnn", "bfp16")), "--json", "--batch", "2"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["path"] == "network" and res["kernel_starts"] == 1
    for k in ("kernel_starts", "kernel_us", "host_us", "end_to_end_us", "host_bytes", "dma_bytes"):
        assert res[k] == pytest.approx(sum(r[k] for r in res["layers"])), k
    depth = bfpperf.EXP_DEPTH + bfpperf.MAC_DEPTH
    conv1 = next(r for r in res["layers"] if r["name"] == "conv1")
    assert conv1["kernel_cycles"] == 2 * (64 * 2 + 64 * 3 + 15 + 1 + depth)
    fc = next(r for r in res["layers"] if r["name"] == "fc")
    assert fc["kernel_cycles"] == 2 * (2 + 2 * 4 + 15 + 2 + depth)
    # the C host path: float32 images read, float32 words written; 64-bit elements read, float64 written
    n_in, n_out = 2 * 64, 2 * 10
    assert res["host"]["path"] == "c"
    assert res["host_bytes"] == 8 * n_in + 16 * n_out + 16 * n_out
    assert res["dma_bytes"] == 2 * 8 * (32 + 10 + 1)     # the input words, the elements, the status
    assert res["kernel_resources"]["dsp"] == 128


@pytest.mark.slow
@pytest.mark.csim
@pytest.mark.parametrize("assignment", ["bfp8", "bfp8_z2"])
def test_bfp_network_kernel_compiles_against_both_header_models(compiled, tmp_path, assignment):
    """The rendered kernel and bridge under the fallback ap_types and both ap_axi_sdata.h
    models, the __SYNTHESIS__ rule (tests/synthesis_guards.py), and the kernel stripped of its
    sim-only blocks (what the tool compiles); bfp8_z2: the board-sized kernel (packed DSPs,
    leading-one maps, the residual Adds fused into their convs' write paths)."""
    from test_network_kernel import compiles_against_both_header_models
    compiles_against_both_header_models(compiled("resnet8_digits32", assignment), "bfpkernel", tmp_path)


@pytest.mark.slow
@pytest.mark.csim
def test_bfp_network_kernel_on_the_sim_board_through_pynq(compiled):
    """pynq.allocate, flush, the IP's register writes, ap_start, ap_done, invalidate (strict
    cache checks on): one start per batch, float32 words in (two a word), the elements and the
    status word out, the layer-by-layer emulator's bits."""
    path = compiled("digits_cnn", "bfp16")
    x = _x("digits_cnn", 5)
    with hlsnn.load(path, "emu", network=False) as ref:
        want = ref.logits(x)
    with hlsnn.load(path, "sim") as net:                       # the self-check runs on the board too
        got = net.logits(x)
        board = net._kernel
        assert net.last_kernel_starts == 1 and board.starts == 2 and board.sim.strict_cache
        (regs, _, bursts, beats), = board.model.runs[-1:]
        assert regs["batch"] == 5 and beats == 5 * (64 // 2 + 10 + 1)
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


def test_the_kernel_status_word(compiled):
    """finish_words: the output words are the elements and one status word (nothing per op: an
    all-zero patch takes the descriptor's xz, rule bfp_conv, batch-free); status bit 0 raises NotExact
    naming the image, a clear status gives the elements' pairs."""
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel
    net = netmode.lower(*artifact.read(compiled("digits_cnn", "bfp16")))
    n = 10
    k = bfpkernel.tables(net, *bfpkernel.shape(net.params))
    assert k["out_words"] == n + 1
    out = np.zeros((2, n + 1), np.uint64)
    out[0, :n] = [(5 << 54) | 3] * n                 # 3 * 2^5
    out[1, n] = 1
    with pytest.raises(netbfp.NotExact, match=r"image\(s\) \[1\]: a sum beyond its bound"):
        bfpkernel.finish_words(net, None, out)
    out[1, n] = 0
    m, e = bfpkernel.finish_words(net, None, out)
    assert (m[0] == 3).all() and (e[0] == 5).all() and (m[1] == 0).all()


@pytest.mark.csim
def test_network_kernel_equals_the_network_mode_on_negative_pools(compiled):
    """The kernel against the spec where the layer path has no case: digits_cnn bfp8 with its
    convs' ReLU removed, so the max pools compare negative values, zeros and values of
    different exponents (the kernel's exact compare of rule bfp_pool), and every output is signed."""
    from hlsnn.engines.bfp_systolic.network.kernel import BfpNetKernel
    prog, arrays = artifact.read(compiled("digits_cnn", "bfp8"))
    prog = dict(prog, layers=[dict(j, relu=False) if j["kind"] == "conv" else j for j in prog["layers"]])
    net = netmode.lower(prog, arrays)
    x = _x("digits_cnn", 4)
    xq = netmode.quantize_input(net, x)
    _, env = netmode.run_ints(net, xq, keep=True)
    pooled = env[net.ops[1].out][0]
    assert (pooled < 0).any() and (pooled == 0).any() and (pooled > 0).any()
    got = BfpNetKernel(net).run(xq)
    want = netmode.run_ints(net, xq)
    np.testing.assert_array_equal(netbfp.dequantize(got).reshape(4, -1),
                                  netbfp.dequantize(want).reshape(4, -1))


@pytest.mark.parametrize("rounding", ["nearest_even", "nearest_away", "truncate"])
def test_patch_rounding_is_shift_round_sat(rounding):
    """The network mode's float64 patch rounding against the integer primitive: ties, negative
    values, saturation (left shifts), shifts past the mantissa, zeros."""
    from hlsnn.primitives import shift_round_sat
    rng = np.random.default_rng(8)
    m = np.concatenate([rng.integers(-(1 << 25), 1 << 25, 4000), [0, 1, -1, 3, -3, 5, -5, (1 << 52) + 1]])
    s = np.concatenate([rng.integers(-40, 12, 4000), [3, -1, -1, -1, -1, -1, -1, -40]])
    np.testing.assert_array_equal(netbfp._round_patches(m, s, 16, rounding),
                                  shift_round_sat(m, -s, 16, rounding)[0])


def test_the_kernel_refuses_what_it_cannot_hold(compiled):
    """Before anything is built (``check``, which ``hlsnn.load`` calls on csim and sim): wider
    exponents than its elements hold, mantissas beyond one DSP product, several output chunks."""
    from hlsnn.engines.bfp_systolic.network.kernel import BfpNetKernel
    path = compiled("digits_cnn", "bfp16")
    net = netmode.lower(*artifact.read(path))
    for kw, what in ((dict(exponent_bits=10), "8-bit exponents"), (dict(mantissa_bits=24), "18-bit mantissas")):
        net.params = dict(net.params, **kw)
        with pytest.raises(InputError, match=what):
            BfpNetKernel.check(net)
        net.params = dict(net.params, exponent_bits=8, mantissa_bits=16)
    conv2 = net.ops[2].f
    ch = conv2["chunks"][0]
    conv2["chunks"] = [dict(ch, rows=(0, 4)), dict(ch, rows=(4, conv2["z"]))]
    with pytest.raises(InputError, match=r"conv2: 2 output chunks"):
        BfpNetKernel.check(net)


def test_the_datapath_model_counts_the_kernels_operators():
    """bfpperf.datapath counts what the kernel instantiates, by the LUT rules of its docstring.
    By hand: ``ShiftRoundSat<54, 16>`` (the patch rounding, one per bank): a right shifter of
    57 bits by 0..55 (6 select bits: 3 stages of 57) 171, the rounding (mask, remainder
    compare 29, tie test 19, increment 57) 162, the left shifter of 54 bits by 0..16 (57 +
    69 + 70/2) 161, the select (36), the two saturation compares of 72 bits (72) and the clamp
    (16) 124: 618. ``Greater`` (rule bfp_pool, one per bank): per operand |m| 54, its leading one 54,
    the exponent add 12 and the aligning shifter of 54 bits by 0..53 (3 x 54): 282 each; the
    magnitude compare 27, equality 18, the leading ones' compare 6 and the signs 8: 623; with
    the two 64-bit selects, 687 a bank."""
    from types import SimpleNamespace
    from hlsnn.engines.bfp_systolic.network import perf as bfpperf
    assert bfpperf.srs_luts(54, 16, 63, 16) == 171 + 162 + 161 + 36 + 72 + 16
    net = SimpleNamespace(params=dict(mantissa_bits=16, acc_bits=48))
    rows = [dict(vals=[1]), dict(vals=[2])]            # a max pool's and an Add's descriptors (op codes 1, 2)
    d = bfpperf.datapath(net, dict(pz=8, pc=16, sum_bits=41, pool_bits=62, rows=rows))
    assert d["maxpool"][0] == 16 * (2 * (54 + 54 + 12 + 3 * 54) + 27 + 18 + 6 + 8 + 64)
    # the exponent pass: 32 elements (the source select of 36-bit elements, |m| and its leading
    # one of 26 bits: issue 83, a global pool's sums are elements too; the exponent add, the zero
    # test) and the balanced max tree's 31 compare-selects plus the one with the carried value
    elem = 18 + 26 + 26 + 12 + 5 + 6 + 2 * 4          # and the bank window's two 8-bit compares [c0, c)
    assert d["conv_exp"][0] == 32 * elem + 32 * (6 + 6) + 12 + 2 * 6 + 2 * (32 + 4 * 8)
    # the Add (issue 83: the elements' 26-bit mantissas as they are): per operand |m| 26, its
    # leading one 26, the exponent difference 12 and bound compare 6, the left shifter of 26 bits
    # by 0..53 into 54 (stages of 29, 41 and 54 bits): 194; the three exponent compare-selects
    # 36, the exactness test's two |.| of 54 and their sum 55, the sum 55, ReLU 28, the pool's two
    # adders of 62 bits (run on unreset: one adder on each loop-back) and the two subtractors of
    # 62 bits from their values at the channel's first pixel, and the 36-bit output element's select 18
    assert d["add"][0] == 16 * (2 * (26 + 26 + 12 + 6 + 29 + 41 + 54) + 36 + 2 * 54 + 55 + 55 + 28 + 2 * 62
                                + 2 * 62 + 18)
    # its registers: the two aligned terms (55 bits each), the two sums and their two bases (62
    # each), two exponents (12)
    assert d["add"][1] == 16 * (2 * 55 + 4 * 62 + 2 * 12)
    assert set(d) == {"conv_exp", "conv_mac_banks", "conv_mac_lanes", "maxpool", "add", "axi", "control"}


@pytest.mark.parametrize("model,families", [("resnet8_digits32", {"Add"}), ("digits_cnn", {"MaxPool"})])
def test_the_kernel_renders_and_counts_only_the_op_families_the_model_has(compiled, tmp_path, model, families):
    """Issue 83: a family's function, loop and dispatch are rendered only for a program that has
    such an op, and the resource model counts a family's datapath exactly where the rendered
    C++ has it. ResNet-8 is convs and residual Adds (its global pool is its last Add's), no max
    pool; digits_cnn convs and max pools, no Add (the models' own op lists, asserted above)."""
    from hlsnn.engines.bfp_systolic.network import kernel as bfpkernel, perf as bfpperf
    net = netmode.lower(*artifact.read(compiled(model, "bfp16")))
    _, _, t = bfpkernel.render(net, tmp_path)
    cpp = (tmp_path / "network.cpp").read_text()
    loops = {"MaxPool": "MaxPoolTaps:", "Move": "MovePixels:", "Transpose": "TransposeDiagonals:",
             "Concat": "ConcatPixels:", "Add": "AddPixels:"}
    assert {f for f in loops if f"void {f}(" in cpp} == families
    assert {f for f, label in loops.items() if label in cpp} == families
    logic = bfpperf.datapath(net, t)
    assert ("maxpool" in logic) == ("MaxPool" in families) and ("add" in logic) == ("Add" in families)


@pytest.mark.parametrize("assignment", ["bfp8_z2", "bfp16"])
def test_resnet8_bfp_kernel_fits_the_pynq_z2(compiled, capsys, assignment):
    """Issue 83: ResNet-8's bfp network kernel on the PYNQ-Z2 (XC7Z020: 53,200 LUTs, 106,400
    FFs, 220 DSP48E1, 140 BRAM36) within 90 % of each resource by the resource model."""
    import json
    from hlsnn.cli import main
    assert main(["perf", str(compiled("resnet8_digits32", assignment)), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)["kernel_resources"]
    for k, have in (("lut", 53200), ("ff", 106400), ("dsp", 220), ("bram36", 140)):
        assert r[k] <= 0.9 * have, (k, r[k])
    assert r["fits"]                                  # and within hlsnn.resources.MARGINS (85 % of the LUTs)


@pytest.mark.csim
def test_a_global_pools_sums_held_rounded_to_odd_keep_the_bits(compiled, monkeypatch):
    """Issue 83: the kernel holds a global pool's exact sums rounded to odd at kOddBits
    (``AddPoolOdd``, netbfp rule bfp_round_odd's RoundOdd), so its convs read elements' 26-bit mantissas,
    not 54-bit sums. At K = 9 = M + 1 (the least rule bfp_round_odd's argument allows for bfp8's 8-bit
    mantissas) most of ResNet-8's pooled sums are shortened and the classifier's roundings meet
    the kept bits' ties: the kernel still gives the network mode's bits (its exact sums)."""
    from hlsnn.engines.bfp_systolic.network import reduce as red
    from hlsnn.engines.bfp_systolic.network.kernel import BfpNetKernel, pool_odd
    monkeypatch.setattr(red, "ODD_BITS", 9)
    net = netmode.lower(*artifact.read(compiled("resnet8_digits32", "bfp8")))
    assert pool_odd(net)
    x = _x("resnet8_digits32", 8)
    xq = netmode.quantize_input(net, x)
    want, env = netmode.run_ints(net, xq, keep=True)
    (pool,) = [op for op in net.ops if op.kind == "add" and op.f["gap"]]
    m = np.abs(np.asarray(env[pool.out][0]))
    assert (m >= 1 << 9).mean() > 0.5                 # msb beyond K - 1: the odd rounding drops bits
    got = BfpNetKernel(net).run(xq)
    np.testing.assert_array_equal(netbfp.dequantize(got).reshape(8, -1).view(np.uint64),
                                  netbfp.dequantize(want).reshape(8, -1).view(np.uint64))


@pytest.mark.csim
@pytest.mark.strict_csim
def test_the_board_sized_pynq_z2_kernel_gives_the_emulators_bits(compiled):
    """Issue 83: bfp8net_pynq-z2 sized to the board (16 lanes x 24 (tap, channel) slots over 16
    banks, .slots; lane pairs on one DSP48 each, the Add 4 channels a cycle, leading-one maps, the
    image a word a cycle) on the strict C-simulation and the simulated board, add1 and add2 fused
    into their convs' write paths: the layer-by-layer emulator's bits in one start, every bank
    (a bank's even and odd memories) within its ports, the cycle model's iterations, 192 DSPs doing
    384 products, and every ResNet-8 conv taking its patch exponents from a leading-one map (the
    image load's, a conv's, an Add's or the pool's), so the kernel has no exponent pass."""
    from netfixtures import check_kernel_run
    from hlsnn.engines.bfp_systolic.network.kernel import FIELDS
    path = compiled("resnet8_digits32", "bfp8_z2")
    k_run = check_kernel_run(path, "bfp8", _x("resnet8_digits32", 3), board=True)
    k = k_run._kernel
    assert k.strict and checked_raw(k.strict_report) == {"act": 16, "tz": 16, "e3z": 16, "gap": 16, "pexp": 16,
                                                         "lmap": 16, "omap": 16, "sc": 16}
    assert k.strict_report["operators"] == [{"loop": "ConvMac", "mul": 192, "div": 0, "dsp": 192}]
    rows = {r["comment"].split(":")[0]: dict(zip(FIELDS, r["vals"])) for r in k.tables["rows"]}
    # a block's cycles on the slot schedule: a half of 8 banks read once a cycle, a 3x3 window row a
    # pair of taps and a single: 6 reads a half per 16 channels (9 today); the stem's 3 taps down (3
    # unfolded columns in the banks: no pairs), a 1x1 one read per 16 channels but at least 2 (a
    # block's 16 outputs written 8 a cycle); s1b's at least 8 (its fused Add writes a block's 16 lanes
    # two a cycle), fc one pixel of 64 channels: 4
    assert k.tables["units"] is not None
    assert {n: r["steps"] for n, r in rows.items() if r["op"] == 0} == {
        "stem": 3, "s1a": 6, "s1b": 8, "s2a": 6, "s2s": 2, "s2b": 12, "s3a": 12, "s3s": 2, "s3b": 24, "fc": 4}
    # every conv reads a map (.expmap): the stem the unfolded image load's, s2a, s2s, s3a, s3s an
    # Add's, fc the pool's (AddPoolOdd's gmax), the others a conv's; so no exponent pass is rendered
    convs = {"stem", "s1a", "s1b", "s2a", "s2s", "s2b", "s3a", "s3s", "s3b", "fc"}
    assert k.tables["load_map"] and {n for n, r in rows.items() if r["mr"]} == convs
    assert all(rows[n]["sa"] == 0 for n in convs) and not k.tables["has_exp"]
    # add1 and add2 run in the write paths of s1b and s2b (.fuse: no iterations of their own, the
    # conv writes the sums and their map); add3 (the global pool's) stays an Add
    assert {n: r["fa"] for n, r in rows.items() if r["fa"]} == {"s1b": 2, "s2b": 2}
    assert [n for n, r in rows.items() if r["op"] == 2 and r["n_iter"]] == ["add3"]
    assert {n for n, r in rows.items() if r["mw"]} >= {"s1b", "s2b", "add3"}
    assert "ConvExp" not in k.counters and k.counters["NetLoadTail"][0] == 3      # three images, a tail word each
